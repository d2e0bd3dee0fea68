//! Judging: raw facts from the battery (outcome, residual, error text, stderr) against the
//! expectation of each case, and the per-variant checks (laziness, has_magma, device code).
//!
//! Everything here is a pure function of recorded data, so `--replay` re-judges a recorded run
//! and CI tests it without a GPU — except [`device_code_check`], which reads the variant's
//! `.nv_fatbin` headers (files, not the GPU) and is recorded as a check for replay. The GPU itself
//! is probed only in `device.rs`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cases::Preference;
use super::expect::{Expectation, Outcome};

/// The message MAGMA prints (not raises) when its init hook was not wired up.
pub const MAGMA_NOT_INITIALIZED: &str = "MAGMA not initialized";

/// Relative-residual tolerance by dtype: single precision 1e-3, double precision 1e-9. The inputs
/// are built with condition numbers of at most 4, so a correct backend stays orders of magnitude
/// below these (about n·ε); a wrong result is O(1). eig/eigvals are looser by 10 (non-normal
/// inputs: eigenvalue sensitivity), matrix_rank is exact (the residual is |rank − r|).
pub fn tolerance(op: &str, dtype: &str) -> f64 {
    let base = match dtype {
        "float32" | "complex64" => 1e-3,
        _ => 1e-9,
    };
    match op {
        "matrix_rank" => 0.5,
        "eig" | "eigvals" => base * 10.0,
        _ => base,
    }
}

/// Tolerances as shown in reports and docs.
pub fn tolerance_table() -> serde_json::Value {
    serde_json::json!({
        "float32": tolerance("qr", "float32"),
        "complex64": tolerance("qr", "complex64"),
        "float64": tolerance("qr", "float64"),
        "complex128": tolerance("qr", "complex128"),
        "eig_eigvals_factor": 10.0,
        "matrix_rank": "exact",
    })
}

/// How a case (or a bench timing) ended, as measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RawOutcome {
    /// The op returned; `residual` says how good the numbers are.
    Ok,
    /// A Python exception (from setting the preference, building the inputs, the op, checking the
    /// result, or the harness: see `phase`).
    Error,
    /// No answer within the case timeout: the process group was killed.
    Timeout,
    /// The worker process died during the case (signal, abort, exit).
    Crash,
    /// Not run: its op already timed out in this variant (twice for cases, once for bench items),
    /// the run's `--deadline` had passed, or the worker never started.
    NotRun,
}

/// Where a case's error came from, as the battery reports it; a name this splitpkg does not know
/// is kept as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "String", into = "String")]
pub enum Phase {
    /// Setting the linear-algebra backend preference before the case (`set_preference`).
    SetPreference,
    /// Building the case's inputs (`inputs`).
    Inputs,
    /// Running the op itself (`op`).
    Op,
    /// Checking the result on the CPU (`check`).
    Check,
    /// The harness around the case (`harness`).
    Harness,
    /// A phase this splitpkg does not know, kept as the battery recorded it.
    Other(String),
}

impl Phase {
    /// The phase as the battery writes it (`set_preference`, `inputs`, `op`, `check`, `harness`, or
    /// the unknown name).
    pub fn as_str(&self) -> &str {
        match self {
            Phase::SetPreference => "set_preference",
            Phase::Inputs => "inputs",
            Phase::Op => "op",
            Phase::Check => "check",
            Phase::Harness => "harness",
            Phase::Other(s) => s,
        }
    }

    /// What the harness was doing, for a harness error.
    fn words(&self) -> &'static str {
        match self {
            Phase::Inputs => "building the inputs",
            Phase::Check => "checking the result on the CPU",
            _ => "running the case",
        }
    }
}

impl From<&str> for Phase {
    fn from(s: &str) -> Phase {
        match s {
            "set_preference" => Phase::SetPreference,
            "inputs" => Phase::Inputs,
            "op" => Phase::Op,
            "check" => Phase::Check,
            "harness" => Phase::Harness,
            other => Phase::Other(other.to_string()),
        }
    }
}

impl From<String> for Phase {
    fn from(s: String) -> Phase {
        Phase::from(s.as_str())
    }
}

impl From<Phase> for String {
    fn from(p: Phase) -> String {
        p.as_str().to_string()
    }
}

