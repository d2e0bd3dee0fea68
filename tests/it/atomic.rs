//! The one atomic-write primitive (`src/output/atomic.rs`, `src/output/pending.rs`) on the real
//! binary: `--out` that is not a regular file refused, planted links at temporary names never
//! followed, `feedstock --write` as one transaction under the feedstock's lock (all files or none
//! on a refusal, an immutable file, a signal; concurrent runs never lose a patch), stale
//! temporaries of dead runs swept, modes kept.

use crate::common::*;
use crate::feedstock::{mini, snapshot};

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A PID that names no process: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn refused_naming(o: &Output, path: &Path, what: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.contains(s(path)) && e.contains(what), "{what}: {e}");
}

/// Every temporary left in `dirs` (by name).
fn temporaries(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".splitpkg-tmp-"))
        .collect()
}

/// The three commands with an `--out`, each writing to `out`.
fn writers(d: &Path, out: &Path) -> Vec<(&'static str, Vec<String>)> {
    let lib = d.join("libtorch_cuda.so");
    if !lib.exists() {
        std::fs::copy(fixture("conda-like").join("lib/libtorch_cuda.so"), &lib).unwrap();
    }
    let plan = repo().join("docs/evidence/report-inputs/plan.json");
    let out = s(out).to_string();
    let args = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        (
            "plan",
            args(&[
                "plan",
                s(&fixture("conda-like")),
                "--json",
                "-q",
                "--out",
                &out,
            ]),
        ),
        (
            "report",
            args(&["report", "--plan", s(&plan), "--out", &out]),
        ),
        (
            "note",
            args(&[
                "note",
                s(&lib),
                "--out",
                &out,
                "--soname",
                "libtorch_cuda_linalg.so",
                "--feature",
                "linalg",
                "--priority",
                "required",
            ]),
        ),
    ]
}

fn run_args(args: &[String]) -> Output {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&argv)
}

#[test]
fn out_that_is_a_symlink_directory_fifo_or_device_is_refused_and_left_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let dir = d.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let fifo = d.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let null_copy = d.path().join("null");
    let c = std::ffi::CString::new(s(&null_copy)).unwrap();
    // SAFETY: a NUL-terminated path; mknod only creates the node.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0;
    let mut cases = vec![
        (link.clone(), "a symlink"),
        (dir.clone(), "a directory"),
        (fifo.clone(), "a FIFO"),
        (PathBuf::from("/dev/null"), "a character device"),
    ];
    if made {
        cases.push((null_copy.clone(), "a character device"));
    } else {
        eprintln!("note: mknod is not permitted here; the device-node copy case is skipped");
    }
    for (out, what) in &cases {
        for (name, args) in writers(d.path(), out) {
            let o = run_args(&args);
            refused_naming(&o, out, what);
            assert!(stdout(&o).is_empty(), "{name}: {}", stdout(&o));
        }
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(kind(&link).is_symlink() && kind(&dir).is_dir() && kind(&fifo).is_fifo());
    assert!(kind(Path::new("/dev/null")).is_char_device());
    assert!(!made || kind(&null_copy).is_char_device());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(temporaries(&[d.path().to_path_buf()]).is_empty());
}

#[test]
fn links_planted_at_temporary_names_for_a_range_of_pids_are_never_followed() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("plan.json");
    // Every name the old scheme (`.FILE.splitpkg-tmp-PID`) would have used for the next PIDs,
    // and the new scheme's with a zero random part: all links to the victim.
    let next = dead_pid();
    for pid in next..next + 2000 {
        for name in [
            format!(".plan.json.splitpkg-tmp-{pid}"),
            format!(".plan.json.splitpkg-tmp-{pid}-{:016x}", 0),
        ] {
            std::os::unix::fs::symlink(&victim, out_dir.join(name)).unwrap();
        }
    }
    let (_, args) = writers(d.path(), &out).remove(0);
    let o = run_args(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(plan.get("verdict").is_some(), "{plan}");
}

