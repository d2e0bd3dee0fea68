//! Stand-ins: valid conda packages for external packages a local channel lacks (`libmagma`, CUDA
//! libraries), so that a real solver can be run offline on a channel that holds only the split.
//!
//! A stand-in carries the name and version of the package it replaces and a tiny README; it holds
//! no library. It says what it is everywhere: the build string starts with `standin_`,
//! `info/index.json` has `license: "stand-in"`, `info/about.json` has
//! `extra: {"splitpkg_standin": true, "represents_bytes": N, "source": "…"}`, and the package
//! installs `share/splitpkg-standins/NAME.json` with the same facts so that `splitpkg env` can tell
//! from an installed prefix alone. Reports count the bytes a stand-in *represents* separately from
//! real bytes. Stand-ins never carry `track_features` or relations, so they cannot change what the
//! solver prefers.
//!
//! The manifest is YAML or JSON:
//!
//! ```yaml
//! standins:
//!   - name: libmagma
//!     version: 2.8.0
//!     represents_bytes: 293000000
//!     source: "conda-forge-2024-split.md §7 (libmagma.so, 293 M)"
//!     provides: [libmagma.so.2]   # optional: sonames; a core file NEEDing one (missing from the
//!                                 # tree) makes the core package depend on this stand-in
//! ```

use crate::error::Context;
use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// A stand-in manifest: which external packages get a stand-in, and what each represents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The stand-ins, each for one package.
    pub standins: Vec<StandIn>,
}

/// One stand-in: a package of this name and version that holds no library.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StandIn {
    /// The package name it replaces (`libmagma`).
    pub name: String,
    /// The version it carries (the real package's).
    pub version: String,
    /// Installed size of the real package this one stands for.
    pub represents_bytes: u64,
    /// Where that size comes from.
    pub source: String,
    /// Sonames the real package provides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<String>,
}

/// Where the built-in sizes come from: hmaarrfk's listing of a fresh `pytorch-gpu` environment in
/// conda-forge/pytorch-cpu-feedstock PR #298 (2024-12-19), as recorded in
/// `conda-forge-2024-split.md` §7: `libmagma.so` 293 M + `libmagma_sparse.so` 91 M = 385 MB.
pub const BUILTIN_SOURCE: &str = "conda-forge/pytorch-cpu-feedstock PR #298 (2024-12-19): fresh pytorch-gpu env, see conda-forge-2024-split.md §7";

/// The built-in manifest: `libmagma` and `libmagma_sparse`, with the sizes of [`BUILTIN_SOURCE`].
pub fn builtin() -> Manifest {
    Manifest {
        standins: vec![
            StandIn {
                name: "libmagma".into(),
                version: "2.8.0".into(),
                represents_bytes: 293_000_000,
                source: format!("libmagma.so 293 M; {BUILTIN_SOURCE}"),
                provides: vec!["libmagma.so.2".into()],
            },
            StandIn {
                name: "libmagma_sparse".into(),
                version: "2.8.0".into(),
                represents_bytes: 91_000_000,
                source: format!("libmagma_sparse.so 91 M; {BUILTIN_SOURCE}"),
                provides: vec!["libmagma_sparse.so".into()],
            },
        ],
    }
}

impl Manifest {
    /// Read and check a manifest (YAML or JSON; JSON is YAML).
    pub fn load(path: &Path) -> Result<Manifest> {
        let text = crate::input::file::read_text(
            path,
            crate::input::file::Links::Follow,
            crate::input::file::MAX_DOCUMENT_BYTES,
            "manifest",
        )?;
        let m: Manifest =
            serde_yaml::from_str(&text).bad_at(path.display(), "not a stand-in manifest")?;
        m.check().bad_in(path.display())?;
        Ok(m)
    }

    /// Refuse a manifest with an invalid package name or version, a stand-in without a `source`, or
    /// one listed twice.
    pub fn check(&self) -> std::result::Result<(), ManifestError> {
        let mut seen = BTreeSet::new();
        for s in &self.standins {
            rattler_conda_types::PackageName::try_from(s.name.as_str()).map_err(|source| {
                ManifestError::Name {
                    name: s.name.clone(),
                    source,
                }
            })?;
            s.version
                .parse::<rattler_conda_types::Version>()
                .map_err(|source| ManifestError::Version {
                    name: s.name.clone(),
                    version: s.version.clone(),
                    source,
                })?;
            if s.source.trim().is_empty() {
                return Err(ManifestError::NoSource(s.name.clone()));
            }
            if !seen.insert(s.name.clone()) {
                return Err(ManifestError::Twice(s.name.clone()));
            }
        }
        Ok(())
    }

