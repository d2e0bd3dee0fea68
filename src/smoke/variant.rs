//! Variants: `NAME=PATH` on the command line, where PATH is an env prefix, a torch directory or a
//! site-packages directory; which Python runs it; and what its lazy library holds.

use crate::error::Context;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::analysis::payload::{self, PayloadSpec};
use crate::elf::ElfView;
use crate::error::{Error, Result};

/// `NAME=PATH` as given.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantArg {
    /// The variant's name (`magma`, `nomagma`).
    pub name: String,
    /// Where it is installed: an environment prefix, a torch directory, or a site-packages
    /// directory.
    pub path: PathBuf,
}

/// Read `NAME=PATH` (`--variant`); a name with characters other than letters, digits, `-`, `_` and
/// `.` is refused.
pub fn parse_variant(s: &str) -> Result<VariantArg> {
    let Some((name, path)) = s.split_once('=') else {
        return Err(Error::Usage(format!(
            "--variant {s:?}: expected NAME=PATH (e.g. magma=/opt/env)"
        )));
    };
    let ok_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !ok_name {
        return Err(Error::Usage(format!(
            "--variant {s:?}: NAME must be letters, digits, '-', '_' or '.'"
        )));
    }
    if path.is_empty() {
        return Err(Error::Usage(format!("--variant {s:?}: PATH is empty")));
    }
    Ok(VariantArg {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

/// How PATH was understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Layout")]
pub enum PathLayout {
    /// A prefix with `bin/python` (conda env, venv): its own interpreter.
    EnvPrefix,
    /// The `torch` package directory itself.
    TorchDir,
    /// A directory that contains `torch/`.
    SitePackages,
}

/// A variant ready to run: interpreter, environment and the torch directory it imports.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Where the path points: an environment prefix, a torch directory, or a site-packages
    /// directory.
    pub layout: PathLayout,
    /// The Python to run (the prefix's own, or `--python`, else `python3`).
    pub python: String,
    /// Prepended to PYTHONPATH (torch dir / site-packages layouts).
    pub pythonpath: Option<PathBuf>,
    /// The `torch/` directory the variant imports.
    pub torch_dir: PathBuf,
}

/// A directory named `torch` with `__init__.py` (a pip install also has `lib/`; conda's keeps the
/// libraries in `$PREFIX/lib`).
fn has_torch_package(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| n == "torch") && dir.join("__init__.py").is_file()
}

/// The one `lib/pythonX.Y/site-packages` of a prefix that holds the torch package.
fn prefix_site_packages(prefix: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
        .map(|e| e.path().join("site-packages"))
        .filter(|sp| has_torch_package(&sp.join("torch")))
        .collect();
    (found.len() == 1).then(|| found.remove(0))
}

/// Understand PATH and ask the variant's Python where it imports torch from (without importing it).
pub fn resolve(arg: &VariantArg, python_override: Option<&str>) -> Result<Resolved> {
    let p = &arg.path;
    let what = format!("variant {}: {}", arg.name, p.display());
    if !p.exists() {
        return Err(Error::bad(&what, "no such file or directory"));
    }
    let p = p.canonicalize().at(p)?;
    let env_python = ["bin/python3", "bin/python"]
        .iter()
        .map(|b| p.join(b))
        .find(|b| b.is_file());
    let (layout, python, pythonpath, expect_dir) = if let Some(py) = env_python {
        (PathLayout::EnvPrefix, py.display().to_string(), None, None)
    } else if has_torch_package(&p) {
        let parent = p
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| p.clone());
        (
            PathLayout::TorchDir,
            python_override.unwrap_or("python3").to_string(),
            Some(parent),
            Some(p.clone()),
        )
    } else if has_torch_package(&p.join("torch")) {
        (
            PathLayout::SitePackages,
            python_override.unwrap_or("python3").to_string(),
            Some(p.clone()),
            Some(p.join("torch")),
        )
    } else if let Some(sp) = prefix_site_packages(&p) {
        // A conda prefix without its own interpreter (the libraries in PREFIX/lib, torch/lib linking
        // there): the user's --python imports torch from PREFIX/lib/pythonX.Y/site-packages.
        (
            PathLayout::SitePackages,
            python_override.unwrap_or("python3").to_string(),
            Some(sp.clone()),
            Some(sp.join("torch")),
        )
    } else {
        return Err(Error::bad(
            &what,
            "not an env prefix (bin/python, or lib/pythonX.Y/site-packages/torch with --python), a torch directory (torch/__init__.py) or a site-packages directory with torch/",
        ));
    };
    let mut r = Resolved {
        layout,
        python,
        pythonpath,
        torch_dir: PathBuf::new(),
    };
    let found = find_torch(&r).bad_in(&what)?;
    let found = found.canonicalize().unwrap_or(found);
    if let Some(expect) = expect_dir
        && found != expect
    {
        return Err(Error::bad(
            &what,
            format!(
                "{} imports torch from {}, not from this path",
                r.python,
                found.display()
            ),
        ));
    }
    r.torch_dir = found;
    Ok(r)
}

