//! `splitpkg env PREFIX`: for users of a split environment — which variant of the lazy library is
//! installed, what switching to the other one would save or cost, the exact command to switch with
//! conda, mamba and pixi, and an SVG bar chart of the two environments.
//!
//! Everything comes from the prefix (`conda-meta/*.json`, and the markers stand-ins install). The
//! size of the variant that is *not* installed comes from the channel the lazy package was
//! installed from when that is a local channel made by `splitpkg pack` (its `splitpkg.json`), or
//! from `--channel`; otherwise it is reported as unknown rather than guessed.

use crate::error::Context;
use std::path::{Path, PathBuf};

use rattler_conda_types::{MatchSpec, ParseStrictness, PrefixRecord};

pub use crate::channel::document::{
    ChannelCommands, EnvPackage, EnvReport, PackageRole, Switch, SwitchReport,
};
use crate::channel::info::{ChannelInfo, PackRecord, PackedPackage};
// The text and the chart keep their paths (`env::report_text`, `env::switch_text`, `env::svg`).
pub use crate::channel::text::{report_text, svg, switch_text};
use crate::error::{Error, Result};
use crate::recipe::split::{SplitVariant, variant_glob, variant_in_build};

/// What `splitpkg env` was asked about.
pub struct EnvOptions {
    /// The installed conda environment (`PREFIX`).
    pub prefix: PathBuf,
    /// The lazy library's package name (`--lazy-name`).
    pub lazy_name: String,
    /// The payload's name (`--dep`, `magma`).
    pub dep: String,
    /// The channel the split came from (`--channel`); None: the one the lazy package was installed
    /// from, when it is a local directory.
    pub channel: Option<PathBuf>,
}

impl PackageRole {
    /// The role as `env` writes it (`core`, `lazy`, `payload`, `other`).
    pub fn as_str(self) -> &'static str {
        match self {
            PackageRole::Core => "core",
            PackageRole::Lazy => "lazy",
            PackageRole::Payload => "payload",
            PackageRole::Other => "other",
        }
    }
}

impl std::fmt::Display for PackageRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
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
) -> Result<ChannelCommands> {
    let glob = switch_glob(variant, variants, installed_build);
    let conda_spec = format!("{lazy}=*={glob}");
    let pixi_spec = format!("{lazy}[build='{glob}']");
    // conda's `name=version=build` form is lenient-only in rattler; pixi's bracket form is strict.
    MatchSpec::from_str(&conda_spec, ParseStrictness::Lenient).failed_at(&conda_spec)?;
    MatchSpec::from_str(&pixi_spec, ParseStrictness::Strict).failed_at(&pixi_spec)?;
    Ok(ChannelCommands {
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
    let entries = std::fs::read_dir(&meta).at(&meta)?;
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
        let record =
            PrefixRecord::from_path(&file).bad_at(&shown, "unreadable conda-meta record")?;
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
            root.join(text)
                .bad_at(&shown, "lists a path outside the environment")?;
        }
        records.push(record);
    }
    Ok(records)
}

