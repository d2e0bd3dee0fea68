//! `index --share-with INDEX`: a wheel that INDEX already has, under the same name and with the
//! same bytes, is hard-linked into `--out` instead of copied. The default PEP 825 index and its
//! `--prefer` twin hold the same core (470 MB for torch 2.11) and variant wheels: linked, serving
//! both costs one copy on disk (issue 53).
//!
//! Why hard links and not pages whose URLs point into the default index (`../../simple-variants/
//! torch/…`): each index stays one self-contained directory that any static server, `rsync` or S3
//! upload serves as it is, wherever it is put, while a relative URL out of the index works only
//! when both are served under one root at fixed places and breaks without a word when one is
//! moved or mirrored alone; and a page's URL is always rebuilt from the file beside it (issue 50:
//! no URL a page stored is served again), a rule that URLs out of the project's directory would
//! have to break. A link needs one file system: where none can be made (`EXDEV` across file
//! systems, `EPERM` from the kernel's `protected_hardlinks`) the wheel is copied and the report
//! says why, as it does for a wheel INDEX lacks or holds with other bytes.
//!
//! INDEX is only read (docs/security.md): it may not be a symbolic link, nor its project
//! directory; the file is opened without following a link and must be a regular file (a link,
//! FIFO or device where INDEX keeps the wheel is refused with one line); its bytes are hashed
//! through that descriptor and must be the wheel's; the link is made under a temporary name in
//! `--out`'s project directory, never outside `--out`, and must be that same inode (else the file
//! was swapped during the run: refused). The link takes the file's mode as it is: nothing is
//! changed on a shared inode.

use crate::error::Context;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::dist::{IndexedWheel, sha256_of};
use crate::error::{Error, Result};
use crate::output::Pending;

/// What this run wrote as links and as copies.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sharing {
    /// `--share-with`: the index whose wheels were hard-linked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Wheels this run wrote as hard links to `from`'s files (on disk once for both indexes).
    pub linked_files: usize,
    /// Their bytes.
    pub linked_bytes: u64,
    /// Wheels this run wrote as copies of the input.
    pub copied_files: usize,
    /// Their bytes.
    pub copied_bytes: u64,
    /// Why a wheel was copied although `from` was given: not in it, other bytes there, or no
    /// link possible (another file system).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The index to link from and the tally.
pub struct Share {
    from: Option<PathBuf>,
    /// What was linked and what was copied, for the report.
    pub report: Sharing,
}

impl Share {
    /// `from` must be a directory (not a symbolic link) when given.
    pub fn new(from: Option<PathBuf>) -> Result<Share> {
        if let Some(f) = &from {
            match std::fs::symlink_metadata(f) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Error::Usage(format!(
                        "--share-with {}: not a directory (a symbolic link is not followed): give the index directory itself",
                        f.display()
                    )));
                }
                Err(e) => return Err(Error::io(f, e)),
            }
        }
        Ok(Share {
            report: Sharing {
                from: from.as_ref().map(|f| f.display().to_string()),
                ..Sharing::default()
            },
            from,
        })
    }

    /// Record a wheel written as a copy.
    pub fn copied(&mut self, w: &IndexedWheel) {
        self.report.copied_files += 1;
        self.report.copied_bytes += w.size;
    }

    /// Stage `w` into `dir` (its project directory in `--out`) as a hard link to the index's copy
    /// of it. `Ok(false)`: nothing staged (a note says why, when an index was given); the caller
    /// copies.
    pub fn link(&mut self, w: &IndexedWheel, dir: &Path, pending: &mut Pending) -> Result<bool> {
        let Some(from) = &self.from else {
            return Ok(false);
        };
        let project = from.join(&w.project);
        match std::fs::symlink_metadata(&project) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::bad(
                    project.display(),
                    "is a symbolic link where a project directory goes: --share-with links only the index's own files",
                ));
            }
            _ => return Ok(self.note(w, "not in --share-with")),
        }
        let src = project.join(&w.filename);
        let mut file = match crate::input::open_nofollow(&src) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(self.note(w, "not in --share-with"));
            }
            Err(e) => return Err(Error::io(&src, e)),
        };
        let meta = file.metadata().at(&src)?;
        let (sha, _) = sha256_of(&mut file, &src)?;
        if sha != w.sha256 || meta.len() != w.size {
            return Ok(self.note(w, &format!("{} has other bytes", src.display())));
        }
        let tmp = match pending.add_hard_link(&src, dir, &w.filename)? {
            Ok(tmp) => tmp,
            Err(e) => return Ok(self.note(w, &format!("no hard link ({e})"))),
        };
        let linked = std::fs::symlink_metadata(&tmp).at(&tmp)?;
        if (linked.dev(), linked.ino()) != (meta.dev(), meta.ino()) {
            return Err(Error::bad(
                src.display(),
                "was replaced while it was linked into the index: refusing to serve what was not checked",
            ));
        }
        self.report.linked_files += 1;
        self.report.linked_bytes += w.size;
        Ok(true)
    }

    /// Note why `w` is copied although an index to link from was given; `false`.
    fn note(&mut self, w: &IndexedWheel, why: &str) -> bool {
        self.report
            .notes
            .push(format!("{}: copied, {why}", w.filename));
        false
    }
}
