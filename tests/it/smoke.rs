//! `splitpkg smoke` without a GPU: battery planning, judging of recorded (synthetic) runs, the
//! worker runner against a fake battery (timeouts, crashes, process-group kill), the lazy-library
//! facts on the fixture trees, and the clean exit on a machine without CUDA.

use crate::common::*;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use splitpkg::recipe::verify::VerifyReport;
use splitpkg::smoke::cases::{Mode, Preference};
use splitpkg::smoke::document::{PlannedCase, SmokeReport, SmokeVerdict, VariantPlan};
use splitpkg::smoke::eval::{CaseStatus, CheckName, CheckStatus, SmokeCheck};
use splitpkg::smoke::expect::Outcome;
use splitpkg::smoke::{self, cases, eval, expect, runner, variant};

fn has_gpu() -> bool {
    Path::new("/dev/nvidia0").exists() || Path::new("/dev/nvidiactl").exists()
}

fn list(args: &[&str]) -> Vec<VariantPlan> {
    let mut all = vec!["smoke", "--list", "--json"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    parsed(&o)
}

fn case<'a>(plan: &'a VariantPlan, id: &str) -> &'a PlannedCase {
    plan.cases
        .iter()
        .find(|c| c.case.id == id)
        .unwrap_or_else(|| panic!("no case {id}"))
}

fn python3() -> Option<PathBuf> {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| PathBuf::from("python3"))
}

