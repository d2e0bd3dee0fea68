//! The page as data: what `report` shows, computed once by [`super::build`] from the inputs and
//! laid out by the templates (`templates/report/`) as HTML or Markdown. Numbers the page prints are
//! formatted here, once, so both formats print the same figures; the few raw values kept
//! (`#[serde(skip)]`) are the ones the charts plot.

use serde::Serialize;

use crate::smoke::SmokeVerdict as SmokeResult;
use crate::smoke::eval::CheckStatus;

/// The rule `report`'s answer and the feedstock description apply to a saving, from conda-forge's 2024 discussion of the
/// MAGMA split (rgommers, conda-forge/pytorch-cpu-feedstock#275): 385 MB measured was not worth
/// a user-facing knob, about 600 MB is the lower end of a gray zone, 2 GB clearly worth it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Worth {
    /// Below [`GRAY_FROM`] (600 MB): not worth a user-facing variant.
    NotWorthIt,
    /// From [`GRAY_FROM`] up to [`WORTH_FROM`] (600 MB to 2 GB): a judgement call.
    GrayZone,
    /// [`WORTH_FROM`] (2 GB) or more: clearly worth a variant.
    WorthIt,
}

/// Lower end of the gray zone, and where a saving is clearly worth a variant (decimal bytes, as
/// the discussion's "MB" and "GB").
pub const GRAY_FROM: u64 = 600_000_000;
/// Where a saving becomes clearly worth a variant: 2 GB (decimal bytes).
pub const WORTH_FROM: u64 = 2_000_000_000;

impl Worth {
    /// The rule in one sentence, with where it comes from.
    pub const RULE: &'static str = "conda-forge's 2024 rule for the MAGMA split (rgommers, conda-forge/pytorch-cpu-feedstock#275): below 600 MB not worth a user-facing variant (385 MB measured was not), 600 MB to 2 GB a gray zone, 2 GB or more worth it";

    /// Where a saving of `bytes` (decimal bytes) falls under the rule.
    pub fn of(bytes: u64) -> Worth {
        match bytes {
            b if b >= WORTH_FROM => Worth::WorthIt,
            b if b >= GRAY_FROM => Worth::GrayZone,
            _ => Worth::NotWorthIt,
        }
    }

    /// The outcome as the page prints it, with its threshold (and the 385 MB precedent below the
    /// gray zone).
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
    /// The answer as the page's first line: the word (YES, NOT YET, NO, …) and why.
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
    /// The slim variant's time is more than the noise band above the full one's.
    Slower,
    /// The slim variant's time is more than the noise band below the full one's.
    Faster,
    /// Within the noise band (`same_within_percent`) of each other.
    Same,
    /// The op failed (no timing) on one of the variants.
    Failed,
}

impl Change {
    /// The word the page prints (the same as the serialised form).
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
    /// The smoke run has the slim variant, run on a real install.
    Real,
    /// The smoke run has the slim variant, but only EMULATED (the payload hidden, not removed).
    Emulated,
    /// A smoke run was given, but it has no slim variant.
    NotRun,
    /// No smoke run was given (`--smoke`).
    NoSmoke,
}

/// One op timed under default routing in both real variants.
#[derive(Debug, Clone, Serialize)]
pub struct RoutingLine {
    /// The op, its size and its dtype (`linalg.cholesky 512 float32`): the row's label and sort
    /// key.
    pub item: String,
    /// The full variant's median time under default routing, in milliseconds; None when it failed
    /// or was not timed.
    #[serde(skip)]
    pub full_ms: Option<f64>,
    /// The slim variant's median time under default routing, in milliseconds; None when it failed
    /// or was not timed.
    #[serde(skip)]
    pub slim_ms: Option<f64>,
    /// Slim over full (above 1: the slim variant is slower); None when either time is missing.
    #[serde(skip)]
    pub ratio: Option<f64>,
    /// Slower, faster, same or failed, by the ratio against the noise band.
    pub change: Change,
    /// The figures as printed: `0.219 ms` (or `—`), `195.91×` (absent without a ratio).
    pub full: String,
    /// The slim variant's time as printed (`0.219 ms`, or `—` without one).
    pub slim: String,
    /// The ratio as printed (`195.91×`); absent without a ratio.
    pub ratio_text: Option<String>,
}

/// One bar of the magma vs cuSOLVER chart and one row of its table.
#[derive(Debug, Clone, Serialize)]
pub struct BackendLine {
    /// The op, its size and its dtype: the bar's label and the row's sort key.
    pub item: String,
    /// MAGMA's median time under an explicit `magma` preference, in milliseconds; None when it
    /// failed.
    #[serde(skip)]
    pub magma_ms: Option<f64>,
    /// cuSOLVER's median time under an explicit `cusolver` preference, in milliseconds; None when
    /// it failed.
    #[serde(skip)]
    pub cusolver_ms: Option<f64>,
    /// magma / cuSOLVER (above 1: MAGMA slower).
    #[serde(skip)]
    pub ratio: Option<f64>,
    /// The error the MAGMA case raised, when it failed (shown in a column of its own).
    pub magma_error: Option<String>,
    /// The magma time cell: `failed` when the case raised (its error has a column of its own, so
    /// a long message never takes the place of a number).
    pub magma: String,
    /// The cuSOLVER time cell (`0.219 ms`, or `—` without one).
    pub cusolver: String,
    /// The ratio as printed (`1.42×`); absent without a ratio.
    pub ratio_text: Option<String>,
}

/// One bar of the bytes chart.
#[derive(Debug, Clone, Serialize)]
pub struct ByteBar {
    /// What the bar is: `core`, `lazy <variant>` or `payload`.
    pub label: String,
    /// The bar's length: its bytes (installed size).
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
    /// The architecture and the kind of its code (`sm_90 sass`, `sm_90 ptx`).
    pub label: String,
    /// The stored (possibly compressed) bytes of that code, summed over the scan: the bar's length.
    #[serde(skip)]
    pub bytes: u64,
    /// The same as printed: `51.1 MiB (53,532,193 B)`.
    pub size: String,
}

/// The fatbin scan's totals.
#[derive(Debug, Clone, Serialize)]
pub struct FatbinTotals {
    /// Stored (possibly compressed) device-code bytes of the whole scan, as printed.
    pub stored: String,
    /// The same device code uncompressed, as printed.
    pub uncompressed: String,
    /// The minimum driver, or `not recorded`.
    pub driver: String,
}

/// An op that works in the full variant and not in the slim one, by preference.
#[derive(Debug, Clone, Serialize)]
pub struct LostOp {
    /// The op (`linalg.cholesky`).
    pub op: String,
    /// The backend preference it was run under (`default`, `magma`, `cusolver`).
    pub preference: String,
    /// How many of its cases pass in the full variant and neither pass nor are excluded in the slim
    /// one.
    pub cases: usize,
    /// The reason the first of them gave, as an example.
    pub example_reason: String,
}

/// What a real slim variant lost, under the default backend and under an explicit one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Lost {
    /// Ops lost under default routing (what every user of the slim variant loses).
    pub default: Vec<LostOp>,
    /// Ops lost only when a backend is asked for explicitly.
    pub explicit: Vec<LostOp>,
}

