//! The variant contract on real PyTorch wheels (torch 2.11.0+cu130 and 1.13.1+cu117, both with a
//! lazily loaded `libtorch_cuda_linalg.so` and MAGMA linked into it): what `emit` records of the
//! stock library, and what `verify-variant` then refuses — the stock MAGMA file offered as nomagma,
//! a 15 KB gcc stub with the right SONAME and one export, and a copy of the stock file with one
//! translation unit's exports taken out of its dynamic symbol table (DERIVED from the real file
//! here, no compiler of PyTorch needed: the real one-unit-left-out build is in
//! docs/evidence/nomagma-real/ where it was made).

use crate::common::*;

use std::path::{Path, PathBuf};

/// `emit`'s contract for the unpacked tree.
fn contract(tree: &Path, version: &str, out: &Path) -> (PathBuf, serde_json::Value) {
    let o = run(&[
        "emit",
        tree.to_str().unwrap(),
        "--version",
        version,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let path = out.join("rattler-build/contract.json");
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, c)
}

/// Names of the failed checks of `verify-variant LIB --variant V --contract C --json` (exit 1 when
/// any failed, 0 when none did).
fn failed(lib: &Path, variant: &str, contract: &Path) -> Vec<String> {
    let o = run(&[
        "verify-variant",
        lib.to_str().unwrap(),
        "--variant",
        variant,
        "--contract",
        contract.to_str().unwrap(),
        "--json",
    ]);
    let r = json(&o);
    let failed: Vec<String> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["pass"] == false)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        o.status.code(),
        Some(if failed.is_empty() { 0 } else { 1 }),
        "{failed:?}"
    );
    failed
}

/// The stub of the issue: right SONAME, one exported C function, nothing else.
fn gcc_stub(dir: &Path) -> PathBuf {
    let src = dir.join("stub.c");
    std::fs::write(
        &src,
        "void *at_cuda_getCurrentCUDASolverDnHandle(void) { return 0; }\n",
    )
    .unwrap();
    let out = dir.join("stub").join("libtorch_cuda_linalg.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = std::process::Command::new("gcc")
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-Wl,-soname,libtorch_cuda_linalg.so",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&out).unwrap().len() < 20_000);
    out
}

/// A copy of `stock` whose dynamic symbols with a name starting `prefix` are made undefined
/// (`st_shndx = SHN_UNDEF`, `st_value = 0`): the library a build without the translation unit
/// that defines them would export. Returns the copy and how many symbols were taken out.
fn without_exports(stock: &Path, prefix: &str, dir: &Path) -> (PathBuf, usize) {
    let mut bytes = std::fs::read(stock).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let dynsym = elf
        .section_headers
        .iter()
        .find(|s| s.sh_type == goblin::elf::section_header::SHT_DYNSYM)
        .unwrap();
    let (base, entsize) = (dynsym.sh_offset as usize, dynsym.sh_entsize as usize);
    let hits: Vec<usize> = elf
        .dynsyms
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.st_shndx != 0
                && elf
                    .dynstrtab
                    .get_at(s.st_name)
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|(i, _)| i)
        .collect();
    drop(elf);
    for &i in &hits {
        let e = base + i * entsize;
        bytes[e + 6..e + 8].copy_from_slice(&0u16.to_le_bytes());
        bytes[e + 8..e + 16].copy_from_slice(&0u64.to_le_bytes());
    }
    let out = dir.join("derived").join("libtorch_cuda_linalg.so");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, bytes).unwrap();
    (out, hits.len())
}

fn names(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// One release: the contract's new fields, then each forgery refused and the stock file accepted
/// as what it is.
fn release(corpus_name: &str, version: &str, exports: usize, stubs: &[&str]) {
    let (_, tree) = corpus(corpus_name, true);
    let tree = tree.unwrap();
    let stock = tree.join("lib/libtorch_cuda_linalg.so");
    let d = tempfile::tempdir().unwrap();
    let (path, c) = contract(&tree, version, &d.path().join("recipe"));
    assert_eq!(c["schema_version"], 2);
    let provided = names(&c["provided_exports"]);
    assert_eq!(provided.len(), exports, "{provided:?}");
    assert!(provided.iter().all(|n| n.starts_with("_ZN2at")
        || n.starts_with("_ZN3c10")
        || n.starts_with("_ZN6caffe2")));
    assert!(
        !provided.iter().any(|n| n.contains("13magmaCholesky")),
        "MAGMA wrappers are the payload's"
    );
    let registrations = names(&c["load_registrations"]);
    for stub in stubs {
        let mangled = format!("_ZN2at6native{}{stub}E", stub.len());
        assert!(
            registrations.contains(&mangled),
            "{mangled} not in {registrations:?}"
        );
    }

    // The stock file is the magma build and satisfies its own contract; as nomagma it carries
    // the payload.
    assert_eq!(failed(&stock, "magma", &path), Vec::<String>::new());
    assert_eq!(
        failed(&stock, "nomagma", &path),
        ["no payload symbols defined"]
    );
    // The 15 KB stub: no exports of the stock file's, no registration at load.
    let stub = gcc_stub(d.path());
    assert_eq!(
        failed(&stub, "nomagma", &path),
        [
            "exports what the stock provides",
            "registers at load like the stock"
        ]
    );
    // CUDASolver.cpp (namespace at::cuda::solver) left out.
    let (derived, n) = without_exports(&stock, "_ZN2at4cuda6solver", d.path());
    assert!(n > 10, "{n} exports of CUDASolver.cpp");
    assert_eq!(
        failed(&derived, "magma", &path),
        ["exports what the stock provides"]
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_2_11_variant_contract_refuses_forgeries() {
    release(
        "torch-2.11.0-cu130",
        "2.11.0",
        192,
        &[
            "cholesky_stub",
            "cholesky_inverse_stub",
            "lu_factor_stub",
            "ldl_factor_stub",
            "ldl_solve_stub",
            "triangular_solve_stub",
            "orgqr_stub",
            "ormqr_stub",
            "geqrf_stub",
            "linalg_eigh_stub",
            "linalg_eig_stub",
            "svd_stub",
            "lu_solve_stub",
            "lstsq_stub",
        ],
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, real torch wheels: cargo test --release --features full-tests"
)]
fn torch_1_13_variant_contract_refuses_forgeries() {
    release(
        "torch-1.13.1-cu117",
        "1.13.1",
        182,
        &["cholesky_stub", "lu_factor_stub", "svd_stub"],
    );
}

/// A contract file of schema version 1 recorded names only: read as version 2 it would let any
/// library with the right SONAME pass, so it is refused (exit 2, one line naming the file).
#[test]
fn a_version_1_contract_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("contract.json");
    std::fs::write(
        &c,
        r#"{"schema":"splitpkg-contract","schema_version":1,"library":"libtorch_cuda_linalg.so","dep":"magma",
            "symbol_prefixes":["magma_"],"library_prefixes":["libmagma"],"loader_lookups":[],"required_exports":[]}"#,
    )
    .unwrap();
    let lib = fixture("conda-nomagma/lib/libtorch_cuda_linalg.so");
    let o = run(&[
        "verify-variant",
        lib.to_str().unwrap(),
        "--variant",
        "nomagma",
        "--contract",
        c.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("contract.json")
            && err.contains("contract schema version 1")
            && err.contains("re-run splitpkg emit"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
}
