//! The one rule for a path that comes from an input (an archive member, a `conda-meta` record, a
//! plan, a manifest) and is joined to a directory splitpkg writes to or deletes from: it must stay
//! inside that directory. Lexically — relative, no `..`, no backslash or drive letter (which a
//! Windows installer reads as separators and roots) — and on disk: no directory on the way may be a
//! symlink that leads out of the root (a `lib/` → `/etc` link inside an environment would make a
//! "remove lib/x" remove `/etc/x`).
//!
//! The last component is not resolved by [`join_inside`]: removing or replacing a symlink acts on the
//! link itself, and packages do ship links that point elsewhere. A directory splitpkg itself writes
//! into must not be a link at all ([`dir_inside`]).
//!
//! A tree the user hands over to be read and edited in place (a feedstock checkout) is stricter:
//! no component of a path splitpkg reads or writes there may be a symlink at all
//! ([`no_links_inside`]), so a `recipe/` → `/etc` link or a `conda_build_config.yaml` →
//! `/etc/passwd` link is never read, printed or written through.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Why a path would leave its root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Escape {
    /// Nothing to join: an empty path.
    #[error("empty path")]
    Empty,
    /// A NUL byte, which no file name can hold.
    #[error("{0:?} holds a NUL byte")]
    Nul(String),
    /// A path from `/`, which would ignore the root.
    #[error("{0:?} is an absolute path")]
    Absolute(String),
    /// A `..` component, which climbs out of the root.
    #[error("{0:?} climbs out with `..`")]
    Parent(String),
    /// A backslash, a separator where the path is unpacked on Windows.
    #[error("{0:?} holds a backslash (a Windows separator)")]
    Backslash(String),
    /// More than one component where a single file name is expected.
    #[error("{0:?} is not a single file name")]
    Separator(String),
    /// A drive letter (`C:`), absolute on Windows.
    #[error("{0:?} starts with a drive letter")]
    Drive(String),
    /// A symlink already under the root that leads outside it.
    #[error("{path:?}: {link} is a symlink to {target}, outside {root}")]
    Symlink {
        /// The path that was to be joined.
        path: String,
        /// The component of it that is a symlink.
        link: String,
        /// Where that symlink points.
        target: String,
        /// The root the path had to stay under.
        root: String,
    },
    /// A directory on the way that is a symlink (writing through it would land elsewhere).
    #[error("{0} is a symlink; refusing to write through it")]
    LinkedDir(String),
    /// A component on the way that exists and is not a directory.
    #[error("{0} exists and is not a directory")]
    NotDir(String),
    /// A symlink inside the input tree where a file is read or written.
    #[error("{0} is a symlink; refusing to read or write through a link inside the input tree")]
    LinkInTree(String),
}

/// The lexical rule alone: `rel` is relative, `/`-separated, and cannot name anything outside the
/// directory it is joined to, on any platform an installer of the output may run on.
pub fn check_relative(rel: &str) -> Result<(), Escape> {
    let owned = || rel.to_string();
    if rel.is_empty() {
        return Err(Escape::Empty);
    }
    if rel.contains('\0') {
        return Err(Escape::Nul(owned()));
    }
    if rel.starts_with('/') {
        return Err(Escape::Absolute(owned()));
    }
    if rel.contains('\\') {
        return Err(Escape::Backslash(owned()));
    }
    let b = rel.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err(Escape::Drive(owned()));
    }
    if rel.split('/').any(|c| c == "..") {
        return Err(Escape::Parent(owned()));
    }
    Ok(())
}

/// A file name made from input (a version, a tag): one component, by the same rule.
pub fn check_file_name(name: &str) -> Result<(), Escape> {
    check_relative(name)?;
    if name.contains('/') || name == "." {
        return Err(Escape::Separator(name.to_string()));
    }
    Ok(())
}

