//! `report`: one self-contained page (HTML or Markdown) that answers "should this package split
//! out MAGMA?" from the documents the other commands write — a plan, a smoke run, a fatbin scan and
//! a pack report — any of which may be missing (the page then says what is not known).
//!
//! The smoke, fatbin and pack documents are read through small typed views ([`SmokeDoc`],
//! [`FatbinDoc`], [`PackDoc`]) rather than the owning stages' types: those live behind the `gpu`
//! and `channel` features or only serialise, and a report must work in any build. The plan is read
//! as the analysis stage's own [`Plan`].
//!
//! Everything rendered is a pure function of the inputs: nothing about "now" or the machine
//! running `report`, and every list is sorted, so the same inputs give the same bytes.

pub mod html;
pub mod md;
pub mod svg;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::analysis::plan::{self, Plan, Role};
use crate::analysis::verdict::{Verdict, WarningKind};
use crate::error::{Error, Result};

pub const SMOKE_SCHEMA: &str = "splitpkg-smoke";
pub const FATBIN_SCHEMA: &str = "splitpkg-fatbin";
pub const PACK_SCHEMA: &str = "splitpkg-pack";

/// A slim/full time ratio within this factor of 1 counts as unchanged (run-to-run noise of the
/// recorded medians is a few percent).
pub const SAME_WITHIN: f64 = 1.10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Md,
}

/// The input files; any may be absent.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    pub plan: Option<PathBuf>,
    pub smoke: Option<PathBuf>,
    pub fatbin: Option<PathBuf>,
    pub pack: Option<PathBuf>,
}

/// A document and the name it is shown under (its path as given).
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    pub file: String,
    pub doc: T,
}

/// What the provenance table says where a document lacks a field.
pub const NOT_RECORDED: &str = "not recorded in the document";
/// Deterministic documents (plan, fatbin, pack) carry a date only when made with `SOURCE_DATE_EPOCH`.
pub const NO_DATE: &str =
    "not recorded (deterministic output; set SOURCE_DATE_EPOCH to record one)";

/// The `tool` object every document records.
pub use crate::provenance::Tool as ToolView;

// ---- smoke (a view of smoke::SmokeReport, schema versions 1 and 2) ----

