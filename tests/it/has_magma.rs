//! The PyTorch source patch the feedstock ships so that `torch.cuda.has_magma` tells which variant
//! of the lazy library is installed (templates/feedstock/hasMAGMA-from-installed-files.patch).
//!
//! Fast tier: the patch applied with `patch -p1` to the mini feedstock's CUDAHooks.cpp
//! (fixtures/feedstock/src, written for the fixture with the lines the patch's context names),
//! compiled by g++ into a libtorch_cuda-like library, installed into conda prefixes of both
//! variants (libmagma's `libmagma.so.2` beside it or not, and pytorch's
//! `site-packages/torch/lib/libtorch_cuda.so` link into `$PREFIX/lib`), and asked by a C harness
//! (tests/it/has_magma_harness.c) that dlopens it by path, as torch's extension does.
//! Full tier: the patch's own lines compiled as a translation unit against the torch 2.11 wheel's
//! headers and the CUDA 13 header wheels.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

const PATCH: &str = "templates/feedstock/hasMAGMA-from-installed-files.patch";
const HOOKS: &str = "aten/src/ATen/cuda/detail/CUDAHooks.cpp";

/// Run `cmd`, require success, return its stdout.
fn ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A copy of the mini feedstock's sources in `dir`, with the patch applied when `patched`.
fn sources(dir: &Path, patched: bool) -> PathBuf {
    let src = dir.join(if patched { "src-patched" } else { "src-stock" });
    ok(Command::new("cp")
        .arg("-r")
        .arg(repo().join("fixtures/feedstock/src"))
        .arg(&src));
    if patched {
        ok(Command::new("patch")
            .args(["-p1", "--forward", "--input"])
            .arg(repo().join(PATCH))
            .current_dir(&src));
    }
    src
}

