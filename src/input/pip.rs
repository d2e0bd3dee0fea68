//! A pip environment (a `site-packages` directory, or a `pip install --target` one): which
//! installed distributions own a path (their `*.dist-info/RECORD`), and what `splitpkg wheel`
//! recorded in a lazy wheel about its variant (`*.dist-info/splitpkg-variant.json`).
//!
//! pip overwrites a file another distribution owns and deletes it when that one is uninstalled
//! (pypa/pip#4625), so "one owner" is checked here, not assumed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The marker's file name inside a lazy wheel's dist-info.
pub const MARKER: &str = "splitpkg-variant.json";
pub const MARKER_SCHEMA: &str = "splitpkg-wheel-variant";

/// What a lazy wheel says about itself and the other variants of its split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantMarker {
    pub schema: String,
    pub schema_version: u32,
    /// The lazy library's path in the environment (`torch/lib/libtorch_cuda_linalg.so`); the
    /// first of them when several travel in one lazy wheel.
    pub lazy_library: String,
    pub variant: String,
    pub with_payload: bool,
    pub preferred: bool,
    /// Every variant of the split that was written, this one included.
    pub variants: Vec<MarkerVariant>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkerVariant {
    pub name: String,
    pub with_payload: bool,
    /// Bytes of that variant's lazy library.
    pub library_bytes: u64,
    /// What to give the installer to get it, in the layout this wheel came from: a requirement
    /// (`torch-cuda-linalg==2.11.0+0.nomagma`) or a variant wheel's file name.
    pub install: String,
}

/// An installed distribution that owns a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Owner {
    /// `torch_cuda_linalg-2.11.0+1.magma.dist-info`.
    pub dist_info: String,
    pub name: String,
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
        let meta = read_small(&dir.join("METADATA"))?;
        let field = |key: &str| meta.lines().take_while(|l| !l.is_empty()).find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()));
        let marker_path = dir.join(MARKER);
        let marker = if marker_path.is_file() {
            let m: VariantMarker = serde_json::from_str(&read_small(&marker_path)?)
                .map_err(|e| Error::bad(marker_path.display(), format!("not a {MARKER_SCHEMA} document: {e}")))?;
            (m.schema == MARKER_SCHEMA).then_some(m)
        } else {
            None
        };
        out.push(Owner {
            dist_info: d.to_string(),
            name: field("Name:").unwrap_or_default(),
            version: field("Version:").unwrap_or_default(),
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
        return rest.split_once("\",").map(|(p, _)| p).filter(|p| !p.contains('"'));
    }
    line.split(',').next().filter(|p| !p.is_empty())
}

/// Dist-info files are small; a cap keeps a hostile one from being read without bound.
fn read_small(path: &Path) -> Result<String> {
    use std::io::Read;
    let f = super::open_nofollow(path).map_err(|e| Error::io(path, e))?;
    let mut s = String::new();
    f.take(64 << 20).read_to_string(&mut s).map_err(|e| Error::bad(path.display(), format!("unreadable: {e}")))?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_rows() {
        assert_eq!(record_path("torch/lib/a.so,sha256=x,3"), Some("torch/lib/a.so"));
        assert_eq!(record_path("\"a,b.py\",sha256=x,3"), Some("a,b.py"));
        assert_eq!(record_path("x.dist-info/RECORD,,"), Some("x.dist-info/RECORD"));
        assert_eq!(record_path(""), None);
    }
}
