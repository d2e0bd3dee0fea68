//! `pack`, `solve` and `env`: real packages in a local channel, install scenarios on it, and what an
//! installed environment holds.

use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::inspect::Extras;
use splitpkg::analysis::pipeline;
use splitpkg::channel::{env as envcmd, pack as packcmd, solve as solvecmd, standin};
use splitpkg::error::Result;
use splitpkg::output::{emit, write_atomic};
use splitpkg::progress::Progress;
use splitpkg::provenance;
use splitpkg::recipe::split;

use super::{DEFAULT_DEP, SplitArgs, TargetArgs, to_json};

#[derive(Args)]
pub struct PackArgs {
    #[command(flatten)]
    target: TargetArgs,
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
    /// The most bytes pack may unpack while staging (e.g. `64G`, `500M`; K, M, G, T are powers of
    /// 1024) [default: the free space of the file system --out is on]. An archive that would
    /// unpack to more is refused before it fills the disk (exit 2).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_unpacked: Option<u64>,
    #[command(flatten)]
    split: SplitArgs,
}

/// `123`, `64K`, `500M`, `2G`, `1T` (powers of 1024; an optional trailing `B` or `iB`).
fn parse_size(s: &str) -> std::result::Result<u64, SizeError> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(SizeError::Unit(s.to_string(), c)),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = num
        .parse()
        .map_err(|source| SizeError::Number(s.to_string(), source))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::TooLarge(s.to_string()))
}

