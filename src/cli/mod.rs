//! The command line: clap types and one function per command, grouped by stage. `main.rs` only
//! parses and dispatches; each command builds a library request, calls the library (the analysis
//! goes through [`splitpkg::analysis::pipeline`]) and maps the outcome to an exit code: 0
//! confined/ok, 1 negative verdict, 2 bad input or usage, 3 internal failure, 4 (smoke) stale flag.

mod build;
mod channel;
mod index;
pub mod log;
mod note;
mod recipe;
mod report;
mod smoke;
mod tree;
mod wheel;

use splitpkg::error::Context;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use splitpkg::Exit;
use splitpkg::analysis::inspect::Extras;
use splitpkg::analysis::payload::PayloadSpec;
use splitpkg::analysis::pipeline::{self, Request};
use splitpkg::analysis::plan::Plan;
use splitpkg::error::{Error, Result};
use splitpkg::progress::Progress;
use splitpkg::recipe::split;

pub use build::{BUILD_VARIANT_HELP, BuildVariantArgs};
pub use channel::{ENV_HELP, EnvArgs, PACK_HELP, PackArgs, SOLVE_HELP, SolveArgs};
pub use index::{INDEX_HELP, IndexArgs};
pub use note::{NOTE_HELP, NoteArgs};
pub use recipe::{EmitArgs, FEEDSTOCK_HELP, FeedstockArgs, VerifyVariantArgs};
pub use report::{REPORT_HELP, ReportArgs};
pub use smoke::{SMOKE_HELP, SmokeArgs};
pub use tree::{FatbinArgs, InspectArgs, PlanArgs};
pub use wheel::{WHEEL_HELP, WheelArgs};

const DEFAULT_LAZY: &str = "libtorch_cuda_linalg.so";
const DEFAULT_DEP: &str = "magma";

