//! The plan: which files go to which output, how big each is, and what a slim environment saves.
//!
//! Three outputs come out of a confined tree: the **core** (everything that loads at start-up or
//! does not depend on the payload), the **lazy** library with a payload and a no-payload variant,
//! and the **payload** closure (payload libraries in the tree plus whatever only they need), which
//! becomes optional. The plan is the one source of truth for `emit` and `pack`.
//!
//! The JSON form is versioned (`schema_version`) and described by `docs/plan.schema.json`.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::analysis::graph::{NodeKind, Reach};
use crate::analysis::inspect::Inspection;
use crate::analysis::payload::{PayloadEstimate, PayloadSpec};
use crate::analysis::verdict::{
    Analysis, Contract, ImportGroup, LazyLibrary, PayloadFile, PayloadForm, Verdict, Warning,
    Witness,
};
use crate::input::pip::Owner;
use crate::input::{EntryKind, PackageMeta, Resolve, TreeKind};
pub use crate::provenance::Tool;

/// The `schema` of a plan.
pub const SCHEMA_NAME: &str = "splitpkg-plan";
/// The version of the plan's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// What `plan` found: the verdict and its proof, the outputs the tree splits into, and the saving.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// Which document this is: `splitpkg-plan`.
    pub schema: String,
    /// The version of the plan's layout.
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
    pub tool: Tool,
    /// The command that wrote this plan (filled by the CLI; empty from a library caller) and a
    /// date only with `SOURCE_DATE_EPOCH` set, so the same input gives the same bytes.
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    /// What was planned: the tree, wheel or package, and its size.
    pub input: InputSummary,
    /// The options the plan was made with (`--lazy`, `--dep` and the name prefixes they imply).
    pub options: PlanOptions,
    /// Whether the payload can move to an optional output: `confined` (it can; exit 0),
    /// `not-confined` (something loads it at start-up) or `not-present` (nothing to move): exit 1.
    pub verdict: Verdict,
    /// Why, in one sentence each: the evidence the verdict rests on.
    pub reasons: Vec<String>,
    /// For `not-confined`: each load chain from a start-up entry point to payload code.
    pub witnesses: Vec<Witness>,
    /// The library that is opened at the first use of the payload (`--lazy`); null when several
    /// were selected (see `lazy_libraries`) or none was found.
    pub lazy_library: Option<LazyLibrary>,
    /// With several lazy libraries (`--lazy` repeated or a glob), all of them, and `lazy_library`
    /// is null: they share one lazy output. Absent for one. See [`Plan::all_lazy`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lazy_libraries: Vec<LazyLibrary>,
    /// Where the payload is: the files that hold it, the payload libraries another package
    /// provides, and its estimated size.
    pub payload: PayloadSummary,
    /// The packages the tree splits into: core, lazy (with its two variants) and payload.
    pub outputs: Vec<PlanOutput>,
    /// What an environment with the slim variant does not install.
    pub saving: PlanSaving,
    /// Findings that do not change the verdict but a maintainer should read.
    pub warnings: Vec<Warning>,
    /// What a replacement lazy library must provide and may import (`verify-variant` checks it).
    pub contract: ContractSummary,
    /// CUDA device code in the tree; absent when no file has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_code: Option<DeviceCode>,
    /// A pip environment (a directory with `*.dist-info`): who owns the lazy library there and
    /// which variant it is. Absent for every other input, and when `lazy_library` is null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<Installed>,
}

impl crate::document::Document for Plan {
    const SCHEMA: &'static str = SCHEMA_NAME;
    const VERSION: u32 = SCHEMA_VERSION;
    const READS: &'static [u32] = &[SCHEMA_VERSION];
    const WHAT: &'static str = "plan";
    const SCHEMA_FILE: &'static str = "plan.schema.json";
    const TITLE: &'static str = "splitpkg plan";
    const ABOUT: &'static str = "Output of `splitpkg plan --json`. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it.";
}

/// The lazy library as installed by pip: its owners (RECORD), the variant (`splitpkg wheel`'s
/// marker), and what switching to each other variant would save.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Installed {
    /// The installed distributions whose RECORD lists the lazy library's path: one normally, none
    /// when no RECORD does, several when one distribution overwrote another's file.
    pub owners: Vec<Owner>,
    /// The installed variant, when the one owner is a `splitpkg wheel` lazy wheel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Each other variant the marker lists, with what switching to it saves and how; empty unless
    /// the one owner is a `splitpkg wheel` lazy wheel.
    #[serde(default)]
    pub switch: Vec<SwitchTo>,
}

/// Another variant of the installed lazy wheel (from its marker), and what switching to it means.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwitchTo {
    /// That variant's name (`nomagma`).
    pub variant: String,
    /// Bytes the environment loses by switching (negative: it grows).
    pub saves_bytes: i64,
    /// What to give pip or uv (a requirement, or a variant wheel's file name).
    pub install: String,
    /// The command that switches, to run as printed (`analysis::switch`): pinned, from the
    /// directory or index the wheels are in.
    #[serde(default)]
    pub command: String,
    /// True when the environment does not record where the wheels came from and `plan --wheels`
    /// was not given: `command` holds the placeholder `DIR`.
    #[serde(default)]
    pub needs_wheels: bool,
}

