//! The `wheel --json` document ([`WheelReport`]): the wheels written, in which layout, the checks
//! that passed and the install commands. Its schema is `docs/wheel.schema.json`.

use serde::{Deserialize, Serialize};

/// The `schema` of a wheel report.
pub const SCHEMA: &str = "splitpkg-wheel";

/// Which installers a wheel is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Layout")]
pub enum WheelLayout {
    /// The core, in both directories.
    Core,
    /// `--out`: the variant in the local version label (`2.11.0+1.magma`), for today's pip and uv.
    LocalLabel,
    /// `--out/variants/`: a PEP 825 variant wheel (`…-magma.whl` with `variant.json`).
    Variant,
    /// `--out/variants/`: the plain wheel beside the variants, the preferred variant's content,
    /// for installers without variant support.
    PlainFallback,
}

/// One wheel written.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WrittenWheel {
    /// The path under `--out` (`variants/…` for the PEP 825 set).
    pub file: String,
    /// Which installers the wheel is for: `core`, `local-label`, `variant` or `plain-fallback`.
    pub layout: WheelLayout,
    /// The distribution name in the wheel's metadata.
    pub distribution: String,
    /// The version in the wheel's metadata (with the local label for `local-label`).
    pub version: String,
    /// The lazy library's variant (`magma`, `nomagma`); none for the core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The variant a plain `pip install` gets.
    pub preferred: bool,
    /// Bytes of the `.whl` file.
    pub bytes: u64,
    /// SHA-256 of the `.whl` file.
    pub sha256: String,
    /// Members of the archive.
    pub members: usize,
}

/// The variant that could not be written, and why (never invented).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MissingWheel {
    /// The variant's name (`nomagma`).
    pub variant: String,
    /// Why it was not written.
    pub why: String,
}

/// Installer commands for the written set (a `--find-links` directory).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Commands")]
pub struct WheelCommands {
    /// `pip install` of the variant a plain install gets, from `--out`.
    pub default: String,
    /// The non-preferred variant, when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
    /// The same as `default`, with uv.
    pub uv_default: String,
    /// The same as `other`, with uv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uv_other: Option<String>,
}

/// What `wheel` wrote: the wheels, their layout, the checks that passed and the install commands.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WheelReport {
    /// Which document this is: `splitpkg-wheel`.
    pub schema: String,
    /// The version of the wheel report's layout.
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
    pub tool: crate::provenance::Tool,
    /// The command that wrote this report (filled by the CLI) and, with `SOURCE_DATE_EPOCH`, the date.
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    /// The input wheel as given on the command line.
    pub input: String,
    /// The output directory (`--out`).
    pub out: String,
    /// The core wheel: everything but the lazy library.
    pub core: WrittenWheel,
    /// The lazy library's wheels in `--out`, one per variant written.
    pub lazy: Vec<WrittenWheel>,
    /// The variants not written, with why.
    pub missing: Vec<MissingWheel>,
    /// Input members whose bytes matched the input RECORD (all of them, or `wheel` refused).
    pub input_record_verified: usize,
    /// Members of the written wheels read back and matched against their own RECORD.
    pub written_record_verified: usize,
    /// The core plus each lazy wheel hold exactly the input's files (the other variant: all but
    /// the lazy library byte-identical).
    pub lossless: bool,
    /// Install commands for the wheels in `--out`.
    pub commands: WheelCommands,
    /// The PEP 825 set in `--out/variants/`.
    pub variants: VariantSet,
}

impl crate::document::Document for WheelReport {
    const SCHEMA: &'static str = SCHEMA;
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "wheel report";
    const SCHEMA_FILE: &'static str = "wheel.schema.json";
    const TITLE: &'static str = "splitpkg wheel";
    const ABOUT: &'static str = "Output of `splitpkg wheel --json`: the core and lazy wheels written from one .whl, in two layouts (local version labels in `out`, the PEP 825 set in `variants.dir`), the checks that passed, and the install commands. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it. Written only after every check passed: a refused or failed split prints an error and writes nothing.";
}

/// The PEP 825 set: variant wheels, the plain fallback, the index file, and the core (linked).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantSet {
    /// The set's directory (`--out/variants`).
    pub dir: String,
    /// The variant metadata format followed (`$schema`): variantlib 0.2.2's, format 0.2.0.
    pub schema: String,
    /// `{name}-{version}-variants.json`.
    pub index: String,
    /// `namespace :: feature`, each variant one value (`torch :: torch_cuda_linalg :: magma`).
    pub property: String,
    /// The wheels in `dir`: the core, the variant wheels and the plain fallback.
    pub wheels: Vec<WrittenWheel>,
    /// uv's variant support (`--preview-features wheel-variants`): the preferred variant by default,
    /// the other by its file; pip (no variant support) takes the plain fallback.
    pub uv_default: String,
    /// uv installing the non-preferred variant, when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uv_other: Option<String>,
    /// pip installing from `dir`: it gets the plain fallback.
    pub pip_default: String,
}

/// The subdirectory of `--out` with the PEP 825 set. It is apart from the local-label wheels
/// because installers compare versions before variants: a `2.11.0+1.magma` next to the variants
/// of `2.11.0` would win over them in uv's variant mode (docs/evidence/wheel-installers/).
pub const VARIANTS_DIR: &str = "variants";
