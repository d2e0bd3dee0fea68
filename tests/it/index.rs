//! `splitpkg index` on the fixture split (`splitpkg wheel` of the gcc-built pip-like tree): the
//! pages (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata, PEP 825 variants.json) say what the files
//! are, an update is idempotent and keeps every file (and a hand-set yank), refusals are one line
//! and write nothing; then real installers over real HTTP (a `python3 -m http.server` on
//! 127.0.0.1 started and stopped by the test): the system pip here, and in the full tier pip 26.3,
//! uv 0.13.9 (plain and in variant mode) and twine 7.0.0, and the real torch 2.11 wheel's split.

use crate::common::*;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::SystemTime;

use splitpkg::index::page::{FileEntry, ProjectPage};
use splitpkg::index::{FileStatus, IndexCommands, IndexLayout, IndexReport};

const WHEEL_NAME: &str = "torch-2.5.1-cp311-cp311-linux_x86_64.whl";
const CORE: &str = "torch-2.5.1+split-cp311-cp311-linux_x86_64.whl";
const MAGMA: &str = "torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl";
const SLIM: &str = "torch_cuda_linalg-2.5.1+0.nomagma-cp311-cp311-linux_x86_64.whl";

fn nomagma_lib() -> PathBuf {
    fixture("conda-nomagma/lib/libtorch_cuda_linalg.so")
}

/// The fixture split in `dir/wheels` (and `dir/wheels/variants`), from a fixture wheel whose
/// METADATA says `Requires-Python: >=3.8`; `marker` changes the core's bytes.
fn fixture_split(dir: &Path, marker: &str) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(dir).unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("pip-like"))
            .arg(&tree)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(
        tree.join("torch-2.5.1.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\nRequires-Python: >=3.8\n\n",
    )
    .unwrap();
    std::fs::write(tree.join("torch/__init__.py"), format!("# {marker}\n")).unwrap();
    let input = dir.join("in").join(WHEEL_NAME);
    std::fs::create_dir_all(input.parent().unwrap()).unwrap();
    make_pip_wheel(&tree, &input, "cp311-cp311-linux_x86_64", false);
    let wheels = dir.join("wheels");
    let nomagma = format!("nomagma={}", nomagma_lib().display());
    let o = run(&[
        "wheel",
        s(&input),
        "--out",
        s(&wheels),
        "--quiet",
        "--lazy-variant",
        &nomagma,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    wheels
}

fn index(inputs: &[&Path], out: &Path) -> Output {
    index_with(inputs, out, &[])
}

/// `index` with more options (`--prefer VARIANT`).
fn index_with(inputs: &[&Path], out: &Path, options: &[&str]) -> Output {
    let mut args = vec!["index", "--quiet", "--json", "--out", s(out)];
    args.extend_from_slice(options);
    args.extend(inputs.iter().map(|p| s(p)));
    run(&args)
}

fn sha256(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every file under `dir` with its bytes and modification time (the lock file aside).
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>, SystemTime)> {
    walk(dir)
        .into_iter()
        .filter(|(rel, _)| rel != ".splitpkg.lock")
        .map(|(rel, p)| {
            let m = std::fs::metadata(&p).unwrap().modified().unwrap();
            (rel, std::fs::read(&p).unwrap(), m)
        })
        .collect()
}

/// A project's PEP 691 page as JSON, for the tests that edit it into hostile input.
fn raw_page(out: &Path, project: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join(project).join("index.json")).unwrap()).unwrap()
}

/// A project's PEP 691 page as the type `index` writes it from.
fn page(out: &Path, project: &str) -> ProjectPage {
    serde_json::from_slice(&std::fs::read(out.join(project).join("index.json")).unwrap()).unwrap()
}

fn entry<'a>(page: &'a ProjectPage, file: &str) -> &'a FileEntry {
    page.files
        .iter()
        .find(|f| f.filename == file)
        .unwrap_or_else(|| panic!("{file} not on the page: {page:?}"))
}

fn one_line(o: &Output, says: &str) {
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(o), stderr(o));
    assert_eq!(stderr(o).lines().count(), 1, "{}", stderr(o));
    assert!(
        stderr(o).contains(says),
        "should say {says:?}: {}",
        stderr(o)
    );
}

/// The METADATA member of a wheel.
fn metadata_of(whl: &Path) -> Vec<u8> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    let name = z
        .file_names()
        .filter_map(|n| n.ok())
        .find(|n| n.ends_with(".dist-info/METADATA"))
        .unwrap()
        .into_owned();
    let mut d = Vec::new();
    z.by_name(&name).unwrap().read_to_end(&mut d).unwrap();
    d
}

#[test]
fn pages_metadata_updates_and_refusals() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("index");
    let o = index(&[&wheels], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let r: IndexReport = typed(&o);
    assert_eq!(
        (r.layout, r.added, r.unchanged),
        (IndexLayout::LocalLabel, 3, 0)
    );
    the_root_pages_list_both_projects(&out);
    // Each file: in its project's directory, its SHA-256 in the link, its METADATA beside it.
    for (project, file) in [
        ("torch", CORE),
        ("torch-cuda-linalg", MAGMA),
        ("torch-cuda-linalg", SLIM),
    ] {
        a_file_is_served_as_given_with_its_metadata(&out, &wheels, project, file);
    }
    let core = entry(&page(&out, "torch"), CORE).clone();
    assert_eq!(core.requires_python.as_deref(), Some(">=3.8"));
    assert!(
        std::fs::read_to_string(out.join("torch/index.html"))
            .unwrap()
            .contains("data-requires-python=\"&gt;=3.8\"")
    );
    assert_eq!(
        page(&out, "torch-cuda-linalg").versions,
        ["2.5.1+0.nomagma", "2.5.1+1.magma"]
    );
    // The same run again: nothing written, not even a page's modification time.
    let before = snapshot(&out);
    let o = index(&[&wheels], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: IndexReport = typed(&o);
    assert_eq!((r.added, r.unchanged), (0, 3));
    assert_eq!(snapshot(&out), before, "idempotent");
    a_hand_set_yank_and_the_other_project_are_kept(&out, &wheels);
    // A second, different file under a published name: refused, nothing changes.
    let before = snapshot(&out);
    let other = fixture_split(&d.path().join("other"), "two");
    one_line(&index(&[&other.join(CORE)], &out), "other bytes");
    assert_eq!(snapshot(&out), before);
    // The PEP 825 set into the local-label index: refused (the labels would beat every variant).
    one_line(
        &index(&[&wheels.join("variants")], &out),
        "one index cannot hold both",
    );
    assert_eq!(snapshot(&out), before);
    the_variant_set_gets_an_index_of_its_own(d.path(), &wheels);
}

/// The root pages (PEP 503 HTML and PEP 691 JSON) list both projects.
fn the_root_pages_list_both_projects(out: &Path) {
    let root = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        root.contains("<a href=\"torch/\">torch</a>")
            && root.contains("<a href=\"torch-cuda-linalg/\">torch-cuda-linalg</a>"),
        "{root}"
    );
    let root_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(
        root_json["projects"],
        serde_json::json!([{"name": "torch"}, {"name": "torch-cuda-linalg"}])
    );
    assert_eq!(root_json["meta"]["api-version"], "1.1");
}

/// `file` of `project`: in its project's directory as given, its SHA-256 and size in the JSON
/// page and in the link, its METADATA beside it (PEP 658, under both PEP 714 names).
fn a_file_is_served_as_given_with_its_metadata(
    out: &Path,
    wheels: &Path,
    project: &str,
    file: &str,
) {
    let p = page(out, project);
    let e = entry(&p, file);
    let on_disk = out.join(project).join(file);
    assert_eq!(
        std::fs::read(&on_disk).unwrap(),
        std::fs::read(wheels.join(file)).unwrap(),
        "{file}: the wheel as given"
    );
    assert_eq!(e.sha256().unwrap(), sha256(&on_disk));
    assert_eq!(e.size.unwrap(), std::fs::metadata(&on_disk).unwrap().len());
    assert_eq!(e.url, file.replace('+', "%2B"));
    let meta = out.join(project).join(format!("{file}.metadata"));
    assert_eq!(
        std::fs::read(&meta).unwrap(),
        metadata_of(&on_disk),
        "PEP 658: the METADATA member itself"
    );
    // PEP 658's `{"sha256": …}`: the page type keeps the object as JSON.
    let core_metadata = e.core_metadata.as_ref().unwrap();
    assert_eq!(core_metadata["sha256"].as_str().unwrap(), sha256(&meta));
    assert_eq!(
        e.dist_info_metadata.as_ref(),
        Some(core_metadata),
        "PEP 714: both names"
    );
    let html = std::fs::read_to_string(out.join(project).join("index.html")).unwrap();
    let href = format!(
        "<a href=\"{}#sha256={}\"",
        file.replace('+', "%2B"),
        sha256(&on_disk)
    );
    assert!(html.contains(&href), "{href} in {html}");
    assert!(
        html.contains(&format!("data-core-metadata=\"sha256={}\"", sha256(&meta))),
        "{html}"
    );
}

