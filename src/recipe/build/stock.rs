//! What `build-variant` takes from the stock lazy library: the translation units it was linked
//! from (its `STT_FILE` symbols), the libraries it links against, its SONAME and RPATH/RUNPATH,
//! the machine it is for and the source prefix its `__FILE__` strings carry. Read with splitpkg's
//! own ELF code, so a build host needs no binutils and no Python.

use std::path::{Path, PathBuf};

use crate::elf::ElfView;
use crate::error::{Context, Error, Result};

/// Where the stock file's sources live in a PyTorch checkout.
pub const LINALG_DIR: &str = "aten/src/ATen/native/cuda/linalg";

/// The libraries the lazy library links against besides libc and libstdc++, by the name before
/// `.so`: taken from the stock file's NEEDED list, so the CUDA major versions follow the release.
const LINK_LIBS: [&str; 7] = [
    "torch_cpu",
    "torch_cuda",
    "c10",
    "c10_cuda",
    "cusolver",
    "cublas",
    "cudart",
];

/// The target a stock file was built for, which decides the CPU-capability defines PyTorch's
/// build passes everywhere: they change the signatures of `DispatchStubImpl`'s exported methods
/// (torch 2.11: three `void*` on x86-64, two on aarch64), so a mismatch would not link.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StockTarget {
    /// x86-64.
    X86_64,
    /// AArch64.
    Aarch64,
    /// 64-bit little-endian PowerPC.
    Ppc64le,
    /// IBM Z (s390x).
    S390x,
}

impl StockTarget {
    fn of(machine: &str) -> Option<StockTarget> {
        match machine {
            "X86_64" | "x86_64" | "x86-64" => Some(StockTarget::X86_64),
            "AARCH64" | "aarch64" => Some(StockTarget::Aarch64),
            "PPC64" | "ppc64" | "ppc64le" => Some(StockTarget::Ppc64le),
            "S390" | "s390x" => Some(StockTarget::S390x),
            _ => None,
        }
    }

    /// `-D` flags of PyTorch's CMake for this target (cmake/Codegen.cmake's CPU capabilities).
    pub fn defines(self) -> &'static [&'static str] {
        match self {
            StockTarget::X86_64 => &["HAVE_AVX512_CPU_DEFINITION", "HAVE_AVX2_CPU_DEFINITION"],
            StockTarget::Aarch64 => &["HAVE_SVE256_CPU_DEFINITION"],
            StockTarget::Ppc64le => &["HAVE_VSX_CPU_DEFINITION"],
            StockTarget::S390x => &["HAVE_ZVECTOR_CPU_DEFINITION"],
        }
    }
}

/// The facts of the stock file a faithful rebuild copies.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Stock {
    /// The stock lazy library's path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The CPU target it was built for.
    pub target: StockTarget,
    /// Units found under `--src`'s linalg directory: what is compiled, in link order.
    pub units: Vec<String>,
    /// Units that are not PyTorch's linalg sources (the statically linked MAGMA, its LAPACK/BLAS,
    /// toolchain files): left out.
    pub skipped: Vec<String>,
    /// NEEDED entries linked again, in the stock file's order.
    pub link: Vec<String>,
    /// Its DT_NEEDED entries, in order.
    pub needed: Vec<String>,
    /// Its DT_SONAME, which the rebuild keeps.
    pub soname: String,
    /// Its DT_RPATH, when it has one (kept by the rebuild).
    pub rpath: Option<String>,
    /// Its DT_RUNPATH, when it has one (kept by the rebuild).
    pub runpath: Option<String>,
    /// The directory PyTorch's sources were under when the stock file was built (`/pytorch`),
    /// so assert and call-site strings come out the same.
    pub file_prefix: Option<String>,
}

