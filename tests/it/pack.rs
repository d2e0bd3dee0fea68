//! `splitpkg pack`, `solve` and `env`: real .conda packages read back with rattler, a channel
//! indexed with rattler_index, scenarios solved with resolvo and again with py-rattler, both
//! environments installed with rattler's installer and planned, on the gcc fixtures and on the
//! real torch 2.11 wheel.

use crate::common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rattler_conda_types::package::{AboutJson, IndexJson, PathType, PathsJson};
use rattler_conda_types::{MatchSpec, ParseStrictness};
use sha2::Digest;
use splitpkg::analysis::plan::Plan;
use splitpkg::analysis::verdict::Verdict;
use splitpkg::channel::document::{
    EnvReport, InstallEnv, PackReport, PackageRole, Scenario, ScenarioStatus, SolveReport,
    SwitchReport,
};
use splitpkg::channel::info::{ChannelInfo, PackedRole};

const NOMAGMA: &str = "conda-nomagma/lib/libtorch_cuda_linalg.so";
const FEATURE: &str = "libtorch-cuda-linalg-p-0";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn pack(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["pack", s(input), "--out", s(out), "--quiet"];
    args.extend_from_slice(extra);
    run(&args)
}

fn pack_ok(input: &Path, out: &Path, extra: &[&str]) -> PackReport {
    let mut e = extra.to_vec();
    e.push("--json");
    let o = pack(input, out, &e);
    assert_eq!(o.status.code(), Some(0), "pack failed: {}", stderr(&o));
    assert_valid("docs/pack.schema.json", &json(&o));
    typed(&o)
}

/// The fixture's conda-like prefix packed with its nomagma build, as the test scenarios need it.
fn fixture_channel(out: &Path, version: &str, extra: &[&str]) -> PackReport {
    let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
    let mut args = vec![
        "--version",
        version,
        "--build-keys",
        "cuda126",
        "--lazy-variant",
        nomagma.as_str(),
    ];
    args.extend_from_slice(extra);
    pack_ok(&fixture("conda-like"), out, &args)
}

fn sha256(path: &Path) -> String {
    let d = sha2::Sha256::digest(std::fs::read(path).unwrap());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn conda_files(channel: &Path) -> Vec<String> {
    let mut v: Vec<String> = walk(channel)
        .into_iter()
        .map(|(r, _)| r)
        .filter(|r| r.ends_with(".conda"))
        .collect();
    v.sort();
    v
}

/// The split model the CLI uses, computed through the library from the same fixture.
fn model(
    input: &Path,
    version: &str,
    keys: &str,
    prefer: &str,
) -> Vec<splitpkg::recipe::split::PackageModel> {
    let spec = splitpkg::analysis::payload::PayloadSpec::for_dep("magma", &[]);
    let ins =
        splitpkg::analysis::inspect::inspect(input, &spec, &splitpkg::progress::Progress::hidden())
            .unwrap();
    let analysis = splitpkg::analysis::verdict::analyse(&ins, &["libtorch_cuda_linalg.so"]);
    let plan = splitpkg::analysis::plan::make_plan(&ins, &analysis, &["libtorch_cuda_linalg.so"]);
    let options = splitpkg::recipe::split::SplitOptions {
        core_name: "libtorch".into(),
        lazy_name: "libtorch-cuda-linalg".into(),
        version: version.into(),
        build_number: 0,
        prefer: prefer.into(),
        variant_key: "linalg_variant".into(),
        payload_packages: vec!["libmagma".into()],
        payload_version: splitpkg::recipe::split::payload_version(&plan),
        build_keys: keys.into(),
        cuda_floor: None,
        external_depends: Vec::new(),
    };
    splitpkg::recipe::split::Split::from_plan(&plan, options)
        .unwrap()
        .packages()
}

fn index_of(pkg: &Path) -> IndexJson {
    rattler_package_streaming::seek::read_package_file(pkg).unwrap()
}

fn solve(channel: &Path, extra: &[&str]) -> (Output, SolveReport) {
    let mut args = vec!["solve", s(channel), "--json", "--quiet"];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_valid("docs/solve.schema.json", &json(&o));
    let r = typed(&o);
    (o, r)
}

fn one_line_error(o: &Output, code: i32, names: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    let e = stderr(o);
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("splitpkg: error: "), "{e}");
    assert!(e.contains(names), "{e} should name {names}");
}

/// Solve scenarios with py-rattler over the same file:// channel.
fn py_rattler(scenarios: &[serde_json::Value]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenarios.json");
    std::fs::write(&f, serde_json::to_vec(scenarios).unwrap()).unwrap();
    let o = Command::new(python_env())
        .arg(repo().join("tests/py/solve_check.py"))
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "py-rattler: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Our solved sets and py-rattler's, scenario by scenario: the same records, or both unsolvable.
fn cross_check(report: &SolveReport, flipped: Option<&Path>) {
    let vps = &report.virtual_packages;
    let applicable = || {
        report
            .scenarios
            .iter()
            .filter(|s| s.status != ScenarioStatus::NotApplicable)
    };
    let mut asks = Vec::new();
    for sc in applicable() {
        let channel = if sc.id == "e" {
            flipped.unwrap().to_path_buf()
        } else {
            PathBuf::from(&report.channel)
        };
        asks.push(serde_json::json!({"id": sc.id, "channel": channel, "specs": sc.specs, "virtual_packages": vps}));
    }
    // py-rattler's answer is the script's own JSON (tests/py/solve_check.py), not a document.
    let py = py_rattler(&asks);
    assert_eq!(py["rattler_version"], "0.28.0");
    for sc in applicable() {
        let id = sc.id.as_str();
        let theirs = &py["results"][id];
        if sc.solved.is_empty() {
            assert!(
                theirs["unsolvable"].is_string(),
                "({id}) py-rattler solved what resolvo refused: {theirs}"
            );
        } else {
            let ours: Vec<serde_json::Value> = sc
                .solved
                .iter()
                .map(|p| serde_json::json!([p.name, p.version, p.build]))
                .collect();
            assert_eq!(
                theirs["solved"],
                serde_json::Value::Array(ours),
                "({id}) py-rattler disagrees"
            );
        }
    }
}

#[test]
fn packages_carry_the_split_model_and_every_file_exactly_once() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let r = fixture_channel(&ch, "2.5.1", &[]);
    let files = conda_files(&ch);
    the_channel_holds_the_four_packages_and_nothing_else(d.path(), &ch, &files);
    // index.json is Split::packages(), field by field, plus the payload package.
    let models = model(&fixture("conda-like"), "2.5.1", "cuda126", "magma");
    assert_eq!(models.len(), 3);
    for m in &models {
        let f = ch.join(format!(
            "linux-64/{}-{}-{}.conda",
            m.name, m.version, m.build
        ));
        let idx = index_of(&f);
        assert_eq!(idx.name.as_normalized(), m.name);
        assert_eq!(idx.version.to_string(), m.version);
        assert_eq!(idx.build.to_string(), m.build);
        assert_eq!(idx.build_number, m.build_number);
        assert_eq!(idx.depends, m.depends, "{}", m.build);
        assert_eq!(idx.constrains, m.constrains, "{}", m.build);
        assert_eq!(idx.track_features, m.track_features, "{}", m.build);
        assert_eq!(idx.subdir.as_deref(), Some("linux-64"));
        assert!(idx.timestamp.is_none(), "no dates in metadata");
    }
    the_packages_carry_these_exact_relations(&ch, &files);
    // paths.json: every file's sha256 and size match the extracted content; the content is the
    // fixture's; every fixture path is in exactly one of core, magma and libmagma.
    let tree: BTreeMap<String, PathBuf> = walk(&fixture("conda-like")).into_iter().collect();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        for rel in a_package_lists_exactly_its_content(d.path(), &ch, f, &tree) {
            if !f.contains("nomagma") {
                seen.entry(rel).or_default().push(f.clone());
            }
        }
    }
    assert_eq!(
        seen.keys().cloned().collect::<BTreeSet<_>>(),
        tree.keys().cloned().collect::<BTreeSet<_>>(),
        "every fixture path packed"
    );
    for (p, fs) in &seen {
        assert_eq!(fs.len(), 1, "{p} in {fs:?}");
    }
    assert!(
        seen["lib/libmagma.so.2"][0].contains("libmagma-2.8.0"),
        "payload symlinks go with the payload"
    );
    assert!(seen["lib/libmagma_sparse.so"][0].contains("libmagma-2.8.0"));
    the_report_says_the_same(&r, &seen, &ch, &files);
}

