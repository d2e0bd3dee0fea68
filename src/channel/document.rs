//! The documents the channel commands write (`pack`, `solve`, `env`, `env --switch`), compiled in
//! every build: the report and the schemas read them without the `channel` feature's rattler
//! crates. Behaviour stays with the commands (`pack`, `solve`, `env`); these are the records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::verdict::{Verdict, as_label};
use crate::channel::info::{PackRecord, PackedPackage};
use crate::input::TreeKind;

// ---- pack ----

/// Whether the packages hold the tree exactly: every tree path in one package, nothing else,
/// checked by reading the packages back.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lossless {
    /// Tree paths (files, hard links, symlinks) the plan assigns.
    pub tree_paths: usize,
    /// Tree paths found in exactly one package after reading the packages back.
    pub placed_once: usize,
    /// Tree paths found in no package (must be none).
    pub missing: Vec<String>,
    /// Tree paths found in more than one package (must be none).
    pub doubled: Vec<String>,
    /// Package paths that are not tree paths (must be none).
    pub extra: Vec<String>,
    /// Every tree path is in exactly one package and nothing else is.
    pub ok: bool,
}

/// What `pack` made: the packages written to the channel, their stand-ins, and the check that they
/// hold the tree losslessly.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PackReport {
    /// Which document this is: `splitpkg-pack`.
    pub schema: String,
    /// The version of the pack report's layout.
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
    pub tool: crate::provenance::Tool,
    /// The command that wrote this report (filled by the CLI) and, with `SOURCE_DATE_EPOCH`, the date.
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    /// What was packed.
    pub input: PackInput,
    /// The channel directory written into (`--out`).
    pub channel: String,
    /// The core package's name (`libtorch`).
    pub core: String,
    /// The lazy package's name (`libtorch-cuda-linalg`).
    pub lazy: String,
    /// The payload's name, which names the variants (`magma`, `nomagma`).
    pub dep: String,
    /// This pack as the channel's `splitpkg.json` keeps it: the packages written and why a
    /// variant was not.
    pub record: PackRecord,
    /// Stand-in packages written for payload libraries another package provides (`libmagma`).
    pub standins: Vec<PackedPackage>,
    /// Stand-ins not written because a real package of that name is in this pack.
    pub standins_replaced_by_real: Vec<String>,
    /// Where the stand-ins' descriptions came from: `built-in` or the manifest's file name.
    pub standins_from: String,
    /// The packages read back: every tree path placed exactly once.
    pub lossless: Lossless,
    /// Every tree path → the package file that holds it.
    pub paths: BTreeMap<String, String>,
    /// Installed bytes of the real packages written.
    pub real_bytes: u64,
    /// Installed bytes of the packages the stand-ins stand for.
    pub represented_bytes: u64,
    /// The zstd level of the packages' inner archives.
    pub compression_level: i32,
    /// The `repodata.json` files written.
    pub indexed: Vec<String>,
    /// What a maintainer should know about this pack, one line each.
    pub notes: Vec<String>,
}

impl crate::document::Document for PackReport {
    const SCHEMA: &'static str = "splitpkg-pack";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "pack report";
    const SCHEMA_FILE: &'static str = "pack.schema.json";
    const TITLE: &'static str = "splitpkg pack";
    const ABOUT: &'static str = "Output of `splitpkg pack --json`. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it. `record` and `standins` are also what CHANNEL/splitpkg.json keeps per pack.";
}

/// The tree that was packed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PackInput {
    /// The path as given on the command line.
    pub path: String,
    /// A directory, a wheel, a `.conda` or a `.tar.bz2` package.
    pub kind: TreeKind,
    /// The plan's verdict (`pack` packs only a confined tree).
    #[serde(with = "as_label")]
    #[schemars(schema_with = "as_label::schema")]
    pub verdict: Verdict,
    /// Regular files in the tree.
    pub files: usize,
    /// Bytes of all files (unpacked).
    pub bytes: u64,
}

// ---- solve ----

