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

use splitpkg::analysis::graph::{How, Reach};
use splitpkg::analysis::plan::Plan;
use splitpkg::analysis::verdict::Verdict;
use splitpkg::smoke::SmokeReport;

use crate::inspect::node;

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
    assert_eq!(to, "ldp/libw.so");
    assert!(matches!(how, How::LdLibraryPath { .. }), "{how:?}");
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
        assert_eq!(to, file);
        assert!(
            matches!(how, How::Runpath { dir: d, .. } if d == dir),
            "{how:?}"
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
    assert!(matches!(how, How::System { .. }), "{how:?}");
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
    let ins = inspect(&whl, &[]);
    let lazy = node(&ins, "torch/lib/libtorch_cuda_linalg.so");
    assert_eq!(lazy.reach, Reach::Lazy, "{lazy:?}");
    let d = tempfile::tempdir().unwrap();
    let plan_path = d.path().join("plan.json");
    let o = run(&["plan", "-q", "--json", whl.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    std::fs::write(&plan_path, &o.stdout).unwrap();
    let plan: Plan = typed(&o);
    assert_eq!(plan.verdict, Verdict::NotPresent);
    let size = plan.lazy_library.as_ref().expect("the lazy library").size;
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
        let r: SmokeReport = typed(&o);
        (o.status.code(), r.summary, r.variants.len())
    };
    let (code, summary, n) = judge(&f);
    assert_eq!((code, summary.ok), (Some(0), true), "{summary:?}");
    assert_eq!((code, summary, n), judge(&src));
}

// ld.so.conf -------------------------------------------------------------------------------------
// A private root for qemu's `-L`: its `lib` is the cross sysroot's, its `etc/ld.so.conf` includes
// `ld.so.conf.d/*.conf` naming two test directories, and its `etc/ld.so.cache` is built from that
// conf. Under `-L ROOT` the guest's ld.so opens `/etc/ld.so.cache` as `ROOT/etc/ld.so.cache` (the
// host's x86-64 cache otherwise), so the scenario isolates the cache.

/// Debian's AArch64 `ldconfig` (package `libc-bin`, arm64; a static binary qemu runs without a
/// sysroot): `SPLITPKG_AARCH64_LDCONFIG`, else the one unpacked in the corpus cache, else (full
/// tier only, network) the `libc-bin_<this system's version>_arm64.deb` of deb.debian.org unpacked
/// there. `None` where none is to be had: the test then writes the cache itself (a stand-in).
fn aarch64_ldconfig() -> Option<PathBuf> {
    // Once per test binary: the scenario's tests run side by side.
    static LDCONFIG: OnceLock<Option<PathBuf>> = OnceLock::new();
    LDCONFIG.get_or_init(find_aarch64_ldconfig).clone()
}

fn find_aarch64_ldconfig() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SPLITPKG_AARCH64_LDCONFIG") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("SPLITPKG_CORPUS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|c| Path::new(&c).join("splitpkg-corpus"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/splitpkg-corpus"))
        })?;
    let version = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "libc-bin"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| stdout(&o))?;
    let dir = cache.join(format!("libc-bin-arm64-{version}"));
    let ldconfig = dir.join("sbin/ldconfig");
    if !ldconfig.exists() && cfg!(feature = "full-tests") {
        // Fetched and unpacked under temporary names, renamed into place when whole.
        let url =
            format!("http://deb.debian.org/debian/pool/main/g/glibc/libc-bin_{version}_arm64.deb");
        let tmp = tempfile::tempdir_in(&cache).unwrap();
        let deb = tmp.path().join("libc-bin.deb");
        let fetched = Command::new("curl")
            .args(["-fsS", "-m", "120", "-o"])
            .arg(&deb)
            .arg(&url)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("dpkg-deb")
                .arg("-x")
                .arg(&deb)
                .arg(tmp.path().join("x"))
                .status()
                .is_ok_and(|s| s.success())
            && std::fs::rename(tmp.path().join("x"), &dir).is_ok();
        if !fetched {
            eprintln!("NOTE: {url} not fetched: the ld.so.cache is the test's stand-in");
        }
    }
    ldconfig.exists().then_some(ldconfig)
}

