//! Text rendering of smoke reports and plans (the JSON is the serde form of [`super::document::SmokeReport`]).

use std::fmt::Write;

use super::document::{SmokeReport, SmokeVerdict, VariantPlan, VariantReport};
use super::eval::{CaseStatus, CheckStatus, RawOutcome};
use super::expect::Outcome;

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn probe_line(v: &VariantReport) -> String {
    let Some(p) = &v.probe else {
        return format!(
            "probe failed: {}",
            v.probe_error.as_deref().unwrap_or("no answer")
        );
    };
    let s = |k: &str| p.get(k).and_then(|x| x.as_str()).unwrap_or("?").to_string();
    if p.get("import_ok").and_then(|x| x.as_bool()) != Some(true) {
        return format!(
            "import torch failed: {}",
            s("import_error").lines().last().unwrap_or("")
        );
    }
    let has = match p.get("has_magma").and_then(|x| x.as_bool()) {
        Some(true) => "True",
        Some(false) => "False",
        None => "?",
    };
    format!(
        "torch {}, CUDA {}, Python {}, torch.cuda.has_magma {has}",
        s("torch_version"),
        s("cuda_version"),
        s("python")
    )
}

fn expect_text(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "pass",
        Outcome::Error => "error",
        Outcome::PassOrError => "pass-or-error",
        Outcome::Excluded => "excluded",
    }
}