#[derive(Debug, Clone, Deserialize)]
pub struct SmokeDoc {
    pub schema: String,
    pub schema_version: u32,
    pub tool: ToolView,
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub options: SmokeOptions,
    #[serde(default)]
    pub device: Option<DeviceView>,
    #[serde(default)]
    pub variants: Vec<VariantView>,
    #[serde(default, deserialize_with = "one_or_many")]
    pub bench: Vec<BenchView>,
    #[serde(default)]
    pub default_routing: Vec<RoutingView>,
    #[serde(default)]
    pub result: Option<SmokeResult>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SmokeOptions {
    #[serde(default = "default_dep")]
    pub dep: String,
    #[serde(default)]
    pub emulate: Vec<String>,
    #[serde(default)]
    pub bench: bool,
}

impl Default for SmokeOptions {
    fn default() -> Self {
        SmokeOptions {
            dep: default_dep(),
            emulate: Vec::new(),
            bench: false,
        }
    }
}

fn default_dep() -> String {
    "magma".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmokeResult {
    Ok,
    OkStaleFlag,
    Fail,
}

impl SmokeResult {
    /// How both page formats name the result (as `smoke`'s own text does).
    pub fn label(result: Option<SmokeResult>) -> &'static str {
        match result {
            Some(SmokeResult::Ok) => "OK",
            Some(SmokeResult::OkStaleFlag) => "OK, STALE CORE FLAG",
            Some(SmokeResult::Fail) => "FAIL",
            None => "not recorded",
        }
    }
}

/// A byte count as both page formats print it: `51.1 MiB (53,532,193 B)`.
pub(crate) fn bytes(n: u64) -> String {
    format!(
        "{} ({} B)",
        crate::output::human_bytes(n),
        crate::output::thousands(n)
    )
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct DeviceView {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub sm: Option<String>,
    #[serde(default)]
    pub driver_cuda: Option<String>,
    #[serde(default)]
    pub driver_version: Option<u64>,
    /// The driver's own version (`580.159.04`); smoke JSON written before it was recorded lacks it.
    #[serde(default)]
    pub driver: Option<String>,
}

impl DeviceView {
    /// `driver 580.159.04 (CUDA 13.0)`. `driver_version` (13000) is the CUDA API version the driver
    /// supports, never shown as the driver's: without `driver` the line says it was not recorded.
    pub fn driver_text(&self) -> String {
        let cuda = self.driver_cuda.clone().or_else(|| {
            self.driver_version
                .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10))
        });
        let cuda = cuda.map(|c| format!(" (CUDA {c})")).unwrap_or_default();
        match &self.driver {
            Some(d) => format!("driver {d}{cuda}"),
            None => format!("driver version not recorded{cuda}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmokeMode {
    Real,
    EmulatedNomagma,
}

#[derive(Debug, Clone, Deserialize)]
pub struct VariantView {
    pub name: String,
    #[serde(default)]
    pub path: String,
    pub mode: SmokeMode,
    #[serde(default)]
    pub emulated: bool,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub probe: Option<serde_json::Value>,
    #[serde(default)]
    pub probe_error: Option<String>,
    #[serde(default)]
    pub lazy_library: Option<LazyView>,
    #[serde(default)]
    pub checks: Vec<CheckView>,
    #[serde(default)]
    pub cases: Vec<CaseView>,
    #[serde(default)]
    pub summary: Option<CountsView>,
}

impl VariantView {
    /// Emulated by either field (a hand-edited document may set only one): never shown as real.
    pub fn is_emulated(&self) -> bool {
        self.emulated || self.mode == SmokeMode::EmulatedNomagma
    }

    fn probe_str(&self, key: &str) -> Option<String> {
        self.probe.as_ref()?.get(key)?.as_str().map(str::to_string)
    }

    pub fn torch_version(&self) -> Option<String> {
        self.probe_str("torch_version")
    }

    pub fn probe_has_magma(&self) -> Option<bool> {
        self.probe.as_ref()?.get("has_magma")?.as_bool()
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct LazyView {
    pub size: u64,
    #[serde(default)]
    pub has_magma: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckStatus {
    Pass,
    Fail,
    Stale,
    NotApplicable,
    NotChecked,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CheckView {
    pub name: String,
    pub status: CheckStatus,
    #[serde(default)]
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseStatus {
    Pass,
    Fail,
    ExpectedFail,
    Timeout,
    Excluded,
}

impl CaseStatus {
    fn label(self) -> &'static str {
        match self {
            CaseStatus::Pass => "pass",
            CaseStatus::Fail => "FAIL",
            CaseStatus::ExpectedFail => "expected-fail",
            CaseStatus::Timeout => "TIMEOUT",
            CaseStatus::Excluded => "excluded",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct CaseView {
    pub id: String,
    pub op: String,
    #[serde(default)]
    pub preference: String,
    pub status: CaseStatus,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CountsView {
    #[serde(default)]
    pub cases: usize,
    #[serde(default)]
    pub pass: usize,
    #[serde(default)]
    pub fail: usize,
    #[serde(default)]
    pub expected_fail: usize,
    #[serde(default)]
    pub timeout: usize,
    #[serde(default)]
    pub excluded: usize,
    #[serde(default)]
    pub checks_failed: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchView {
    pub variant: String,
    #[serde(default)]
    pub emulated: bool,
    #[serde(default)]
    pub reps: u32,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub rows: Vec<BenchRowView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BenchRowView {
    pub op: String,
    pub size: String,
    pub dtype: String,
    #[serde(default)]
    pub results: BTreeMap<String, CellView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CellView {
    #[serde(default)]
    pub median_ms: Option<f64>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RoutingView {
    pub op: String,
    pub size: String,
    pub dtype: String,
    #[serde(default)]
    pub median_ms: BTreeMap<String, Option<f64>>,
    #[serde(default)]
    pub slim_over_full: Option<f64>,
}

/// `bench` as recorded by smoke schema version 1 (one object or null) or 2 (a list).
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<BenchView>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(BenchView),
        Many(Vec<BenchView>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(b)) => vec![b],
        Some(OneOrMany::Many(v)) => v,
    })
}

// ---- fatbin (a view of fatbin::scan::FatbinReport) ----

#[derive(Debug, Clone, Deserialize)]
pub struct FatbinDoc {
    pub schema: String,
    pub schema_version: u32,
    pub tool: ToolView,
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    pub input: FatbinInput,
    #[serde(default)]
    pub cuda_runtime: Option<CudaRuntimeView>,
    #[serde(default)]
    pub libraries: Vec<FatbinLibrary>,
    pub total: FatbinTotal,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FatbinInput {
    pub path: String,
    #[serde(default)]
    pub bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CudaRuntimeView {
    pub major: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FatbinLibrary {
    pub path: String,
    pub size: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FatbinTotal {
    #[serde(default)]
    pub libraries: u64,
    pub fatbin: FatbinSummaryView,
    #[serde(default)]
    pub driver: Option<DriverView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DriverView {
    #[serde(default)]
    pub minimum: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FatbinSummaryView {
    #[serde(default)]
    pub stored: u64,
    #[serde(default)]
    pub uncompressed: u64,
    #[serde(default)]
    pub targets: Vec<TargetView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TargetView {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub stored: u64,
    #[serde(default)]
    pub uncompressed: u64,
}

// ---- pack (a view of channel::pack::PackReport) ----

#[derive(Debug, Clone, Deserialize)]
pub struct PackDoc {
    pub schema: String,
    pub schema_version: u32,
    /// Absent in documents written before pack recorded its provenance.
    #[serde(default)]
    pub tool: Option<ToolView>,
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    pub input: PackInputView,
    pub record: PackRecordView,
    #[serde(default)]
    pub standins: Vec<PackedView>,
    #[serde(default)]
    pub real_bytes: u64,
    #[serde(default)]
    pub represented_bytes: u64,
    #[serde(default)]
    pub compression_level: i32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PackInputView {
    pub path: String,
    #[serde(default)]
    pub files: usize,
    #[serde(default)]
    pub bytes: u64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PackRecordView {
    pub version: String,
    #[serde(default)]
    pub cuda_runtime: Option<u32>,
    #[serde(default)]
    pub packages: Vec<PackedView>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PackedView {
    pub file: String,
    pub name: String,
    pub role: String,
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub standin: bool,
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub represents_bytes: Option<u64>,
    #[serde(default)]
    pub archive_bytes: u64,
}

// ---- loading ----

#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub plan: Option<Loaded<Plan>>,
    pub smoke: Option<Loaded<SmokeDoc>>,
    pub fatbin: Option<Loaded<FatbinDoc>>,
    pub pack: Option<Loaded<PackDoc>>,
}

/// Read one JSON document, check its `schema` name, and deserialise it into `T`.
fn load_doc<T: serde::de::DeserializeOwned>(
    path: &Path,
    schema: &str,
    what: &str,
) -> Result<Loaded<T>> {
    let file = path.display().to_string();
    let text = crate::input::file::read_text(
        path,
        crate::input::file::Links::Follow,
        crate::input::file::MAX_DOCUMENT_BYTES,
        what,
    )?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::bad(&file, format!("not JSON: {e}")))?;
    if value.get("schema").and_then(|s| s.as_str()) != Some(schema) {
        return Err(Error::bad(
            &file,
            format!("not a splitpkg {what} (no \"schema\": \"{schema}\")"),
        ));
    }
    let doc = serde_json::from_value(value)
        .map_err(|e| Error::bad(&file, format!("malformed {what}: {e}")))?;
    Ok(Loaded { file, doc })
}

/// Read every given input, then refuse inputs that come from different trees.
pub fn load(paths: &Paths) -> Result<Inputs> {
    let plan: Option<Loaded<Plan>> = paths
        .plan
        .as_deref()
        .map(|p| load_doc(p, plan::SCHEMA_NAME, "plan"))
        .transpose()?;
    if let Some(p) = &plan
        && p.doc.schema_version != plan::SCHEMA_VERSION
    {
        return Err(Error::bad(
            &p.file,
            format!("plan schema_version is not {}", plan::SCHEMA_VERSION),
        ));
    }
    let inputs = Inputs {
        plan,
        smoke: paths
            .smoke
            .as_deref()
            .map(|p| load_doc(p, SMOKE_SCHEMA, "smoke report"))
            .transpose()?,
        fatbin: paths
            .fatbin
            .as_deref()
            .map(|p| load_doc(p, FATBIN_SCHEMA, "fatbin report"))
            .transpose()?,
        pack: paths
            .pack
            .as_deref()
            .map(|p| load_doc(p, PACK_SCHEMA, "pack report"))
            .transpose()?,
    };
    check_same_tree(&inputs)?;
    Ok(inputs)
}

// ---- tree identity ----

/// A fact about the tree a document was made from, comparable across documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fact {
    /// torch's public version (`2.11.0`, without the local `+cu130`).
    TorchVersion,
    /// Major version of the CUDA runtime.
    CudaMajor,
    /// Bytes of the lazy library of the payload (magma) variant.
    LazyWithPayload,
    /// Bytes of the lazy library as it is in the tree itself.
    LazyInTree,
    /// Files and bytes of the whole tree.
    TreeBytes,
}

impl Fact {
    fn what(self) -> &'static str {
        match self {
            Fact::TorchVersion => "torch",
            Fact::CudaMajor => "CUDA runtime major",
            Fact::LazyWithPayload => "bytes of the lazy library with the payload",
            Fact::LazyInTree => "bytes of the tree's lazy library",
            Fact::TreeBytes => "tree files/bytes",
        }
    }
}

fn public_version(v: &str) -> String {
    v.split('+').next().unwrap_or(v).trim().to_string()
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Every fact each document carries, in input order (plan, smoke, fatbin, pack).
fn facts(inputs: &Inputs) -> Vec<(String, Fact, String)> {
    let mut out = Vec::new();
    if let Some(p) = &inputs.plan {
        let f = &p.file;
        if let Some(pkg) = &p.doc.input.package {
            out.push((f.clone(), Fact::TorchVersion, public_version(&pkg.version)));
        }
        if let Some(c) = p.doc.input.cuda_runtime {
            out.push((f.clone(), Fact::CudaMajor, c.to_string()));
        }
        if let Some(lazy) = p.doc.outputs.iter().find(|o| o.role == Role::Lazy)
            && let Some(v) = lazy.variants.iter().find(|v| v.measured)
        {
            out.push((f.clone(), Fact::LazyInTree, v.bytes.to_string()));
            if v.with_payload {
                out.push((f.clone(), Fact::LazyWithPayload, v.bytes.to_string()));
            }
        }
        out.push((
            f.clone(),
            Fact::TreeBytes,
            format!("{} files, {} bytes", p.doc.input.files, p.doc.input.bytes),
        ));
    }
    if let Some(s) = &inputs.smoke {
        let f = &s.file;
        let real: Vec<&VariantView> = s.doc.variants.iter().filter(|v| !v.is_emulated()).collect();
        let mut versions: BTreeSet<String> = BTreeSet::new();
        for v in &s.doc.variants {
            if let Some(t) = v.torch_version() {
                versions.insert(public_version(&t));
            }
        }
        for t in versions {
            out.push((f.clone(), Fact::TorchVersion, t));
        }
        let mut cudas: BTreeSet<String> = BTreeSet::new();
        for v in &s.doc.variants {
            if let Some(c) = v.probe_str("cuda_version") {
                cudas.insert(c.split('.').next().unwrap_or(&c).to_string());
            }
        }
        for c in cudas {
            out.push((f.clone(), Fact::CudaMajor, c));
        }
        if let Some(v) = real.iter().find(|v| v.name == s.doc.options.dep)
            && let Some(l) = &v.lazy_library
        {
            out.push((f.clone(), Fact::LazyWithPayload, l.size.to_string()));
        }
    }
    if let Some(fb) = &inputs.fatbin {
        let f = &fb.file;
        if let Some(c) = &fb.doc.cuda_runtime {
            out.push((f.clone(), Fact::CudaMajor, c.major.to_string()));
        }
        let lazy = inputs
            .plan
            .as_ref()
            .map(|p| file_name(&p.doc.options.lazy).to_string());
        if let Some(lazy) = lazy
            && let Some(l) = fb.doc.libraries.iter().find(|l| file_name(&l.path) == lazy)
        {
            out.push((f.clone(), Fact::LazyInTree, l.size.to_string()));
        }
    }
    if let Some(pk) = &inputs.pack {
        let f = &pk.file;
        out.push((
            f.clone(),
            Fact::TorchVersion,
            public_version(&pk.doc.record.version),
        ));
        if let Some(c) = pk.doc.record.cuda_runtime {
            out.push((f.clone(), Fact::CudaMajor, c.to_string()));
        }
        out.push((
            f.clone(),
            Fact::TreeBytes,
            format!("{} files, {} bytes", pk.doc.input.files, pk.doc.input.bytes),
        ));
    }
    out
}

/// The first document stating a fact is the reference; a later one that states it differently
/// comes from another tree, and is named in a one-line refusal (exit 2).
fn check_same_tree(inputs: &Inputs) -> Result<()> {
    let mut first: BTreeMap<Fact, (String, String)> = BTreeMap::new();
    for (file, fact, value) in facts(inputs) {
        match first.get(&fact) {
            None => {
                first.insert(fact, (file, value));
            }
            Some((ref_file, ref_value)) if ref_file != &file && ref_value != &value => {
                return Err(Error::bad(
                    &file,
                    format!(
                        "from a different tree than {ref_file}: {} {value} here, {ref_value} there; refusing to mix them in one report",
                        fact.what()
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

// ---- the model ----

/// Whether the package should (can) split out the payload, from what the inputs show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Confined, and a real slim variant passed its smoke run.
    Yes,
    /// Confined, but no real slim variant was run (none, or only EMULATED).
    YesUntested,
    /// Confined, but the smoke run recorded failures.
    SlimBroken,
    /// The payload is reachable eagerly (or not there): no split.
    No,
    /// No plan: nothing is known about confinement.
    Unknown,
}

impl Answer {
    pub fn headline(self) -> &'static str {
        match self {
            Answer::Yes => {
                "YES: the payload is confined to a lazily loaded library and a real slim variant works"
            }
            Answer::YesUntested => {
                "YES, UNTESTED: the payload is confined, but no real slim variant was smoke-tested"
            }
            Answer::SlimBroken => {
                "NOT YET: the payload is confined, but the smoke run recorded failures"
            }
            Answer::No => "NO: the payload is not confined to a lazily loaded library",
            Answer::Unknown => "NOT KNOWN: no plan was given, so confinement is not known",
        }
    }
}

/// How the slim variant's default routing compares with the full one for a timed op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Slower,
    Faster,
    Same,
    /// The op failed (no timing) on one of the variants.
    Failed,
}

impl Change {
    pub fn label(self) -> &'static str {
        match self {
            Change::Slower => "slower",
            Change::Faster => "faster",
            Change::Same => "same",
            Change::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RoutingLine {
    pub item: String,
    pub full_ms: Option<f64>,
    pub slim_ms: Option<f64>,
    pub ratio: Option<f64>,
    pub change: Change,
}

/// One bar of the magma vs cuSOLVER chart.
#[derive(Debug, Clone)]
pub struct BackendLine {
    pub item: String,
    pub magma_ms: Option<f64>,
    pub cusolver_ms: Option<f64>,
    /// magma / cuSOLVER (above 1: MAGMA slower).
    pub ratio: Option<f64>,
    pub magma_error: Option<String>,
}

impl BackendLine {
    /// The magma time cell: `failed` when the case raised (its error has a column of its own, so
    /// a long message never takes the place of a number).
    pub fn magma_cell(&self) -> String {
        if self.magma_error.is_some() {
            "failed".into()
        } else {
            fmt_ms(self.magma_ms)
        }
    }
}

/// An architecture name's sort key: its number as a number (`sm_75` before `sm_100`), then the
/// rest (`sm_90` before `sm_90a`).
pub(crate) fn arch_key(name: &str) -> (String, u64, String) {
    let (kind, rest) = name.split_once('_').unwrap_or(("", name));
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (
        kind.to_string(),
        rest[..digits].parse().unwrap_or(u64::MAX),
        rest[digits..].to_string(),
    )
}

/// One bar of the bytes chart.
#[derive(Debug, Clone)]
pub struct ByteBar {
    pub label: String,
    pub bytes: u64,
    /// Measured in the tree/environment, or estimated (the plan's other variant).
    pub measured: bool,
}

/// An op that works in the full variant and not in the slim one, by preference.
#[derive(Debug, Clone)]
pub struct LostOp {
    pub op: String,
    pub preference: String,
    pub cases: usize,
    pub example_reason: String,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub variant: String,
    pub emulated: bool,
    pub what: String,
    pub status: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct VariantLine {
    pub name: String,
    pub emulated: bool,
    pub note: Option<String>,
    pub torch: Option<String>,
    pub lazy_bytes: Option<u64>,
    pub lazy_has_magma: Option<bool>,
    pub counts: CountsView,
    pub checks: Vec<CheckView>,
}

#[derive(Debug, Clone)]
pub struct Provenance {
    pub input: &'static str,
    pub file: String,
    pub schema: String,
    pub tool: Option<String>,
    pub command: Option<String>,
    /// The date, or why there is none ([`NO_DATE`], [`NOT_RECORDED`]).
    pub date: String,
}

/// Everything the page shows, computed once; `html` and `md` only lay it out.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub answer: Answer,
    pub dep: String,
    pub slim: String,
    /// Bytes a slim environment does not install: (bytes, of environment bytes, how).
    pub saving: Option<Saving>,
    pub byte_bars: Vec<ByteBar>,
    pub payload_static_in_lazy: Option<u64>,
    pub platform: Option<String>,
    pub lost_default: Vec<LostOp>,
    pub lost_explicit: Vec<LostOp>,
    pub slim_smoke: SlimSmoke,
    pub routing: Vec<RoutingLine>,
    pub backend: Vec<BackendLine>,
    pub fatbin_bars: Vec<(String, u64)>,
    pub fatbin_total: Option<(u64, u64, Option<String>)>,
    pub verdict: Option<Verdict>,
    pub reasons: Vec<String>,
    pub witnesses: Vec<String>,
    pub lazy_edges: Vec<String>,
    pub core_state_warnings: Vec<(String, String)>,
    pub other_warnings: Vec<(String, String)>,
    pub contract: Option<String>,
    pub variants: Vec<VariantLine>,
    pub smoke_result: Option<SmokeResult>,
    pub failures: Vec<Failure>,
    pub packages: Vec<(String, String, u64, u64)>,
    pub provenance: Vec<Provenance>,
    pub unknown: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Saving {
    pub bytes: u64,
    pub env_bytes: u64,
    pub percent: f64,
    pub how: String,
}

/// What the smoke run says about the slim variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlimSmoke {
    Real,
    Emulated,
    NotRun,
    NoSmoke,
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

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3} ms"))
        .unwrap_or_else(|| "—".into())
}

pub fn fmt_ms(v: Option<f64>) -> String {
    ms(v)
}

pub fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}×")
}

pub fn build(inputs: &Inputs) -> Report {
    let plan = inputs.plan.as_ref().map(|p| &p.doc);
    let smoke = inputs.smoke.as_ref().map(|s| &s.doc);
    let dep = plan
        .map(|p| p.options.dep.clone())
        .or_else(|| smoke.map(|s| s.options.dep.clone()))
        .unwrap_or_else(default_dep);
    let slim = crate::analysis::payload::slim_variant(&dep);
    let mut unknown = Vec::new();

    let title = match plan.and_then(|p| p.input.package.as_ref()) {
        Some(pkg) => format!("{} {}", pkg.name, pkg.version),
        None => plan
            .map(|p| file_name(&p.input.path).to_string())
            .unwrap_or_else(|| "package".into()),
    };

    // Variants as the smoke run saw them.
    let mut variants: Vec<VariantLine> = smoke
        .map(|s| {
            s.variants
                .iter()
                .map(|v| VariantLine {
                    name: v.name.clone(),
                    emulated: v.is_emulated(),
                    note: v.note.clone(),
                    torch: v.torch_version(),
                    lazy_bytes: v
                        .lazy_library
                        .as_ref()
                        .filter(|_| !v.is_emulated())
                        .map(|l| l.size),
                    lazy_has_magma: v.lazy_library.as_ref().and_then(|l| l.has_magma),
                    counts: v.summary.clone().unwrap_or_default(),
                    checks: {
                        let mut c = v.checks.clone();
                        c.sort_by(|a, b| a.name.cmp(&b.name));
                        c
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    variants.sort_by(|a, b| a.name.cmp(&b.name));
    let slim_variant = smoke.and_then(|s| s.variants.iter().find(|v| v.name == slim));
    let full_variant = smoke.and_then(|s| {
        s.variants
            .iter()
            .find(|v| v.name == dep && !v.is_emulated())
    });
    let slim_smoke = match (smoke, slim_variant) {
        (None, _) => SlimSmoke::NoSmoke,
        (Some(_), None) => SlimSmoke::NotRun,
        (Some(_), Some(v)) if v.is_emulated() => SlimSmoke::Emulated,
        (Some(_), Some(_)) => SlimSmoke::Real,
    };

    // Failures: every case and check that did not meet its expectation, in every variant.
    let mut failures = Vec::new();
    if let Some(s) = smoke {
        for v in &s.variants {
            for c in &v.cases {
                if matches!(c.status, CaseStatus::Fail | CaseStatus::Timeout) {
                    failures.push(Failure {
                        variant: v.name.clone(),
                        emulated: v.is_emulated(),
                        what: format!("case {}", c.id),
                        status: c.status.label().into(),
                        reason: c.reason.clone(),
                    });
                }
            }
            for c in &v.checks {
                if c.status == CheckStatus::Fail {
                    failures.push(Failure {
                        variant: v.name.clone(),
                        emulated: v.is_emulated(),
                        what: format!("check {}", c.name),
                        status: "FAIL".into(),
                        reason: c.detail.clone(),
                    });
                }
            }
            if let Some(e) = &v.probe_error {
                failures.push(Failure {
                    variant: v.name.clone(),
                    emulated: v.is_emulated(),
                    what: "probe".into(),
                    status: "FAIL".into(),
                    reason: e.clone(),
                });
            }
        }
    }
    failures.sort_by(|a, b| (&a.variant, &a.what).cmp(&(&b.variant, &b.what)));
    let smoke_failed =
        smoke.is_some_and(|s| s.result == Some(SmokeResult::Fail)) || !failures.is_empty();

    // Ops lost in the slim variant: a case id that passes in the full variant and does not in
    // the slim one. Only a real slim variant can lose anything (an emulated one forces cuSOLVER on
    // the full installation).
    let (mut lost_default, mut lost_explicit) = (Vec::new(), Vec::new());
    if let (Some(full), Some(sv)) = (full_variant, slim_variant.filter(|v| !v.is_emulated())) {
        let full_ok: BTreeSet<&str> = full
            .cases
            .iter()
            .filter(|c| c.status == CaseStatus::Pass)
            .map(|c| c.id.as_str())
            .collect();
        let mut lost: BTreeMap<(String, String), (usize, String)> = BTreeMap::new();
        for c in &sv.cases {
            if full_ok.contains(c.id.as_str())
                && c.status != CaseStatus::Pass
                && c.status != CaseStatus::Excluded
            {
                let e = lost
                    .entry((c.op.clone(), c.preference.clone()))
                    .or_insert((0, c.reason.clone()));
                e.0 += 1;
            }
        }
        for ((op, preference), (cases, example_reason)) in lost {
            let l = LostOp {
                op,
                preference: preference.clone(),
                cases,
                example_reason,
            };
            if preference == "default" {
                lost_default.push(l)
            } else {
                lost_explicit.push(l)
            }
        }
    }

    // Default routing: the slim variant's default time over the full one's, real variants only.
    let mut routing: Vec<RoutingLine> = smoke
        .map(|s| {
            s.default_routing
                .iter()
                .map(|r| {
                    let full_ms = r.median_ms.get(&dep).copied().flatten();
                    let slim_ms = r.median_ms.get(&slim).copied().flatten();
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
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    routing.sort_by(|a, b| a.item.cmp(&b.item));

    // magma vs cuSOLVER under explicit preferences, from the real full variant's bench.
    let mut backend: Vec<BackendLine> = smoke
        .and_then(|s| s.bench.iter().find(|b| b.variant == dep && !b.emulated))
        .map(|b| {
            b.rows
                .iter()
                .map(|r| {
                    let m = r.results.get("magma");
                    let c = r.results.get("cusolver");
                    let magma_ms = m.and_then(|c| c.median_ms);
                    let cusolver_ms = c.and_then(|c| c.median_ms);
                    let ratio = match (magma_ms, cusolver_ms) {
                        (Some(a), Some(b)) if b > 0.0 && a > 0.0 => Some(a / b),
                        _ => None,
                    };
                    BackendLine {
                        item: format!("{} {} {}", r.op, r.size, r.dtype),
                        magma_ms,
                        cusolver_ms,
                        ratio,
                        magma_error: m.and_then(|c| c.error.clone()),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    backend.sort_by(|a, b| a.item.cmp(&b.item));

    let platform = smoke.map(|s| {
        let d = s.device.clone().unwrap_or_default();
        let torch: BTreeSet<String> = s
            .variants
            .iter()
            .filter_map(|v| v.torch_version())
            .collect();
        format!(
            "{} ({}), {}, torch {}",
            d.name.clone().unwrap_or_else(|| "GPU not recorded".into()),
            d.sm.clone().unwrap_or_else(|| "sm not recorded".into()),
            d.driver_text(),
            if torch.is_empty() {
                "not recorded".into()
            } else {
                torch.into_iter().collect::<Vec<_>>().join(", ")
            }
        )
    });

    // Bytes.
    let mut byte_bars = Vec::new();
    let mut payload_static_in_lazy = None;
    let mut saving = None;
    if let Some(p) = plan {
        let out = |r: Role| p.outputs.iter().find(|o| o.role == r);
        if let Some(core) = out(Role::Core) {
            byte_bars.push(ByteBar {
                label: "core".into(),
                bytes: core.bytes,
                measured: true,
            });
        }
        if let Some(lazy) = out(Role::Lazy) {
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
                byte_bars.push(ByteBar {
                    label: format!("lazy {}", v.name),
                    bytes,
                    measured: is_measured,
                });
            }
        }
        byte_bars.push(ByteBar {
            label: "payload".into(),
            bytes: out(Role::Payload).map(|o| o.bytes).unwrap_or(0),
            measured: true,
        });
        if p.payload
            .files
            .iter()
            .any(|f| f.form == crate::analysis::verdict::PayloadForm::Static)
        {
            payload_static_in_lazy = Some(
                p.saving
                    .bytes
                    .saturating_sub(out(Role::Payload).map(|o| o.bytes).unwrap_or(0)),
            );
        }
        if p.verdict == Verdict::Confined {
            // Measured saving when the slim library's real size is known; the plan's estimate otherwise.
            let full = byte_bars.iter().find(|b| b.label == format!("lazy {dep}"));
            let slim_bar = byte_bars.iter().find(|b| b.label == format!("lazy {slim}"));
            let payload_out = out(Role::Payload).map(|o| o.bytes).unwrap_or(0);
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
            let env_bytes = p.input.bytes;
            let percent = if env_bytes > 0 {
                bytes as f64 * 100.0 / env_bytes as f64
            } else {
                0.0
            };
            saving = Some(Saving {
                bytes,
                env_bytes,
                percent,
                how: format!("{how}{external_note}"),
            });
        }
    } else {
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
    if smoke.is_some() && routing.is_empty() {
        unknown.push(format!(
            "Ops slower or faster by default routing: not known (no default-routing timings of two real variants; {})",
            if slim_smoke == SlimSmoke::Emulated { "an EMULATED variant is never timed" } else { "run smoke --bench on both" }
        ));
    }
    if smoke.is_some() && backend.is_empty() {
        unknown.push(format!("Time under {dep} vs cuSOLVER: not known (no bench of a real {dep} variant; smoke --bench)."));
    }

    // Fatbin.
    let (fatbin_bars, fatbin_total) = match &inputs.fatbin {
        Some(f) => {
            let mut by: BTreeMap<((String, u64, String), String), u64> = BTreeMap::new();
            for t in &f.doc.total.fatbin.targets {
                *by.entry((arch_key(&t.name), format!("{} {}", t.name, t.kind)))
                    .or_default() += t.stored;
            }
            let bars: Vec<(String, u64)> =
                by.into_iter().map(|((_, label), b)| (label, b)).collect();
            let s = &f.doc.total.fatbin;
            (
                bars,
                Some((
                    s.stored,
                    s.uncompressed,
                    f.doc.total.driver.as_ref().and_then(|d| d.minimum.clone()),
                )),
            )
        }
        None => {
            unknown.push("Device code per architecture: not known (no --fatbin).".into());
            (Vec::new(), None)
        }
    };

    // The proof.
    let mut core_state_warnings = Vec::new();
    let mut other_warnings = Vec::new();
    let mut lazy_edges = Vec::new();
    let mut witnesses = Vec::new();
    let mut reasons = Vec::new();
    let mut contract = None;
    if let Some(p) = plan {
        for w in &p.warnings {
            let line = (w.file.clone(), format!("{} — {}", w.what, w.consequence));
            match w.kind() {
                WarningKind::CoreState => core_state_warnings.push(line),
                _ => other_warnings.push(line),
            }
        }
        core_state_warnings.sort();
        other_warnings.sort();
        // Every lazy library's edges: with several (`--lazy` repeated or a glob) the plan lists them
        // in `lazy_libraries` and `lazy_library` is absent.
        for l in p.all_lazy() {
            for s in &l.loaded_by {
                lazy_edges.push(format!("{} → {} ({})", s.from, s.to, s.how));
            }
        }
        lazy_edges.sort();
        witnesses = p.witnesses.iter().map(|w| w.summary.clone()).collect();
        witnesses.sort();
        reasons = p.reasons.clone();
        let c = &p.contract;
        let imports: usize = c.imports.iter().map(|g| g.count).sum();
        let mut lookups = c.loader_lookups.clone();
        lookups.sort();
        let mut required = c.required_exports.clone();
        required.sort();
        contract = Some(format!(
            "{} export(s); {} import(s) from {} provider(s); loader lookups: {}; exports the loader requires: {}",
            c.exports,
            imports,
            c.imports.len(),
            if lookups.is_empty() {
                "none".into()
            } else {
                lookups.join(", ")
            },
            if required.is_empty() {
                "none".into()
            } else {
                required.join(", ")
            }
        ));
    }

    // Packages.
    let mut packages = Vec::new();
    if let Some(pk) = &inputs.pack {
        for p in pk.doc.record.packages.iter().chain(pk.doc.standins.iter()) {
            let role = match (&p.variant, p.standin) {
                (_, true) => {
                    format!(
                        "stand-in (represents {}, not real bytes)",
                        crate::output::human_bytes(p.represents_bytes.unwrap_or(0))
                    )
                }
                (Some(v), false) => format!("{} {}", p.role, v),
                (None, false) => p.role.clone(),
            };
            packages.push((p.file.clone(), role, p.bytes, p.archive_bytes));
        }
        packages.sort();
        packages.dedup();
    } else {
        unknown.push("Package (.conda) sizes: not known (no --pack).".into());
    }

    let answer = match plan.map(|p| p.verdict) {
        None => Answer::Unknown,
        Some(Verdict::NotConfined | Verdict::NotPresent) => Answer::No,
        Some(Verdict::Confined) if smoke_failed => Answer::SlimBroken,
        Some(Verdict::Confined) if slim_smoke == SlimSmoke::Real => Answer::Yes,
        Some(Verdict::Confined) => Answer::YesUntested,
    };

    let provenance = provenance(inputs, &mut unknown);

    Report {
        title,
        answer,
        dep,
        slim,
        saving,
        byte_bars,
        payload_static_in_lazy,
        platform,
        lost_default,
        lost_explicit,
        slim_smoke,
        routing,
        backend,
        fatbin_bars,
        fatbin_total,
        verdict: plan.map(|p| p.verdict),
        reasons,
        witnesses,
        lazy_edges,
        core_state_warnings,
        other_warnings,
        contract,
        variants,
        smoke_result: smoke.and_then(|s| s.result),
        failures,
        packages,
        provenance,
        unknown,
    }
}

fn provenance(inputs: &Inputs, unknown: &mut Vec<String>) -> Vec<Provenance> {
    /// `deterministic`: the document is byte-identical for the same input, so it has a date only
    /// when SOURCE_DATE_EPOCH was set; a smoke run records its own, so one without predates the field.
    fn row(
        input: &'static str,
        file: &str,
        schema: (&str, u32),
        tool: Option<&ToolView>,
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
    let mut out = Vec::new();
    let mut not_given =
        |what: &str| unknown.push(format!("Provenance of the {what}: not known (not given)."));
    match &inputs.plan {
        Some(p) => {
            let d = &p.doc;
            out.push(row(
                "plan",
                &p.file,
                (&d.schema, d.schema_version),
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
            out.push(row(
                "smoke",
                &s.file,
                (&d.schema, d.schema_version),
                Some(&d.tool),
                &d.stamp,
                false,
            ))
        }
        None => not_given("smoke run"),
    }
    match &inputs.fatbin {
        Some(f) => {
            let d = &f.doc;
            out.push(row(
                "fatbin",
                &f.file,
                (&d.schema, d.schema_version),
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
            out.push(row(
                "pack",
                &p.file,
                (&d.schema, d.schema_version),
                d.tool.as_ref(),
                &d.stamp,
                true,
            ))
        }
        None => not_given("pack report"),
    }
    out
}

/// Read, check and render: the whole `report` command minus writing the file.
pub fn run(paths: &Paths, format: Format) -> Result<String> {
    if paths.plan.is_none()
        && paths.smoke.is_none()
        && paths.fatbin.is_none()
        && paths.pack.is_none()
    {
        return Err(Error::Usage(
            "report: give at least one of --plan, --smoke, --fatbin, --pack".into(),
        ));
    }
    let inputs = load(paths)?;
    let report = build(&inputs);
    Ok(match format {
        Format::Html => html::render(&report),
        Format::Md => md::render(&report),
    })
}
