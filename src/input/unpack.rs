//! Unpacking a wheel while it is read, for `pack`: every ELF member is inflated once, to a file
//! in the pack's work directory, and read through a map of that file as a directory's are. Memory
//! stays at what the analysis touches instead of the inflated libraries (torch 2.11's two largest
//! inflate to about 1 GB together; issue 28's bound is 256 MB), and `pack` stages the unpacked
//! files by hard link instead of inflating them a second time. The other members (torch 2.11 has
//! 12,469 of them, 136 MB) are only hashed and stay in the archive, from which `pack` streams them
//! into the package: twelve thousand small files written and removed cost more on an ext4 than
//! inflating them twice (Info-ZIP's unzip of the wheel: 22.8 s; of its ELF members alone: 7.8 s).
//!
//! The files are written by the member rules of the walker that listed them (docs/security.md):
//! new files only (`O_EXCL | O_NOFOLLOW`), under a directory that holds nothing else, never more
//! bytes than the member's header claims, and never more in all than the disk budget allows.

use crate::error::Context;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::output::thousands;
use crate::progress::Progress;

/// A SHA-256 digest, the type rattler's digests have (the same `sha2`).
pub type Sha256Hash = sha2::digest::Output<Sha256>;

/// Where to unpack an archive while reading it, and how much it may write.
#[derive(Debug, Clone)]
pub struct Unpack {
    /// A directory that does not exist yet; the member paths go under it.
    pub dir: PathBuf,
    /// How much the unpacking may write before it is refused.
    pub budget: Budget,
}

/// What an unpacked archive left on disk — every ELF member's size and SHA-256 — and the other
/// regular file members, left in the archive.
#[derive(Debug)]
pub struct Unpacked {
    /// The directory the members were unpacked under.
    pub dir: PathBuf,
    /// Every unpacked (ELF) member's size and SHA-256, by tree path.
    pub files: HashMap<String, (u64, Sha256Hash)>,
    /// The regular members left in the archive, by tree path.
    pub in_archive: HashMap<String, InArchive>,
    /// The archive as it was read (the same open file, not its path again).
    pub archive: zip::ZipArchive<PositionedFile>,
}

/// A regular file member left in the archive: where it is, and what it was when it was read.
#[derive(Debug, Clone)]
pub struct InArchive {
    /// The member's index in the archive.
    pub index: usize,
    /// Its inflated size.
    pub size: u64,
    /// Its SHA-256 as read.
    pub sha256: Sha256Hash,
    /// Whether its mode is executable.
    pub exec: bool,
}

/// Hash one member that stays in the archive (at most `size + 1` bytes of `r`, as [`member`]).
pub(super) fn hash_member(
    name: &str,
    size: u64,
    r: impl Read,
    progress: &Progress,
) -> Result<(u64, Sha256Hash)> {
    let (n, sha256, _) = copy_hashed(r.take(size.saturating_add(1)), std::io::sink(), progress)
        .bad_at(name, "cannot inflate")?;
    if n != size {
        return Err(Error::bad(
            name,
            format!("member inflates to {n} bytes, header says {size}"),
        ));
    }
    Ok((n, sha256))
}

/// The most bytes unpacking may write, and what set that limit (named in the refusal).
#[derive(Debug, Clone)]
pub struct Budget {
    /// The most bytes that may be written.
    pub limit: u64,
    /// `--max-unpacked 16.0 MiB`, or the free space of the work directory's file system.
    pub why: String,
}

/// A [`Budget`] being spent by one unpacking or staging run. Charged with each member's size
/// before it is written (archive members never write more than they claim), so an archive that
/// would fill the disk — a bzip2 of zeros, or one member named again by a thousand hard links,
/// each staged as a copy — is refused with one line, before the disk is full, instead of failing
/// with ENOSPC somewhere in the middle (docs/security.md).
pub struct DiskBudget {
    input: String,
    budget: Budget,
    used: AtomicU64,
}

impl DiskBudget {
    /// A budget for unpacking `input` (named in the refusal), nothing spent yet.
    pub fn new(input: &Path, budget: Budget) -> DiskBudget {
        DiskBudget {
            input: input.display().to_string(),
            budget,
            used: AtomicU64::new(0),
        }
    }

    /// Count `bytes` for `member`; the member that crosses the limit is refused, by name.
    pub fn charge(&self, member: &str, bytes: u64) -> Result<()> {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        let total = before.saturating_add(bytes);
        if total > self.budget.limit {
            return Err(Error::bad(
                format!("{}:{member}", self.input),
                format!(
                    "unpacking reaches {} bytes here, more than {}; refusing",
                    thousands(total),
                    self.budget.why
                ),
            ));
        }
        Ok(())
    }
}

