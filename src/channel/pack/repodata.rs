//! The channel's `SUBDIR/repodata.json`, written from what `pack` already knows.
//!
//! `rattler_index` reads every package into memory, twice over, to take its digests and its
//! `index.json`: for torch 2.11 that was 4 of 9.7 seconds of `pack` and most of its 900 MB peak
//! RSS. The records it would write are `index.json` plus size, SHA-256 and MD5, so they are made
//! here with rattler's own types (`PackageRecord::from_index_json`, `RepoData`) and serialised
//! the way `rattler_index` serialises them (`tests/it/pack.rs` compares the two on one channel):
//! - packages this pack wrote: the `index.json` written, the digests of one read of the file;
//! - packages the channel already lists: their record, as `rattler_index` keeps them;
//! - any other package file in the subdir: `rattler_index`'s own record of it;
//! - records whose file is gone are dropped.

use crate::error::Context;
use std::path::Path;

use rattler_conda_types::package::{
    CondaArchiveType, DistArchiveIdentifier, DistArchiveType, IndexJson,
};
use rattler_conda_types::utils::TimestampMs;
use rattler_conda_types::{ChannelInfo, PackageRecord, RepoData};
use rattler_digest::{Md5Hash, Sha256Hash};
use serde::Serialize;

use crate::error::{Error, Result};

/// Size and digests of a package file, as repodata records them.
#[derive(Debug, Clone)]
pub struct Digests {
    pub size: u64,
    pub sha256: Sha256Hash,
    pub md5: Md5Hash,
}

/// SHA-256 and MD5 of `path`, side by side, each thread reading the file in 1 MiB pieces: the
/// package was just written, so the reads come from the page cache, and a mapped 400 MB package
/// would count 400 MB towards the process's resident size.
pub fn digest_file(path: &Path) -> Result<Digests> {
    fn digest<D: rattler_digest::digest::Digest + Default>(
        path: &Path,
    ) -> Result<(u64, rattler_digest::digest::Output<D>)> {
        let mut f = crate::input::file::open_regular(path, crate::input::file::Links::Follow)?;
        let mut hasher = D::default();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = std::io::Read::read(&mut f, &mut buf).at(path)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            size += n as u64;
        }
        Ok((size, hasher.finalize()))
    }
    let (sha256, md5) = rayon::join(
        || digest::<rattler_digest::Sha256>(path),
        || digest::<rattler_digest::Md5>(path),
    );
    let ((size, sha256), (_, md5)) = (sha256?, md5?);
    Ok(Digests { size, sha256, md5 })
}

/// The channel's record of `file` (`SUBDIR/NAME`) in its `repodata.json`: size and digests, when
/// it lists the file with all three.
pub fn listed(channel: &Path, file: &str) -> Result<Option<Digests>> {
    let Some((sub, name)) = file.split_once('/') else {
        return Ok(None);
    };
    let path = channel.join(sub).join("repodata.json");
    if !path.exists() {
        return Ok(None);
    }
    let repodata = RepoData::from_path(&path).bad_in(path.display())?;
    let Some(id) = DistArchiveIdentifier::try_from_filename(name) else {
        return Ok(None);
    };
    let record = repodata
        .conda_packages
        .get(&id)
        .or_else(|| repodata.packages.get(&id));
    Ok(record.and_then(|r| {
        Some(Digests {
            size: r.size?,
            sha256: r.sha256?,
            md5: r.md5?,
        })
    }))
}

/// A package this pack wrote: its file name in `subdir`, its `index.json`, its digests.
pub struct WrittenPackage<'a> {
    pub subdir: &'a str,
    pub file: &'a str,
    pub index: &'a IndexJson,
    pub digests: &'a Digests,
}

/// Write `CHANNEL/SUBDIR/repodata.json` for each subdir; returns the paths written, relative to
/// the channel.
pub fn write(channel: &Path, subdirs: &[&str], ours: &[WrittenPackage<'_>]) -> Result<Vec<String>> {
    let now: TimestampMs = jiff::Timestamp::now().into();
    let mut out = Vec::new();
    for sub in subdirs {
        let dir = channel.join(sub);
        let path = dir.join("repodata.json");
        let existing = if path.exists() {
            Some(RepoData::from_path(&path).bad_in(path.display())?)
        } else {
            None
        };
        let info = ChannelInfo {
            subdir: Some(sub.to_string()),
            base_url: None,
            repodata_revisions: Default::default(),
            channel_relations: None,
            virtual_package_detectors: None,
        };
        let mut repodata = RepoData {
            info: Some(info),
            packages: Default::default(),
            conda_packages: Default::default(),
            v3: Default::default(),
            removed: Default::default(),
            version: Some(1),
        };
        for (id, file) in package_files(&dir)? {
            let record = match ours.iter().find(|w| w.subdir == *sub && w.file == file) {
                Some(w) => ours_record(w, now, &path)?,
                None => match existing
                    .as_ref()
                    .and_then(|r| r.conda_packages.get(&id).or_else(|| r.packages.get(&id)))
                {
                    Some(r) => r.clone(),
                    None => {
                        let p = dir.join(&file);
                        let mut r =
                            rattler_index::package_record_from_archive(&p).bad_in(p.display())?;
                        r.indexed_timestamp = Some(now);
                        r
                    }
                },
            };
            match id.archive_type {
                DistArchiveType::Conda(CondaArchiveType::Conda) => {
                    repodata.conda_packages.insert(id, record)
                }
                _ => repodata.packages.insert(id, record),
            };
        }
        crate::output::write_atomic(&path, &serialize(&repodata)?)?;
        out.push(format!("{sub}/repodata.json"));
    }
    Ok(out)
}

/// The record of a package this pack wrote.
fn ours_record(w: &WrittenPackage<'_>, now: TimestampMs, repodata: &Path) -> Result<PackageRecord> {
    let d = w.digests;
    let mut r =
        PackageRecord::from_index_json(w.index.clone(), Some(d.size), Some(d.sha256), Some(d.md5))
            .bad_at(repodata.display(), w.file)?;
    r.indexed_timestamp = Some(now);
    Ok(r)
}

/// The package files (`.conda`, `.tar.bz2`, regular files) in `dir`, by name.
fn package_files(dir: &Path) -> Result<Vec<(DistArchiveIdentifier, String)>> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in rd {
        let entry = entry.at(dir)?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some(id) = DistArchiveIdentifier::try_from_filename(&name) else {
            continue;
        };
        if !matches!(id.archive_type, DistArchiveType::Conda(_))
            || !entry.file_type().is_ok_and(|t| t.is_file())
        {
            continue;
        }
        out.push((id, name));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// As `rattler_index` writes it: compact JSON, keys of each map sorted, and an empty `v3` map
/// (the indexer advertises every package layout).
fn serialize(repodata: &RepoData) -> Result<Vec<u8>> {
    #[derive(Serialize)]
    struct WithEmptyV3<'a> {
        #[serde(flatten)]
        repodata: &'a RepoData,
        v3: serde_json::Map<String, serde_json::Value>,
    }
    serde_json::to_vec(&WithEmptyV3 {
        repodata,
        v3: serde_json::Map::new(),
    })
    .failed_at("repodata.json")
}