/// What the battery reported for one case, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Raw {
    /// How the case ended: `ok`, `error`, `timeout`, `crash` or `not-run`.
    pub outcome: RawOutcome,
    /// A number, or `nan`/`inf`/`-inf` where the result was not finite.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "lossless")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub residual: Option<f64>,
    /// Wall time in milliseconds of the op call, to its synchronize or its exception (inputs and
    /// check not counted); for a timeout or a dead worker, from sending the case until the runner
    /// gave up or saw it die. Absent when the op never ran (an error before it, or not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ms: Option<f64>,
    /// Where an error came from: `set_preference`, `inputs`, `op`, `check`, `harness`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The exception's class name (`RuntimeError`, `LinAlgError`). Absent without an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The exception is a RuntimeError (or a subclass such as torch.linalg.LinAlgError).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_error: Option<bool>,
    /// The exception's message (at most 4000 characters). Absent without an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Everything the process wrote to fd 1 and fd 2 during the case (tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The distinct Python warnings raised during the case, first line of each, sorted, at most
    /// 5. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The preference read back after the reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference_after: Option<String>,
    /// Whether the CUDA context still worked after the case (`torch.cuda.synchronize()`): false
    /// replaces the worker. Absent when the worker gave no answer (timeout, crash, not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_ok: Option<bool>,
    /// Timeout length, exit status, why not run; for an answered case, a failed preference reset
    /// or a broken CUDA context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The worker's whole answer (bench timings live here); not part of the recorded case.
    #[serde(skip)]
    pub answer: Option<serde_json::Value>,
}

impl Raw {
    /// An answer with this outcome and nothing else recorded.
    pub fn new(outcome: RawOutcome) -> Raw {
        Raw {
            outcome,
            residual: None,
            time_ms: None,
            phase: None,
            error_type: None,
            runtime_error: None,
            error: None,
            stderr: None,
            warnings: Vec::new(),
            preference_after: None,
            context_ok: None,
            detail: None,
            answer: None,
        }
    }

