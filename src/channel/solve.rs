//! `splitpkg solve`: prove with a real solver (rattler_solve, resolvo backend), offline, that a
//! channel made by `splitpkg pack` gives the right variant to the right request.
//!
//! Scenarios, each with what it must show:
//!
//! * **a** default: the core package alone → the preferred variant (plus the payload packages
//!   when that variant needs them);
//! * **b** slim: core + `LAZY * *nomagma*` → the slim variant and no payload package;
//! * **c** conflict: the slim variant + a payload package → unsatisfiable (the solver's message is
//!   kept);
//! * **d** version skew: core of one version + lazy package of another → refused;
//! * **e** flipped: on a channel packed from the same input with the opposite `--prefer`, the core
//!   alone → the other variant.
//!
//! A scenario whose packages are not in the channel (no slim build packed, one version only, no
//! flipped channel) is reported as *not applicable* with the reason, never as passed.
//!
//! `track_features` semantics differ between solvers: resolvo (rattler, pixi, mamba 2) treats them
//! as yes/no and ranks "has one" below "has none" *before* version and build number; conda's
//! classic solver minimises how many features the environment activates. Every scenario says
//! whether it depends on that rule and whether the two readings agree.
//!
//! With `--install DIR`, the solutions of (a) and (b) are installed with rattler's installer from
//! the `file://` channel into `DIR/default` and `DIR/slim`, and each prefix is planned: the default
//! must be CONFINED, the slim one must hold no payload (verdict NOT PRESENT, no payload files, no
//! payload packages).

use crate::error::Context;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rattler_conda_types::{
    Channel, GenericVirtualPackage, MatchSpec, PackageName, ParseStrictness, RepoData,
    RepoDataRecord, Version,
};
use rattler_solve::{SolveError, SolverImpl, SolverTask};

use crate::analysis::pipeline::{Planned, Request, plan_tree};
pub use crate::channel::document::{
    EnvCheck, InstallEnv, InstallReport, Scenario, ScenarioStatus, Semantics, SolveReport, Solved,
};
use crate::channel::info::{ChannelInfo, NOARCH, PackRecord, SUBDIR};
use crate::error::{Error, Result};
use crate::progress::Progress;

/// The solver `solve` runs, as reports name it.
pub const SOLVER: &str = "resolvo (rattler_solve 12.0.3)";

/// Everything `splitpkg solve` was asked to do.
pub struct SolveOptions<'a> {
    /// The channel to solve over (`CHANNEL`).
    pub channel: PathBuf,
    /// A channel packed from the same input with the opposite `--prefer` (scenario e).
    pub prefer_channel: Option<PathBuf>,
    /// `NAME=VERSION` overrides of the default virtual packages; `NAME=none` removes one.
    pub virtual_packages: Vec<String>,
    /// The version to test (default: the newest in the channel).
    pub version: Option<String>,
    /// Where `--install` makes the environments of scenarios (a) and (b); None without it.
    pub install: Option<PathBuf>,
    /// Where progress lines go.
    pub progress: &'a Progress,
}

impl ScenarioStatus {
    fn of(ok: bool) -> ScenarioStatus {
        if ok {
            ScenarioStatus::Pass
        } else {
            ScenarioStatus::Fail
        }
    }

    /// The status as tables print it (`PASS`, `FAIL`, `not applicable`).
    pub fn label(self) -> &'static str {
        match self {
            ScenarioStatus::Pass => "PASS",
            ScenarioStatus::Fail => "FAIL",
            ScenarioStatus::NotApplicable => "not applicable",
        }
    }
}

impl InstallEnv {
    /// The prefix's directory name under `--install DIR`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstallEnv::Default => "default",
            InstallEnv::Slim => "slim",
        }
    }

    /// What `plan` must say of the installed prefix.
    fn expect(self) -> &'static str {
        match self {
            InstallEnv::Default => "CONFINED",
            InstallEnv::Slim => "NOT PRESENT, no payload files, no payload packages",
        }
    }

    fn verdict(self) -> crate::analysis::verdict::Verdict {
        match self {
            InstallEnv::Default => crate::analysis::verdict::Verdict::Confined,
            InstallEnv::Slim => crate::analysis::verdict::Verdict::NotPresent,
        }
    }
}

impl std::fmt::Display for InstallEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A channel made by `splitpkg pack`, loaded.
pub struct LoadedChannel {
    /// The channel directory, absolute.
    pub dir: PathBuf,
    /// Its `splitpkg.json`.
    pub info: ChannelInfo,
    /// Every package record of the channel's index.
    pub records: Vec<RepoDataRecord>,
    sizes: std::sync::Mutex<HashMap<String, (u64, Option<u64>)>>,
}