/// The fixture's libtorch_cuda with the hooks: CUDAHooks.cpp beside torch/cuda.cpp (whose
/// `at::cuda::linalg_call` dlopens `libtorch_cuda_linalg.so` by name, as PyTorch's stubs do), with
/// the libraries it needs folded in. Warnings are errors, so the patched code builds clean.
fn core(src: &Path, out: &Path) {
    let units = [HOOKS, "torch/cuda.cpp", "torch/cpu.cpp", "c10/c10.cpp"];
    ok(Command::new("g++")
        .args([
            "-std=c++17",
            "-O1",
            "-fPIC",
            "-shared",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .args([
            "-Wl,-soname,libtorch_cuda.so",
            "-Wl,--disable-new-dtags",
            "-Wl,-rpath,$ORIGIN",
        ])
        .arg("-I")
        .arg(src.join("include"))
        .arg("-I")
        .arg(repo().join("fixtures/feedstock/magma"))
        .arg("-o")
        .arg(out)
        .args(units.iter().map(|u| src.join(u)))
        .arg("-ldl"));
}

/// gcc's shared library `out` (SONAME `soname`, RPATH `$ORIGIN`) from C `code`, linked with `libs`.
fn c_library(dir: &Path, out: &Path, soname: &str, code: &str, libs: &[&str]) {
    let c = out.with_extension("c");
    std::fs::write(&c, code).unwrap();
    ok(Command::new("gcc")
        .args(["-O1", "-fPIC", "-shared"])
        .arg(format!("-Wl,-soname,{soname}"))
        .args(["-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN"])
        .arg("-o")
        .arg(out)
        .arg(&c)
        .arg("-L")
        .arg(dir)
        .args(libs));
}

/// Everything the layouts are made of, built once per test in `dir`.
struct Parts {
    dir: PathBuf,
    harness: PathBuf,
    magma: PathBuf,
}

impl Parts {
    fn build(dir: &Path) -> Parts {
        let magma = dir.join("libmagma.so.2");
        let magma_c = std::fs::read_to_string(repo().join("fixtures/feedstock/magma/magma.c"));
        c_library(dir, &magma, "libmagma.so.2", &magma_c.unwrap(), &[]);
        // The two variants of the lazy library: the magma one needs libmagma (found through
        // $ORIGIN, as conda-forge's), the nomagma one does not.
        let linalg =
            "int magma_dgetrf_gpu(int);\nint linalg_entry(int x) { return magma_dgetrf_gpu(x); }\n";
        let so = "libtorch_cuda_linalg.so";
        c_library(
            dir,
            &dir.join("linalg-magma.so"),
            so,
            linalg,
            &["-l:libmagma.so.2"],
        );
        let plain = "int linalg_entry(int x) { return x; }\n";
        c_library(dir, &dir.join("linalg-nomagma.so"), so, plain, &[]);
        for patched in [true, false] {
            let src = sources(dir, patched);
            core(&src, &dir.join(Parts::core_name(patched)));
        }
        let harness = dir.join("harness");
        ok(Command::new("gcc")
            .args(["-O1", "-Wall", "-Werror", "-o"])
            .arg(&harness)
            .arg(repo().join("tests/it/has_magma_harness.c"))
            .arg("-ldl"));
        Parts {
            dir: dir.to_path_buf(),
            harness,
            magma,
        }
    }

    fn core_name(patched: bool) -> &'static str {
        if patched {
            "core-patched.so"
        } else {
            "core-stock.so"
        }
    }

    /// A conda prefix at `prefix` with libtorch's libraries in lib/ and pytorch's links to them
    /// in site-packages/torch/lib/ (build.sh's `pytorch` stage), libmagma only with `magma`.
    /// Returns (lib/libtorch_cuda.so, the site-packages link to it).
    fn install(&self, prefix: &Path, patched: bool, magma: bool) -> (PathBuf, PathBuf) {
        let lib = prefix.join("lib");
        let torch_lib = prefix.join("lib/python3.12/site-packages/torch/lib");
        std::fs::create_dir_all(&torch_lib).unwrap();
        let core = lib.join("libtorch_cuda.so");
        std::fs::copy(self.dir.join(Parts::core_name(patched)), &core).unwrap();
        let variant = if magma {
            "linalg-magma.so"
        } else {
            "linalg-nomagma.so"
        };
        std::fs::copy(self.dir.join(variant), lib.join("libtorch_cuda_linalg.so")).unwrap();
        if magma {
            std::fs::copy(&self.magma, lib.join("libmagma.so.2")).unwrap();
        }
        for name in ["libtorch_cuda.so", "libtorch_cuda_linalg.so"] {
            std::os::unix::fs::symlink(lib.join(name), torch_lib.join(name)).unwrap();
        }
        (core, torch_lib.join("libtorch_cuda.so"))
    }

    /// The harness's line for `core`: has_magma=N linalg_mapped=N [after_linalg_call=N ...].
    fn ask(&self, core: &Path, then_linalg: bool) -> String {
        let mut cmd = Command::new(&self.harness);
        cmd.arg(core);
        if then_linalg {
            cmd.arg("then-linalg");
        }
        ok(&mut cmd).trim().to_string()
    }
}

#[test]
fn the_patch_applies_to_the_fixture_as_two_hunks_changing_one_line() {
    let d = tempfile::tempdir().unwrap();
    let src = sources(d.path(), false);
    let patch = repo().join(PATCH);
    ok(Command::new("patch")
        .args(["-p1", "--dry-run", "--input"])
        .arg(&patch)
        .current_dir(&src));
    // git's reader too (git am / git apply), on a directory that is not a repository
    ok(Command::new("git")
        .args(["apply", "--check", "-p1"])
        .arg(&patch)
        .current_dir(&src));
    let text = std::fs::read_to_string(&patch).unwrap();
    let body = &text[text.find("\ndiff --git ").expect("a git diff")..];
    let hunks = body.lines().filter(|l| l.starts_with("@@ ")).count();
    let removed: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .collect();
    // the added include block and the added function; the only line taken away is the constant
    assert_eq!(hunks, 2, "{body}");
    assert_eq!(removed, ["-  return true;"]);
    assert!(body.contains("\n+  return magma_library_installed();\n"));
}

#[test]
fn patched_has_magma_tells_each_installed_variant_without_loading_the_lazy_library() {
    let d = tempfile::tempdir().unwrap();
    let parts = Parts::build(d.path());
    for (magma, want) in [(true, 1), (false, 0)] {
        let (core, link) = parts.install(&d.path().join(format!("env-{magma}")), true, magma);
        for path in [&core, &link] {
            assert_eq!(
                parts.ask(path, false),
                format!("has_magma={want} linalg_mapped=0"),
                "magma={magma} {}",
                path.display()
            );
        }
        // The mapping check does see a load: the first linalg call maps the lazy library.
        let after = parts.ask(&core, true);
        assert!(
            after.starts_with(&format!(
                "has_magma={want} linalg_mapped=0 after_linalg_call=1 "
            )),
            "{after}"
        );
    }
}

#[test]
fn unpatched_has_magma_says_true_in_both_variants() {
    // the lie the patch fixes, reproduced: the compile-time constant ignores what is installed
    let d = tempfile::tempdir().unwrap();
    let parts = Parts::build(d.path());
    for magma in [true, false] {
        let (core, link) = parts.install(&d.path().join(format!("env-{magma}")), false, magma);
        for path in [&core, &link] {
            assert_eq!(parts.ask(path, false), "has_magma=1 linalg_mapped=0");
        }
    }
}

/// What counts as libmagma beside libtorch_cuda.so: a regular file (links followed) named
/// `libmagma.so` or `libmagma.so.<suffix>`, nothing else.
#[test]
fn only_a_regular_libmagma_file_counts_as_installed() {
    let d = tempfile::tempdir().unwrap();
    let parts = Parts::build(d.path());
    type Setup = fn(&Path, &Path);
    let cases: [(&str, Setup, u8); 7] = [
        (
            "soname link to the full version",
            |lib, so| {
                std::fs::copy(so, lib.join("libmagma.so.2.9.0")).unwrap();
                std::os::unix::fs::symlink("libmagma.so.2.9.0", lib.join("libmagma.so.2")).unwrap();
            },
            1,
        ),
        (
            "unversioned name only",
            |lib, so| {
                std::fs::copy(so, lib.join("libmagma.so")).unwrap();
            },
            1,
        ),
        (
            "dangling soname link",
            |lib, _| {
                std::os::unix::fs::symlink("libmagma.so.2.9.0", lib.join("libmagma.so.2")).unwrap();
            },
            0,
        ),
        (
            "directory of that name",
            |lib, _| {
                std::fs::create_dir(lib.join("libmagma.so.2")).unwrap();
            },
            0,
        ),
        (
            "libmagma_sparse only",
            |lib, so| {
                std::fs::copy(so, lib.join("libmagma_sparse.so.2")).unwrap();
            },
            0,
        ),
        (
            "a longer name",
            |lib, so| {
                std::fs::copy(so, lib.join("libmagma.sox")).unwrap();
            },
            0,
        ),
        (
            "libmagma in site-packages/torch/lib only",
            |lib, so| {
                let torch_lib = lib.join("python3.12/site-packages/torch/lib");
                std::fs::copy(so, torch_lib.join("libmagma.so.2")).unwrap();
            },
            0,
        ),
    ];
    for (i, (what, setup, want)) in cases.iter().enumerate() {
        let (core, link) = parts.install(&d.path().join(format!("case-{i}")), true, false);
        setup(core.parent().unwrap(), &parts.magma);
        for path in [&core, &link] {
            assert_eq!(
                parts.ask(path, false),
                format!("has_magma={want} linalg_mapped=0"),
                "{what}: {}",
                path.display()
            );
        }
    }
}

/// The translation unit the patch makes of its own lines: its added includes, then the hunk that
/// changes `hasMAGMA()` from its first added line to the end of that definition, in PyTorch's
/// namespace, after the headers CUDAHooks.cpp includes first (the class, the config macros, the
/// CUDA runtime).
fn translation_unit(patch: &str) -> String {
    let body = &patch[patch.find("\ndiff --git ").expect("a git diff")..];
    let mut hunks: Vec<Vec<&str>> = Vec::new();
    for line in body.lines() {
        if line.starts_with("@@ ") {
            hunks.push(Vec::new());
        } else if let Some(h) = hunks.last_mut() {
            h.push(line);
        }
    }
    assert_eq!(hunks.len(), 2, "two hunks: includes, then hasMAGMA()");
    // a line of the new file without its diff marker
    let strip = |l: &str| l.get(1..).unwrap_or("").to_string();
    let includes: Vec<String> = hunks[0]
        .iter()
        .filter(|l| l.starts_with('+'))
        .map(|l| strip(l))
        .collect();
    let first = hunks[1].iter().position(|l| l.starts_with('+')).unwrap();
    let function: Vec<String> = hunks[1][first..]
        .iter()
        .filter(|l| !l.starts_with('-'))
        .map(|l| strip(l))
        .collect();
    let mut tu = vec![
        "#include <ATen/cuda/detail/CUDAHooks.h>".to_string(),
        "#include <ATen/cuda/CUDAConfig.h>".to_string(),
        "#include <cuda_runtime.h>".to_string(),
    ];
    tu.extend(includes);
    tu.push("namespace at::cuda::detail {".to_string());
    tu.extend(function);
    // the hunk's context ends at hasMAGMA()'s `#endif`; its closing brace follows in the file
    tu.push("}".to_string());
    tu.push("}  // namespace at::cuda::detail".to_string());
    tu.join("\n") + "\n"
}

/// Cache for the full tier's downloads: $XDG_CACHE_HOME (or ~/.cache)/splitpkg-hasmagma.
fn cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    base.join("splitpkg-hasmagma")
}