/// A case or check of a smoke run that did not meet its expectation.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The variant it failed in.
    pub variant: String,
    /// Whether that variant was EMULATED (the payload hidden, not removed).
    pub emulated: bool,
    /// `case <id>` or `check <name>`.
    pub what: String,
    /// The case's status label (`FAIL`, `TIMEOUT`), or `FAIL` for a check.
    pub status: String,
    /// Why: the case's reason or the check's detail, as the smoke run recorded it.
    pub reason: String,
}

/// One variant of the smoke run as the page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct VariantLine {
    /// The variant's name (`magma`, `nomagma`).
    pub name: String,
    /// Whether it was EMULATED (the payload hidden, not removed) rather than installed for real.
    pub emulated: bool,
    /// The note the smoke run recorded for the variant, if any.
    pub note: Option<String>,
    /// The torch version the variant imported; None when the run did not record one.
    pub torch: Option<String>,
    /// The installed lazy library's size in bytes, when a real variant recorded it (None for an
    /// EMULATED one).
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
    /// The package's file name (`pytorch-2.5.1-….conda`).
    pub file: String,
    /// Its role as printed: `core`, `lazy <variant>`, or `stand-in (represents …, not real bytes)`.
    pub role: String,
    /// Installed bytes of real content (for a stand-in: its README and marker).
    #[serde(skip)]
    pub bytes: u64,
    /// Bytes of the `.conda` file.
    #[serde(skip)]
    pub archive_bytes: u64,
    /// Installed bytes as printed.
    pub installed: String,
    /// Archive bytes as printed.
    pub archive: String,
}

/// Where one input of the page came from: one row of the provenance table.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// Which input: `plan`, `smoke`, `fatbin` or `pack`.
    pub input: &'static str,
    /// The file it was read from, as given on the command line.
    pub file: String,
    /// The document's schema and version (`splitpkg-plan v1`).
    pub schema: String,
    /// The tool that wrote it, with its version and (first 12 characters of) commit; None when the
    /// document does not say.
    pub tool: Option<String>,
    /// The command line that wrote it, shell-quoted; None when the document did not record one.
    pub command: Option<String>,
    /// The date, or why there is none ([`super::NO_DATE`], [`super::NOT_RECORDED`]).
    pub date: String,
}

