//! `splitpkg wheel` on a fixture wheel built here from the gcc-built pip-like tree (with a real
//! WHEEL and RECORD): the split is lossless and deterministic, every RECORD holds, refusals write
//! nothing, and real pip (the system Python's, into fresh venvs, offline) installs the default and
//! the slim set, switches both ways, uninstalls the lazy wheel without touching the core, and
//! replaces a monolithic torch instead of sharing its file.

use crate::common::*;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use splitpkg::analysis::plan::Plan;
use splitpkg::input::pip::VariantMarker;
use splitpkg::wheel::document::{WheelReport, WrittenWheel};
use splitpkg::wheel::record;

const WHEEL_NAME: &str = "torch-2.5.1-cp311-cp311-linux_x86_64.whl";

/// A wheel of `tree` (a pip layout: torch/ and torch-2.5.1.dist-info/METADATA) with WHEEL and
/// RECORD; `tamper` changes one RECORD hash.
fn make_wheel(tree: &Path, out: &Path, tamper: bool) {
    make_pip_wheel(tree, out, "cp311-cp311-linux_x86_64", tamper)
}

fn fixture_wheel(dir: &Path) -> PathBuf {
    let w = dir.join(WHEEL_NAME);
    make_wheel(&fixture("pip-like"), &w, false);
    w
}

fn nomagma_lib() -> PathBuf {
    fixture("conda-nomagma/lib/libtorch_cuda_linalg.so")
}

/// Every member of a wheel with its bytes.
fn members(whl: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).unwrap();
            let mut d = Vec::new();
            f.read_to_end(&mut d).unwrap();
            (f.name().unwrap().to_string(), d)
        })
        .collect()
}

/// The RECORD of a wheel lists every member with its hash and size, itself without.
fn assert_record_holds(whl: &Path) {
    let m = members(whl);
    let (record_path, text) = m
        .iter()
        .find(|(p, _)| p.ends_with(".dist-info/RECORD"))
        .unwrap();
    let rows = record::parse(std::str::from_utf8(text).unwrap()).unwrap();
    assert_eq!(
        rows.len(),
        m.len(),
        "{}: RECORD lists every member once",
        whl.display()
    );
    for r in rows {
        if &r.path == record_path {
            assert_eq!((r.hash, r.size), (None, None));
            continue;
        }
        let d = &m[&r.path];
        assert_eq!(
            r.hash.as_deref(),
            Some(record::hash_of(d).as_str()),
            "{}: {}",
            whl.display(),
            r.path
        );
        assert_eq!(r.size, Some(d.len() as u64));
    }
}

