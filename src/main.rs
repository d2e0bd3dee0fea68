//! The `splitpkg` command line: a thin layer over the library. Each subcommand parses its options,
//! calls one library stage, and maps the outcome to an exit code (0 confined/ok, 1 negative
//! verdict, 2 bad input or usage, 3 internal failure).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use splitpkg::analysis::inspect::{Extras, Inspection, inspect_with};
use splitpkg::analysis::payload::PayloadSpec;
use splitpkg::analysis::{plan, text as report, verdict};
use splitpkg::error::{Error, Result};
use splitpkg::fatbin;
use splitpkg::output::emit;
use splitpkg::progress::Progress;
use splitpkg::recipe::{emit, split, verify};
use splitpkg::smoke::{self, cases::Filter, expect::Tables};

fn emit_out(text: &str) -> Result<()> {
    emit(None, text)
}

/// The command line recorded in generated recipe headers: options only, no machine paths.
fn emit_command(source: &str, split: &split::Split, format: FormatArg, stage: &str) -> String {
    let o = &split.options;
    let format = match format {
        FormatArg::RattlerBuild => "rattler-build",
        FormatArg::CondaBuild => "conda-build",
        FormatArg::Both => "both",
    };
    format!(
        "splitpkg emit {source} --format {format} --core-name {} --lazy-name {} --version {} --build-number {} --prefer {} --variant-key {} --build-keys '{}' --stage {stage}{}",
        o.core_name,
        o.lazy_name,
        o.version,
        o.build_number,
        o.prefer,
        o.variant_key,
        o.build_keys,
        o.payload_packages.iter().map(|p| format!(" --payload-package {p}")).collect::<String>()
    )
}

const DEFAULT_LAZY: &str = "libtorch_cuda_linalg.so";
const DEFAULT_DEP: &str = "magma";

