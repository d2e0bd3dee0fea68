//! The `smoke --json` document ([`SmokeReport`], schema `docs/smoke.schema.json`) and the plan
//! `smoke --plan` prints ([`VariantPlan`]): every case as run and judged, per variant, with the
//! checks, benches and the verdict; read back by `--replay` and `report`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cases::{Case, Mode};
use super::device::DeviceInfo;
use super::eval::{CaseStatus, Raw, RawOutcome, SmokeCheck};
use super::expect::Expectation;
use super::variant::{LazyFacts, PathLayout};
use crate::error::Result;
use crate::provenance::Tool;

/// The `schema` of a smoke report.
pub const SCHEMA: &str = "splitpkg-smoke";

/// 2: identity check, `stale` check status and `result`, benches of every real variant (`bench`
/// is a list) and `default_routing`. Recordings of version 1 are still read and judged again.
pub const SCHEMA_VERSION: u32 = 2;

const READS_SCHEMA_VERSIONS: [u32; 2] = [1, 2];

/// A variant's plan: its mode, table and cases with expectations (nothing run yet).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VariantPlan {
    /// The variant's name (`magma`, `nomagma`).
    pub name: String,
    /// Real, or emulated (a MAGMA installation standing in for nomagma, with cuSOLVER forced).
    pub mode: Mode,
    /// The expected-outcome table the cases are judged by: the variant's name, or `<name>-emulated`
    /// for an emulated variant.
    pub table: String,
    /// The cases to run, in order, with their expectations.
    pub cases: Vec<PlannedCase>,
}

/// One case of a variant's plan, with what it is expected to do.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlannedCase {
    /// The case: its id, op, shape, dtype and preference.
    #[serde(flatten)]
    pub case: Case,
    /// What the case is expected to do in this variant, and why.
    pub expect: Expectation,
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
    /// The case: its id, op, shape, dtype and preference.
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
    pub status: CaseStatus,
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
    pub(crate) fn add_case(&mut self, s: CaseStatus) {
        self.cases += 1;
        match s {
            CaseStatus::Pass => self.pass += 1,
            CaseStatus::Fail => self.fail += 1,
            CaseStatus::ExpectedFail => self.expected_fail += 1,
            CaseStatus::Timeout => self.timeout += 1,
            CaseStatus::Excluded => self.excluded += 1,
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
#[schemars(rename = "Verdict")]
pub enum SmokeVerdict {
    /// Every case and check met its expectation. Exit 0.
    Ok,
    /// Every variant works, but a flag compiled into a core file describes the other variant
    /// (`torch.cuda.has_magma`). Exit 4, so CI can accept it knowingly or not at all.
    OkStaleFlag,
    /// A case or check failed: at least one variant is broken or is not what its name says. Exit 1.
    Fail,
}

impl SmokeVerdict {
    /// The run's verdict from its counts: FAIL when anything failed, else OK, or OK with a stale
    /// core flag when one was found.
    pub fn of(c: &Counts) -> SmokeVerdict {
        match (c.ok, c.stale_flags) {
            (false, _) => SmokeVerdict::Fail,
            (true, 0) => SmokeVerdict::Ok,
            (true, _) => SmokeVerdict::OkStaleFlag,
        }
    }

    /// The exit status: 0 for OK, 1 for FAIL, 4 for OK with a stale core flag.
    pub fn exit(self) -> crate::Exit {
        match self {
            SmokeVerdict::Ok => crate::Exit::Success,
            SmokeVerdict::Fail => crate::Exit::No,
            SmokeVerdict::OkStaleFlag => crate::Exit::StaleFlag,
        }
    }

    /// The verdict as people read it (`OK`, `OK, STALE CORE FLAG`, `FAIL`).
    pub fn label(self) -> &'static str {
        match self {
            SmokeVerdict::Ok => "OK",
            SmokeVerdict::OkStaleFlag => "OK, STALE CORE FLAG",
            SmokeVerdict::Fail => "FAIL",
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
    pub layout: Option<PathLayout>,
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
    pub checks: Vec<SmokeCheck>,
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

    /// The torch version the variant's probe imported, if it answered.
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
    /// Which document this is: `splitpkg-smoke`.
    pub schema: String,
    /// The version of the report's layout (2 today; recordings of version 1 are still read).
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
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
    pub result: SmokeVerdict,
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
            self.result = SmokeVerdict::of(&self.summary);
        }
        self
    }
}

fn unknown_verdict() -> SmokeVerdict {
    SmokeVerdict::Fail
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

impl SmokeReport {
    /// The exit status the run's result maps to.
    pub fn exit(&self) -> crate::Exit {
        self.result.exit()
    }
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
