//! From the loaded documents to the page's model ([`Report`]): one function per section of the
//! page, each a pure function of the inputs. Every list is sorted, so the same inputs give the
//! same page.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{
    Answer, BackendLine, ByteBar, Change, EnvironmentLine, Failure, FatbinBar, FatbinTotals, Lost,
    LostOp, PackageLine, Proof, Provenance, Report, ReportSaving, RoutingLine, SavingRule,
    SlimSmoke, VariantLine, Worth,
};
use super::{
    Inputs, NO_DATE, NOT_RECORDED, SAME_WITHIN, bytes as bytes_text, file_name, fmt_ms, fmt_ratio,
};
use crate::analysis::plan::{EnvSource, Environment, Plan, Role};
use crate::analysis::verdict::{PayloadForm, Verdict, WarningKind};
use crate::provenance::Tool;
use crate::smoke::cases::Preference;
use crate::smoke::eval::{CaseStatus, CheckStatus};
use crate::smoke::{SmokeReport, SmokeVerdict, VariantReport};

/// What every section reads: the inputs, and the payload's and the slim variant's names.
struct Sources<'a> {
    inputs: &'a Inputs,
    plan: Option<&'a Plan>,
    smoke: Option<&'a SmokeReport>,
    dep: String,
    slim: String,
}

/// Everything the page shows, computed once from the inputs given.
pub fn build(inputs: &Inputs) -> Report {
    let plan = inputs.plan.as_ref().map(|p| &p.doc);
    let smoke = inputs.smoke.as_ref().map(|s| &s.doc);
    let dep = plan
        .map(|p| p.options.dep.clone())
        .or_else(|| smoke.map(|s| s.options.dep.clone()))
        .unwrap_or_else(|| "magma".into());
    let src = Sources {
        inputs,
        plan,
        smoke,
        slim: crate::analysis::payload::slim_variant(&dep),
        dep,
    };
    let variants = src.variants();
    let slim_smoke = src.slim_smoke();
    let failures = src.failures();
    let smoke_failed =
        smoke.is_some_and(|s| s.result == SmokeVerdict::Fail) || !failures.is_empty();
    let routing = src.routing();
    let backend = src.backend();
    let byte_bars = src.byte_bars(&variants);
    let saving = src.saving(&byte_bars);
    let (fatbin_bars, fatbin_total) = src.fatbin();
    let answer = match plan.map(|p| p.verdict) {
        None => Answer::Unknown,
        Some(Verdict::NotConfined | Verdict::NotPresent) => Answer::No,
        Some(Verdict::Confined) if smoke_failed => Answer::SlimBroken,
        Some(Verdict::Confined) if slim_smoke == SlimSmoke::Real => Answer::Yes,
        Some(Verdict::Confined) => Answer::YesUntested,
    };
    let mut unknown = src.unknown(slim_smoke, &routing, &backend);
    let provenance = provenance(inputs, &mut unknown);
    let slim_real = (slim_smoke == SlimSmoke::Real).then(|| src.lost());
    let routing_moved: Vec<RoutingLine> = routing
        .iter()
        .filter(|l| l.change.moved())
        .cloned()
        .collect();
    let worth = saving.as_ref().map(|s| Worth::of(s.bytes));
    let rule = saving
        .as_ref()
        .zip(worth)
        .map(|(s, w)| rule(s, w, slim_real.as_ref(), &routing_moved, &failures));
    Report {
        title: src.title(),
        answer,
        headline: headline(answer, worth, saving.as_ref()),
        rule,
        dep_upper: src.dep.to_uppercase(),
        saving,
        byte_bars,
        payload_static_in_lazy: src.payload_static_in_lazy(),
        platform: src.platform(),
        slim_smoke,
        slim_real,
        slim_emulated: slim_smoke == SlimSmoke::Emulated,
        routing_moved,
        routing,
        same_within_percent: format!("{:.0}", (SAME_WITHIN - 1.0) * 100.0),
        backend,
        fatbin_bars,
        fatbin_total,
        proof: plan.map(proof),
        variants,
        smoke_result: smoke.map(|s| s.result),
        smoke_result_label: smoke.map_or("not recorded", |s| s.result.label()),
        failures,
        packages: src.packages(),
        provenance,
        unknown,
        dep: src.dep,
        slim: src.slim,
    }
}