/// The members under `prefix` of each of `wheels` unpacked into `dest`, once: unpacked beside it
/// and renamed into place, so a broken run leaves nothing half made.
fn unpacked(wheels: &[PathBuf], prefix: &str, dest: &Path) -> PathBuf {
    if dest.exists() {
        return dest.to_path_buf();
    }
    let name = dest.file_name().unwrap().to_string_lossy();
    let tmp = dest.with_file_name(format!("{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for wheel in wheels {
        let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        for i in 0..z.len() {
            let mut member = z.by_index(i).unwrap();
            let Some(rel) = member.enclosed_name() else {
                continue;
            };
            if !member.is_file() || !rel.starts_with(prefix) {
                continue;
            }
            let out = tmp.join(rel);
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            std::io::copy(&mut member, &mut std::fs::File::create(&out).unwrap()).unwrap();
        }
    }
    if std::fs::rename(&tmp, dest).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dest.to_path_buf()
}

/// The CUDA 13 runtime headers torch 2.11.0+cu130 was built with (cuda-toolkit 13.0.2, which
/// that wheel requires: nvidia-cuda-runtime, and the crt and cccl headers cuda_runtime.h
/// includes), downloaded by pip once.
fn cuda_headers() -> PathBuf {
    let dest = cache().join("cuda-13.0.2");
    if dest.exists() {
        return dest.join("nvidia/cu13/include");
    }
    let dl = cache().join(format!("wheels-tmp-{}", std::process::id()));
    ok(Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
        ])
        .args([
            "--platform",
            "manylinux_2_17_x86_64",
            "--python-version",
            "3.11",
        ])
        .arg("-d")
        .arg(&dl)
        .args(["nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88"])
        .arg("nvidia-cuda-cccl==13.0.85"));
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dl)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    unpacked(&wheels, "nvidia/", &dest);
    let _ = std::fs::remove_dir_all(&dl);
    dest.join("nvidia/cu13/include")
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, the torch 2.11 wheel and CUDA header wheels: cargo test --release --features full-tests"
)]
fn the_patch_compiles_against_torch_2_11_and_cuda_13_headers() {
    let (wheel, _) = corpus("torch-2.11.0-cu130", false);
    let torch = unpacked(
        &[wheel],
        "torch/include/",
        &cache().join("torch-2.11.0-include"),
    );
    let include = torch.join("torch/include");
    // the branch the patch changes is the one this release compiles
    let config = std::fs::read_to_string(include.join("ATen/cuda/CUDAConfig.h")).unwrap();
    assert!(config.contains("#define AT_MAGMA_ENABLED() 1"), "{config}");
    let cuda = cuda_headers();
    let d = tempfile::tempdir().unwrap();
    let tu = d.path().join("CUDAHooks_hasMAGMA.cpp");
    std::fs::write(
        &tu,
        translation_unit(&std::fs::read_to_string(repo().join(PATCH)).unwrap()),
    )
    .unwrap();
    let obj = d.path().join("hooks.o");
    // PyTorch's flags that change the headers' meaning (docs: the nomagma build's), warnings as
    // errors
    ok(Command::new("g++")
        .args(["-std=c++17", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"])
        .args([
            "-D_GLIBCXX_USE_CXX11_ABI=1",
            "-DNDEBUG",
            "-DUSE_CUDA",
            "-DAT_PER_OPERATOR_HEADERS",
        ])
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(include.join("torch/csrc/api/include"))
        .arg("-I")
        .arg(&cuda)
        .arg("-I")
        .arg(cuda.join("cccl"))
        .arg("-c")
        .arg(&tu)
        .arg("-o")
        .arg(&obj));
    let symbols = ok(Command::new("nm").args(["-C", "--defined-only"]).arg(&obj));
    assert!(
        symbols.contains(" T at::cuda::detail::CUDAHooks::hasMAGMA() const"),
        "{symbols}"
    );
}
