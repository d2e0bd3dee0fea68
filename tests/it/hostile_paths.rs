//! Paths from inputs that lead out of the output, and runs that end early (docs/security.md):
//! `env --switch` on hostile `conda-meta` records, `wheel` through a symlinked `--out/variants`, a
//! RECORD row for a missing member and backslash member names, a channel package replaced by
//! different bytes under its name, and `wheel`/`pack` stopped by SIGTERM/SIGINT or killed (the next
//! run removes what a dead one left). Every refusal: exit 2, one line naming the file, and nothing
//! created, changed or deleted outside the named output (a sentinel outside is checked).

use crate::common::*;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use splitpkg::channel::document::SwitchReport;

const NOMAGMA: &str = "conda-nomagma/lib/libtorch_cuda_linalg.so";
const WHEEL_NAME: &str = "torch-2.5.1-cp311-cp311-linux_x86_64.whl";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The refusal contract: exit 2, one `splitpkg: error:` line that names `names`, nothing on stdout.
fn refused(o: &Output, names: &str) {
    let e = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout: {}\nstderr: {e}",
        stdout(o)
    );
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("splitpkg: error: "), "{e}");
    assert!(e.contains(names), "should name {names}: {e}");
    assert!(o.stdout.is_empty(), "{}", stdout(o));
}

/// Every path under `dir` with its content (files), target (links) or nothing (directories).
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let what = if e.path_is_symlink() {
                format!("-> {}", std::fs::read_link(e.path()).unwrap().display())
            } else if e.file_type().is_file() {
                let d = std::fs::read(e.path()).unwrap();
                format!(
                    "{} bytes, {:x}",
                    d.len(),
                    d.iter()
                        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(*b as u64))
                )
            } else {
                "dir".into()
            };
            (rel, what)
        })
        .collect()
}

fn cp_a(from: &Path, to: &Path) {
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success()
    );
}

/// A PID that names no process: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

// ---------------------------------------------------------------- env --switch