fn wheel_cmd(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["wheel", s(input), "--out", s(out), "--quiet"];
    args.extend_from_slice(extra);
    run(&args)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The wheels directly in `dir`.
fn wheels_in(dir: &Path) -> Vec<String> {
    files_in(dir)
        .into_iter()
        .filter(|n| n.ends_with(".whl"))
        .collect()
}

/// A member as JSON.
fn member_json(m: &BTreeMap<String, Vec<u8>>, path: &str) -> serde_json::Value {
    serde_json::from_slice(m.get(path).unwrap_or_else(|| panic!("no {path}"))).unwrap()
}

#[test]
fn split_is_lossless_deterministic_and_every_record_holds() {
    let d = tempfile::tempdir().unwrap();
    let input = fixture_wheel(d.path());
    let nomagma = format!("nomagma={}", nomagma_lib().display());
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let mut reports = Vec::new();
    for out in [&a, &b] {
        let o = wheel_cmd(&input, out, &["--lazy-variant", &nomagma, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_valid("docs/wheel.schema.json", &json(&o));
        let r: WheelReport = typed(&o);
        assert!(r.lossless);
        assert_eq!(r.input_record_verified, 7);
        assert_eq!(r.lazy.len(), 2);
        assert!(r.missing.is_empty());
        reports.push(r);
    }
    let names = wheels_in(&a);
    assert_eq!(
        names,
        [
            "torch-2.5.1+split-cp311-cp311-linux_x86_64.whl",
            "torch_cuda_linalg-2.5.1+0.nomagma-cp311-cp311-linux_x86_64.whl",
            "torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl",
        ]
    );
    assert_eq!(files_in(&a).len(), 4, "the three wheels and variants/");
    let variant_names = files_in(&a.join("variants"));
    assert_eq!(
        variant_names,
        [
            "torch-2.5.1+split-cp311-cp311-linux_x86_64.whl",
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-magma.whl",
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl",
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64.whl",
            "torch_cuda_linalg-2.5.1-variants.json",
        ]
    );
    let every: Vec<String> = names
        .iter()
        .cloned()
        .chain(variant_names.iter().map(|n| format!("variants/{n}")))
        .collect();
    for n in &every {
        assert_eq!(
            std::fs::read(a.join(n)).unwrap(),
            std::fs::read(b.join(n)).unwrap(),
            "{n}: same input, same bytes"
        );
        if n.ends_with(".whl") {
            assert_record_holds(&a.join(n));
        }
    }
    the_report_hashes_are_the_files(&reports[0], &a);
    let input_m = members(&input);
    the_core_is_the_input_without_the_lazy_library(&input_m, &a.join(&names[0]));
    the_local_label_wheels_hold_the_library_and_the_marker(&input_m, &a, &names);
    the_pep825_set_carries_one_variant_each(&input_m, &a.join("variants"));
}

/// Each wheel's SHA-256 in the report (taken while it was written) is the file's on disk in `a`.
fn the_report_hashes_are_the_files(r: &WheelReport, a: &Path) {
    let listed: Vec<&WrittenWheel> = std::iter::once(&r.core)
        .chain(&r.lazy)
        .chain(&r.variants.wheels)
        .collect();
    assert_eq!(
        listed.len(),
        6,
        "core, two local-label wheels, two variants and the fallback"
    );
    for w in listed {
        use sha2::Digest;
        let file = w.file.as_str();
        let on_disk: String = sha2::Sha256::digest(std::fs::read(a.join(file)).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(w.sha256, on_disk, "{file}");
        assert_eq!(
            w.bytes,
            std::fs::metadata(a.join(file)).unwrap().len(),
            "{file}"
        );
    }
}

/// The core (the same file in both sets): everything of the input but the lazy library,
/// byte-identical; dist-info renamed to the new version.
fn the_core_is_the_input_without_the_lazy_library(
    input_m: &BTreeMap<String, Vec<u8>>,
    core: &Path,
) {
    let dir = core.parent().unwrap();
    assert_eq!(
        std::fs::read(core).unwrap(),
        std::fs::read(dir.join("variants").join(core.file_name().unwrap())).unwrap()
    );
    let core = members(core);
    assert!(!core.contains_key(LAZY_LIB));
    for (p, data) in input_m
        .iter()
        .filter(|(p, _)| !p.contains(".dist-info/") && p.as_str() != LAZY_LIB)
    {
        assert_eq!(core.get(p), Some(data), "{p}");
    }
    let meta = String::from_utf8(core["torch-2.5.1+split.dist-info/METADATA"].clone()).unwrap();
    assert!(
        meta.contains("Name: torch\n") && meta.contains("Version: 2.5.1+split\n"),
        "{meta}"
    );
    assert!(
        meta.contains("Requires-Dist: torch-cuda-linalg==2.5.1\n"),
        "{meta}"
    );
    assert_eq!(
        core["torch-2.5.1+split.dist-info/WHEEL"],
        input_m["torch-2.5.1.dist-info/WHEEL"]
    );
}

/// The local-label lazy wheels in `a` (`names` sorted): the library (the input's own, or the given
/// build), WHEEL, METADATA, RECORD and the marker naming this variant and how to get each one.
fn the_local_label_wheels_hold_the_library_and_the_marker(
    input_m: &BTreeMap<String, Vec<u8>>,
    a: &Path,
    names: &[String],
) {
    let magma = members(&a.join(&names[2]));
    let slim = members(&a.join(&names[1]));
    assert_eq!(magma[LAZY_LIB], input_m[LAZY_LIB]);
    assert_eq!(slim[LAZY_LIB], std::fs::read(nomagma_lib()).unwrap());
    for (w, label) in [(&magma, "1.magma"), (&slim, "0.nomagma")] {
        let di = format!("torch_cuda_linalg-2.5.1+{label}.dist-info");
        let keys: Vec<&str> = w.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                LAZY_LIB.to_string(),
                format!("{di}/METADATA"),
                format!("{di}/RECORD"),
                format!("{di}/WHEEL"),
                format!("{di}/splitpkg-variant.json")
            ]
        );
        let meta = String::from_utf8(w[&format!("{di}/METADATA")].clone()).unwrap();
        assert!(
            meta.contains(&format!("Version: 2.5.1+{label}\n"))
                && meta.contains("Requires-Dist: torch==2.5.1+split\n"),
            "{meta}"
        );
        // The marker names this variant and how to get each one in this layout.
        let m: VariantMarker =
            serde_json::from_slice(&w[&format!("{di}/splitpkg-variant.json")]).unwrap();
        assert_eq!(m.variant, label.split('.').nth(1).unwrap());
        let installs: Vec<&str> = m.variants.iter().map(|v| v.install.as_str()).collect();
        assert_eq!(
            installs,
            [
                "torch-cuda-linalg==2.5.1+1.magma",
                "torch-cuda-linalg==2.5.1+0.nomagma"
            ]
        );
        assert_eq!(
            m.variants[1].library_bytes,
            std::fs::read(nomagma_lib()).unwrap().len() as u64
        );
    }
}

/// The PEP 825 set in `v`: each variant wheel carries exactly one variant, labelled as its file
/// name says; the plain fallback is the preferred variant without variant.json; the index lists
/// both, preferred first in the static property's values (the default order).
fn the_pep825_set_carries_one_variant_each(input_m: &BTreeMap<String, Vec<u8>>, v: &Path) {
    let di = "torch_cuda_linalg-2.5.1.dist-info";
    for (label, lib) in [
        ("magma", &input_m[LAZY_LIB]),
        ("nomagma", &std::fs::read(nomagma_lib()).unwrap()),
    ] {
        let w = members(&v.join(format!(
            "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-{label}.whl"
        )));
        assert_eq!(&w[LAZY_LIB], lib);
        let vj = member_json(&w, &format!("{di}/variant.json"));
        assert_eq!(
            vj["$schema"],
            "https://variants-schema.wheelnext.dev/v0.2.0.json"
        );
        assert_eq!(
            vj["variants"],
            serde_json::json!({ label: { "torch": { "torch_cuda_linalg": [label] } } })
        );
        assert_eq!(
            vj["providers"]["torch"]["static-properties"]["torch_cuda_linalg"],
            serde_json::json!(["magma", "nomagma"])
        );
        let meta = String::from_utf8(w[&format!("{di}/METADATA")].clone()).unwrap();
        assert!(
            meta.contains("Version: 2.5.1\n")
                && meta.contains("Requires-Dist: torch==2.5.1+split\n"),
            "{meta}"
        );
    }
    let plain = members(&v.join("torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64.whl"));
    assert_eq!(plain[LAZY_LIB], input_m[LAZY_LIB]);
    assert!(!plain.contains_key(&format!("{di}/variant.json")));
    let index: serde_json::Value = serde_json::from_slice(
        &std::fs::read(v.join("torch_cuda_linalg-2.5.1-variants.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(index["variants"].as_object().unwrap().len(), 2);
    assert_eq!(
        index["default-priorities"]["namespace"],
        serde_json::json!(["torch"])
    );
}

/// `o` exited `code` with one line on stderr that says `says`, and nothing is in `out`.
fn refused_in_one_line(o: &std::process::Output, code: i32, says: &str, out: &Path) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    assert_eq!(stderr(o).lines().count(), 1, "{}", stderr(o));
    assert!(
        stderr(o).contains(says),
        "should say {says:?}: {}",
        stderr(o)
    );
    assert!(
        !out.exists() || files_in(out).is_empty(),
        "nothing written: {:?}",
        files_in(out)
    );
}

#[test]
fn refusals_name_the_file_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let input = fixture_wheel(d.path());
    let out = d.path().join("out");
    let one_line =
        |o: &std::process::Output, code: i32, says: &str| refused_in_one_line(o, code, says, &out);
    // A RECORD that does not match the bytes.
    let tampered = d.path().join("t").join(WHEEL_NAME);
    std::fs::create_dir_all(tampered.parent().unwrap()).unwrap();
    make_wheel(&fixture("pip-like"), &tampered, true);
    one_line(&wheel_cmd(&tampered, &out, &[]), 2, "RECORD says");
    // A corrupt zip.
    let corrupt = d.path().join("c").join(WHEEL_NAME);
    std::fs::create_dir_all(corrupt.parent().unwrap()).unwrap();
    std::fs::write(&corrupt, &std::fs::read(&input).unwrap()[..300]).unwrap();
    one_line(&wheel_cmd(&corrupt, &out, &[]), 2, s(&corrupt));
    // --out is a file.
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let o = wheel_cmd(&input, &file, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a directory"), "{}", stderr(&o));
    // Not a wheel: refused before anything is read, with or without a version to take (a new
    // user was told to "pass --version", a flag `wheel` lacks).
    one_line(
        &wheel_cmd(&fixture("pip-like"), &out, &[]),
        2,
        "splits a .whl",
    );
    let no_meta = d.path().join("no-meta");
    std::fs::create_dir_all(&no_meta).unwrap();
    let o = wheel_cmd(&no_meta, &out, &[]);
    assert!(!stderr(&o).contains("--version"), "{}", stderr(&o));
    one_line(&o, 2, "splits a .whl");
}

#[test]
fn variant_refusals_name_the_variant_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let input = fixture_wheel(d.path());
    let out = d.path().join("out");
    let one_line =
        |o: &std::process::Output, code: i32, says: &str| refused_in_one_line(o, code, says, &out);
    // The tree's own variant cannot be given again; a magma build is not a nomagma build.
    let magma = format!("magma={}", nomagma_lib().display());
    one_line(
        &wheel_cmd(&input, &out, &["--lazy-variant", &magma]),
        2,
        "--lazy-variant magma",
    );
    let not_slim = format!(
        "nomagma={}",
        fixture("pip-like/torch/lib/libtorch_cuda_linalg.so").display()
    );
    one_line(
        &wheel_cmd(&input, &out, &["--lazy-variant", &not_slim]),
        1,
        "not a nomagma build",
    );
}

#[test]
fn unsplittable_wheels_get_plans_answer_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let one_line =
        |o: &std::process::Output, code: i32, says: &str| refused_in_one_line(o, code, says, &out);
    // A wheel whose payload is reachable without the lazy library: a negative verdict (exit 1).
    let leak = d.path().join("leak-tree");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("eager-leak"))
            .arg(&leak)
            .status()
            .unwrap()
            .success()
    );
    std::fs::create_dir_all(leak.join("torch-2.5.1.dist-info")).unwrap();
    std::fs::write(
        leak.join("torch-2.5.1.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n",
    )
    .unwrap();
    let leaky = d.path().join("l").join(WHEEL_NAME);
    std::fs::create_dir_all(leaky.parent().unwrap()).unwrap();
    make_wheel(&leak, &leaky, false);
    one_line(&wheel_cmd(&leaky, &out, &[]), 1, "NOT CONFINED");
    // A wheel without the lazy library (torch 1.10): `plan`'s answer and exit code (1), decided
    // from the zip's directory before anything is inflated.
    let bare = d.path().join("bare-tree");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(fixture("pip-like"))
            .arg(&bare)
            .status()
            .unwrap()
            .success()
    );
    std::fs::remove_file(bare.join(LAZY_LIB)).unwrap();
    let no_lazy = d.path().join("n").join(WHEEL_NAME);
    std::fs::create_dir_all(no_lazy.parent().unwrap()).unwrap();
    make_wheel(&bare, &no_lazy, false);
    one_line(
        &wheel_cmd(&no_lazy, &out, &[]),
        1,
        "no member is named libtorch_cuda_linalg.so",
    );
    assert_eq!(
        run_path(&["plan", "--quiet"], &no_lazy).status.code(),
        Some(1)
    );
    one_line(
        &wheel_cmd(&no_lazy, &out, &["--lazy", "libnothing_*.so"]),
        2,
        "matches no member",
    );
    assert_eq!(
        run_path(&["plan", "--quiet", "--lazy", "libnothing_*.so"], &no_lazy)
            .status
            .code(),
        Some(2)
    );
}