/// `_dl_cache_libcmp`'s order for names without digits (the scenario's): bytes, descending (the
/// cache's order: ld.so's binary search goes right for a smaller name).
fn cache_order(a: &str, b: &str) -> std::cmp::Ordering {
    assert!(!a.bytes().chain(b.bytes()).any(|c| c.is_ascii_digit()));
    b.cmp(a)
}

/// STAND-IN for `ldconfig`'s output, used where no AArch64 ldconfig is to be had: glibc's
/// `ld.so.cache` in its current format (`glibc-ld.so.cache1.1`, little-endian, no extension
/// section) holding `entries` (SONAME, path) as AArch64 libc6 libraries; equal names keep the
/// given order (ldconfig's: the conf's directories in order, then the default ones). Where the
/// real ldconfig runs, the test checks that it lists this file as it lists its own cache.
fn standin_cache(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| cache_order(a.0, b.0));
    let start = 48 + 24 * sorted.len();
    let mut strings = Vec::new();
    let mut table = Vec::new();
    for (key, path) in &sorted {
        let mut at = |s: &str| {
            let off = (start + strings.len()) as u32;
            strings.extend_from_slice(s.as_bytes());
            strings.push(0);
            off
        };
        let (k, v) = (at(key), at(path));
        table.extend_from_slice(&0x0a03i32.to_le_bytes()); // FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
        table.extend_from_slice(&k.to_le_bytes());
        table.extend_from_slice(&v.to_le_bytes());
        table.extend_from_slice(&[0; 12]); // osversion, hwcap
    }
    let mut out = b"glibc-ld.so.cache1.1".to_vec();
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    out.extend_from_slice(&[2, 0, 0, 0]); // little-endian
    out.extend_from_slice(&[0; 16]); // no extensions; unused
    out.extend(table);
    out.extend(strings);
    out
}

/// The scenario's root (`root/`), its programs (`bin/`) and the RUNPATH and LD_LIBRARY_PATH
/// directories (`rp/`, `ldp/`), in a temporary directory. Every library exports `where()`; the
/// programs print it, so a run shows which copy was loaded.
struct ConfRoot {
    dir: tempfile::TempDir,
    /// Whether `etc/ld.so.cache` is the real ldconfig's.
    real: bool,
}

