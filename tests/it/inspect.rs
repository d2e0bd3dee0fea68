//! `splitpkg inspect`: how edges resolve, checked against what the real ld.so does on the same
//! fixture binaries; links; and the same facts from a directory and from each archive format.

use crate::common::*;

use std::process::Command;

use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::graph::{Edge, EdgeKind, How, Node, NodeKind, Reach, RootKind};
use splitpkg::analysis::inspect::FileFacts;
use splitpkg::analysis::plan::Plan;
use splitpkg::input::TreeKind;

/// `splitpkg inspect --json --quiet [EXTRA] PATH`, which must exit 0, read as its document.
pub(crate) fn inspect_with(path: &std::path::Path, extra: &[&str]) -> InspectReport {
    let mut args = vec!["inspect", "--json", "--quiet"];
    args.extend_from_slice(extra);
    let o = run_path(&args, path);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    typed(&o)
}

fn inspect(path: &std::path::Path) -> InspectReport {
    inspect_with(path, &[])
}

/// The node named `name` (a tree path, or a requested name outside the tree).
pub(crate) fn node<'a>(ins: &'a InspectReport, name: &str) -> &'a Node {
    (ins.nodes.iter().find(|n| n.name == name)).unwrap_or_else(|| panic!("no node {name}"))
}

/// The name of the node with id `id`.
pub(crate) fn name_of(ins: &InspectReport, id: usize) -> &str {
    &ins.nodes[id].name
}

/// Every edge by which the file `from` requests `name`.
pub(crate) fn edges_named<'a>(
    ins: &'a InspectReport,
    from: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a Edge> {
    (ins.edges.iter()).filter(move |e| name_of(ins, e.from) == from && e.name == name)
}

/// The file at tree path `path`.
pub(crate) fn file<'a>(ins: &'a InspectReport, path: &str) -> &'a FileFacts {
    (ins.files.iter().find(|f| f.path == path)).unwrap_or_else(|| panic!("no file {path}"))
}

/// (from path, requested name) → (to node name, how): the first such edge.
fn edge<'a>(ins: &'a InspectReport, from: &'a str, name: &'a str) -> (&'a str, &'a How) {
    let e =
        (edges_named(ins, from, name).next()).unwrap_or_else(|| panic!("no edge {from} -> {name}"));
    (name_of(ins, e.to), &e.how)
}

#[test]
fn rpath_and_runpath_resolve_as_ld_so_does() {
    let t = fixture("rpath-runpath");
    // Ground truth: run the program and let each library report which copy was loaded.
    let out = Command::new(t.join("bin/app"))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(out.status.success());
    let truth = String::from_utf8(out.stdout).unwrap();
    assert_eq!(truth.trim(), "x=rp y=rn z=rp");

    let ins = inspect(&t);
    let (x, how) = edge(&ins, "bin/app", "libx.so");
    assert_eq!(x, "rp/libx.so");
    assert!(matches!(how, How::Rpath { .. }), "{how:?}");
    // libx has DT_RUNPATH: the loader chain's DT_RPATH is not used for its NEEDED.
    let (y, how) = edge(&ins, "rp/libx.so", "liby.so");
    assert_eq!(y, "rn/liby.so");
    assert!(matches!(how, How::Runpath { .. }), "{how:?}");
    // liby has neither: DT_RPATH is inherited from the executable; libx's RUNPATH is not.
    let (z, how) = edge(&ins, "rn/liby.so", "libz.so");
    assert_eq!(z, "rp/libz.so");
    assert!(
        matches!(how, How::Rpath { of, .. } if of == "bin/app"),
        "{how:?}"
    );
    for (file, want) in [("x", x), ("y", y), ("z", z)] {
        let dir = want.split('/').next().unwrap();
        assert!(
            truth.contains(&format!("{file}={dir}")),
            "splitpkg says {want}, ld.so says {truth}"
        );
    }
}

