//! One wheel as the index needs it: its file name checked, its `METADATA` (PEP 658 serves it
//! beside the wheel), `Requires-Python`, its PEP 825 variant (label and `variant.json`) and the
//! SHA-256 of the whole file. Reads are bounded and every name that ends up in a path or a page is
//! checked first: a hostile wheel is refused with one line naming it, before anything is written.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::ZipArchive;

use crate::error::{Context, Error, Result};
use crate::sanitize::check_dist_name;
use crate::wheel::escaped;

/// `METADATA` larger than this is not a wheel's (torch 2.11's is 30 KiB).
pub const METADATA_CAP: u64 = 16 << 20;
/// `variant.json` larger than this is not one variant's description.
const VARIANT_CAP: u64 = 1 << 20;
/// The longest file name an index takes (file systems take 255 bytes).
const NAME_CAP: usize = 240;

/// A wheel read for the index.
#[derive(Debug, Clone)]
pub struct IndexedWheel {
    /// Where the wheel was read from.
    pub path: PathBuf,
    /// The file name (`torch-2.11.0+split-cp311-cp311-manylinux_2_28_x86_64.whl`).
    pub filename: String,
    /// The PEP 503 normalised project name (`torch-cuda-linalg`): the page's directory.
    pub project: String,
    /// `Version` from METADATA (the file name's too).
    pub version: String,
    /// `Requires-Python` from METADATA, copied onto the page's link.
    pub requires_python: Option<String>,
    /// The PEP 825 variant label and the wheel's `variant.json`, for a variant wheel.
    pub variant: Option<(String, serde_json::Value)>,
    /// The METADATA member's bytes, served as `FILE.metadata` (PEP 658).
    pub metadata: Vec<u8>,
    /// SHA-256 of the whole file (hex), the hash its link carries.
    pub sha256: String,
    /// Bytes of the whole file.
    pub size: u64,
}

pub use crate::input::pip::normalize;

/// A file name the index may write and link: ASCII letters, digits and `._+-`, not hidden, not
/// too long — so it can never name a path outside its project directory or break a page.
pub fn check_file_name(name: &str, at: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= NAME_CAP
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::bad(
            at,
            format!("{name:?} is not a file name an index serves ([A-Za-z0-9._+-], not hidden)"),
        ))
    }
}

/// A PEP 440 version in the normalised form wheel file names carry (`2.11.0`, `2.11.0rc1`,
/// `1!2.0.post1.dev3`, `2.11.0+1.magma`): anything else is refused rather than linked.
pub fn is_version(v: &str) -> bool {
    let (public, local) = match v.split_once('+') {
        Some((p, l)) => (p, Some(l)),
        None => (v, None),
    };
    let local_ok = local.is_none_or(|l| {
        l.split('.').all(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
    });
    let public = match public.split_once('!') {
        Some((epoch, rest)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
            rest
        }
        Some(_) => return false,
        None => public,
    };
    // Release, then optional pre (a|b|rc N), .postN, .devN, in that order.
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // The release: digits, then `.digits` as long as they come.
    let lead = public
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(public.len());
    if lead == 0 {
        return false;
    }
    let mut rest = &public[lead..];
    while let Some(r) = rest
        .strip_prefix('.')
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    {
        rest = &r[r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len())..];
    }
    for pre in ["rc", "a", "b"] {
        if let Some(r) = rest.strip_prefix(pre) {
            let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if !digits(&r[..n]) {
                return false;
            }
            rest = &r[n..];
            break;
        }
    }
    for tag in [".post", ".dev"] {
        if let Some(r) = rest.strip_prefix(tag) {
            let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if !digits(&r[..n]) {
                return false;
            }
            rest = &r[n..];
        }
    }
    rest.is_empty() && local_ok && v.len() <= 128
}

/// PEP 825 variant labels (`null` is the zero-property fallback's).
pub fn is_label(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 64
        && l.chars()
            .all(|c| matches!(c, '0'..='9' | 'a'..='z' | '_' | '.'))
}

/// `Requires-Python`: a specifier set, nothing a page could not quote.
pub fn is_specifier(s: &str) -> bool {
    s.len() <= 256
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '.' | ',' | '<' | '>' | '=' | '!' | '~' | '*' | ' ')
        })
}