    /// From one worker answer line (already decoded).
    pub fn from_worker(v: &serde_json::Value) -> Raw {
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let f = |k: &str| v.get(k).and_then(num);
        let outcome = match v.get("outcome").and_then(|x| x.as_str()) {
            Some("ok") => RawOutcome::Ok,
            _ => RawOutcome::Error,
        };
        let mut raw = Raw::new(outcome);
        raw.residual = v.get("residual").map(|x| num(x).unwrap_or(f64::NAN));
        raw.time_ms = f("time_ms");
        raw.phase = s("phase").map(Phase::from);
        raw.error_type = s("error_type");
        raw.runtime_error = v.get("runtime_error").and_then(|x| x.as_bool());
        raw.error = s("error");
        raw.stderr = s("stderr").filter(|t| !t.is_empty());
        raw.warnings = v
            .get("warnings")
            .and_then(|w| w.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        raw.preference_after = s("preference_after");
        raw.context_ok = v.get("context_ok").and_then(|x| x.as_bool());
        let mut detail = Vec::new();
        if let Some(r) = s("reset_error") {
            detail.push(format!("resetting the preference failed: {r}"));
        }
        if let Some(c) = s("context_error") {
            detail.push(format!("CUDA context broken after the case: {c}"));
        }
        if outcome == RawOutcome::Ok && raw.residual.is_none() {
            raw.residual = Some(f64::NAN);
        }
        raw.detail = (!detail.is_empty()).then(|| detail.join("; "));
        raw.answer = Some(v.clone());
        raw
    }
}

/// A JSON number, or the strings `nan`, `inf`, `-inf` the battery uses for non-finite values.
pub fn num(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match s.as_str() {
            "nan" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// `Option<f64>` that keeps NaN and infinities (as strings) instead of turning them into `null`.
mod lossless {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(x) if x.is_finite() => s.serialize_f64(*x),
            Some(x) if x.is_nan() => s.serialize_str("nan"),
            Some(x) if *x > 0.0 => s.serialize_str("inf"),
            Some(_) => s.serialize_str("-inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        let v = Option::<serde_json::Value>::deserialize(d)?;
        Ok(v.as_ref().and_then(super::num))
    }
}

/// A case's judgement: `pass`, `expected-fail` and `excluded` met the expectation; `fail` and
/// `timeout` did not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Status")]
pub enum CaseStatus {
    /// The op worked as expected (`pass`).
    Pass,
    /// The case did not meet its expectation (`fail`).
    Fail,
    /// The op raised the error a table rule expects (`expected-fail`), e.g. a MAGMA-only op in the
    /// slim variant.
    ExpectedFail,
    /// No answer within the case timeout (`timeout`).
    Timeout,
    /// Recorded but not judged: a table rule excludes the case, a known bug (`excluded`).
    Excluded,
}

impl CaseStatus {
    /// Whether the case met its expectation.
    pub fn ok(self) -> bool {
        matches!(
            self,
            CaseStatus::Pass | CaseStatus::ExpectedFail | CaseStatus::Excluded
        )
    }

    /// The status as tables print it: upper case for the ones that did not meet the expectation
    /// (`FAIL`, `TIMEOUT`).
    pub fn label(self) -> &'static str {
        match self {
            CaseStatus::Pass => "pass",
            CaseStatus::Fail => "FAIL",
            CaseStatus::ExpectedFail => "expected-fail",
            CaseStatus::Timeout => "TIMEOUT",
            CaseStatus::Excluded => "excluded",
        }
    }
}

fn first_line(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: String = line.chars().take(200).collect();
    if line.chars().count() > 200 {
        out.push('…');
    }
    out
}

fn observed(raw: &Raw) -> String {
    match raw.outcome {
        RawOutcome::Ok => match raw.residual {
            Some(r) => format!("ran, residual {r:.2e}"),
            None => "ran".into(),
        },
        RawOutcome::Error => {
            format!(
                "{}: {}",
                raw.error_type.as_deref().unwrap_or("error"),
                first_line(raw.error.as_deref().unwrap_or(""))
            )
        }
        RawOutcome::Timeout => "timed out".into(),
        RawOutcome::Crash => "worker died".into(),
        RawOutcome::NotRun => "not run".into(),
    }
}

fn pattern_matches(pattern: &str, text: &str) -> bool {
    regex::Regex::new(pattern)
        .map(|r| r.is_match(text))
        .unwrap_or(false)
}

/// Judge one case. `base_preference` is what the worker must have reset to.
pub fn judge(
    exp: &Expectation,
    raw: &Raw,
    tolerance: f64,
    base_preference: Preference,
) -> (CaseStatus, String) {
    if let Some(judged) = judge_unanswered(raw) {
        return judged;
    }
    if let Some(text) = &raw.stderr
        && text.contains(MAGMA_NOT_INITIALIZED)
    {
        return (
            CaseStatus::Fail,
            "stderr says \"MAGMA not initialized (call magma_init() first)\": the MAGMA init hook is not wired up".into(),
        );
    }
    if let Some(after) = &raw.preference_after
        && after.parse::<Preference>().ok() != Some(base_preference)
    {
        return (
            CaseStatus::Fail,
            format!(
                "the backend preference was not reset: still {after:?} after the case (expected {:?})",
                base_preference.as_str()
            ),
        );
    }
    if exp.outcome == Outcome::Excluded {
        let note = exp.note.as_deref().unwrap_or("excluded");
        let short = note.split(':').next().unwrap_or(note);
        return (
            CaseStatus::Excluded,
            format!("{short} (observed: {})", observed(raw)),
        );
    }
    match raw.outcome {
        RawOutcome::Ok => judge_ran(exp, raw, tolerance),
        RawOutcome::Error => judge_error(exp, raw),
        _ => unreachable!(),
    }
}

/// A case without an answer (hang, not run, dead worker) fails whatever was expected.
fn judge_unanswered(raw: &Raw) -> Option<(CaseStatus, String)> {
    match raw.outcome {
        RawOutcome::Timeout => Some((
            CaseStatus::Timeout,
            format!(
                "hang: {}",
                raw.detail
                    .as_deref()
                    .unwrap_or("no answer within the case timeout; process group killed")
            ),
        )),
        RawOutcome::NotRun => Some((
            CaseStatus::Timeout,
            format!(
                "not run: {}",
                raw.detail.as_deref().unwrap_or("earlier cases failed")
            ),
        )),
        RawOutcome::Crash => Some((
            CaseStatus::Fail,
            format!(
                "worker died: {}",
                raw.detail
                    .as_deref()
                    .unwrap_or("no answer and no exit status")
            ),
        )),
        RawOutcome::Ok | RawOutcome::Error => None,
    }
}

/// The op ran: right if its residual is within the tolerance and the table allows a pass.
fn judge_ran(exp: &Expectation, raw: &Raw, tolerance: f64) -> (CaseStatus, String) {
    let ok = raw
        .residual
        .is_some_and(|r| r.is_finite() && r <= tolerance);
    let residual_text = || {
        raw.residual
            .map(|r| format!("{r:.2e}"))
            .unwrap_or_else(|| "missing".into())
    };
    match exp.outcome {
        Outcome::Pass | Outcome::PassOrError if ok => (CaseStatus::Pass, String::new()),
        Outcome::Pass | Outcome::PassOrError => (
            CaseStatus::Fail,
            format!(
                "wrong result: residual {} exceeds the tolerance {tolerance:.0e}",
                residual_text()
            ),
        ),
        Outcome::Error => (
            CaseStatus::Fail,
            format!(
                "expected a RuntimeError matching /{}/, but the op ran (residual {})",
                exp.pattern.as_deref().unwrap_or(""),
                residual_text()
            ),
        ),
        Outcome::Excluded => unreachable!(),
    }
}

/// The case raised: an expected failure only as a clean RuntimeError matching the table's pattern,
/// raised by the op (an error of the harness is never one).
fn judge_error(exp: &Expectation, raw: &Raw) -> (CaseStatus, String) {
    let phase = raw.phase.clone().unwrap_or(Phase::Op);
    let text = raw.error.as_deref().unwrap_or("");
    let line = first_line(text);
    let ty = raw.error_type.as_deref().unwrap_or("error");
    if matches!(phase, Phase::Inputs | Phase::Check | Phase::Harness) {
        return (
            CaseStatus::Fail,
            format!("harness error while {}: {ty}: {line}", phase.words()),
        );
    }
    match exp.outcome {
        Outcome::Pass => (
            CaseStatus::Fail,
            format!(
                "unexpected {ty}{}: {line}",
                if phase == Phase::SetPreference {
                    " setting the preference"
                } else {
                    ""
                }
            ),
        ),
        Outcome::Error | Outcome::PassOrError => {
            let pattern = exp.pattern.as_deref().unwrap_or("");
            if raw.runtime_error == Some(false) {
                (
                    CaseStatus::Fail,
                    format!("expected a clean RuntimeError, got {ty}: {line}"),
                )
            } else if pattern_matches(pattern, text) {
                (CaseStatus::ExpectedFail, format!("{ty}: {line}"))
            } else {
                (
                    CaseStatus::Fail,
                    format!("error does not match /{pattern}/: {ty}: {line}"),
                )
            }
        }
        Outcome::Excluded => unreachable!(),
    }
}

/// How a per-variant check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CheckStatus {
    /// The check held (`pass`).
    Pass,
    /// The check failed: the variant is broken in this respect (`fail`).
    Fail,
    /// The variant works, but a flag compiled into a core file describes the other variant
    /// (`torch.cuda.has_magma`): not a broken variant, and reported apart from one.
    Stale,
    /// The check does not apply to this variant (`not-applicable`), e.g. an EMULATED one; the
    /// detail says why.
    NotApplicable,
    /// The check could not be made (`not-checked`); the detail says why.
    NotChecked,
}

impl CheckStatus {
    /// The status as tables print it (`pass`, `FAIL`, `STALE`, `not applicable`, `not checked`).
    pub fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Stale => "STALE",
            CheckStatus::NotApplicable => "not applicable",
            CheckStatus::NotChecked => "not checked",
        }
    }
}

