//! The load graph against the real ld.so: one gcc-built scenario per loader rule
//! (fixtures/loader/<rule>/build.sh), each run under the machine's loader with
//! `LD_TRACE_LOADED_OBJECTS=1` (what `ld.so --list` prints, through the program's own interpreter so
//! a 32-bit program gets the 32-bit loader), and the file each NEEDED name resolved to compared with
//! the edges `splitpkg inspect --json` gives the same program's process.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// fixtures/loader/build.sh output, built once per test binary under target/.
fn scenarios() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = repo().join("target").join("fixtures").join(format!("loader-{}", std::process::id()));
        let o = Command::new("bash")
            .arg(repo().join("fixtures/loader/build.sh"))
            .arg(&out)
            .output()
            .expect("run fixtures/loader/build.sh (needs bash and gcc)");
        assert!(o.status.success(), "fixtures/loader/build.sh failed: {}", String::from_utf8_lossy(&o.stderr));
        eprint!("{}", String::from_utf8_lossy(&o.stderr));
        out
    })
}

fn scenario(rule: &str) -> PathBuf {
    scenarios().join(rule)
}

fn inspect(path: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["inspect", "--json", "--quiet"];
    args.extend_from_slice(extra);
    let o = run_path(&args, path);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    json(&o)
}

/// What ld.so did for `exe`: every NEEDED name (or path) and the file it loaded, `None` when not
/// found. The program's interpreter and the vDSO are left out.
fn ld_list(exe: &Path, ld_library_path: Option<&Path>) -> Vec<(String, Option<PathBuf>)> {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH").env_remove("LD_PRELOAD").env("LD_TRACE_LOADED_OBJECTS", "1");
    if let Some(p) = ld_library_path {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut list = Vec::new();
    for line in text.lines().map(str::trim) {
        let strip = |s: &str| s.rsplit_once(" (0x").map_or(s, |(p, _)| p).to_string();
        if let Some((name, rest)) = line.split_once(" => ") {
            let path = if rest.trim() == "not found" { None } else { Some(PathBuf::from(strip(rest))) };
            list.push((name.to_string(), path));
        } else if !line.is_empty() && !line.starts_with("linux-vdso") && !line.starts_with("linux-gate") && !line.contains("/ld-linux") {
            let p = strip(line);
            list.push((p.clone(), Some(PathBuf::from(p))));
        }
    }
    assert!(!list.is_empty(), "{}: no ld.so listing\n{text}\n{}", exe.display(), String::from_utf8_lossy(&out.stderr));
    list
}

/// The NEEDED edges splitpkg followed in the process started from `root`: name → (target node, how).
fn process<'a>(ins: &'a Value, root: &str) -> BTreeMap<String, (&'a Value, &'a Value)> {
    let nodes = ins["nodes"].as_array().unwrap();
    let id = nodes.iter().find(|n| n["name"] == root).unwrap_or_else(|| panic!("no node {root}"))["id"].clone();
    let mut out = BTreeMap::new();
    for e in ins["edges"].as_array().unwrap() {
        if e["kind"] == "needed" && e["roots"].as_array().unwrap().contains(&id) {
            let prev = out.insert(e["name"].as_str().unwrap().to_string(), (&nodes[e["to"].as_u64().unwrap() as usize], &e["how"]));
            if let Some((p, _)) = prev {
                assert_eq!(
                    p["name"],
                    nodes[e["to"].as_u64().unwrap() as usize]["name"],
                    "{root}: {} resolved two ways in one process",
                    e["name"]
                );
            }
        }
    }
    out
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// splitpkg's resolution of every name in `root`'s process agrees with ld.so's.
fn agrees(tree: &Path, ins: &Value, root: &str, ld: &[(String, Option<PathBuf>)]) {
    let sp = process(ins, root);
    let tree_c = canon(tree);
    let ld_names: Vec<&str> = ld.iter().map(|(n, _)| n.as_str()).collect();
    for name in sp.keys() {
        assert!(ld_names.contains(&name.as_str()), "{root}: splitpkg follows {name}, ld.so does not ({ld:?})");
    }
    for (name, path) in ld {
        let (node, how) = sp.get(name).unwrap_or_else(|| panic!("{root}: ld.so loads {name}, splitpkg has no edge: {sp:?}"));
        let via = how["via"].as_str().unwrap();
        match path {
            Some(p) if canon(p).starts_with(&tree_c) => {
                assert_eq!(node["kind"], "file", "{root}: {name}: ld.so loaded {}, splitpkg: {how}", p.display());
                assert_ne!(via, "tree-elsewhere", "{root}: {name}");
                assert_eq!(canon(&tree.join(node["name"].as_str().unwrap())), canon(p), "{root}: {name} ({how})");
            }
            Some(p) => {
                // Outside the tree: a system library, or a search-path entry that leaves the tree.
                assert_ne!(
                    node["kind"],
                    "file",
                    "{root}: {name}: ld.so loaded {} outside the tree, splitpkg: {}",
                    p.display(),
                    node["name"]
                );
                let dir = p.parent().unwrap();
                let outside = how["outside"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|o| Path::new(o.as_str().unwrap()) == dir || canon(Path::new(o.as_str().unwrap())) == canon(dir));
                assert!(
                    via == "system" || (via == "not-found" && outside) || (via == "not-found" && name.starts_with('/')),
                    "{root}: {name} → {}: {how}",
                    p.display()
                );
            }
            None => assert!(
                ["not-found", "nodeflib", "tree-elsewhere"].contains(&via),
                "{root}: ld.so did not find {name}, splitpkg: {} {how}",
                node["name"]
            ),
        }
    }
}

/// The one edge `from` → `name` (panics if absent or if there are several).
fn edge<'a>(ins: &'a Value, from: &str, name: &str) -> (&'a str, &'a Value) {
    let all = edges(ins, from, name);
    assert_eq!(all.len(), 1, "{from} -> {name}: {all:?}");
    all[0]
}

