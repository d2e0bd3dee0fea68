//! `report`: one self-contained page (HTML or Markdown) that answers "should this package split
//! out MAGMA?" from the documents the other commands write — a plan, a smoke run, a fatbin scan and
//! a pack report — any of which may be missing (the page then says what is not known).
//!
//! The smoke, fatbin and pack documents are read through small typed views ([`SmokeDoc`],
//! [`FatbinDoc`], [`PackDoc`]) rather than the owning stages' types: those live behind the `gpu`
//! and `channel` features or only serialise, and a report must work in any build. The plan is read
//! as the analysis stage's own [`Plan`].
//!
//! [`build`] turns the inputs into one format-neutral model ([`Report`]); `html.rs` and `md.rs`
//! render it through the minijinja templates in `templates/report/`, and `svg.rs` draws its charts
//! with the shared [`crate::svg`] module.
//!
//! Everything rendered is a pure function of the inputs: nothing about "now" or the machine
//! running `report`, and every list is sorted, so the same inputs give the same bytes.

mod build;
pub mod html;
pub mod md;
pub mod model;
pub mod svg;
mod template;

pub use build::build;
pub use model::{
    Answer, BackendLine, ByteBar, Change, Failure, FatbinBar, FatbinTotals, Lost, LostOp,
    PackageLine, Proof, Provenance, Report, RoutingLine, Saving, SlimSmoke, VariantLine,
};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::analysis::plan::{self, Plan, Role};
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

#[derive(Debug, Clone, Deserialize)]
pub struct CaseView {
    pub id: String,
    pub op: String,
    #[serde(default)]
    pub preference: Preference,
    pub status: CaseStatus,
    #[serde(default)]
    pub reason: String,
}

/// The backend a case asked for: `default` (torch's own routing) or one named explicitly
/// (`magma`, `cusolver`). Read from the document's string once, here.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(from = "String")]
pub enum Preference {
    Default,
    Backend(String),
}

/// A case that does not record its preference names none: it is not counted as the default's.
impl Default for Preference {
    fn default() -> Self {
        Preference::Backend(String::new())
    }
}

impl From<String> for Preference {
    fn from(s: String) -> Self {
        if s == "default" {
            Preference::Default
        } else {
            Preference::Backend(s)
        }
    }
}

impl std::fmt::Display for Preference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Preference::Default => f.write_str("default"),
            Preference::Backend(b) => f.write_str(b),
        }
    }
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

// ---- formatting shared by both page formats ----

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

pub fn fmt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3} ms"))
        .unwrap_or_else(|| "—".into())
}

pub fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}×")
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
    match format {
        Format::Html => html::render(&report),
        Format::Md => md::render(&report),
    }
}
