//! Beyond one lazy library and one payload (issue 16), on the gcc-built `providers` trees
//! (fixtures/build.sh) through the command line: a runtime that dlopens two providers which share a
//! heavy dependency; `--lazy` as a glob and repeated, `--dep` repeated, external payload libraries
//! with the packages that provide them, and what emit, pack, verify-variant and wheel do with it.

use crate::common::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use splitpkg::analysis::contract::ContractFile;
use splitpkg::analysis::graph::Reach;
use splitpkg::analysis::plan::{Plan, PlanOutput, Role};
use splitpkg::analysis::providers::Provider;
use splitpkg::analysis::verdict::{PayloadForm, Verdict};
use splitpkg::channel::document::{InstallEnv, PackReport, ScenarioStatus, SolveReport};
use splitpkg::channel::info::ChannelInfo;
use splitpkg::wheel::document::WheelReport;

const GLOB: &str = "libfoo_providers_*.so";

fn plan(tree: &str, args: &[&str]) -> (Option<i32>, Plan) {
    let mut all = vec!["plan", "--json", "--quiet"];
    all.extend_from_slice(args);
    let o = run_path(&all, &fixture(tree));
    let p = json(&o);
    assert_valid("docs/plan.schema.json", &p);
    (o.status.code(), typed(&o))
}

fn output(plan: &Plan, role: Role) -> &PlanOutput {
    plan.outputs
        .iter()
        .find(|o| o.role == role)
        .unwrap_or_else(|| panic!("no {role:?} output"))
}

#[test]
fn two_providers_sharing_a_payload_are_confined_and_share_one_lazy_output() {
    for lazy in [
        &["--lazy", GLOB][..],
        &[
            "--lazy",
            "libfoo_providers_a.so",
            "--lazy",
            "libfoo_providers_b.so",
        ],
    ] {
        let mut args = lazy.to_vec();
        args.extend(["--dep", "heavy"]);
        let (code, p) = plan("providers", &args);
        assert_eq!(
            (code, p.verdict),
            (Some(0), Verdict::Confined),
            "{lazy:?}: {:#?}",
            p.witnesses
        );
        assert!(p.lazy_library.is_none());
        let lazy_paths: Vec<&str> = p.lazy_libraries.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(
            lazy_paths,
            ["lib/libfoo_providers_a.so", "lib/libfoo_providers_b.so"]
        );
        for l in &p.lazy_libraries {
            assert_eq!(
                (l.reach, l.loaded_by[0].from.as_str()),
                (Reach::Lazy, "lib/libfoo_core.so")
            );
            assert_eq!(
                l.contract.as_ref().unwrap().loader_lookups,
                ["provider_entry"]
            );
        }
        assert_eq!(
            output(&p, Role::Lazy).files,
            ["lib/libfoo_providers_a.so", "lib/libfoo_providers_b.so"]
        );
        assert_eq!(output(&p, Role::Payload).files, ["lib/libheavy.so.1"]);
        let core: BTreeSet<&str> = output(&p, Role::Core)
            .files
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(
            core,
            BTreeSet::from(["bin/foo_run", "lib/VERSION", "lib/libfoo_core.so"])
        );
    }
    let (_, p) = plan("providers", &["--lazy", GLOB, "--dep", "heavy"]);
    assert_eq!(p.options.lazy, GLOB, "one --lazy stays a string");
    let o = run_path(
        &["plan", "--quiet", "--lazy", GLOB, "--dep", "heavy"],
        &fixture("providers"),
    );
    let text = stdout(&o);
    assert!(
        text.contains("verdict: CONFINED  (heavy via --lazy libfoo_providers_*.so)"),
        "{text}"
    );
    assert!(
        text.contains("lazy libraries (2, one shared lazy output):\n  lib/libfoo_providers_a.so"),
        "{text}"
    );
    assert!(
        text.contains("contract (loader ↔ lib/libfoo_providers_b.so):"),
        "{text}"
    );
}

