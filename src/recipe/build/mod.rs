//! `build-variant`: the lazy library rebuilt without the optional component (MAGMA), from the
//! PyTorch sources and the installed torch of the same release, linked like the stock file and
//! checked with [`verify`](super::verify) before it is written.
//!
//! It runs one program: the C++ compiler the environment names (`--cxx`, else `$CXX` as
//! conda-forge's activation sets it, cross compilers included, else `c++`). Everything else —
//! the stock file's units, SONAME, RPATH, NEEDED list and source prefix — is read with splitpkg's
//! own ELF code ([`stock`]), so a feedstock's build environment needs splitpkg and a compiler
//! only. The result does not depend on where the inputs lie (`-ffile-prefix-map` for every input
//! directory): two builds from different absolute paths are byte-identical.

mod compile;
pub mod stock;

use crate::error::Context;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::analysis::contract::ContractFile;
use crate::error::{Error, Result};
use crate::output::{WorkDir, WorkKind};
use crate::recipe::verify::{self, VerifyReport};

pub use compile::Compiler;
pub use stock::{LINALG_DIR, Stock, StockTarget};

/// What to build: the command line's options as data.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// PyTorch source root (holds [`LINALG_DIR`]).
    pub src: PathBuf,
    /// An installed torch of that release: `include/` and `lib/` with the stock lazy library.
    pub torch: PathBuf,
    /// CUDA header directories (`--cuda-include`), searched after torch's.
    pub cuda_include: Vec<PathBuf>,
    /// CUDA library directories (`--cuda-lib`), linked against after torch's `lib/`.
    pub cuda_lib: Vec<PathBuf>,
    /// Where the built library is written (only when every check passed).
    pub out: PathBuf,
    /// The lazy library's file name (`libtorch_cuda_linalg.so`).
    pub lazy: String,
    /// The component left out (`magma`); the variant built is `no` + this.
    pub without: String,
    /// The C++ compiler and its arguments.
    pub compiler: Compiler,
    /// How many units compile at once (at least 1).
    pub jobs: usize,
    /// Keep the work directory (its path is reported).
    pub keep_temp: bool,
}

/// What a build did, for the human report and `--json` (read back as written: `Deserialize`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct BuildReport {
    /// Which document this is: `splitpkg-build-variant`.
    pub schema: String,
    /// The version of the build report's layout (1).
    pub schema_version: u32,
    /// Where the library was (or would have been) written, absolute.
    pub out: String,
    /// The variant built (`no` + the component left out: `nomagma`).
    pub variant: String,
    /// Written to `out`: every unit compiled, linked, and every check passed.
    pub built: bool,
    /// The compiler command as run: the program, then its arguments.
    pub compiler: Vec<String>,
    /// The stock lazy library the build mirrors.
    pub stock: Stock,
    /// Bytes of the built library.
    pub out_bytes: u64,
    /// Stock NEEDED entries the rebuild does not need (`libmagma.so.2` on conda-forge).
    pub needed_dropped: Vec<String>,
    /// Wall time of each stage.
    pub seconds: Seconds,
    /// The checks of the built library against the stock one.
    pub verify: VerifyReport,
    /// The work directory, when `--keep-temp` kept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// `build-variant --json`.
impl crate::document::Document for BuildReport {
    const SCHEMA: &'static str = "splitpkg-build-variant";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "build report";
    const SCHEMA_FILE: &'static str = "build-variant.schema.json";
    const TITLE: &'static str = "splitpkg build-variant report";
    const ABOUT: &'static str = "What `splitpkg build-variant --json` did: the stock lazy library it mirrored, the compiler run, the stages' times and the checks of the built library. Fields are only added within a schema_version.";
}

/// Wall time of a build's stages, in seconds.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Seconds {
    /// Compiling every unit.
    pub compile: f64,
    /// Linking the library.
    pub link: f64,
    /// Checking the result.
    pub check: f64,
}

/// The directories and files a request names, checked before anything runs (exit 2 on a miss).
fn check_inputs(r: &BuildRequest) -> Result<()> {
    let dir = |p: &Path, what: &str| -> Result<()> {
        if p.is_dir() {
            Ok(())
        } else {
            Err(Error::bad(p.display(), format!("{what}: not a directory")))
        }
    };
    dir(&r.src.join(LINALG_DIR), "--src: no linalg sources there")?;
    dir(&r.torch.join("include"), "--torch: needs include/")?;
    dir(&r.torch.join("lib"), "--torch: needs lib/")?;
    r.cuda_include
        .iter()
        .try_for_each(|d| dir(d, "--cuda-include"))?;
    r.cuda_lib.iter().try_for_each(|d| dir(d, "--cuda-lib"))?;
    if r.without != "magma" {
        return Err(Error::Usage(format!(
            "--without {}: only magma is supported (its switch is AT_MAGMA_ENABLED())",
            r.without
        )));
    }
    if r.out.is_dir() {
        return Err(Error::bad(r.out.display(), "--out is a directory"));
    }
    crate::output::atomic::check_dest(&r.out).map(|_| ())
}

/// The library directories the contract's import check looks in: `--torch`'s, then `--cuda-lib`.
fn lib_dirs(r: &BuildRequest) -> Vec<PathBuf> {
    std::iter::once(r.torch.join("lib"))
        .chain(r.cuda_lib.iter().cloned())
        .collect()
}

/// Every NEEDED library the rebuild links against must be where the linker will look.
fn check_link_libs(r: &BuildRequest, stock: &Stock) -> Result<()> {
    let dirs = lib_dirs(r);
    for l in &stock.link {
        if !dirs.iter().any(|d| d.join(l).exists()) {
            return Err(Error::bad(
                stock.path.display(),
                format!("NEEDED {l} is in neither --torch's lib/ nor any --cuda-lib"),
            ));
        }
    }
    Ok(())
}

