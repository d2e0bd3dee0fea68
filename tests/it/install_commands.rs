//! Every install command `wheel` prints, run exactly as printed (with only a dry run added) by
//! real pip and uv into fresh venvs, with the public package index reachable as it is for users
//! (issue 53): torch must resolve to the split's core and the lazy distribution to the chosen
//! variant. `--find-links` adds the directory to the index, it does not replace it, so an
//! unpinned `torch` resolves to the newest public torch; the inputs here (the fixture's 2.5.1 and
//! the real 2.11.0) are older than the newest torch published, so a command that is not pinned
//! cannot pass by luck, and each test shows that with the unpinned command first.

use crate::common::*;

use std::collections::BTreeMap;
use std::path::Path;

use splitpkg::wheel::document::{WheelLayout, WheelReport, WrittenWheel};

/// What an installer chose: distribution name → (version, file name of the chosen wheel).
pub(crate) type Chosen = BTreeMap<String, (String, String)>;

/// Run `printed` (a `pip install …` or `uv pip install …` line, as `wheel` printed it) through
/// `sh`, with the installer named by its path in `tools`, a dry run into a fresh venv, and no
/// installer settings from the environment; what it would install, by distribution.
pub(crate) fn resolve_as_printed(tools: &Path, printed: &str, scratch: &Path) -> Chosen {
    let venv = Venv::new(scratch);
    let python = shell(&venv.python);
    let (run, uv) = if let Some(rest) = printed.strip_prefix("uv pip install ") {
        let uv = shell(&tools.join("bin/uv"));
        (
            format!("{uv} pip install --dry-run -v --python {python} {rest}"),
            true,
        )
    } else if let Some(rest) = printed.strip_prefix("pip install ") {
        let report = shell(&scratch.join("report.json"));
        let pip = shell(&tools.join("bin/python"));
        (
            format!(
                "{pip} -m pip --disable-pip-version-check --python {python} install --dry-run \
                 --quiet --report {report} {rest}"
            ),
            false,
        )
    } else {
        panic!("not an install command: {printed}");
    };
    let o = sh_without_installer_env(&run).output().unwrap();
    assert!(o.status.success(), "{run}: {}", stderr(&o));
    if uv {
        uv_selections(&stderr(&o))
    } else {
        pip_report(&scratch.join("report.json"))
    }
}

pub(crate) fn shell(p: &Path) -> String {
    splitpkg::sanitize::shell_word(&p.display().to_string())
}

/// uv's dry run at `-v` logs each choice as `Selecting: NAME==VERSION [compatible] (FILE)`; the
/// last one for a name is the one it keeps.
fn uv_selections(log: &str) -> Chosen {
    let mut chosen = Chosen::new();
    for line in log.lines() {
        let Some(rest) = line.split("Selecting: ").nth(1) else {
            continue;
        };
        let (req, file) = rest.split_once(' ').unwrap_or((rest, ""));
        let Some((name, version)) = req.split_once("==") else {
            continue;
        };
        let file = file
            .rsplit_once('(')
            .map(|(_, f)| f.trim_end_matches(')'))
            .unwrap_or("");
        chosen.insert(name.into(), (version.into(), file.into()));
    }
    chosen
}

/// pip's `--report` (installation report format 1): each item's name, version and file.
fn pip_report(path: &Path) -> Chosen {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    r["install"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let url = i["download_info"]["url"].as_str().unwrap();
            let file = url.rsplit('/').next().unwrap().replace("%2B", "+");
            (
                splitpkg::input::pip::normalize(i["metadata"]["name"].as_str().unwrap()),
                (i["metadata"]["version"].as_str().unwrap().into(), file),
            )
        })
        .collect()
}

/// `chosen` has torch as the split core of `version` and the lazy distribution from `lazy_file`.
pub(crate) fn assert_split(chosen: &Chosen, version: &str, lazy_file: &str, what: &str) {
    let torch = &chosen["torch"];
    assert_eq!(torch.0, format!("{version}+split"), "{what}: {chosen:?}");
    assert!(
        torch.1.starts_with(&format!("torch-{version}+split-")),
        "{what}: {chosen:?}"
    );
    // A command that names the lazy wheel's file installs that file; uv logs no choice for a
    // requirement given as a path, so it may be absent from the selections.
    let lazy = chosen.get("torch-cuda-linalg").map(|c| c.1.as_str());
    let named = what.contains(lazy_file);
    assert!(
        lazy == Some(lazy_file) || (lazy.is_none() && named),
        "{what}: lazy {lazy:?}, expected {lazy_file}: {chosen:?}"
    );
}

/// The file name of the report's wheel in `list` that is `variant` in `layout`.
fn file_of(list: &[WrittenWheel], layout: WheelLayout, variant: Option<&str>) -> String {
    let w = list
        .iter()
        .find(|w| w.layout == layout && w.variant.as_deref() == variant)
        .unwrap_or_else(|| panic!("no {layout:?} {variant:?} wheel in {list:?}"));
    w.file.rsplit('/').next().unwrap().to_string()
}