/// PYTHONPATH for a resolved variant: its own entry first, then whatever the caller had.
pub fn pythonpath_env(r: &Resolved) -> Vec<(String, String)> {
    match &r.pythonpath {
        None => Vec::new(),
        Some(pp) => {
            let mut v = pp.display().to_string();
            if let Some(old) = std::env::var_os("PYTHONPATH").filter(|o| !o.is_empty()) {
                v = format!("{v}:{}", old.to_string_lossy());
            }
            vec![("PYTHONPATH".to_string(), v)]
        }
    }
}

const FIND_SPEC: &str = "import importlib.util,sys\ns=importlib.util.find_spec('torch')\nif s is None or not s.submodule_search_locations: sys.exit('torch is not importable')\nprint(list(s.submodule_search_locations)[0])";

/// Why a variant's Python did not say where torch is.
#[derive(Debug, thiserror::Error)]
enum FindTorchError {
    #[error(transparent)]
    Run(#[from] super::runner::RunError),
    #[error("{python} cannot find torch: {reason}")]
    NotFound { python: String, reason: String },
    #[error("{0} printed no torch location")]
    NoLocation(String),
}

fn find_torch(r: &Resolved) -> std::result::Result<PathBuf, FindTorchError> {
    let mut c = Command::new(&r.python);
    c.arg("-c").arg(FIND_SPEC);
    for (k, v) in pythonpath_env(r) {
        c.env(k, v);
    }
    let out = super::runner::run_bounded(
        c,
        &format!("{} (finding torch)", r.python),
        Duration::from_secs(60),
    )?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(FindTorchError::NotFound {
            python: r.python.clone(),
            reason: err.lines().last().unwrap_or("").trim().to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("").trim();
    if line.is_empty() {
        return Err(FindTorchError::NoLocation(r.python.clone()));
    }
    Ok(PathBuf::from(line))
}

/// Where the variant's lazy library is: the path mapped in the probe, else the usual places.
pub fn locate_lazy(r: &Resolved, mapped: Option<&str>, lazy: &str) -> Option<PathBuf> {
    if let Some(m) = mapped {
        let p = PathBuf::from(m);
        if p.is_file() {
            return Some(p);
        }
    }
    let mut candidates = vec![r.torch_dir.join("lib").join(lazy)];
    // conda layout: $PREFIX/lib/pythonX.Y/site-packages/torch → $PREFIX/lib
    if let Some(prefix_lib) = r.torch_dir.ancestors().nth(3) {
        candidates.push(prefix_lib.join(lazy));
    }
    candidates.into_iter().find(|c| c.is_file())
}

/// What the variant's lazy library holds of the payload (same facts the plan uses).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LazyFacts {
    /// The library file read: the path the probe saw mapped after the first linalg op, else
    /// `torch/lib/<lazy>` or, in a conda environment, `$PREFIX/lib/<lazy>`.
    pub path: String,
    /// The file's size in bytes.
    pub size: u64,
    /// The library contains MAGMA: defines payload symbols (exported or hidden) or NEEDs a
    /// payload library.
    pub has_magma: bool,
    /// Why `has_magma` is what it is, in words: `is itself a magma library`, `defines N magma
    /// symbols (e.g. …)`, `NEEDs …`, `imports N magma symbols (e.g. …)` (no MAGMA code: false), or
    /// `no magma symbols defined and no magma library NEEDed`.
    pub evidence: String,
    /// Payload symbols the library defines, exported or hidden (for MAGMA, `magma_*` and
    /// `magmablas_*`).
    pub defined_symbols: usize,
    /// Payload libraries (`libmagma*`) in the library's DT_NEEDED. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs_payload_libraries: Vec<String>,
    /// Payload symbols the library imports (recordings before this field read as 0).
    #[serde(default)]
    pub imported_symbols: usize,
    /// One payload symbol the library defines. Absent when it defines none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defined_example: Option<String>,
    /// One payload symbol the library imports. Absent when it imports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_example: Option<String>,
    /// Failed checks of the variant contract (`verify-variant`'s rule, [`crate::recipe::verify::contract_checks`])
    /// against the contract of the run's real MAGMA build, as "check: detail"; empty when all
    /// passed; `None` when not checked (no real MAGMA variant in the run, or a recording made
    /// before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_failures: Option<Vec<String>>,
}

impl LazyFacts {
    /// The recorded facts as the identity rule reads them.
    pub fn presence(&self) -> payload::Presence {
        payload::Presence {
            needed: self.needs_payload_libraries.clone(),
            defined: self.defined_symbols,
            defined_example: self.defined_example.clone(),
            imported: self.imported_symbols,
            imported_example: self.imported_example.clone(),
        }
    }
}

/// The lazy library's facts at `path`: its ELF facts and what it holds of the payload (a deep
/// scan).
pub fn lazy_facts(path: &Path, spec: &PayloadSpec) -> Result<LazyFacts> {
    let map = Arc::new(crate::input::map_file(path)?);
    let view = ElfView::parse(&map).elf_at(path.display())?;
    let facts = view
        .facts(&spec.mention_words(), Some(&map))
        .elf_at(path.display())?;
    let mut deep = spec.clone();
    deep.deep = true;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pf = payload::scan(&view, &facts, &name, map.len() as u64, &deep);
    let presence = payload::Presence::scan(&facts, &pf, &deep);
    let has = pf.holds_code() || presence.contains();
    let evidence = if pf.library {
        format!("is itself a {} library", spec.name)
    } else if presence.defined > 0 {
        format!(
            "defines {} {} symbols (e.g. {})",
            presence.defined,
            spec.name,
            presence.defined_example.clone().unwrap_or_default()
        )
    } else if !presence.needed.is_empty() {
        format!("NEEDs {}", presence.needed.join(", "))
    } else if presence.imported > 0 {
        format!(
            "imports {} {} symbols (e.g. {})",
            presence.imported,
            spec.name,
            presence.imported_example.clone().unwrap_or_default()
        )
    } else {
        format!(
            "no {} symbols defined and no {} library NEEDed",
            spec.name, spec.name
        )
    };
    Ok(LazyFacts {
        path: path.display().to_string(),
        size: map.len() as u64,
        has_magma: has,
        evidence,
        defined_symbols: presence.defined,
        needs_payload_libraries: presence.needed,
        imported_symbols: presence.imported,
        defined_example: presence.defined_example,
        imported_example: presence.imported_example,
        contract_failures: None,
    })
}

/// The CUDA libraries of a variant: every shared object next to the lazy library, plus the pip
/// `nvidia/*/lib` directories of a wheel install.
/// torch's own libraries, by canonical path: what `torch/lib` holds (in a conda environment,
/// links into `$PREFIX/lib`, as the feedstock makes them) and the lazy library. The other
/// libraries beside them in `$PREFIX/lib` belong to other packages (cuFFT, cuBLAS, …).
pub fn own_libraries(torch_dir: &Path, lazy: &Path) -> std::collections::BTreeSet<PathBuf> {
    let entries = std::fs::read_dir(torch_dir.join("lib"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path());
    entries
        .chain([lazy.to_path_buf()])
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// The shared libraries (names containing `.so`) in `lazy_dir` and, with a site-packages, in every
/// `nvidia/*/lib`, each directory sorted.
pub fn variant_libraries(lazy_dir: &Path, site_packages: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut add_dir = |d: &Path| {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut v: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.is_file()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.contains(".so"))
                })
                .collect();
            v.sort();
            out.extend(v);
        }
    };
    add_dir(lazy_dir);
    if let Some(sp) = site_packages
        && let Ok(rd) = std::fs::read_dir(sp.join("nvidia"))
    {
        let mut dirs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("lib"))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for d in dirs {
            add_dir(&d);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conda-forge layout: torch's libraries in `$PREFIX/lib` with links from
    /// `site-packages/torch/lib`, CUDA packages' libraries beside them. Only torch's are its own.
    #[test]
    fn own_libraries_follow_torch_lib_links_into_the_prefix() {
        let d = tempfile::tempdir().unwrap();
        let lib = d.path().join("lib");
        let torch_lib = d.path().join("lib/python3.12/site-packages/torch/lib");
        std::fs::create_dir_all(&torch_lib).unwrap();
        for f in [
            "libtorch_cuda.so",
            "libtorch_cuda_linalg.so",
            "libcufft.so.12",
        ] {
            std::fs::write(lib.join(f), b"\x7fELF").unwrap();
        }
        std::os::unix::fs::symlink(
            lib.join("libtorch_cuda.so"),
            torch_lib.join("libtorch_cuda.so"),
        )
        .unwrap();
        let own = own_libraries(
            torch_lib.parent().unwrap(),
            &lib.join("libtorch_cuda_linalg.so"),
        );
        let names: Vec<_> = own
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["libtorch_cuda.so", "libtorch_cuda_linalg.so"],
            "not libcufft.so.12, a CUDA package's"
        );
    }
}