/// What `solve` found: the install scenarios (a)-(e) on a channel and, with `--install`, the
/// environments made from the solutions of (a) and (b).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SolveReport {
    /// Which document this is: `splitpkg-solve`.
    pub schema: String,
    /// The version of the solve report's layout.
    pub schema_version: u32,
    /// The channel directory solved over (`CHANNEL`), as given on the command line.
    pub channel: String,
    /// The channel packed with the opposite `--prefer` for scenario (e) (`--prefer-channel`), as
    /// given. Absent without that option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer_channel: Option<String>,
    /// The solver every scenario runs: `resolvo (rattler_solve VERSION)`.
    pub solver: String,
    /// The core package's name (`libtorch`), from the channel's `splitpkg.json`.
    pub core: String,
    /// The lazy package's name (`libtorch-cuda-linalg`), from the channel's `splitpkg.json`.
    pub lazy: String,
    /// The versions the channel's `splitpkg.json` records a pack of, oldest first.
    pub versions: Vec<String>,
    /// The version tested: `--version`, or the newest in the channel. The core package's spec pins
    /// it unless it is the newest.
    pub version: String,
    /// The variant a plain install of the tested version gets (`magma` unless packed with
    /// `--prefer nomagma`).
    pub preferred: String,
    /// The virtual packages given to the solver, `NAME=VERSION` sorted by name: the defaults
    /// (`__unix`, `__linux`, `__glibc`, `__cuda`) with `--virtual` applied.
    pub virtual_packages: Vec<String>,
    /// The five scenarios, (a) to (e) in that order.
    pub scenarios: Vec<Scenario>,
    /// The environments `--install DIR` made and checked. Absent without `--install`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<InstallReport>,
    /// No scenario and no install check failed (`not-applicable` ones do not count); the exit
    /// code is 0 exactly when this is true.
    pub pass: bool,
}

impl crate::document::Document for SolveReport {
    const SCHEMA: &'static str = "splitpkg-solve";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "solve report";
    const SCHEMA_FILE: &'static str = "solve.schema.json";
    const TITLE: &'static str = "splitpkg solve";
    const ABOUT: &'static str = "Output of `splitpkg solve --json`: install scenarios solved with rattler_solve (resolvo) on a channel made by `splitpkg pack`. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it.";
}

/// One install request solved over a channel, and whether the outcome is the one it must show.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Scenario {
    /// The scenario's letter: `a` to `e`.
    pub id: String,
    /// `default`, `slim`, `conflict`, `version skew` or `flipped preference`.
    pub name: String,
    /// The channel directory solved over, made absolute: `CHANNEL`, or for (e) the
    /// `--prefer-channel` when one is given.
    pub channel: String,
    /// The match specs requested: the core package for (a) and (e); it and the lazy package by the
    /// slim build's glob for (b); that glob and the first payload package for (c); core and lazy
    /// pinned to two versions for (d), which has none when the channel holds one version.
    pub specs: Vec<String>,
    /// What the scenario must show.
    pub expect: String,
    /// `pass`: the outcome is what `expect` says (for (a), (b), (e) a solved set with core and
    /// lazy at the version, the lazy package in the expected variant and the payload packages
    /// exactly when that variant needs them; for (c), (d) unsatisfiable); `fail`: it is not, or
    /// for (e) the `--prefer-channel` is not the flipped channel; `not-applicable`: the channel
    /// lacks what the scenario needs (for (e): no `--prefer-channel`), so nothing was solved.
    pub status: ScenarioStatus,
    /// The outcome in words: the variant solved (`+` the payload packages), what differs from
    /// `expect`, whether it was unsatisfiable (as required or not), or `not applicable:` and why.
    pub detail: String,
    /// The packages of the solution, sorted by name. Empty when nothing was solved (unsatisfiable
    /// or not applicable).
    pub solved: Vec<Solved>,
    /// Bytes of the solved packages' `.conda` files (stand-ins included), from the repodata.
    pub archive_bytes: u64,
    /// Installed bytes of real content.
    pub installed_bytes: u64,
    /// Installed bytes the stand-ins in the set represent (not real bytes).
    pub represented_bytes: u64,
    /// The solver's explanation of why the request cannot be satisfied: the answer (c) and (d)
    /// require, a failure for the others. Absent when the request was solved or not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver_message: Option<String>,
    /// Whether the outcome depends on how the solver ranks `track_features`, and why.
    pub track_features: Semantics,
}

/// A scenario's or an installed environment's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Status")]
pub enum ScenarioStatus {
    /// Met what the scenario expects (`pass`).
    Pass,
    /// Did not (`fail`); the detail says how.
    Fail,
    /// What the scenario needs is not in the channel, or (an installed environment) its scenario
    /// has no solution to install; the reason is in the detail.
    NotApplicable,
}

/// The environments `--install` makes: the default request's solution and the slim one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstallEnv {
    /// The solution of scenario (a), the core package requested alone: the preferred variant.
    Default,
    /// The solution of scenario (b): the variant without the payload requested explicitly.
    Slim,
}