#[test]
fn help_describes_smoke() {
    let o = run(&["smoke", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = stdout(&o);
    for needle in [
        "--variant",
        "NAME=PATH",
        "--python",
        "--emulate",
        "--bench",
        "--json",
        "--expect",
        "--replay",
        "--list",
        "--case-timeout",
        "Exit codes",
        "expected-fail",
    ] {
        assert!(h.contains(needle), "smoke --help lacks {needle}:\n{h}");
    }
    let top = stdout(&run(&["--help"]));
    assert!(top.contains("smoke"), "{top}");
}

#[test]
fn no_cuda_driver_exits_2_with_one_line() {
    if has_gpu() {
        eprintln!("skipped: this machine has an NVIDIA device");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arg = format!("magma={}", dir.path().display());
    let o = run(&["smoke", "--variant", &arg, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(
        err.starts_with("splitpkg: error: no CUDA driver: "),
        "{err}"
    );
    assert!(err.contains("libcuda"), "{err}");
    assert!(stdout(&o).is_empty());
    // The library call behind it never panics either.
    match smoke::device::probe(0) {
        Err(smoke::device::NoDevice::Driver(_)) => {}
        other => panic!("expected NoDevice::Driver, got {other:?}"),
    }
}

#[test]
fn bad_usage_exits_2() {
    let cases: &[&[&str]] = &[
        &["smoke", "--variant", "foo=/tmp", "--list"],
        &[
            "smoke",
            "--variant",
            "magma=/tmp",
            "--emulate",
            "magma",
            "--list",
        ],
        &[
            "smoke",
            "--variant",
            "magma=/tmp",
            "--emulate",
            "nomagma",
            "--list",
        ],
        &["smoke", "--variant", "magma", "--list"],
        &["smoke", "--variant", "magma=/tmp", "--case-timeout", "0"],
        &["smoke"],
    ];
    for args in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error"), "{args:?}: {}", stderr(&o));
    }
}

/// The battery covers every CUDA linalg op routed through the lazy library, with dtypes, batched
/// and non-square shapes and the shapes 2.11 sends to MAGMA by default.
#[test]
fn battery_plan_covers_ops_shapes_dtypes() {
    let ops = cases::ops();
    for op in [
        "cholesky",
        "cholesky_solve",
        "cholesky_inverse",
        "lu_factor",
        "lu_factor_nopiv",
        "lu",
        "lu_solve",
        "solve",
        "inv",
        "det",
        "slogdet",
        "qr",
        "geqrf",
        "householder_product",
        "ormqr",
        "eigh",
        "eigvalsh",
        "eig",
        "eigvals",
        "svd",
        "svdvals",
        "pinv",
        "matrix_rank",
        "lstsq",
        "solve_triangular",
        "ldl_factor",
        "ldl_factor_hermitian",
        "ldl_solve",
        "matrix_exp",
    ] {
        assert!(ops.contains(&op), "no {op} in the catalog");
    }
    let cat = cases::catalog();
    for e in &cat {
        if e.op == "ldl_factor_hermitian" {
            assert_eq!(e.dtypes, cases::COMPLEX);
        } else {
            assert_eq!(e.dtypes, &cases::DTYPES[..], "{} {}", e.op, e.shape);
        }
    }
    let has = |op: &str, tag: &str| cat.iter().any(|e| e.op == op && e.tags.contains(&tag));
    for op in [
        "cholesky",
        "cholesky_solve",
        "cholesky_inverse",
        "lu_factor",
        "lu_factor_nopiv",
        "lu",
        "solve",
        "inv",
        "det",
        "slogdet",
        "qr",
        "svd",
        "eigh",
        "eig",
        "lstsq",
        "solve_triangular",
        "ldl_factor",
    ] {
        assert!(has(op, "batched"), "{op}: no batched shape");
    }
    for op in ["lu_factor", "lu", "qr", "svd", "lstsq", "pinv"] {
        assert!(has(op, "non-square"), "{op}: no non-square shape");
    }
    // The cases 2.11 routes to MAGMA by default when the library has it.
    for op in [
        "cholesky_solve",
        "cholesky_inverse",
        "lu_factor",
        "lu_factor_nopiv",
        "lu",
        "lu_solve",
        "solve",
        "inv",
        "det",
    ] {
        assert!(
            has(op, "magma-by-default"),
            "{op}: no magma-by-default shape"
        );
    }
    let lu_solve_window = cat.iter().any(|e| {
        let p = (e.params)();
        e.op == "lu_solve"
            && p["n"].as_u64().unwrap() <= 8
            && (256..=1024).contains(&p["k"].as_u64().unwrap())
    });
    assert!(
        lu_solve_window,
        "no lu_solve with n <= 8 and 256 <= k <= 1024"
    );
}

/// `--list` plans every catalog entry and dtype under the three preferences per variant, each
/// case id once; an emulated variant under default and cusolver only, both applied as cusolver.
#[test]
fn battery_list_plans_every_entry_per_preference() {
    let entries: usize = cases::catalog().iter().map(|e| e.dtypes.len()).sum();

    let plans = list(&["--variant", "magma=/x", "--variant", "nomagma=/y"]);
    assert_eq!(plans[0].cases.len(), entries * 3);
    assert_eq!(plans[1].cases.len(), entries * 3);
    let ids: BTreeSet<&str> = plans[0].cases.iter().map(|c| c.case.id.as_str()).collect();
    assert_eq!(ids.len(), entries * 3, "case ids are unique");
    let emu = list(&["--variant", "nomagma=/y", "--emulate", "nomagma"]);
    let emu_cases = &emu[0].cases;
    assert_eq!(emu[0].mode, Mode::EmulatedNomagma);
    assert_eq!(emu[0].table, "nomagma-emulated");
    assert_eq!(
        emu_cases.len(),
        entries * 2,
        "emulation runs default and cusolver only"
    );
    assert!(
        emu_cases
            .iter()
            .all(|c| c.case.applied_preference == Preference::Cusolver
                && c.case.preference != Preference::Magma)
    );
}

/// The expected outcome of case `id` in the listed plan `p`.
fn outcome(p: &VariantPlan, id: &str) -> Outcome {
    case(p, id).expect.outcome
}

/// The expected error pattern of case `id` in the listed plan `p` ("" for none).
fn pattern(p: &VariantPlan, id: &str) -> String {
    case(p, id).expect.pattern.clone().unwrap_or_default()
}

/// The expected outcome's note of case `id` in the listed plan `p`.
fn note<'a>(p: &'a VariantPlan, id: &str) -> &'a str {
    case(p, id).expect.note.as_deref().unwrap()
}

/// The listed plans of a magma and a nomagma variant, in that order.
fn magma_and_nomagma_plans() -> Vec<VariantPlan> {
    list(&["--variant", "magma=/x", "--variant", "nomagma=/y"])
}

#[test]
fn expectations_of_the_magma_variant() {
    let plans = magma_and_nomagma_plans();
    let magma = &plans[0];
    // magma: everything passes except the two documented 2.11 behaviours.
    for PlannedCase { case: c, expect } in &magma.cases {
        let want = match (c.op.as_str(), c.preference) {
            ("ldl_factor_hermitian", Preference::Cusolver) => Outcome::Error,
            ("ldl_factor", Preference::Magma) if c.dtype.starts_with("complex") => Outcome::Error,
            ("svd" | "svdvals" | "pinv" | "matrix_rank", Preference::Magma) => Outcome::Excluded,
            _ => Outcome::Pass,
        };
        assert_eq!(expect.outcome, want, "magma {}", c.id);
    }
    assert_eq!(
        outcome(magma, "ldl_factor_hermitian/32x32/complex128/default"),
        Outcome::Pass
    );
}

#[test]
fn expectations_of_the_nomagma_variant() {
    let plans = magma_and_nomagma_plans();
    let nomagma = &plans[1];
    // nomagma, default preference: the MAGMA-by-default shapes must pass on cuSOLVER.
    for id in [
        "cholesky_solve/16x64x64,k=2/float64/default",
        "cholesky_inverse/16x64x64/complex64/default",
        "lu_factor/32x64x64/float32/default",
        "lu_factor/300x200/complex128/default",
        "lu_factor_nopiv/32x64x64/float64/default",
        "lu_solve/4x4,k=512/float64/default",
        "solve/32x64x64,k=3/float32/default",
        "det/32x64x64/complex128/default",
        "eig/32x32/float64/default",
    ] {
        assert_eq!(outcome(nomagma, id), Outcome::Pass, "nomagma {id}");
    }
    // ... except complex Hermitian LDL, which must fail cleanly.
    assert_eq!(
        outcome(nomagma, "ldl_factor_hermitian/32x32/complex128/default"),
        Outcome::Error
    );
    assert!(
        pattern(nomagma, "ldl_factor_hermitian/32x32/complex128/default")
            .contains("not supported with cuSOLVER backend")
    );
    // magma preference on nomagma: MAGMA branches raise naming MAGMA; cuSOLVER-only ops still pass.
    assert_eq!(
        outcome(nomagma, "lu_factor/64x64/float64/magma"),
        Outcome::Error
    );
    assert_eq!(
        pattern(nomagma, "lu_factor/64x64/float64/magma"),
        "(?i)magma"
    );
    assert_eq!(
        outcome(nomagma, "cholesky/64x64/float64/magma"),
        Outcome::Pass
    );
    assert_eq!(outcome(nomagma, "qr/64x32/float64/magma"), Outcome::Pass);
    assert_eq!(
        outcome(nomagma, "svd/64x32/float64/magma"),
        Outcome::Excluded
    );
    assert!(note(nomagma, "svd/64x32/float64/magma").contains("stock bug"));
    // Fixed from the real nomagma run: eigh/eigvalsh up to 128x128 take a CPU path under the magma
    // preference and work; larger ones take the MAGMA branch and must raise.
    for id in [
        "eigh/64x64/float32/magma",
        "eigh/8x32x32/complex128/magma",
        "eigvalsh/4x128x128/float64/magma",
    ] {
        assert_eq!(outcome(nomagma, id), Outcome::Pass, "nomagma {id}");
        assert!(
            note(nomagma, id).contains("docs/evidence/nomagma-real"),
            "{id} names the run that showed it"
        );
    }
    assert_eq!(
        outcome(nomagma, "eigh/256x256/float64/magma"),
        Outcome::Error
    );
}

#[test]
fn expectations_of_the_emulated_nomagma_variant() {
    // Emulated nomagma: complex Hermitian LDL fails under forced cuSOLVER; the rest passes.
    let emu = list(&["--variant", "nomagma=/y", "--emulate", "nomagma"]);
    assert_eq!(
        outcome(&emu[0], "ldl_factor_hermitian/4x32x32/complex64/default"),
        Outcome::Error
    );
    assert_eq!(
        outcome(&emu[0], "cholesky_solve/16x64x64,k=2/float64/default"),
        Outcome::Pass
    );
}

#[test]
fn cuda_below_rule_follows_torch_cuda_version() {
    let tables = expect::Tables::builtin();
    let filter = cases::Filter {
        only: vec!["eig/32x32/float64/default".into()],
        skip: vec![],
    };
    let old = smoke::plan_variant("nomagma", false, &tables, &filter, Some("12.6")).unwrap();
    let new = smoke::plan_variant("nomagma", false, &tables, &filter, Some("13.0")).unwrap();
    assert_eq!(
        old.cases[0].expect.outcome,
        expect::Outcome::Error,
        "eig needs MAGMA below CUDA 12.8"
    );
    assert_eq!(new.cases[0].expect.outcome, expect::Outcome::Pass);
    assert_eq!(expect::version_below("12.10", "12.8"), Some(false));
    assert_eq!(expect::version_below("11.8", "12.8"), Some(true));
}

/// `smoke --replay FILE --json [extra]`: the report read typed through the reader the commands
/// use (the header checked) and valid against the published schema; the exit code; stderr.
fn replay(file: &str, extra: &[&str]) -> (SmokeReport, i32, String) {
    let path = repo().join(file);
    let p = path.to_str().unwrap().to_string();
    let mut args = vec!["smoke", "--replay", &p, "--json"];
    args.extend_from_slice(extra);
    let o = run(&args);
    (replayed(&o), o.status.code().unwrap(), stderr(&o))
}

/// A replay's `--json` report: valid against docs/smoke.schema.json, then read typed.
fn replayed(o: &std::process::Output) -> SmokeReport {
    assert_valid("docs/smoke.schema.json", &json(o));
    typed(o)
}

/// The status and reason of case `id` of the report's variant `variant`.
fn status_of(rep: &SmokeReport, variant: usize, id: &str) -> (CaseStatus, String) {
    let c = rep.variants[variant]
        .cases
        .iter()
        .find(|c| c.case.id == id)
        .unwrap_or_else(|| panic!("no {id}"));
    (c.status, c.reason.clone())
}

#[test]
fn replay_stock_behaviour_is_ok() {
    let (rep, code, err) = replay("tests/data/smoke-synthetic-ok.json", &[]);
    assert_eq!(code, 0, "{err}\n{:?}", rep.summary);
    assert!(rep.summary.ok);
    assert_eq!(rep.summary.fail, 0);
    assert_eq!(rep.summary.timeout, 0);
    assert!(rep.summary.expected_fail > 0);
    assert!(rep.summary.excluded > 0, "svd under magma is excluded");
    assert!(
        rep.options
            .replayed_from
            .as_deref()
            .unwrap()
            .ends_with("smoke-synthetic-ok.json")
    );
    // magma variant: has_magma consistent, lazy library mapped only after the first linalg op.
    let checks = &rep.variants[0].checks;
    assert_eq!(checks[0].name, CheckName::Laziness);
    assert_eq!(checks[0].status, CheckStatus::Pass);
    assert_eq!(checks[1].name, CheckName::HasMagma);
    assert_eq!(checks[1].status, CheckStatus::Pass);
    assert_eq!(checks[2].status, CheckStatus::NotChecked);
    assert!(checks[2].detail.contains("fatbin reader unavailable"));
    // emulated nomagma: labelled, has_magma not applicable.
    let emu = &rep.variants[1];
    assert!(emu.emulated);
    assert_eq!(emu.checks[1].status, CheckStatus::NotApplicable);
    assert!(emu.checks[1].detail.contains("emulated"));
    assert_eq!(
        status_of(&rep, 1, "ldl_factor_hermitian/32x32/complex128/default").0,
        CaseStatus::ExpectedFail
    );
    assert_eq!(
        status_of(&rep, 0, "svd/64x32/float64/magma").0,
        CaseStatus::Excluded
    );
    assert_eq!(
        status_of(&rep, 0, "pinv/32x16/float64/magma").0,
        CaseStatus::Excluded,
        "excluded whatever the outcome"
    );

    let o = run(&[
        "smoke",
        "--replay",
        repo()
            .join("tests/data/smoke-synthetic-ok.json")
            .to_str()
            .unwrap(),
    ]);
    let text = stdout(&o);
    assert!(text.contains("RESULT: OK"), "{text}");
    assert!(text.contains("EMULATED"), "{text}");
    assert!(text.contains("not real nomagma results"), "{text}");
}

#[test]
fn replay_broken_nomagma_fails_with_reasons() {
    let (rep, code, _) = replay("tests/data/smoke-synthetic-broken.json", &[]);
    assert_eq!(code, 1);
    assert!(!rep.summary.ok);
    let expect = |id: &str, status: CaseStatus, reason: &str| {
        let (s, r) = status_of(&rep, 0, id);
        assert_eq!(s, status, "{id}: {r}");
        assert!(r.contains(reason), "{id}: {r:?} lacks {reason:?}");
    };
    // MAGMA still on a default path of the nomagma library.
    expect(
        "cholesky_solve/16x64x64,k=2/float64/default",
        CaseStatus::Fail,
        "unexpected RuntimeError: cholesky_solve: MAGMA library not found",
    );
    expect(
        "cholesky_solve/32x32,k=2/float64/magma",
        CaseStatus::ExpectedFail,
        "MAGMA library not found",
    );
    expect(
        "lu_factor/300x200/float64/default",
        CaseStatus::Fail,
        "wrong result: residual 8.30e-1",
    );
    expect(
        "lu_factor/64x96/complex64/cusolver",
        CaseStatus::Fail,
        "residual NaN",
    );
    expect(
        "lu_factor/64x64/float32/magma",
        CaseStatus::Fail,
        "expected a clean RuntimeError, got TypeError",
    );
    expect("svd/64x32/float32/default", CaseStatus::Timeout, "hang");
    expect(
        "svd/256x128/float32/default",
        CaseStatus::Timeout,
        "not run: svd timed out 2 times",
    );
    expect(
        "eig/32x32/float64/cusolver",
        CaseStatus::Fail,
        "worker died: killed by signal 11",
    );
    expect(
        "matrix_exp/16x16/float32/default",
        CaseStatus::Fail,
        "MAGMA not initialized",
    );
    expect(
        "ldl_factor_hermitian/32x32/complex64/default",
        CaseStatus::ExpectedFail,
        "not supported with cuSOLVER backend",
    );
    expect(
        "svd/64x32/float64/magma",
        CaseStatus::Excluded,
        "known stock bug",
    );
}

/// has_magma True over a library without MAGMA: a stale core flag, reported apart from the
/// failures `replay_broken_nomagma_fails_with_reasons` checks (which alone make this run exit 1).
#[test]
fn replay_broken_nomagma_reports_the_stale_flag_apart() {
    let path = repo().join("tests/data/smoke-synthetic-broken.json");
    let o = run(&["smoke", "--replay", s(&path), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let rep = typed::<SmokeReport>(&o);
    let hm = &rep.variants[0].checks[1];
    assert_eq!(hm.name, CheckName::HasMagma);
    assert_eq!(hm.status, CheckStatus::Stale);
    assert!(
        hm.detail
            .contains("stale core flag: torch.cuda.has_magma is True but"),
        "{hm:?}"
    );
    let consequence = hm.consequence.as_deref().unwrap();
    assert!(consequence.contains("skipCUDAIfNoMagma"), "{hm:?}");
    assert!(consequence.contains("Measured remedy"), "{hm:?}");
    assert_eq!(rep.summary.stale_flags, 1);
    assert_eq!(
        rep.result,
        SmokeVerdict::Fail,
        "broken cases win over a stale flag"
    );
    // The library has no MAGMA, so it is what the name nomagma says.
    let id = &rep.variants[0].checks[3];
    assert_eq!(
        (&id.name, id.status),
        (&CheckName::Identity, CheckStatus::Pass),
        "{id:?}"
    );
}

/// The text of the broken replay says FAIL with the consequence, and `--all` lists passing cases.
#[test]
fn replay_broken_nomagma_text_with_all() {
    let o = run(&[
        "smoke",
        "--replay",
        repo()
            .join("tests/data/smoke-synthetic-broken.json")
            .to_str()
            .unwrap(),
        "--all",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(text.contains("RESULT: FAIL"), "{text}");
    assert!(text.contains("consequence:"), "{text}");
    assert!(
        text.contains("cholesky_solve/32x32,k=2/float32/default"),
        "--all lists passing cases"
    );
}

/// A recorded report (schema version 1, as the synthetic fixtures and the first H200 run are)
/// changed by `edit`, written to a temporary file and replayed. The recording is edited as JSON:
/// it is version 1's layout, which today's type reads but would not write back.
fn replay_edited(file: &str, edit: impl FnOnce(&mut Value)) -> (SmokeReport, i32, String) {
    let mut rep: Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(file)).unwrap()).unwrap();
    edit(&mut rep);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("edited.json");
    std::fs::write(&f, rep.to_string()).unwrap();
    let o = run(&["smoke", "--replay", f.to_str().unwrap(), "--json"]);
    let text = run(&["smoke", "--replay", f.to_str().unwrap()]);
    (replayed(&o), o.status.code().unwrap(), stdout(&text))
}

/// The check `name` of the report's variant `variant`.
fn check(rep: &SmokeReport, variant: usize, name: CheckName) -> &SmokeCheck {
    rep.variants[variant]
        .checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name:?}"))
}

/// The status of the check `name` of the report's variant `variant`.
fn check_status(rep: &SmokeReport, variant: usize, name: CheckName) -> CheckStatus {
    check(rep, variant, name).status
}

#[test]
fn stale_core_flag_is_told_apart_from_a_broken_variant() {
    // Every case passes; only has_magma disagrees with the library: exit 4, result ok-stale-flag.
    let (rep, code, text) = replay_edited("tests/data/smoke-synthetic-ok.json", |r| {
        r["variants"][0]["probe"]["has_magma"] = false.into()
    });
    assert_eq!(code, 4, "{:?}", rep.summary);
    assert_eq!(rep.result, SmokeVerdict::OkStaleFlag);
    assert!(rep.summary.ok);
    assert_eq!(rep.summary.stale_flags, 1);
    assert_eq!(rep.summary.checks_failed, 0);
    assert_eq!(
        check_status(&rep, 0, CheckName::HasMagma),
        CheckStatus::Stale
    );
    assert!(text.contains("RESULT: OK, STALE CORE FLAG"), "{text}");
    assert!(text.contains("Exit code 4"), "{text}");
    assert!(
        text.contains("consequence:"),
        "the stale check explains itself: {text}"
    );
    // The same recording unedited: exit 0, result ok.
    let (rep, code, _) = replay("tests/data/smoke-synthetic-ok.json", &[]);
    assert_eq!((code, rep.result), (0, SmokeVerdict::Ok));
    assert_eq!(
        rep.schema_version, 2,
        "judged again, so written as today's schema"
    );
}

#[test]
fn identity_check_applies_to_old_recordings() {
    // A run whose variant is called nomagma but whose library carries MAGMA (what `smoke` passed
    // before the identity check): the replay of that recording fails it.
    let (rep, code, text) = replay_edited("tests/data/smoke-synthetic-ok.json", |r| {
        r["variants"][0]["name"] = "nomagma".into();
        r["variants"].as_array_mut().unwrap().truncate(1);
    });
    assert_eq!(code, 1, "{:?}", rep.summary);
    let id = check(&rep, 0, CheckName::Identity);
    assert_eq!(id.status, CheckStatus::Fail, "{id:?}");
    let detail = &id.detail;
    assert!(
        detail.contains("variant \"nomagma\" but libtorch_cuda_linalg.so is a magma build"),
        "{detail}"
    );
    assert!(
        detail.contains("no payload symbols defined"),
        "names the rule that failed: {detail}"
    );
    assert!(
        text.contains("identity") && text.contains("RESULT: FAIL"),
        "{text}"
    );
    // And a magma variant whose library has no MAGMA.
    let (rep, code, _) = replay_edited("tests/data/smoke-synthetic-ok.json", |r| {
        let l = &mut r["variants"][0]["lazy_library"];
        l["has_magma"] = false.into();
        l["defined_symbols"] = 0.into();
        r["variants"][0]["probe"]["has_magma"] = false.into();
    });
    assert_eq!(code, 1);
    let id = check(&rep, 0, CheckName::Identity);
    assert_eq!(id.status, CheckStatus::Fail);
    assert!(id.detail.contains("is not a magma build"), "{id:?}");
    assert!(id.detail.contains("payload present"), "{id:?}");
    // Emulated variants and other names are not judged by name.
    let (rep, _, _) = replay("tests/data/smoke-synthetic-ok.json", &[]);
    assert_eq!(
        check_status(&rep, 0, CheckName::Identity),
        CheckStatus::Pass
    );
    assert_eq!(
        check_status(&rep, 1, CheckName::Identity),
        CheckStatus::NotApplicable
    );
}

/// The identity rule on real fixture libraries gives what `verify-variant` says of the same
/// files: one rule, two places.
#[test]
fn identity_check_agrees_with_verify_variant_on_fixture_libraries() {
    let spec = splitpkg::analysis::payload::PayloadSpec::for_dep("magma", &[]);
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    let o = run(&[
        "plan",
        fixture("conda-like").to_str().unwrap(),
        "--json",
        "--out",
        plan_file.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (tree, lib) in [
        ("pip-like", "torch/lib/libtorch_cuda_linalg.so"),
        ("conda-like", "lib/libtorch_cuda_linalg.so"),
        ("conda-nomagma", "lib/libtorch_cuda_linalg.so"),
    ] {
        let path = fixture(tree).join(lib);
        let facts = variant::lazy_facts(&path, &spec).unwrap();
        for name in ["magma", "nomagma"] {
            let c = eval::identity_check(
                name,
                "magma",
                false,
                Some(&facts.presence()),
                None,
                "libtorch_cuda_linalg.so",
            );
            let o = run(&[
                "verify-variant",
                path.to_str().unwrap(),
                "--variant",
                name,
                "--plan",
                plan_file.to_str().unwrap(),
                "--json",
            ]);
            let v: VerifyReport = typed(&o);
            let rule_ok = v
                .checks
                .iter()
                .filter(|c| c.name.contains("payload"))
                .all(|c| c.pass);
            assert_eq!(
                c.status == CheckStatus::Pass,
                rule_ok,
                "{tree} as {name}: smoke says {c:?}, verify-variant says {v:?}"
            );
            let holds = facts.has_magma;
            assert_eq!(rule_ok, (name == "magma") == holds, "{tree} as {name}");
        }
    }
}

#[test]
fn replay_of_the_committed_h200_evidence() {
    // The first H200 run (schema 1, nomagma emulated, bench as one object) is still read.
    let (rep, code, err) = replay("docs/evidence/smoke.json", &[]);
    assert_eq!(code, 0, "{err}\n{:?}", rep.summary);
    assert_eq!(rep.bench.len(), 1);
    assert_eq!(rep.bench[0].variant, "magma");
    assert!(
        rep.default_routing.is_empty(),
        "one variant timed: nothing to compare"
    );
    assert_eq!(
        check_status(&rep, 1, CheckName::Identity),
        CheckStatus::NotApplicable,
        "emulated"
    );
}

/// The real nomagma run on the H200 (docs/evidence/nomagma-real: the MAGMA-free library built by
/// tools/build-lazy-variant, on a copied tree and on the environments `solve --install` made):
/// every case as expected, both variants what their names say, has_magma a stale core flag.
#[test]
fn replay_of_the_real_nomagma_runs() {
    for file in [
        "docs/evidence/nomagma-real/smoke-copy.json",
        "docs/evidence/nomagma-real/smoke-envs.json",
    ] {
        let (rep, code, err) = replay(file, &[]);
        assert_eq!(code, 4, "{file}: {err}\n{:?}", rep.summary);
        assert_eq!(rep.result, SmokeVerdict::OkStaleFlag, "{file}");
        assert_eq!((rep.summary.fail, rep.summary.timeout), (0, 0), "{file}");
        assert_eq!(rep.summary.cases, 1368);
        for (i, name) in [(0, "magma"), (1, "nomagma")] {
            let v = &rep.variants[i];
            assert_eq!(
                (v.name.as_str(), v.emulated),
                (name, false),
                "{file}: both variants real"
            );
            for c in [CheckName::Identity, CheckName::Laziness] {
                assert_eq!(check_status(&rep, i, c), CheckStatus::Pass, "{file} {name}");
            }
            // The probe's answer is the battery's free-form object.
            let probe = v.probe.as_ref().unwrap();
            let runtime = probe["loaded_library_exports_magma_init"].as_bool();
            assert_eq!(
                runtime,
                Some(name == "magma"),
                "{file}: the measured remedy answers right on {name}"
            );
        }
        assert_eq!(
            check_status(&rep, 0, CheckName::HasMagma),
            CheckStatus::Pass
        );
        assert_eq!(
            check_status(&rep, 1, CheckName::HasMagma),
            CheckStatus::Stale
        );
        // The table fix this run showed, and the MAGMA branch that must still raise cleanly.
        for (id, want) in [
            ("eigh/64x64/float64/magma", CaseStatus::Pass),
            ("eigvalsh/4x128x128/complex64/magma", CaseStatus::Pass),
            ("eigh/256x256/float64/magma", CaseStatus::ExpectedFail),
            (
                "ldl_factor_hermitian/32x32/complex128/default",
                CaseStatus::ExpectedFail,
            ),
            // The MAGMA-by-default shape on cuSOLVER.
            (
                "cholesky_inverse/16x64x64/float64/default",
                CaseStatus::Pass,
            ),
        ] {
            assert_eq!(status_of(&rep, 1, id).0, want, "{file} {id}");
        }
        // Both variants timed; default routing compared.
        assert_eq!(rep.bench.len(), 2);
        let ci = rep
            .default_routing
            .iter()
            .find(|r| r.op == "cholesky_inverse")
            .unwrap();
        assert!(ci.slim_over_full.unwrap() > 100.0, "{ci:?}");
    }
    // The same recording with the names swapped: the identity check fails both variants.
    let (rep, code, _) = replay_edited("docs/evidence/nomagma-real/smoke-copy.json", |r| {
        r["variants"][0]["name"] = "nomagma".into();
        r["variants"][1]["name"] = "magma".into();
    });
    assert_eq!(code, 1);
    for i in [0, 1] {
        assert_eq!(
            check_status(&rep, i, CheckName::Identity),
            CheckStatus::Fail
        );
    }
}

#[test]
fn default_routing_compares_each_variant_under_its_own_default() {
    let cell = |ms: Option<f64>| smoke::BenchCell {
        outcome: if ms.is_some() {
            eval::RawOutcome::Ok
        } else {
            eval::RawOutcome::Error
        },
        median_ms: ms,
        times_ms: vec![],
        error: ms.is_none().then(|| "RuntimeError".into()),
    };
    let bench = |variant: &str, default: Option<f64>, emulated: bool| smoke::BenchReport {
        variant: variant.into(),
        emulated,
        reps: 5,
        method: "m".into(),
        rows: vec![smoke::BenchRow {
            op: "cholesky_inverse".into(),
            size: "1024x64x64".into(),
            dtype: "float64".into(),
            why: "w".into(),
            results: [
                ("default".to_string(), cell(default)),
                ("magma".to_string(), cell(None)),
            ]
            .into_iter()
            .collect(),
            magma_over_cusolver: None,
        }],
    };
    let rows = smoke::default_routing(
        &[
            bench("magma", Some(0.25), false),
            bench("nomagma", Some(40.0), false),
        ],
        "magma",
    );
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].slim_over_full, Some(160.0));
    assert_eq!(rows[0].median_ms["nomagma"], Some(40.0));
    let rows = smoke::default_routing(
        &[
            bench("magma", Some(0.25), false),
            bench("nomagma", None, false),
        ],
        "magma",
    );
    assert_eq!(
        (rows[0].median_ms["nomagma"], rows[0].slim_over_full),
        (None, None),
        "an op that fails has no ratio"
    );
    assert!(
        smoke::default_routing(
            &[
                bench("magma", Some(1.0), false),
                bench("nomagma", Some(1.0), true)
            ],
            "magma"
        )
        .is_empty(),
        "emulated timings are not a variant's"
    );
}

#[test]
fn replay_with_user_tables() {
    let dir = tempfile::tempdir().unwrap();
    // A user table that accepts the broken library's MAGMA default path as a clean failure.
    let user = serde_json::json!({
        "schema": "splitpkg-smoke-expect",
        "tables": {"nomagma": {"description": "lenient", "rules": [
            {"op": ["cholesky_solve"], "tags": ["magma-by-default"], "preference": ["default"], "expect": "error", "pattern": "MAGMA library not found"},
            {"op": ["ldl_factor_hermitian"], "preference": ["default", "cusolver"], "expect": "error", "pattern": "cuSOLVER"},
            {"preference": ["magma"], "expect": "excluded", "note": "not judged"}
        ]}}
    });
    let f = dir.path().join("user.json");
    std::fs::write(&f, user.to_string()).unwrap();
    let (rep, code, _) = replay(
        "tests/data/smoke-synthetic-broken.json",
        &["--expect", f.to_str().unwrap()],
    );
    assert_eq!(code, 1, "the wrong results and hangs still fail");
    assert_eq!(rep.variants[0].table_origin, f.to_str().unwrap());
    assert_eq!(
        status_of(&rep, 0, "cholesky_solve/16x64x64,k=2/float64/default").0,
        CaseStatus::ExpectedFail
    );
    assert_eq!(
        status_of(&rep, 0, "lu_factor/64x64/float32/magma").0,
        CaseStatus::Excluded
    );

    for (bad, why) in [
        (
            r#"{"tables": {"x": {"rules": [{"expect": "error"}]}}}"#,
            "pattern",
        ),
        (
            r#"{"tables": {"x": {"rules": [{"expect": "error", "pattern": "("}]}}}"#,
            "bad pattern",
        ),
        (
            r#"{"tables": {"x": {"rules": [{"expect": "maybe"}]}}}"#,
            "not an expectation table",
        ),
        (
            r#"{"tables": {"x": {"rules": [{"op": ["qr"]}]}}}"#,
            "missing",
        ),
        (r#"{"schema": "other", "tables": {}}"#, "schema"),
    ] {
        std::fs::write(&f, bad).unwrap();
        let o = run(&[
            "smoke",
            "--variant",
            "x=/y",
            "--expect",
            f.to_str().unwrap(),
            "--list",
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(stderr(&o).contains(why), "{bad}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1);
    }
}

#[test]
fn judge_rules() {
    let exp = |outcome, pattern: Option<&str>| expect::Expectation {
        outcome,
        pattern: pattern.map(str::to_string),
        note: Some("known stock bug: x".into()),
        rule: "t#0".into(),
    };
    let ok = |r: f64| {
        let mut raw = eval::Raw::new(eval::RawOutcome::Ok);
        raw.residual = Some(r);
        raw.preference_after = Some("default".into());
        raw
    };
    let err = |text: &str, runtime: bool| {
        let mut raw = eval::Raw::new(eval::RawOutcome::Error);
        raw.error = Some(text.into());
        raw.error_type = Some("RuntimeError".into());
        raw.runtime_error = Some(runtime);
        raw.phase = Some("op".into());
        raw
    };
    use eval::CaseStatus::*;
    use expect::Outcome;
    let j = |e: &expect::Expectation, r: &eval::Raw| {
        eval::judge(e, r, 1e-3, cases::Preference::Default).0
    };
    assert_eq!(j(&exp(Outcome::Pass, None), &ok(1e-6)), Pass);
    assert_eq!(j(&exp(Outcome::Pass, None), &ok(2e-3)), Fail);
    assert_eq!(j(&exp(Outcome::Pass, None), &ok(f64::NAN)), Fail);
    assert_eq!(j(&exp(Outcome::Error, Some("(?i)magma")), &ok(1e-6)), Fail);
    assert_eq!(
        j(
            &exp(Outcome::Error, Some("(?i)magma")),
            &err("requires MAGMA", true)
        ),
        ExpectedFail
    );
    assert_eq!(
        j(
            &exp(Outcome::Error, Some("(?i)magma")),
            &err("requires MAGMA", false)
        ),
        Fail
    );
    assert_eq!(
        j(
            &exp(Outcome::Error, Some("cuSOLVER")),
            &err("requires MAGMA", true)
        ),
        Fail
    );
    assert_eq!(j(&exp(Outcome::PassOrError, Some("x")), &ok(1e-6)), Pass);
    assert_eq!(
        j(&exp(Outcome::PassOrError, Some("x")), &err("x", true)),
        ExpectedFail
    );
    assert_eq!(
        j(&exp(Outcome::Excluded, None), &err("anything", false)),
        Excluded
    );
    assert_eq!(
        j(
            &exp(Outcome::Excluded, None),
            &eval::Raw::new(eval::RawOutcome::Timeout)
        ),
        Timeout,
        "a hang is never excluded"
    );
    assert_eq!(
        j(
            &exp(Outcome::Excluded, None),
            &eval::Raw::new(eval::RawOutcome::Crash)
        ),
        Fail,
        "a crash is never excluded"
    );
    let mut harness = err("boom", true);
    harness.phase = Some("check".into());
    assert_eq!(
        j(&exp(Outcome::Error, Some("boom")), &harness),
        Fail,
        "a harness error is not the expected error"
    );
    let mut stuck = ok(1e-6);
    stuck.preference_after = Some("magma".into());
    assert_eq!(
        j(&exp(Outcome::Pass, None), &stuck),
        Fail,
        "preference not reset"
    );
    let mut noisy = ok(1e-6);
    noisy.stderr = Some("Error in magma_getdevice_arch: MAGMA not initialized (call magma_init() first) or bad device".into());
    assert_eq!(j(&exp(Outcome::Pass, None), &noisy), Fail);
    assert_eq!(eval::tolerance("qr", "float32"), 1e-3);
    assert_eq!(eval::tolerance("qr", "complex128"), 1e-9);
    assert_eq!(eval::tolerance("eig", "float64"), 1e-8);
}

#[test]
fn case_seeds_are_stable_and_distinct() {
    let a = cases::case_seed(42, "qr/64x32/float32/default");
    assert_eq!(a, cases::case_seed(42, "qr/64x32/float32/default"));
    assert_ne!(a, cases::case_seed(43, "qr/64x32/float32/default"));
    assert_ne!(a, cases::case_seed(42, "qr/64x32/float64/default"));
    assert!(a < (1 << 53));
}

fn battery_file(dir: &Path) -> PathBuf {
    let p = dir.join("battery.py");
    std::fs::write(&p, smoke::BATTERY).unwrap();
    p
}

#[test]
fn battery_pure_parts_and_op_coverage() {
    let Some(py) = python3() else {
        eprintln!("skipped: no python3");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = battery_file(dir.path());
    let o = std::process::Command::new(&py)
        .arg(&script)
        .arg("selftest")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("selftest ok"));
    // The battery imports without torch and implements exactly the catalog's ops.
    let o = std::process::Command::new(&py)
        .current_dir(dir.path())
        .args([
            "-c",
            "import json, battery; print(json.dumps(sorted(battery.OPS)))",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let have: Vec<String> = serde_json::from_slice(&o.stdout).unwrap();
    let mut want: Vec<String> = cases::ops().into_iter().map(str::to_string).collect();
    want.sort();
    assert_eq!(have, want);
    // Protocol lines: the same prefix on both sides.
    assert!(smoke::BATTERY.contains(&format!("MARK = \"{}\"", runner::MARK)));
    // Bench ops are implemented.
    for item in cases::bench_items() {
        assert!(
            smoke::BATTERY.contains(&format!("\"{}\": lambda", item.op)),
            "bench op {} missing",
            item.op
        );
    }
}

/// A stand-in for battery.py speaking the same protocol: ops `hang`, `crash`, `broken`, `slow`,
/// anything else answers ok. `hang` starts a grandchild in the process group and records its pid.
const FAKE: &str = r#"
import json, os, subprocess, sys, time
MARK = "@@SPLITPKG-SMOKE@@ "
def say(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\n"); sys.stdout.flush()
if sys.argv[1] == "probe":
    if os.environ.get("FAKE_PROBE_HANG"):
        time.sleep(100)
    say({"import_ok": True, "has_magma": True, "mapped_after_linalg": "/x/" + sys.argv[3]})
    sys.exit(0)
if os.environ.get("FAKE_NO_START"):
    say({"ready": False, "error": "ImportError: no torch"}); sys.exit(3)
say({"ready": True})
while True:
    line = sys.stdin.readline()
    if not line or line.strip() == "quit":
        break
    case = json.loads(line)
    op = case["op"]
    if op == "hang":
        child = subprocess.Popen(["sleep", "1000"])
        open(os.path.join(os.getcwd(), "grandchild.pid"), "w").write(str(child.pid))
        time.sleep(1000)
    if op == "crash":
        sys.stderr.write("about to die\n"); sys.stderr.flush()
        os.kill(os.getpid(), 11)
    if op == "broken":
        say({"id": case["id"], "outcome": "ok", "residual": 0.0, "context_ok": False, "context_error": "CUDA error: an illegal memory access"})
        sys.exit(4)
    say({"id": case["id"], "outcome": "ok", "residual": 1e-9, "preference_after": "default", "context_ok": True, "worker_pid": os.getpid()})
"#;

fn fake_spec(dir: &Path, env: &[(&str, &str)]) -> runner::PySpec {
    let script = dir.join("fake.py");
    std::fs::write(&script, FAKE).unwrap();
    runner::PySpec {
        python: "python3".into(),
        script,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        workdir: dir.to_path_buf(),
    }
}

fn job(i: usize, op: &str) -> runner::WorkerJob {
    runner::WorkerJob {
        id: format!("{op}-{i}"),
        op: op.into(),
        payload: serde_json::json!({"id": format!("{op}-{i}"), "op": op}),
    }
}

/// Running (a killed process whose new parent has not reaped it yet is a zombie, not alive).
fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
    }
}

#[test]
fn runner_survives_hangs_and_crashes() {
    if python3().is_none() {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = fake_spec(dir.path(), &[]);
    let jobs = vec![
        job(0, "ok"),
        job(1, "hang"),
        job(2, "ok"),
        job(3, "crash"),
        job(4, "ok"),
        job(5, "hang"),
        job(6, "hang"),
        job(7, "broken"),
        job(8, "ok"),
    ];
    let limits = runner::Limits {
        case_timeout: Duration::from_millis(1500),
        ready_timeout: Duration::from_secs(30),
        timeouts_per_op: 2,
        deadline: None,
    };
    let mut seen = Vec::new();
    let raws = runner::run_jobs(&spec, "default", &jobs, &limits, |i, r| {
        seen.push((i, r.outcome))
    });
    use eval::RawOutcome::*;
    let outcomes: Vec<eval::RawOutcome> = raws.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        vec![Ok, Timeout, Ok, Crash, Ok, Timeout, NotRun, Ok, Ok]
    );
    assert_eq!(
        seen.len(),
        jobs.len(),
        "every result reported as it arrives"
    );
    assert!(
        raws[1]
            .detail
            .as_deref()
            .unwrap()
            .contains("process group killed")
    );
    assert!(
        raws[3].detail.as_deref().unwrap().contains("signal 11"),
        "{:?}",
        raws[3].detail
    );
    assert!(
        raws[6]
            .detail
            .as_deref()
            .unwrap()
            .contains("timed out 2 times")
    );
    assert_eq!(raws[7].context_ok, Some(false));
    assert!(
        raws[7]
            .detail
            .as_deref()
            .unwrap()
            .contains("illegal memory access")
    );
    // A fresh worker after each timeout, crash and broken context.
    let pid = |i: usize| {
        raws[i].answer.as_ref().unwrap()["worker_pid"]
            .as_i64()
            .unwrap()
    };
    assert_ne!(pid(0), pid(2));
    assert_ne!(pid(2), pid(4));
    assert_ne!(pid(4), pid(8));
    // The hang's grandchild went with its process group.
    let gc: i32 = std::fs::read_to_string(dir.path().join("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !pid_alive(gc),
        "grandchild {gc} of a timed-out case survived"
    );
}

#[test]
fn runner_reports_a_worker_that_cannot_start() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = fake_spec(dir.path(), &[("FAKE_NO_START", "1")]);
    let limits = runner::Limits {
        case_timeout: Duration::from_secs(5),
        ready_timeout: Duration::from_secs(30),
        timeouts_per_op: 2,
        deadline: None,
    };
    let raws = runner::run_jobs(
        &spec,
        "default",
        &[job(0, "ok"), job(1, "ok")],
        &limits,
        |_, _| {},
    );
    assert!(raws.iter().all(|r| r.outcome == eval::RawOutcome::NotRun));
    assert!(
        raws[1].detail.as_deref().unwrap().contains("no torch"),
        "{:?}",
        raws[1].detail
    );
}

/// A worker started ahead (while the probe runs, or while another battery does) takes the first
/// job; one that is never used is killed when dropped, and one that could not start is replaced.
#[test]
fn runner_uses_a_worker_started_ahead() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = fake_spec(dir.path(), &[]);
    let limits = runner::Limits {
        case_timeout: Duration::from_secs(5),
        ready_timeout: Duration::from_secs(30),
        timeouts_per_op: 2,
        deadline: None,
    };
    let pid = |r: &eval::Raw| r.answer.as_ref().unwrap()["worker_pid"].as_i64().unwrap() as i32;

    let ahead = runner::start_ahead(&spec, "default", limits.ready_timeout);
    let ahead_pid = ahead.pid().expect("the fake worker starts");
    let raws = runner::run_jobs_on(
        ahead,
        &spec,
        "default",
        &[job(0, "ok"), job(1, "ok")],
        &limits,
        |_, _| {},
    );
    assert_eq!(
        (pid(&raws[0]), pid(&raws[1])),
        (ahead_pid as i32, ahead_pid as i32),
        "the started worker ran both jobs"
    );

    let unused = runner::start_ahead(&spec, "default", limits.ready_timeout);
    let unused_pid = unused.pid().unwrap() as i32;
    assert!(pid_alive(unused_pid));
    drop(unused);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !pid_alive(unused_pid),
        "a worker started ahead and never used outlived its handle"
    );

    let failed = runner::start_ahead(
        &fake_spec(dir.path(), &[("FAKE_NO_START", "1")]),
        "default",
        limits.ready_timeout,
    );
    assert!(failed.pid().is_none());
    let raws = runner::run_jobs_on(
        failed,
        &spec,
        "default",
        &[job(0, "ok")],
        &limits,
        |_, _| {},
    );
    assert_eq!(
        raws[0].outcome,
        eval::RawOutcome::Ok,
        "a worker that did not start ahead is started for the job"
    );
}

#[test]
fn probe_answers_and_times_out() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let v = runner::run_probe(
        &fake_spec(dir.path(), &[]),
        "libtorch_cuda_linalg.so",
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(v["mapped_after_linalg"], "/x/libtorch_cuda_linalg.so");
    // The hanging probe sleeps 100 s and would then end without a Timeout: the typed Timeout is
    // the proof that the 1 s limit fired (no wall-clock bound on the test, which load breaks).
    let e = runner::run_probe(
        &fake_spec(dir.path(), &[("FAKE_PROBE_HANG", "1")]),
        "x",
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(matches!(e, runner::RunError::Timeout { .. }), "{e}");
    assert!(
        e.to_string().starts_with("probe did not finish within 1s"),
        "{e}"
    );
}

#[test]
fn lazy_library_facts_on_fixture_trees() {
    let spec = splitpkg::analysis::payload::PayloadSpec::for_dep("magma", &[]);
    let pip = variant::lazy_facts(
        &fixture("pip-like").join("torch/lib/libtorch_cuda_linalg.so"),
        &spec,
    )
    .unwrap();
    assert!(pip.has_magma, "{pip:?}");
    assert!(
        pip.defined_symbols > 0 && pip.evidence.starts_with("defines"),
        "{pip:?}"
    );
    let conda = variant::lazy_facts(
        &fixture("conda-like").join("lib/libtorch_cuda_linalg.so"),
        &spec,
    )
    .unwrap();
    assert!(conda.has_magma, "{conda:?}");
    assert_eq!(conda.needs_payload_libraries, vec!["libmagma.so.2"]);
    let nomagma = variant::lazy_facts(
        &fixture("conda-nomagma").join("lib/libtorch_cuda_linalg.so"),
        &spec,
    )
    .unwrap();
    assert!(!nomagma.has_magma, "{nomagma:?}");
    assert!(nomagma.evidence.contains("no magma symbols"), "{nomagma:?}");
}

#[test]
fn variant_paths_resolve_without_importing_torch() {
    if python3().is_none() {
        return;
    }
    let torch_dir = fixture("pip-like").join("torch");
    let r = variant::resolve(
        &variant::VariantArg {
            name: "magma".into(),
            path: torch_dir.clone(),
        },
        None,
    )
    .unwrap();
    assert_eq!(r.layout, variant::PathLayout::TorchDir);
    assert_eq!(r.torch_dir, torch_dir.canonicalize().unwrap());
    let lazy = variant::locate_lazy(&r, None, "libtorch_cuda_linalg.so").unwrap();
    assert!(lazy.ends_with("torch/lib/libtorch_cuda_linalg.so"));
    let r = variant::resolve(
        &variant::VariantArg {
            name: "magma".into(),
            path: fixture("pip-like"),
        },
        None,
    )
    .unwrap();
    assert_eq!(r.layout, variant::PathLayout::SitePackages);
    // Not a torch installation at all.
    let e = variant::resolve(
        &variant::VariantArg {
            name: "magma".into(),
            path: fixture("links"),
        },
        None,
    )
    .unwrap_err();
    assert_eq!(e.exit(), splitpkg::Exit::BadInput);
    assert!(e.to_string().contains("not an env prefix"), "{e}");
    assert!(variant::parse_variant("magma").is_err());
    assert!(variant::parse_variant("ma gma=/x").is_err());
    assert_eq!(
        variant::parse_variant("nomagma=/a=b").unwrap().path,
        PathBuf::from("/a=b")
    );
}

#[test]
fn runner_stops_at_the_deadline() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = fake_spec(dir.path(), &[]);
    let limits = runner::Limits {
        case_timeout: Duration::from_secs(5),
        ready_timeout: Duration::from_secs(30),
        timeouts_per_op: 2,
        deadline: Some(std::time::Instant::now()),
    };
    let raws = runner::run_jobs(
        &spec,
        "default",
        &[job(0, "ok"), job(1, "ok")],
        &limits,
        |_, _| {},
    );
    assert!(raws.iter().all(|r| r.outcome == eval::RawOutcome::NotRun
        && r.detail.as_deref().unwrap().contains("--deadline")));
}

/// A stand-in `torch` package: enough for the probe and the worker to start, with a cholesky that
/// really loads the fixture's lazy library (so /proc/self/maps shows it), and nothing else.
const FAKE_TORCH: &str = r#"
import ctypes, os, types
__version__ = "0.0.0+fake"
version = types.SimpleNamespace(cuda="13.0")
float32 = types.SimpleNamespace(is_complex=False)
float64 = types.SimpleNamespace(is_complex=False)
complex64 = types.SimpleNamespace(is_complex=True)
complex128 = types.SimpleNamespace(is_complex=True)
_pref = ["Default"]
class T:
    def __matmul__(self, o): return self
    __add__ = __mul__ = __rmul__ = __radd__ = __truediv__ = __matmul__
    def sum(self): return self
    def item(self): return 0.0
    @property
    def mT(self): return self
def randn(*a, **k): return T()
zeros = eye = randn
def _pref_lib(name=None):
    if name is not None:
        _pref[0] = {"default": "Default", "cusolver": "Cusolver", "magma": "Magma"}[name]
    return "_LinalgBackend." + _pref[0]
backends = types.SimpleNamespace(cuda=types.SimpleNamespace(preferred_linalg_library=_pref_lib))
__config__ = types.SimpleNamespace(show=lambda: "  - Magma 2.6.1\n")
def _cholesky(x):
    ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libtorch_cuda_linalg.so"))
    return x
linalg = types.SimpleNamespace(cholesky=_cholesky)
cuda = types.SimpleNamespace(
    has_magma=True, is_available=lambda: True, get_device_name=lambda i: "Fake GPU",
    get_device_capability=lambda i: (9, 0), init=lambda: None, mem_get_info=lambda: (2**30, 2**31),
    synchronize=lambda: None)
"#;

/// The options of `run_end_to_end_with_a_fake_torch`: the fake torch as magma (its torch
/// directory) and as emulated nomagma (its site-packages), one matrix_exp case, seed 7.
fn fake_torch_options(torch: &Path, site: &Path) -> smoke::SmokeOptions {
    smoke::SmokeOptions {
        variants: vec![
            variant::VariantArg {
                name: "magma".into(),
                path: torch.to_path_buf(),
            },
            variant::VariantArg {
                name: "nomagma".into(),
                path: site.to_path_buf(),
            },
        ],
        emulate: vec!["nomagma".into()],
        python: Some("python3".into()),
        tables: expect::Tables::builtin(),
        bench: false,
        bench_reps: 1,
        case_timeout: Duration::from_secs(30),
        deadline: None,
        seed: Some(7),
        filter: cases::Filter {
            only: vec!["matrix_exp/16x16/float64/".into()],
            skip: vec![],
        },
        lazy: "libtorch_cuda_linalg.so".into(),
        spec: splitpkg::analysis::payload::PayloadSpec::for_dep("magma", &[]),
        progress: false,
        command: vec!["test".into()],
    }
}

/// The one GPU the fake torch reports.
fn fake_device() -> smoke::device::DeviceInfo {
    smoke::device::DeviceInfo {
        ordinal: 0,
        count: 1,
        driver_version: 13000,
        driver_cuda: "13.0".into(),
        driver: Some("580.159.04".into()),
        name: "Fake GPU".into(),
        compute_capability: "9.0".into(),
        sm: "sm_90".into(),
    }
}

/// `smoke::run` end to end without a GPU: a copy of the pip-like fixture with a fake torch.
/// Everything but the numbers is real: path resolution, the probe and laziness, the lazy
/// library's MAGMA facts, the worker, judging, the report and its schema.
#[test]
fn run_end_to_end_with_a_fake_torch() {
    if python3().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture("pip-like"))
        .arg(&site)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(site.join("torch/__init__.py"), FAKE_TORCH).unwrap();
    let torch = site.join("torch");
    let rep = smoke::run(&fake_torch_options(&torch, &site), fake_device()).unwrap();
    let v = serde_json::to_value(&rep).unwrap();
    assert_valid("docs/smoke.schema.json", &v);
    assert_eq!(rep.seed, 7);
    assert_eq!(
        rep.exit(),
        splitpkg::Exit::No,
        "the fake torch computes nothing"
    );
    let magma = &rep.variants[0];
    assert_eq!(magma.layout, Some(variant::PathLayout::TorchDir));
    assert_eq!(magma.cases.len(), 3, "default, cusolver, magma");
    let laziness = &magma.checks[0];
    assert_eq!(laziness.status, eval::CheckStatus::Pass, "{laziness:?}");
    let lazy = magma.lazy_library.as_ref().unwrap();
    assert!(
        lazy.has_magma && lazy.path.ends_with("torch/lib/libtorch_cuda_linalg.so"),
        "{lazy:?}"
    );
    assert_eq!(
        magma.checks[1].status,
        eval::CheckStatus::Pass,
        "has_magma True and the fixture library holds MAGMA"
    );
    for c in &magma.cases {
        assert_eq!(c.raw.outcome, eval::RawOutcome::Error, "{c:?}");
        assert_eq!(c.status, eval::CaseStatus::Fail);
        assert!(
            c.reason.contains("harness error while building the inputs"),
            "{}",
            c.reason
        );
        assert_eq!(
            c.raw.preference_after.as_deref(),
            Some("default"),
            "preference reset after the case"
        );
    }
    let emu = &rep.variants[1];
    assert!(emu.emulated);
    assert_eq!(emu.layout, Some(variant::PathLayout::SitePackages));
    assert_eq!(emu.cases.len(), 2, "default and cusolver");
    assert!(
        emu.cases
            .iter()
            .all(|c| c.case.applied_preference == cases::Preference::Cusolver
                && c.raw.preference_after.as_deref() == Some("cusolver"))
    );
    assert_eq!(emu.checks[1].status, eval::CheckStatus::NotApplicable);
    assert_eq!(emu.probe.as_ref().unwrap()["prefer_cusolver_env"], "1");
    assert_eq!(
        emu.probe.as_ref().unwrap()["preference_at_start"],
        "default",
        "the fake ignores the env variable"
    );
    // Replaying the report judges it the same way.
    let f = dir.path().join("rep.json");
    std::fs::write(&f, serde_json::to_string(&rep).unwrap()).unwrap();
    let o = run(&["smoke", "--replay", f.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let again = replayed(&o);
    assert_eq!(again.summary, rep.summary);
}

/// The device-code check judges a real library with device code (gcc-built, `.nv_fatbin` added),
/// and says "not checked", with the reason, in each case where it has nothing to judge.
#[test]
fn device_code_check_judges_device_code_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    // The host library, without `.nv_fatbin`; `lib` is it with device code added.
    let host = fixture("missing/lib/libtorch_cuda.so");
    let lib = dir.path().join("libtorch_cuda.so");
    let section = splitpkg::fatbin::synth::torch_like(2, &[80, 90]);
    embed_fatbin(&host, &section, &lib);
    let libs = [lib.clone()];
    let judged = eval::device_code_check(&libs, None, "sm_90").expect("a library to judge");
    assert_eq!(judged.status, eval::CheckStatus::Pass, "{}", judged.detail);
    // Each of these alone leaves nothing to judge: no libraries, none with device code (the host
    // library without `.nv_fatbin`, a missing file), a device that is no compute capability.
    assert!(eval::device_code_check(&[], None, "sm_90").is_none());
    assert!(eval::device_code_check(&[host], None, "sm_90").is_none());
    assert!(eval::device_code_check(&[dir.path().join("absent.so")], None, "sm_90").is_none());
    assert!(eval::device_code_check(&libs, None, "a GPU").is_none());
    let c = eval::device_code_check_report(None);
    assert_eq!(c.status, eval::CheckStatus::NotChecked);
    assert!(
        c.detail.contains("no library with device code"),
        "{}",
        c.detail
    );
}