impl Installed {
    /// The one distribution that owns the lazy library, if exactly one does.
    pub fn sole_owner(&self) -> Option<&crate::input::pip::Owner> {
        match self.owners.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// The switch commands from `wheels` (`plan --wheels`), in place of the recorded source or
    /// the placeholder. False when there is no switch to complete (no split's lazy wheel).
    pub fn use_wheels(&mut self, wheels: &crate::analysis::switch::Wheels) -> bool {
        let Some(owner) = self.sole_owner().cloned() else {
            return false;
        };
        for t in &mut self.switch {
            let c = crate::analysis::switch::command(&t.install, &owner, Some(wheels));
            (t.command, t.needs_wheels) = (c.line, c.needs_wheels);
        }
        !self.switch.is_empty()
    }
}

/// Who owns `lazy_path` in a pip environment `tree` (a directory with top-level `*.dist-info`).
pub fn installed(
    tree: &crate::input::Tree,
    lazy_path: &str,
) -> crate::error::Result<Option<Installed>> {
    if tree.kind != TreeKind::Directory {
        return Ok(None);
    }
    let dist_infos: Vec<&str> = tree
        .entries
        .iter()
        .filter(|e| {
            matches!(e.kind, EntryKind::Dir)
                && !e.path.contains('/')
                && e.path.ends_with(".dist-info")
        })
        .map(|e| e.path.as_str())
        .collect();
    if dist_infos.is_empty() {
        return Ok(None);
    }
    let owners = crate::input::pip::owners(&tree.source, &dist_infos, lazy_path)?;
    let (owner, marker) = match owners.as_slice() {
        [one] => (Some(one), one.marker.as_ref()),
        _ => (None, None),
    };
    let variant = marker.map(|m| m.variant.clone());
    let switch = owner
        .zip(marker)
        .map(|(owner, m)| {
            let own = m
                .variants
                .iter()
                .find(|v| v.name == m.variant)
                .map(|v| v.library_bytes)
                .unwrap_or_default();
            m.variants
                .iter()
                .filter(|v| v.name != m.variant)
                .map(|v| {
                    let c = crate::analysis::switch::command(&v.install, owner, None);
                    SwitchTo {
                        variant: v.name.clone(),
                        saves_bytes: saves(own, v.library_bytes),
                        install: v.install.clone(),
                        command: c.line,
                        needs_wheels: c.needs_wheels,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(Installed {
        owners,
        variant,
        switch,
    }))
}

/// Bytes saved going from `own` to `other` (negative: it grows), saturating: the sizes come from a
/// marker in the environment, and `u64` sizes do not fit `i64` arithmetic.
fn saves(own: u64, other: u64) -> i64 {
    let d = i128::from(own) - i128::from(other);
    i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
}

/// The tree's CUDA device code and the driver it needs (from `.nv_fatbin` headers).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceCode {
    /// ELF files in the tree with a `.nv_fatbin` section.
    pub libraries: usize,
    /// Bytes of device code as stored in the files: the `.nv_fatbin` sections' sizes added up
    /// (container headers and padding included).
    pub stored: u64,
    /// Bytes of the entries' payloads after decompression, as their headers claim (headers
    /// excluded; nothing is decompressed).
    pub uncompressed: u64,
    /// `stored` as a percentage of the tree's bytes (`input.bytes`), rounded to two decimals.
    pub percent_of_tree: f64,
    /// Compression kinds present, each once, in the order `none`, `lz4`, `zstd`, `unknown`.
    pub compression: Vec<String>,
    /// Minimum Linux driver: the higher of what the CUDA runtime and the compression need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_minimum: Option<String>,
    /// True when the compression alone needs a newer driver than the CUDA runtime does; then
    /// `cuda_floor` is the CUDA release whose driver is needed (`12.4` for zstd).
    pub compression_raises_floor: bool,
    /// The CUDA release whose driver the compression needs (`12.4`); absent unless
    /// `compression_raises_floor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_floor: Option<String>,
    /// Why `driver_minimum` is what it is, in one sentence: the compression's reason when it raises
    /// the floor, else the runtime's (then the compression's after it), or that neither sets one.
    pub why: String,
}

/// The input the plan was made from: where, what kind, its package identity, files and bytes.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InputSummary {
    /// The path as given on the command line.
    pub path: String,
    /// A directory, a wheel, a `.conda` or a `.tar.bz2` package.
    pub kind: TreeKind,
    /// Name and version from the package's own metadata, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageMeta>,
    /// Regular files in the tree.
    pub files: usize,
    /// Of which ELF files.
    pub elf_files: usize,
    /// Bytes of all files (unpacked).
    pub bytes: u64,
    /// Major version of the CUDA runtime the tree NEEDs (`libcudart.so.13` → 13), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<u32>,
}

/// The command-line choices the plan answers: the lazy libraries and the payload.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanOptions {
    /// The `--lazy` argument; several are joined with `, ` and listed in `lazy_patterns`.
    pub lazy: String,
    /// The payload's name: the `--dep` argument, or several joined with `_` (listed in `deps`).
    pub dep: String,
    /// Symbol name prefixes that mark payload code (`magma_`, `magmablas_`, ...).
    pub symbol_prefixes: Vec<String>,
    /// Library name prefixes that mark a payload library (`libmagma`).
    pub library_prefixes: Vec<String>,
    /// Each `--lazy` argument, when there were several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lazy_patterns: Vec<String>,
    /// Each `--dep` argument, when there were several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<String>,
}

/// Where the payload is and how big it is.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PayloadSummary {
    /// Files in the tree that hold payload code or are payload libraries, then the payload
    /// libraries the tree requests but does not contain (`form` `external`).
    pub files: Vec<PayloadFile>,
    /// Payload libraries the tree requests but does not contain (another package provides them).
    pub external: Vec<String>,
    /// Estimated payload bytes inside the tree.
    pub bytes: u64,
    /// Of which device code (`.nv_fatbin` attributed to the payload).
    #[serde(default)]
    pub device_code: u64,
}

/// Which of the split's outputs a package is: `core`, `lazy` or `payload`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Everything but the lazy library and the payload: what every install gets.
    Core,
    /// The lazy library (loaded only at run time), built in a full and a slim variant.
    Lazy,
    /// The payload libraries (`libmagma`): only the full variant needs them.
    Payload,
}

