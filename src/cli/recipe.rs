//! `emit` and `verify-variant`: recipes from a plan, and the check a lazy-library build must pass.

use splitpkg::document::Document;
use splitpkg::error::Context;
use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::analysis::contract::ContractFile;
use splitpkg::error::{Error, Result};
use splitpkg::output::emit as write_out;
use splitpkg::recipe::{emit, feedstock, note, split, verify};

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
// One of --contract and --plan, each shown as the alternative of the other (`--contract` alone
// was marked required although `--plan` works).
#[command(group(clap::ArgGroup::new("contract_source").required(true).multiple(false)))]
pub struct VerifyVariantArgs {
    /// The lazy library file to check.
    library: PathBuf,
    /// magma or nomagma (for --dep magma).
    #[arg(long)]
    variant: String,
    /// The loader contract: contract.json written by `splitpkg emit` (this or --plan).
    #[arg(long, value_name = "FILE", group = "contract_source")]
    contract: Option<PathBuf>,
    /// A plan (`splitpkg plan --json`) to take the contract from (this or --contract).
    #[arg(long, value_name = "FILE", group = "contract_source")]
    plan: Option<PathBuf>,
    /// Where the library's NEEDED libraries are (repeatable; searched before its own directory,
    /// its RPATH/RUNPATH and the system's). Given, a NEEDED library found nowhere fails the
    /// imports check; without it, that check is skipped with a note.
    #[arg(long = "lib-dir", value_name = "DIR")]
    lib_dirs: Vec<PathBuf>,
    /// Pass although some checks could not run (the code of a machine splitpkg does not read,
    /// such as ppc64le or s390x: the load-time registrations). Without it such a check says
    /// "not checked" and fails; with it, it still says "not checked" and the report notes that
    /// it was accepted.
    #[arg(long)]
    accept_unchecked: bool,
    /// JSON on stdout: the library, the variant, each check with its result, and whether all pass.
    #[arg(long)]
    json: bool,
    /// Also write the contract the check used (contract.json, written atomically), so that a
    /// package's own tests can check it again without the stock file: the stage script
    /// `feedstock` writes ships it in the lazy package.
    #[arg(long, value_name = "FILE")]
    write_contract: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    RattlerBuild,
    CondaBuild,
    Both,
}

/// The command line recorded in generated recipe headers: options only, no machine paths.
fn emit_command(
    source: &str,
    split: &split::Split,
    format: FormatArg,
    stage: &str,
    note: &str,
) -> String {
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
        o.payload_packages
            .iter()
            .map(|p| format!(" --payload-package {p}"))
            .collect::<String>()
    ) + note
}

pub fn emit(a: EmitArgs, quiet: bool) -> Result<Exit> {
    let EmitArgs {
        input,
        format,
        out,
        split: split_args,
        stage,
        lazy,
        dep,
        dlopen_note,
        dlopen_feature,
    } = a;
    let plan = load_plan(&input, &lazy, &dep, quiet)?;
    let options = split_args.options(&plan, &input)?;
    let split = split::Split::from_plan(&plan, options)?;
    let formats = match format {
        FormatArg::RattlerBuild => vec![emit::RecipeFormat::RattlerBuild],
        FormatArg::CondaBuild => vec![emit::RecipeFormat::CondaBuild],
        FormatArg::Both => vec![
            emit::RecipeFormat::RattlerBuild,
            emit::RecipeFormat::CondaBuild,
        ],
    };
    let source = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let note =
        dlopen_note.then(|| note::NoteStep::from_plan(&plan, &split, dlopen_feature.as_deref()));
    let note_flags = match (&note, &dlopen_feature) {
        (None, _) => String::new(),
        (Some(_), None) => " --dlopen-note".to_string(),
        (Some(_), Some(f)) => format!(" --dlopen-note --dlopen-feature {f}"),
    };
    let command = emit_command(&source, &split, format, &stage, &note_flags);
    let emitted = emit::render_with(
        &plan,
        &split,
        &formats,
        &stage,
        &source,
        &command,
        note.as_ref(),
    )?;
    emit::write(&out, &emitted)?;
    for w in &emitted.warnings {
        splitpkg::output::stderr_line(format_args!("splitpkg: warning: {w}"));
    }
    let mut listing = String::new();
    for g in &emitted.files {
        listing.push_str(&format!("wrote {}\n", out.join(&g.path).display()));
    }
    write_out(None, &listing)?;
    Ok(Exit::Success)
}