impl Sources<'_> {
    /// The package and its version: the plan's package metadata when the input had some, else
    /// the torch version the smoke run imported (a plan of an unpacked tree has no metadata, and
    /// the title would otherwise name the directory alone).
    fn title(&self) -> String {
        if let Some(pkg) = self.plan.and_then(|p| p.input.package.as_ref()) {
            return format!("{} {}", pkg.name, pkg.version);
        }
        let torch = self
            .smoke
            .and_then(|s| s.variants.iter().find_map(|v| v.torch_version()));
        // The smoke run imports torch: its version is torch's, whatever the plan's directory is called.
        match (self.plan, torch) {
            (_, Some(v)) => format!("torch {v}"),
            (Some(p), None) => file_name(&p.input.path).to_string(),
            (None, None) => "package".into(),
        }
    }

    fn slim_variant(&self) -> Option<&VariantReport> {
        self.smoke
            .and_then(|s| s.variants.iter().find(|v| v.name == self.slim))
    }

    fn slim_smoke(&self) -> SlimSmoke {
        match (self.smoke, self.slim_variant()) {
            (None, _) => SlimSmoke::NoSmoke,
            (Some(_), None) => SlimSmoke::NotRun,
            (Some(_), Some(v)) if v.is_emulated() => SlimSmoke::Emulated,
            (Some(_), Some(_)) => SlimSmoke::Real,
        }
    }

    // ---- the smoke run ----

    /// Variants as the smoke run saw them.
    fn variants(&self) -> Vec<VariantLine> {
        let mut variants: Vec<VariantLine> = self
            .smoke
            .map(|s| s.variants.iter().map(variant_line).collect())
            .unwrap_or_default();
        variants.sort_by(|a, b| a.name.cmp(&b.name));
        variants
    }

    /// Failures: every case and check that did not meet its expectation, in every variant.
    fn failures(&self) -> Vec<Failure> {
        let mut failures = Vec::new();
        for v in self.smoke.iter().flat_map(|s| &s.variants) {
            let failure = |what: String, status: &str, reason: &str| Failure {
                variant: v.name.clone(),
                emulated: v.is_emulated(),
                what,
                status: status.into(),
                reason: reason.into(),
            };
            for c in &v.cases {
                if matches!(c.status, CaseStatus::Fail | CaseStatus::Timeout) {
                    failures.push(failure(
                        format!("case {}", c.case.id),
                        c.status.label(),
                        &c.reason,
                    ));
                }
            }
            for c in &v.checks {
                if c.status == CheckStatus::Fail {
                    failures.push(failure(format!("check {}", c.name), "FAIL", &c.detail));
                }
            }
            if let Some(e) = &v.probe_error {
                failures.push(failure("probe".into(), "FAIL", e));
            }
        }
        failures.sort_by(|a, b| (&a.variant, &a.what).cmp(&(&b.variant, &b.what)));
        failures
    }

    /// Ops lost in the slim variant: a case id that passes in the full variant and does not in
    /// the slim one. Only a real slim variant can lose anything (an emulated one forces cuSOLVER
    /// on the full installation).
    fn lost(&self) -> Lost {
        let mut lost = Lost::default();
        let full = self.smoke.and_then(|s| {
            s.variants
                .iter()
                .find(|v| v.name == self.dep && !v.is_emulated())
        });
        let (Some(full), Some(sv)) = (full, self.slim_variant().filter(|v| !v.is_emulated()))
        else {
            return lost;
        };
        let full_ok: BTreeSet<&str> = full
            .cases
            .iter()
            .filter(|c| c.status == CaseStatus::Pass)
            .map(|c| c.case.id.as_str())
            .collect();
        let mut by_op: BTreeMap<(&str, &Preference), (usize, &str)> = BTreeMap::new();
        for c in &sv.cases {
            if full_ok.contains(c.case.id.as_str())
                && c.status != CaseStatus::Pass
                && c.status != CaseStatus::Excluded
            {
                by_op
                    .entry((&c.case.op, &c.case.preference))
                    .or_insert((0, &c.reason))
                    .0 += 1;
            }
        }
        for ((op, preference), (cases, example_reason)) in by_op {
            let l = LostOp {
                op: op.into(),
                preference: preference.to_string(),
                cases,
                example_reason: example_reason.into(),
            };
            match preference {
                Preference::Default => lost.default.push(l),
                Preference::Cusolver | Preference::Magma => lost.explicit.push(l),
            }
        }
        lost
    }

    /// Default routing: the slim variant's default time over the full one's, real variants only.
    fn routing(&self) -> Vec<RoutingLine> {
        let mut routing: Vec<RoutingLine> = self
            .smoke
            .iter()
            .flat_map(|s| &s.default_routing)
            .map(|r| {
                let full_ms = r.median_ms.get(&self.dep).copied().flatten();
                let slim_ms = r.median_ms.get(&self.slim).copied().flatten();
                let ratio = r.slim_over_full.or(match (slim_ms, full_ms) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                });
                let change = match ratio {
                    None => Change::Failed,
                    Some(x) if x > SAME_WITHIN => Change::Slower,
                    Some(x) if x < 1.0 / SAME_WITHIN => Change::Faster,
                    Some(_) => Change::Same,
                };
                RoutingLine {
                    item: format!("{} {} {}", r.op, r.size, r.dtype),
                    full_ms,
                    slim_ms,
                    ratio,
                    change,
                    full: fmt_ms(full_ms),
                    slim: fmt_ms(slim_ms),
                    ratio_text: ratio.map(fmt_ratio),
                }
            })
            .collect();
        routing.sort_by(|a, b| a.item.cmp(&b.item));
        routing
    }

    /// magma vs cuSOLVER under explicit preferences, from the real full variant's bench.
    fn backend(&self) -> Vec<BackendLine> {
        let bench = self.smoke.and_then(|s| {
            s.bench
                .iter()
                .find(|b| b.variant == self.dep && !b.emulated)
        });
        let mut backend: Vec<BackendLine> = bench
            .iter()
            .flat_map(|b| &b.rows)
            .map(|r| {
                let m = r.results.get("magma");
                let c = r.results.get("cusolver");
                let magma_ms = m.and_then(|c| c.median_ms);
                let cusolver_ms = c.and_then(|c| c.median_ms);
                let ratio = match (magma_ms, cusolver_ms) {
                    (Some(a), Some(b)) if b > 0.0 && a > 0.0 => Some(a / b),
                    _ => None,
                };
                let magma_error = m.and_then(|c| c.error.clone());
                BackendLine {
                    item: format!("{} {} {}", r.op, r.size, r.dtype),
                    magma: match magma_error {
                        Some(_) => "failed".into(),
                        None => fmt_ms(magma_ms),
                    },
                    cusolver: fmt_ms(cusolver_ms),
                    ratio_text: ratio.map(fmt_ratio),
                    magma_ms,
                    cusolver_ms,
                    ratio,
                    magma_error,
                }
            })
            .collect();
        backend.sort_by(|a, b| a.item.cmp(&b.item));
        backend
    }

    /// The GPU, driver and torch of the run.
    fn platform(&self) -> Option<String> {
        self.smoke.map(|s| {
            let device = match &s.device {
                Some(d) => format!("{} ({}), {}", d.name, d.sm, d.driver_text()),
                None => "GPU not recorded (sm not recorded), driver version not recorded".into(),
            };
            let torch: BTreeSet<String> = s
                .variants
                .iter()
                .filter_map(|v| v.torch_version())
                .collect();
            format!(
                "{device}, torch {}",
                if torch.is_empty() {
                    "not recorded".into()
                } else {
                    torch.into_iter().collect::<Vec<_>>().join(", ")
                }
            )
        })
    }

    // ---- bytes ----

    fn output_bytes(&self, role: Role) -> Option<u64> {
        let p = self.plan?;
        p.outputs.iter().find(|o| o.role == role).map(|o| o.bytes)
    }

    /// Where the bytes go: core, each lazy variant (with the payload first), payload.
    fn byte_bars(&self, variants: &[VariantLine]) -> Vec<ByteBar> {
        let Some(p) = self.plan else {
            return Vec::new();
        };
        let bar = |label: String, bytes: u64, measured: bool| ByteBar {
            size: bytes_text(bytes),
            label,
            bytes,
            measured,
        };
        let mut bars = Vec::new();
        if let Some(core) = self.output_bytes(Role::Core) {
            bars.push(bar("core".into(), core, true));
        }
        if let Some(lazy) = p.outputs.iter().find(|o| o.role == Role::Lazy) {
            let mut vs = lazy.variants.clone();
            vs.sort_by(|a, b| {
                b.with_payload
                    .cmp(&a.with_payload)
                    .then(a.name.cmp(&b.name))
            });
            for v in vs {
                // A real smoke of the variant measured its installed library: prefer that.
                let measured = variants
                    .iter()
                    .find(|x| x.name == v.name && !x.emulated)
                    .and_then(|x| x.lazy_bytes);
                let (bytes, is_measured) = match (v.measured, measured) {
                    (true, _) => (v.bytes, true),
                    (false, Some(m)) => (m, true),
                    (false, None) => (v.bytes, false),
                };
                bars.push(bar(format!("lazy {}", v.name), bytes, is_measured));
            }
        }
        let payload = self.output_bytes(Role::Payload).unwrap_or(0);
        bars.push(bar("payload".into(), payload, true));
        bars
    }

    /// Payload bytes inside the lazy library when the payload is linked statically into it.
    fn payload_static_in_lazy(&self) -> Option<String> {
        let p = self.plan?;
        if !p
            .payload
            .files
            .iter()
            .any(|f| f.form == PayloadForm::Static)
        {
            return None;
        }
        let payload = self.output_bytes(Role::Payload).unwrap_or(0);
        Some(bytes_text(p.saving.bytes.saturating_sub(payload)))
    }

    /// Measured saving when the slim library's real size is known; the plan's estimate
    /// otherwise. Only a confined payload saves anything.
    fn saving(&self, byte_bars: &[ByteBar]) -> Option<ReportSaving> {
        let p = self.plan.filter(|p| p.verdict == Verdict::Confined)?;
        let (dep, slim) = (&self.dep, &self.slim);
        let full = byte_bars.iter().find(|b| b.label == format!("lazy {dep}"));
        let slim_bar = byte_bars.iter().find(|b| b.label == format!("lazy {slim}"));
        let payload_out = self.output_bytes(Role::Payload).unwrap_or(0);
        let (bytes, how) = match (full, slim_bar) {
            (Some(f), Some(s)) if f.measured && s.measured => (
                f.bytes.saturating_sub(s.bytes) + payload_out,
                format!(
                    "measured: lazy {dep} − lazy {slim} (installed, from the smoke run) + payload output"
                ),
            ),
            _ => (p.saving.bytes, format!("plan estimate: {}", p.saving.how)),
        };
        let external_note = if p.payload.external.is_empty() {
            String::new()
        } else {
            let mut e = p.payload.external.clone();
            e.sort();
            format!(
                "; payload libraries outside the tree ({}) not counted: their packages' sizes are not in these inputs",
                e.join(", ")
            )
        };
        let tree_bytes = p.input.bytes;
        let percent = if tree_bytes > 0 {
            bytes as f64 * 100.0 / tree_bytes as f64
        } else {
            0.0
        };
        Some(ReportSaving {
            bytes,
            tree_bytes,
            percent,
            how: format!("{how}{external_note}"),
            size: bytes_text(bytes),
            tree_size: bytes_text(tree_bytes),
            percent_text: format!("{percent:.2}"),
            environment: self.environment_line(p, bytes),
        })
    }

    /// The saving against the environment the plan measured (`bytes`: the installed saving this
    /// page states, which an on-disk figure is recomputed with), or why it is not known.
    fn environment_line(&self, p: &Plan, bytes: u64) -> EnvironmentLine {
        let Some(env) = &p.saving.environment else {
            let requirement = crate::analysis::environment::requirement(p).or_else(|| {
                self.smoke
                    .and_then(|s| s.variants.iter().find_map(|v| v.torch_version()))
                    .map(|v| format!("torch=={}", super::public_version(&v)))
            });
            return EnvironmentLine {
                percent_text: None,
                figures: None,
                measure: None,
                lower_bound: false,
                how: format!(
                    "not known: the plan does not measure the environment (a plan of an installed environment measures it on disk; a plan of the wheel with --env-lock from `{}`, or report --env-lock, gives its download)",
                    crate::analysis::environment::lock_command(requirement.as_deref(), None)
                ),
            };
        };
        environment_line(env, bytes)
    }
    // ---- fatbin ----

    /// Stored device code per architecture (sorted by architecture number) and the totals.
    fn fatbin(&self) -> (Vec<FatbinBar>, Option<FatbinTotals>) {
        let Some(f) = &self.inputs.fatbin else {
            return (Vec::new(), None);
        };
        let mut by: BTreeMap<((String, u64, String), String), u64> = BTreeMap::new();
        for t in &f.doc.total.fatbin.targets {
            *by.entry((super::arch_key(&t.name), format!("{} {}", t.name, t.kind)))
                .or_default() += t.stored;
        }
        let bars = by
            .into_iter()
            .map(|((_, label), bytes)| FatbinBar {
                label,
                bytes,
                size: bytes_text(bytes),
            })
            .collect();
        let s = &f.doc.total.fatbin;
        let driver = f.doc.total.driver.minimum.clone();
        let total = FatbinTotals {
            stored: bytes_text(s.stored),
            uncompressed: bytes_text(s.uncompressed),
            driver: driver.unwrap_or_else(|| "not recorded".into()),
        };
        (bars, Some(total))
    }

    // ---- packages ----

    fn packages(&self) -> Vec<PackageLine> {
        let Some(pk) = &self.inputs.pack else {
            return Vec::new();
        };
        let mut packages: Vec<PackageLine> = pk
            .doc
            .record
            .packages
            .iter()
            .chain(pk.doc.standins.iter())
            .map(|p| PackageLine {
                file: p.file.clone(),
                role: match (&p.variant, p.standin) {
                    (_, true) => format!(
                        "stand-in (represents {}, not real bytes)",
                        crate::output::human_bytes(p.represents_bytes.unwrap_or(0))
                    ),
                    (Some(v), false) => format!("{} {}", p.role, v),
                    (None, false) => p.role.to_string(),
                },
                bytes: p.bytes,
                archive_bytes: p.archive_bytes,
                installed: bytes_text(p.bytes),
                archive: bytes_text(p.archive_bytes),
            })
            .collect();
        packages.sort();
        packages.dedup();
        packages
    }

    // ---- what is not known ----

    /// Every question the inputs leave open, in the page's order (provenance adds its own).
    fn unknown(
        &self,
        slim_smoke: SlimSmoke,
        routing: &[RoutingLine],
        backend: &[BackendLine],
    ) -> Vec<String> {
        let (dep, slim) = (&self.dep, &self.slim);
        let mut unknown = Vec::new();
        if self.plan.is_none() {
            unknown.push("Bytes saved: not known (no --plan).".into());
            unknown.push(
                "Verdict, witnesses, glue warnings and the contract: not known (no --plan).".into(),
            );
        }
        match slim_smoke {
            SlimSmoke::NoSmoke => {
                unknown.push("Ops that stop working in the slim variant: not known (no --smoke).".into());
                unknown.push("Ops slower or faster by default routing: not known (no --smoke).".into());
                unknown.push("GPU, driver and torch of a run: not known (no --smoke).".into());
            }
            SlimSmoke::NotRun => {
                unknown.push(format!("Ops that stop working in the slim variant: not known (the smoke run has no {slim} variant)."))
            }
            SlimSmoke::Emulated => unknown.push(format!(
                "Ops that stop working in the slim variant: not known — {slim} was EMULATED (cuSOLVER forced on a {dep} installation), not run as a real {slim} build."
            )),
            SlimSmoke::Real => {}
        }
        if self.smoke.is_some() && routing.is_empty() {
            unknown.push(format!(
                "Ops slower or faster by default routing: not known (no default-routing timings of two real variants; {})",
                if slim_smoke == SlimSmoke::Emulated { "an EMULATED variant is never timed" } else { "run smoke --bench on both" }
            ));
        }
        if self.smoke.is_some() && backend.is_empty() {
            unknown.push(format!("Time under {dep} vs cuSOLVER: not known (no bench of a real {dep} variant; smoke --bench)."));
        }
        if self.inputs.fatbin.is_none() {
            unknown.push("Device code per architecture: not known (no --fatbin).".into());
        }
        if self.inputs.pack.is_none() {
            unknown.push("Package (.conda) sizes: not known (no --pack).".into());
        }
        unknown
    }
}

