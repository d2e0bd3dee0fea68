//! The load graph against the real ld.so: one gcc-built scenario per loader rule
//! (fixtures/loader/<rule>/build.sh), each run under the machine's loader with
//! `LD_TRACE_LOADED_OBJECTS=1` (what `ld.so --list` prints, through the program's own interpreter so
//! a 32-bit program gets the 32-bit loader), and the file each NEEDED name resolved to compared with
//! the edges `splitpkg inspect --json` gives the same program's process. Where one name is
//! requested by several objects of a process (and resolved differently for each), or a library is
//! dlopened by a program outside the tree (`common/host.c`), ld.so's own account is read instead:
//! `LD_DEBUG=files,libs` names each request, its requester and the file opened, if any.

use crate::common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::graph::{Edge, EdgeKind, How, Node, NodeKind, Reach};

use crate::inspect::{edges_named, inspect_with, name_of, node};

/// fixtures/loader/build.sh output, built once per test binary under target/.
fn scenarios() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = repo()
            .join("target")
            .join("fixtures")
            .join(format!("loader-{}", std::process::id()));
        let o = Command::new("bash")
            .arg(repo().join("fixtures/loader/build.sh"))
            .arg(&out)
            .output()
            .expect("run fixtures/loader/build.sh (needs bash and gcc)");
        assert!(
            o.status.success(),
            "fixtures/loader/build.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        eprint!("{}", String::from_utf8_lossy(&o.stderr));
        out
    })
}

fn scenario(rule: &str) -> PathBuf {
    scenarios().join(rule)
}

pub(crate) fn inspect(path: &Path, extra: &[&str]) -> InspectReport {
    inspect_with(path, extra)
}

/// What ld.so did for `exe`: every NEEDED name (or path) and the file it loaded, `None` when not
/// found. The program's interpreter and the vDSO are left out.
fn ld_list(exe: &Path, ld_library_path: Option<&Path>) -> Vec<(String, Option<PathBuf>)> {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .env("LD_TRACE_LOADED_OBJECTS", "1");
    if let Some(p) = ld_library_path {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let list = parse_list(&text);
    assert!(
        !list.is_empty(),
        "{}: no ld.so listing\n{text}\n{}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    list
}

/// ld.so's trace-mode listing (`LD_TRACE_LOADED_OBJECTS=1` on stdout) as (name, file) pairs.
pub(crate) fn parse_list(text: &str) -> Vec<(String, Option<PathBuf>)> {
    let mut list = Vec::new();
    for line in text.lines().map(str::trim) {
        let strip = |s: &str| s.rsplit_once(" (0x").map_or(s, |(p, _)| p).to_string();
        if let Some((name, rest)) = line.split_once(" => ") {
            let path = if rest.trim() == "not found" {
                None
            } else {
                Some(PathBuf::from(strip(rest)))
            };
            list.push((name.to_string(), path));
        } else if !line.is_empty()
            && !line.starts_with("linux-vdso")
            && !line.starts_with("linux-gate")
            && !line.contains("/ld-linux")
        {
            let p = strip(line);
            list.push((p.clone(), Some(PathBuf::from(p))));
        }
    }
    list
}

/// The NEEDED edges taken in the process started from `root`.
fn needed_in<'a>(ins: &'a InspectReport, root: &str) -> impl Iterator<Item = &'a Edge> {
    let id = node(ins, root).id;
    (ins.edges.iter()).filter(move |e| e.kind == EdgeKind::Needed && e.roots.contains(&id))
}

/// The NEEDED edges splitpkg followed in the process started from `root`: name → (target node, how).
fn process<'a>(ins: &'a InspectReport, root: &str) -> BTreeMap<String, (&'a Node, &'a How)> {
    let mut out = BTreeMap::new();
    for e in needed_in(ins, root) {
        let prev = out.insert(e.name.clone(), (&ins.nodes[e.to], &e.how));
        if let Some((p, _)) = prev {
            assert_eq!(
                p.name,
                name_of(ins, e.to),
                "{root}: {} resolved two ways in one process",
                e.name
            );
        }
    }
    out
}

