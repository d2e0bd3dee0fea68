//! A set of output files written under temporary names and renamed into place as one transaction:
//! all of them or none, on a refusal, a failed rename and a signal (docs/security.md, "Atomic
//! writes"). `wheel` stages its wheels here, `index` its files and pages, `feedstock --write` its
//! recipe files, [`super::write_atomic`] its one file.

use crate::error::Context;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::atomic::{self, Dest};
use super::cleanup;
use crate::error::{Error, Result};

/// A staged file: its temporary path and the open file to write (created by
/// [`atomic::create_temp`]; callers never make a temporary path themselves).
pub struct StagedFile {
    /// The temporary's path, renamed onto the destination at commit.
    pub path: PathBuf,
    /// The temporary, open for writing.
    pub file: File,
}

struct PendingEntry {
    tmp: PathBuf,
    dst: PathBuf,
    /// Whether an fsync of the finished file was started ([`Pending::sync_in_background`]).
    synced: bool,
    /// Whether the caller chose the mode ([`Pending::set_mode`]) instead of the replaced file's.
    mode_given: bool,
    /// Removed on SIGINT/SIGTERM too (`output::cleanup`).
    _registered: cleanup::Registered,
}

/// A replaced file's original, kept under a temporary name (a hard link, or a copy where the
/// filesystem makes none) until every rename has succeeded.
struct Backup {
    path: PathBuf,
    /// Set when the original could not be put back: then the backup is all that is left of it.
    keep: bool,
    _registered: cleanup::Registered,
}

impl Drop for Backup {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Files staged together and committed in the order added; removed if dropped uncommitted.
#[derive(Default)]
pub struct Pending {
    files: Vec<PendingEntry>,
    /// `fsync` of each finished file, running.
    syncing: Vec<(PathBuf, std::thread::JoinHandle<std::io::Result<()>>)>,
    committed: bool,
}

impl Pending {
    /// Stage `out/file`; `file` is made from an input's metadata and file name, so it must be one
    /// file name ([`crate::confine::check_file_name`]).
    pub fn add(&mut self, out: &Path, file: &str) -> Result<StagedFile> {
        self.add_path(join_file(out, file)?)
    }

    /// Stage `dst`, a path the user named (its directory must exist). Refused at once unless
    /// `dst` is a regular file or missing; checked again at [`Pending::commit`].
    pub fn add_path(&mut self, dst: PathBuf) -> Result<StagedFile> {
        atomic::check_dest(&dst)?;
        let dir = atomic::parent_of(&dst);
        cleanup::sweep_once(dir);
        let name = file_name(&dst)?;
        let t = atomic::create_temp(dir, &name)?;
        self.files.push(PendingEntry {
            tmp: t.path.clone(),
            dst,
            synced: false,
            mode_given: false,
            _registered: t.registered,
        });
        Ok(StagedFile {
            path: t.path,
            file: t.file,
        })
    }

    /// Stage `out/file` with the content of the staged file whose final path is `from`: a hard
    /// link (one copy on disk), a copy where links cannot be made.
    #[allow(clippy::disallowed_methods)] // why: the output module copies its own staged temporary, which it created.
    pub fn add_link(&mut self, from: &Path, out: &Path, file: &str) -> Result<()> {
        let src = self.tmp_of(from);
        let dst = join_file(out, file)?;
        atomic::check_dest(&dst)?;
        if let Some((tmp, registered)) = atomic::link_temp(&src, out, file)? {
            self.files.push(PendingEntry {
                tmp,
                dst,
                synced: true,
                mode_given: false,
                _registered: registered,
            });
            return Ok(());
        }
        let mut staged = self.add(out, file)?;
        let mut r = File::open(&src).at(&src)?;
        std::io::copy(&mut r, &mut staged.file).at(&dst)?;
        self.sync_in_background(&staged.path, staged.file);
        Ok(())
    }

    /// Stage `out/file` as a hard link to `from`, an existing file outside this transaction
    /// (another index's copy of the same bytes), and return the temporary path, which the caller
    /// checks is the file it verified. `Ok(Err(why))` when no link could be made (another file
    /// system, `protected_hardlinks`): nothing is staged and the caller copies instead.
    pub fn add_hard_link(
        &mut self,
        from: &Path,
        out: &Path,
        file: &str,
    ) -> Result<std::result::Result<PathBuf, std::io::Error>> {
        let dst = join_file(out, file)?;
        atomic::check_dest(&dst)?;
        Ok(
            atomic::link_temp_or_why(from, out, file).map(|(tmp, registered)| {
                self.files.push(PendingEntry {
                    tmp: tmp.clone(),
                    dst,
                    // The bytes are another file's, on disk already, and so is its mode:
                    // a chmod here would change the other index's file too.
                    synced: true,
                    mode_given: true,
                    _registered: registered,
                });
                tmp
            }),
        )
    }

