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
    neutral(&stdout(&o), scratch)
}

/// This run's temporary names (the binary's copy, the fixture and scratch directories), longest
/// first: the binary and the scratch directory may lie under the fixtures' parent.
fn temporary_names(scratch: Option<&Path>) -> Vec<(String, &'static str)> {
    let mut names = vec![
        (s(&crate::common::bin()).to_string(), "[BIN]"),
        (s(fixtures()).to_string(), "[FIXTURES]"),
    ];
    if let Some(d) = scratch {
        names.push((s(d).to_string(), "[SCRATCH]"));
    }
    names.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    names
}

/// `t` with this run's temporary names replaced by neutral ones.
fn neutral(t: &str, scratch: Option<&Path>) -> String {
    temporary_names(scratch)
        .iter()
        .fold(t.to_string(), |t, (from, to)| t.replace(from.as_str(), to))
}

/// `t` with the tool's version and commit as the report's provenance table prints them
/// (`splitpkg 0.1.0 (commit 1a2b3c4d5e6f)`) named neutrally: like the JSON documents' `tool`, they
/// change with every release and commit, not with the page's meaning (a fresh clone's build
/// records its own commit).
fn tool_neutral(t: &str) -> String {
    let (mut out, mut rest) = (String::new(), t);
    while let Some(i) = rest.find("(commit ") {
        out.push_str(&rest[..i + "(commit ".len()]);
        rest = &rest[i + "(commit ".len()..];
        let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
        if hex > 0 {
            out.push_str("[COMMIT]");
        }
        rest = &rest[hex..];
    }
    out.push_str(rest);
    let version = format!("splitpkg {} (commit", env!("CARGO_PKG_VERSION"));
    out.replace(&version, "splitpkg [VERSION] (commit")
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
    pack_example(d.path());
    let ch = d.path().join("channel");
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

// --- one JSON snapshot per document ------------------------------------------------------------

/// `v` with what truly varies between runs and machines named neutrally, so the snapshot holds
/// every other value:
/// - this run's fixture and scratch directories and the binary's path (temporary names);
/// - the tool's version and commit (they change with every release and commit, not with the
///   document's meaning), and a date (present only when the caller sets `SOURCE_DATE_EPOCH`);
/// - a `sha256` of 64 hex digits: it hashes an archive of binaries gcc built here, which differ
///   between toolchains (a value of another form is left as it is, so the snapshot shows it).
///
/// Sizes stay, as in the text snapshots above: they are those of the CI toolchain.
fn redacted(mut v: serde_json::Value, scratch: Option<&Path>) -> String {
    fn walk(v: &mut serde_json::Value, scratch: Option<&Path>) {
        use serde_json::Value;
        match v {
            Value::String(t) => *t = neutral(t, scratch),
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, scratch)),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    let hex64 = x
                        .as_str()
                        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
                    if k == "sha256" && hex64 {
                        *x = Value::from("[SHA256]");
                    } else {
                        walk(x, scratch);
                    }
                }
                if let Some(Value::Object(tool)) = o.get_mut("tool") {
                    for k in ["version", "commit"] {
                        if let Some(x) = tool.get_mut(k) {
                            *x = Value::from(format!("[{}]", k.to_uppercase()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    walk(&mut v, scratch);
    // A document's date is written only under SOURCE_DATE_EPOCH (a caller's build setting).
    if let Some(date) = v.get_mut("date") {
        *date = serde_json::Value::from("[DATE]");
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// Runs splitpkg, which must exit 0; checks its stdout reads as the document type `T` and
/// validates against `schema` (if the document has one), and snapshots it redacted.
fn json_snapshot<T: splitpkg::document::Document>(
    name: &str,
    args: &[&str],
    schema: Option<&str>,
    scratch: Option<&Path>,
) -> T {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        crate::common::stderr(&o)
    );
    let doc = crate::common::typed::<T>(&o);
    let v = crate::common::json(&o);
    if let Some(schema) = schema {
        crate::common::assert_valid(schema, &v);
    }
    snapshot(name, &redacted(v, scratch));
    doc
}

/// A file a command wrote, read as the document type `T` (through its own reader) and snapshot.
fn file_snapshot<T: splitpkg::document::Document>(name: &str, file: &Path, scratch: &Path) -> T {
    let text = std::fs::read_to_string(file).unwrap();
    let doc = T::from_str(&text, s(file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    snapshot(name, &redacted(v, Some(scratch)));
    doc
}

/// The example packed with both variants into `DIR/channel` (`pack --json`'s stdout returned).
fn pack_example(d: &Path) -> std::process::Output {
    let nomagma = format!(
        "nomagma={}",
        fixture("conda-nomagma/lib/libtorch_cuda_linalg.so").display()
    );
    let ch = d.join("channel");
    let o = run(&[
        "pack",
        s(&fixture("conda-like")),
        "--version",
        "1.0",
        "--lazy-variant",
        &nomagma,
        "--out",
        s(&ch),
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::common::stderr(&o));
    o
}

#[test]
fn plan_and_inspect_json_of_the_example() {
    use splitpkg::analysis::plan::Plan;
    let conda_like = fixture("conda-like");
    let plan: Plan = json_snapshot(
        "plan-json-example",
        &["plan", s(&conda_like), "--json"],
        Some("docs/plan.schema.json"),
        None,
    );
    assert_eq!(plan.verdict, splitpkg::analysis::verdict::Verdict::Confined);
    let ins: splitpkg::analysis::document::InspectReport = json_snapshot(
        "inspect-json-example",
        &["inspect", s(&conda_like), "--json"],
        Some("docs/inspect.schema.json"),
        None,
    );
    assert_eq!(ins.files.len(), plan.input.elf_files);
}

/// pack, the channel's splitpkg.json, solve with --install, env on both installed variants and
/// env --switch: the channel's documents in the order a user meets them.
#[test]
fn channel_documents_of_the_example() {
    use splitpkg::channel::{document, info::ChannelInfo};
    let d = tempfile::tempdir().unwrap();
    let scratch = Some(d.path());
    let o = pack_example(d.path());
    let pack = crate::common::typed::<document::PackReport>(&o);
    assert_eq!(pack.core, "libtorch");
    crate::common::assert_valid("docs/pack.schema.json", &crate::common::json(&o));
    snapshot(
        "pack-json-example",
        &redacted(crate::common::json(&o), scratch),
    );
    let ch = d.path().join("channel");
    let info: ChannelInfo =
        file_snapshot("splitpkg-json-example", &ch.join("splitpkg.json"), d.path());
    assert_eq!(info.variants, ["magma", "nomagma"]);
    let envs = d.path().join("envs");
    let args = ["solve", s(&ch), "--install", s(&envs), "-q", "--json"];
    json_snapshot::<document::SolveReport>(
        "solve-json-example",
        &args,
        Some("docs/solve.schema.json"),
        scratch,
    );
    for variant in ["default", "slim"] {
        let prefix = envs.join(variant);
        json_snapshot::<document::EnvReport>(
            &format!("env-json-example-{variant}"),
            &["env", s(&prefix), "--json"],
            Some("docs/env.schema.json"),
            scratch,
        );
    }
    let default = envs.join("default");
    let args = ["env", s(&default), "--switch", "-q", "--json"];
    let switched: document::SwitchReport = json_snapshot(
        "env-switch-json-example",
        &args,
        Some("docs/env-switch.schema.json"),
        scratch,
    );
    assert_eq!(switched.to, "nomagma");
}

/// The fixture torch split into wheels, and the index of those wheels.
#[test]
fn wheel_and_index_json_of_the_fixture_torch() {
    let d = tempfile::tempdir().unwrap();
    let (wheels, o) = crate::common::split_fixture_torch(d.path());
    crate::common::typed::<splitpkg::wheel::document::WheelReport>(&o);
    crate::common::assert_valid("docs/wheel.schema.json", &crate::common::json(&o));
    snapshot(
        "wheel-json-fixture-torch",
        &redacted(crate::common::json(&o), Some(d.path())),
    );
    let index = d.path().join("index");
    json_snapshot::<splitpkg::index::IndexReport>(
        "index-json-fixture-torch",
        &["index", "--quiet", "--json", "--out", s(&index), s(&wheels)],
        Some("docs/index.schema.json"),
        Some(d.path()),
    );
}

/// fatbin on a gcc-built library with a synthetic torch-shaped `.nv_fatbin` (the example has no
/// device code: its document would be all zeros).
#[test]
fn fatbin_json_of_a_library_with_device_code() {
    let d = tempfile::tempdir().unwrap();
    let sec = splitpkg::fatbin::synth::torch_like(2, &[80, 90]);
    crate::common::embed_fatbin(
        &fixture("missing/lib/libtorch_cuda.so"),
        &sec,
        &d.path().join("lib/libtorch_cuda.so"),
    );
    json_snapshot::<splitpkg::fatbin::scan::FatbinReport>(
        "fatbin-json-synthetic",
        &["fatbin", "--json", "--quiet", "--entries", s(d.path())],
        Some("docs/fatbin.schema.json"),
        Some(d.path()),
    );
}

/// smoke needs a GPU to run; the fast tier has its replay: the synthetic stock recording, cut to
/// one op and dtype (the whole recording is ~300 KB of cases of the same form), judged again.
#[test]
fn smoke_replay_json_of_the_synthetic_recording() {
    let d = tempfile::tempdir().unwrap();
    let full = std::fs::read_to_string(repo().join("tests/data/smoke-synthetic-ok.json")).unwrap();
    let mut rec: serde_json::Value = serde_json::from_str(&full).unwrap();
    for v in rec["variants"].as_array_mut().unwrap() {
        v["cases"].as_array_mut().unwrap().retain(|c| {
            c["id"]
                .as_str()
                .unwrap()
                .starts_with("cholesky_solve/32x32,k=2/float32/")
        });
    }
    let cut = d.path().join("recording.json");
    std::fs::write(&cut, serde_json::to_vec(&rec).unwrap()).unwrap();
    let rep: splitpkg::smoke::document::SmokeReport = json_snapshot(
        "smoke-replay-json-synthetic",
        &["smoke", "--replay", s(&cut), "--json"],
        Some("docs/smoke.schema.json"),
        Some(d.path()),
    );
    assert!(rep.summary.ok);
}

/// The loader contract `emit` writes beside each recipe, and the Markdown page `report` makes of
/// the example's plan and pack documents (its inputs, as the commands wrote them in this run).
#[test]
fn contract_and_report_of_the_example() {
    use splitpkg::analysis::contract::ContractFile;
    let d = tempfile::tempdir().unwrap();
    let conda_like = fixture("conda-like");
    let rec = d.path().join("recipe");
    text(
        &[
            "emit",
            s(&conda_like),
            "--version",
            "1.0",
            "--out",
            s(&rec),
            "-q",
        ],
        0,
        Some(d.path()),
    );
    let contract: ContractFile = file_snapshot(
        "contract-json-example",
        &rec.join("rattler-build/contract.json"),
        d.path(),
    );
    // The two recipes' contracts are one document: one snapshot stands for both.
    let conda_build = std::fs::read(rec.join("conda-build/contract.json")).unwrap();
    assert_eq!(
        conda_build,
        std::fs::read(rec.join("rattler-build/contract.json")).unwrap()
    );
    assert_eq!(contract.loader_lookups, ["linalg_entry"]);
    // verify-variant's report: the nomagma fixture checked against that contract.
    let nomagma = fixture("conda-nomagma").join("lib/libtorch_cuda_linalg.so");
    let contract_file = rec.join("rattler-build/contract.json");
    let verify: splitpkg::recipe::verify::VerifyReport = json_snapshot(
        "verify-json-example",
        &[
            "verify-variant",
            s(&nomagma),
            "--variant",
            "nomagma",
            "--contract",
            s(&contract_file),
            "--json",
        ],
        Some("docs/verify.schema.json"),
        Some(d.path()),
    );
    assert!(verify.pass && !verify.with_payload, "{verify:#?}");
    let plan = d.path().join("plan.json");
    text(
        &["plan", s(&conda_like), "--json", "--out", s(&plan)],
        0,
        Some(d.path()),
    );
    let pack = d.path().join("pack.json");
    std::fs::write(&pack, pack_example(d.path()).stdout).unwrap();
    let page = d.path().join("report.md");
    let args = [
        "report",
        "--plan",
        s(&plan),
        "--pack",
        s(&pack),
        "--format",
        "md",
        "--out",
        s(&page),
    ];
    text(&args, 0, Some(d.path()));
    let md = std::fs::read_to_string(&page).unwrap();
    snapshot(
        "report-md-example",
        &tool_neutral(&neutral(&md, Some(d.path()))),
    );
}