impl Stock {
    /// Read `stock`, a lazy library, and match its units against `linalg_dir`.
    pub fn read(stock: &Path, linalg_dir: &Path) -> Result<Stock> {
        let display = stock.display().to_string();
        let map = crate::input::map_file(stock)?;
        let view = ElfView::parse(&map).elf_at(&display)?;
        let facts = view.facts(&[], None).elf_at(&display)?;
        let target = StockTarget::of(&facts.machine).ok_or_else(|| {
            Error::bad(
                &display,
                format!(
                    "a {} file: no PyTorch build flags known for it",
                    facts.machine
                ),
            )
        })?;
        let tus = view.translation_units();
        if tus.is_empty() {
            return Err(Error::bad(
                &display,
                "no translation units: .symtab is stripped, so the units to compile are unknown",
            ));
        }
        let (units, skipped): (Vec<String>, Vec<String>) =
            tus.into_iter().partition(|u| is_source(linalg_dir, u));
        check_units(&display, linalg_dir, &units)?;
        let link = link_libs(&display, &facts.needed)?;
        Ok(Stock {
            path: stock.to_path_buf(),
            bytes: map.len() as u64,
            target,
            units,
            skipped,
            link,
            needed: facts.needed.clone(),
            soname: facts.soname.clone().unwrap_or_else(|| file_name(stock)),
            rpath: facts.rpath.as_ref().map(|r| r.join(":")),
            runpath: facts.runpath.as_ref().map(|r| r.join(":")),
            file_prefix: file_prefix(&map),
        })
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A unit name that is a plain file name under `dir` (never a path that climbs out of it).
fn is_source(dir: &Path, unit: &str) -> bool {
    !unit.contains('/') && unit != ".." && dir.join(unit).is_file()
}

fn check_units(display: &str, linalg_dir: &Path, units: &[String]) -> Result<()> {
    if units.is_empty() {
        return Err(Error::bad(
            display,
            format!(
                "none of its translation units is in {}",
                linalg_dir.display()
            ),
        ));
    }
    let other: Vec<&str> = units
        .iter()
        .map(String::as_str)
        .filter(|u| !u.ends_with(".cpp") && !u.ends_with(".cc") && !u.ends_with(".cxx"))
        .collect();
    if !other.is_empty() {
        return Err(Error::bad(
            display,
            format!(
                "units that need a compiler other than C++ (nvcc?): {}",
                other.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The NEEDED entries of the libraries the rebuild links against; all of [`LINK_LIBS`] must be there.
fn link_libs(display: &str, needed: &[String]) -> Result<Vec<String>> {
    let stem = |n: &str| {
        n.strip_prefix("lib")
            .and_then(|r| r.split_once(".so"))
            .filter(|(_, v)| v.is_empty() || v.starts_with('.'))
            .map(|(s, _)| s.to_string())
    };
    let link: Vec<String> = needed
        .iter()
        .filter(|n| stem(n).is_some_and(|s| LINK_LIBS.contains(&s.as_str())))
        .cloned()
        .collect();
    let missing: Vec<&str> = LINK_LIBS
        .iter()
        .copied()
        .filter(|l| !link.iter().any(|n| stem(n).as_deref() == Some(*l)))
        .collect();
    if !missing.is_empty() {
        return Err(Error::bad(
            display,
            format!(
                "NEEDED lacks lib{}.so (NEEDED: {})",
                missing.join(".so, lib"),
                needed.join(", ")
            ),
        ));
    }
    Ok(link)
}

/// The prefix before `/aten/src/ATen/native/cuda/linalg/` in the file's strings (`/pytorch`),
/// when it is an absolute path of printable characters.
fn file_prefix(bytes: &[u8]) -> Option<String> {
    let needle = b"/aten/src/ATen/native/cuda/linalg/";
    let mut from = 0;
    while let Some(i) = find(&bytes[from..], needle).map(|i| i + from) {
        let start = bytes[..i]
            .iter()
            .rposition(|b| !(0x21..=0x7e).contains(b))
            .map_or(0, |p| p + 1);
        if bytes.get(start) == Some(&b'/') {
            return Some(String::from_utf8_lossy(&bytes[start..i]).into_owned());
        }
        from = i + 1;
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_prefix_is_the_absolute_path_before_the_linalg_sources() {
        let b = b"\0x.cpp\0/pytorch/aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp\0";
        assert_eq!(file_prefix(b).as_deref(), Some("/pytorch"));
        // A relative one is skipped for a later absolute one.
        let b = b"\0rel/aten/src/ATen/native/cuda/linalg/a.cpp\0/w/src/aten/src/ATen/native/cuda/linalg/b\0";
        assert_eq!(file_prefix(b).as_deref(), Some("/w/src"));
        assert_eq!(file_prefix(b"nothing here"), None);
    }

    #[test]
    fn link_libraries_follow_the_stock_needed_list_and_all_seven_are_required() {
        let needed: Vec<String> = [
            "libmagma.so.2",
            "libtorch_cpu.so",
            "libtorch_cuda.so",
            "libc10.so",
            "libc10_cuda.so",
            "libcusolver.so.12",
            "libcublas.so.13",
            "libcudart.so.13",
            "libstdc++.so.6",
        ]
        .map(String::from)
        .to_vec();
        let l = link_libs("x", &needed).unwrap();
        assert_eq!(l.len(), 7);
        assert!(!l.iter().any(|n| n.contains("magma")));
        let e = link_libs("x", &needed[..4]).unwrap_err().to_string();
        assert!(e.contains("libc10_cuda.so, libcusolver.so"), "{e}");
    }
}
