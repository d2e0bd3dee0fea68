//! `splitpkg smoke`: run each variant on a CUDA machine and check its linalg ops, the laziness of
//! the linalg library and `has_magma`.
//!
//! ```text
//! device probe (cudarc, dynamic) → per variant: resolve PATH → probe (laziness, has_magma)
//!   → lazy library facts → battery (one case per request, own timeout) → judge vs table
//!   → bench (magma variant) → report (table / JSON)
//! ```
//!
//! The battery (`battery.py`) only runs cases and reports raw facts; planning ([`cases`]),
//! expectations ([`expect`]) and judging ([`eval`]) live here, so a recorded run can be judged
//! again without a GPU (`--replay`).

pub mod cases;
pub mod device;
pub mod document;
pub mod eval;
pub mod expect;
pub mod prefetch;
pub mod runner;
pub mod text;
pub mod variant;

use crate::error::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::analysis::payload::PayloadSpec;
use crate::error::{Error, Result};
pub use crate::provenance::Tool;
use cases::{Case, Filter, Mode, Preference};
use device::DeviceInfo;
use eval::{CheckName, CheckStatus, Raw, RawOutcome};
use expect::{Expectation, Tables};
use variant::{LazyFacts, VariantArg};

// The document keeps its paths (`smoke::SmokeReport`, `smoke::load_report`, …).
pub use document::{
    BenchCell, BenchReport, BenchRow, CaseReport, Counts, PlannedCase, RoutingRow, RunOptions,
    SCHEMA, SCHEMA_VERSION, SmokeReport, SmokeVerdict, VariantPlan, VariantReport, load_report,
    parse_report,
};

/// The battery script, shipped in the binary and written to a temporary directory at run time.
pub const BATTERY: &str = include_str!("battery.py");
/// Everything `splitpkg smoke` was asked to do.
pub struct SmokeOptions {
    /// The variants to run (`--variant NAME=PATH`).
    pub variants: Vec<VariantArg>,
    /// Variant names to run as emulations (table `<name>-emulated`).
    pub emulate: Vec<String>,
    /// `--python`: the Python for a variant that is a bare torch directory (`python3` when None);
    /// an environment prefix runs its own.
    pub python: Option<String>,
    /// The expected-outcome tables in force (built-in and `--expect`).
    pub tables: Tables,
    /// Whether to time the bench items too (`--bench`).
    pub bench: bool,
    /// How many times each bench item is timed.
    pub bench_reps: u32,
    /// How long one case may run before its worker is killed.
    pub case_timeout: Duration,
    /// Wall-time budget of the whole run: cases not started by then are reported as not run.
    pub deadline: Option<Duration>,
    /// The seed of the cases' random inputs; None: a random one, recorded in the report.
    pub seed: Option<u64>,
    /// Which cases to run (`--only`, `--skip`).
    pub filter: Filter,
    /// The lazy library's file name (`libtorch_cuda_linalg.so`).
    pub lazy: String,
    /// The payload the identity and laziness checks look for.
    pub spec: PayloadSpec,
    /// Whether to log progress (`smoke: …` lines at info level) as the run goes.
    pub progress: bool,
    /// The command line of the run, for the report.
    pub command: Vec<String>,
}

/// Which table a variant is judged by.
pub fn table_name(name: &str, emulated: bool) -> String {
    if emulated {
        format!("{name}-emulated")
    } else {
        name.to_string()
    }
}

/// Plan one variant: mode, table (must exist) and the cases with their expectations.
/// `cuda` is torch.version.cuda when known (it decides `cuda_below` rules).
pub fn plan_variant(
    name: &str,
    emulated: bool,
    tables: &Tables,
    filter: &Filter,
    cuda: Option<&str>,
) -> Result<VariantPlan> {
    let tname = table_name(name, emulated);
    let Some(table) = tables.get(&tname) else {
        let hint = if emulated {
            format!("--emulate works for variants with a table named '{tname}' (built in: nomagma)")
        } else {
            "use magma or nomagma, or pass --expect FILE with a table of that name".to_string()
        };
        return Err(Error::Usage(format!(
            "no expected-outcome table named '{tname}' for variant '{name}': {hint}"
        )));
    };
    let mode = Mode::of(emulated);
    let cases = cases::plan(mode, filter)
        .into_iter()
        .map(|c| {
            let expect = expect::expectation(&tname, table, &c, cuda);
            PlannedCase { case: c, expect }
        })
        .collect();
    Ok(VariantPlan {
        name: name.to_string(),
        mode,
        table: tname,
        cases,
    })
}