impl LoadedChannel {
    /// Load the channel at `dir`: its `splitpkg.json` and its index; a directory `pack` did not
    /// make is refused.
    pub fn open(dir: &Path) -> Result<LoadedChannel> {
        let abs = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir().at(".")?.join(dir)
        };
        if !abs.is_dir() {
            return Err(Error::bad(dir.display(), "not a directory"));
        }
        let info = ChannelInfo::load(&abs)?;
        let channel = Channel::try_from_directory(&abs).bad_in(dir.display())?;
        let mut records = Vec::new();
        for sub in [SUBDIR, NOARCH] {
            let p = abs.join(sub).join("repodata.json");
            let rd = RepoData::from_path(&p).bad_at(p.display(), "not an indexed channel")?;
            records.extend(rd.into_repo_data_records(&channel));
        }
        Ok(LoadedChannel {
            dir: abs,
            info,
            records,
            sizes: Default::default(),
        })
    }

    /// `linux-64/NAME-VERSION-BUILD.conda` of a record.
    pub fn file_of(r: &RepoDataRecord) -> String {
        let segs: Vec<&str> = r
            .url
            .path_segments()
            .map(|s| s.collect())
            .unwrap_or_default();
        match segs.as_slice() {
            [.., sub, name] => format!("{sub}/{name}"),
            _ => r.identifier.to_string(),
        }
    }

    /// Installed bytes (from the package's paths.json) and, for a stand-in, the bytes it
    /// represents (from its about.json).
    pub fn sizes(&self, file: &str) -> Result<(u64, Option<u64>)> {
        if let Some(s) = self.sizes.lock().unwrap().get(file) {
            return Ok(*s);
        }
        let path = self.dir.join(file);
        let paths: rattler_conda_types::package::PathsJson =
            rattler_package_streaming::seek::read_package_file(&path).bad_in(path.display())?;
        let about: rattler_conda_types::package::AboutJson =
            rattler_package_streaming::seek::read_package_file(&path).bad_in(path.display())?;
        let installed = paths.paths.iter().filter_map(|p| p.size_in_bytes).sum();
        let represents = (about
            .extra
            .get("splitpkg_standin")
            .and_then(|v| v.as_bool())
            == Some(true))
        .then(|| {
            about
                .extra
                .get("represents_bytes")
                .and_then(|v| v.as_u64())
                .unwrap_or(0)
        });
        self.sizes
            .lock()
            .unwrap()
            .insert(file.to_string(), (installed, represents));
        Ok((installed, represents))
    }

    /// The versions packed into the channel, oldest first, each once (those that do not parse as
    /// versions left out).
    pub fn versions(&self) -> Vec<String> {
        let mut v: Vec<(Version, String)> = self
            .info
            .packs
            .iter()
            .filter_map(|p| {
                Version::from_str(&p.version)
                    .ok()
                    .map(|x| (x, p.version.clone()))
            })
            .collect();
        v.sort();
        v.dedup_by(|a, b| a.1 == b.1);
        v.into_iter().map(|(_, s)| s).collect()
    }

    fn pack(&self, version: &str) -> Option<&PackRecord> {
        self.info.packs.iter().find(|p| p.version == version)
    }

    fn has_variant(&self, version: &str, variant: &str) -> bool {
        self.pack(version).is_some_and(|p| {
            p.packages
                .iter()
                .any(|x| x.variant.as_deref() == Some(variant))
        })
    }
}

/// Default virtual packages: a Linux x86-64 machine with glibc 2.28 and a CUDA driver matching the
/// runtime the input NEEDs (13.0 when unknown).
pub fn virtual_packages(
    info: &ChannelInfo,
    overrides: &[String],
) -> Result<Vec<GenericVirtualPackage>> {
    let cuda = info
        .packs
        .iter()
        .filter_map(|p| p.cuda_runtime)
        .max()
        .map(|m| format!("{m}.0"))
        .unwrap_or_else(|| "13.0".into());
    let mut map: BTreeMap<String, String> = [
        ("__unix", "0"),
        ("__linux", "6.1"),
        ("__glibc", "2.28"),
        ("__cuda", cuda.as_str()),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    for o in overrides {
        let (name, version) = o.split_once('=').ok_or_else(|| {
            Error::Usage(format!(
                "--virtual {o}: expected NAME=VERSION (e.g. __cuda=12.6)"
            ))
        })?;
        if !name.starts_with("__") {
            return Err(Error::Usage(format!(
                "--virtual {o}: virtual package names start with __"
            )));
        }
        if version == "none" {
            map.remove(name);
        } else {
            map.insert(name.to_string(), version.to_string());
        }
    }
    map.into_iter()
        .map(|(name, version)| {
            Ok(GenericVirtualPackage {
                name: PackageName::try_from(name.as_str())
                    .map_err(|e| Error::usage_source(format!("--virtual {name}"), e))?,
                version: Version::from_str(&version)
                    .map_err(|e| Error::usage_source(format!("--virtual {name}={version}"), e))?,
                build_string: "0".parse().expect("a valid build string"),
            })
        })
        .collect()
}

/// The solver's explanation of why a request cannot be satisfied: an answer the scenarios expect
/// or report, not a failure of the solver.
#[derive(Debug, Clone)]
pub struct Unsolvable(pub String);

/// Solve `specs` over every record of the channel.
pub fn solve_specs(
    records: &[RepoDataRecord],
    specs: &[String],
    virtual_packages: &[GenericVirtualPackage],
) -> Result<std::result::Result<Vec<RepoDataRecord>, Unsolvable>> {
    let specs: Vec<MatchSpec> = specs
        .iter()
        .map(|s| {
            MatchSpec::from_str(s, ParseStrictness::Strict).failed_at(format_args!("spec {s:?}"))
        })
        .collect::<Result<_>>()?;
    let task = SolverTask {
        virtual_packages: virtual_packages.to_vec(),
        specs,
        ..SolverTask::from_iter([records])
    };
    match rattler_solve::resolvo::Solver.solve(task) {
        Ok(r) => {
            let mut recs = r.records;
            recs.sort_by(|a, b| {
                a.package_record
                    .name
                    .as_normalized()
                    .cmp(b.package_record.name.as_normalized())
            });
            Ok(Ok(recs))
        }
        Err(SolveError::Unsolvable(msgs)) => Ok(Err(Unsolvable(msgs.join("\n")))),
        Err(e) => Err(Error::failed("solver", e)),
    }
}

struct Ctx<'a> {
    ch: &'a LoadedChannel,
    vps: &'a [GenericVirtualPackage],
}

