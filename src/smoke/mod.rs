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

// issue 54: documented by the floor-plan/errors change
#![allow(missing_docs)]

pub mod cases;
pub mod device;
pub mod eval;
pub mod expect;
pub mod prefetch;
pub mod report;
pub mod runner;
pub mod variant;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::analysis::payload::PayloadSpec;
use crate::error::{Error, Result};
pub use crate::provenance::Tool;
use cases::{Case, Filter, Mode, Preference};
use device::DeviceInfo;
use eval::{Check, CheckName, CheckStatus, Raw, RawOutcome, Status};
use expect::{Expectation, Tables};
use variant::{Layout, LazyFacts, VariantArg};

/// The battery script, shipped in the binary and written to a temporary directory at run time.
pub const BATTERY: &str = include_str!("battery.py");
pub const SCHEMA: &str = "splitpkg-smoke";
/// 2: identity check, `stale` check status and `result`, benches of every real variant (`bench`
/// is a list) and `default_routing`. Recordings of version 1 are still read and judged again.
pub const SCHEMA_VERSION: u32 = 2;
const READS_SCHEMA_VERSIONS: [u32; 2] = [1, 2];

/// Everything `splitpkg smoke` was asked to do.
pub struct Options {
    pub variants: Vec<VariantArg>,
    /// Variant names to run as emulations (table `<name>-emulated`).
    pub emulate: Vec<String>,
    pub python: Option<String>,
    pub tables: Tables,
    pub bench: bool,
    pub bench_reps: u32,
    pub case_timeout: Duration,
    /// Wall-time budget of the whole run: cases not started by then are reported as not run.
    pub deadline: Option<Duration>,
    pub seed: Option<u64>,
    pub filter: Filter,
    pub lazy: String,
    pub spec: PayloadSpec,
    pub progress: bool,
    pub command: Vec<String>,
}

/// A variant's plan: its mode, table and cases with expectations (nothing run yet).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantPlan {
    pub name: String,
    pub mode: Mode,
    pub table: String,
    pub cases: Vec<PlannedCase>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlannedCase {
    #[serde(flatten)]
    pub case: Case,
    pub expect: Expectation,
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

/// The options the run was given, as recorded (a `--replay` adds where it was judged from).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunOptions {
    /// `--case-timeout` in seconds (default 60): a case with no answer by then is a hang and its
    /// worker is killed. Bench items get at least 180 s.
    pub case_timeout_s: f64,
    /// `--deadline` in seconds: the run's wall-time budget, after which cases and bench items not
    /// yet started are reported as not run. Absent without `--deadline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_s: Option<f64>,
    /// Whether `--bench` was given: every real (not emulated) variant is then timed (`bench`).
    pub bench: bool,
    /// `--bench-reps` (default 5): the most timed calls per bench item and preference.
    pub bench_reps: u32,
    /// The lazily loaded library's file name (`--lazy`, default `libtorch_cuda_linalg.so`): the
    /// one the probe watches for and whose facts are read.
    pub lazy: String,
    /// The optional component the variants are named after (`magma` → `magma`/`nomagma`).
    #[serde(default = "default_dep")]
    pub dep: String,
    /// `--only` substrings: only cases whose id contains one of them ran (bench items are not
    /// filtered). Absent when not given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// `--skip` substrings: cases whose id contains one of them did not run. Absent when not given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// `--emulate` variant names: run as emulated nomagma (cuSOLVER forced on a MAGMA
    /// installation, judged by table `<name>-emulated`), never real results. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emulate: Vec<String>,
    /// The `--expect FILE` whose tables were laid over the built-in ones for this judgement (after
    /// `--replay`, the replay's own). Absent when only the built-in tables were used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_file: Option<String>,
    /// Set when this report was judged again from a recorded one (`--replay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_from: Option<String>,
}

fn default_dep() -> String {
    "magma".into()
}