/// Why `--max-unpacked` is not a size (clap prints it after the argument).
#[derive(Debug, thiserror::Error)]
enum SizeError {
    #[error("{0:?}: unknown unit {1:?} (K, M, G or T)")]
    Unit(String, char),
    #[error("{0:?}: not a size (e.g. 500M, 64G)")]
    Number(String, #[source] std::num::ParseIntError),
    #[error("{0:?}: too large")]
    TooLarge(String),
}

#[derive(Args)]
pub struct SolveArgs {
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
}

#[derive(Args)]
pub struct EnvArgs {
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
}

pub const PACK_HELP: &str = "Packages: core, the lazy library's variant found in the tree (magma), the other variant only from --lazy-variant (never invented), payload packages from the payload files in the tree (libmagma from lib/libmagma*), and stand-ins for manifest entries the channel lacks (marked [stand-in]; their sizes are represented, not real). Metadata (names, build strings, depends, constrains, track_features) is exactly what `emit` renders into recipes.

Checked before the channel is touched: the plan is CONFINED (else exit 1), --lazy-variant passes verify-variant (else exit 1), and every tree path is in exactly one package after reading the packages back (else exit 3). Packages are reproducible (same input, same bytes) and renamed into CHANNEL/linux-64 and CHANNEL/noarch atomically; the channel is then indexed and CHANNEL/splitpkg.json (what `solve` and `env` read) replaced.

Exit codes: 0 packed, 1 not confined or a --lazy-variant that is not what it claims, 2 bad input or usage, 3 internal error (e.g. not lossless).

Examples:
  splitpkg pack $PREFIX --version 2.5.1 --lazy-variant \\
    nomagma=build-nomagma/lib/libtorch_cuda_linalg.so --out channel/
  splitpkg pack torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out \\
    channel/
  splitpkg pack $PREFIX --version 2.5.1 --prefer nomagma --out \\
    channel-flipped/
  splitpkg pack $PREFIX --standins my-standins.yaml --compression-level 19 \\
    --json --out channel/ > pack.json";

pub const SOLVE_HELP: &str = "Scenarios, each with what it must show:
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
  splitpkg solve channel/ --prefer-channel channel-flipped/ --virtual \\
    __cuda=12.6 --json --out solve.json
  splitpkg solve channel/ --install /tmp/envs
  # then: splitpkg env /tmp/envs/default";

pub const ENV_HELP: &str = "Reads PREFIX/conda-meta/*.json. The variant comes from the lazy package's build string (…_magma_… / …_nomagma_…). Sizes are the installed bytes in each record's paths_data; stand-ins (made by `splitpkg pack`) are marked [stand-in] and count the bytes they represent, apart from real bytes. The other variant's size comes from the splitpkg channel the package was installed from (or --channel); otherwise it is reported as unknown.

The commands select the variant by build string: conda and mamba take `NAME=VERSION=BUILD` (\"libtorch-cuda-linalg=*=*nomagma*\"), pixi takes the bracket form (\"libtorch-cuda-linalg[build='*nomagma*']\"); both parse with rattler_conda_types. Switching to nomagma removes libmagma because the nomagma build constrains libmagma <0.0a0.

With --switch the environment is changed: the other variant is solved from the splitpkg channel (every other package pinned as installed) and rattler's installer applies the transaction; nothing is touched when the solve fails. JSON: docs/env-switch.schema.json.

Exit codes: 0 success, 2 bad input (not a conda prefix, no lazy package; --switch: the channel has no other variant to switch to).

Examples:
  splitpkg env $CONDA_PREFIX
  splitpkg env .pixi/envs/default --svg env.svg
  splitpkg env /tmp/envs/default --channel channel/ --json
  splitpkg env /tmp/envs/default --switch
  # to the other variant, then the report again";

pub fn pack(a: PackArgs, quiet: bool) -> Result<Exit> {
    let PackArgs {
        target,
        out,
        lazy_variant,
        standins,
        compression_level,
        threads,
        json,
        allow_absolute_symlinks,
        max_unpacked,
        split: split_args,
    } = a;
    let lazy_variant = super::parse_lazy_variant(lazy_variant.as_deref())?;
    let (manifest, standins_from) = match &standins {
        Some(f) => (
            standin::Manifest::load(f)?,
            f.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
        None => (standin::builtin(), "built-in".to_string()),
    };
    let progress = Progress::new(!quiet);
    let workspace = packcmd::Workspace::create(&target.path, &out, max_unpacked)?;
    let planned = pipeline::split_tree(
        &target.request(Extras {
            unpack: workspace.unpack.clone(),
            ..Extras::default()
        }),
        &progress,
        pipeline::SplitFor::Pack,
    )?;
    let (ins, plan) = (&planned.inspection, &planned.plan);
    let options = packcmd::options_for_pack(
        split_args.options(plan, &target.path)?,
        ins,
        plan,
        &manifest,
    );
    let split = split::Split::from_plan(plan, options)?;
    let opts = packcmd::PackOptions {
        out,
        lazy_variant,
        standins: manifest,
        standins_from,
        compression_level,
        threads,
        allow_absolute_symlinks,
        max_unpacked,
        progress: &progress,
    };
    let mut report = packcmd::pack(ins, plan, &split, &opts, workspace)?;
    report.stamp = provenance::Stamp::reproducible();
    let text = if json {
        to_json(&report)?
    } else {
        packcmd::report_text(&report)
    };
    emit(None, &text)?;
    planned.leak_at_exit();
    Ok(Exit::Success)
}

pub fn solve(a: SolveArgs, quiet: bool) -> Result<Exit> {
    let SolveArgs {
        channel,
        prefer_channel,
        virtual_packages,
        version,
        install,
        json,
        out,
    } = a;
    let progress = Progress::new(!quiet);
    let opts = solvecmd::SolveOptions {
        channel,
        prefer_channel,
        virtual_packages,
        version,
        install,
        progress: &progress,
    };
    let report = solvecmd::run(&opts)?;
    let text = if json {
        to_json(&report)?
    } else {
        solvecmd::report_text(&report)
    };
    emit(out.as_deref(), &text)?;
    Ok(Exit::pass_or_no(report.pass))
}

pub fn env(a: EnvArgs) -> Result<Exit> {
    let EnvArgs {
        prefix,
        lazy_name,
        dep,
        channel,
        svg,
        switch,
        json,
        out,
    } = a;
    let opts = envcmd::EnvOptions {
        prefix,
        lazy_name,
        dep,
        channel,
    };
    if switch {
        let r = envcmd::switch(&opts)?;
        let text = if json {
            to_json(&r)?
        } else {
            envcmd::switch_text(&r)
        };
        emit(out.as_deref(), &text)?;
        return Ok(Exit::Success);
    }
    let report = envcmd::env(&opts)?;
    if let Some(svg) = &svg {
        write_atomic(svg, envcmd::svg(&report).as_bytes())?;
    }
    let text = if json {
        to_json(&report)?
    } else {
        envcmd::report_text(&report)
    };
    emit(out.as_deref(), &text)?;
    Ok(Exit::Success)
}