#[derive(Parser)]
#[command(
    name = "splitpkg",
    version,
    about = "Prove that MAGMA in a CUDA PyTorch build is reachable only through the lazily loaded linalg library, and split the package along that line.",
    after_help = "Exit codes: 0 confined / success, 1 not confined or payload not present (smoke: a case or check failed), 4 smoke: every variant works but a core flag is stale, 2 bad input or usage (smoke: no CUDA driver or device), 3 internal error.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg inspect site-packages/torch --dot | dot -Tsvg > load.svg\n  splitpkg fatbin site-packages/torch/lib --device sm_120\n  splitpkg smoke --variant magma=/envs/magma --variant nomagma=/envs/nomagma --json --out smoke.json"
)]
struct Cli {
    /// No progress bars on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
pub(crate) struct Target {
    /// A directory (build output, env prefix, unpacked wheel), a .whl, a .conda or a .tar.bz2.
    path: PathBuf,
    /// The lazily loaded library (file name or SONAME).
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: String,
    /// The optional component: libraries `lib<NAME>*.so*`, symbols `<NAME>_*`.
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    dep: String,
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

#[derive(Subcommand)]
enum Command {
    /// Per-file ELF facts and the load graph, with how each edge resolves.
    #[command(
        after_help = "Examples:\n  splitpkg inspect torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg inspect ./torch --json --symbols > facts.json\n  splitpkg inspect ./torch --dot | dot -Tsvg > load.svg"
    )]
    Inspect {
        #[command(flatten)]
        target: Target,
        /// JSON: files, facts (with the translation units named by `.symtab` STT_FILE symbols), nodes and edges.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Graphviz DOT of the load graph.
        #[arg(long)]
        dot: bool,
        /// Include every dynamic symbol (name, version, size) in --json.
        #[arg(long, requires = "json")]
        symbols: bool,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The verdict and the proposed outputs: core, lazy library (magma/nomagma), optional payload.
    #[command(
        after_help = "Exit codes: 0 CONFINED, 1 NOT CONFINED or NOT PRESENT, 2 bad input.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg plan libtorch-2.5.1-cuda126_h0_300.conda --lazy libtorch_cuda_linalg.so --yaml"
    )]
    Plan {
        #[command(flatten)]
        target: Target,
        /// JSON (schema docs/plan.schema.json, `schema_version` 1).
        #[arg(long, conflicts_with = "yaml")]
        json: bool,
        /// YAML of the same document.
        #[arg(long)]
        yaml: bool,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Generate conda-build and rattler-build recipes with magma/nomagma variants from a plan.
    #[command(
        after_help = "INPUT is a plan (`splitpkg plan --json` output) or anything `plan` reads.\n\nWrites DIR/rattler-build/{recipe.yaml,variants.yaml,...} and DIR/conda-build/{meta.yaml,conda_build_config.yaml,...}, plus build-variants.sh (build both variants in one job), contract.json (for verify-variant) and HAS_MAGMA.md when core files keep MAGMA state.\n\nExamples:\n  splitpkg emit torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out recipes/torch-2.11\n  splitpkg plan $PREFIX --json --out plan.json && splitpkg emit plan.json --format rattler-build --out recipe/\n  splitpkg emit plan.json --prefer nomagma --variant-key with_magma --out recipe/"
    )]
    Emit {
        /// PLAN.json, or a tree/.whl/.conda/.tar.bz2 to plan first.
        input: PathBuf,
        /// Which recipe formats to write.
        #[arg(long, value_enum, default_value = "both")]
        format: FormatArg,
        /// Output directory (created; files are replaced atomically).
        #[arg(long, short, value_name = "DIR")]
        out: PathBuf,
        #[command(flatten)]
        split: SplitArgs,
        /// Source directory the recipes read the staged build from, relative to the recipe.
        #[arg(long, default_value = "stage", value_name = "DIR")]
        stage: String,
        /// The lazily loaded library (when INPUT is not a plan).
        #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
        lazy: String,
        /// The optional component (when INPUT is not a plan).
        #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
        dep: String,
    },
    /// Write real .conda packages for every output of a confined plan into a local channel (indexed with rattler_index).
    #[command(after_help = PACK_HELP)]
    Pack {
        #[command(flatten)]
        target: Target,
        /// The channel directory (created; packages are added to what is there).
        #[arg(long, short, value_name = "CHANNEL")]
        out: PathBuf,
        /// The other build of the lazy library, NAME=FILE (`nomagma=build/lib/libtorch_cuda_linalg.so`).
        /// It must pass `verify-variant` against the plan's contract.
        #[arg(long = "lazy-variant", value_name = "NAME=FILE")]
        lazy_variant: Option<String>,
        /// Stand-in manifest (YAML or JSON; see docs/pack.md) [default: built-in libmagma 2.8.0 and
        /// libmagma_sparse 2.8.0 at the sizes conda-forge measured in 2024].
        #[arg(long, value_name = "FILE")]
        standins: Option<PathBuf>,
        /// zstd level of the inner archives, 1-22. The default 3 packs the 1.1 GB torch 2.11 wheel
        /// in well under a minute on 2 cores; 19 (conda-forge's) is several times slower for ~10 % less.
        #[arg(long, default_value_t = splitpkg::channel::pack::DEFAULT_COMPRESSION, value_name = "LEVEL")]
        compression_level: i32,
        /// zstd worker threads [default: all cores]; the bytes written do not depend on it.
        #[arg(long, value_name = "N")]
        threads: Option<u32>,
        /// JSON report (schema docs/pack.schema.json), including every tree path → package.
        #[arg(long)]
        json: bool,
        /// Pack symlinks that point outside the tree (an absolute target, or one climbing above the
        /// root) as they are; without it such a link is refused (exit 2; docs/security.md).
        #[arg(long)]
        allow_absolute_symlinks: bool,
        #[command(flatten)]
        split: SplitArgs,
    },
    /// Solve install scenarios (default, slim, conflict, version skew, flipped preference) on a channel made by `pack`, offline, with rattler's resolvo solver.
    #[command(after_help = SOLVE_HELP)]
    Solve {
        /// A channel directory written by `splitpkg pack` (it reads CHANNEL/splitpkg.json).
        channel: PathBuf,
        /// A second channel packed from the same input with the opposite --prefer, for scenario (e).
        #[arg(long, value_name = "CHANNEL")]
        prefer_channel: Option<PathBuf>,
        /// Virtual package NAME=VERSION (repeatable; NAME=none removes a default). Defaults:
        /// __unix=0, __linux=6.1, __glibc=2.28, __cuda=<the CUDA runtime the input NEEDs>.0 (else 13.0).
        #[arg(long = "virtual", value_name = "NAME=VERSION")]
        virtual_packages: Vec<String>,
        /// The version to test [default: the newest in the channel].
        #[arg(long)]
        version: Option<String>,
        /// Install the default (a) and slim (b) solutions into DIR/default and DIR/slim with
        /// rattler's installer and plan both prefixes.
        #[arg(long, value_name = "DIR")]
        install: Option<PathBuf>,
        /// JSON (schema docs/solve.schema.json, `schema_version` 1).
        #[arg(long)]
        json: bool,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// For an installed environment: which variant of the lazy library it has, what switching would save, and the command to switch.
    #[command(after_help = ENV_HELP)]
    Env {
        /// The environment prefix (with conda-meta/).
        prefix: PathBuf,
        /// Name of the lazy-library package.
        #[arg(long, default_value = "libtorch-cuda-linalg", value_name = "NAME")]
        lazy_name: String,
        /// The optional component (variants NAME and noNAME).
        #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
        dep: String,
        /// A channel made by `splitpkg pack` that has the other variant [default: the local channel
        /// the lazy package was installed from, when it has a splitpkg.json].
        #[arg(long, value_name = "CHANNEL")]
        channel: Option<PathBuf>,
        /// Also write an SVG bar chart of the environment now and after switching (atomically).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Switch the environment to the other variant now, with rattler's solver and installer
        /// (offline, from the splitpkg channel), and report the transaction and the new state.
        #[arg(long, conflicts_with = "svg")]
        switch: bool,
        /// JSON (schema docs/env.schema.json, `schema_version` 1).
        #[arg(long)]
        json: bool,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Check one build of the lazy library against its variant and the loader contract.
    #[command(
        after_help = "Exit codes: 0 pass, 1 a check failed, 2 bad input.\n\nExamples:\n  splitpkg verify-variant $PREFIX/lib/libtorch_cuda_linalg.so --variant nomagma --contract contract.json\n  splitpkg verify-variant build/lib/libtorch_cuda_linalg.so --variant magma --plan plan.json --json"
    )]
    VerifyVariant {
        /// The lazy library file to check.
        library: PathBuf,
        /// magma or nomagma (for --dep magma).
        #[arg(long)]
        variant: String,
        /// contract.json written by `splitpkg emit`.
        #[arg(long, value_name = "FILE", required_unless_present = "plan")]
        contract: Option<PathBuf>,
        /// Or a plan JSON to take the contract from.
        #[arg(long, value_name = "FILE", conflicts_with = "contract")]
        plan: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Run each variant on a CUDA GPU: linalg battery vs CPU references, laziness, has_magma.
    #[command(after_help = SMOKE_HELP)]
    Smoke(SmokeArgs),
    /// CUDA device code (.nv_fatbin) per library and for the tree: entries by architecture and kind,
    /// stored vs uncompressed bytes, compression and the minimum driver it needs, SASS-only targets.
    #[command(
        after_help = "Reads headers only (milliseconds per library); --what-if decompresses and recompresses every entry (seconds per GiB).\n\nExit codes: 0 success, 1 some library cannot run on a --device, 2 bad input (a corrupt fatbin is named with its file offset).\n\nExamples:\n  splitpkg fatbin torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg fatbin site-packages/torch/lib/libtorch_cuda.so --time\n  splitpkg fatbin ./torch --what-if lz4 --what-if zstd:19\n  splitpkg fatbin $CONDA_PREFIX --device sm_75 --device sm_120 --json --out fatbin.json"
    )]
    Fatbin {
        /// A directory, .whl, .conda, .tar.bz2, or a single ELF file.
        path: PathBuf,
        /// JSON (schema docs/fatbin.schema.json, `schema_version` 1).
        #[arg(long)]
        json: bool,
        /// Include every container and entry (file offsets, flags, sizes) in --json.
        #[arg(long, requires = "json")]
        entries: bool,
        /// Estimate the section size under another compression: none, lz4, zstd or zstd:LEVEL
        /// (repeatable; decompresses every entry once).
        #[arg(long = "what-if", value_name = "MODE", value_parser = parse_mode)]
        what_if: Vec<fatbin::CompressMode>,
        /// Check each library against a GPU: sm_XY or X.Y (repeatable).
        #[arg(long, value_name = "sm_XY", value_parser = parse_capability)]
        device: Vec<fatbin::Capability>,
        /// Print each library's header-walk time on stderr.
        #[arg(long)]
        time: bool,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
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
    /// Package(s) providing the payload (repeatable; default lib<dep>).
    #[arg(long, value_name = "NAME")]
    payload_package: Vec<String>,
    /// Build-string prefix for the keys that shape the binary (default: from the input, e.g. cuda130).
    #[arg(long, value_name = "KEYS")]
    build_keys: Option<String>,
}