/// One case of a variant as run and judged: the planned case, its seed and expectation, what the
/// battery measured (`raw`) and the judgement (`status`, `reason`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaseReport {
    #[serde(flatten)]
    pub case: Case,
    /// The seed of the case's random inputs, derived from the run's `seed` and the case id (53
    /// bits): the same run seed gives the same inputs.
    pub seed: u64,
    /// What the variant's table expects of the case, and the rule that decided it.
    pub expect: Expectation,
    /// The largest relative residual that passes: 1e-3 for float32/complex64, 1e-9 for
    /// float64/complex128, ten times that for eig/eigvals, 0.5 for matrix_rank (an exact rank).
    pub tolerance: f64,
    /// What the battery (or, for a hang, a dead worker or a case not run, the runner) reported, as
    /// measured. On an emulated variant it was measured with cuSOLVER forced on a MAGMA install.
    pub raw: Raw,
    /// The judgement: `pass`, `expected-fail` and `excluded` met the expectation; `fail` and
    /// `timeout` (a hang, or a case not run) did not.
    pub status: Status,
    /// Why the case got its status, in words (for an expected failure, the error raised). Absent
    /// for a pass.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// Case statuses and failed checks counted for one variant or, in the report's `summary`, over
/// every variant (emulated ones included). Bench timings are not counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Counts {
    /// Cases judged: every planned case, whether it ran or not.
    pub cases: usize,
    /// Cases with status `pass`: the op ran and its residual is within tolerance.
    pub pass: usize,
    /// Cases with status `fail`: wrong numbers, an error not expected or not matching, a dead
    /// worker, MAGMA's not-initialized message, a preference not reset, or a harness error.
    pub fail: usize,
    /// Cases with status `expected-fail`: a clean RuntimeError matching the table's pattern.
    pub expected_fail: usize,
    /// Cases with status `timeout`: hangs, and cases not run (after two hangs of their op, past
    /// `--deadline`, or with no worker that could start).
    pub timeout: usize,
    /// Cases with status `excluded`: known stock bugs, recorded but not judged.
    pub excluded: usize,
    /// Checks with status `fail` (a `stale` check counts in `stale_flags` instead).
    pub checks_failed: usize,
    /// Checks whose status is `stale`: a core flag that describes the other variant.
    #[serde(default)]
    pub stale_flags: usize,
    /// No case failed or timed out, no check failed, and there was at least one case; in the
    /// summary, every variant is ok and there is at least one. A stale flag leaves it true.
    pub ok: bool,
}

impl Counts {
    fn add_case(&mut self, s: Status) {
        self.cases += 1;
        match s {
            Status::Pass => self.pass += 1,
            Status::Fail => self.fail += 1,
            Status::ExpectedFail => self.expected_fail += 1,
            Status::Timeout => self.timeout += 1,
            Status::Excluded => self.excluded += 1,
        }
    }
}

/// `N cases: N pass, …; N check(s) failed`, the one wording of the counts in progress, tables and
/// the result line.
impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cases: {} pass, {} expected-fail, {} excluded, {} fail, {} timeout; {} check(s) failed",
            self.cases,
            self.pass,
            self.expected_fail,
            self.excluded,
            self.fail,
            self.timeout,
            self.checks_failed
        )?;
        if self.stale_flags > 0 {
            write!(f, ", {} stale core flag(s)", self.stale_flags)?;
        }
        Ok(())
    }
}

/// What the run says, for people and for CI (each has its own exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every case and check met its expectation. Exit 0.
    Ok,
    /// Every variant works, but a flag compiled into a core file describes the other variant
    /// (`torch.cuda.has_magma`). Exit 4, so CI can accept it knowingly or not at all.
    OkStaleFlag,
    /// A case or check failed: at least one variant is broken or is not what its name says. Exit 1.
    Fail,
}

impl Verdict {
    pub fn of(c: &Counts) -> Verdict {
        match (c.ok, c.stale_flags) {
            (false, _) => Verdict::Fail,
            (true, 0) => Verdict::Ok,
            (true, _) => Verdict::OkStaleFlag,
        }
    }

    pub fn exit(self) -> crate::Exit {
        match self {
            Verdict::Ok => crate::Exit::Success,
            Verdict::Fail => crate::Exit::No,
            Verdict::OkStaleFlag => crate::Exit::StaleFlag,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "OK",
            Verdict::OkStaleFlag => "OK, STALE CORE FLAG",
            Verdict::Fail => "FAIL",
        }
    }
}

