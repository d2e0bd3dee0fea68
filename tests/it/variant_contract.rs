//! The variant contract on real PyTorch wheels (torch 2.11.0+cu130 and 1.13.1+cu117, both with a
//! lazily loaded `libtorch_cuda_linalg.so` and MAGMA linked into it): what `emit` records of the
//! stock library, and what `verify-variant` then refuses — the stock MAGMA file offered as nomagma,
//! a 15 KB gcc stub with the right SONAME and one export, and a copy of the stock file with one
//! translation unit's exports taken out of its dynamic symbol table (DERIVED from the real file
//! here, no compiler of PyTorch needed: the real one-unit-left-out build is in
//! docs/evidence/nomagma-real/ where it was made).

use crate::common::*;

use std::path::{Path, PathBuf};

use splitpkg::analysis::contract::ContractFile;
use splitpkg::analysis::plan::Plan;
use splitpkg::analysis::verdict::{NotRead, NotReadReason, Verdict};
use splitpkg::document::Document;
use splitpkg::recipe::verify::VerifyReport;

/// `emit`'s contract for the unpacked tree, read as `verify-variant` reads it.
fn contract(tree: &Path, version: &str, out: &Path) -> (PathBuf, ContractFile) {
    let o = run(&[
        "emit",
        tree.to_str().unwrap(),
        "--version",
        version,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let path = out.join("rattler-build/contract.json");
    let c = ContractFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    (path, c)
}

/// Names of the failed checks of `verify-variant LIB --variant V --contract C --json` (exit 1 when
/// any failed, 0 when none did).
fn failed(lib: &Path, variant: &str, contract: &Path) -> Vec<String> {
    let o = run(&[
        "verify-variant",
        lib.to_str().unwrap(),
        "--variant",
        variant,
        "--contract",
        contract.to_str().unwrap(),
        "--json",
    ]);
    let failed = failed_names(&typed(&o));
    assert_eq!(
        o.status.code(),
        Some(if failed.is_empty() { 0 } else { 1 }),
        "{failed:?}"
    );
    failed
}

/// The stub of the issue: right SONAME, one exported C function, nothing else.
fn gcc_stub(dir: &Path) -> PathBuf {
    let src = dir.join("stub.c");
    std::fs::write(
        &src,
        "void *at_cuda_getCurrentCUDASolverDnHandle(void) { return 0; }\n",
    )
    .unwrap();
    let out = dir.join("stub").join("libtorch_cuda_linalg.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = std::process::Command::new("gcc")
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-Wl,-soname,libtorch_cuda_linalg.so",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&out).unwrap().len() < 20_000);
    out
}

/// A copy of `stock` whose dynamic symbols with a name starting `prefix` are made undefined
/// (`st_shndx = SHN_UNDEF`, `st_value = 0`): the library a build without the translation unit
/// that defines them would export. Returns the copy and how many symbols were taken out.
fn without_exports(stock: &Path, prefix: &str, dir: &Path) -> (PathBuf, usize) {
    let mut bytes = std::fs::read(stock).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let dynsym = elf
        .section_headers
        .iter()
        .find(|s| s.sh_type == goblin::elf::section_header::SHT_DYNSYM)
        .unwrap();
    let (base, entsize) = (dynsym.sh_offset as usize, dynsym.sh_entsize as usize);
    let hits: Vec<usize> = elf
        .dynsyms
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.st_shndx != 0
                && elf
                    .dynstrtab
                    .get_at(s.st_name)
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|(i, _)| i)
        .collect();
    drop(elf);
    for &i in &hits {
        let e = base + i * entsize;
        bytes[e + 6..e + 8].copy_from_slice(&0u16.to_le_bytes());
        bytes[e + 8..e + 16].copy_from_slice(&0u64.to_le_bytes());
    }
    let out = dir.join("derived").join("libtorch_cuda_linalg.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, bytes).unwrap();
    (out, hits.len())
}

/// One release: the contract's new fields, then each forgery refused and the stock file accepted
/// as what it is.
fn release(corpus_name: &str, version: &str, exports: usize, stubs: &[&str]) {
    let (_, tree) = corpus(corpus_name, true);
    let tree = tree.unwrap();
    let stock = tree.join("lib/libtorch_cuda_linalg.so");
    let d = tempfile::tempdir().unwrap();
    let (path, c) = contract(&tree, version, &d.path().join("recipe"));
    assert_eq!(c.schema_version, 2);
    let provided = &c.provided_exports;
    assert_eq!(provided.len(), exports, "{provided:?}");
    assert!(provided.iter().all(|n| n.starts_with("_ZN2at")
        || n.starts_with("_ZN3c10")
        || n.starts_with("_ZN6caffe2")));
    assert!(
        !provided.iter().any(|n| n.contains("13magmaCholesky")),
        "MAGMA wrappers are the payload's"
    );
    let registrations = &c.load_registrations;
    for stub in stubs {
        let mangled = format!("_ZN2at6native{}{stub}E", stub.len());
        assert!(
            registrations.contains(&mangled),
            "{mangled} not in {registrations:?}"
        );
    }

    // The stock file is the magma build and satisfies its own contract; as nomagma it carries
    // the payload.
    assert_eq!(failed(&stock, "magma", &path), Vec::<String>::new());
    assert_eq!(
        failed(&stock, "nomagma", &path),
        ["no payload symbols defined"]
    );
    // The 15 KB stub: no exports of the stock file's, no registration at load.
    let stub = gcc_stub(d.path());
    assert_eq!(
        failed(&stub, "nomagma", &path),
        [
            "exports what the stock provides",
            "registers at load like the stock"
        ]
    );
    // CUDASolver.cpp (namespace at::cuda::solver) left out.
    let (derived, n) = without_exports(&stock, "_ZN2at4cuda6solver", d.path());
    assert!(n > 10, "{n} exports of CUDASolver.cpp");
    assert_eq!(
        failed(&derived, "magma", &path),
        ["exports what the stock provides"]
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_2_11_variant_contract_refuses_forgeries() {
    release(
        "torch-2.11.0-cu130",
        "2.11.0",
        192,
        &[
            "cholesky_stub",
            "cholesky_inverse_stub",
            "lu_factor_stub",
            "ldl_factor_stub",
            "ldl_solve_stub",
            "triangular_solve_stub",
            "orgqr_stub",
            "ormqr_stub",
            "geqrf_stub",
            "linalg_eigh_stub",
            "linalg_eig_stub",
            "svd_stub",
            "lu_solve_stub",
            "lstsq_stub",
        ],
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_13_variant_contract_refuses_forgeries() {
    release(
        "torch-1.13.1-cu117",
        "1.13.1",
        182,
        &["cholesky_stub", "lu_factor_stub", "svd_stub"],
    );
}

/// A contract file of schema version 1 recorded names only: read as version 2 it would let any
/// library with the right SONAME pass, so it is refused (exit 2, one line naming the file).
#[test]
fn a_version_1_contract_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("contract.json");
    std::fs::write(
        &c,
        r#"{"schema":"splitpkg-contract","schema_version":1,"library":"libtorch_cuda_linalg.so","dep":"magma",
            "symbol_prefixes":["magma_"],"library_prefixes":["libmagma"],"loader_lookups":[],"required_exports":[]}"#,
    )
    .unwrap();
    let lib = fixture("conda-nomagma/lib/libtorch_cuda_linalg.so");
    let o = run(&[
        "verify-variant",
        lib.to_str().unwrap(),
        "--variant",
        "nomagma",
        "--contract",
        c.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("contract.json")
            && err.contains("contract schema version 1")
            && err.contains("re-run splitpkg emit"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}

// AArch64 and the machines whose code is not read -------------------------------------------------
// The `registrations` trees of fixtures/build.sh: src/reg_linalg.c's initialiser registers into the
// core in six forms (GOT load and store, PLT call, a local function it calls, a tail call, a call
// through a core function pointer, a call through the GOT without a PLT stub).

/// The seven names src/reg_linalg.c registers, sorted.
const FIXTURE_REGISTRATIONS: [&str; 7] = [
    "_ZN2at6native11linalg_hookE",
    "_ZN2at6native12registerDoneEi",
    "_ZN2at6native13cholesky_stubE",
    "_ZN2at6native14registerNoPltEPv",
    "_ZN2at6native22registerLinalgDispatchEPv",
    "_ZN2at6native7lu_stubE",
    "_ZN2at6native8svd_stubE",
];

/// The fixture tree built with a cross compiler, or `None` with a printed note where that
/// compiler is not installed (fixtures/build.sh builds the tree only where it is).
fn cross_tree(name: &str, compiler: &str) -> Option<PathBuf> {
    let t = fixture(name);
    if !t.exists() {
        eprintln!(
            "NOTE: skipping the {name} scenario: `{compiler}` is not installed (apt-get install {compiler})"
        );
        return None;
    }
    Some(t)
}

/// `plan --json` of a fixture tree, written to `out` too (for `verify-variant --plan`).
fn plan_of(tree: &Path, out: &Path) -> Plan {
    let o = run(&["plan", "-q", "--json", s(tree)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(out, &o.stdout).unwrap();
    typed(&o)
}

/// `verify-variant LIB --variant V --plan P --json [extra]`: the exit code and the report.
fn verify(lib: &Path, variant: &str, plan: &Path, extra: &[&str]) -> (i32, VerifyReport) {
    let mut args = vec![
        "verify-variant",
        s(lib),
        "--variant",
        variant,
        "--plan",
        s(plan),
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    (o.status.code().unwrap(), typed(&o))
}

/// The names of the report's failed checks, in order.
fn failed_names(r: &VerifyReport) -> Vec<String> {
    r.checks
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.name.clone())
        .collect()
}

/// gcc `compiler`'s build of a library with the right SONAME that exports `names` as empty
/// functions and registers nothing: the issue's 93 KB aarch64 forgery.
fn stub_exporting(compiler: &str, names: &[String], dir: &Path) -> PathBuf {
    let mut c = String::new();
    for (i, n) in names.iter().enumerate() {
        c.push_str(&format!(
            "void f{i}(void) __asm__(\"{n}\");\nvoid f{i}(void) {{}}\n"
        ));
    }
    let src = dir.join("stub.c");
    std::fs::write(&src, c).unwrap();
    let out = dir.join("stub").join("libtorch_cuda_linalg.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = std::process::Command::new(compiler)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-Wl,-soname,libtorch_cuda_linalg.so",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("cross gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The registrations read from an AArch64 build are those of the x86-64 build of the same
/// source, each form of reference included: the x86-64 reader follows the tail calls gcc -O2
/// emits (`jmp rel8` to a local function, `jmp rel32` to a PLT stub: registerDone), the AArch64
/// sweep of `_init` ends with `.init` (not reading on into `.plt`, whose stubs load every PLT
/// import's slot).
#[test]
fn aarch64_builds_register_as_their_x86_64_builds() {
    let Some(arm) = cross_tree("registrations-aarch64", "gcc-aarch64-linux-gnu") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let x86 = plan_of(&fixture("registrations"), &d.path().join("x86.json"));
    let a64 = plan_of(&arm, &d.path().join("a64.json"));
    assert_eq!(x86.verdict, Verdict::Confined);
    assert_eq!(a64.verdict, Verdict::Confined);
    assert_eq!(x86.contract.load_registrations, FIXTURE_REGISTRATIONS);
    assert_eq!(a64.contract.load_registrations, FIXTURE_REGISTRATIONS);
    assert!(a64.contract.load_registrations_not_read.is_none());
    assert_eq!(a64.contract.provided_exports, x86.contract.provided_exports);
}

/// The x86-64 fixture really holds the two tail-call forms (objdump shows the initialiser ending
/// in a short `jmp` to `linalg_finish`, which ends in `jmp` to registerDone's PLT stub), and the
/// reader finds registerDone through both: a plan names it among the registrations.
#[test]
fn a_tail_called_registration_is_found_on_x86_64() {
    let lib = fixture("registrations/lib/libtorch_cuda_linalg.so");
    let o = std::process::Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&lib)
        .output()
        .expect("objdump (binutils)");
    let asm = String::from_utf8_lossy(&o.stdout);
    let jumps = |from: &str| -> Vec<String> {
        let body = asm.split(&format!("<{from}")).nth(1).unwrap_or("");
        let body = body.split("\n\n").next().unwrap_or("");
        body.lines()
            .filter(|l| l.contains("\tjmp "))
            .map(|l| l.split('<').nth(1).unwrap_or("").to_string())
            .collect()
    };
    let from_init = jumps("registrations>:");
    assert!(
        from_init.iter().any(|t| t.starts_with("linalg_finish")),
        "{from_init:?}: the initialiser's tail call"
    );
    let from_finish = jumps("linalg_finish");
    assert!(
        from_finish
            .iter()
            .any(|t| t.starts_with("_ZN2at6native12registerDoneEi@plt")),
        "{from_finish:?}: linalg_finish's tail call"
    );
    let d = tempfile::tempdir().unwrap();
    let x86 = plan_of(&fixture("registrations"), &d.path().join("x86.json"));
    assert!(
        x86.contract
            .load_registrations
            .contains(&"_ZN2at6native12registerDoneEi".to_string()),
        "{:?}",
        x86.contract
    );
}

/// The AArch64 reader finds the fixture's registrations, the tail call's included, and no more:
/// the sweep of `_init` ends with `.init` instead of reading on into `.plt` (whose stubs load
/// every PLT import's slot).
#[test]
fn aarch64_registrations_are_the_fixtures_own() {
    let Some(arm) = cross_tree("registrations-aarch64", "gcc-aarch64-linux-gnu") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let a64 = plan_of(&arm, &d.path().join("a64.json"));
    assert_eq!(a64.verdict, Verdict::Confined);
    assert_eq!(a64.contract.load_registrations, FIXTURE_REGISTRATIONS);
    assert!(a64.contract.load_registrations_not_read.is_none());
}

/// verify-variant on AArch64: the faithful nomagma rebuild passes (against the AArch64 plan and
/// the x86-64 one: the contract names are the machine's, not the file's), the stock fails only
/// as nomagma, and a stub exporting every provided name but registering nothing is refused.
#[test]
fn an_aarch64_stub_with_the_stock_exports_is_refused() {
    let Some(arm) = cross_tree("registrations-aarch64", "gcc-aarch64-linux-gnu") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("a64.json");
    let p = plan_of(&arm, &plan);
    let x86_plan = d.path().join("x86.json");
    plan_of(&fixture("registrations"), &x86_plan);
    let rebuilt = arm.join("variants/nomagma/libtorch_cuda_linalg.so");
    for plan in [&plan, &x86_plan] {
        let (code, r) = verify(&rebuilt, "nomagma", plan, &[]);
        assert_eq!((code, failed_names(&r)), (0, vec![]), "{r:?}");
    }
    let stock = arm.join("lib/libtorch_cuda_linalg.so");
    assert_eq!(verify(&stock, "magma", &plan, &[]).0, 0);
    // MAGMA is a NEEDED library of the stock build here (conda-forge's layout).
    let (code, r) = verify(&stock, "nomagma", &plan, &[]);
    assert_eq!(
        (code, failed_names(&r)),
        (
            1,
            vec![
                "no payload library NEEDED".to_string(),
                "no payload symbols imported".to_string()
            ]
        )
    );

    // The stub exports everything a variant must export: what the loader looks up and what the
    // stock provides; it only registers nothing.
    let mut exported = p.contract.provided_exports.clone();
    assert!(!exported.is_empty());
    exported.extend(p.contract.loader_lookups.iter().cloned());
    exported.sort();
    exported.dedup();
    let stub = stub_exporting("aarch64-linux-gnu-gcc", &exported, d.path());
    let (code, r) = verify(&stub, "nomagma", &plan, &[]);
    assert_eq!(
        (code, failed_names(&r)),
        (1, vec!["registers at load like the stock".to_string()]),
        "{r:?}"
    );
    let detail = &r
        .checks
        .iter()
        .find(|c| c.name == "registers at load like the stock")
        .unwrap()
        .detail;
    assert!(
        detail.starts_with("missing: at::native::linalg_hook"),
        "{detail}"
    );
}

/// A machine whose code splitpkg does not read (ppc64le): `plan` records that the registrations
/// were not read and why; `verify-variant` says "not checked" and fails, and passes only with
/// `--accept-unchecked`, still never saying "ok" for that check.
#[test]
fn a_check_that_cannot_run_never_passes() {
    let Some(ppc) = cross_tree("registrations-ppc64le", "gcc-powerpc64le-linux-gnu") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("ppc.json");
    let p = plan_of(&ppc, &plan);
    assert_eq!(
        p.contract.load_registrations_not_read,
        Some(NotRead {
            reason: NotReadReason::CodeNotDecoded,
            machine: "PPC64".into()
        })
    );
    // Empty, so left out of the JSON (`skip_serializing_if`): nothing read is not "none".
    assert!(p.contract.load_registrations.is_empty());
    let written = std::fs::read_to_string(&plan).unwrap();
    assert_valid(
        "docs/plan.schema.json",
        &serde_json::from_str(&written).unwrap(),
    );
    let x86_plan = d.path().join("x86.json");
    let x86 = plan_of(&fixture("registrations"), &x86_plan);
    let x86_count = x86.contract.load_registrations.len();
    assert!(x86_count > 0);
    let x86_why = format!(
        "splitpkg cannot read PPC64 code (it reads x86-64 and AArch64); {x86_count} registrations to check"
    );
    let lib = ppc.join("variants/nomagma/libtorch_cuda_linalg.so");
    // The stock's registrations not read (ppc64le plan), or the variant's code not read (the x86-64
    // plan names seven): either way the check is not made.
    for (plan, why) in [
        (
            &plan,
            "the stock library's registrations were not read: splitpkg cannot read PPC64 code",
        ),
        (&x86_plan, x86_why.as_str()),
    ] {
        let (code, r) = verify(&lib, "nomagma", plan, &[]);
        assert_eq!(
            (code, failed_names(&r)),
            (1, vec!["registers at load like the stock".to_string()]),
            "{r:?}"
        );
        let c = r.checks.last().unwrap();
        assert!(c.unchecked);
        assert!(
            c.detail.starts_with(&format!("not checked: {why}")),
            "{c:?}"
        );
        let (code, r) = verify(&lib, "nomagma", plan, &["--accept-unchecked"]);
        assert_eq!((code, r.pass), (0, true), "{r:?}");
        assert!(
            r.notes.iter().any(|n| n.contains(
                "accepted unchecked (--accept-unchecked): registers at load like the stock"
            )),
            "{r:?}"
        );
    }
    let o = run(&[
        "verify-variant",
        s(&lib),
        "--variant",
        "nomagma",
        "--plan",
        s(&x86_plan),
        "--accept-unchecked",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("n/c  registers at load like the stock")
            && !text.contains("ok   registers at load"),
        "{text}"
    );
}

/// A build made without MAGMA (no payload in the tree, no Magma line in the core's build
/// config): no warning claims torch.cuda.has_magma stays True. A tree whose core was built with
/// MAGMA (its build config says so) but whose nomagma lazy library is installed keeps the claim.
#[test]
fn warnings_about_has_magma_are_read_from_the_build() {
    let d = tempfile::tempdir().unwrap();
    let p = |name: &str| {
        let o = run(&["plan", "-q", "--json", s(&fixture(name))]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let _ = &d;
        typed::<Plan>(&o)
    };
    let without = p("built-without-magma");
    assert_eq!(without.verdict, Verdict::NotPresent);
    let text = warnings_text(&without);
    assert!(!text.contains("stays True"), "{text}");
    assert!(text.contains("this build carries no magma"), "{text}");
    assert!(without.warnings.iter().all(|w| w.kind.is_none()), "{text}");
    let switched = p("conda-nomagma");
    let text = warnings_text(&switched);
    assert!(text.contains("torch.cuda.has_magma stays True"), "{text}");
}

/// Every text of the plan's warnings (file, what, consequence, examples), one per line.
fn warnings_text(p: &Plan) -> String {
    p.warnings
        .iter()
        .flat_map(|w| {
            [&w.file, &w.what, &w.consequence]
                .into_iter()
                .chain(&w.examples)
        })
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// PyPI's torch 2.11 for aarch64 is built without MAGMA: its plan finds no payload (and no
/// warning claims has_magma stays True), its libtorch_cuda_linalg.so's registrations are read
/// from AArch64 code and match the x86-64 MAGMA build's contract, so the upstream library passes
/// verify-variant as that contract's nomagma variant; an aarch64 gcc stub exporting the same 192
/// names but registering nothing is refused.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_2_11_aarch64_is_a_real_nomagma_variant() {
    let (_, arm) = corpus("torch-2.11.0-cu130-aarch64", true);
    let arm = arm.unwrap();
    let (_, x86) = corpus("torch-2.11.0-cu130", true);
    let d = tempfile::tempdir().unwrap();
    let (path, c) = contract(&x86.unwrap(), "2.11.0", &d.path().join("recipe"));
    assert_eq!(c.load_registrations.len(), 15);

    let o = run(&["plan", "-q", "--json", s(&arm)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let p = typed::<Plan>(&o);
    assert_eq!(p.verdict, Verdict::NotPresent);
    let text = warnings_text(&p);
    assert!(!text.contains("stays True"), "{text}");

    let lib = arm.join("lib/libtorch_cuda_linalg.so");
    assert_eq!(failed(&lib, "nomagma", &path), Vec::<String>::new());
    assert_eq!(failed(&lib, "magma", &path), ["payload present"]);
    if Path::new("/usr/bin/aarch64-linux-gnu-gcc").exists() {
        let stub = stub_exporting("aarch64-linux-gnu-gcc", &c.provided_exports, d.path());
        assert_eq!(
            failed(&stub, "nomagma", &path),
            ["registers at load like the stock"]
        );
    } else {
        eprintln!("NOTE: aarch64 stub not built: aarch64-linux-gnu-gcc is not installed");
    }
}