    /// Give the staged file `mode` (a library's copy stays executable, a generated script is
    /// one), instead of the mode of the file it replaces.
    pub fn set_mode(&mut self, staged: &StagedFile, mode: u32) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        staged
            .file
            .set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
            .at(&staged.path)?;
        if let Some(e) = self.files.iter_mut().find(|e| e.tmp == staged.path) {
            e.mode_given = true;
        }
        Ok(())
    }

    /// The temporary path of final path `dst`.
    pub fn tmp_of(&self, dst: &Path) -> PathBuf {
        self.files
            .iter()
            .find(|e| e.dst == dst)
            .map(|e| e.tmp.clone())
            .unwrap_or_default()
    }

    /// `fsync` the finished file `tmp` on a helper thread; `commit` waits for it.
    pub fn sync_in_background(&mut self, tmp: &Path, file: File) {
        if let Some(e) = self.files.iter_mut().find(|e| e.tmp == tmp) {
            e.synced = true;
        }
        self.syncing.push((
            tmp.to_path_buf(),
            std::thread::spawn(move || file.sync_all()),
        ));
    }

    /// Every file on disk first; every destination checked again (a regular file or missing) and
    /// its original kept aside; then, with signals deferred, every rename, undone if one fails;
    /// then the directories synced. A crash leaves the old set or files whose data is complete.
    pub fn commit(&mut self) -> Result<()> {
        self.finish_syncs()?;
        let dests = self
            .files
            .iter()
            .map(|e| atomic::check_dest(&e.dst))
            .collect::<Result<Vec<_>>>()?;
        for (e, d) in self.files.iter().zip(&dests) {
            if !e.mode_given {
                atomic::keep_mode(&e.tmp, *d)?;
            }
        }
        let deferred = cleanup::defer_signals();
        let mut backups = self.back_up(&dests)?;
        self.rename_all(&mut backups)?;
        self.committed = true;
        drop(backups);
        drop(deferred);
        let mut dirs: Vec<&Path> = self
            .files
            .iter()
            .map(|e| atomic::parent_of(&e.dst))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.into_iter().try_for_each(atomic::sync_dir)
    }

    /// Wait for the background fsyncs; fsync what was never handed to one.
    #[allow(clippy::disallowed_methods)] // why: opens the output module's own temporaries to fsync them, reads nothing.
    fn finish_syncs(&mut self) -> Result<()> {
        for (tmp, sync) in self.syncing.drain(..) {
            sync.join()
                .map_err(|_| {
                    Error::internal(format!("{}: the fsync thread failed", tmp.display()))
                })?
                .at(&tmp)?;
        }
        for e in self.files.iter().filter(|e| !e.synced) {
            File::open(&e.tmp).and_then(|f| f.sync_all()).at(&e.tmp)?;
        }
        Ok(())
    }

    /// Each file about to be replaced, kept under a temporary name of its own.
    fn back_up(&self, dests: &[Dest]) -> Result<Vec<Option<Backup>>> {
        self.files
            .iter()
            .zip(dests)
            .map(|(e, d)| match d {
                Dest::Missing => Ok(None),
                Dest::Regular(_) => back_up_one(&e.dst, *d).map(Some),
            })
            .collect()
    }

    /// Rename every file into place; on the first failure, put back what was renamed before it.
    fn rename_all(&self, backups: &mut [Option<Backup>]) -> Result<()> {
        for (i, e) in self.files.iter().enumerate() {
            if let Err(err) = std::fs::rename(&e.tmp, &e.dst) {
                self.roll_back(i, backups);
                return Err(Error::io(&e.dst, err));
            }
        }
        Ok(())
    }

    /// Undo the first `done` renames: the original back where there was one, the new file
    /// removed where there was none.
    fn roll_back(&self, done: usize, backups: &mut [Option<Backup>]) {
        for (e, b) in self.files[..done].iter().zip(backups.iter_mut()).rev() {
            match b {
                Some(b) => b.keep = std::fs::rename(&b.path, &e.dst).is_err(),
                None => {
                    let _ = std::fs::remove_file(&e.dst);
                }
            }
        }
    }
}

