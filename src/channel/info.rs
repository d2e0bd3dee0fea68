//! `CHANNEL/splitpkg.json`: what `splitpkg pack` recorded about a channel (every split packed into
//! it: names, variants, which is preferred, payload packages, stand-ins), and the channel's layout.
//! `pack` writes it ([`crate::channel::pack`]); `solve` and `env` read it, so they need no flags.

use crate::error::Context;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analysis::plan::Role;
use crate::document::Document;
use crate::error::{Error, Result};

/// The file `pack` writes at the channel's root, naming what it packed there.
pub const CHANNEL_FILE: &str = "splitpkg.json";
/// The `schema` of that file.
pub const CHANNEL_SCHEMA: &str = "splitpkg-channel";
/// The subdirectories packages go into: the tree's packages, and the stand-ins.
pub const SUBDIR: &str = "linux-64";
/// The subdirectory for packages without a platform.
pub const NOARCH: &str = "noarch";

/// A package's part in a pack: the plan's role, or a stand-in for a payload package.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PackedRole {
    /// The core package.
    Core,
    /// The lazy library's package (one per variant).
    Lazy,
    /// A package of the payload, repackaged from the tree.
    Payload,
    /// A stand-in for an external package the channel lacks.
    Standin,
}

impl From<Role> for PackedRole {
    fn from(r: Role) -> PackedRole {
        match r {
            Role::Core => PackedRole::Core,
            Role::Lazy => PackedRole::Lazy,
            Role::Payload => PackedRole::Payload,
        }
    }
}

impl std::fmt::Display for PackedRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            PackedRole::Core => "core",
            PackedRole::Lazy => "lazy",
            PackedRole::Payload => "payload",
            PackedRole::Standin => "standin",
        })
    }
}

/// Where a package's content came from: the tree, the other variant's library (`--lazy-variant`),
/// or the stand-in manifest. Written as `tree`, `--lazy-variant FILE`, `stand-in manifest (FROM)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Packed from the input tree.
    Tree,
    /// The other variant's library, from `--lazy-variant FILE` (the file as given).
    LazyVariant(String),
    /// A stand-in, from the manifest named (or the built-in one).
    StandinManifest(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Tree => f.write_str("tree"),
            Origin::LazyVariant(file) => write!(f, "--lazy-variant {file}"),
            Origin::StandinManifest(from) => write!(f, "stand-in manifest ({from})"),
        }
    }
}

/// A recorded `from` that names none of the origins.
#[derive(Debug, Clone, thiserror::Error)]
#[error("not a package origin: {0:?}")]
pub struct BadOrigin(String);

impl std::str::FromStr for Origin {
    type Err = BadOrigin;
    fn from_str(s: &str) -> std::result::Result<Origin, BadOrigin> {
        if s == "tree" {
            return Ok(Origin::Tree);
        }
        if let Some(file) = s.strip_prefix("--lazy-variant ") {
            return Ok(Origin::LazyVariant(file.to_string()));
        }
        s.strip_prefix("stand-in manifest (")
            .and_then(|r| r.strip_suffix(')'))
            .map(|from| Origin::StandinManifest(from.to_string()))
            .ok_or_else(|| BadOrigin(s.to_string()))
    }
}

crate::string_form!(
    Origin,
    "Origin",
    "^(tree|--lazy-variant .+|stand-in manifest \\(.*\\))$"
);

/// One package written by `pack`, as reported and as recorded in `splitpkg.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct PackedPackage {
    /// `linux-64/libtorch-2.5.1-cuda126_h…_0.conda`, relative to the channel.
    pub file: String,
    /// The package's name.
    pub name: String,
    /// The package's version.
    pub version: String,
    /// The build string; the lazy package's names its variant (`…_nomagma_…`).
    pub build: String,
    /// The build number.
    pub build_number: u64,
    /// `core`, `lazy`, `payload` or `standin`.
    pub role: PackedRole,
    /// For the lazy package: which variant this build is (`magma`, `nomagma`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// For the lazy package: whether a plain install gets this variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<bool>,
    /// Whether this is a stand-in for a package another channel provides.
    pub standin: bool,
    /// Paths in the package (files and symlinks), without `info/`.
    pub files: usize,
    /// Installed bytes of real content (for a stand-in: its README and marker).
    pub bytes: u64,
    /// For a stand-in: the installed size of the package it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub represents_bytes: Option<u64>,
    /// Bytes of the `.conda` file.
    pub archive_bytes: u64,
    /// SHA-256 of the `.conda` file, as `repodata.json` lists it.
    pub sha256: String,
    /// Where the content came from.
    pub from: Origin,
    /// The package's `depends`, as in its `info/index.json`.
    pub depends: Vec<String>,
    /// The package's `constrains`, as in its `info/index.json`.
    pub constrains: Vec<String>,
    /// The package's `track_features` (set on the variant a plain install should not get).
    pub track_features: Vec<String>,
}