/// Read `path` (a `.whl`) for the index.
pub fn read_wheel(path: &Path) -> Result<IndexedWheel> {
    let display = path.display().to_string();
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parts = name_parts(&filename, &display)?;
    // The one opener: a FIFO named `x.whl` does not block, `/dev/zero` behind a link is not read,
    // and a link is refused as the copy into the index (`stage_copy`) would refuse it.
    let file = crate::input::file::open_regular(path, crate::input::file::Links::Refuse)?;
    let size = file.metadata().at(path)?.len();
    let mut archive = ZipArchive::new(file).bad_at(&display, "not a readable zip archive")?;
    let meta = WheelMetadata::read(&mut archive, &display)?;
    let (name, version) = (&meta.name, &meta.version);
    if normalize(parts[0]) != normalize(name) || parts[1] != version {
        return Err(Error::bad(
            &display,
            format!(
                "the file name says {} {}, METADATA says {name} {version}",
                parts[0], parts[1]
            ),
        ));
    }
    // Once name and version match the file name's: another project's wheel is refused for that.
    if let Some(r) = meta.requires_python.as_deref().filter(|r| !is_specifier(r)) {
        return Err(Error::bad(
            format!("{display}:{}", meta.path),
            format!("Requires-Python {r:?} is not a version specifier"),
        ));
    }
    let variant = variant_of(&mut archive, &parts, &meta.path, &display)?;
    let (sha256, hashed) = sha256_file(path)?;
    if hashed != size {
        return Err(Error::bad(&display, "changed while it was read"));
    }
    Ok(IndexedWheel {
        path: path.to_path_buf(),
        project: normalize(name),
        filename,
        version: meta.version,
        requires_python: meta.requires_python,
        variant,
        metadata: meta.bytes,
        sha256,
        size,
    })
}

/// The parts of a wheel's file name, `NAME-VERSION[-BUILD]-PY-ABI-PLATFORM[-LABEL]`: 5 to 7.
fn name_parts<'a>(filename: &'a str, display: &str) -> Result<Vec<&'a str>> {
    check_file_name(filename, display)?;
    let Some(stem) = filename.strip_suffix(".whl") else {
        return Err(Error::bad(display, "not a .whl"));
    };
    let parts: Vec<&str> = stem.split('-').collect();
    if !(5..=7).contains(&parts.len()) || parts.iter().any(|p| p.is_empty()) {
        return Err(Error::bad(
            display,
            "not a wheel file name (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM[-LABEL].whl)",
        ));
    }
    Ok(parts)
}

/// The wheel's one top-level `.dist-info/METADATA`: its bytes and the fields the index serves
/// (name and version checked here, `Requires-Python` by the caller).
struct WheelMetadata {
    /// The member's path in the wheel.
    path: String,
    bytes: Vec<u8>,
    name: String,
    version: String,
    requires_python: Option<String>,
}

impl WheelMetadata {
    fn read(archive: &mut ZipArchive<std::fs::File>, display: &str) -> Result<WheelMetadata> {
        let metas: Vec<String> = archive
            .file_names()
            .filter_map(|n| n.ok())
            .filter(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
            .map(|n| n.into_owned())
            .collect();
        let [meta_path] = metas.as_slice() else {
            return Err(Error::bad(
                display,
                format!(
                    "{} .dist-info/METADATA files at the top level, expected one",
                    metas.len()
                ),
            ));
        };
        let bytes = read_capped(archive, meta_path, METADATA_CAP, display)?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| Error::bad(format!("{display}:{meta_path}"), "not UTF-8"))?;
        let field = |key: &str| {
            text.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        };
        let at = format!("{display}:{meta_path}");
        let name = field("Name:").ok_or_else(|| Error::bad(&at, "no Name"))?;
        let version = field("Version:").ok_or_else(|| Error::bad(&at, "no Version"))?;
        check_dist_name(&name).bad_at(&at, "Name")?;
        if !is_version(&version) {
            return Err(Error::bad(
                &at,
                format!("Version {version:?} is not a normalised PEP 440 version"),
            ));
        }
        Ok(WheelMetadata {
            path: meta_path.clone(),
            bytes,
            name,
            version,
            requires_python: field("Requires-Python:"),
        })
    }
}

/// A variant wheel's label and `variant.json`; none for a wheel without `variant.json`, which
/// must then have no label in its file name.
fn variant_of(
    archive: &mut ZipArchive<std::fs::File>,
    parts: &[&str],
    meta_path: &str,
    display: &str,
) -> Result<Option<(String, serde_json::Value)>> {
    let dist_info = meta_path.trim_end_matches("/METADATA");
    let variant_path = format!("{dist_info}/variant.json");
    if archive.index_for_name(&variant_path).is_some() {
        let label = parts
            .last()
            .copied()
            .filter(|_| parts.len() >= 6)
            .unwrap_or_default();
        return Ok(Some((
            label.to_string(),
            variant_json(archive, &variant_path, label, display)?,
        )));
    }
    // Six parts without variant.json: the third is a build tag, which starts with a digit.
    if parts.len() == 7 || (parts.len() == 6 && !parts[2].starts_with(|c: char| c.is_ascii_digit()))
    {
        return Err(Error::bad(
            display,
            format!(
                "has a variant label ({}) but no {variant_path}",
                parts[parts.len() - 1]
            ),
        ));
    }
    Ok(None)
}