/// A root that many input paths are joined to: the directories already found to stay inside are
/// remembered, so checking every file of an environment costs one `lstat` per directory.
pub struct Root {
    root: PathBuf,
    /// The root with every link resolved; `None` while it does not exist (then nothing under it does).
    canonical: Option<PathBuf>,
    inside: HashSet<PathBuf>,
}

impl Root {
    /// A root at `root`, with its canonical path (if it exists) to check symlinks against.
    pub fn new(root: &Path) -> Root {
        Root {
            root: root.to_path_buf(),
            canonical: root.canonicalize().ok(),
            inside: HashSet::new(),
        }
    }

    /// `root/rel`, once `rel` passes [`check_relative`] and no existing directory on the way is a
    /// symlink that resolves outside the root (a dangling one counts as outside).
    pub fn join(&mut self, rel: &str) -> Result<PathBuf, Escape> {
        check_relative(rel)?;
        let joined = self.root.join(rel);
        let Some(canonical) = &self.canonical else {
            return Ok(joined);
        };
        let parts: Vec<&str> = rel
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        let mut dir = self.root.clone();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            dir.push(part);
            if self.inside.contains(&dir) {
                continue;
            }
            match std::fs::symlink_metadata(&dir) {
                // Nothing below a missing directory exists either.
                Err(_) => break,
                Ok(m) if m.file_type().is_symlink() => match dir.canonicalize() {
                    Ok(t) if t.starts_with(canonical) => {}
                    resolved => {
                        let target = match resolved {
                            Ok(t) => t.display().to_string(),
                            Err(_) => std::fs::read_link(&dir)
                                .map(|t| t.display().to_string())
                                .unwrap_or_default(),
                        };
                        return Err(Escape::Symlink {
                            path: rel.to_string(),
                            link: dir
                                .strip_prefix(&self.root)
                                .unwrap_or(&dir)
                                .display()
                                .to_string(),
                            target,
                            root: self.root.display().to_string(),
                        });
                    }
                },
                Ok(_) => {}
            }
            self.inside.insert(dir.clone());
        }
        Ok(joined)
    }
}

/// `root/rel`, confined as [`Root::join`] confines it (for a single path).
pub fn join_inside(root: &Path, rel: &str) -> Result<PathBuf, Escape> {
    Root::new(root).join(rel)
}

/// `root/rel` for a directory splitpkg creates and writes into: confined, and, where it exists
/// already, a real directory (never a symlink, wherever it points).
pub fn dir_inside(root: &Path, rel: &str) -> Result<PathBuf, Escape> {
    let dir = join_inside(root, rel)?;
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Escape::LinkedDir(dir.display().to_string())),
        Ok(m) if !m.is_dir() => Err(Escape::NotDir(dir.display().to_string())),
        _ => Ok(dir),
    }
}