fn variant_text(out: &mut String, v: &VariantReport, all_cases: bool) {
    let mode = if v.emulated { "EMULATED" } else { "real" };
    let _ = writeln!(
        out,
        "== variant {} ({mode}) — {}",
        v.name,
        v.torch_dir.as_deref().unwrap_or(&v.path)
    );
    if let Some(n) = &v.note {
        let _ = writeln!(out, "   {n}");
    }
    let _ = writeln!(out, "   {}", probe_line(v));
    let _ = writeln!(
        out,
        "   python {}; judged by table '{}' ({})",
        v.python, v.table, v.table_origin
    );
    match (&v.lazy_library, &v.lazy_error) {
        (Some(l), _) => {
            let _ = writeln!(
                out,
                "   lazy library {} ({}): {}",
                l.path,
                mb(l.size),
                l.evidence
            );
        }
        (None, Some(e)) => {
            let _ = writeln!(out, "   lazy library: {e}");
        }
        _ => {}
    }
    let _ = writeln!(out, "   checks:");
    for c in &v.checks {
        let _ = writeln!(
            out,
            "     {:<12} {:<14} {}",
            c.name,
            c.status.label(),
            c.detail
        );
        if let (CheckStatus::Fail | CheckStatus::Stale, Some(cons)) = (c.status, &c.consequence) {
            let _ = writeln!(out, "     {:<12} {:<14} consequence: {cons}", "", "");
        }
    }
    let width = v
        .cases
        .iter()
        .map(|c| c.case.id.len())
        .max()
        .unwrap_or(10)
        .max(10);
    let _ = writeln!(
        out,
        "   {:<width$}  {:<13} {:>9} {:>7} {:>9}  note",
        "case", "status", "residual", "tol", "time ms"
    );
    for c in &v.cases {
        let interesting = !matches!(c.status, CaseStatus::Pass);
        if !all_cases && !interesting {
            continue;
        }
        let residual = match (c.raw.outcome, c.raw.residual) {
            (RawOutcome::Ok, Some(r)) => format!("{r:.1e}"),
            _ => "-".into(),
        };
        let time = c
            .raw
            .time_ms
            .map(|t| format!("{t:.1}"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "   {:<width$}  {:<13} {:>9} {:>7} {:>9}  {}",
            c.case.id,
            c.status.label(),
            residual,
            format!("{:.0e}", c.tolerance),
            time,
            c.reason
        );
    }
    if !all_cases {
        let hidden = v
            .cases
            .iter()
            .filter(|c| c.status == CaseStatus::Pass)
            .count();
        let _ = writeln!(
            out,
            "   ({hidden} passing cases not listed; --all lists them)"
        );
    }
    let s = &v.summary;
    let _ = writeln!(out, "   {}: {s}", if s.ok { "OK" } else { "FAIL" });
    let _ = writeln!(out);
}

/// The per-variant, per-case table, the bench table and the verdict line.
pub fn text(rep: &SmokeReport, all_cases: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "splitpkg smoke (seed {}, case timeout {} s)",
        rep.seed, rep.options.case_timeout_s
    );
    if let Some(d) = &rep.device {
        let _ = writeln!(
            out,
            "device {}: {} (compute capability {}, {}), driver {}, supports CUDA {}",
            d.ordinal,
            d.name,
            d.compute_capability,
            d.sm,
            d.driver.as_deref().unwrap_or("version not recorded"),
            d.driver_cuda
        );
    }
    if let Some(from) = &rep.options.replayed_from {
        let _ = writeln!(out, "judged again from the recorded run {from}");
    }
    let _ = writeln!(
        out,
        "tolerances (relative residual): float32/complex64 1e-3, float64/complex128 1e-9, eig/eigvals ×10, matrix_rank exact"
    );
    let _ = writeln!(out);
    for v in &rep.variants {
        variant_text(&mut out, v, all_cases);
    }
    for b in &rep.bench {
        let _ = writeln!(out, "== bench on variant {} (ms; {})", b.variant, b.method);
        let _ = writeln!(
            out,
            "   {:<18} {:<18} {:<8} {:>10} {:>10} {:>10} {:>8}  default path in 2.11",
            "op", "size", "dtype", "default", "cusolver", "magma", "mag/cus"
        );
        for r in &b.rows {
            let cell = |p: &str| match r.results.get(p) {
                Some(c) => match c.median_ms {
                    Some(m) => format!("{m:.3}"),
                    None => match c.outcome {
                        RawOutcome::Timeout => "timeout".into(),
                        _ => "ERR".into(),
                    },
                },
                None => "-".into(),
            };
            let ratio = r
                .magma_over_cusolver
                .map(|x| format!("{x:.2}×"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "   {:<18} {:<18} {:<8} {:>10} {:>10} {:>10} {:>8}  {}",
                r.op,
                r.size,
                r.dtype,
                cell("default"),
                cell("cusolver"),
                cell("magma"),
                ratio,
                r.why
            );
            for (p, c) in &r.results {
                if let Some(e) = &c.error {
                    let _ = writeln!(out, "   {:<18} {p}: {e}", "");
                }
            }
        }
        let _ = writeln!(out);
    }
    if !rep.default_routing.is_empty() {
        routing_text(&mut out, rep);
    }
    let s = &rep.summary;
    let _ = writeln!(
        out,
        "RESULT: {} — {} variant(s), {s}",
        rep.result.label(),
        rep.variants.len()
    );
    if rep.result == SmokeVerdict::OkStaleFlag {
        let _ = writeln!(
            out,
            "NOTE: every variant works; a flag compiled into a core file describes the other variant (see the STALE check's consequence). Exit code 4."
        );
    }
    if rep.variants.iter().any(|v| v.emulated) {
        let _ = writeln!(
            out,
            "NOTE: emulated variants ran on a MAGMA installation with cuSOLVER forced; they are not real nomagma results."
        );
    }
    out
}

/// Each bench item under the default preference on every variant: what each variant's users get.
fn routing_text(out: &mut String, rep: &SmokeReport) {
    let names: Vec<String> = rep
        .bench
        .iter()
        .filter(|b| !b.emulated)
        .map(|b| b.variant.clone())
        .collect();
    let dep = &rep.options.dep;
    let _ = writeln!(
        out,
        "== default routing on each variant (ms, median; no{dep} / {dep}: above 1 is slower without {dep})"
    );
    let mut head = format!("   {:<18} {:<18} {:<8}", "op", "size", "dtype");
    for n in &names {
        let _ = write!(head, " {n:>10}");
    }
    let _ = writeln!(out, "{head} {:>9}", "slim/full");
    for r in &rep.default_routing {
        let mut line = format!("   {:<18} {:<18} {:<8}", r.op, r.size, r.dtype);
        for n in &names {
            let cell = match r.median_ms.get(n).copied().flatten() {
                Some(m) => format!("{m:.3}"),
                None => "error".into(),
            };
            let _ = write!(line, " {cell:>10}");
        }
        let ratio = r
            .slim_over_full
            .map(|x| format!("{x:.2}×"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "{line} {ratio:>9}");
    }
    let _ = writeln!(out);
}

/// `--list`: the planned cases per variant with their expectations.
pub fn plan_text(plans: &[VariantPlan]) -> String {
    let mut out = String::new();
    for p in plans {
        let _ = writeln!(
            out,
            "== variant {} ({:?}), table '{}': {} cases",
            p.name,
            p.mode,
            p.table,
            p.cases.len()
        );
        for pc in &p.cases {
            let (c, e) = (&pc.case, &pc.expect);
            let mut line = format!("   {:<48} expect {}", c.id, expect_text(e.outcome));
            if let Some(pat) = &e.pattern
                && e.outcome != Outcome::Pass
            {
                let _ = write!(line, " /{pat}/");
            }
            if c.applied_preference != c.preference {
                let _ = write!(line, " (runs as {})", c.applied_preference);
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