/// A yank set by hand in the JSON page is kept and rendered; the other project is kept.
fn a_hand_set_yank_and_the_other_project_are_kept(out: &Path, wheels: &Path) {
    let path = out.join("torch-cuda-linalg/index.json");
    let mut p = raw_page(out, "torch-cuda-linalg");
    for f in p["files"].as_array_mut().unwrap() {
        if f["filename"] == SLIM {
            f["yanked"] = serde_json::json!("rebuilt");
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    let o = index(&[&wheels.join(MAGMA)], out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: IndexReport = typed(&o);
    assert_eq!(
        entry(&page(out, "torch-cuda-linalg"), SLIM).yanked,
        Some(serde_json::json!("rebuilt"))
    );
    assert!(
        std::fs::read_to_string(out.join("torch-cuda-linalg/index.html"))
            .unwrap()
            .contains("data-yanked=\"rebuilt\">")
    );
    let statuses: Vec<(&str, FileStatus)> = r
        .projects
        .iter()
        .flat_map(|p| &p.files)
        .map(|f| (f.filename.as_str(), f.status))
        .collect();
    assert_eq!(
        statuses,
        [
            (CORE, FileStatus::Kept),
            (SLIM, FileStatus::Kept),
            (MAGMA, FileStatus::Unchanged)
        ]
    );
}

/// The PEP 825 set in its own index: the variants.json is the union of the wheels' variant.json
/// (what `wheel` wrote beside them), linked without metadata, requires-python or yanked; given one
/// variant at a time, the variants.json grows (PEP 825 lets it change) and keeps both.
fn the_variant_set_gets_an_index_of_its_own(d: &Path, wheels: &Path) {
    let vout = d.join("index-variants");
    let o = index(&[&wheels.join("variants")], &vout);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: IndexReport = typed(&o);
    assert_eq!(r.layout, IndexLayout::Variants);
    let vjson = "torch_cuda_linalg-2.5.1-variants.json";
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(wheels.join("variants").join(vjson)).unwrap())
            .unwrap();
    let served: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vout.join("torch-cuda-linalg").join(vjson)).unwrap())
            .unwrap();
    assert_eq!(served, written);
    let p = page(&vout, "torch-cuda-linalg");
    let e = entry(&p, vjson);
    assert_eq!(
        e.sha256().unwrap(),
        sha256(&vout.join("torch-cuda-linalg").join(vjson))
    );
    assert!(
        e.core_metadata.is_none()
            && e.dist_info_metadata.is_none()
            && e.requires_python.is_none()
            && e.yanked.is_none(),
        "metadata, requires-python or yanked on the variants.json entry: {e:?}"
    );
    let files: Vec<&str> = p.files.iter().map(|f| f.filename.as_str()).collect();
    assert_eq!(
        files,
        [
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-magma.whl",
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl",
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64.whl",
            vjson
        ]
    );
    assert_eq!(r.projects[1].files[0].variant.as_deref(), Some("magma"));
    let grow = d.join("index-grow");
    let v = wheels.join("variants");
    for (label, status) in [
        ("magma", FileStatus::Added),
        ("nomagma", FileStatus::Updated),
    ] {
        let o = index(
            &[&v.join(format!(
                "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-{label}.whl"
            ))],
            &grow,
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let r: IndexReport = typed(&o);
        let f = r.projects[0]
            .files
            .iter()
            .find(|f| f.filename == vjson)
            .unwrap();
        assert_eq!(f.status, status);
    }
    let grown: serde_json::Value =
        serde_json::from_slice(&std::fs::read(grow.join("torch-cuda-linalg").join(vjson)).unwrap())
            .unwrap();
    assert_eq!(grown, written);
}

const VJSON: &str = "torch_cuda_linalg-2.5.1-variants.json";
const VMAGMA: &str = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-magma.whl";
const VSLIM: &str = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl";
const FALLBACK: &str = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64.whl";

fn variants_json(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("torch-cuda-linalg").join(VJSON)).unwrap())
        .unwrap()
}

fn file_names(page: &ProjectPage) -> Vec<String> {
    page.files.iter().map(|f| f.filename.clone()).collect()
}