impl Ctx<'_> {
    fn solved(&self, recs: &[RepoDataRecord]) -> Result<Vec<Solved>> {
        let variants: Vec<crate::recipe::split::SplitVariant> = self
            .ch
            .info
            .variants
            .iter()
            .map(|v| crate::recipe::split::SplitVariant {
                name: v.clone(),
                with_payload: !v.starts_with("no"),
                preferred: false,
            })
            .collect();
        recs.iter()
            .map(|r| {
                let file = LoadedChannel::file_of(r);
                let (installed, represents) = self.ch.sizes(&file)?;
                let name = r.package_record.name.as_normalized().to_string();
                let build = r.package_record.build.to_string();
                Ok(Solved {
                    variant: (name == self.ch.info.lazy)
                        .then(|| {
                            crate::recipe::split::variant_in_build(&variants, &build)
                                .map(|v| v.name.clone())
                        })
                        .flatten(),
                    name,
                    version: r.package_record.version.to_string(),
                    build,
                    file,
                    standin: represents.is_some(),
                    archive_bytes: r.package_record.size.unwrap_or(0),
                    installed_bytes: installed,
                    represents_bytes: represents,
                })
            })
            .collect()
    }
}

fn scenario(
    id: &'static str,
    name: &'static str,
    channel: &LoadedChannel,
    specs: Vec<String>,
    expect: String,
    semantics: Semantics,
) -> Scenario {
    Scenario {
        id: id.into(),
        name: name.into(),
        channel: channel.dir.display().to_string(),
        specs,
        expect,
        status: ScenarioStatus::NotApplicable,
        detail: String::new(),
        solved: Vec::new(),
        archive_bytes: 0,
        installed_bytes: 0,
        represented_bytes: 0,
        solver_message: None,
        track_features: semantics,
    }
}

fn fill(s: &mut Scenario, solved: Vec<Solved>) {
    s.archive_bytes = solved.iter().map(|x| x.archive_bytes).sum();
    s.installed_bytes = solved
        .iter()
        .filter(|x| !x.standin)
        .map(|x| x.installed_bytes)
        .sum();
    s.represented_bytes = solved.iter().filter_map(|x| x.represents_bytes).sum();
    s.solved = solved;
}

/// Run the scenarios (and the installs). The records of (a) and (b) are returned for `--install`.
pub fn run(opts: &SolveOptions) -> Result<SolveReport> {
    let ch = LoadedChannel::open(&opts.channel)?;
    let flipped = opts
        .prefer_channel
        .as_deref()
        .map(LoadedChannel::open)
        .transpose()?;
    let vps = virtual_packages(&ch.info, &opts.virtual_packages)?;
    let run = SolveRun::new(opts, &ch, &vps)?;
    let (a, a_install) = run.default()?;
    let (b, b_install) = run.slim()?;
    let scenarios = vec![
        a,
        b,
        run.conflict()?,
        run.version_skew()?,
        run.flipped(flipped.as_ref())?,
    ];
    let install = match &opts.install {
        Some(dir) => Some(install_and_plan(
            dir,
            &ch,
            vec![a_install, b_install],
            opts.progress,
        )?),
        None => None,
    };
    let pass = scenarios.iter().all(|s| s.status != ScenarioStatus::Fail)
        && install
            .as_ref()
            .is_none_or(|i| i.envs.iter().all(|e| e.status != ScenarioStatus::Fail));
    Ok(SolveReport {
        schema: "splitpkg-solve".into(),
        schema_version: 1,
        channel: opts.channel.display().to_string(),
        prefer_channel: opts
            .prefer_channel
            .as_ref()
            .map(|p| p.display().to_string()),
        solver: SOLVER.into(),
        core: ch.info.core.clone(),
        lazy: ch.info.lazy.clone(),
        versions: run.versions,
        version: run.version,
        preferred: run.preferred,
        virtual_packages: vps
            .iter()
            .map(|v| format!("{}={}", v.name.as_normalized(), v.version))
            .collect(),
        scenarios,
        install,
        pass,
    })
}

