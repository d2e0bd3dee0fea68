//! What an interrupted run leaves behind, and who removes it.
//!
//! Every temporary path splitpkg creates (a wheel or an atomic write under its temporary name,
//! `pack`'s work directory, `env --switch`'s package cache) is named `…splitpkg-KIND-PID` (an
//! atomic write's `….splitpkg-tmp-PID-RANDOM`, `super::atomic`) and is [`register`]ed while it exists. Two things remove it when the run does not finish:
//!
//! - **a signal** (SIGINT, SIGTERM, SIGHUP): [`install`] blocks them in every thread and waits for
//!   them on a thread of its own (`sigwait`), which removes what is registered, then lets the
//!   signal end the process as it would have (same exit status for the parent's shell). Removing
//!   files is not async-signal-safe, so it is never done inside a signal handler. A transaction
//!   in its rename phase holds [`defer_signals`]: the signal waits until it has finished.
//! - **the next run** (for `kill -9`, a power cut): [`sweep_stale`] removes, in a directory about to
//!   get a temporary of its own, every splitpkg temporary whose PID is no longer a live process. A
//!   live process's temporary is never touched (`kill(pid, 0)` answering anything but "no such
//!   process" counts as alive). Every atomic write sweeps its directory once per run
//!   ([`sweep_once`]).
//!
//! Children started with `std::process::Command` get an empty signal mask again (std resets it),
//! so blocking here does not leak into `python` or `rattler-build`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How a registered path is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// A file (or a symlink): unlinked.
    File,
    /// A directory splitpkg owns entirely: removed with everything in it.
    Tree,
    /// A directory splitpkg created for output: removed only if nothing was put in it.
    EmptyDir,
}

/// The temporaries of this process, in the order registered (removed in reverse: files before the
/// directories they are in).
static REGISTRY: Mutex<Vec<(u64, PathBuf, Leftover)>> = Mutex::new(Vec::new());
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A path registered for removal on a signal; dropping this unregisters it (its owner has removed
/// or renamed it by then).
#[must_use = "the path is unregistered when this is dropped"]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut r) = REGISTRY.lock() {
            r.retain(|(id, _, _)| *id != self.0);
        }
    }
}

/// Register `path` for removal (as `kind`) if SIGINT or SIGTERM comes before the returned guard is
/// dropped.
pub fn register(path: &Path, kind: Leftover) -> Registered {
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut r) = REGISTRY.lock() {
        r.push((id, path.to_path_buf(), kind));
    }
    Registered(id)
}

fn remove(path: &Path, kind: Leftover) {
    let _ = match kind {
        Leftover::File => std::fs::remove_file(path),
        Leftover::EmptyDir => std::fs::remove_dir(path),
        // Never follow a link in place of the directory.
        Leftover::Tree => match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(e) => Err(e),
        },
    };
}

/// Remove everything registered (the signal thread, on SIGINT/SIGTERM/SIGHUP); `keep_listed`
/// leaves the list for another pass. Returns whether anything was still there.
fn remove_registered(keep_listed: bool) -> bool {
    // A thread that panicked while holding the lock leaves it poisoned; the list is still whole.
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let list = if keep_listed {
        guard.clone()
    } else {
        std::mem::take(&mut *guard)
    };
    drop(guard);
    let mut found = false;
    for (_, path, kind) in list.iter().rev() {
        found |= std::fs::symlink_metadata(path).is_ok();
        remove(path, *kind);
    }
    found
}

/// Held while a transaction renames its files into place ([`defer_signals`]); the signal thread
/// takes it before removing anything, so a signal in that phase ends the process after it.
static COMMITTING: Mutex<()> = Mutex::new(());