#[derive(Parser)]
#[command(
    name = "splitpkg",
    version = splitpkg::provenance::VERSION_LINE,
    about = "Prove that MAGMA in a CUDA PyTorch build is reachable only through the lazily loaded linalg library, and split the package along that line.",
    after_help = "Exit codes: 0 confined / success, 1 not confined or payload not present (smoke: a case or check failed), 4 smoke: every variant works but a core flag is stale, 2 bad input or usage (smoke: no CUDA driver or device), 3 internal error.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg inspect site-packages/torch --dot | dot -Tsvg > load.svg\n  splitpkg fatbin site-packages/torch/lib --device sm_120\n  splitpkg smoke --variant magma=/envs/magma --variant \\\n    nomagma=/envs/nomagma --json --out smoke.json\n  splitpkg report --plan plan.json --smoke smoke.json --out report.html"
)]
pub struct Cli {
    /// No progress bars on stderr.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More on stderr: -v each step's timing, -vv each file's (SPLITPKG_LOG or RUST_LOG take a
    /// tracing filter instead, e.g. SPLITPKG_LOG=splitpkg::channel=debug).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Per-file ELF facts and the load graph, with how each edge resolves.
    #[command(
        after_help = "Examples:\n  splitpkg inspect torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg inspect ./torch --json --symbols > facts.json\n  splitpkg inspect ./torch --dot | dot -Tsvg > load.svg"
    )]
    Inspect(InspectArgs),
    /// The verdict and the proposed outputs: core, lazy library (magma/nomagma), optional payload.
    #[command(
        after_help = "Exit codes: 0 CONFINED, 1 NOT CONFINED or NOT PRESENT, 2 bad input.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg plan libtorch-2.5.1-cuda126_h0_300.conda --lazy \\\n    libtorch_cuda_linalg.so --yaml\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl \\\n    --env-lock pylock.toml"
    )]
    Plan(PlanArgs),
    /// Generate conda-build and rattler-build recipes with magma/nomagma variants from a plan.
    #[command(
        after_help = "INPUT is a plan (`splitpkg plan --json` output) or anything `plan` reads.\n\nWrites DIR/rattler-build/{recipe.yaml,variants.yaml,...} and DIR/conda-build/{meta.yaml,conda_build_config.yaml,...}, plus build-variants.sh (build both variants in one job), contract.json (for verify-variant) and HAS_MAGMA.md when core files keep MAGMA state.\n\nExamples:\n  splitpkg emit torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out \\\n    recipes/torch-2.11\n  splitpkg plan $PREFIX --json --out plan.json && splitpkg emit plan.json \\\n    --format rattler-build --out recipe/\n  splitpkg emit plan.json --prefer nomagma --variant-key with_magma --out \\\n    recipe/"
    )]
    Emit(EmitArgs),
    /// Write real .conda packages for every output of a confined plan into a local channel, with its repodata.json.
    #[command(after_help = PACK_HELP)]
    Pack(PackArgs),
    /// Solve install scenarios (default, slim, conflict, version skew, flipped preference) on a channel made by `pack`, offline, with rattler's resolvo solver.
    #[command(after_help = SOLVE_HELP)]
    Solve(SolveArgs),
    /// For an installed environment: which variant of the lazy library it has, what switching would save, and the command to switch.
    #[command(after_help = ENV_HELP)]
    Env(EnvArgs),
    /// Check one build of the lazy library against its variant and the loader contract.
    #[command(
        after_help = "Checks: the SONAME; the payload (present for the variant that carries it, absent otherwise); the contract: the names the loader looks up, the exports core files import and the stock file provides, the registrations it makes at load; every strong import defined by a NEEDED library (--lib-dir). A check that cannot run (the registrations of a library whose machine code splitpkg does not read: it reads x86-64 and AArch64) says \"not checked\" and fails unless --accept-unchecked is given.\n\nExit codes: 0 pass, 1 a check failed or could not run, 2 bad input.\n\nExamples:\n  splitpkg verify-variant $PREFIX/lib/libtorch_cuda_linalg.so --variant \\\n    nomagma --contract contract.json\n  splitpkg verify-variant build/lib/libtorch_cuda_linalg.so --variant \\\n    magma --plan plan.json --json\n  splitpkg verify-variant out/libtorch_cuda_linalg.so --variant nomagma \\\n    --plan plan.json --lib-dir torch/lib --lib-dir cuda/lib\n  splitpkg verify-variant ppc64le/libtorch_cuda_linalg.so --variant nomagma \\\n    --contract contract.json --accept-unchecked"
    )]
    VerifyVariant(VerifyVariantArgs),
    /// Rebuild the lazy library without MAGMA from PyTorch's sources and the installed torch, with the compiler the environment names, and check it before writing it.
    #[command(after_help = BUILD_VARIANT_HELP)]
    BuildVariant(BuildVariantArgs),
    /// Patch a conda-forge feedstock (v1 recipe with a staging output) to split the lazy library into its own output with magma/nomagma variants; prints the diff, --write applies it.
    #[command(after_help = FEEDSTOCK_HELP)]
    Feedstock(FeedstockArgs),
    /// Run each variant on a CUDA GPU: linalg battery vs CPU references, laziness, has_magma.
    #[command(after_help = SMOKE_HELP)]
    Smoke(SmokeArgs),
    /// CUDA device code (.nv_fatbin) per library and for the tree: entries by architecture and kind,
    /// stored vs uncompressed bytes, compression and the minimum driver it needs, SASS-only targets.
    #[command(
        after_help = "Reads headers only (milliseconds per library). --what-if decompresses every entry and compresses it again, and the level sets the cost: on 2 cores, torch 2.11's device code (4.4 GiB uncompressed in libtorch_cuda.so, 0.34 GiB in libtorch_cuda_linalg.so) took about 10 s per GiB for lz4 and zstd:3, 30 s per GiB at zstd:9 and 8 min per GiB at zstd:19. Each library's estimate, measured on its first entries, is printed before it starts; a single file shows a progress bar.\n\nExit codes: 0 success, 1 some library cannot run on a --device, 2 bad input (a corrupt fatbin is named with its file offset).\n\nExamples:\n  splitpkg fatbin torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg fatbin site-packages/torch/lib/libtorch_cuda.so --time\n  # none, lz4 and zstd:3 over a whole torch tree: about a minute on 2 cores\n  splitpkg fatbin ./torch --what-if none --what-if lz4 --what-if zstd\n  # zstd:19 on the 51 MB linalg library alone: about 3 min on 2 cores\n  splitpkg fatbin torch/lib/libtorch_cuda_linalg.so --what-if zstd:19\n  splitpkg fatbin $CONDA_PREFIX --device sm_75 --device sm_120 --json \\\n    --out fatbin.json"
    )]
    Fatbin(FatbinArgs),
    /// Split a CUDA torch wheel into pip wheels: the core, and the lazy library in its magma/nomagma variants.
    #[command(after_help = WHEEL_HELP)]
    Wheel(WheelArgs),
    /// Write or update a static simple index (PEP 503 HTML + PEP 691 JSON, PEP 658 metadata, PEP 825 variants.json) of wheels.
    #[command(after_help = INDEX_HELP)]
    Index(IndexArgs),
    /// One self-contained page (HTML with inline SVG, or Markdown) that answers "should this package
    /// split out MAGMA?" from plan, smoke, fatbin and pack JSON.
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
    /// Write a copy of an ELF library with a .note.dlopen entry (UAPI.12) declaring a library it loads at run time.
    #[command(after_help = NOTE_HELP)]
    Note(NoteArgs),
}

