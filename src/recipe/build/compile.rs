//! The compile and link steps of `build-variant`: the one program they run is the C++ compiler
//! (and, through it, the linker).

use crate::error::Context;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::{BuildRequest, LINALG_DIR, Stock};
use crate::error::{Error, Result};
use crate::input::file;

/// The compiler command: a program and the words that follow it (`ccache g++`, a conda
/// activation's full path, `aarch64-linux-gnu-g++`).
#[derive(Debug, Clone)]
pub struct Compiler {
    program: String,
    args: Vec<String>,
}

impl Compiler {
    /// `option` (`--cxx`), else `env` (`$CXX`), else `c++`; split on whitespace as make splits
    /// `$(CXX)`. The program must exist (a path, or a name found on `PATH`).
    pub fn resolve(option: Option<&str>, env: Option<&str>) -> Result<Compiler> {
        let (text, from) = match (option, env.filter(|e| !e.trim().is_empty())) {
            (Some(o), _) => (o, "--cxx"),
            (None, Some(e)) => (e, "$CXX"),
            (None, None) => ("c++", "the default"),
        };
        let mut words = text.split_whitespace().map(String::from);
        let program = words
            .next()
            .ok_or_else(|| Error::Usage(format!("{from} is empty")))?;
        if !found(&program) {
            return Err(Error::Usage(format!(
                "compiler {program:?} ({from}) not found (set $CXX or pass --cxx)"
            )));
        }
        Ok(Compiler {
            program,
            args: words.collect(),
        })
    }

