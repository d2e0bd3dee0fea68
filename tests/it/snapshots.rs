//! The human text of `plan`, `inspect` and `env` on the bundled example, as insta snapshots
//! (`tests/it/snapshots/`), and the README's sample output checked against the same run, so a
//! change to the text is reviewed (`cargo insta review`, or `INSTA_UPDATE=always`) and a README
//! example cannot go stale silently.
//!
//! Paths of this run's fixture directory are replaced by `[FIXTURES]`: the text is otherwise
//! deterministic (no times, no temporary names). Sizes are those of the fixtures gcc builds on
//! CI's Debian 12 (gcc 12.2, binutils 2.40); another toolchain may need `cargo insta review`.

use std::path::Path;

use crate::common::{fixture, fixtures, repo, run, s, stdout};

/// Runs splitpkg and returns its stdout with this run's directories named neutrally; the exit
/// code must be `code`.
fn text(args: &[&str], code: i32, scratch: Option<&Path>) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{args:?}: {}",
        crate::common::stderr(&o)
    );
    let mut t = stdout(&o).replace(s(fixtures()), "[FIXTURES]");
    if let Some(d) = scratch {
        t = t.replace(s(d), "[SCRATCH]");
    }
    t
}

fn snapshot(name: &str, value: &str) {
    insta::with_settings!({ snapshot_path => repo().join("tests/it/snapshots"), prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, value);
    });
}

#[test]
fn plan_text_of_the_example() {
    let t = text(&["plan", s(&fixture("conda-like"))], 0, None);
    snapshot("plan-example", &t);
}

#[test]
fn inspect_text_of_the_example() {
    let t = text(&["inspect", s(&fixture("conda-like"))], 0, None);
    snapshot("inspect-example", &t);
}

#[test]
fn env_text_of_an_installed_example() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let nomagma = format!(
        "nomagma={}",
        fixture("conda-nomagma/lib/libtorch_cuda_linalg.so").display()
    );
    let conda_like = fixture("conda-like");
    let pack = [
        "pack",
        s(&conda_like),
        "--version",
        "1.0",
        "--lazy-variant",
        &nomagma,
        "--out",
        s(&ch),
        "-q",
    ];
    text(&pack, 0, Some(d.path()));
    let envs = d.path().join("envs");
    text(
        &["solve", s(&ch), "--install", s(&envs), "-q"],
        0,
        Some(d.path()),
    );
    let default = envs.join("default");
    snapshot(
        "env-example-default",
        &text(&["env", s(&default)], 0, Some(d.path())),
    );
    let slim = envs.join("slim");
    snapshot(
        "env-example-slim",
        &text(&["env", s(&slim)], 0, Some(d.path())),
    );
}

/// The README's quick start shows `plan` on the example (abridged with `...`): every line it
/// shows is in the real output, in the same order, consecutive except where `...` stands for
/// lines left out (the block may start anywhere in the output).
#[test]
fn readme_quick_start_is_the_real_output() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("bash fixtures/example")
        .expect("README quick start");
    let block = readme[start..]
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the quick start's sample output");
    let real = text(&["plan", s(&fixture("conda-like"))], 0, None);
    let real: Vec<&str> = real.lines().collect();
    let mut at = 0;
    let mut skip = true;
    for line in block.lines() {
        if line == "..." {
            skip = true;
            continue;
        }
        let found = real[at..]
            .iter()
            .position(|r| r.trim_end() == line.trim_end());
        match found {
            Some(i) if skip || i == 0 => at += i + 1,
            _ => panic!(
                "README.md's quick start shows a line `plan` does not print there: {line:?}\nreal output:\n{}",
                real.join("\n")
            ),
        }
        skip = false;
    }
}

/// `verify-variant --help` offers the contract or the plan, calling neither required alone, and
/// every option has a line of help (`--json` had none).
#[test]
fn verify_variant_help_offers_contract_or_plan() {
    let help = text(&["verify-variant", "--help"], 0, None);
    assert!(help.contains("<--contract <FILE>|--plan <FILE>>"), "{help}");
    let options: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    for (i, line) in options.iter().enumerate() {
        let opt = line.trim_start();
        // An option starts at clap's option indent (2 or 6 spaces); a wrapped line of help that
        // happens to start with `--plan)` is deeper.
        let indent = line.len() - opt.len();
        if indent <= 6 && (opt.starts_with("--") || opt.starts_with("-h")) {
            let same_line = opt
                .split_once("  ")
                .is_some_and(|(_, h)| !h.trim().is_empty());
            let next_line = options
                .get(i + 1)
                .is_some_and(|n| !n.trim_start().starts_with('-'));
            assert!(same_line || next_line, "{line:?} has no help:\n{help}");
        }
    }
    let json = options
        .iter()
        .position(|l| l.trim_start().starts_with("--json"))
        .unwrap();
    assert!(
        options[json].contains("JSON") || options[json + 1].contains("JSON"),
        "{help}"
    );
    // Either source works; neither is required alone; both at once are refused.
    let o = run(&["verify-variant", "x.so", "--variant", "nomagma"]);
    assert_eq!(o.status.code(), Some(2));
    let err = crate::common::stderr(&o);
    assert!(err.contains("--contract <FILE>|--plan <FILE>"), "{err}");
    let o = run(&[
        "verify-variant",
        "x.so",
        "--variant",
        "nomagma",
        "--contract",
        "c.json",
        "--plan",
        "p.json",
    ]);
    assert_eq!(o.status.code(), Some(2));
}