    /// The stand-in for package `name`, if the manifest has one.
    pub fn get(&self, name: &str) -> Option<&StandIn> {
        self.standins.iter().find(|s| s.name == name)
    }
}

/// Why a stand-in manifest is refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The name is not a valid conda package name.
    #[error("stand-in name {name:?}: {source}")]
    Name {
        /// The name as written.
        name: String,
        /// rattler's reason.
        #[source]
        source: rattler_conda_types::InvalidPackageNameError,
    },
    /// The version is not a valid conda version.
    #[error("stand-in {name}: version {version:?}: {source}")]
    Version {
        /// The stand-in's name.
        name: String,
        /// The version as written.
        version: String,
        /// rattler's reason.
        #[source]
        source: rattler_conda_types::ParseVersionError,
    },
    /// The stand-in does not say where its `represents_bytes` comes from (empty `source`).
    #[error("stand-in {0}: say where represents_bytes comes from (source)")]
    NoSource(String),
    /// The same package is listed twice.
    #[error("stand-in {0} is listed twice")]
    Twice(String),
}

/// What a stand-in installs, as `share/splitpkg-standins/NAME.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Marker {
    /// Always true: the marker file is a stand-in's.
    pub splitpkg_standin: bool,
    /// The package name it replaces.
    pub name: String,
    /// The version it carries.
    pub version: String,
    /// Installed bytes of the real package it stands for.
    pub represents_bytes: u64,
    /// Where that size comes from.
    pub source: String,
}

/// A stand-in's `info/about.json` `extra` (fields in this order: it is part of the package bytes).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AboutExtra {
    /// Always true: the package is a stand-in.
    pub splitpkg_standin: bool,
    /// Installed bytes of the real package it stands for.
    pub represents_bytes: u64,
    /// Where that size comes from.
    pub source: String,
}

/// Where a stand-in installs its marker (`NAME.json`), relative to the prefix.
pub const MARKER_DIR: &str = "share/splitpkg-standins";

impl StandIn {
    /// The marker file's content for this stand-in.
    pub fn marker(&self) -> Marker {
        Marker {
            splitpkg_standin: true,
            name: self.name.clone(),
            version: self.version.clone(),
            represents_bytes: self.represents_bytes,
            source: self.source.clone(),
        }
    }

    /// The package content: (path relative to the prefix, bytes).
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        let readme = format!(
            "Stand-in for {} {}, made by `splitpkg pack` for offline solver and installer tests.\n\
             It contains no library. The real package is about {} bytes ({}).\n",
            self.name, self.version, self.represents_bytes, self.source
        );
        let marker =
            serde_json::to_string_pretty(&self.marker()).expect("marker serialises") + "\n";
        vec![
            (
                format!("{MARKER_DIR}/{}.README", self.name),
                readme.into_bytes(),
            ),
            (
                format!("{MARKER_DIR}/{}.json", self.name),
                marker.into_bytes(),
            ),
        ]
    }

    /// `info/about.json` `extra` for this stand-in.
    pub fn about_extra(&self) -> AboutExtra {
        AboutExtra {
            splitpkg_standin: true,
            represents_bytes: self.represents_bytes,
            source: self.source.clone(),
        }
    }
}

/// Read the stand-in markers installed in a prefix, by package name.
pub fn markers_in_prefix(prefix: &Path) -> std::collections::BTreeMap<String, Marker> {
    let mut out = std::collections::BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(prefix.join(MARKER_DIR)) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "json")
                && let Ok(text) = crate::input::file::read_text(
                    &e.path(),
                    crate::input::file::Links::Refuse,
                    crate::input::file::MAX_METADATA_BYTES,
                    "marker",
                )
                && let Ok(m) = serde_json::from_str::<Marker>(&text)
                && m.splitpkg_standin
            {
                out.insert(m.name.clone(), m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_is_valid() {
        let m = builtin();
        m.check().unwrap();
        assert_eq!(m.get("libmagma").unwrap().represents_bytes, 293_000_000);
        assert_eq!(
            m.get("libmagma_sparse").unwrap().represents_bytes,
            91_000_000
        );
    }

    #[test]
    fn bad_manifests_are_refused() {
        let twice = Manifest {
            standins: vec![builtin().standins[0].clone(), builtin().standins[0].clone()],
        };
        assert_eq!(
            twice.check().unwrap_err().to_string(),
            "stand-in libmagma is listed twice"
        );
        let mut bad = builtin();
        bad.standins[0].version = "not a version!".into();
        assert!(bad.check().is_err());
        let mut bad = builtin();
        bad.standins[0].name = "Bad Name".into();
        assert!(bad.check().is_err());
    }
}