/// Run one parsed command line; the exit code on success, the error (with its own code) otherwise.
pub fn run(cli: Cli) -> Result<Exit> {
    let quiet = cli.quiet;
    match cli.command {
        Command::Inspect(a) => tree::inspect(a, quiet),
        Command::Plan(a) => tree::plan(a, quiet),
        Command::Fatbin(a) => tree::fatbin(a, quiet),
        Command::Emit(a) => recipe::emit(a, quiet),
        Command::VerifyVariant(a) => recipe::verify_variant(a),
        Command::BuildVariant(a) => build::build_variant(a, quiet),
        Command::Feedstock(a) => recipe::feedstock(a),
        Command::Pack(a) => channel::pack(a, quiet),
        Command::Solve(a) => channel::solve(a, quiet),
        Command::Env(a) => channel::env(a),
        Command::Smoke(a) => smoke::smoke(a, quiet),
        Command::Wheel(a) => wheel::wheel(a, quiet),
        Command::Index(a) => index::index(a, quiet),
        Command::Report(a) => report::report(a),
        Command::Note(a) => note::note(a),
    }
}

#[derive(Args, Clone)]
pub struct TargetArgs {
    /// A directory (build output, env prefix, unpacked wheel), a .whl, a .conda or a .tar.bz2.
    path: PathBuf,
    /// The lazily loaded library: file name or SONAME, or a glob over them (`'libfoo_providers_*.so'`:
    /// `*`, `?`, `[...]`). Repeatable: the payload is confined when every path to it crosses a lazy
    /// edge into one of them; they share one lazy output. A glob that matches nothing is an error.
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: Vec<String>,
    /// The optional component: libraries `lib<NAME>*.so*`, symbols `<NAME>_*`. Repeatable: several
    /// components form one payload, named by their names joined with `_` (`--dep cublas --dep cudnn`
    /// → variants cublas_cudnn / nocublas_cudnn).
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    dep: Vec<String>,
    /// Extra symbol prefix that marks payload code (repeatable), e.g. `--dep-symbol magmablas_`.
    #[arg(long, value_name = "PREFIX")]
    dep_symbol: Vec<String>,
    /// Also search every file's .symtab for payload code with hidden visibility (slower: reads
    /// the static symbol tables, ~170 MiB for torch 2.11).
    #[arg(long)]
    deep: bool,
    /// LD_LIBRARY_PATH for the modelled processes (colon-separated): searched after DT_RPATH,
    /// before DT_RUNPATH. Absolute directories count inside a directory input; relative ones are
    /// tree directories.
    #[arg(long, value_name = "DIRS")]
    ld_library_path: Option<String>,
}

impl TargetArgs {
    /// The pipeline request these options describe.
    fn request(&self, extras: Extras) -> Request {
        let mut spec = PayloadSpec::for_deps(&self.dep, &self.dep_symbol);
        spec.deep = self.deep;
        let ld_library_path = self
            .ld_library_path
            .as_deref()
            .map(|d| d.split(':').map(str::to_string).collect())
            .unwrap_or_default();
        Request {
            path: self.path.clone(),
            lazy: self.lazy.clone(),
            spec,
            extras: Extras {
                ld_library_path,
                ..extras
            },
        }
    }
}

