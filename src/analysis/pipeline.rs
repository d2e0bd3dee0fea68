//! The one inspect → analyse → plan sequence. Every command that needs facts or a plan goes through
//! here — `inspect`, `plan`, `emit` (from a tree), `pack`, `verify-variant --plan` (from a tree) and
//! `solve --install` (planning the installed prefixes) — so they cannot drift apart in how they read
//! a tree, which options reach the loader model, or what they prove.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::analysis::inspect::{Extras, Inspection, inspect_then, inspect_with};
use crate::analysis::payload::PayloadSpec;
use crate::analysis::plan::{Plan, make_plan};
use crate::analysis::verdict::{Analysis, Verdict, prove};
use crate::error::{Error, Result};
use crate::input::Tree;
use crate::progress::Progress;

/// What to read and how to model it: the input, the lazy library, the payload, the loader options.
#[derive(Debug, Clone)]
pub struct Request {
    /// A directory, `.whl`, `.conda` or `.tar.bz2`.
    pub path: PathBuf,
    /// The lazily loaded libraries: file names or SONAMEs, or globs over them (`--lazy`, repeatable;
    /// see [`crate::analysis::lazy`]).
    pub lazy: Vec<String>,
    /// The payload: its name and how its libraries and code are recognised.
    pub spec: PayloadSpec,
    /// Translation units and `LD_LIBRARY_PATH` (see [`Extras`]).
    pub extras: Extras,
}

impl Request {
    /// The default payload rules for `deps` (`--dep`, one or several), nothing extra.
    pub fn new<S: AsRef<str>>(path: &Path, lazy: &[S], deps: &[S]) -> Self {
        Request {
            path: path.to_path_buf(),
            lazy: lazy.iter().map(|l| l.as_ref().to_string()).collect(),
            spec: PayloadSpec::for_deps(deps, &[]),
            extras: Extras::default(),
        }
    }
}

/// The facts, the proof and the proposed outputs of one tree.
pub struct Planned {
    /// What was read of the tree: its entries, every ELF file's facts, the load graph.
    pub inspection: Inspection,
    /// The proof: the verdict and its evidence.
    pub analysis: Analysis,
    /// The plan made from them.
    pub plan: Plan,
    /// Time spent reading (inspect: the files and the load graph), proving (verdict: the proof,
    /// which runs beside the payload walks, and their results added) and planning (also traced at
    /// `debug`).
    pub timings: [Duration; 3],
}

impl Planned {
    /// Ends the process's use of the inspection without unmapping its files; a long-lived caller
    /// simply drops the value. Unmapping is not free either way: the kernel tears the maps down at
    /// exit, on one thread, before the parent learns of it (on torch 2.11, from `exit_group` to
    /// the exit under strace: 3.7–4.9 ms, 1.9–2.5 ms since the searched read-only data is dropped
    /// as it is read, [`crate::elf::ElfView::facts`]). Unmapping the files here on two threads
    /// instead moved that time rather than saving it (41 interleaved runs each way, within noise).
    pub fn leak_at_exit(self) -> Plan {
        std::mem::forget(self.inspection);
        self.plan
    }
}

/// Read and model the tree (the first stage alone: `inspect`).
pub fn inspect_tree(req: &Request, progress: &Progress) -> Result<Inspection> {
    inspect_with(&req.path, &req.spec, progress, req.extras.clone())
}

/// Read, prove and plan: the sequence every planning command runs.
pub fn plan_tree(req: &Request, progress: &Progress) -> Result<Planned> {
    let _span = tracing::debug_span!("plan_tree").entered();
    let started = Instant::now();
    // The proof runs as soon as the load graph is built, beside the payload walks (see
    // `inspect_then`); `read` ends where it starts.
    let read = std::sync::OnceLock::new();
    let (inspection, proved) = tracing::debug_span!("inspect").in_scope(|| {
        let prove = |ins: &Inspection| {
            let _ = read.set(started.elapsed());
            tracing::debug_span!("verdict").in_scope(|| prove(ins, &req.lazy))
        };
        inspect_then(&req.path, &req.spec, progress, req.extras.clone(), prove)
    })?;
    let read = read.get().copied().unwrap_or_default();
    let analysis = proved.finish(&inspection);
    // A glob that selects nothing is a mistake in the command line, not an answer about the tree.
    if let Some(glob) = analysis.empty_globs.first() {
        return Err(Error::bad(
            req.path.display(),
            format!(
                "--lazy {glob:?} matches no ELF file by name or SONAME; `splitpkg inspect` lists the files"
            ),
        ));
    }
    if let Some(reason) = unmatched_name(&inspection, &analysis, &req.lazy) {
        return Err(Error::bad(req.path.display(), reason));
    }
    let proved = started.elapsed();
    let mut plan =
        tracing::debug_span!("plan").in_scope(|| make_plan(&inspection, &analysis, &req.lazy));
    if let Some(l) = &plan.lazy_library {
        plan.installed = crate::analysis::plan::installed(&inspection.tree, &l.path)?;
        // In a pip environment the tree is the distribution that owns the lazy library (torch),
        // not whichever dist-info the directory listed first (pip).
        if let Some(owner) = plan
            .installed
            .as_ref()
            .and_then(|i| i.sole_owner())
            .filter(|o| !o.name.is_empty())
        {
            plan.input.package = Some(crate::input::PackageMeta::named(
                &owner.name,
                &owner.version,
            ));
        }
    }
    let timings = [read, proved - read, started.elapsed() - proved];
    tracing::debug!(
        "trace: inspect {:?} verdict {:?} plan {:?}",
        timings[0],
        timings[1],
        timings[2]
    );
    Ok(Planned {
        inspection,
        analysis,
        plan,
        timings,
    })
}