/// A channel of the conda-like fixture with both variants, and the default environment installed
/// from it by rattler's installer (as `env_switch_changes_the_environment_with_rattlers_installer`).
fn switchable_env(d: &Path) -> PathBuf {
    let ch = d.join("channel");
    let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
    let o = run(&[
        "pack",
        s(&fixture("conda-like")),
        "--out",
        s(&ch),
        "--quiet",
        "--version",
        "2.5.2",
        "--build-keys",
        "cuda126",
        "--lazy-variant",
        &nomagma,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&[
        "solve",
        s(&ch),
        "--install",
        s(&d.join("envs")),
        "--quiet",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    d.join("envs/default")
}

/// The record of the installed lazy package.
fn lazy_record(env: &Path) -> PathBuf {
    std::fs::read_dir(env.join("conda-meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libtorch-cuda-linalg-")
        })
        .expect("the lazy package is installed")
}

/// Add `rel` to the record's `paths_data` (and `files`), as the installer would remove it.
fn add_path(record: &Path, rel: &str) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(record).unwrap()).unwrap();
    let paths = v["paths_data"]["paths"].as_array_mut().unwrap();
    let mut row = paths[0].clone();
    row["_path"] = rel.into();
    paths.push(row);
    v["files"].as_array_mut().unwrap().push(rel.into());
    std::fs::write(record, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn env_switch_refuses_records_that_reach_outside_or_lie() {
    let d = tempfile::tempdir().unwrap();
    let base = switchable_env(d.path());
    type Tamper = fn(&Path, &Path) -> String;
    let cases: [(&str, Tamper); 5] = [
        ("dot-dot", |env, _| {
            add_path(&lazy_record(env), "../outside/victim");
            lazy_record(env)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        }),
        ("symlinked-dir", |env, outside| {
            std::os::unix::fs::symlink(outside, env.join("lib/evil")).unwrap();
            add_path(&lazy_record(env), "lib/evil/victim");
            lazy_record(env)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        }),
        ("absolute", |env, outside| {
            add_path(&lazy_record(env), s(&outside.join("victim")));
            lazy_record(env)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        }),
        ("listed-twice", |env, _| {
            // A second record of the lazy package (another build), filed under its own name.
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(lazy_record(env)).unwrap()).unwrap();
            v["build"] = "cuda126_nomagma_h0000000_0".into();
            let twice =
                env.join("conda-meta/libtorch-cuda-linalg-2.5.2-cuda126_nomagma_h0000000_0.json");
            std::fs::write(&twice, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
            "installed twice".into()
        }),
        ("build-disagrees-with-file-name", |env, _| {
            let rec = lazy_record(env);
            let mut v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
            v["build"] = "cuda126_nomagma_h0000000_0".into();
            std::fs::write(&rec, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
            rec.file_name().unwrap().to_string_lossy().into_owned()
        }),
    ];
    for (name, tamper) in cases {
        let case = d.path().join(name);
        let (env, outside) = (case.join("env"), case.join("outside"));
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), b"must survive").unwrap();
        cp_a(&base, &env);
        let names = tamper(&env, &outside);
        let (env_before, outside_before) = (snapshot(&env), snapshot(&outside));
        for args in [
            vec!["env", s(&env), "--switch"],
            vec!["env", s(&env), "--json"],
        ] {
            let o = run(&args);
            refused(&o, &names);
            assert!(
                stderr(&o).contains("conda-meta"),
                "{name}: names the record: {}",
                stderr(&o)
            );
            assert_eq!(
                snapshot(&outside),
                outside_before,
                "{name}: nothing outside the environment changed"
            );
            assert_eq!(
                snapshot(&env),
                env_before,
                "{name}: the environment is untouched"
            );
            let left: Vec<String> = std::fs::read_dir(&case)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                left.iter().all(|n| !n.contains("splitpkg")),
                "{name}: no package cache left: {left:?}"
            );
        }
    }
    // The untouched environment still switches (the checks refuse only what they should).
    let o = run(&["env", s(&base), "--switch", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: SwitchReport = typed(&o);
    assert_eq!((r.from.as_str(), r.to.as_str()), ("magma", "nomagma"));
}

// ---------------------------------------------------------------- wheel

/// A copy of the pip-like fixture tree to add hostile files to.
fn pip_tree(d: &Path) -> PathBuf {
    let t = d.join("tree");
    cp_a(&fixture("pip-like"), &t);
    t
}

/// The wheel of `tree` in a directory of its own.
fn wheel_of(tree: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let w = dir.join(WHEEL_NAME);
    make_pip_wheel(tree, &w, "cp311-cp311-linux_x86_64", false);
    w
}

/// Run `wheel`; `outside` (a sentinel directory) and the input stay as they were, and `out` was
/// not created.
fn wheel_refused(input: &Path, out: &Path, outside: &Path, names: &str) {
    let before = snapshot(outside);
    let o = run(&["wheel", s(input), "--out", s(out), "--quiet"]);
    refused(&o, names);
    assert_eq!(snapshot(outside), before, "nothing outside --out changed");
}

#[test]
fn wheel_refuses_a_symlinked_variants_dir_missing_record_members_and_backslash_names() {
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("sentinel"), b"x").unwrap();
    let tree = pip_tree(d.path());
    let good = wheel_of(&tree, &d.path().join("good"));

    // --out/variants is a symlink out of --out: refused before anything is written.
    let out = d.path().join("out-linked");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("variants")).unwrap();
    wheel_refused(&good, &out, &outside, "variants");
    assert!(stderr(&run(&["wheel", s(&good), "--out", s(&out), "-q"])).contains("symlink"));
    assert_eq!(
        snapshot(&out).len(),
        2,
        "only --out and its link: {:?}",
        snapshot(&out)
    );

    // A RECORD row for a file the wheel does not hold: bad input (was exit 3 after --out was made).
    let ghost = d.path().join("ghost");
    std::fs::create_dir(&ghost).unwrap();
    let ghost_whl = ghost.join(WHEEL_NAME);
    rewrite_record(
        &good,
        &ghost_whl,
        "torch/lib/ghost.so,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
    );
    let out = d.path().join("nested/out");
    wheel_refused(&ghost_whl, &out, &outside, "torch-2.5.1.dist-info/RECORD");
    assert!(
        stderr(&run(&["wheel", s(&ghost_whl), "--out", s(&out), "-q"]))
            .contains("torch/lib/ghost.so")
    );
    assert!(
        !d.path().join("nested").exists(),
        "no empty --out (or its parent) left"
    );

    // Backslash member names: Windows installers read them as separators and roots.
    for name in ["torch\\..\\..\\evil.py", "C:\\Windows\\evil.py"] {
        let t = d.path().join("bs-tree");
        let _ = std::fs::remove_dir_all(&t);
        cp_a(&tree, &t);
        std::fs::write(t.join(name), b"import os\n").unwrap();
        let whl = wheel_of(&t, &d.path().join("bs"));
        let out = d.path().join("out-bs");
        wheel_refused(&whl, &out, &outside, &format!("{}:{name}", whl.display()));
        assert!(!out.exists(), "--out not created");
        // The same rule for every reader of the archive.
        refused(&run(&["plan", s(&whl), "--quiet"]), name);
        let ch = d.path().join("ch-bs");
        refused(
            &run(&[
                "pack",
                s(&whl),
                "--out",
                s(&ch),
                "--quiet",
                "--version",
                "1",
            ]),
            name,
        );
        assert!(!ch.exists());
    }
}