/// What the environment at `opts.prefix` has of the split: its packages, the variant installed, and
/// the channel it came from.
pub fn env(opts: &EnvOptions) -> Result<EnvReport> {
    let prefix = &opts.prefix;
    let installed = InstalledPrefix::read(opts)?;
    let lazy_rec = &installed.lazy().repodata_record.package_record;
    let (channel_dir, info) = channel_of(opts, installed.lazy())?;
    let mut notes = Vec::new();
    let payload_names = payload_names(opts, &installed.records, info.as_ref(), &mut notes);
    let markers = crate::channel::standin::markers_in_prefix(prefix);
    let packages: Vec<EnvPackage> = installed
        .records
        .iter()
        .map(|r| env_package(r, opts, &markers, &payload_names, info.as_ref()))
        .collect();
    let real_bytes: u64 = packages
        .iter()
        .filter(|p| !p.standin)
        .map(|p| p.bytes)
        .sum();
    let represented_bytes: u64 = packages.iter().filter_map(|p| p.represents_bytes).sum();
    let version = lazy_rec.version.to_string();
    let switch = SwitchSizes {
        opts,
        other: &installed.other,
        to_slim: installed.other == installed.without,
        version: &version,
        info: info.as_ref(),
        channel_dir: channel_dir.as_deref(),
        packages: &packages,
    }
    .switch(
        &installed,
        &payload_names,
        real_bytes,
        represented_bytes,
        &mut notes,
    )?;
    Ok(EnvReport {
        schema: "splitpkg-env".into(),
        schema_version: 1,
        prefix: prefix.display().to_string(),
        lazy: opts.lazy_name.clone(),
        version,
        build: installed.build.clone(),
        variant: installed.variant.clone(),
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

/// What the prefix holds: its records (sorted by name), the lazy package among them and which of
/// the two variants it is.
struct InstalledPrefix {
    records: Vec<PrefixRecord>,
    /// The lazy package's index in `records`.
    lazy: usize,
    variants: Vec<SplitVariant>,
    /// The slim variant.
    without: String,
    /// The lazy package's build string, its variant and the variant a switch goes to.
    build: String,
    variant: String,
    other: String,
}

impl InstalledPrefix {
    fn read(opts: &EnvOptions) -> Result<InstalledPrefix> {
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
        let lazy = records
            .iter()
            .position(|r| name_of(r) == opts.lazy_name)
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
            SplitVariant {
                name: with.clone(),
                with_payload: true,
                preferred: false,
            },
            SplitVariant {
                name: without.clone(),
                with_payload: false,
                preferred: false,
            },
        ];
        let build = records[lazy]
            .repodata_record
            .package_record
            .build
            .to_string();
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
        Ok(InstalledPrefix {
            records,
            lazy,
            variants,
            without,
            build,
            variant,
            other,
        })
    }

    fn lazy(&self) -> &PrefixRecord {
        &self.records[self.lazy]
    }
}

fn name_of(r: &PrefixRecord) -> String {
    r.repodata_record
        .package_record
        .name
        .as_normalized()
        .to_string()
}

/// The channel that knows the other variant: --channel, or the local one the package came from;
/// its description when it is a channel made by `splitpkg pack`.
fn channel_of(
    opts: &EnvOptions,
    lazy: &PrefixRecord,
) -> Result<(Option<PathBuf>, Option<ChannelInfo>)> {
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
    Ok((channel_dir, info))
}

/// The payload packages: the channel's, or (without a channel description) the installed packages
/// named after the dependency, said to be taken by name.
fn payload_names(
    opts: &EnvOptions,
    records: &[PrefixRecord],
    info: Option<&ChannelInfo>,
    notes: &mut Vec<String>,
) -> Vec<String> {
    if let Some(i) = info {
        return i.payload_packages.clone();
    }
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

/// One installed package: its role in the split, its installed bytes and, for a stand-in, the
/// bytes it represents.
fn env_package(
    r: &PrefixRecord,
    opts: &EnvOptions,
    markers: &std::collections::BTreeMap<String, crate::channel::standin::Marker>,
    payload_names: &[String],
    info: Option<&ChannelInfo>,
) -> EnvPackage {
    let name = name_of(r);
    let pr = &r.repodata_record.package_record;
    let standin = markers.contains_key(&name) || pr.license.as_deref() == Some("stand-in");
    let role = if name == opts.lazy_name {
        PackageRole::Lazy
    } else if payload_names.contains(&name) {
        PackageRole::Payload
    } else if info.is_some_and(|i| i.core == name)
        || pr
            .depends
            .iter()
            .any(|d| d.split_whitespace().next() == Some(opts.lazy_name.as_str()))
    {
        PackageRole::Core
    } else {
        PackageRole::Other
    };
    EnvPackage {
        name: name.clone(),
        version: pr.version.to_string(),
        build: pr.build.to_string(),
        role,
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
    }
}

/// What is known of the switch to the other variant, from the channel's record of the pack (the
/// other build's package, or the plan's estimate of it) or, without one, from the prefix alone.
struct SwitchSizes<'a> {
    opts: &'a EnvOptions,
    other: &'a str,
    to_slim: bool,
    version: &'a str,
    info: Option<&'a ChannelInfo>,
    channel_dir: Option<&'a Path>,
    packages: &'a [EnvPackage],
}

/// The sizes after the switch, as far as known.
struct Sizes {
    lazy_after: Option<u64>,
    /// Change in real installed bytes (negative: a saving), when known.
    real_delta: Option<i64>,
    represented_delta: i64,
    estimated: bool,
    sizes_from: String,
    payload_added: Vec<String>,
}

impl Sizes {
    fn unknown(sizes_from: String) -> Sizes {
        Sizes {
            lazy_after: None,
            real_delta: None,
            represented_delta: 0,
            estimated: false,
            sizes_from,
            payload_added: Vec::new(),
        }
    }
}

impl SwitchSizes<'_> {
    fn switch(
        &self,
        installed: &InstalledPrefix,
        payload_names: &[String],
        real_bytes: u64,
        represented_bytes: u64,
        notes: &mut Vec<String>,
    ) -> Result<Switch> {
        let lazy_now = self.lazy_now();
        let payload_removed: Vec<String> = if self.to_slim {
            self.installed_payload().map(|p| p.name.clone()).collect()
        } else {
            Vec::new()
        };
        let pack = self
            .info
            .and_then(|i| i.packs.iter().find(|p| p.version == self.version));
        let sizes = match pack {
            Some(p) => self.pack_sizes(p, lazy_now, notes),
            None => self.prefix_sizes(notes),
        };
        let names: Vec<&str> = installed.variants.iter().map(|v| v.name.as_str()).collect();
        let commands = commands(&self.opts.lazy_name, self.other, &names, &installed.build)?;
        if self.to_slim && !payload_removed.is_empty() {
            notes.push(format!(
                "the {} build constrains {} <0.0a0, so the solver removes {} when you switch",
                self.other,
                payload_names.join(", "),
                payload_removed.join(", ")
            ));
        }
        Ok(Switch {
            to: self.other.to_string(),
            lazy_now,
            lazy_after: sizes.lazy_after,
            payload_removed,
            payload_added: sizes.payload_added,
            real_after: sizes
                .real_delta
                .map(|d| (real_bytes as i64 + d).max(0) as u64),
            real_delta: sizes.real_delta,
            represented_after: (represented_bytes as i64 + sizes.represented_delta).max(0) as u64,
            represented_delta: sizes.represented_delta,
            sizes_from: sizes.sizes_from,
            estimated: sizes.estimated,
            commands,
        })
    }

    fn lazy_now(&self) -> u64 {
        self.packages
            .iter()
            .find(|p| p.role == PackageRole::Lazy)
            .map(|p| p.bytes)
            .unwrap_or(0)
    }

    fn installed_payload(&self) -> impl Iterator<Item = &EnvPackage> {
        self.packages
            .iter()
            .filter(|p| p.role == PackageRole::Payload)
    }

    /// What leaves with the installed payload packages, to the slim variant: (real bytes,
    /// represented bytes), both as negative changes; nothing the other way.
    fn payload_leaving(&self) -> (i64, i64) {
        let (mut real, mut represented) = (0i64, 0i64);
        for pk in self.installed_payload().filter(|_| self.to_slim) {
            if pk.standin {
                represented -= pk.represents_bytes.unwrap_or(0) as i64;
            } else {
                real -= pk.bytes as i64;
            }
        }
        (real, represented)
    }

    /// The channel has a pack of this version: the other build's package, else the plan's
    /// estimate of it, else unknown.
    fn pack_sizes(&self, p: &PackRecord, lazy_now: u64, notes: &mut Vec<String>) -> Sizes {
        let (lazy, other, version) = (&self.opts.lazy_name, self.other, self.version);
        let other_pkg = p
            .packages
            .iter()
            .find(|x| &x.name == lazy && x.variant.as_deref() == Some(other));
        if other_pkg.is_none() {
            notes.push(format!(
                "the channel has no {other} build of {lazy} {version}: the switch commands fail until one is published"
            ));
        }
        if let Some(o) = other_pkg {
            return self.package_sizes(p, o, lazy_now, notes);
        }
        match p.variant_sizes.iter().find(|v| v.name == other) {
            // Not packed: the plan's estimate for that build, said to be one.
            Some(est) => {
                let (real, represented) = self.payload_leaving();
                Sizes {
                    lazy_after: Some(est.bytes),
                    real_delta: Some(est.bytes as i64 - lazy_now as i64 + real),
                    represented_delta: represented,
                    estimated: !est.measured,
                    sizes_from: format!(
                        "{} of the {other} build: {} (the channel has no {other} package of {version})",
                        if est.measured {
                            "measured size"
                        } else {
                            "plan estimate"
                        },
                        est.how
                    ),
                    payload_added: Vec::new(),
                }
            }
            None => Sizes::unknown(format!(
                "unknown: the channel has no {other} build of {lazy} {version}"
            )),
        }
    }

    /// The other build is in the channel: its size, and to the payload variant the payload
    /// packages it brings (real or stand-ins), unless the payload is linked in statically.
    fn package_sizes(
        &self,
        p: &PackRecord,
        o: &PackedPackage,
        lazy_now: u64,
        notes: &mut Vec<String>,
    ) -> Sizes {
        let mut delta = o.bytes as i64 - lazy_now as i64;
        let mut represented_delta = 0i64;
        let mut payload_added = Vec::new();
        if self.to_slim {
            let (real, represented) = self.payload_leaving();
            delta += real;
            represented_delta += represented;
        } else if !p.payload_static {
            let info = self.info.expect("pack implies info");
            for name in &info.payload_packages {
                if self.packages.iter().any(|x| &x.name == name) {
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
        Sizes {
            lazy_after: Some(o.bytes),
            real_delta: Some(delta),
            represented_delta,
            estimated: false,
            sizes_from: format!(
                "channel {}",
                self.channel_dir
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            ),
            payload_added,
        }
    }

    /// No pack of this version is known: the other build's size is unknown, but what leaves with
    /// the payload packages is known from the prefix itself.
    fn prefix_sizes(&self, notes: &mut Vec<String>) -> Sizes {
        let sizes_from = match self.channel_dir {
            Some(d) if self.info.is_some() => format!(
                "unknown: channel {} has no pack of version {}",
                d.display(),
                self.version
            ),
            _ => format!(
                "unknown: {} was not installed from a splitpkg channel (pass --channel)",
                self.opts.lazy_name
            ),
        };
        let (real, represented) = self.payload_leaving();
        if self.to_slim {
            notes.push(format!(
                "switching removes {} of payload packages; the {} build's own size is unknown",
                crate::output::human_bytes(real.unsigned_abs()),
                self.other
            ));
        }
        Sizes {
            represented_delta: represented,
            ..Sizes::unknown(sizes_from)
        }
    }
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
    let ch = crate::channel::solve::LoadedChannel::open(&channel)?;
    let without = crate::analysis::payload::slim_variant(&opts.dep);
    let glob = switch_glob(
        &before.switch.to,
        &[opts.dep.as_str(), without.as_str()],
        &before.build,
    );
    let mut specs = Vec::new();
    for p in &before.packages {
        match p.role {
            PackageRole::Lazy => specs.push(format!("{} =={} {glob}", p.name, p.version)),
            PackageRole::Payload => {}
            PackageRole::Core | PackageRole::Other => {
                specs.push(format!("{} =={} {}", p.name, p.version, p.build))
            }
        }
    }
    let vps = crate::channel::solve::virtual_packages(&ch.info, &[])?;
    let records = match crate::channel::solve::solve_specs(&ch.records, &specs, &vps)? {
        Ok(r) => r,
        Err(crate::channel::solve::Unsolvable(msg)) => {
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
        .at(prefix)?
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
        schema: "splitpkg-env-switch".into(),
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

#[cfg(test)]
use crate::svg::text_width;

#[cfg(test)]
mod tests {
    use super::*;

    fn report(prefix: &str, variant: &str) -> EnvReport {
        let pkg = |name: &str, role: PackageRole, bytes: u64| EnvPackage {
            name: name.into(),
            version: "2.11.0".into(),
            build: "0".into(),
            role,
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
            schema: "splitpkg-env".into(),
            schema_version: 1,
            prefix: prefix.into(),
            lazy: "libtorch-cuda-linalg".into(),
            version: "2.11.0".into(),
            build: format!("cuda126_{variant}_h1234567_0"),
            variant: variant.into(),
            track_features: Vec::new(),
            packages: vec![
                pkg("libtorch", PackageRole::Core, 900 << 20),
                pkg("libtorch-cuda-linalg", PackageRole::Lazy, 50 << 20),
                pkg("libmagma", PackageRole::Payload, 400 << 20),
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

    /// The legend's entries as drawn (the texts at the legend's height).
    fn legend(svg: &str) -> Vec<String> {
        svg.lines()
            .filter(|l| l.contains(r#"y="168""#))
            .filter_map(|l| l.split("y=\"178\">").nth(1)?.split("</text>").next())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_legend_lists_only_what_the_bars_draw() {
        // A conda environment with a libmagma package: other packages, the lazy library, payload.
        let with_payload = report("/opt/conda/envs/t", "magma");
        assert_eq!(
            legend(&svg(&with_payload)),
            ["other packages", "lazy library", "payload"]
        );
        // A wheel: MAGMA is linked into libtorch_cuda_linalg.so, no payload package exists, so
        // neither the payload nor its stand-in can appear.
        let mut wheel = report("/opt/venv", "magma");
        wheel.packages.retain(|p| p.role != PackageRole::Payload);
        wheel.switch.payload_removed.clear();
        wheel.switch.real_delta = Some(-(45 << 20));
        let drawn = svg(&wheel);
        assert_eq!(legend(&drawn), ["other packages", "lazy library"]);
        assert!(!drawn.contains("stand-in"), "{drawn}");
    }

    #[test]
    fn a_note_comes_before_the_commands_it_qualifies() {
        let mut r = report("/opt/conda/envs/t", "magma");
        r.notes.push(
            "the channel has no nomagma build of libtorch-cuda-linalg 2.11.0: the switch commands fail until one is published".into(),
        );
        let text = report_text(&r);
        let note = text.find("note: the channel has no nomagma build").unwrap();
        let conda = text.find("conda: conda install").unwrap();
        assert!(note < conda, "{text}");
        assert!(!text.contains("below"), "{text}");
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
