//! The saving against what a user installs (issue 53), beside the tree-relative figure: a CUDA
//! torch wheel is a fraction of the environment its `Requires-Dist` pulls in, so 50 MB is 5 % of
//! the tree and about 1 % of what pip downloads.
//!
//! - A **wheel** with a PEP 751 lock (`--env-lock`): download sizes against download sizes. The
//!   environment is the input wheel's own file plus each locked wheel that the input's platform
//!   and Python take, as the lock states its size; the saving is the payload's compressed bytes in
//!   the input wheel. A package the lock gives no size for is named, and the figure is a lower
//!   bound. Without a lock the figure is not known, and the command that writes one is given.
//! - An **installed environment** (a directory in or under a conda prefix, a venv or a
//!   site-packages / `pip --target` directory): every regular file of it on disk once, hard links
//!   once, against the installed saving.

use crate::error::Context;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::analysis::plan::{EnvSource as Source, Environment, Plan, Role, WheelDownload};
use crate::analysis::pylock::{self, Tags};
use crate::analysis::verdict::Verdict;
use crate::error::{Error, Result};
use crate::input::{Tree, TreeKind};

/// The environment figure for a plan of `tree` (`lock`: `--env-lock`); absent when there is no
/// saving (nothing is confined).
pub fn measure(plan: &Plan, tree: &Tree, lock: Option<&Path>) -> Result<Option<Environment>> {
    if plan.verdict != Verdict::Confined {
        return match lock {
            Some(_) => Err(Error::Usage(
                "--env-lock: the plan is not CONFINED, so there is no saving to weigh".into(),
            )),
            None => Ok(None),
        };
    }
    if tree.kind == TreeKind::Wheel {
        let wheel = wheel_download(plan, tree)?;
        return Ok(Some(match lock {
            Some(l) => from_lock(&wheel, l)?,
            None => not_known_wheel(wheel),
        }));
    }
    if lock.is_some() {
        return Err(Error::Usage(
            "--env-lock compares download sizes: it needs a wheel (.whl) input; an installed environment is measured on disk without it".into(),
        ));
    }
    Ok(Some(match (tree.kind, installed_root(&tree.source)) {
        (TreeKind::Directory, Some(root)) => on_disk(&root, plan.saving.bytes)?,
        (TreeKind::Directory, None) => not_known(format!(
            "not known: {} is a tree, not an installed environment (no conda-meta/, pyvenv.cfg or *.dist-info in it or above it); plan an installed environment (its prefix or site-packages), or the wheel with --env-lock: {}",
            tree.source.display(),
            lock_command(requirement(plan).as_deref(), None)
        )),
        _ => not_known(
            "not known: a conda package's environment is what its dependencies solve to; install it (`splitpkg solve --install`, or conda create) and plan the prefix".into(),
        ),
    }))
}

fn not_known(how: String) -> Environment {
    Environment {
        source: Source::NotKnown,
        bytes: None,
        saving_bytes: None,
        percent: None,
        lower_bound: false,
        unknown: Vec::new(),
        counted: 0,
        path: None,
        how,
        wheel: None,
    }
}

fn not_known_wheel(wheel: WheelDownload) -> Environment {
    Environment {
        wheel: Some(wheel.clone()),
        saving_bytes: Some(wheel.saving_bytes),
        ..not_known(format!(
            "not known: the environment this wheel's Requires-Dist pulls in is not in the wheel; lock it with `{}` and give --env-lock pylock.toml",
            wheel.lock_command
        ))
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 10000.0 / whole as f64).round() / 100.0
}

// ---- a wheel ----

/// The requirement a lock pins: the plan's package at its public version (`torch==2.11.0`).
pub fn requirement(plan: &Plan) -> Option<String> {
    plan.input.package.as_ref().map(|p| {
        format!(
            "{}=={}",
            p.name,
            p.version.split('+').next().unwrap_or(&p.version)
        )
    })
}

/// The command that writes the lock `--env-lock` reads for `requirement` (`tags`: the wheel's,
/// for its platform and Python).
pub fn lock_command(requirement: Option<&str>, tags: Option<&Tags>) -> String {
    let mut cmd = format!(
        "echo {} | uv pip compile - --format pylock.toml",
        crate::sanitize::shell_word(requirement.unwrap_or("NAME==VERSION"))
    );
    if let Some(p) = tags.and_then(Tags::uv_platform) {
        cmd.push_str(&format!(" --python-platform {p}"));
    }
    if let Some(v) = tags.and_then(Tags::python_version) {
        cmd.push_str(&format!(" --python-version {v}"));
    }
    cmd.push_str(" -o pylock.toml");
    cmd
}

