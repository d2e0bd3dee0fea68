//! A pip environment (a `site-packages` directory, or a `pip install --target` one): which
//! installed distributions own a path (their `*.dist-info/RECORD`), and what `splitpkg wheel`
//! recorded in a lazy wheel about its variant (`*.dist-info/splitpkg-variant.json`).
//!
//! pip overwrites a file another distribution owns and deletes it when that one is uninstalled
//! (pypa/pip#4625), so "one owner" is checked here, not assumed.

use crate::error::Context;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sanitize;

/// The marker's file name inside a lazy wheel's dist-info.
pub const MARKER: &str = "splitpkg-variant.json";
/// The `schema` value of a variant marker.
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
    /// Which installer wrote it (its `INSTALLER` file): a switch command is given in its form.
    #[serde(default)]
    pub installer: Installer,
    /// The directory that held the installed wheel, from PEP 610 `direct_url.json` (pip and uv
    /// write it for a wheel installed by its path, not for one found through `--find-links` or an
    /// index); absent when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Its METADATA's exact `Requires-Dist` pins (`torch==2.5.1+split`: a lazy wheel pins its
    /// core), repeated in a switch command so the core stays the split's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<String>,
}

/// The installer a dist-info's `INSTALLER` names.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// pip.
    Pip,
    /// uv.
    Uv,
    /// Another installer, or none recorded.
    #[default]
    Other,
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
        sanitize::check_dist_name(&name).bad_at(meta_path.display(), "Name")?;
        sanitize::check_version(&version).bad_at(meta_path.display(), "Version")?;
        out.push(Owner {
            dist_info: d.to_string(),
            name,
            version,
            marker: marker(&dir)?,
            pep825_variant: dir.join("variant.json").is_file(),
            installer: installer(&dir)?,
            source: source(&dir)?,
            pins: pins(&meta),
        });
    }
    Ok(out)
}

/// The `splitpkg wheel` marker in `dir`, checked; none when absent or of another schema.
fn marker(dir: &Path) -> Result<Option<VariantMarker>> {
    let marker_path = dir.join(MARKER);
    if std::fs::symlink_metadata(&marker_path).is_err() {
        return Ok(None);
    }
    let m: VariantMarker = serde_json::from_str(&read_small(&marker_path)?).bad_at(
        marker_path.display(),
        format_args!("not a {MARKER_SCHEMA} document"),
    )?;
    m.check().bad_in(marker_path.display())?;
    Ok((m.schema == MARKER_SCHEMA).then_some(m))
}

/// `INSTALLER`'s first line: pip writes `pip`, uv `uv`.
fn installer(dir: &Path) -> Result<Installer> {
    let path = dir.join("INSTALLER");
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(Installer::Other);
    }
    Ok(match read_small(&path)?.lines().next().map(str::trim) {
        Some("pip") => Installer::Pip,
        Some("uv") => Installer::Uv,
        _ => Installer::Other,
    })
}

/// The exact pins among METADATA's `Requires-Dist` lines (`NAME==VERSION`, no marker or extra),
/// each checked against the PyPA grammar (they are printed in a command); others are left out.
fn pins(meta: &str) -> Vec<String> {
    meta.lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
        .filter_map(|r| {
            let (name, version) = r.trim().split_once("==")?;
            let (name, version) = (name.trim(), version.trim());
            (sanitize::check_dist_name(name).is_ok() && sanitize::check_version(version).is_ok())
                .then(|| format!("{name}=={version}"))
        })
        .collect()
}

/// The directory of the wheel a distribution was installed from, as PEP 610's `direct_url.json`
/// records it: a `file://` URL of a `.whl`. Another URL (an archive on a server, a source tree)
/// names no directory of wheels: none. A file that is not such a document, or a path with a
/// control character (it would be printed in a command), is refused, naming the file.
fn source(dir: &Path) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct DirectUrl {
        url: String,
    }
    let path = dir.join("direct_url.json");
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let d: DirectUrl = serde_json::from_str(&read_small(&path)?)
        .bad_at(path.display(), "not a PEP 610 direct_url.json")?;
    let Some(file) = d.url.strip_prefix("file://") else {
        return Ok(None);
    };
    let file = percent_decode(file).ok_or_else(|| {
        Error::bad(
            path.display(),
            format!("url {}: not a file URL", sanitize::quoted(&d.url)),
        )
    })?;
    if file.chars().any(char::is_control) {
        return Err(Error::bad(
            path.display(),
            format!(
                "url {}: a control character in the path",
                sanitize::quoted(&d.url)
            ),
        ));
    }
    let wheel = Path::new(&file);
    if !wheel.is_absolute() || !file.ends_with(".whl") {
        return Ok(None);
    }
    Ok(wheel.parent().map(|p| p.display().to_string()))
}

/// A URL path with its `%XX` escapes decoded; none when an escape is broken or the bytes are not
/// UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
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
    /// A marker version this splitpkg does not read.
    #[error("{MARKER_SCHEMA} version {0}: this splitpkg reads version {MARKER_VERSION}")]
    Version(u32),
    /// A variant name that is not a PEP 825 variant label.
    #[error(
        "variant {} is not a variant label ([0-9a-z._], at most 16 characters)",
        sanitize::quoted(.0)
    )]
    Label(String),
    /// A variant's `library_bytes` is larger than one library can be (the ELF member limit).
    #[error("variant {variant}: library_bytes {bytes} is above what one library can be")]
    LibraryBytes {
        /// The variant's name.
        variant: String,
        /// The size it states.
        bytes: u64,
    },
    /// An `install` value that names no installable requirement.
    #[error("variant {variant}: install {}: {source}", sanitize::quoted(.install))]
    Install {
        /// The variant whose `install` it is.
        variant: String,
        /// The value as written.
        install: String,
        /// Why it was refused.
        #[source]
        source: InstallError,
    },
}

/// Why a marker's `install` is neither a requirement nor a wheel file name.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// Neither a requirement (`NAME==VERSION`) nor anything like a wheel file name.
    #[error("neither NAME==VERSION nor a wheel file name")]
    Neither,
    /// Ends in `.whl` but does not have a wheel file name's parts.
    #[error("not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM[-LABEL].whl)")]
    WheelName,
    /// A name, version or tag with characters the specifications do not allow.
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

/// PEP 503 normalisation: runs of `-`, `_`, `.` become one `-`, lower case.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
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

    #[test]
    fn percent_escapes_decode_and_broken_ones_are_none() {
        assert_eq!(
            percent_decode("/w/a%20b/x%2B1.whl").as_deref(),
            Some("/w/a b/x+1.whl")
        );
        assert_eq!(percent_decode("/w/%zz"), None);
        assert_eq!(percent_decode("/w/%4"), None);
        assert_eq!(percent_decode("/w/%ff"), None);
    }

    #[test]
    fn only_exact_valid_pins_are_kept() {
        let meta = "Name: x\nRequires-Dist: torch==2.5.1+split\nRequires-Dist: a>=1\nRequires-Dist: b==1; extra == 'x'\n\nRequires-Dist: c==1\n";
        assert_eq!(pins(meta), vec!["torch==2.5.1+split".to_string()]);
    }
}
