//! The one way an output file comes into being (docs/security.md, "Atomic writes"):
//!
//! - its temporary is created `O_CREAT | O_EXCL | O_NOFOLLOW` in the destination's directory, under
//!   a name with a random part (`.FILE.splitpkg-tmp-PID-RANDOM`), and another name is tried if that
//!   one exists: a symlink planted at a temporary name is never followed, and the name cannot be
//!   guessed ahead of time. The PID stays in the name so that [`super::cleanup::sweep_stale`]
//!   recognises a dead run's leftovers;
//! - only a regular file or a missing path is ever replaced ([`check_dest`]): a symlink, a
//!   directory, a FIFO or a device node (a `mknod` copy of `/dev/null`, or `/dev/null` itself) is
//!   refused with one line naming it;
//! - the replaced file's permission bits are kept (a new file gets 0644 less the umask);
//! - the file is fsynced before the rename, and its directory after.

use crate::error::Context;
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::cleanup;
use crate::error::{Error, Result};

/// The infix `.gitignore` (`*.splitpkg-tmp-*`) and [`cleanup::temp_owner`] recognise.
pub const TEMP_INFIX: &str = ".splitpkg-tmp-";

/// How many names are tried before giving up: a collision of 64 random bits happens only when
/// someone planted files at the names, which a retry does not outlast for long.
const ATTEMPTS: usize = 32;

/// The part of a file name kept in its temporary's name: the whole name would pass `NAME_MAX`
/// (255) with the infix, PID and random part added.
const NAME_KEPT: usize = 200;

/// What a destination is before anything is renamed onto it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Nothing there yet: the new file is created with the default mode.
    Missing,
    /// A regular file, with its permission bits (which the new file takes).
    Regular(u32),
}

/// A file created under a temporary name by [`create_temp`]: open for reading and writing,
/// registered for removal on SIGINT/SIGTERM until its owner drops `registered`.
pub struct Temp {
    /// The temporary's path, in the destination's directory.
    pub path: PathBuf,
    /// The temporary, open for writing.
    pub file: File,
    /// Its registration for removal on a signal.
    pub registered: cleanup::Registered,
}

/// What `path` is, refusing anything a rename must not replace.
pub fn check_dest(path: &Path) -> Result<Dest> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Dest::Missing),
        Err(e) => Err(Error::io(path, e)),
        Ok(m) if m.file_type().is_file() => Ok(Dest::Regular(m.mode() & 0o777)),
        Ok(m) => Err(Error::bad(
            path.display(),
            format!(
                "is {}, not a regular file: refusing to replace it",
                kind_of(&m.file_type())
            ),
        )),
    }
}

/// The kind of a file that is not a regular one, for a refusal.
pub fn kind_of(t: &std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a plain file"
    }
}

/// `.FILE.splitpkg-tmp-PID-RANDOM` (RANDOM as 16 hex digits).
pub fn temp_name(file: &str, pid: u32, random: u64) -> String {
    let mut end = file.len().min(NAME_KEPT);
    while !file.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}{TEMP_INFIX}{pid}-{random:016x}", &file[..end])
}

/// 64 bits from the kernel's generator (`getrandom(2)`); should it fail (a seccomp filter), from
/// std's randomly keyed hasher, which is seeded from the same source once per process.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writes at most 8 bytes into the 8-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos)
}

/// Create a new temporary for `dir/file` (see the module comment).
pub fn create_temp(dir: &Path, file: &str) -> Result<Temp> {
    create_temp_with(dir, file, random_u64)
}

