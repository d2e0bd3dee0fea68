//! Broken and hostile input: one line on stderr naming the file, exit code 2, nothing written.

use crate::common::*;

use std::io::Write;
use std::path::Path;

/// Run plan with --out and check the failure contract.
fn rejects(path: &Path, must_name: &str, must_say: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let o = run(&[
        "plan",
        "--json",
        "--quiet",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("splitpkg: error: "), "{err}");
    assert!(err.contains(must_name), "should name {must_name}: {err}");
    assert!(err.contains(must_say), "should say {must_say}: {err}");
    assert!(o.stdout.is_empty());
    assert!(!out.exists(), "nothing may be written on error");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary files left"
    );
}

#[test]
fn truncated_elf() {
    let t = fixture("bad/truncated");
    rejects(&t, "bad/truncated/lib/libtorch_cuda.so", "truncated");
}

#[test]
fn non_elf_shared_library() {
    let t = fixture("bad/not-elf");
    rejects(&t, "bad/not-elf/lib/libtorch_cuda.so", "not an ELF file");
}

#[test]
fn git_lfs_pointer_in_place_of_a_library() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    std::fs::write(
        dir.path().join("lib/libmagma.so.2"),
        "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n",
    )
    .unwrap();
    rejects(dir.path(), "lib/libmagma.so.2", "Git LFS pointer");
}

#[test]
fn elf_with_hostile_header_fields() {
    // Take a real library and point its section-header table far past the end of the file.
    let src = std::fs::read(fixture("conda-like/lib/libtorch_cpu.so")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    let mut bytes = src.clone();
    bytes[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()); // e_shoff
    std::fs::write(dir.path().join("lib/libx.so"), &bytes).unwrap();
    rejects(dir.path(), "lib/libx.so", "section headers");

    let mut bytes = src.clone();
    bytes[0x20..0x28].copy_from_slice(&(1u64 << 40).to_le_bytes()); // e_phoff
    std::fs::write(dir.path().join("lib/libx.so"), &bytes).unwrap();
    rejects(dir.path(), "lib/libx.so", "program headers");

    // Only the magic survives.
    std::fs::write(dir.path().join("lib/libx.so"), &src[..20]).unwrap();
    rejects(dir.path(), "lib/libx.so", "ELF");
}

#[test]
fn zip_member_escaping_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let whl = dir.path().join("evil-1.0-py3-none-any.whl");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        z.start_file(
            "../../etc/cron.d/evil",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        z.write_all(b"boom").unwrap();
        z.finish().unwrap();
    }
    rejects(&whl, "evil-1.0-py3-none-any.whl", "climbs out");
}

#[test]
fn truncated_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let whl = dir.path().join("torch-2.5.1-cp311-cp311-linux_x86_64.whl");
    make_wheel(&fixture("pip-like"), &whl);
    let bytes = std::fs::read(&whl).unwrap();
    std::fs::write(&whl, &bytes[..bytes.len() / 2]).unwrap();
    rejects(&whl, "torch-2.5.1-cp311-cp311-linux_x86_64.whl", "zip");
}

#[test]
fn truncated_conda() {
    let dir = tempfile::tempdir().unwrap();
    let conda = dir.path().join("libtorch-2.5.1-cuda126_h0_0.conda");
    make_conda(&fixture("conda-like"), &conda);
    let bytes = std::fs::read(&conda).unwrap();
    std::fs::write(&conda, &bytes[..bytes.len() - 200]).unwrap();
    rejects(&conda, "libtorch-2.5.1-cuda126_h0_0.conda", ".conda");
}

#[test]
fn corrupt_tar_bz2() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("libtorch-2.5.1-cuda126_h0_0.tar.bz2");
    make_tar_bz2(&fixture("conda-like"), &p);
    let mut bytes = std::fs::read(&p).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 2..n / 2 + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&p, &bytes).unwrap();
    rejects(&p, "libtorch-2.5.1-cuda126_h0_0.tar.bz2", "");
}

