//! A pip environment (a `site-packages` directory, or a `pip install --target` one): which
//! installed distributions own a path (their `*.dist-info/RECORD`), and what `splitpkg wheel`
//! recorded in a lazy wheel about its variant (`*.dist-info/splitpkg-variant.json`).
//!
//! pip overwrites a file another distribution owns and deletes it when that one is uninstalled
//! (pypa/pip#4625), so "one owner" is checked here, not assumed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sanitize;

/// The marker's file name inside a lazy wheel's dist-info.
pub const MARKER: &str = "splitpkg-variant.json";
pub const MARKER_SCHEMA: &str = "splitpkg-wheel-variant";
/// The marker version `splitpkg wheel` writes and the only one read: a later version may change
/// what a field means, and read as this one it would print wrong switch commands or sizes.
pub const MARKER_VERSION: u32 = 1;

/// What a lazy wheel says about itself and the other variants of its split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantMarker {
    /// `splitpkg-wheel-variant`; a marker that names another schema is not reported.
    pub schema: String,
    /// The marker's version: `1`, the one `splitpkg wheel` writes; a marker of this schema with
    /// another version is refused.
    pub schema_version: u32,
    /// The lazy library's path in the environment (`torch/lib/libtorch_cuda_linalg.so`); the
    /// first of them when several travel in one lazy wheel.
    pub lazy_library: String,
    /// This wheel's variant (`magma`, `nomagma`): a label of at most 16 characters of `[0-9a-z._]`.
    pub variant: String,
    /// Whether this wheel's lazy library carries the payload.
    pub with_payload: bool,
    /// Whether this is the split's preferred variant, the one a plain install gets (`--prefer`).
    pub preferred: bool,
    /// Every variant of the split that was written, this one included.
    pub variants: Vec<MarkerVariant>,
}

/// One variant of the split, as a lazy wheel's marker lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MarkerVariant {
    /// The variant's name (`magma`, `nomagma`).
    pub name: String,
    /// Whether that variant's lazy library carries the payload.
    pub with_payload: bool,
    /// Bytes of that variant's lazy library.
    pub library_bytes: u64,
    /// What to give the installer to get it, in the layout this wheel came from: a requirement
    /// (`torch-cuda-linalg==2.11.0+0.nomagma`) or a variant wheel's file name.
    pub install: String,
}

/// An installed distribution that owns a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Owner {
    /// `torch_cuda_linalg-2.11.0+1.magma.dist-info`.
    pub dist_info: String,
    /// The distribution's `Name`, as its METADATA writes it.
    pub name: String,
    /// Its `Version` from METADATA (`2.11.0+1.magma`).
    pub version: String,
    /// The `splitpkg wheel` marker, when the distribution is one of its lazy wheels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<VariantMarker>,
    /// `variant.json` (PEP 825) is present: installed from a variant wheel.
    pub pep825_variant: bool,
}

/// The distributions installed in `root` whose RECORD lists `path`. Empty when `root` has no
/// top-level `*.dist-info` (not a pip environment). A dist-info without RECORD owns nothing
/// knowable and is skipped; one whose RECORD or METADATA cannot be read is an error naming the
/// file: a broken environment is not reported as a clean one.
pub fn owners(root: &Path, dist_infos: &[&str], path: &str) -> Result<Vec<Owner>> {
    let mut out = Vec::new();
    for d in dist_infos {
        let dir = root.join(d);
        let record = dir.join("RECORD");
        if !record.exists() {
            // Not installed by an installer (an unpacked tree, a hand-made fixture): it owns
            // nothing that can be known, which is not an error in the tree.
            continue;
        }
        let text = read_small(&record)?;
        if !text.lines().any(|l| record_path(l) == Some(path)) {
            continue;
        }
        let meta_path = dir.join("METADATA");
        let meta = read_small(&meta_path)?;
        let field = |key: &str| {
            meta.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        };
        // Shown in `plan`'s text next to install commands: the PyPA grammar or nothing.
        let (name, version) = (
            field("Name:").unwrap_or_default(),
            field("Version:").unwrap_or_default(),
        );
        let at = |why: String| Error::bad(meta_path.display(), why);
        sanitize::check_dist_name(&name).map_err(|why| at(format!("Name: {why}")))?;
        sanitize::check_version(&version).map_err(|why| at(format!("Version: {why}")))?;
        let marker_path = dir.join(MARKER);
        let marker = if std::fs::symlink_metadata(&marker_path).is_ok() {
            let m: VariantMarker =
                serde_json::from_str(&read_small(&marker_path)?).map_err(|e| {
                    Error::bad_source(
                        marker_path.display(),
                        format!("not a {MARKER_SCHEMA} document"),
                        e,
                    )
                })?;
            m.check()
                .map_err(|why| Error::bad(marker_path.display(), why))?;
            (m.schema == MARKER_SCHEMA).then_some(m)
        } else {
            None
        };
        out.push(Owner {
            dist_info: d.to_string(),
            name,
            version,
            marker,
            pep825_variant: dir.join("variant.json").is_file(),
        });
    }
    Ok(out)
}