/// Which per-variant check; a name this splitpkg does not know is kept as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "String", into = "String")]
pub enum CheckName {
    /// The lazy library is not mapped after `import torch`, CUDA init and a matmul, and is after
    /// the first linalg op (`laziness`).
    Laziness,
    /// `torch.cuda.has_magma` agrees with the variant (`has_magma`).
    HasMagma,
    /// The variant's CUDA libraries carry code the device can run (`device_code`).
    DeviceCode,
    /// The installed lazy library is the build the variant's name says (`identity`).
    Identity,
    /// A check this splitpkg does not know, kept as recorded.
    Other(String),
}

impl CheckName {
    /// The check's name as recorded (`laziness`, `has_magma`, `device_code`, `identity`, or the
    /// unknown name).
    pub fn as_str(&self) -> &str {
        match self {
            CheckName::Laziness => "laziness",
            CheckName::HasMagma => "has_magma",
            CheckName::DeviceCode => "device_code",
            CheckName::Identity => "identity",
            CheckName::Other(s) => s,
        }
    }
}

impl From<String> for CheckName {
    fn from(s: String) -> CheckName {
        match s.as_str() {
            "laziness" => CheckName::Laziness,
            "has_magma" => CheckName::HasMagma,
            "device_code" => CheckName::DeviceCode,
            "identity" => CheckName::Identity,
            _ => CheckName::Other(s),
        }
    }
}

