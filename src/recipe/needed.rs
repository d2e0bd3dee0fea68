//! "Every import resolved by a NEEDED library": the link-time check `ld --no-undefined` makes,
//! made again on the finished file, so a variant linked without it (or against other libraries
//! than the ones it will meet) is caught where it is built, not at a user's first linalg call.
//!
//! The NEEDED libraries are looked up where the build and its test environment put them:
//! directories the caller names first (`--lib-dir`: the torch `lib/`, the CUDA libraries, a conda
//! `$PREFIX/lib`), then the library's own directory, its RPATH/RUNPATH entries with `$ORIGIN`
//! being that directory, then the system's: the directories `/etc/ld.so.conf` names (what
//! `ldconfig` put in `/etc/ld.so.cache`, looked up as ld.so looks up the cache), then the default
//! directories. Only direct NEEDED libraries count, as for the link editor: a symbol that only an
//! indirect dependency defines is a build that works by accident of load order.
//!
//! The conf directories are checked against the AArch64 ld.so with a cache `ldconfig` built from
//! another root's conf (tests/it/loader_aarch64.rs, `ld_so_conf_*`): [`resolve_in`] takes that
//! root. What the real cache holds can differ from the conf when it is stale (`ldconfig` not rerun
//! after a library was added or removed); the model reads the conf, what a fresh `ldconfig` caches.

use std::path::{Path, PathBuf};

use crate::analysis::hwcaps;
use crate::analysis::lazy::glob_match;
use crate::elf::{ElfFacts, ElfView};
use crate::input::file;

/// Where the library's NEEDED entries were found, and the strong imports none of them defines.
#[derive(Debug, Default)]
pub struct Resolution {
    /// Each NEEDED name found, and the path it was found at (in NEEDED order).
    pub found: Vec<(String, PathBuf)>,
    /// How many strong (non-weak) imports the library has.
    pub imports: usize,
    /// NEEDED names found in none of the directories searched, in NEEDED order.
    pub not_found: Vec<String>,
    /// Strong imports that no library found defines, sorted, each once.
    pub unresolved: Vec<String>,
}

/// Resolve `facts`' NEEDED libraries (the library at `path`) and check its strong imports, on
/// this system.
pub fn resolve(
    path: &Path,
    view: &ElfView<'_>,
    facts: &ElfFacts,
    lib_dirs: &[PathBuf],
) -> Resolution {
    resolve_in(Path::new("/"), path, view, facts, lib_dirs)
}