/// The plan's environment figure as printed; an on-disk one is recomputed with the page's
/// installed saving `bytes` (a smoke run may have measured it), a download one keeps the plan's
/// compressed saving.
fn environment_line(env: &Environment, bytes: u64) -> EnvironmentLine {
    let saving = match env.source {
        EnvSource::Disk => Some(bytes),
        EnvSource::Lock | EnvSource::NotKnown => env.saving_bytes,
    };
    let (Some(total), Some(saving), EnvSource::Lock | EnvSource::Disk) =
        (env.bytes, saving, env.source)
    else {
        return EnvironmentLine {
            percent_text: None,
            figures: None,
            measure: None,
            lower_bound: false,
            how: env.how.clone(),
        };
    };
    let percent = if total > 0 {
        saving as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    let measure = match env.source {
        EnvSource::Lock => format!(
            "download sizes, compressed, from {}",
            env.path.as_deref().map_or("the lock", file_name)
        ),
        _ => "installed, on disk".to_string(),
    };
    EnvironmentLine {
        percent_text: Some(format!("{percent:.2}")),
        figures: Some(format!("{} of {}", bytes_text(saving), bytes_text(total))),
        measure: Some(measure),
        lower_bound: env.lower_bound,
        how: env.how.clone(),
    }
}

/// A byte count in the decimal megabytes the rule is stated in: `52.9 MB`.
fn decimal_mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The saving rule's outcome ([`Worth`], conda-forge 2024) and what it is weighed against: what
/// the real slim variant loses, op by op.
fn rule(
    saving: &ReportSaving,
    worth: Worth,
    lost: Option<&Lost>,
    moved: &[RoutingLine],
    failures: &[Failure],
) -> SavingRule {
    let mut losses = Vec::new();
    for l in lost.map(|l| l.default.as_slice()).unwrap_or_default() {
        losses.push(format!(
            "{} stops working under the default backend ({} case(s))",
            l.op, l.cases
        ));
    }
    // Explicit preferences, one line per backend: a user who asks for it loses these ops.
    let mut explicit: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in lost.map(|l| l.explicit.as_slice()).unwrap_or_default() {
        explicit.entry(&l.preference).or_default().push(&l.op);
    }
    for (preference, ops) in explicit {
        losses.push(format!(
            "{} op(s) fail when {preference} is asked for explicitly ({})",
            ops.len(),
            ops.join(", ")
        ));
    }
    for r in moved {
        match (r.change, &r.ratio_text) {
            (Change::Slower, Some(ratio)) => {
                losses.push(format!("{} {ratio} slower by default routing", r.item))
            }
            (Change::Failed, _) => losses.push(format!("{} fails by default routing", r.item)),
            _ => {}
        }
    }
    if !failures.is_empty() {
        losses.push(format!(
            "{} failure(s) in the smoke run (see Failures)",
            failures.len()
        ));
    }
    SavingRule {
        rule: Worth::RULE,
        outcome: worth.label(),
        saving: format!("{} = {}", saving.size, decimal_mb(saving.bytes)),
        losses,
        losses_known: lost.is_some(),
    }
}

/// The answer in one line: the proof's answer, with the saving rule's outcome where it decides
/// (a confined payload whose slim variant did not fail).
fn headline(answer: Answer, worth: Option<Worth>, saving: Option<&ReportSaving>) -> String {
    let size = saving.map(|s| decimal_mb(s.bytes)).unwrap_or_default();
    let tested = match answer {
        Answer::Yes => "and a real slim variant works",
        _ => "(no real slim variant was smoke-tested)",
    };
    match (answer, worth) {
        (Answer::Yes | Answer::YesUntested, Some(Worth::NotWorthIt)) => format!(
            "NOT WORTH IT: the payload is confined to a lazily loaded library {tested}, but a slim environment saves {size}: below 600 MB, which conda-forge (2024) found not worth a user-facing variant"
        ),
        (Answer::Yes | Answer::YesUntested, Some(Worth::GrayZone)) => format!(
            "GRAY ZONE: the payload is confined to a lazily loaded library {tested}; a slim environment saves {size}, between 600 MB and 2 GB (conda-forge 2024): weigh it against what the slim variant loses"
        ),
        (Answer::Yes, Some(Worth::WorthIt)) => format!(
            "YES: the payload is confined to a lazily loaded library, a real slim variant works, and a slim environment saves {size}: 2 GB or more, worth a variant (conda-forge 2024)"
        ),
        (Answer::YesUntested, Some(Worth::WorthIt)) => format!(
            "YES, UNTESTED: the payload is confined and a slim environment saves {size} (2 GB or more, worth a variant by conda-forge 2024), but no real slim variant was smoke-tested"
        ),
        _ => answer.headline().to_string(),
    }
}

fn variant_line(v: &VariantReport) -> VariantLine {
    let lazy_bytes = v
        .lazy_library
        .as_ref()
        .filter(|_| !v.is_emulated())
        .map(|l| l.size);
    let c = &v.summary;
    let mut checks = v.checks.clone();
    checks.sort_by_key(|c| c.name.to_string());
    VariantLine {
        name: v.name.clone(),
        emulated: v.is_emulated(),
        note: v.note.clone(),
        torch: v.torch_version(),
        lazy_bytes,
        lazy_size: lazy_bytes.map(bytes_text),
        lazy_magma_note: v
            .lazy_library
            .as_ref()
            .map(|l| l.has_magma)
            .map(|m| if m { "has magma" } else { "no magma" }),
        counts: format!(
            "{} cases: {} pass, {} expected-fail, {} excluded, {} fail, {} timeout",
            c.cases, c.pass, c.expected_fail, c.excluded, c.fail, c.timeout
        ),
        check_lines: checks
            .iter()
            .map(|k| VariantLine::check_line(&k.name.to_string(), k.status))
            .collect(),
    }
}

// ---- the proof ----

fn proof(p: &Plan) -> Proof {
    let mut core_state_warnings = Vec::new();
    let mut other_warnings = Vec::new();
    for w in &p.warnings {
        let line = (w.file.clone(), format!("{} — {}", w.what, w.consequence));
        match w.kind() {
            WarningKind::CoreState => core_state_warnings.push(line),
            _ => other_warnings.push(line),
        }
    }
    // Sorted as (file, text) pairs, then shown as one line each.
    let lines = |mut v: Vec<(String, String)>| -> Vec<String> {
        v.sort();
        v.into_iter().map(|(f, w)| format!("{f}: {w}")).collect()
    };
    // Every lazy library's edges: with several (`--lazy` repeated or a glob) the plan lists them
    // in `lazy_libraries` and `lazy_library` is absent.
    let mut lazy_edges: Vec<String> = p
        .all_lazy()
        .into_iter()
        .flat_map(|l| &l.loaded_by)
        .map(|s| format!("{} → {} ({})", s.from, s.to, s.how))
        .collect();
    lazy_edges.sort();
    let mut witnesses: Vec<String> = p.witnesses.iter().map(|w| w.summary.clone()).collect();
    witnesses.sort();
    Proof {
        verdict: format!("{:?}", p.verdict).to_uppercase(),
        reasons: p.reasons.clone(),
        witnesses,
        lazy_edges,
        core_state_warnings: lines(core_state_warnings),
        other_warnings: lines(other_warnings),
        contract: contract(p),
    }
}

/// The loader contract of the lazy library, in one sentence.
fn contract(p: &Plan) -> String {
    let c = &p.contract;
    let imports: usize = c.imports.iter().map(|g| g.count).sum();
    let list = |mut v: Vec<String>| {
        v.sort();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "{} export(s); {} import(s) from {} provider(s); loader lookups: {}; exports the loader requires: {}",
        c.exports,
        imports,
        c.imports.len(),
        list(c.loader_lookups.clone()),
        list(c.required_exports.clone())
    )
}

// ---- provenance ----

/// One row of the provenance table. `deterministic`: the document is byte-identical for the
/// same input, so it has a date only when SOURCE_DATE_EPOCH was set; a smoke run records its
/// own, so one without predates the field.
fn provenance_row(
    input: &'static str,
    file: &str,
    schema: (&str, u32),
    tool: Option<&Tool>,
    stamp: &crate::provenance::Stamp,
    deterministic: bool,
) -> Provenance {
    Provenance {
        input,
        file: file.to_string(),
        schema: format!("{} v{}", schema.0, schema.1),
        tool: tool.map(|t| match &t.commit {
            Some(c) => format!(
                "{} {} (commit {})",
                t.name,
                t.version,
                c.get(..12).unwrap_or(c)
            ),
            None => format!("{} {}", t.name, t.version),
        }),
        command: if stamp.command.is_empty() {
            None
        } else {
            Some(
                stamp
                    .command
                    .iter()
                    .map(|a| shell_quote(a))
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        },
        date: stamp
            .date
            .clone()
            .unwrap_or_else(|| if deterministic { NO_DATE } else { NOT_RECORDED }.to_string()),
    }
}

/// Where each input came from; an input not given is said to be not known.
fn provenance(inputs: &Inputs, unknown: &mut Vec<String>) -> Vec<Provenance> {
    let mut out = Vec::new();
    let mut not_given =
        |what: &str| unknown.push(format!("Provenance of the {what}: not known (not given)."));
    match &inputs.plan {
        Some(p) => {
            let d = &p.doc;
            let schema = (d.schema.as_str(), d.schema_version);
            out.push(provenance_row(
                "plan",
                &p.file,
                schema,
                Some(&d.tool),
                &d.stamp,
                true,
            ))
        }
        None => not_given("plan"),
    }
    match &inputs.smoke {
        Some(s) => {
            let d = &s.doc;
            let schema = (d.schema.as_str(), d.schema_version);
            out.push(provenance_row(
                "smoke",
                &s.file,
                schema,
                Some(&d.tool),
                &crate::provenance::Stamp {
                    command: d.command.clone(),
                    date: d.date.clone(),
                },
                false,
            ))
        }
        None => not_given("smoke run"),
    }
    match &inputs.fatbin {
        Some(f) => {
            let d = &f.doc;
            let schema = (d.schema.as_str(), d.schema_version);
            out.push(provenance_row(
                "fatbin",
                &f.file,
                schema,
                Some(&d.tool),
                &d.stamp,
                true,
            ))
        }
        None => not_given("fatbin scan"),
    }
    match &inputs.pack {
        Some(p) => {
            let d = &p.doc;
            let schema = (d.schema.as_str(), d.schema_version);
            out.push(provenance_row(
                "pack",
                &p.file,
                schema,
                Some(&d.tool),
                &d.stamp,
                true,
            ))
        }
        None => not_given("pack report"),
    }
    out
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}