/// `dst`'s original under a temporary name: a hard link, or a copy (with its mode) where the
/// filesystem refuses one (an immutable file, a filesystem without links).
fn back_up_one(dst: &Path, dest: Dest) -> Result<Backup> {
    let dir = atomic::parent_of(dst);
    let name = file_name(dst)?;
    if let Some((path, registered)) = atomic::link_temp(dst, dir, &name)? {
        return Ok(Backup {
            path,
            keep: false,
            _registered: registered,
        });
    }
    let mut t = atomic::create_temp(dir, &name)?;
    let mut src = open_original(dst)?;
    std::io::copy(&mut src, &mut t.file).at(dst)?;
    t.file.sync_all().at(&t.path)?;
    atomic::keep_mode(&t.path, dest)?;
    Ok(Backup {
        path: t.path,
        keep: false,
        _registered: t.registered,
    })
}

/// The file being replaced, opened for its backup copy: never through a link, never blocking on
/// a FIFO swapped in since it was checked.
#[allow(clippy::disallowed_methods)] // why: the file being replaced, opened O_NOFOLLOW|O_NONBLOCK and checked regular here, for its backup.
fn open_original(dst: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dst)
        .at(dst)?;
    let t = f.metadata().at(dst)?.file_type();
    if !t.is_file() {
        return Err(Error::bad(
            dst.display(),
            format!(
                "is {}, not a regular file: refusing to replace it",
                atomic::kind_of(&t)
            ),
        ));
    }
    Ok(f)
}

/// `out/file`, once `file` is one file name ([`crate::confine::check_file_name`]).
fn join_file(out: &Path, file: &str) -> Result<PathBuf> {
    crate::confine::check_file_name(file)
        .bad_at(out.display(), "refusing to write a file named so")?;
    Ok(out.join(file))
}

/// The last component of `dst`, for its temporary's name.
fn file_name(dst: &Path) -> Result<String> {
    dst.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::bad(dst.display(), "names no file to write"))
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            for e in &self.files {
                let _ = std::fs::remove_file(&e.tmp);
            }
        }
    }
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    fn stage(p: &mut Pending, dst: &Path, text: &str) -> PathBuf {
        let mut s = p.add_path(dst.to_path_buf()).unwrap();
        s.file.write_all(text.as_bytes()).unwrap();
        p.sync_in_background(&s.path, s.file);
        s.path
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_rename_puts_every_renamed_file_back() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        std::fs::write(&a, b"old a").unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o664)).unwrap();
        let mut p = Pending::default();
        stage(&mut p, &a, "new a");
        stage(&mut p, &b, "new b");
        let c_tmp = stage(&mut p, &c, "new c");
        p.finish_syncs().unwrap();
        // The third rename fails (its temporary is gone): a and b were renamed by then.
        std::fs::remove_file(&c_tmp).unwrap();
        assert!(p.commit().is_err());
        drop(p);
        assert_eq!(std::fs::read(&a).unwrap(), b"old a");
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o664);
        assert_eq!(
            listing(d.path()),
            ["a"],
            "b removed again, no temporary left"
        );
    }

    #[test]
    fn a_commit_keeps_modes_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let (sh, yaml) = (d.path().join("build.sh"), d.path().join("recipe.yaml"));
        std::fs::write(&sh, b"old").unwrap();
        std::fs::write(&yaml, b"old").unwrap();
        std::fs::set_permissions(&sh, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&yaml, std::fs::Permissions::from_mode(0o664)).unwrap();
        let mut p = Pending::default();
        stage(&mut p, &sh, "new sh");
        stage(&mut p, &yaml, "new yaml");
        p.commit().unwrap();
        let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&sh), mode(&yaml)), (0o644, 0o664));
        assert_eq!(std::fs::read(&yaml).unwrap(), b"new yaml");
        assert_eq!(listing(d.path()), ["build.sh", "recipe.yaml"]);
    }

    #[test]
    fn a_destination_that_became_a_directory_refuses_the_whole_set() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::write(&a, b"old a").unwrap();
        let mut p = Pending::default();
        stage(&mut p, &a, "new a");
        stage(&mut p, &b, "new b");
        std::fs::create_dir(&b).unwrap();
        let e = p.commit().unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        drop(p);
        assert_eq!(std::fs::read(&a).unwrap(), b"old a");
        assert_eq!(listing(d.path()), ["a", "b"]);
    }
}