/// One variant as run: where it is and how it was run and judged, what its probe and lazy library
/// showed, its checks, its cases and their counts.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantReport {
    /// NAME from `--variant NAME=PATH`: `magma`, `nomagma`, or a name with a table in `--expect`.
    pub name: String,
    /// PATH from `--variant NAME=PATH`, as given.
    pub path: String,
    /// `real` (the variant's own installation) or `emulated-nomagma` (standing in for nomagma: a
    /// MAGMA installation with cuSOLVER forced, never a real nomagma result).
    pub mode: Mode,
    /// Whether the variant was emulated (`--emulate`): its cases ran on a MAGMA installation with
    /// the cuSOLVER preference forced, so they are not a real nomagma run. Agrees with `mode`.
    pub emulated: bool,
    /// For an emulated variant, the `EMULATED: …` warning that its results are not a real
    /// nomagma pass. Absent for a real variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The expected-outcome table the cases are judged by: the variant's name, or
    /// `<name>-emulated` for an emulated variant.
    pub table: String,
    /// Where that table came from: `built-in`, or the path of the `--expect` file that gave it.
    pub table_origin: String,
    /// The Python that ran the variant: the env prefix's `bin/python3` (or `bin/python`), else
    /// `--python` (default `python3`).
    pub python: String,
    /// How PATH was understood; a run always records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    /// The `torch` package directory the variant's Python imports, as it reported it (canonical
    /// path); a run always records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_dir: Option<String>,
    /// The probe's raw answer: versions, has_magma, where the lazy library was mapped when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Value>,
    /// Why the probe gave no answer: its Python could not start, it ran past 300 s, or it printed
    /// no answer line. Absent when it answered (a failed `import torch` is in `probe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
    /// What the lazy library file holds of the payload (for an emulated variant, the MAGMA
    /// installation's library). Absent when it was not found or not readable (`lazy_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lazy_library: Option<LazyFacts>,
    /// Why `lazy_library` is absent: the library was not found next to torch, or could not be
    /// read. Absent when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lazy_error: Option<String>,
    /// The per-variant checks, in this order: `laziness`, `has_magma`, `device_code`, `identity`.
    pub checks: Vec<Check>,
    /// Every planned case (after `--only` and `--skip`), op by op in catalog order, with what it
    /// did and its judgement.
    pub cases: Vec<CaseReport>,
    /// The variant's counts, and whether it met its table.
    pub summary: Counts,
}

impl VariantReport {
    /// Emulated by either field (a hand-edited document may set only one): never shown as real.
    pub fn is_emulated(&self) -> bool {
        self.emulated || self.mode == Mode::EmulatedNomagma
    }

    /// A string the probe answered (`torch_version`, `cuda_version`).
    pub fn probe_str(&self, key: &str) -> Option<String> {
        self.probe.as_ref()?.get(key)?.as_str().map(str::to_string)
    }

    pub fn torch_version(&self) -> Option<String> {
        self.probe_str("torch_version")
    }
}

/// One bench item timed under one preference on one variant.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchCell {
    /// How the timing ended: `ok`, `error` (an exception, as the `magma` preference raises without
    /// MAGMA), `timeout`, `crash` or `not-run`.
    pub outcome: RawOutcome,
    /// The median of `times_ms` in milliseconds (for an even count, the upper of the middle two).
    /// Absent unless `outcome` is `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ms: Option<f64>,
    /// Each timed call in milliseconds, measured with CUDA events, in call order (the warm-up call
    /// is not timed). Absent unless `outcome` is `ok`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times_ms: Vec<f64>,
    /// What went wrong in brief: the exception's type and its first line (cut at 160 characters),
    /// `timeout`, or `crash: …` / `not run: …` with the reason. Absent when `outcome` is `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One bench item (op, size, dtype) timed under the `default`, `cusolver` and `magma` preferences.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchRow {
    /// The op as the battery names it (`lu_factor`, `lu_factor_nopiv` for `pivot=False`, `eigh`).
    pub op: String,
    /// The size label, batch first: `8192x8192`, `64x256x256` (64 matrices of 256×256), with
    /// `,k=N` for the right-hand-side columns.
    pub size: String,
    /// The dtype timed: `float64`, or `float32`.
    pub dtype: String,
    /// Why the item is timed: the path PyTorch 2.11 takes for it, by default on a MAGMA build
    /// (`default: MAGMA batched LU`). The same text on every variant.
    pub why: String,
    /// By preference: `default`, `cusolver`, `magma`.
    pub results: BTreeMap<String, BenchCell>,
    /// The `magma` median over the `cusolver` median (above 1: MAGMA is slower). Absent unless
    /// both were timed (on a variant without MAGMA the `magma` preference raises).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magma_over_cusolver: Option<f64>,
}

