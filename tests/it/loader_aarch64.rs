//! The load graph against the real AArch64 ld.so: the gcc scenarios of `tests/it/loader.rs`
//! (fixtures/loader/<rule>/build.sh) cross-compiled with Debian's `aarch64-linux-gnu-gcc` and run
//! under `qemu-aarch64 -L /usr/aarch64-linux-gnu` (`libc6-arm64-cross`: glibc 2.36), compared with
//! `splitpkg inspect --json` as loader.rs does on this machine's loader.
//!
//! The guest's environment goes through qemu's `-E` (the host's would be read by qemu's own,
//! x86-64, ld.so first); `-E` splits its value at commas, so `LD_DEBUG=files:libs` (glibc takes
//! `:` as a separator too). Under `-L` every absolute path the guest opens is tried in the sysroot
//! first: a path ld.so printed is read there when it exists (`/lib/libc.so.6`).
//!
//! Without the cross tools each test prints `SKIPPED <test>: …` and passes, unless
//! `SPLITPKG_REQUIRE_CROSS` is set (CI sets it after installing them: `.ci/run`).

use crate::common::*;
use crate::loader::{
    Request, agrees, agrees_per_request, canon, edge_in, inspect, parse_debug, parse_list,
};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

const SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// Whether the cross tools are here; without them a loud SKIPPED line, or a failure when
/// `SPLITPKG_REQUIRE_CROSS` says they must be.
fn cross(test: &str) -> bool {
    let on_path = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let have = on_path("aarch64-linux-gnu-gcc")
        && on_path("qemu-aarch64")
        && Path::new(SYSROOT)
            .join("lib/ld-linux-aarch64.so.1")
            .exists();
    if !have {
        let msg = format!("SKIPPED {test}: aarch64-linux-gnu-gcc / qemu-aarch64 not installed");
        assert!(
            std::env::var_os("SPLITPKG_REQUIRE_CROSS").is_none(),
            "{msg} (apt-get install gcc-aarch64-linux-gnu libc6-arm64-cross qemu-user), and SPLITPKG_REQUIRE_CROSS is set"
        );
        eprintln!("{msg}");
    }
    have
}