/// [`resolve`] on the system whose root directory is `root` (`/` for this one; another for a
/// system image, as `ldconfig -r ROOT` takes one): its `etc/ld.so.conf` and default directories
/// are read under `root`, and `found` names paths under it.
pub fn resolve_in(
    root: &Path,
    path: &Path,
    view: &ElfView<'_>,
    facts: &ElfFacts,
    lib_dirs: &[PathBuf],
) -> Resolution {
    let dirs = search_dirs(root, path, facts, lib_dirs);
    let kind = (view.ctx.container, view.header.e_machine);
    let mut maps = Vec::new();
    let mut out = Resolution::default();
    for name in &facts.needed {
        let hit = dirs.iter().find_map(|d| {
            loadable(&d.dir.join(name), kind, d.lookup).map(|m| (d.dir.join(name), m))
        });
        match hit {
            Some((at, map)) => {
                out.found.push((name.clone(), at));
                maps.push(map);
            }
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

/// How a directory of the search is looked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirLookup {
    /// By file name, as ld.so searches a path (RPATH, RUNPATH, the default directories).
    Path,
    /// As `/etc/ld.so.cache` holds the directory: `ldconfig` records only files named `lib*.so*`
    /// or `ld-*.so*`, each under its SONAME (its file name without one), so ld.so finds `NAME`
    /// there only when the file's SONAME is `NAME` (measured under the AArch64 ld.so: a file
    /// `libx.so` whose SONAME is `liby.so`, or a `foo.so`, in a conf directory is not found).
    Cache,
}

/// A directory of the search and how it is looked in.
struct SearchDir {
    dir: PathBuf,
    lookup: DirLookup,
}

/// The directories searched, in order (see the module documentation).
fn search_dirs(root: &Path, path: &Path, facts: &ElfFacts, lib_dirs: &[PathBuf]) -> Vec<SearchDir> {
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
    let path_dir = |dir| SearchDir {
        dir,
        lookup: DirLookup::Path,
    };
    let mut out: Vec<SearchDir> = dirs.into_iter().map(path_dir).collect();
    // ld.so's cache comes after RUNPATH and before the default directories.
    let under = |d: &str| root.join(d.trim_start_matches('/'));
    out.extend(conf_dirs(root).iter().map(|d| SearchDir {
        dir: under(d),
        lookup: DirLookup::Cache,
    }));
    // The library's machine's multiarch directories: an aarch64 library's libc is in
    // /lib/aarch64-linux-gnu on Debian and Ubuntu, never in the x86-64 ones.
    let defaults = hwcaps::default_dirs(&facts.machine);
    out.extend(defaults.iter().map(|d| path_dir(under(d))));
    out
}

/// How deep `include` lines nest: glibc's ldconfig has no limit (a conf including itself never
/// ends); the model stops here.
const MAX_INCLUDE_DEPTH: usize = 8;
/// Conf files read in all.
const MAX_CONF_FILES: usize = 256;

/// The directories `ROOT/etc/ld.so.conf` names, in `ldconfig`'s order (the order of its cache
/// entries for one name, which ld.so takes the first of): lines in file order, an `include`
/// line's matches (sorted, as glob(3) gives them) read in its place. Paths are as the conf writes
/// them, absolute on that system. Unreadable files are skipped, as ldconfig skips them.
pub fn conf_dirs(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut read = 0;
    parse_conf(root, "/etc/ld.so.conf", 0, &mut read, &mut out);
    out
}

/// One conf file (`file`, absolute on the system at `root`) read into `out` (see [`conf_dirs`]).
fn parse_conf(root: &Path, file: &str, depth: usize, read: &mut usize, out: &mut Vec<String>) {
    if depth > MAX_INCLUDE_DEPTH || *read >= MAX_CONF_FILES {
        return;
    }
    *read += 1;
    let at = root.join(file.trim_start_matches('/'));
    let Ok(text) = file::read_text(&at, file::Links::Follow, 1 << 20, "ld.so.conf") else {
        return;
    };
    let here = Path::new(file).parent().unwrap_or(Path::new("/"));
    for line in text.lines() {
        // ldconfig: a `#` ends the line wherever it is; blank lines are skipped.
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(patterns) = keyword(line, "include") {
            for pattern in patterns.split([' ', '\t']).filter(|p| !p.is_empty()) {
                let pattern = here.join(pattern);
                for f in glob_files(root, &pattern.to_string_lossy()) {
                    parse_conf(root, &f, depth + 1, read, out);
                }
            }
        } else if keyword(&line.to_ascii_lowercase(), "hwcap").is_some() || line.is_empty() {
            // `hwcap` lines: ignored since glibc 2.32.
        } else if let Some(dir) = conf_dir(line) {
            out.push(dir);
        }
    }
}

/// The rest of `line` after `word` and a blank, when it starts so.
fn keyword<'l>(line: &'l str, word: &str) -> Option<&'l str> {
    let rest = line.strip_prefix(word)?;
    rest.starts_with([' ', '\t']).then(|| rest.trim_start())
}

/// A directory line as ldconfig reads it: an optional `=TYPE` after the path dropped, trailing
/// blanks and slashes dropped. Relative paths (which ldconfig takes relative to its working
/// directory, with a warning) name nothing on the system and are left out.
fn conf_dir(line: &str) -> Option<String> {
    let path = line.split('=').next().unwrap_or("").trim_end();
    let path = match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    };
    path.starts_with('/').then(|| path.to_string())
}