#[test]
fn one_provider_named_alone_is_refuted_with_the_path_through_the_other() {
    let (code, p) = plan(
        "providers",
        &["--lazy", "libfoo_providers_a.so", "--dep", "heavy"],
    );
    assert_eq!((code, p.verdict), (Some(1), Verdict::NotConfined));
    assert_eq!(
        p.witnesses[0].summary,
        "foo_run → libfoo_core.so (NEEDED) → libfoo_providers_b.so (lazy) → libheavy.so.1 (NEEDED) → is payload library libheavy.so.1"
    );
    assert_eq!(
        p.lazy_library.as_ref().unwrap().path,
        "lib/libfoo_providers_a.so",
        "one lazy library keeps the one-library form"
    );
    assert!(p.lazy_libraries.is_empty());
}

#[test]
fn a_provider_a_core_file_needs_is_refuted_with_the_path_through_that_file() {
    let (code, p) = plan("providers-leak", &["--lazy", GLOB, "--dep", "heavy"]);
    assert_eq!((code, p.verdict), (Some(1), Verdict::NotConfined));
    let w = &p.witnesses[0];
    assert_eq!(
        w.summary,
        "foo_run → libfoo_core.so (NEEDED) → libfoo_providers_b.so (NEEDED) → the lazy library is NEEDed, so it loads at start-up"
    );
    assert_eq!(w.steps[1].from, "lib/libfoo_core.so");
    let reach: Vec<Reach> = p.lazy_libraries.iter().map(|l| l.reach).collect();
    assert_eq!(reach, [Reach::Lazy, Reach::Eager]);
    assert!(p.outputs.is_empty());
}

#[test]
fn a_glob_that_matches_nothing_is_refused_with_one_line_naming_the_input() {
    let tree = fixture("providers");
    let out = tempfile::tempdir().unwrap();
    let channel = out.path().join("channel");
    for args in [
        vec!["plan", "--lazy", "libbar_*.so", "--dep", "heavy"],
        vec![
            "plan",
            "--lazy",
            GLOB,
            "--lazy",
            "libbar_*.so",
            "--dep",
            "heavy",
            "--json",
        ],
        vec![
            "pack",
            "--lazy",
            "libbar_*.so",
            "--dep",
            "heavy",
            "--version",
            "1.0",
            "--out",
            channel.to_str().unwrap(),
        ],
    ] {
        let o = run_path(&args, &tree);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "splitpkg: error: {}: --lazy \"libbar_*.so\" matches no ELF file by name or SONAME; `splitpkg inspect` lists the files",
                tree.display()
            )
        );
    }
    assert!(!channel.exists(), "nothing written");
    // So is an exact name that matches nothing while the tree dlopens the providers on the way to
    // libheavy (issue 50): the refusal names them. (With no lazy loading on the way to the payload
    // it is an answer, as for torch 1.10: plan::a_lazy_name_matching_no_file_is_an_answer_….)
    let o = run_path(
        &[
            "plan",
            "--json",
            "--quiet",
            "--lazy",
            "libbar.so",
            "--dep",
            "heavy",
        ],
        &tree,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.contains("did you mean libfoo_providers_a.so or libfoo_providers_b.so"),
        "{err}"
    );
}

#[test]
fn several_deps_name_their_external_providers_and_the_recipe_constrains_them() {
    let (code, p) = plan(
        "providers",
        &["--lazy", GLOB, "--dep", "heavy", "--dep", "cudnn"],
    );
    assert_eq!(code, Some(0), "{:#?}", p.witnesses);
    assert_eq!(
        (p.options.dep.as_str(), p.options.deps.as_slice()),
        (
            "heavy_cudnn",
            &["heavy".to_string(), "cudnn".to_string()][..]
        )
    );
    assert_eq!(p.options.library_prefixes, ["libheavy", "libcudnn"]);
    let files = &p.payload.files;
    let cudnn = files
        .iter()
        .find(|f| f.path == "libcudnn.so.9")
        .expect("cuDNN is payload");
    assert_eq!(
        (cudnn.form, cudnn.reach),
        (PayloadForm::External, Reach::Lazy)
    );
    assert_eq!(
        cudnn.provider,
        Some(Provider {
            pip: Some("nvidia-cudnn-cu12".into()),
            conda: Some("cudnn".into())
        }),
        "CUDA 12: libcudart.so.12"
    );
    assert!(
        files
            .iter()
            .find(|f| f.path == "lib/libheavy.so.1")
            .unwrap()
            .provider
            .is_none()
    );
    assert_eq!(p.payload.external, ["libcudnn.so.9"]);
    assert_eq!(output(&p, Role::Lazy).variants[1].name, "noheavy_cudnn");
    // libcudart is not payload: it stays a plain external library.
    assert!(!files.iter().any(|f| f.path == "libcudart.so.12"));
}