/// fixtures/loader/build.sh with `CC=aarch64-linux-gnu-gcc`, built once per test binary.
fn scenarios() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = repo()
            .join("target/fixtures")
            .join(format!("loader-aarch64-{}", std::process::id()));
        let o = Command::new("bash")
            .arg(repo().join("fixtures/loader/build.sh"))
            .arg(&out)
            .env("CC", "aarch64-linux-gnu-gcc")
            .output()
            .expect("run fixtures/loader/build.sh");
        assert!(
            o.status.success(),
            "fixtures/loader/build.sh (aarch64) failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// A scenario's tree: `<rule>/tree` where the scenario keeps things outside it, else `<rule>`.
fn tree_of(rule: &str) -> PathBuf {
    let base = scenarios().join(rule);
    let t = base.join("tree");
    if t.is_dir() { t } else { base }
}

/// Run `exe args` under qemu with the guest environment `env` (nothing inherited that a loader reads).
fn qemu(exe: &Path, args: &[&Path], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new("qemu-aarch64");
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .args(["-L", SYSROOT, "-U", "LD_LIBRARY_PATH", "-U", "LD_PRELOAD"]);
    for (k, v) in env {
        cmd.arg("-E").arg(format!("{k}={v}"));
    }
    cmd.arg(exe).args(args);
    cmd.output()
        .unwrap_or_else(|e| panic!("qemu-aarch64 {}: {e}", exe.display()))
}

/// Where the guest really opened `p`: in the sysroot when it is there (qemu's `-L` rule).
fn in_sysroot(p: PathBuf) -> PathBuf {
    let inside = p
        .strip_prefix("/")
        .ok()
        .map(|rel| Path::new(SYSROOT).join(rel));
    inside.filter(|q| q.exists()).unwrap_or(p)
}

fn trace_env(ld_library_path: Option<&Path>, debug: bool) -> Vec<(&'static str, String)> {
    let mut env = vec![("LD_TRACE_LOADED_OBJECTS", "1".to_string())];
    if debug {
        env.push(("LD_DEBUG", "files:libs".into()));
    }
    if let Some(p) = ld_library_path {
        env.push(("LD_LIBRARY_PATH", p.to_str().unwrap().to_string()));
    }
    env
}

/// The guest ld.so's trace listing of `exe`.
fn ld_list(exe: &Path, ld_library_path: Option<&Path>) -> Vec<(String, Option<PathBuf>)> {
    let o = qemu(exe, &[], &trace_env(ld_library_path, false));
    let list: Vec<_> = parse_list(&String::from_utf8_lossy(&o.stdout))
        .into_iter()
        .map(|(n, p)| (n, p.map(in_sysroot)))
        .collect();
    assert!(!list.is_empty(), "{}: {}", exe.display(), stderr(&o));
    list
}

fn requests(o: &Output) -> Vec<Request> {
    let mut reqs = parse_debug(&String::from_utf8_lossy(&o.stderr));
    for r in &mut reqs {
        r.opened = r.opened.take().map(in_sysroot);
        r.by = in_sysroot(std::mem::take(&mut r.by));
    }
    reqs
}

/// The guest ld.so's requests for program `exe` in trace mode.
fn ld_debug_program(exe: &Path, ld_library_path: Option<&Path>) -> Vec<Request> {
    let o = qemu(exe, &[], &trace_env(ld_library_path, true));
    let reqs = requests(&o);
    assert!(!reqs.is_empty(), "{}: no LD_DEBUG requests", exe.display());
    reqs
}

/// The guest ld.so's requests of the tree when `host` dlopens `lib`, and what the host printed.
fn ld_debug_dlopen(host: &Path, lib: &Path, tree: &Path) -> (Vec<Request>, String) {
    let o = qemu(host, &[lib], &[("LD_DEBUG", "files:libs".into())]);
    let tree_c = canon(tree);
    let reqs = (requests(&o).into_iter())
        .filter(|r| r.by.is_absolute() && canon(&r.by).starts_with(&tree_c))
        .collect();
    (reqs, stdout(&o))
}

/// The tree's programs (`bin/*`, tree-relative).
fn programs(tree: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(tree.join("bin"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| format!("bin/{}", e.file_name().to_str().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Every program of every scenario: each request the AArch64 ld.so made (and every file its trace
/// listing names) is the edge `inspect` gives in that program's process, and every edge
/// `inspect` searches is one of ld.so's requests.
#[test]
fn every_scenario_program_loads_as_the_model_says_under_the_aarch64_ld_so() {
    if !cross("every_scenario_program_loads_as_the_model_says_under_the_aarch64_ld_so") {
        return;
    }
    let mut checked = 0;
    let mut rules: Vec<String> = std::fs::read_dir(scenarios())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
        .collect();
    rules.sort();
    for rule in &rules {
        let t = tree_of(rule);
        let ins = inspect(&t, &[]);
        for exe in programs(&t) {
            let reqs = ld_debug_program(&t.join(&exe), None);
            agrees_per_request(&t, &ins, &exe, &reqs, true);
            // The trace listing names each file once: a name several objects request (and
            // resolve differently) is judged by the requests alone, as loader.rs does.
            let mut names: Vec<&str> = reqs.iter().map(|r| r.name.as_str()).collect();
            names.sort();
            let n = names.len();
            names.dedup();
            if names.len() == n {
                agrees(&t, &ins, &exe, &ld_list(&t.join(&exe), None));
            }
            checked += 1;
        }
    }
    // Every rule but class32 (no 32-bit AArch64 build) has at least one program.
    assert!(rules.len() >= 14 && checked >= 15, "{rules:?}: {checked}");
    let class = inspect(&tree_of("class"), &[]);
    let (to, _) = edge_in(&class, "bin/app", "bin/app", "libcm.so");
    assert_eq!(to, "lib/libcm.so", "the x86-64 copy in other/ is skipped");
}

/// LD_LIBRARY_PATH comes after DT_RPATH and before DT_RUNPATH on AArch64 too.
#[test]
fn ld_library_path_is_ordered_as_the_aarch64_ld_so_orders_it() {
    if !cross("ld_library_path_is_ordered_as_the_aarch64_ld_so_orders_it") {
        return;
    }
    let t = tree_of("ld-library-path");
    let ldp = t.join("ldp");
    let ins = inspect(&t, &["--ld-library-path", ldp.to_str().unwrap()]);
    let exe = t.join("bin/app");
    agrees_per_request(
        &t,
        &ins,
        "bin/app",
        &ld_debug_program(&exe, Some(&ldp)),
        true,
    );
    agrees(&t, &ins, "bin/app", &ld_list(&exe, Some(&ldp)));
    let (to, how) = edge_in(&ins, "bin/app", "rp/libv.so", "libw.so");
    assert_eq!(
        (to, &how["via"]),
        ("ldp/libw.so", &Value::from("ld-library-path"))
    );
}

/// Libraries dlopened by a program outside the tree (ctypes' case): only their own search path,
/// libc reused from the program, a nodeflib library's libm not found; the first loader's chain.
#[test]
fn dlopened_libraries_load_as_the_model_says_under_the_aarch64_ld_so() {
    if !cross("dlopened_libraries_load_as_the_model_says_under_the_aarch64_ld_so") {
        return;
    }
    for (rule, lib, printed) in [
        ("on-its-own", "lib/liba.so", "error libb.so: cannot open"),
        ("nodeflib-dlopen", "lib/libndc.so", "/lib/libndc.so\n"),
        (
            "nodeflib-dlopen",
            "lib/libndtop.so",
            "error libm.so.6: cannot open",
        ),
        ("already-loaded", "lib/_C.so", "/lib/_C.so\n"),
    ] {
        let t = tree_of(rule);
        let ins = inspect(&t, &[]);
        let host = scenarios().join(rule).join("host");
        let (reqs, out) = ld_debug_dlopen(&host, &t.join(lib), &t);
        assert!(out.contains(printed), "{rule} {lib}: {out}");
        agrees_per_request(&t, &ins, lib, &reqs, rule == "already-loaded");
    }
}

/// glibc 2.36's legacy hwcap subdirectories on AArch64: `tls/` and the platform's `aarch64/` are
/// searched before a directory's own file; `glibc-hwcaps/x86-64-v2` is another machine's and
/// skipped (the x86-64 loader takes it: loader::hwcaps_subdirectories_are_searched_first).
#[test]
fn the_aarch64_hwcap_subdirectories_are_searched_first() {
    if !cross("the_aarch64_hwcap_subdirectories_are_searched_first") {
        return;
    }
    let ld_so = Path::new(SYSROOT).join("lib/ld-linux-aarch64.so.1");
    let help = stdout(&qemu(&ld_so, &[Path::new("--help")], &[]));
    if !help.contains("Legacy HWCAP subdirectories") {
        eprintln!(
            "NOTE: the cross glibc (2.37 or later) searches no legacy hwcap subdirectories: {help}"
        );
        return;
    }
    let t = tree_of("hwcaps");
    let ins = inspect(&t, &[]);
    agrees(&t, &ins, "bin/app", &ld_list(&t.join("bin/app"), None));
    for (name, file, dir) in [
        ("libh.so", "lib/tls/libh.so", "lib/tls"),
        ("libg.so", "lib/libg.so", "lib"),
        ("libp.so", "lib/aarch64/libp.so", "lib/aarch64"),
    ] {
        let (to, how) = edge_in(&ins, "bin/app", "bin/app", name);
        assert_eq!(
            (to, &how["via"], &how["dir"]),
            (file, &Value::from("runpath"), &Value::from(dir))
        );
    }
}

/// The default directories: libc.so.6 comes from the AArch64 multiarch and plain system
/// directories, in the order `splitpkg::analysis::hwcaps::default_dirs` has them (which
/// `verify-variant` searches), never an x86-64 one; the model calls it a system library.
#[test]
fn the_system_search_path_is_the_aarch64_multiarch_one() {
    if !cross("the_system_search_path_is_the_aarch64_multiarch_one") {
        return;
    }
    let t = tree_of("on-its-own");
    let o = qemu(&t.join("bin/app"), &[], &trace_env(None, true));
    let text = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("(system search path)"))
        .unwrap_or_else(|| panic!("no system search path: {text}"));
    let path = line.split("search path=").nth(1).unwrap();
    let path = path.split_whitespace().next().unwrap();
    // ld.so lists each directory's hwcap subdirectories before it: keep the directories.
    let subs = splitpkg::analysis::hwcaps::subdirs("AARCH64");
    let mut dirs: Vec<&str> = path
        .split(':')
        .filter(|d| !subs.iter().any(|s| d.ends_with(&format!("/{s}"))))
        .collect();
    dirs.dedup();
    assert_eq!(
        dirs,
        [
            "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/lib",
            "/usr/lib"
        ]
    );
    let model = splitpkg::analysis::hwcaps::default_dirs("AARCH64");
    let at: Vec<usize> = dirs
        .iter()
        .map(|d| {
            model
                .iter()
                .position(|m| m == d)
                .unwrap_or_else(|| panic!("{d}: {model:?}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{model:?}");
    assert!(model.contains(&format!("{SYSROOT}/lib")));
    let ins = inspect(&t, &[]);
    let (_, how) = edge_in(&ins, "bin/app", "bin/app", "libc.so.6");
    assert_eq!(how["via"], "system");
}

/// Every command on PyPI's torch 2.11 aarch64 wheel (CUDA 13, built without MAGMA): `inspect` and
/// `plan` read its AArch64 ELF files (NOT PRESENT: no payload, the lazy library found and small),
/// `fatbin` its device code (sm_90 among the SASS targets, no PTX), `emit`, `pack` and `wheel`
/// refuse it with one line (there is nothing to split), `verify-variant` passes its lazy library as
/// nomagma against its own plan, with libc looked up in the AArch64 directories.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn every_command_reads_the_torch_2_11_aarch64_wheel() {
    let (whl, tree) = corpus("torch-2.11.0-cu130-aarch64", true);
    let tree = tree.unwrap();
    let ins = json(&run_path(&["inspect", "--json", "--quiet"], &whl));
    let nodes = ins["nodes"].as_array().unwrap();
    let lazy = nodes
        .iter()
        .find(|n| n["name"] == "torch/lib/libtorch_cuda_linalg.so")
        .unwrap();
    assert_eq!(lazy["reach"], "lazy", "{lazy}");
    let d = tempfile::tempdir().unwrap();
    let plan_path = d.path().join("plan.json");
    let o = run(&["plan", "-q", "--json", whl.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::fs::write(&plan_path, &o.stdout).unwrap();
    let plan = json(&o);
    assert_eq!(plan["verdict"], "not-present");
    let size = plan["lazy_library"]["size"]
        .as_u64()
        .unwrap_or_else(|| panic!("{}", plan["lazy_library"]));
    assert!(
        (700 << 10..800 << 10).contains(&size),
        "742 KiB class: {size}"
    );

    let o = run(&["fatbin", "-q", "--json", whl.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = json(&o).to_string();
    assert!(
        text.contains("\"sm_90\"") && text.contains("\"sm_80\""),
        "{text:.2000}"
    );

    let out = d.path().join("out");
    for (cmd, word) in [("emit", "emit"), ("pack", "pack"), ("wheel", "split")] {
        let input = if cmd == "emit" { &plan_path } else { &whl };
        let o = run(&[
            cmd,
            "-q",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        assert!(
            err.contains("NOT PRESENT") && err.contains(word),
            "{cmd}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{cmd}: {err}");
        assert!(!out.exists(), "{cmd} wrote something");
    }

    let lib = tree.join("lib/libtorch_cuda_linalg.so");
    let o = run(&[
        "verify-variant",
        lib.to_str().unwrap(),
        "--variant",
        "nomagma",
        "--plan",
        plan_path.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert!(
        text.contains("exports what the stock provides    all 192 present"),
        "{text}"
    );
    if Path::new(SYSROOT).join("lib/libc.so.6").exists() {
        // The cross sysroot is one of an AArch64 library's system directories.
        let note = text.lines().find(|l| l.contains("imports")).unwrap_or("");
        assert!(!note.contains("libc.so.6"), "{text}");
    }
}

/// splitpkg's own conda recipe renders for linux-aarch64 as for linux-64: the same script, the
/// target platform's compilers and sysroot.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn the_conda_recipe_renders_for_linux_aarch64() {
    let r: serde_json::Value = ["linux-64", "linux-aarch64"]
        .into_iter()
        .map(|tp| (tp.to_string(), crate::ship::render_own_recipe(Some(tp))))
        .collect::<serde_json::Map<_, _>>()
        .into();
    for (tp, arch) in [("linux-64", "linux-64"), ("linux-aarch64", "linux-aarch64")] {
        let all = r[tp].as_array().unwrap();
        assert_eq!(all.len(), 1, "{r}");
        assert_eq!(all[0]["variant"]["target_platform"], tp);
        assert_eq!(
            all[0]["recipe"]["requirements"]["build"],
            serde_json::json!([
                format!("sysroot_{arch} 2.28.*"),
                format!("gcc_{arch} 14.*"),
                format!("rust_{arch} 1.91.*"),
                "cargo-bundle-licenses",
                "cargo-auditable"
            ])
        );
    }
    // The same script; the build strings differ (a hash of the variant, target platform included).
    assert_eq!(
        r["linux-64"][0]["recipe"]["build"]["script"],
        r["linux-aarch64"][0]["recipe"]["build"]["script"]
    );
}

/// `smoke --replay` of a run recorded on x86-64, its environment moved to an AArch64 layout (a
/// GH200's venv, python 3.11): the judgements are the same, they depend on no machine's paths.
#[test]
fn a_smoke_replay_is_judged_the_same_with_aarch64_paths() {
    let src = repo().join("tests/data/smoke-synthetic-ok.json");
    let text = std::fs::read_to_string(&src).unwrap();
    let moved = text.replace(
        "/opt/torch/.venv/lib/python3.12/site-packages",
        "/home/ubuntu/gh200-aarch64/.venv/lib/python3.11/site-packages",
    );
    assert_ne!(text, moved);
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("smoke-aarch64.json");
    std::fs::write(&f, moved).unwrap();
    let judge = |p: &Path| {
        let o = run(&["smoke", "--replay", p.to_str().unwrap(), "--json"]);
        let mut v = json(&o);
        v["options"]["replayed_from"] = Value::Null;
        (
            o.status.code(),
            v["summary"].clone(),
            v["variants"].as_array().unwrap().len(),
        )
    };
    let (code, summary, n) = judge(&f);
    assert_eq!(
        (code, &summary["ok"]),
        (Some(0), &Value::from(true)),
        "{summary}"
    );
    assert_eq!((code, summary, n), judge(&src));
}