pub fn verify_variant(a: VerifyVariantArgs) -> Result<Exit> {
    let VerifyVariantArgs {
        library,
        variant,
        contract,
        plan,
        lib_dirs,
        accept_unchecked,
        json,
        write_contract,
    } = a;
    let contract = match (contract, plan) {
        (Some(c), _) => ContractFile::load(&c)?,
        (None, Some(p)) => {
            let plan = load_plan(&p, &[DEFAULT_LAZY.into()], &[DEFAULT_DEP.into()], true)?;
            let name = library
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            ContractFile::for_library(&plan, &name).invalid_at(p.display())?
        }
        (None, None) => return Err(Error::Usage("--contract or --plan is required".into())),
    };
    let mut report = verify::verify_variant(&library, &variant, &contract, Some(&lib_dirs))?;
    if let Some(path) = &write_contract {
        splitpkg::output::write_atomic(path, to_json(&contract)?.as_bytes())?;
    }
    if accept_unchecked {
        report.accept_unchecked();
    }
    let text = if json {
        to_json(&report)?
    } else {
        verify::report_text(&report)
    };
    write_out(None, &text)?;
    Ok(Exit::pass_or_no(report.pass))
}

pub const FEEDSTOCK_HELP: &str = "DIR is a feedstock checkout: recipe/recipe.yaml (v1, with a staging output that compiles the library), recipe/build.sh and .ci_support/. Prints a unified diff that adds the split: a new output for the lazy library (inherits the staging; variants magma/nomagma by one variant key; nomagma rebuilt from the staging's sources without MAGMA and checked with verify-variant), libtorch without the library and with an exact run dependency on it, and the key in conda_build_config.yaml. Both variants build in the same CI job; CPU configurations are untouched. A second run prints nothing.\n\nExit codes: 0 patch printed or written (or nothing to do), 2 a shape it cannot patch safely (one line says what it expected; nothing written).\n\nExamples:\n  splitpkg feedstock pytorch-cpu-feedstock\n  splitpkg feedstock pytorch-cpu-feedstock --write\n  splitpkg feedstock . --prefer nomagma --variant-key with_magma";

#[derive(Args)]
pub struct FeedstockArgs {
    /// The feedstock root (holds recipe/ and .ci_support/).
    dir: PathBuf,
    /// Apply the patch (each file replaced atomically) instead of only printing it.
    #[arg(long)]
    write: bool,
    /// Name of the core package (the output that stops shipping the library).
    #[arg(long, default_value = "libtorch", value_name = "NAME")]
    core_name: String,
    /// Name of the new lazy-library package.
    #[arg(long, default_value = "libtorch-cuda-linalg", value_name = "NAME")]
    lazy_name: String,
    /// The lazily loaded library, as a file name.
    #[arg(long, default_value = DEFAULT_LAZY, value_name = "NAME")]
    lazy: String,
    /// The optional component (names the variants: magma / nomagma).
    #[arg(long, default_value = DEFAULT_DEP, value_name = "NAME")]
    dep: String,
    /// The variant a plain install gets (default: the one with the component).
    #[arg(long, value_name = "VARIANT")]
    prefer: Option<String>,
    /// Variant key, used by the new output only.
    #[arg(long, default_value = "linalg_variant", value_name = "KEY")]
    variant_key: String,
    /// Package(s) providing the payload (repeatable; default lib<dep>).
    #[arg(long, value_name = "NAME")]
    payload_package: Vec<String>,
    /// Also mark CORE (a file in $PREFIX/lib, e.g. libtorch_cuda.so) with `splitpkg note` in the
    /// core stage, so loaders see that it dlopens the lazy library (off by default).
    #[arg(long, value_name = "CORE")]
    dlopen_note: Option<String>,
    /// Also write a pull-request description of the patch (Markdown): what changes per output and
    /// per CI configuration, the bytes a slim environment saves, what the slim variant loses, how
    /// users pick a variant, how to revert.
    #[arg(long, value_name = "FILE")]
    pr_body: Option<PathBuf>,
    /// A smoke run of both variants (`splitpkg smoke --json`) for the description's "what the
    /// slim variant loses".
    #[arg(long, value_name = "FILE", requires = "pr_body")]
    pr_smoke: Option<PathBuf>,
    /// The payload package (.conda or .tar.bz2) of one CUDA version, measured for the
    /// description's savings: `13.0=libmagma-2.10.0-cuda130_….conda` (repeatable).
    #[arg(long, value_name = "CUDA=FILE", requires = "pr_body")]
    pr_payload: Vec<String>,
}