/// `--prefer nomagma`: the slim index of the same PEP 825 wheels, whose variants.json differs from
/// the default index's in the order of the static property's values only, without the plain
/// fallback (the magma build pip would install); the same run again changes nothing; and every
/// refusal (a set without the value, an index that would lack its wheel, the local-label set, an
/// index written with another preference) is one line that writes nothing.
#[test]
fn prefer_writes_one_index_per_preference_and_refuses_what_it_cannot_serve() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let v = wheels.join("variants");
    let default = d.path().join("index-variants");
    assert_eq!(index(&[&v], &default).status.code(), Some(0));
    let slim = d.path().join("index-slim");
    let o = index_with(&[&v], &slim, &["--prefer", "nomagma"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let r: IndexReport = typed(&o);
    assert_eq!(
        (r.layout, r.prefer.as_deref()),
        (IndexLayout::Variants, Some("nomagma"))
    );
    assert_eq!(r.left_out.len(), 1, "{:?}", r.left_out);
    assert_eq!(r.left_out[0].filename, FALLBACK);
    the_slim_index_differs_only_in_the_order_and_the_fallback(&v, &default, &slim);
    // The text report says the preference and what it left out.
    let text = stdout(&run(&[
        "index",
        "--quiet",
        "--prefer",
        "nomagma",
        "--out",
        s(&slim),
        s(&v),
    ]));
    assert!(
        text.contains("(PEP 825 variant set, nomagma preferred)")
            && text.contains(&format!("left out: {FALLBACK} (--prefer nomagma:")),
        "{text}"
    );
    // The same run again: nothing written.
    let before = snapshot(&slim);
    let o = index_with(&[&v], &slim, &["--prefer", "nomagma"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: IndexReport = typed(&o);
    assert_eq!((r.added, r.unchanged), (0, 4));
    assert_eq!(snapshot(&slim), before, "idempotent");
    a_preference_is_kept_by_every_update(&wheels, &default, &slim);
    assert_eq!(snapshot(&slim), before);
    prefer_refuses_what_it_cannot_serve(d.path(), &wheels);
}

/// The slim index (`--prefer nomagma` of the variant set `v`) beside the default one: the same
/// variants.json but the order of the values, the same wheels but the fallback.
fn the_slim_index_differs_only_in_the_order_and_the_fallback(
    v: &Path,
    default: &Path,
    slim: &Path,
) {
    let key = |v: &serde_json::Value| {
        v["providers"]["torch"]["static-properties"]["torch_cuda_linalg"].clone()
    };
    let (plain, preferred) = (variants_json(default), variants_json(slim));
    assert_eq!(
        key(&plain),
        serde_json::json!(["magma", "nomagma"]),
        "the default index: the publisher's order"
    );
    assert_eq!(key(&preferred), serde_json::json!(["nomagma", "magma"]));
    let mut reordered = plain.clone();
    reordered["providers"]["torch"]["static-properties"]["torch_cuda_linalg"] =
        serde_json::json!(["nomagma", "magma"]);
    assert_eq!(preferred, reordered, "only the order differs");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v.join(VJSON)).unwrap()).unwrap();
    assert_eq!(
        plain, written,
        "without --prefer: what `wheel` wrote, as before"
    );
    assert_eq!(
        file_names(&page(slim, "torch-cuda-linalg")),
        [VMAGMA, VSLIM, VJSON],
        "the same wheels but the fallback"
    );
    assert_eq!(file_names(&page(slim, "torch")), [CORE]);
    for (project, f) in [
        ("torch", CORE),
        ("torch-cuda-linalg", VMAGMA),
        ("torch-cuda-linalg", VSLIM),
    ] {
        assert_eq!(
            std::fs::read(slim.join(project).join(f)).unwrap(),
            std::fs::read(default.join(project).join(f)).unwrap()
        );
    }
    assert!(!slim.join("torch-cuda-linalg").join(FALLBACK).exists());
    let e = entry(&page(slim, "torch-cuda-linalg"), VJSON).clone();
    assert_eq!(
        e.sha256().unwrap(),
        sha256(&slim.join("torch-cuda-linalg").join(VJSON))
    );
}

/// An index written with one preference is updated only with it: a run without --prefer on the
/// slim index (the same set, or only the core, which leaves the set as it is) and a run with
/// --prefer on the default index are refused; the indexes stay as they are.
fn a_preference_is_kept_by_every_update(wheels: &Path, default: &Path, slim: &Path) {
    let v = wheels.join("variants");
    let before = snapshot(slim);
    let slim_path = slim.join("torch-cuda-linalg").join(VJSON);
    for inputs in [vec![v.as_path()], vec![wheels.join(CORE).as_path()]] {
        let o = index(&inputs, slim);
        one_line(
            &o,
            &format!(
                "{}: lists nomagma first (written with --prefer nomagma); this run would list magma first",
                slim_path.display()
            ),
        );
        assert!(
            stderr(&o).contains("run with --prefer nomagma"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(snapshot(slim), before);
    let before_default = snapshot(default);
    let o = index_with(&[&v], default, &["--prefer", "nomagma"]);
    one_line(
        &o,
        "lists magma first (written without --prefer); this run would list nomagma first",
    );
    assert_eq!(snapshot(default), before_default);
}

/// Refused before anything is written: a set without the value (a split without --lazy-variant),
/// an index that would lack the nomagma wheel (the magma variant and the core only: uv would
/// install magma from it without a word), the local-label set, a malformed value.
fn prefer_refuses_what_it_cannot_serve(d: &Path, wheels: &Path) {
    let v = wheels.join("variants");
    let lone = d.join("lone");
    let input = d.join("in").join(WHEEL_NAME);
    assert_eq!(
        run(&["wheel", s(&input), "--out", s(&lone), "--quiet"])
            .status
            .code(),
        Some(0)
    );
    let fresh = d.join("refused");
    let (lone_v, magma, core) = (lone.join("variants"), v.join(VMAGMA), v.join(CORE));
    let refusals: [(Vec<&Path>, &str, &str); 5] = [
        (
            vec![&lone_v],
            "nomagma",
            "--prefer nomagma: not a value of torch :: torch_cuda_linalg in torch_cuda_linalg-2.5.1-variants.json (its values: magma)",
        ),
        (
            vec![&magma, &core],
            "nomagma",
            "would hold no nomagma wheel of torch_cuda_linalg-2.5.1 for cp311-cp311-linux_x86_64 (only magma): uv would install magma from it without a word",
        ),
        (
            vec![wheels],
            "nomagma",
            "--prefer nomagma: no PEP 825 variant set among the wheels given",
        ),
        (
            vec![&v],
            "slim",
            "--prefer slim: not a value of torch :: torch_cuda_linalg",
        ),
        (vec![&v], "No/Magma", "not a variant value"),
    ];
    for (inputs, value, says) in refusals {
        one_line(&index_with(&inputs, &fresh, &["--prefer", value]), says);
        assert!(!fresh.exists(), "nothing written for --prefer {value}");
    }
}

/// A wheel from `meta` (METADATA text) named `file`, with one module.
fn hostile_wheel(dir: &Path, file: &str, meta: &str) -> PathBuf {
    let tree = dir.join(format!("tree-{}", file.len()));
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(tree.join("x.dist-info")).unwrap();
    std::fs::write(tree.join("x.dist-info/METADATA"), meta).unwrap();
    std::fs::write(tree.join("x.py"), "").unwrap();
    let w = dir.join(file);
    make_pip_wheel(&tree, &w, "py3-none-any", false);
    w
}

#[test]
fn hostile_wheels_are_refused_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("index");
    let refused = |w: &Path, says: &str| {
        one_line(&index(&[w], &out), says);
        assert!(!out.exists(), "nothing written for {}", w.display());
    };
    let ok = "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n\n";
    refused(
        &hostile_wheel(
            d.path(),
            "x-1.0-py3-none-any.whl",
            "Metadata-Version: 2.1\nName: x<script>\nVersion: 1.0\n\n",
        ),
        "not a distribution name",
    );
    refused(
        &hostile_wheel(
            d.path(),
            "x-1.0+A-py3-none-any.whl",
            "Metadata-Version: 2.1\nName: x\nVersion: 1.0+A\n\n",
        ),
        "not a normalised PEP 440",
    );
    refused(
        &hostile_wheel(d.path(), "evil-1.0-py3-none-any.whl", ok),
        "METADATA says x 1.0",
    );
    refused(
        &hostile_wheel(d.path(), "x-1.0-py3-none-any-magma.whl", ok),
        "no x.dist-info/variant.json",
    );
    let quote = "Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Python: >=3\"><script>\n\n";
    refused(
        &hostile_wheel(d.path(), "x-1.0-py3-none-any.whl", quote),
        "not a version specifier",
    );
    let bomb = format!(
        "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n\n{}",
        "a".repeat(17 << 20)
    );
    refused(
        &hostile_wheel(d.path(), "x-1.0-py3-none-any.whl", &bomb),
        "more than",
    );
    let newline = hostile_wheel(d.path(), "x-1.0-py3-none-any.whl", ok);
    let renamed = d.path().join("x-1.0-py3\nnone-any.whl");
    std::fs::rename(&newline, &renamed).unwrap();
    refused(&renamed, "not a file name an index serves");
    let corrupt = d.path().join("y-1.0-py3-none-any.whl");
    std::fs::write(&corrupt, b"PK\x03\x04 not a zip").unwrap();
    refused(&corrupt, "not a readable zip");
    refused(d.path().join("notes.txt").as_path(), "notes.txt");
    // --out a file, --out a symbolic link: refused before anything is read or written.
    let good = hostile_wheel(d.path(), "x-1.0-py3-none-any.whl", ok);
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    one_line(&index(&[&good], &file), "not a directory");
    let target = d.path().join("elsewhere");
    std::fs::create_dir_all(&target).unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    one_line(&index(&[&good], &link), "symbolic link");
    assert!(
        std::fs::read_dir(&target).unwrap().next().is_none(),
        "nothing written through the link"
    );
    // And the good one is indexed.
    let o = index(&[&good], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.join("x/x-1.0-py3-none-any.whl").is_file());
}

/// The system pip (whatever version this machine has), offline but for the index server.
#[test]
fn system_pip_installs_the_split_from_the_index_over_http() {
    if !system_pip() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("index");
    assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
    let server = Server::start(&out);
    let pip = Path::new("python3");
    let v = Venv::new(&d.path().join("venv"));
    let install = |reqs: &[&str]| {
        let mut args = vec!["install", "-q", "--index-url", server.url.as_str()];
        args.extend_from_slice(reqs);
        let o = v.pip_from(pip, &args);
        assert!(o.status.success(), "pip install {reqs:?}: {}", stderr(&o));
    };
    install(&["torch"]);
    let core = "torch-2.5.1+split".to_string();
    assert_eq!(
        v.state(),
        (
            vec![core.clone(), "torch_cuda_linalg-2.5.1+1.magma".into()],
            1
        ),
        "the core and, by its dependency, the preferred variant"
    );
    install(&["torch-cuda-linalg==2.5.1+0.nomagma"]);
    assert_eq!(
        v.state(),
        (
            vec![core.clone(), "torch_cuda_linalg-2.5.1+0.nomagma".into()],
            1
        )
    );
    assert_eq!(
        v.lazy_bytes().unwrap(),
        std::fs::read(nomagma_lib()).unwrap()
    );
    v.check_clean();
}

/// The tools venv's `uv pip ARGS --python VENV`, without a cache or index settings from outside.
fn uv(tools: &Path, v: &Venv, args: &[&str]) -> Output {
    uv_with(tools, v, args, &[])
}

/// `uv` with `env` set (and no other index or preview setting from outside).
fn uv_with(tools: &Path, v: &Venv, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(tools.join("bin/uv"))
        .arg("pip")
        .args(args)
        .arg("--python")
        .arg(&v.python)
        .env("UV_NO_CACHE", "1")
        .env_remove("UV_FIND_LINKS")
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_EXTRA_INDEX_URL")
        .env_remove("UV_DEFAULT_INDEX")
        .env_remove("UV_INDEX")
        .env_remove("UV_PREVIEW_FEATURES")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `uv pip compile - ARGS` with `requirements` on stdin.
fn uv_compile(tools: &Path, v: &Venv, args: &[&str], requirements: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(tools.join("bin/uv"))
        .args(["pip", "compile", "-q", "--no-header", "--no-annotate", "-"])
        .args(args)
        .arg("--python")
        .arg(&v.python)
        .env("UV_NO_CACHE", "1")
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_PREVIEW_FEATURES")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(requirements.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn ok(o: Output, what: &str) -> Output {
    assert!(o.status.success(), "{what}: {}{}", stdout(&o), stderr(&o));
    o
}

/// What the steps of [`latest_pip_uv_and_twine_over_http`] share: the tools, the split's wheels,
/// the local-label index and the PEP 825 index, served.
struct HttpIndexes {
    tools: PathBuf,
    py: PathBuf,
    d: tempfile::TempDir,
    wheels: PathBuf,
    out: PathBuf,
    vout: PathBuf,
    server: Server,
    vserver: Server,
    core: String,
    magma_bytes: Vec<u8>,
}

impl HttpIndexes {
    fn start() -> HttpIndexes {
        let tools = wheel_tools();
        let py = tools.join("bin/python");
        let d = tempfile::tempdir().unwrap();
        let wheels = fixture_split(d.path(), "one");
        let (out, vout) = (d.path().join("index"), d.path().join("index-variants"));
        assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
        assert_eq!(
            index(&[&wheels.join("variants")], &vout).status.code(),
            Some(0)
        );
        let (server, vserver) = (Server::start(&out), Server::start(&vout));
        let magma_bytes = std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap();
        HttpIndexes {
            tools,
            py,
            d,
            wheels,
            out,
            vout,
            server,
            vserver,
            core: "torch-2.5.1+split".to_string(),
            magma_bytes,
        }
    }

    fn url(&self) -> &str {
        &self.server.url
    }

    fn vurl(&self) -> &str {
        &self.vserver.url
    }

    fn venv(&self, name: &str) -> Venv {
        Venv::new(&self.d.path().join(name))
    }

    /// `uv pip install -q --preview-features wheel-variants --index-url URL torch` (plus `extra`).
    fn uv_variants(&self, v: &Venv, url: &str, extra: &[&str], what: &str) -> Output {
        let mut args = vec![
            "install",
            "-q",
            "--preview-features",
            "wheel-variants",
            "--index-url",
            url,
        ];
        args.extend_from_slice(extra);
        args.push("torch");
        ok(uv(&self.tools, v, &args), what)
    }
}

/// The variants of the lazy wheel installed in `v`, from its `variant.json`.
fn installed_variants(v: &Venv) -> Vec<String> {
    let p = v
        .site
        .join("torch_cuda_linalg-2.5.1.dist-info/variant.json");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    doc["variants"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// pip 26.3, uv 0.13.9 (plain and variant mode) and twine 7.0.0 against the local-label index, the
/// PEP 825 index and its slim twin (`--prefer nomagma`) over HTTP.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip, uv and twine from PyPI: cargo test --release --features full-tests"
)]
fn latest_pip_uv_and_twine_over_http() {
    let h = HttpIndexes::start();
    pip_installs_switches_and_downloads_the_local_label_index(&h);
    let v = pip_and_uv_on_the_variant_index(&h);
    let sout = uv_installs_the_slim_index_by_flag_environment_and_toml(&h);
    let slim = Server::start(&sout);
    uv_switches_an_installed_variant(&h, &v, &slim.url);
    the_slim_index_has_no_plain_fallback(&h, &slim.url);
    a_lacking_slim_variant_is_refused_not_served(&h);
    a_stale_slim_index_installs_magma_silently(&h, &sout);
    // twine check: every wheel of the three indexes.
    for dir in [&h.out, &h.vout, &sout] {
        twine_checks_every_wheel(&h.tools, dir);
    }
}

/// pip 26.3: default by the core's dependency, the slim pin switches, pip check is clean; pip
/// download and `uv pip compile` take the same pair.
fn pip_installs_switches_and_downloads_the_local_label_index(h: &HttpIndexes) {
    let (py, url, core) = (&h.py, h.url(), &h.core);
    let v = h.venv("pip");
    ok(
        v.pip_from(py, &["install", "-q", "--index-url", url, "torch"]),
        "pip install torch",
    );
    assert_eq!(
        v.state(),
        (
            vec![core.clone(), "torch_cuda_linalg-2.5.1+1.magma".into()],
            1
        )
    );
    ok(
        v.pip_from(
            py,
            &[
                "install",
                "-q",
                "--index-url",
                url,
                "torch-cuda-linalg==2.5.1+0.nomagma",
            ],
        ),
        "pip switch",
    );
    assert_eq!(
        v.state(),
        (
            vec![core.clone(), "torch_cuda_linalg-2.5.1+0.nomagma".into()],
            1
        )
    );
    ok(v.pip_from(py, &["check"]), "pip check");
    // pip download: the core and the preferred variant, hash-checked against the fragments.
    let dl = h.d.path().join("dl");
    ok(
        v.pip_from(
            py,
            &["download", "-q", "--index-url", url, "-d", s(&dl), "torch"],
        ),
        "pip download",
    );
    let mut got: Vec<String> = std::fs::read_dir(&dl)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    got.sort();
    assert_eq!(got, [CORE, MAGMA]);
    // uv pip compile, plain: the same pair.
    let compiled = stdout(&ok(
        uv_compile(&h.tools, &v, &["--index-url", url], "torch\n"),
        "uv pip compile",
    ));
    assert_eq!(
        compiled
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        ["torch==2.5.1+split", "torch-cuda-linalg==2.5.1+1.magma"],
        "{compiled}"
    );
}

/// pip 26.3 on the variant index has no variant support and takes the plain fallback; uv in
/// variant mode takes the preferred (magma) variant wheel. Returns uv's venv.
fn pip_and_uv_on_the_variant_index(h: &HttpIndexes) -> Venv {
    let v = h.venv("pip-variants");
    ok(
        v.pip_from(&h.py, &["install", "-q", "--index-url", h.vurl(), "torch"]),
        "pip install from the variant index",
    );
    assert_eq!(
        v.state(),
        (vec![h.core.clone(), "torch_cuda_linalg-2.5.1".into()], 1)
    );
    assert!(
        !v.site
            .join("torch_cuda_linalg-2.5.1.dist-info/variant.json")
            .exists()
    );
    // uv in variant mode from the PEP 825 index: the preferred variant wheel.
    let v = h.venv("uv-variants");
    h.uv_variants(&v, h.vurl(), &[], "uv variant install");
    assert_eq!(
        v.state(),
        (vec![h.core.clone(), "torch_cuda_linalg-2.5.1".into()], 1)
    );
    assert!(
        v.site
            .join("torch_cuda_linalg-2.5.1.dist-info/variant.json")
            .exists(),
        "the magma variant wheel"
    );
    assert_eq!(v.lazy_bytes().unwrap(), h.magma_bytes);
    ok(uv(&h.tools, &v, &["check"]), "uv pip check");
    assert_eq!(installed_variants(&v), ["magma"]);
    v
}

/// `v` holds the core, one owner of the lazy library, the nomagma variant wheel and its bytes, and
/// `uv pip check` is clean.
fn assert_slim(h: &HttpIndexes, v: &Venv, what: &str) {
    let slim_state = (
        vec![h.core.clone(), "torch_cuda_linalg-2.5.1".to_string()],
        1,
    );
    assert_eq!(
        v.state(),
        slim_state,
        "{what}: the core and one owner of the library"
    );
    assert_eq!(
        installed_variants(v),
        ["nomagma"],
        "{what}: the nomagma variant wheel"
    );
    assert_eq!(
        v.lazy_bytes().unwrap(),
        std::fs::read(nomagma_lib()).unwrap(),
        "{what}"
    );
    ok(uv(&h.tools, v, &["check"]), what);
}

/// uv 0.13.9 has no selection of its own for a static-property namespace: no flag, setting or
/// environment variable (the ones it reads belong to its vendored nvidia/tpu providers); it takes
/// the values in the order the index's variants.json lists them. So the slim variant is the slim
/// index: the same wheels, `index --prefer nomagma`, chosen as the user's index by flag, by
/// environment variables alone, or by uv.toml. Returns the slim index's directory.
fn uv_installs_the_slim_index_by_flag_environment_and_toml(h: &HttpIndexes) -> PathBuf {
    let help = stdout(&ok(
        Command::new(h.tools.join("bin/uv"))
            .args(["pip", "install", "--help"])
            .output()
            .unwrap(),
        "uv help",
    ));
    assert!(
        !help.to_lowercase().contains("variant"),
        "uv grew a variant option: docs/wheel.md and this test need a look\n{help}"
    );
    let sout = h.d.path().join("index-slim");
    assert_eq!(
        index_with(
            &[&h.wheels.join("variants")],
            &sout,
            &["--prefer", "nomagma"]
        )
        .status
        .code(),
        Some(0)
    );
    let sserver = Server::start(&sout);
    let surl = sserver.url.as_str();
    // The slim index by flag.
    let v2 = h.venv("uv-slim-flag");
    h.uv_variants(&v2, surl, &[], "uv slim, flags");
    assert_slim(h, &v2, "--index-url SLIM");
    // By environment variables alone.
    let v2 = h.venv("uv-slim-env");
    let env = [
        ("UV_PREVIEW_FEATURES", "wheel-variants"),
        ("UV_DEFAULT_INDEX", surl),
    ];
    ok(
        uv_with(&h.tools, &v2, &["install", "-q", "torch"], &env),
        "uv slim, environment",
    );
    assert_slim(h, &v2, "UV_DEFAULT_INDEX=SLIM");
    // By uv.toml (the user's or the project's; here named with --config-file).
    let v2 = h.venv("uv-slim-toml");
    let toml = h.d.path().join("uv.toml");
    std::fs::write(&toml, format!("preview-features = [\"wheel-variants\"]\n\n[[index]]\nurl = \"{surl}\"\ndefault = true\n")).unwrap();
    ok(
        uv(
            &h.tools,
            &v2,
            &["install", "-q", "--config-file", s(&toml), "torch"],
        ),
        "uv slim, uv.toml",
    );
    assert_slim(h, &v2, "uv.toml [[index]] default = true");
    sout
}

/// Switching the installed magma variant `v`: the same version is installed already, so uv keeps
/// it until told to reinstall the lazy distribution; then it is the slim one, and back.
fn uv_switches_an_installed_variant(h: &HttpIndexes, v: &Venv, surl: &str) {
    h.uv_variants(v, surl, &[], "uv slim, no reinstall");
    assert_eq!(
        installed_variants(v),
        ["magma"],
        "an installed variant is kept without --reinstall-package"
    );
    let reinstall = ["--reinstall-package", "torch-cuda-linalg"];
    h.uv_variants(v, surl, &reinstall, "uv switch");
    assert_slim(h, v, "magma switched to slim");
    h.uv_variants(v, h.vurl(), &reinstall, "uv switch");
    assert_eq!(
        (installed_variants(v), v.state().1, v.lazy_bytes().unwrap()),
        (vec!["magma".to_string()], 1, h.magma_bytes.clone())
    );
}

/// The slim index has no plain fallback (it is the magma build): pip, and uv without variant mode,
/// install nothing from it rather than magma. uv without variant mode on the default PEP 825 index
/// takes the plain fallback, as pip.
fn the_slim_index_has_no_plain_fallback(h: &HttpIndexes, surl: &str) {
    let v2 = h.venv("pip-slim");
    let o = v2.pip_from(&h.py, &["install", "--index-url", surl, "torch"]);
    assert!(
        !o.status.success()
            && stderr(&o).contains("No matching distribution found for torch-cuda-linalg==2.5.1"),
        "{}",
        stderr(&o)
    );
    let o = uv(&h.tools, &v2, &["install", "--index-url", surl, "torch"]);
    assert!(
        !o.status.success()
            && stderr(&o).contains("torch-cuda-linalg==2.5.1 has only unsupported wheel variants"),
        "{}",
        stderr(&o)
    );
    assert_eq!(v2.state(), (Vec::<String>::new(), 0), "nothing installed");
    let v = h.venv("uv-plain");
    ok(
        uv(
            &h.tools,
            &v,
            &["install", "-q", "--index-url", h.vurl(), "torch"],
        ),
        "uv install, no variant mode",
    );
    assert!(
        v.site.join("torch_cuda_linalg-2.5.1.dist-info").is_dir()
            && !v
                .site
                .join("torch_cuda_linalg-2.5.1.dist-info/variant.json")
                .exists()
    );
}

/// The slim variant asked for where there is none (a split without --lazy-variant): `index
/// --prefer nomagma` refuses to write that slim index, so the user's slim index URL is not there
/// and uv says the package is not found, installing nothing; the default index still gives magma.
fn a_lacking_slim_variant_is_refused_not_served(h: &HttpIndexes) {
    let lone = h.d.path().join("lone");
    let input = h.d.path().join("in").join(WHEEL_NAME);
    assert_eq!(
        run(&[
            "wheel",
            s(&input),
            "--out",
            s(&lone.join("wheels")),
            "--quiet"
        ])
        .status
        .code(),
        Some(0)
    );
    let (lout, lslim) = (
        lone.join("pub/simple-variants"),
        lone.join("pub/simple-variants-slim"),
    );
    assert_eq!(
        index(&[&lone.join("wheels/variants")], &lout).status.code(),
        Some(0)
    );
    one_line(
        &index_with(
            &[&lone.join("wheels/variants")],
            &lslim,
            &["--prefer", "nomagma"],
        ),
        "not a value of torch :: torch_cuda_linalg",
    );
    let lserver = Server::start(&lone.join("pub"));
    let v = h.venv("uv-lacking");
    let missing = format!("{}simple-variants-slim/", lserver.url);
    let o = uv(
        &h.tools,
        &v,
        &[
            "install",
            "--preview-features",
            "wheel-variants",
            "--index-url",
            &missing,
            "torch",
        ],
    );
    assert!(
        !o.status.success()
            && stderr(&o).contains("Because torch was not found in the package registry"),
        "{}",
        stderr(&o)
    );
    assert_eq!(v.state(), (Vec::<String>::new(), 0), "nothing installed");
    let present = format!("{}simple-variants/", lserver.url);
    h.uv_variants(&v, &present, &[], "uv default");
    assert_eq!(installed_variants(&v), ["magma"]);
}

/// What the refusal prevents: a slim index whose nomagma wheel is gone (deleted by hand from the
/// one `index` wrote, `sout`). uv finds nomagma preferred but no wheel of it and installs the magma
/// variant without a word.
fn a_stale_slim_index_installs_magma_silently(h: &HttpIndexes, sout: &Path) {
    let stale = h.d.path().join("index-slim-stale");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(sout)
            .arg(&stale)
            .status()
            .unwrap()
            .success()
    );
    let tcl = stale.join("torch-cuda-linalg");
    for f in [VSLIM.to_string(), format!("{VSLIM}.metadata")] {
        std::fs::remove_file(tcl.join(f)).unwrap();
    }
    let html = std::fs::read_to_string(tcl.join("index.html")).unwrap();
    std::fs::write(
        tcl.join("index.html"),
        html.lines()
            .filter(|l| !l.contains(VSLIM))
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let mut p = raw_page(&stale, "torch-cuda-linalg");
    p["files"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["filename"] != VSLIM);
    std::fs::write(
        tcl.join("index.json"),
        serde_json::to_string_pretty(&p).unwrap(),
    )
    .unwrap();
    let stale_server = Server::start(&stale);
    let v = h.venv("uv-stale");
    let o = ok(
        uv(
            &h.tools,
            &v,
            &[
                "install",
                "--preview-features",
                "wheel-variants",
                "--index-url",
                &stale_server.url,
                "torch",
            ],
        ),
        "uv stale",
    );
    assert_eq!(installed_variants(&v), ["magma"], "{}", stderr(&o));
    assert!(
        !stderr(&o).to_lowercase().contains("warn"),
        "{}",
        stderr(&o)
    );
}

/// `twine check` passes every wheel under `dir`.
fn twine_checks_every_wheel(tools: &Path, dir: &Path) {
    let all: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|(r, _)| r.ends_with(".whl"))
        .map(|(_, p)| p)
        .collect();
    let o = Command::new(tools.join("bin/python"))
        .args(["-m", "twine", "check"])
        .args(&all)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "twine check: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(
        stdout(&o).matches("PASSED").count(),
        all.len(),
        "{}",
        stdout(&o)
    );
}

/// The real torch 2.11 wheel's split, served: `pip download` takes the core and the lazy wheel
/// (checked against the index's hashes), and `uv pip compile` resolves torch from the index, the
/// lazy distribution through the core's dependency, and the rest of torch's dependencies from
/// PyPI (metadata only; the full tier reaches PyPI anyway). Installing the 1 GB of torch is left
/// to the GPU machine (docs/evidence/wheel-gpu/).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, the real torch 2.11 wheel, pip and uv from PyPI: cargo test --release --features full-tests"
)]
fn torch_2_11_split_from_the_index_pip_download_and_uv_compile() {
    let (whl, _) = corpus("torch-2.11.0-cu130", false);
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let wheels = d.path().join("wheels");
    let o = run(&["wheel", s(&whl), "--out", s(&wheels), "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = d.path().join("index");
    let o = index(&[&wheels], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let r: IndexReport = typed(&o);
    assert_eq!((r.layout, r.added), (IndexLayout::LocalLabel, 2));
    let core = "torch-2.11.0+split-cp311-cp311-manylinux_2_28_x86_64.whl";
    let lazy = "torch_cuda_linalg-2.11.0+1.magma-cp311-cp311-manylinux_2_28_x86_64.whl";
    assert!(
        entry(&page(&out, "torch"), core)
            .requires_python
            .as_deref()
            .is_some_and(|r| r.starts_with(">=")),
        "torch's Requires-Python"
    );
    let server = Server::start(&out);
    let v = Venv::new(&d.path().join("venv"));
    let dl = d.path().join("dl");
    ok(
        v.pip_from(
            &tools.join("bin/python"),
            &[
                "download",
                "-q",
                "--no-deps",
                "--index-url",
                &server.url,
                "-d",
                s(&dl),
                "torch==2.11.0+split",
                "torch-cuda-linalg",
            ],
        ),
        "pip download",
    );
    for (project, f) in [("torch", core), ("torch-cuda-linalg", lazy)] {
        assert_eq!(
            sha256(&dl.join(f)),
            entry(&page(&out, project), f).sha256().unwrap(),
            "{f}"
        );
    }
    let args = [
        "--index-url",
        "https://pypi.org/simple",
        "--extra-index-url",
        &server.url,
        "--python-platform",
        "x86_64-manylinux_2_28",
    ];
    let compiled = stdout(&ok(
        uv_compile(&tools, &v, &args, "torch\n"),
        "uv pip compile",
    ));
    let pins: Vec<&str> = compiled.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(
        pins.contains(&"torch==2.11.0+split")
            && pins.contains(&"torch-cuda-linalg==2.11.0+1.magma"),
        "{compiled}"
    );
    assert!(
        pins.iter().any(|p| p.starts_with("nvidia-")),
        "torch's other dependencies from PyPI: {compiled}"
    );
}

/// Every path under `dir` with what it is: a regular file's bytes and modification time, a link's
/// target, or the kind of anything else. Unlike `snapshot` it opens nothing but regular files, so
/// it never blocks on a planted FIFO.
fn state(dir: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::FileTypeExt;
    walk(dir)
        .into_iter()
        .filter(|(rel, _)| rel != ".splitpkg.lock")
        .map(|(rel, p)| {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let what = if t.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else if t.is_fifo() {
                "fifo".to_string()
            } else {
                format!("{} {:?}", sha256(&p), m.modified().unwrap())
            };
            (rel, what)
        })
        .collect()
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// A run that must be refused: exit 2, one line naming `names`, the index as it was.
fn refused_unchanged(o: &Output, out: &Path, before: &[(String, String)], names: &str) {
    one_line(o, names);
    assert_eq!(state(out), before, "nothing written: {}", stderr(o));
}

/// Issue 50: on update, a `url` stored in an earlier page (`javascript:`, an off-site URL, a path
/// out of the index) never reaches a page: every entry is rebuilt from the file it names, in the
/// project given and in a project kept as it was; keys that would send installers elsewhere
/// (PEP 708 `tracks`, `alternate-locations`) and stale hashes are dropped, a hand-set yank stays.
#[test]
fn stored_urls_never_reach_a_page_entries_are_rebuilt_from_the_files() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("index");
    assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
    let clean: Vec<(String, Vec<u8>)> = ["torch", "torch-cuda-linalg"]
        .iter()
        .flat_map(|p| ["index.html", "index.json"].map(|f| format!("{p}/{f}")))
        .map(|rel| (rel.clone(), std::fs::read(out.join(&rel)).unwrap()))
        .collect();
    let hostile = [
        "javascript:alert(1)",
        "https://evil.example/x.whl",
        "../../../etc/passwd",
    ];
    for project in ["torch", "torch-cuda-linalg"] {
        let mut p = raw_page(&out, project);
        for (i, f) in p["files"].as_array_mut().unwrap().iter_mut().enumerate() {
            f["url"] = serde_json::json!(hostile[i % hostile.len()]);
            f["provenance"] = serde_json::json!("https://evil.example/prov");
            f["core-metadata"] = serde_json::json!({"sha256": "0".repeat(64)});
        }
        p["tracks"] = serde_json::json!(["https://evil.example/simple/torch/"]);
        p["alternate-locations"] = serde_json::json!(["https://evil.example/simple/"]);
        p["meta"]["api-version"] = serde_json::json!("9\"><script>");
        std::fs::write(
            out.join(project).join("index.json"),
            serde_json::to_string_pretty(&p).unwrap(),
        )
        .unwrap();
        std::fs::write(
            out.join(project).join("index.html"),
            "<a href=\"javascript:alert(1)\">x</a>",
        )
        .unwrap();
    }
    // The core given again (its project updated), the lazy project only kept.
    let o = index(&[&wheels.join(CORE)], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (rel, bytes) in &clean {
        let now = std::fs::read_to_string(out.join(rel)).unwrap();
        for bad in hostile
            .iter()
            .copied()
            .chain(["evil.example", "<script>", "tracks"])
        {
            assert!(!now.contains(bad), "{rel} still carries {bad:?}: {now}");
        }
        assert_eq!(
            now,
            String::from_utf8_lossy(bytes),
            "{rel}: rebuilt as a fresh run wrote it"
        );
    }
    // A yank by hand survives the rebuild; a yank that is not true or a reason does not.
    let path = out.join("torch/index.json");
    let mut p = raw_page(&out, "torch");
    p["files"][0]["yanked"] = serde_json::json!("bad build");
    std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    assert_eq!(index(&[&wheels.join(MAGMA)], &out).status.code(), Some(0));
    let core = entry(&page(&out, "torch"), CORE).clone();
    assert_eq!(core.yanked, Some(serde_json::json!("bad build")));
    assert_eq!(core.url, CORE.replace('+', "%2B"));
}

/// Issue 50: a page that lists a file whose size is not the file's (it changed behind the index's
/// back, the hash is stale), or a hash that is not a SHA-256, is refused rather than served on.
#[test]
fn a_page_that_lies_about_its_files_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("index");
    assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
    let path = out.join("torch-cuda-linalg/index.json");
    let good = std::fs::read(&path).unwrap();
    for (key, value, says) in [
        (
            "size",
            serde_json::json!(1),
            "changed behind the index's back",
        ),
        (
            "hashes",
            serde_json::json!({"sha256": "\"><script>"}),
            "without a SHA-256",
        ),
    ] {
        let mut p: serde_json::Value = serde_json::from_slice(&good).unwrap();
        p["files"][0][key] = value;
        std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
        let before = state(&out);
        // The other project given: the kept one is checked all the same.
        let o = index(&[&wheels.join(CORE)], &out);
        refused_unchanged(&o, &out, &before, says);
        assert!(
            stderr(&o).contains("torch-cuda-linalg/index.json"),
            "{}",
            stderr(&o)
        );
    }
}

/// Issue 50: a symbolic link where the index keeps a file — a `.metadata` (PEP 658) to
/// /etc/passwd, a wheel, a page, the lock, a project directory (given or kept) — is refused with
/// one line naming it, exit 2, nothing written: never kept, served, followed or replaced.
#[test]
fn symlinks_in_the_index_are_refused_and_nothing_is_written() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let fresh = || {
        let out = d.path().join("index");
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
        out
    };
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let cases: [(&str, &str); 6] = [
        (
            "torch-cuda-linalg/torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl.metadata",
            "/etc/passwd",
        ),
        ("torch/torch-2.5.1+split-cp311-cp311-linux_x86_64.whl", ""),
        ("torch/index.html", "/etc/passwd"),
        ("torch-cuda-linalg/index.json", ""),
        ("index.json", "/etc/passwd"),
        (".splitpkg.lock", "/etc/passwd"),
    ];
    for (rel, target) in cases {
        let out = fresh();
        let at = out.join(rel);
        // An empty target: the link points at a copy of the file itself, outside the index.
        let target = if target.is_empty() {
            let copy = elsewhere.join(at.file_name().unwrap());
            std::fs::copy(&at, &copy).unwrap();
            copy
        } else {
            PathBuf::from(target)
        };
        std::fs::remove_file(&at).unwrap();
        std::os::unix::fs::symlink(&target, &at).unwrap();
        let before = state(&out);
        // The core given: one case in a project given, the others kept or the index's own.
        let o = index(&[&wheels.join(CORE)], &out);
        refused_unchanged(&o, &out, &before, rel.rsplit('/').next().unwrap());
        if target == Path::new("/etc/passwd") {
            assert!(!stdout(&o).contains("root:"), "{}", stdout(&o));
        }
    }
    // A project directory that is a link: given, and kept.
    for given in [CORE, MAGMA] {
        let out = fresh();
        let moved = elsewhere.join("torch");
        let _ = std::fs::remove_dir_all(&moved);
        std::fs::rename(out.join("torch"), &moved).unwrap();
        std::os::unix::fs::symlink(&moved, out.join("torch")).unwrap();
        let before = state(&out);
        let moved_before = state(&moved);
        let o = index(&[&wheels.join(given)], &out);
        refused_unchanged(&o, &out, &before, "symbolic link");
        assert!(stderr(&o).contains("torch"), "{}", stderr(&o));
        assert_eq!(state(&moved), moved_before, "nothing written through it");
    }
}

/// Issue 50: a FIFO at a wheel's place (given, or in the index), at a page's, at the root
/// `index.json` or at the lock, and `/dev/zero` behind a `.whl` link, are refused without blocking
/// or reading: one line naming the file, exit 2, nothing written.
#[test]
fn fifos_and_devices_are_refused_without_hanging() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("index");
    // As inputs: nothing is created.
    let fifo = d.path().join("x-1.0-py3-none-any.whl");
    mkfifo(&fifo);
    let zero = d.path().join("z-1.0-py3-none-any.whl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (input, says) in [(&fifo, "a FIFO"), (&zero, "a symlink")] {
        let o = index(&[input.as_path()], &out);
        one_line(&o, says);
        assert!(stderr(&o).contains(s(input)), "{}", stderr(&o));
        assert!(!out.exists());
    }
    // In the index, where it keeps a file.
    for rel in [
        "torch/torch-2.5.1+split-cp311-cp311-linux_x86_64.whl",
        "torch-cuda-linalg/torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl.metadata",
        "torch/index.html",
        "torch-cuda-linalg/index.json",
        "index.json",
        ".splitpkg.lock",
    ] {
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(index(&[&wheels], &out).status.code(), Some(0));
        std::fs::remove_file(out.join(rel)).unwrap();
        mkfifo(&out.join(rel));
        let before = state(&out);
        let o = index(&[&wheels.join(CORE)], &out);
        refused_unchanged(&o, &out, &before, rel.rsplit('/').next().unwrap());
    }
}

/// Issue 50 and 53: the printed commands are safe to paste and install the split. `--out` is one
/// shell word however it is named (`sh` splits the printed serve command back into the same argv
/// and runs nothing else); pip and uv pin every project to the split's versions, with the local
/// index before the public one for uv; the `--prefer` index prints no pip command, as pip cannot
/// install from it.
#[test]
fn printed_commands_quote_out_and_pin_the_split() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let out = d.path().join("a b; touch pwned; 'q' $(touch pwned2)");
    let o = index(&[&wheels], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let c = typed::<IndexReport>(&o).commands;
    let serve = c.serve.as_str();
    let argv = serve
        .strip_prefix("python3 ")
        .unwrap_or_else(|| panic!("{serve}"));
    let split = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\n' {argv}"))
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(split.status.success(), "{}", stderr(&split));
    assert_eq!(
        stdout(&split).lines().collect::<Vec<_>>(),
        [
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--directory",
            s(&out),
            "8000"
        ]
    );
    assert!(!d.path().join("pwned").exists() && !d.path().join("pwned2").exists());
    let pins = "torch==2.5.1+split torch-cuda-linalg==2.5.1+1.magma";
    assert_eq!(
        c.pip,
        format!("pip install --extra-index-url http://127.0.0.1:8000/ {pins}")
    );
    assert_eq!(
        c.uv,
        format!("uv pip install --index http://127.0.0.1:8000/ {pins}")
    );
    assert!(stdout(&run(&["index", "--quiet", "--out", s(&out), s(&wheels)])).contains(pins));

    // The variant set: the lazy project's one version; the --prefer index has no pip command.
    let v = wheels.join("variants");
    let vout = d.path().join("index-variants");
    let r: IndexReport = typed(&index(&[&v], &vout));
    let vpins = "torch==2.5.1+split torch-cuda-linalg==2.5.1";
    assert_eq!(
        r.commands.uv,
        format!(
            "uv pip install --preview-features wheel-variants --index http://127.0.0.1:8000/ {vpins}"
        )
    );
    assert!(r.commands.pip.ends_with(vpins));
    let slim = d.path().join("index-slim");
    let r: IndexReport = typed(&index_with(&[&v], &slim, &["--prefer", "nomagma"]));
    assert!(r.commands.uv.ends_with(vpins));
    let pip = r.commands.pip.as_str();
    assert!(
        pip.starts_with("# none: pip does not read PEP 825 variant wheels"),
        "{pip}"
    );
}

/// Every project page of `out` (PEP 691 JSON and PEP 503 HTML) lists each of its files with the
/// hash and size of the file beside it and a URL that is the file's own name: valid whatever the
/// file's inode is shared with.
fn assert_pages_match_files(out: &Path) {
    let root: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    for project in root["projects"].as_array().unwrap() {
        let name = project["name"].as_str().unwrap();
        let p = page(out, name);
        let html = std::fs::read_to_string(out.join(name).join("index.html")).unwrap();
        for f in &p.files {
            let file = f.filename.as_str();
            let on_disk = out.join(name).join(file);
            let url = file.replace('+', "%2B");
            assert_eq!(f.url, url, "{name}/{file}");
            assert_eq!(f.sha256(), Some(sha256(&on_disk).as_str()));
            assert_eq!(f.size, Some(std::fs::metadata(&on_disk).unwrap().len()));
            let href = format!("<a href=\"{url}#sha256={}\"", sha256(&on_disk));
            assert!(html.contains(&href), "{href} in {html}");
        }
    }
}

fn inode(p: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.dev(), m.ino(), m.nlink())
}