impl SplitArgs {
    fn options(&self, plan: &plan::Plan, input: &std::path::Path) -> Result<split::SplitOptions> {
        let (default_version, default_keys) = split::default_version_and_keys(plan);
        let version = self
            .version
            .clone()
            .or(default_version)
            .ok_or_else(|| Error::Usage(format!("{}: no package version in the input; pass --version", input.display())))?;
        let payload_packages =
            if self.payload_package.is_empty() { vec![format!("lib{}", plan.options.dep)] } else { self.payload_package.clone() };
        Ok(split::SplitOptions {
            core_name: self.core_name.clone(),
            lazy_name: self.lazy_name.clone(),
            version,
            build_number: self.build_number,
            prefer: self.prefer.clone().unwrap_or_else(|| plan.options.dep.clone()),
            variant_key: self.variant_key.clone(),
            payload_packages,
            payload_version: split::payload_version(plan),
            build_keys: self.build_keys.clone().unwrap_or(default_keys),
            cuda_floor: plan.device_code.as_ref().and_then(|d| d.cuda_floor.as_ref()).map(|v| format!("__cuda >={v}")),
            external_depends: Vec::new(),
        })
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    RattlerBuild,
    CondaBuild,
    Both,
}

const PACK_HELP: &str = "Packages: core, the lazy library's variant found in the tree (magma), the other variant only from --lazy-variant (never invented), payload packages from the payload files in the tree (libmagma from lib/libmagma*), and stand-ins for manifest entries the channel lacks (marked [stand-in]; their sizes are represented, not real). Metadata (names, build strings, depends, constrains, track_features) is exactly what `emit` renders into recipes.

Checked before the channel is touched: the plan is CONFINED (else exit 1), --lazy-variant passes verify-variant (else exit 1), and every tree path is in exactly one package after reading the packages back (else exit 3). Packages are reproducible (same input, same bytes) and renamed into CHANNEL/linux-64 and CHANNEL/noarch atomically; the channel is then indexed and CHANNEL/splitpkg.json (what `solve` and `env` read) replaced.

Exit codes: 0 packed, 1 not confined or a --lazy-variant that is not what it claims, 2 bad input or usage, 3 internal error (e.g. not lossless).

Examples:
  splitpkg pack $PREFIX --version 2.5.1 --lazy-variant nomagma=build-nomagma/lib/libtorch_cuda_linalg.so --out channel/
  splitpkg pack torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out channel/
  splitpkg pack $PREFIX --version 2.5.1 --prefer nomagma --out channel-flipped/
  splitpkg pack $PREFIX --standins my-standins.yaml --compression-level 19 --json --out channel/ > pack.json";

const SOLVE_HELP: &str = "Scenarios, each with what it must show:
  (a) default   the core alone                       → the preferred variant (+ payload packages when it needs them)
  (b) slim      core + \"LAZY * *nomagma*\"           → nomagma, no payload package
  (c) conflict  \"LAZY * *nomagma*\" + libmagma        → unsatisfiable (the solver's message is shown)
  (d) skew      core ==V1 + LAZY ==V2                → unsatisfiable (needs two versions in the channel)
  (e) flipped   the core alone on --prefer-channel   → the other variant
A scenario the channel cannot run (no nomagma build packed, one version only, no --prefer-channel) is reported as not applicable, never as passed.

track_features: resolvo (rattler, pixi, mamba 2) ranks a candidate with any track feature below one without, before version and build number; conda's classic solver counts features. Each scenario says whether its outcome relies on that rule and whether both readings agree.

Sizes: archive bytes from repodata, installed bytes from each package's paths.json; stand-ins are marked [stand-in] and the bytes they represent are counted apart.

Exit codes: 0 every applicable scenario (and install check) as required, 1 otherwise, 2 bad input.

Examples:
  splitpkg solve channel/
  splitpkg solve channel/ --prefer-channel channel-flipped/ --virtual __cuda=12.6 --json --out solve.json
  splitpkg solve channel/ --install /tmp/envs   # then: splitpkg env /tmp/envs/default";

const ENV_HELP: &str = "Reads PREFIX/conda-meta/*.json. The variant comes from the lazy package's build string (…_magma_… / …_nomagma_…). Sizes are the installed bytes in each record's paths_data; stand-ins (made by `splitpkg pack`) are marked [stand-in] and count the bytes they represent, apart from real bytes. The other variant's size comes from the splitpkg channel the package was installed from (or --channel); otherwise it is reported as unknown.

The commands select the variant by build string: conda and mamba take `NAME=VERSION=BUILD` (\"libtorch-cuda-linalg=*=*nomagma*\"), pixi takes the bracket form (\"libtorch-cuda-linalg[build='*nomagma*']\"); both parse with rattler_conda_types. Switching to nomagma removes libmagma because the nomagma build constrains libmagma <0.0a0.

With --switch the environment is changed: the other variant is solved from the splitpkg channel (every other package pinned as installed) and rattler's installer applies the transaction; nothing is touched when the solve fails. JSON: docs/env-switch.schema.json.

Exit codes: 0 success, 2 bad input (not a conda prefix, no lazy package; --switch: the channel has no other variant to switch to).

Examples:
  splitpkg env $CONDA_PREFIX
  splitpkg env .pixi/envs/default --svg env.svg
  splitpkg env /tmp/envs/default --channel channel/ --json
  splitpkg env /tmp/envs/default --switch     # to the other variant, then the report again";

const SMOKE_HELP: &str = "Each case (op, shape, dtype, backend preference) runs in a worker process under its own timeout (a hang is a failure, and the worker is replaced), with random inputs from the recorded seed, checked against a CPU float64/complex128 reference. Results are judged against an expected-outcome table per variant (built in: magma, nomagma, nomagma-emulated; see docs/smoke.md).

Statuses: pass, expected-fail (failed the way the table says, with a clean RuntimeError), excluded (known stock bug, not judged), FAIL, TIMEOUT.

Checks per variant: laziness, has_magma (STALE when the flag compiled into libtorch_cuda.so describes the other variant: the variant works, a core flag is wrong), device_code, identity (a variant named magma must carry MAGMA and one named nomagma must not, by the rule verify-variant applies; also applied on --replay).

Exit codes: 0 every case and check met its expectation, 1 a variant is broken or not what its name says (a case or check failed), 4 every variant works but a core flag is stale (torch.cuda.has_magma), 2 no CUDA driver or device, or bad input.

Examples:
  splitpkg smoke --variant magma=/envs/torch-magma --variant nomagma=/envs/torch-nomagma
  splitpkg smoke --variant magma=$SITE/torch --variant nomagma=$SITE/torch --emulate nomagma --bench --json --out smoke.json
  splitpkg smoke --variant magma=$SITE/torch --variant nomagma=/tmp/slim/site-packages --bench --json --out smoke.json
  splitpkg smoke --variant nomagma=/envs/x --list
  splitpkg smoke --replay smoke.json --expect my-tables.json";

#[derive(Args)]
struct SmokeArgs {
    /// A variant to test, NAME=PATH (repeatable). NAME: magma, nomagma, or a name with a table in
    /// --expect. PATH: an env prefix (bin/python), a torch directory, or a site-packages directory.
    #[arg(long = "variant", value_name = "NAME=PATH", required_unless_present = "replay")]
    variants: Vec<String>,
    /// Python for variants given as a torch or site-packages directory [default: python3]; an env
    /// prefix uses its own bin/python.
    #[arg(long, value_name = "BIN")]
    python: Option<String>,
    /// Run variant NAME as an emulation on a MAGMA installation: cuSOLVER preference forced,
    /// magma preference not run, judged by table NAME-emulated (built in: nomagma).
    #[arg(long, value_name = "NAME")]
    emulate: Vec<String>,
    /// Expected-outcome tables (JSON, the format of the built-in table) that add to or replace
    /// the built-in ones by name.
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// Also time ops under the default, cusolver and magma preferences on every real (not emulated)
    /// variant, and compare the default routing of the variants.
    #[arg(long)]
    bench: bool,
    /// Timed calls per bench item (the median is reported).
    #[arg(long, default_value_t = 5, value_name = "N")]
    bench_reps: u32,
    /// Seconds one case may take before it counts as a hang.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    case_timeout: f64,
    /// Wall-time budget for the whole run in seconds: cases and bench items not started by then
    /// are reported as not run (so a report is always written).
    #[arg(long, value_name = "SECONDS")]
    deadline: Option<f64>,
    /// Seed for the random inputs (default: fresh each run; always recorded).
    #[arg(long)]
    seed: Option<u64>,
    /// Run only cases whose id (op/shape/dtype/preference) contains SUBSTRING (repeatable).
    #[arg(long, value_name = "SUBSTRING")]
    only: Vec<String>,
    /// Skip cases whose id contains SUBSTRING (repeatable).
    #[arg(long, value_name = "SUBSTRING")]
    skip: Vec<String>,
    /// Print the planned cases with their expectations and stop (no GPU needed).
    #[arg(long, conflicts_with_all = ["replay", "bench"])]
    list: bool,
    /// Judge a recorded --json report again with the current (or --expect) tables; no GPU needed.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["variants", "list", "bench", "emulate"])]
    replay: Option<PathBuf>,
    /// List passing cases too in the text table.
    #[arg(long)]
    all: bool,
    /// JSON (schema docs/smoke.schema.json, `schema_version` 1).
    #[arg(long)]
    json: bool,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The lazily loaded library.
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: String,
    /// The optional component inside it.
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    dep: String,
}

fn parse_mode(s: &str) -> std::result::Result<fatbin::CompressMode, String> {
    s.parse()
}

fn parse_capability(s: &str) -> std::result::Result<fatbin::Capability, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("splitpkg: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn load(target: &Target, quiet: bool) -> Result<Inspection> {
    load_with(target, quiet, Extras::default())
}

fn load_with(target: &Target, quiet: bool, extras: Extras) -> Result<Inspection> {
    let mut spec = PayloadSpec::for_dep(&target.dep, &target.dep_symbol);
    spec.deep = target.deep;
    let ld_library_path = target.ld_library_path.as_deref().map(|d| d.split(':').map(str::to_string).collect()).unwrap_or_default();
    inspect_with(&target.path, &spec, &Progress::new(!quiet), Extras { ld_library_path, ..extras })
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string_pretty(v).map(|s| s + "\n").map_err(|e| Error::failed("JSON", e))
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Inspect { target, json, dot, symbols, out } => {
            let ins = load_with(&target, cli.quiet, Extras { translation_units: json, ..Default::default() })?;
            let text = if json {
                to_json(&inspect_json(&ins, symbols))?
            } else if dot {
                report::dot(&ins, &target.lazy)
            } else {
                report::inspect_text(&ins)
            };
            emit(out.as_deref(), &text)?;
            Ok(0)
        }
        Command::Emit { input, format, out, split: split_args, stage, lazy, dep } => {
            let plan = load_plan(&input, &lazy, &dep, cli.quiet)?;
            let options = split_args.options(&plan, &input)?;
            let split = split::Split::from_plan(&plan, options)?;
            let formats = match format {
                FormatArg::RattlerBuild => vec![emit::Format::RattlerBuild],
                FormatArg::CondaBuild => vec![emit::Format::CondaBuild],
                FormatArg::Both => vec![emit::Format::RattlerBuild, emit::Format::CondaBuild],
            };
            let source = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let command = emit_command(&source, &split, format, &stage);
            let emitted = emit::render(&plan, &split, &formats, &stage, &source, &command)?;
            emit::write(&out, &emitted)?;
            for w in &emitted.warnings {
                eprintln!("splitpkg: warning: {w}");
            }
            let mut listing = String::new();
            for g in &emitted.files {
                listing.push_str(&format!("wrote {}\n", out.join(&g.path).display()));
            }
            emit_out(&listing)?;
            Ok(0)
        }
        Command::Pack {
            target,
            out,
            lazy_variant,
            standins,
            compression_level,
            threads,
            json,
            allow_absolute_symlinks,
            split: split_args,
        } => {
            let lazy_variant = lazy_variant
                .map(|v| {
                    let (name, file) = v.split_once('=').ok_or_else(|| Error::Usage(format!("--lazy-variant {v}: expected NAME=FILE")))?;
                    Ok::<_, Error>((name.to_string(), PathBuf::from(file)))
                })
                .transpose()?;
            let (manifest, standins_from) = match &standins {
                Some(f) => (
                    splitpkg::channel::standin::Manifest::load(f)?,
                    f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                ),
                None => (splitpkg::channel::standin::builtin(), "built-in".to_string()),
            };
            let progress = Progress::new(!cli.quiet);
            let ins = load(&target, cli.quiet)?;
            let analysis = verdict::analyse(&ins, &target.lazy);
            let plan = plan::make_plan(&ins, &analysis, &target.lazy);
            if plan.verdict != verdict::Verdict::Confined {
                return Err(Error::Refused(format!(
                    "the plan for {} is {}: there is nothing safe to pack (see `splitpkg plan`)",
                    target.path.display(),
                    plan.verdict.label()
                )));
            }
            let options = splitpkg::channel::pack::options_for_pack(split_args.options(&plan, &target.path)?, &ins, &plan, &manifest);
            let split = split::Split::from_plan(&plan, options)?;
            let opts = splitpkg::channel::pack::PackOptions {
                out,
                lazy_variant,
                standins: manifest,
                standins_from,
                compression_level,
                threads,
                allow_absolute_symlinks,
                progress: &progress,
            };
            let report = splitpkg::channel::pack::pack(&ins, &plan, &split, &opts)?;
            let text = if json { to_json(&report)? } else { splitpkg::channel::pack::report_text(&report) };
            emit_out(&text)?;
            std::mem::forget(ins);
            Ok(0)
        }
        Command::Solve { channel, prefer_channel, virtual_packages, version, install, json, out } => {
            let progress = Progress::new(!cli.quiet);
            let opts =
                splitpkg::channel::solve::SolveOptions { channel, prefer_channel, virtual_packages, version, install, progress: &progress };
            let report = splitpkg::channel::solve::run(&opts)?;
            let text = if json { to_json(&report)? } else { splitpkg::channel::solve::report_text(&report) };
            emit(out.as_deref(), &text)?;
            Ok(if report.pass { 0 } else { 1 })
        }
        Command::Env { prefix, lazy_name, dep, channel, svg, switch, json, out } => {
            let opts = splitpkg::channel::env::EnvOptions { prefix, lazy_name, dep, channel };
            if switch {
                let r = splitpkg::channel::env::switch(&opts)?;
                let text = if json { to_json(&r)? } else { splitpkg::channel::env::switch_text(&r) };
                emit(out.as_deref(), &text)?;
                return Ok(0);
            }
            let report = splitpkg::channel::env::env(&opts)?;
            if let Some(svg) = &svg {
                splitpkg::output::write_atomic(svg, splitpkg::channel::env::svg(&report).as_bytes())?;
            }
            let text = if json { to_json(&report)? } else { splitpkg::channel::env::report_text(&report) };
            emit(out.as_deref(), &text)?;
            Ok(0)
        }
        Command::VerifyVariant { library, variant, contract, plan, json } => {
            let contract = match (contract, plan) {
                (Some(c), _) => {
                    let text = std::fs::read_to_string(&c).map_err(|e| Error::io(&c, e))?;
                    serde_json::from_str::<emit::ContractFile>(&text)
                        .map_err(|e| Error::bad(c.display(), format!("not a contract file: {e}")))?
                }
                (None, Some(p)) => {
                    let plan = load_plan(&p, DEFAULT_LAZY, DEFAULT_DEP, true)?;
                    emit::ContractFile::from_plan(&plan).ok_or_else(|| Error::bad(p.display(), "the plan has no lazy library"))?
                }
                (None, None) => return Err(Error::Usage("--contract or --plan is required".into())),
            };
            let report = verify::verify_variant(&library, &variant, &contract)?;
            let text = if json { to_json(&report)? } else { verify::report_text(&report) };
            emit_out(&text)?;
            Ok(if report.pass { 0 } else { 1 })
        }
        Command::Smoke(a) => smoke_cmd(a, cli.quiet),
        Command::Plan { target, json, yaml, out } => {
            let started = std::time::Instant::now();
            let ins = load(&target, cli.quiet)?;
            let loaded = started.elapsed();
            let analysis = verdict::analyse(&ins, &target.lazy);
            let analysed = started.elapsed();
            let plan = plan::make_plan(&ins, &analysis, &target.lazy);
            if std::env::var_os("SPLITPKG_TRACE").is_some() {
                eprintln!("trace: inspect {loaded:?} verdict {:?} plan {:?}", analysed - loaded, started.elapsed() - analysed);
            }
            let text = if json {
                to_json(&plan)?
            } else if yaml {
                serde_yaml::to_string(&plan).map_err(|e| Error::failed("YAML", e))?
            } else {
                report::plan_text(&plan)
            };
            emit(out.as_deref(), &text)?;
            // Unmapping a dozen populated maps of 450 MB files costs milliseconds; the process is
            // about to exit and the kernel reclaims them anyway.
            std::mem::forget(ins);
            Ok(plan.verdict.exit_code())
        }
        Command::Fatbin { path, json, entries, what_if, device, time, out } => {
            let opts = fatbin::scan::ScanOptions { what_if, devices: device, entries, time };
            let r = fatbin::scan::scan(&path, &opts, &Progress::new(!cli.quiet))?;
            let text = if json { to_json(&r)? } else { report::fatbin_text(&r) };
            emit(out.as_deref(), &text)?;
            Ok(r.exit_code())
        }
    }
}

/// A plan from PLAN.json or by planning a tree.
fn load_plan(input: &std::path::Path, lazy: &str, dep: &str, quiet: bool) -> Result<plan::Plan> {
    if input.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(input).map_err(|e| Error::io(input, e))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::bad(input.display(), format!("not JSON: {e}")))?;
        if value.get("schema").and_then(|s| s.as_str()) != Some(plan::SCHEMA_NAME) {
            return Err(Error::bad(input.display(), "not a splitpkg plan (no \"schema\": \"splitpkg-plan\")"));
        }
        if value.get("schema_version").and_then(|s| s.as_u64()) != Some(plan::SCHEMA_VERSION as u64) {
            return Err(Error::bad(input.display(), format!("plan schema_version is not {}", plan::SCHEMA_VERSION)));
        }
        return serde_json::from_value(value).map_err(|e| Error::bad(input.display(), format!("malformed plan: {e}")));
    }
    let target = Target {
        path: input.to_path_buf(),
        lazy: lazy.to_string(),
        dep: dep.to_string(),
        dep_symbol: Vec::new(),
        deep: false,
        ld_library_path: None,
    };
    let ins = load(&target, quiet)?;
    let analysis = verdict::analyse(&ins, lazy);
    Ok(plan::make_plan(&ins, &analysis, lazy))
}