/// ld.so loaded nothing for the name: splitpkg must say it is not found, ruled out by
/// DF_1_NODEFLIB, or not on the search path.
fn unfound(how: &How) -> bool {
    matches!(
        how,
        How::NotFound { .. } | How::Nodeflib { .. } | How::TreeElsewhere { .. }
    )
}

/// ld.so loaded `p`, outside the tree: splitpkg must call it a system library, or a file outside
/// the tree at that path.
fn outside_at(how: &How, p: &Path) -> bool {
    match how {
        How::System { .. } => true,
        How::OutsideTree { path, .. } => canon(Path::new(path)) == canon(p),
        _ => false,
    }
}

pub(crate) fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// splitpkg's resolution of every name in `root`'s process agrees with ld.so's.
pub(crate) fn agrees(
    tree: &Path,
    ins: &InspectReport,
    root: &str,
    ld: &[(String, Option<PathBuf>)],
) {
    let sp = process(ins, root);
    let tree_c = canon(tree);
    let ld_names: Vec<&str> = ld.iter().map(|(n, _)| n.as_str()).collect();
    for name in sp.keys() {
        assert!(
            ld_names.contains(&name.as_str()),
            "{root}: splitpkg follows {name}, ld.so does not ({ld:?})"
        );
    }
    for (name, path) in ld {
        let (node, how) = sp
            .get(name)
            .unwrap_or_else(|| panic!("{root}: ld.so loads {name}, splitpkg has no edge: {sp:?}"));
        match path {
            Some(p) if canon(p).starts_with(&tree_c) => {
                assert_eq!(
                    node.kind,
                    NodeKind::File,
                    "{root}: {name}: ld.so loaded {}, splitpkg: {how:?}",
                    p.display()
                );
                assert!(!matches!(how, How::TreeElsewhere { .. }), "{root}: {name}");
                assert_eq!(
                    canon(&tree.join(&node.name)),
                    canon(p),
                    "{root}: {name} ({how:?})"
                );
            }
            Some(p) => {
                // Outside the tree: a system library, or a search-path entry that leaves the tree.
                assert_ne!(
                    node.kind,
                    NodeKind::File,
                    "{root}: {name}: ld.so loaded {} outside the tree, splitpkg: {}",
                    p.display(),
                    node.name
                );
                assert!(
                    outside_at(how, p),
                    "{root}: {name} → {}: {how:?}",
                    p.display()
                );
            }
            None => assert!(
                unfound(how),
                "{root}: ld.so did not find {name}, splitpkg: {} {how:?}",
                node.name
            ),
        }
    }
}

/// The tree directory a search path led to, for the ways of finding a name that have one.
pub(crate) fn dir_of(how: &How) -> Option<&str> {
    match how {
        How::Rpath { dir, .. }
        | How::Runpath { dir, .. }
        | How::LdLibraryPath { dir, .. }
        | How::TreeDefault { dir }
        | How::TreeElsewhere { dir } => Some(dir),
        _ => None,
    }
}

/// The one edge `from` → `name` (panics if absent or if there are several).
fn edge<'a>(ins: &'a InspectReport, from: &'a str, name: &'a str) -> (&'a str, &'a How) {
    let all: Vec<(&str, &How)> = edges_named(ins, from, name)
        .map(|e| (name_of(ins, e.to), &e.how))
        .collect();
    assert_eq!(all.len(), 1, "{from} -> {name}: {all:?}");
    all[0]
}