/// The path column of a RECORD row (CSV; quoted when it holds a comma or a quote).
fn record_path(line: &str) -> Option<&str> {
    let line = line.trim_end_matches('\r');
    if let Some(rest) = line.strip_prefix('"') {
        // Quoted paths are rare (a comma in a file name); compare them unescaped only if simple.
        return rest
            .split_once("\",")
            .map(|(p, _)| p)
            .filter(|p| !p.contains('"'));
    }
    line.split(',').next().filter(|p| !p.is_empty())
}

/// Dist-info files are small regular files inside the environment: a FIFO, a symlink (to
/// `/dev/zero`, or out of the environment) or one above the cap is refused, naming it.
fn read_small(path: &Path) -> Result<String> {
    use super::file::{Links, MAX_METADATA_BYTES, read_text};
    read_text(path, Links::Refuse, MAX_METADATA_BYTES, "dist-info file")
}

impl VariantMarker {
    /// What a marker says is printed as switch commands and sizes: variant names are PEP 825
    /// labels, `install` a requirement (`NAME==VERSION`) or a wheel file name whose parts follow
    /// the PyPA grammar, library sizes within what one library can be; and it is the version
    /// this splitpkg reads.
    pub fn check(&self) -> std::result::Result<(), MarkerError> {
        if self.schema == MARKER_SCHEMA && self.schema_version != MARKER_VERSION {
            return Err(MarkerError::Version(self.schema_version));
        }
        let label = |v: &str| {
            if !v.is_empty()
                && v.len() <= 16
                && v.chars()
                    .all(|c| matches!(c, '0'..='9' | 'a'..='z' | '_' | '.'))
            {
                Ok(())
            } else {
                Err(MarkerError::Label(v.to_string()))
            }
        };
        label(&self.variant)?;
        for v in &self.variants {
            label(&v.name)?;
            if v.library_bytes > super::MAX_ELF_MEMBER_BYTES {
                return Err(MarkerError::LibraryBytes {
                    variant: v.name.clone(),
                    bytes: v.library_bytes,
                });
            }
            check_install(&v.install).map_err(|source| MarkerError::Install {
                variant: v.name.clone(),
                install: v.install.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

/// Why a variant marker is refused; the message follows the file name.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("{MARKER_SCHEMA} version {0}: this splitpkg reads version {MARKER_VERSION}")]
    Version(u32),
    #[error(
        "variant {} is not a variant label ([0-9a-z._], at most 16 characters)",
        sanitize::quoted(.0)
    )]
    Label(String),
    #[error("variant {variant}: library_bytes {bytes} is above what one library can be")]
    LibraryBytes { variant: String, bytes: u64 },
    #[error("variant {variant}: install {}: {source}", sanitize::quoted(.install))]
    Install {
        variant: String,
        install: String,
        #[source]
        source: InstallError,
    },
}

/// Why a marker's `install` is neither a requirement nor a wheel file name.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("neither NAME==VERSION nor a wheel file name")]
    Neither,
    #[error("not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM[-LABEL].whl)")]
    WheelName,
    #[error(transparent)]
    Invalid(#[from] sanitize::Invalid),
}

/// `NAME==VERSION`, or `NAME-VERSION-TAG-TAG-TAG[-LABEL].whl`.
fn check_install(s: &str) -> std::result::Result<(), InstallError> {
    if let Some((name, version)) = s.split_once("==") {
        sanitize::check_dist_name(name)?;
        return Ok(sanitize::check_version(version)?);
    }
    let Some(stem) = s.strip_suffix(".whl") else {
        return Err(InstallError::Neither);
    };
    let parts: Vec<&str> = stem.split('-').collect();
    if !(5..=6).contains(&parts.len()) {
        return Err(InstallError::WheelName);
    }
    sanitize::check_dist_name(parts[0])?;
    sanitize::check_version(parts[1])?;
    for t in &parts[2..] {
        sanitize::check_wheel_tag(t)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_rows() {
        assert_eq!(
            record_path("torch/lib/a.so,sha256=x,3"),
            Some("torch/lib/a.so")
        );
        assert_eq!(record_path("\"a,b.py\",sha256=x,3"), Some("a,b.py"));
        assert_eq!(
            record_path("x.dist-info/RECORD,,"),
            Some("x.dist-info/RECORD")
        );
        assert_eq!(record_path(""), None);
    }
}