/// What the scenarios of one run share: the channel, the version under test and its pack, the two
/// variants and which of them the channel prefers.
struct SolveRun<'a> {
    ctx: Ctx<'a>,
    info: &'a ChannelInfo,
    versions: Vec<String>,
    version: String,
    pack: PackRecord,
    /// The core package's spec: its name, pinned to the version unless that is the newest.
    core_spec: String,
    /// The variant with the payload and the slim one.
    with: String,
    without: String,
    preferred: String,
    other: String,
    /// The track feature of the version's pack.
    feature: String,
}

impl<'a> SolveRun<'a> {
    fn new(
        opts: &SolveOptions,
        ch: &'a LoadedChannel,
        vps: &'a [GenericVirtualPackage],
    ) -> Result<Self> {
        let info = &ch.info;
        let versions = ch.versions();
        let version = match &opts.version {
            Some(v) if versions.contains(v) => v.clone(),
            Some(v) => {
                return Err(Error::Usage(format!(
                    "--version {v}: the channel has {}",
                    versions.join(", ")
                )));
            }
            None => versions.last().cloned().ok_or_else(|| {
                Error::bad(
                    opts.channel.display(),
                    "the channel description lists no pack",
                )
            })?,
        };
        let pack = ch.pack(&version).expect("version from the channel").clone();
        let newest = versions.last() == Some(&version);
        let core_spec = if newest {
            info.core.clone()
        } else {
            format!("{} =={version}", info.core)
        };
        let with = info
            .variants
            .iter()
            .find(|v| !v.starts_with("no"))
            .cloned()
            .unwrap_or_default();
        let without = info
            .variants
            .iter()
            .find(|v| v.starts_with("no"))
            .cloned()
            .unwrap_or_default();
        let preferred = pack.preferred.clone();
        let other = if preferred == with {
            without.clone()
        } else {
            with.clone()
        };
        Ok(SolveRun {
            ctx: Ctx { ch, vps },
            info,
            versions,
            version,
            feature: pack.track_feature.clone(),
            pack,
            core_spec,
            with,
            without,
            preferred,
            other,
        })
    }

