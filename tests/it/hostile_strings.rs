//! Hostile strings, hangs and unbounded reads (issue 23, docs/security.md): names, versions, tags
//! and marker values from an input that attack headers, shells and terminals are refused; FIFOs,
//! devices and oversized files are refused without blocking; clap's errors are one line. Every
//! refusal: exit 2, one line on stderr naming the file, no raw control character on stdout or
//! stderr, nothing written.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use splitpkg::wheel::document::WheelReport;

const WHEEL_NAME: &str = "torch-2.5.1-cp311-cp311-linux_x86_64.whl";
const METADATA: &str = "torch-2.5.1.dist-info/METADATA";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Run splitpkg, killed after 10 min: a regression that blocks on a FIFO (forever) fails instead of
/// hanging. A hang guard, not a speed bound: each run takes well under a second, so only a block,
/// never a loaded machine, reaches it.
fn run_bounded(args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("SPLITPKG_TRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run splitpkg");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "splitpkg {args:?} still running after 10 min (blocked?); stderr: {}",
                stderr(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// No raw control character (other than the newline ending a line) reaches the terminal.
fn assert_inert(o: &Output) {
    for (what, text) in [("stdout", stdout(o)), ("stderr", stderr(o))] {
        let raw: Vec<char> = text
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(
            raw.is_empty(),
            "raw control characters {raw:?} on {what}: {text:?}"
        );
    }
}

/// The refusal contract: exit 2, one line naming `names`, saying `says`, nothing on stdout.
fn refused(o: &Output, names: &str, says: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("splitpkg: error: "), "{err}");
    assert!(err.contains(names), "should name {names:?}: {err}");
    assert!(err.contains(says), "should say {says:?}: {err}");
    assert!(o.stdout.is_empty(), "{}", stdout(o));
    assert_inert(o);
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

fn copy_tree(from: &Path, to: &Path) {
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

/// The pip-like fixture as a wheel whose METADATA is `metadata`, named `name`.
fn wheel_with_metadata(d: &Path, metadata: &[u8], name: &str) -> PathBuf {
    let tree = d.join(format!("tree-{}", d.read_dir().unwrap().count()));
    copy_tree(&fixture("pip-like"), &tree);
    std::fs::write(tree.join(METADATA), metadata).unwrap();
    let w = d.join(name);
    make_pip_wheel(&tree, &w, "cp311-cp311-linux_x86_64", false);
    w
}

/// No file named PWNED* anywhere a command in a name could have run.
fn nothing_ran(dirs: &[&Path]) {
    for d in dirs.iter().copied().chain([repo().as_path()]) {
        for n in ["PWNED", "PWNED2"] {
            assert!(
                !d.join(n).exists(),
                "a name ran as a command in {}",
                d.display()
            );
        }
    }
}

#[test]
fn metadata_names_and_versions_that_attack_headers_shells_and_terminals_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 6] = [
        // Python's email parser reads the CR as a line break: a second header, Requires-Dist.
        ("Name", "torch\rRequires-Dist: evil", "\\r"),
        ("Name", "torch;touch PWNED", "not a distribution name"),
        (
            "Name",
            "torch$(touch${IFS}PWNED)",
            "not a distribution name",
        ),
        ("Name", "torch\x1b[31mred\x1b]0;title\x07", "\\u{1b}"),
        ("Version", "2.5.1;touch PWNED", "not a version"),
        ("Version", "2.5.1\x00", "\\u{0}"),
    ];
    for (i, (field, value, says)) in cases.iter().enumerate() {
        let (name, version) = if *field == "Name" {
            (*value, "2.5.1")
        } else {
            ("torch", *value)
        };
        let meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n");
        let case = d.path().join(format!("case{i}"));
        std::fs::create_dir(&case).unwrap();
        let whl = wheel_with_metadata(&case, meta.as_bytes(), WHEEL_NAME);
        let out = case.join("out");
        let o = run_bounded(&["wheel", s(&whl), "--out", s(&out), "--quiet"]);
        refused(&o, &format!("{WHEEL_NAME}:{METADATA}"), says);
        assert!(stderr(&o).contains(&format!("{field}:")), "{}", stderr(&o));
        assert!(!out.exists(), "nothing written for {value:?}");
        // `plan` reads the same METADATA and refuses it the same way.
        let plan_out = case.join("plan.json");
        let o = run_bounded(&["plan", s(&whl), "--json", "--quiet", "--out", s(&plan_out)]);
        refused(&o, METADATA, says);
        assert!(!plan_out.exists());
        nothing_ran(&[&case]);
    }
    // A header line with a CR elsewhere (not the Name) would be copied into the core wheel's METADATA.
    let case = d.path().join("header");
    std::fs::create_dir(&case).unwrap();
    let whl = wheel_with_metadata(
        &case,
        b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\nSummary: x\rRequires-Dist: evil\n\n",
        WHEEL_NAME,
    );
    let out = case.join("out");
    refused(
        &run_bounded(&["wheel", s(&whl), "--out", s(&out), "--quiet"]),
        METADATA,
        "control character \\r",
    );
    assert!(!out.exists());
}

#[test]
fn wheel_tags_with_shell_characters_never_name_an_output() {
    let d = tempfile::tempdir().unwrap();
    let meta = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n\n";
    for (i, name) in [
        "torch-2.5.1-cp311-cp311-linux_x86_64;touch PWNED.whl",
        "torch-2.5.1-cp311-$(touch${IFS}PWNED)-linux_x86_64.whl",
    ]
    .iter()
    .enumerate()
    {
        let case = d.path().join(format!("case{i}"));
        std::fs::create_dir(&case).unwrap();
        let whl = wheel_with_metadata(&case, meta, name);
        let out = case.join("out");
        let o = run_bounded(&["wheel", s(&whl), "--out", s(&out), "--quiet"]);
        refused(&o, name, "not a wheel tag (PEP 425)");
        assert!(!out.exists(), "nothing written for {name}");
        nothing_ran(&[&case]);
    }
    // The printed commands quote the user's own --out for the shell.
    let case = d.path().join("ok");
    std::fs::create_dir(&case).unwrap();
    let whl = wheel_with_metadata(&case, meta, WHEEL_NAME);
    let out = case.join("wheels $(touch PWNED)");
    let o = run_bounded(&["wheel", s(&whl), "--out", s(&out), "--quiet", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: WheelReport = typed(&o);
    let cmd = r.commands.default.as_str();
    // Pinned to the split (issue 53): an unpinned `torch` resolves to the newest public torch.
    assert_eq!(
        cmd,
        format!(
            "pip install --find-links '{}' torch==2.5.1+split torch-cuda-linalg==2.5.1+1.magma",
            out.display()
        )
    );
    // Run as a shell would: the directory is one literal word and nothing runs.
    let said = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\n' {}", &cmd["pip install ".len()..]))
        .output()
        .unwrap();
    assert_eq!(
        stdout(&said),
        format!(
            "--find-links\n{}\ntorch==2.5.1+split\ntorch-cuda-linalg==2.5.1+1.magma\n",
            out.display()
        )
    );
    nothing_ran(&[&case]);
}

/// A pip environment whose lazy library is owned by a lazy wheel with `marker` as its
/// `splitpkg-variant.json`.
fn site_with_marker(d: &Path, marker: &serde_json::Value) -> PathBuf {
    let site = d.join("site-packages");
    copy_tree(&fixture("pip-like"), &site);
    let di = site.join("torch_cuda_linalg-2.5.1+1.magma.dist-info");
    std::fs::create_dir(&di).unwrap();
    std::fs::write(
        di.join("METADATA"),
        "Metadata-Version: 2.1\nName: torch-cuda-linalg\nVersion: 2.5.1+1.magma\n\n",
    )
    .unwrap();
    std::fs::write(di.join("RECORD"), "torch/lib/libtorch_cuda_linalg.so,,\n").unwrap();
    std::fs::write(
        di.join("splitpkg-variant.json"),
        serde_json::to_string_pretty(marker).unwrap(),
    )
    .unwrap();
    site
}

fn marker(install: &str, other_name: &str, other_bytes: u64) -> serde_json::Value {
    serde_json::json!({
        "schema": "splitpkg-wheel-variant", "schema_version": 1,
        "lazy_library": "torch/lib/libtorch_cuda_linalg.so", "variant": "magma", "with_payload": true, "preferred": true,
        "variants": [
            {"name": "magma", "with_payload": true, "library_bytes": 1000, "install": "torch-cuda-linalg==2.5.1+1.magma"},
            {"name": other_name, "with_payload": false, "library_bytes": other_bytes, "install": install},
        ]
    })
}

#[test]
fn variant_markers_that_would_print_commands_or_wrong_sizes_are_refused() {
    let d = tempfile::tempdir().unwrap();
    // A sane marker first: plan prints the switch with its saving and the requirement as one word.
    let case = d.path().join("ok");
    std::fs::create_dir(&case).unwrap();
    let site = site_with_marker(
        &case,
        &marker("torch-cuda-linalg==2.5.1+0.nomagma", "nomagma", 400),
    );
    let o = run_bounded(&["plan", s(&site), "--quiet"]);
    assert!(o.status.code() == Some(0), "{}", stderr(&o));
    // Nothing records where the wheels are: the placeholder form, marked as needing --wheels.
    assert!(
        stdout(&o).contains("switch to nomagma: saves 600 B: needs --wheels DIR_OR_INDEX_URL")
            && stdout(&o)
                .contains("): pip install --find-links DIR torch-cuda-linalg==2.5.1+0.nomagma\n"),
        "{}",
        stdout(&o)
    );
    // A PEP 825 variant wheel's file is uv's to install: pip reads its label as a build tag.
    let case = d.path().join("variant-file");
    std::fs::create_dir(&case).unwrap();
    let file = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl";
    let site = site_with_marker(&case, &marker(file, "nomagma", 400));
    let o = run_bounded(&["plan", s(&site), "--quiet"]);
    assert!(o.status.code() == Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!(
            "): uv pip install --preview-features wheel-variants --find-links DIR DIR/{file}\n"
        )),
        "{}",
        stdout(&o)
    );
    for (i, (install, name, bytes, says)) in [
        (
            "torch-cuda-linalg==1;touch PWNED",
            "nomagma",
            400,
            "not a version",
        ),
        (
            "$(touch PWNED).whl",
            "nomagma",
            400,
            "not a wheel file name",
        ),
        (
            "torch-cuda-linalg==2.5.1+0.nomagma",
            "x\x1b[2J\x07",
            400,
            "\\u{1b}[2J\\u{7}",
        ),
        // u64::MAX printed a negative saving; no library is that large.
        (
            "torch-cuda-linalg==2.5.1+0.nomagma",
            "nomagma",
            u64::MAX,
            "library_bytes 18446744073709551615",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let case = d.path().join(format!("case{i}"));
        std::fs::create_dir(&case).unwrap();
        let site = site_with_marker(&case, &marker(install, name, bytes));
        let out = case.join("plan.txt");
        let o = run_bounded(&["plan", s(&site), "--quiet", "--out", s(&out)]);
        refused(
            &o,
            "torch_cuda_linalg-2.5.1+1.magma.dist-info/splitpkg-variant.json",
            says,
        );
        assert!(!out.exists());
        nothing_ran(&[&case]);
    }
    // And the owner's own METADATA name.
    let case = d.path().join("owner");
    std::fs::create_dir(&case).unwrap();
    let site = site_with_marker(
        &case,
        &marker("torch-cuda-linalg==2.5.1+0.nomagma", "nomagma", 400),
    );
    std::fs::write(
        site.join("torch_cuda_linalg-2.5.1+1.magma.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: torch-cuda-linalg\x1b[8m;id\nVersion: 2.5.1+1.magma\n\n",
    )
    .unwrap();
    refused(
        &run_bounded(&["plan", s(&site), "--quiet"]),
        "torch_cuda_linalg-2.5.1+1.magma.dist-info/METADATA",
        "\\u{1b}[8m",
    );
}

/// A marker of a later version may mean something else by the same fields: `plan` refuses it,
/// naming the file, rather than print switch commands read with version 1's meaning.
#[test]
fn a_variant_marker_of_another_version_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut m = marker("torch-cuda-linalg==2.5.1+0.nomagma", "nomagma", 400);
    m["schema_version"] = 2.into();
    let site = site_with_marker(d.path(), &m);
    let out = d.path().join("plan.txt");
    refused(
        &run_bounded(&["plan", s(&site), "--quiet", "--out", s(&out)]),
        "torch_cuda_linalg-2.5.1+1.magma.dist-info/splitpkg-variant.json",
        "splitpkg-wheel-variant version 2: this splitpkg reads version 1",
    );
    assert!(!out.exists());
}

#[test]
fn control_characters_from_json_values_are_escaped_in_the_one_line_error() {
    let d = tempfile::tempdir().unwrap();
    // A real plan with a value serde quotes back in its error (an unknown verdict).
    let plan = d.path().join("plan.json");
    let o = run(&[
        "plan",
        s(&fixture("conda-like")),
        "--json",
        "--quiet",
        "--out",
        s(&plan),
    ]);
    assert!(o.status.code() == Some(0), "{}", stderr(&o));
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    v["verdict"] = serde_json::json!("\u{0}\u{7}\u{1b}[31mCONFINED\u{1b}]0;x\u{7}\r\nnext line");
    std::fs::write(&plan, serde_json::to_string(&v).unwrap()).unwrap();
    let page = d.path().join("report.html");
    let o = run_bounded(&["report", "--plan", s(&plan), "--out", s(&page)]);
    refused(&o, s(&plan), "\\u{1b}[31mCONFINED");
    assert!(!page.exists());
    let recipes = d.path().join("recipes");
    let o = run_bounded(&["emit", s(&plan), "--out", s(&recipes), "--version", "2.5.1"]);
    refused(&o, s(&plan), "\\u{0}\\u{7}\\u{1b}");
    assert!(!recipes.exists());
}

#[test]
fn build_variants_passes_a_hostile_library_name_to_cmake_as_one_word() {
    let d = tempfile::tempdir().unwrap();
    let plan = d.path().join("plan.json");
    let o = run(&[
        "plan",
        s(&fixture("conda-like")),
        "--json",
        "--quiet",
        "--out",
        s(&plan),
    ]);
    assert!(o.status.code() == Some(0), "{}", stderr(&o));
    // The plan of a tree whose lazy library file is named to run a command.
    let evil = "libtorch_cuda_linalg$(touch${IFS}PWNED)`touch${IFS}PWNED2`;touch${IFS}PWNED.so";
    let text = std::fs::read_to_string(&plan)
        .unwrap()
        .replace("lib/libtorch_cuda_linalg.so", &format!("lib/{evil}"));
    std::fs::write(&plan, text).unwrap();
    let out = d.path().join("recipes");
    let o = run(&[
        "emit",
        s(&plan),
        "--out",
        s(&out),
        "--version",
        "2.5.1",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["rattler-build", "conda-build"] {
        let script = std::fs::read_to_string(out.join(f).join("build-variants.sh")).unwrap();
        let line = script
            .lines()
            .find(|l| l.starts_with("cmake --build \"$BUILD_DIR\" --target"))
            .expect("the target line");
        // The line as bash runs it, with cmake reporting its arguments.
        let work = d.path().join(format!("work-{f}"));
        std::fs::create_dir(&work).unwrap();
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "cmake() {{ printf '%s\\n' \"$@\"; }}; BUILD_DIR=b; {line}"
            ))
            .current_dir(&work)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let target = evil.trim_start_matches("lib").trim_end_matches(".so");
        assert_eq!(
            stdout(&o),
            format!("--build\nb\n--target\n{target}\n"),
            "{line}"
        );
        nothing_ran(&[&work, d.path()]);
    }
}

#[test]
fn fifos_devices_and_oversized_files_are_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    mkfifo(&fifo);
    // --lazy-variant a FIFO.
    let whl = wheel_with_metadata(
        d.path(),
        b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n\n",
        WHEEL_NAME,
    );
    let out = d.path().join("out");
    let o = run_bounded(&[
        "wheel",
        s(&whl),
        "--out",
        s(&out),
        "--quiet",
        "--lazy-variant",
        &format!("nomagma={}", fifo.display()),
    ]);
    refused(&o, s(&fifo), "a FIFO, not a regular file");
    assert!(!out.exists());
    // report --plan: a FIFO, /dev/zero, a symlink to /dev/zero.
    let zero = d.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let page = d.path().join("page.html");
    for (plan, says) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a character device"),
        (zero.as_path(), "a character device"),
    ] {
        let o = run_bounded(&["report", "--plan", s(plan), "--out", s(&page)]);
        refused(&o, s(plan), says);
        assert!(!page.exists());
    }
    // A site-packages input whose dist-info RECORD or METADATA is a FIFO, or METADATA a link to /dev/zero.
    for (file, kind, says) in [
        ("RECORD", "fifo", "a FIFO"),
        ("METADATA", "fifo", "a FIFO"),
        ("METADATA", "zero", "a symlink"),
    ] {
        let case = d.path().join(format!("{file}-{kind}"));
        std::fs::create_dir(&case).unwrap();
        let site = site_with_marker(
            &case,
            &marker("torch-cuda-linalg==2.5.1+0.nomagma", "nomagma", 400),
        );
        // The lazy wheel's dist-info is the one read: its RECORD for the owner check, its METADATA
        // to name the tree (the fixture's torch dist-info has no RECORD, so it is not the largest).
        let target = "torch_cuda_linalg-2.5.1+1.magma.dist-info";
        let p = site.join(target).join(file);
        std::fs::remove_file(&p).ok();
        if kind == "fifo" {
            mkfifo(&p);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        }
        let plan_out = case.join("plan.json");
        let o = run_bounded(&["plan", s(&site), "--json", "--quiet", "--out", s(&plan_out)]);
        refused(&o, &format!("{target}/{file}"), says);
        assert!(!plan_out.exists());
    }
    // A METADATA above the 64 MiB cap for dist-info files: refused, never copied truncated.
    let mut big = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n\n".to_vec();
    big.resize(65 << 20, b'x');
    let case = d.path().join("big");
    std::fs::create_dir(&case).unwrap();
    let whl = wheel_with_metadata(&case, &big, WHEEL_NAME);
    let out = case.join("out");
    let o = run_bounded(&["wheel", s(&whl), "--out", s(&out), "--quiet"]);
    refused(
        &o,
        &format!("{WHEEL_NAME}:{METADATA}"),
        "larger than the 64.0 MiB limit",
    );
    assert!(!out.exists());
}

#[test]
fn command_line_value_errors_are_one_line() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    for (args, says) in [
        (
            vec!["pack", "x", "--out", s(&ch), "--max-unpacked", "x12"],
            "not a size",
        ),
        (
            vec!["pack", "x", "--out", s(&ch), "--max-unpacked", "99999999T"],
            "too large",
        ),
        (
            vec!["pack", "x", "--out", s(&ch), "--max-unpacked", "5Q"],
            "unknown unit",
        ),
        (
            vec!["pack", "x", "--out", s(&ch), "--max-unpacked", "1\x1b[31mG"],
            "\\u{1b}[31m",
        ),
        (vec!["wheel", "x"], "--out <DIR>"),
        (vec!["plan", "x", "--no-such-flag"], "--no-such-flag"),
    ] {
        let o = run_bounded(&args);
        refused(&o, "--", says);
        assert!(stderr(&o).contains("(see --help)"), "{}", stderr(&o));
        assert!(!ch.exists());
    }
    // Help is still clap's, on stdout, exit 0.
    let o = run(&["pack", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).lines().count() > 10);
}