/// How `track_features` bear on a scenario's outcome, under resolvo's and conda's readings.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Semantics {
    /// Whether the outcome depends on how track_features rank candidates.
    pub relied_on: bool,
    /// Whether resolvo's yes/no reading and conda's count reading give the same outcome. Reasoned
    /// from the candidates, not measured (only resolvo runs): where the feature decides, one
    /// candidate carries it and both readings pick the other, so every scenario says `true`.
    pub solvers_agree: bool,
    /// Why, in words: which build carries the track feature and what both solvers then pick, or
    /// `not consulted:` and what decides instead (a build-string spec, a constraint, one build).
    pub why: String,
}

/// One package of a scenario's solution.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Solved {
    /// The package's name.
    pub name: String,
    /// The package's version.
    pub version: String,
    /// The package's build string.
    pub build: String,
    /// `SUBDIR/NAME-VERSION-BUILD.conda`, relative to the channel (`noarch/` for a stand-in,
    /// `linux-64/` otherwise).
    pub file: String,
    /// For the lazy package: the variant its build string names (`magma`, `nomagma`). Absent for
    /// other packages, and for a build that names none of the channel's variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Whether this is a stand-in for a package another channel provides.
    pub standin: bool,
    /// Bytes of the `.conda` file, as the repodata lists it (0 when it lists none).
    pub archive_bytes: u64,
    /// Installed bytes of the package's files, from its `paths.json` (for a stand-in: its own
    /// README and marker).
    pub installed_bytes: u64,
    /// For a stand-in: the installed size of the package it stands for. Absent for a real package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub represents_bytes: Option<u64>,
}

/// What `--install DIR` did: the solutions of (a) and (b) installed with rattler's installer,
/// and each prefix planned.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstallReport {
    /// The directory given to `--install`, as given: it holds the package cache (`pkgs`) and the
    /// prefixes `default` and `slim`.
    pub dir: String,
    /// The two environments: `default`, then `slim`.
    pub envs: Vec<EnvCheck>,
}

/// One environment `--install` made from a scenario's solution, and what `plan` says of it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvCheck {
    /// `default` (the solution of (a)) or `slim` (that of (b)); also the prefix's directory name.
    pub name: InstallEnv,
    /// The id of the scenario whose solution was installed: `a` or `b`.
    pub scenario: String,
    /// The prefix installed into: `DIR/default` or `DIR/slim`.
    pub prefix: String,
    /// `pass`: the prefix is as `expect` says; `fail`: it is not; `not-applicable`: the scenario
    /// has no solution (not applicable or unsatisfiable), so nothing was installed.
    pub status: ScenarioStatus,
    /// The outcome in words: `plan: VERDICT` (for `slim` also the payload files counted and the
    /// payload packages found), or why nothing was installed.
    pub detail: String,
    /// `name-version-build` of each package installed, sorted by name. Empty when nothing was
    /// installed.
    pub packages: Vec<String>,
    /// Verdict of `splitpkg plan` on the installed prefix.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "as_label::option"
    )]
    #[schemars(schema_with = "as_label::option::schema")]
    pub verdict: Option<Verdict>,
    /// What the prefix must show: `CONFINED` for `default`; for `slim` `NOT PRESENT, no payload
    /// files, no payload packages`.
    pub expect: String,
    /// Payload libraries found in the prefix.
    pub payload_files: Vec<String>,
}

// ---- env ----

/// What `env` found in an installed conda environment: the split's packages, which variant is
/// installed, and what switching to the other would take.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvReport {
    /// Which document this is (`splitpkg-env`). Described here for the reports `env --switch`
    /// nests; a document's own top-level field gets its description from `generated_schema`.
    pub schema: String,
    /// The version of the env report's layout.
    pub schema_version: u32,
    /// The conda environment read (`PREFIX`).
    pub prefix: String,
    /// The lazy package's name (`libtorch-cuda-linalg`).
    pub lazy: String,
    /// Its installed version.
    pub version: String,
    /// Its installed build string.
    pub build: String,
    /// The installed variant (`magma` / `nomagma`), from the build string.
    pub variant: String,
    /// The installed lazy package's `track_features`.
    pub track_features: Vec<String>,
    /// Every package in the environment, with its part in the split (`other`: none).
    pub packages: Vec<EnvPackage>,
    /// Installed bytes of real packages.
    pub real_bytes: u64,
    /// Bytes the installed stand-ins represent (not on disk).
    pub represented_bytes: u64,
    /// What switching to the other variant would change, and the commands that do it.
    pub switch: Switch,
    /// The splitpkg channel the other variant's size comes from: `--channel`, or the local channel
    /// the lazy package was installed from. Absent when neither holds a `splitpkg.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// What a user should know about this environment, one line each.
    pub notes: Vec<String>,
}