/// `src` with `row` added to its RECORD (the members otherwise as they were).
fn rewrite_record(src: &Path, dst: &Path, row: &str) {
    use std::io::{Read, Write};
    let mut z = zip::ZipArchive::new(std::fs::File::open(src).unwrap()).unwrap();
    let mut w = zip::ZipWriter::new(std::fs::File::create(dst).unwrap());
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    for i in 0..z.len() {
        let mut f = z.by_index(i).unwrap();
        let name = f.name().unwrap().to_string();
        let mut data = Vec::new();
        f.read_to_end(&mut data).unwrap();
        if name.ends_with(".dist-info/RECORD") {
            data.extend_from_slice(row.as_bytes());
        }
        w.start_file(name, o).unwrap();
        w.write_all(&data).unwrap();
    }
    w.finish().unwrap();
}

// ---------------------------------------------------------------- channel file names

fn sha(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every `.conda` in a channel → (sha256, inode).
fn packages(ch: &Path) -> std::collections::BTreeMap<String, (String, u64)> {
    walk(ch)
        .into_iter()
        .filter(|(r, _)| r.ends_with(".conda"))
        .map(|(r, p)| (r, (sha(&p), std::fs::metadata(&p).unwrap().ino())))
        .collect()
}

#[test]
fn a_channel_file_name_never_changes_meaning() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let tree = fixture("conda-like");
    let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
    let pack = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "pack",
            s(input),
            "--out",
            s(&ch),
            "--quiet",
            "--version",
            "2.5.2",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    assert_eq!(pack(&tree, &[]).status.code(), Some(0));
    let first = packages(&ch);
    // The same pack again: identical bytes, the files are kept as they are (same inode).
    assert_eq!(pack(&tree, &[]).status.code(), Some(0));
    assert_eq!(packages(&ch), first, "an identical re-pack keeps the files");
    // The reported case: another preference changes track_features, so it changes the names.
    let o = pack(&tree, &["--prefer", "nomagma", "--lazy-variant", &nomagma]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let flipped = packages(&ch);
    for (name, (sha, _)) in &flipped {
        if let Some((old, _)) = first.get(name) {
            assert_eq!(old, sha, "{name} changed content under its name");
        }
    }
    let lazy_names = |m: &std::collections::BTreeMap<String, (String, u64)>| -> Vec<String> {
        m.keys()
            .filter(|k| k.contains("libtorch-cuda-linalg-"))
            .cloned()
            .collect()
    };
    assert!(
        lazy_names(&first).iter().all(|n| !flipped.contains_key(n)),
        "{:?} vs {:?}",
        lazy_names(&first),
        lazy_names(&flipped)
    );
    // A different input under the same version and build number: refused, nothing changed.
    let changed = d.path().join("changed");
    cp_a(&tree, &changed);
    std::fs::write(changed.join("lib/python-extra.txt"), b"different content").unwrap();
    let before = snapshot(&ch);
    let o = pack(
        &changed,
        &["--prefer", "nomagma", "--lazy-variant", &nomagma],
    );
    refused(&o, ".conda");
    assert!(
        stderr(&o).contains("different package under this file name"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&ch), before, "the channel is untouched");
    let left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|n| !n.contains("splitpkg-pack")),
        "no work directory left: {left:?}"
    );
}

// ---------------------------------------------------------------- interrupted runs

