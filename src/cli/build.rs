//! `build-variant`: the lazy library rebuilt without the optional component, then checked.

use splitpkg::document::Document;
use splitpkg::error::Context;
use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::contract::ContractFile;
use splitpkg::error::Result;
use splitpkg::output::emit as write_out;
use splitpkg::recipe::build::{self, BuildRequest, Compiler};

use super::{DEFAULT_DEP, DEFAULT_LAZY, load_plan, to_json};

pub const BUILD_VARIANT_HELP: &str = "Compiles the stock file's translation units (its STT_FILE symbols) found under SRC/aten/src/ATen/native/cuda/linalg with AT_MAGMA_ENABLED() 0 (a switched copy of TORCH/include/ATen/cuda/CUDAConfig.h first on the include path), links them like the stock file (SONAME, RPATH/RUNPATH, NEEDED), checks the result with verify-variant (the stock file's exports, its registrations at load, the loader's lookups, every import defined by a NEEDED library found in TORCH/lib or --cuda-lib), and writes --out atomically only when every check passes.\n\nThe one program it runs is the C++ compiler: --cxx, else $CXX (conda-forge's activation sets it, cross compilers included), else c++. No nm, readelf, c++filt or python. The output does not depend on where the inputs lie: every input directory is mapped to a fixed name (-ffile-prefix-map), so two builds from different absolute paths are byte-identical.\n\nExit codes: 0 built and checked, 1 a compile, link or check failed (nothing written), 2 bad input.\n\nExamples:\n  # in a conda-forge build script (the staging's sources and torch tree)\n  splitpkg build-variant --src \"$SRC_DIR\" --torch build/lib.linux-x86_64/torch \\\n    --cuda-include \"$PREFIX/include\" --cuda-lib \"$PREFIX/lib\" \\\n    --out \"$PREFIX/lib/libtorch_cuda_linalg.so\"\n  # a PyTorch checkout and an unpacked wheel, cross-compiled for aarch64\n  splitpkg build-variant --src pytorch --torch torch-aarch64/torch \\\n    --cuda-include cuda/include --cuda-lib cuda/lib \\\n    --cxx aarch64-linux-gnu-g++ --out out/libtorch_cuda_linalg.so --json";

#[derive(Args)]
pub struct BuildVariantArgs {
    /// PyTorch source root of the same release (holds aten/src/ATen/native/cuda/linalg/).
    #[arg(long, value_name = "DIR")]
    src: PathBuf,
    /// Installed torch of that release: DIR/include and DIR/lib with the stock lazy library (a
    /// wheel's torch/, a build tree's torch/, or a conda prefix).
    #[arg(long, value_name = "DIR")]
    torch: PathBuf,
    /// CUDA headers (repeatable); DIR/cccl is added too when present.
    #[arg(long = "cuda-include", value_name = "DIR", required = true)]
    cuda_include: Vec<PathBuf>,
    /// Where libcusolver, libcublas and libcudart are (repeatable).
    #[arg(long = "cuda-lib", value_name = "DIR", required = true)]
    cuda_lib: Vec<PathBuf>,
    /// The library to write (atomically, only when every check passes; its directory is created).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The C++ compiler command (default: $CXX, else c++).
    #[arg(long, value_name = "CXX")]
    cxx: Option<String>,
    /// The optional component to leave out (only magma).
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    without: String,
    /// The lazy library's file name in TORCH/lib.
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: String,
    /// contract.json for the check (default: the plan of --torch).
    #[arg(long, value_name = "FILE")]
    contract: Option<PathBuf>,
    /// Parallel compiles (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Keep the work directory (removed on success, failure and SIGINT/SIGTERM otherwise).
    #[arg(long)]
    keep_temp: bool,
    /// JSON on stdout (the stock file's facts, the compiler, timings and the verify report); the
    /// step lines go to stderr.
    #[arg(long)]
    json: bool,
}

pub fn build_variant(a: BuildVariantArgs, quiet: bool) -> Result<Exit> {
    let compiler = Compiler::resolve(a.cxx.as_deref(), std::env::var("CXX").ok().as_deref())?;
    let contract = match &a.contract {
        Some(c) => ContractFile::load(c)?,
        None => {
            let plan = load_plan(
                &a.torch,
                std::slice::from_ref(&a.lazy),
                std::slice::from_ref(&a.without),
                true,
            )?;
            ContractFile::for_library(&plan, &a.lazy).invalid_at(a.torch.display())?
        }
    };
    let jobs = a
        .jobs
        .map(usize::from)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let request = BuildRequest {
        src: a.src,
        torch: a.torch,
        cuda_include: a.cuda_include,
        cuda_lib: a.cuda_lib,
        out: a.out,
        lazy: a.lazy,
        without: a.without,
        compiler,
        jobs,
        keep_temp: a.keep_temp,
    };
    let json = a.json;
    let say = move |line: &str| {
        if json {
            if !quiet {
                splitpkg::output::stderr_line(format_args!("{line}"));
            }
        } else {
            splitpkg::output::stdout_line(format_args!("{line}"));
        }
    };
    let report = build::build(&request, &contract, &say)?;
    let text = if json {
        to_json(&report)?
    } else {
        build::summary(&report)
    };
    write_out(None, &text)?;
    Ok(Exit::pass_or_no(report.built))
}