/// The timings of one real variant (`--bench`): each bench item under each preference, alone on
/// the GPU.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchReport {
    /// The variant timed, by its `--variant` NAME.
    pub variant: String,
    /// Timings of an emulated variant would be the magma installation's: never taken.
    #[serde(default)]
    pub emulated: bool,
    /// `--bench-reps`: the most timed calls per item and preference; `method` says when fewer are
    /// taken.
    pub reps: u32,
    /// How the timings were taken, in words: warm-up, timed calls, CUDA events, the time budget.
    pub method: String,
    /// One row per bench item, in a fixed order: large single matrices where 2.11's default is
    /// cuSOLVER, then batched or small-n shapes where it picks MAGMA.
    pub rows: Vec<BenchRow>,
}

/// A smoke run: where it ran, every variant's probe, checks and cases as measured and judged, the
/// benches and the verdict.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SmokeReport {
    pub schema: String,
    pub schema_version: u32,
    pub tool: Tool,
    /// The command line of the run, program first; a `--replay` keeps the recorded run's.
    pub command: Vec<String>,
    /// When the run started (RFC 3339 UTC; `SOURCE_DATE_EPOCH` when set); absent in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The run's seed (`--seed`, else drawn from the clock and process id): every case's and bench
    /// item's input seed derives from it and the id, so the same seed repeats the inputs.
    pub seed: u64,
    /// The options the run was given.
    pub options: RunOptions,
    /// The relative-residual tolerances by dtype, the eig/eigvals factor and `matrix_rank: exact`,
    /// as shown in reports; each case records its own in `tolerance`.
    pub tolerances: Value,
    /// The GPU the cases ran on. A run always records it; null only in a document without it.
    #[serde(default)]
    pub device: Option<DeviceInfo>,
    /// One report per `--variant`, in the order given.
    pub variants: Vec<VariantReport>,
    /// One timing table per real variant (`--bench`); version 1 recorded one object (magma only).
    #[serde(default, deserialize_with = "one_or_many")]
    pub bench: Vec<BenchReport>,
    /// The default-preference timing of each bench row on every variant: what each variant's users get.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub default_routing: Vec<RoutingRow>,
    /// The counts over every variant, emulated ones included; `ok` only when every variant is ok.
    pub summary: Counts,
    /// The verdict, which sets the exit code; a version 1 recording, which lacks it, gets its
    /// summary's.
    #[serde(default = "unknown_verdict")]
    pub result: Verdict,
}

impl crate::document::Document for SmokeReport {
    const SCHEMA: &'static str = SCHEMA;
    const VERSION: u32 = SCHEMA_VERSION;
    const READS: &'static [u32] = &READS_SCHEMA_VERSIONS;
    const WHAT: &'static str = "smoke report";
    const SCHEMA_FILE: &'static str = "smoke.schema.json";
    const TITLE: &'static str = "splitpkg smoke";
    const ABOUT: &'static str = "Output of `splitpkg smoke --json` (and of `--replay FILE --json`). Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it. Raw facts (`probe`, `lazy_library`, each case's `raw`) are what was measured; `expect`, `status`, `reason`, `checks` and `summary` are the judgement, which `--replay` recomputes from the raw facts.";

    /// Version 1 recorded no `result`: it is what its summary says (serde's default, `fail`, is
    /// only for a document that says nothing).
    fn upgrade(mut self) -> Self {
        if self.schema_version < 2 {
            self.result = Verdict::of(&self.summary);
        }
        self
    }
}