impl From<CheckName> for String {
    fn from(n: CheckName) -> String {
        n.as_str().to_string()
    }
}

/// The name as recorded (padded like a string, for the text tables).
impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A per-variant check (laziness, has_magma, device code, identity).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Check")]
pub struct SmokeCheck {
    /// Which check: `laziness`, `has_magma`, `device_code` or `identity`.
    pub name: CheckName,
    /// `pass`; `fail`; `stale` (has_magma only); `not-applicable` (has_magma and identity on an
    /// emulated variant, identity on a variant named neither magma nor nomagma); `not-checked`
    /// (device_code when no library with device code was found to read).
    pub status: CheckStatus,
    /// What the check found, in words: when the library was mapped, the flag against the library,
    /// which libraries carry code for the device, or what the identity rule saw.
    pub detail: String,
    /// What a failure means for users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence: Option<String>,
}

fn check(
    name: CheckName,
    status: CheckStatus,
    detail: impl Into<String>,
    consequence: Option<String>,
) -> SmokeCheck {
    SmokeCheck {
        name,
        status,
        detail: detail.into(),
        consequence,
    }
}

/// Laziness from the probe: not mapped after `import torch`, CUDA init and a matmul; mapped
/// after the first linalg op.
pub fn laziness_check(probe: Option<&serde_json::Value>, lazy_name: &str) -> SmokeCheck {
    let Some(p) = probe else {
        return check(
            CheckName::Laziness,
            CheckStatus::Fail,
            "the probe process gave no answer",
            None,
        );
    };
    let get = |k: &str| p.get(k).and_then(|v| v.as_str()).map(str::to_string);
    if p.get("import_ok").and_then(|v| v.as_bool()) != Some(true) {
        return check(
            CheckName::Laziness,
            CheckStatus::Fail,
            format!(
                "import torch failed: {}",
                first_line(&get("import_error").unwrap_or_default())
            ),
            None,
        );
    }
    if let Some(e) = get("cuda_error") {
        return check(
            CheckName::Laziness,
            CheckStatus::Fail,
            format!("CUDA did not initialise in the variant: {}", first_line(&e)),
            None,
        );
    }
    let eager = |moment: &str, path: String| {
        check(
            CheckName::Laziness,
            CheckStatus::Fail,
            format!("{lazy_name} is mapped {moment} ({path})"),
            Some(format!(
                "{lazy_name} loads before any linalg op: every process pays its load and GPU memory, and a variant without it would break more than linalg"
            )),
        )
    };
    if let Some(path) = get("mapped_after_import") {
        return eager("right after import torch", path);
    }
    if let Some(path) = get("mapped_after_cuda_init") {
        return eager("after CUDA init", path);
    }
    if let Some(path) = get("mapped_after_matmul") {
        return eager("after a CUDA matmul", path);
    }
    match get("mapped_after_linalg") {
        Some(path) => {
            let grew = p
                .get("device_memory_growth_mib")
                .and_then(|v| v.as_f64())
                .map(|m| format!("; device memory in use grew by {m} MiB"))
                .unwrap_or_default();
            check(
                CheckName::Laziness,
                CheckStatus::Pass,
                format!(
                    "not mapped after import torch, CUDA init and a matmul; mapped after the first cholesky: {path}{grew}"
                ),
                None,
            )
        }
        None => check(
            CheckName::Laziness,
            CheckStatus::Fail,
            format!(
                "{lazy_name} is not mapped after the first linalg op{}",
                get("first_linalg_error")
                    .map(|e| format!(" (cholesky raised: {})", first_line(&e)))
                    .unwrap_or_default()
            ),
            Some("every CUDA linalg op fails in this variant".into()),
        ),
    }
}

/// The measured way to ask whether MAGMA is really there: the probe looks `magma_init` up in the
/// lazy library it saw mapped (`ctypes.CDLL(path, os.RTLD_NOLOAD)`), the library PyTorch loaded.
pub const RUNTIME_TEST: &str =
    "hasattr(ctypes.CDLL(<loaded libtorch_cuda_linalg.so>, os.RTLD_NOLOAD), 'magma_init')";

