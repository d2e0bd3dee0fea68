//! The page as data: what `report` shows, computed once by [`super::build`] from the inputs and
//! laid out by the templates (`templates/report/`) as HTML or Markdown. Numbers the page prints are
//! formatted here, once, so both formats print the same figures; the few raw values kept
//! (`#[serde(skip)]`) are the ones the charts plot.

// issue 54: 97 public items still to document here.
#![allow(missing_docs)]

use serde::Serialize;

use crate::smoke::SmokeVerdict as SmokeResult;
use crate::smoke::eval::CheckStatus;

/// The rule `report`'s answer and the feedstock description apply to a saving, from conda-forge's 2024 discussion of the
/// MAGMA split (rgommers, conda-forge/pytorch-cpu-feedstock#275): 385 MB measured was not worth
/// a user-facing knob, about 600 MB is the lower end of a gray zone, 2 GB clearly worth it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Worth {
    NotWorthIt,
    GrayZone,
    WorthIt,
}

/// Lower end of the gray zone, and where a saving is clearly worth a variant (decimal bytes, as
/// the discussion's "MB" and "GB").
pub const GRAY_FROM: u64 = 600_000_000;
pub const WORTH_FROM: u64 = 2_000_000_000;

impl Worth {
    /// The rule in one sentence, with where it comes from.
    pub const RULE: &'static str = "conda-forge's 2024 rule for the MAGMA split (rgommers, conda-forge/pytorch-cpu-feedstock#275): below 600 MB not worth a user-facing variant (385 MB measured was not), 600 MB to 2 GB a gray zone, 2 GB or more worth it";

    pub fn of(bytes: u64) -> Worth {
        match bytes {
            b if b >= WORTH_FROM => Worth::WorthIt,
            b if b >= GRAY_FROM => Worth::GrayZone,
            _ => Worth::NotWorthIt,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Worth::NotWorthIt => {
                "not worth it (below 600 MB: conda-forge found 385 MB not worth a user-facing knob)"
            }
            Worth::GrayZone => "gray zone (600 MB to 2 GB)",
            Worth::WorthIt => "worth it (2 GB or more)",
        }
    }
}

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

/// How the slim variant's default routing compares with the full one for a timed op (serialised
/// as the word the page prints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
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

    /// Worth a line in the answer: the op moved (or broke), not within the noise band.
    pub fn moved(self) -> bool {
        self != Change::Same
    }
}

/// What the smoke run says about the slim variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlimSmoke {
    Real,
    Emulated,
    NotRun,
    NoSmoke,
}

/// One op timed under default routing in both real variants.
#[derive(Debug, Clone, Serialize)]
pub struct RoutingLine {
    pub item: String,
    #[serde(skip)]
    pub full_ms: Option<f64>,
    #[serde(skip)]
    pub slim_ms: Option<f64>,
    #[serde(skip)]
    pub ratio: Option<f64>,
    pub change: Change,
    /// The figures as printed: `0.219 ms` (or `—`), `195.91×` (absent without a ratio).
    pub full: String,
    pub slim: String,
    pub ratio_text: Option<String>,
}

/// One bar of the magma vs cuSOLVER chart and one row of its table.
#[derive(Debug, Clone, Serialize)]
pub struct BackendLine {
    pub item: String,
    #[serde(skip)]
    pub magma_ms: Option<f64>,
    #[serde(skip)]
    pub cusolver_ms: Option<f64>,
    /// magma / cuSOLVER (above 1: MAGMA slower).
    #[serde(skip)]
    pub ratio: Option<f64>,
    pub magma_error: Option<String>,
    /// The magma time cell: `failed` when the case raised (its error has a column of its own, so
    /// a long message never takes the place of a number).
    pub magma: String,
    pub cusolver: String,
    pub ratio_text: Option<String>,
}

/// One bar of the bytes chart.
#[derive(Debug, Clone, Serialize)]
pub struct ByteBar {
    pub label: String,
    #[serde(skip)]
    pub bytes: u64,
    /// Measured in the tree/environment, or estimated (the plan's other variant).
    pub measured: bool,
    /// `51.1 MiB (53,532,193 B)`.
    pub size: String,
}

/// Stored device code of one architecture.
#[derive(Debug, Clone, Serialize)]
pub struct FatbinBar {
    pub label: String,
    #[serde(skip)]
    pub bytes: u64,
    pub size: String,
}

/// The fatbin scan's totals.
#[derive(Debug, Clone, Serialize)]
pub struct FatbinTotals {
    pub stored: String,
    pub uncompressed: String,
    /// The minimum driver, or `not recorded`.
    pub driver: String,
}

/// An op that works in the full variant and not in the slim one, by preference.
#[derive(Debug, Clone, Serialize)]
pub struct LostOp {
    pub op: String,
    pub preference: String,
    pub cases: usize,
    pub example_reason: String,
}