/// Issue 53 item 4: `--prefer nomagma --share-with DEFAULT` hard-links every wheel of the default
/// PEP 825 index into the slim one (one inode, two names), writes its own pages and
/// `-variants.json`, and reports the bytes linked; a wheel the other index lacks or holds with
/// other bytes is copied, with a note. The other index is only read: a symbolic link or FIFO
/// where it keeps a wheel, or a link as the index itself, is refused with one line, nothing
/// written; across file systems (tmpfs /dev/shm against the temporary directory) the link fails
/// with EXDEV and the wheels are copied with the note saying so.
#[test]
fn share_with_links_the_default_index_and_copies_where_it_cannot() {
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let v = wheels.join("variants");
    let def = d.path().join("srv/simple-variants");
    let share = ["--prefer", "nomagma", "--share-with", s(&def)];
    slim_index_links_the_default_ones_wheels(&v, &def, &d.path().join("srv/slim"), &share);
    wheels_lacking_or_differing_are_copied_with_a_note(d.path(), &wheels);
    hostile_share_with_is_refused_writing_nothing(d.path(), &v, &wheels, &def);
    across_file_systems_the_wheels_are_copied(d.path(), &v, &share);
}

/// The default index written without `--share-with` (every wheel copied), then the slim one with
/// `share`: its wheels are the default's (one inode, counted in linked bytes), its pages and
/// `-variants.json` its own; written again, nothing new to link.
fn slim_index_links_the_default_ones_wheels(v: &Path, def: &Path, slim: &Path, share: &[&str]) {
    let o = index(&[v], def);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: IndexReport = typed(&o);
    assert_eq!(
        (r.sharing.linked_files, r.sharing.copied_files),
        (0, 4),
        "no --share-with: the core, two variant wheels and the fallback copied"
    );
    let o = index_with(&[v], slim, share);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let r: IndexReport = typed(&o);
    let sh = &r.sharing;
    let linked: u64 = [
        ("torch", CORE),
        ("torch-cuda-linalg", VMAGMA),
        ("torch-cuda-linalg", VSLIM),
    ]
    .iter()
    .map(|(project, f)| {
        let (a, b) = (def.join(project).join(f), slim.join(project).join(f));
        let (da, ia, na) = inode(&a);
        assert_eq!((da, ia), (inode(&b).0, inode(&b).1), "{f}: one inode");
        assert!(na >= 2, "{f}: {na} links");
        std::fs::metadata(&a).unwrap().len()
    })
    .sum();
    assert_eq!(
        (
            sh.from.as_deref(),
            sh.linked_files,
            sh.linked_bytes,
            sh.copied_files
        ),
        (Some(s(def)), 3, linked, 0),
        "{sh:?}"
    );
    // The slim index's own files are its own: pages and the reordered -variants.json.
    let vj = |i: &Path| inode(&i.join("torch-cuda-linalg").join(VJSON));
    assert_ne!(vj(def).1, vj(slim).1);
    assert_pages_match_files(def);
    assert_pages_match_files(slim);
    let mut args = vec!["index", "--quiet", "--out", s(slim)];
    args.extend_from_slice(share);
    args.push(s(v));
    let text = stdout(&run(&args));
    assert!(
        text.contains(&format!("shared with {}: 0 wheels linked", s(def))),
        "{text}"
    );
}

