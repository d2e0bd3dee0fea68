//! Publishing: every package written as a `.conda`, read back (metadata as modelled, content
//! lossless), then moved into the channel, the channel indexed with `rattler_index`, and the pack
//! merged into `CHANNEL/splitpkg.json` — the last three under the channel's lock.

use crate::error::Context;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::conda::TarMember;
use super::metadata::{check_index, info_files};
use super::stage::{Build, StagedEntry};
use super::{Lossless, PackOptions, repodata};
use crate::analysis::plan::{Plan, Role};
use crate::channel::info::PackedRole;
use crate::channel::info::{CHANNEL_FILE, ChannelInfo, NOARCH, PackRecord, PackedPackage, SUBDIR};
use crate::error::{Error, Result};
use crate::input::Tree;
use crate::input::unpack::{PositionedFile, write_hashed};
use crate::output::WorkDir;
use crate::progress::Progress;
use crate::recipe::split::Split;

/// A package of this pack: its path in the channel (`SUBDIR/NAME.conda`), where its file is,
/// whether the channel's copy is kept (it already holds exactly this package: not written again),
/// and the file's digests.
pub(super) struct PackOutput {
    pub file: String,
    pub path: PathBuf,
    pub kept: bool,
    digests: Digesting,
}

/// A package file's digests: the kept copy's (from the channel's repodata, checked), or being
/// computed on a helper thread from the moment the file was written. The core's MD5 alone takes
/// ~0.75 s on 400 MB, and that runs while the next package is compressed instead of after.
enum Digesting {
    Known(repodata::Digests),
    Running(std::thread::JoinHandle<Result<repodata::Digests>>),
    Taken,
}

impl PackOutput {
    fn written(file: String, path: PathBuf) -> PackOutput {
        let p = path.clone();
        PackOutput {
            file,
            path,
            kept: false,
            digests: Digesting::Running(std::thread::spawn(move || repodata::digest_file(&p))),
        }
    }

    /// The file's digests (once: a computation is waited for and handed over).
    fn digests(&mut self) -> Result<repodata::Digests> {
        match std::mem::replace(&mut self.digests, Digesting::Taken) {
            Digesting::Known(d) => Ok(d),
            Digesting::Running(h) => h
                .join()
                .map_err(|_| Error::internal(format!("hashing {} panicked", self.file)))?,
            Digesting::Taken => Err(Error::internal(format!(
                "{}: digests taken twice",
                self.file
            ))),
        }
    }
}

/// Write every package into `WORK/pkgs/SUBDIR/`, except those `channel` already holds with the
/// same content ([`kept_copy`]); returns them in the builds' order. Each stage is removed once
/// its package is written.
pub(super) fn write_packages(
    builds: &[Build],
    tree: &Tree,
    split: &Split,
    plan: &Plan,
    work: &mut WorkDir,
    channel: &Path,
    opts: &PackOptions,
) -> Result<Vec<PackOutput>> {
    let source = tree.source.display().to_string();
    let input_name = Tree::file_name(&source);
    // A wheel's members that are not ELF were left in it (`Staged::InArchive`).
    let archive = tree.unpacked.as_ref().map(|u| &u.archive);
    let total: u64 = builds.iter().map(|b| b.content_bytes()).sum();
    opts.progress.start("packing", total);
    let mut written = Vec::new();
    for b in builds {
        let info = info_files(b, split, plan, input_name)?;
        for (rel, bytes) in &info {
            let dst = b.dst(rel)?;
            write_hashed(&dst, &bytes[..], false, &Progress::hidden()).at(&dst)?;
        }
        let stem = b.stem();
        let file = format!("{}/{stem}.conda", b.subdir);
        if let Some((path, digests)) = kept_copy(channel, &file, &info)? {
            opts.progress.inc(b.content_bytes());
            written.push(PackOutput {
                file,
                path,
                kept: true,
                digests: Digesting::Known(digests),
            });
            work.remove_later(b.stage.clone());
            continue;
        }
        let members = members(b, &info, archive)?;
        let dir = work.dir.join("pkgs").join(b.subdir);
        std::fs::create_dir_all(&dir).at(&dir)?;
        let dst = dir.join(format!("{stem}.conda"));
        let f = crate::output::atomic::create_new(&dst)?;
        opts.progress.set_message(&b.model.name);
        let threads = opts
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
        super::conda::write_conda(
            std::io::BufWriter::new(f),
            members,
            opts.compression_level,
            threads,
            &stem,
            &|n| opts.progress.inc(n),
        )
        .and_then(|w| w.into_inner().map(drop).map_err(|e| e.into_error()))
        .failed_at(format_args!("writing {}", dst.display()))?;
        written.push(PackOutput::written(file, dst));
        // The stage is no longer needed: free its disk space while the next package is written.
        work.remove_later(b.stage.clone());
    }
    opts.progress.finish();
    Ok(written)
}