    fn ch(&self) -> &'a LoadedChannel {
        self.ctx.ch
    }

    fn payloads(&self) -> &'a [String] {
        &self.info.payload_packages
    }

    /// The build-string glob that selects variant `v`'s builds.
    fn glob(&self, v: &str) -> String {
        let names: Vec<&str> = self.info.variants.iter().map(String::as_str).collect();
        crate::recipe::split::variant_glob(v, &names, self.pack.build_keys.is_empty())
    }

    /// Whether variant `v` of pack `p` brings the payload packages.
    fn payload_needed(&self, v: &str, p: &PackRecord) -> bool {
        v == self.with && !p.payload_static
    }

    /// What a default request must give: core at `p`'s version with variant `v` of the lazy
    /// package, and the payload packages or none.
    fn expect_default(&self, v: &str, p: &PackRecord) -> String {
        let payloads = self.payloads().join(", ");
        format!(
            "{} {} with the {v} {}{}",
            self.info.core,
            p.version,
            self.info.lazy,
            if self.payload_needed(v, p) {
                format!(" and {payloads}")
            } else {
                format!(", no {payloads}")
            }
        )
    }

    /// How track_features decide between `p` (the one to pick) and `np` in channel `c` at
    /// version `v`.
    fn ranking(&self, p: &str, np: &str, c: &LoadedChannel, v: &str) -> Semantics {
        if !c.has_variant(v, np) {
            return Semantics {
                relied_on: false,
                solvers_agree: true,
                why: format!(
                    "not consulted: {v} has no {np} build in the channel, so {p} is the only candidate"
                ),
            };
        }
        let feature = &self.feature;
        Semantics {
            relied_on: true,
            solvers_agree: true,
            why: format!(
                "only the {np} build carries a track feature ({feature}); both builds share version {v} and build number, so the feature alone decides. resolvo ranks \"no feature\" above \"a feature\" (yes/no, before version and build number); conda's classic solver minimises the number of features. With one featured candidate both pick {p}."
            ),
        }
    }

    fn slim_spec(&self) -> String {
        format!("{} * {}", self.info.lazy, self.glob(&self.without))
    }

    /// (a) default: the core package alone gives the preferred variant.
    fn default(&self) -> Result<(Scenario, Install)> {
        let (ch, version, preferred) = (self.ch(), &self.version, &self.preferred);
        let mut a = scenario(
            "a",
            "default",
            ch,
            vec![self.core_spec.clone()],
            self.expect_default(preferred, &self.pack),
            self.ranking(preferred, &self.other, ch, version),
        );
        let records = if !ch.has_variant(version, preferred) {
            a.detail = format!(
                "not applicable: the preferred variant ({preferred}) of {version} is not in the channel"
            );
            None
        } else {
            let payload = self.payload_needed(preferred, &self.pack);
            expect_set(&self.ctx, &mut a, version, preferred, payload)?
        };
        Ok((
            a,
            Install {
                env: InstallEnv::Default,
                scenario: "a",
                records,
            },
        ))
    }

    /// (b) slim: core and the slim build's glob give the slim variant and no payload package.
    fn slim(&self) -> Result<(Scenario, Install)> {
        let (ch, version, without) = (self.ch(), &self.version, &self.without);
        let info = self.info;
        let mut b = scenario(
            "b",
            "slim",
            ch,
            vec![self.core_spec.clone(), self.slim_spec()],
            format!(
                "{} {version} with the {without} {} and no {}",
                info.core,
                info.lazy,
                self.payloads().join(", ")
            ),
            Semantics {
                relied_on: false,
                solvers_agree: true,
                why: format!(
                    "not consulted: the build-string spec leaves only {without} builds; the solver only has to honour their constrains ({})",
                    self.payloads()
                        .iter()
                        .map(|p| format!("{p} <0.0a0"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        );
        let records = if !ch.has_variant(version, without) {
            b.detail = format!(
                "not applicable: no {without} build of {} {version} in the channel (pack with --lazy-variant {without}=FILE)",
                info.lazy
            );
            None
        } else {
            expect_set(&self.ctx, &mut b, version, without, false)?
        };
        Ok((
            b,
            Install {
                env: InstallEnv::Slim,
                scenario: "b",
                records,
            },
        ))
    }

    /// (c) conflict: the slim variant and a payload package cannot be installed together.
    fn conflict(&self) -> Result<Scenario> {
        let (ch, without) = (self.ch(), &self.without);
        let payload = self.payloads().first().cloned().unwrap_or_default();
        let mut c = scenario(
            "c",
            "conflict",
            ch,
            vec![self.slim_spec(), payload.clone()],
            format!("unsatisfiable: the {without} build constrains {payload} <0.0a0"),
            Semantics {
                relied_on: false,
                solvers_agree: true,
                why: format!(
                    "not consulted: a hard conflict between the requested {payload} and the {without} build's constrains {payload} <0.0a0"
                ),
            },
        );
        let payload_in_channel = ch
            .records
            .iter()
            .any(|r| r.package_record.name.as_normalized() == payload);
        if !self.versions.iter().any(|v| ch.has_variant(v, without)) {
            c.detail = format!("not applicable: no {without} build in the channel");
        } else if !payload_in_channel {
            c.detail =
                format!("not applicable: no {payload} package (real or stand-in) in the channel");
        } else {
            unsat(&self.ctx, &mut c)?;
        }
        Ok(c)
    }

    /// (d) version skew: core of one version and the lazy package of another are refused.
    fn version_skew(&self) -> Result<Scenario> {
        let (info, version) = (self.info, &self.version);
        let mut d = scenario(
            "d",
            "version skew",
            self.ch(),
            Vec::new(),
            format!(
                "unsatisfiable: {} and {} are tied to one version",
                info.core, info.lazy
            ),
            Semantics {
                relied_on: false,
                solvers_agree: true,
                why: format!(
                    "not consulted: {} depends on `{} ==VERSION KEYS*` and each {} build constrains `{} ==VERSION KEYS*`",
                    info.core, info.lazy, info.lazy, info.core
                ),
            },
        );
        if self.versions.len() < 2 {
            d.detail = format!(
                "not applicable: one version in the channel ({})",
                self.versions.join(", ")
            );
        } else {
            let older = self
                .versions
                .iter()
                .rev()
                .find(|v| *v != version)
                .cloned()
                .expect("two versions");
            d.specs = vec![
                format!("{} =={version}", info.core),
                format!("{} =={older}", info.lazy),
            ];
            unsat(&self.ctx, &mut d)?;
        }
        Ok(d)
    }

    /// (e) flipped preference: on a channel packed with the opposite `--prefer`, the core package
    /// alone gives the other variant.
    fn flipped(&self, flipped: Option<&LoadedChannel>) -> Result<Scenario> {
        let (ch, info, other, preferred) = (self.ch(), self.info, &self.other, &self.preferred);
        let mut e = scenario(
            "e",
            "flipped preference",
            flipped.unwrap_or(ch),
            vec![info.core.clone()],
            format!(
                "on a channel packed with --prefer {other}: the {other} {}",
                info.lazy
            ),
            self.ranking(other, preferred, ch, &self.version),
        );
        let Some(f) = flipped else {
            e.detail = format!(
                "not applicable: no --prefer-channel (pack the same input with --prefer {other} into another channel)"
            );
            return Ok(e);
        };
        let fv = f.versions();
        match fv.last().and_then(|v| f.pack(v)).cloned() {
            None => e.detail = "not applicable: the --prefer-channel lists no pack".into(),
            Some(_) if f.info.core != info.core || f.info.lazy != info.lazy => {
                e.status = ScenarioStatus::Fail;
                e.detail = format!(
                    "the --prefer-channel holds another split ({} / {})",
                    f.info.core, f.info.lazy
                );
            }
            Some(fp) if &fp.preferred == preferred => {
                e.status = ScenarioStatus::Fail;
                e.detail = format!(
                    "the --prefer-channel prefers {} too: it is not flipped",
                    fp.preferred
                );
            }
            Some(fp) if !f.has_variant(&fp.version, &fp.preferred) => {
                e.detail = format!(
                    "not applicable: the --prefer-channel lacks its preferred {} build",
                    fp.preferred
                );
            }
            Some(fp) => {
                e.expect = self.expect_default(&fp.preferred, &fp);
                e.track_features = self.ranking(&fp.preferred, preferred, f, &fp.version);
                e.track_features.why = e
                    .track_features
                    .why
                    .replace(&self.feature, &fp.track_feature);
                let fctx = Ctx {
                    ch: f,
                    vps: self.ctx.vps,
                };
                let payload = self.payload_needed(&fp.preferred, &fp);
                expect_set(&fctx, &mut e, &fp.version, &fp.preferred, payload)?;
            }
        }
        Ok(e)
    }
}

/// Solve `s`, which must be satisfiable, and check the set with [`check_set`]. Returns the records
/// for installing it.
fn expect_set(
    ctx: &Ctx,
    s: &mut Scenario,
    version: &str,
    variant: &str,
    payload: bool,
) -> Result<Option<Vec<RepoDataRecord>>> {
    match solve_specs(&ctx.ch.records, &s.specs, ctx.vps)? {
        Ok(recs) => {
            let solved = ctx.solved(&recs)?;
            let (ok, detail) = check_set(&solved, &ctx.ch.info, version, variant, payload);
            s.status = ScenarioStatus::of(ok);
            s.detail = detail;
            fill(s, solved);
            Ok(Some(recs))
        }
        Err(Unsolvable(msg)) => {
            s.status = ScenarioStatus::Fail;
            s.detail = "unsatisfiable".into();
            s.solver_message = Some(msg);
            Ok(None)
        }
    }
}

fn unsat(ctx: &Ctx, s: &mut Scenario) -> Result<()> {
    match solve_specs(&ctx.ch.records, &s.specs, ctx.vps)? {
        Ok(recs) => {
            s.status = ScenarioStatus::Fail;
            s.detail = "solved, but must be unsatisfiable".into();
            let solved = ctx.solved(&recs)?;
            fill(s, solved);
        }
        Err(Unsolvable(msg)) => {
            s.status = ScenarioStatus::Pass;
            s.detail = "unsatisfiable, as required".into();
            s.solver_message = Some(msg);
        }
    }
    Ok(())
}

/// The set has core and lazy at `version`, the lazy package in `variant`, and payload packages
/// exactly when `payload` says so.
fn check_set(
    solved: &[Solved],
    info: &ChannelInfo,
    version: &str,
    variant: &str,
    payload: bool,
) -> (bool, String) {
    let mut problems = Vec::new();
    match solved.iter().find(|s| s.name == info.core) {
        Some(c) if c.version == version => {}
        Some(c) => problems.push(format!("{} {} instead of {version}", info.core, c.version)),
        None => problems.push(format!("no {}", info.core)),
    }
    match solved.iter().find(|s| s.name == info.lazy) {
        Some(l) if l.version == version && l.variant.as_deref() == Some(variant) => {}
        Some(l) => problems.push(format!(
            "{} {} {} instead of the {variant} build of {version}",
            info.lazy, l.version, l.build
        )),
        None => problems.push(format!("no {}", info.lazy)),
    }
    let present: Vec<&str> = info
        .payload_packages
        .iter()
        .filter(|p| solved.iter().any(|s| &s.name == *p))
        .map(String::as_str)
        .collect();
    if payload && present.len() != info.payload_packages.len() {
        problems.push(format!(
            "payload packages missing: has {present:?} of {:?}",
            info.payload_packages
        ));
    }
    if !payload && !present.is_empty() {
        problems.push(format!("payload packages present: {}", present.join(", ")));
    }
    if problems.is_empty() {
        (
            true,
            format!(
                "{variant}{}",
                if payload {
                    format!(" + {}", info.payload_packages.join(", "))
                } else {
                    String::new()
                }
            ),
        )
    } else {
        (false, problems.join("; "))
    }
}

/// The small tokio runtime the rattler calls run on (index, install).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .failed_at("tokio")
}

/// Install `records` into `prefix` with rattler's installer (linux-64), from the package cache
/// `cache`; the transaction against what the prefix already holds is the installer's. Used by
/// `solve --install` and `env --switch`. Returns what it removed and what it linked, as sorted
/// `name-version-build`.
pub fn install(
    rt: &tokio::runtime::Runtime,
    cache: &Path,
    prefix: &Path,
    records: Vec<RepoDataRecord>,
    installed: Option<Vec<rattler_conda_types::PrefixRecord>>,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut installer = rattler::install::Installer::new()
        .with_package_cache(rattler::package_cache::PackageCache::new(cache))
        .with_target_platform(rattler_conda_types::Subdir::Linux64);
    // The records the caller checked (`env::prefix_records`), not a second read of the prefix.
    if let Some(installed) = installed {
        installer.set_installed_packages(installed);
    }
    let result = rt
        .block_on(installer.install(prefix, records))
        .failed_at(format_args!("installing into {}", prefix.display()))?;
    let t = &result.transaction;
    let mut removed: Vec<String> = t
        .removed_packages()
        .map(|r| format!("{}-{}-{}", r.name().as_normalized(), r.version(), r.build()))
        .collect();
    let mut installed: Vec<String> = t
        .installed_packages()
        .map(|r| record_id(&r.package_record))
        .collect();
    removed.sort();
    installed.sort();
    Ok((removed, installed))
}

/// `name-version-build`, as conda-meta names its records.
pub fn record_id(r: &rattler_conda_types::PackageRecord) -> String {
    format!("{}-{}-{}", r.name.as_normalized(), r.version, r.build)
}

/// A scenario's solution to install with `--install`, into `DIR/default` or `DIR/slim`.
struct Install {
    env: InstallEnv,
    scenario: &'static str,
    /// None when the scenario has no solution.
    records: Option<Vec<RepoDataRecord>>,
}

fn install_and_plan(
    dir: &Path,
    ch: &LoadedChannel,
    installs: Vec<Install>,
    progress: &Progress,
) -> Result<InstallReport> {
    for i in &installs {
        let p = dir.join(i.env.as_str());
        if p.exists()
            && std::fs::read_dir(&p)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(Error::Usage(format!(
                "--install {}: {} exists and is not empty",
                dir.display(),
                p.display()
            )));
        }
    }
    std::fs::create_dir_all(dir).at(dir)?;
    let installer = Installing {
        rt: runtime()?,
        cache: dir.join("pkgs"),
        ch,
        spec: crate::analysis::payload::PayloadSpec::for_deps(&ch.info.dep_names(), &[]),
        progress,
    };
    let envs = installs
        .into_iter()
        .map(|i| installer.install_and_check(dir, i))
        .collect::<Result<_>>()?;
    Ok(InstallReport {
        dir: dir.display().to_string(),
        envs,
    })
}

/// What the installs of `--install` share: the runtime, the package cache, the channel and the
/// payload libraries to look for in the installed prefixes.
struct Installing<'a> {
    rt: tokio::runtime::Runtime,
    cache: PathBuf,
    ch: &'a LoadedChannel,
    spec: crate::analysis::payload::PayloadSpec,
    progress: &'a Progress,
}