/// The fixture wheel in `d` split with both variants into `d/wheels`: (input, out).
fn split_with_both_variants(d: &Path) -> (PathBuf, PathBuf) {
    let input = fixture_wheel(d);
    let out = d.join("wheels");
    let nomagma = format!("nomagma={}", nomagma_lib().display());
    let o = wheel_cmd(&input, &out, &["--lazy-variant", &nomagma]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (input, out)
}

#[test]
fn real_pip_installs_default_slim_switches_and_uninstalls() {
    if !system_pip() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_, out) = split_with_both_variants(d.path());
    let magma_bytes = std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap();
    let slim_bytes = std::fs::read(nomagma_lib()).unwrap();
    let core = ["torch-2.5.1+split".to_string()];
    let with = |label: &str| vec![core[0].clone(), format!("torch_cuda_linalg-2.5.1+{label}")];

    // Default: core + the preferred variant.
    let v = Venv::new(&d.path().join("default"));
    v.install(&out, &["torch"]);
    assert_eq!(v.state(), (with("1.magma"), 1));
    assert_eq!(v.lazy_bytes().unwrap(), magma_bytes);
    v.check_clean();
    // Switch to slim, and back: one owner after each.
    v.install(&out, &["torch-cuda-linalg==2.5.1+0.nomagma"]);
    assert_eq!(
        (v.state(), v.lazy_bytes().unwrap()),
        ((with("0.nomagma"), 1), slim_bytes.clone())
    );
    v.check_clean();
    v.install(&out, &["torch-cuda-linalg==2.5.1+1.magma"]);
    assert_eq!(
        (v.state(), v.lazy_bytes().unwrap()),
        ((with("1.magma"), 1), magma_bytes.clone())
    );
    // `splitpkg plan` on the environment says which variant is installed and what switching saves.
    let o = run(&["plan", s(&v.site), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inst = typed::<Plan>(&o).installed.unwrap();
    assert_eq!(inst.variant.as_deref(), Some("magma"), "{inst:?}");
    assert_eq!(inst.owners.len(), 1);
    assert_eq!(inst.switch[0].variant, "nomagma");
    assert_eq!(
        inst.switch[0].saves_bytes,
        magma_bytes.len() as i64 - slim_bytes.len() as i64
    );
    assert_eq!(inst.switch[0].install, "torch-cuda-linalg==2.5.1+0.nomagma");
    let text = stdout(&run(&["plan", s(&v.site)]));
    assert!(text.contains("installed (pip): torch-cuda-linalg 2.5.1+1.magma owns torch/lib/libtorch_cuda_linalg.so"), "{text}");
    // Uninstalling the lazy distribution leaves every core file.
    let o = v.pip(&["uninstall", "-q", "-y", "torch-cuda-linalg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(v.state(), (core.to_vec(), 0));
    assert!(v.lazy_bytes().is_none());
    for f in [
        "torch/__init__.py",
        "torch/lib/libtorch_cuda.so",
        "torch/lib/libtorch_cpu.so",
    ] {
        assert!(v.site.join(f).exists(), "{f} is still there");
    }
}

/// The slim set in one command; pip without variant support on the PEP 825 set; a monolithic
/// torch replaced by the core.
#[test]
fn real_pip_installs_the_slim_set_the_fallback_and_over_a_monolithic_torch() {
    if !system_pip() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (input, out) = split_with_both_variants(d.path());
    let magma_bytes = std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap();
    let slim_bytes = std::fs::read(nomagma_lib()).unwrap();
    let core = ["torch-2.5.1+split".to_string()];
    let with = |label: &str| vec![core[0].clone(), format!("torch_cuda_linalg-2.5.1+{label}")];
    // The slim set in one command.
    let v = Venv::new(&d.path().join("slim"));
    v.install(&out, &["torch", "torch-cuda-linalg==2.5.1+0.nomagma"]);
    assert_eq!(
        (v.state(), v.lazy_bytes().unwrap()),
        ((with("0.nomagma"), 1), slim_bytes.clone())
    );
    v.check_clean();
    let o = run(&["plan", s(&v.site), "--json"]);
    let inst = typed::<Plan>(&o).installed.unwrap();
    assert_eq!(
        (inst.variant.as_deref(), inst.switch[0].variant.as_str()),
        (Some("nomagma"), "magma"),
        "{inst:?}"
    );

    // pip without variant support, pointed at the PEP 825 set, takes the plain fallback (the
    // preferred variant) and ignores the variant wheels.
    let v = Venv::new(&d.path().join("variants-dir"));
    v.install(&out.join("variants"), &["torch"]);
    assert_eq!(
        (v.state(), v.lazy_bytes().unwrap()),
        (
            (vec![core[0].clone(), "torch_cuda_linalg-2.5.1".into()], 1),
            magma_bytes.clone()
        )
    );
    assert!(
        !v.site
            .join("torch_cuda_linalg-2.5.1.dist-info/variant.json")
            .exists()
    );
    v.check_clean();

    // A monolithic torch of the same version installed first: installing a lazy wheel replaces it
    // with the core (the lazy wheel requires torch==2.5.1+split); the file never has two owners.
    let mono = d.path().join("mono");
    std::fs::create_dir_all(&mono).unwrap();
    std::fs::copy(&input, mono.join(WHEEL_NAME)).unwrap();
    let v = Venv::new(&d.path().join("mono-env"));
    v.install(&mono, &["torch"]);
    assert_eq!(v.state(), (vec!["torch-2.5.1".to_string()], 1));
    v.install(&out, &["torch-cuda-linalg==2.5.1+0.nomagma"]);
    assert_eq!(
        (v.state(), v.lazy_bytes().unwrap()),
        ((with("0.nomagma"), 1), slim_bytes)
    );
    v.check_clean();
}

/// Every written wheel passes `python -m installer --validate-record all`.
fn installer_accepts(tools: &Path, whl: &Path, dest: &Path) {
    let o = Command::new(tools.join("bin/python"))
        .args(["-m", "installer", "--validate-record", "all", "--destdir"])
        .arg(dest)
        .arg(whl)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "installer --validate-record all {}: {}{}",
        whl.display(),
        stdout(&o),
        stderr(&o)
    );
}

/// The fixture split through PyPA `installer` (every RECORD row validated), variantlib and uv:
/// the default install gets the preferred variant, one pin the slim one, switching back and
/// uninstalling the lazy distribution keep the core, a monolithic torch is replaced, uv's variant
/// mode picks the preferred variant wheel; `uv pip check` is clean and one distribution owns the
/// library throughout.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, installer and uv from PyPI: cargo test --release --features full-tests"
)]
fn installer_and_uv_accept_the_split() {
    let tools = wheel_tools();
    let d = tempfile::tempdir().unwrap();
    let input = fixture_wheel(d.path());
    let out = d.path().join("wheels");
    let nomagma = format!("nomagma={}", nomagma_lib().display());
    let o = wheel_cmd(&input, &out, &["--lazy-variant", &nomagma]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let vdir = out.join("variants");
    let every = wheels_in(&out)
        .into_iter()
        .map(|n| out.join(n))
        .chain(wheels_in(&vdir).into_iter().map(|n| vdir.join(n)));
    for (i, w) in every.enumerate() {
        installer_accepts(&tools, &w, &d.path().join(format!("dest{i}")));
    }
    variantlib_validates_the_variant_set(&tools, &vdir);
    let uv = UvOffline(tools.join("bin/uv"));
    uv_installs_pins_switches_and_uninstalls(&uv, d.path(), &out);
    uv_replaces_a_monolithic_torch(&uv, d.path(), &input, &out);
    uv_variant_mode_prefers_then_switches_by_path(&uv, d.path(), &vdir);
}

/// variantlib validates the PEP 825 set: each variant wheel's variant.json against its label and
/// against the index file.
fn variantlib_validates_the_variant_set(tools: &Path, vdir: &Path) {
    let o = Command::new(tools.join("bin/python"))
        .arg(repo().join("tools/check-variant-wheels.py"))
        .arg(vdir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "check-variant-wheels: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(
        stdout(&o).lines().filter(|l| l.starts_with("ok ")).count(),
        5,
        "{}",
        stdout(&o)
    );
}

/// `uv pip` (the binary), without a cache and ignoring the caller's UV_FIND_LINKS.
struct UvOffline(PathBuf);

impl UvOffline {
    /// `uv pip ARGS --python V`, which must succeed.
    fn run(&self, v: &Venv, args: &[&str]) {
        let o = Command::new(&self.0)
            .args(["pip"])
            .args(args)
            .arg("--python")
            .arg(&v.python)
            .env("UV_NO_CACHE", "1")
            .env_remove("UV_FIND_LINKS")
            .output()
            .unwrap();
        assert!(o.status.success(), "uv pip {args:?}: {}", stderr(&o));
    }

    /// `uv pip install -q --offline --no-index --find-links LINKS REQ`.
    fn install(&self, v: &Venv, links: &Path, req: &str) {
        let args = [
            "install",
            "-q",
            "--offline",
            "--no-index",
            "--find-links",
            s(links),
            req,
        ];
        self.run(v, &args);
    }
}

/// `v` holds the split's core and `lazy` (the lazy distribution's dist-info name), one owner of
/// the library, with `bytes`.
fn assert_core_and_lazy(v: &Venv, lazy: &str, bytes: &[u8]) {
    assert_eq!(
        v.state(),
        (vec!["torch-2.5.1+split".into(), lazy.to_string()], 1)
    );
    assert_eq!(v.lazy_bytes().unwrap(), bytes);
}

/// The default install gets the magma variant, the slim pin switches, switching back and then
/// uninstalling the lazy distribution keeps every core file; `uv pip check` is clean.
fn uv_installs_pins_switches_and_uninstalls(uv: &UvOffline, d: &Path, links: &Path) {
    let (magma, slim) = (
        std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap(),
        std::fs::read(nomagma_lib()).unwrap(),
    );
    let v = Venv::new(&d.join("uv-default"));
    uv.install(&v, links, "torch");
    assert_eq!(
        v.state(),
        (
            vec![
                "torch-2.5.1+split".into(),
                "torch_cuda_linalg-2.5.1+1.magma".into()
            ],
            1
        )
    );
    uv.install(&v, links, "torch-cuda-linalg==2.5.1+0.nomagma");
    assert_core_and_lazy(&v, "torch_cuda_linalg-2.5.1+0.nomagma", &slim);
    uv.run(&v, &["check"]);
    // Switch back, then uninstall the lazy distribution: every core file stays.
    uv.install(&v, links, "torch-cuda-linalg==2.5.1+1.magma");
    assert_core_and_lazy(&v, "torch_cuda_linalg-2.5.1+1.magma", &magma);
    uv.run(&v, &["uninstall", "-q", "torch-cuda-linalg"]);
    assert_eq!(v.state(), (vec!["torch-2.5.1+split".into()], 0));
    for f in [
        "torch/__init__.py",
        "torch/lib/libtorch_cuda.so",
        "torch/lib/libtorch_cpu.so",
    ] {
        assert!(v.site.join(f).exists(), "{f} is still there");
    }
}

/// A monolithic torch installed first: the slim pin replaces it with the core; one owner.
fn uv_replaces_a_monolithic_torch(uv: &UvOffline, d: &Path, input: &Path, links: &Path) {
    let mono = d.join("mono");
    std::fs::create_dir_all(&mono).unwrap();
    std::fs::copy(input, mono.join(WHEEL_NAME)).unwrap();
    let v = Venv::new(&d.join("uv-mono"));
    uv.install(&v, &mono, "torch");
    assert_eq!(v.state(), (vec!["torch-2.5.1".into()], 1));
    uv.install(&v, links, "torch-cuda-linalg==2.5.1+0.nomagma");
    let slim = std::fs::read(nomagma_lib()).unwrap();
    assert_core_and_lazy(&v, "torch_cuda_linalg-2.5.1+0.nomagma", &slim);
    uv.run(&v, &["check"]);
}

/// uv's variant mode (preview) on the PEP 825 set: the default is the preferred variant; the
/// other one is chosen by installing its variant wheel by path; one owner all along, and `plan`
/// on the site names the installed PEP 825 variant.
fn uv_variant_mode_prefers_then_switches_by_path(uv: &UvOffline, d: &Path, vdir: &Path) {
    let variant_mode = [
        "install",
        "-q",
        "--offline",
        "--no-index",
        "--preview-features",
        "wheel-variants",
        "--find-links",
        s(vdir),
    ];
    let v = Venv::new(&d.join("uv-variants"));
    uv.run(&v, &[&variant_mode[..], &["torch"]].concat());
    let magma = std::fs::read(fixture("pip-like").join(LAZY_LIB)).unwrap();
    assert_core_and_lazy(&v, "torch_cuda_linalg-2.5.1", &magma);
    assert!(
        v.site
            .join("torch_cuda_linalg-2.5.1.dist-info/variant.json")
            .exists(),
        "installed from the magma variant wheel"
    );
    let slim = vdir.join("torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl");
    uv.run(
        &v,
        &[
            &variant_mode[..],
            &["--reinstall-package", "torch-cuda-linalg", s(&slim)],
        ]
        .concat(),
    );
    assert_eq!(v.state().1, 1);
    assert_eq!(
        v.lazy_bytes().unwrap(),
        std::fs::read(nomagma_lib()).unwrap()
    );
    let plan: Plan = typed(&run(&["plan", s(&v.site), "--json"]));
    let installed = plan.installed.unwrap();
    assert_eq!(installed.variant.as_deref(), Some("nomagma"));
    assert!(installed.owners[0].pep825_variant);
    uv.run(&v, &["check"]);
}

/// The real torch 2.11 CUDA wheel: split losslessly and deterministically (two runs, same bytes),
/// and PyPA `installer` validates every RECORD row of the core (11,8xx members) and the lazy wheel.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, the real torch 2.11 wheel and installer from PyPI: cargo test --release --features full-tests"
)]
fn torch_2_11_wheel_splits_losslessly_and_installer_validates_it() {
    let (whl, _) = corpus("torch-2.11.0-cu130", false);
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let mut reports = Vec::new();
    for out in [&a, &b] {
        let o = wheel_cmd(&whl, out, &["--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_valid("docs/wheel.schema.json", &json(&o));
        reports.push(typed::<WheelReport>(&o));
    }
    let r = &reports[0];
    assert!(r.lossless);
    assert_eq!(
        r.core.file,
        "torch-2.11.0+split-cp311-cp311-manylinux_2_28_x86_64.whl"
    );
    assert_eq!(
        r.lazy[0].file,
        "torch_cuda_linalg-2.11.0+1.magma-cp311-cp311-manylinux_2_28_x86_64.whl"
    );
    assert_eq!(r.missing[0].variant, "nomagma");
    assert!(r.input_record_verified > 10_000);
    // The wheel types have no PartialEq: compared as the JSON they are written as.
    let wheels = |r: &WheelReport| serde_json::to_value((&r.core, &r.lazy)).unwrap();
    assert_eq!(
        wheels(&reports[0]),
        wheels(&reports[1]),
        "core and lazy: same input, same wheels"
    );
    let tools = wheel_tools();
    for (i, n) in wheels_in(&a).iter().enumerate() {
        installer_accepts(&tools, &a.join(n), &d.path().join(format!("dest{i}")));
    }
    // The lazy wheel holds the library the input had, byte for byte.
    let lazy = members(&a.join(&r.lazy[0].file));
    let mut z = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap()).unwrap();
    let mut want = Vec::new();
    z.by_name(LAZY_LIB).unwrap().read_to_end(&mut want).unwrap();
    assert_eq!(lazy[LAZY_LIB], want);
}
