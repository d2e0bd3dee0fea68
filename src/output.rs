//! Writing results: atomically (temp file in the same directory, fsync, rename), so an interrupted
//! run never leaves a half-written plan or recipe where a CI job expects a whole one. Every output
//! file is created by [`atomic`] and committed by [`Pending`] (one file: [`write_atomic`]).

use crate::error::Context;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub mod atomic;
pub mod cleanup;
mod pending;
mod workdir;

pub use pending::{Pending, StagedFile};
pub use workdir::{WorkDir, WorkKind};

/// Write `data` to `path` through the one atomic-write primitive ([`atomic`], [`Pending`]): a
/// temporary that no planted link can redirect, renamed onto a regular file or a missing path
/// only, with the replaced file's mode. The directory is created if missing.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic_as(path, data, None)
}

/// [`write_atomic`] with the new file's permission bits `mode` (when `Some`) instead of the
/// replaced file's: set on the temporary before the rename, never on the path afterwards.
pub fn write_atomic_as(path: &Path, data: &[u8], mode: Option<u32>) -> Result<()> {
    let dir = atomic::parent_of(path);
    std::fs::create_dir_all(dir).at(dir)?;
    let mut tx = Pending::default();
    let mut staged = tx.add_path(path.to_path_buf())?;
    staged.file.write_all(data).at(path)?;
    if let Some(mode) = mode {
        tx.set_mode(&staged, mode)?;
    }
    tx.sync_in_background(&staged.path, staged.file);
    tx.commit()
}

/// `DIR/.splitpkg.lock`, held exclusively (flock) until dropped, so that commands updating one
/// output directory (`pack` into a channel, `index` into an index) take turns. The file stays:
/// removing a lock file while another process waits on it would let a third lock a new one beside it.
/// A symlink, FIFO or device at its name is refused (never followed, never waited on).
#[allow(clippy::disallowed_methods)] // why: opens the output directory's lock file, reads nothing.
pub fn lock_dir(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(".splitpkg.lock");
    if let Ok(m) = std::fs::symlink_metadata(&path)
        && !m.file_type().is_file()
    {
        return Err(not_a_lock(&path, &m.file_type()));
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .at(&path)?;
    let t = f.metadata().at(&path)?.file_type();
    if !t.is_file() {
        return Err(not_a_lock(&path, &t));
    }
    f.lock().at(&path)?;
    Ok(f)
}

fn not_a_lock(path: &Path, t: &std::fs::FileType) -> Error {
    Error::bad(
        path.display(),
        format!(
            "is {}, not a regular file: refusing to use it as the lock",
            atomic::kind_of(t)
        ),
    )
}

/// The directory `dir` itself, locked exclusively (flock on the directory) until dropped: for a
/// tree that is the user's own (a feedstock checkout), where a lock file would be a stray file in
/// their repository. `feedstock --write` holds it from before its inputs are read to after the
/// last rename, so two runs take turns and the second patches the first's result.
#[allow(clippy::disallowed_methods)] // why: opens the directory itself (O_DIRECTORY) to flock it, reads nothing.
pub fn lock_tree(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .at(dir)?;
    f.lock().at(dir)?;
    Ok(f)
}

/// Write to `path`, or to stdout when `path` is `None` or `-`. Every report goes through here:
/// control characters that came from an input (an escape sequence in a member name) are escaped
/// (`crate::sanitize::terminal_text`), so no output can drive the terminal that shows it.
pub fn emit(path: Option<&Path>, data: &str) -> Result<()> {
    let data = &*crate::sanitize::terminal_text(data);
    match path {
        Some(p) if p != Path::new("-") => write_atomic(p, data.as_bytes()),
        _ => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is the reader's choice, not an error worth a message.
            match out.write_all(data.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(Error::failed("writing to stdout", e)),
                Ok(()) => Ok(()),
            }
        }
    }
}

/// One line on stdout, as `println!` writes it: the one place outside [`emit`] that prints, so
/// "nothing prints outside the output module" is a lint (`clippy::print_stdout`), not a promise.
/// Callers sanitise what came from an input (Debug quoting or [`crate::sanitize`]).
#[allow(clippy::print_stdout)] // why: this is the output module's own stdout line.
pub fn stdout_line(line: std::fmt::Arguments<'_>) {
    println!("{line}");
}

/// One line on stderr, as `eprintln!` writes it: warnings, notes and the final error line.
/// Callers sanitise what came from an input (Debug quoting or [`crate::sanitize`]).
#[allow(clippy::print_stderr)] // why: this is the output module's own stderr line.
pub fn stderr_line(line: std::fmt::Arguments<'_>) {
    eprintln!("{line}");
}

/// Bytes as lower-case hex (a SHA-256 as pip, uv and indexes write it).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|x| format!("{x:02x}")).collect()
}

/// `1536` → `1.5 KiB` (binary units, one decimal).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Output directories a run creates, removed again (if still empty) unless the run gets as far as
/// [`CreatedDirs::keep`]: a refusal or an interruption after `--out` was made leaves no empty
/// `--out` behind. Registered with [`cleanup`] for signals too.
#[derive(Default)]
pub struct CreatedDirs {
    /// Deepest last, in the order made.
    dirs: Vec<(PathBuf, cleanup::Registered)>,
}

impl CreatedDirs {
    /// Create `dir` and its missing ancestors, remembering those this call made.
    pub fn create(&mut self, dir: &Path) -> Result<()> {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        for d in missing.into_iter().rev() {
            let registered = cleanup::register(&d, cleanup::Leftover::EmptyDir);
            match std::fs::create_dir(&d) {
                Ok(()) => self.dirs.push((d, registered)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io(&d, e)),
            }
        }
        Ok(())
    }

    /// The run succeeded (or is writing its result into them): the directories stay.
    pub fn keep(&mut self) {
        self.dirs.clear();
    }
}

impl Drop for CreatedDirs {
    fn drop(&mut self) {
        for (d, _) in self.dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_that_is_a_fifo_or_a_symlink_is_refused_without_waiting_or_following() {
        let d = tempfile::tempdir().unwrap();
        let lock = d.path().join(".splitpkg.lock");
        let made = std::process::Command::new("mkfifo")
            .arg(&lock)
            .status()
            .unwrap();
        assert!(made.success());
        let e = lock_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("a FIFO") && e.contains("refusing"), "{e}");
        std::fs::remove_file(&lock).unwrap();
        let target = d.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &lock).unwrap();
        let e = lock_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("a symlink"), "{e}");
        assert!(!target.exists(), "nothing created through the link");
        std::fs::remove_file(&lock).unwrap();
        let held = lock_dir(d.path()).unwrap();
        drop(held);
        let tree = lock_tree(d.path()).unwrap();
        drop(tree);
    }

    #[test]
    fn created_dirs_go_again_unless_kept_and_only_when_empty() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        {
            let mut c = CreatedDirs::default();
            c.create(&deep).unwrap();
            assert!(deep.is_dir());
        }
        assert!(
            !d.path().join("a").exists(),
            "all three made, all three removed"
        );
        {
            let mut c = CreatedDirs::default();
            c.create(&deep).unwrap();
            std::fs::write(d.path().join("a/b/kept"), b"x").unwrap();
        }
        assert!(
            d.path().join("a/b/kept").exists() && !deep.exists(),
            "a directory with something in it stays"
        );
        {
            let mut c = CreatedDirs::default();
            c.create(&deep).unwrap();
            c.keep();
        }
        assert!(deep.is_dir());
    }
}
