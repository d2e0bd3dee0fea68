//! `smoke`: each variant on a CUDA GPU, or a recorded run judged again (`--replay`).

use std::path::{Path, PathBuf};

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::payload::PayloadSpec;
use splitpkg::error::{Error, Result};
use splitpkg::output::emit;
use splitpkg::smoke::{self, cases::Filter, expect::Tables};

use super::{DEFAULT_DEP, DEFAULT_LAZY, to_json};

pub const SMOKE_HELP: &str = "Each case (op, shape, dtype, backend preference) runs in a worker process under its own timeout (a hang is a failure, and the worker is replaced), with random inputs from the recorded seed, checked against a CPU float64/complex128 reference. Results are judged against an expected-outcome table per variant (built in: magma, nomagma, nomagma-emulated; see docs/smoke.md).

Statuses: pass, expected-fail (failed the way the table says, with a clean RuntimeError), excluded (known stock bug, not judged), FAIL, TIMEOUT.

Checks per variant: laziness, has_magma (STALE when the flag compiled into libtorch_cuda.so describes the other variant: the variant works, a core flag is wrong), device_code, identity (a variant named magma must carry MAGMA and one named nomagma must not, by the rule verify-variant applies; also applied on --replay).

Exit codes: 0 every case and check met its expectation, 1 a variant is broken or not what its name says (a case or check failed), 4 every variant works but a core flag is stale (torch.cuda.has_magma), 2 no CUDA driver or device, or bad input.

Examples:
  splitpkg smoke --variant magma=/envs/torch-magma --variant \\
    nomagma=/envs/torch-nomagma
  splitpkg smoke --variant magma=$SITE/torch --variant nomagma=$SITE/torch \\
    --emulate nomagma --bench --json --out smoke.json
  splitpkg smoke --variant magma=$SITE/torch --variant \\
    nomagma=/tmp/slim/site-packages --bench --json --out smoke.json
  splitpkg smoke --variant nomagma=/envs/x --list
  splitpkg smoke --replay smoke.json --expect my-tables.json";

#[derive(Args)]
pub struct SmokeArgs {
    /// A variant to test, NAME=PATH (repeatable). NAME: magma, nomagma, or a name with a table in
    /// --expect. PATH: an env prefix (bin/python), a torch directory, or a site-packages directory.
    #[arg(
        long = "variant",
        value_name = "NAME=PATH",
        required_unless_present = "replay"
    )]
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
    /// Timed calls per bench item (the median is reported); an item whose first 3 calls take
    /// 2 s or more is timed 3 times.
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
    /// JSON (schema docs/smoke.schema.json, `schema_version` 2).
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

pub fn smoke(a: SmokeArgs, quiet: bool) -> Result<Exit> {
    let tables = match &a.expect {
        Some(f) => Tables::with_file(f)?,
        None => Tables::builtin(),
    };
    let filter = Filter {
        only: a.only.clone(),
        skip: a.skip.clone(),
    };
    if let Some(file) = &a.replay {
        return replay(&a, file, &tables);
    }
    let variants = a
        .variants
        .iter()
        .map(|v| smoke::variant::parse_variant(v))
        .collect::<Result<Vec<_>>>()?;
    for e in &a.emulate {
        if !variants.iter().any(|v| &v.name == e) {
            return Err(Error::Usage(format!(
                "--emulate {e}: no --variant named {e}"
            )));
        }
    }
    if a.list {
        return list(&a, &variants, &tables, &filter);
    }
    check_limits(&a)?;
    for v in &variants {
        smoke::plan_variant(&v.name, a.emulate.contains(&v.name), &tables, &filter, None)?;
    }
    // The device first: on a machine without CUDA nothing else is worth doing.
    let device = smoke::device::probe(0).map_err(|e| match e {
        smoke::device::NoDevice::Driver(s) => Error::bad("no CUDA driver", s),
        smoke::device::NoDevice::Device(s) => Error::bad("no CUDA device", s),
    })?;
    let opts = smoke::SmokeOptions {
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
    write_report(&a, &rep)
}

/// `--replay FILE`: the recorded run judged again with the current (or `--expect`) tables.
fn replay(a: &SmokeArgs, file: &Path, tables: &Tables) -> Result<Exit> {
    let rep = smoke::replay(smoke::load_report(file)?, tables, file, a.expect.as_deref())?;
    write_report(a, &rep)
}

/// The report as text or JSON; the exit code is its verdict's.
fn write_report(a: &SmokeArgs, rep: &smoke::SmokeReport) -> Result<Exit> {
    let text = if a.json {
        to_json(rep)?
    } else {
        smoke::text::text(rep, a.all)
    };
    emit(a.out.as_deref(), &text)?;
    Ok(rep.exit())
}

/// `--list`: the planned cases with their expectations, nothing run.
fn list(
    a: &SmokeArgs,
    variants: &[smoke::variant::VariantArg],
    tables: &Tables,
    filter: &Filter,
) -> Result<Exit> {
    let plans = variants
        .iter()
        .map(|v| smoke::plan_variant(&v.name, a.emulate.contains(&v.name), tables, filter, None))
        .collect::<Result<Vec<_>>>()?;
    let text = if a.json {
        to_json(&plans)?
    } else {
        smoke::text::plan_text(&plans)
    };
    emit(a.out.as_deref(), &text)?;
    Ok(Exit::Success)
}

/// `--case-timeout`, `--deadline` and `--bench-reps` that cannot work.
fn check_limits(a: &SmokeArgs) -> Result<()> {
    if !(a.case_timeout > 0.0 && a.case_timeout.is_finite()) {
        return Err(Error::Usage(format!(
            "--case-timeout {}: must be a positive number of seconds",
            a.case_timeout
        )));
    }
    if let Some(d) = a.deadline
        && !(d > 0.0 && d.is_finite())
    {
        return Err(Error::Usage(format!(
            "--deadline {d}: must be a positive number of seconds"
        )));
    }
    if a.bench_reps == 0 {
        return Err(Error::Usage("--bench-reps must be at least 1".into()));
    }
    Ok(())
}
