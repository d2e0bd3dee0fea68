//! `splitpkg feedstock`: the mini feedstock (fixtures/feedstock) patched, refused shapes, the
//! patch idempotent and equal to the diff it prints; `splitpkg build-variant` on the mini
//! feedstock's staging tree (reproducible bytes, the compiler from $CXX and nothing else on PATH,
//! clean-up on failure and on signals); in the full tier the patched mini feedstock built by real rattler-build offline and
//! the real conda-forge PR #518 recipe rendered by real rattler-build (from SPLITPKG_FEEDSTOCK).

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_yaml::Value;
use splitpkg::document::Document as _;
use splitpkg::recipe::build::BuildReport;
use splitpkg::recipe::verify::VerifyReport;

/// Where `feedstock` puts the has_magma source patch in the mini feedstock (which lists none).
const HAS_MAGMA_PATCH: &str =
    "recipe/patches/0001-splitpkg-hasMAGMA-answers-from-installed-files.patch";

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A copy of the mini feedstock (the command edits files in place with --write).
pub(crate) fn mini() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", repo().join("fixtures/feedstock").display()))
        .arg(d.path())
        .status()
        .unwrap();
    assert!(st.success());
    d
}

pub(crate) fn feedstock(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["feedstock", s(dir)];
    args.extend_from_slice(extra);
    run(&args)
}

/// Every file of the feedstock, for "nothing changed" checks.
pub(crate) fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    walk(dir)
        .into_iter()
        .map(|(rel, p)| (rel, std::fs::read(&p).unwrap_or_default()))
        .collect()
}

pub(crate) fn one_line_refusal(o: &Output, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.contains(needle), "{needle:?} in {e}");
    assert!(stdout(o).is_empty(), "no diff on a refusal: {}", stdout(o));
}

