//! A command's work directory next to its output, so the final renames stay on one file system:
//! `.OUT.splitpkg-KIND-PID`, removed when the command returns, on SIGINT/SIGTERM ([`super::cleanup`])
//! or by the next run of any splitpkg once the process is gone ([`super::cleanup::sweep_stale`]).

use crate::error::Context;
use std::path::{Path, PathBuf};

use crate::error::Result;

/// Which command owns a work directory: the `KIND` in its name, which
/// [`super::cleanup::temp_owner`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkKind {
    /// `pack`'s staging of packages before they are renamed into the channel.
    Pack,
    /// `build-variant`'s objects, switched header and library before the checked file is renamed.
    Build,
}

impl WorkKind {
    /// The tag in the directory's name.
    pub const fn tag(self) -> &'static str {
        match self {
            WorkKind::Pack => ".splitpkg-pack-",
            WorkKind::Build => ".splitpkg-build-",
        }
    }
}

/// The work directory, removed when the command returns (or on SIGINT/SIGTERM: [`super::cleanup`]);
/// with it, on failure, any ancestors of `--out` the command created (so a failed run leaves nothing
/// behind). Only empty directories are removed.
pub struct WorkDir {
    /// The work directory's path.
    pub dir: PathBuf,
    /// Ancestors of `--out` this run created; they stay once the channel is being written.
    created: super::CreatedDirs,
    _registered: super::cleanup::Registered,
    /// Directories inside being removed on helper threads ([`WorkDir::remove_later`]).
    removals: Vec<std::thread::JoinHandle<()>>,
    /// Left in place when dropped (`build-variant --keep-temp`).
    persist: bool,
}

impl WorkDir {
    /// `.OUT.splitpkg-KIND-PID` next to `out` (absolute), so the final renames stay on one file
    /// system. The work directories of dead runs there are removed first.
    pub fn create(out: &Path, kind: WorkKind) -> Result<WorkDir> {
        let parent = out
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut created = super::CreatedDirs::default();
        created.create(&parent)?;
        super::cleanup::sweep_stale(&parent);
        let out_name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let dir = parent.join(format!(".{out_name}{}{}", kind.tag(), std::process::id()));
        let _registered = super::cleanup::register(&dir, super::cleanup::Leftover::Tree);
        let work = WorkDir {
            dir,
            created,
            _registered,
            removals: Vec::new(),
            persist: false,
        };
        let _ = std::fs::remove_dir_all(&work.dir);
        std::fs::create_dir_all(&work.dir).at(&work.dir)?;
        Ok(work)
    }

    /// Keep the ancestors of `--out` this run created, even on failure: the channel is being
    /// written into them.
    pub fn keep_created(&mut self) {
        self.created.keep();
    }

    /// Leave the directory (and the output directories made for it) in place when dropped.
    pub fn persist(&mut self) {
        self.created.keep();
        self.persist = true;
    }

    /// Remove `dir` (inside the work directory) on a helper thread: freeing a gigabyte of
    /// unpacked files is mostly a wait on the file system (about 2.5 s on an ext4 mounted with
    /// `discard`), which the next package's compression overlaps. Dropping the work directory
    /// waits for every such removal first.
    pub fn remove_later(&mut self, dir: PathBuf) {
        self.removals.push(std::thread::spawn(move || {
            let _ = std::fs::remove_dir_all(dir);
        }));
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        for h in self.removals.drain(..) {
            let _ = h.join();
        }
        // Before `created` (a field, dropped after this), whose directories it is in.
        if !self.persist {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