/// The four packages, and nothing else in the channel (rattler_index's .tmp/ removed; the lock
/// file stays, see docs/security.md) or next to it (`d` holds only the channel).
fn the_channel_holds_the_four_packages_and_nothing_else(d: &Path, ch: &Path, files: &[String]) {
    assert_eq!(
        files,
        vec![
            "linux-64/libmagma-2.8.0-h50e331b_0.conda",
            "linux-64/libtorch-2.5.1-cuda126_h0df9ae8_0.conda",
            "linux-64/libtorch-cuda-linalg-2.5.1-cuda126_magma_h1e60bb5_0.conda",
            "linux-64/libtorch-cuda-linalg-2.5.1-cuda126_nomagma_ha0eb17e_0.conda",
        ]
    );
    let all: BTreeSet<String> = walk(ch).into_iter().map(|(r, _)| r).collect();
    let expected_extra: BTreeSet<String> = [
        ".splitpkg.lock",
        "linux-64/repodata.json",
        "noarch/repodata.json",
        "splitpkg.json",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(
        all.iter()
            .filter(|f| !f.ends_with(".conda"))
            .cloned()
            .collect::<BTreeSet<_>>(),
        expected_extra
    );
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        1,
        "no work directory left next to the channel"
    );
}

/// The index.json relations of core, magma, nomagma and libmagma (`files` in that channel's
/// sorted order), each a strict match spec.
fn the_packages_carry_these_exact_relations(ch: &Path, files: &[String]) {
    let idx = |f: &str| index_of(&ch.join(f));
    let core = idx(&files[1]);
    let magma = idx(&files[2]);
    let nomagma = idx(&files[3]);
    assert_eq!(core.depends, vec!["libtorch-cuda-linalg ==2.5.1 cuda126_*"]);
    assert_eq!(magma.depends, vec!["libmagma >=2.8.0,<2.9.0a0"]);
    assert_eq!(magma.constrains, vec!["libtorch ==2.5.1 cuda126_*"]);
    assert!(magma.track_features.is_empty());
    assert!(nomagma.depends.is_empty());
    assert_eq!(
        nomagma.constrains,
        vec!["libtorch ==2.5.1 cuda126_*", "libmagma <0.0a0"]
    );
    assert_eq!(nomagma.track_features, vec![FEATURE]);
    assert_eq!(
        magma.build_number, nomagma.build_number,
        "preference by track_features, not build-number offsets"
    );
    let libmagma = idx(&files[0]);
    assert_eq!(
        (libmagma.version.to_string(), libmagma.depends.len()),
        ("2.8.0".to_string(), 0)
    );
    for spec in core
        .depends
        .iter()
        .chain(&magma.depends)
        .chain(&magma.constrains)
        .chain(&nomagma.constrains)
    {
        MatchSpec::from_str(spec, ParseStrictness::Strict)
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
}

/// Package `f` of the channel: paths.json lists exactly its extracted content, each file's sha256,
/// size and content (the fixture's, `tree`) or link target match, and info/ holds no machine paths
/// or dates. Returns the paths it holds.
fn a_package_lists_exactly_its_content(
    d: &Path,
    ch: &Path,
    f: &str,
    tree: &BTreeMap<String, PathBuf>,
) -> Vec<String> {
    let x = tempfile::tempdir().unwrap();
    rattler_package_streaming::fs::extract_conda(&ch.join(f), x.path()).unwrap();
    let paths: PathsJson = rattler_package_streaming::seek::read_package_file(ch.join(f)).unwrap();
    assert_eq!(paths.paths_version, 1);
    let on_disk: BTreeSet<String> = walk(x.path())
        .into_iter()
        .map(|(r, _)| r)
        .filter(|r| !r.starts_with("info/"))
        .collect();
    let listed: BTreeSet<String> = paths
        .paths
        .iter()
        .map(|p| p.relative_path.to_string_lossy().into_owned())
        .collect();
    assert_eq!(on_disk, listed, "{f}: paths.json lists exactly the content");
    let mut held = Vec::new();
    for p in &paths.paths {
        let rel = p.relative_path.to_string_lossy().into_owned();
        let got = x.path().join(&rel);
        let src = &tree[&rel];
        match p.path_type {
            PathType::HardLink => {
                let sha: String = p
                    .sha256
                    .unwrap()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(sha, sha256(&got), "{f}: {rel} sha256");
                assert_eq!(
                    p.size_in_bytes,
                    Some(std::fs::metadata(&got).unwrap().len()),
                    "{f}: {rel} size"
                );
                let expect = if f.contains("nomagma") {
                    sha256(&fixture(NOMAGMA))
                } else {
                    sha256(src)
                };
                assert_eq!(sha, expect, "{f}: {rel} content");
            }
            PathType::SoftLink => {
                assert_eq!(
                    std::fs::read_link(&got).unwrap(),
                    std::fs::read_link(src).unwrap(),
                    "{f}: {rel} link target"
                );
            }
            PathType::Directory => panic!("{f}: directory entry {rel}"),
        }
        held.push(rel);
    }
    // No machine paths or dates in info/.
    for (r, p) in walk(&x.path().join("info")) {
        let text = std::fs::read_to_string(&p).unwrap();
        for bad in [s(fixtures()), s(d), "2025-", "2026-"] {
            assert!(!text.contains(bad), "{f}: info/{r} contains {bad:?}");
        }
    }
    held
}

/// The pack report says what the packages hold (`seen`: path → packages), and splitpkg.json
/// describes the split for solve/env.
fn the_report_says_the_same(
    r: &PackReport,
    seen: &BTreeMap<String, Vec<String>>,
    ch: &Path,
    files: &[String],
) {
    assert_eq!(r.lossless.tree_paths, 10);
    assert_eq!(r.lossless.placed_once, 10);
    assert_eq!(r.paths.len(), 10);
    for (p, fs) in seen {
        assert_eq!(&r.paths[p], &fs[0]);
    }
    assert_eq!(r.record.preferred, "magma");
    assert!(r.record.missing_variants.is_empty());
    assert!(r.standins.is_empty(), "libmagma is real here: no stand-in");
    assert_eq!(r.standins_replaced_by_real, ["libmagma"]);
    assert_eq!(r.represented_bytes, 0);
    let about: AboutJson =
        rattler_package_streaming::seek::read_package_file(ch.join(&files[3])).unwrap();
    assert_eq!(about.extra["splitpkg_variant"], "nomagma");
    assert_eq!(about.extra["splitpkg_preferred"], false);
    // splitpkg.json describes the split for solve/env.
    let info_file = ch.join("splitpkg.json");
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&info_file).unwrap()).unwrap();
    assert_valid("docs/channel.schema.json", &raw);
    let info: ChannelInfo = typed_file(&info_file);
    assert_eq!(info.core, "libtorch");
    assert_eq!(info.lazy, "libtorch-cuda-linalg");
    assert_eq!(info.lazy_library, "libtorch_cuda_linalg.so");
    assert_eq!(info.variants, ["magma", "nomagma"]);
    assert_eq!(info.payload_packages, ["libmagma"]);
    assert_eq!(
        info.packs[0].input, "conda-like",
        "no directories of this machine"
    );
}

#[test]
fn packing_is_reproducible_and_replaces_its_own_files() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    fixture_channel(&a, "2.5.1", &[]);
    fixture_channel(&b, "2.5.1", &["--threads", "1", "--compression-level", "3"]);
    let fa = conda_files(&a);
    assert_eq!(fa, conda_files(&b));
    for f in &fa {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f} differs between two packs"
        );
    }
    assert_eq!(
        std::fs::read(a.join("splitpkg.json")).unwrap(),
        std::fs::read(b.join("splitpkg.json")).unwrap()
    );
    // A higher level changes the bytes (the option reaches the writer) but not the content.
    let c = d.path().join("c");
    fixture_channel(&c, "2.5.1", &["--compression-level", "19"]);
    let core = "linux-64/libtorch-2.5.1-cuda126_h0df9ae8_0.conda";
    assert_ne!(
        std::fs::read(a.join(core)).unwrap(),
        std::fs::read(c.join(core)).unwrap()
    );
    let pa: PathsJson = rattler_package_streaming::seek::read_package_file(a.join(core)).unwrap();
    let pc: PathsJson = rattler_package_streaming::seek::read_package_file(c.join(core)).unwrap();
    assert_eq!(pa, pc);

    // Packing the same version again without the nomagma build replaces that pack: its nomagma
    // package leaves the channel and the index.
    pack_ok(
        &fixture("conda-like"),
        &a,
        &["--version", "2.5.1", "--build-keys", "cuda126"],
    );
    let now = conda_files(&a);
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(!now.iter().any(|f| f.contains("nomagma")));
    let rd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("linux-64/repodata.json")).unwrap())
            .unwrap();
    assert_eq!(rd["packages.conda"].as_object().unwrap().len(), 3);
}