pub(crate) fn output<'a>(recipe: &'a Value, name: &str) -> &'a Value {
    recipe["outputs"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|o| o["package"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no output {name}"))
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        Value::Mapping(m) => m
            .iter()
            .flat_map(|(k, v)| strings(k).into_iter().chain(strings(v)))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn patches_the_mini_feedstock_once_and_the_diff_is_the_patch() {
    let d = mini();
    let before = snapshot(d.path());
    let o = feedstock(d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    assert_eq!(
        snapshot(d.path()),
        before,
        "without --write nothing is written"
    );
    for want in [
        "--- a/recipe/recipe.yaml",
        "+++ b/recipe/build.sh",
        "+      name: libtorch-cuda-linalg",
        "+    inherit: libtorch-build",
        "+      string: ${{ flavor }}_${{ linalg_variant }}_${{ hash }}_${{ build_number }}",
        "+            - libtorch-cuda-linalg ==${{ version }} ${{ flavor }}_*_${{ build_number }}",
        "-                - torch_cuda_linalg",
        "-  build_base: 0",
        "+  build_base: 1",
        "+    rm -f ${PREFIX}/lib/libtorch_cuda_linalg.so",
        "+linalg_variant:",
    ] {
        assert!(diff.contains(want), "{want:?} in the diff:\n{diff}");
    }
    the_diff_applies_to_exactly_what_write_writes(d.path(), &diff);
    the_patched_recipe_has_the_split_models_relations(d.path());
    // Second run: nothing to do.
    let patched = snapshot(d.path());
    for extra in [&[][..], &["--write"][..]] {
        let again = feedstock(d.path(), extra);
        assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
        assert_eq!(stdout(&again), "", "empty diff the second time");
        assert_eq!(snapshot(d.path()), patched);
    }
}

/// The printed diff applies with patch(1) to exactly what --write writes (in the feedstock `d`),
/// and build.sh stays executable.
fn the_diff_applies_to_exactly_what_write_writes(d: &Path, diff: &str) {
    let by_patch = mini();
    let mut p = Command::new("patch")
        .args(["-p1", "-s", "-d", s(by_patch.path())])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(p.stdin.as_mut().unwrap(), diff.as_bytes()).unwrap();
    assert!(p.wait().unwrap().success(), "patch -p1 applies the diff");
    let w = feedstock(d, &["--write"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    assert_eq!(stdout(&w), diff, "--write prints the same diff");
    for f in [
        "recipe/recipe.yaml",
        "recipe/build.sh",
        "recipe/conda_build_config.yaml",
        HAS_MAGMA_PATCH,
    ] {
        assert_eq!(
            std::fs::read(d.join(f)).unwrap(),
            std::fs::read(by_patch.path().join(f)).unwrap(),
            "{f}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    assert!(
        std::fs::metadata(d.join("recipe/build.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o111
            != 0,
        "build.sh stays executable"
    );
}

/// The patched recipe in the feedstock `d`: the relations of the split model, where the issue puts
/// them; the has_magma source patch applies; build.sh builds and verifies each variant.
fn the_patched_recipe_has_the_split_models_relations(d: &Path) {
    let recipe: Value =
        serde_yaml::from_str(&std::fs::read_to_string(d.join("recipe/recipe.yaml")).unwrap())
            .unwrap();
    // The has_magma source patch: a new file, listed in the source's patches, and it applies to
    // the fixture's CUDAHooks.cpp.
    assert_eq!(
        strings(&recipe["source"][0]["patches"]),
        [HAS_MAGMA_PATCH.strip_prefix("recipe/").unwrap()]
    );
    let applies = Command::new("patch")
        .args(["-p1", "--dry-run", "-s", "-d"])
        .arg(d.join("src"))
        .arg("-i")
        .arg(d.join(HAS_MAGMA_PATCH))
        .status()
        .unwrap();
    assert!(
        applies.success(),
        "the source patch applies to the fixture's sources"
    );
    the_lazy_output_builds_and_tests_each_variant(&recipe);
    let core = output(&recipe, "libtorch");
    assert!(
        !strings(&core["tests"]).contains(&"torch_cuda_linalg".to_string()),
        "the test moved"
    );
    assert!(strings(&core["requirements"]["run"]).contains(
        &"libtorch-cuda-linalg ==${{ version }} ${{ flavor }}_*_${{ build_number }}".to_string()
    ));
    assert!(strings(&core["requirements"]["ignore_run_exports"]).contains(&"libmagma".to_string()));
    let py = output(&recipe, "pytorch");
    assert!(
        strings(&py["requirements"]["ignore_run_exports"]).contains(&"libmagma".to_string()),
        "pytorch: no libmagma through its host"
    );
    let script = std::fs::read_to_string(d.join("recipe/build.sh")).unwrap();
    assert!(
        script.contains(
            "splitpkg build-variant --src \"${SRC_DIR}\" --torch build/lib.fixture/torch"
        ) && !script.contains("splitpkg-build-lazy-variant"),
        "{script}"
    );
    assert!(script.contains("splitpkg verify-variant ${PREFIX}/lib/libtorch_cuda_linalg.so --variant \"${SPLITPKG_VARIANT}\""));
    assert!(script.contains("if [[ -e $SP_DIR/torch/lib/libtorch_cuda_linalg.so && ! -L $SP_DIR/torch/lib/libtorch_cuda_linalg.so ]]"));
    let bash = Command::new("bash")
        .args(["-n", s(&d.join("recipe/build.sh"))])
        .status()
        .unwrap();
    assert!(bash.success(), "build.sh parses");
}

/// The lazy output of the patched recipe: inherits the build, one variant per `linalg_variant`
/// (nomagma down-prioritized), pinned to the core, and each variant's test checks the installed
/// file against the contract the build recorded.
fn the_lazy_output_builds_and_tests_each_variant(recipe: &Value) {
    let lazy = output(recipe, "libtorch-cuda-linalg");
    assert_eq!(lazy["inherit"], "libtorch-build");
    assert_eq!(lazy["build"]["variant"]["use_keys"][0], "linalg_variant");
    assert_eq!(
        lazy["build"]["variant"]["down_prioritize_variant"],
        r#"${{ 1 if linalg_variant == "nomagma" else 0 }}"#
    );
    assert_eq!(
        lazy["build"]["skip"],
        r#"${{ not (cuda_compiler_version != "None" and linux) }}"#
    );
    assert_eq!(
        lazy["build"]["script"]["env"]["SPLITPKG_VARIANT"],
        "${{ linalg_variant }}"
    );
    let rc = strings(&lazy["requirements"]["run_constraints"]);
    assert!(
        rc.contains(&"libtorch ==${{ version }} ${{ flavor }}_*_${{ build_number }}".to_string())
            && rc.contains(&"libmagma <0.0a0".to_string()),
        "{rc:?}"
    );
    assert!(strings(&lazy["requirements"]["host"]).contains(&"libmagma-devel".to_string()));
    // Each variant's test checks the installed file against the contract the build recorded.
    assert_eq!(
        strings(&lazy["tests"][0]),
        [
            "package_contents",
            "lib",
            "torch_cuda_linalg",
            "files",
            "share/splitpkg/libtorch-cuda-linalg/contract.json"
        ]
    );
    assert_eq!(
        strings(&lazy["tests"][1]["script"]),
        [
            "splitpkg verify-variant ${PREFIX}/lib/libtorch_cuda_linalg.so --variant ${{ linalg_variant }} --contract ${PREFIX}/share/splitpkg/libtorch-cuda-linalg/contract.json"
        ]
    );
}

#[test]
fn the_dlopen_note_hook_adds_one_step() {
    let d = mini();
    let o = feedstock(d.path(), &["--dlopen-note", "libtorch_cuda.so"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    let notes: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with("+") && l.contains("splitpkg note "))
        .collect();
    assert_eq!(
        notes,
        [
            "+      splitpkg note ${PREFIX}/lib/libtorch_cuda.so --out ${PREFIX}/lib/libtorch_cuda.so --soname libtorch_cuda_linalg.so --feature linalg --priority required"
        ]
    );
    // Only where the file exists (the CUDA builds on linux), with splitpkg in that output's
    // build requirements under the lazy output's condition.
    assert!(
        diff.contains(
            "+    if [[ -e ${PREFIX}/lib/libtorch_cuda.so ]]; then\n+      splitpkg note"
        ),
        "{diff}"
    );
    let w = feedstock(d.path(), &["--dlopen-note", "libtorch_cuda.so", "--write"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let recipe: Value = serde_yaml::from_str(
        &std::fs::read_to_string(d.path().join("recipe/recipe.yaml")).unwrap(),
    )
    .unwrap();
    let build = &output(&recipe, "libtorch")["requirements"]["build"][0];
    assert_eq!(
        build["if"], r#"cuda_compiler_version != "None" and linux"#,
        "{build:?}"
    );
    assert!(
        build["then"][0].as_str().unwrap().starts_with("splitpkg "),
        "{build:?}"
    );
    let d = mini();
    assert!(
        !stdout(&feedstock(d.path(), &[])).contains("splitpkg note"),
        "off by default"
    );
    one_line_refusal(
        &feedstock(d.path(), &["--dlopen-note", "../x.so"]),
        "--dlopen-note",
    );
}

#[test]
fn refuses_shapes_it_cannot_patch_and_writes_nothing() {
    let edit = |f: &str, from: &str, to: &str| {
        let d = mini();
        let p = d.path().join(f);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{from:?} in {f}");
        std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
        d
    };
    let cases: Vec<(tempfile::TempDir, &str)> = vec![
        (
            edit(
                "recipe/recipe.yaml",
                "    inherit: libtorch-build\n    requirements:\n      run_constraints",
                "    requirements:\n      run_constraints",
            ),
            "no staging output that builds libtorch_cuda_linalg.so",
        ),
        (
            edit(
                "recipe/recipe.yaml",
                "                - torch_cuda_linalg\n",
                "",
            ),
            "no staging output that builds libtorch_cuda_linalg.so",
        ),
        (
            edit(
                "recipe/recipe.yaml",
                "schema_version: 1",
                "schema_version: 2",
            ),
            "expected a v1 recipe",
        ),
        (
            edit("recipe/recipe.yaml", "outputs:", "outputs: [\n"),
            "not YAML",
        ),
        (
            edit(
                "recipe/recipe.yaml",
                "            - libmagma-devel\n",
                "            - zlib\n",
            ),
            "no host dependency named libmagma*",
        ),
        (
            edit(
                "recipe/recipe.yaml",
                "${{ flavor }}_${{ hash }}_${{ build_number }}\n      script:\n        env:\n          MINI_BUILD_STAGE: libtorch",
                "${{ flavor }}_${{ build_number }}\n      script:\n        env:\n          MINI_BUILD_STAGE: libtorch",
            ),
            "build string to end in",
        ),
        (
            edit(
                "recipe/build.sh",
                "case ${MINI_BUILD_STAGE} in",
                "case ${OTHER} in",
            ),
            "expected `case ${MINI_BUILD_STAGE} in`",
        ),
        (
            edit(
                "recipe/build.sh",
                "    mv build/lib.fixture/torch/lib/* ${PREFIX}/lib/\n",
                "    cp -r build/lib.fixture/torch/lib ${PREFIX}/\n",
            ),
            "expected `mv DIR/lib/* ${PREFIX}/lib/`",
        ),
        (
            edit(
                "recipe/conda_build_config.yaml",
                "blas_impl:",
                "linalg_variant:\n  - magma\nblas_impl:",
            ),
            "partly split already",
        ),
    ];
    for (d, needle) in cases {
        let before = snapshot(d.path());
        one_line_refusal(&feedstock(d.path(), &["--write"]), needle);
        assert_eq!(snapshot(d.path()), before, "{needle}: nothing written");
    }
    let empty = tempfile::tempdir().unwrap();
    one_line_refusal(&feedstock(empty.path(), &[]), "expected a feedstock");
    let v0 = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(v0.path().join("recipe")).unwrap();
    std::fs::write(v0.path().join("recipe/meta.yaml"), "package: {name: x}\n").unwrap();
    one_line_refusal(&feedstock(v0.path(), &[]), "v0 recipe");
    let d = mini();
    one_line_refusal(
        &feedstock(d.path(), &["--prefer", "fast"]),
        "--prefer must be magma or nomagma",
    );
    one_line_refusal(
        &feedstock(d.path(), &["--lazy-name", "Bad/Name"]),
        "--lazy-name",
    );
}

/// The mini feedstock's staging build run by hand (its build.sh `build` stage) against a prefix
/// with the libmagma-like library: the tree `splitpkg build-variant --torch` reads.
fn staged() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let prefix = d.path().join("prefix");
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::fs::create_dir_all(prefix.join("include")).unwrap();
    let magma = repo().join("fixtures/feedstock/magma");
    let ok = Command::new("gcc")
        .args(["-O1", "-fPIC", "-shared", "-Wl,-soname,libmagma.so.2", "-o"])
        .arg(prefix.join("lib/libmagma.so.2"))
        .arg(magma.join("magma.c"))
        .status()
        .unwrap();
    assert!(ok.success());
    std::os::unix::fs::symlink("libmagma.so.2", prefix.join("lib/libmagma.so")).unwrap();
    std::fs::copy(magma.join("magma_v2.h"), prefix.join("include/magma_v2.h")).unwrap();
    let work = d.path().join("work");
    let st = Command::new("cp")
        .arg("-a")
        .arg(repo().join("fixtures/feedstock/src"))
        .arg(&work)
        .status()
        .unwrap();
    assert!(st.success());
    let o = Command::new("bash")
        .arg(repo().join("fixtures/feedstock/recipe/build.sh"))
        .current_dir(&work)
        .env("SRC_DIR", &work)
        .env("PREFIX", &prefix)
        .env("MINI_BUILD_STAGE", "build")
        .env("cuda_compiler_version", "13.0")
        .output()
        .unwrap();
    assert!(o.status.success(), "staging build: {}", stderr(&o));
    (d, work)
}

/// `splitpkg build-variant` on a staged tree (`work`), from `cwd`, with `envs` set.
fn build_variant(work: &Path, out: &Path, envs: &[(&str, &str)], cwd: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(cwd)
        .arg("build-variant")
        .arg("--src")
        .arg(work)
        .arg("--torch")
        .arg(work.join("build/lib.fixture/torch"))
        .arg("--cuda-include")
        .arg(work.join("build/cuda/include"))
        .arg("--cuda-lib")
        .arg(work.join("build/cuda/lib"))
        .arg("--cuda-lib")
        .arg(work.join("../prefix/lib"))
        .arg("--out")
        .arg(out)
        .args(["--jobs", "1"]);
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

/// Work directories `build-variant` left in `dir`.
fn leftovers(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".splitpkg-build-")
            })
            .count()
        })
        .unwrap_or(0)
}

#[test]
fn build_variant_on_a_conda_staging_tree_is_reproducible_and_needs_only_the_compiler() {
    let (a, work_a) = staged();
    let (b, work_b) = staged();
    // Different absolute paths and working directories, output directories that do not exist
    // yet, the compiler from $CXX, and a PATH with nothing but the compiler and the binutils it
    // runs itself (as, ld): no nm, readelf, c++filt or python.
    let out_a = a.path().join("out/new/libtorch_cuda_linalg.so");
    let out_b = b.path().join("elsewhere/libtorch_cuda_linalg.so");
    let oa = build_variant(&work_a, &out_a, &[], a.path())
        .output()
        .unwrap();
    assert!(oa.status.success(), "{}\n{}", stdout(&oa), stderr(&oa));
    assert!(
        stdout(&oa).contains("as nomagma: PASS") && stdout(&oa).contains("built:     "),
        "{}",
        stdout(&oa)
    );
    let only = b.path().join("only-the-compiler");
    std::fs::create_dir_all(&only).unwrap();
    // g++ runs the assembler and the link editor itself.
    for tool in ["g++", "as", "ld"] {
        std::os::unix::fs::symlink(which(tool), only.join(tool)).unwrap();
    }
    let ob = build_variant(
        &work_b,
        &out_b,
        &[("PATH", s(&only)), ("CXX", "g++")],
        Path::new("/"),
    )
    .arg("--json")
    .output()
    .unwrap();
    assert!(ob.status.success(), "{}\n{}", stdout(&ob), stderr(&ob));
    let report: BuildReport = typed(&ob);
    assert!(report.built);
    assert_eq!(report.compiler, ["g++"]);
    assert_eq!(report.needed_dropped, ["libmagma.so.2"]);
    assert_eq!(report.verify.library, s(&out_b));
    let (x, y) = (
        std::fs::read(&out_a).unwrap(),
        std::fs::read(&out_b).unwrap(),
    );
    assert_eq!(x, y, "the same bytes from two build directories");
    let text = String::from_utf8_lossy(&x);
    for p in [&work_a, &work_b, &a.path().to_path_buf()] {
        assert!(!text.contains(s(p)), "{} not embedded", p.display());
    }
    assert!(
        text.contains("pytorch/aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp"),
        "__FILE__ mapped"
    );
    // The nomagma build NEEDs no libmagma; the stock one does.
    let needed = |f: &Path| stdout(&Command::new("readelf").arg("-dW").arg(f).output().unwrap());
    assert!(!needed(&out_a).contains("libmagma"));
    assert!(
        needed(&work_a.join("build/lib.fixture/torch/lib/libtorch_cuda_linalg.so"))
            .contains("libmagma.so.2")
    );
    assert_eq!(leftovers(out_a.parent().unwrap()), 0);
}

/// The absolute path of a program on PATH.
fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not on PATH"))
}

#[test]
fn build_variant_writes_nothing_and_leaves_nothing_on_failure_or_a_signal() {
    let (a, work_a) = staged();
    let fake = a.path().join("fakebin");
    std::fs::create_dir_all(&fake).unwrap();
    let gxx = fake.join("fake-g++");
    std::fs::write(&gxx, "#!/bin/sh\necho 'fake g++: error: no' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gxx, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A compiler that fails: exit 1, its error line shown, nothing written, no work directory
    // and no output directory left.
    let out_f = a.path().join("fail/libtorch_cuda_linalg.so");
    let of = build_variant(&work_a, &out_f, &[("CXX", s(&gxx))], a.path())
        .output()
        .unwrap();
    assert_eq!(of.status.code(), Some(1), "{}", stderr(&of));
    assert!(
        stdout(&of).contains("fake g++: error: no"),
        "{}",
        stdout(&of)
    );
    assert!(
        stderr(&of).contains("compiling BatchLinearAlgebra.cpp failed"),
        "{}",
        stderr(&of)
    );
    assert!(!out_f.exists() && !out_f.parent().unwrap().exists());
    // A compiler that is not there: bad input, one line.
    let o = build_variant(&work_a, &out_f, &[("CXX", "no-such-c++")], a.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"no-such-c++\" ($CXX) not found"),
        "{}",
        stderr(&o)
    );
    // SIGTERM and SIGINT while the compiler runs: the process ends by that signal and its work
    // directory is removed.
    for sig in [libc::SIGTERM, libc::SIGINT] {
        std::fs::write(
            &gxx,
            format!(
                "#!/bin/sh\ntouch {}/started\nexec sleep 3\n",
                fake.display()
            ),
        )
        .unwrap();
        let _ = std::fs::remove_file(fake.join("started"));
        let out_s = a.path().join(format!("sig-{sig}/libtorch_cuda_linalg.so"));
        let mut child = build_variant(&work_a, &out_s, &[("CXX", s(&gxx))], a.path());
        child
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        default_signal_dispositions(&mut child);
        let child = child.spawn().unwrap();
        while !fake.join("started").exists() {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill(2) on the child we started.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
        let o = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(sig), "{sig}: {}", stderr(&o));
        assert_eq!(
            leftovers(out_s.parent().unwrap()),
            0,
            "{sig}: work directory removed"
        );
        assert!(!out_s.exists());
    }
}

/// Resets SIGINT and SIGTERM to their default action in the child before it execs.
fn default_signal_dispositions(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; signal(2) is one.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM] {
                if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The patched mini feedstock built by real rattler-build, offline: both variants, the contract
/// check inside the nomagma build, the channel solved and installed, and plan on both envs.
/// The patched mini feedstock built by real rattler-build (py-rattler-build), offline, for
/// linux-64 and cross-compiled for linux-aarch64 (build platform linux-64, Debian's aarch64 cross
/// gcc behind conda-forge-named compiler packages), both variants each; then solved and installed
/// per platform, the installed libraries loaded (natively, and for linux-aarch64 under qemu-user:
/// emulated) and `plan` run on both environments.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn mini_feedstock_builds_with_rattler_build_and_installs() {
    let started = std::time::Instant::now();
    let d = mini();
    let w = feedstock(d.path(), &["--write"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    let work = tempfile::tempdir().unwrap();
    let python = python_env();
    let path = format!(
        "{}:{}",
        python.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(&python)
        .env("PATH", path)
        // the unpatched fixture: its monolithic libtorch (build 200) goes into the channel too
        .env(
            "SPLITPKG_MONOLITHIC_FEEDSTOCK",
            repo().join("fixtures/feedstock"),
        )
        .arg(repo().join("tests/py/feedstock_build.py"))
        .args([
            s(d.path()),
            s(&repo().join("fixtures/feedstock/magma")),
            s(work.path()),
        ])
        .arg(bin())
        .args([
            "linalg_variant",
            "linux_64_cuda_compiler_version13.0.yaml",
            "linux_aarch64_cuda_compiler_version13.0.yaml",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "rattler-build failed:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    let r: serde_json::Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
    if let Some(why) = r["skipped"]["linux-aarch64"].as_str() {
        eprintln!(
            "\n!!!!!!!! SKIPPED the linux-aarch64 cross build of the mini feedstock because {why}\n"
        );
    } else {
        assert!(r["platforms"]["linux-aarch64"].is_object(), "{r:#}");
    }
    let platforms = r["platforms"].as_object().unwrap();
    assert!(platforms.contains_key("linux-64"), "{r:#}");
    for (platform, p) in platforms {
        mini_packages(platform, p);
        mini_contract_reports(platform, p);
        mini_environments(platform, p);
    }
    eprintln!(
        "mini feedstock built for {:?}, solved, installed and checked in {:.1} s",
        platforms.keys().collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
}

fn strs(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The packages of one platform: the two variants and the relations of the split model.
fn mini_packages(platform: &str, p: &serde_json::Value) {
    let pkgs: Vec<&serde_json::Value> = p["packages"].as_object().unwrap().values().collect();
    let one = |name: &str, needle: &str| -> &serde_json::Value {
        let found: Vec<_> = pkgs
            .iter()
            .filter(|p| p["name"] == name && p["build"].as_str().unwrap().contains(needle))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{platform} {name} {needle}: {:#}",
            p["packages"]
        );
        found[0]
    };
    let magma = one("libtorch-cuda-linalg", "_magma_");
    let nomagma = one("libtorch-cuda-linalg", "_nomagma_");
    // The split's builds (201); linux-64's channel also holds the pre-split libtorch (200).
    let core = one("libtorch", "_201");
    let py = one("pytorch", "_201");
    one("libmagma", "");
    assert_eq!(
        pkgs.iter()
            .filter(|p| p["name"] == "libtorch-cuda-linalg")
            .count(),
        2,
        "{platform}: exactly two variants"
    );
    let build = |v: &serde_json::Value| v["build"].as_str().unwrap().to_string();
    assert!(
        build(magma).starts_with("cuda130_generic_magma_") && build(magma).ends_with("_201"),
        "{platform}: {}",
        build(magma)
    );
    assert!(build(nomagma).starts_with("cuda130_generic_nomagma_"));
    // Relations.
    assert!(
        strs(&magma["depends"])
            .iter()
            .any(|d| d.starts_with("libmagma >=2.10.0")),
        "{platform}: {magma:#}"
    );
    assert!(
        !strs(&nomagma["depends"])
            .iter()
            .any(|d| d.starts_with("libmagma")),
        "{platform}: {nomagma:#}"
    );
    assert!(strs(&nomagma["constrains"]).contains(&"libmagma <0.0a0".to_string()));
    for v in [magma, nomagma] {
        assert!(
            strs(&v["constrains"]).contains(&"libtorch ==2.12.0 cuda130_generic_*_201".to_string()),
            "{platform}: {v:#}"
        );
        assert_eq!(
            strs(&v["paths"]),
            [
                "lib/libtorch_cuda_linalg.so",
                "share/splitpkg/libtorch-cuda-linalg/contract.json"
            ]
        );
    }
    assert!(
        magma["track_features"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
            && strs(&magma["track_features"]).is_empty(),
        "{platform}: {magma:#}"
    );
    assert_eq!(
        nomagma["track_features"]
            .as_str()
            .map(str::to_string)
            .or_else(|| strs(&nomagma["track_features"]).first().cloned())
            .as_deref(),
        Some("libtorch-cuda-linalg-p-0")
    );
    assert!(
        strs(&core["depends"])
            .contains(&"libtorch-cuda-linalg ==2.12.0 cuda130_generic_*_201".to_string()),
        "{platform}: {core:#}"
    );
    for v in [core, py] {
        assert!(
            !strs(&v["depends"])
                .iter()
                .any(|d| d.starts_with("libmagma")),
            "{platform}: {v:#}"
        );
    }
    assert!(!strs(&core["paths"]).contains(&"lib/libtorch_cuda_linalg.so".to_string()));
    assert!(
        strs(&py["paths"]).contains(
            &"lib/python3.12/site-packages/torch/lib/libtorch_cuda_linalg.so".to_string()
        ),
        "the link stays"
    );
}

/// The contract check ran inside the lazy builds (build.sh keeps its report in the work
/// directory; both variants build in one work directory, so the nomagma build's report is the one
/// left: the magma build's check passed, or its build would have failed). The full contract, read
/// from this platform's code: nothing "not checked", and registrations at load counted.
fn mini_contract_reports(platform: &str, p: &serde_json::Value) {
    let reports = p["verify_reports"].as_object().unwrap();
    assert!(
        reports
            .keys()
            .any(|f| f.ends_with("splitpkg-verify-nomagma.json")),
        "{platform}: no nomagma verify-variant report: {:#}",
        p["verify_reports"]
    );
    for (f, rep) in reports {
        // The script passes each report on as `verify-variant --json` wrote it.
        let rep = VerifyReport::from_str(&rep.to_string(), f).unwrap_or_else(|e| {
            panic!("{platform} {f}: not a verify-variant report ({e}): {rep:#}")
        });
        assert!(rep.pass, "{platform} {f}: {rep:#?}");
        let variant = &rep.variant;
        assert!(
            f.ends_with(&format!("splitpkg-verify-{variant}.json")),
            "{f}"
        );
        for c in &rep.checks {
            assert!(!c.detail.contains("not checked"), "{platform} {f}: {c:#?}");
        }
        let registrations = rep
            .checks
            .iter()
            .find(|c| c.name == "registers at load like the stock")
            .unwrap_or_else(|| panic!("{platform} {f}: no registration check: {rep:#?}"));
        let counted: usize = registrations
            .detail
            .strip_prefix("all ")
            .and_then(|d| d.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{platform} {f}: {registrations:#?}"));
        assert!(counted > 0, "{platform} {f}: {registrations:#?}");
    }
}

/// Scenarios with the real solver, the two environments installed (files of this platform), the
/// libraries loaded by a small program (emulated for linux-aarch64), and `plan` on the prefix and
/// on site-packages/torch.
fn mini_environments(platform: &str, p: &serde_json::Value) {
    let sc = &p["scenarios"];
    let names = |id: &str| -> Vec<String> {
        sc[id]["solved"]
            .as_array()
            .unwrap_or_else(|| panic!("{platform} {id}: {:#}", sc[id]))
            .iter()
            .map(|p| format!("{} {}", p[0].as_str().unwrap(), p[2].as_str().unwrap()))
            .collect()
    };
    let default = names("default");
    assert!(
        default
            .iter()
            .any(|n| n.starts_with("libtorch-cuda-linalg cuda130_generic_magma_"))
            && default.iter().any(|n| n.starts_with("libmagma ")),
        "{platform}: {default:?}"
    );
    let slim = names("slim");
    assert!(
        slim.iter()
            .any(|n| n.starts_with("libtorch-cuda-linalg cuda130_generic_nomagma_"))
            && !slim.iter().any(|n| n.starts_with("libmagma")),
        "{platform}: {slim:?}"
    );
    assert!(
        sc["slim_with_libmagma"]["unsolvable"].is_string(),
        "{platform}: {:#}",
        sc["slim_with_libmagma"]
    );
    if platform == "linux-64" {
        // A pre-split libtorch of the same version (build 200, shipping the library itself) is in
        // the channel: it installs alone, the default install takes the split's build, and no
        // variant of the lazy package can be installed with it (the pins end in the build number).
        assert!(
            names("monolithic_alone")
                .iter()
                .any(|n| n.starts_with("libtorch cuda130_generic_") && n.ends_with("_200")),
            "{:#}",
            sc["monolithic_alone"]
        );
        assert!(
            default
                .iter()
                .any(|n| n.starts_with("libtorch cuda130_generic_") && n.ends_with("_201")),
            "{default:?}"
        );
        for id in ["monolithic_with_magma", "monolithic_with_nomagma"] {
            assert!(sc[id]["unsolvable"].is_string(), "{id}: {:#}", sc[id]);
        }
    }
    // EM_X86_64 62, EM_AARCH64 183: the environment holds this platform's code.
    let machine: u16 = if platform == "linux-aarch64" { 183 } else { 62 };
    // lu_factor(200): MAGMA's path in the magma variant, cuSOLVER's stand-in path without it.
    for (id, verdict, code, result) in [
        ("default", "CONFINED", 0, 400),
        ("slim", "NOT PRESENT", 1, 607),
    ] {
        let prefix = PathBuf::from(sc[id]["prefix"].as_str().unwrap());
        let lib = std::fs::read(prefix.join("lib/libtorch_cuda_linalg.so")).unwrap();
        assert_eq!(
            u16::from_le_bytes([lib[18], lib[19]]),
            machine,
            "{platform} {id}"
        );
        mini_probe(platform, id, &sc[id]["probe"], result, id == "default");
        for dir in [
            prefix.clone(),
            prefix.join("lib/python3.12/site-packages/torch"),
        ] {
            let p = run(&["plan", s(&dir), "--quiet"]);
            assert_eq!(
                p.status.code(),
                Some(code),
                "{platform} {id} {}: {}\n{}",
                dir.display(),
                stdout(&p),
                stderr(&p)
            );
            assert!(
                stdout(&p).contains(verdict),
                "{platform} {id}: {}",
                stdout(&p)
            );
        }
    }
}

/// The installed environment loaded by a program: the first linalg call dlopens the lazy library,
/// whose initialiser registers the kernel; the kernel is then called through the registration.
fn mini_probe(platform: &str, id: &str, probe: &serde_json::Value, result: i32, magma: bool) {
    let runner = probe["runner"].as_str().unwrap();
    if runner.starts_with("SKIPPED") {
        eprintln!("\n!!!!!!!! {runner}: the {platform} {id} environment was not loaded\n");
        return;
    }
    let expected = if platform == "linux-aarch64" {
        "emulated (qemu-aarch64)"
    } else {
        "native"
    };
    assert_eq!(runner, expected, "{platform} {id}");
    assert_eq!(probe["rc"], 0, "{platform} {id}: {probe:#}");
    assert_eq!(
        probe["stdout"],
        // has_magma is read before the first linalg call: the source patch answers from the
        // installed files (libmagma beside libtorch_cuda.so), not from the compile-time flag.
        format!(
            "has_magma={} linalg_call(200)={result} stub(200)={result}",
            u8::from(magma)
        ),
        "{platform} {id} ({runner}): {probe:#}"
    );
}

/// The real recipe: conda-forge/pytorch-cpu-feedstock PR #518, rendered by real rattler-build for
/// every linux config (linux-64, and linux-aarch64 cross-compiled from linux-64 as the feedstock
/// builds it) before and after the patch, with what `conda smithy rerender` would add to each
/// `.ci_support` file. CI has no GitHub: the checkout comes from SPLITPKG_FEEDSTOCK (see
/// docs/feedstock.md for how to make it), pinned by content. docs/evidence/feedstock/run.sh
/// writes the same render as the committed evidence.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, py-rattler-build and SPLITPKG_FEEDSTOCK: cargo test --release --features full-tests"
)]
fn real_feedstock_pr518_renders_both_variants_in_one_job() {
    const COMMIT: &str = "a68328f3340324935f75ec34dddc21e7780831b5";
    const PINS: &[(&str, &str)] = &[
        (
            "recipe/recipe.yaml",
            "53593d350f3206cddd332eac77ff51a8d12bbcd074f97c16e9cea309dd1fb3ce",
        ),
        (
            "recipe/build.sh",
            "9f2f93585f439dd327d83816a3f8ce9957e14fe9b760c977c297d1eccca975da",
        ),
        (
            "recipe/conda_build_config.yaml",
            "2d31799bc0bdd9fc06544a94bc77e6360b16b663e32a8d1febbe2e2883f48ef9",
        ),
    ];
    let Some(src) = std::env::var_os("SPLITPKG_FEEDSTOCK").map(PathBuf::from) else {
        eprintln!(
            "\n!!!!!!!! SKIPPED real_feedstock_pr518_renders_both_variants_in_one_job: SPLITPKG_FEEDSTOCK is not set."
        );
        eprintln!(
            "!!!!!!!! Set it to a checkout of conda-forge/pytorch-cpu-feedstock at {COMMIT} (docs/feedstock.md).\n"
        );
        return;
    };
    for (f, want) in PINS {
        let got = sha256_hex(
            &std::fs::read(src.join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", src.join(f).display())),
        );
        assert_eq!(&got, want, "{f} is not the one of PR #518 at {COMMIT}");
    }
    let d = tempfile::tempdir().unwrap();
    let (orig, patched) = (d.path().join("orig"), d.path().join("patched"));
    for dst in [&orig, &patched] {
        copy_feedstock(&src, dst);
    }
    let o = feedstock(&patched, &["--write"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    let again = feedstock(&patched, &[]);
    assert_eq!(
        (again.status.code(), stdout(&again).as_str()),
        (Some(0), ""),
        "idempotent on the real recipe"
    );

    let render = render_pr518(&orig, &patched);
    let evidence = repo().join("target/feedstock-pr518");
    std::fs::create_dir_all(&evidence).unwrap();
    std::fs::write(evidence.join("patch.diff"), &diff).unwrap();
    std::fs::write(
        evidence.join("render.json"),
        serde_json::to_string_pretty(&render).unwrap() + "\n",
    )
    .unwrap();

    let configs = render["configs"].as_object().unwrap();
    let aarch64 = configs.keys().filter(|n| n.starts_with("linux_aarch64_"));
    let cuda = configs.keys().filter(|n| !n.contains("versionNone"));
    assert_eq!(
        (configs.len(), aarch64.count(), cuda.count()),
        (9, 3, 6),
        "every linux config: 6 linux-64 and 3 linux-aarch64, 6 of them CUDA"
    );
    assert_eq!(
        render["ci_support_files"]["before"], render["ci_support_files"]["after"],
        "no new .ci_support file"
    );
    let mut lazy_builds = std::collections::BTreeMap::new();
    for (name, c) in configs {
        lazy_builds.insert(name.as_str(), check_pr518_config(name, c));
    }
    // CUDA 12.9 on linux-aarch64 builds libtorch twice in one job (sbsa and tegra), 13.0 once.
    let aarch64_cuda: Vec<usize> = lazy_builds
        .iter()
        .filter(|(n, _)| n.starts_with("linux_aarch64_") && !n.contains("versionNone"))
        .map(|(_, k)| *k)
        .collect();
    assert_eq!(aarch64_cuda, [4, 2], "{lazy_builds:?}");
    check_pr518_rerender(&render);
}

type Json = serde_json::Value;

fn copy_feedstock(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.join(".ci_support")).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(src.join("recipe"))
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success());
    for e in std::fs::read_dir(src.join(".ci_support")).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst.join(".ci_support").join(e.file_name())).unwrap();
        }
    }
}

fn render_pr518(orig: &Path, patched: &Path) -> Json {
    let r = Command::new(python_env())
        .arg(repo().join("tests/py/feedstock_render.py"))
        .args([s(orig), s(patched), "linalg_variant"])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "render failed:\n{}\n{}",
        stdout(&r),
        stderr(&r)
    );
    serde_json::from_slice(&r.stdout).unwrap()
}

fn outputs<'a>(side: &'a Json, name: &str) -> Vec<&'a Json> {
    side["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["name"] == name)
        .collect()
}

fn text(v: &Json) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// One config before and after: every output keeps its variants, and with the patch's
/// build_base bump taken out every existing build string is the same (the split itself changes
/// no existing build; CPU configs change by the bump only). On CUDA one magma and one nomagma
/// build of the lazy output per libtorch build (per arm_variant_type on aarch64), with that
/// libtorch's flavor and build number. Returns the lazy builds' count.
fn check_pr518_config(name: &str, c: &Json) -> usize {
    let (before, after) = (&c["before"], &c["after"]);
    for (k, n) in before["counts"].as_object().unwrap() {
        assert_eq!(
            &after["counts"][k], n,
            "{name}: {k} keeps its number of rendered variants"
        );
    }
    assert_eq!(
        before["job_keys"], after["job_keys"],
        "{name}: the keys CI jobs split on are unchanged"
    );
    let existing: Vec<&Json> = c["after_with_original_build_base"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b[0] != "libtorch-cuda-linalg")
        .collect();
    let was: Vec<Json> = before["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| serde_json::json!([o["name"], o["build"]]))
        .collect();
    assert_eq!(
        existing,
        was.iter().collect::<Vec<_>>(),
        "{name}: existing builds"
    );
    let lazy = outputs(after, "libtorch-cuda-linalg");
    if name.contains("cuda_compiler_versionNone") {
        assert!(lazy.is_empty(), "{name}: no lazy output on CPU");
        assert_eq!(
            after["counts"], before["counts"],
            "{name}: CPU config untouched"
        );
        return 0;
    }
    let cores = outputs(after, "libtorch");
    assert_eq!(
        lazy.len(),
        2 * cores.len(),
        "{name}: two lazy builds per libtorch"
    );
    for core in cores {
        let build = text(&core["build"]);
        let mut parts = build.rsplitn(3, '_');
        let (bn, _hash, flavor) = (parts.next().unwrap(), parts.next(), parts.next().unwrap());
        for v in ["magma", "nomagma"] {
            let hit = lazy.iter().filter(|o| {
                let b = text(&o["build"]);
                o["arm_variant_type"] == core["arm_variant_type"]
                    && o["variant_key"] == v
                    && b.starts_with(&format!("{flavor}_{v}_"))
                    && b.ends_with(&format!("_{bn}"))
            });
            assert_eq!(
                hit.count(),
                1,
                "{name} ({}): {v} build string {flavor}_{v}_<hash>_{bn}",
                core["arm_variant_type"]
            );
        }
    }
    lazy.len()
}

/// What `conda smithy rerender` would write: the model of its rule gives back every existing
/// `.ci_support` file's keys, the CI-job keys stay the same per platform, and the variant key
/// with both values lands in every linux file (the rule is per platform: the CPU files get it as
/// they already have libmagma_devel and nccl, which only CUDA builds use).
fn check_pr518_rerender(render: &Json) {
    let smithy = &render["smithy"];
    assert_eq!(
        smithy["model_mismatches_before"]["platform_union"],
        serde_json::json!([]),
        "the model reproduces the existing .ci_support files"
    );
    assert_ne!(
        smithy["model_mismatches_before"]["config_union"],
        serde_json::json!([]),
        "a per-config rule would not (the CPU files hold CUDA-only keys)"
    );
    for plat in ["linux_64", "linux_aarch64"] {
        let (b, a) = (&smithy["before"][plat], &smithy["after"][plat]);
        assert_eq!(b["job_keys"], a["job_keys"], "{plat}: same CI jobs");
        assert!(
            !a["job_keys"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == "linalg_variant"),
            "{plat}"
        );
    }
    let adds = render["rerender_adds"].as_object().unwrap();
    assert_eq!(adds.len(), 9);
    for (name, a) in adds {
        assert_eq!(
            a,
            &serde_json::json!({"linalg_variant": ["magma", "nomagma"]}),
            "{name}"
        );
    }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `--pr-body`: the description a reviewer reads, from the patch, the feedstock's CI configs, a
/// measured payload and a real smoke run; bad inputs to it write nothing.
#[test]
fn the_pr_body_describes_the_patch_with_measured_figures_only() {
    let d = mini();
    let payload = tempfile::tempdir().unwrap();
    let lib = payload.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let ok = Command::new("gcc")
        .args(["-O1", "-fPIC", "-shared", "-Wl,-soname,libmagma.so.2", "-o"])
        .arg(lib.join("libmagma.so.2"))
        .arg(repo().join("fixtures/feedstock/magma/magma.c"))
        .status()
        .unwrap();
    assert!(ok.success());
    let bytes = std::fs::metadata(lib.join("libmagma.so.2")).unwrap().len();
    let smoke = repo().join("docs/evidence/nomagma-real/smoke-envs.json");
    let body = d.path().join("out/pr.md");
    let pay = format!("13.0={}", s(payload.path()));
    let o = feedstock(
        d.path(),
        &[
            "--pr-body",
            s(&body),
            "--pr-smoke",
            s(&smoke),
            "--pr-payload",
            &pay,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::read_to_string(&body).unwrap();
    for want in [
        "# Split libmagma out of `libtorch`: `libtorch-cuda-linalg` with `magma` and `nomagma` variants",
        "## What changes, per output",
        "`libtorch-cuda-linalg ==${{ version }} ${{ flavor }}_*_${{ build_number }}`",
        "| `context.build_base` | 0 → 1:",
        "`recipe/patches/0001-splitpkg-hasMAGMA-answers-from-installed-files.patch`",
        "| `linux_64_cuda_compiler_versionNone.yaml` | linux-64 | none (CPU) | none: untouched | none (no split) |",
        "## What the slim variant loses",
        "on NVIDIA H200",
        "## How to revert",
        "`conda install pytorch \"libtorch-cuda-linalg=*=*nomagma_*\"`",
    ] {
        assert!(md.contains(want), "{want:?} in\n{md}");
    }
    // The saving is the payload as measured, with the rule that applies to it.
    let digits = bytes.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let measured = format!("({grouped} B)");
    let line = md
        .lines()
        .find(|l| l.starts_with("| 13.0 |"))
        .unwrap_or_else(|| panic!("a savings row for CUDA 13.0 in\n{md}"));
    assert!(
        line.contains(&measured) && line.contains("not worth it"),
        "{line}"
    );
    // Only the patch printed on stdout; nothing else of the feedstock written without --write.
    assert!(stdout(&o).starts_with("diff --git"));
    // Without a payload or a smoke run, the description says "not measured", loudly.
    let plain = d.path().join("plain.md");
    let o = feedstock(d.path(), &["--pr-body", s(&plain)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = std::fs::read_to_string(&plain).unwrap();
    assert!(md.contains("**Not measured** for CUDA 13.0"), "{md}");
    assert!(md.contains("**Not measured on a GPU.**"), "{md}");
    // A bad --pr-payload: one line, exit 2, no description and no feedstock change.
    let before = snapshot(d.path());
    let bad = d.path().join("bad.md");
    one_line_refusal(
        &feedstock(
            d.path(),
            &["--write", "--pr-body", s(&bad), "--pr-payload", "13.0"],
        ),
        "--pr-payload",
    );
    assert!(!bad.exists());
    assert_eq!(snapshot(d.path()), before);
    // A feedstock split already has nothing to describe.
    assert_eq!(feedstock(d.path(), &["--write"]).status.code(), Some(0));
    one_line_refusal(
        &feedstock(d.path(), &["--pr-body", s(&bad)]),
        "split already",
    );
}
