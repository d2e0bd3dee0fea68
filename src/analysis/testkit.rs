//! Small trees of real ELF files, built with gcc inside a test (the unit tests and tests/it),
//! for the rules of the verdict, the plan, the split and emit. Each test writes the few libraries
//! its rule needs (the wider fixture trees of `fixtures/build.sh` are exercised through the CLI).
//!
//! Libraries get their file name as SONAME, one DT_RPATH entry per directory of what they NEED
//! (`$ORIGIN`-relative, as torch ships them) and a DT_NEEDED entry for every name in `needs`,
//! whether or not a symbol is used.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::analysis::inspect::{Inspection, inspect};
use crate::analysis::payload::PayloadSpec;
use crate::analysis::plan::{Plan, make_plan};
use crate::analysis::verdict::{Analysis, analyse};
use crate::progress::Progress;

/// The lazy library every scenario uses, as torch names it.
pub const LAZY: &str = "libtorch_cuda_linalg.so";

/// MAGMA stand-in code: unmangled `magma_*`/`magmablas_*` entry points.
pub const MAGMA: &str =
    "int magma_dgetrf_gpu(int x) { return 2 * x; }\nint magmablas_dgemm(int x) { return 4 * x; }\n";

/// Code that loads `library` by name at run time and looks `entry` up in it (the library name and
/// the symbol name sit side by side in `.rodata`, as in torch's LinearAlgebraStubs).
pub fn loader(fn_name: &str, library: &str, entry: &str) -> String {
    format!(
        "#include <dlfcn.h>\n\
         int {fn_name}(int x) {{\n\
         \x20   void *h = dlopen(\"{library}\", RTLD_NOW | RTLD_LOCAL);\n\
         \x20   if (!h) return -1;\n\
         \x20   int (*f)(int) = (int (*)(int))dlsym(h, \"{entry}\");\n\
         \x20   return f ? f(x) : -2;\n\
         }}\n"
    )
}