/// Build, check and (when every check passes) write `r.out`. `say` gets one line per step.
pub fn build(
    r: &BuildRequest,
    contract: &ContractFile,
    say: &(dyn Fn(&str) + Sync),
) -> Result<BuildReport> {
    check_inputs(r)?;
    let r = &absolute(r)?;
    let stock = Stock::read(&r.torch.join("lib").join(&r.lazy), &r.src.join(LINALG_DIR))?;
    check_link_libs(r, &stock)?;
    say_stock(&stock, &r.without, say);
    let mut work = WorkDir::create(&r.out, WorkKind::Build)?;
    let t0 = Instant::now();
    let job = compile::BuildJob::new(r, &stock, &work.dir)?;
    job.compile_all(say)?;
    let compiled = t0.elapsed().as_secs_f64();
    let built = job.link()?;
    let linked = t0.elapsed().as_secs_f64();
    let variant = format!("no{}", r.without);
    // The imports are checked against the libraries the link used: the compiler's own
    // directories too (a cross build's libc and libstdc++ are not the build machine's).
    let mut dirs = lib_dirs(r);
    dirs.extend(r.compiler.library_dirs());
    let mut verify = verify::verify_variant(&built, &variant, contract, Some(&dirs))?;
    // Reported as the file it becomes, not its name in the work directory.
    verify.library = r.out.display().to_string();
    let checked = t0.elapsed().as_secs_f64();
    let bytes = crate::input::file::read_bounded(
        &built,
        crate::input::file::Links::Follow,
        crate::input::MAX_ELF_MEMBER_BYTES,
        "ELF file",
    )?;
    let report = BuildReport {
        schema: "splitpkg-build-variant".into(),
        schema_version: 1,
        out: r.out.display().to_string(),
        variant,
        built: verify.pass,
        compiler: r.compiler.words(),
        needed_dropped: dropped(&stock.needed, &built)?,
        out_bytes: bytes.len() as u64,
        stock,
        seconds: Seconds {
            compile: compiled,
            link: linked - compiled,
            check: checked - linked,
        },
        verify,
        kept: r.keep_temp.then(|| work.dir.display().to_string()),
    };
    if report.built {
        work.keep_created();
        crate::output::write_atomic_as(&r.out, &bytes, Some(0o755))?;
    }
    if r.keep_temp {
        work.persist();
    }
    Ok(report)
}

/// The request with every path absolute, so the prefix maps and the work directory do not depend
/// on the working directory.
fn absolute(r: &BuildRequest) -> Result<BuildRequest> {
    let abs = |p: &Path| std::path::absolute(p).at(p);
    let real = |p: &Path| p.canonicalize().at(p);
    Ok(BuildRequest {
        src: real(&r.src)?,
        torch: real(&r.torch)?,
        cuda_include: r
            .cuda_include
            .iter()
            .map(|p| real(p))
            .collect::<Result<_>>()?,
        cuda_lib: r.cuda_lib.iter().map(|p| real(p)).collect::<Result<_>>()?,
        out: abs(&r.out)?,
        ..r.clone()
    })
}

fn say_stock(stock: &Stock, without: &str, say: &(dyn Fn(&str) + Sync)) {
    say(&format!(
        "stock:     {} ({} bytes, {:?}, {} + {} translation units)",
        stock.path.display(),
        crate::output::thousands(stock.bytes),
        stock.target,
        stock.units.len(),
        stock.skipped.len()
    ));
    say(&format!("compiling: {}", stock.units.join(" ")));
    let shown: Vec<&str> = stock.skipped.iter().take(8).map(String::as_str).collect();
    say(&format!(
        "skipped:   {} units not in {LINALG_DIR}/ (the statically linked {without}, its LAPACK/BLAS \
         imports and toolchain files{}{})",
        stock.skipped.len(),
        if shown.is_empty() { "" } else { ", e.g. " },
        shown.join(", ")
    ));
}

/// Stock NEEDED entries the built file does not carry.
fn dropped(stock_needed: &[String], built: &Path) -> Result<Vec<String>> {
    let map = crate::input::map_file(built)?;
    let display = built.display().to_string();
    let view = crate::elf::ElfView::parse(&map).elf_at(&display)?;
    let facts = view.facts(&[], None).elf_at(&display)?;
    Ok(stock_needed
        .iter()
        .filter(|n| !facts.needed.contains(n))
        .cloned()
        .collect())
}

/// The human report's closing lines.
pub fn summary(r: &BuildReport) -> String {
    let s = &r.seconds;
    let mut out = verify::report_text(&r.verify);
    out.push_str(&format!(
        "size:      {} bytes vs {} stock ({:.1}%){}\n",
        crate::output::thousands(r.out_bytes),
        crate::output::thousands(r.stock.bytes),
        100.0 * r.out_bytes as f64 / r.stock.bytes.max(1) as f64,
        if r.needed_dropped.is_empty() {
            String::new()
        } else {
            format!("; no longer NEEDs {}", r.needed_dropped.join(", "))
        }
    ));
    out.push_str(&format!(
        "time:      {:.1} s (compile {:.1} s, link {:.1} s, checks {:.1} s) with {}\n",
        s.compile + s.link + s.check,
        s.compile,
        s.link,
        s.check,
        r.compiler.join(" ")
    ));
    if let Some(k) = &r.kept {
        out.push_str(&format!("kept:      {k}\n"));
    }
    out.push_str(&if r.built {
        format!("built:     {} ({}, checks PASS)\n", r.out, r.variant)
    } else {
        format!("checks:    FAIL; {} not written\n", r.out)
    });
    out
}