/// The wheel's side: its file size, its tags and the saving's compressed bytes in it — the
/// payload output's members as stored, and the lazy library's payload share at the lazy
/// library's own compression ratio (the payload inside it is not a member of its own).
fn wheel_download(plan: &Plan, tree: &Tree) -> Result<WheelDownload> {
    let path = &tree.source;
    let file = crate::input::file::open_regular(path, crate::input::file::Links::Follow)?;
    let file_bytes = file.metadata().at(path)?.len();
    let stored = stored_sizes(path, file)?;
    let member = |p: &String| stored.get(p).map(|&(c, _)| c).unwrap_or(0);
    let payload: u64 = plan
        .outputs
        .iter()
        .filter(|o| o.role == Role::Payload)
        .flat_map(|o| &o.files)
        .map(member)
        .sum();
    let payload_out = plan
        .outputs
        .iter()
        .find(|o| o.role == Role::Payload)
        .map_or(0, |o| o.bytes);
    let (lazy_c, lazy_u) = plan
        .all_lazy()
        .iter()
        .filter_map(|l| stored.get(&l.path))
        .fold((0u64, 0u64), |(c, u), &(dc, du)| (c + dc, u + du));
    let in_lazy = plan.saving.bytes.saturating_sub(payload_out);
    let lazy_share = if lazy_u > 0 {
        (lazy_c as u128 * in_lazy.min(lazy_u) as u128 / lazy_u as u128) as u64
    } else {
        0
    };
    let name = tree
        .source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let tags = name.as_deref().and_then(Tags::of_file_name);
    let package = plan.input.package.clone().unwrap_or_default();
    Ok(WheelDownload {
        name: package.name,
        version: package.version,
        tags: tags.as_ref().map(Tags::text),
        file_bytes,
        saving_bytes: payload + lazy_share,
        how: format!(
            "{payload} stored bytes of the payload output's members + {lazy_share}: the {in_lazy} payload bytes inside the lazy library at its stored/installed ratio ({lazy_c}/{lazy_u})"
        ),
        lock_command: lock_command(requirement(plan).as_deref(), tags.as_ref()),
    })
}

/// Every member's (stored, installed) bytes, from the zip's central directory (the members were
/// checked by the walk that read the tree).
fn stored_sizes(path: &Path, file: std::fs::File) -> Result<HashMap<String, (u64, u64)>> {
    let shown = path.display().to_string();
    let mut zip =
        zip::ZipArchive::new(std::io::BufReader::new(file)).bad_at(&shown, "not a zip archive")?;
    let mut out = HashMap::new();
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .bad_at(&shown, format_args!("member {i}"))?;
        let name = f.name().bad_at(&shown, format_args!("member {i}"))?;
        out.insert(name.to_string(), (f.compressed_size(), f.size()));
    }
    Ok(out)
}

/// The environment from a lock: the wheel's own file and each locked wheel its tags take.
pub fn from_lock(w: &WheelDownload, lock: &Path) -> Result<Environment> {
    let shown = lock.display().to_string();
    let tags = w
        .tags
        .as_deref()
        .and_then(|t| Tags::of_file_name(&format!("x-0-{t}.whl")))
        .ok_or_else(|| {
            Error::Usage(format!(
                "--env-lock {shown}: the wheel's file name carries no wheel tags (NAME-VERSION-PY-ABI-PLATFORM.whl), so which locked wheels it installs is not known"
            ))
        })?;
    let own = pylock::normalize(&w.name);
    let public = |v: &str| v.split('+').next().unwrap_or(v).to_string();
    let mut totals = Totals::default();
    for p in pylock::read(lock)? {
        if pylock::normalize(&p.name) == own {
            match &p.version {
                Some(v) if public(v) != public(&w.version) => {
                    return Err(Error::bad(
                        &shown,
                        format!(
                            "locks {} {v}, the input is {}: lock the input's version ({})",
                            p.name, w.version, w.lock_command
                        ),
                    ));
                }
                _ => continue,
            }
        }
        totals.add(&p, &tags);
    }
    Ok(totals.environment(w, &shown, &tags))
}

/// What a lock adds up to for one wheel's tags.
#[derive(Default)]
struct Totals {
    bytes: u64,
    counted: u64,
    unknown: Vec<String>,
    other_platforms: u64,
}