/// What package `b` is written from: its staged files and links, the members left in the input
/// `archive`, and its `info/` files (written into the stage just before).
fn members(
    b: &Build,
    info: &[(String, Vec<u8>)],
    archive: Option<&zip::ZipArchive<PositionedFile>>,
) -> Result<Vec<TarMember>> {
    let mut members = Vec::with_capacity(b.content.len() + info.len());
    for (rel, staged) in &b.content {
        members.push(match (staged, archive) {
            (StagedEntry::InArchive(m), Some(a)) => TarMember::from_archive(Path::new(rel), a, m),
            (StagedEntry::InArchive(_), None) => {
                return Err(Error::internal(format!(
                    "{rel} is in an archive that is not open"
                )));
            }
            _ => staged_member(b, rel)?,
        });
    }
    for (rel, _) in info {
        members.push(staged_member(b, rel)?);
    }
    Ok(members)
}

/// Package path `rel` as staged, found by the one rule for input paths ([`Build::dst`]).
fn staged_member(b: &Build, rel: &str) -> Result<TarMember> {
    let full = b.dst(rel)?;
    TarMember::from_disk(&b.stage, Path::new(rel)).at(full)
}

/// The channel's copy of a package, when keeping it is the same as writing it again: the
/// channel's `repodata.json` lists it with this size and its bytes have the listed SHA-256 (a
/// copy that is not what the index says is never trusted), and its `info/` holds exactly the
/// files this pack would write — `paths.json` names every file with its SHA-256, so the content
/// is the same too. Compressing a 400 MB core again only to find the same bytes is the cost this
/// saves when a second variant or preference is packed into a channel. (A copy written at another
/// `--compression-level` has the same content and is kept.)
fn kept_copy(
    channel: &Path,
    file: &str,
    info: &[(String, Vec<u8>)],
) -> Result<Option<(PathBuf, repodata::Digests)>> {
    let path = channel.join(file);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(None);
    };
    let Some(record) = (if meta.is_file() {
        repodata::listed(channel, file)?
    } else {
        None
    }) else {
        return Ok(None);
    };
    if record.size != meta.len() || !same_info(&path, info)? {
        return Ok(None);
    }
    let digests = repodata::digest_file(&path)?;
    Ok((digests.sha256 == record.sha256).then_some((path, record)))
}

/// Whether the package at `path` has exactly the `info/` files `info` lists, byte for byte.
fn same_info(path: &Path, info: &[(String, Vec<u8>)]) -> Result<bool> {
    let f = crate::input::file::open_regular(path, crate::input::file::Links::Refuse)?;
    let Ok(mut archive) =
        rattler_package_streaming::seek::stream_conda_info(std::io::BufReader::new(f))
    else {
        return Ok(false);
    };
    let mut found: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let Ok(entries) = archive.entries() else {
        return Ok(false);
    };
    let mut budget = crate::input::file::MAX_DOCUMENT_BYTES;
    for entry in entries {
        let Ok(mut e) = entry else { return Ok(false) };
        let Ok(p) = e.path().map(|p| p.to_string_lossy().into_owned()) else {
            return Ok(false);
        };
        let mut bytes = Vec::new();
        // Bounded: a package whose info/ is larger than any document we write is not ours.
        let n =
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut e, budget + 1), &mut bytes)
                .at(path)?;
        if n as u64 > budget {
            return Ok(false);
        }
        budget -= n as u64;
        found.insert(p, bytes);
    }
    Ok(found.len() == info.len()
        && info
            .iter()
            .all(|(rel, bytes)| found.get(rel) == Some(bytes)))
}