/// `plan --json` of the providers fixture with two deps (heavy, cudnn), written to `dir/plan.json`.
fn several_deps_plan_file(dir: &Path) -> PathBuf {
    let plan_file = dir.join("plan.json");
    let o = run_path(
        &[
            "plan",
            "--quiet",
            "--lazy",
            GLOB,
            "--dep",
            "heavy",
            "--dep",
            "cudnn",
            "--json",
            "--out",
            plan_file.to_str().unwrap(),
        ],
        &fixture("providers"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    plan_file
}

/// The recipes of a plan with two deps: the slim variant forbids both, every lazy library is
/// checked with its own contract, the magma-style variant depends on both payload packages.
#[test]
fn several_deps_recipe_constrains_both_and_checks_each_library() {
    let dir = tempfile::tempdir().unwrap();
    let plan_file = several_deps_plan_file(dir.path());
    let recipes = dir.path().join("recipes");
    let o = run(&[
        "emit",
        plan_file.to_str().unwrap(),
        "--version",
        "1.0",
        "--out",
        recipes.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recipe = std::fs::read_to_string(recipes.join("rattler-build/recipe.yaml")).unwrap();
    let meta = std::fs::read_to_string(recipes.join("conda-build/meta.yaml")).unwrap();
    for (text, name) in [(&recipe, "recipe.yaml"), (&meta, "meta.yaml")] {
        for forbid in ["libheavy <0.0a0", "cudnn <0.0a0"] {
            assert!(
                text.contains(forbid),
                "{name}: the slim variant forbids {forbid}"
            );
        }
        for lib in ["a", "b"] {
            assert!(
                text.contains(&format!("lib/libfoo_providers_{lib}.so\" --variant "))
                    && text.contains(&format!(
                        "--contract contract-libfoo_providers_{lib}.so.json"
                    )),
                "{name}: verify-variant per library with its own contract"
            );
        }
    }
    // The magma-style variant depends on both payload packages; rattler-build reads the recipe.
    let yaml: serde_yaml::Value = serde_yaml::from_str(&recipe).unwrap();
    assert!(yaml["outputs"].as_sequence().unwrap().len() >= 3);
    assert!(
        recipe.contains("            - libheavy\n            - cudnn\n"),
        "{recipe}"
    );
    assert!(
        std::fs::read_to_string(recipes.join("rattler-build/variants.yaml"))
            .unwrap()
            .contains("noheavy_cudnn")
    );
    for lib in ["a", "b"] {
        let c: ContractFile = typed_file(&recipes.join(format!(
            "rattler-build/contract-libfoo_providers_{lib}.so.json"
        )));
        assert_eq!(
            (c.library, c.loader_lookups),
            (
                format!("libfoo_providers_{lib}.so"),
                vec!["provider_entry".to_string()]
            )
        );
    }
    assert!(!recipes.join("rattler-build/contract.json").exists());
    assert!(
        std::fs::read_to_string(recipes.join("rattler-build/build-variants.sh"))
            .unwrap()
            .contains("--target foo_providers_a foo_providers_b\n")
    );
}

/// verify-variant --plan takes the contract of the library it checks, and refuses a library the
/// plan has no contract for.
#[test]
fn verify_variant_plan_takes_the_contract_of_the_library_it_checks() {
    let dir = tempfile::tempdir().unwrap();
    let plan_file = several_deps_plan_file(dir.path());
    let lib_b = fixture("providers").join("lib/libfoo_providers_b.so");
    let o = run(&[
        "verify-variant",
        lib_b.to_str().unwrap(),
        "--variant",
        "heavy_cudnn",
        "--plan",
        plan_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let core = fixture("providers").join("lib/libfoo_core.so");
    let o = run(&[
        "verify-variant",
        core.to_str().unwrap(),
        "--variant",
        "heavy_cudnn",
        "--plan",
        plan_file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("the plan has 2 lazy libraries (libfoo_providers_a.so, libfoo_providers_b.so) and none is named libfoo_core.so"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn pack_puts_both_providers_in_one_lazy_package_and_solve_installs_it() {
    let dir = tempfile::tempdir().unwrap();
    let channel = dir.path().join("channel");
    let ch = channel.to_str().unwrap();
    let o = run_path(
        &[
            "pack",
            "--quiet",
            "--lazy",
            GLOB,
            "--dep",
            "heavy",
            "--version",
            "1.0",
            "--json",
            "--out",
            ch,
        ],
        &fixture("providers"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: PackReport = typed(&o);
    let paths = &r.paths;
    let a = &paths["lib/libfoo_providers_a.so"];
    assert_eq!(
        &paths["lib/libfoo_providers_b.so"], a,
        "one lazy package holds both providers"
    );
    assert!(
        a.contains("/libtorch-cuda-linalg-1.0-cuda12_heavy_h"),
        "{a}"
    );
    assert!(
        paths["lib/libheavy.so.1"].contains("/libheavy-"),
        "{paths:?}"
    );
    assert!(paths["lib/libfoo_core.so"].contains("/libtorch-1.0-"));
    assert!(r.lossless.ok, "{:#?}", r.lossless);
    let info: ChannelInfo = typed_file(&channel.join("splitpkg.json"));
    assert_eq!(
        info.lazy_libraries,
        ["libfoo_providers_a.so", "libfoo_providers_b.so"]
    );

    // The default environment gets the providers and libheavy, and plans as CONFINED again.
    let envs = dir.path().join("envs");
    let o = run(&[
        "solve",
        ch,
        "--quiet",
        "--json",
        "--install",
        envs.to_str().unwrap(),
    ]);
    let s: SolveReport = typed(&o);
    let default = s
        .install
        .as_ref()
        .unwrap()
        .envs
        .iter()
        .find(|e| e.name == InstallEnv::Default)
        .unwrap();
    assert_eq!(
        (default.status, default.verdict),
        (ScenarioStatus::Pass, Some(Verdict::Confined)),
        "{default:#?}"
    );
    assert!(
        envs.join("default/lib/libfoo_providers_b.so").exists()
            && envs.join("default/lib/libheavy.so.1").exists()
    );
}

/// Another build of several libraries at once is not supported: refused before anything is written.
#[test]
fn pack_refuses_another_variant_of_several_lazy_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("channel2");
    let lib = fixture("providers").join("lib/libfoo_providers_a.so");
    let lv = format!("noheavy={}", lib.display());
    let o = run_path(
        &[
            "pack",
            "--quiet",
            "--lazy",
            GLOB,
            "--dep",
            "heavy",
            "--version",
            "1.0",
            "--lazy-variant",
            &lv,
            "--out",
            other.to_str().unwrap(),
        ],
        &fixture("providers"),
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("packing another variant of several lazy libraries is not supported"),
        "{}",
        stderr(&o)
    );
    assert!(!other.exists());
}

/// `wheel` with several lazy libraries: they travel together in one lazy distribution (named by
/// the words their names share), the core holds everything else, RECORDs hold, the split is
/// lossless; another variant cannot be one file for two libraries, and several `--dep` are refused.
#[test]
fn wheel_puts_several_lazy_libraries_in_one_lazy_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let whl = providers_wheel(dir.path());
    let out = dir.path().join("wheels");
    let o = run(&[
        "wheel",
        whl.to_str().unwrap(),
        "--lazy",
        GLOB,
        "--dep",
        "heavy",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: WheelReport = typed(&o);
    assert!(r.lossless);
    assert_eq!(r.core.file, "foo-1.0+split-py3-none-linux_x86_64.whl");
    assert_eq!(
        r.lazy[0].file,
        "foo_providers-1.0+1.heavy-py3-none-linux_x86_64.whl"
    );
    assert_eq!(r.missing[0].variant, "noheavy");
    let names = |w: &str| -> BTreeSet<String> {
        let z = zip::ZipArchive::new(std::fs::File::open(out.join(w)).unwrap()).unwrap();
        z.file_names().map(|n| n.unwrap().into_owned()).collect()
    };
    let lazy = names(&r.lazy[0].file);
    let core = names(&r.core.file);
    for lib in ["lib/libfoo_providers_a.so", "lib/libfoo_providers_b.so"] {
        assert!(
            lazy.contains(lib) && !core.contains(lib),
            "{lib}: in the lazy wheel only"
        );
    }
    assert!(core.contains("lib/libfoo_core.so") && core.contains("lib/libheavy.so.1"));
}

/// The providers fixture as a wheel `dir/foo-1.0-py3-none-linux_x86_64.whl` (distribution foo 1.0).
fn providers_wheel(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(fixture("providers"))
            .arg(&tree)
            .status()
            .unwrap()
            .success()
    );
    std::fs::create_dir_all(tree.join("foo-1.0.dist-info")).unwrap();
    std::fs::write(
        tree.join("foo-1.0.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n",
    )
    .unwrap();
    let whl = dir.join("foo-1.0-py3-none-linux_x86_64.whl");
    make_pip_wheel(&tree, &whl, "py3-none-linux_x86_64", false);
    whl
}

/// A wheel with several lazy libraries: another variant cannot be one file for two libraries,
/// and several `--dep` are refused.
#[test]
fn wheel_of_several_lazy_libraries_refuses_one_variant_file_and_several_deps() {
    let dir = tempfile::tempdir().unwrap();
    let whl = providers_wheel(dir.path());
    // The other variant: one file cannot stand for two libraries.
    let other = dir.path().join("other");
    let lib = fixture("providers").join("lib/libfoo_providers_a.so");
    let o = run(&[
        "wheel",
        whl.to_str().unwrap(),
        "--lazy",
        GLOB,
        "--dep",
        "heavy",
        "--lazy-variant",
        &format!("noheavy={}", lib.display()),
        "--out",
        other.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("one file cannot stand for 2 lazy libraries"),
        "{}",
        stderr(&o)
    );
    assert!(!other.exists() || std::fs::read_dir(&other).unwrap().next().is_none());
    // Several --dep: refused with one line naming the file.
    let o = run(&[
        "wheel",
        whl.to_str().unwrap(),
        "--lazy",
        "libfoo_providers_a.so",
        "--dep",
        "heavy",
        "--dep",
        "cudnn",
        "--out",
        other.to_str().unwrap(),
        "--quiet",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!("splitpkg: error: {}: ", whl.display()))
            && err.contains("--dep names 2 components (heavy, cudnn)")
            && err.lines().count() == 1,
        "{err}"
    );
}

/// `report` on a plan with several lazy libraries: the proof lists every lazy edge, the answer
/// is the plan's (no smoke: untested), nothing about a single lazy library is invented.
#[test]
fn report_on_several_lazy_libraries_lists_every_lazy_edge() {
    let d = tempfile::tempdir().unwrap();
    let plan_json = d.path().join("plan.json");
    let o = run_path(
        &[
            "plan",
            "--quiet",
            "--lazy",
            GLOB,
            "--dep",
            "heavy",
            "--json",
            "--out",
            plan_json.to_str().unwrap(),
        ],
        &fixture("providers"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = d.path().join("report.md");
    let o = run(&[
        "report",
        "--plan",
        plan_json.to_str().unwrap(),
        "--format",
        "md",
        "--out",
        md.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&md).unwrap();
    // Confined, but the fixture's payload saves well under conda-forge's 600 MB: the answer names
    // that rule (issue 53).
    assert!(text.contains("NOT WORTH IT"), "{text}");
    for lib in ["libfoo_providers_a.so", "libfoo_providers_b.so"] {
        assert!(
            text.contains(&format!(
                "lib/libfoo\\_core.so → lib/{}",
                lib.replace('_', "\\_")
            )),
            "edge into {lib}: {text}"
        );
    }
}