#[test]
fn origin_is_the_directory_a_library_was_found_in_not_its_symlink_target() {
    let t = scenario("origin-symlink");
    let ld = ld_list(&t.join("bin/app"), None);
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld);
    let (to, how) = edge_in(&ins, "bin/app", "real/libsa.so", "libsb.so");
    assert_eq!(to, "lnk/libsb.so");
    assert!(
        matches!(how, How::Runpath { dir, .. } if dir == "lnk"),
        "{how:?}"
    );
    // Loaded on its own (by its real path), its $ORIGIN is real/.
    let (to, how) = edge_in(&ins, "real/libsa.so", "real/libsa.so", "libsb.so");
    assert_eq!(to, "real/libsb.so");
    assert_eq!(dir_of(how), Some("real"), "{how:?}");
}

#[test]
fn nodeflib_forbids_the_system_directories_libc_included() {
    let t = scenario("nodeflib");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app-nodeflib"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    // libc is already loaded by the program: matched by soname, no search.
    let (_, how) = edge(&ins, "lib/libnd.so", "libc.so.6");
    assert!(matches!(how, How::System { .. }), "{how:?}");
    let (to, how) = edge(&ins, "lib/libnd.so", "libm.so.6");
    assert_eq!(to, "libm.so.6");
    assert!(matches!(how, How::Nodeflib { .. }), "{how:?}");
    let (_, how) = edge(&ins, "bin/app-nodeflib", "libc.so.6");
    assert!(matches!(how, How::Nodeflib { .. }), "{how:?}");
}

#[test]
fn absolute_entries_are_searched_inside_the_tree_and_outside_it() {
    let base = scenario("absolute");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app-bare"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    let abs = |rel: &str| t.join(rel).to_str().unwrap().to_string();
    let (to, how) = edge(&ins, "bin/app", "libab.so");
    assert_eq!(to, "lib/libab.so");
    assert!(
        matches!(how, How::Rpath { entry, dir, .. } if *entry == abs("lib") && dir == "lib"),
        "{how:?}"
    );
    let libpath = abs("opt/libpath.so");
    let (to, how) = edge(&ins, "bin/app", &libpath);
    assert_eq!(to, "opt/libpath.so");
    assert!(matches!(how, How::Path { .. }), "{how:?}");
    // An absolute entry outside the tree: ld.so loads the file there, and so says splitpkg.
    let (to, how) = edge(&ins, "bin/app", "libout.so");
    let outside = base.join("outside/lib");
    assert_eq!(to, "libout.so");
    assert_eq!(
        how,
        &How::OutsideTree {
            path: s(&outside.join("libout.so")).to_string(),
            entry: Some(s(&outside).to_string()),
        }
    );
    // Not a prefix: the tree's lib/ is no default directory, so the missing search path shows.
    let (_, how) = edge(&ins, "bin/app-bare", "libab.so");
    assert!(matches!(how, How::TreeElsewhere { .. }), "{how:?}");
}

#[test]
fn a_prefix_lib_dir_stands_in_for_its_pythons_rpath_only_where_ld_so_would_use_it() {
    let t = scenario("prefix-lib");
    let sp = t.join("lib/python3.11/site-packages");
    let out = Command::new(t.join("bin/python"))
        .arg(sp.join("ext.so"))
        .arg(sp.join("ext_rn.so"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let loaded: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.strip_prefix("loaded /"))
        .map(|p| canon(&Path::new("/").join(p)))
        .collect();
    assert!(loaded.contains(&canon(&t.join("lib/libp2.so"))), "{text}");
    assert!(
        text.contains("error libp4.so: cannot open shared object file"),
        "{text}"
    );
    assert!(!loaded.contains(&canon(&t.join("lib/libp4.so"))), "{text}");

    let ins = inspect(&t, &[]);
    let (to, how) = edge(&ins, "lib/libp1.so", "libp2.so");
    assert_eq!(to, "lib/libp2.so");
    assert_eq!(
        how,
        &How::TreeDefault {
            dir: "lib".to_string()
        }
    );
    // libp3 has DT_RUNPATH: ld.so skips the executable's DT_RPATH, so lib/ is not searched.
    let (to, how) = edge(&ins, "lib/libp3.so", "libp4.so");
    assert_eq!(to, "lib/libp4.so");
    assert!(matches!(how, How::TreeElsewhere { .. }), "{how:?}");
}

#[test]
fn a_candidate_of_another_machine_is_skipped() {
    let t = scenario("class");
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld_list(&t.join("bin/app"), None));
    assert_eq!(edge(&ins, "bin/app", "libcm.so").0, "lib/libcm.so");
}