/// `torch.cuda.has_magma` should equal "the loaded lazy library contains MAGMA". It is compiled
/// into `libtorch_cuda.so`, so with only the lazy library swapped it keeps describing the stock
/// build: that is a stale core flag ([`CheckStatus::Stale`]), not a broken variant; whether the
/// variant works is what its cases and the other checks say.
pub fn has_magma_check(
    probe: Option<&serde_json::Value>,
    lazy_has_magma: Option<bool>,
    lazy_name: &str,
    emulated: bool,
) -> SmokeCheck {
    if emulated {
        return check(
            CheckName::HasMagma,
            CheckStatus::NotApplicable,
            "not applicable: emulated (same installation as the magma variant; has_magma and the library are the stock ones)",
            None,
        );
    }
    let reported = probe
        .and_then(|p| p.get("has_magma"))
        .and_then(|v| v.as_bool());
    // What the measured remedy answered in this process (recordings before it have no answer).
    let runtime = probe
        .and_then(|p| p.get("loaded_library_exports_magma_init"))
        .and_then(|v| v.as_bool());
    let runtime_text = match (runtime, lazy_has_magma) {
        (Some(r), Some(b)) if r == b => format!(
            "; the runtime test {RUNTIME_TEST} answered {} (right)",
            py(r)
        ),
        (Some(r), _) => format!(
            "; the runtime test {RUNTIME_TEST} answered {} (does not match the library file)",
            py(r)
        ),
        (None, _) => String::new(),
    };
    match (reported, lazy_has_magma) {
        (None, _) => check(
            CheckName::HasMagma,
            CheckStatus::Fail,
            "torch.cuda.has_magma could not be read (torch did not import)",
            None,
        ),
        (_, None) => check(
            CheckName::HasMagma,
            CheckStatus::Fail,
            format!(
                "could not tell whether {lazy_name} contains MAGMA (library not found or unreadable)"
            ),
            None,
        ),
        (Some(a), Some(b)) if a == b => check(
            CheckName::HasMagma,
            CheckStatus::Pass,
            format!(
                "torch.cuda.has_magma is {} and {lazy_name} {} MAGMA{runtime_text}",
                py(a),
                if b { "contains" } else { "does not contain" }
            ),
            None,
        ),
        (Some(true), Some(false)) => check(
            CheckName::HasMagma,
            CheckStatus::Stale,
            format!(
                "stale core flag: torch.cuda.has_magma is True but {lazy_name} contains no MAGMA{runtime_text}"
            ),
            Some(format!(
                "has_magma is compiled into libtorch_cuda.so, not read from {lazy_name}. Code that trusts it takes MAGMA paths that now raise: preferred_linalg_library(\"magma\") is accepted and MAGMA-routed ops fail with \"requires compiling PyTorch with MAGMA\", PyTorch's skipCUDAIfNoMagma tests run and fail, and checks like builder's check_binary.sh pass wrongly. Measured remedy: ask the loaded library instead ({RUNTIME_TEST}; right on both variants on the H200, docs/evidence/nomagma-real/). Not measured: patching hasMAGMA() in libtorch_cuda.so to do the same, or pairing this variant with a libtorch_cuda.so built without MAGMA."
            )),
        ),
        (Some(false), Some(true)) => check(
            CheckName::HasMagma,
            CheckStatus::Stale,
            format!(
                "stale core flag: torch.cuda.has_magma is False but {lazy_name} contains MAGMA{runtime_text}"
            ),
            Some(format!(
                "MAGMA is present and 2.11's default heuristics use it, but users and test suites are told it is absent: preferred_linalg_library(\"magma\") raises (and, storing before it checks, leaves MAGMA selected anyway), MAGMA tests are skipped, and torch.__config__.show() omits it. Measured remedy: ask the loaded library ({RUNTIME_TEST})."
            )),
        ),
        _ => unreachable!(),
    }
}

