//! `splitpkg plan` on the fixture trees: verdicts, witnesses, outputs, exit codes, schema.

use crate::common::*;

use std::collections::BTreeSet;
use std::process::Command;

use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::graph::{EdgeKind, How, NodeKind, Reach};
use splitpkg::analysis::payload::PartKind;
use splitpkg::analysis::plan::{EnvSource, Plan, Role};
use splitpkg::analysis::verdict::{PayloadForm, Verdict};

/// `plan --json` of fixture `name` read into the library's `Plan` (and checked against the
/// schema), with the exit code.
fn plan(name: &str) -> (Plan, i32) {
    let o = run_path(&["plan", "--json", "--quiet"], &fixture(name));
    assert_valid("docs/plan.schema.json", &json(&o));
    (typed::<Plan>(&o), o.status.code().unwrap())
}

/// The output of `role` in `plan`.
fn output(plan: &Plan, role: Role) -> Option<&splitpkg::analysis::plan::PlanOutput> {
    plan.outputs.iter().find(|o| o.role == role)
}

#[test]
fn conda_like_is_confined_with_shared_magma_optional() {
    let (p, code) = plan("conda-like");
    assert_eq!(code, 0);
    assert_eq!(p.verdict, Verdict::Confined);
    let lazy_library = p.lazy_library.as_ref().unwrap();
    assert_eq!(lazy_library.path, "lib/libtorch_cuda_linalg.so");
    assert_eq!(lazy_library.reach, Reach::Lazy);
    let loaded_by = &lazy_library.loaded_by[0];
    assert_eq!(loaded_by.from, "lib/libtorch_cuda.so");
    assert_eq!(loaded_by.kind, EdgeKind::Lazy);
    assert!(loaded_by.how.contains("$ORIGIN"), "{loaded_by:?}");

    let forms: Vec<(&str, PayloadForm)> = p
        .payload
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.form))
        .collect();
    assert!(
        forms.contains(&("lib/libmagma.so.2.8.0", PayloadForm::Library)),
        "{forms:?}"
    );
    assert!(
        forms.contains(&("lib/libmagma_sparse.so", PayloadForm::Library)),
        "{forms:?}"
    );

    // Payload output: both MAGMA libraries and the soname symlinks; nothing else.
    let out = output(&p, Role::Payload).expect("payload output");
    assert_eq!(
        out.files,
        vec![
            "lib/libmagma.so",
            "lib/libmagma.so.2",
            "lib/libmagma.so.2.8.0",
            "lib/libmagma_sparse.so"
        ]
    );
    let lazy = output(&p, Role::Lazy).unwrap();
    assert_eq!(lazy.files, vec!["lib/libtorch_cuda_linalg.so"]);
    let names: Vec<&str> = lazy.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, vec!["magma", "nomagma"]);

    // Every file of the tree lands in exactly one output.
    let all: Vec<&String> = p.outputs.iter().flat_map(|o| &o.files).collect();
    let unique: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a file in two outputs: {all:?}");
    let tree: BTreeSet<String> = walk(&fixture("conda-like"))
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(unique.into_iter().cloned().collect::<BTreeSet<_>>(), tree);

    // The saving is exactly the payload output in this layout (the lazy library links MAGMA dynamically).
    assert_eq!(p.saving.bytes, out.bytes);

    // Glue that stays behind in the core is reported with its consequence.
    assert!(
        p.warnings.iter().any(|w| w.file == "lib/libtorch_cuda.so"
            && w.examples.iter().any(|e| e.contains("set_magma_init_fn"))
            && w.consequence.contains("has_magma")),
        "{:#?}",
        p.warnings
    );
    // The symbol the loader looks up by name next to the library name.
    assert_eq!(p.contract.loader_lookups, vec!["linalg_entry"]);
    let imports = &p.contract.imports;
    assert!(
        imports.iter().any(|g| g.provider == "lib/libmagma.so.2.8.0"
            && g.samples.first().is_some_and(|s| s == "magma_dgetrf_gpu")),
        "{imports:#?}"
    );
}

