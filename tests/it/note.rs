//! The ELF dlopen metadata note (`.note.dlopen`, UAPI.12) on gcc-built fixtures: `inspect`/`plan`
//! read notes made as systemd's ELF_NOTE_DLOPEN macro makes them (fixtures/src/dlopen_note.h) and
//! report declared and found edges side by side; `splitpkg note` writes one that `readelf -n`
//! shows, that reads back, that leaves every loaded byte as it was, and whose library still loads
//! and runs; `emit --dlopen-note` renders the build step, and the step runs.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::graph::EdgeKind;
use splitpkg::analysis::plan::Plan;
use splitpkg::analysis::warning::WarningKind;
use splitpkg::elf::note::WrittenNote;
use splitpkg::elf::{DlopenEntry, Priority};

use crate::inspect::file;

/// A copy of fixture `name` in a temporary directory (tests write into it).
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let dst = d.path().join(name);
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    (d, dst)
}

/// readelf's output. Before binutils 2.43 `readelf -n` does not know the note type: it prints the
/// note and exits 1 (as on the gcc-built fixture made like systemd's macro), so only a failure
/// that printed nothing counts.
fn readelf(args: &[&str], file: &Path) -> String {
    let o = Command::new("readelf")
        .args(args)
        .arg(file)
        .output()
        .expect("readelf (binutils)");
    assert!(
        o.status.success() || !o.stdout.is_empty(),
        "readelf {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// (file offset, file size) of every PT_LOAD, as readelf prints them.
fn loads(file: &Path) -> Vec<(usize, usize)> {
    readelf(&["-lW"], file)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| usize::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            (hex(f[1]), hex(f[4]))
        })
        .collect()
}

/// Every loaded byte of `new` is `old`'s, except the ELF header's section-table fields.
fn assert_loaded_bytes_identical(old: &Path, new: &Path) {
    let (a, b) = (std::fs::read(old).unwrap(), std::fs::read(new).unwrap());
    let segments = loads(old);
    assert!(!segments.is_empty());
    assert_eq!(segments, loads(new), "the program headers are the same");
    let allowed = splitpkg::elf::note::section_table_fields(a[4] == 2);
    for (off, size) in segments {
        for i in off..off + size {
            if a[i] != b[i] {
                assert!(
                    allowed.iter().any(|r| r.contains(&i)),
                    "loaded byte {i:#x} changed"
                );
            }
        }
    }
    // Nothing else changed either: the rest is appended.
    let header = splitpkg::elf::note::section_table_fields(a[4] == 2);
    let changed = (0..a.len()).find(|&i| a[i] != b[i] && !header.iter().any(|r| r.contains(&i)));
    assert_eq!(changed, None, "only appended, apart from the header fields");
    assert!(b.len() > a.len());
}

