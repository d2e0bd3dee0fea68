//! `inspect`, `plan` and `fatbin`: the facts, the proof and the device code of one tree.

use splitpkg::error::Context;
use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::document::InspectReport;
use splitpkg::analysis::inspect::Extras;
use splitpkg::analysis::pipeline;
use splitpkg::analysis::switch::Wheels;
use splitpkg::analysis::text as report;
use splitpkg::error::{Error, Result};
use splitpkg::fatbin;
use splitpkg::output::emit;
use splitpkg::progress::Progress;
use splitpkg::provenance;

use super::{TargetArgs, to_json};

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    target: TargetArgs,
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
}

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// JSON (schema docs/plan.schema.json, `schema_version` 1).
    #[arg(long, conflicts_with = "yaml")]
    json: bool,
    /// YAML of the same document.
    #[arg(long)]
    yaml: bool,
    /// A PEP 751 lock of the wheel's environment (`pylock.toml`; the plan prints the `uv pip
    /// compile` command that writes it): the saving is then also stated against the download of
    /// everything the wheel pulls in. A wheel input only; an installed environment is measured on
    /// disk without it.
    #[arg(long, value_name = "FILE")]
    env_lock: Option<PathBuf>,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// For a pip environment with a split's lazy wheel: where the split's wheels are (a directory,
    /// or an http(s) URL of an index written by `splitpkg index`), so the printed switch commands
    /// run as printed. Without it they use the directory the environment recorded (PEP 610
    /// `direct_url.json`, for a wheel installed by its path), else the placeholder DIR.
    #[arg(long, value_name = "DIR_OR_INDEX_URL")]
    wheels: Option<String>,
}

#[derive(Args)]
pub struct FatbinArgs {
    /// A directory, .whl, .conda, .tar.bz2, or a single ELF file.
    path: PathBuf,
    /// JSON (schema docs/fatbin.schema.json, `schema_version` 1).
    #[arg(long)]
    json: bool,
    /// Include every container and entry (file offsets, flags, sizes) in --json.
    #[arg(long, requires = "json")]
    entries: bool,
    /// Estimate the section size under another compression: none, lz4, zstd or zstd:LEVEL
    /// (repeatable; decompresses every entry once and compresses it under each: seconds per GiB
    /// for lz4 and zstd, many minutes per GiB at zstd:19; the estimate is printed first).
    #[arg(long = "what-if", value_name = "MODE", value_parser = str::parse::<fatbin::CompressMode>)]
    what_if: Vec<fatbin::CompressMode>,
    /// Check each library against a GPU: sm_XY or X.Y (repeatable).
    #[arg(long, value_name = "sm_XY", value_parser = str::parse::<fatbin::Capability>)]
    device: Vec<fatbin::Capability>,
    /// Print each library's header-walk time on stderr.
    #[arg(long)]
    time: bool,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn inspect(a: InspectArgs, quiet: bool) -> Result<Exit> {
    let InspectArgs {
        target,
        json,
        dot,
        symbols,
        out,
    } = a;
    let req = target.request(Extras {
        translation_units: json,
        ..Default::default()
    });
    let ins = pipeline::inspect_tree(&req, &Progress::new(!quiet))?;
    let text = if json {
        // Through a Value, as the document was always written: every object's keys sorted.
        let doc = serde_json::to_value(InspectReport::new(ins, symbols)).failed_at("JSON")?;
        to_json(&doc)?
    } else if dot {
        report::dot(&ins, &target.lazy)
    } else {
        report::inspect_text(&ins)
    };
    emit(out.as_deref(), &text)?;
    Ok(Exit::Success)
}

pub fn plan(a: PlanArgs, quiet: bool) -> Result<Exit> {
    let PlanArgs {
        mut target,
        json,
        yaml,
        env_lock,
        out,
        wheels,
    } = a;
    let wheels = wheels
        .map(|w| Wheels::parse(&w).bad_in("--wheels"))
        .transpose()?;
    // site-packages/torch of a conda environment links its libraries to PREFIX/lib: the verdict is
    // for the environment, whose libraries the process loads.
    if let Some((env, links, example)) = splitpkg::input::enclosing_env(&target.path) {
        // Debug-quoted: a path's control characters reach the terminal escaped.
        splitpkg::output::stderr_line(format_args!(
            "splitpkg: note: {:?}: {links} links lead into the conda environment {:?} (e.g. {example:?}); planning the environment, what the process loads",
            target.path, env
        ));
        target.path = env;
    }
    let mut planned =
        pipeline::plan_tree(&target.request(Extras::default()), &Progress::new(!quiet))?;
    planned.plan.stamp = provenance::Stamp::reproducible();
    planned.plan.saving.environment = splitpkg::analysis::environment::measure(
        &planned.plan,
        &planned.inspection.tree,
        env_lock.as_deref(),
    )?;
    if let Some(w) = &wheels {
        let used = planned
            .plan
            .installed
            .as_mut()
            .is_some_and(|i| i.use_wheels(w));
        if !used {
            return Err(Error::bad(
                "--wheels",
                format!(
                    "{}: not a pip environment with a split's lazy wheel, so there is no switch command to complete",
                    target.path.display()
                ),
            ));
        }
    }
    let plan = &planned.plan;
    let text = if json {
        to_json(plan)?
    } else if yaml {
        serde_yaml::to_string(plan).failed_at("YAML")?
    } else {
        report::plan_text(plan)
    };
    emit(out.as_deref(), &text)?;
    Ok(planned.leak_at_exit().verdict.exit())
}

pub fn fatbin(a: FatbinArgs, quiet: bool) -> Result<Exit> {
    let FatbinArgs {
        path,
        json,
        entries,
        what_if,
        device,
        time,
        out,
    } = a;
    let opts = fatbin::scan::ScanOptions {
        what_if,
        devices: device,
        entries,
        time,
    };
    let mut r = fatbin::scan::scan(&path, &opts, &Progress::new(!quiet))?;
    r.stamp = provenance::Stamp::reproducible();
    let text = if json {
        to_json(&r)?
    } else {
        fatbin::text::fatbin_text(&r)
    };
    emit(out.as_deref(), &text)?;
    Ok(r.exit())
}