#[test]
fn pip_like_static_magma_is_confined_with_estimate() {
    let (p, code) = plan("pip-like");
    assert_eq!(code, 0, "{p:#?}");
    let package = p.input.package.as_ref().unwrap();
    assert_eq!(package.name, "torch");
    assert_eq!(package.version, "2.5.1");
    let files = &p.payload.files;
    assert_eq!(files.len(), 1, "{files:#?}");
    let f = &files[0];
    assert_eq!(f.path, "torch/lib/libtorch_cuda_linalg.so");
    assert_eq!(f.form, PayloadForm::Static);
    for s in ["magma_dgetrf_gpu", "magma_init", "magmablas_dgemm"] {
        assert!(f.symbols.iter().any(|x| x == s), "{:?}", f.symbols);
    }
    let est = f.estimate.as_ref().unwrap();
    let size = f.size.unwrap();
    assert!(est.bytes > 0);
    assert!(est.bytes < size);
    assert!(est.parts.iter().any(|x| x.what == PartKind::Text));
    // No payload output (it is inside the lazy library), and the saving is the estimate.
    assert!(output(&p, Role::Payload).is_none());
    assert_eq!(p.saving.bytes, est.bytes);
    let nomagma = &output(&p, Role::Lazy).unwrap().variants[1];
    assert!(!nomagma.measured);
    assert_eq!(nomagma.bytes, size - est.bytes);
}

#[test]
fn eager_leak_is_refuted_with_the_path() {
    let (p, code) = plan("eager-leak");
    assert_eq!(code, 1);
    assert_eq!(p.verdict, Verdict::NotConfined);
    assert!(p.outputs.is_empty());
    let w = &p.witnesses[0];
    assert_eq!(
        w.summary,
        "torch_smoke → libtorch_cuda.so (NEEDED) → libmagma.so.2 (NEEDED) → is payload library libmagma.so.2.8.0"
    );
    let steps = &w.steps;
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].from, "lib/libtorch_cuda.so");
    assert_eq!(steps[1].to, "lib/libmagma.so.2.8.0");
    assert_eq!(steps[1].kind, EdgeKind::Needed);
}

#[test]
fn old_layout_without_lazy_library_is_refuted() {
    let (p, code) = plan("old-layout");
    assert_eq!(code, 1);
    assert_eq!(p.verdict, Verdict::NotConfined);
    assert!(p.lazy_library.is_none());
    let w = &p.witnesses[0].summary;
    assert!(
        w.starts_with(
            "_C.cpython-311-x86_64-linux-gnu.so → libtorch_cuda.so (NEEDED) → defines magma_"
        ),
        "{w}"
    );
    assert!(p.reasons.iter().any(|r| r.contains("no lazy library")));
}

#[test]
fn missing_payload_library_is_external_and_confined() {
    let (p, code) = plan("missing");
    assert_eq!(code, 0, "{p:#?}");
    assert_eq!(p.payload.external, ["libmagma.so.2"]);
    assert_eq!(
        output(&p, Role::Payload).unwrap().external,
        ["libmagma.so.2"]
    );
    // The CUDA runtime is neither in the tree nor a system library: reported, not fatal.
    let o = run_path(&["inspect", "--json", "--quiet"], &fixture("missing"));
    let ins = typed::<InspectReport>(&o);
    let cudart = ins
        .edges
        .iter()
        .find(|e| e.name == "libcudart.so.13")
        .expect("cudart edge");
    assert!(matches!(cudart.how, How::NotFound { .. }), "{cudart:?}");
    assert_eq!(ins.nodes[cudart.to].kind, NodeKind::External);
}

#[test]
fn nomagma_build_reports_not_present() {
    let (p, code) = plan("conda-nomagma");
    assert_eq!(code, 1);
    assert_eq!(p.verdict, Verdict::NotPresent);
}