/// What a real slim variant lost, under the default backend and under an explicit one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lost {
    pub default: Vec<LostOp>,
    pub explicit: Vec<LostOp>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub variant: String,
    pub emulated: bool,
    pub what: String,
    pub status: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VariantLine {
    pub name: String,
    pub emulated: bool,
    pub note: Option<String>,
    pub torch: Option<String>,
    #[serde(skip)]
    pub lazy_bytes: Option<u64>,
    /// The installed lazy library's size, when a real variant recorded it.
    pub lazy_size: Option<String>,
    /// `has magma` / `no magma`, when the smoke run looked (the HTML page prints it).
    pub lazy_magma_note: Option<&'static str>,
    /// `12 cases: 8 pass, 2 expected-fail, 2 excluded, 0 fail, 0 timeout`.
    pub counts: String,
    /// `name: status`, lower case, sorted by name.
    pub check_lines: Vec<String>,
}

impl VariantLine {
    pub(crate) fn check_line(name: &str, status: CheckStatus) -> String {
        format!("{name}: {status:?}").to_lowercase()
    }
}

/// One package of the pack report.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PackageLine {
    pub file: String,
    pub role: String,
    #[serde(skip)]
    pub bytes: u64,
    #[serde(skip)]
    pub archive_bytes: u64,
    pub installed: String,
    pub archive: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    pub input: &'static str,
    pub file: String,
    pub schema: String,
    pub tool: Option<String>,
    pub command: Option<String>,
    /// The date, or why there is none ([`super::NO_DATE`], [`super::NOT_RECORDED`]).
    pub date: String,
}

/// Bytes a slim environment does not install, against the tree and against the environment a
/// user installs.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSaving {
    #[serde(skip)]
    pub bytes: u64,
    #[serde(skip)]
    pub tree_bytes: u64,
    #[serde(skip)]
    pub percent: f64,
    pub how: String,
    /// The figures as printed: `50.5 MiB (52,908,537 B)`, `5.29`.
    pub size: String,
    pub tree_size: String,
    pub percent_text: String,
    /// Against the environment: measured, or why not and how to get it.
    pub environment: EnvironmentLine,
}

/// The saving against the environment a user installs, as printed.
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentLine {
    /// `1.35` (absent when not known); an upper bound when `lower_bound`.
    pub percent_text: Option<String>,
    /// The saving and the environment in the same measure: `36.4 MiB (…) of 2.7 GiB (…)`.
    pub figures: Option<String>,
    /// `download sizes from pylock.toml` / `on disk`.
    pub measure: Option<String>,
    pub lower_bound: bool,
    /// How it was found, or why it is not known and how to get it.
    pub how: String,
}

/// The rule the answer applied to the saving, and what it was weighed against.
#[derive(Debug, Clone, Serialize)]
pub struct SavingRule {
    /// The rule, in one sentence ([`Worth::RULE`]).
    pub rule: &'static str,
    /// [`Worth::label`] of the saving.
    pub outcome: &'static str,
    /// The installed saving the rule was applied to, as printed.
    pub saving: String,
    /// What the slim variant loses, one line each (ops that stop working, ops slower or failing
    /// by default routing, failures); empty with `losses_known` when it loses nothing measured.
    pub losses: Vec<String>,
    /// Whether a real slim variant's smoke run says what it loses.
    pub losses_known: bool,
}

/// The proof, from the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Proof {
    /// `CONFINED`, `NOTCONFINED`, `NOTPRESENT`.
    pub verdict: String,
    pub reasons: Vec<String>,
    pub witnesses: Vec<String>,
    pub lazy_edges: Vec<String>,
    /// `file: what — consequence`, sorted.
    pub core_state_warnings: Vec<String>,
    pub other_warnings: Vec<String>,
    /// The loader contract of the lazy library, in one sentence.
    pub contract: String,
}

/// Everything the page shows, computed once; the templates only lay it out.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub title: String,
    #[serde(skip)]
    pub answer: Answer,
    /// The answer in one line: [`Answer::headline`], with the saving rule's outcome where there
    /// is a saving.
    pub headline: String,
    /// The saving rule applied; absent without a saving.
    pub rule: Option<SavingRule>,
    pub dep: String,
    /// The payload's name as the title shows it (`MAGMA`).
    pub dep_upper: String,
    pub slim: String,
    pub saving: Option<ReportSaving>,
    pub byte_bars: Vec<ByteBar>,
    /// Payload bytes linked statically into the lazy library (plan estimate), formatted.
    pub payload_static_in_lazy: Option<String>,
    pub platform: Option<String>,
    #[serde(skip)]
    pub slim_smoke: SlimSmoke,
    /// Present when a real slim variant ran: what it lost.
    pub slim_real: Option<Lost>,
    pub slim_emulated: bool,
    pub routing: Vec<RoutingLine>,
    /// The routing lines that moved (slower, faster or failed): the answer lists these.
    pub routing_moved: Vec<RoutingLine>,
    /// The noise band in percent (`10`).
    pub same_within_percent: String,
    pub backend: Vec<BackendLine>,
    pub fatbin_bars: Vec<FatbinBar>,
    pub fatbin_total: Option<FatbinTotals>,
    pub proof: Option<Proof>,
    pub variants: Vec<VariantLine>,
    #[serde(skip)]
    pub smoke_result: Option<SmokeResult>,
    pub smoke_result_label: &'static str,
    pub failures: Vec<Failure>,
    pub packages: Vec<PackageLine>,
    pub provenance: Vec<Provenance>,
    pub unknown: Vec<String>,
}