/// Names, version and preference of the split: shared by `emit` and `pack`, so recipes and
/// packages get the same metadata from the same flags.
#[derive(Args, Clone)]
struct SplitArgs {
    /// Name of the core package.
    #[arg(long, default_value = "libtorch", value_name = "NAME")]
    core_name: String,
    /// Name of the lazy-library package.
    #[arg(long, default_value = "libtorch-cuda-linalg", value_name = "NAME")]
    lazy_name: String,
    /// Package version (default: from the input's metadata, without a local `+cu130` part).
    #[arg(long)]
    version: Option<String>,
    #[arg(long, default_value_t = 0)]
    build_number: u64,
    /// The variant a plain install gets (`magma` or `nomagma` for --dep magma).
    #[arg(long, value_name = "VARIANT")]
    prefer: Option<String>,
    /// Variant key, confined to the lazy output.
    #[arg(long, default_value = "linalg_variant", value_name = "KEY")]
    variant_key: String,
    /// Package(s) providing the payload (repeatable; default: for external payload libraries the
    /// conda package data/providers.json names, else lib<dep> for each --dep).
    #[arg(long, value_name = "NAME")]
    payload_package: Vec<String>,
    /// Build-string prefix for the keys that shape the binary (default: from the input, e.g. cuda130).
    #[arg(long, value_name = "KEYS")]
    build_keys: Option<String>,
}

impl Default for SplitArgs {
    /// The flags' defaults, for commands that take only some of them (`wheel`).
    fn default() -> Self {
        SplitArgs {
            core_name: "libtorch".into(),
            lazy_name: "libtorch-cuda-linalg".into(),
            version: None,
            build_number: 0,
            prefer: None,
            variant_key: "linalg_variant".into(),
            payload_package: Vec::new(),
            build_keys: None,
        }
    }
}

/// `--lazy-variant NAME=FILE`.
fn parse_lazy_variant(v: Option<&str>) -> Result<Option<(String, PathBuf)>> {
    v.map(|v| {
        let (name, file) = v
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--lazy-variant {v}: expected NAME=FILE")))?;
        Ok((name.to_string(), PathBuf::from(file)))
    })
    .transpose()
}

impl SplitArgs {
    fn options(&self, plan: &Plan, input: &Path) -> Result<split::SplitOptions> {
        let (default_version, default_keys) = split::default_version_and_keys(plan);
        let version = self.version.clone().or(default_version).ok_or_else(|| {
            Error::Usage(format!(
                "{}: no package version in the input; pass --version",
                input.display()
            ))
        })?;
        let payload_packages = if self.payload_package.is_empty() {
            split::default_payload_packages(plan)
        } else {
            self.payload_package.clone()
        };
        Ok(split::SplitOptions {
            core_name: self.core_name.clone(),
            lazy_name: self.lazy_name.clone(),
            version,
            build_number: self.build_number,
            prefer: self
                .prefer
                .clone()
                .unwrap_or_else(|| plan.options.dep.clone()),
            variant_key: self.variant_key.clone(),
            payload_packages,
            payload_version: split::payload_version(plan),
            build_keys: self.build_keys.clone().unwrap_or(default_keys),
            cuda_floor: plan
                .device_code
                .as_ref()
                .and_then(|d| d.cuda_floor.as_ref())
                .map(|v| format!("__cuda >={v}")),
            external_depends: Vec::new(),
        })
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .failed_at("JSON")
}

/// A plan from PLAN.json or by planning a tree.
fn load_plan(input: &Path, lazy: &[String], dep: &[String], quiet: bool) -> Result<Plan> {
    if input.extension().is_some_and(|e| e == "json") {
        return <Plan as splitpkg::document::Document>::load(input);
    }
    Ok(
        pipeline::plan_tree(&Request::new(input, lazy, dep), &Progress::new(!quiet))?
            .leak_at_exit(),
    )
}