/// `root/rel` for a file of an input tree splitpkg reads, and may rewrite, in place: `rel` passes
/// [`check_relative`] and no component of it — each directory on the way and the file itself — is a
/// symlink, wherever it points (`lstat` of each, relative to the root; the root itself is the
/// user's own path and may be one). A missing component ends the walk: nothing below it exists,
/// and a writer creates it as a real directory or file. Readers still open the file with
/// `O_NOFOLLOW` ([`crate::input::file::Links::Refuse`]), so a link planted after this check is
/// refused too.
pub fn no_links_inside(root: &Path, rel: &str) -> Result<PathBuf, Escape> {
    check_relative(rel)?;
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut path = root.to_path_buf();
    for (n, part) in parts.iter().enumerate() {
        path.push(part);
        let shown = || parts[..=n].join("/");
        match std::fs::symlink_metadata(&path) {
            // Missing (or unreadable: the open that follows reports that error with the path).
            Err(_) => break,
            Ok(m) if m.file_type().is_symlink() => return Err(Escape::LinkInTree(shown())),
            Ok(m) if n + 1 < parts.len() && !m.is_dir() => return Err(Escape::NotDir(shown())),
            Ok(_) => {}
        }
    }
    Ok(root.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_escapes_are_refused() {
        for ok in ["a", "lib/libx.so", "a/./b", "a..b/c", "dir/"] {
            assert_eq!(check_relative(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_relative(""), Err(Escape::Empty));
        assert!(matches!(
            check_relative("/etc/passwd"),
            Err(Escape::Absolute(_))
        ));
        assert!(matches!(
            check_relative("a/../../b"),
            Err(Escape::Parent(_))
        ));
        assert!(matches!(check_relative(".."), Err(Escape::Parent(_))));
        assert!(matches!(
            check_relative("torch\\..\\..\\evil.py"),
            Err(Escape::Backslash(_))
        ));
        assert!(matches!(
            check_relative("C:\\Windows\\evil.py"),
            Err(Escape::Backslash(_))
        ));
        assert!(matches!(
            check_relative("C:/Windows/evil.py"),
            Err(Escape::Drive(_))
        ));
        assert!(matches!(check_relative("a\0b"), Err(Escape::Nul(_))));
        assert_eq!(
            check_file_name("torch-2.5.1+split-cp311-cp311-linux_x86_64.whl"),
            Ok(())
        );
        assert!(matches!(
            check_file_name("torch-1/../../x.whl"),
            Err(Escape::Parent(_))
        ));
        assert!(matches!(
            check_file_name("torch-1/x.whl"),
            Err(Escape::Separator(_))
        ));
    }

    #[test]
    fn symlinked_directories_must_stay_inside() {
        let d = tempfile::tempdir().unwrap();
        let (root, outside) = (d.path().join("root"), d.path().join("outside"));
        std::fs::create_dir_all(root.join("lib/real")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("lib/out")).unwrap();
        std::os::unix::fs::symlink("real", root.join("lib/in")).unwrap();
        std::os::unix::fs::symlink("/nonexistent-splitpkg", root.join("dangling")).unwrap();
        let mut r = Root::new(&root);
        assert_eq!(r.join("lib/in/x.so").unwrap(), root.join("lib/in/x.so"));
        assert_eq!(
            r.join("lib/out").unwrap(),
            root.join("lib/out"),
            "the last component is the link itself"
        );
        assert!(matches!(
            r.join("lib/out/x.so"),
            Err(Escape::Symlink { .. })
        ));
        assert!(matches!(r.join("dangling/x"), Err(Escape::Symlink { .. })));
        assert_eq!(r.join("missing/a/b").unwrap(), root.join("missing/a/b"));
        assert!(matches!(
            dir_inside(&root, "lib/in"),
            Err(Escape::LinkedDir(_))
        ));
        assert!(dir_inside(&root, "lib/real").is_ok());
    }

    #[test]
    fn no_component_of_an_input_tree_path_may_be_a_link() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("feedstock");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), "x").unwrap();
        std::os::unix::fs::symlink("real", root.join("inside")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("real/passwd")).unwrap();
        std::os::unix::fs::symlink("/nonexistent-splitpkg", root.join("real/dangling")).unwrap();
        assert_eq!(
            no_links_inside(&root, "real/file").unwrap(),
            root.join("real/file")
        );
        assert_eq!(
            no_links_inside(&root, "real/missing/deeper").unwrap(),
            root.join("real/missing/deeper"),
            "a missing path is created by the writer, not a link"
        );
        // Even a link that stays inside the tree: the rule is "no link", not "no escape".
        for (rel, link) in [
            ("inside/file", "inside"),
            ("real/passwd", "real/passwd"),
            ("real/dangling", "real/dangling"),
        ] {
            assert_eq!(
                no_links_inside(&root, rel),
                Err(Escape::LinkInTree(link.into())),
                "{rel}"
            );
        }
        assert_eq!(
            no_links_inside(&root, "real/file/x"),
            Err(Escape::NotDir("real/file".into()))
        );
        assert!(matches!(
            no_links_inside(&root, "../x"),
            Err(Escape::Parent(_))
        ));
    }
}
