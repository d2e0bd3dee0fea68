//! Writing results: atomically (temp file in the same directory, fsync, rename), so an interrupted
//! run never leaves a half-written plan or recipe where a CI job expects a whole one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub mod cleanup;

/// Where `path` is written before it is renamed into place: a hidden name in the same directory
/// (so the rename is atomic), matched by `.gitignore` (`*.splitpkg-tmp-*`).
pub fn temp_path(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!(".{file}.splitpkg-tmp-{}", std::process::id()))
}

pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = temp_path(dir, &name);
    let _registered = cleanup::register(&tmp, cleanup::Leftover::File);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// Files written under temporary names (`temp_path`) and renamed into place together, in the
/// order added, once all are complete; removed if dropped uncommitted. `wheel` stages its wheels
/// here, `index` its files and pages.
#[derive(Default)]
pub struct Pending {
    /// (temporary path, final path)
    files: Vec<(PathBuf, PathBuf)>,
    /// The temporary paths, removed on SIGINT/SIGTERM too (`output::cleanup`).
    registered: Vec<cleanup::Registered>,
    /// `fsync` of each finished file, running.
    syncing: Vec<(PathBuf, std::thread::JoinHandle<std::io::Result<()>>)>,
    committed: bool,
}

impl Pending {
    /// The temporary path of `out/file`; `file` is made from an input's metadata and file name, so
    /// it must be one file name ([`crate::confine::check_file_name`]).
    pub fn add(&mut self, out: &Path, file: &str) -> Result<PathBuf> {
        crate::confine::check_file_name(file).map_err(|e| {
            Error::bad(
                out.display(),
                format!("refusing to write a file named so: {e}"),
            )
        })?;
        let tmp = temp_path(out, file);
        self.registered
            .push(cleanup::register(&tmp, cleanup::Leftover::File));
        self.files.push((tmp.clone(), out.join(file)));
        Ok(tmp)
    }

    /// The temporary path of final path `dst`.
    pub fn tmp_of(&self, dst: &Path) -> PathBuf {
        self.files
            .iter()
            .find(|(_, f)| f == dst)
            .map(|(t, _)| t.clone())
            .unwrap_or_default()
    }

    /// `fsync` the finished file `tmp` on a helper thread; `commit` waits for it.
    pub fn sync_in_background(&mut self, tmp: &Path, file: std::fs::File) {
        self.syncing.push((
            tmp.to_path_buf(),
            std::thread::spawn(move || file.sync_all()),
        ));
    }

    /// Every file on disk first, then every rename: a crash leaves either the old set or files
    /// whose data is complete.
    pub fn commit(&mut self) -> Result<()> {
        for (tmp, sync) in self.syncing.drain(..) {
            sync.join()
                .map_err(|_| {
                    Error::internal(format!("{}: the fsync thread failed", tmp.display()))
                })?
                .map_err(|e| Error::io(&tmp, e))?;
        }
        for (tmp, dst) in &self.files {
            std::fs::rename(tmp, dst).map_err(|e| Error::io(dst, e))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            for (tmp, _) in &self.files {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}

/// `DIR/.splitpkg.lock`, held exclusively (flock) until dropped, so that commands updating one
/// output directory (`pack` into a channel, `index` into an index) take turns. The file stays:
/// removing a lock file while another process waits on it would let a third lock a new one beside it.
///
/// The lock is a regular file or nothing: opened `O_NOFOLLOW | O_NONBLOCK`, so a symbolic link
/// planted there is not followed (nor created through) and a FIFO does not block the open, and
/// refused with one line naming it unless the open file is a regular one.
pub fn lock_dir(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(".splitpkg.lock");
    let not_regular = || {
        Error::bad(
            path.display(),
            "the directory's lock is not a regular file (a symbolic link, a FIFO or a device); remove it",
        )
    };
    if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular());
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    if !f.metadata().map_err(|e| Error::io(&path, e))?.is_file() {
        return Err(not_regular());
    }
    f.lock().map_err(|e| Error::io(&path, e))?;
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
