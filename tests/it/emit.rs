//! `splitpkg emit` and `verify-variant`: recipes built by real rattler-build (offline, both
//! variants, tests run), meta.yaml rendered as conda-build would, match specs parsed strictly,
//! deterministic output, and the committed real-wheel example kept in sync.

use crate::common::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rattler_conda_types::{MatchSpec, ParseStrictness};
use splitpkg::analysis::contract::ContractFile;
use splitpkg::analysis::plan::Plan;
use splitpkg::document::Document;
use splitpkg::recipe::verify::VerifyReport;

fn emit(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "emit",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// `emit` with the version and build keys the recipe tests share, in `format`, plus `extra`.
fn emit_cuda126(input: &Path, out: &Path, format: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "--version",
        "2.5.1",
        "--build-keys",
        "cuda126",
        "--format",
        format,
    ];
    args.extend_from_slice(extra);
    emit(input, out, &args)
}

/// A stage directory as build-variants.sh would leave it: core/ plus magma/ and nomagma/ builds.
fn stage(core: &Path, lazy_rel: &str, magma: &Path, nomagma: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", core.display()))
        .arg(d.path().join("core"))
        .status()
        .unwrap();
    assert!(st.success());
    for (name, lib) in [("magma", magma), ("nomagma", nomagma)] {
        let dst = d.path().join(name).join(lazy_rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(lib, &dst).unwrap();
    }
    d
}

fn rattler_build(recipe_dir: &Path, stage: &Path, payload_version: &str) -> serde_json::Value {
    let work = tempfile::tempdir().unwrap();
    let python = python_env();
    let path = format!(
        "{}:{}",
        python.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(&python)
        .env("PATH", path)
        .arg(repo().join("tests/py/rattler_build_check.py"))
        .arg(recipe_dir)
        .arg(stage)
        .arg(work.path())
        .arg(bin())
        .arg(payload_version)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rattler-build failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

fn by_build(built: &serde_json::Value, needle: &str) -> serde_json::Value {
    built["packages"]
        .as_object()
        .unwrap()
        .values()
        .find(|p| {
            p["build"].as_str().unwrap().contains(needle)
                && p["name"] != "libmagma"
                && p["name"] != "splitpkg"
        })
        .unwrap_or_else(|| panic!("no package with build {needle}: {built:#}"))
        .clone()
}

fn strict(spec: &str) {
    MatchSpec::from_str(spec, ParseStrictness::Strict)
        .unwrap_or_else(|e| panic!("{spec:?} does not parse strictly: {e}"));
}

/// The recipe directory `rb` of the conda-like fixture: the has_magma note names the measured
/// remedy, and the variant key is used only inside the lazy output.
fn assert_has_magma_note_and_lazy_only_variant_key(rb: &Path) {
    // It points at the remedy that was measured (asking the loaded library), not a guess, and
    // says how smoke tells a stale flag from a broken variant.
    let note = std::fs::read_to_string(rb.join("HAS_MAGMA.md")).unwrap();
    assert!(
        note.contains("**Measured:**")
            && note.contains("os.RTLD_NOLOAD")
            && note.contains(r#"endswith("/libtorch_cuda_linalg.so")"#),
        "{note}"
    );
    assert!(
        note.contains("exit code 4")
            && note.contains("Not measured: patch `CUDAHooks::hasMAGMA()`"),
        "{note}"
    );
    let recipe = std::fs::read_to_string(rb.join("recipe.yaml")).unwrap();
    assert!(recipe.contains("down_prioritize_variant"));
    // The variant key only inside the lazy output: its first use comes after that output starts.
    let lazy_start = recipe.find("name: libtorch-cuda-linalg").unwrap();
    let first_use = recipe
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let first_key = first_use.find("linalg_variant").unwrap();
    assert!(
        first_key > first_use.find("name: libtorch-cuda-linalg").unwrap(),
        "variant key used outside the lazy output"
    );
    assert!(lazy_start > 0);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn conda_like_recipe_builds_both_variants_with_rattler_build() {
    let out = tempfile::tempdir().unwrap();
    let o = emit_cuda126(&fixture("conda-like"), out.path(), "rattler-build", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Glue in libtorch_cuda.so: the has_magma note and a warning.
    assert!(stderr(&o).contains("has_magma"), "{}", stderr(&o));
    let rb = out.path().join("rattler-build");
    assert_has_magma_note_and_lazy_only_variant_key(&rb);
    let st = stage(
        &fixture("conda-like"),
        "lib/libtorch_cuda_linalg.so",
        &fixture("conda-like/lib/libtorch_cuda_linalg.so"),
        &fixture("conda-nomagma/lib/libtorch_cuda_linalg.so"),
    );
    let built = rattler_build(&rb, st.path(), "2.8.0");
    assert_eq!(built["rendered_variants"], 4, "{built:#}"); // core and lazy, for each variant value

    let magma = by_build(&built, "_magma_");
    let nomagma = by_build(&built, "_nomagma_");
    let core = built["packages"]
        .as_object()
        .unwrap()
        .values()
        .find(|p| p["name"] == "libtorch")
        .unwrap()
        .clone();
    assert!(
        magma["build"]
            .as_str()
            .unwrap()
            .starts_with("cuda126_magma_h")
    );
    assert!(
        nomagma["build"]
            .as_str()
            .unwrap()
            .starts_with("cuda126_nomagma_h")
    );
    assert_eq!(
        magma["build_number"], nomagma["build_number"],
        "no build-number offsets"
    );
    assert_eq!(magma["track_features"], serde_json::Value::Null);
    assert_eq!(nomagma["track_features"], "libtorch-cuda-linalg-p-0");
    assert_eq!(
        magma["depends"],
        serde_json::json!(["libmagma >=2.8.0,<2.9.0a0"])
    );
    assert_eq!(
        magma["constrains"],
        serde_json::json!(["libtorch ==2.5.1 cuda126_*"])
    );
    assert_eq!(
        nomagma["constrains"],
        serde_json::json!(["libtorch ==2.5.1 cuda126_*", "libmagma <0.0a0"])
    );
    assert_eq!(
        core["depends"],
        serde_json::json!(["libtorch-cuda-linalg ==2.5.1 cuda126_*"])
    );
    for p in [&magma, &nomagma, &core] {
        for key in ["depends", "constrains"] {
            for s in p[key].as_array().into_iter().flatten() {
                strict(s.as_str().unwrap());
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn static_payload_recipe_has_no_payload_dependency() {
    let out = tempfile::tempdir().unwrap();
    let o = emit(
        &fixture("pip-like"),
        out.path(),
        &["--build-keys", "cuda126", "--format", "rattler-build"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rb = out.path().join("rattler-build");
    let st = stage(
        &fixture("pip-like"),
        "torch/lib/libtorch_cuda_linalg.so",
        &fixture("pip-like/torch/lib/libtorch_cuda_linalg.so"),
        &fixture("conda-nomagma/lib/libtorch_cuda_linalg.so"),
    );
    let built = rattler_build(&rb, st.path(), "2.8.0");
    let magma = by_build(&built, "_magma_");
    let nomagma = by_build(&built, "_nomagma_");
    assert_eq!(
        magma["version"], "2.5.1",
        "version from the dist-info METADATA"
    );
    assert_eq!(
        magma["depends"],
        serde_json::json!([]),
        "MAGMA is inside the library"
    );
    assert_eq!(
        nomagma["constrains"],
        serde_json::json!(["libtorch ==2.5.1 cuda126_*", "libmagma <0.0a0"])
    );
}

#[test]
fn prefer_nomagma_flips_the_preference() {
    let out = tempfile::tempdir().unwrap();
    let o = emit_cuda126(
        &fixture("conda-like"),
        out.path(),
        "both",
        &["--prefer", "nomagma"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recipe = std::fs::read_to_string(out.path().join("rattler-build/recipe.yaml")).unwrap();
    assert!(
        recipe.contains(r#"down_prioritize_variant: ${{ 1 if linalg_variant == "magma" else 0 }}"#),
        "{recipe}"
    );
    let meta = render_meta(&out.path().join("conda-build"), "magma");
    assert_eq!(
        meta["outputs"][1]["build"]["track_features"],
        serde_json::json!(["magma"])
    );
}

/// Render meta.yaml the way conda-build does: apply `# [selector]` lines for the variant, then
/// Jinja with the functions conda-build provides, then parse the YAML.
fn render_meta(dir: &Path, variant: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("meta.yaml")).unwrap();
    let cbc: BTreeMap<String, Vec<String>> = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("conda_build_config.yaml")).unwrap(),
    )
    .unwrap();
    let key = cbc.keys().next().unwrap().clone();
    assert!(cbc[&key].contains(&variant.to_string()));
    let mut env = minijinja::Environment::new();
    env.add_function(
        "pin_compatible",
        |name: String, _kw: minijinja::value::Kwargs| format!("{name} >=2.8.0,<2.9.0a0"),
    );
    env.add_function(
        "pin_subpackage",
        |name: String, _kw: minijinja::value::Kwargs| name,
    );
    env.add_function("compiler", |lang: String| format!("{lang}_compiler_stub"));
    let sel_ctx = minijinja::context! { linux => true, unix => true, win => false, osx => false, linux64 => true, x86_64 => true };
    let mut kept = Vec::new();
    for line in text.lines() {
        if let Some(pos) = line.rfind("# [") {
            let expr = line[pos + 3..].trim_end().trim_end_matches(']');
            let expr = expr.replace(&key, &format!("{variant:?}"));
            let value = env
                .compile_expression(&expr)
                .unwrap()
                .eval(&sel_ctx)
                .unwrap();
            if !value.is_true() {
                continue;
            }
            kept.push(line[..pos].trim_end().to_string());
        } else {
            kept.push(line.to_string());
        }
    }
    let template = kept.join("\n");
    let ctx: BTreeMap<String, String> = [
        ("PKG_HASH".to_string(), "1234567".to_string()),
        ("PKG_BUILDNUM".to_string(), "0".to_string()),
        (key.clone(), variant.to_string()),
    ]
    .into_iter()
    .collect();
    let rendered = env.render_str(&template, ctx).unwrap();
    serde_yaml::from_str(&rendered).unwrap_or_else(|e| panic!("{e}\n{rendered}"))
}

#[test]
fn meta_yaml_renders_as_conda_build_would() {
    let out = tempfile::tempdir().unwrap();
    let o = emit_cuda126(&fixture("conda-like"), out.path(), "conda-build", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = out.path().join("conda-build");
    for f in [
        "meta.yaml",
        "conda_build_config.yaml",
        "install_libtorch.sh",
        "install_libtorch-cuda-linalg.sh",
        "build-variants.sh",
        "contract.json",
        "HAS_MAGMA.md",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    for variant in ["magma", "nomagma"] {
        let m = render_meta(&dir, variant);
        assert_eq!(m["package"]["name"], "libtorch-split");
        let outputs = m["outputs"].as_array().unwrap();
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0]["name"], "libtorch");
        assert_eq!(
            outputs[0]["requirements"]["run"],
            serde_json::json!(["libtorch-cuda-linalg ==2.5.1 cuda126_*"])
        );
        let lazy = &outputs[1];
        assert_eq!(lazy["name"], "libtorch-cuda-linalg");
        assert_eq!(
            lazy["build"]["string"],
            format!("cuda126_{variant}_h1234567_0")
        );
        let constrained: Vec<String> = lazy["requirements"]["run_constrained"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        for s in &constrained {
            strict(s);
        }
        if variant == "magma" {
            assert_eq!(
                lazy["requirements"]["run"],
                serde_json::json!(["libmagma >=2.8.0,<2.9.0a0"])
            );
            assert_eq!(
                lazy["requirements"]["host"],
                serde_json::json!(["libmagma"])
            );
            assert!(lazy["build"]["track_features"].is_null());
            assert_eq!(constrained, vec!["libtorch ==2.5.1 cuda126_*"]);
        } else {
            assert!(lazy["requirements"]["run"].is_null());
            assert_eq!(
                lazy["build"]["track_features"],
                serde_json::json!(["nomagma"])
            );
            assert_eq!(
                constrained,
                vec!["libtorch ==2.5.1 cuda126_*", "libmagma <0.0a0"]
            );
        }
        assert_eq!(
            lazy["test"]["requires"],
            serde_json::json!([splitpkg::recipe::emit::splitpkg_requirement()])
        );
    }
    // conda-build scans the top-level script and fields for every output: the key must not be
    // in build-variants.sh or in the core output's script.
    for f in ["build-variants.sh", "install_libtorch.sh"] {
        let s = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(
            !s.contains("linalg_variant"),
            "{f} mentions the variant key"
        );
    }
    assert!(
        std::fs::read_to_string(dir.join("install_libtorch-cuda-linalg.sh"))
            .unwrap()
            .contains("${linalg_variant}")
    );
}

#[test]
fn emit_is_deterministic_and_refuses_unconfined_plans() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    for d in [&a, &b] {
        let o = emit(&fixture("conda-like"), d.path(), &["--version", "2.5.1"]);
        assert_eq!(o.status.code(), Some(0));
    }
    for (rel, path) in walk(a.path()) {
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(b.path().join(&rel)).unwrap(),
            "{rel} differs"
        );
    }
    // From a plan JSON too, with the same result.
    let plan = a.path().join("plan.json");
    let o = run(&[
        "plan",
        "--json",
        "--quiet",
        fixture("conda-like").to_str().unwrap(),
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let c = tempfile::tempdir().unwrap();
    assert_eq!(
        emit(&plan, c.path(), &["--version", "2.5.1"]).status.code(),
        Some(0)
    );
    let recipe = |d: &Path| std::fs::read_to_string(d.join("rattler-build/recipe.yaml")).unwrap();
    assert_eq!(
        recipe(a.path()).replace("conda-like", "X"),
        recipe(c.path()).replace("plan.json", "X")
    );

    let refused = tempfile::tempdir().unwrap();
    let o = emit(
        &fixture("eager-leak"),
        refused.path(),
        &["--version", "2.5.1"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("NOT CONFINED"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(refused.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// The names of the failed checks of a `verify-variant --json` run, in order.
fn failed_checks(o: &std::process::Output) -> Vec<String> {
    let r: VerifyReport = typed(o);
    r.checks
        .into_iter()
        .filter(|c| !c.pass)
        .map(|c| c.name)
        .collect()
}

#[test]
fn verify_variant_checks_payload_and_contract() {
    let out = tempfile::tempdir().unwrap();
    assert_eq!(
        emit(&fixture("conda-like"), out.path(), &["--version", "2.5.1"])
            .status
            .code(),
        Some(0)
    );
    let contract = out.path().join("rattler-build/contract.json");
    let text = std::fs::read_to_string(&contract).unwrap();
    assert_valid(
        "docs/contract.schema.json",
        &serde_json::from_str(&text).unwrap(),
    );
    let c = <ContractFile as Document>::from_str(&text, "contract.json").unwrap();
    assert_eq!(c.loader_lookups, ["linalg_entry"]);
    let verify = |lib: PathBuf, variant: &str| {
        run(&[
            "verify-variant",
            lib.to_str().unwrap(),
            "--variant",
            variant,
            "--contract",
            contract.to_str().unwrap(),
            "--json",
        ])
    };

    let ok = verify(
        fixture("conda-nomagma/lib/libtorch_cuda_linalg.so"),
        "nomagma",
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(typed::<VerifyReport>(&ok).pass);
    let ok = verify(fixture("conda-like/lib/libtorch_cuda_linalg.so"), "magma");
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));

    // The MAGMA build passed off as nomagma fails on the payload checks.
    let bad = verify(fixture("conda-like/lib/libtorch_cuda_linalg.so"), "nomagma");
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        failed_checks(&bad),
        ["no payload library NEEDED", "no payload symbols imported"]
    );
    // Static MAGMA as nomagma: defined symbols.
    let bad = verify(
        fixture("pip-like/torch/lib/libtorch_cuda_linalg.so"),
        "nomagma",
    );
    let r: VerifyReport = typed(&bad);
    assert!(
        r.checks
            .iter()
            .any(|c| c.name == "no payload symbols defined" && !c.pass)
    );
    // A library that lost the symbol the loader looks up.
    let wrong = verify(fixture("conda-like/lib/libtorch_cpu.so"), "nomagma");
    assert_eq!(
        failed_checks(&wrong),
        ["soname", "exports what the loader looks up"]
    );
    // Bad input.
    let o = run(&[
        "verify-variant",
        "/nonexistent.so",
        "--variant",
        "nomagma",
        "--contract",
        contract.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&[
        "verify-variant",
        fixture("conda-like/lib/libtorch_cpu.so").to_str().unwrap(),
        "--variant",
        "blue",
        "--contract",
        contract.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn committed_torch_2_11_recipes_match_emit() {
    let (wheel, _) = corpus("torch-2.11.0-cu130", false);
    let out = tempfile::tempdir().unwrap();
    let o = emit(&wheel, out.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let committed = repo().join("recipes/torch-2.11");
    let produced: Vec<(String, PathBuf)> = walk(out.path());
    let expected: Vec<(String, PathBuf)> = walk(&committed)
        .into_iter()
        .filter(|(r, _)| r != "README.md")
        .collect();
    assert_eq!(
        produced.iter().map(|p| &p.0).collect::<Vec<_>>(),
        expected.iter().map(|p| &p.0).collect::<Vec<_>>(),
        "recipes/torch-2.11 has drifted: regenerate with the command in its README.md"
    );
    for ((rel, p), (_, e)) in produced.iter().zip(&expected) {
        assert_eq!(
            std::fs::read_to_string(p).unwrap(),
            std::fs::read_to_string(e).unwrap(),
            "recipes/torch-2.11/{rel} has drifted: regenerate with the command in recipes/torch-2.11/README.md"
        );
    }
}

#[test]
fn zstd_device_code_on_cuda_12_adds_a_driver_floor() {
    use splitpkg::fatbin::{
        Compression,
        synth::{self, SynthEntry},
    };
    // The CUDA 12 fixture plus a zstd fat binary in libtorch_cuda.so: needs the CUDA 12.4 driver,
    // above the 525 the CUDA 12 runtime needs.
    let tree = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture("cuda12").display()))
        .arg(tree.path())
        .status()
        .unwrap();
    assert!(st.success());
    let lib = tree.path().join("torch/lib/libtorch_cuda.so");
    let cubin = synth::fake_cubin(90, 4096, 7);
    let section = synth::section(
        &[synth::container(&[SynthEntry::elf(
            90,
            &cubin,
            Compression::Zstd,
        )])],
        0,
    );
    let with = tree.path().join("with-fatbin.so");
    embed_fatbin(&lib, &section, &with);
    std::fs::rename(&with, &lib).unwrap();

    let o = run_path(&["plan", "--json", "--quiet"], tree.path());
    assert_valid("docs/plan.schema.json", &json(&o));
    let plan = typed::<Plan>(&o);
    assert_eq!(plan.input.cuda_runtime, Some(12));
    let d = plan.device_code.as_ref().unwrap();
    assert_eq!(d.compression, ["zstd"]);
    assert!(d.compression_raises_floor);
    assert_eq!(d.cuda_floor.as_deref(), Some("12.4"));
    assert_eq!(d.driver_minimum.as_deref(), Some("550.54.14"));
    assert_eq!(plan.outputs[0].device_code, d.stored);

    let out = tempfile::tempdir().unwrap();
    let o = emit(tree.path(), out.path(), &["--build-keys", "cuda126"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recipe = std::fs::read_to_string(out.path().join("rattler-build/recipe.yaml")).unwrap();
    assert!(recipe.contains("        - __cuda >=12.4\n"), "{recipe}");
    assert!(recipe.contains("# zstd-compressed device code"), "{recipe}");
    let meta = render_meta(&out.path().join("conda-build"), "magma");
    assert_eq!(
        meta["outputs"][0]["requirements"]["run"],
        serde_json::json!(["libtorch-cuda-linalg ==2.5.1 cuda126_*", "__cuda >=12.4"])
    );
    strict("__cuda >=12.4");

    // The CUDA 13 torch wheel: zstd too, but the runtime's own floor (580) is higher: no constraint.
    let recipe =
        std::fs::read_to_string(repo().join("recipes/torch-2.11/rattler-build/recipe.yaml"))
            .unwrap();
    assert!(!recipe.contains("__cuda"));
}

/// File names that attack each context a tree path reaches — shell command substitution, quotes,
/// YAML `: `, a leading quote — are quoted where they land: the generated install script runs
/// without executing anything and removes exactly that file, and both recipes parse to the literal
/// name (meta.yaml after conda-build's Jinja and selector pass). Names no quoting can make inert
/// everywhere (newline, `..`, Jinja delimiters, `#`) and package names or versions with `../` are
/// refused before anything is written.
#[test]
fn hostile_names_are_quoted_or_refused_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("conda-like"))
            .arg(&tree)
            .status()
            .unwrap()
            .success()
    );
    let evil = "lib/libmagma_$(touch${IFS}PWNED)`touch${IFS}PWNED2`'q\": b.so";
    std::fs::copy(tree.join("lib/libmagma_sparse.so"), tree.join(evil)).unwrap();
    let out = d.path().join("out");
    let o = emit(
        &tree,
        &out,
        &["--version", "2.5.1", "--build-keys", "cuda126"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The install script of the core output, run as conda-build would (cwd = the staged source).
    let work = d.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(&tree)
            .arg(work.join("core"))
            .status()
            .unwrap()
            .success()
    );
    let prefix = d.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    let st = Command::new("bash")
        .arg(out.join("conda-build/install_libtorch.sh"))
        .current_dir(&work)
        .env("PREFIX", &prefix)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(
        !prefix.join(evil).exists(),
        "the payload file is removed from the core output"
    );
    assert!(
        prefix.join("lib/libtorch_cuda.so").exists(),
        "the rest is installed"
    );
    for dir in [&work, &prefix, &d.path().to_path_buf(), &repo()] {
        assert!(
            !dir.join("PWNED").exists() && !dir.join("PWNED2").exists(),
            "a file name ran as code in {}",
            dir.display()
        );
    }

    // Both recipes read back with the literal name.
    let recipe: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(out.join("rattler-build/recipe.yaml")).unwrap(),
    )
    .unwrap();
    let text = serde_json::to_string(&recipe).unwrap();
    let glob = splitpkg::recipe::emit::quote::glob_literal(evil);
    assert!(
        text.contains(&serde_json::to_string(&glob).unwrap()),
        "the exclude glob is the escaped literal name: {text}"
    );
    let meta = render_meta(&out.join("conda-build"), "nomagma");
    assert_eq!(meta["outputs"][0]["name"], "libtorch");
    let script = std::fs::read_to_string(out.join("conda-build/install_libtorch.sh")).unwrap();
    assert!(
        script.contains(r#"libmagma_\$(touch\${IFS}PWNED)\`touch\${IFS}PWNED2\`'q\": b.so"#),
        "{script}"
    );
}

/// Names no quoting can make inert everywhere (newline, Jinja delimiters, `#`) are refused: one
/// line naming the file, exit 2, nothing written.
#[test]
fn names_no_quoting_makes_inert_are_refused_before_anything_is_written() {
    let d = tempfile::tempdir().unwrap();
    for (bad, why) in [
        ("lib/libmagma_a\nb.so", "control character"),
        ("lib/libmagma_{{ x }}.so", "Jinja delimiter"),
        ("lib/libmagma_#x.so", "selectors"),
    ] {
        let t = d.path().join("bad-tree");
        let _ = std::fs::remove_dir_all(&t);
        assert!(
            Command::new("cp")
                .arg("-a")
                .arg(fixture("conda-like"))
                .arg(&t)
                .status()
                .unwrap()
                .success()
        );
        std::fs::copy(t.join("lib/libmagma_sparse.so"), t.join(bad)).unwrap();
        let o2 = d.path().join("out2");
        let o = emit(&t, &o2, &["--version", "2.5.1"]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(
            stderr(&o).contains(why) && stderr(&o).contains("libmagma_"),
            "{bad:?}: {}",
            stderr(&o)
        );
        assert!(!o2.exists(), "nothing written for {bad:?}");
    }
}

/// Package names, versions and keys with `../`, capitals, spaces or shell are refused by emit and
/// pack alike, naming the flag, before anything is written.
#[test]
fn hostile_names_and_versions_are_refused_by_emit_and_pack() {
    let d = tempfile::tempdir().unwrap();
    for (flag, value) in [
        ("--core-name", "../../escape"),
        ("--lazy-name", "Lib/x"),
        ("--version", "1.0/../../x"),
        ("--variant-key", "a b"),
        ("--build-keys", "cu$(id)"),
    ] {
        let o2 = d.path().join("out3");
        let o = emit(
            &fixture("conda-like"),
            &o2,
            &["--version", "2.5.1", flag, value],
        );
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
        assert!(
            !o2.exists() && !d.path().join("escape").exists(),
            "nothing written for {flag} {value}"
        );
        let ch = d.path().join("channel");
        let o = run(&[
            "pack",
            fixture("conda-like").to_str().unwrap(),
            "--out",
            ch.to_str().unwrap(),
            "--version",
            "2.5.1",
            flag,
            value,
            "-q",
        ]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "pack {flag} {value}: {}",
            stderr(&o)
        );
        assert!(
            !ch.exists() && !d.path().join("escape").exists(),
            "pack wrote nothing for {flag} {value}"
        );
    }
}

/// The names that pass validation but attack the shell, YAML and glob contexts, built by real
/// rattler-build: both variants build, the payload-named file stays out of the core package, a
/// hostile data file lands in it under its literal name, and nothing in a name ran. The commands
/// inside the names write into `$PREFIX` (so a file would ship in the package) and into
/// `$RECIPE_DIR` (which outlives the build); both are checked.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn hostile_names_build_inert_with_rattler_build() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("conda-like"))
            .arg(&tree)
            .status()
            .unwrap()
            .success()
    );
    let payload = "lib/libmagma_$(cd${IFS}$PREFIX;touch${IFS}PWNED)`cd${IFS}$RECIPE_DIR;touch${IFS}PWNED2`'q\": b.so";
    let data = "share/hostile/a $(cd${IFS}$PREFIX;touch${IFS}PWNED3) `cd${IFS}$RECIPE_DIR;touch${IFS}PWNED4` 'q\": &x *y [z] - ?.txt";
    std::fs::copy(tree.join("lib/libmagma_sparse.so"), tree.join(payload)).unwrap();
    std::fs::create_dir_all(tree.join("share/hostile")).unwrap();
    std::fs::write(tree.join(data), b"literal\n").unwrap();
    let out = d.path().join("out");
    let o = emit_cuda126(&tree, &out, "rattler-build", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let st = stage(
        &tree,
        "lib/libtorch_cuda_linalg.so",
        &fixture("conda-like/lib/libtorch_cuda_linalg.so"),
        &fixture("conda-nomagma/lib/libtorch_cuda_linalg.so"),
    );
    let built = rattler_build(&out.join("rattler-build"), st.path(), "2.8.0");
    assert_eq!(
        built["pwned"],
        serde_json::json!([]),
        "a file name ran as code: {built:#}"
    );
    let packages = built["packages"].as_object().unwrap();
    let core = packages
        .values()
        .find(|p| p["name"] == "libtorch")
        .unwrap_or_else(|| panic!("no core package: {built:#}"));
    let paths: Vec<&str> = core["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        paths.contains(&data),
        "the data file is in the core package under its literal name: {paths:#?}"
    );
    assert!(
        !paths.contains(&payload),
        "the payload-named file is excluded from the core package: {paths:#?}"
    );
    assert!(
        paths.contains(&"lib/libtorch_cuda.so") && !paths.contains(&"lib/libtorch_cuda_linalg.so"),
        "{paths:#?}"
    );
    for p in packages.values() {
        let listed = p["paths"].as_array().unwrap();
        let created = |f: &serde_json::Value| {
            f.as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .starts_with("PWNED")
        };
        assert!(
            !listed.iter().any(created),
            "a file name ran as code inside {}: {listed:#?}",
            p["name"]
        );
    }
    for variant in ["_magma_", "_nomagma_"] {
        // Besides the lazy library, a lazy package holds only its test files (the contract).
        let lazy = by_build(&built, variant);
        let shipped: Vec<&str> = lazy["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .filter(|p| !p.starts_with("etc/conda/test-files/"))
            .collect();
        assert_eq!(
            shipped,
            ["lib/libtorch_cuda_linalg.so"],
            "{variant}: {lazy:#}"
        );
    }
}