/// Shared bytes are written once: packing a second preference into a channel that holds the same
/// core keeps the core's file (same inode, not compressed again); a copy the channel's index does
/// not vouch for is never kept.
#[test]
fn a_second_pack_keeps_packages_the_channel_holds_with_the_same_content() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("ch");
    fixture_channel(&ch, "2.5.1", &[]);
    let core = ch.join("linux-64/libtorch-2.5.1-cuda126_h0df9ae8_0.conda");
    let before = std::fs::metadata(&core).unwrap();
    let r = fixture_channel(&ch, "2.5.1", &["--prefer", "nomagma"]);
    let after = std::fs::metadata(&core).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec()),
        "the core file is the same file"
    );
    let notes = &r.notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("kept what the channel already held")
                && n.contains("libtorch-2.5.1-cuda126_h0df9ae8_0.conda")),
        "{notes:?}"
    );
    // The kept package is recorded and indexed as if written: same sha256 everywhere.
    let rec = r
        .record
        .packages
        .iter()
        .find(|p| p.name == "libtorch")
        .unwrap();
    assert_eq!(rec.sha256, sha256(&core));
    let rd: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ch.join("linux-64/repodata.json")).unwrap())
            .unwrap();
    assert_eq!(
        rd["packages.conda"]["libtorch-2.5.1-cuda126_h0df9ae8_0.conda"]["sha256"],
        sha256(&core)
    );

    // Bytes that are not what the index lists (same size, one byte changed): not kept, and the
    // pack refuses to put its own package under that name.
    let mut bytes = std::fs::read(&core).unwrap();
    let last = bytes.len() - 30;
    bytes[last] ^= 0xff;
    std::fs::write(&core, &bytes).unwrap();
    let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
    let o = pack(
        &fixture("conda-like"),
        &ch,
        &[
            "--version",
            "2.5.1",
            "--build-keys",
            "cuda126",
            "--lazy-variant",
            &nomagma,
        ],
    );
    one_line_error(
        &o,
        2,
        "already has a different package under this file name",
    );
}

/// `pack` writes `repodata.json` itself from what it knows; `rattler_index` over the same channel
/// writes the same records (its indexing time aside).
#[test]
fn repodata_is_what_rattler_index_writes() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("ch");
    fixture_channel(&ch, "2.5.1", &[]);
    fixture_channel(&ch, "2.5.2", &[]);
    let ours: Vec<String> = ["linux-64", "noarch"]
        .iter()
        .map(|s| std::fs::read_to_string(ch.join(s).join("repodata.json")).unwrap())
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = rattler_index::IndexFsConfig {
        channel: ch.clone(),
        target_platform: None,
        repodata_patch: None,
        write_zst: false,
        write_shards: false,
        repodata_revisions: Vec::new(),
        package_revision_assignment: rattler_index::PackageRevisionAssignment::default(),
        force: true,
        max_parallel: 2,
        multi_progress: None,
    };
    rt.block_on(rattler_index::index_fs(config)).unwrap();
    let timeless = |t: &str| {
        regex::Regex::new(r#""indexed_timestamp":\d+"#)
            .unwrap()
            .replace_all(t, "")
            .into_owned()
    };
    for (sub, ours) in ["linux-64", "noarch"].iter().zip(&ours) {
        let theirs = std::fs::read_to_string(ch.join(sub).join("repodata.json")).unwrap();
        assert_eq!(timeless(ours), timeless(&theirs), "{sub}/repodata.json");
    }
    assert!(
        ours[0].contains("indexed_timestamp") && ours[0].matches(".conda\":").count() >= 5,
        "{}",
        ours[0]
    );
}

#[test]
fn stand_ins_are_marked_in_metadata_and_in_every_report() {
    // `missing`: libtorch without libmagma and without the CUDA runtime it NEEDs.
    let d = tempfile::tempdir().unwrap();
    let manifest = d.path().join("standins.yaml");
    std::fs::write(
        &manifest,
        "standins:\n  - name: libmagma\n    version: 2.8.0\n    represents_bytes: 293000000\n    source: conda-forge-2024-split.md §7\n  - name: cuda-cudart\n    version: 13.0.96\n    represents_bytes: 1000000\n    source: a test size\n    provides: [libcudart.so.13]\n  - name: libcublas\n    version: 13.1.0\n    represents_bytes: 5\n    source: unused\n    provides: [libcublas.so.13]\n",
    )
    .unwrap();
    let ch = d.path().join("channel");
    let r = pack_ok(
        &fixture("missing"),
        &ch,
        &["--version", "2.5.1", "--standins", s(&manifest)],
    );
    assert_eq!(r.standins_from, "standins.yaml");
    let names: Vec<&str> = r.standins.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["libmagma", "cuda-cudart"],
        "stand-ins for what the split refers to, in manifest order"
    );
    assert_eq!(r.represented_bytes, 294_000_000u64);
    assert!(
        r.notes
            .iter()
            .any(|n| n == "stand-in libcublas not made: nothing in this split refers to it")
    );
    stand_in_packages_are_marked_and_change_no_semantics(&ch);
    let text = stdout(&pack(
        &fixture("missing"),
        &d.path().join("again"),
        &["--version", "2.5.1", "--standins", s(&manifest)],
    ));
    assert!(
        text.contains("[stand-in]") && text.contains("represents 293000000 bytes"),
        "{text}"
    );
    let envs = d.path().join("envs");
    solve_flags_stand_ins_and_counts_their_bytes_apart(&ch, &envs);
    // env: the installed stand-ins are marked and count represented bytes.
    let e = run(&["env", s(&envs.join("default")), "--json"]);
    assert_eq!(e.status.code(), Some(0), "{}", stderr(&e));
    assert_valid("docs/env.schema.json", &json(&e));
    let env: EnvReport = typed(&e);
    let magma_pkg = env.packages.iter().find(|p| p.name == "libmagma").unwrap();
    assert_eq!(
        (
            magma_pkg.standin,
            magma_pkg.represents_bytes,
            magma_pkg.role
        ),
        (true, Some(293_000_000), PackageRole::Payload)
    );
    assert_eq!(env.represented_bytes, 294_000_000u64);
    assert_eq!(
        env.switch.represented_delta, -293_000_000i64,
        "switching to nomagma drops the libmagma stand-in"
    );
    let text = stdout(&run(&["env", s(&envs.join("default"))]));
    assert!(text.contains("[stand-in] represents 279.4 MiB"), "{text}");
}

/// The stand-in packages in `ch` (cuda-cudart, libmagma): licensed `stand-in`, noarch, no solver
/// semantics, marked in about.json; the core depends on what provides the library it NEEDs (what
/// run-exports would add).
fn stand_in_packages_are_marked_and_change_no_semantics(ch: &Path) {
    let files = conda_files(ch);
    let cudart = files
        .iter()
        .find(|f| f.starts_with("noarch/cuda-cudart-13.0.96-standin_h"))
        .unwrap();
    let magma_standin = files
        .iter()
        .find(|f| f.starts_with("noarch/libmagma-2.8.0-standin_h"))
        .unwrap();
    for f in [cudart, magma_standin] {
        let idx = index_of(&ch.join(f));
        assert_eq!(idx.license.as_deref(), Some("stand-in"));
        assert!(
            idx.track_features.is_empty() && idx.depends.is_empty() && idx.constrains.is_empty(),
            "stand-ins change no solver semantics"
        );
        assert_eq!(
            idx.noarch.kind(),
            Some(rattler_conda_types::NoArchKind::Generic)
        );
        let about: AboutJson =
            rattler_package_streaming::seek::read_package_file(ch.join(f)).unwrap();
        assert_eq!(about.extra["splitpkg_standin"], true);
        assert!(about.extra["represents_bytes"].as_u64().unwrap() > 0);
        assert!(about.extra["source"].is_string());
    }
    // The core depends on what provides the library it NEEDs (what run-exports would add).
    let core = files
        .iter()
        .find(|f| f.contains("/libtorch-2.5.1-"))
        .unwrap();
    assert_eq!(
        index_of(&ch.join(core)).depends,
        vec![
            "libtorch-cuda-linalg ==2.5.1 cuda13_*",
            "cuda-cudart >=13.0.96"
        ]
    );
}