/// Write `r` to `dst` (parents created, an existing file replaced), returning size and SHA-256.
pub fn write_hashed(
    dst: &Path,
    r: impl Read,
    exec: bool,
    progress: &Progress,
) -> std::io::Result<(u64, Sha256Hash)> {
    if let Some(p) = dst.parent() {
        std::fs::create_dir_all(p)?;
    }
    let _ = std::fs::remove_file(dst);
    write_new(dst, r, exec, progress)
}

/// [`write_hashed`] into a directory that exists, to a name that does not.
#[allow(clippy::disallowed_methods)] // why: creates a new file (O_EXCL, O_NOFOLLOW) to unpack into, reads nothing.
pub fn write_new(
    dst: &Path,
    r: impl Read,
    exec: bool,
    progress: &Progress,
) -> std::io::Result<(u64, Sha256Hash)> {
    // A new file, never through a link: O_EXCL refuses any name that exists (a symlink included).
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dst)?;
    let (n, sha256, f) = copy_hashed(
        r,
        std::io::BufWriter::with_capacity(1 << 20, file),
        progress,
    )?;
    f.into_inner().map_err(|e| e.into_error())?;
    std::fs::set_permissions(
        dst,
        std::fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }),
    )?;
    Ok((n, sha256))
}

/// Copy `r` into `w` in 1 MiB pieces, hashing with SHA-256 and counting on `progress`; returns the
/// size, the digest and `w`.
pub fn copy_hashed<W: Write>(
    mut r: impl Read,
    mut w: W,
    progress: &Progress,
) -> std::io::Result<(u64, Sha256Hash, W)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        w.write_all(&buf[..k])?;
        n += k as u64;
        progress.inc(k as u64);
    }
    Ok((n, hasher.finalize(), w))
}

/// Unpack one member (at most `size + 1` bytes of `r`, so a member that inflates past its header
/// is seen) to `dir/path`, whose directories [`directories`] made; `name` is how errors name it.
pub(super) fn member(
    dir: &Path,
    name: &str,
    path: &str,
    size: u64,
    exec: bool,
    r: impl Read,
    progress: &Progress,
) -> Result<(PathBuf, (u64, Sha256Hash))> {
    crate::confine::check_relative(path).bad_at(name, "not unpacked")?;
    let dst = dir.join(path);
    let (n, sha256) = write_new(&dst, r.take(size.saturating_add(1)), exec, progress)
        .bad_at(name, "cannot unpack")?;
    if n != size {
        return Err(Error::bad(
            name,
            format!("member inflates to {n} bytes, header says {size}"),
        ));
    }
    Ok((dst, (n, sha256)))
}

/// Make every directory the files `paths` are in under `dir` (which exists and holds only what
/// this run made: directories and regular files, so no component can be a link), parents first,
/// once each: one `mkdir` per directory instead of a `create_dir_all` per file.
pub fn directories<'a>(dir: &Path, paths: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut dirs = std::collections::BTreeSet::new();
    for p in paths {
        crate::confine::check_relative(p).bad_at(p, "not unpacked")?;
        let mut cur = p;
        while let Some(i) = cur.rfind('/') {
            cur = &cur[..i];
            if !dirs.insert(cur) {
                break;
            }
        }
    }
    // Sorted, a parent comes before its children.
    for d in dirs {
        let path = dir.join(d);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists
                    && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Ok(())
}

/// A file read with positioned reads, each clone at its own position: the archive's member data
/// is inflated through this instead of the archive's map, so the compressed bytes never count in
/// this process's resident set (a map's pages would, once touched: 530 MB for torch's wheel).
#[derive(Clone, Debug)]
pub struct PositionedFile {
    file: std::sync::Arc<std::fs::File>,
    len: u64,
    pos: u64,
}

impl PositionedFile {
    /// A reader at offset 0 of `file` whose clones read at their own offsets (pread), so archive
    /// members can be read in parallel.
    pub fn new(file: std::fs::File) -> std::io::Result<PositionedFile> {
        let len = file.metadata()?.len();
        Ok(PositionedFile {
            file: std::sync::Arc::new(file),
            len,
            pos: 0,
        })
    }
}

impl Read for PositionedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for PositionedFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            std::io::SeekFrom::Start(p) => Some(p),
            std::io::SeekFrom::End(d) => self.len.checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}
