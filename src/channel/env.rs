//! `splitpkg env PREFIX`: for users of a split environment — which variant of the lazy library is
//! installed, what switching to the other one would save or cost, the exact command to switch with
//! conda, mamba and pixi, and an SVG bar chart of the two environments.
//!
//! Everything comes from the prefix (`conda-meta/*.json`, and the markers stand-ins install). The
//! size of the variant that is *not* installed comes from the channel the lazy package was
//! installed from when that is a local channel made by `splitpkg pack` (its `splitpkg.json`), or
//! from `--channel`; otherwise it is reported as unknown rather than guessed.

use std::path::{Path, PathBuf};

use rattler_conda_types::{MatchSpec, ParseStrictness, PrefixRecord};
use serde::Serialize;

use crate::channel::info::ChannelInfo;
use crate::error::{Error, Result};
use crate::recipe::split::{Variant, variant_glob, variant_in_build};

pub struct EnvOptions {
    pub prefix: PathBuf,
    pub lazy_name: String,
    pub dep: String,
    pub channel: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvReport {
    pub schema: &'static str,
    pub schema_version: u32,
    pub prefix: String,
    pub lazy: String,
    pub version: String,
    pub build: String,
    /// The installed variant (`magma` / `nomagma`), from the build string.
    pub variant: String,
    pub track_features: Vec<String>,
    pub packages: Vec<EnvPackage>,
    /// Installed bytes of real packages.
    pub real_bytes: u64,
    /// Bytes the installed stand-ins represent (not on disk).
    pub represented_bytes: u64,
    pub switch: Switch,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvPackage {
    pub name: String,
    pub version: String,
    pub build: String,
    /// core, lazy, payload or other.
    pub role: String,
    pub files: usize,
    pub bytes: u64,
    pub standin: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub represents_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Switch {
    pub to: String,
    /// Bytes of the lazy package now, and after the switch when known.
    pub lazy_now: u64,
    pub lazy_after: Option<u64>,
    /// Payload packages the switch removes (to the slim variant) or adds.
    pub payload_removed: Vec<String>,
    pub payload_added: Vec<String>,
    /// Change in real installed bytes (negative: a saving), when known.
    pub real_delta: Option<i64>,
    /// Change in bytes represented by stand-ins.
    pub represented_delta: i64,
    /// Real installed bytes after the switch, when known.
    pub real_after: Option<u64>,
    pub represented_after: u64,
    /// Where the other variant's size comes from, or why it is unknown.
    pub sizes_from: String,
    /// The other variant's size is the plan's estimate, not a measured package.
    pub estimated: bool,
    pub commands: Commands,
}

#[derive(Debug, Clone, Serialize)]
pub struct Commands {
    pub conda: String,
    pub mamba: String,
    pub pixi: String,
    /// The match specs inside the commands (each parses with rattler_conda_types).
    pub conda_spec: String,
    pub pixi_spec: String,
}

/// The build-string glob that selects `variant`'s builds, given an installed build string (its
/// key prefix, or none, decides the glob's shape).
fn switch_glob(variant: &str, variants: &[&str], installed_build: &str) -> String {
    let installed_variant = variants
        .iter()
        .find(|v| installed_build.split('_').any(|t| t == **v))
        .copied()
        .unwrap_or(variant);
    let key_prefix_empty = installed_build.starts_with(&format!("{installed_variant}_"));
    variant_glob(variant, variants, key_prefix_empty)
}

/// The commands that switch `lazy` to `variant`, given an installed build string (to tell whether
/// the builds have a key prefix, which decides the glob).
pub fn commands(
    lazy: &str,
    variant: &str,
    variants: &[&str],
    installed_build: &str,
) -> Result<Commands> {
    let glob = switch_glob(variant, variants, installed_build);
    let conda_spec = format!("{lazy}=*={glob}");
    let pixi_spec = format!("{lazy}[build='{glob}']");
    // conda's `name=version=build` form is lenient-only in rattler; pixi's bracket form is strict.
    MatchSpec::from_str(&conda_spec, ParseStrictness::Lenient)
        .map_err(|e| Error::failed(&conda_spec, e))?;
    MatchSpec::from_str(&pixi_spec, ParseStrictness::Strict)
        .map_err(|e| Error::failed(&pixi_spec, e))?;
    Ok(Commands {
        conda: format!("conda install \"{conda_spec}\""),
        mamba: format!("mamba install \"{conda_spec}\""),
        pixi: format!("pixi add \"{pixi_spec}\""),
        conda_spec,
        pixi_spec,
    })
}

/// The prefix's `conda-meta` records, each checked before anything acts on it (the installer
/// deletes every path a removed package's record lists):
/// - its file name is the record it holds (`NAME-VERSION-BUILD.json`): rattler removes a record by
///   the name it computes, so one filed under another name would stay behind as installed;
/// - each package is installed once (two records of one name make "the installed variant" either);
/// - every path it lists stays inside the prefix ([`crate::confine`]): relative, no `..`, and no
///   directory on the way a symlink out of the prefix.
///
/// The records are selected as rattler selects them (regular `*.json` files), so the installer is
/// handed exactly the list checked here.
pub fn prefix_records(prefix: &Path) -> Result<Vec<PrefixRecord>> {
    let meta = prefix.join("conda-meta");
    let entries = std::fs::read_dir(&meta).map_err(|e| Error::io(&meta, e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_type().is_ok_and(|t| t.is_file())
                && e.file_name().to_string_lossy().ends_with(".json")
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut root = crate::confine::Root::new(prefix);
    let mut by_name: std::collections::BTreeMap<String, String> = Default::default();
    let mut records = Vec::with_capacity(files.len());
    for file in files {
        let shown = file.display().to_string();
        let record = PrefixRecord::from_path(&file)
            .map_err(|e| Error::bad(&shown, format!("unreadable conda-meta record: {e}")))?;
        let named = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if named != record.file_name() {
            return Err(Error::bad(
                &shown,
                format!(
                    "the record inside is {}: its file name says otherwise",
                    record.file_name()
                ),
            ));
        }
        let name = record
            .repodata_record
            .package_record
            .name
            .as_normalized()
            .to_string();
        if let Some(first) = by_name.insert(name.clone(), named) {
            return Err(Error::bad(
                &shown,
                format!("{name} is installed twice (also conda-meta/{first})"),
            ));
        }
        let listed = record
            .paths_data
            .paths
            .iter()
            .map(|p| &p.relative_path)
            .chain(record.files.iter());
        for rel in listed {
            let text = rel
                .to_str()
                .ok_or_else(|| Error::bad(&shown, format!("path {rel:?} is not UTF-8")))?;
            root.join(text).map_err(|e| {
                Error::bad(&shown, format!("lists a path outside the environment: {e}"))
            })?;
        }
        records.push(record);
    }
    Ok(records)
}

pub fn env(opts: &EnvOptions) -> Result<EnvReport> {
    let prefix = &opts.prefix;
    let meta = prefix.join("conda-meta");
    if !meta.is_dir() {
        return Err(Error::bad(
            prefix.display(),
            "not a conda environment (no conda-meta/)",
        ));
    }
    let mut records = prefix_records(prefix)?;
    records.sort_by(|a, b| {
        a.repodata_record
            .package_record
            .name
            .as_normalized()
            .cmp(b.repodata_record.package_record.name.as_normalized())
    });
    let markers = crate::channel::standin::markers_in_prefix(prefix);
    let name_of = |r: &PrefixRecord| {
        r.repodata_record
            .package_record
            .name
            .as_normalized()
            .to_string()
    };
    let lazy = records
        .iter()
        .find(|r| name_of(r) == opts.lazy_name)
        .ok_or_else(|| {
            Error::bad(
                prefix.display(),
                format!(
                    "no {} package installed: not an environment of the split (see --lazy-name)",
                    opts.lazy_name
                ),
            )
        })?;
    let with = opts.dep.clone();
    let without = crate::analysis::payload::slim_variant(&opts.dep);
    let variants = vec![
        Variant {
            name: with.clone(),
            with_payload: true,
            preferred: false,
        },
        Variant {
            name: without.clone(),
            with_payload: false,
            preferred: false,
        },
    ];
    let lazy_rec = &lazy.repodata_record.package_record;
    let build = lazy_rec.build.to_string();
    let variant = variant_in_build(&variants, &build)
        .map(|v| v.name.clone())
        .ok_or_else(|| {
            Error::bad(
                meta.display(),
                format!(
                    "{} {build}: the build string names neither {with} nor {without}",
                    opts.lazy_name
                ),
            )
        })?;
    let other = if variant == with {
        without.clone()
    } else {
        with.clone()
    };

    // The channel that knows the other variant: --channel, or the local one the package came from.
    let mut notes = Vec::new();
    let channel_dir = opts.channel.clone().or_else(|| {
        let url = &lazy.repodata_record.url;
        (url.scheme() == "file")
            .then(|| url.to_file_path().ok())
            .flatten()
            .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
    });
    let info = match &channel_dir {
        Some(d) if d.join(crate::channel::info::CHANNEL_FILE).exists() => {
            Some(ChannelInfo::load(d)?)
        }
        Some(d) if opts.channel.is_some() => {
            return Err(Error::bad(
                d.display(),
                "not a channel made by `splitpkg pack` (no splitpkg.json)",
            ));
        }
        _ => None,
    };
    let payload_names: Vec<String> = match &info {
        Some(i) => i.payload_packages.clone(),
        None => {
            let prefix_name = format!("lib{}", opts.dep);
            let mut v: Vec<String> = records
                .iter()
                .map(name_of)
                .filter(|n| {
                    n == &prefix_name
                        || n.starts_with(&format!("{prefix_name}_"))
                        || n.starts_with(&format!("{prefix_name}-"))
                })
                .collect();
            if v.is_empty() {
                v.push(prefix_name);
            }
            notes.push(format!(
                "payload packages taken by name ({}): no splitpkg channel description found",
                v.join(", ")
            ));
            v
        }
    };

    let mut packages = Vec::new();
    for r in &records {
        let name = name_of(r);
        let pr = &r.repodata_record.package_record;
        let standin = markers.contains_key(&name) || pr.license.as_deref() == Some("stand-in");
        let role = if name == opts.lazy_name {
            "lazy"
        } else if payload_names.contains(&name) {
            "payload"
        } else if info.as_ref().is_some_and(|i| i.core == name)
            || pr
                .depends
                .iter()
                .any(|d| d.split_whitespace().next() == Some(opts.lazy_name.as_str()))
        {
            "core"
        } else {
            "other"
        };
        packages.push(EnvPackage {
            name: name.clone(),
            version: pr.version.to_string(),
            build: pr.build.to_string(),
            role: role.into(),
            files: r.paths_data.paths.len(),
            // File contents only: a symlink's recorded size is the length of its target.
            bytes: r
                .paths_data
                .paths
                .iter()
                .filter(|p| {
                    !matches!(
                        p.path_type,
                        rattler_conda_types::prefix_record::PathType::SoftLink
                            | rattler_conda_types::prefix_record::PathType::Directory
                    )
                })
                .filter_map(|p| p.size_in_bytes)
                .sum(),
            standin,
            represents_bytes: if standin {
                Some(markers.get(&name).map(|m| m.represents_bytes).unwrap_or(0))
            } else {
                None
            },
        });
    }
    let real_bytes: u64 = packages
        .iter()
        .filter(|p| !p.standin)
        .map(|p| p.bytes)
        .sum();
    let represented_bytes: u64 = packages.iter().filter_map(|p| p.represents_bytes).sum();
    let lazy_now = packages
        .iter()
        .find(|p| p.role == "lazy")
        .map(|p| p.bytes)
        .unwrap_or(0);

    // The switch.
    let to_slim = other == without;
    let installed_payload: Vec<&EnvPackage> =
        packages.iter().filter(|p| p.role == "payload").collect();
    let (payload_removed, mut payload_added) = if to_slim {
        (
            installed_payload
                .iter()
                .map(|p| p.name.clone())
                .collect::<Vec<_>>(),
            Vec::new(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let mut real_delta: Option<i64> = None;
    let mut represented_delta: i64 = 0;
    let mut lazy_after = None;
    let mut estimated = false;
    let sizes_from;
    let version = lazy_rec.version.to_string();
    let pack = info
        .as_ref()
        .and_then(|i| i.packs.iter().find(|p| p.version == version));
    match pack {
        Some(p) => {
            let other_pkg = p
                .packages
                .iter()
                .find(|x| x.name == opts.lazy_name && x.variant.as_deref() == Some(other.as_str()));
            if other_pkg.is_none() {
                notes.push(format!(
                    "the channel has no {other} build of {} {version}: the commands below fail until one is published",
                    opts.lazy_name
                ));
            }
            match other_pkg {
                Some(o) => {
                    lazy_after = Some(o.bytes);
                    let mut delta = o.bytes as i64 - lazy_now as i64;
                    if to_slim {
                        for pk in &installed_payload {
                            if pk.standin {
                                represented_delta -= pk.represents_bytes.unwrap_or(0) as i64;
                            } else {
                                delta -= pk.bytes as i64;
                            }
                        }
                    } else if !p.payload_static {
                        let info = info.as_ref().expect("pack implies info");
                        for name in &info.payload_packages {
                            if packages.iter().any(|x| &x.name == name) {
                                continue;
                            }
                            let found = p
                                .packages
                                .iter()
                                .chain(info.standins.iter())
                                .find(|x| &x.name == name);
                            match found {
                                Some(x) if x.standin => {
                                    represented_delta += x.represents_bytes.unwrap_or(0) as i64
                                }
                                Some(x) => delta += x.bytes as i64,
                                None => notes.push(format!(
                                    "{name} is not in the channel: its size is not counted"
                                )),
                            }
                            payload_added.push(name.clone());
                        }
                    }
                    real_delta = Some(delta);
                    sizes_from = format!(
                        "channel {}",
                        channel_dir
                            .as_ref()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default()
                    );
                }
                None => match p.variant_sizes.iter().find(|v| v.name == other) {
                    // Not packed: the plan's estimate for that build, said to be one.
                    Some(est) => {
                        lazy_after = Some(est.bytes);
                        let mut delta = est.bytes as i64 - lazy_now as i64;
                        for pk in installed_payload.iter().filter(|_| to_slim) {
                            if pk.standin {
                                represented_delta -= pk.represents_bytes.unwrap_or(0) as i64;
                            } else {
                                delta -= pk.bytes as i64;
                            }
                        }
                        real_delta = Some(delta);
                        estimated = !est.measured;
                        sizes_from = format!(
                            "{} of the {other} build: {} (the channel has no {other} package of {version})",
                            if est.measured {
                                "measured size"
                            } else {
                                "plan estimate"
                            },
                            est.how
                        );
                    }
                    None => {
                        sizes_from = format!(
                            "unknown: the channel has no {other} build of {} {version}",
                            opts.lazy_name
                        )
                    }
                },
            }
        }
        None => {
            sizes_from = match &channel_dir {
                Some(d) if info.is_some() => format!(
                    "unknown: channel {} has no pack of version {version}",
                    d.display()
                ),
                _ => format!(
                    "unknown: {} was not installed from a splitpkg channel (pass --channel)",
                    opts.lazy_name
                ),
            };
            if to_slim {
                // What leaves with the payload packages is known from the prefix itself.
                let mut delta = 0i64;
                for pk in &installed_payload {
                    if pk.standin {
                        represented_delta -= pk.represents_bytes.unwrap_or(0) as i64;
                    } else {
                        delta -= pk.bytes as i64;
                    }
                }
                notes.push(format!(
                    "switching removes {} of payload packages; the {other} build's own size is unknown",
                    crate::output::human_bytes(delta.unsigned_abs())
                ));
            }
        }
    }
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let commands = commands(&opts.lazy_name, &other, &names, &build)?;
    if to_slim && !payload_removed.is_empty() {
        notes.push(format!(
            "the {other} build constrains {} <0.0a0, so the solver removes {} when you switch",
            payload_names.join(", "),
            payload_removed.join(", ")
        ));
    }
    let switch = Switch {
        to: other,
        lazy_now,
        lazy_after,
        payload_removed,
        payload_added,
        real_after: real_delta.map(|d| (real_bytes as i64 + d).max(0) as u64),
        real_delta,
        represented_after: (represented_bytes as i64 + represented_delta).max(0) as u64,
        represented_delta,
        sizes_from,
        estimated,
        commands,
    };
    Ok(EnvReport {
        schema: "splitpkg-env",
        schema_version: 1,
        prefix: prefix.display().to_string(),
        lazy: opts.lazy_name.clone(),
        version,
        build,
        variant,
        track_features: lazy_rec.track_features.clone(),
        packages,
        real_bytes,
        represented_bytes,
        switch,
        channel: info
            .as_ref()
            .and(channel_dir.as_ref())
            .map(|d| d.display().to_string()),
        notes,
    })
}

fn signed(n: i64) -> String {
    let h = crate::output::human_bytes(n.unsigned_abs());
    if n < 0 {
        format!("saves {h}")
    } else if n > 0 {
        format!("costs {h}")
    } else {
        "no change".to_string()
    }
}

/// What `env --switch` did: the solve and the installer's transaction, then the environment again.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchReport {
    pub schema: &'static str,
    pub schema_version: u32,
    pub prefix: String,
    pub channel: String,
    pub from: String,
    pub to: String,
    /// The match specs solved: every other installed package pinned exactly, the lazy package by
    /// the other variant's build glob, payload packages left to the solver.
    pub specs: Vec<String>,
    /// `name-version-build` the installer removed and installed.
    pub removed: Vec<String>,
    pub installed: Vec<String>,
    pub before: EnvReport,
    pub after: EnvReport,
}

/// Switch the environment to the other variant with rattler's solver and installer, from the
/// splitpkg channel the lazy package came from (or `--channel`). Nothing is touched unless the
/// solve succeeds; the installer then applies the transaction (remove the old lazy build and, to
/// the slim variant, the payload packages; link the new build).
pub fn switch(opts: &EnvOptions) -> Result<SwitchReport> {
    let before = env(opts)?;
    let channel = match (&opts.channel, &before.channel) {
        (Some(c), _) => c.clone(),
        (None, Some(c)) => PathBuf::from(c),
        (None, None) => {
            return Err(Error::Usage(format!(
                "--switch: {} was not installed from a splitpkg channel; pass --channel CHANNEL",
                opts.lazy_name
            )));
        }
    };
    let ch = crate::channel::solve::Loaded::open(&channel)?;
    let without = crate::analysis::payload::slim_variant(&opts.dep);
    let glob = switch_glob(
        &before.switch.to,
        &[opts.dep.as_str(), without.as_str()],
        &before.build,
    );
    let mut specs = Vec::new();
    for p in &before.packages {
        match p.role.as_str() {
            "lazy" => specs.push(format!("{} =={} {glob}", p.name, p.version)),
            "payload" => {}
            _ => specs.push(format!("{} =={} {}", p.name, p.version, p.build)),
        }
    }
    let vps = crate::channel::solve::virtual_packages(&ch.info, &[])?;
    let records = match crate::channel::solve::solve_specs(&ch.records, &specs, &vps)? {
        Ok(r) => r,
        Err(msg) => {
            return Err(Error::bad(
                channel.display(),
                format!(
                    "cannot switch to {}: {}",
                    before.switch.to,
                    msg.lines().map(str::trim).collect::<Vec<_>>().join(" ")
                ),
            ));
        }
    };
    let prefix = &opts.prefix;
    // The package cache sits next to the prefix (same file system: the installer hard-links from it)
    // and goes away afterwards; the prefix keeps its files.
    let parent = prefix
        .canonicalize()
        .map_err(|e| Error::io(prefix, e))?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    crate::output::cleanup::sweep_stale(&parent);
    let cache = parent.join(format!(".splitpkg-switch-pkgs-{}", std::process::id()));
    let installed = prefix_records(prefix)?;
    let result = {
        let _registered =
            crate::output::cleanup::register(&cache, crate::output::cleanup::Leftover::Tree);
        let _removed = RemoveOnDrop(&cache);
        crate::channel::solve::install(
            &crate::channel::solve::runtime()?,
            &cache,
            prefix,
            records,
            Some(installed),
        )
    };
    let (removed, installed) = result?;
    let after = env(opts)?;
    Ok(SwitchReport {
        schema: "splitpkg-env-switch",
        schema_version: 1,
        prefix: prefix.display().to_string(),
        channel: channel.display().to_string(),
        from: before.variant.clone(),
        to: after.variant.clone(),
        specs,
        removed,
        installed,
        before,
        after,
    })
}

/// The package cache goes on every way out of the switch, a panic in the installer included.
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0);
    }
}

pub fn switch_text(r: &SwitchReport) -> String {
    let mut s = format!(
        "switched {} from {} to {} (rattler installer, channel {})\n",
        r.prefix, r.from, r.to, r.channel
    );
    s.push_str(&format!(
        "  solved: {}\n",
        r.specs
            .iter()
            .map(|x| format!("\"{x}\""))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    for x in &r.removed {
        s.push_str(&format!("  - {x}\n"));
    }
    for x in &r.installed {
        s.push_str(&format!("  + {x}\n"));
    }
    let delta = r.after.real_bytes as i64 - r.before.real_bytes as i64;
    s.push_str(&format!(
        "  installed bytes: {} → {} ({}{})\n\n",
        r.before.real_bytes,
        r.after.real_bytes,
        if delta >= 0 { "+" } else { "" },
        delta
    ));
    s.push_str(&report_text(&r.after));
    s
}

pub fn report_text(r: &EnvReport) -> String {
    use crate::output::human_bytes;
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} {} {} → the {} variant",
        r.prefix, r.lazy, r.version, r.build, r.variant
    );
    let _ = writeln!(
        s,
        "installed: {} packages, {} real{}",
        r.packages.len(),
        human_bytes(r.real_bytes),
        if r.represented_bytes > 0 {
            format!(
                " + {} represented by stand-ins (not on disk)",
                human_bytes(r.represented_bytes)
            )
        } else {
            String::new()
        }
    );
    for p in &r.packages {
        let size = match p.represents_bytes {
            Some(b) => format!("[stand-in] represents {}", human_bytes(b)),
            None => human_bytes(p.bytes),
        };
        let _ = writeln!(
            s,
            "  {:<24} {:<10} {:<34} {:<8} {size}",
            p.name, p.version, p.build, p.role
        );
    }
    let w = &r.switch;
    let _ = writeln!(s, "\nswitching to {}:", w.to);
    match (w.real_delta, w.lazy_after) {
        (Some(d), Some(after)) => {
            let _ = writeln!(
                s,
                "  {}{} real ({} → {}{}{})",
                if w.estimated { "estimated: " } else { "" },
                signed(d),
                human_bytes(r.real_bytes),
                human_bytes(w.real_after.unwrap_or(0)),
                format_args!(
                    "; {} {} → {}",
                    r.lazy,
                    human_bytes(w.lazy_now),
                    human_bytes(after)
                ),
                if w.payload_removed.is_empty() && w.payload_added.is_empty() {
                    String::new()
                } else if !w.payload_removed.is_empty() {
                    format!("; removes {}", w.payload_removed.join(", "))
                } else {
                    format!("; adds {}", w.payload_added.join(", "))
                }
            );
        }
        _ => {
            let _ = writeln!(s, "  real bytes: {}", w.sizes_from);
        }
    }
    if w.represented_delta != 0 {
        let _ = writeln!(
            s,
            "  and {} represented by stand-ins",
            signed(w.represented_delta)
        );
    }
    let _ = writeln!(s, "  sizes from: {}", w.sizes_from);
    let _ = writeln!(s, "  conda: {}", w.commands.conda);
    let _ = writeln!(s, "  mamba: {}", w.commands.mamba);
    let _ = writeln!(s, "  pixi:  {}", w.commands.pixi);
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// A self-contained, deterministic SVG: one bar per environment (now, after switching), split into
/// other packages, the lazy library and the payload (real, and represented by stand-ins, hatched).
/// The picture is drawn by [`crate::svg::stacked_bars`]; this says what is in it.
pub fn svg(r: &EnvReport) -> String {
    use crate::svg::{Part, Segment, Stacked, StackedBar};
    let now = svg_bytes_now(r);
    let w = &r.switch;
    let (payload_real_after, payload_rep_after) = svg_payload_after(r, &now);
    let segments = |lazy: u64, payload: u64, payload_rep: u64| {
        [
            ("other packages", now.other, Part::Other),
            ("other stand-ins", now.other_rep, Part::OtherStandIn),
            (r.lazy.as_str(), lazy, Part::Lazy),
            ("payload", payload, Part::Payload),
            ("payload [stand-in]", payload_rep, Part::PayloadStandIn),
        ]
        .into_iter()
        .map(|(name, bytes, part)| Segment {
            name: name.to_string(),
            bytes,
            part,
        })
        .collect::<Vec<_>>()
    };
    let bar = |label: String, segments: Vec<Segment>, note: String| {
        let total: u64 = segments.iter().map(|s| s.bytes).sum();
        let note = if note.is_empty() {
            note
        } else {
            format!(" ({note})")
        };
        StackedBar {
            label,
            value: format!("{}{note}", crate::output::human_bytes(total)),
            segments,
        }
    };
    let after_note = if w.lazy_after.is_none() {
        format!("{} size unknown", r.lazy)
    } else if w.estimated {
        format!("{} size estimated", r.lazy)
    } else {
        String::new()
    };
    let bars = vec![
        bar(
            format!("now: {}", r.variant),
            segments(w.lazy_now, now.payload_real, now.payload_rep),
            String::new(),
        ),
        bar(
            format!("after switching: {}", w.to),
            segments(
                w.lazy_after.unwrap_or(0),
                payload_real_after,
                payload_rep_after,
            ),
            after_note,
        ),
    ];
    let footer = match w.real_delta {
        Some(d) => format!(
            "switching {} real bytes{}",
            signed(d),
            if w.represented_delta != 0 {
                format!(", {} represented", signed(w.represented_delta))
            } else {
                String::new()
            }
        ),
        None => format!("sizes after switching: {}", w.sizes_from),
    };
    crate::svg::stacked_bars(&Stacked {
        title: format!("{}: {} vs {}", r.lazy, r.variant, w.to),
        heading: format!("{} in {}", r.lazy, r.prefix),
        bars,
        legend: [
            (Part::Other, "other packages"),
            (Part::Lazy, "lazy library"),
            (Part::Payload, "payload"),
            (Part::PayloadStandIn, "payload [stand-in], represented"),
        ]
        .into_iter()
        .map(|(part, label)| (part, label.to_string()))
        .collect(),
        footer,
    })
}

/// The installed bytes the picture splits the environment into, now.
struct SvgBytesNow {
    other: u64,
    other_rep: u64,
    payload_real: u64,
    payload_rep: u64,
}

fn svg_bytes_now(r: &EnvReport) -> SvgBytesNow {
    let sum = |keep: &dyn Fn(&EnvPackage) -> bool| -> u64 {
        r.packages.iter().filter(|p| keep(p)).map(|p| p.bytes).sum()
    };
    let represented = |keep: &dyn Fn(&EnvPackage) -> bool| -> u64 {
        r.packages
            .iter()
            .filter(|p| keep(p))
            .filter_map(|p| p.represents_bytes)
            .sum()
    };
    SvgBytesNow {
        other: sum(&|p| !p.standin && p.role != "lazy" && p.role != "payload"),
        other_rep: represented(&|p| p.role != "payload"),
        payload_real: sum(&|p| !p.standin && p.role == "payload"),
        payload_rep: represented(&|p| p.role == "payload"),
    }
}

/// The payload's real and represented bytes after switching: from the channel's sizes when known,
/// otherwise none (real) when the switch removes the payload packages.
fn svg_payload_after(r: &EnvReport, now: &SvgBytesNow) -> (u64, u64) {
    let w = &r.switch;
    let rep = (now.payload_rep as i64 + w.represented_delta).max(0) as u64;
    match w.real_delta {
        Some(d) => {
            let lazy_after = w.lazy_after.unwrap_or(w.lazy_now) as i64;
            let real =
                (now.payload_real as i64 + d - (lazy_after - w.lazy_now as i64)).max(0) as u64;
            (real, rep)
        }
        None if w.payload_removed.is_empty() => (now.payload_real, rep),
        None => (0, rep),
    }
}

#[cfg(test)]
use crate::svg::text_width;

#[cfg(test)]
mod tests {
    use super::*;

    fn report(prefix: &str, variant: &str) -> EnvReport {
        let pkg = |name: &str, role: &str, bytes: u64| EnvPackage {
            name: name.into(),
            version: "2.11.0".into(),
            build: "0".into(),
            role: role.into(),
            files: 1,
            bytes,
            standin: false,
            represents_bytes: None,
        };
        let c = commands(
            "libtorch-cuda-linalg",
            "nomagma",
            &["magma", "nomagma"],
            "cuda126_magma_h1234567_0",
        )
        .unwrap();
        EnvReport {
            schema: "splitpkg-env",
            schema_version: 1,
            prefix: prefix.into(),
            lazy: "libtorch-cuda-linalg".into(),
            version: "2.11.0".into(),
            build: format!("cuda126_{variant}_h1234567_0"),
            variant: variant.into(),
            track_features: Vec::new(),
            packages: vec![
                pkg("libtorch", "core", 900 << 20),
                pkg("libtorch-cuda-linalg", "lazy", 50 << 20),
                pkg("libmagma", "payload", 400 << 20),
            ],
            real_bytes: 1350 << 20,
            represented_bytes: 0,
            switch: Switch {
                to: "nomagma".into(),
                lazy_now: 50 << 20,
                lazy_after: Some(5 << 20),
                payload_removed: vec!["libmagma".into()],
                payload_added: Vec::new(),
                real_delta: Some(-(445 << 20)),
                represented_delta: 0,
                real_after: Some(905 << 20),
                represented_after: 0,
                sizes_from: "the channel".into(),
                estimated: false,
                commands: c,
            },
            channel: None,
            notes: Vec::new(),
        }
    }

    /// The `width` attribute of the `<svg>` element and the estimated right edge of every text.
    fn widths(svg: &str) -> (f64, f64) {
        let attr = |tag: &str, name: &str| -> Option<f64> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            tag[at..].split('"').next()?.parse().ok()
        };
        let width = attr(svg, "width").unwrap();
        let mut right: f64 = 0.0;
        for part in svg.split("<text").skip(1) {
            let (tag, rest) = part.split_once('>').unwrap();
            let text = rest
                .split("</text>")
                .next()
                .unwrap()
                .replace("&amp;", "&")
                .replace("&lt;", "<")
                .replace("&gt;", ">");
            let size = attr(tag, "font-size").unwrap_or(12.0);
            right = right.max(attr(tag, "x").unwrap() + text_width(&text, size));
        }
        (width, right)
    }

    #[test]
    fn the_svg_is_as_wide_as_its_labels() {
        // The usual case keeps the usual size.
        let (w, right) = widths(&svg(&report("/opt/conda/envs/t", "magma")));
        assert_eq!(w, 760.0);
        assert!(right <= w, "{right} > {w}");
        // A long prefix (the title) and a long variant name (a bar label) widen it; nothing clips.
        let long = format!(
            "/home/someone/projects/{}/.pixi/envs/default",
            "deeply-nested-directory/".repeat(6)
        );
        let svg = svg(&report(&long, &"a-very-long-variant-name-".repeat(4)));
        let (w, right) = widths(&svg);
        assert!(w > 760.0 && right <= w, "{right} > {w}");
        assert!(svg.contains(&long), "the label is there, whole");
    }

    #[test]
    fn switch_commands_parse_and_select_one_variant() {
        let c = commands(
            "libtorch-cuda-linalg",
            "nomagma",
            &["magma", "nomagma"],
            "cuda126_magma_h1234567_0",
        )
        .unwrap();
        assert_eq!(
            c.conda,
            r#"conda install "libtorch-cuda-linalg=*=*nomagma*""#
        );
        assert_eq!(
            c.mamba,
            r#"mamba install "libtorch-cuda-linalg=*=*nomagma*""#
        );
        assert_eq!(
            c.pixi,
            r#"pixi add "libtorch-cuda-linalg[build='*nomagma*']""#
        );
        let back = commands(
            "libtorch-cuda-linalg",
            "magma",
            &["magma", "nomagma"],
            "cuda126_nomagma_h1234567_0",
        )
        .unwrap();
        assert_eq!(back.conda_spec, "libtorch-cuda-linalg=*=*_magma_*");
        let bare = commands(
            "libtorch-cuda-linalg",
            "magma",
            &["magma", "nomagma"],
            "nomagma_h1234567_0",
        )
        .unwrap();
        assert_eq!(bare.pixi_spec, "libtorch-cuda-linalg[build='magma_*']");
    }
}