impl Installing<'_> {
    /// Install one scenario's solution into `dir/ENV` and check the prefix with `plan`.
    fn install_and_check(&self, dir: &Path, i: Install) -> Result<EnvCheck> {
        let Install {
            env,
            scenario,
            records,
        } = i;
        let prefix = dir.join(env.as_str());
        let Some(records) = records else {
            return Ok(EnvCheck {
                name: env,
                scenario: scenario.into(),
                prefix: prefix.display().to_string(),
                status: ScenarioStatus::NotApplicable,
                detail: format!("scenario ({scenario}) has no solution to install"),
                packages: Vec::new(),
                verdict: None,
                expect: env.expect().to_string(),
                payload_files: Vec::new(),
            });
        };
        let packages: Vec<String> = records
            .iter()
            .map(|r| record_id(&r.package_record))
            .collect();
        self.progress
            .start_unknown(&format!("install {}", env.as_str()));
        install(&self.rt, &self.cache, &prefix, records, None)?;
        self.progress.finish();
        let (verdict, payload_files) = self.plan_prefix(&prefix)?;
        let payload_pkgs: Vec<&str> = self
            .ch
            .info
            .payload_packages
            .iter()
            .filter(|p| packages.iter().any(|x| x.starts_with(&format!("{p}-"))))
            .map(String::as_str)
            .collect();
        let want = env.verdict();
        let (ok, detail) = match env {
            InstallEnv::Default => (verdict == want, format!("plan: {}", verdict.label())),
            InstallEnv::Slim => (
                verdict == want && payload_files.is_empty() && payload_pkgs.is_empty(),
                format!(
                    "plan: {}; {} payload files; payload packages: {}",
                    verdict.label(),
                    payload_files.len(),
                    if payload_pkgs.is_empty() {
                        "none".to_string()
                    } else {
                        payload_pkgs.join(", ")
                    }
                ),
            ),
        };
        Ok(EnvCheck {
            name: env,
            scenario: scenario.into(),
            prefix: prefix.display().to_string(),
            status: ScenarioStatus::of(ok),
            detail,
            packages,
            verdict: Some(verdict),
            expect: env.expect().to_string(),
            payload_files,
        })
    }

    /// `splitpkg plan` on an installed prefix: its verdict and the payload libraries in it.
    fn plan_prefix(
        &self,
        prefix: &Path,
    ) -> Result<(crate::analysis::verdict::Verdict, Vec<String>)> {
        let req = Request {
            path: prefix.to_path_buf(),
            lazy: self.ch.info.lazy_names(),
            spec: self.spec.clone(),
            extras: Default::default(),
        };
        let Planned {
            inspection: ins,
            plan,
            ..
        } = plan_tree(&req, &Progress::hidden())?;
        let payload_files: Vec<String> = ins
            .tree
            .entries
            .iter()
            .filter(|e| {
                !matches!(e.kind, crate::input::EntryKind::Dir)
                    && self
                        .spec
                        .is_payload_library(crate::input::Tree::file_name(&e.path))
            })
            .map(|e| e.path.clone())
            .collect();
        Ok((plan.verdict, payload_files))
    }
}