impl ConfRoot {
    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    fn at(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
}

/// What the cache holds for the scenario (SONAME, path), in ldconfig's order for equal names.
const CACHED: [(&str, &str); 6] = [
    ("libo.so", "/opt/conf-a/libo.so"),
    ("liby.so", "/opt/conf-a/liby.so"),
    ("libo.so", "/opt/conf-b/libo.so"),
    ("libconf.so", "/opt/conf-b/libconf.so"),
    ("libns.so", "/opt/conf-b/libns.so"),
    ("libo.so", "/usr/lib/aarch64-linux-gnu/libo.so"),
];

fn aarch64_so(dir: &Path, file: &str, soname: Option<&str>, src: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = Command::new("aarch64-linux-gnu-gcc");
    cmd.args(["-shared", "-fPIC", "-o"])
        .arg(dir.join(file))
        .arg(src);
    if let Some(s) = soname {
        cmd.arg(format!("-Wl,-soname,{s}"));
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

fn conf_root() -> ConfRoot {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = d.join("root");
    write_ld_so_conf(&root);
    let src = |w: &str| {
        let f = d.join(format!("{w}.c"));
        std::fs::write(
            &f,
            format!("const char *where(void) {{ return \"{w}\"; }}\n"),
        )
        .unwrap();
        f
    };
    for (sub, w) in [
        ("rp", "rp"),
        ("ldp", "ldp"),
        ("root/opt/conf-a", "conf-a"),
        ("root/opt/conf-b", "conf-b"),
        ("root/opt/conf-c", "conf-c"),
        ("root/usr/lib/aarch64-linux-gnu", "default"),
    ] {
        aarch64_so(&d.join(sub), "libo.so", Some("libo.so"), &src(w));
    }
    aarch64_so(
        &root.join("opt/conf-b"),
        "libconf.so",
        Some("libconf.so"),
        &src("conf-b"),
    );
    // Named libx.so, SONAME liby.so: ldconfig records it as liby.so only.
    aarch64_so(
        &root.join("opt/conf-a"),
        "libx.so",
        Some("liby.so"),
        &src("conf-a"),
    );
    // No SONAME: recorded under its file name.
    aarch64_so(&root.join("opt/conf-b"), "libns.so", None, &src("conf-b"));
    // Link-time stand-ins for the programs' NEEDED names.
    for name in ["libconf.so", "libx.so", "libns.so"] {
        aarch64_so(&d.join("link"), name, Some(name), &src("link"));
    }
    link_conf_programs(d);
    let real = build_cache(&root);
    ConfRoot { dir, real }
}

/// `root/etc/ld.so.conf` and its include directory, `root/lib` the sysroot's.
fn write_ld_so_conf(root: &Path) {
    std::fs::create_dir_all(root.join("etc/ld.so.conf.d")).unwrap();
    std::os::unix::fs::symlink(Path::new(SYSROOT).join("lib"), root.join("lib")).unwrap();
    // A relative include (relative to ld.so.conf's directory), comments, a trailing slash; a
    // file the include's pattern does not match names a directory nobody may search.
    std::fs::write(
        root.join("etc/ld.so.conf"),
        "# test\ninclude ld.so.conf.d/*.conf\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/ld.so.conf.d/10-test.conf"),
        "/opt/conf-a/  # first\n\n/opt/conf-b\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/ld.so.conf.d/README"), "/opt/conf-c\n").unwrap();
}

/// `d/bin/{plain,runpath,conf,misnamed,nosoname}`: one program each, printing where the library
/// it was given came from.
fn link_conf_programs(d: &Path) {
    let main = d.join("main.c");
    std::fs::write(
        &main,
        "#include <stdio.h>\nconst char *where(void);\nint main(void) { puts(where()); return 0; }\n",
    )
    .unwrap();
    std::fs::create_dir_all(d.join("bin")).unwrap();
    for (exe, extra) in [
        (
            "plain",
            vec!["-L".into(), s(&d.join("rp")).to_string(), "-lo".into()],
        ),
        (
            "runpath",
            vec![
                "-L".into(),
                s(&d.join("rp")).to_string(),
                "-lo".into(),
                format!("-Wl,--enable-new-dtags,-rpath,{}", s(&d.join("rp"))),
            ],
        ),
        (
            "conf",
            vec!["-L".into(), s(&d.join("link")).to_string(), "-lconf".into()],
        ),
        (
            "misnamed",
            vec!["-L".into(), s(&d.join("link")).to_string(), "-lx".into()],
        ),
        (
            "nosoname",
            vec!["-L".into(), s(&d.join("link")).to_string(), "-lns".into()],
        ),
    ] {
        let o = Command::new("aarch64-linux-gnu-gcc")
            .arg("-o")
            .arg(d.join("bin").join(exe))
            .arg(&main)
            .args(&extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{exe}: {}", stderr(&o));
    }
}

/// `root/etc/ld.so.cache` from `root/etc/ld.so.conf`: Debian's AArch64 ldconfig (`-r root`, as a
/// system image's cache is built; `-X`: no links made) where there is one, then checked against
/// the stand-in; the stand-in otherwise. Whether the cache is the real one.
fn build_cache(root: &Path) -> bool {
    let cache = root.join("etc/ld.so.cache");
    let standin = standin_cache(&CACHED);
    let Some(ldconfig) = aarch64_ldconfig() else {
        eprintln!(
            "NOTE: no AArch64 ldconfig (SPLITPKG_AARCH64_LDCONFIG): the ld.so.cache is the test's stand-in"
        );
        std::fs::write(&cache, standin).unwrap();
        return false;
    };
    let o = Command::new("qemu-aarch64")
        .arg(&ldconfig)
        .arg("-r")
        .arg(root)
        .arg("-X")
        .output()
        .unwrap();
    if !o.status.success() || !cache.exists() {
        eprintln!(
            "NOTE: {} -r failed ({}): the ld.so.cache is the test's stand-in",
            ldconfig.display(),
            stderr(&o)
        );
        std::fs::write(&cache, standin).unwrap();
        return false;
    }
    // The real ldconfig lists the stand-in as it lists its own cache.
    let list = |c: &Path| -> Vec<String> {
        let o = Command::new("qemu-aarch64")
            .arg(&ldconfig)
            .arg("-p")
            .arg("-C")
            .arg(c)
            .output()
            .unwrap();
        stdout(&o)
            .lines()
            .filter(|l| l.starts_with('\t'))
            .map(str::to_string)
            .collect()
    };
    let mine = root.join("../standin.cache");
    std::fs::write(&mine, standin).unwrap();
    assert_eq!(list(&cache), list(&mine));
    assert_eq!(list(&cache).len(), CACHED.len());
    true
}

/// The guest's run of `exe` under `-L root` (`LD_DEBUG=files:libs`, in trace mode when `trace`): what it printed
/// on stdout and its ld.so's account.
fn run_in_root(
    r: &ConfRoot,
    exe: &str,
    ld_library_path: Option<&Path>,
    trace: bool,
) -> (String, String) {
    let mut cmd = Command::new("qemu-aarch64");
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD")
        .arg("-L")
        .arg(r.root());
    cmd.args([
        "-U",
        "LD_LIBRARY_PATH",
        "-U",
        "LD_PRELOAD",
        "-E",
        "LD_DEBUG=files:libs",
    ]);
    if trace {
        cmd.args(["-E", "LD_TRACE_LOADED_OBJECTS=1"]);
    }
    if let Some(p) = ld_library_path {
        cmd.arg("-E").arg(format!("LD_LIBRARY_PATH={}", s(p)));
    }
    let o = cmd.arg(r.at("bin").join(exe)).output().unwrap();
    (stdout(&o), stderr(&o))
}

/// Where ld.so's account (`LD_DEBUG=files:libs`) says it found `name`, and how: the file it
/// opened (the last one tried before it mapped one) and whether the search that found it was the
/// cache's (the last `search` line before that `trying file`). `None`: not found.
fn found_by_ld_so(account: &str, name: &str) -> Option<(String, bool)> {
    let block = account.split(&format!("find library={name} ")).nth(1)?;
    let block = block.split("find library=").next().unwrap();
    let mut via_cache = false;
    let mut last = None;
    for l in block
        .lines()
        .map(|l| l.split_once(":\t").map_or(l, |x| x.1).trim())
    {
        if l.starts_with("search cache=") {
            via_cache = true;
        } else if l.starts_with("search path=") {
            via_cache = false;
        } else if let Some(t) = l.strip_prefix("trying file=") {
            last = Some((t.to_string(), via_cache));
        }
    }
    last.filter(|_| block.contains(&format!("file={name} [0];  generating link map")))
}

/// The model's answer for program `exe`: `splitpkg::recipe::needed::resolve_in` with the root.
fn model(r: &ConfRoot, exe: &str, lib_dirs: &[PathBuf]) -> splitpkg::recipe::needed::Resolution {
    let p = r.at("bin").join(exe);
    let bytes = std::fs::read(&p).unwrap();
    let view = splitpkg::elf::ElfView::parse(&bytes).unwrap();
    let facts = view.facts(&[], None).unwrap();
    splitpkg::recipe::needed::resolve_in(&r.root(), &p, &view, &facts, lib_dirs)
}

/// A library found only through an `ld.so.conf` directory: the AArch64 ld.so takes it from the
/// cache (`search cache=/etc/ld.so.cache`, no path search), and the model, given that root,
/// resolves the same file; the conf's directories are the ones ldconfig read.
#[test]
fn ld_so_conf_directories_are_found_as_the_aarch64_ld_so_finds_them_through_the_cache() {
    if !cross("ld_so_conf_directories_are_found_as_the_aarch64_ld_so_finds_them_through_the_cache")
    {
        return;
    }
    let r = conf_root();
    assert_eq!(
        splitpkg::recipe::needed::conf_dirs(&r.root()),
        ["/opt/conf-a", "/opt/conf-b"]
    );
    let (out, account) = run_in_root(&r, "conf", None, false);
    assert_eq!(out.trim(), "conf-b", "{account}");
    assert_eq!(
        found_by_ld_so(&account, "libconf.so"),
        Some(("/opt/conf-b/libconf.so".to_string(), true)),
        "{account}"
    );
    let m = model(&r, "conf", &[]);
    let at = m
        .found
        .iter()
        .find(|(n, _)| n == "libconf.so")
        .map(|(_, p)| p.clone());
    assert_eq!(at, Some(r.root().join("opt/conf-b/libconf.so")), "{m:?}");
    // No SONAME: cached under its file name, found by both.
    let (out, account) = run_in_root(&r, "nosoname", None, false);
    assert_eq!(out.trim(), "conf-b", "{account}");
    let m = model(&r, "nosoname", &[]);
    assert!(
        m.found
            .iter()
            .any(|(n, p)| n == "libns.so" && *p == r.root().join("opt/conf-b/libns.so")),
        "{m:?}"
    );
    // A file libx.so whose SONAME is liby.so is cached as liby.so only: ld.so does not find
    // libx.so, and neither does the model (it used to, looking in the directory by file name).
    let (_, account) = run_in_root(&r, "misnamed", None, true);
    assert_eq!(found_by_ld_so(&account, "libx.so"), None, "{account}");
    assert!(
        model(&r, "misnamed", &[])
            .not_found
            .contains(&"libx.so".to_string())
    );
    eprintln!(
        "ld.so.cache: {}",
        if r.real {
            "Debian's AArch64 ldconfig"
        } else {
            "the test's stand-in"
        }
    );
}

/// The order the model claims: RUNPATH and LD_LIBRARY_PATH before the cache, the cache (its
/// directories in the conf's order) before the default directories; each as the AArch64 ld.so
/// loads it (the program prints the copy it got).
#[test]
fn ld_so_conf_directories_come_after_runpath_and_ld_library_path_and_before_the_defaults() {
    if !cross(
        "ld_so_conf_directories_come_after_runpath_and_ld_library_path_and_before_the_defaults",
    ) {
        return;
    }
    let r = conf_root();
    let ldp = r.at("ldp");
    for (exe, ld_library_path, copy) in [
        ("runpath", None, r.at("rp/libo.so")),
        ("plain", Some(&ldp), r.at("ldp/libo.so")),
        ("plain", None, r.root().join("opt/conf-a/libo.so")),
    ] {
        let (out, account) = run_in_root(&r, exe, ld_library_path.map(PathBuf::as_path), false);
        let printed = copy
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(out.trim(), printed, "{exe}: {account}");
        let (opened, via_cache) = found_by_ld_so(&account, "libo.so").unwrap();
        assert_eq!(
            via_cache,
            ld_library_path.is_none() && exe == "plain",
            "{account}"
        );
        // ld.so names a cached path as on the guest's system: the root's copy under -L.
        let opened = Path::new(&opened);
        let in_root = r.root().join(opened.strip_prefix("/").unwrap());
        assert!(
            *opened == copy || in_root == copy,
            "{exe}: {} not {}",
            opened.display(),
            copy.display()
        );
        let dirs: Vec<PathBuf> = ld_library_path.into_iter().cloned().collect();
        let m = model(&r, exe, &dirs);
        let at = m
            .found
            .iter()
            .find(|(n, _)| n == "libo.so")
            .map(|(_, p)| p.clone());
        assert_eq!(at, Some(copy), "{exe}: {m:?}");
    }
    // Without the conf directories' copies (the cache still naming them: ld.so fails to open
    // its entry and searches on), the default directory's is next, for both.
    for d in ["opt/conf-a/libo.so", "opt/conf-b/libo.so"] {
        std::fs::remove_file(r.root().join(d)).unwrap();
    }
    let (out, account) = run_in_root(&r, "plain", None, false);
    assert_eq!(out.trim(), "default", "{account}");
    let m = model(&r, "plain", &[]);
    let at = m
        .found
        .iter()
        .find(|(n, _)| n == "libo.so")
        .map(|(_, p)| p.clone());
    assert_eq!(
        at,
        Some(r.root().join("usr/lib/aarch64-linux-gnu/libo.so")),
        "{m:?}"
    );
}