/// (o) glibc's hardware-capability subdirectories (src/analysis/hwcaps.rs): this x86-64 ld.so
/// takes lib/tls/ (legacy, glibc <= 2.36) and lib/glibc-hwcaps/x86-64-v2/ before lib/; lib/aarch64/
/// is another machine's platform directory (tests/it/loader_aarch64.rs: the AArch64 loader takes it).
#[test]
fn hwcaps_subdirectories_are_searched_first() {
    let t = scenario("hwcaps");
    let help = Command::new(ld_so(&t.join("bin/app")))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    if !help.contains("Legacy HWCAP subdirectories") || !help.contains("x86-64-v2 (supported") {
        eprintln!(
            "NOTE: skipping the hwcaps scenario: this ld.so is not the model's (glibc 2.33 to 2.36 on x86-64): {help}"
        );
        return;
    }
    let ins = inspect(&t, &[]);
    agrees_per_request(
        &t,
        &ins,
        "bin/app",
        &ld_debug_program(&t.join("bin/app")),
        true,
    );
    agrees(&t, &ins, "bin/app", &ld_list(&t.join("bin/app"), None));
    for (name, file) in [
        ("libh.so", "lib/tls/libh.so"),
        ("libg.so", "lib/glibc-hwcaps/x86-64-v2/libg.so"),
        ("libp.so", "lib/libp.so"),
    ] {
        assert_eq!(edge(&ins, "bin/app", name).0, file);
    }
}

/// The program interpreter (PT_INTERP) of `exe`, read with readelf.
fn ld_so(exe: &Path) -> PathBuf {
    let o = Command::new("readelf")
        .arg("-lW")
        .arg(exe)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let interp = text
        .lines()
        .find_map(|l| l.split_once("[Requesting program interpreter: "))
        .map(|(_, r)| r.trim_end_matches(']').to_string())
        .unwrap_or_else(|| panic!("{}: no PT_INTERP: {text}", exe.display()));
    PathBuf::from(interp)
}

#[test]
fn a_candidate_of_another_class_is_skipped() {
    let t = scenario("class32");
    if !t.exists() {
        eprintln!(
            "NOTE: skipping the 32-bit scenario: `gcc -m32` cannot link here (apt-get install gcc-multilib)"
        );
        return;
    }
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app32"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    assert_eq!(edge(&ins, "bin/app", "libcc.so").0, "lib/libcc.so");
    assert_eq!(edge(&ins, "bin/app32", "libcc.so").0, "lib32/libcc.so");
}

#[test]
fn an_inherited_rpath_belongs_to_the_process() {
    let t = scenario("per-process");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app-a", "bin/app-b"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    for (exe, dep) in [("bin/app-a", "a/libdep.so"), ("bin/app-b", "b/libdep.so")] {
        let (to, how) = edge_in(&ins, exe, "lib/libshared.so", "libdep.so");
        assert_eq!(to, dep);
        assert!(matches!(how, How::Rpath { of, .. } if of == exe), "{how:?}");
    }
}

#[test]
fn ld_library_path_comes_after_rpath_and_before_runpath() {
    let t = scenario("ld-library-path");
    let exe = t.join("bin/app");
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld_list(&exe, None));
    assert_eq!(edge(&ins, "rp/libv.so", "libw.so").0, "rn/libw.so");

    let ldp = t.join("ldp");
    let ld = ld_list(&exe, Some(&ldp));
    // An absolute directory (inside the tree) and a tree-relative one mean the same.
    for arg in [ldp.to_str().unwrap(), "ldp"] {
        let ins = inspect(&t, &["--ld-library-path", arg]);
        agrees(&t, &ins, "bin/app", &ld);
        let (to, how) = edge(&ins, "rp/libv.so", "libw.so");
        assert_eq!(to, "ldp/libw.so");
        assert!(
            matches!(how, How::LdLibraryPath { entry, .. } if entry == arg),
            "{how:?}"
        );
        assert_eq!(edge(&ins, "bin/app", "libx.so").0, "rp/libx.so");
    }
}