/// `--lazy NAME` that names no file of the tree is a mistake when the tree loads another library
/// lazily on the way to the payload (conda-like dlopens libtorch_cuda_linalg.so): refused like an
/// empty glob, one line, exit 2, nothing written, naming the closest library names; not "NOT
/// CONFINED", which its own witness through the lazy edge contradicted.
#[test]
fn a_lazy_name_matching_no_file_is_refused_with_a_did_you_mean() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("plan.json");
    for (name, meant) in [
        ("libnothing.so", "did you mean libtorch_cuda_linalg.so"),
        (
            "libtorch_cuda_linalq.so",
            "did you mean libtorch_cuda_linalg.so",
        ),
        (
            "libtorch_cud.so",
            "libtorch_cuda_linalg.so or libtorch_cuda.so",
        ),
    ] {
        let o = run(&[
            "plan",
            "--json",
            "--quiet",
            "--lazy",
            name,
            fixture("conda-like").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{err:?}");
        assert!(
            err.contains(&format!("--lazy \"{name}\" matches no ELF file")),
            "{err}"
        );
        assert!(err.contains(meant), "{name}: {err}");
        assert!(o.stdout.is_empty() && !out.exists(), "nothing written");
    }
}

/// Where nothing in the tree is loaded lazily on the way to the payload (old-layout, as torch 1.10:
/// MAGMA linked into libtorch_cuda.so), a name that selects nothing is the answer: NOT CONFINED,
/// with the eager path, whatever the name.
#[test]
fn a_lazy_name_matching_no_file_is_an_answer_without_lazy_loading() {
    for name in ["libtorch_cuda_linalg.so", "libnothing.so"] {
        let o = run_path(
            &["plan", "--json", "--quiet", "--lazy", name],
            &fixture("old-layout"),
        );
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        let p = typed::<Plan>(&o);
        assert_eq!(p.verdict, Verdict::NotConfined);
        let w = &p.witnesses[0].summary;
        assert!(
            w.contains("→ libtorch_cuda.so (NEEDED) → defines magma_"),
            "{w}"
        );
    }
}

#[test]
fn lazy_and_dep_can_be_overridden() {
    // A different component: libtorch_cpu is "the payload", reached eagerly.
    let o = run_path(
        &["plan", "--json", "--quiet", "--dep", "torch_cpu"],
        &fixture("conda-like"),
    );
    let p = typed::<Plan>(&o);
    assert_eq!(p.verdict, Verdict::NotConfined);
    assert!(
        p.witnesses[0]
            .summary
            .ends_with("is payload library libtorch_cpu.so"),
        "{p:#?}"
    );
}

#[test]
fn yaml_and_text_carry_the_same_verdict() {
    let o = run_path(&["plan", "--yaml", "--quiet"], &fixture("conda-like"));
    assert_eq!(o.status.code(), Some(0));
    let y: Plan = serde_yaml::from_slice(&o.stdout).unwrap();
    assert_eq!(y.verdict, Verdict::Confined);
    let t = stdout(&run_path(&["plan", "--quiet"], &fixture("eager-leak")));
    assert!(t.contains("verdict: NOT CONFINED"), "{t}");
    assert!(
        t.contains("witness: torch_smoke → libtorch_cuda.so (NEEDED) → libmagma.so.2 (NEEDED)"),
        "{t}"
    );
}

#[test]
fn plan_output_is_deterministic_and_written_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let a = run(&[
        "plan",
        "--json",
        "--quiet",
        fixture("conda-like").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(a.status.code(), Some(0));
    assert!(a.stdout.is_empty());
    let first = std::fs::read(&out).unwrap();
    let b = run(&[
        "plan",
        "--json",
        "--quiet",
        fixture("conda-like").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(b.status.code(), Some(0));
    assert_eq!(first, std::fs::read(&out).unwrap());
    // Only the result is left in the directory: no temporary files.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["plan.json"]);
}

/// Provenance: every plan records the exact command and the tool; a date only when
/// SOURCE_DATE_EPOCH is set (so the same input still gives the same bytes), and the document
/// validates against the schema either way.
#[test]
fn plan_records_its_command_and_a_date_only_from_source_date_epoch() {
    let tree = fixture("pip-like");
    let args = ["plan", tree.to_str().unwrap(), "--json"];
    let plain = Command::new(bin())
        .args(args)
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .unwrap();
    let dated = Command::new(bin())
        .args(args)
        .env("SOURCE_DATE_EPOCH", "1764547200")
        .output()
        .unwrap();
    let (p, d) = (typed::<Plan>(&plain), typed::<Plan>(&dated));
    assert_eq!(
        p.stamp.command,
        [
            bin().to_str().unwrap(),
            "plan",
            tree.to_str().unwrap(),
            "--json"
        ]
    );
    assert_eq!(p.tool.name, "splitpkg");
    assert!(
        p.stamp.date.is_none(),
        "no date without SOURCE_DATE_EPOCH: {:?}",
        p.stamp.date
    );
    assert_eq!(d.stamp.date.as_deref(), Some("2025-12-01T00:00:00Z"));
    assert_eq!(
        stdout(&plain),
        stdout(
            &Command::new(bin())
                .args(args)
                .env_remove("SOURCE_DATE_EPOCH")
                .output()
                .unwrap()
        ),
        "deterministic"
    );
    for o in [&plain, &dated] {
        assert_valid("docs/plan.schema.json", &json(o));
    }
}

/// A site-packages directory: the pip-like tree plus pip's own dist-info, whose name sorts first
/// and whose RECORD is `pip_rows` long; torch's RECORD lists `torch_rows`.
fn site_packages(
    dir: &std::path::Path,
    pip_rows: usize,
    torch_rows: &[&str],
) -> std::path::PathBuf {
    let sp = dir.join("site-packages");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("pip-like"))
            .arg(&sp)
            .status()
            .unwrap()
            .success()
    );
    let pip = sp.join("pip-23.2.1.dist-info");
    std::fs::create_dir_all(&pip).unwrap();
    std::fs::write(
        pip.join("METADATA"),
        "Metadata-Version: 2.1\nName: pip\nVersion: 23.2.1\n\n",
    )
    .unwrap();
    let rows: String = (0..pip_rows)
        .map(|i| format!("pip/_internal/m{i}.py,sha256=AAAA,10\n"))
        .collect();
    std::fs::write(pip.join("RECORD"), rows).unwrap();
    let rows: String = torch_rows
        .iter()
        .map(|p| format!("{p},sha256=AAAA,10\n"))
        .collect();
    std::fs::write(sp.join("torch-2.5.1.dist-info/RECORD"), rows).unwrap();
    sp
}

#[test]
fn a_site_packages_directory_is_named_after_the_distribution_that_owns_the_lazy_library() {
    let d = tempfile::tempdir().unwrap();
    // pip's RECORD is the longer one, yet torch owns the lazy library: the tree is torch.
    let sp = site_packages(
        d.path(),
        50,
        &["torch/lib/libtorch_cuda_linalg.so", "torch/__init__.py"],
    );
    let o = run_path(&["plan", "--json", "--quiet"], &sp);
    let v: Plan = typed(&o);
    let package = v.input.package.as_ref();
    assert_eq!(
        package.map(|p| (p.name.as_str(), p.version.as_str())),
        Some(("torch", "2.5.1")),
        "{:?}",
        v.input
    );
    let text = stdout(&run_path(&["plan", "--quiet"], &sp));
    assert!(!text.contains("pip 23.2.1"), "{text}");
    // No owner of the lazy library (nothing records it): the distribution with the longest RECORD.
    let d = tempfile::tempdir().unwrap();
    let rows: Vec<String> = (0..20).map(|i| format!("torch/f{i}.py")).collect();
    let sp = site_packages(
        d.path(),
        5,
        &rows.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let v: Plan = typed(&run_path(&["plan", "--json", "--quiet"], &sp));
    assert_eq!(
        v.input.package.as_ref().map(|p| p.name.as_str()),
        Some("torch"),
        "{:?}",
        v.input
    );
}

/// The unit tests' gcc scenarios, through the command line: the miniature conda layout is
/// CONFINED (exit 0), and the same tree with the core NEEDing libmagma eagerly is refuted (exit 1)
/// with the eager path named. Needs the `testkit` feature (`full-tests` turns it on): listed as
/// ignored without it, as the other full-tier tests are.
#[test]
#[cfg_attr(
    not(feature = "testkit"),
    ignore = "needs analysis::testkit: cargo test --release --features full-tests"
)]
fn testkit_scenarios_through_the_cli() {
    #[cfg(feature = "testkit")]
    testkit_scenarios();
}

#[cfg(feature = "testkit")]
fn testkit_scenarios() {
    use splitpkg::analysis::testkit::{MAGMA, conda_layout};
    let mut s = conda_layout();
    let o = run(&["plan", "-q", "--json", s.tree().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(typed::<Plan>(&o).verdict, Verdict::Confined);

    s.lib("lib/libmagma_eager.so", MAGMA, &[]).lib(
        "lib/libtorch_cpu.so",
        "int torch_cpu_fn(int x) { return x + 1; }\n",
        &["lib/libmagma_eager.so"],
    );
    let o = run(&["plan", "-q", s.tree().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("NOT CONFINED") && text.contains("lib/libtorch_cpu.so"),
        "{text}"
    );
}

// ---- the saving against the environment a user installs (issue 53 item 5) ----

/// The pip-like fixture as a wheel named with its tags, as pip downloads it.
fn fixture_wheel(dir: &std::path::Path) -> std::path::PathBuf {
    let whl = dir.join("torch-2.5.1-cp311-cp311-manylinux_2_28_x86_64.whl");
    make_pip_wheel(
        &fixture("pip-like"),
        &whl,
        "cp311-cp311-manylinux_2_28_x86_64",
        false,
    );
    whl
}

/// A PEP 751 lock as uv writes one, with the given `[[packages]]` tables.
fn lock(dir: &std::path::Path, packages: &str) -> std::path::PathBuf {
    let p = dir.join("pylock.toml");
    std::fs::write(
        &p,
        format!(
            "lock-version = \"1.0\"\ncreated-by = \"uv\"\nrequires-python = \">=3.11\"\n{packages}"
        ),
    )
    .unwrap();
    p
}

fn wheel_entry(file: &str, size: Option<u64>) -> String {
    let size = size.map(|s| format!(", size = {s}")).unwrap_or_default();
    format!("{{ url = \"https://files.example/{file}\"{size}, hashes = {{ sha256 = \"00\" }} }}")
}

/// The stored (compressed) and installed bytes of one member of a wheel, read with the zip crate.
fn member_sizes(whl: &std::path::Path, name: &str) -> (u64, u64) {
    let mut z = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    let f = z.by_name(name).unwrap();
    (f.compressed_size(), f.size())
}

#[test]
fn a_wheel_with_a_lock_states_the_saving_against_its_download() {
    let d = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(d.path());
    // Sizes are those of real files: the fixture's own libraries stand in for CUDA wheels.
    let size = |f: &str| {
        std::fs::metadata(fixture("pip-like").join(f))
            .unwrap()
            .len()
    };
    let (cublas, cusolver) = (
        size("torch/lib/libtorch_cuda.so"),
        size("torch/lib/libtorch_cpu.so"),
    );
    let packages = [
        // The input itself: its own file counts, not the lock's entry.
        (
            "torch",
            "2.5.1",
            wheel_entry("torch-2.5.1-cp311-cp311-manylinux_2_28_x86_64.whl", Some(1)),
        ),
        (
            "nvidia-cublas",
            "13.1.0.3",
            wheel_entry(
                "nvidia_cublas-13.1.0.3-py3-none-manylinux_2_27_x86_64.whl",
                Some(cublas),
            ),
        ),
        (
            "nvidia-cusolver",
            "12.0.4.66",
            wheel_entry(
                "nvidia_cusolver-12.0.4.66-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                Some(cusolver),
            ),
        ),
        // Not for this platform: an installer here does not take it.
        (
            "only-arm",
            "1.0",
            wheel_entry(
                "only_arm-1.0-py3-none-manylinux_2_28_aarch64.whl",
                Some(1 << 30),
            ),
        ),
        // The index states no size: unknown, and the figure is a lower bound.
        (
            "no-size",
            "1.0",
            wheel_entry("no_size-1.0-py3-none-any.whl", None),
        ),
    ];
    let mut text: String = packages
        .iter()
        .map(|(n, v, w)| {
            format!("\n[[packages]]\nname = \"{n}\"\nversion = \"{v}\"\nwheels = [{w}]\n")
        })
        .collect();
    text.push_str("\n[[packages]]\nname = \"sdist-only\"\nversion = \"2.0\"\nsdist = { url = \"https://files.example/sdist_only-2.0.tar.gz\", size = 10 }\n");
    let lock = lock(d.path(), &text);
    let o = run(&["plan", "--json", "-q", s(&whl), "--env-lock", s(&lock)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/plan.schema.json", &json(&o));
    let p: Plan = typed(&o);
    let env = p.saving.environment.as_ref().unwrap();
    let whl_len = std::fs::metadata(&whl).unwrap().len();
    assert_eq!(env.source, EnvSource::Lock, "{env:#?}");
    assert_eq!(env.bytes, Some(whl_len + cublas + cusolver), "{env:#?}");
    assert_eq!(env.counted, 3, "{env:#?}");
    assert!(env.lower_bound);
    assert_eq!(env.unknown, ["no-size 1.0", "sdist-only 2.0"]);
    // The saving in the wheel's own measure: the lazy library's stored bytes in proportion to its
    // payload share (the payload is linked into it statically).
    let (stored, installed) = member_sizes(&whl, "torch/lib/libtorch_cuda_linalg.so");
    let saving = p.saving.bytes;
    let compressed = (stored as u128 * saving as u128 / installed as u128) as u64;
    assert_eq!(env.saving_bytes, Some(compressed), "{env:#?}");
    let percent =
        (compressed as f64 * 10000.0 / (whl_len + cublas + cusolver) as f64).round() / 100.0;
    assert_eq!(env.percent, Some(percent));
    assert!(
        env.how
            .contains("1 locked package(s) only for other platforms"),
        "{env:#?}"
    );
    // The tree-relative figure stays beside it.
    assert!(p.saving.percent_of_tree > percent);
    let text = stdout(&run(&["plan", "-q", s(&whl), "--env-lock", s(&lock)]));
    assert!(
        text.contains(&format!("of the environment: at most {percent:.2} %")),
        "{text}"
    );
}

#[test]
fn a_wheel_without_a_lock_says_the_environment_is_not_known_and_how_to_lock_it() {
    let d = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(d.path());
    let p: Plan = typed(&run(&["plan", "--json", "-q", s(&whl)]));
    let env = p.saving.environment.as_ref().unwrap();
    assert_eq!(env.source, EnvSource::NotKnown, "{env:#?}");
    assert!(env.bytes.is_none());
    let command = "echo torch==2.5.1 | uv pip compile - --format pylock.toml --python-platform x86_64-manylinux_2_28 --python-version 3.11 -o pylock.toml";
    assert_eq!(
        env.wheel.as_ref().unwrap().lock_command,
        command,
        "{env:#?}"
    );
    assert!(env.how.contains(command), "{env:#?}");
    let text = stdout(&run(&["plan", "-q", s(&whl)]));
    assert!(text.contains("of the environment: not known"), "{text}");
}

/// A lock that is hostile, broken or of another version is refused with one line naming it, exit
/// 2, and nothing is written.
#[test]
fn a_bad_lock_is_refused_in_one_line_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(d.path());
    let cases: [(&str, &str); 6] = [
        (
            "other-version.toml",
            "lock-version = \"1.0\"\n[[packages]]\nname = \"torch\"\nversion = \"2.6.0\"\n",
        ),
        ("not-toml.toml", "lock-version = \"1.0\"\n[[packages]\n"),
        ("version-2.toml", "lock-version = \"2.0\"\n"),
        (
            "control.toml",
            "lock-version = \"1.0\"\n[[packages]]\nname = \"evil\\u001b[31m\"\n",
        ),
        (
            "negative.toml",
            "lock-version = \"1.0\"\n[[packages]]\nname = \"x\"\nwheels = [{ name = \"x-1-py3-none-any.whl\", size = -5 }]\n",
        ),
        (
            "huge.toml",
            "lock-version = \"1.0\"\n[[packages]]\nname = \"x\"\nwheels = [{ name = \"x-1-py3-none-any.whl\", size = 9000000000000000 }]\n",
        ),
    ];
    let out = d.path().join("plan.json");
    for (name, text) in cases {
        let lock = d.path().join(name);
        std::fs::write(&lock, text).unwrap();
        let o = run(&[
            "plan",
            "--json",
            "-q",
            s(&whl),
            "--env-lock",
            s(&lock),
            "--out",
            s(&out),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
        assert!(err.contains(name), "{name}: {err}");
        assert!(!err.contains('\u{1b}'), "{name}: {err}");
        assert!(!out.exists(), "{name}: nothing written");
    }
    // A FIFO is never opened for reading; a directory input has no download to compare.
    let fifo = d.path().join("fifo.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let o = run(&["plan", "-q", s(&whl), "--env-lock", s(&fifo)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let lock = lock(d.path(), "");
    let o = run(&[
        "plan",
        "-q",
        s(&fixture("conda-like")),
        "--env-lock",
        s(&lock),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs a wheel"), "{}", stderr(&o));
}

/// Regular files under `dir`, each inode once, summed as an independent count (`find` and `sort
/// -u` over inode numbers).
fn bytes_by_find(dir: &std::path::Path) -> u64 {
    let o = Command::new("sh")
        .arg("-c")
        .arg("find \"$1\" -type f -printf '%i %s\\n' | sort -u | awk '{s += $2} END {print s}'")
        .arg("sh")
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

#[test]
fn an_installed_environment_is_measured_on_disk_with_hard_links_once() {
    let d = tempfile::tempdir().unwrap();
    // A venv: pyvenv.cfg at the root, site-packages three levels down, an interpreter in bin/.
    let venv = d.path().join("venv");
    let lib = venv.join("lib/python3.11");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::copy(
        fixture("pip-like/torch/lib/libtorch_cpu.so"),
        venv.join("bin/python3.11"),
    )
    .unwrap();
    let sp = site_packages(&lib, 3, &["torch/lib/libtorch_cuda_linalg.so"]);
    // One file under two names, and a symlink to a big file outside the environment.
    let data = sp.join("torch/data.bin");
    std::fs::write(&data, vec![7u8; 100_000]).unwrap();
    std::fs::hard_link(&data, sp.join("torch/data-again.bin")).unwrap();
    let outside = d.path().join("outside.bin");
    std::fs::write(&outside, vec![0u8; 1 << 20]).unwrap();
    std::os::unix::fs::symlink(&outside, sp.join("torch/outside.bin")).unwrap();
    let o = run_path(&["plan", "--json", "--quiet"], &sp);
    assert_valid("docs/plan.schema.json", &json(&o));
    let p: Plan = typed(&o);
    let env = p.saving.environment.as_ref().unwrap();
    assert_eq!(env.source, EnvSource::Disk, "{env:#?}");
    assert_eq!(
        env.path.as_deref(),
        Some(s(&venv.canonicalize().unwrap())),
        "{env:#?}"
    );
    let expected = bytes_by_find(&venv);
    assert_eq!(env.bytes, Some(expected), "{env:#?}");
    // The interpreter outside site-packages counts; the tree (site-packages) is smaller.
    assert!(expected > p.input.bytes);
    let saving = p.saving.bytes;
    assert_eq!(env.saving_bytes, Some(saving));
    let percent = (saving as f64 * 10000.0 / expected as f64).round() / 100.0;
    assert_eq!(env.percent, Some(percent));
    let text = stdout(&run_path(&["plan", "--quiet"], &sp));
    assert!(
        text.contains(&format!("of the environment: {percent:.2} %")),
        "{text}"
    );
    assert!(text.contains("on disk"), "{text}");
}

/// The real torch 2.11 wheel against a lock of its real environment, written by uv from the
/// public index: several GB, and the saving about 1 % of it.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, corpus and the public index: cargo test --release --features full-tests"
)]
fn the_torch_2_11_wheel_saves_about_one_percent_of_its_environment() {
    let (whl, _) = corpus("torch-2.11.0-cu130", false);
    let d = tempfile::tempdir().unwrap();
    let uv = wheel_tools().join("bin/uv");
    let mut child = Command::new(&uv)
        .current_dir(d.path())
        .args([
            "pip",
            "compile",
            "-",
            "--format",
            "pylock.toml",
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--python-version",
            "3.11",
            "-o",
            "pylock.toml",
            "-q",
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"torch==2.11.0\n")
        .unwrap();
    assert!(child.wait().unwrap().success(), "uv pip compile");
    let lock = d.path().join("pylock.toml");
    let out = d.path().join("plan.json");
    let o = run(&[
        "plan",
        "--json",
        "-q",
        s(&whl),
        "--env-lock",
        s(&lock),
        "--out",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let p: Plan = typed_file(&out);
    let env = p.saving.environment.as_ref().unwrap();
    eprintln!(
        "torch 2.11 environment: {env:#?}\nsaving: {}",
        p.saving.bytes
    );
    assert_eq!(env.source, EnvSource::Lock);
    assert!(!env.lower_bound, "PyPI states every size: {env:#?}");
    assert!(env.bytes.unwrap() > 2_000_000_000, "{env:#?}");
    let percent = env.percent.unwrap();
    assert!((0.5..2.5).contains(&percent), "{percent}");
    assert!(p.saving.percent_of_tree > 4.0);
    // The report gives both figures from that plan, and the rule's answer: not worth it.
    let page = d.path().join("r.md");
    let o = run(&[
        "report",
        "--plan",
        s(&out),
        "--format",
        "md",
        "--out",
        s(&page),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = std::fs::read_to_string(&page).unwrap();
    assert!(m.contains(&format!("**{percent:.2} %**")), "{m}");
    assert!(m.contains("NOT WORTH IT"), "{m}");
}