/// The refusal of an exact `--lazy` name that selects no file while the tree loads a library
/// lazily on the way to the payload (a witness crosses a lazy edge into a tree file): the name is
/// then a mistake for that library, and NOT CONFINED would be a wrong answer about the tree. With no
/// such library (torch 1.10: MAGMA is linked into libtorch_cuda.so and nothing in the tree is
/// dlopened on the way to it) the name selecting nothing stays the answer, NOT CONFINED.
fn unmatched_name(ins: &Inspection, analysis: &Analysis, lazy: &[String]) -> Option<String> {
    use crate::analysis::lazy::{LazyPattern, closest_names};
    if !analysis.lazy_file_ids.is_empty() {
        return None;
    }
    let name = lazy
        .iter()
        .find(|l| matches!(LazyPattern::parse(l), LazyPattern::Name(_)))?;
    let mut lazily_loaded: Vec<String> = (analysis.witnesses.iter())
        .flat_map(|w| &w.steps)
        .filter(|s| s.kind.is_lazy() && ins.file(&s.to).is_some())
        .map(|s| Tree::file_name(&s.to).to_string())
        .collect();
    if lazily_loaded.is_empty() {
        return None;
    }
    lazily_loaded.sort();
    lazily_loaded.dedup();
    let names = closest_names(ins, name, &lazily_loaded);
    Some(format!(
        "--lazy {name:?} matches no ELF file by name or SONAME, while the tree loads {} lazily on the way to the payload; did you mean {}? (`splitpkg inspect` lists the files)",
        lazily_loaded.join(", "),
        names.join(" or ")
    ))
}

/// What a command needs a CONFINED plan for: the words of its refusal when the plan is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitFor {
    /// `pack`: `.conda` packages.
    Pack,
    /// `wheel`: pip wheels.
    Wheel,
    /// `emit` (and every `Split` made from a plan): recipes.
    Recipes,
}

/// The one gate every splitting command passes: only a CONFINED plan is split. NOT CONFINED and
/// NOT PRESENT are refused (exit 1, as `plan` exits for them), naming `input`.
pub fn require_confined(
    plan: &Plan,
    input: impl std::fmt::Display,
    purpose: SplitFor,
) -> Result<()> {
    if plan.verdict == Verdict::Confined {
        return Ok(());
    }
    let nothing = match purpose {
        SplitFor::Pack => "there is nothing safe to pack",
        SplitFor::Wheel => "there is nothing safe to split",
        SplitFor::Recipes => "there is no safe split to emit",
    };
    Err(Error::Refused(format!(
        "the plan for {input} is {}: {nothing} (see `splitpkg plan`)",
        plan.verdict.label()
    )))
}

/// [`plan_tree`], then [`require_confined`]: the sequence of a command that splits a tree.
pub fn split_tree(req: &Request, progress: &Progress, purpose: SplitFor) -> Result<Planned> {
    let planned = plan_tree(req, progress)?;
    require_confined(&planned.plan, req.path.display(), purpose)?;
    Ok(planned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::{LAZY, MAGMA, Scratch};
    use crate::analysis::verdict::analyse;

    /// `plan_tree` proves while the walks of the file carrying the payload still run, and adds
    /// their results after: it must conclude exactly what the proof on the finished inspection
    /// concludes, the static estimate and the load registrations included.
    #[test]
    fn proving_beside_the_payload_walks_changes_nothing() {
        let mut s = Scratch::new();
        s.lib(
            "torch/lib/libtorch_cpu.so",
            "int torch_cpu_fn(int x) { return x + 1; }\nint linalg_stub;\n",
            &[],
        )
        .lib(
            "torch/lib/libtorch_cuda_linalg.so",
            &format!(
                "{MAGMA}extern int torch_cpu_fn(int);\nextern int linalg_stub;\n\
                 __attribute__((constructor)) static void register_linalg(void) {{ linalg_stub = 1; }}\n\
                 int linalg_entry(int x) {{ return magma_dgetrf_gpu(x) + torch_cpu_fn(x); }}\n"
            ),
            &["torch/lib/libtorch_cpu.so"],
        )
        .lib(
            "torch/lib/libtorch_cuda.so",
            &crate::analysis::testkit::loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
            &["torch/lib/libtorch_cpu.so"],
        );
        let req = Request::new(&s.tree(), &[LAZY], &["magma"]);
        let planned = plan_tree(&req, &Progress::hidden()).expect("plan the scratch tree");
        let after = analyse(&planned.inspection, &[LAZY]);
        let json = |a: &Analysis| serde_json::to_value(a).unwrap();
        assert_eq!(json(&planned.analysis), json(&after));
        assert_eq!(
            planned.analysis.contract.load_registrations,
            ["linalg_stub"]
        );
        let estimate = planned.analysis.payload[0].estimate.as_ref();
        assert!(estimate.is_some_and(|e| e.bytes > 0), "{estimate:?}");
    }
}