/// The default-routing comparison from the benches of real variants (empty with fewer than two).
pub fn default_routing(benches: &[BenchReport], dep: &str) -> Vec<RoutingRow> {
    let real: Vec<&BenchReport> = benches.iter().filter(|b| !b.emulated).collect();
    if real.len() < 2 {
        return Vec::new();
    }
    let slim = crate::analysis::payload::slim_variant(dep);
    let mut rows = Vec::new();
    for r in &real[0].rows {
        let mut median_ms = BTreeMap::new();
        for b in &real {
            let cell = b
                .rows
                .iter()
                .find(|x| x.op == r.op && x.size == r.size && x.dtype == r.dtype);
            median_ms.insert(
                b.variant.clone(),
                cell.and_then(|c| c.results.get(Preference::Default.as_str()))
                    .and_then(|c| c.median_ms),
            );
        }
        let ratio = match (
            median_ms.get(&slim).copied().flatten(),
            median_ms.get(dep).copied().flatten(),
        ) {
            (Some(s), Some(f)) if f > 0.0 => Some(s / f),
            _ => None,
        };
        rows.push(RoutingRow {
            op: r.op.clone(),
            size: r.size.clone(),
            dtype: r.dtype.clone(),
            median_ms,
            slim_over_full: ratio,
        });
    }
    rows
}

const EMULATED_NOTE: &str = "EMULATED: the cuSOLVER preference is forced on a MAGMA installation (default-preference cases run as cusolver; the magma preference is not run; has_magma not applicable). Shows a cuSOLVER path exists for every case; it is not a real nomagma pass.";

fn progress(on: bool, msg: impl AsRef<str>) {
    if on {
        tracing::info!("smoke: {}", msg.as_ref());
    }
}

/// The thread counts for CPU math libraries (OpenMP, MKL, OpenBLAS) when `workers` Python workers
/// run at once: an equal share of the cores each. Nothing when one runs, or when the user set
/// `OMP_NUM_THREADS` (theirs is kept).
fn cpu_share(workers: usize) -> Vec<(String, String)> {
    if workers < 2 || std::env::var_os("OMP_NUM_THREADS").is_some() {
        return Vec::new();
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = (cores / workers).max(1).to_string();
    ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"]
        .iter()
        .map(|k| (k.to_string(), n.clone()))
        .collect()
}

fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    cases::case_seed(t ^ ((std::process::id() as u64) << 32), "run")
}

/// Judge one case of a variant (expectation, tolerance, status).
fn judge_case(case: Case, seed: u64, expect: Expectation, raw: Raw, mode: Mode) -> CaseReport {
    let tolerance = eval::tolerance(&case.op, &case.dtype);
    let (status, reason) = eval::judge(&expect, &raw, tolerance, mode.base_preference());
    CaseReport {
        case,
        seed,
        expect,
        tolerance,
        raw,
        status,
        reason,
    }
}

/// Checks and counts of a variant from its recorded facts. The device-code check is kept as
/// recorded (it needs the machine's files).
fn finish_variant(v: &mut VariantReport, lazy_name: &str, dep: &str) {
    let device = v
        .checks
        .iter()
        .find(|c| c.name == CheckName::DeviceCode)
        .cloned()
        .unwrap_or_else(|| eval::device_code_check_report(None));
    let presence = v.lazy_library.as_ref().map(LazyFacts::presence);
    v.checks = vec![
        eval::laziness_check(v.probe.as_ref(), lazy_name),
        eval::has_magma_check(
            v.probe.as_ref(),
            v.lazy_library.as_ref().map(|l| l.has_magma),
            lazy_name,
            v.emulated,
        ),
        device,
        eval::identity_check(
            &v.name,
            dep,
            v.emulated,
            presence.as_ref(),
            v.lazy_library
                .as_ref()
                .and_then(|l| l.contract_failures.as_deref()),
            lazy_name,
        ),
    ];
    let mut c = Counts::default();
    for case in &v.cases {
        c.add_case(case.status);
    }
    c.checks_failed = v
        .checks
        .iter()
        .filter(|k| k.status == CheckStatus::Fail)
        .count();
    c.stale_flags = v
        .checks
        .iter()
        .filter(|k| k.status == CheckStatus::Stale)
        .count();
    c.ok = c.fail == 0 && c.timeout == 0 && c.checks_failed == 0 && c.cases > 0;
    v.summary = c;
}