/// One request ld.so reported under `LD_DEBUG=files,libs`: `name` needed by the object at `by`
/// (as ld.so printed it) and the file it opened, `None` when it found none. A name that matched
/// an object already loaded is no request: ld.so prints nothing for it.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) by: PathBuf,
    pub(crate) name: String,
    pub(crate) opened: Option<PathBuf>,
}

/// Run `cmd` under `LD_DEBUG=files,libs` and read its requests from stderr.
fn ld_debug(mut cmd: Command) -> (Vec<Request>, String) {
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .env("LD_DEBUG", "files,libs");
    let out = cmd.output().expect("run under LD_DEBUG");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (parse_debug(&text), stdout)
}

/// The requests in ld.so's `LD_DEBUG=files,libs` output.
pub(crate) fn parse_debug(text: &str) -> Vec<Request> {
    let mut reqs: Vec<Request> = Vec::new();
    let mut tried: Option<PathBuf> = None;
    for line in text.lines() {
        let Some((_, l)) = line.split_once(":\t") else {
            continue;
        };
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("file=") {
            let (name, what) = rest.split_once(" [0];  ").unwrap_or((rest, ""));
            if let Some(by) = what.strip_prefix("needed by ") {
                let by = by.trim_end_matches(" [0]");
                reqs.push(Request {
                    by: PathBuf::from(by),
                    name: name.to_string(),
                    opened: None,
                });
                tried = None;
            } else if what.starts_with("generating link map")
                && let Some(r) = reqs.last_mut().filter(|r| r.name == name)
            {
                r.opened = Some(if name.contains('/') {
                    PathBuf::from(name)
                } else {
                    tried.clone().expect("a file was tried")
                });
            }
        } else if let Some(t) = l.strip_prefix("trying file=") {
            tried = Some(PathBuf::from(t));
        }
    }
    reqs
}

/// ld.so's requests for the program `exe` (trace mode: every NEEDED entry, found or not).
fn ld_debug_program(exe: &Path) -> Vec<Request> {
    let mut cmd = Command::new(exe);
    cmd.env("LD_TRACE_LOADED_OBJECTS", "1");
    let (reqs, _) = ld_debug(cmd);
    assert!(!reqs.is_empty(), "{}: no LD_DEBUG requests", exe.display());
    reqs
}

/// ld.so's requests when `host` (outside the tree) dlopens `lib`, and what the host printed
/// (`loaded PATH` lines, or `error …`). dlopen stops at the first name it cannot find.
fn ld_debug_dlopen(host: &Path, lib: &Path) -> (Vec<Request>, String) {
    let mut cmd = Command::new(host);
    cmd.arg(lib);
    ld_debug(cmd)
}

/// The tree path of an object ld.so named (the tree's own spelling of it).
fn tree_path(tree: &Path, p: &Path) -> String {
    canon(p)
        .strip_prefix(canon(tree))
        .unwrap_or_else(|_| panic!("{} is outside {}", p.display(), tree.display()))
        .to_str()
        .unwrap()
        .to_string()
}

