//! `report`: one self-contained page (HTML or Markdown) that answers "should this package split
//! out MAGMA?" from the documents the other commands write — a plan, a smoke run, a fatbin scan and
//! a pack report — any of which may be missing (the page then says what is not known).
//!
//! Each document is read as the type its writer uses ([`crate::document`]): the plan as
//! [`Plan`], the smoke run as [`SmokeReport`], the fatbin scan as [`FatbinReport`] and the pack
//! report as [`PackReport`], all compiled in every build.
//!
//! [`build`] turns the inputs into one format-neutral model ([`Report`]); `html.rs` and `md.rs`
//! render it through the minijinja templates in `templates/report/`, and `svg.rs` draws its charts
//! with the shared [`crate::svg`] module.
//!
//! Everything rendered is a pure function of the inputs: nothing about "now" or the machine
//! running `report`, and every list is sorted, so the same inputs give the same bytes.

mod build;
pub mod html;
pub mod markdown;
pub mod md;
pub mod model;
pub mod pr;
pub mod svg;
mod template;

pub use build::build;
pub use model::{
    Answer, BackendLine, ByteBar, Change, Failure, FatbinBar, FatbinTotals, Lost, LostOp,
    PackageLine, Proof, Provenance, Report, ReportSaving, RoutingLine, SlimSmoke, VariantLine,
};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::analysis::plan::{Plan, Role};
use crate::channel::document::PackReport;
use crate::document::Document;
use crate::error::{Error, Result};
use crate::fatbin::scan::FatbinReport;
use crate::smoke::SmokeReport;

/// A slim/full time ratio within this factor of 1 counts as unchanged (run-to-run noise of the
/// recorded medians is a few percent).
pub const SAME_WITHIN: f64 = 1.10;

/// Which page `report` writes (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// A self-contained HTML page (inline SVG charts).
    Html,
    /// GitHub-flavoured Markdown.
    Md,
}

/// The input files; any may be absent.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    /// The plan (`--plan`, `splitpkg plan --json`).
    pub plan: Option<PathBuf>,
    /// The smoke run (`--smoke`, `splitpkg smoke --json`).
    pub smoke: Option<PathBuf>,
    /// The fatbin scan (`--fatbin`, `splitpkg fatbin --json`).
    pub fatbin: Option<PathBuf>,
    /// The pack report (`--pack`, `splitpkg pack --json`).
    pub pack: Option<PathBuf>,
    /// A PEP 751 lock of the planned wheel's environment (`--env-lock`): the saving is then stated
    /// against its download sizes too ([`crate::analysis::environment::from_lock`]).
    pub env_lock: Option<PathBuf>,
}

/// A document and the name it is shown under (its path as given).
#[derive(Debug, Clone)]
pub struct LoadedDocument<T> {
    /// The path as given on the command line.
    pub file: String,
    /// The document read from it.
    pub doc: T,
}

/// What the provenance table says where a document lacks a field.
pub const NOT_RECORDED: &str = "not recorded in the document";
/// Deterministic documents (plan, fatbin, pack) carry a date only when made with `SOURCE_DATE_EPOCH`.
pub const NO_DATE: &str =
    "not recorded (deterministic output; set SOURCE_DATE_EPOCH to record one)";

/// A byte count as both page formats print it: `51.1 MiB (53,532,193 B)`.
pub(crate) fn bytes(n: u64) -> String {
    format!(
        "{} ({} B)",
        crate::output::human_bytes(n),
        crate::output::thousands(n)
    )
}

// ---- loading ----

/// The documents read, each with the path it came from; None for an input not given.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The plan, when `--plan` was given.
    pub plan: Option<LoadedDocument<Plan>>,
    /// The smoke run, when `--smoke` was given.
    pub smoke: Option<LoadedDocument<SmokeReport>>,
    /// The fatbin scan, when `--fatbin` was given.
    pub fatbin: Option<LoadedDocument<FatbinReport>>,
    /// The pack report, when `--pack` was given.
    pub pack: Option<LoadedDocument<PackReport>>,
}

/// Read one document with its type's checks ([`Document::load`]).
fn load_doc<D: Document>(path: Option<&Path>) -> Result<Option<LoadedDocument<D>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let doc = D::load(path)?;
    let file = path.display().to_string();
    Ok(Some(LoadedDocument { file, doc }))
}

/// Read every given input, then refuse inputs that come from different trees.
pub fn load(paths: &Paths) -> Result<Inputs> {
    let inputs = Inputs {
        plan: load_doc(paths.plan.as_deref())?,
        smoke: load_doc(paths.smoke.as_deref())?,
        fatbin: load_doc(paths.fatbin.as_deref())?,
        pack: load_doc(paths.pack.as_deref())?,
    };
    check_same_tree(&inputs)?;
    let mut inputs = inputs;
    if let Some(lock) = &paths.env_lock {
        with_lock(&mut inputs, lock)?;
    }
    Ok(inputs)
}

/// The plan's environment figure from a lock: the plan of a wheel records what a lock is
/// compared with (its tags, its size, the saving's compressed bytes), so the page needs no tree.
fn with_lock(inputs: &mut Inputs, lock: &Path) -> Result<()> {
    let plan = inputs.plan.as_mut().ok_or_else(|| {
        Error::Usage("report: --env-lock needs --plan (the plan of the wheel it locks)".into())
    })?;
    let wheel = plan
        .doc
        .saving
        .environment
        .as_ref()
        .and_then(|e| e.wheel.clone())
        .ok_or_else(|| {
            Error::bad(
                &plan.file,
                "--env-lock needs the plan of a wheel with a saving, made by this version of `splitpkg plan` (it records the wheel's tags and compressed saving)",
            )
        })?;
    plan.doc.saving.environment = Some(crate::analysis::environment::from_lock(&wheel, lock)?);
    Ok(())
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
        let real: Vec<&crate::smoke::VariantReport> =
            s.doc.variants.iter().filter(|v| !v.is_emulated()).collect();
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

/// A time in milliseconds as the page prints it (`0.219 ms`), or `—` without one.
pub fn fmt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3} ms"))
        .unwrap_or_else(|| "—".into())
}

/// A ratio as the page prints it (`1.42×`).
pub fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}×")
}

/// Read, check and render: the whole `report` command minus writing the file.
pub fn run(paths: &Paths, format: ReportFormat) -> Result<String> {
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
        ReportFormat::Html => html::render(&report),
        ReportFormat::Md => md::render(&report),
    }
}