/// Timings (`--bench`) inform; they do not pass or fail, so only the variants count.
fn total(variants: &[VariantReport]) -> Counts {
    let mut t = Counts {
        ok: !variants.is_empty(),
        ..Default::default()
    };
    for v in variants {
        let s = &v.summary;
        t.cases += s.cases;
        t.pass += s.pass;
        t.fail += s.fail;
        t.expected_fail += s.expected_fail;
        t.timeout += s.timeout;
        t.excluded += s.excluded;
        t.checks_failed += s.checks_failed;
        t.stale_flags += s.stale_flags;
        t.ok &= s.ok;
    }
    t
}

/// Run the whole smoke test. The device must have been probed (the CLI does that first, so a
/// machine without CUDA stops before anything else).
pub fn run(opts: &SmokeOptions, device: DeviceInfo) -> Result<SmokeReport> {
    let date = crate::provenance::run_date();
    check_options(opts)?;
    // Plan (and so check the tables) and resolve every variant before running anything.
    let resolved = resolve_variants(opts)?;
    let prefetch = prefetch::start(
        resolved
            .iter()
            .map(|(_, _, r)| r.torch_dir.clone())
            .collect(),
        opts.spec.clone(),
    );
    let seed = opts.seed.unwrap_or_else(random_seed);
    let deadline = opts.deadline.map(|d| Instant::now() + d);
    let scratch = SmokeScratch::new()?;
    let script = scratch.path.join("battery.py");
    std::fs::write(&script, BATTERY).at(&script)?;
    progress(
        opts.progress,
        format!(
            "device {} ({}, driver CUDA {}), seed {seed}",
            device.name, device.sm, device.driver_cuda
        ),
    );
    let ctx = RunContext {
        opts,
        device: &device,
        seed,
        deadline,
        scratch: &scratch.path,
        script: &script,
        threads: cpu_share(resolved.len()),
    };
    // The benches' workers start while the batteries run (the start-up is not timed; each then
    // waits, idle, until its bench): about 3 s each off the run (issue 28).
    let bench_specs = ctx.bench_specs(&resolved)?;
    let ahead: Vec<std::thread::JoinHandle<runner::Started>> = bench_specs
        .iter()
        .map(|(_, spec)| {
            let spec = spec.clone();
            std::thread::spawn(move || {
                runner::start_ahead(
                    &spec,
                    Preference::Default.as_str(),
                    Duration::from_secs(300),
                )
            })
        })
        .collect();
    let mut reports = ctx.run_variants(&resolved)?;
    if let Ok(p) = prefetch.join() {
        progress(
            opts.progress,
            format!(
                "read ahead: {} files of the variants' load graphs, {:.1} GB, asked of the page cache in {:.1} s",
                p.files,
                p.bytes as f64 / 1e9,
                p.took.as_secs_f64()
            ),
        );
    }
    check_contracts(opts, &resolved, &mut reports);
    // Every real variant is timed the same way, so each variant's default routing can be compared:
    // that, not a forced preference, is what its users get.
    let bench: Vec<BenchReport> = bench_specs
        .iter()
        .zip(ahead)
        .map(|((name, spec), h)| {
            let started = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            ctx.run_bench(name, spec, started)
        })
        .collect();
    Ok(smoke_report(opts, date, seed, device, reports, bench))
}

/// The combinations of `--variant`, `--emulate` and `--bench` that cannot run.
fn check_options(opts: &SmokeOptions) -> Result<()> {
    for e in &opts.emulate {
        if !opts.variants.iter().any(|v| &v.name == e) {
            return Err(Error::Usage(format!(
                "--emulate {e}: no --variant named {e}"
            )));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for v in &opts.variants {
        if !seen.insert(v.name.as_str()) {
            return Err(Error::Usage(format!(
                "--variant {}: the name is given twice",
                v.name
            )));
        }
    }
    if opts.bench
        && !opts
            .variants
            .iter()
            .any(|v| !opts.emulate.contains(&v.name))
    {
        return Err(Error::Usage("--bench times each real variant under every preference; an emulated variant has no timings of its own: add a --variant that is not emulated".into()));
    }
    Ok(())
}

/// A variant to run: as given, whether it is emulated, and where its torch is.
type ResolvedVariant<'a> = (&'a VariantArg, bool, variant::Resolved);

fn resolve_variants(opts: &SmokeOptions) -> Result<Vec<ResolvedVariant<'_>>> {
    let mut resolved = Vec::new();
    for v in &opts.variants {
        let emulated = opts.emulate.contains(&v.name);
        plan_variant(&v.name, emulated, &opts.tables, &opts.filter, None)?;
        let r = variant::resolve(v, opts.python.as_deref())?;
        resolved.push((v, emulated, r));
    }
    Ok(resolved)
}