fn smoke_cmd(a: SmokeArgs, quiet: bool) -> Result<i32> {
    let tables = match &a.expect {
        Some(f) => Tables::with_file(f)?,
        None => Tables::builtin(),
    };
    let filter = Filter { only: a.only.clone(), skip: a.skip.clone() };
    if let Some(file) = &a.replay {
        let rep = smoke::replay(smoke::load_report(file)?, &tables, file, a.expect.as_deref())?;
        let text = if a.json { to_json(&rep)? } else { smoke::report::text(&rep, a.all) };
        emit(a.out.as_deref(), &text)?;
        return Ok(rep.exit_code());
    }
    let variants = a.variants.iter().map(|v| smoke::variant::parse_variant(v)).collect::<Result<Vec<_>>>()?;
    for e in &a.emulate {
        if !variants.iter().any(|v| &v.name == e) {
            return Err(Error::Usage(format!("--emulate {e}: no --variant named {e}")));
        }
    }
    if a.list {
        let plans = variants
            .iter()
            .map(|v| smoke::plan_variant(&v.name, a.emulate.contains(&v.name), &tables, &filter, None))
            .collect::<Result<Vec<_>>>()?;
        let text = if a.json { to_json(&plans)? } else { smoke::report::plan_text(&plans) };
        emit(a.out.as_deref(), &text)?;
        return Ok(0);
    }
    if !(a.case_timeout > 0.0 && a.case_timeout.is_finite()) {
        return Err(Error::Usage(format!("--case-timeout {}: must be a positive number of seconds", a.case_timeout)));
    }
    if let Some(d) = a.deadline
        && !(d > 0.0 && d.is_finite())
    {
        return Err(Error::Usage(format!("--deadline {d}: must be a positive number of seconds")));
    }
    if a.bench_reps == 0 {
        return Err(Error::Usage("--bench-reps must be at least 1".into()));
    }
    for v in &variants {
        smoke::plan_variant(&v.name, a.emulate.contains(&v.name), &tables, &filter, None)?;
    }
    // The device first: on a machine without CUDA nothing else is worth doing.
    let device = smoke::device::probe(0).map_err(|e| match e {
        smoke::device::NoDevice::Driver(s) => Error::bad("no CUDA driver", s),
        smoke::device::NoDevice::Device(s) => Error::bad("no CUDA device", s),
    })?;
    let opts = smoke::Options {
        variants,
        emulate: a.emulate.clone(),
        python: a.python.clone(),
        tables,
        bench: a.bench,
        bench_reps: a.bench_reps,
        case_timeout: std::time::Duration::from_secs_f64(a.case_timeout),
        deadline: a.deadline.map(std::time::Duration::from_secs_f64),
        seed: a.seed,
        filter,
        lazy: a.lazy.clone(),
        spec: PayloadSpec::for_dep(&a.dep, &[]),
        progress: !quiet,
        command: std::env::args().collect(),
    };
    let mut rep = smoke::run(&opts, device)?;
    rep.options.expect_file = a.expect.as_ref().map(|p| p.display().to_string());
    let text = if a.json { to_json(&rep)? } else { smoke::report::text(&rep, a.all) };
    emit(a.out.as_deref(), &text)?;
    Ok(rep.exit_code())
}

fn inspect_json(ins: &Inspection, symbols: bool) -> serde_json::Value {
    let files: Vec<serde_json::Value> = ins
        .files
        .iter()
        .map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or_default();
            if symbols {
                v["elf"]["symbols"] = serde_json::to_value(f.elf.symbols.to_list()).unwrap_or_default();
            }
            v
        })
        .collect();
    serde_json::json!({
        "schema": "splitpkg-inspect",
        "schema_version": 1,
        "input": {
            "path": ins.tree.source.display().to_string(),
            "kind": ins.tree.kind,
            "package": ins.tree.package,
            "entries": ins.tree.entries.len(),
            "bytes": ins.tree.total_file_bytes(),
            "notes": ins.tree.notes,
        },
        "dep": ins.spec,
        "files": files,
        "nodes": ins.graph.nodes,
        "edges": ins.graph.edges,
    })
}