/// Is the variant what its name says? `magma` must carry the payload and `nomagma` must not, by
/// the rule `verify-variant` applies ([`crate::analysis::payload::Presence::rule`]), judged from the facts
/// recorded about the library the variant loaded, so `--replay` applies it to old recordings too.
pub fn identity_check(
    variant: &str,
    dep: &str,
    emulated: bool,
    presence: Option<&crate::analysis::payload::Presence>,
    contract_failures: Option<&[String]>,
    lazy_name: &str,
) -> SmokeCheck {
    let Some(with_payload) = crate::analysis::payload::variant_carries(variant, dep) else {
        return check(
            CheckName::Identity,
            CheckStatus::NotApplicable,
            format!("not applicable: the variant name {variant:?} is neither {dep} nor no{dep}"),
            None,
        );
    };
    if emulated {
        return check(
            CheckName::Identity,
            CheckStatus::NotApplicable,
            format!(
                "not applicable: emulated (runs the {dep} installation with cuSOLVER forced; its library is the {dep} build by design)"
            ),
            None,
        );
    }
    let Some(p) = presence else {
        return check(
            CheckName::Identity,
            CheckStatus::Fail,
            format!(
                "could not tell whether {lazy_name} is the {variant} build (library not found or unreadable)"
            ),
            None,
        );
    };
    let rules = p.rule(with_payload);
    let failed: Vec<String> = rules
        .iter()
        .filter(|r| !r.pass)
        .map(|r| format!("{}: {}", r.name, r.detail))
        .collect();
    // What the stock file does for the core (exports, registrations at load, lookups): a library
    // without MAGMA that does not do it is no nomagma build either.
    if failed.is_empty()
        && let Some(contract) = contract_failures.filter(|c| !c.is_empty())
    {
        return check(
            CheckName::Identity,
            CheckStatus::Fail,
            format!(
                "variant {variant:?} but {lazy_name} is not a {variant} build of this torch, by the rule verify-variant applies: {}",
                contract.join("; ")
            ),
            Some(format!(
                "the library does not provide, register or export what the stock {lazy_name} does: the calls PyTorch routes to it fail (or, for the unguarded wrappers, reload forever)"
            )),
        );
    }
    if failed.is_empty() {
        let said: Vec<&str> = rules.iter().map(|r| r.name).collect();
        return check(
            CheckName::Identity,
            CheckStatus::Pass,
            format!("{lazy_name} is a {variant} build ({})", said.join("; ")),
            None,
        );
    }
    check(
        CheckName::Identity,
        CheckStatus::Fail,
        format!(
            "variant {variant:?} but {lazy_name} is {} build, by the rule verify-variant applies: {}",
            if with_payload {
                format!("not a {dep}")
            } else {
                format!("a {dep}")
            },
            failed.join("; ")
        ),
        Some(format!(
            "this run does not test the {variant} variant: every result above describes the other build. Point --variant {variant}= at an installation whose {lazy_name} is the {variant} build"
        )),
    )
}

fn py(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The device-code check as reported: [`device_code_check`]'s answer, or "not checked" when it
/// had none to give (the lazy library not found, no library beside it with device code, or a
/// device whose compute capability is not known).
pub fn device_code_check_report(result: Option<DeviceCheck>) -> SmokeCheck {
    match result {
        None => check(
            CheckName::DeviceCode,
            CheckStatus::NotChecked,
            "not checked: no library with device code found beside the lazy library, or the device's compute capability is unknown",
            None,
        ),
        Some(d) => SmokeCheck {
            name: CheckName::DeviceCode,
            status: d.status,
            detail: d.detail,
            consequence: d.consequence,
        },
    }
}

/// The result of checking a variant's CUDA libraries for code that runs on the device.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceCheck {
    /// `pass` unless a library of the variant's own has no code for the device, or a library could
    /// not be read.
    pub status: CheckStatus,
    /// What was found, in one line.
    pub detail: String,
    /// Which of the variant's own libraries have no code for the device, and what that means (their
    /// kernels fail to launch); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consequence: Option<String>,
    /// Per library: which SASS and PTX targets it carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryDeviceCode>,
}

/// The device code of one library that carries any.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibraryDeviceCode {
    /// The library's path, as found in the variant's installation.
    pub file: String,
    /// SASS architectures, e.g. `sm_90`.
    pub sass: Vec<String>,
    /// PTX virtual architectures, e.g. `compute_90`.
    pub ptx: Vec<String>,
    /// SASS for the device's capability, or PTX at or below it the driver can JIT.
    pub runs_on_device: bool,
}

/// Check that every library in `libraries` that carries device code has, for each of its fat
/// binaries, SASS for `sm` (e.g. `sm_90`) or PTX the driver can JIT for it (`splitpkg::fatbin`
/// reads the headers only). Libraries without `.nv_fatbin` are skipped; `None` when none has any.
///
/// Only the variant's own libraries (`own`: torch's own files, by canonical path; `None` judges
/// every one) are judged: CUDA dependencies — the `nvidia-*` wheels, or in a conda environment the
/// CUDA packages' files beside torch's in `$PREFIX/lib` — are reported alongside.
pub fn device_code_check(
    libraries: &[PathBuf],
    own: Option<&std::collections::BTreeSet<PathBuf>>,
    sm: &str,
) -> Option<DeviceCheck> {
    let device: crate::fatbin::Capability = sm.parse().ok()?;
    let mut found = DeviceCodeFindings::default();
    for lib in libraries {
        found.examine(lib, own, device, sm);
    }
    found.into_check(sm)
}

