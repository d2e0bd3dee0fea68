//! `emit` and `verify-variant`: recipes from a plan, and the check a lazy-library build must pass.

use std::path::PathBuf;

use clap::Args;

use splitpkg::analysis::contract::ContractFile;
use splitpkg::error::{Error, Result};
use splitpkg::input::file;
use splitpkg::output::emit as write_out;
use splitpkg::recipe::{emit, note, split, verify};

use super::{DEFAULT_DEP, DEFAULT_LAZY, SplitArgs, load_plan, to_json};

#[derive(Args)]
pub struct EmitArgs {
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
    /// The lazily loaded library, or a glob (when INPUT is not a plan; repeatable, as for `plan`).
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: Vec<String>,
    /// The optional component (when INPUT is not a plan; repeatable, as for `plan`).
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    dep: Vec<String>,
    /// End build-variants.sh with `splitpkg note` calls that declare each lazy library, required,
    /// in the .note.dlopen of the core file that loads it (docs/dlopen-note.md).
    #[arg(long)]
    dlopen_note: bool,
    /// The note's feature name (default: what the lazy library's file name adds to its loader's,
    /// `linalg` for libtorch_cuda.so → libtorch_cuda_linalg.so).
    #[arg(long, value_name = "NAME", requires = "dlopen_note")]
    dlopen_feature: Option<String>,
}

#[derive(Args)]
pub struct VerifyVariantArgs {
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
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    RattlerBuild,
    CondaBuild,
    Both,
}

/// The command line recorded in generated recipe headers: options only, no machine paths.
fn emit_command(source: &str, split: &split::Split, format: FormatArg, stage: &str, note: &str) -> String {
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
    ) + note
}

pub fn emit(a: EmitArgs, quiet: bool) -> Result<i32> {
    let EmitArgs { input, format, out, split: split_args, stage, lazy, dep, dlopen_note, dlopen_feature } = a;
    let plan = load_plan(&input, &lazy, &dep, quiet)?;
    let options = split_args.options(&plan, &input)?;
    let split = split::Split::from_plan(&plan, options)?;
    let formats = match format {
        FormatArg::RattlerBuild => vec![emit::Format::RattlerBuild],
        FormatArg::CondaBuild => vec![emit::Format::CondaBuild],
        FormatArg::Both => vec![emit::Format::RattlerBuild, emit::Format::CondaBuild],
    };
    let source = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let note = dlopen_note.then(|| note::NoteStep::from_plan(&plan, &split, dlopen_feature.as_deref()));
    let note_flags = match (&note, &dlopen_feature) {
        (None, _) => String::new(),
        (Some(_), None) => " --dlopen-note".to_string(),
        (Some(_), Some(f)) => format!(" --dlopen-note --dlopen-feature {f}"),
    };
    let command = emit_command(&source, &split, format, &stage, &note_flags);
    let emitted = emit::render_with(&plan, &split, &formats, &stage, &source, &command, note.as_ref())?;
    emit::write(&out, &emitted)?;
    for w in &emitted.warnings {
        eprintln!("splitpkg: warning: {w}");
    }
    let mut listing = String::new();
    for g in &emitted.files {
        listing.push_str(&format!("wrote {}\n", out.join(&g.path).display()));
    }
    write_out(None, &listing)?;
    Ok(0)
}

pub fn verify_variant(a: VerifyVariantArgs) -> Result<i32> {
    let VerifyVariantArgs { library, variant, contract, plan, json } = a;
    let contract = match (contract, plan) {
        (Some(c), _) => {
            let text = file::read_text(&c, file::Links::Follow, file::MAX_DOCUMENT_BYTES, "contract")?;
            ContractFile::parse(&text, &c)?
        }
        (None, Some(p)) => {
            let plan = load_plan(&p, &[DEFAULT_LAZY.into()], &[DEFAULT_DEP.into()], true)?;
            let name = library.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            ContractFile::for_library(&plan, &name).map_err(|why| Error::bad(p.display(), why))?
        }
        (None, None) => return Err(Error::Usage("--contract or --plan is required".into())),
    };
    let report = verify::verify_variant(&library, &variant, &contract)?;
    let text = if json { to_json(&report)? } else { verify::report_text(&report) };
    write_out(None, &text)?;
    Ok(if report.pass { 0 } else { 1 })
}