/// Bytes a slim environment does not install, against the tree and against the environment a
/// user installs.
#[derive(Debug, Clone, Serialize)]
pub struct ReportSaving {
    /// The installed bytes a slim environment does not install.
    #[serde(skip)]
    pub bytes: u64,
    /// Bytes of every file of the input tree, what the percentage is of.
    #[serde(skip)]
    pub tree_bytes: u64,
    /// `bytes` as a percentage of `tree_bytes` (0 for an empty tree).
    #[serde(skip)]
    pub percent: f64,
    /// How the saving was found: measured from the smoke run's installed libraries, or the plan's
    /// estimate (and which payload libraries outside the tree were not counted).
    pub how: String,
    /// The figures as printed: `50.5 MiB (52,908,537 B)`, `5.29`.
    pub size: String,
    /// The tree's bytes as printed.
    pub tree_size: String,
    /// The percentage as printed, two decimals (`5.29`).
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
    /// Whether the figure is a lower bound of the saving (the percentage then an upper bound).
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
    /// Why the plan gave its verdict, one line each, as the plan says them.
    pub reasons: Vec<String>,
    /// The paths by which the payload is reached eagerly (a NOTCONFINED verdict's evidence), one
    /// summary each, sorted.
    pub witnesses: Vec<String>,
    /// How each lazy library is loaded: `from → to (how)`, sorted.
    pub lazy_edges: Vec<String>,
    /// `file: what — consequence`, sorted.
    pub core_state_warnings: Vec<String>,
    /// Every other plan warning, `file: what — consequence`, sorted.
    pub other_warnings: Vec<String>,
    /// The loader contract of the lazy library, in one sentence.
    pub contract: String,
}

/// Everything the page shows, computed once; the templates only lay it out.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The package and its version (`pytorch 2.5.1`, `torch 2.5.1`), else the plan's input name, else
    /// `package`.
    pub title: String,
    /// Whether to split: the answer the headline states.
    #[serde(skip)]
    pub answer: Answer,
    /// The answer in one line: [`Answer::headline`], with the saving rule's outcome where there
    /// is a saving.
    pub headline: String,
    /// The saving rule applied; absent without a saving.
    pub rule: Option<SavingRule>,
    /// The payload dependency's name (`magma`): the full variant is named after it.
    pub dep: String,
    /// The payload's name as the title shows it (`MAGMA`).
    pub dep_upper: String,
    /// The slim variant's name (`nomagma`).
    pub slim: String,
    /// The saving; None without a plan, or when the plan does not prove the payload confined.
    pub saving: Option<ReportSaving>,
    /// Where the bytes go: core, each lazy variant (the payload's first), the payload; empty
    /// without a plan.
    pub byte_bars: Vec<ByteBar>,
    /// Payload bytes linked statically into the lazy library (plan estimate), formatted.
    pub payload_static_in_lazy: Option<String>,
    /// The GPU, driver and torch of the smoke run; None without one.
    pub platform: Option<String>,
    /// What the smoke run says about the slim variant.
    #[serde(skip)]
    pub slim_smoke: SlimSmoke,
    /// Present when a real slim variant ran: what it lost.
    pub slim_real: Option<Lost>,
    /// Whether the slim variant was run only EMULATED.
    pub slim_emulated: bool,
    /// Every op timed under default routing in both real variants, sorted by label.
    pub routing: Vec<RoutingLine>,
    /// The routing lines that moved (slower, faster or failed): the answer lists these.
    pub routing_moved: Vec<RoutingLine>,
    /// The noise band in percent (`10`).
    pub same_within_percent: String,
    /// MAGMA against cuSOLVER under explicit preferences, from the real full variant's bench,
    /// sorted.
    pub backend: Vec<BackendLine>,
    /// Stored device code per architecture; empty without `--fatbin`.
    pub fatbin_bars: Vec<FatbinBar>,
    /// The fatbin scan's totals; None without `--fatbin`.
    pub fatbin_total: Option<FatbinTotals>,
    /// The proof from the plan; None without `--plan`.
    pub proof: Option<Proof>,
    /// Each variant of the smoke run, sorted by name.
    pub variants: Vec<VariantLine>,
    /// The smoke run's overall result; None without a smoke run.
    #[serde(skip)]
    pub smoke_result: Option<SmokeResult>,
    /// That result as printed, or `not recorded`.
    pub smoke_result_label: &'static str,
    /// Every case and check that did not meet its expectation, in every variant.
    pub failures: Vec<Failure>,
    /// The packages of the pack record and its stand-ins, sorted, without duplicates.
    pub packages: Vec<PackageLine>,
    /// Where each input came from.
    pub provenance: Vec<Provenance>,
    /// What the page cannot say for lack of an input, and which input would tell it, one line each.
    pub unknown: Vec<String>,
}