/// A wheel the other index lacks, and one it holds with other bytes: copied, with a note.
fn wheels_lacking_or_differing_are_copied_with_a_note(dir: &Path, wheels: &Path) {
    let other = dir.join("other");
    std::fs::create_dir_all(other.join("torch")).unwrap();
    std::fs::write(other.join("torch").join(CORE), b"not the core").unwrap();
    let out = dir.join("copies");
    let r: IndexReport = typed(&index_with(&[wheels], &out, &["--share-with", s(&other)]));
    let notes = r.sharing.notes.join("\n");
    assert_eq!(r.sharing.copied_files, 3, "{notes}");
    assert!(
        notes.contains(&format!(
            "{CORE}: copied, {} has other bytes",
            s(&other.join("torch").join(CORE))
        )),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("{MAGMA}: copied, not in --share-with")),
        "{notes}"
    );
    assert_eq!(inode(&out.join("torch").join(CORE)).2, 1);
}

/// Refused, nothing written: the other index is a link; a link or a FIFO at a wheel's place; a
/// project directory that is a link in the other index.
fn hostile_share_with_is_refused_writing_nothing(dir: &Path, v: &Path, wheels: &Path, def: &Path) {
    let link = dir.join("def-link");
    std::os::unix::fs::symlink(def, &link).unwrap();
    let fresh = dir.join("fresh");
    one_line(
        &index_with(&[v], &fresh, &["--share-with", s(&link)]),
        "--share-with",
    );
    assert!(!fresh.exists());
    let hostile = dir.join("hostile");
    let core_at = hostile.join("torch").join(CORE);
    std::fs::create_dir_all(core_at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(def.join("torch").join(CORE), &core_at).unwrap();
    let o = index_with(&[wheels], &fresh, &["--share-with", s(&hostile)]);
    one_line(&o, CORE);
    assert!(state(&fresh).is_empty(), "nothing written");
    std::fs::remove_file(&core_at).unwrap();
    mkfifo(&core_at);
    let o = index_with(&[wheels], &fresh, &["--share-with", s(&hostile)]);
    one_line(&o, "FIFO");
    assert!(state(&fresh).is_empty(), "nothing written");
    std::fs::remove_dir_all(hostile.join("torch")).unwrap();
    std::os::unix::fs::symlink(def.join("torch"), hostile.join("torch")).unwrap();
    one_line(
        &index_with(&[wheels], &fresh, &["--share-with", s(&hostile)]),
        "symbolic link",
    );
    assert!(state(&fresh).is_empty(), "nothing written");
}

/// Across file systems (tmpfs /dev/shm against `dir`'s): EXDEV, the wheels copied with the note.
fn across_file_systems_the_wheels_are_copied(dir: &Path, v: &Path, share: &[&str]) {
    let shm = Path::new("/dev/shm");
    let elsewhere = tempfile::tempdir_in(shm)
        .ok()
        .filter(|t| inode(t.path()).0 != inode(dir).0);
    let Some(elsewhere) = elsewhere else {
        eprintln!("no second file system at /dev/shm: the EXDEV fallback is not exercised here");
        return;
    };
    let far = elsewhere.path().join("slim");
    let r: IndexReport = typed(&index_with(&[v], &far, share));
    let notes = r.sharing.notes.join("\n");
    assert_eq!(
        (r.sharing.linked_files, r.sharing.copied_files),
        (0, 3),
        "{notes}"
    );
    assert!(
        notes.contains("no hard link (Invalid cross-device link"),
        "{notes}"
    );
    assert_pages_match_files(&far);
}

/// The serve command as `index` printed it, run by `sh` in its own process group; returns once
/// the port answers (however long a loaded machine takes to start Python; a server that exits
/// fails the test), and stops the group when dropped.
struct Served {
    child: Child,
}

impl Served {
    fn start(serve: &str, port: u16) -> Served {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(serve)
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{serve}: exited ({status})");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Served { child }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// A port no one listens on now (the test's server binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Issue 53 item 1: the local-label index's printed commands, run exactly as printed (a dry run
/// added) with pip and uv against the index served by its printed serve command on a free port
/// (`--url`), the public index reachable: torch is the split core and the lazy distribution the
/// chosen variant, the default and the other (`commands.other`). The control: an unpinned `torch`
/// with the same index gets a public torch (the fixture is 2.5.1).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip and uv with the public index: cargo test --release --features full-tests"
)]
fn printed_index_commands_install_the_split_over_http_with_the_public_index() {
    use crate::install_commands::{assert_split, resolve_as_printed};
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let wheels = fixture_split(d.path(), "one");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = d.path().join("index dir");
    let o = index_with(&[&wheels], &out, &["--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let c = typed::<IndexReport>(&o).commands;
    assert_eq!(c.url, url);
    let _server = Served::start(&c.serve, port);
    let unpinned = format!("pip install --extra-index-url {url} torch");
    let chosen = resolve_as_printed(&tools, &unpinned, &d.path().join("unpinned"));
    assert_ne!(chosen["torch"].0, "2.5.1+split", "{chosen:?}");
    let other = &c.other[0];
    assert_eq!((other.label.as_str(), c.other.len()), ("0.nomagma", 1));
    for (i, (printed, lazy)) in [
        (c.pip.as_str(), MAGMA),
        (c.uv.as_str(), MAGMA),
        (other.pip.as_deref().unwrap(), SLIM),
        (other.uv.as_str(), SLIM),
    ]
    .into_iter()
    .enumerate()
    {
        let chosen = resolve_as_printed(&tools, printed, &d.path().join(format!("c{i}")));
        assert_split(&chosen, "2.5.1", lazy, printed);
    }
}

/// Issue 53 items 2 and 4: the default PEP 825 index and its `--prefer nomagma` twin, written side
/// by side with `--share-with` (the twin's wheels are the default's files: one inode) and served
/// under one root by the printed serve command (the same for both). Every printed uv command —
/// each index's default and its other variant — run as printed (dry run added) installs the core
/// and the variant wheel it names; pip on the default index takes the plain fallback. Then the
/// slim index's default, the default index's other and its default, for real into fresh venvs: the
/// variant wheel each names, its library.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip and uv with the public index: cargo test --release --features full-tests"
)]
fn variant_indexes_share_one_root_and_every_printed_command_installs_its_variant() {
    use crate::install_commands::{assert_split, resolve_as_printed};
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let (dc, sc) = variant_indexes_side_by_side(d.path(), port);
    let _server = Served::start(&sc.serve, port);
    let (d_other, s_other) = (&dc.other[0], &sc.other[0]);
    assert_eq!(
        (d_other.label.as_str(), d_other.file.as_deref()),
        ("nomagma", Some(VSLIM))
    );
    assert_eq!(
        (s_other.label.as_str(), s_other.file.as_deref()),
        ("magma", Some(VMAGMA))
    );
    let fallback = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64.whl";
    for (i, (printed, lazy)) in [
        (dc.uv.as_str(), VMAGMA),
        (d_other.uv.as_str(), VSLIM),
        (sc.uv.as_str(), VSLIM),
        (s_other.uv.as_str(), VMAGMA),
        (dc.pip.as_str(), fallback),
    ]
    .into_iter()
    .enumerate()
    {
        let chosen = resolve_as_printed(&tools, printed, &d.path().join(format!("v{i}")));
        assert_split(&chosen, "2.5.1", lazy, printed);
    }
    // For real: the slim index's default, and the default index's other variant (by its URL),
    // each the nomagma variant wheel; the default index's default, the magma one.
    let magma_lib = std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap();
    let nomagma = std::fs::read(nomagma_lib()).unwrap();
    for (i, (printed, label, lib)) in [
        (&sc.uv, "nomagma", &nomagma),
        (&d_other.uv, "nomagma", &nomagma),
        (&dc.uv, "magma", &magma_lib),
    ]
    .into_iter()
    .enumerate()
    {
        let root = d.path().join(format!("real{i}"));
        install_printed_variant(&tools, printed, &root, label, lib);
    }
}

/// The fixture's default PEP 825 index and its `--prefer nomagma` twin written under `dir/srv`
/// with `--url`s on `port`, the twin sharing the default's wheels (one inode each) and both
/// printing one serve command for the root; the two reports' `commands` (default, twin).
fn variant_indexes_side_by_side(dir: &Path, port: u16) -> (IndexCommands, IndexCommands) {
    use crate::install_commands::shell;
    let v = fixture_split(dir, "one").join("variants");
    let srv = dir.join("srv");
    let (def, slim) = (
        srv.join("simple-variants"),
        srv.join("simple-variants-slim"),
    );
    let url = |name: &str| format!("http://127.0.0.1:{port}/{name}/");
    let o = index_with(&[&v], &def, &["--url", &url("simple-variants")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rd: IndexReport = typed(&o);
    let slim_url = url("simple-variants-slim");
    let share = [
        "--url",
        &slim_url,
        "--prefer",
        "nomagma",
        "--share-with",
        s(&def),
    ];
    let o = index_with(&[&v], &slim, &share);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let rs: IndexReport = typed(&o);
    let (dc, sc) = (&rd.commands, &rs.commands);
    assert_eq!(
        sc.serve,
        format!(
            "python3 -m http.server --bind 127.0.0.1 --directory {} {port}",
            shell(&srv)
        )
    );
    assert_eq!(dc.serve, sc.serve, "one root serves both");
    assert_eq!(rs.sharing.linked_files, 3);
    for (project, f) in [
        ("torch", CORE),
        ("torch-cuda-linalg", VMAGMA),
        ("torch-cuda-linalg", VSLIM),
    ] {
        let (a, b) = (
            inode(&def.join(project).join(f)),
            inode(&slim.join(project).join(f)),
        );
        assert!(a.0 == b.0 && a.1 == b.1 && a.2 >= 2, "{f}: {a:?} {b:?}");
    }
    assert_pages_match_files(&slim);
    (dc.clone(), sc.clone())
}

/// Issue 53 items 1 and 4 on the real torch 2.11 wheel (the public index has newer torch): the
/// local-label index and the PEP 825 index side by side, the second sharing the first's core
/// (`--share-with`: the core is the same file in both sets, linked, not copied), served by the
/// printed serve command; each printed default command run as printed (dry run added) resolves
/// to the split core and the variant named, torch's CUDA dependencies from the public index.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, the real torch 2.11 wheel, pip and uv with the public index: cargo test --release --features full-tests"
)]
fn torch_2_11_printed_index_commands_install_the_split_over_http() {
    use crate::install_commands::{assert_split, resolve_as_printed};
    let (whl, _) = corpus("torch-2.11.0-cu130", false);
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let wheels = d.path().join("wheels");
    let o = run(&["wheel", s(&whl), "--out", s(&wheels), "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let port = free_port();
    let srv = d.path().join("srv");
    let (plain, vars) = (srv.join("simple"), srv.join("simple-variants"));
    let url = |name: &str| format!("http://127.0.0.1:{port}/{name}/");
    let o = index_with(&[&wheels], &plain, &["--url", &url("simple")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rp: IndexReport = typed(&o);
    let o = index_with(
        &[&wheels.join("variants")],
        &vars,
        &["--url", &url("simple-variants"), "--share-with", s(&plain)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_valid("docs/index.schema.json", &json(&o));
    let rv: IndexReport = typed(&o);
    let core = "torch-2.11.0+split-cp311-cp311-manylinux_2_28_x86_64.whl";
    let core_size = std::fs::metadata(plain.join("torch").join(core))
        .unwrap()
        .len();
    assert_eq!(
        (rv.sharing.linked_files, rv.sharing.linked_bytes),
        (1, core_size),
        "{:?}",
        rv.sharing
    );
    let (a, b) = (
        inode(&plain.join("torch").join(core)),
        inode(&vars.join("torch").join(core)),
    );
    assert!(a.0 == b.0 && a.1 == b.1 && a.2 >= 2, "{a:?} {b:?}");
    eprintln!("torch 2.11: {core_size} bytes of core linked, not copied");
    let _server = Served::start(&rp.commands.serve, port);
    let magma = "torch_cuda_linalg-2.11.0+1.magma-cp311-cp311-manylinux_2_28_x86_64.whl";
    let vmagma = "torch_cuda_linalg-2.11.0-cp311-cp311-manylinux_2_28_x86_64-magma.whl";
    let fallback = "torch_cuda_linalg-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl";
    let (pc, vc) = (&rp.commands, &rv.commands);
    assert_eq!(pc.serve, vc.serve);
    for (i, (printed, lazy)) in [
        (pc.pip.as_str(), magma),
        (pc.uv.as_str(), magma),
        (vc.uv.as_str(), vmagma),
        (vc.pip.as_str(), fallback),
    ]
    .into_iter()
    .enumerate()
    {
        let chosen = resolve_as_printed(&tools, printed, &d.path().join(format!("t{i}")));
        assert_split(&chosen, "2.11.0", lazy, printed);
        assert!(
            chosen.keys().any(|k| k.starts_with("nvidia-")),
            "{printed}: {chosen:?}"
        );
    }
}