/// One output of the split: its role, its files and their bytes.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Output")]
pub struct PlanOutput {
    /// `core` (loads at start-up), `lazy` (the library opened at first use, in two variants) or
    /// `payload` (payload libraries only the variant with the payload needs).
    pub role: Role,
    /// Tree paths (files, hard links and symlinks), sorted.
    pub files: Vec<String>,
    /// Bytes of these files.
    pub bytes: u64,
    /// The lazy output's two variants, with and without the payload; absent for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<PlanVariant>,
    /// Payload libraries this output needs that are not in the tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<String>,
    /// Stored `.nv_fatbin` bytes in this output's files.
    #[serde(default)]
    pub device_code: u64,
}

/// One variant of the lazy output, with or without the payload, and its lazy library's bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[schemars(rename = "Variant")]
pub struct PlanVariant {
    /// `magma` / `nomagma` (the payload name, with and without `no`).
    pub name: String,
    /// Whether this variant carries the payload.
    pub with_payload: bool,
    /// Bytes of the lazy library in this variant: measured for the one in the tree, estimated otherwise.
    pub bytes: u64,
    /// `bytes` is the size of a real file, not an estimate.
    pub measured: bool,
    /// How `bytes` was found.
    pub how: String,
}

/// What an environment with the slim variant (no payload) does not install.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Saving")]
pub struct PlanSaving {
    /// Bytes a slim environment does not install, out of this tree.
    pub bytes: u64,
    /// `bytes` as a percentage of the tree's bytes.
    pub percent_of_tree: f64,
    /// How `bytes` was found.
    pub how: String,
    /// The saving against the environment a user installs (`analysis::environment`), beside
    /// `percent_of_tree`; set by `splitpkg plan`, absent when nothing is confined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
}

/// Where an environment figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EnvSource {
    /// Download sizes: the input wheel and the locked wheels (`--env-lock`), against the saving's
    /// compressed bytes in the wheel.
    Lock,
    /// The installed environment's regular files on disk, against the installed saving.
    Disk,
    /// Not measured; `how` says why and how to get it.
    NotKnown,
}

/// The saving as a share of the environment a user installs.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    /// How the environment was measured: download sizes from a lock, on disk, or not at all.
    pub source: EnvSource,
    /// The environment's bytes: download (compressed) bytes for `lock`, bytes of its regular
    /// files for `disk`. Absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The saving in the same measure as `bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saving_bytes: Option<u64>,
    /// `saving_bytes` as a percentage of `bytes` (two decimals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Some package's size is not known (see `unknown`): `bytes` is a lower bound and `percent`
    /// an upper bound.
    #[serde(default)]
    pub lower_bound: bool,
    /// Locked packages whose download size the lock does not state for the input's tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// What `bytes` counts: wheels (`lock`, the input's own included) or regular files (`disk`).
    #[serde(default)]
    pub counted: u64,
    /// The lock file, or the environment's root directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How the figure was found, or why it is not known and how to get it.
    pub how: String,
    /// For a wheel input: what a lock is compared with, so `report --env-lock` can give the
    /// figure from the plan alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheel: Option<WheelDownload>,
}

/// A wheel input's side of a download comparison.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WheelDownload {
    /// The distribution and version (the wheel's METADATA).
    pub name: String,
    /// Its version (the wheel's METADATA).
    pub version: String,
    /// Its compatibility tags from the file name (`cp311-cp311-manylinux_2_28_x86_64`); absent
    /// when the file is not named as a wheel is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// The wheel file's size.
    pub file_bytes: u64,
    /// The saving's compressed bytes in the wheel.
    pub saving_bytes: u64,
    /// How `saving_bytes` was found.
    pub how: String,
    /// The command that writes the lock `--env-lock` reads, pinned to this wheel's version,
    /// platform and Python.
    pub lock_command: String,
}

/// The loader contract: what a replacement lazy library must export and what it imports.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContractSummary {
    /// Symbols the core looks up by name (`dlsym`) in the lazy library after opening it.
    pub loader_lookups: Vec<String>,
    /// Symbols other core files import that only the lazy library defines.
    pub required_exports: Vec<String>,
    /// What the lazy library imports, grouped by the file that provides it.
    pub imports: Vec<ImportGroup>,
    /// How many dynamic symbols the lazy library in the tree defines.
    pub exports: usize,
    /// See [`crate::analysis::verdict::Contract::provided_exports`]; absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provided_exports: Vec<String>,
    /// See [`crate::analysis::verdict::Contract::load_registrations`]; absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_registrations: Vec<String>,
    /// See [`crate::analysis::verdict::Contract::load_registrations_not_read`]; absent when they
    /// were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_registrations_not_read: Option<crate::analysis::verdict::NotRead>,
}

impl From<&Contract> for ContractSummary {
    fn from(c: &Contract) -> Self {
        ContractSummary {
            loader_lookups: c.loader_lookups.clone(),
            required_exports: c.required_exports.clone(),
            imports: c.imports.clone(),
            exports: c.exports.len(),
            provided_exports: c.provided_exports.clone(),
            load_registrations: c.load_registrations.clone(),
            load_registrations_not_read: c.load_registrations_not_read.clone(),
        }
    }
}

/// The full and slim variants' names: the payload's (`magma`) and `no` + it (`nomagma`).
pub fn variant_names(spec: &PayloadSpec) -> (String, String) {
    (
        spec.name.clone(),
        crate::analysis::payload::slim_variant(&spec.name),
    )
}

impl Plan {
    /// Every lazy library: the one of `lazy_library`, or the several of `lazy_libraries`.
    pub fn all_lazy(&self) -> Vec<&LazyLibrary> {
        self.lazy_library
            .iter()
            .chain(&self.lazy_libraries)
            .collect()
    }