/// One `splitpkg pack` run into a channel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct PackRecord {
    /// The packages' version (`--version`).
    pub version: String,
    /// Keys that shape the binary, joined into the build-string prefix (`cuda130`).
    pub build_keys: String,
    /// The `--prefer` argument.
    pub prefer: String,
    /// The variant a plain install gets (`magma` unless `--prefer` says otherwise).
    pub preferred: String,
    /// The track feature the other variant carries (`libtorch-cuda-linalg-p-0`).
    pub track_feature: String,
    /// The payload is linked into the lazy library (a wheel's layout) rather than shipped as a
    /// package of its own.
    pub payload_static: bool,
    /// File name of the input (no directories: the channel must not depend on the machine).
    pub input: String,
    /// Major version of the CUDA runtime the tree NEEDs, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<u32>,
    /// The packages this pack wrote (or kept, when the channel held the same content).
    pub packages: Vec<PackedPackage>,
    /// Variants of the lazy library that were not packed, with why.
    pub missing_variants: Vec<MissingVariant>,
    /// The plan's size of each variant of the lazy library (measured for the tree's own build,
    /// estimated for the other), for reports when a variant was not packed.
    #[serde(default)]
    pub variant_sizes: Vec<crate::analysis::plan::PlanVariant>,
}

/// A variant of the lazy library that a pack could not make, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct MissingVariant {
    /// The variant's name (`nomagma`).
    pub variant: String,
    /// Why it was not packed.
    pub why: String,
}

/// `CHANNEL/splitpkg.json` is a [`Document`] with refusals of its own (they predate the trait's
/// and are kept word for word). [`ChannelInfo::load`] takes the channel, not the file: a channel
/// without the file is named as not made by `pack`.
impl Document for ChannelInfo {
    const SCHEMA: &'static str = CHANNEL_SCHEMA;
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = CHANNEL_FILE;
    const SCHEMA_FILE: &'static str = "channel.schema.json";
    const TITLE: &'static str = "splitpkg channel";
    const ABOUT: &'static str = "CHANNEL/splitpkg.json: what `splitpkg pack` put in a channel (every pack's record and stand-ins), read by `solve` and `env`.";

    fn from_str(text: &str, file: &str) -> Result<Self> {
        let info: ChannelInfo = serde_json::from_str(text).bad_at(file, "malformed")?;
        if info.schema != Self::SCHEMA || !Self::READS.contains(&info.schema_version) {
            return Err(Error::bad(
                file,
                format!("not a {CHANNEL_SCHEMA} version 1 file"),
            ));
        }
        Ok(info)
    }
}

/// `CHANNEL/splitpkg.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ChannelInfo {
    /// Which document this is: `splitpkg-channel`.
    pub schema: String,
    /// The version of the file's layout (1).
    pub schema_version: u32,
    /// Name of the core package.
    pub core: String,
    /// Name of the lazy library's package.
    pub lazy: String,
    /// The payload's name (`--dep`, `magma`); the full variant is named after it.
    pub dep: String,
    /// File name of the lazy library (`libtorch_cuda_linalg.so`).
    pub lazy_library: String,
    /// The lazy library's variants packed (`magma`, `nomagma`).
    pub variants: Vec<String>,
    /// Packages that provide the payload (`libmagma`), which the slim variant forbids.
    pub payload_packages: Vec<String>,
    /// Every pack into this channel, sorted by version and build keys.
    pub packs: Vec<PackRecord>,
    /// The stand-ins in the channel, one per package name (a later pack's replaces an earlier
    /// one's).
    pub standins: Vec<PackedPackage>,
    /// File names of every lazy library, when the lazy package holds several (`lazy_library` is
    /// then the first); absent for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lazy_libraries: Vec<String>,
    /// The payload's components when `--dep` named several (`dep` is then their names joined by `_`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<String>,
}

impl ChannelInfo {
    /// What `--lazy` selects the lazy libraries by when an installed environment is planned.
    pub fn lazy_names(&self) -> Vec<String> {
        if self.lazy_libraries.is_empty() {
            vec![self.lazy_library.clone()]
        } else {
            self.lazy_libraries.clone()
        }
    }

    /// The payload's components (`--dep`).
    pub fn dep_names(&self) -> Vec<String> {
        if self.deps.is_empty() {
            vec![self.dep.clone()]
        } else {
            self.deps.clone()
        }
    }

    /// Read `CHANNEL/splitpkg.json`; a channel without it is refused as not made by `pack`.
    pub fn load(channel: &Path) -> Result<ChannelInfo> {
        let path = channel.join(CHANNEL_FILE);
        use crate::input::file::{Links, MAX_DOCUMENT_BYTES, open_regular_io, read_capped_text};
        let file = open_regular_io(&path, Links::Follow).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::bad(
                    channel.display(),
                    format!("not a channel made by `splitpkg pack` (no {CHANNEL_FILE})"),
                )
            } else {
                Error::io(&path, e)
            }
        })?;
        let shown = path.display().to_string();
        let text = read_capped_text(file, &shown, MAX_DOCUMENT_BYTES, CHANNEL_FILE)?;
        <Self as Document>::from_str(&text, &shown)
    }

    /// Every package the channel description knows, stand-ins included.
    pub fn all_packages(&self) -> impl Iterator<Item = &PackedPackage> {
        self.packs
            .iter()
            .flat_map(|p| p.packages.iter())
            .chain(self.standins.iter())
    }

    /// The package (of any pack, or a stand-in) whose file name is `file`.
    pub fn package_by_file(&self, file: &str) -> Option<&PackedPackage> {
        self.all_packages().find(|p| p.file == file)
    }
}