/// The report for people: the channel, then one line per scenario and installed environment.
pub fn report_text(r: &SolveReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "channel {} ({} / {}; versions {}; preferred {})",
        r.channel,
        r.core,
        r.lazy,
        r.versions.join(", "),
        r.preferred
    );
    let _ = writeln!(
        s,
        "solver: {}; virtual packages: {}",
        r.solver,
        r.virtual_packages.join(" ")
    );
    for sc in &r.scenarios {
        scenario_text(&mut s, sc);
    }
    if let Some(i) = &r.install {
        let _ = writeln!(s, "\ninstalled into {}:", i.dir);
        for e in &i.envs {
            let _ = writeln!(
                s,
                "  {:<8} ({}) {}: {}{}",
                e.name,
                e.scenario,
                e.status.label(),
                e.detail,
                if e.packages.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", e.packages.join(", "))
                }
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{}",
        if r.pass {
            "all applicable scenarios as required"
        } else {
            "SOME SCENARIOS FAILED"
        }
    );
    s
}

/// One scenario: the request, what it must show, the result, the solved set, the solver's message
/// and how track_features bear on it.
fn scenario_text(s: &mut String, sc: &Scenario) {
    use crate::output::human_bytes;
    use std::fmt::Write as _;
    let _ = writeln!(s, "\n({}) {}: {}", sc.id, sc.name, sc.status.label());
    if !sc.specs.is_empty() {
        let _ = writeln!(
            s,
            "    request: {}",
            sc.specs
                .iter()
                .map(|x| format!("\"{x}\""))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let _ = writeln!(s, "    must show: {}", sc.expect);
    if !sc.detail.is_empty() {
        let _ = writeln!(s, "    result: {}", sc.detail);
    }
    if !sc.solved.is_empty() {
        let _ = writeln!(
            s,
            "    solved: {} packages, archives {}, installed {}{}",
            sc.solved.len(),
            human_bytes(sc.archive_bytes),
            human_bytes(sc.installed_bytes),
            if sc.represented_bytes > 0 {
                format!(
                    " + {} represented by stand-ins",
                    human_bytes(sc.represented_bytes)
                )
            } else {
                String::new()
            }
        );
        for p in &sc.solved {
            let _ = writeln!(
                s,
                "      {:<24} {:<10} {:<34} {:>10} archive {:>10} installed{}",
                p.name,
                p.version,
                p.build,
                human_bytes(p.archive_bytes),
                human_bytes(p.installed_bytes),
                match p.represents_bytes {
                    Some(b) => format!("  [stand-in] represents {}", human_bytes(b)),
                    None => String::new(),
                }
            );
        }
    }
    if let Some(m) = &sc.solver_message {
        let _ = writeln!(s, "    solver says:");
        for l in m.lines() {
            let _ = writeln!(s, "      {l}");
        }
    }
    let _ = writeln!(
        s,
        "    track_features: {}{}",
        if sc.track_features.relied_on {
            "relied on — "
        } else {
            ""
        },
        sc.track_features.why
    );
}