/// The files an `include` pattern (absolute on the system at `root`) matches, sorted: `*`, `?`
/// and `[...]` in the last component only (`/etc/ld.so.conf.d/*.conf`), a leading `.` matched
/// only by a pattern that starts with one, as glob(3) does.
fn glob_files(root: &Path, pattern: &str) -> Vec<String> {
    let (dir, name) = pattern.rsplit_once('/').unwrap_or(("", pattern));
    let Ok(rd) = std::fs::read_dir(root.join(dir.trim_start_matches('/'))) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| !f.starts_with('.') || name.starts_with('.'))
        .filter(|f| glob_match(name.as_bytes(), f.as_bytes()))
        .map(|f| format!("{dir}/{f}"))
        .collect();
    out.sort();
    out
}

/// The file at `p` mapped, when ld.so would load it for this library: a regular ELF file of the
/// same class and machine (it skips anything else and goes on searching), and in a directory
/// looked up through the cache, one `ldconfig` records under that name ([`Lookup::Cache`]).
fn loadable(
    p: &Path,
    kind: (goblin::container::Container, u16),
    lookup: DirLookup,
) -> Option<memmap2::Mmap> {
    let name = p.file_name()?.to_str()?;
    let cached_name = (name.starts_with("lib") || name.starts_with("ld-")) && name.contains(".so");
    if lookup == DirLookup::Cache && !cached_name {
        return None;
    }
    let map = crate::input::map_file(p).ok()?;
    let view = ElfView::parse(&map).ok()?;
    let soname = || {
        view.dynamic
            .iter()
            .find(|d| d.d_tag == goblin::elf::dynamic::DT_SONAME)
            .map(|d| view.dynstr(d.d_val))
    };
    let same = (view.ctx.container, view.header.e_machine) == kind
        && (lookup == DirLookup::Path || soname().is_none_or(|s| s == Some(name)));
    drop(view);
    same.then_some(map)
}

#[cfg(test)]
mod tests {
    use super::conf_dirs;

    /// ldconfig's reading of a conf: comments, blank lines, `=TYPE`, trailing slashes, `hwcap`
    /// lines, relative directories left out, a relative `include` read in place with its matches
    /// sorted (a dot file not matched by `*`), and a conf that includes itself ends.
    #[test]
    fn the_conf_is_read_as_ldconfig_reads_it() {
        let d = tempfile::tempdir().unwrap();
        let etc = d.path().join("etc");
        std::fs::create_dir_all(etc.join("ld.so.conf.d")).unwrap();
        let w = |p: &str, t: &str| std::fs::write(etc.join(p), t).unwrap();
        w(
            "ld.so.conf",
            "# top\n/first/ # trailing\nhwcap 0 nosegneg\nHWCAP 1 x\nrelative/dir\n\
             include ld.so.conf.d/*.conf\t/etc/loop.conf\n/last=libc6\n",
        );
        w("ld.so.conf.d/b.conf", "/from-b\n");
        w("ld.so.conf.d/a.conf", "  /from-a//\n");
        w("ld.so.conf.d/.hidden.conf", "/hidden\n");
        w("ld.so.conf.d/a.conf.bak", "/backup\n");
        w("loop.conf", "/loop\ninclude /etc/loop.conf\n");
        let dirs = conf_dirs(d.path());
        let loops = dirs.iter().filter(|x| *x == "/loop").count();
        assert!((1..=9).contains(&loops), "{dirs:?}");
        let once: Vec<&str> = dirs
            .iter()
            .map(String::as_str)
            .filter(|x| *x != "/loop")
            .collect();
        assert_eq!(once, ["/first", "/from-a", "/from-b", "/last"]);
        assert!(conf_dirs(&d.path().join("absent")).is_empty());
    }
}
