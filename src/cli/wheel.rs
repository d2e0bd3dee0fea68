//! `wheel`: split a CUDA torch wheel into pip wheels (core + lazy variants).

use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::inspect::Extras;
use splitpkg::analysis::pipeline;
use splitpkg::error::{Error, Result};
use splitpkg::output::emit;
use splitpkg::progress::Progress;
use splitpkg::provenance;
use splitpkg::recipe::split;
use splitpkg::wheel;

use super::{SplitArgs, TargetArgs, parse_lazy_variant, to_json};

pub const WHEEL_HELP: &str = "Writes into DIR:
  the core wheel      TORCH-VERSION+split-TAGS.whl: the input without the lazy library, every other member byte-identical (copied as its compressed stream), METADATA requiring the lazy distribution at the same version, RECORD regenerated
  one lazy wheel per variant  torch_cuda_linalg-VERSION+1.magma-TAGS.whl (the input's own build) and, with --lazy-variant, torch_cuda_linalg-VERSION+0.nomagma-TAGS.whl; each holds the library, WHEEL and the licence files, and requires exactly the core

Installers take the highest local label, so the preferred variant's label sorts highest (+1.…) and one pin selects the other. Each lazy wheel requires torch==VERSION+split, which a monolithic torch does not satisfy, so it cannot be installed beside one (docs/evidence/wheel-installers/ has what pip and uv were measured to do).

Before anything is renamed into DIR: the input RECORD is verified, every written wheel is read back against its own RECORD, and the core plus each lazy wheel must hold exactly the input's files. The other variant is only ever the file given to --lazy-variant, after it passes verify-variant; none is invented.

Exit codes: 0 written, 1 the plan is not CONFINED, or the wheel has no lazy library (nothing safe to split; the same code `plan` gives), 2 bad input (not a wheel, RECORD mismatch, corrupt zip, --out a file).

Examples:
  splitpkg wheel torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out \\
    wheels/
  splitpkg wheel torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl --out \\
    wheels/ --lazy-variant nomagma=build/libtorch_cuda_linalg.so
  pip install --find-links wheels/ torch==2.11.0+split \\
    torch-cuda-linalg==2.11.0+1.magma  # core + preferred
  pip install --find-links wheels/ torch==2.11.0+split \\
    torch-cuda-linalg==2.11.0+0.nomagma  # core + slim

The install commands it prints pin the split: --find-links adds DIR to your package index, so an unpinned `torch` gets the newest torch published instead (torch's own dependencies still come from the index).";

#[derive(Args)]
pub struct WheelArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The directory the wheels are written into (created).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// The other build of the lazy library, NAME=FILE (`nomagma=build/lib/libtorch_cuda_linalg.so`).
    /// It must pass `verify-variant` against the plan's contract.
    #[arg(long = "lazy-variant", value_name = "NAME=FILE")]
    lazy_variant: Option<String>,
    /// The variant a plain `pip install` gets (`magma` or `nomagma` for --dep magma) [default: magma].
    #[arg(long, value_name = "VARIANT")]
    prefer: Option<String>,
    /// Name of the lazy distribution [default: from the lazy library: torch-cuda-linalg].
    #[arg(long, value_name = "NAME")]
    lazy_dist: Option<String>,
    /// JSON report: the wheels written, their hashes, the checks and the install commands.
    #[arg(long)]
    json: bool,
}

pub fn wheel(a: WheelArgs, quiet: bool) -> Result<Exit> {
    let WheelArgs {
        target,
        out,
        lazy_variant,
        prefer,
        lazy_dist,
        json,
    } = a;
    let lazy_variant = parse_lazy_variant(lazy_variant.as_deref())?;
    decide_early(&target)?;
    let progress = Progress::new(!quiet);
    let planned = pipeline::plan_tree(
        &target.request(Extras {
            digests: true,
            ..Extras::default()
        }),
        &progress,
    )?;
    let (ins, plan) = (&planned.inspection, &planned.plan);
    // Several payload components: the variant names would join them (`heavy_cudnn`), which local
    // version labels normalise (`_` → `.`) differently from the dist-info names written. Refused,
    // rather than split half. Several lazy libraries travel together in one lazy distribution.
    if !plan.options.deps.is_empty() {
        return Err(Error::bad(
            target.path.display(),
            format!(
                "--dep names {} components ({}): `wheel` labels its variants with one component name; several are not supported yet (`pack` and `emit` support them)",
                plan.options.deps.len(),
                plan.options.deps.join(", ")
            ),
        ));
    }
    // The verdict first: its exit code is `plan`'s (1 for NOT CONFINED and NOT PRESENT).
    pipeline::require_confined(plan, target.path.display(), pipeline::SplitFor::Wheel)?;
    if plan.all_lazy().is_empty() {
        return Err(Error::internal(format!(
            "{}: a CONFINED plan without a lazy library",
            target.path.display()
        )));
    }
    // The split model decides the variants and which one is preferred, as for recipes and .conda
    // packages; its conda names do not reach the wheels.
    let split_args = SplitArgs {
        prefer,
        ..SplitArgs::default()
    };
    let split = split::Split::from_plan(plan, split_args.options(plan, &target.path)?)?;
    let opts = wheel::WheelOptions {
        out,
        lazy_dist,
        lazy_variant,
        progress: &progress,
    };
    let mut report = wheel::split_wheel(ins, plan, &split, &opts)?;
    report.stamp = provenance::Stamp::reproducible();
    let text = if json {
        to_json(&report)?
    } else {
        wheel::report_text(&report)
    };
    emit(None, &text)?;
    planned.leak_at_exit();
    Ok(Exit::Success)
}

/// What can be answered from the file name and the zip's central directory, before the wheel is
/// inflated (15 s for torch): not a `.whl` (exit 2), or no member the `--lazy` patterns select.
/// Without one the payload cannot be confined behind a lazy library: `plan` says NOT CONFINED or
/// NOT PRESENT and exits 1, and so does this; a glob that selects nothing is a mistake in the
/// command line (exit 2), as for `plan`.
fn decide_early(target: &TargetArgs) -> Result<()> {
    use splitpkg::analysis::lazy::LazyPattern;
    wheel::require_wheel(
        splitpkg::input::TreeKind::detect(&target.path)?,
        &target.path,
    )?;
    let patterns: Vec<LazyPattern> = target.lazy.iter().map(|l| LazyPattern::parse(l)).collect();
    if wheel::has_lazy_member(&target.path, &patterns)? {
        return Ok(());
    }
    if let Some(glob) = patterns.iter().find(|p| matches!(p, LazyPattern::Glob(_))) {
        return Err(Error::bad(
            target.path.display(),
            format!("--lazy {:?} matches no member of the wheel", glob.text()),
        ));
    }
    Err(Error::Refused(format!(
        "{}: no member is named {} (--lazy): the payload is not behind a lazy library, so there is nothing safe to split (`splitpkg plan` says why)",
        target.path.display(),
        target.lazy.join(", ")
    )))
}