/// A scratch directory: `tree/` is the input, `src/` holds the C sources outside it.
pub struct Scratch {
    dir: tempfile::TempDir,
    n: usize,
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("tree")).unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        Scratch { dir, n: 0 }
    }

    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("tree")
    }

    /// A shared library at tree path `path` from C `code`, NEEDing `needs` (tree paths of
    /// libraries built before).
    pub fn lib(&mut self, path: &str, code: &str, needs: &[&str]) -> &mut Scratch {
        self.lib_as(path, crate::input::Tree::file_name(path), code, needs)
    }

    /// [`Self::lib`] with a SONAME other than the file name (`libmagma.so.2` for
    /// `libmagma.so.2.8.0`); what links against it NEEDs the SONAME.
    pub fn lib_as(&mut self, path: &str, soname: &str, code: &str, needs: &[&str]) -> &mut Scratch {
        self.compile(
            path,
            code,
            needs,
            &["-shared".to_string(), format!("-Wl,-soname,{soname}")],
        )
    }

    /// An executable at tree path `path` (a root of the load graph).
    pub fn exe(&mut self, path: &str, code: &str, needs: &[&str]) -> &mut Scratch {
        self.compile(path, code, needs, &[])
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> &mut Scratch {
        let p = self.tree().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
        self
    }

    pub fn hardlink(&mut self, path: &str, existing: &str) -> &mut Scratch {
        std::fs::hard_link(self.tree().join(existing), self.tree().join(path)).unwrap();
        self
    }

    pub fn file(&mut self, path: &str, bytes: &[u8]) -> &mut Scratch {
        let p = self.tree().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
        self
    }

    /// Size on disk of a tree path.
    pub fn size(&self, path: &str) -> u64 {
        std::fs::metadata(self.tree().join(path)).unwrap().len()
    }

    fn compile(&mut self, path: &str, code: &str, needs: &[&str], kind: &[String]) -> &mut Scratch {
        let tree = self.tree();
        let out = tree.join(path);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        self.n += 1;
        let src = self.dir.path().join("src").join(format!("{}.c", self.n));
        std::fs::write(&src, code).unwrap();
        let here = Path::new(path).parent().unwrap_or(Path::new(""));
        let mut rpath: Vec<String> = Vec::new();
        let mut link: Vec<String> = vec!["-Wl,--no-as-needed".into()];
        for need in needs {
            let dir = Path::new(need).parent().unwrap_or(Path::new(""));
            let entry = format!("$ORIGIN{}", relative(here, dir));
            if !rpath.contains(&entry) {
                rpath.push(entry);
            }
            link.push(format!("-L{}", tree.join(dir).display()));
            link.push(format!("-l:{}", crate::input::Tree::file_name(need)));
        }
        let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()));
        cmd.args(["-O1", "-fPIC", "-g0", "-w"]).args(kind);
        if !rpath.is_empty() {
            cmd.arg("-Wl,--disable-new-dtags")
                .arg(format!("-Wl,-rpath,{}", rpath.join(":")));
        }
        cmd.arg("-o").arg(&out).arg(&src).arg("-ldl").args(&link);
        let o = cmd
            .output()
            .expect("run gcc (the unit tests of the analysis rules build small ELF trees)");
        assert!(
            o.status.success(),
            "gcc for {path}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        self
    }

    pub fn inspect(&self, dep: &str) -> Inspection {
        inspect(
            &self.tree(),
            &PayloadSpec::for_dep(dep, &[]),
            &Progress::hidden(),
        )
        .expect("inspect the scratch tree")
    }

    /// The verdict for `--dep magma --lazy libtorch_cuda_linalg.so`.
    pub fn analyse(&self) -> (Inspection, Analysis) {
        let ins = self.inspect("magma");
        let a = analyse(&ins, &[LAZY]);
        (ins, a)
    }

    /// The plan for `--dep magma --lazy libtorch_cuda_linalg.so`.
    pub fn plan(&self) -> Plan {
        let (ins, a) = self.analyse();
        make_plan(&ins, &a, &[LAZY])
    }
}

/// `$ORIGIN`-relative suffix from directory `from` to directory `to` (both tree-relative): empty,
/// or `/../lib`-style.
fn relative(from: &Path, to: &Path) -> String {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut s = String::new();
    for _ in common..f.len() {
        s.push_str("/..");
    }
    for c in &t[common..] {
        s.push('/');
        s.push_str(&c.as_os_str().to_string_lossy());
    }
    s
}

/// The conda-forge layout in miniature: `lib/libmagma.so.2` NEEDed only by the lazy library, which
/// `lib/libtorch_cuda.so` loads by name and looks `linalg_entry` up in; both link `libtorch_cpu.so`.
pub fn conda_layout() -> Scratch {
    let mut s = Scratch::new();
    s.lib(
        "lib/libtorch_cpu.so",
        "int torch_cpu_fn(int x) { return x + 1; }\n",
        &[],
    )
    .lib("lib/libmagma.so.2", MAGMA, &[])
    .lib(
        "lib/libtorch_cuda_linalg.so",
        "extern int magma_dgetrf_gpu(int);\nextern int torch_cpu_fn(int);\n\
             int linalg_entry(int x) { return magma_dgetrf_gpu(x) + torch_cpu_fn(x); }\n",
        &["lib/libmagma.so.2", "lib/libtorch_cpu.so"],
    )
    .lib(
        "lib/libtorch_cuda.so",
        &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
        &["lib/libtorch_cpu.so"],
    );
    s
}