/// The report of a run: its options as recorded, the variants, the benches and the verdict.
fn smoke_report(
    opts: &SmokeOptions,
    date: Option<String>,
    seed: u64,
    device: DeviceInfo,
    variants: Vec<VariantReport>,
    bench: Vec<BenchReport>,
) -> SmokeReport {
    let default_routing = default_routing(&bench, &opts.spec.name);
    let summary = total(&variants);
    let result = SmokeVerdict::of(&summary);
    SmokeReport {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        command: opts.command.clone(),
        date,
        seed,
        options: RunOptions {
            case_timeout_s: opts.case_timeout.as_secs_f64(),
            deadline_s: opts.deadline.map(|d| d.as_secs_f64()),
            bench: opts.bench,
            bench_reps: opts.bench_reps,
            lazy: opts.lazy.clone(),
            dep: opts.spec.name.clone(),
            only: opts.filter.only.clone(),
            skip: opts.filter.skip.clone(),
            emulate: opts.emulate.clone(),
            expect_file: None,
            replayed_from: None,
        },
        tolerances: eval::tolerance_table(),
        device: Some(device),
        variants,
        bench,
        default_routing,
        summary,
        result,
    }
}

/// Every variant's lazy library against the contract of the run's real MAGMA build (the first
/// variant, not emulated, whose library carries the payload), derived from that library's
/// directory as `emit` derives it from a tree: the identity check then fails a variant that
/// carries no MAGMA but does not provide, register or export what the stock file does. Without
/// such a variant nothing is checked (`contract_failures` stays `None`).
fn check_contracts(
    opts: &SmokeOptions,
    resolved: &[(&VariantArg, bool, variant::Resolved)],
    reports: &mut [VariantReport],
) {
    let stock = reports
        .iter()
        .zip(resolved)
        .find(|(v, (_, emulated, _))| {
            !emulated && v.lazy_library.as_ref().is_some_and(|l| l.has_magma)
        })
        .and_then(|(v, _)| v.lazy_library.as_ref().map(|l| PathBuf::from(&l.path)));
    let Some(stock) = stock else { return };
    let Some(dir) = stock.parent() else { return };
    let mut req = crate::analysis::pipeline::Request::new(
        dir,
        &[opts.lazy.as_str()],
        &[opts.spec.name.as_str()],
    );
    req.spec = opts.spec.clone();
    let contract = crate::analysis::pipeline::plan_tree(&req, &crate::progress::Progress::hidden())
        .and_then(|p| {
            crate::analysis::contract::ContractFile::for_library(&p.plan, &opts.lazy)
                .map_err(Error::internal)
        });
    let contract = match contract {
        Ok(c) => c,
        Err(e) => {
            progress(opts.progress, format!("variant contract not checked: {e}"));
            return;
        }
    };
    for (v, (_, emulated, _)) in reports.iter_mut().zip(resolved) {
        let Some(lazy) = v.lazy_library.as_mut().filter(|_| !emulated) else {
            continue;
        };
        lazy.contract_failures =
            match crate::recipe::verify::check_contract(Path::new(&lazy.path), &contract) {
                Ok(checks) => Some(
                    checks
                        .into_iter()
                        .filter(|c| !c.pass)
                        .map(|c| format!("{}: {}", c.name, c.detail))
                        .collect(),
                ),
                Err(e) => Some(vec![format!("unreadable: {e}")]),
            };
        finish_variant(v, &opts.lazy, &opts.spec.name);
    }
}

/// A scratch directory removed on drop (kept with SPLITPKG_SMOKE_KEEP=1 for debugging).
struct SmokeScratch {
    path: PathBuf,
}