/// What [`device_code_check`] found in the libraries it read.
#[derive(Default)]
struct DeviceCodeFindings {
    libraries: Vec<LibraryDeviceCode>,
    /// The variant's own libraries with no code for the device.
    failing: Vec<String>,
    /// Libraries with code for the device in some of their fat binaries only.
    partial: Vec<String>,
    /// Dependencies whose registered device code has nothing for the device.
    stubs: Vec<String>,
    unreadable: Vec<String>,
}

fn file_name(lib: &std::path::Path) -> String {
    lib.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl DeviceCodeFindings {
    /// Read one library's fat binaries (none: skipped) and file what they hold for `device`.
    fn examine(
        &mut self,
        lib: &std::path::Path,
        own: Option<&std::collections::BTreeSet<PathBuf>>,
        device: crate::fatbin::Capability,
        sm: &str,
    ) {
        use crate::fatbin::{self, Kind, Runs};
        let Ok(map) = crate::input::map_file(lib) else {
            return;
        };
        let Ok(view) = crate::elf::ElfView::parse(&map) else {
            return;
        };
        let summary = match fatbin::read(&view) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                self.unreadable.push(format!("{}: {e}", lib.display()));
                return;
            }
        };
        let verdict = fatbin::device_check(&summary, device);
        let names = |kind: Kind| -> Vec<String> {
            let mut v: Vec<String> = summary
                .targets
                .iter()
                .filter(|t| t.kind == kind)
                .map(|t| t.name.clone())
                .collect();
            v.dedup();
            v
        };
        // A library runs on the device when some of its fat binaries have SASS or PTX for it:
        // cuBLAS, cuDNN and friends ship arch-specific kernels in containers of their own (an
        // sm_100a-only container is never launched on sm_90), so "every container" is too strict.
        let runs = verdict.sass + verdict.jit > 0;
        let own = own.is_none_or(|o| std::fs::canonicalize(lib).is_ok_and(|c| o.contains(&c)));
        if !runs && !own {
            // A CUDA dependency wheel: some (cuFFT) register only a stub fat binary and load their
            // kernels by other means, so its registered device code is reported, not judged.
            self.stubs.push(format!(
                "{} ({} fat binaries, none for {sm})",
                file_name(lib),
                verdict.containers
            ));
        }
        if runs && verdict.runs == Runs::No {
            self.partial.push(format!(
                "{} ({} of {} fat binaries have no code for {sm}: kernels for other GPUs)",
                file_name(lib),
                verdict.none,
                verdict.containers
            ));
        }
        if !runs && own {
            self.failing.push(file_name(lib));
        }
        self.libraries.push(LibraryDeviceCode {
            file: lib.display().to_string(),
            sass: names(Kind::Elf),
            ptx: names(Kind::Ptx)
                .into_iter()
                .map(|n| n.replacen("sm_", "compute_", 1))
                .collect(),
            runs_on_device: runs,
        });
    }

    /// The check: a failure when an own library has no code for `sm` or a library is unreadable.
    fn into_check(self, sm: &str) -> Option<DeviceCheck> {
        let out = self.libraries;
        let (failing, partial, stubs, unreadable) =
            (self.failing, self.partial, self.stubs, self.unreadable);
        if out.is_empty() && unreadable.is_empty() {
            return None;
        }
        let status = if failing.is_empty() && unreadable.is_empty() {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        };
        let detail = format!(
            "{} of {} libraries with device code carry SASS or PTX for {sm}{}{}{}",
            out.iter().filter(|l| l.runs_on_device).count(),
            out.len(),
            if partial.is_empty() {
                String::new()
            } else {
                format!("; arch-specific kernels elsewhere: {}", partial.join(", "))
            },
            if stubs.is_empty() {
                String::new()
            } else {
                format!(
                    "; dependencies whose registered device code has nothing for {sm} (not judged: they may load kernels otherwise): {}",
                    stubs.join(", ")
                )
            },
            if unreadable.is_empty() {
                String::new()
            } else {
                format!("; unreadable: {}", unreadable.join("; "))
            }
        );
        let consequence = (!failing.is_empty())
            .then(|| format!("kernels in {} have neither SASS for {sm} nor PTX to JIT: they fail to launch on this GPU", failing.join(", ")));
        Some(DeviceCheck {
            status,
            detail,
            consequence,
            libraries: out,
        })
    }
}