impl crate::document::Document for EnvReport {
    const SCHEMA: &'static str = "splitpkg-env";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "env report";
    const SCHEMA_FILE: &'static str = "env.schema.json";
    const TITLE: &'static str = "splitpkg env";
    const ABOUT: &'static str = "Output of `splitpkg env PREFIX --json`. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it.";
}

/// One package installed in the environment.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvPackage {
    /// The package's name.
    pub name: String,
    /// Its installed version.
    pub version: String,
    /// Its installed build string.
    pub build: String,
    /// `core`, `lazy`, `payload` or `other`.
    pub role: PackageRole,
    /// Files the package installed.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
    /// Whether this is a stand-in for a package another channel provides.
    pub standin: bool,
    /// For a stand-in: the installed size of the package it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub represents_bytes: Option<u64>,
}

/// A package's part in the split, as `env` tells it from the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PackageRole {
    /// The core package.
    Core,
    /// The lazy library's package (one of its variants).
    Lazy,
    /// A package that provides the payload (`libmagma`).
    Payload,
    /// Any other package.
    Other,
}

/// What switching the environment to the other variant would take and change.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Switch {
    /// The other variant (`nomagma` from `magma`, and back).
    pub to: String,
    /// Bytes of the lazy package now, and after the switch when known.
    pub lazy_now: u64,
    /// Bytes of the lazy package after the switch, when known.
    pub lazy_after: Option<u64>,
    /// Payload packages the switch removes (to the slim variant) or adds.
    pub payload_removed: Vec<String>,
    /// Payload packages the switch adds (to the variant with the payload).
    pub payload_added: Vec<String>,
    /// Change in real installed bytes (negative: a saving), when known.
    pub real_delta: Option<i64>,
    /// Change in bytes represented by stand-ins.
    pub represented_delta: i64,
    /// Real installed bytes after the switch, when known.
    pub real_after: Option<u64>,
    /// Bytes represented by stand-ins after the switch.
    pub represented_after: u64,
    /// Where the other variant's size comes from, or why it is unknown.
    pub sizes_from: String,
    /// The other variant's size is the plan's estimate, not a measured package.
    pub estimated: bool,
    /// The install commands that switch.
    pub commands: ChannelCommands,
}

/// The commands that install the other variant into an environment, one per installer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Commands")]
pub struct ChannelCommands {
    /// `conda install` of the other variant.
    pub conda: String,
    /// `mamba install` of the other variant.
    pub mamba: String,
    /// `pixi add` of the other variant.
    pub pixi: String,
    /// The match specs inside the commands (each parses with rattler_conda_types).
    pub conda_spec: String,
    /// The match spec inside the pixi command.
    pub pixi_spec: String,
}

/// What `env --switch` did: the solve and the installer's transaction, then the environment again.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SwitchReport {
    /// Which document this is: `splitpkg-env-switch`.
    pub schema: String,
    /// The version of the switch report's layout.
    pub schema_version: u32,
    /// The conda environment switched (`PREFIX`).
    pub prefix: String,
    /// The channel the other variant was solved from.
    pub channel: String,
    /// The variant installed before.
    pub from: String,
    /// The variant installed now.
    pub to: String,
    /// The match specs solved: every other installed package pinned exactly, the lazy package by
    /// the other variant's build glob, payload packages left to the solver.
    pub specs: Vec<String>,
    /// `name-version-build` the installer removed and installed.
    pub removed: Vec<String>,
    /// `name-version-build` the installer installed.
    pub installed: Vec<String>,
    /// The environment before the switch, as `env` reports it.
    pub before: EnvReport,
    /// The environment after it.
    pub after: EnvReport,
}

impl crate::document::Document for SwitchReport {
    const SCHEMA: &'static str = "splitpkg-env-switch";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "env --switch report";
    const SCHEMA_FILE: &'static str = "env-switch.schema.json";
    const TITLE: &'static str = "splitpkg env --switch";
    const ABOUT: &'static str = "Output of `splitpkg env PREFIX --switch --json`: what was solved, the installer's transaction, and the environment before and after (each an `env` report, docs/env.schema.json). Versioned by `schema_version`: fields are only added within a version.";
}