/// Read the written packages back: `index.json` must be the model, `paths.json` must list exactly
/// what was staged, and every tree path must be in exactly one of the packages that make up the
/// tree (core, the tree's lazy variant — not `without`, the other one — and the payload packages).
/// Returns each package as recorded (with the `index.json` read back and the file's digests, for
/// the repodata), the lossless account, and every tree path → its package file.
pub(super) fn read_back(
    builds: &[Build],
    written: &mut [PackOutput],
    split: &Split,
    plan: &Plan,
    tree_paths: &BTreeSet<String>,
    without: &str,
) -> Result<(Vec<ReadBack>, Lossless, BTreeMap<String, String>)> {
    let mut tally = Tally {
        count: tree_paths.iter().map(|p| (p.clone(), 0)).collect(),
        paths: BTreeMap::new(),
        extra: Vec::new(),
    };
    let mut packed = Vec::new();
    for (b, out) in builds.iter().zip(written) {
        let (file, path) = (&out.file.clone(), &out.path.clone());
        let (index, content) = read_package(b, file, path)?;
        let counts_for_tree = b.standin.is_none()
            && !(b.role == Role::Lazy
                && b.model.variant.as_ref().is_some_and(|v| v.name == without));
        if counts_for_tree {
            tally.add(file, &content, &split.install_prefix);
        }
        let digests = out.digests()?;
        packed.push(ReadBack {
            package: packed_package(b, file, content.len(), &digests),
            index,
            digests,
        });
    }
    let (lossless, paths) = tally.lossless(tree_paths, plan)?;
    Ok((packed, lossless, paths))
}

/// One written package read back: its `index.json`, checked against the model, and the content
/// paths its `paths.json` lists, which must be exactly what was staged.
fn read_package(
    b: &Build,
    file: &str,
    path: &Path,
) -> Result<(rattler_conda_types::package::IndexJson, BTreeSet<String>)> {
    let index: rattler_conda_types::package::IndexJson =
        rattler_package_streaming::seek::read_package_file(path)
            .failed_at(format_args!("reading back {file}"))?;
    check_index(&index, &b.model, file)?;
    let paths: rattler_conda_types::package::PathsJson =
        rattler_package_streaming::seek::read_package_file(path)
            .failed_at(format_args!("reading back {file}"))?;
    let content: BTreeSet<String> = paths
        .paths
        .iter()
        .map(|p| p.relative_path.to_string_lossy().replace('\\', "/"))
        .collect();
    let expected: BTreeSet<String> = b.content.keys().cloned().collect();
    if content != expected {
        return Err(Error::internal(format!(
            "{file}: paths.json lists {} paths, {} were staged",
            content.len(),
            expected.len()
        )));
    }
    Ok((index, content))
}

/// A package as the channel description records it.
fn packed_package(
    b: &Build,
    file: &str,
    files: usize,
    digests: &repodata::Digests,
) -> PackedPackage {
    let variant = b.model.variant.as_ref();
    PackedPackage {
        file: file.to_string(),
        name: b.model.name.clone(),
        version: b.model.version.clone(),
        build: b.model.build.clone(),
        build_number: b.model.build_number,
        role: if b.standin.is_some() {
            PackedRole::Standin
        } else {
            b.role.into()
        },
        variant: variant.map(|v| v.name.clone()),
        preferred: variant.map(|v| v.preferred),
        standin: b.standin.is_some(),
        files,
        bytes: b.content_bytes(),
        represents_bytes: b.standin.as_ref().map(|s| s.represents_bytes),
        archive_bytes: digests.size,
        sha256: hex::encode(digests.sha256),
        from: b.from.clone(),
        depends: b.model.depends.clone(),
        constrains: b.model.constrains.clone(),
        track_features: b.model.track_features.clone(),
    }
}

/// How many of the packages that make up the tree hold each tree path, and what they hold that is
/// no tree path.
struct Tally {
    count: BTreeMap<String, usize>,
    /// Tree path → the package file that holds it.
    paths: BTreeMap<String, String>,
    extra: Vec<String>,
}

impl Tally {
    fn add(&mut self, file: &str, content: &BTreeSet<String>, install_prefix: &str) {
        for rel in content {
            let tree_path = rel.strip_prefix(install_prefix).unwrap_or(rel);
            match self.count.get_mut(tree_path) {
                Some(c) => {
                    *c += 1;
                    self.paths.insert(tree_path.to_string(), file.to_string());
                }
                None => self.extra.push(format!("{file}: {rel}")),
            }
        }
    }