/// The fixture split with both variants: the default and the other variant's commands of both
/// layouts, with pip and uv.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip and uv with the public index: cargo test --release --features full-tests"
)]
fn every_printed_wheel_command_installs_the_split_with_the_public_index() {
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let (out, o) = split_fixture_torch(d.path());
    let r: WheelReport = typed(&o);
    // The control: the unpinned command a user would guess gets a public torch, not the split.
    let unpinned = format!("pip install --find-links {} torch", shell(&out));
    let chosen = resolve_as_printed(&tools, &unpinned, &d.path().join("unpinned"));
    assert_ne!(chosen["torch"].0, "2.5.1+split", "{chosen:?}");
    let (c, v) = (&r.commands, &r.variants);
    let magma = file_of(&r.lazy, WheelLayout::LocalLabel, Some("magma"));
    let nomagma = file_of(&r.lazy, WheelLayout::LocalLabel, Some("nomagma"));
    let variant_magma = file_of(&v.wheels, WheelLayout::Variant, Some("magma"));
    let variant_nomagma = file_of(&v.wheels, WheelLayout::Variant, Some("nomagma"));
    let fallback = file_of(&v.wheels, WheelLayout::PlainFallback, Some("magma"));
    for (i, (printed, lazy)) in [
        (c.default.as_str(), &magma),
        (c.uv_default.as_str(), &magma),
        (c.other.as_deref().unwrap(), &nomagma),
        (c.uv_other.as_deref().unwrap(), &nomagma),
        (v.uv_default.as_str(), &variant_magma),
        (v.uv_other.as_deref().unwrap(), &variant_nomagma),
        (v.pip_default.as_str(), &fallback),
    ]
    .into_iter()
    .enumerate()
    {
        let chosen = resolve_as_printed(&tools, printed, &d.path().join(format!("v{i}")));
        assert_split(&chosen, "2.5.1", lazy, printed);
    }
}

/// The real torch 2.11 CUDA wheel (the public index has 2.15): the default commands of both
/// layouts resolve to the split, with torch's CUDA dependencies from the public index.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, the real torch 2.11 wheel, pip and uv with the public index: cargo test --release --features full-tests"
)]
fn torch_2_11_printed_commands_install_the_split_with_the_public_index() {
    let (whl, _) = corpus("torch-2.11.0-cu130", false);
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("wheels");
    let o = run(&["wheel", s(&whl), "--out", s(&out), "--json", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: WheelReport = typed(&o);
    let unpinned = format!("uv pip install --find-links {} torch", shell(&out));
    let chosen = resolve_as_printed(&tools, &unpinned, &d.path().join("unpinned"));
    assert_ne!(chosen["torch"].0, "2.11.0+split", "{chosen:?}");
    let (c, v) = (&r.commands, &r.variants);
    let magma = file_of(&r.lazy, WheelLayout::LocalLabel, Some("magma"));
    let variant_magma = file_of(&v.wheels, WheelLayout::Variant, Some("magma"));
    let fallback = file_of(&v.wheels, WheelLayout::PlainFallback, Some("magma"));
    for (i, (printed, lazy)) in [
        (c.default.as_str(), &magma),
        (c.uv_default.as_str(), &magma),
        (v.uv_default.as_str(), &variant_magma),
        (v.pip_default.as_str(), &fallback),
    ]
    .into_iter()
    .enumerate()
    {
        let chosen = resolve_as_printed(&tools, printed, &d.path().join(format!("v{i}")));
        assert_split(&chosen, "2.11.0", lazy, printed);
        // torch's own dependencies came from the public index.
        assert!(
            chosen.keys().any(|k| k.starts_with("nvidia-")),
            "{printed}: {chosen:?}"
        );
    }
}

/// Every install command the README and `docs/` show in a code block (the lines users copy) is
/// pinned the way `wheel` and `index` print theirs: with the public index reachable, an
/// unpinned `torch` from a `--find-links` directory or an added index resolves to the newest
/// public torch (issue 53). So each names `torch==VERSION+split` and pins every other
/// requirement with `==`, and names where the split comes from (`--find-links`, `--index`,
/// `--extra-index-url`, or uv's `UV_INDEX`). The printed forms themselves are run as printed
/// against the public index by the tests above and in tests/it/index.rs.
#[test]
fn documented_install_commands_are_pinned_to_the_split() {
    let mut docs = vec![repo().join("README.md")];
    for dir in ["docs", "docs/commands"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                docs.push(p);
            }
        }
    }
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            let command = line.split(" #").next().unwrap().trim();
            let words: Vec<&str> = command.split_whitespace().collect();
            // A command line: environment assignments, then `pip install` or `uv pip install`.
            let verb = words.iter().skip_while(|w| w.contains('=')).take(3);
            let verb: Vec<&str> = verb.copied().collect();
            let installs =
                verb.starts_with(&["pip", "install"]) || verb == ["uv", "pip", "install"];
            let torch = words.iter().any(|w| w.starts_with("torch"));
            if !in_code || !installs || !torch {
                continue;
            }
            let at = format!("{}:{}: {command}", doc.display(), n + 1);
            let from = ["--find-links", "--index", "--extra-index-url"];
            assert!(
                words.iter().any(|w| from.contains(w)) || command.contains("UV_INDEX="),
                "{at}: says nowhere where the split comes from"
            );
            let after = words.iter().position(|w| *w == "install").unwrap();
            let mut skip_value = false;
            for w in &words[after + 1..] {
                if std::mem::take(&mut skip_value) {
                    continue;
                }
                if w.starts_with("--") {
                    skip_value = !w.contains('=') && *w != "--no-deps";
                    continue;
                }
                assert!(w.contains("=="), "{at}: {w} is not pinned");
                if w.starts_with("torch==") {
                    assert!(w.contains("+split"), "{at}: {w} is not the split core");
                }
            }
            checked += 1;
        }
    }
    // The README's walkthrough and docs/wheel.md's index section hold at least these.
    assert!(
        checked >= 8,
        "only {checked} documented install commands found"
    );
}