/// The `variant.json` of a variant wheel the index already holds (its label from the file name),
/// without hashing the whole file: what `index --prefer` reads of a set it was not given.
pub fn read_variant_json(path: &Path) -> Result<serde_json::Value> {
    let display = path.display().to_string();
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parts: Vec<&str> = filename
        .strip_suffix(".whl")
        .unwrap_or_default()
        .split('-')
        .collect();
    let label = parts
        .last()
        .copied()
        .filter(|_| parts.len() >= 6)
        .unwrap_or_default();
    let file = crate::input::open_nofollow(path).at(path)?;
    let mut archive = ZipArchive::new(file).bad_at(&display, "not a readable zip archive")?;
    let members: Vec<String> = archive
        .file_names()
        .filter_map(|n| n.ok())
        .filter(|n| n.ends_with(".dist-info/variant.json") && n.matches('/').count() == 1)
        .map(|n| n.into_owned())
        .collect();
    let [member] = members.as_slice() else {
        return Err(Error::bad(
            &display,
            format!(
                "{} .dist-info/variant.json files at the top level, expected one",
                members.len()
            ),
        ));
    };
    variant_json(&mut archive, member, label, &display)
}

/// The wheel's `variant.json`: an object whose `variants` holds exactly its own label.
fn variant_json(
    archive: &mut ZipArchive<std::fs::File>,
    member: &str,
    label: &str,
    display: &str,
) -> Result<serde_json::Value> {
    let at = format!("{display}:{member}");
    if !is_label(label) {
        return Err(Error::bad(
            display,
            format!("variant label {label:?} is not a PEP 825 label ([0-9a-z_.])"),
        ));
    }
    let bytes = read_capped(archive, member, VARIANT_CAP, display)?;
    let doc: serde_json::Value = serde_json::from_slice(&bytes).bad_at(&at, "not JSON")?;
    let labels: Vec<&String> = doc
        .get("variants")
        .and_then(|v| v.as_object())
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    if labels.len() != 1 || labels[0] != label {
        return Err(Error::bad(
            &at,
            format!("describes variants {labels:?}; the file name's label is {label:?}"),
        ));
    }
    Ok(doc)
}

/// A member's bytes, refused when larger than `cap` (declared or inflated).
fn read_capped(
    archive: &mut ZipArchive<std::fs::File>,
    member: &str,
    cap: u64,
    display: &str,
) -> Result<Vec<u8>> {
    let at = format!("{display}:{member}");
    let f = archive.by_name(member).bad_in(&at)?;
    if f.size() > cap {
        return Err(Error::bad(
            &at,
            format!(
                "{} bytes, more than the {cap} a wheel's metadata may have",
                f.size()
            ),
        ));
    }
    let mut out = Vec::new();
    f.take(cap + 1).read_to_end(&mut out).bad_in(&at)?;
    if out.len() as u64 > cap {
        return Err(Error::bad(
            &at,
            format!("inflates to more than {cap} bytes"),
        ));
    }
    Ok(out)
}

/// The SHA-256 (hex) and length of a file, read once.
pub fn sha256_file(path: &Path) -> Result<(String, u64)> {
    let mut f = crate::input::open_nofollow(path).at(path)?;
    sha256_of(&mut f, path)
}

/// The SHA-256 (hex) and length of what is left to read of `f` (opened from `path`).
pub fn sha256_of(f: &mut impl Read, path: &Path) -> Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).at(path)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((crate::output::hex(&h.finalize()), n))
}

/// `{name}-{version}-variants.json` of a variant wheel's distribution (names escaped as in wheel
/// file names, PEP 825).
pub fn variants_file_name(wheel: &IndexedWheel) -> String {
    let dist = wheel.filename.split('-').next().unwrap_or_default();
    format!("{}-{}-variants.json", escaped(dist), wheel.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in [
            "2.11.0",
            "2.11.0+split",
            "2.11.0+1.magma",
            "2.11.0+cu130.split",
            "1.0rc1",
            "1!2.0.post1.dev3",
            "2.0a1.dev0",
            "0",
        ] {
            assert!(is_version(ok), "{ok}");
        }
        for bad in [
            "", "2.11.0+", "2.11.0+A", "v1.0", "1.0-1", "1..0", "1.0/../x", "1.0 ", "1.0\n",
            "1.0+a..b", "!1.0", "1.0rc",
        ] {
            assert!(!is_version(bad), "{bad:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(normalize("Torch_CUDA.linalg"), "torch-cuda-linalg");
        assert_eq!(normalize("a__-b"), "a-b");
        for bad in [
            "../x.whl",
            ".hidden.whl",
            "a/b.whl",
            "a b.whl",
            "a\nb.whl",
            "a%2f.whl",
            "",
        ] {
            assert!(check_file_name(bad, "t").is_err(), "{bad:?}");
        }
        assert!(check_file_name("torch-2.11.0+split-cp311-cp311-linux_x86_64.whl", "t").is_ok());
    }
}