/// Defer SIGINT/SIGTERM/SIGHUP's removal and exit until the guard is dropped: the renames of a
/// transaction (and its rollback) run to their end, so a signal never leaves half a set.
pub fn defer_signals() -> std::sync::MutexGuard<'static, ()> {
    COMMITTING.lock().unwrap_or_else(|p| p.into_inner())
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Block SIGINT, SIGTERM and SIGHUP in this thread (and so in every thread started after it) and
/// start the thread that waits for them. Call first thing in `main`, before any other thread.
pub fn install() {
    let set = signal_set();
    // SAFETY: changes this thread's mask only; the set is initialised.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("splitpkg-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: sigwait on an initialised set of blocked signals.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            // The other threads run on meanwhile: one may create a file (and its directories again)
            // in a directory being removed. Passes repeat until nothing registered is left (bounded);
            // what is made in the instant before the process ends carries this PID, and the next
            // run's `sweep_stale` removes it.
            // A transaction renaming its files into place finishes first (all files or none).
            let _committed = COMMITTING.lock().unwrap_or_else(|p| p.into_inner());
            for _ in 0..100 {
                if !remove_registered(true) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            remove_registered(false);
            // End the way the signal would have: default action, unblocked in this thread, raised.
            // SAFETY: plain libc calls on a valid signal number and an initialised set.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(sig);
                libc::_exit(128 + sig);
            }
        });
    if spawned.is_err() {
        // No thread to wait for them: let the signals act as before rather than be ignored.
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

/// The kinds of temporary names splitpkg gives (`.FILE.splitpkg-tmp-PID-RANDOM`,
/// `.OUT.splitpkg-pack-PID`, `.OUT.splitpkg-build-PID`, `.splitpkg-switch-pkgs-PID`) and how each
/// is removed.
const KINDS: [(&str, Leftover); 4] = [
    (".splitpkg-tmp-", Leftover::File),
    (super::WorkKind::Pack.tag(), Leftover::Tree),
    (super::WorkKind::Build.tag(), Leftover::Tree),
    (".splitpkg-switch-pkgs-", Leftover::Tree),
];

/// The PID and kind in a temporary name of ours, if `name` is one.
pub fn temp_owner(name: &str) -> Option<(u32, Leftover)> {
    if !name.starts_with('.') {
        return None;
    }
    KINDS.iter().find_map(|(tag, kind)| {
        let at = name.rfind(tag)?;
        // `PID`, or `PID-RANDOM` (the random part of an atomic write's temporary).
        let rest = &name[at + tag.len()..];
        let (pid, random) = rest.split_once('-').unwrap_or((rest, "0"));
        let digits = |s: &str, hex: bool| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (hex && b.is_ascii_hexdigit()))
        };
        (digits(pid, false) && digits(random, true))
            .then(|| pid.parse().ok().map(|p| (p, *kind)))
            .flatten()
    })
}

/// Is `pid` a live process (or one we cannot tell about)?
fn alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if p <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists.
    unsafe {
        libc::kill(p, 0) == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
}

/// Remove the temporaries of dead splitpkg processes in `dir` (not below it); returns what was
/// removed. Errors are ignored: a leftover that cannot be removed is no reason to stop this run.
pub fn sweep_stale(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, kind)) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        if pid == std::process::id() || alive(pid) {
            continue;
        }
        let path = e.path();
        // A file leftover is a regular file (or a link, unlinked without being followed); a
        // directory or a FIFO under such a name is not one of ours.
        let Ok(t) = e.file_type() else { continue };
        if kind == Leftover::File && !(t.is_file() || t.is_symlink()) {
            continue;
        }
        remove(&path, kind);
        removed.push(path);
    }
    removed
}

/// [`sweep_stale`] `dir` unless this process did already: every atomic write calls this for the
/// directory it writes in, so each output directory is swept once per run.
pub fn sweep_once(dir: &Path) {
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
    if !swept.iter().any(|d| d == dir) {
        swept.push(dir.to_path_buf());
        drop(swept);
        sweep_stale(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised() {
        assert_eq!(
            temp_owner(".torch-2.11.0+split-cp311.whl.splitpkg-tmp-4242"),
            Some((4242, Leftover::File))
        );
        assert_eq!(
            temp_owner(".recipe.yaml.splitpkg-tmp-4242-00ff3a9c0b1d2e4f"),
            Some((4242, Leftover::File))
        );
        assert_eq!(
            temp_owner(".channel.splitpkg-pack-17"),
            Some((17, Leftover::Tree))
        );
        assert_eq!(
            temp_owner(".splitpkg-switch-pkgs-9"),
            Some((9, Leftover::Tree))
        );
        for not in [
            "torch.whl",
            ".x.splitpkg-tmp-",
            ".x.splitpkg-tmp-12a",
            "x.splitpkg-tmp-12",
            ".x.splitpkg-other-1",
            ".x.splitpkg-tmp-12-",
            ".x.splitpkg-tmp-12-xyz",
        ] {
            assert_eq!(temp_owner(not), None, "{not}");
        }
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_swept_and_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        // A child that has exited and been reaped: its PID names no process (unless reused at once).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let stale_file = d.path().join(format!(".a.whl.splitpkg-tmp-{dead}"));
        let stale_dir = d.path().join(format!(".ch.splitpkg-pack-{dead}"));
        let live = d.path().join(format!(".b.whl.splitpkg-tmp-{me}"));
        let parent_live = d.path().join(format!(
            ".c.whl.splitpkg-tmp-{}",
            std::os::unix::process::parent_id()
        ));
        std::fs::write(&stale_file, b"x").unwrap();
        std::fs::create_dir_all(stale_dir.join("pkgs")).unwrap();
        std::fs::write(&live, b"x").unwrap();
        std::fs::write(&parent_live, b"x").unwrap();
        let mut removed = sweep_stale(d.path());
        removed.sort();
        let mut want = vec![stale_dir.clone(), stale_file.clone()];
        want.sort();
        assert_eq!(removed, want);
        assert!(!stale_file.exists() && !stale_dir.exists());
        assert!(
            live.exists() && parent_live.exists(),
            "a live process's temporaries stay"
        );
    }
}