/// Every request ld.so made in `root`'s process agrees with the edge splitpkg gives that
/// requester and name in the same process; with `complete` (a program in trace mode), every
/// searched edge of the process is one of ld.so's requests.
pub(crate) fn agrees_per_request(
    tree: &Path,
    ins: &InspectReport,
    root: &str,
    reqs: &[Request],
    complete: bool,
) {
    let in_process: Vec<&Edge> = needed_in(ins, root).collect();
    let from = |e: &Edge| name_of(ins, e.from).to_string();
    let tree_c = canon(tree);
    // The host program's own requests (its libc) are not the tree's.
    for r in reqs.iter().filter(|r| canon(&r.by).starts_with(&tree_c)) {
        let by = tree_path(tree, &r.by);
        let e = in_process
            .iter()
            .find(|e| from(e) == by && e.name == r.name)
            .unwrap_or_else(|| {
                panic!(
                    "{root}: ld.so: {by} needs {}; splitpkg has no such edge",
                    r.name
                )
            });
        let (to, how) = (&ins.nodes[e.to], &e.how);
        match &r.opened {
            Some(p) if canon(p).starts_with(&tree_c) => {
                assert!(
                    !matches!(how, How::TreeElsewhere { .. } | How::NotFound { .. }),
                    "{root}: {by} → {}: ld.so opened {}, splitpkg: {how:?}",
                    r.name,
                    p.display()
                );
                assert_eq!(
                    canon(&tree.join(&to.name)),
                    canon(p),
                    "{root}: {by} → {} ({how:?})",
                    r.name
                );
            }
            Some(p) => {
                assert_ne!(
                    to.kind,
                    NodeKind::File,
                    "{root}: {by} → {}: ld.so opened {} outside the tree",
                    r.name,
                    p.display()
                );
                assert!(
                    outside_at(how, p),
                    "{root}: {by} → {}: {} vs {how:?}",
                    r.name,
                    p.display()
                );
            }
            None => assert!(
                unfound(how),
                "{root}: {by}: ld.so found no {}, splitpkg: {how:?}",
                r.name
            ),
        }
    }
    if complete {
        for e in &in_process {
            if matches!(e.how, How::AlreadyLoaded { .. } | How::System { .. }) {
                continue;
            }
            assert!(
                reqs.iter()
                    .any(|r| tree_path(tree, &r.by) == from(e) && e.name == r.name),
                "{root}: splitpkg searches {} for {}; ld.so made no such request: {reqs:?}",
                e.name,
                from(e)
            );
        }
    }
}

/// The edges `from` → `name` taken in `root`'s process.
pub(crate) fn edge_in<'a>(
    ins: &'a InspectReport,
    root: &str,
    from: &'a str,
    name: &'a str,
) -> (&'a str, &'a How) {
    let id = node(ins, root).id;
    let all: Vec<(&str, &How)> = edges_named(ins, from, name)
        .filter(|e| e.roots.contains(&id))
        .map(|e| (name_of(ins, e.to), &e.how))
        .collect();
    assert_eq!(all.len(), 1, "{root}: {from} -> {name}: {all:?}");
    all[0]
}

#[test]
fn a_library_loaded_on_its_own_has_only_its_own_search_path() {
    let base = scenario("on-its-own");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    agrees_per_request(
        &t,
        &ins,
        "bin/app",
        &ld_debug_program(&t.join("bin/app")),
        true,
    );
    agrees(&t, &ins, "bin/app", &ld_list(&t.join("bin/app"), None));
    let (to, how) = edge_in(&ins, "bin/app", "lib/liba.so", "libb.so");
    assert_eq!(to, "dep/libb.so");
    assert!(
        matches!(how, How::Rpath { of, .. } if of == "bin/app"),
        "{how:?}"
    );

    // dlopened by a program without a search path, liba.so cannot find libb.so.
    let (reqs, printed) = ld_debug_dlopen(&base.join("host"), &t.join("lib/liba.so"));
    assert!(
        printed.contains("error libb.so: cannot open shared object file"),
        "{printed}"
    );
    agrees_per_request(&t, &ins, "lib/liba.so", &reqs, false);
    let (to, how) = edge_in(&ins, "lib/liba.so", "lib/liba.so", "libb.so");
    assert_eq!(to, "dep/libb.so");
    assert!(matches!(how, How::TreeElsewhere { .. }), "{how:?}");
    // Still loaded by the program, not a root of its own.
    let liba = node(&ins, "lib/liba.so");
    assert_eq!((liba.reach, liba.root), (Reach::Eager, None));
}