#[test]
fn unknown_input_kind_and_missing_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.txt");
    std::fs::write(&p, "hello").unwrap();
    rejects(&p, "notes.txt", "not a directory, .whl, .conda or .tar.bz2");
    rejects(&dir.path().join("nope"), "nope", "No such file");
}

/// What ld.so refuses to load (glibc `open_verify`, `_dl_map_object_from_fd`), every command
/// refuses, at the one ELF parser: program headers of another size than the class's (the hostile
/// suite's `e_phentsize = 0`, which `verify-variant` passed), a shared library without `PT_DYNAMIC`
/// or without `PT_LOAD`, and a `PT_LOAD` whose address and offset disagree modulo the page. Each
/// starts from a gcc-built library whose header bytes are patched; ld.so's own refusal is checked
/// on the first.
#[test]
fn elf_that_ld_so_refuses_to_load() {
    let src = std::fs::read(fixture("conda-like/lib/libtorch_cuda_linalg.so")).unwrap();
    let phoff = u64_at(&src, 0x20) as usize;
    let phnum = u16::from_le_bytes([src[0x38], src[0x39]]) as usize;
    let ph = move |i: usize| phoff + i * 56;
    // Turn every program header of type `from` into PT_NULL.
    let null_all = move |from: u32| {
        move |b: &mut Vec<u8>| {
            for i in 0..phnum {
                if u32_at(b, ph(i)) == from {
                    b[ph(i)..ph(i) + 4].copy_from_slice(&0u32.to_le_bytes());
                }
            }
        }
    };
    type Patch = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Patch)> = vec![
        (
            "e_phentsize is 0",
            Box::new(|b: &mut Vec<u8>| b[0x36..0x38].copy_from_slice(&[0, 0])),
        ),
        (
            "e_phentsize is 64",
            Box::new(|b: &mut Vec<u8>| b[0x36..0x38].copy_from_slice(&64u16.to_le_bytes())),
        ),
        ("without a PT_DYNAMIC segment", Box::new(null_all(2))),
        ("no PT_LOAD segment", Box::new(null_all(1))),
        (
            "differ modulo the page size",
            Box::new(move |b: &mut Vec<u8>| {
                let i = (0..phnum).find(|&i| u32_at(b, ph(i)) == 1).unwrap();
                let vaddr = ph(i) + 16;
                let v = u64_at(b, vaddr) + 0x10;
                b[vaddr..vaddr + 8].copy_from_slice(&v.to_le_bytes());
            }),
        ),
    ];
    let plan = tempfile::tempdir().unwrap();
    let plan_json = plan.path().join("plan.json");
    let o = run(&[
        "plan",
        "--json",
        "--quiet",
        fixture("conda-like").to_str().unwrap(),
        "--out",
        plan_json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for (why, patch) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        let lib = dir.path().join("lib/libtorch_cuda_linalg.so");
        let mut bytes = src.clone();
        patch(&mut bytes);
        std::fs::write(&lib, &bytes).unwrap();
        rejects(dir.path(), "lib/libtorch_cuda_linalg.so", why);
        let o = run(&[
            "verify-variant",
            lib.to_str().unwrap(),
            "--variant",
            "magma",
            "--plan",
            plan_json.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{why}: {err}");
        assert_eq!(err.lines().count(), 1, "{why}: one line: {err:?}");
        assert!(
            err.contains(why) && err.contains("libtorch_cuda_linalg.so"),
            "{err}"
        );
        assert!(o.stdout.is_empty(), "{why}");
    }
    // ld.so itself refuses the first case.
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libzero.so");
    let mut bytes = src.clone();
    bytes[0x36..0x38].copy_from_slice(&[0, 0]);
    std::fs::write(&lib, &bytes).unwrap();
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg("import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n    sys.exit(3)")
        .arg(&lib)
        .output()
        .expect("python3");
    assert_eq!(o.status.code(), Some(3), "ld.so loaded it");
    assert!(stdout(&o).contains("phentsize"), "{}", stdout(&o));
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
