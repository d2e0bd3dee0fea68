//! The `splitpkg` command line: a thin layer over the library. Each subcommand parses its options,
//! calls one library stage, and maps the outcome to an exit code (0 confined/ok, 1 negative
//! verdict, 2 bad input or usage, 3 internal failure).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use splitpkg::error::{Error, Result};
use splitpkg::inspect::{Inspection, inspect};
use splitpkg::output::emit;
use splitpkg::payload::PayloadSpec;
use splitpkg::progress::Progress;
use splitpkg::{fatbin, plan, report, verdict};

const DEFAULT_LAZY: &str = "libtorch_cuda_linalg.so";
const DEFAULT_DEP: &str = "magma";

#[derive(Parser)]
#[command(
    name = "splitpkg",
    version,
    about = "Prove that MAGMA in a CUDA PyTorch build is reachable only through the lazily loaded linalg library, and split the package along that line.",
    after_help = "Exit codes: 0 confined / success, 1 not confined or payload not present, 2 bad input or usage, 3 internal error.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg inspect site-packages/torch --dot | dot -Tsvg > load.svg\n  splitpkg fatbin site-packages/torch/lib --device sm_120"
)]
struct Cli {
    /// No progress bars on stderr.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Target {
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
}

#[derive(Subcommand)]
enum Command {
    /// Per-file ELF facts and the load graph, with how each edge resolves.
    #[command(after_help = "Examples:\n  splitpkg inspect torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg inspect ./torch --json --symbols > facts.json\n  splitpkg inspect ./torch --dot | dot -Tsvg > load.svg")]
    Inspect {
        #[command(flatten)]
        target: Target,
        /// JSON: files, facts, nodes and edges.
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
    #[command(after_help = "Exit codes: 0 CONFINED, 1 NOT CONFINED or NOT PRESENT, 2 bad input.\n\nExamples:\n  splitpkg plan torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg plan $CONDA_PREFIX --json --out plan.json\n  splitpkg plan libtorch-2.5.1-cuda126_h0_300.conda --lazy libtorch_cuda_linalg.so --yaml")]
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
    /// CUDA device code (.nv_fatbin) per library and for the tree: entries by architecture and kind,
    /// stored vs uncompressed bytes, compression and the minimum driver it needs, SASS-only targets.
    #[command(after_help = "Reads headers only (milliseconds per library); --what-if decompresses and recompresses every entry (seconds per GiB).\n\nExit codes: 0 success, 1 some library cannot run on a --device, 2 bad input (a corrupt fatbin is named with its file offset).\n\nExamples:\n  splitpkg fatbin torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl\n  splitpkg fatbin site-packages/torch/lib/libtorch_cuda.so --time\n  splitpkg fatbin ./torch --what-if lz4 --what-if zstd:19\n  splitpkg fatbin $CONDA_PREFIX --device sm_75 --device sm_120 --json --out fatbin.json")]
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
    let mut spec = PayloadSpec::for_dep(&target.dep, &target.dep_symbol);
    spec.deep = target.deep;
    inspect(&target.path, &spec, &Progress::new(!quiet))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string_pretty(v).map(|s| s + "\n").map_err(|e| Error::other(format!("JSON: {e}")))
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Inspect { target, json, dot, symbols, out } => {
            let ins = load(&target, cli.quiet)?;
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
                serde_yaml::to_string(&plan).map_err(|e| Error::other(format!("YAML: {e}")))?
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