    /// The command as run: the program, then its arguments.
    pub fn words(&self) -> Vec<String> {
        std::iter::once(self.program.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        c
    }

    /// The directories the compiler links from (`-print-search-dirs`): where a cross compiler's
    /// target libc and libstdc++ lie (Debian's `/usr/aarch64-linux-gnu/lib`, a conda sysroot),
    /// which the build machine's own library directories do not hold. None if it cannot say.
    pub fn library_dirs(&self) -> Vec<PathBuf> {
        let Ok(o) = self.command().arg("-print-search-dirs").output() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("libraries: ="))
            .map(|l| {
                l.split(':')
                    .map(PathBuf::from)
                    .filter(|d| d.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A path that is a file, or a name some `PATH` directory holds.
fn found(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// One build in its work directory.
pub struct BuildJob<'a> {
    r: &'a BuildRequest,
    stock: &'a Stock,
    work: PathBuf,
    flags: Vec<String>,
}

impl<'a> BuildJob<'a> {
    /// The flags, and the switched `CUDAConfig.h` written into the work directory.
    pub fn new(r: &'a BuildRequest, stock: &'a Stock, work: &Path) -> Result<BuildJob<'a>> {
        let switch = work.join("switch/ATen/cuda");
        std::fs::create_dir_all(&switch).at(&switch)?;
        std::fs::create_dir_all(work.join("obj")).at(work)?;
        let header = r.torch.join("include/ATen/cuda/CUDAConfig.h");
        let text = file::read_text(
            &header,
            file::Links::Follow,
            file::MAX_DOCUMENT_BYTES,
            "header",
        )?;
        let switched = switch_off(&text).ok_or_else(|| {
            Error::bad(
                header.display(),
                "no `#define AT_MAGMA_ENABLED() 1` (or 0) line to switch",
            )
        })?;
        std::fs::write(switch.join("CUDAConfig.h"), switched).at(&switch)?;
        Ok(BuildJob {
            flags: flags(r, stock, work),
            r,
            stock,
            work: work.to_path_buf(),
        })
    }

    /// Compile every unit, `r.jobs` at a time; one line per unit through `say`.
    pub fn compile_all(&self, say: &(dyn Fn(&str) + Sync)) -> Result<()> {
        let next = AtomicUsize::new(0);
        let failed: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
        let spawn_error: Mutex<Option<Error>> = Mutex::new(None);
        let units = &self.stock.units;
        std::thread::scope(|s| {
            for _ in 0..self.r.jobs.clamp(1, units.len().max(1)) {
                s.spawn(|| {
                    while let Some(u) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
                        match self.compile(u) {
                            Ok((o, secs)) if o.status.success() => {
                                say(&format!("  ok   {u} ({secs:.1} s)"))
                            }
                            Ok((o, _)) => {
                                say(&format!("  FAIL {u}"));
                                let log = String::from_utf8_lossy(&o.stderr).into_owned();
                                failed
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push((u.clone(), log));
                            }
                            Err(e) => {
                                *spawn_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = spawn_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let failed = failed.into_inner().unwrap_or_else(|p| p.into_inner());
        match failed.first() {
            None => Ok(()),
            Some((u, log)) => {
                for (unit, log) in &failed {
                    say(&format!("--- {unit}:"));
                    errors(log).iter().for_each(|l| say(l));
                }
                Err(Error::Refused(format!(
                    "compiling {u} failed: {}",
                    errors(log)
                        .first()
                        .map_or("see the compiler's output above", |s| s)
                )))
            }
        }
    }

    fn compile(&self, unit: &str) -> Result<(Output, f64)> {
        let t = Instant::now();
        let src = self.r.src.join(LINALG_DIR).join(unit);
        let out = self
            .r
            .compiler
            .command()
            .args(&self.flags)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(self.work.join("obj").join(format!("{unit}.o")))
            .current_dir(&self.work)
            .output()
            .at(&self.r.compiler.program)?;
        Ok((out, t.elapsed().as_secs_f64()))
    }

    /// Link like the stock file: its SONAME, RPATH or RUNPATH and NEEDED libraries, no undefined
    /// symbol left. Returns the library's path in the work directory.
    pub fn link(&self) -> Result<PathBuf> {
        let out = self.work.join(&self.r.lazy);
        let mut c = self.r.compiler.command();
        c.arg("-shared")
            .arg(format!("-Wl,-soname,{}", self.stock.soname))
            .arg("-Wl,--no-undefined");
        for d in std::iter::once(self.r.torch.join("lib")).chain(self.r.cuda_lib.iter().cloned()) {
            c.arg(format!("-L{}", d.display()))
                .arg(format!("-Wl,-rpath-link,{}", d.display()));
        }
        match (&self.stock.runpath, &self.stock.rpath) {
            (Some(rp), _) => c.args([
                "-Wl,--enable-new-dtags".to_string(),
                format!("-Wl,-rpath,{rp}"),
            ]),
            (None, Some(rp)) => c.args([
                "-Wl,--disable-new-dtags".to_string(),
                format!("-Wl,-rpath,{rp}"),
            ]),
            (None, None) => &mut c,
        };
        c.arg("-o").arg(&out);
        for u in &self.stock.units {
            c.arg(self.work.join("obj").join(format!("{u}.o")));
        }
        c.arg("-Wl,--no-as-needed");
        c.args(self.stock.link.iter().map(|l| format!("-l:{l}")));
        let o = c
            .current_dir(&self.work)
            .output()
            .at(&self.r.compiler.program)?;
        if !o.status.success() {
            let log = String::from_utf8_lossy(&o.stderr);
            let last = log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            return Err(Error::Refused(format!(
                "linking {} failed: {last}",
                self.r.lazy
            )));
        }
        Ok(out)
    }
}

/// PyTorch's flags for the lazy linalg target, and prefix maps that keep every machine path out of
/// the result: the sources map to the prefix the stock file's own paths carry (or `pytorch`), the
/// torch tree to `torch/`, the CUDA headers to `cuda-include/`, the work directory to `build/`.
fn flags(r: &BuildRequest, stock: &Stock, work: &Path) -> Vec<String> {
    let mut f: Vec<String> = [
        "-std=c++17",
        "-fPIC",
        "-O2",
        "-DNDEBUG",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        "-DUSE_CUDA",
        "-DBUILD_LAZY_CUDA_LINALG",
        "-DAT_PER_OPERATOR_HEADERS",
    ]
    .map(String::from)
    .to_vec();
    f.extend(stock.target.defines().iter().map(|d| format!("-D{d}")));
    let map = |from: &Path, to: &str| format!("-ffile-prefix-map={}/={to}/", from.display());
    f.push(map(
        &r.src,
        stock.file_prefix.as_deref().unwrap_or("pytorch"),
    ));
    f.push(map(&r.torch, "torch"));
    f.push(map(work, "build"));
    for inc in [work.join("switch"), r.torch.join("include")]
        .into_iter()
        .chain([
            r.torch.join("include/torch/csrc/api/include"),
            r.src.join("aten/src"),
        ])
    {
        f.push(format!("-I{}", inc.display()));
    }
    for d in &r.cuda_include {
        f.push(format!("-I{}", d.display()));
        if d.join("cccl").is_dir() {
            f.push(format!("-I{}", d.join("cccl").display()));
        }
        f.push(map(d, "cuda-include"));
    }
    f
}

/// `CUDAConfig.h` with `AT_MAGMA_ENABLED()` defined 0; `None` without such a line.
fn switch_off(text: &str) -> Option<String> {
    let mut seen = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let words: Vec<&str> = l
                .trim_start()
                .strip_prefix('#')
                .map(|r| r.split_whitespace().collect())
                .unwrap_or_default();
            match words.as_slice() {
                ["define", "AT_MAGMA_ENABLED()", "1" | "0"] => {
                    seen = true;
                    "#define AT_MAGMA_ENABLED() 0".to_string()
                }
                _ => l.to_string(),
            }
        })
        .collect();
    seen.then(|| lines.join("\n") + "\n")
}

/// The lines of a compiler's output that say `error` (at most 20), else its last 20 lines.
fn errors(log: &str) -> Vec<String> {
    let hits: Vec<String> = log
        .lines()
        .filter(|l| l.contains("error"))
        .take(20)
        .map(crate::sanitize::printable)
        .collect();
    if !hits.is_empty() {
        return hits;
    }
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(20)..]
        .iter()
        .copied()
        .map(crate::sanitize::printable)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_turns_the_define_off_and_keeps_every_other_line() {
        let h = "#pragma once\n#define AT_CUDNN_ENABLED() 1\n#  define   AT_MAGMA_ENABLED()  1\n#if AT_MAGMA_ENABLED()\n#endif\n";
        let s = switch_off(h).unwrap();
        assert!(s.contains("#define AT_MAGMA_ENABLED() 0\n"));
        assert!(s.contains("#define AT_CUDNN_ENABLED() 1\n#"));
        assert!(s.contains("#if AT_MAGMA_ENABLED()\n"));
        assert_eq!(s.lines().count(), h.lines().count());
        assert_eq!(switch_off("#define AT_ROCM_ENABLED() 0\n"), None);
    }

    #[test]
    fn the_compiler_comes_from_the_option_then_cxx_then_cc_plus_plus() {
        let c = Compiler::resolve(Some("sh -x"), Some("nonexistent-cxx")).unwrap();
        assert_eq!(c.words(), ["sh", "-x"]);
        let e = Compiler::resolve(None, Some("nonexistent-cxx -O2")).unwrap_err();
        assert!(
            e.to_string()
                .contains("\"nonexistent-cxx\" ($CXX) not found"),
            "{e}"
        );
        let e = Compiler::resolve(Some("/no/such/g++"), None).unwrap_err();
        assert!(e.to_string().contains("--cxx"), "{e}");
    }
}
