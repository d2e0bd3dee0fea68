//! "Every import resolved by a NEEDED library": the link-time check `ld --no-undefined` makes,
//! made again on the finished file, so a variant linked without it (or against other libraries
//! than the ones it will meet) is caught where it is built, not at a user's first linalg call.
//!
//! The NEEDED libraries are looked up where the build and its test environment put them:
//! directories the caller names first (`--lib-dir`: the torch `lib/`, the CUDA libraries, a conda
//! `$PREFIX/lib`), then the library's own directory, its RPATH/RUNPATH entries with `$ORIGIN`
//! being that directory, then the system's (`/etc/ld.so.conf.d`, the default directories). Only
//! direct NEEDED libraries count, as for the link editor: a symbol that only an indirect
//! dependency defines is a build that works by accident of load order.

use std::path::{Path, PathBuf};

use crate::analysis::hwcaps;
use crate::elf::{ElfFacts, ElfView};
use crate::input::file;

/// Where the library's NEEDED entries were found, and the strong imports none of them defines.
#[derive(Debug, Default)]
pub struct Resolution {
    pub imports: usize,
    pub not_found: Vec<String>,
    pub unresolved: Vec<String>,
}

/// Resolve `facts`' NEEDED libraries (the library at `path`) and check its strong imports.
pub fn resolve(
    path: &Path,
    view: &ElfView<'_>,
    facts: &ElfFacts,
    lib_dirs: &[PathBuf],
) -> Resolution {
    let dirs = search_dirs(path, facts, lib_dirs);
    let kind = (view.ctx.container, view.header.e_machine);
    let mut maps = Vec::new();
    let mut out = Resolution::default();
    for name in &facts.needed {
        match dirs.iter().find_map(|d| loadable(&d.join(name), kind)) {
            Some(map) => maps.push(map),
            None => out.not_found.push(name.clone()),
        }
    }
    let symbols: Vec<_> = maps
        .iter()
        .filter_map(|m| ElfView::parse(m).ok()?.dynamic_symbols(None).ok())
        .collect();
    for (name, bind) in facts.symbols.undefined_names() {
        if bind == goblin::elf::sym::STB_WEAK {
            continue;
        }
        out.imports += 1;
        if !symbols.iter().any(|s| s.defines(name)) {
            out.unresolved.push(name.to_string());
        }
    }
    out.unresolved.sort();
    out.unresolved.dedup();
    out
}

/// The directories searched, in order (see the module documentation).
fn search_dirs(path: &Path, facts: &ElfFacts, lib_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let origin = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut dirs: Vec<PathBuf> = lib_dirs.to_vec();
    dirs.push(origin.clone());
    // ld.so ignores DT_RPATH when DT_RUNPATH is present.
    let entries = facts.runpath.as_ref().or(facts.rpath.as_ref());
    for e in entries.into_iter().flatten() {
        let e = e.replace("${ORIGIN}", "$ORIGIN");
        if let Some(rest) = e.strip_prefix("$ORIGIN") {
            dirs.push(origin.join(rest.trim_start_matches('/')));
        } else if e.starts_with('/') {
            dirs.push(PathBuf::from(e));
        }
    }
    dirs.extend(system_dirs(&facts.machine));
    dirs
}

/// The system's library directories: `/etc/ld.so.conf.d/*.conf` lines, then the defaults for a
/// library of ELF machine `machine`.
fn system_dirs(machine: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/etc/ld.so.conf.d") {
        let mut confs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        confs.sort();
        for c in confs {
            let Ok(text) = file::read_text(&c, file::Links::Follow, 1 << 20, "ld.so.conf") else {
                continue;
            };
            dirs.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| l.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    // The library's machine's multiarch directories: an aarch64 library's libc is in
    // /lib/aarch64-linux-gnu on Debian and Ubuntu, never in the x86-64 ones.
    dirs.extend(hwcaps::default_dirs(machine).into_iter().map(PathBuf::from));
    dirs
}

/// The file at `p` mapped, when ld.so would load it for this library: a regular ELF file of the
/// same class and machine (it skips anything else and goes on searching).
fn loadable(p: &Path, kind: (goblin::container::Container, u16)) -> Option<memmap2::Mmap> {
    let map = crate::input::map_file(p).ok()?;
    let same = ElfView::parse(&map)
        .ok()
        .is_some_and(|v| (v.ctx.container, v.header.e_machine) == kind);
    same.then_some(map)
}