/// Temporaries of ours in `dir` (not below).
fn temps(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".splitpkg-"))
        .collect()
}

/// Start `args`, wait until `ready` holds (polling), then send `signal`; the process must end by
/// that signal. `false` if it finished before `ready` was seen (the caller's input was too small).
fn interrupt(args: &[&str], signal: i32, ready: impl Fn() -> bool) -> bool {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if ready() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            eprintln!("finished before it could be interrupted: {status:?}");
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    // Ended by the signal, or (when a worker met its removed temporary first) by that error.
    assert!(
        out.status.signal() == Some(signal) || out.status.code() == Some(2),
        "ended by the signal: {:?} {}",
        out.status,
        stderr(&out)
    );
    true
}

/// A wheel big enough to be caught while it is written: the fixture plus 192 MiB of zeros.
fn big_wheel(d: &Path) -> PathBuf {
    let tree = pip_tree(d);
    let f = std::fs::File::create(tree.join("torch/zeros.bin")).unwrap();
    f.set_len(192 << 20).unwrap();
    wheel_of(&tree, &d.join("big"))
}

#[test]
fn interrupted_wheel_leaves_no_temporary_and_the_next_run_sweeps_a_dead_ones() {
    let d = tempfile::tempdir().unwrap();
    let whl = big_wheel(d.path());
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let out = d.path().join(format!("out-{signal}"));
        let caught = interrupt(
            &["wheel", s(&whl), "--out", s(&out), "--quiet"],
            signal,
            || !temps(&out).is_empty(),
        );
        assert!(
            caught,
            "the wheel was written before the signal could be sent"
        );
        assert!(
            !out.exists(),
            "no temporary and no empty --out left: {:?}",
            temps(&out)
        );
    }
    // kill -9 leaves a temporary; the next run into that directory removes it, and never a live
    // process's (this test's own PID stands for one).
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let stale = out.join(format!(
        ".torch-2.5.1+split-cp311-cp311-linux_x86_64.whl.splitpkg-tmp-{}",
        dead_pid()
    ));
    let live = out.join(format!(".other.whl.splitpkg-tmp-{}", std::process::id()));
    std::fs::create_dir_all(out.join("variants")).unwrap();
    let stale_v = out.join(format!("variants/.x.whl.splitpkg-tmp-{}", dead_pid()));
    for f in [&stale, &live, &stale_v] {
        std::fs::write(f, b"partial").unwrap();
    }
    let small = wheel_of(&fixture("pip-like"), &d.path().join("small"));
    let o = run(&["wheel", s(&small), "--out", s(&out), "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !stale.exists() && !stale_v.exists(),
        "the dead run's temporaries are gone"
    );
    assert!(live.exists(), "a live process's temporary stays");
}

#[test]
fn interrupted_pack_leaves_no_work_directory_and_the_next_run_sweeps_a_dead_ones() {
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    cp_a(&fixture("conda-like"), &tree);
    // Sparse: costs no disk here, but pack stages (writes) all of it.
    std::fs::File::create(tree.join("lib/zeros.bin"))
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let parent = d.path().join(format!("p-{signal}"));
        let ch = parent.join("channel");
        let caught = interrupt(
            &[
                "pack",
                s(&tree),
                "--out",
                s(&ch),
                "--quiet",
                "--version",
                "1",
            ],
            signal,
            || !temps(&parent).is_empty(),
        );
        assert!(caught, "pack finished before the signal could be sent");
        assert!(
            !parent.exists(),
            "no work directory and no created parent left: {:?}",
            temps(&parent)
        );
    }
    let parent = d.path().join("p");
    let stale = parent.join(format!(".channel.splitpkg-pack-{}", dead_pid()));
    let live = parent.join(format!(".channel.splitpkg-pack-{}", std::process::id()));
    for dir in [&stale, &live] {
        std::fs::create_dir_all(dir.join("stage/x")).unwrap();
        std::fs::write(dir.join("stage/x/f"), b"partial").unwrap();
    }
    let o = run(&[
        "pack",
        s(&fixture("conda-like")),
        "--out",
        s(&parent.join("channel")),
        "--quiet",
        "--version",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stale.exists(), "the dead pack's work directory is gone");
    assert!(
        live.join("stage/x/f").exists(),
        "a live process's work directory stays"
    );
}