/// solve (installing into `envs`): the stand-ins are in the default set, flagged, with represented
/// bytes apart; (b)-(e) cannot run on this channel and say why.
fn solve_flags_stand_ins_and_counts_their_bytes_apart(ch: &Path, envs: &Path) {
    let (o, rep) = solve(ch, &["--install", s(envs)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let a = typed_scenario(&rep, "a");
    let flagged: BTreeMap<String, bool> = a
        .solved
        .iter()
        .map(|p| (p.name.clone(), p.standin))
        .collect();
    assert_eq!(
        flagged,
        [
            ("cuda-cudart", true),
            ("libmagma", true),
            ("libtorch", false),
            ("libtorch-cuda-linalg", false)
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b))
        .collect()
    );
    assert_eq!(a.represented_bytes, 294_000_000u64);
    let real: u64 = a
        .solved
        .iter()
        .filter(|p| !p.standin)
        .map(|p| p.installed_bytes)
        .sum();
    assert_eq!(
        a.installed_bytes, real,
        "stand-ins' own bytes are not counted as real"
    );
    let text = stdout(&run(&["solve", s(ch), "--quiet"]));
    assert!(text.contains("[stand-in] represents 279.4 MiB"), "{text}");
    for id in ["b", "c", "d", "e"] {
        assert_eq!(
            typed_scenario(&rep, id).status,
            ScenarioStatus::NotApplicable,
            "{id}"
        );
    }
    assert!(
        typed_scenario(&rep, "d")
            .detail
            .contains("one version in the channel")
    );
}

/// The scenario channels of the fixture: two releases in `channel`, and a `flipped` channel
/// preferring nomagma for (e).
fn scenario_channels(d: &Path) -> (PathBuf, PathBuf) {
    let ch = d.join("channel");
    let flipped = d.join("flipped");
    fixture_channel(&ch, "2.5.1", &[]);
    fixture_channel(&ch, "2.5.2", &[]);
    fixture_channel(&flipped, "2.5.2", &["--prefer", "nomagma"]);
    (ch, flipped)
}

#[test]
fn scenarios_install_plan_and_env() {
    let d = tempfile::tempdir().unwrap();
    let (ch, flipped) = scenario_channels(d.path());
    let envs = d.path().join("envs");
    let (o, r) = solve(
        &ch,
        &["--prefer-channel", s(&flipped), "--install", s(&envs)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(r.pass);
    assert_eq!(r.versions, ["2.5.1", "2.5.2"]);
    assert_eq!(
        r.virtual_packages,
        ["__cuda=13.0", "__glibc=2.28", "__linux=6.1", "__unix=0"]
    );
    scenario_a_is_the_whole_newest_default(typed_scenario(&r, "a"));
    scenarios_b_to_d_are_slim_conflict_and_skew(&r);
    scenario_e_is_the_flipped_channels_nomagma(typed_scenario(&r, "e"), &flipped);
    let (default, slim) = installed_prefixes_plan_as_built(&r, &envs);
    env_on_the_installed_prefixes(d.path(), &ch, &default, &slim);
    // Text report: every scenario named with its status.
    let t = stdout(&run(&[
        "solve",
        s(&ch),
        "--prefer-channel",
        s(&flipped),
        "--quiet",
    ]));
    for line in [
        "(a) default: PASS",
        "(b) slim: PASS",
        "(c) conflict: PASS",
        "(d) version skew: PASS",
        "(e) flipped preference: PASS",
        "all applicable scenarios as required",
    ] {
        assert!(t.contains(line), "{line}\n{t}");
    }
}

/// The scenario `id` of a solve document.
fn typed_scenario<'a>(r: &'a SolveReport, id: &str) -> &'a Scenario {
    r.scenarios.iter().find(|s| s.id == id).unwrap()
}

/// name → build of a scenario's solution.
fn solved_builds(sc: &Scenario) -> BTreeMap<String, String> {
    sc.solved
        .iter()
        .map(|p| (p.name.clone(), p.build.clone()))
        .collect()
}

/// name → build, from string pairs.
fn builds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Bytes of the fixture file `rel`.
fn fixture_len(rel: &str) -> u64 {
    std::fs::metadata(fixture(rel)).unwrap().len()
}

/// (a): the default set of the newest version, relying on track_features, installs the whole
/// conda-like fixture.
fn scenario_a_is_the_whole_newest_default(a: &Scenario) {
    assert_eq!(a.status, ScenarioStatus::Pass);
    assert_eq!(a.specs, ["libtorch"]);
    assert_eq!(
        solved_builds(a),
        builds(&[
            ("libmagma", "h50e331b_0"),
            ("libtorch", "cuda126_h0df9ae8_0"),
            ("libtorch-cuda-linalg", "cuda126_magma_h1e60bb5_0"),
        ])
    );
    assert!(
        a.solved
            .iter()
            .filter(|p| p.name != "libmagma")
            .all(|p| p.version == "2.5.2"),
        "newest version"
    );
    assert!(a.track_features.relied_on);
    assert!(a.track_features.solvers_agree);
    let tree_bytes: u64 = walk(&fixture("conda-like"))
        .iter()
        .filter(|(_, p)| {
            !std::fs::symlink_metadata(p)
                .unwrap()
                .file_type()
                .is_symlink()
        })
        .map(|(_, p)| std::fs::metadata(p).unwrap().len())
        .sum();
    assert_eq!(
        a.installed_bytes, tree_bytes,
        "the default set installs the whole fixture"
    );
}

/// (b) the slim set, (c) nomagma with libmagma conflicts, (d) a version skew is refused.
fn scenarios_b_to_d_are_slim_conflict_and_skew(r: &SolveReport) {
    let b = typed_scenario(r, "b");
    assert_eq!(b.status, ScenarioStatus::Pass);
    assert_eq!(b.specs, ["libtorch", "libtorch-cuda-linalg * *nomagma*"]);
    assert_eq!(
        solved_builds(b),
        builds(&[
            ("libtorch", "cuda126_h0df9ae8_0"),
            ("libtorch-cuda-linalg", "cuda126_nomagma_ha0eb17e_0")
        ])
    );
    assert!(!b.track_features.relied_on);

    let c = typed_scenario(r, "c");
    assert_eq!((c.status, c.solved.len()), (ScenarioStatus::Pass, 0));
    assert_eq!(c.specs, ["libtorch-cuda-linalg * *nomagma*", "libmagma"]);
    let msg = c.solver_message.as_deref().unwrap();
    assert!(msg.contains("libmagma <0.0a0, which conflicts"), "{msg}");

    let dd = typed_scenario(r, "d");
    assert_eq!(dd.status, ScenarioStatus::Pass);
    assert_eq!(
        dd.specs,
        ["libtorch ==2.5.2", "libtorch-cuda-linalg ==2.5.1"]
    );
    let msg = dd.solver_message.as_deref().unwrap();
    assert!(msg.contains("libtorch ==2.5.1 cuda126_*"), "{msg}");
}

/// (e): the flipped channel's nomagma build, its preference in the hash (a name never changes
/// meaning); its magma build is weighed down under a name of its own (not the default's h1e60bb5).
fn scenario_e_is_the_flipped_channels_nomagma(e: &Scenario, flipped: &Path) {
    assert_eq!(e.status, ScenarioStatus::Pass);
    assert_eq!(
        solved_builds(e),
        builds(&[
            ("libtorch", "cuda126_h0df9ae8_0"),
            ("libtorch-cuda-linalg", "cuda126_nomagma_hac6cb61_0")
        ])
    );
    assert!(e.track_features.relied_on);
    let flipped_magma = conda_files(flipped)
        .into_iter()
        .find(|f| f.contains("libtorch-cuda-linalg-2.5.2-cuda126_magma_h"))
        .unwrap();
    assert!(!flipped_magma.contains("h1e60bb5"), "{flipped_magma}");
    assert!(index_of(&flipped.join(&flipped_magma)).track_features == vec![FEATURE]);
}

/// Install: the default prefix is CONFINED, the slim one has no payload at all; `splitpkg plan` on
/// the prefixes, as a user would run it, agrees. Returns the (default, slim) prefixes.
fn installed_prefixes_plan_as_built(r: &SolveReport, envs: &Path) -> (PathBuf, PathBuf) {
    let inst = &r.install.as_ref().unwrap().envs;
    assert_eq!(inst[0].name, InstallEnv::Default);
    assert_eq!(inst[0].status, ScenarioStatus::Pass);
    assert_eq!(inst[0].verdict, Some(Verdict::Confined));
    assert_eq!(inst[1].name, InstallEnv::Slim);
    assert_eq!(inst[1].status, ScenarioStatus::Pass);
    assert_eq!(inst[1].verdict, Some(Verdict::NotPresent));
    assert!(inst[1].payload_files.is_empty());
    let default = envs.join("default");
    let slim = envs.join("slim");
    assert!(default.join("lib/libmagma.so.2.8.0").exists());
    assert!(
        !walk(&slim).iter().any(|(r, _)| r.contains("libmagma")),
        "no libmagma file in the slim prefix"
    );
    let p = run(&["plan", s(&default), "--json", "--quiet"]);
    assert_eq!(
        (p.status.code(), typed::<Plan>(&p).verdict),
        (Some(0), Verdict::Confined)
    );
    let p = run(&["plan", s(&slim), "--json", "--quiet"]);
    let plan: Plan = typed(&p);
    assert_eq!(
        (p.status.code(), plan.verdict),
        (Some(1), Verdict::NotPresent)
    );
    assert!(
        plan.outputs.is_empty(),
        "no split of a slim prefix: nothing to make optional"
    );
    (default, slim)
}

/// `env` on both prefixes: the switch each offers (sizes, payload, commands, channel), the switch
/// specs select exactly one build, and the SVGs.
fn env_on_the_installed_prefixes(d: &Path, ch: &Path, default: &Path, slim: &Path) {
    let svg_d = d.join("default.svg");
    let svg_s = d.join("slim.svg");
    let o = run(&["env", s(default), "--json", "--svg", s(&svg_d)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/env.schema.json", &json(&o));
    let ed: EnvReport = typed(&o);
    let magma_bytes = fixture_len("conda-like/lib/libmagma.so.2.8.0")
        + fixture_len("conda-like/lib/libmagma_sparse.so");
    let lazy_delta =
        fixture_len(NOMAGMA) as i64 - fixture_len("conda-like/lib/libtorch_cuda_linalg.so") as i64;
    assert_eq!(ed.variant, "magma");
    assert_eq!(ed.switch.to, "nomagma");
    assert_eq!(
        ed.switch.real_delta,
        Some(lazy_delta - magma_bytes as i64),
        "saves libmagma plus the lazy delta"
    );
    assert_eq!(ed.switch.payload_removed, ["libmagma"]);
    assert!(!ed.switch.estimated);
    let cmds = &ed.switch.commands;
    assert_eq!(
        cmds.conda,
        r#"conda install "libtorch-cuda-linalg=*=*nomagma*""#
    );
    assert_eq!(
        cmds.mamba,
        r#"mamba install "libtorch-cuda-linalg=*=*nomagma*""#
    );
    assert_eq!(
        cmds.pixi,
        r#"pixi add "libtorch-cuda-linalg[build='*nomagma*']""#
    );
    assert_eq!(
        ed.channel.as_deref(),
        Some(s(ch)),
        "found from the installed package's file:// URL"
    );
    let es: EnvReport = typed(&run(&["env", s(slim), "--json", "--svg", s(&svg_s)]));
    assert_eq!(es.variant, "nomagma");
    assert_eq!(
        es.switch.real_delta,
        Some(magma_bytes as i64 - lazy_delta),
        "costs libmagma back"
    );
    assert_eq!(es.switch.payload_added, ["libmagma"]);
    assert_eq!(
        es.switch.commands.conda_spec,
        "libtorch-cuda-linalg=*=*_magma_*"
    );
    // The switch specs select exactly one variant of the channel's builds.
    let builds = ["cuda126_magma_h1e60bb5_0", "cuda126_nomagma_ha0eb17e_0"];
    for (spec, want) in [
        (&ed.switch.commands.pixi_spec, 1),
        (&es.switch.commands.pixi_spec, 0),
    ] {
        let m = MatchSpec::from_str(spec, ParseStrictness::Strict).unwrap();
        let matching: Vec<&str> = builds
            .iter()
            .filter(|b| m.build.as_ref().unwrap().matches(b))
            .copied()
            .collect();
        assert_eq!(matching, vec![builds[want]], "{spec}");
    }
    env_svgs_are_well_formed_and_deterministic(d, default, &svg_d, &svg_s);
}

/// Well-formed, deterministic SVGs with the payload highlighted only where it is installed.
fn env_svgs_are_well_formed_and_deterministic(
    d: &Path,
    default: &Path,
    svg_d: &Path,
    svg_s: &Path,
) {
    for svg in [svg_d, svg_s] {
        let ok = Command::new("python3")
            .arg("-c")
            .arg("import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert d.documentElement.tagName == 'svg'")
            .arg(svg)
            .status()
            .unwrap();
        assert!(ok.success(), "{} is not well-formed XML", svg.display());
    }
    let text_d = std::fs::read_to_string(svg_d).unwrap();
    let text_s = std::fs::read_to_string(svg_s).unwrap();
    assert_eq!(
        text_d.matches(r#"class="payload""#).count(),
        1,
        "payload in the magma env's 'now' bar only"
    );
    assert_eq!(
        text_s.matches(r#"class="payload""#).count(),
        1,
        "payload in the slim env's 'after' bar only"
    );
    let again = d.join("again.svg");
    run(&["env", s(default), "--svg", s(&again)]);
    assert_eq!(
        std::fs::read(&again).unwrap(),
        text_d.as_bytes(),
        "SVG is deterministic"
    );
}

/// The scenarios of `scenarios_install_plan_and_env`, solved again with py-rattler over the same
/// channels: the same records, or both unsolvable.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, py-rattler in a pip venv: cargo test --release --features full-tests"
)]
fn scenarios_agree_with_py_rattler() {
    let d = tempfile::tempdir().unwrap();
    let (ch, flipped) = scenario_channels(d.path());
    let (o, r) = solve(&ch, &["--prefer-channel", s(&flipped)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(r.pass);
    cross_check(&r, Some(&flipped));
}

/// `env --switch` changes a real environment with rattler's installer, both ways: the slim one
/// loses libmagma and plans NOT PRESENT, the way back brings it again and plans CONFINED. A channel
/// without the other variant refuses the switch and leaves the environment as it was.
#[test]
fn env_switch_changes_the_environment_with_rattlers_installer() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    fixture_channel(&ch, "2.5.2", &[]);
    let (o, _) = solve(&ch, &["--install", s(&d.path().join("envs"))]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let env = d.path().join("envs/default");
    let o = run(&["env", s(&env), "--switch", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/env-switch.schema.json", &json(&o));
    let r: SwitchReport = typed(&o);
    assert_valid(
        "docs/env.schema.json",
        &serde_json::to_value(&r.after).unwrap(),
    );
    assert_eq!((r.from.as_str(), r.to.as_str()), ("magma", "nomagma"));
    assert_eq!(
        r.removed,
        [
            "libmagma-2.8.0-h50e331b_0",
            "libtorch-cuda-linalg-2.5.2-cuda126_magma_h1e60bb5_0"
        ]
    );
    assert_eq!(
        r.installed,
        ["libtorch-cuda-linalg-2.5.2-cuda126_nomagma_ha0eb17e_0"]
    );
    assert_eq!(
        r.after.real_bytes as i64 - r.before.real_bytes as i64,
        r.before.switch.real_delta.unwrap(),
        "the switch saved what env predicted"
    );
    assert!(
        !env.join("lib/libmagma.so.2").exists(),
        "libmagma left the environment"
    );
    let o = run(&["plan", s(&env), "--json", "-q"]);
    assert_eq!(
        typed::<Plan>(&o).verdict,
        Verdict::NotPresent,
        "{}",
        stdout(&o)
    );
    assert_eq!(
        typed::<EnvReport>(&run(&["env", s(&env), "--json"])).variant,
        "nomagma"
    );
    // And back.
    let o = run(&["env", s(&env), "--switch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("switched") && stdout(&o).contains("+ libmagma-2.8.0-h50e331b_0"),
        "{}",
        stdout(&o)
    );
    assert!(env.join("lib/libmagma.so.2").exists());
    assert_eq!(
        typed::<Plan>(&run(&["plan", s(&env), "--json", "-q"])).verdict,
        Verdict::Confined
    );
    // A channel without the nomagma build: refused, one line, nothing changed.
    let only = d.path().join("only-magma");
    pack_ok(
        &fixture("conda-like"),
        &only,
        &["--version", "2.5.2", "--build-keys", "cuda126"],
    );
    let before = walk(&env);
    let o = run(&["env", s(&env), "--switch", "--channel", s(&only)]);
    one_line_error(&o, 2, "cannot switch to nomagma");
    assert_eq!(walk(&env), before, "the environment is untouched");
}

/// The conda-forge layout (issue 24, item 5): torch's libraries in `$PREFIX/lib`, and
/// `site-packages/torch/lib` holding relative links to them, as conda-build makes them. Every link
/// travels with what it names — the lazy library's link in both lazy packages, the core's links in
/// the core — so each installed environment has every link, each resolving to its own variant's
/// file. `plan` on `site-packages/torch` (what a user in the environment types) plans the
/// environment: CONFINED / NOT PRESENT; `env` names the variant, and `env --switch` swaps the file
/// the link names.
#[test]
fn conda_forge_layout_packs_installs_and_plans_from_site_packages() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
    let r = pack_ok(
        &fixture("conda-forge"),
        &ch,
        &[
            "--version",
            "2.5.1",
            "--build-keys",
            "cuda126",
            "--lazy-variant",
            &nomagma,
        ],
    );
    assert!(r.lossless.ok);
    assert_eq!(
        (r.lossless.tree_paths, r.lossless.placed_once),
        (13, 13),
        "conda-like's 10 and 3 links"
    );
    each_link_travels_with_what_it_names(&ch, &r);
    let envs = d.path().join("envs");
    let (o, s_) = solve(&ch, &["--install", s(&envs)]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let inst = &s_.install.unwrap().envs;
    assert_eq!(
        (inst[0].name, inst[0].verdict),
        (InstallEnv::Default, Some(Verdict::Confined))
    );
    assert_eq!(
        (inst[1].name, inst[1].verdict),
        (InstallEnv::Slim, Some(Verdict::NotPresent))
    );
    let (default, slim) = (envs.join("default"), envs.join("slim"));
    conda_forge_links_resolve(&default, "conda-like/lib/libtorch_cuda_linalg.so");
    conda_forge_links_resolve(&slim, NOMAGMA);
    assert!(default.join("lib/libmagma.so.2").exists());
    assert!(
        !walk(&slim).iter().any(|(r, _)| r.contains("libmagma")),
        "no libmagma in the slim environment"
    );
    assert_eq!(plan_site_packages(&default), (Some(0), Verdict::Confined));
    assert_eq!(plan_site_packages(&slim), (Some(1), Verdict::NotPresent));
    // env on each.
    for (env, variant, other) in [(&default, "magma", "nomagma"), (&slim, "nomagma", "magma")] {
        let o = run(&["env", s(env), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_valid("docs/env.schema.json", &json(&o));
        let e: EnvReport = typed(&o);
        assert_eq!((e.variant.as_str(), e.switch.to.as_str()), (variant, other));
        assert_eq!(e.channel.as_deref(), Some(s(&ch)));
    }
    // env --switch replaces the lazy package: the link now names the nomagma file.
    let o = run(&["env", s(&default), "--switch", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sw: SwitchReport = typed(&o);
    assert_eq!((sw.from.as_str(), sw.to.as_str()), ("magma", "nomagma"));
    conda_forge_links_resolve(&default, NOMAGMA);
    assert!(!default.join("lib/libmagma.so.2").exists());
    assert_eq!(plan_site_packages(&default), (Some(1), Verdict::NotPresent));
}

/// torch's directory in the conda-forge fixture's site-packages.
const SP: &str = "lib/python3.11/site-packages/torch";

/// What each package of the conda-forge pack holds, by its paths.json: the core's links stay with
/// the core, the link to the lazy library ships with each lazy library.
fn each_link_travels_with_what_it_names(ch: &Path, r: &PackReport) {
    let packages = &r.record.packages;
    let paths_of = |role: PackedRole, variant: Option<&str>| -> BTreeMap<String, PathType> {
        let pkg = packages
            .iter()
            .find(|p| p.role == role && variant.is_none_or(|v| p.variant.as_deref() == Some(v)))
            .unwrap();
        let p: PathsJson =
            rattler_package_streaming::seek::read_package_file(ch.join(&pkg.file)).unwrap();
        p.paths
            .into_iter()
            .map(|e| (e.relative_path.display().to_string(), e.path_type))
            .collect()
    };
    let want = |entries: &[(String, PathType)]| -> BTreeMap<String, PathType> {
        entries.iter().cloned().collect()
    };
    let (hard, soft) = (PathType::HardLink, PathType::SoftLink);
    assert_eq!(
        paths_of(PackedRole::Core, None),
        want(&[
            ("bin/torch_smoke".into(), hard),
            ("lib/libtorch_cpu.so".into(), hard),
            ("lib/libtorch_cuda.so".into(), hard),
            (format!("{SP}/_C.cpython-311-x86_64-linux-gnu.so"), hard),
            (format!("{SP}/lib/libtorch_cpu.so"), soft),
            (format!("{SP}/lib/libtorch_cuda.so"), soft),
            (format!("{SP}/version.txt"), hard),
        ]),
        "the core's links stay with the core"
    );
    for v in ["magma", "nomagma"] {
        assert_eq!(
            paths_of(PackedRole::Lazy, Some(v)),
            want(&[
                ("lib/libtorch_cuda_linalg.so".into(), hard),
                (format!("{SP}/lib/libtorch_cuda_linalg.so"), soft)
            ]),
            "{v}: the link to the lazy library ships with the lazy library"
        );
    }
    assert!(
        paths_of(PackedRole::Payload, None)
            .keys()
            .all(|p| p.starts_with("lib/libmagma"))
    );
}

/// Every link in site-packages/torch/lib of `env` is there and names the environment's own file;
/// the lazy one names this variant's build (`lazy_from`, a fixture), and conda-meta records it
/// under the lazy package.
fn conda_forge_links_resolve(env: &Path, lazy_from: &str) {
    for lib in [
        "libtorch_cpu.so",
        "libtorch_cuda.so",
        "libtorch_cuda_linalg.so",
    ] {
        let link = env.join(SP).join("lib").join(lib);
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{}",
            link.display()
        );
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from(format!("../../../../{lib}"))
        );
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(env.join("lib").join(lib)).unwrap(),
            "{lib} resolves"
        );
    }
    assert_eq!(
        sha256(&env.join(SP).join("lib/libtorch_cuda_linalg.so")),
        sha256(&fixture(lazy_from)),
        "{}",
        env.display()
    );
    let meta = walk(&env.join("conda-meta"))
        .into_iter()
        .find(|(r, _)| r.starts_with("libtorch-cuda-linalg-"))
        .unwrap()
        .1;
    let files: serde_json::Value = serde_json::from_slice(&std::fs::read(meta).unwrap()).unwrap();
    assert!(
        files["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == &format!("{SP}/lib/libtorch_cuda_linalg.so")),
        "{files}"
    );
}

/// `plan` on site-packages/torch of `env` (what a user in the environment types) plans the
/// enclosing environment: its exit code and verdict.
fn plan_site_packages(env: &Path) -> (Option<i32>, Verdict) {
    let o = run(&["plan", s(&env.join(SP)), "--json", "--quiet"]);
    assert!(
        stderr(&o).contains("links lead into the conda environment"),
        "{}",
        stderr(&o)
    );
    let p: Plan = typed(&o);
    assert_eq!(p.input.path, s(env), "planned the enclosing environment");
    assert_eq!(
        p.lazy_library.as_ref().unwrap().path,
        "lib/libtorch_cuda_linalg.so"
    );
    (o.status.code(), p.verdict)
}

#[test]
fn wrong_preference_and_virtual_packages_fail_the_scenarios() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    fixture_channel(&ch, "2.5.1", &[]);
    // A "flipped" channel that is not flipped fails (e), exit 1.
    let same = d.path().join("same");
    fixture_channel(&same, "2.5.1", &[]);
    let (o, r) = solve(&ch, &["--prefer-channel", s(&same)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(typed_scenario(&r, "e").status, ScenarioStatus::Fail);
    assert_eq!(
        typed_scenario(&r, "d").status,
        ScenarioStatus::NotApplicable
    );
    // Virtual packages are passed through: a channel needs nothing virtual, so __cuda=none still solves.
    let (o, r) = solve(
        &ch,
        &["--virtual", "__cuda=none", "--virtual", "__glibc=2.17"],
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        r.virtual_packages,
        ["__glibc=2.17", "__linux=6.1", "__unix=0"]
    );
    let o = run(&["solve", s(&ch), "--virtual", "cuda=12"]);
    one_line_error(&o, 2, "--virtual cuda=12");
    let o = run(&["solve", s(&ch), "--version", "9.9"]);
    one_line_error(&o, 2, "--version 9.9");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, rattler-build in a pip venv: cargo test --release --features full-tests"
)]
fn pack_and_rattler_build_agree_on_the_relations() {
    // The same split rendered by emit and built by rattler-build, and packed by pack: the same
    // depends, constrains and track_features for every package (build-string hashes differ by
    // design: rattler-build hashes its variant config).
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    fixture_channel(&ch, "2.5.1", &[]);
    let built = rattler_build_the_emitted_recipe(d.path());
    let packed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ch.join("linux-64/repodata.json")).unwrap())
            .unwrap();
    let mut compared = 0;
    for (_, rb) in built["packages"].as_object().unwrap() {
        let (name, build) = (rb["name"].as_str().unwrap(), rb["build"].as_str().unwrap());
        if name != "libtorch" && name != "libtorch-cuda-linalg" {
            continue;
        }
        let variant = ["_nomagma_", "_magma_"]
            .into_iter()
            .find(|v| build.contains(v));
        let ours = packed["packages.conda"]
            .as_object()
            .unwrap()
            .values()
            .find(|p| {
                p["name"] == name
                    && variant.is_none_or(|v| p["build"].as_str().unwrap().contains(v))
            })
            .unwrap();
        assert_eq!(relations(rb), relations(ours), "{name} {build}");
        assert_eq!(rb["build_number"], ours["build_number"]);
        compared += 1;
    }
    // libtorch is rendered once per variant value; both renders are compared.
    assert!(compared >= 3, "{built:#}");
}

/// The conda-like fixture's recipe rendered by `emit` into `dir/recipe`, staged as
/// build-variants.sh would (core, magma and nomagma builds) and built by rattler-build: its
/// packages as `tests/py/rattler_build_check.py` reports them.
fn rattler_build_the_emitted_recipe(dir: &Path) -> serde_json::Value {
    let recipe = dir.join("recipe");
    let o = run(&[
        "emit",
        s(&fixture("conda-like")),
        "--out",
        s(&recipe),
        "--version",
        "2.5.1",
        "--build-keys",
        "cuda126",
        "--format",
        "rattler-build",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stage = dir.join("stage");
    std::fs::create_dir_all(&stage).unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("conda-like"))
            .arg(stage.join("core"))
            .status()
            .unwrap()
            .success()
    );
    for (v, lib) in [
        ("magma", fixture("conda-like/lib/libtorch_cuda_linalg.so")),
        ("nomagma", fixture(NOMAGMA)),
    ] {
        let dst = stage.join(v).join("lib/libtorch_cuda_linalg.so");
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(lib, dst).unwrap();
    }
    let work = dir.join("work");
    let python = python_env();
    let path = format!(
        "{}:{}",
        python.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(&python)
        .env("PATH", path)
        .arg(repo().join("tests/py/rattler_build_check.py"))
        .arg(recipe.join("rattler-build"))
        .arg(&stage)
        .arg(&work)
        .arg(bin())
        .arg("2.8.0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rattler-build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap()
}

/// A package record's depends, constrains and track_features (split at commas).
fn relations(v: &serde_json::Value) -> (Vec<String>, Vec<String>, Vec<String>) {
    let list = |k: &str| {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let tf = v["track_features"]
        .as_str()
        .map(|t| t.split(',').map(str::to_string).collect::<Vec<_>>())
        .unwrap_or_default();
    (list("depends"), list("constrains"), tf)
}

#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("nested/deeper/channel");
    let fresh = || !d.path().join("nested").exists();
    pack_refuses_bad_trees_and_lazy_variants(&out);
    assert!(fresh());
    pack_refuses_bad_manifests_wheels_and_outputs(d.path(), &out);
    assert!(fresh());
    // A channel that holds another split is not mixed with this one.
    let ch = d.path().join("channel");
    fixture_channel(&ch, "2.5.1", &[]);
    let before = conda_files(&ch);
    one_line_error(
        &pack(
            &fixture("conda-like"),
            &ch,
            &["--version", "2.5.2", "--core-name", "other"],
        ),
        2,
        "splitpkg.json",
    );
    assert_eq!(conda_files(&ch), before);
    solve_and_env_refuse_what_they_cannot_use(d.path(), &ch);
}

/// A missing input, a tree that is not confined (exit 1), and bad `--lazy-variant`s: the MAGMA
/// build offered as nomagma (refused by verify-variant, exit 1), a missing file, a name that is
/// not a variant, no file. Each refusal writes nothing under `out`.
fn pack_refuses_bad_trees_and_lazy_variants(out: &Path) {
    let fresh = || !out.parent().unwrap().parent().unwrap().exists();
    // A missing input.
    let o = pack(Path::new("/nonexistent/tree"), out, &["--version", "1"]);
    one_line_error(&o, 2, "/nonexistent/tree");
    assert!(fresh());
    // Not confined: refused, exit 1.
    let o = pack(&fixture("eager-leak"), out, &["--version", "1"]);
    one_line_error(&o, 1, "NOT CONFINED");
    assert!(fresh());
    // The MAGMA build offered as nomagma: refused by verify-variant, exit 1.
    let magma_lib = fixture("conda-like/lib/libtorch_cuda_linalg.so");
    let o = pack(
        &fixture("conda-like"),
        out,
        &[
            "--version",
            "1",
            "--lazy-variant",
            &format!("nomagma={}", magma_lib.display()),
        ],
    );
    one_line_error(
        &o,
        1,
        "not a nomagma build of libtorch_cuda_linalg.so: no payload library NEEDED (libmagma.so.2)",
    );
    assert!(fresh());
    let o = pack(
        &fixture("conda-like"),
        out,
        &[
            "--version",
            "1",
            "--lazy-variant",
            "nomagma=/nonexistent/lib.so",
        ],
    );
    one_line_error(&o, 2, "/nonexistent/lib.so");
    let o = pack(
        &fixture("conda-like"),
        out,
        &[
            "--version",
            "1",
            "--lazy-variant",
            &format!("magma={}", magma_lib.display()),
        ],
    );
    one_line_error(&o, 2, "--lazy-variant magma");
    let o = pack(
        &fixture("conda-like"),
        out,
        &["--version", "1", "--lazy-variant", "nomagma"],
    );
    one_line_error(&o, 2, "NAME=FILE");
}

/// Broken stand-in manifests, a broken wheel, and an `--out` that is a file or inside the input
/// tree (`d` is the scratch directory).
fn pack_refuses_bad_manifests_wheels_and_outputs(d: &Path, out: &Path) {
    let fresh = || !d.join("nested").exists();
    // Broken stand-in manifests.
    let bad = d.join("bad.yaml");
    std::fs::write(&bad, "standins:\n  - name: libmagma\n    version: 2.8.0\n").unwrap();
    one_line_error(
        &pack(
            &fixture("conda-like"),
            out,
            &["--version", "1", "--standins", s(&bad)],
        ),
        2,
        s(&bad),
    );
    std::fs::write(
        &bad,
        "standins:\n  - {name: Bad Name, version: '1', represents_bytes: 1, source: x}\n",
    )
    .unwrap();
    one_line_error(
        &pack(
            &fixture("conda-like"),
            out,
            &["--version", "1", "--standins", s(&bad)],
        ),
        2,
        s(&bad),
    );
    assert!(fresh());
    // A broken wheel.
    let wheel = d.join("torch-0-cp311-none-any.whl");
    std::fs::write(&wheel, b"PK\x03\x04 not really").unwrap();
    one_line_error(&pack(&wheel, out, &["--version", "1"]), 2, s(&wheel));
    assert!(fresh());
    // --out is a file, or inside the input tree.
    one_line_error(
        &pack(&fixture("conda-like"), &bad, &["--version", "1"]),
        2,
        s(&bad),
    );
    let inside = fixture("conda-like").join("channel");
    one_line_error(
        &pack(&fixture("conda-like"), &inside, &["--version", "1"]),
        2,
        "is inside the input tree",
    );
    assert!(!inside.exists());
}

/// solve and env on things that are not what they need (`d` is no channel, `ch` is one); solve
/// does not install over an environment that holds a user's file.
fn solve_and_env_refuse_what_they_cannot_use(d: &Path, ch: &Path) {
    one_line_error(
        &run(&["solve", s(d)]),
        2,
        "not a channel made by `splitpkg pack`",
    );
    one_line_error(
        &run(&["solve", "/nonexistent/channel"]),
        2,
        "/nonexistent/channel",
    );
    one_line_error(
        &run(&["env", s(&fixture("conda-like"))]),
        2,
        "no conda-meta",
    );
    let envs = d.join("envs");
    std::fs::create_dir_all(envs.join("default")).unwrap();
    std::fs::write(envs.join("default/keep"), b"user data").unwrap();
    one_line_error(
        &run(&["solve", s(ch), "--install", s(&envs)]),
        2,
        "exists and is not empty",
    );
    assert!(envs.join("default/keep").exists());
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheel + py-rattler: cargo test --release --features full-tests"
)]
fn torch_2_11_wheel_packs_solves_installs_and_plans() {
    let (wheel, _) = corpus("torch-2.11.0-cu130", false);
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let pack_time = torch_2_11_packs_its_core_and_static_lazy_library(&wheel, &ch);
    let envs = d.path().join("envs");
    let (a, solve_time) = torch_2_11_solves_and_installs_the_magma_set(&ch, &envs);
    let e = run(&["env", s(&envs.join("default")), "--json"]);
    assert_valid("docs/env.schema.json", &json(&e));
    let env: EnvReport = typed(&e);
    assert_eq!(env.variant, "magma");
    assert!(
        env.switch.estimated,
        "the nomagma size is the plan's estimate"
    );
    assert_eq!(env.switch.lazy_after, Some(2_125_945));
    assert_eq!(env.switch.real_delta, Some(2_125_945i64 - 53_532_193));
    eprintln!(
        "torch 2.11 wheel: pack {:.1} s, solve+install+plan {:.1} s; (a) {}",
        pack_time.as_secs_f64(),
        solve_time.as_secs_f64(),
        a.solved
            .iter()
            .map(|p| format!(
                "{} {} {} ({} B archive, {} B installed)",
                p.name, p.version, p.build, p.archive_bytes, p.installed_bytes
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
}

/// The torch 2.11 wheel packed into `ch`: every path placed once, the core and the lazy package
/// (MAGMA linked in: no libmagma dependency, one file) and the stand-in; how long `pack` took.
fn torch_2_11_packs_its_core_and_static_lazy_library(
    wheel: &Path,
    ch: &Path,
) -> std::time::Duration {
    let started = std::time::Instant::now();
    let r = pack_ok(wheel, ch, &[]);
    let pack_time = started.elapsed();
    assert_eq!(r.lossless.tree_paths, 11843);
    assert_eq!(r.lossless.placed_once, 11843);
    assert!(r.record.payload_static);
    assert_eq!(
        r.record.missing_variants[0].variant, "nomagma",
        "no nomagma invented"
    );
    let files = conda_files(ch);
    assert_eq!(
        files,
        vec![
            "linux-64/libtorch-2.11.0-cuda13_h86dd438_0.conda",
            "linux-64/libtorch-cuda-linalg-2.11.0-cuda13_magma_hbc75e16_0.conda",
            "noarch/libmagma-2.8.0-standin_h222d286_0.conda",
        ]
    );
    let core = index_of(&ch.join(&files[0]));
    assert_eq!(core.depends, vec!["libtorch-cuda-linalg ==2.11.0 cuda13_*"]);
    let lazy = index_of(&ch.join(&files[1]));
    assert!(
        lazy.depends.is_empty(),
        "MAGMA is linked into the library: no libmagma dependency"
    );
    assert_eq!(lazy.constrains, vec!["libtorch ==2.11.0 cuda13_*"]);
    let paths: PathsJson =
        rattler_package_streaming::seek::read_package_file(ch.join(&files[1])).unwrap();
    assert_eq!(paths.paths.len(), 1);
    assert_eq!(
        paths.paths[0].relative_path,
        PathBuf::from("lib/python3.11/site-packages/torch/lib/libtorch_cuda_linalg.so")
    );
    assert_eq!(paths.paths[0].size_in_bytes, Some(53_532_193));
    pack_time
}

/// `ch` solved and installed into `envs`: scenario (a) the magma set with its sizes, the
/// nomagma scenarios not applicable; scenario (a) and how long the solve took.
fn torch_2_11_solves_and_installs_the_magma_set(
    ch: &Path,
    envs: &Path,
) -> (Scenario, std::time::Duration) {
    let started = std::time::Instant::now();
    let (o, s_) = solve(ch, &["--install", s(envs)]);
    let solve_time = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let a = typed_scenario(&s_, "a");
    assert_eq!(a.status, ScenarioStatus::Pass);
    assert_eq!(
        solved_builds(a),
        [
            ("libtorch", "cuda13_h86dd438_0"),
            ("libtorch-cuda-linalg", "cuda13_magma_hbc75e16_0")
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    );
    assert!(
        !a.track_features.relied_on,
        "one candidate: nothing to rank"
    );
    let lazy_solved = a
        .solved
        .iter()
        .find(|p| p.name == "libtorch-cuda-linalg")
        .unwrap();
    assert_eq!(lazy_solved.installed_bytes, 53_532_193);
    assert_eq!(
        a.installed_bytes, 1_136_486_950u64,
        "the whole wheel, installed"
    );
    for id in ["b", "c", "d", "e"] {
        assert_eq!(
            typed_scenario(&s_, id).status,
            ScenarioStatus::NotApplicable,
            "{id}: the wheel channel has no nomagma build"
        );
    }
    let envs = &s_.install.as_ref().unwrap().envs;
    assert_eq!(
        (envs[0].status, envs[0].verdict),
        (ScenarioStatus::Pass, Some(Verdict::Confined))
    );
    assert_eq!(envs[1].status, ScenarioStatus::NotApplicable);
    cross_check(&s_, None);
    let a = a.clone();
    (a, solve_time)
}

#[test]
fn archives_pack_like_the_directory_they_hold() {
    // The conda-like prefix as a directory, a .conda, a .tar.bz2 and a zip (wheel reader): the
    // same packages, path for path and hash for hash, symlinks included.
    let d = tempfile::tempdir().unwrap();
    let conda = d.path().join("libtorch-2.5.1-cuda126_h0_0.conda");
    let bz2 = d.path().join("libtorch-2.5.1-cuda126_h0_0.tar.bz2");
    let whl = d.path().join("prefix-2.5.1-py3-none-any.whl");
    make_conda(&fixture("conda-like"), &conda);
    make_tar_bz2(&fixture("conda-like"), &bz2);
    make_wheel(&fixture("conda-like"), &whl);
    let paths_of = |ch: &Path| -> BTreeMap<String, PathsJson> {
        conda_files(ch)
            .into_iter()
            .map(|f| {
                let p: PathsJson =
                    rattler_package_streaming::seek::read_package_file(ch.join(&f)).unwrap();
                (f, p)
            })
            .collect()
    };
    let dir = d.path().join("from-dir");
    fixture_channel(&dir, "2.5.1", &[]);
    let want = paths_of(&dir);
    for input in [&conda, &bz2] {
        let ch = d.path().join(format!(
            "from-{}",
            input.extension().unwrap().to_string_lossy()
        ));
        let nomagma = format!("nomagma={}", fixture(NOMAGMA).display());
        let r = pack_ok(
            input,
            &ch,
            &[
                "--version",
                "2.5.1",
                "--build-keys",
                "cuda126",
                "--lazy-variant",
                &nomagma,
            ],
        );
        assert_eq!(r.lossless.placed_once, 10, "{}", input.display());
        assert_eq!(paths_of(&ch), want, "{}", input.display());
    }
    // A wheel installs under site-packages: the same content one level down.
    let ch = d.path().join("from-whl");
    let r = pack_ok(
        &whl,
        &ch,
        &["--version", "2.5.1", "--build-keys", "cuda126"],
    );
    assert_eq!(r.lossless.placed_once, 10);
    let core = conda_files(&ch)
        .into_iter()
        .find(|f| f.contains("/libtorch-2.5.1"))
        .unwrap();
    let p: PathsJson = rattler_package_streaming::seek::read_package_file(ch.join(&core)).unwrap();
    let want_core = want
        .iter()
        .find(|(f, _)| f.contains("/libtorch-2.5.1"))
        .unwrap()
        .1;
    let moved: Vec<(String, Option<u64>)> = want_core
        .paths
        .iter()
        .map(|e| {
            (
                format!("lib/python3/site-packages/{}", e.relative_path.display()),
                e.size_in_bytes,
            )
        })
        .collect();
    let got: Vec<(String, Option<u64>)> = p
        .paths
        .iter()
        .map(|e| (e.relative_path.display().to_string(), e.size_in_bytes))
        .collect();
    assert_eq!(got, moved);
}