fn edges<'a>(ins: &'a Value, from: &str, name: &str) -> Vec<(&'a str, &'a Value)> {
    let nodes = ins["nodes"].as_array().unwrap();
    ins["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| nodes[e["from"].as_u64().unwrap() as usize]["name"] == from && e["name"] == name)
        .map(|e| (nodes[e["to"].as_u64().unwrap() as usize]["name"].as_str().unwrap(), &e["how"]))
        .collect()
}

#[test]
fn origin_is_the_directory_a_library_was_found_in_not_its_symlink_target() {
    let t = scenario("origin-symlink");
    let ld = ld_list(&t.join("bin/app"), None);
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld);
    let (to, how) = edge(&ins, "real/libsa.so", "libsb.so");
    assert_eq!((to, &how["via"], &how["dir"]), ("lnk/libsb.so", &Value::from("runpath"), &Value::from("lnk")));
}

#[test]
fn nodeflib_forbids_the_system_directories_libc_included() {
    let t = scenario("nodeflib");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app-nodeflib"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    // libc is already loaded by the program: matched by soname, no search.
    assert_eq!(edge(&ins, "lib/libnd.so", "libc.so.6").1["via"], "system");
    let (to, how) = edge(&ins, "lib/libnd.so", "libm.so.6");
    assert_eq!((to, &how["via"]), ("libm.so.6", &Value::from("nodeflib")));
    assert_eq!(edge(&ins, "bin/app-nodeflib", "libc.so.6").1["via"], "nodeflib");
}

#[test]
fn absolute_entries_are_searched_inside_the_tree_and_reported_outside_it() {
    let base = scenario("absolute");
    let t = base.join("tree");
    let ins = inspect(&t, &[]);
    for exe in ["bin/app", "bin/app-bare"] {
        agrees(&t, &ins, exe, &ld_list(&t.join(exe), None));
    }
    let abs = |rel: &str| t.join(rel).to_str().unwrap().to_string();
    let (to, how) = edge(&ins, "bin/app", "libab.so");
    assert_eq!(
        (to, &how["via"], &how["entry"], &how["dir"]),
        ("lib/libab.so", &Value::from("rpath"), &Value::from(abs("lib")), &Value::from("lib"))
    );
    let (to, how) = edge(&ins, "bin/app", &abs("opt/libpath.so"));
    assert_eq!((to, &how["via"]), ("opt/libpath.so", &Value::from("path")));
    let (to, how) = edge(&ins, "bin/app", "libout.so");
    assert_eq!(to, "libout.so");
    assert_eq!(how["outside"], serde_json::json!([base.join("outside/lib").to_str().unwrap()]));
    // Not a prefix: the tree's lib/ is no default directory, so the missing search path shows.
    assert_eq!(edge(&ins, "bin/app-bare", "libab.so").1["via"], "tree-elsewhere");
}

#[test]
fn a_prefix_lib_dir_stands_in_for_its_pythons_rpath_only_where_ld_so_would_use_it() {
    let t = scenario("prefix-lib");
    let sp = t.join("lib/python3.11/site-packages");
    let out =
        Command::new(t.join("bin/python")).arg(sp.join("ext.so")).arg(sp.join("ext_rn.so")).env_remove("LD_LIBRARY_PATH").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let loaded: Vec<PathBuf> = text.lines().filter_map(|l| l.strip_prefix("loaded /")).map(|p| canon(&Path::new("/").join(p))).collect();
    assert!(loaded.contains(&canon(&t.join("lib/libp2.so"))), "{text}");
    assert!(text.contains("error libp4.so: cannot open shared object file"), "{text}");
    assert!(!loaded.contains(&canon(&t.join("lib/libp4.so"))), "{text}");

    let ins = inspect(&t, &[]);
    let (to, how) = edge(&ins, "lib/libp1.so", "libp2.so");
    assert_eq!((to, &how["via"], &how["dir"]), ("lib/libp2.so", &Value::from("tree-default"), &Value::from("lib")));
    // libp3 has DT_RUNPATH: ld.so skips the executable's DT_RPATH, so lib/ is not searched.
    let (to, how) = edge(&ins, "lib/libp3.so", "libp4.so");
    assert_eq!((to, &how["via"]), ("lib/libp4.so", &Value::from("tree-elsewhere")));
}

#[test]
fn a_candidate_of_another_machine_is_skipped() {
    let t = scenario("class");
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld_list(&t.join("bin/app"), None));
    assert_eq!(edge(&ins, "bin/app", "libcm.so").0, "lib/libcm.so");
}

#[test]
fn a_candidate_of_another_class_is_skipped() {
    let t = scenario("class32");
    if !t.exists() {
        eprintln!("NOTE: skipping the 32-bit scenario: `gcc -m32` cannot link here (apt-get install gcc-multilib)");
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
    let mut to: Vec<(&str, String)> =
        edges(&ins, "lib/libshared.so", "libdep.so").into_iter().map(|(t, h)| (t, h["of"].as_str().unwrap().to_string())).collect();
    to.sort();
    assert_eq!(to, vec![("a/libdep.so", "bin/app-a".to_string()), ("b/libdep.so", "bin/app-b".to_string())]);
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
        assert_eq!((to, &how["via"], &how["entry"]), ("ldp/libw.so", &Value::from("ld-library-path"), &Value::from(arg)));
        assert_eq!(edge(&ins, "bin/app", "libx.so").0, "rp/libx.so");
    }
}
