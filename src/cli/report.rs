//! `report`: one page from the documents of plan, smoke, fatbin and pack.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use splitpkg::Exit;
use splitpkg::error::Result;
use splitpkg::output::write_atomic;
use splitpkg::report::{self, Paths, ReportFormat};

pub const REPORT_HELP: &str = "Any input may be left out: the page then says what is not known instead of guessing. The answer applies conda-forge's 2024 rule to the saving (below 600 MB not worth a user-facing variant, 600 MB to 2 GB a gray zone, 2 GB or more worth it) and names what the slim variant loses beside it. Inputs from different trees (torch version, CUDA runtime, lazy-library or tree bytes that differ) are refused with exit 2 and nothing is written. An EMULATED smoke variant is labelled so wherever it appears. The same inputs give the same bytes.

Exit codes: 0 written, 2 bad input (not JSON, wrong schema, inputs from different trees) or usage, 3 internal error.

Examples:
  splitpkg report --plan plan.json --smoke smoke.json --out report.html
  splitpkg report --plan plan.json --smoke smoke.json --fatbin fatbin.json \\
    --pack pack.json --out report.html
  splitpkg report --plan plan.json --smoke smoke.json --format md --out \\
    report.md
  splitpkg plan torch/ --json --out plan.json && splitpkg report --plan \\
    plan.json --out report.html
  splitpkg report --plan wheel-plan.json --env-lock pylock.toml --smoke \\
    smoke.json --out report.html";

#[derive(Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Html,
    Md,
}

#[derive(Args)]
pub struct ReportArgs {
    /// A plan (`splitpkg plan --json`).
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// A smoke run (`splitpkg smoke --json`, with --bench for timings).
    #[arg(long, value_name = "FILE")]
    smoke: Option<PathBuf>,
    /// A device-code scan (`splitpkg fatbin --json`).
    #[arg(long, value_name = "FILE")]
    fatbin: Option<PathBuf>,
    /// A pack report (`splitpkg pack --json`).
    #[arg(long, value_name = "FILE")]
    pack: Option<PathBuf>,
    /// A PEP 751 lock of the planned wheel's environment (`pylock.toml`, as `uv pip compile
    /// --format pylock.toml` writes it): the saving is also stated against the download of
    /// everything the wheel pulls in. Needs --plan of a wheel.
    #[arg(long, value_name = "FILE", requires = "plan")]
    env_lock: Option<PathBuf>,
    /// Where to write the page (atomically).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// html: one self-contained file with inline SVG charts; md: GitHub Markdown with tables.
    #[arg(long, value_enum, default_value = "html")]
    format: FormatArg,
}

pub fn report(a: ReportArgs) -> Result<Exit> {
    let paths = Paths {
        plan: a.plan,
        smoke: a.smoke,
        fatbin: a.fatbin,
        pack: a.pack,
        env_lock: a.env_lock,
    };
    let format = match a.format {
        FormatArg::Html => ReportFormat::Html,
        FormatArg::Md => ReportFormat::Md,
    };
    let page = report::run(&paths, format)?;
    write_atomic(&a.out, page.as_bytes())?;
    Ok(Exit::Success)
}