#[test]
fn lazy_edge_matches_ld_debug() {
    let t = fixture("conda-like");
    // The real program dlopens the lazy library and reaches MAGMA through it.
    let out = Command::new(t.join("bin/torch_smoke"))
        .env("LD_DEBUG", "files")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "core 4\nlinalg 18\n");
    let debug = String::from_utf8_lossy(&out.stderr);
    let opened = |name: &str| {
        debug.lines().any(|l| {
            l.contains("file=") && l.contains(name) && l.contains("[0];  dynamically loaded by")
        })
    };
    assert!(opened("libtorch_cuda_linalg.so"), "{debug}");
    // libmagma is loaded only as a dependency of the dlopened library, never at start-up.
    let start_up: Vec<&str> = debug
        .lines()
        .take_while(|l| !l.contains("calling init"))
        .collect();
    assert!(
        !start_up.iter().any(|l| l.contains("libmagma")),
        "{start_up:#?}"
    );

    let ins = inspect(&t);
    let (to, how) = edge(&ins, "lib/libtorch_cuda.so", "libtorch_cuda_linalg.so");
    assert_eq!(to, "lib/libtorch_cuda_linalg.so");
    assert!(
        matches!(how, How::Rpath { entry, .. } if entry == "$ORIGIN"),
        "{how:?}"
    );
    let e = (ins.edges.iter())
        .find(|e| e.name == "libtorch_cuda_linalg.so")
        .unwrap();
    assert_eq!(e.kind, EdgeKind::Lazy);
    let node = |n: &str| node(&ins, n);
    assert_eq!(node("lib/libtorch_cuda_linalg.so").reach, Reach::Lazy);
    assert_eq!(node("lib/libmagma.so.2.8.0").reach, Reach::Lazy);
    assert_eq!(node("lib/libtorch_cuda.so").reach, Reach::Eager);
    assert_eq!(node("bin/torch_smoke").root, Some(RootKind::Executable));
    assert_eq!(
        node("lib/python3.11/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so").root,
        Some(RootKind::PythonExtension)
    );
    assert_eq!(node("libc.so.6").kind, NodeKind::System);
    // The NEEDED through a soname symlink lands on the real file.
    let (magma, _) = edge(&ins, "lib/libtorch_cuda_linalg.so", "libmagma.so.2");
    assert_eq!(magma, "lib/libmagma.so.2.8.0");
}

#[test]
fn links_are_understood_and_never_leave_the_tree() {
    let ins = inspect(&fixture("links"));
    let notes = &ins.input.notes;
    assert!(
        notes.iter().any(|n| n
            .starts_with("lib/libescape.so: symlink to ../../../../etc/passwd leaves the tree")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("lib/libabsolute.so.6: symlink to /usr/lib")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("lib/libloop.so.a: symlink loop")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("lib/libgroup.so: linker script")),
        "{notes:?}"
    );
    // One ELF node for the hard-linked pair, named by its shorter path.
    let files: Vec<&str> = ins.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, vec!["bin/foo_app", "lib/libfoo.so.1.2.3"]);
    let (to, how) = edge(&ins, "bin/foo_app", "libfoo.so.1");
    assert_eq!(to, "lib/libfoo.so.1.2.3");
    assert!(
        matches!(how, How::Runpath { dir, .. } | How::Rpath { dir, .. } if dir == "lib"),
        "{how:?}"
    );
    // And the real loader agrees that the program runs from this tree.
    let st = Command::new(fixture("links").join("bin/foo_app"))
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
}