/// [`create_temp`] with the random parts drawn from `random` (tests choose them, to plant links
/// at the exact names tried).
#[allow(clippy::disallowed_methods)] // why: creates the output module's own temporary (O_EXCL, O_NOFOLLOW), reads nothing.
pub fn create_temp_with(dir: &Path, file: &str, mut random: impl FnMut() -> u64) -> Result<Temp> {
    let pid = std::process::id();
    for _ in 0..ATTEMPTS {
        let path = dir.join(temp_name(file, pid, random()));
        // Registered before it exists: a signal between the create and the registration would
        // otherwise leave it behind.
        let registered = cleanup::register(&path, cleanup::Leftover::File);
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path);
        match opened {
            Ok(file) => {
                return Ok(Temp {
                    path,
                    file,
                    registered,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Err(Error::bad(
        dir.display(),
        format!("{ATTEMPTS} temporary names for {file} were all taken: refusing to write there"),
    ))
}

/// A new file at `path` in a directory this run made for itself (`pack`'s work directory), which
/// is renamed into place later: `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing there is followed or
/// truncated.
#[allow(clippy::disallowed_methods)] // why: creates a new output file (O_EXCL, O_NOFOLLOW), reads nothing.
pub fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .at(path)
}

/// A new name for the existing file `from` in `dir` (a hard link under a temporary name): the
/// core wheel in two sets, a backup of a file being replaced. `Ok(None)` when the filesystem
/// makes no links (the caller copies instead).
pub fn link_temp(
    from: &Path,
    dir: &Path,
    file: &str,
) -> Result<Option<(PathBuf, cleanup::Registered)>> {
    Ok(link_temp_or_why(from, dir, file).ok())
}

/// [`link_temp`], with why no link was made (`EXDEV` across file systems, `EPERM` where the
/// kernel's `protected_hardlinks` refuses another user's file): `index --share-with` reports it.
pub fn link_temp_or_why(
    from: &Path,
    dir: &Path,
    file: &str,
) -> std::result::Result<(PathBuf, cleanup::Registered), std::io::Error> {
    let pid = std::process::id();
    for _ in 0..ATTEMPTS {
        let path = dir.join(temp_name(file, pid, random_u64()));
        let registered = cleanup::register(&path, cleanup::Leftover::File);
        // link(2) never follows a symlink at the new name (it fails with EEXIST), nor at `from`
        // (linkat without AT_SYMLINK_FOLLOW links the link itself; callers check what they got).
        match std::fs::hard_link(from, &path) {
            Ok(()) => return Ok((path, registered)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!("{ATTEMPTS} temporary names for {file} were all taken"),
    ))
}

/// `chmod` the temporary to the mode of the file it replaces.
pub fn keep_mode(tmp: &Path, dest: Dest) -> Result<()> {
    if let Dest::Regular(mode) = dest {
        std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(mode)).at(tmp)?;
    }
    Ok(())
}

/// `fsync` the directory `dir`, so the renames in it survive a crash.
#[allow(clippy::disallowed_methods)] // why: opens a directory only to fsync it, reads nothing.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .at(dir)?;
    d.sync_all().at(dir)
}

/// The directory a path is written in (`.` for a bare file name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn a_link_planted_at_the_chosen_temporary_name_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("victim");
        std::fs::write(&target, b"precious").unwrap();
        let pid = std::process::id();
        // The names the first two draws give: both planted, the third is free.
        for r in [1u64, 2] {
            std::os::unix::fs::symlink(&target, d.path().join(temp_name("out", pid, r))).unwrap();
        }
        let mut draws = [1u64, 2, 3].into_iter();
        let t = create_temp_with(d.path(), "out", || draws.next().unwrap()).unwrap();
        assert_eq!(t.path, d.path().join(temp_name("out", pid, 3)));
        assert!(t.path.symlink_metadata().unwrap().file_type().is_file());
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        // Every name taken: refused, nothing followed.
        let err = create_temp_with(d.path(), "out", || 1).err().unwrap();
        assert!(err.to_string().contains("were all taken"), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    }

    #[test]
    fn temporary_names_carry_the_pid_and_an_unpredictable_part() {
        let names: std::collections::BTreeSet<String> =
            (0..64).map(|_| temp_name("f", 7, random_u64())).collect();
        assert_eq!(names.len(), 64, "64 draws, 64 different names");
        for n in &names {
            assert_eq!(
                cleanup::temp_owner(n),
                Some((7, cleanup::Leftover::File)),
                "{n}"
            );
        }
        let long = "é".repeat(200);
        assert!(temp_name(&long, u32::MAX, u64::MAX).len() <= 255);
    }

    #[test]
    fn only_a_regular_file_or_a_missing_path_may_be_replaced() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert_eq!(check_dest(&file).unwrap(), Dest::Regular(0o664));
        assert_eq!(check_dest(&d.path().join("none")).unwrap(), Dest::Missing);
        let link = d.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for (p, what) in [
            (link.as_path(), "a symlink"),
            (d.path(), "a directory"),
            (Path::new("/dev/null"), "a character device"),
        ] {
            let e = check_dest(p).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains("refusing to replace"), "{e}");
        }
    }
}