#[test]
fn the_first_loader_lends_its_rpath_and_each_program_its_own() {
    let t = scenario("first-loader");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app-a", "bin/app-b", "bin/app-c"] {
        agrees_per_request(&t, &ins, exe, &ld_debug_program(&t.join(exe)), true);
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    let rpath_of = |root: &str| {
        let (to, how) = edge_in(&ins, root, "lib/libshared.so", "libdep.so");
        let How::Rpath { of, .. } = how else {
            panic!("{root}: {how:?}")
        };
        (to, of.clone())
    };
    // Found in dep/ by both app-a and app-c: through each one's own DT_RPATH.
    assert_eq!(
        rpath_of("bin/app-a"),
        ("dep/libdep.so", "bin/app-a".to_string())
    );
    assert_eq!(
        rpath_of("bin/app-c"),
        ("dep/libdep.so", "bin/app-c".to_string())
    );
    // In app-b libmid.so loads libshared.so before libother.so asks for it: libmid's chain counts.
    assert_eq!(
        rpath_of("bin/app-b"),
        ("mid/libdep.so", "lib/libmid.so".to_string())
    );
}

#[test]
fn a_dlopened_nodeflib_library_reuses_the_programs_libc() {
    let base = scenario("nodeflib-dlopen");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    let host = base.join("host");
    let (reqs, printed) = ld_debug_dlopen(&host, &t.join("lib/libndc.so"));
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with("loaded /") && l.ends_with("/lib/libndc.so")),
        "{printed}"
    );
    agrees_per_request(&t, &ins, "lib/libndc.so", &reqs, false);
    let (reqs, printed) = ld_debug_dlopen(&host, &t.join("lib/libndtop.so"));
    assert!(
        printed.contains("error libm.so.6: cannot open shared object file"),
        "{printed}"
    );
    agrees_per_request(&t, &ins, "lib/libndtop.so", &reqs, false);
    for lib in ["lib/libndc.so", "lib/libndtop.so"] {
        let (_, how) = edge_in(&ins, lib, lib, "libc.so.6");
        assert!(matches!(how, How::System { .. }), "{lib}: {how:?}");
    }
    let (_, how) = edge_in(&ins, "lib/libndtop.so", "lib/libndtop.so", "libm.so.6");
    assert!(matches!(how, How::Nodeflib { .. }), "{how:?}");
}

#[test]
fn an_absolute_needed_path_outside_the_tree_is_loaded_from_there() {
    let base = scenario("absolute-needed");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app-missing"] {
        agrees_per_request(&t, &ins, exe, &ld_debug_program(&t.join(exe)), true);
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    let out = base.join("outside/lib/libabsout.so");
    let (to, how) = edge(&ins, "bin/app", out.to_str().unwrap());
    assert_eq!(to, "libabsout.so");
    assert!(
        matches!(how, How::OutsideTree { path, .. } if path == s(&out)),
        "{how:?}"
    );
    let gone = base.join("outside/gone/libgone.so");
    let (_, how) = edge(&ins, "bin/app-missing", gone.to_str().unwrap());
    assert!(matches!(how, How::NotFound { .. }), "{how:?}");
    // An archive has no place: the same path is unknown there, not looked up on this machine.
    let dir = tempfile::tempdir().unwrap();
    let whl = dir.path().join("t-1.0-py3-none-any.whl");
    make_wheel(&t, &whl);
    let ins = inspect(&whl, &[]);
    let (_, how) = edge(&ins, "bin/app", out.to_str().unwrap());
    assert!(matches!(how, How::NotFound { .. }), "{how:?}");
}