    /// Their file names, for messages: `libfoo_a.so, libfoo_b.so` (empty without one).
    pub fn lazy_file_names(&self) -> String {
        self.all_lazy()
            .iter()
            .map(|l| crate::input::Tree::file_name(&l.path))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The plan of an inspected tree: its outputs, their sizes and the saving, from the analysis and
/// the lazy libraries selected.
pub fn make_plan<S: AsRef<str>>(ins: &Inspection, analysis: &Analysis, lazy: &[S]) -> Plan {
    let tree = &ins.tree;
    let total = tree.total_file_bytes();

    let external: Vec<String> = analysis
        .payload
        .iter()
        .filter(|p| p.form == PayloadForm::External)
        .map(|p| p.path.clone())
        .collect();
    let payload_bytes: u64 = analysis
        .payload
        .iter()
        .filter_map(|p| p.estimate.as_ref().map(|e| e.bytes))
        .sum();

    let (outputs, saving) =
        if analysis.verdict == Verdict::Confined && !analysis.lazy_file_ids.is_empty() {
            split_outputs(ins, analysis, &external, total)
        } else {
            let saving = PlanSaving {
                bytes: 0,
                percent_of_tree: 0.0,
                how: "no split: the payload is not confined".into(),
                environment: None,
            };
            (Vec::new(), saving)
        };

    Plan {
        schema: SCHEMA_NAME.to_string(),
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        stamp: crate::provenance::Stamp::default(),
        input: input_summary(ins, total),
        options: plan_options(ins, lazy),
        verdict: analysis.verdict,
        reasons: analysis.reasons.clone(),
        witnesses: analysis.witnesses.clone(),
        lazy_library: if analysis.lazy_libraries.len() == 1 {
            analysis.lazy_libraries.first().cloned()
        } else {
            None
        },
        lazy_libraries: if analysis.lazy_libraries.len() > 1 {
            analysis.lazy_libraries.clone()
        } else {
            Vec::new()
        },
        payload: PayloadSummary {
            files: analysis.payload.clone(),
            external,
            bytes: payload_bytes,
            device_code: payload_device_code(analysis),
        },
        outputs,
        saving,
        warnings: analysis
            .warnings
            .iter()
            .cloned()
            .chain(outside_symlinks(tree))
            .collect(),
        contract: ContractSummary::from(&analysis.contract),
        device_code: device_code(ins, total),
        installed: None,
    }
}

/// The tree the plan was made from: where, what kind, how many files and bytes.
fn input_summary(ins: &Inspection, total: u64) -> InputSummary {
    let tree = &ins.tree;
    InputSummary {
        path: tree.source.display().to_string(),
        kind: tree.kind,
        package: tree.package.clone(),
        files: tree
            .entries
            .iter()
            .filter(|e| !matches!(e.kind, EntryKind::Dir))
            .count(),
        elf_files: ins.files.len(),
        bytes: total,
        cuda_runtime: crate::fatbin::cuda_major_from_needed(
            ins.files
                .iter()
                .flat_map(|f| f.elf.needed.iter().map(String::as_str)),
        )
        .map(|r| r.0),
    }
}

/// The command-line choices the plan answers (`--lazy`, `--dep` and the payload's prefixes).
fn plan_options<S: AsRef<str>>(ins: &Inspection, lazy: &[S]) -> PlanOptions {
    PlanOptions {
        lazy: lazy
            .iter()
            .map(|l| l.as_ref())
            .collect::<Vec<_>>()
            .join(", "),
        dep: ins.spec.name.clone(),
        symbol_prefixes: ins.spec.symbol_prefixes.clone(),
        library_prefixes: ins.spec.dso_prefixes.clone(),
        lazy_patterns: if lazy.len() > 1 {
            lazy.iter().map(|l| l.as_ref().to_string()).collect()
        } else {
            Vec::new()
        },
        deps: ins.spec.components.clone(),
    }
}

/// The paths of one output and their bytes, while the tree's entries are assigned.
#[derive(Default)]
struct Bucket {
    files: Vec<String>,
    bytes: u64,
    /// Stored `.nv_fatbin` bytes in the bucket's files.
    device_code: u64,
}

/// The three outputs of a confined tree and what a slim environment saves.
fn split_outputs(
    ins: &Inspection,
    analysis: &Analysis,
    external: &[String],
    total: u64,
) -> (Vec<PlanOutput>, PlanSaving) {
    let lazy_files = &analysis.lazy_file_ids;
    let payload_files = payload_closure(ins, analysis);
    let mut buckets = assign_entries(ins, lazy_files, &payload_files);
    let lazy = LazyVariants::of(ins, lazy_files);
    let mut outputs = Vec::new();
    for role in [Role::Core, Role::Lazy, Role::Payload] {
        let Bucket {
            files,
            bytes,
            device_code,
        } = buckets.remove(&role).unwrap_or_default();
        if role == Role::Payload && files.is_empty() && external.is_empty() {
            continue;
        }
        outputs.push(PlanOutput {
            role,
            files,
            bytes,
            variants: if role == Role::Lazy {
                lazy.variants.clone()
            } else {
                Vec::new()
            },
            external: if role == Role::Payload {
                external.to_vec()
            } else {
                Vec::new()
            },
            device_code,
        });
    }
    let saving = slim_saving(ins, &outputs, &lazy, external, total);
    (outputs, saving)
}

/// Tree file indices of the payload: payload libraries and what only they need.
fn payload_closure(ins: &Inspection, analysis: &Analysis) -> HashSet<usize> {
    let g = &ins.graph;
    let payload_lib_nodes: HashSet<usize> = analysis
        .payload_file_ids
        .iter()
        .filter(|&&f| ins.files[f].payload.library)
        .filter_map(|&f| g.node_of_file(f))
        .chain(
            g.nodes
                .iter()
                .filter(|n| n.kind == NodeKind::External && ins.spec.is_payload_library(&n.name))
                .map(|n| n.id),
        )
        .collect();
    let needed_by_rest = reach_avoiding(ins, &payload_lib_nodes);
    let mut payload_files: HashSet<usize> = HashSet::new();
    let mut q: VecDeque<usize> = payload_lib_nodes.iter().copied().collect();
    let mut seen: HashSet<usize> = payload_lib_nodes.clone();
    while let Some(n) = q.pop_front() {
        if let Some(f) = g.nodes[n].file {
            payload_files.insert(f);
        }
        for e in g.out_edges(n) {
            if !needed_by_rest.contains(&e.to) && seen.insert(e.to) {
                q.push_back(e.to);
            }
        }
    }
    payload_files
}

/// Assign every tree entry to an output; symlinks and hard links follow what they point at.
fn assign_entries(
    ins: &Inspection,
    lazy_files: &[usize],
    payload_files: &HashSet<usize>,
) -> BTreeMap<Role, Bucket> {
    let tree = &ins.tree;
    let device_code_of: BTreeMap<usize, u64> = ins
        .files
        .iter()
        .filter_map(|f| {
            tree.index_of(&f.path)
                .map(|e| (e, f.fatbin.as_ref().map(|s| s.section_size).unwrap_or(0)))
        })
        .collect();
    let entry_of_file: BTreeMap<usize, usize> = ins
        .files
        .iter()
        .enumerate()
        .filter_map(|(i, f)| tree.index_of(&f.path).map(|e| (e, i)))
        .collect();
    let mut buckets: BTreeMap<Role, Bucket> = BTreeMap::new();
    for (idx, e) in tree.entries.iter().enumerate() {
        let (target_entry, own_bytes) = match &e.kind {
            EntryKind::Dir => continue,
            EntryKind::File {
                size, hardlink_of, ..
            } => (
                hardlink_of.unwrap_or(idx),
                if hardlink_of.is_some() { 0 } else { *size },
            ),
            EntryKind::Symlink { .. } => match tree.resolve(&e.path) {
                Resolve::File(t) => (t, 0),
                _ => (idx, 0),
            },
        };
        let role = match entry_of_file.get(&target_entry) {
            Some(f) if lazy_files.contains(f) => Role::Lazy,
            Some(f) if payload_files.contains(f) => Role::Payload,
            _ => Role::Core,
        };
        let b = buckets.entry(role).or_default();
        b.files.push(e.path.clone());
        b.bytes += own_bytes;
        if own_bytes > 0 {
            b.device_code += device_code_of.get(&idx).copied().unwrap_or(0);
        }
    }
    buckets
}

/// The static payload estimate of a file that links the payload in (none for a payload library).
fn static_estimate(ins: &Inspection, f: usize) -> Option<&PayloadEstimate> {
    ins.files[f]
        .payload
        .estimate
        .as_ref()
        .filter(|_| !ins.files[f].payload.library)
}

/// The variants of the one shared lazy output: the sums over its libraries.
struct LazyVariants {
    variants: Vec<PlanVariant>,
    /// Bytes of the lazy libraries as in the tree.
    size: u64,
    /// Their estimated bytes without the payload.
    without_payload: u64,
}

impl LazyVariants {
    fn of(ins: &Inspection, lazy_files: &[usize]) -> Self {
        let size: u64 = lazy_files.iter().map(|&f| ins.files[f].size).sum();
        let static_bytes: u64 = lazy_files
            .iter()
            .filter_map(|&f| static_estimate(ins, f))
            .map(|e| e.bytes)
            .sum();
        let (with, without) = variant_names(&ins.spec);
        let without_payload: u64 = lazy_files
            .iter()
            .map(|&f| {
                ins.files[f]
                    .size
                    .saturating_sub(static_estimate(ins, f).map(|e| e.bytes).unwrap_or(0))
            })
            .sum();
        let several = lazy_files.len() > 1;
        let variants = vec![
            PlanVariant {
                name: with.clone(),
                with_payload: true,
                bytes: size,
                measured: true,
                how: if several {
                    format!("the {} libraries in this tree", lazy_files.len())
                } else {
                    "the library in this tree".into()
                },
            },
            PlanVariant {
                name: without.clone(),
                with_payload: false,
                bytes: without_payload,
                measured: false,
                how: slim_variant_how(ins, lazy_files, static_bytes),
            },
        ];
        LazyVariants {
            variants,
            size,
            without_payload,
        }
    }
}

/// How the variant without the payload was estimated.
fn slim_variant_how(ins: &Inspection, lazy_files: &[usize], static_bytes: u64) -> String {
    let several = lazy_files.len() > 1;
    match (several, static_estimate(ins, lazy_files[0])) {
        (false, Some(e)) => {
            format!(
                "this library minus the estimated static {} ({} bytes: {})",
                ins.spec.name, e.bytes, e.method
            )
        }
        (false, None) => format!(
            "same code without the {} dependency (it links {} dynamically)",
            ins.spec.name, ins.spec.name
        ),
        (true, _) if static_bytes > 0 => {
            format!(
                "these libraries minus the estimated static {} ({static_bytes} bytes)",
                ins.spec.name
            )
        }
        (true, _) => format!(
            "same code without the {} dependency (they link {} dynamically)",
            ins.spec.name, ins.spec.name
        ),
    }
}

/// What a slim environment does not install: the payload output and the payload's share of the
/// lazy library.
fn slim_saving(
    ins: &Inspection,
    outputs: &[PlanOutput],
    lazy: &LazyVariants,
    external: &[String],
    total: u64,
) -> PlanSaving {
    let payload_out = outputs
        .iter()
        .find(|o| o.role == Role::Payload)
        .map(|o| o.bytes)
        .unwrap_or(0);
    let lazy_delta = lazy.size - lazy.without_payload;
    let bytes = payload_out + lazy_delta;
    PlanSaving {
        bytes,
        percent_of_tree: if total > 0 {
            (bytes as f64 * 10000.0 / total as f64).round() / 100.0
        } else {
            0.0
        },
        how: format!(
            "{} payload-output bytes + {} estimated {} bytes inside the lazy library{}",
            payload_out,
            lazy_delta,
            ins.spec.name,
            if external.is_empty() {
                String::new()
            } else {
                format!(
                    "; plus the external package(s) providing {}",
                    external.join(", ")
                )
            }
        ),
        environment: None,
    }
}

/// Symlinks pointing outside the tree: not followed, and refused by `pack` unless allowed.
fn outside_symlinks(tree: &crate::input::Tree) -> Vec<Warning> {
    tree.outside_symlinks()
        .map(|(path, target)| Warning {
            file: path.to_string(),
            what: format!("symlink to {target} points outside the tree"),
            consequence: "not followed; `splitpkg pack` refuses it unless --allow-absolute-symlinks (docs/security.md)".into(),
            examples: Vec::new(),
            kind: None,
        })
        .collect()
}

/// Device code attributed to the payload: the `.nv_fatbin` part of each estimate (all of it for
/// payload libraries).
fn payload_device_code(analysis: &Analysis) -> u64 {
    analysis
        .payload
        .iter()
        .filter_map(|p| p.estimate.as_ref())
        .flat_map(|e| e.parts.iter())
        .filter(|p| p.what == crate::analysis::payload::PartKind::NvFatbin)
        .map(|p| p.bytes)
        .sum()
}

fn device_code(ins: &Inspection, tree_bytes: u64) -> Option<DeviceCode> {
    use crate::fatbin;
    let summaries: Vec<&fatbin::FatbinSummary> =
        ins.files.iter().filter_map(|f| f.fatbin.as_ref()).collect();
    if summaries.is_empty() {
        return None;
    }
    let total = fatbin::total(summaries.iter().copied());
    let kinds: Vec<fatbin::Compression> = total.compression.iter().map(|c| c.compression).collect();
    let runtime = fatbin::cuda_major_from_needed(
        ins.files
            .iter()
            .flat_map(|f| f.elf.needed.iter().map(String::as_str)),
    );
    let floor = fatbin::driver_floor(
        runtime.as_ref().map(|r| r.0),
        fatbin::compression_floor(kinds.iter().copied()),
    );
    let why = match (&floor.runtime, &floor.compression) {
        (_, Some(c)) if floor.compression_raises_floor => c.why.clone(),
        (Some(r), Some(c)) => format!(
            "{}; {} — the runtime's floor is already higher",
            r.why, c.why
        ),
        (Some(r), None) => r.why.clone(),
        (None, Some(c)) => c.why.clone(),
        (None, None) => "no CUDA runtime NEEDed and no compressed device code".into(),
    };
    Some(DeviceCode {
        libraries: summaries.len(),
        stored: total.section_size,
        uncompressed: total.uncompressed,
        percent_of_tree: if tree_bytes > 0 {
            (total.section_size as f64 * 10000.0 / tree_bytes as f64).round() / 100.0
        } else {
            0.0
        },
        compression: kinds.iter().map(|k| k.label().to_string()).collect(),
        driver_minimum: floor.minimum.clone(),
        compression_raises_floor: floor.compression_raises_floor,
        cuda_floor: floor
            .compression
            .as_ref()
            .filter(|_| floor.compression_raises_floor)
            .map(|c| c.cuda.clone()),
        why,
    })
}

/// Nodes reachable from the roots over every edge without entering `avoid`.
fn reach_avoiding(ins: &Inspection, avoid: &HashSet<usize>) -> HashSet<usize> {
    let g = &ins.graph;
    let mut seen: HashSet<usize> = g
        .nodes
        .iter()
        .filter(|n| n.root.is_some() && !avoid.contains(&n.id))
        .map(|n| n.id)
        .collect();
    let mut q: VecDeque<usize> = seen.iter().copied().collect();
    while let Some(n) = q.pop_front() {
        for e in g.out_edges(n) {
            if !avoid.contains(&e.to) && seen.insert(e.to) {
                q.push_back(e.to);
            }
        }
    }
    // Files nothing reaches at all (e.g. unreferenced payload libraries) are not "needed by the rest".
    seen.retain(|&n| g.nodes[n].reach != Reach::Unreached || g.nodes[n].root.is_some());
    seen
}

#[cfg(test)]
mod tests {
    //! Which file goes to which output, on small gcc-built trees (see [`crate::analysis::testkit`]).
    use std::collections::{BTreeMap, BTreeSet};
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::analysis::testkit::{
        LAZY, Scratch, conda_layout, conda_prefix, loader, providers_layout, wheel_layout,
    };

    fn output(plan: &Plan, role: Role) -> Option<&PlanOutput> {
        plan.outputs.iter().find(|o| o.role == role)
    }

    fn files(plan: &Plan, role: Role) -> BTreeSet<&str> {
        output(plan, role)
            .map(|o| o.files.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Every non-directory path of the tree on disk, and the bytes of each group of paths counted
    /// once per inode (symlinks count nothing), for checking the buckets against the file system.
    fn on_disk(s: &Scratch) -> (BTreeSet<String>, impl Fn(&BTreeSet<&str>) -> u64) {
        let root = s.tree();
        let mut all = BTreeSet::new();
        for e in walkdir::WalkDir::new(&root) {
            let e = e.unwrap();
            if !e.file_type().is_dir() {
                all.insert(
                    e.path()
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
        let bytes = move |paths: &BTreeSet<&str>| {
            let mut seen = BTreeMap::new();
            for p in paths {
                let m = std::fs::symlink_metadata(root.join(p)).unwrap();
                if m.file_type().is_file() {
                    seen.insert(m.ino(), m.len());
                }
            }
            seen.values().sum()
        };
        (all, bytes)
    }

    #[test]
    fn every_path_lands_in_exactly_one_output_and_links_follow_their_targets() {
        let s = conda_prefix();
        let plan = s.plan();
        assert_eq!(plan.verdict, Verdict::Confined, "{:#?}", plan.witnesses);
        let roles: Vec<Role> = plan.outputs.iter().map(|o| o.role).collect();
        assert_eq!(roles, vec![Role::Core, Role::Lazy, Role::Payload]);
        assert_eq!(
            files(&plan, Role::Lazy),
            BTreeSet::from(["lib/libtorch_cuda_linalg.so", "lib/liblinalg-alias.so"])
        );
        assert_eq!(
            files(&plan, Role::Payload),
            BTreeSet::from([
                "lib/helper-link.so",
                "lib/libmagma.so",
                "lib/libmagma.so.2",
                "lib/libmagma.so.2.8.0",
                "lib/libmagma_helper.so",
                "lib/libmagma_sparse.so",
            ]),
            "payload libraries, their links, and what only they need"
        );
        assert_eq!(
            files(&plan, Role::Core),
            BTreeSet::from([
                "lib/dangling.so",
                "lib/libtorch_cpu.so",
                "lib/libtorch_cuda.so",
                "lib/python3.11/site-packages/torch/version.txt",
            ]),
            "libtorch_cpu.so stays in core although libmagma needs it too"
        );
        let (all, bytes) = on_disk(&s);
        let mut placed: Vec<&str> = plan
            .outputs
            .iter()
            .flat_map(|o| o.files.iter().map(String::as_str))
            .collect();
        placed.sort();
        assert_eq!(
            placed,
            all.iter().map(String::as_str).collect::<Vec<_>>(),
            "each tree path once"
        );
        for o in &plan.outputs {
            let mut sorted = o.files.clone();
            sorted.sort();
            assert_eq!(o.files, sorted, "{:?} files are sorted", o.role);
            assert_eq!(
                o.bytes,
                bytes(&files(&plan, o.role)),
                "{:?}: a hard-linked file counts once, a symlink not at all",
                o.role
            );
        }
        assert_eq!(
            plan.input.bytes,
            plan.outputs.iter().map(|o| o.bytes).sum::<u64>()
        );
    }

    #[test]
    fn shared_payload_saving_is_the_payload_output_and_variants_are_named_after_the_dep() {
        let s = conda_prefix();
        let plan = s.plan();
        let lazy = output(&plan, Role::Lazy).unwrap();
        let size = s.size("lib/libtorch_cuda_linalg.so");
        let v: Vec<(&str, bool, u64, bool)> = lazy
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.with_payload, v.bytes, v.measured))
            .collect();
        assert_eq!(
            v,
            vec![("magma", true, size, true), ("nomagma", false, size, false)],
            "linked dynamically: nomagma is the same size"
        );
        assert!(
            lazy.variants[1].how.contains("links magma dynamically"),
            "{}",
            lazy.variants[1].how
        );
        let payload = output(&plan, Role::Payload).unwrap();
        assert_eq!(plan.saving.bytes, payload.bytes);
        let expected = (payload.bytes as f64 * 10000.0 / plan.input.bytes as f64).round() / 100.0;
        assert_eq!(plan.saving.percent_of_tree, expected);
        assert!(payload.external.is_empty());
        assert!(lazy.external.is_empty() && lazy.device_code == 0);
        assert_eq!(plan.options.dep, "magma");
        assert_eq!(plan.options.symbol_prefixes, vec!["magma_", "magmablas_"]);
        assert_eq!(plan.options.library_prefixes, vec!["libmagma"]);
    }

    #[test]
    fn static_payload_has_no_payload_output_and_nomagma_is_the_estimate_less() {
        let s = wheel_layout();
        let plan = s.plan();
        assert_eq!(plan.verdict, Verdict::Confined, "{:#?}", plan.witnesses);
        assert!(
            output(&plan, Role::Payload).is_none(),
            "the payload is inside the lazy library"
        );
        let estimate = plan.payload.files[0].estimate.as_ref().unwrap().bytes;
        assert_eq!(plan.payload.bytes, estimate);
        let size = s.size("torch/lib/libtorch_cuda_linalg.so");
        let lazy = output(&plan, Role::Lazy).unwrap();
        assert_eq!(
            (lazy.variants[1].bytes, lazy.variants[1].measured),
            (size - estimate, false)
        );
        assert!(lazy.variants[1].how.starts_with(&format!(
            "this library minus the estimated static magma ({estimate} bytes"
        )));
        assert_eq!(plan.saving.bytes, estimate);
        assert_eq!(
            files(&plan, Role::Core),
            BTreeSet::from(["torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so"])
        );
    }

    #[test]
    fn an_unconfined_tree_gets_no_outputs() {
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda.so",
            &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
            &["lib/libtorch_cpu.so", "lib/libmagma.so.2"],
        );
        let plan = s.plan();
        assert_eq!(plan.verdict, Verdict::NotConfined);
        assert!(plan.outputs.is_empty());
        assert_eq!(
            (plan.saving.bytes, plan.saving.how.as_str()),
            (0, "no split: the payload is not confined")
        );
        // The facts are still all there.
        assert_eq!(plan.payload.files.len(), 1);
        assert_eq!(plan.input.elf_files, 4);
    }

    #[test]
    fn a_payload_library_from_another_package_is_listed_as_external() {
        let s = conda_layout();
        std::fs::remove_file(s.tree().join("lib/libmagma.so.2")).unwrap();
        let plan = s.plan();
        assert_eq!(plan.verdict, Verdict::Confined, "{:#?}", plan.witnesses);
        assert_eq!(plan.payload.external, vec!["libmagma.so.2"]);
        let payload =
            output(&plan, Role::Payload).expect("a payload output for the external library");
        assert!(payload.files.is_empty() && payload.bytes == 0);
        assert_eq!(payload.external, vec!["libmagma.so.2"]);
        assert!(
            plan.saving
                .how
                .ends_with("; plus the external package(s) providing libmagma.so.2"),
            "{}",
            plan.saving.how
        );
    }

    #[test]
    fn another_component_names_its_own_variants() {
        assert_eq!(
            variant_names(&PayloadSpec::for_dep("Foo", &[])),
            ("foo".to_string(), "nofoo".to_string())
        );
        let mut s = Scratch::new();
        s.lib(
            "lib/libfoo.so.1",
            "int foo_solve(int x) { return x; }\n",
            &[],
        )
        .lib(
            "lib/libtorch_cuda_linalg.so",
            "extern int foo_solve(int);\nint linalg_entry(int x) { return foo_solve(x); }\n",
            &["lib/libfoo.so.1"],
        )
        .lib(
            "lib/libtorch_cuda.so",
            &loader("call", LAZY, "linalg_entry"),
            &[],
        );
        let ins = s.inspect("foo");
        let a = crate::analysis::verdict::analyse(&ins, &[LAZY]);
        let plan = make_plan(&ins, &a, &[LAZY]);
        assert_eq!(plan.verdict, Verdict::Confined, "{:#?}", plan.witnesses);
        let names: Vec<&str> = output(&plan, Role::Lazy)
            .unwrap()
            .variants
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(names, vec!["foo", "nofoo"]);
        assert_eq!(
            files(&plan, Role::Payload),
            BTreeSet::from(["lib/libfoo.so.1"])
        );
        assert_eq!(
            (plan.options.dep.as_str(), plan.options.lazy.as_str()),
            ("foo", LAZY)
        );
        assert_eq!(plan.options.symbol_prefixes, vec!["foo_"]);
        // The same tree read for MAGMA has nothing to split.
        assert_eq!(Scratch::plan(&s).verdict, Verdict::NotPresent);
    }

    #[test]
    fn the_plan_round_trips_through_its_json() {
        let plan = conda_prefix().plan();
        let text = serde_json::to_string(&plan).unwrap();
        let back: Plan = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(
            (back.schema.as_str(), back.schema_version),
            (SCHEMA_NAME, SCHEMA_VERSION)
        );
    }

    #[test]
    fn several_lazy_libraries_share_one_lazy_output() {
        let s = providers_layout();
        let ins = s.inspect("heavy");
        let glob = ["libfoo_providers_*.so"];
        let plan = make_plan(&ins, &crate::analysis::verdict::analyse(&ins, &glob), &glob);
        assert_eq!(plan.verdict, Verdict::Confined, "{:#?}", plan.witnesses);
        let roles: Vec<Role> = plan.outputs.iter().map(|o| o.role).collect();
        assert_eq!(roles, vec![Role::Core, Role::Lazy, Role::Payload]);
        assert_eq!(
            files(&plan, Role::Lazy),
            BTreeSet::from(["lib/libfoo_providers_a.so", "lib/libfoo_providers_b.so"])
        );
        assert_eq!(
            files(&plan, Role::Payload),
            BTreeSet::from(["lib/libheavy.so.1"]),
            "shared by both, needed by neither core file"
        );
        assert_eq!(
            files(&plan, Role::Core),
            BTreeSet::from(["bin/foo_run", "lib/libfoo_core.so"])
        );
        // One lazy output, its variants the sums over both libraries.
        let both = s.size("lib/libfoo_providers_a.so") + s.size("lib/libfoo_providers_b.so");
        let lazy = output(&plan, Role::Lazy).unwrap();
        let v: Vec<(&str, u64, &str)> = lazy
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.bytes, v.how.as_str()))
            .collect();
        assert_eq!(
            v,
            vec![
                ("heavy", both, "the 2 libraries in this tree"),
                (
                    "noheavy",
                    both,
                    "same code without the heavy dependency (they link heavy dynamically)"
                )
            ]
        );
        assert_eq!(plan.saving.bytes, s.size("lib/libheavy.so.1"));
        // JSON: no single lazy library, the list instead; one pattern stays a string.
        assert!(plan.lazy_library.is_none());
        assert_eq!(plan.all_lazy().len(), 2);
        let json = serde_json::to_value(&plan).unwrap();
        assert!(
            json["lazy_library"].is_null() && json["lazy_libraries"].as_array().unwrap().len() == 2
        );
        assert_eq!(json["options"]["lazy"], "libfoo_providers_*.so");
        assert!(
            json["options"].get("lazy_patterns").is_none() && json["options"].get("deps").is_none()
        );
        let back: Plan = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        // Two names: `lazy` joins them and the list says which.
        let names = ["libfoo_providers_a.so", "libfoo_providers_b.so"];
        let plan2 = make_plan(
            &ins,
            &crate::analysis::verdict::analyse(&ins, &names),
            &names,
        );
        assert_eq!(
            plan2.options.lazy,
            "libfoo_providers_a.so, libfoo_providers_b.so"
        );
        assert_eq!(plan2.options.lazy_patterns, names);
        assert_eq!(
            plan2
                .outputs
                .iter()
                .map(|o| o.files.clone())
                .collect::<Vec<_>>(),
            plan.outputs
                .iter()
                .map(|o| o.files.clone())
                .collect::<Vec<_>>()
        );
        // A single lazy library keeps the one-library form: no list in the JSON.
        let single = conda_prefix().plan();
        assert!(
            single.lazy_libraries.is_empty()
                && serde_json::to_value(&single)
                    .unwrap()
                    .get("lazy_libraries")
                    .is_none()
        );
    }

    #[test]
    fn savings_saturate_instead_of_wrapping() {
        assert_eq!(super::saves(1000, 400), 600);
        assert_eq!(super::saves(400, 1000), -600);
        assert_eq!(super::saves(0, u64::MAX), i64::MIN);
        assert_eq!(super::saves(u64::MAX, 0), i64::MAX);
    }
}