fn note(lib: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "note",
        lib.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// The note as `inspect --json` reads it from one library (alone in a directory: `inspect` reads trees).
fn notes_of(lib: &Path) -> Vec<DlopenEntry> {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(lib, d.path().join(lib.file_name().unwrap())).unwrap();
    let mut ins = crate::inspect::inspect_with(d.path(), &[]);
    ins.files.remove(0).elf.dlopen_notes
}

#[test]
fn notes_made_like_systemds_macro_are_read_through_segments_and_sections() {
    let lib = fixture("dlopen-note").join("lib/libtorch_cuda.so");
    let n = notes_of(&lib);
    assert_eq!(n.len(), 2, "{n:?}");
    let feature = |f: &str| (n.iter().find(|e| e.feature.as_deref() == Some(f))).unwrap();
    let linalg = feature("linalg");
    assert_eq!(linalg.soname, ["libtorch_cuda_linalg.so"]);
    assert_eq!(linalg.priority, Priority::Recommended);
    assert_eq!(
        linalg.description.as_deref(),
        Some("Linear algebra on the GPU (MAGMA or not)")
    );
    let tracing = feature("tracing");
    assert_eq!(
        tracing.soname,
        ["libnvtx_missing.so.3", "libnvtx_missing.so"]
    );
    // Section headers stripped: the PT_NOTE segment alone still gives the same entries.
    let d = tempfile::tempdir().unwrap();
    let bare = d.path().join("libtorch_cuda.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes[0x28..0x30].fill(0); // e_shoff
    bytes[0x3c..0x40].fill(0); // e_shnum, e_shstrndx
    std::fs::write(&bare, &bytes).unwrap();
    assert_eq!(notes_of(&bare), n);
}

#[test]
fn plan_reports_declared_and_found_edges_side_by_side() {
    let o = run(&[
        "plan",
        fixture("dlopen-note").to_str().unwrap(),
        "--json",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "confined: {}", stderr(&o));
    assert_valid("docs/plan.schema.json", &json(&o));
    let plan: Plan = typed(&o);
    let steps = &plan
        .lazy_library
        .as_ref()
        .expect("a lazy library")
        .loaded_by;
    assert_eq!(
        steps.len(),
        1,
        "the literal and the note are one edge: {steps:?}"
    );
    let s = &steps[0];
    assert_eq!(s.kind, EdgeKind::DlopenNote);
    let declared = s.declared.as_ref().expect("the note's entry");
    assert_eq!(declared.feature.as_deref(), Some("linalg"));
    assert_eq!(declared.priority, Priority::Recommended);
    let how = &s.how;
    assert!(
        how.starts_with("declared by .note.dlopen (feature linalg, recommended"),
        "{how}"
    );
    assert!(
        how.contains("also a dlopen literal") && how.contains("rpath of libtorch_cuda.so"),
        "{how}"
    );
    let warnings = &plan.warnings;
    let of = |kind: WarningKind| {
        (warnings.iter())
            .find(|w| w.kind == Some(kind))
            .unwrap_or_else(|| panic!("no {kind:?} warning: {warnings:?}"))
    };
    let undeclared = of(WarningKind::UndeclaredDlopen);
    assert_eq!(undeclared.file, "lib/libtorch_cuda.so");
    assert_eq!(undeclared.examples, ["libundeclared_plugin.so.1"]);
    let missing = of(WarningKind::DeclaredNotFound);
    assert_eq!(
        missing.examples,
        ["libnvtx_missing.so.3 | libnvtx_missing.so (suggested)"]
    );
    // The tree without notes has none of these warnings.
    let plain: Plan = typed(&run(&[
        "plan",
        fixture("conda-like").to_str().unwrap(),
        "--json",
        "-q",
    ]));
    assert!(
        plain.warnings.iter().all(|w| w.kind.is_none()),
        "{:?}",
        plain.warnings
    );
    // Text: the edge says it is declared, the warnings name the file.
    let text = stdout(&run(&[
        "plan",
        fixture("dlopen-note").to_str().unwrap(),
        "-q",
    ]));
    assert!(
        text.contains("dlopen note; declared by .note.dlopen (feature linalg"),
        "{text}"
    );
    assert!(
        text.contains(
            "! lib/libtorch_cuda.so: 1 dlopen literal(s) that its .note.dlopen does not declare"
        ),
        "{text}"
    );
    let inspect = stdout(&run(&[
        "inspect",
        fixture("dlopen-note").to_str().unwrap(),
        "-q",
    ]));
    assert!(inspect.contains("    declared libtorch_cuda_linalg.so [declared by .note.dlopen (feature linalg, recommended"), "{inspect}");
    assert!(inspect.contains("warnings (.note.dlopen):"), "{inspect}");
}

/// A library whose note is compiled from `json` with the fixture header.
fn lib_with_note_json(dir: &Path, json_c_literal: &str) -> PathBuf {
    let src = dir.join("bad.c");
    std::fs::write(&src, format!("#include \"dlopen_note.h\"\nELF_NOTE_DLOPEN_JSON({json_c_literal});\nint f(void) {{ return 1; }}\n"))
        .unwrap();
    let out = dir.join("lib/libbadnote.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let st = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-I"])
        .arg(repo().join("fixtures/src"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

#[test]
fn malformed_notes_are_warnings_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let lib = lib_with_note_json(
        d.path(),
        r#""[{\"soname\":[\"lib/abs.so\"]},{\"soname\":" "#,
    );
    let o = run(&[
        "plan",
        d.path().join("lib").to_str().unwrap(),
        "--json",
        "-q",
        "--lazy",
        "libbadnote.so",
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "a verdict, not an error: {}",
        stderr(&o)
    );
    let plan: Plan = typed(&o);
    let w = (plan.warnings.iter())
        .find(|w| w.kind == Some(WarningKind::MalformedNote))
        .expect("malformed-note warning");
    assert_eq!(w.file, "libbadnote.so");
    assert!(w.examples[0].contains("not a JSON array"), "{w:?}");
    // `note` refuses to merge into it: exit 2, one line naming the file, nothing written.
    let out = d.path().join("out.so");
    let o = note(
        &lib,
        &out,
        &[
            "--soname",
            "libx.so",
            "--feature",
            "x",
            "--priority",
            "required",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("libbadnote.so") && err.contains("malformed"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn note_refuses_bad_input_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let lib = fixture("conda-like").join("lib/libtorch_cuda.so");
    let out = d.path().join("out.so");
    let bad = fixture("bad/not-elf/lib/libtorch_cuda.so");
    let cases: Vec<(PathBuf, Vec<&str>, &str)> = vec![
        (
            bad.clone(),
            vec![
                "--soname",
                "libx.so",
                "--feature",
                "x",
                "--priority",
                "required",
            ],
            "not an ELF file",
        ),
        (
            lib.clone(),
            vec![
                "--soname",
                "lib/x.so",
                "--feature",
                "x",
                "--priority",
                "required",
            ],
            "contains a '/'",
        ),
        (
            lib.clone(),
            vec![
                "--soname",
                "libx.so",
                "--feature",
                "x\u{1b}[31m",
                "--priority",
                "required",
            ],
            "control character",
        ),
        (
            lib.clone(),
            vec![
                "--soname",
                "libx.so",
                "--feature",
                "x",
                "--priority",
                "must",
            ],
            "invalid value 'must'",
        ),
        (
            fixture("bad/truncated/lib/libtorch_cuda.so"),
            vec![
                "--soname",
                "libx.so",
                "--feature",
                "x",
                "--priority",
                "required",
            ],
            "truncated",
        ),
    ];
    for (input, args, why) in cases {
        let o = note(&input, &out, &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(
            !err.contains('\u{1b}'),
            "no raw control characters: {err:?}"
        );
        assert!(!out.exists(), "{args:?}: nothing written");
    }
}

#[test]
fn written_note_reads_back_loads_and_leaves_loaded_bytes_alone() {
    let (_d, tree) = copy_fixture("conda-like");
    let lib = tree.join("lib/libtorch_cuda.so");
    // Next to it, so its $ORIGIN RPATH finds libtorch_cpu.so as the original's does.
    let orig = tree.join("lib/orig-libtorch_cuda.so");
    std::fs::copy(&lib, &orig).unwrap();
    let before = Command::new(tree.join("bin/torch_smoke")).output().unwrap();
    // In place (atomically), as the recipe step does.
    let o = note(
        &lib,
        &lib,
        &[
            "--soname",
            "libtorch_cuda_linalg.so",
            "--feature",
            "linalg",
            "--priority",
            "required",
            "--description",
            "GPU linear algebra",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // `note --json` prints what was written (no document header: read as the type itself).
    let written: WrittenNote = parsed(&o);
    assert_eq!(
        written.json,
        r#"[{"soname":["libtorch_cuda_linalg.so"],"feature":"linalg","description":"GPU linear algebra","priority":"required"}]"#
    );
    assert_loaded_bytes_identical(&orig, &lib);
    // readelf -n shows the note with its owner and type.
    let notes = readelf(&["-n", "-W"], &lib);
    assert!(
        notes.contains("Displaying notes found in: .note.dlopen"),
        "{notes}"
    );
    let dlopen_part = notes
        .split("Displaying notes found in: .note.dlopen")
        .nth(1)
        .unwrap();
    assert!(
        dlopen_part.contains("FDO") && dlopen_part.contains("0x407c0c0a"),
        "{notes}"
    );
    let sections = readelf(&["-S", "-W"], &lib);
    let line = sections
        .lines()
        .find(|l| l.contains(" .note.dlopen "))
        .expect("a .note.dlopen section");
    assert!(
        line.contains("NOTE") && !line.contains(" A "),
        "a non-allocated SHT_NOTE section: {line}"
    );
    // splitpkg reads back exactly what it wrote.
    let linalg = DlopenEntry {
        soname: vec!["libtorch_cuda_linalg.so".to_string()],
        feature: Some("linalg".to_string()),
        description: Some("GPU linear algebra".to_string()),
        priority: Priority::Required,
    };
    assert_eq!(notes_of(&lib), [linalg]);
    // The program linked against it runs as before, and a program that dlopens it calls into it.
    let after = Command::new(tree.join("bin/torch_smoke")).output().unwrap();
    assert_eq!(
        (before.status.code(), &before.stdout),
        (after.status.code(), &after.stdout)
    );
    assert!(after.status.success());
    let src = tree.join("dl.c");
    std::fs::write(
        &src,
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char **v) {\n  void *h = dlopen(v[1], RTLD_NOW);\n  if (!h) { puts(dlerror()); return 1; }\n  int (*f)(int) = (int (*)(int))dlsym(h, \"torch_cuda_fn\");\n  printf(\"%d\\n\", f(20));\n  return 0;\n}\n",
    )
    .unwrap();
    let exe = tree.join("dl");
    assert!(
        Command::new("gcc")
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg("-ldl")
            .status()
            .unwrap()
            .success()
    );
    let run_dl = |l: &Path| Command::new(&exe).arg(l).output().unwrap();
    let (a, b) = (
        run_dl(&orig.canonicalize().unwrap()),
        run_dl(&lib.canonicalize().unwrap()),
    );
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stdout));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn merging_into_an_existing_note_gives_one_note() {
    let d = tempfile::tempdir().unwrap();
    let lib = fixture("dlopen-note").join("lib/libtorch_cuda.so");
    let out = d.path().join("libtorch_cuda.so");
    let o = note(
        &lib,
        &out,
        &[
            "--soname",
            "libcupti.so.12",
            "--soname",
            "libcupti.so",
            "--feature",
            "profiler",
            "--priority",
            "suggested",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("(merged with the existing note)"),
        "{}",
        stdout(&o)
    );
    assert_loaded_bytes_identical(&lib, &out);
    let notes = readelf(&["-n", "-W"], &out);
    assert_eq!(
        notes
            .matches("Displaying notes found in: .note.dlopen")
            .count(),
        1,
        "{notes}"
    );
    assert_eq!(
        notes.matches("FDO").count(),
        1,
        "one note, one JSON array: {notes}"
    );
    let entries = notes_of(&out);
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert_eq!(entries[2].soname, ["libcupti.so.12", "libcupti.so"]);
    // The original note's loaded bytes are still there, its section renamed out of the way.
    assert!(readelf(&["-S", "-W"], &out).contains(".note.dlopen.orig"));
}

#[test]
fn emit_renders_the_note_step_only_when_asked_and_the_step_runs() {
    let d = tempfile::tempdir().unwrap();
    let (plain, noted) = (d.path().join("plain"), d.path().join("noted"));
    let tree = fixture("conda-like");
    for (out, extra) in [(&plain, vec![]), (&noted, vec!["--dlopen-note"])] {
        let mut args = vec![
            "emit",
            tree.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
            "--format",
            "rattler-build",
            "--version",
            "2.5.1",
        ];
        args.extend(extra);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let script =
        |dir: &Path| std::fs::read_to_string(dir.join("rattler-build/build-variants.sh")).unwrap();
    assert!(!script(&plain).contains("splitpkg note"));
    let s = script(&noted);
    let line = s
        .lines()
        .find(|l| l.starts_with("splitpkg note"))
        .expect("the note step");
    assert_eq!(
        line,
        r#"splitpkg note "$INSTALL/lib/libtorch_cuda.so" --out "$INSTALL/lib/libtorch_cuda.so" --soname "libtorch_cuda_linalg.so" --feature "linalg" --priority required --description "magma (magma or nomagma build), packaged as libtorch-cuda-linalg""#
    );
    assert!(
        std::fs::read_to_string(noted.join("rattler-build/recipe.yaml"))
            .unwrap()
            .contains("--dlopen-note")
    );
    // The rendered step, run on an install tree with this splitpkg on PATH.
    let (_t, install) = copy_fixture("conda-like");
    let path = format!(
        "{}:{}",
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("bash")
        .arg("-euc")
        .arg(line)
        .env("INSTALL", &install)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let n = notes_of(&install.join("lib/libtorch_cuda.so"));
    assert_eq!(n[0].priority, Priority::Required);
    assert_eq!(n[0].feature.as_deref(), Some("linalg"));
    // --dlopen-feature names the feature.
    let o = run(&[
        "emit",
        tree.to_str().unwrap(),
        "--out",
        d.path().join("f").to_str().unwrap(),
        "-q",
        "--format",
        "conda-build",
        "--version",
        "2.5.1",
        "--dlopen-note",
        "--dlopen-feature",
        "magma-linalg",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        std::fs::read_to_string(d.path().join("f/conda-build/build-variants.sh"))
            .unwrap()
            .contains("--feature \"magma-linalg\"")
    );
}

/// Real world: luma-engine 0.2.5 on PyPI bundles SDL3 builds whose `.note.dlopen` SDL's own
/// macros wrote (docs/evidence/dlopen-note/real-world.txt has the reference reader's view).
/// `inspect` reads the wheel in place: 8 entries in SDL3.so, 6 in SDL3_mixer.so, no problem, and
/// on SDL3.so every declared library is also a `dlopen` literal.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: downloads luma-engine 0.2.5 (6 MB) from PyPI"
)]
fn real_world_sdl3_notes_from_pypi() {
    let dir = repo().join("target/dlopen-note-wheels");
    let whl = dir.join("luma_engine-0.2.5-py3-none-any.whl");
    if !whl.exists() {
        let o = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-d",
            ])
            .arg(&dir)
            .arg("luma-engine==0.2.5")
            .output()
            .expect("python3 -m pip");
        assert!(
            o.status.success(),
            "pip download: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = run(&["inspect", whl.to_str().unwrap(), "--json", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let facts: InspectReport = typed(&o);
    let sdl = file(&facts, "luma/lib/SDL3.so");
    let notes = &sdl.elf.dlopen_notes;
    assert_eq!(notes.len(), 8);
    assert!(
        notes
            .iter()
            .any(|n| n.soname == ["libGL.so.1", "libOpenGL.so.0"]
                && n.feature.as_deref() == Some("egl-opengl"))
    );
    assert!(notes.iter().all(|n| n.priority == Priority::Suggested));
    let literals: Vec<&str> = (sdl.elf.library_literals.iter())
        .map(|l| l.name.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .all(|n| n.soname.iter().all(|s| literals.contains(&s.as_str())))
    );
    let mixer = file(&facts, "luma/lib/SDL3_mixer.so");
    assert_eq!(mixer.elf.dlopen_notes.len(), 6);
    assert!(
        (facts.files.iter()).all(|f| f.elf.dlopen_note_problems.is_empty()),
        "no problem in any file"
    );
}

fn refuses(input: &Path, out: &Path, why: &str) {
    let o = note(
        input,
        out,
        &[
            "--soname",
            "libx.so",
            "--feature",
            "x",
            "--priority",
            "required",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{why}: {err}");
    assert_eq!(err.lines().count(), 1, "{why}: one line: {err:?}");
    assert!(
        err.contains(&*input.to_string_lossy()),
        "{why}: names the file: {err}"
    );
    assert!(err.contains(why), "{why}: {err}");
    assert!(!out.exists(), "{why}: nothing written");
}

/// `note` reads its input through the one opener: a FIFO is refused before it can block, a device
/// before it streams forever, a directory as what it is.
#[test]
fn note_reads_only_regular_files() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.so");
    let fifo = d.path().join("libfifo.so");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    refuses(&fifo, &out, "a FIFO, not a regular file");
    refuses(Path::new("/dev/zero"), &out, "a character device");
    refuses(d.path(), &out, "a directory");
}

/// Offset of section header `i` in a little-endian ELF64 file.
fn shdr(b: &[u8], i: usize) -> usize {
    let shoff = u64::from_le_bytes(b[0x28..0x30].try_into().unwrap()) as usize;
    shoff + i * 64
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// The first two sections with bytes in the file that are not string tables (not SHT_NULL,
/// SHT_STRTAB or SHT_NOBITS; size > 0).
fn two_sections_with_bytes(b: &[u8]) -> (usize, usize) {
    let with_bytes: Vec<usize> = (1..u16_at(b, 0x3c) as usize)
        .filter(|&i| {
            let h = shdr(b, i);
            let size = u64::from_le_bytes(b[h + 32..h + 40].try_into().unwrap());
            !matches!(u32_at(b, h + 4), 0 | 3 | 8) && size > 0
        })
        .collect();
    (with_bytes[0], with_bytes[1])
}

/// Section headers readelf calls broken are refused (the copy would carry them), each case with
/// its own line; the untouched library is still accepted. readelf complains of the out-of-range
/// e_shstrndx the hostile suite found.
#[test]
fn note_refuses_broken_section_headers() {
    let d = tempfile::tempdir().unwrap();
    let src = std::fs::read(fixture("conda-like/lib/libtorch_cuda.so")).unwrap();
    let out = d.path().join("out.so");
    let (first, second) = two_sections_with_bytes(&src);
    let shnum = u16_at(&src, 0x3c);
    let shstrndx = u16_at(&src, 0x3e) as usize;
    let strtab_name = u32_at(&src, shdr(&src, shstrndx));
    type Patch = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Patch)> = vec![
        (
            "e_shstrndx 200 is out of range",
            Box::new(|b: &mut Vec<u8>| b[0x3e..0x40].copy_from_slice(&200u16.to_le_bytes())),
        ),
        (
            "is not a string table",
            Box::new(move |b: &mut Vec<u8>| {
                b[0x3e..0x40].copy_from_slice(&(first as u16).to_le_bytes())
            }),
        ),
        (
            "e_shentsize is 32",
            Box::new(|b: &mut Vec<u8>| b[0x3a..0x3c].copy_from_slice(&32u16.to_le_bytes())),
        ),
        (
            "section headers at",
            Box::new(|b: &mut Vec<u8>| {
                let past = b.len() as u64 + 4096;
                b[0x28..0x30].copy_from_slice(&past.to_le_bytes());
            }),
        ),
        (
            "runs past the end of the file",
            Box::new(move |b: &mut Vec<u8>| {
                let h = shdr(b, second) + 24;
                let past = b.len() as u64 - 8;
                b[h..h + 8].copy_from_slice(&past.to_le_bytes());
            }),
        ),
        (
            "overlap in the file",
            Box::new(move |b: &mut Vec<u8>| {
                let (h1, h2) = (shdr(b, first) + 24, shdr(b, second) + 24);
                let off: [u8; 8] = b[h1..h1 + 8].try_into().unwrap();
                b[h2..h2 + 8].copy_from_slice(&off);
            }),
        ),
        (
            "links to section",
            Box::new(move |b: &mut Vec<u8>| {
                let h = shdr(b, first) + 40;
                b[h..h + 4].copy_from_slice(&(u32::from(shnum) + 7).to_le_bytes());
            }),
        ),
        (
            "is outside the section-name table",
            Box::new(move |b: &mut Vec<u8>| {
                let h = shdr(b, first);
                b[h..h + 4].copy_from_slice(&(strtab_name + 1_000_000).to_le_bytes());
            }),
        ),
    ];
    for (why, patch) in cases {
        let mut bytes = src.clone();
        patch(&mut bytes);
        let input = d.path().join("libpatched.so");
        std::fs::write(&input, &bytes).unwrap();
        refuses(&input, &out, why);
    }
    // readelf agrees the first case is broken.
    let mut bytes = src.clone();
    bytes[0x3e..0x40].copy_from_slice(&200u16.to_le_bytes());
    let input = d.path().join("libpatched.so");
    std::fs::write(&input, &bytes).unwrap();
    let o = Command::new("readelf")
        .arg("-S")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stderr).trim().is_empty(),
        "readelf flags an out-of-range e_shstrndx"
    );
    // The library itself is fine.
    let o = note(
        &fixture("conda-like/lib/libtorch_cuda.so"),
        &out,
        &[
            "--soname",
            "libx.so",
            "--feature",
            "x",
            "--priority",
            "required",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// 250,000 `.note.dlopen` notes, each entry declared twice, read through a gcc-built library: each
/// distinct entry is kept once, in the order first declared (the reader deduplicates with a set).
/// `inspect` reads them through the whole pipeline as one declared edge per distinct entry.
#[test]
fn a_quarter_million_notes_are_deduplicated() {
    const DISTINCT: usize = 125_000;
    let d = tempfile::tempdir().unwrap();
    let mut notes = Vec::new();
    for _ in 0..2 {
        for i in 0..DISTINCT {
            let json = format!(r#"[{{"soname":["libdep{i}.so"],"priority":"suggested"}}]"#);
            notes.extend(splitpkg::elf::note::note_bytes(&json, true));
        }
    }
    std::fs::write(d.path().join("notes.bin"), &notes).unwrap();
    std::fs::write(
        d.path().join("many.s"),
        ".section .note.dlopen,\"a\",@note\n.balign 4\n.incbin \"notes.bin\"\n",
    )
    .unwrap();
    std::fs::create_dir(d.path().join("lib")).unwrap();
    let lib = d.path().join("lib/libmany.so");
    let st = Command::new("gcc")
        .current_dir(d.path())
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg("many.s")
        .status()
        .unwrap();
    assert!(st.success());

    let bytes = std::fs::read(&lib).unwrap();
    let read = splitpkg::elf::ElfView::parse(&bytes)
        .unwrap()
        .dlopen_notes();
    assert_eq!(read.problems, vec![]);
    assert_eq!(read.entries.len(), DISTINCT);
    for (i, e) in read.entries.iter().enumerate() {
        assert_eq!(e.soname, [format!("libdep{i}.so")]);
        assert_eq!(e.priority, splitpkg::elf::Priority::Suggested);
    }

    let o = run(&[
        "inspect",
        d.path().join("lib").to_str().unwrap(),
        "--json",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ins: InspectReport = typed(&o);
    assert_eq!(ins.files[0].elf.dlopen_notes.len(), DISTINCT);
    let declared = (ins.edges.iter())
        .filter(|e| e.kind == EdgeKind::DlopenNote)
        .count();
    assert_eq!(declared, DISTINCT);
}