    /// The lossless account: every tree path in exactly one package, nothing else, and as many
    /// tree paths as the plan saw; an internal error when not.
    fn lossless(
        self,
        tree_paths: &BTreeSet<String>,
        plan: &Plan,
    ) -> Result<(Lossless, BTreeMap<String, String>)> {
        let count = &self.count;
        let missing: Vec<String> = count
            .iter()
            .filter(|(_, c)| **c == 0)
            .map(|(p, _)| p.clone())
            .collect();
        let doubled: Vec<String> = count
            .iter()
            .filter(|(_, c)| **c > 1)
            .map(|(p, _)| p.clone())
            .collect();
        let lossless = Lossless {
            tree_paths: tree_paths.len(),
            placed_once: count.values().filter(|c| **c == 1).count(),
            ok: missing.is_empty()
                && doubled.is_empty()
                && self.extra.is_empty()
                && tree_paths.len() == plan.input.files,
            missing,
            doubled,
            extra: self.extra,
        };
        if !lossless.ok {
            return Err(Error::internal(format!(
                "not lossless: {} of {} tree paths placed once ({} in the plan); missing {:?}, doubled {:?}, not from the tree {:?}",
                lossless.placed_once,
                lossless.tree_paths,
                plan.input.files,
                first(&lossless.missing),
                first(&lossless.doubled),
                first(&lossless.extra)
            )));
        }
        Ok((lossless, self.paths))
    }
}

/// A package written and read back: as the channel description records it, and what its
/// repodata record is made of.
pub(super) struct ReadBack {
    pub package: PackedPackage,
    pub index: rattler_conda_types::package::IndexJson,
    pub digests: repodata::Digests,
}

/// Into the channel, under its lock (so parallel packs into one channel take turns): the channel
/// description read again and merged with `this` pack's, packages by rename, stale files of a
/// replaced pack removed, index, description. A failure from here on leaves the new packages in
/// the channel; running the same pack again (same bytes) completes it (docs/security.md).
/// Returns the repodata files written.
pub(super) fn publish(
    channel: &Path,
    out: &Path,
    work: &mut WorkDir,
    this: ChannelInfo,
    written: &[PackOutput],
    read: &[ReadBack],
) -> Result<Vec<String>> {
    let packed: Vec<PackedPackage> = read.iter().map(|r| r.package.clone()).collect();
    let packed = &packed[..];
    work.keep_created();
    std::fs::create_dir_all(channel).at(channel)?;
    let _lock = crate::output::lock_dir(channel)?;
    let existing = if channel.join(CHANNEL_FILE).exists() {
        Some(ChannelInfo::load(channel)?)
    } else {
        None
    };
    if let Some(e) = &existing {
        same_split(e, &this.core, &this.lazy, &this.dep, out)?;
    }
    let (info, stale) = merge(existing, this);
    // Every path is decided (and checked) before the channel changes: the stale file names come
    // from the channel's splitpkg.json, an input like any other.
    let mut root = crate::confine::Root::new(channel);
    let described = channel.join(CHANNEL_FILE);
    let stale: Vec<PathBuf> = stale
        .iter()
        .map(|f| {
            root.join(f)
                .bad_at(described.display(), "names a package outside the channel")
        })
        .collect::<Result<_>>()?;
    let mut moves = Vec::new();
    for PackOutput {
        file, path, kept, ..
    } in written
    {
        let dst = root.join(file).bad_in(channel.display())?;
        if !kept && !unchanged_or_new(&dst, file, packed)? {
            moves.push((path, dst));
        }
    }
    for sub in [SUBDIR, NOARCH] {
        let d = channel.join(sub);
        std::fs::create_dir_all(&d).at(&d)?;
    }
    for (path, dst) in moves {
        std::fs::rename(path, &dst).at(&dst)?;
    }
    for f in &stale {
        let _ = std::fs::remove_file(f);
    }
    let ours: Vec<repodata::WrittenPackage<'_>> = read
        .iter()
        .map(|r| {
            let (subdir, file) = r
                .package
                .file
                .split_once('/')
                .unwrap_or(("", &r.package.file));
            repodata::WrittenPackage {
                subdir,
                file,
                index: &r.index,
                digests: &r.digests,
            }
        })
        .collect();
    let indexed = repodata::write(channel, &[SUBDIR, NOARCH], &ours)?;
    check_repodata(channel, packed)?;
    let text = serde_json::to_string_pretty(&info).failed_at("JSON")? + "\n";
    crate::output::write_atomic(&channel.join(CHANNEL_FILE), text.as_bytes())?;
    Ok(indexed)
}

/// Does the channel hold `file` already? `true` when it holds exactly these bytes (the package is
/// kept as it is: packs are reproducible), `false` when it does not hold the name. A different
/// package under the same name is refused: conda clients cache packages by file name, so a name
/// must never change meaning (the build string's hash covers what a pack's options change; what
/// is left is a different input under the same version and build number).
fn unchanged_or_new(dst: &Path, file: &str, packed: &[PackedPackage]) -> Result<bool> {
    let Ok(meta) = std::fs::symlink_metadata(dst) else {
        return Ok(false);
    };
    let new = packed
        .iter()
        .find(|p| p.file == file)
        .ok_or_else(|| Error::internal(format!("{file} was written but not read back")))?;
    // The size first: a different size needs no hashing.
    let same = meta.is_file()
        && meta.len() == new.archive_bytes
        && hex::encode(rattler_digest::compute_file_digest::<rattler_digest::Sha256>(dst).at(dst)?)
            == new.sha256;
    if !same {
        return Err(Error::bad(
            dst.display(),
            "the channel already has a different package under this file name; refusing to replace it (a file name must never change meaning: change the version or --build-number)",
        ));
    }
    Ok(true)
}

