//! Ask the page cache for the libraries a variant's Python will load, before it loads them.
//!
//! The load graph names those files (the tree's own, and where its NEEDED and dlopen names resolve
//! outside it: the CUDA wheels' cuBLAS, cuSOLVER, … hundreds of MB each), so a helper thread asks
//! the kernel to read them ahead (`POSIX_FADV_WILLNEED`: large sequential reads, no copy) while the
//! workers start, instead of `import torch` and the first cases faulting them in a page at a time.
//! On the H200 with an empty page cache this took the two variants' batteries from 24 to 20 s on
//! average (`docs/evidence/smoke-time`); with the files cached it costs the graph (0.2 s for
//! torch 2.11's 48 files, 4 GB), off the critical path.

use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::analysis::graph::{How, substitute_tokens};
use crate::analysis::payload::PayloadSpec;
use crate::progress::Progress;

/// What was asked of the page cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Prefetched {
    /// How many files were read.
    pub files: usize,
    /// How many bytes they hold.
    pub bytes: u64,
    /// How long it took.
    pub took: Duration,
}

/// Read ahead, on a thread of its own, the files the load graphs of `torch_dirs` reach.
pub fn start(torch_dirs: Vec<PathBuf>, spec: PayloadSpec) -> std::thread::JoinHandle<Prefetched> {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut seen = HashSet::new();
        let mut done = Prefetched::default();
        for dir in &torch_dirs {
            for path in graph_files(dir, &spec) {
                let Ok(real) = std::fs::canonicalize(&path) else {
                    continue;
                };
                if seen.insert(real.clone())
                    && let Some(bytes) = read_ahead(&real)
                {
                    done.files += 1;
                    done.bytes += bytes;
                }
            }
        }
        done.took = started.elapsed();
        done
    })
}

/// The files the load graph of `dir` reaches, in the order it reached them: the tree's files,
/// and the libraries outside it that its NEEDED entries and dlopen names resolve to. Nothing when
/// the tree cannot be read (the smoke itself reports that).
///
/// The graph leaves `$ORIGIN` entries that climb out of the tree unsearched (a pip torch's
/// `$ORIGIN/../../nvidia/cublas/lib`: where it lands depends on the install, not the tree); it
/// lists them, and here the install is known, so the first file they name is the one read ahead.
fn graph_files(dir: &Path, spec: &PayloadSpec) -> Vec<PathBuf> {
    let Ok(ins) = crate::analysis::inspect::inspect(dir, spec, &Progress::hidden()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in &ins.graph.edges {
        match (&ins.graph.nodes[e.to].file, &e.how) {
            (Some(f), _) => out.push(dir.join(&ins.files[*f].path)),
            (None, How::OutsideTree { path, .. }) => out.push(PathBuf::from(path)),
            (None, How::NotFound { outside, .. }) => {
                let Some(from) = ins.graph.nodes[e.from].file else {
                    continue;
                };
                let origin = dir.join(&ins.files[from].path);
                let origin = origin.parent().unwrap_or(dir).to_string_lossy();
                let elf = &ins.files[from].elf;
                out.extend(
                    outside
                        .iter()
                        .map(|entry| {
                            Path::new(&substitute_tokens(entry, &origin, elf)).join(&e.name)
                        })
                        .find(|p| p.is_file()),
                );
            }
            _ => {}
        }
    }
    out.extend(ins.files.iter().map(|f| dir.join(&f.path)));
    out
}

/// Ask the kernel to read all of `path` into the page cache; its size when asked.
#[allow(clippy::disallowed_methods)] // why: only asks the kernel for read-ahead (reads no byte itself); issue 54: to route through the opener.
fn read_ahead(path: &Path) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    // SAFETY: an advisory call on a descriptor this function owns; it reads no memory of ours.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) };
    (rc == 0).then_some(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::Scratch;

    /// A pip layout in miniature: torch's library NEEDs a CUDA wheel's library through
    /// `$ORIGIN/../../nvidia/…`, outside the torch directory; another CUDA library nothing loads.
    #[test]
    fn reads_ahead_the_tree_and_what_it_loads_from_outside_it() {
        let mut s = Scratch::new();
        s.lib(
            "nvidia/cublas/lib/libcublas.so.13",
            "int cublas_fn(int x) { return x; }\n",
            &[],
        )
        .lib(
            "nvidia/cufft/lib/libcufft.so.12",
            "int cufft_fn(int x) { return x; }\n",
            &[],
        )
        .lib(
            "torch/lib/libtorch_cuda.so",
            "extern int cublas_fn(int);\nint f(int x) { return cublas_fn(x); }\n",
            &["nvidia/cublas/lib/libcublas.so.13"],
        );
        let torch = s.tree().join("torch");
        let spec = PayloadSpec::for_dep("magma", &[]);
        let real = |p: &str| std::fs::canonicalize(s.tree().join(p)).unwrap();
        let files: HashSet<PathBuf> = graph_files(&torch, &spec)
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap())
            .collect();
        let expected: HashSet<PathBuf> = [
            "torch/lib/libtorch_cuda.so",
            "nvidia/cublas/lib/libcublas.so.13",
        ]
        .map(real)
        .into();
        assert_eq!(files, expected);

        let done = start(vec![torch.clone(), torch], spec).join().unwrap();
        assert_eq!(
            done.files, 2,
            "each file once, though both variants name it"
        );
        assert_eq!(
            done.bytes,
            s.size("torch/lib/libtorch_cuda.so") + s.size("nvidia/cublas/lib/libcublas.so.13")
        );
    }

    #[test]
    fn an_unreadable_tree_reads_nothing_ahead() {
        let missing = PathBuf::from("/nonexistent/splitpkg/torch");
        let done = start(vec![missing], PayloadSpec::for_dep("magma", &[]))
            .join()
            .unwrap();
        assert_eq!((done.files, done.bytes), (0, 0));
    }
}