fn unknown_verdict() -> Verdict {
    Verdict::Fail
}

/// `bench` as recorded by schema version 1 (one object or null) or 2 (a list).
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<BenchReport>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(BenchReport),
        Many(Vec<BenchReport>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(b)) => vec![b],
        Some(OneOrMany::Many(v)) => v,
    })
}

/// One bench item under the default preference on each variant, and slim / magma.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoutingRow {
    /// The bench item's op, as in the bench rows.
    pub op: String,
    /// The bench item's size label, as in the bench rows.
    pub size: String,
    /// The bench item's dtype, as in the bench rows.
    pub dtype: String,
    /// Median ms by variant name; `None` when the op failed there (the error is in that bench).
    pub median_ms: BTreeMap<String, Option<f64>>,
    /// `no<dep>` over `<dep>` (above 1: the slim variant is slower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slim_over_full: Option<f64>,
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

impl SmokeReport {
    pub fn exit(&self) -> crate::Exit {
        self.result.exit()
    }
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
pub fn run(opts: &Options, device: DeviceInfo) -> Result<SmokeReport> {
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
    let scratch = Scratch::new()?;
    let script = scratch.path.join("battery.py");
    std::fs::write(&script, BATTERY).map_err(|e| Error::io(&script, e))?;
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
fn check_options(opts: &Options) -> Result<()> {
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

fn resolve_variants(opts: &Options) -> Result<Vec<ResolvedVariant<'_>>> {
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
    opts: &Options,
    date: Option<String>,
    seed: u64,
    device: DeviceInfo,
    variants: Vec<VariantReport>,
    bench: Vec<BenchReport>,
) -> SmokeReport {
    let default_routing = default_routing(&bench, &opts.spec.name);
    let summary = total(&variants);
    let result = Verdict::of(&summary);
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
    opts: &Options,
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
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// A new directory in the shared temporary directory, made by this call (never one that
    /// exists: another user could have planted it, or a link in its place) with an unpredictable
    /// name, readable by this user only; the workers' files are created in it.
    fn new() -> Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        for _ in 0..16 {
            let path = std::env::temp_dir().join(format!(
                "splitpkg-smoke-{}-{:016x}",
                std::process::id(),
                crate::output::atomic::random_u64()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(Scratch { path }),
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

impl Drop for Scratch {
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
    opts: &'a Options,
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
fn case_jobs(plan: &VariantPlan, seed: u64) -> Vec<runner::Job> {
    plan.cases
        .iter()
        .map(|pc| {
            let c = &pc.case;
            let mut payload = serde_json::to_value(c).expect("case serialises");
            payload["seed"] = json!(cases::case_seed(seed, &c.id));
            payload["kind"] = json!("check");
            runner::Job {
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
    std::fs::create_dir_all(&workdir).map_err(|e| Error::io(&workdir, e))?;
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
    std::fs::create_dir_all(&workdir).map_err(|e| Error::io(&workdir, e))?;
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
fn bench_jobs(items: &[cases::BenchItem], reps: u32, seed: u64) -> Vec<runner::Job> {
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
            jobs.push(runner::Job {
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
    rep.result = Verdict::of(&rep.summary);
    rep.default_routing = default_routing(&rep.bench, &dep);
    rep.tolerances = eval::tolerance_table();
    rep.options.replayed_from = Some(from.display().to_string());
    rep.options.expect_file = expect_file.map(|p| p.display().to_string());
    Ok(rep)
}

/// Read a recorded `--json` report.
pub fn load_report(path: &Path) -> Result<SmokeReport> {
    let text = crate::input::file::read_text(
        path,
        crate::input::file::Links::Follow,
        crate::input::file::MAX_DOCUMENT_BYTES,
        "smoke report",
    )?;
    parse_report(&text, path)
}

/// A recorded report from its text; `path` names it in errors.
pub fn parse_report(text: &str, path: &Path) -> Result<SmokeReport> {
    <SmokeReport as crate::document::Document>::from_str(text, &path.display().to_string())
}