/// The channel description with `this` pack's merged in (a new one when the channel has none):
/// a pack of the same version and build keys is replaced, stand-ins by name, a real package
/// replaces a stand-in of its name, payload package names are added. Returns it with the files of
/// replaced packages that no record names any more.
fn merge(existing: Option<ChannelInfo>, this: ChannelInfo) -> (ChannelInfo, Vec<String>) {
    let ChannelInfo {
        packs,
        standins,
        payload_packages,
        ..
    } = this.clone();
    let mut info = existing.unwrap_or(ChannelInfo {
        packs: Vec::new(),
        standins: Vec::new(),
        payload_packages: Vec::new(),
        ..this
    });
    let mut stale: Vec<String> = Vec::new();
    for record in &packs {
        let same =
            |p: &PackRecord| p.version == record.version && p.build_keys == record.build_keys;
        if let Some(old) = info.packs.iter().find(|p| same(p)) {
            stale.extend(old.packages.iter().map(|p| p.file.clone()));
        }
        info.packs.retain(|p| !same(p));
        info.packs.push(record.clone());
    }
    info.packs
        .sort_by(|a, b| (&a.version, &a.build_keys).cmp(&(&b.version, &b.build_keys)));
    for s in &standins {
        if let Some(old) = info.standins.iter().find(|x| x.name == s.name) {
            stale.push(old.file.clone());
        }
        info.standins.retain(|x| x.name != s.name);
        info.standins.push(s.clone());
    }
    // A real package replaces a stand-in of the same name.
    for p in packs.iter().flat_map(|r| &r.packages) {
        if let Some(old) = info.standins.iter().find(|x| x.name == p.name) {
            stale.push(old.file.clone());
        }
        info.standins.retain(|x| x.name != p.name);
    }
    info.standins.sort_by(|a, b| a.name.cmp(&b.name));
    for p in payload_packages {
        if !info.payload_packages.contains(&p) {
            info.payload_packages.push(p);
        }
    }
    let keep: BTreeSet<&str> = info.all_packages().map(|p| p.file.as_str()).collect();
    stale.retain(|f| !keep.contains(f.as_str()));
    (info, stale)
}

/// A channel holds one split: refuse to add another (checked before any work and again under the
/// channel lock, where a concurrent pack may have created the channel meanwhile).
pub(super) fn same_split(
    existing: &ChannelInfo,
    core: &str,
    lazy: &str,
    dep: &str,
    out: &Path,
) -> Result<()> {
    if existing.core == core && existing.lazy == lazy && existing.dep == dep {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: the channel holds the split {} / {} ({}); this one is {core} / {lazy} ({dep}): use another --out",
        out.join(CHANNEL_FILE).display(),
        existing.core,
        existing.lazy,
        existing.dep,
    )))
}

fn first(v: &[String]) -> Vec<&String> {
    v.iter().take(5).collect()
}

/// Every package we wrote is in the index with the metadata we wrote.
fn check_repodata(channel: &Path, packed: &[PackedPackage]) -> Result<()> {
    let mut records: HashMap<String, rattler_conda_types::PackageRecord> = HashMap::new();
    for sub in [SUBDIR, NOARCH] {
        let p = channel.join(sub).join("repodata.json");
        let rd = rattler_conda_types::RepoData::from_path(&p).failed_at(p.display())?;
        for (id, rec) in rd.conda_packages {
            records.insert(format!("{sub}/{}", id), rec);
        }
    }
    for p in packed {
        let r = records
            .get(&p.file)
            .ok_or_else(|| Error::internal(format!("rattler_index did not index {}", p.file)))?;
        let same = r.name.as_normalized() == p.name
            && r.version.to_string() == p.version
            && r.build == p.build
            && r.depends == p.depends
            && r.constrains == p.constrains
            && r.track_features == p.track_features;
        if !same {
            return Err(Error::internal(format!(
                "{}: repodata.json disagrees with the package metadata",
                p.file
            )));
        }
    }
    Ok(())
}