#[test]
fn a_name_not_found_is_searched_again_for_the_next_requester() {
    let t = scenario("retry-not-found");
    let ins = inspect(&t, &[]);
    agrees_per_request(
        &t,
        &ins,
        "bin/app",
        &ld_debug_program(&t.join("bin/app")),
        true,
    );
    let (to, how) = edge(&ins, "bin/app", "libf.so");
    assert_eq!(to, "sub/libf.so");
    assert!(matches!(how, How::TreeElsewhere { .. }), "{how:?}");
    let (to, how) = edge(&ins, "lib/libg.so", "libf.so");
    assert_eq!(to, "sub/libf.so");
    assert!(
        matches!(how, How::Rpath { of, .. } if of == "lib/libg.so"),
        "{how:?}"
    );
}

/// The lines of `inspect`'s load tree under `root` (up to the next root or the end of the tree).
fn tree_section<'a>(text: &'a str, root: &str) -> Vec<&'a str> {
    let head = format!("{root} [root: ");
    text.lines()
        .skip_while(|l| !l.starts_with(&head))
        .skip(1)
        .take_while(|l| !l.contains("[root: ") && !l.trim().is_empty())
        .collect()
}

/// (l) torch 2.11's torch_shm_manager: each root's tree in `inspect` is that root's process. Under
/// the program, libshm.so finds libcpu.so through its own DT_RPATH, which is what ld.so says
/// (LD_DEBUG: "RPATH from file …/libshm.so"); under the extension, libpy.so loaded it before
/// libshm.so asks, and the label names libpy.so (not libcpu.so itself). Both processes agree with
/// ld.so request by request.
#[test]
fn the_load_tree_labels_each_edge_as_its_roots_process_found_it() {
    let base = scenario("already-loaded");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    let program = t.join("bin/shm_manager");
    agrees_per_request(
        &t,
        &ins,
        "bin/shm_manager",
        &ld_debug_program(&program),
        true,
    );
    let (reqs, _) = ld_debug_dlopen(&base.join("host"), &t.join("lib/_C.so"));
    // The host's own requests (its libc) are not the tree's.
    let tree_c = canon(&t);
    let reqs: Vec<Request> = (reqs.into_iter())
        .filter(|r| canon(&r.by).starts_with(&tree_c))
        .collect();
    agrees_per_request(&t, &ins, "lib/_C.so", &reqs, true);
    assert!(
        !reqs
            .iter()
            .any(|r| r.name == "libcpu.so" && r.by.ends_with("libshm.so")),
        "in the extension's process ld.so does not search for libcpu.so again: {reqs:?}"
    );

    // ld.so's words for the program's search.
    let o = Command::new(&program)
        .env_remove("LD_LIBRARY_PATH")
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .env("LD_DEBUG", "libs")
        .output()
        .unwrap();
    let debug = String::from_utf8_lossy(&o.stderr);
    let search = debug
        .lines()
        .skip_while(|l| !l.contains("find library=libcpu.so"))
        .find(|l| l.contains("search path="))
        .unwrap_or_else(|| panic!("no search for libcpu.so: {debug}"));
    assert!(search.ends_with("/lib/libshm.so)"), "{search}");
    assert!(search.contains("(RPATH from file "), "{search}");

    let o = run_path(&["inspect", "--quiet"], &t);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let program_tree = tree_section(&text, "bin/shm_manager");
    let cpu: Vec<&&str> = program_tree
        .iter()
        .filter(|l| l.contains("── libcpu.so ["))
        .collect();
    assert_eq!(cpu.len(), 1, "{text}");
    assert!(cpu[0].contains("[rpath of libshm.so"), "{text}");
    assert!(
        !program_tree.iter().any(|l| l.contains("already loaded")),
        "the program's process loads nothing twice: {text}"
    );
    let ext_tree = tree_section(&text, "lib/_C.so");
    assert!(
        ext_tree
            .iter()
            .any(|l| l.contains("── libcpu.so [already loaded (by libpy.so)]")),
        "{text}"
    );
    assert!(
        ext_tree
            .iter()
            .any(|l| l.contains("── libcpu.so [rpath of libpy.so")),
        "{text}"
    );
}