impl Totals {
    fn add(&mut self, p: &pylock::Package, tags: &Tags) {
        let label = match &p.version {
            Some(v) => format!("{} {v}", p.name),
            None => p.name.clone(),
        };
        match p.wheels.iter().find(|x| tags.installs(&x.tags)) {
            Some(x) => match x.size {
                Some(size) => {
                    self.bytes = self.bytes.saturating_add(size);
                    self.counted += 1;
                }
                None => self.unknown.push(label),
            },
            // Only wheels for other platforms or Pythons: an installer here does not take it.
            None if !p.wheels.is_empty() => self.other_platforms += 1,
            // An sdist, a directory or a VCS source: built at install time, no size stated.
            None => self.unknown.push(label),
        }
    }

    fn environment(self, w: &WheelDownload, shown: &str, tags: &Tags) -> Environment {
        let bytes = self.bytes.saturating_add(w.file_bytes);
        let mut how = format!(
            "download sizes: the input wheel ({} bytes) + {} locked wheel(s) for {} as {shown} states them, against the saving's compressed bytes in the wheel ({})",
            w.file_bytes,
            self.counted,
            tags.text(),
            w.how
        );
        if self.other_platforms > 0 {
            how.push_str(&format!(
                "; {} locked package(s) only for other platforms or Pythons not counted",
                self.other_platforms
            ));
        }
        if !self.unknown.is_empty() {
            how.push_str(&format!(
                "; lower bound: no size stated for {}",
                self.unknown.join(", ")
            ));
        }
        Environment {
            source: Source::Lock,
            bytes: Some(bytes),
            saving_bytes: Some(w.saving_bytes),
            percent: Some(percent(w.saving_bytes, bytes)),
            lower_bound: !self.unknown.is_empty(),
            unknown: self.unknown,
            counted: self.counted + 1,
            path: Some(shown.to_string()),
            how,
            wheel: Some(w.clone()),
        }
    }
}

// ---- an installed environment ----

/// The installed environment a directory is or lies in: the nearest directory (itself or above)
/// that is a conda prefix (`conda-meta/`), a venv (`pyvenv.cfg`) or a site-packages / `--target`
/// directory (`*.dist-info` in it); a site-packages inside a prefix or venv is that prefix or venv.
pub fn installed_root(dir: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    let near = dir.ancestors().find(|a| marker(a).is_some())?;
    if marker(near) == Some(PrefixMarker::DistInfo) {
        // PREFIX/lib/python3.X/site-packages: three levels up.
        if let Some(up) = near
            .ancestors()
            .skip(1)
            .take(3)
            .find(|a| matches!(marker(a), Some(PrefixMarker::Conda | PrefixMarker::Venv)))
        {
            return Some(up.to_path_buf());
        }
    }
    Some(near.to_path_buf())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PrefixMarker {
    Conda,
    Venv,
    DistInfo,
}

fn marker(dir: &Path) -> Option<PrefixMarker> {
    if dir.join("conda-meta").is_dir() {
        return Some(PrefixMarker::Conda);
    }
    if dir.join("pyvenv.cfg").is_file() {
        return Some(PrefixMarker::Venv);
    }
    let dist_info = std::fs::read_dir(dir).ok()?.flatten().any(|e| {
        e.file_name().to_string_lossy().ends_with(".dist-info")
            && e.file_type().is_ok_and(|t| t.is_dir())
    });
    dist_info.then_some(PrefixMarker::DistInfo)
}

/// Every regular file under `root` once (a hard-linked file once), symlinks not followed.
fn on_disk(root: &Path, saving: u64) -> Result<Environment> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let (mut bytes, mut files) = (0u64, 0u64);
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.map_err(|e| {
            let path = e.path().unwrap_or(root).to_path_buf();
            Error::io(path, e.into())
        })?;
        if !e.file_type().is_file() {
            continue;
        }
        let m = e.metadata().at(e.path())?;
        if m.nlink() > 1 && !seen.insert((m.dev(), m.ino())) {
            continue;
        }
        bytes = bytes.saturating_add(m.len());
        files += 1;
    }
    Ok(Environment {
        source: Source::Disk,
        bytes: Some(bytes),
        saving_bytes: Some(saving),
        percent: Some(percent(saving, bytes)),
        lower_bound: false,
        unknown: Vec::new(),
        counted: files,
        path: Some(root.display().to_string()),
        how: format!(
            "measured on disk: {files} regular files under {} (hard links once, symlinks not followed), against the installed saving",
            root.display()
        ),
        wheel: None,
    })
}
