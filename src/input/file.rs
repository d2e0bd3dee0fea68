//! The one way a file named by the user or found inside an input is opened for reading, and the
//! bounded reads on top of it (docs/security.md, "Hangs and unbounded reads").
//!
//! - Only regular files are read. The kind is checked with `stat` *before* the file is opened (a
//!   FIFO blocks `open` until a writer comes; a device may act on open), opened `O_NONBLOCK` so a
//!   path swapped for a FIFO in between still cannot block, and checked again on the open file.
//!   `/dev/zero` (directly or through a symlink), a FIFO, a socket or a directory is refused with
//!   one line naming the file, exit 2.
//! - Every read is bounded: above its limit the read fails with one line naming the file and the
//!   limit (exit 2) — never a silent truncation.

use crate::error::Context;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Dist-info files (METADATA, RECORD, a variant marker), `info/index.json`: torch 2.11's RECORD
/// is 1.5 MB and its METADATA 30 KB.
pub const MAX_METADATA_BYTES: u64 = 64 << 20;
/// JSON and YAML documents given on the command line (plans, reports, contracts, manifests).
pub const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// Whether the last component of a path may be a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A path the user gave: a symlink to a regular file is read as that file.
    Follow,
    /// A path inside an input tree: a symlink is refused, never followed out of the tree.
    Refuse,
}

/// Open `path` for reading if it is a regular file (see the module comment). The errors are
/// `io::Error`s, so callers that name the path themselves keep doing so.
#[allow(clippy::disallowed_methods)] // why: this is the one opener the lint points everyone else to.
pub fn open_regular_io(path: &Path, links: Links) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = match links {
        Links::Follow => std::fs::metadata(path)?,
        Links::Refuse => std::fs::symlink_metadata(path)?,
    };
    regular(&meta.file_type())?;
    let nofollow = if links == Links::Refuse {
        libc::O_NOFOLLOW
    } else {
        0
    };
    // O_NONBLOCK has no effect on reads of a regular file (Linux ignores it there); it only keeps
    // this `open` from blocking if the path became a FIFO after the check above.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | nofollow)
        .open(path)?;
    regular(&file.metadata()?.file_type())?;
    Ok(file)
}

/// [`open_regular_io`] with the crate's error (exit 2, naming the file).
pub fn open_regular(path: &Path, links: Links) -> Result<File> {
    open_regular_io(path, links).at(path)
}

/// `open_regular_io(path, Links::Refuse)`: the name the stager and the tree readers use.
pub fn open_nofollow(path: &Path) -> std::io::Result<File> {
    open_regular_io(path, Links::Refuse)
}

fn regular(t: &std::fs::FileType) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a plain file"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file: refusing to read it"),
    ))
}

/// The whole of the regular file `path`, refused above `limit` bytes (`what` names it in the
/// message: "dist-info file", "plan").
pub fn read_bounded(path: &Path, links: Links, limit: u64, what: &str) -> Result<Vec<u8>> {
    let file = open_regular(path, links)?;
    let shown = path.display().to_string();
    let len = file.metadata().at(path)?.len();
    if len > limit {
        return Err(too_large(&shown, what, limit));
    }
    read_capped(file, &shown, limit, what)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text(path: &Path, links: Links, limit: u64, what: &str) -> Result<String> {
    let shown = path.display().to_string();
    utf8(read_bounded(path, links, limit, what)?, &shown, what)
}

/// At most `limit` bytes from a stream (an archive member: `at` is `ARCHIVE:MEMBER`); more is an
/// error, not a truncation. Grows as the bytes arrive, so a claim in a header costs nothing.
pub fn read_capped(r: impl Read, at: &str, limit: u64, what: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    r.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .bad_at(at, "unreadable")?;
    if data.len() as u64 > limit {
        return Err(too_large(at, what, limit));
    }
    Ok(data)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_text(r: impl Read, at: &str, limit: u64, what: &str) -> Result<String> {
    utf8(read_capped(r, at, limit, what)?, at, what)
}

fn utf8(data: Vec<u8>, at: &str, what: &str) -> Result<String> {
    String::from_utf8(data).map_err(|e| {
        Error::bad(
            at,
            format!(
                "{what} is not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn too_large(at: &str, what: &str, limit: u64) -> Error {
    Error::bad(
        at,
        format!(
            "{what} larger than the {} limit; refusing to read it",
            crate::output::human_bytes(limit)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a plain mkfifo(3) on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = d.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (p, links, says) in [
            (fifo.as_path(), Links::Follow, "a FIFO"),
            (Path::new("/dev/zero"), Links::Follow, "a character device"),
            (link.as_path(), Links::Follow, "a character device"),
            (link.as_path(), Links::Refuse, "a symlink"),
            (d.path(), Links::Follow, "a directory"),
        ] {
            let e = read_bounded(p, links, 10, "test file").unwrap_err();
            assert_eq!(e.exit(), crate::Exit::BadInput);
            assert!(e.to_string().contains(says), "{e}");
            assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
        }
    }

    #[test]
    fn reads_above_the_limit_fail_instead_of_truncating() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("METADATA");
        std::fs::write(&f, "x".repeat(11)).unwrap();
        assert!(
            read_text(&f, Links::Refuse, 10, "METADATA")
                .unwrap_err()
                .to_string()
                .contains("larger than the 10 B limit")
        );
        assert_eq!(
            read_text(&f, Links::Refuse, 11, "METADATA").unwrap().len(),
            11
        );
        assert!(read_capped(&b"abc"[..], "a.whl:M", 2, "M").is_err());
        assert_eq!(read_capped(&b"ab"[..], "a.whl:M", 2, "M").unwrap(), b"ab");
        std::fs::write(&f, b"\xff").unwrap();
        assert!(
            read_text(&f, Links::Refuse, 10, "METADATA")
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