/// `v` as JSON: plan parts whose types have no equality are compared as written.
fn written<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn archives_give_the_same_verdict_as_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let plan =
        |p: &std::path::Path| -> Plan { typed(&run_path(&["plan", "--json", "--quiet"], p)) };
    for name in ["conda-like", "pip-like", "eager-leak"] {
        let dir = fixture(name);
        let want = plan(&dir);
        let whl = tmp
            .path()
            .join(format!("{name}-2.5.1-cp311-cp311-linux_x86_64.whl"));
        make_wheel(&dir, &whl);
        let conda = tmp.path().join(format!("{name}-2.5.1-cuda126_h0_0.conda"));
        make_conda(&dir, &conda);
        let bz2 = tmp
            .path()
            .join(format!("{name}-2.5.1-cuda126_h0_0.tar.bz2"));
        make_tar_bz2(&dir, &bz2);
        for archive in [&whl, &conda, &bz2] {
            let got = plan(archive);
            assert_eq!(got.verdict, want.verdict, "{}", archive.display());
            assert_eq!(got.witnesses.len(), want.witnesses.len());
            assert_eq!(
                written(&got.outputs),
                written(&want.outputs),
                "{}",
                archive.display()
            );
            assert_eq!(
                written(&got.payload.files),
                written(&want.payload.files),
                "{}",
                archive.display()
            );
        }
        let conda_plan = plan(&conda);
        assert_eq!(conda_plan.input.kind, TreeKind::Conda);
        let package = conda_plan.input.package.expect("the package's metadata");
        assert_eq!(package.name, "libtorch");
    }
}

#[test]
fn dot_output_draws_lazy_edges_dashed() {
    let o = run_path(&["inspect", "--dot", "--quiet"], &fixture("conda-like"));
    let dot = stdout(&o);
    assert!(dot.starts_with("digraph load {"));
    assert!(dot.contains("style=dashed, label=\"lazy\""));
    assert!(dot.contains("label=\"libtorch_cuda_linalg.so\", shape=box, color=blue"));
}

#[test]
fn symbols_listing_has_versions_and_sizes() {
    let o = run_path(
        &["inspect", "--json", "--symbols", "--quiet"],
        &fixture("conda-like"),
    );
    let ins: InspectReport = typed(&o);
    let f = file(&ins, "lib/libtorch_cuda.so");
    let syms = f.elf.symbol_list.as_ref().expect("--symbols lists them");
    let dlopen = (syms.iter().find(|s| s.name == "dlopen")).expect("dlopen import");
    assert!(!dlopen.defined);
    assert!(
        (dlopen.version.as_deref()).is_some_and(|v| v.starts_with("GLIBC_")),
        "{dlopen:?}"
    );
    let f2 = syms.iter().find(|s| s.name == "torch_cuda_fn").unwrap();
    assert!(f2.defined);
    assert_eq!(f2.kind, "func");
    assert!(f2.size > 0);
    assert_eq!(f.elf.loader_imports, ["dlopen"]);
    let lits: Vec<&str> = (f.elf.library_literals.iter())
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(lits, vec!["libtorch_cuda_linalg.so"]);
}

/// `splitpkg [SUB] --help` as an 80-column terminal shows it.
fn help_at_80(sub: Option<&str>) -> String {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(sub)
        .arg("--help")
        .env("COLUMNS", "80")
        .env("LINES", "24");
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{sub:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn help_examples_are_not_wrapped_mid_command_at_80_columns() {
    let top = help_at_80(None);
    let subs: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line is indented by two; its wrapped description by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|s| s != "help")
        .collect();
    assert!(subs.len() >= 10, "{top}");
    // A line of an example block is a command (or a comment), or continues one that ends in `\`.
    let starts = [
        "splitpkg ",
        "pip ",
        "uv ",
        "python",
        "conda ",
        "mamba ",
        "pixi ",
        "rattler-build ",
        "cd ",
        "# ",
    ];
    for sub in std::iter::once(None).chain(subs.iter().map(|s| Some(s.as_str()))) {
        let help = help_at_80(sub);
        let block: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("Examples:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(!block.is_empty(), "{sub:?} --help has no examples:\n{help}");
        let mut continued = false;
        for line in block {
            assert!(
                line.chars().count() <= 80,
                "{sub:?}: an example is wider than 80 columns: {line:?}"
            );
            let text = line.trim_start();
            assert!(
                continued || starts.iter().any(|s| text.starts_with(s)),
                "{sub:?}: an example was wrapped mid-command: {line:?}\n{help}"
            );
            continued = text.ends_with('\\');
        }
    }
}