/// `chattr` on `path`; false where the filesystem or the user cannot.
fn chattr(flag: &str, path: &Path) -> bool {
    Command::new("chattr")
        .arg(flag)
        .arg(path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn feedstock_write_is_all_or_none_on_a_directory_in_a_files_place() {
    let d = mini();
    let cbc = d.path().join("recipe/conda_build_config.yaml");
    std::fs::remove_file(&cbc).unwrap();
    std::fs::create_dir(&cbc).unwrap();
    std::fs::write(cbc.join("inside"), b"x").unwrap();
    let before = snapshot(d.path());
    let o = run(&["feedstock", s(d.path()), "--write"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("conda_build_config.yaml"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        snapshot(d.path()),
        before,
        "the feedstock is byte-identical"
    );
    assert!(temporaries(&[d.path().to_path_buf(), d.path().join("recipe")]).is_empty());
}

#[test]
fn feedstock_write_is_all_or_none_when_an_immutable_file_refuses_its_rename() {
    for file in ["recipe.yaml", "build.sh", "conda_build_config.yaml"] {
        let d = mini();
        let f = d.path().join("recipe").join(file);
        if !chattr("+i", &f) {
            eprintln!(
                "note: chattr +i fails on this filesystem; the immutable-file case is skipped"
            );
            return;
        }
        let before = snapshot(d.path());
        let o = run(&["feedstock", s(d.path()), "--write"]);
        chattr("-i", &f);
        assert_eq!(o.status.code(), Some(2), "{file}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
        assert_eq!(
            snapshot(d.path()),
            before,
            "{file} immutable: nothing changed"
        );
        assert!(temporaries(&[d.path().to_path_buf(), d.path().join("recipe")]).is_empty());
    }
}

/// The feedstock's lock, as `feedstock --write` takes it (flock on the directory itself).
fn hold_lock(dir: &Path) -> std::fs::File {
    let f = std::fs::File::open(dir).unwrap();
    f.lock().unwrap();
    f
}

fn spawn_write(dir: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args(["feedstock", s(dir), "--write"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_signal_before_the_commit_leaves_the_originals_and_no_temporary() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let d = mini();
        let before = snapshot(d.path());
        let lock = hold_lock(d.path());
        let child = spawn_write(d.path(), &[]);
        // Give it time to reach the lock (if it has not, the signal ends it earlier still).
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let o = child.wait_with_output().unwrap();
        drop(lock);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(signal), "{}", stderr(&o));
        assert_eq!(snapshot(d.path()), before);
        assert!(temporaries(&[d.path().to_path_buf(), d.path().join("recipe")]).is_empty());
    }
}

#[test]
fn two_concurrent_feedstock_writes_never_both_succeed_with_one_patch_lost() {
    let d = mini();
    let lock = hold_lock(d.path());
    // Both started while the lock is held: they read the feedstock only in turn.
    let a = spawn_write(d.path(), &[]);
    let b = spawn_write(d.path(), &["--variant-key", "with_magma"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(lock);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(2)],
        "one writes, the other refuses the patched feedstock: {} / {}",
        stderr(&a),
        stderr(&b)
    );
    // The feedstock is exactly the winner's patch, whole.
    let winner: &[&str] = if a.status.code() == Some(0) {
        &[]
    } else {
        &["--variant-key", "with_magma"]
    };
    let alone = mini();
    let o = spawn_write(alone.path(), winner)
        .wait_with_output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(snapshot(d.path()), snapshot(alone.path()));
}

#[test]
fn stale_temporaries_of_dead_runs_are_swept_live_ones_and_link_targets_kept() {
    let d = mini();
    let (root, recipe) = (d.path().to_path_buf(), d.path().join("recipe"));
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let dead = dead_pid();
    let stale = [
        recipe.join(format!(".recipe.yaml.splitpkg-tmp-{dead}-00000000deadbeef")),
        recipe.join(format!(".build.sh.splitpkg-tmp-{dead}")),
        root.join(format!(".x.splitpkg-tmp-{dead}-0123456789abcdef")),
    ];
    for f in &stale {
        std::fs::write(f, b"partial").unwrap();
    }
    let stale_link = recipe.join(format!(".conda_build_config.yaml.splitpkg-tmp-{dead}-1"));
    std::os::unix::fs::symlink(&victim, &stale_link).unwrap();
    let stale_dir = recipe.join(format!(".d.splitpkg-tmp-{dead}-2"));
    std::fs::create_dir(&stale_dir).unwrap();
    let live = recipe.join(format!(
        ".recipe.yaml.splitpkg-tmp-{}-3",
        std::process::id()
    ));
    std::fs::write(&live, b"mine").unwrap();
    let o = run(&["feedstock", s(&root), "--write"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in stale.iter().chain([&stale_link]) {
        assert!(
            std::fs::symlink_metadata(f).is_err(),
            "{} swept",
            f.display()
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(stale_dir.is_dir(), "a directory is not a temporary of ours");
    assert_eq!(std::fs::read(&live).unwrap(), b"mine", "a live run's stays");
}

#[test]
fn feedstock_write_keeps_each_files_mode() {
    let d = mini();
    let recipe = d.path().join("recipe");
    let set = |f: &str, m: u32| {
        std::fs::set_permissions(recipe.join(f), std::fs::Permissions::from_mode(m)).unwrap()
    };
    set("build.sh", 0o644);
    set("recipe.yaml", 0o664);
    let o = run(&["feedstock", s(d.path()), "--write"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = |f: &str| {
        std::fs::metadata(recipe.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("build.sh"), 0o644);
    assert_eq!(mode("recipe.yaml"), 0o664);
    assert!(stderr(&o).contains("wrote"), "{}", stderr(&o));
}