/// The wheel layout in miniature: MAGMA linked into the lazy library, no libmagma.
pub fn wheel_layout() -> Scratch {
    let mut s = Scratch::new();
    s.lib("torch/lib/libtorch_cpu.so", "int torch_cpu_fn(int x) { return x + 1; }\n", &[])
        .lib(
            "torch/lib/libtorch_cuda_linalg.so",
            &format!("{MAGMA}extern int torch_cpu_fn(int);\nint linalg_entry(int x) {{ return magma_dgetrf_gpu(x) + torch_cpu_fn(x); }}\n"),
            &["torch/lib/libtorch_cpu.so"],
        )
        .lib("torch/lib/libtorch_cuda.so", &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"), &["torch/lib/libtorch_cpu.so"]);
    s
}

/// The conda layout with a real MAGMA package: versioned file and soname symlinks, a helper
/// only MAGMA needs, a second payload library nothing loads, and links of every kind.
pub fn conda_prefix() -> Scratch {
    let mut s = Scratch::new();
    s.lib(
        "lib/libtorch_cpu.so",
        "int torch_cpu_fn(int x) { return x + 1; }\n",
        &[],
    )
    .lib(
        "lib/libmagma_helper.so",
        "int helper_fn(int x) { return x; }\n",
        &[],
    )
    .lib_as(
        "lib/libmagma.so.2.8.0",
        "libmagma.so.2",
        MAGMA,
        &["lib/libmagma_helper.so", "lib/libtorch_cpu.so"],
    )
    .symlink("lib/libmagma.so.2", "libmagma.so.2.8.0")
    .symlink("lib/libmagma.so", "libmagma.so.2")
    .lib(
        "lib/libmagma_sparse.so",
        "extern int magma_dgetrf_gpu(int);\nint magma_dcg(int x) { return magma_dgetrf_gpu(x); }\n",
        &["lib/libmagma.so.2"],
    )
    .lib(
        "lib/libtorch_cuda_linalg.so",
        "extern int magma_dgetrf_gpu(int);\nextern int torch_cpu_fn(int);\n\
             int linalg_entry(int x) { return magma_dgetrf_gpu(x) + torch_cpu_fn(x); }\n",
        &["lib/libmagma.so.2", "lib/libtorch_cpu.so"],
    )
    .lib(
        "lib/libtorch_cuda.so",
        &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
        &["lib/libtorch_cpu.so"],
    )
    .symlink("lib/liblinalg-alias.so", LAZY)
    .hardlink("lib/helper-link.so", "lib/libmagma_helper.so")
    .symlink("lib/dangling.so", "nowhere.so")
    .file("lib/python3.11/site-packages/torch/version.txt", b"2.5.1\n");
    s
}

/// Two lazily loaded providers sharing one payload, as onnxruntime's CUDA and TensorRT providers
/// share cuBLAS: `lib/libfoo_core.so` dlopens `libfoo_providers_a.so` and `libfoo_providers_b.so`
/// (looking `provider_entry` up in each), both NEED `lib/libheavy.so.1` (`--dep heavy`), and
/// `bin/foo_run` NEEDs the core.
pub fn providers_layout() -> Scratch {
    let mut s = Scratch::new();
    let provider = |n: u32| {
        format!(
            "extern int heavy_solve(int);\nint provider_entry(int x) {{ return heavy_solve(x) + {n}; }}\n"
        )
    };
    s.lib(
        "lib/libheavy.so.1",
        "int heavy_solve(int x) { return 3 * x; }\n",
        &[],
    )
    .lib(
        "lib/libfoo_providers_a.so",
        &provider(1),
        &["lib/libheavy.so.1"],
    )
    .lib(
        "lib/libfoo_providers_b.so",
        &provider(2),
        &["lib/libheavy.so.1"],
    )
    .lib("lib/libfoo_core.so", &providers_loader(), &[])
    .exe(
        "bin/foo_run",
        "int main(void) { return 0; }\n",
        &["lib/libfoo_core.so"],
    );
    s
}

/// The core of [`providers_layout`]: loads each provider by name on demand.
pub fn providers_loader() -> String {
    format!(
        "{}{}",
        loader("use_a", "libfoo_providers_a.so", "provider_entry"),
        loader("use_b", "libfoo_providers_b.so", "provider_entry")
    )
}