/// `--pr-payload CUDA=FILE` options as data.
fn pr_payloads(args: &[String]) -> Result<Vec<splitpkg::report::pr::Payload>> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((cuda, file)) if !cuda.is_empty() && !file.is_empty() => {
                Ok(splitpkg::report::pr::Payload {
                    cuda: cuda.to_string(),
                    file: PathBuf::from(file),
                })
            }
            _ => Err(Error::Usage(format!(
                "--pr-payload {a:?}: expected CUDA=FILE, e.g. 13.0=libmagma-2.10.0-cuda130_h0_0.conda"
            ))),
        })
        .collect()
}

/// The pull-request description of `patch`.
fn pr_body(
    dir: &std::path::Path,
    payloads: &[String],
    smoke: Option<&std::path::Path>,
    patch: &feedstock::Patch,
) -> Result<String> {
    let Some(summary) = &patch.summary else {
        return Err(Error::Usage(format!(
            "--pr-body: {} is split already; run on the unpatched checkout to describe the patch",
            dir.display()
        )));
    };
    let configs = feedstock::ci_configs(dir)?;
    let payloads = pr_payloads(payloads)?;
    let smoke = match smoke {
        Some(p) => Some(splitpkg::report::LoadedDocument {
            file: p.display().to_string(),
            doc: <splitpkg::smoke::SmokeReport as splitpkg::document::Document>::load(p)?,
        }),
        None => None,
    };
    splitpkg::report::pr::render(summary, &configs, &payloads, smoke)
}

pub fn feedstock(a: FeedstockArgs) -> Result<Exit> {
    if a.lazy.contains('/') || a.lazy.contains('*') {
        return Err(Error::Usage(format!(
            "--lazy {:?}: feedstock takes one library file name",
            a.lazy
        )));
    }
    let payload_packages = if a.payload_package.is_empty() {
        vec![format!("lib{}", a.dep)]
    } else {
        a.payload_package
    };
    let options = split::SplitOptions {
        core_name: a.core_name,
        lazy_name: a.lazy_name,
        version: "${{ version }}".into(),
        build_number: 0,
        prefer: a.prefer.unwrap_or_else(|| a.dep.clone()),
        variant_key: a.variant_key,
        payload_packages,
        payload_version: String::new(),
        build_keys: String::new(),
        cuda_floor: None,
        external_depends: Vec::new(),
    };
    let opts = feedstock::FeedstockOptions {
        lazy_library: a.lazy.clone(),
        dlopen_note: a.dlopen_note,
    };
    if let Some(core) = &opts.dlopen_note
        && (core.contains('/')
            || core.is_empty()
            || !core
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b)))
    {
        return Err(Error::Usage(format!(
            "--dlopen-note {core:?}: expected a library file name in $PREFIX/lib"
        )));
    }
    let split = split::Split::for_recipe(options, &a.dep, &a.lazy)?;
    // Held from before the inputs are read to after the last rename: a second `--write` waits,
    // then patches this one's result (or refuses it), so no patch is lost.
    let _lock = if a.write {
        let lock = splitpkg::output::lock_tree(&a.dir)?;
        for d in [a.dir.clone(), a.dir.join("recipe")] {
            splitpkg::output::cleanup::sweep_once(&d);
        }
        Some(lock)
    } else {
        None
    };
    let patch = feedstock::patch(&a.dir, &split, &opts)?;
    // Made before anything is printed or written: a bad --pr-payload or --pr-smoke writes nothing.
    let body = match &a.pr_body {
        Some(path) => Some((
            path,
            pr_body(&a.dir, &a.pr_payload, a.pr_smoke.as_deref(), &patch)?,
        )),
        None => None,
    };
    write_out(None, &patch.diff())?;
    for n in &patch.notes {
        splitpkg::output::stderr_line(format_args!("splitpkg: note: {n}"));
    }
    if a.write && !patch.changes.is_empty() {
        patch.write(&a.dir)?;
        for c in &patch.changes {
            splitpkg::output::stderr_line(format_args!(
                "splitpkg: wrote {}",
                a.dir.join(&c.path).display()
            ));
        }
    }
    if let Some((path, text)) = body {
        splitpkg::output::write_atomic(path, text.as_bytes())?;
        splitpkg::output::stderr_line(format_args!("splitpkg: wrote {}", path.display()));
    }
    Ok(Exit::Success)
}