impl SmokeScratch {
    /// A new directory in the shared temporary directory, made by this call (never one that
    /// exists: another user could have planted it, or a link in its place) with an unpredictable
    /// name, readable by this user only; the workers' files are created in it.
    fn new() -> Result<SmokeScratch> {
        use std::os::unix::fs::DirBuilderExt;
        for _ in 0..16 {
            let path = std::env::temp_dir().join(format!(
                "splitpkg-smoke-{}-{:016x}",
                std::process::id(),
                crate::output::atomic::random_u64()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(SmokeScratch { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Err(Error::bad(
            std::env::temp_dir().display(),
            "16 scratch directory names were all taken: refusing to run there",
        ))
    }
}

impl Drop for SmokeScratch {
    fn drop(&mut self) {
        if std::env::var_os("SPLITPKG_SMOKE_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            tracing::info!("smoke: scratch files kept in {}", self.path.display());
        }
    }
}

/// What every variant's run and bench of one smoke run share.
struct RunContext<'a> {
    opts: &'a SmokeOptions,
    device: &'a DeviceInfo,
    seed: u64,
    /// `--deadline` from the start of the run: cases not started by then are not run.
    deadline: Option<Instant>,
    scratch: &'a Path,
    /// The battery script, written into the scratch directory.
    script: &'a Path,
    /// The CPU math libraries' threads for the workers that share the machine ([`cpu_share`]).
    threads: Vec<(String, String)>,
}

/// What a variant's probe and its lazy library say, before its cases run.
struct VariantFacts {
    probe: Option<Value>,
    probe_error: Option<String>,
    /// `torch.version.cuda`, when the probe answered.
    cuda: Option<String>,
    lazy_library: Option<LazyFacts>,
    lazy_error: Option<String>,
    device_check: Option<eval::DeviceCheck>,
}

impl RunContext<'_> {
    /// The bench workers' specs, one per real variant (none without `--bench`).
    fn bench_specs<'v>(
        &self,
        resolved: &'v [ResolvedVariant],
    ) -> Result<Vec<(&'v str, runner::PySpec)>> {
        if !self.opts.bench {
            return Ok(Vec::new());
        }
        resolved
            .iter()
            .filter(|(_, emulated, _)| !emulated)
            .map(|(arg, emulated, r)| {
                let spec = variant_spec(self.scratch, self.script, &arg.name, *emulated, r)?;
                Ok((arg.name.as_str(), bench_spec(&spec)?))
            })
            .collect()
    }

    /// The variants' batteries run at once, one worker process each on the same GPU: a case is
    /// judged on its own results, not on time, so the runs do not disturb each other's verdicts,
    /// and the smoke of two variants takes about as long as one (issue 28). The benches stay one
    /// at a time, alone on the GPU.
    /// Each worker's CPU references then get their share of the cores: two MKL/OpenMP pools of
    /// all cores each, busy-waiting on one machine, made every case of both runs 10 to 50 times
    /// slower on the H200 machine (16 cores).
    fn run_variants(&self, resolved: &[ResolvedVariant]) -> Result<Vec<VariantReport>> {
        let ran: Vec<Result<VariantReport>> = std::thread::scope(|s| {
            let handles: Vec<_> = resolved
                .iter()
                .map(|(arg, emulated, r)| s.spawn(move || self.run_variant(arg, *emulated, r)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        ran.into_iter().collect()
    }

    fn run_variant(
        &self,
        arg: &VariantArg,
        emulated: bool,
        r: &variant::Resolved,
    ) -> Result<VariantReport> {
        let opts = self.opts;
        let name = &arg.name;
        let spec = variant_spec(self.scratch, self.script, name, emulated, r)?;
        let started = Instant::now();
        progress(
            opts.progress,
            format!(
                "[{name}] {} via {}{}",
                r.torch_dir.display(),
                r.python,
                if emulated {
                    " (EMULATED nomagma: cuSOLVER forced)"
                } else {
                    ""
                }
            ),
        );
        // The probe and the cases share the machine with the other variants' (see `cpu_share`);
        // the bench, alone on it later, runs with the environment as given.
        let shared = runner::PySpec {
            env: [&spec.env[..], &self.threads].concat(),
            ..spec.clone()
        };
        let (first, facts) = self.probe(&shared, emulated, r);
        let plan = plan_variant(
            name,
            emulated,
            &opts.tables,
            &opts.filter,
            facts.cuda.as_deref(),
        )?;
        let cases = self.run_cases(name, &plan, first, &shared);
        let mut report = VariantReport {
            name: name.clone(),
            path: arg.path.display().to_string(),
            mode: plan.mode,
            emulated,
            note: emulated.then(|| EMULATED_NOTE.to_string()),
            table: plan.table.clone(),
            table_origin: opts
                .tables
                .origin
                .get(&plan.table)
                .cloned()
                .unwrap_or_default(),
            python: r.python.clone(),
            layout: Some(r.layout),
            torch_dir: Some(r.torch_dir.display().to_string()),
            probe: facts.probe,
            probe_error: facts.probe_error,
            lazy_library: facts.lazy_library,
            lazy_error: facts.lazy_error,
            checks: vec![eval::device_code_check_report(facts.device_check)],
            cases,
            summary: Counts::default(),
        };
        finish_variant(&mut report, &opts.lazy, &opts.spec.name);
        let s = &report.summary;
        progress(
            opts.progress,
            format!(
                "[{name}] done in {:.0} s: {s}",
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(report)
    }

    /// Probe the variant (laziness, versions, has_magma) and read its lazy library. The cases'
    /// worker starts while the probe runs: each start-up (Python, `import torch`, the CUDA
    /// context) takes about 4 s with the other variant's beside it, as long as the cases.
    fn probe(
        &self,
        shared: &runner::PySpec,
        emulated: bool,
        r: &variant::Resolved,
    ) -> (runner::Started, VariantFacts) {
        let opts = self.opts;
        let (first, probed) = std::thread::scope(|s| {
            let base = Mode::of(emulated).base_preference().as_str();
            let first = s.spawn(|| runner::start_ahead(shared, base, Duration::from_secs(300)));
            let probed = runner::run_probe(shared, &opts.lazy, Duration::from_secs(300));
            (
                first
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
                probed,
            )
        });
        let (probe, probe_error) = match probed {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let cuda = probe
            .as_ref()
            .and_then(|p| p.get("cuda_version"))
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let mapped = probe
            .as_ref()
            .and_then(|p| p.get("mapped_after_linalg"))
            .and_then(|v| v.as_str());
        let (lazy_library, lazy_error) = match variant::locate_lazy(r, mapped, &opts.lazy) {
            Some(path) => match variant::lazy_facts(&path, &opts.spec) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e.to_string())),
            },
            None => (
                None,
                Some(format!(
                    "{} not found next to torch ({})",
                    opts.lazy,
                    r.torch_dir.display()
                )),
            ),
        };
        let device_check = lazy_library.as_ref().and_then(|l| {
            let dir = Path::new(&l.path).parent()?.to_path_buf();
            let site = r.torch_dir.parent().map(Path::to_path_buf);
            let own = variant::own_libraries(&r.torch_dir, Path::new(&l.path));
            eval::device_code_check(
                &variant::variant_libraries(&dir, site.as_deref()),
                Some(&own),
                &self.device.sm,
            )
        });
        let facts = VariantFacts {
            probe,
            probe_error,
            cuda,
            lazy_library,
            lazy_error,
            device_check,
        };
        (first, facts)
    }

    /// Run the planned cases on the worker started ahead (`first`), judging each as it comes
    /// and reporting each op's tally when its last case is in.
    fn run_cases(
        &self,
        name: &str,
        plan: &VariantPlan,
        first: runner::Started,
        shared: &runner::PySpec,
    ) -> Vec<CaseReport> {
        let opts = self.opts;
        let jobs = case_jobs(plan, self.seed);
        let limits = runner::Limits {
            case_timeout: opts.case_timeout,
            ready_timeout: Duration::from_secs(300),
            timeouts_per_op: 2,
            deadline: self.deadline,
        };
        let mut judged: Vec<CaseReport> = Vec::with_capacity(jobs.len());
        let mut op_started = Instant::now();
        let n = plan.cases.len();
        let raws_done = runner::run_jobs_on(
            first,
            shared,
            plan.mode.base_preference().as_str(),
            &jobs,
            &limits,
            |i, raw| {
                let PlannedCase { case, expect } = plan.cases[i].clone();
                let seed = cases::case_seed(self.seed, &case.id);
                let report = judge_case(case, seed, expect, raw.clone(), plan.mode);
                if !report.status.ok() {
                    progress(
                        opts.progress,
                        format!(
                            "[{name}] {} {}: {}",
                            report.status.label(),
                            report.case.id,
                            report.reason
                        ),
                    );
                }
                let op = report.case.op.clone();
                if i == 0 || plan.cases[i - 1].case.op != op {
                    op_started = Instant::now();
                }
                let last_of_op = i + 1 == n || plan.cases[i + 1].case.op != op;
                judged.push(report);
                if last_of_op {
                    let of_op: Vec<&CaseReport> =
                        judged.iter().filter(|c| c.case.op == op).collect();
                    let met = of_op.iter().filter(|c| c.status.ok()).count();
                    progress(
                        opts.progress,
                        format!(
                            "[{name}] {op:<22} {:>3} cases, {met:>3} as expected ({:.1} s) [{}/{n}]",
                            of_op.len(),
                            op_started.elapsed().as_secs_f64(),
                            i + 1
                        ),
                    );
                }
            },
        );
        debug_assert_eq!(raws_done.len(), judged.len());
        judged
    }
}

/// The worker's jobs for a variant's planned cases, each with its own seed.
fn case_jobs(plan: &VariantPlan, seed: u64) -> Vec<runner::WorkerJob> {
    plan.cases
        .iter()
        .map(|pc| {
            let c = &pc.case;
            let mut payload = serde_json::to_value(c).expect("case serialises");
            payload["seed"] = json!(cases::case_seed(seed, &c.id));
            payload["kind"] = json!("check");
            runner::WorkerJob {
                id: c.id.clone(),
                op: c.op.clone(),
                payload,
            }
        })
        .collect()
}

/// How a variant's workers are started: its Python, `PYTHONPATH` for a bare torch directory,
/// cuSOLVER forced when emulating, and its scratch directory.
fn variant_spec(
    scratch: &Path,
    script: &Path,
    name: &str,
    emulated: bool,
    r: &variant::Resolved,
) -> Result<runner::PySpec> {
    let workdir = scratch.join(name);
    std::fs::create_dir_all(&workdir).at(&workdir)?;
    let mut env = variant::pythonpath_env(r);
    if emulated {
        env.push(("TORCH_LINALG_PREFER_CUSOLVER".into(), "1".into()));
    }
    Ok(runner::PySpec {
        python: r.python.clone(),
        script: script.to_path_buf(),
        env,
        workdir,
    })
}

/// The bench's worker: the variant's, with its own scratch directory (it starts while the
/// variant's cases run, so their files must not meet).
fn bench_spec(spec: &runner::PySpec) -> Result<runner::PySpec> {
    let workdir = spec.workdir.join("bench");
    std::fs::create_dir_all(&workdir).at(&workdir)?;
    Ok(runner::PySpec {
        workdir,
        ..spec.clone()
    })
}

impl RunContext<'_> {
    /// Time every bench item under every preference on one real variant, alone on the GPU.
    fn run_bench(
        &self,
        variant: &str,
        spec: &runner::PySpec,
        started: runner::Started,
    ) -> BenchReport {
        let opts = self.opts;
        let items = cases::bench_items();
        let jobs = bench_jobs(&items, opts.bench_reps, self.seed);
        let limits = runner::Limits {
            case_timeout: opts.case_timeout.max(Duration::from_secs(180)),
            ready_timeout: Duration::from_secs(300),
            timeouts_per_op: 1,
            deadline: self.deadline,
        };
        progress(
            opts.progress,
            format!(
                "[bench {variant}] {} timings (median of {}; of 3 when 3 calls take {} ms)",
                jobs.len(),
                opts.bench_reps,
                BENCH_BUDGET_MS
            ),
        );
        let mut answers: Vec<Option<Value>> = Vec::new();
        let base = Preference::Default.as_str();
        let raws = runner::run_jobs_on(started, spec, base, &jobs, &limits, |i, raw| {
            answers.push(raw.answer.clone());
            let ms = raw
                .answer
                .as_ref()
                .and_then(|a| a.get("median_ms"))
                .and_then(|v| v.as_f64());
            progress(
                opts.progress,
                format!(
                    "[bench {variant}] {:<48} {}",
                    jobs[i].id,
                    ms.map(|m| format!("{m:.3} ms"))
                        .unwrap_or_else(|| eval_brief(raw))
                ),
            );
        });
        // The jobs are item-major: one per preference for each item.
        let per_item = Preference::ALL.len();
        let rows = items
            .iter()
            .enumerate()
            .map(|(k, it)| {
                let at = k * per_item..(k + 1) * per_item;
                bench_row(it, &raws[at.clone()], &answers[at])
            })
            .collect();
        BenchReport {
            variant: variant.into(),
            emulated: false,
            reps: opts.bench_reps,
            method: format!(
                "one warm-up call, then the median of {} calls timed with CUDA events (stopping at 3, 5, … calls once they add up to {} ms), per preference, each item in the worker under its own timeout",
                opts.bench_reps, BENCH_BUDGET_MS
            ),
            rows,
        }
    }
}

/// Timed calls of a bench item stop after the third (at an odd count) once they add up to this:
/// the slow MAGMA solvers (1.6 s a call on the H200) need no five-call median, and timing them
/// five times was 7 s of a one-minute smoke (issue 28).
const BENCH_BUDGET_MS: u32 = 2000;

/// The bench's jobs: each item under each preference, item-major.
fn bench_jobs(items: &[cases::BenchItem], reps: u32, seed: u64) -> Vec<runner::WorkerJob> {
    let mut jobs = Vec::new();
    for it in items {
        for pref in Preference::ALL.map(Preference::as_str) {
            let id = format!("bench/{}/{}/{}/{pref}", it.op, it.size, it.dtype);
            let payload = json!({
                "kind": "bench", "id": id, "op": it.op, "params": (it.params)(), "dtype": it.dtype,
                "preference": pref, "applied_preference": pref, "reps": reps,
                "budget_ms": BENCH_BUDGET_MS,
                "seed": cases::case_seed(seed, &id),
            });
            jobs.push(runner::WorkerJob {
                id,
                op: format!("bench-{}", it.op),
                payload,
            });
        }
    }
    jobs
}

/// One bench item's row from its raw results and the worker's answers, one per preference (in
/// the order of [`Preference::ALL`]).
fn bench_row(it: &cases::BenchItem, raws: &[Raw], answers: &[Option<Value>]) -> BenchRow {
    let mut results = BTreeMap::new();
    for ((pref, raw), ans) in Preference::ALL.iter().zip(raws).zip(answers) {
        let ans = ans.as_ref();
        let median = ans
            .and_then(|a| a.get("median_ms"))
            .and_then(|v| v.as_f64())
            .filter(|_| raw.outcome == RawOutcome::Ok);
        let times = ans
            .and_then(|a| a.get("times_ms"))
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default();
        let error = (raw.outcome != RawOutcome::Ok).then(|| eval_brief(raw));
        results.insert(
            pref.as_str().to_string(),
            BenchCell {
                outcome: raw.outcome,
                median_ms: median,
                times_ms: times,
                error,
            },
        );
    }
    let median = |p: Preference| results.get(p.as_str()).and_then(|c| c.median_ms);
    let ratio = match (median(Preference::Magma), median(Preference::Cusolver)) {
        (Some(m), Some(c)) if c > 0.0 => Some(m / c),
        _ => None,
    };
    BenchRow {
        op: it.op.into(),
        size: it.size.into(),
        dtype: it.dtype.into(),
        why: it.why.into(),
        results,
        magma_over_cusolver: ratio,
    }
}

fn eval_brief(raw: &Raw) -> String {
    match raw.outcome {
        RawOutcome::Ok => "ok".into(),
        RawOutcome::Error => {
            let e = raw.error.as_deref().unwrap_or("");
            format!(
                "{}: {}",
                raw.error_type.as_deref().unwrap_or("error"),
                e.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(160)
                    .collect::<String>()
            )
        }
        RawOutcome::Timeout => "timeout".into(),
        RawOutcome::Crash => format!("crash: {}", raw.detail.as_deref().unwrap_or("")),
        RawOutcome::NotRun => format!("not run: {}", raw.detail.as_deref().unwrap_or("")),
    }
}

/// Judge a recorded report again with `tables` (the tables may have changed since the run).
pub fn replay(
    mut rep: SmokeReport,
    tables: &Tables,
    from: &Path,
    expect_file: Option<&Path>,
) -> Result<SmokeReport> {
    // Judged again with today's rules, so written as today's schema.
    rep.schema_version = SCHEMA_VERSION;
    let lazy = rep.options.lazy.clone();
    let dep = rep.options.dep.clone();
    for v in &mut rep.variants {
        let cuda = v
            .probe
            .as_ref()
            .and_then(|p| p.get("cuda_version"))
            .and_then(|x| x.as_str())
            .map(str::to_string);
        let table = tables.get(&v.table).ok_or_else(|| {
            Error::Usage(format!(
                "variant {}: no expected-outcome table named '{}' (pass --expect FILE with it)",
                v.name, v.table
            ))
        })?;
        v.table_origin = tables.origin.get(&v.table).cloned().unwrap_or_default();
        let mode = v.mode;
        let old = std::mem::take(&mut v.cases);
        v.cases = old
            .into_iter()
            .map(|c| {
                let e = expect::expectation(&v.table, table, &c.case, cuda.as_deref());
                judge_case(c.case, c.seed, e, c.raw, mode)
            })
            .collect();
        finish_variant(v, &lazy, &dep);
    }
    rep.summary = total(&rep.variants);
    rep.result = SmokeVerdict::of(&rep.summary);
    rep.default_routing = default_routing(&rep.bench, &dep);
    rep.tolerances = eval::tolerance_table();
    rep.options.replayed_from = Some(from.display().to_string());
    rep.options.expect_file = expect_file.map(|p| p.display().to_string());
    Ok(rep)
}
