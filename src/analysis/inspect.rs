//! The facts stage: read the tree once, parse every ELF file, scan it for the payload, and build
//! the load graph. Everything later (verdict, plan, emit, pack) works from an [`Inspection`].

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::analysis::graph::{GraphInput, LoadGraph, LoaderEnv};
use crate::analysis::payload::{self, PayloadFacts, PayloadSpec};
use crate::elf::{ElfFacts, ElfView};
use crate::error::{Error, Result};
use crate::input::{Tree, TreeKind, display_member};
use crate::progress::Progress;

/// What the inspection read of one ELF file of the tree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileFacts {
    /// Its path inside the tree.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// What the ELF reader found in it.
    pub elf: ElfFacts,
    /// What it holds of the payload.
    pub payload: PayloadFacts,
    /// CUDA device code (`.nv_fatbin` headers only), without the per-entry layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatbin: Option<crate::fatbin::FatbinSummary>,
    /// Source files named by `STT_FILE` symbols (`inspect --json`); read only when asked for, since
    /// walking the local symbols of torch's large tables would cost the plan several ms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub translation_units: Vec<String>,
    /// SHA-256 of the file's bytes, when asked for (`Extras::digests`): `wheel` verifies the
    /// input RECORD with it, so the ELF members are inflated once for the plan and the check.
    #[serde(skip)]
    pub sha256: Option<[u8; 32]>,
    /// Imports the code run at load refers to ([`crate::elf::ElfView::load_time_imports`]), read
    /// only for a file that carries the payload (the one a variant replaces): reading code is
    /// not free, and no other file's registrations enter a contract. `None` otherwise, or for a
    /// machine whose code is not decoded.
    #[serde(skip)]
    pub load_time_imports: Option<Vec<String>>,
}

impl FileFacts {
    /// Holds payload code or NEEDs a payload library.
    pub fn carries_payload(&self, spec: &PayloadSpec) -> bool {
        carries_payload(&self.elf, &self.payload, spec)
    }
}

fn carries_payload(elf: &crate::elf::ElfFacts, payload: &PayloadFacts, spec: &PayloadSpec) -> bool {
    payload.holds_code() || elf.needed.iter().any(|n| spec.is_payload_library(n))
}

/// The load graph of `files`, built while the payload walks left for later (`tails`, see
/// [`Tail`]) run beside it; then `then` on the inspection, still beside the walks, whose results
/// are written into the files after. The graph reads only the ELF facts, and `then` must not read
/// what the walks fill in (`payload.estimate`, `load_time_imports`): the walks work on their own
/// copy of a carrier's facts, so the inspection can be handed over while they run.
fn graph_beside_tails<R: Send>(
    (tree, files): (Tree, Vec<FileFacts>),
    tails: Vec<Option<Tail>>,
    spec: &PayloadSpec,
    env: &LoaderEnv,
    trace: Option<Instant>,
    then: impl FnOnce(&Inspection) -> R + Send,
) -> (Inspection, R) {
    let carriers: Vec<(usize, Tail, ElfFacts, PayloadFacts)> = (tails.into_iter().enumerate())
        .filter_map(|(i, t)| Some((i, t?, files[i].elf.clone(), files[i].payload.clone())))
        .collect();
    let ((mut inspection, result), walked) = rayon::join(
        || {
            let t_graph = Instant::now();
            let inputs: Vec<GraphInput<'_>> = files
                .iter()
                .map(|f| GraphInput {
                    path: &f.path,
                    elf: &f.elf,
                })
                .collect();
            let graph =
                LoadGraph::build_with(&tree, &inputs, |name| spec.is_payload_library(name), env);
            if trace.is_some() {
                tracing::trace!("trace: graph {:?}", t_graph.elapsed());
            }
            let inspection = Inspection {
                tree,
                files,
                graph,
                spec: spec.clone(),
            };
            let result = then(&inspection);
            (inspection, result)
        },
        || {
            use rayon::prelude::*;
            (carriers.par_iter())
                .map(|(i, t, elf, payload)| (*i, t.finish(elf, payload, spec, trace)))
                .collect::<Vec<_>>()
        },
    );
    for (i, (estimate, imports)) in walked {
        if estimate.is_some() {
            inspection.files[i].payload.estimate = estimate;
        }
        inspection.files[i].load_time_imports = imports;
    }
    (inspection, result)
}

/// What to read beyond the facts every command needs.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// `STT_FILE` names per file (`FileFacts::translation_units`).
    pub translation_units: bool,
    /// `LD_LIBRARY_PATH` entries for the modelled processes (`--ld-library-path`).
    pub ld_library_path: Vec<String>,
    /// SHA-256 of every ELF file's bytes (`FileFacts::sha256`), hashed while they are in memory.
    pub digests: bool,
    /// Unpack a wheel into this directory while reading it (`pack`; [`crate::input::unpack`]).
    pub unpack: Option<crate::input::unpack::Unpack>,
}

/// Everything read from a tree: the tree itself, every ELF file's facts, and the load graph over
/// them.
pub struct Inspection {
    /// The tree, as a list of entries.
    pub tree: Tree,
    /// Every ELF file of the tree, with what was read of it.
    pub files: Vec<FileFacts>,
    /// Which file loads which, as ld.so would resolve it.
    pub graph: LoadGraph,
    /// The payload it was read for.
    pub spec: PayloadSpec,
}

impl Inspection {
    /// The facts of the ELF file at tree path `path`, if it is one.
    pub fn file(&self, path: &str) -> Option<&FileFacts> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// `f`'s result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, std::time::Duration) {
    let t = std::time::Instant::now();
    (f(), t.elapsed())
}

/// Read the tree at `path` (a directory or an archive) and everything the plan needs of it, with
/// default extras.
pub fn inspect(path: &Path, spec: &PayloadSpec, progress: &Progress) -> Result<Inspection> {
    inspect_with(path, spec, progress, Extras::default())
}

/// [`inspect`] with extras (an `LD_LIBRARY_PATH`, digests of every ELF file, unpacking while
/// reading).
pub fn inspect_with(
    path: &Path,
    spec: &PayloadSpec,
    progress: &Progress,
    extras: Extras,
) -> Result<Inspection> {
    inspect_then(path, spec, progress, extras, |_| ()).map(|(inspection, ())| inspection)
}

/// [`inspect_with`], and `then` on the inspection as soon as its load graph is built, beside the
/// walks still running on the file that carries the payload (the static estimate and the code run
/// at load, ~2.5 ms on torch 2.11's linalg library); their results are in the inspection returned,
/// not in the one `then` sees. `plan` proves confinement there: the proof needs the graph, not
/// the walks ([`crate::analysis::verdict::prove`]).
pub fn inspect_then<R: Send>(
    path: &Path,
    spec: &PayloadSpec,
    progress: &Progress,
    extras: Extras,
    then: impl FnOnce(&Inspection) -> R + Send,
) -> Result<(Inspection, R)> {
    let kind = TreeKind::detect(path)?;
    let reader = FileReader {
        path,
        kind,
        spec,
        extras: &extras,
        // Per-file stage timings as `trace` events (`-vv`, SPLITPKG_TRACE=1: bench/ explains its
        // numbers with them); timed only when someone listens.
        trace: tracing::enabled!(tracing::Level::TRACE),
        t0: std::time::Instant::now(),
    };
    let (trace, t0) = (reader.trace, reader.t0);
    let (tree, parsed) = Tree::open_unpacking(path, extras.unpack.as_ref(), progress, |input| {
        reader.read(input)
    })?;
    if trace {
        tracing::trace!(
            "trace: files read in {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    let (files, tails): (Vec<FileFacts>, Vec<Option<Tail>>) =
        parsed.into_iter().map(|(_, f)| f).unzip();
    let env = LoaderEnv {
        ld_library_path: extras.ld_library_path,
    };
    Ok(graph_beside_tails(
        (tree, files),
        tails,
        spec,
        &env,
        trace.then_some(t0),
        then,
    ))
}

/// What reading one ELF file of the tree needs: where the tree is (for names in errors), the
/// payload, the extras asked for, and the clock of the per-file trace.
struct FileReader<'a> {
    path: &'a Path,
    kind: TreeKind,
    spec: &'a PayloadSpec,
    extras: &'a Extras,
    trace: bool,
    t0: std::time::Instant,
}

impl FileReader<'_> {
    /// The facts of one ELF file, read on a worker thread of [`Tree::open_unpacking`], and the
    /// payload walks still to run on it when its bytes outlive the visit (see [`Tail`]).
    fn read(&self, input: crate::input::ElfInput<'_>) -> Result<(FileFacts, Option<Tail>)> {
        let (spec, t0) = (self.spec, self.t0);
        // Built only on a refusal: a context method would format it for every file of the plan.
        let name = || display_member(self.path, self.kind, input.path);
        let start = t0.elapsed();
        let view = ElfView::parse(input.bytes).map_err(|e| Error::elf(name(), e))?;
        let headers = t0.elapsed() - start;
        // The `.nv_fatbin` header walk needs nothing from the facts: run it as a separate task so an
        // idle core can take it (torch's two largest libraries would otherwise serialise on it).
        // The digest is a third independent task, for the same reason.
        let digest = || {
            self.extras
                .digests
                .then(|| <[u8; 32]>::from(sha2::Sha256::digest(input.bytes)))
        };
        let (sha256, (facts, (fatbin, t_fatbin))) = rayon::join(digest, || {
            rayon::join(
                || {
                    let (elf, t_facts) = timed(|| view.facts(&spec.mention_words(), input.map));
                    let elf = elf?;
                    let (payload, t_payload) = timed(|| {
                        payload::scan_names(
                            &view,
                            &elf,
                            Tree::file_name(input.path),
                            input.bytes.len() as u64,
                            spec,
                        )
                    });
                    Ok::<_, crate::elf::ElfError>((elf, payload, t_facts, t_payload))
                },
                || timed(|| crate::fatbin::read_from(&view, input.file)),
            )
        });
        let (elf, mut payload, t_facts, t_payload) = facts.map_err(|e| Error::elf(name(), e))?;
        // The file that carries the payload gets two more walks, each over its whole `.symtab`
        // (the static estimate, the code run at load). When the file stays mapped they wait and
        // run beside the load graph, which needs neither (see `Tail`); otherwise (an archive
        // member, whose bytes go with the visit) they run here.
        let deferred = carries_payload(&elf, &payload, spec)
            .then_some(input.map)
            .flatten();
        let (load_time_imports, t_tail) = match deferred {
            Some(_) => (None, std::time::Duration::ZERO),
            None => {
                let ((estimate, imports), t) = timed(|| Tail::walk(&view, &elf, &payload, spec));
                if estimate.is_some() {
                    payload.estimate = estimate;
                }
                (imports, t)
            }
        };
        let tail = deferred.map(|map| Tail {
            map: map.clone(),
            path: input.path.to_string(),
        });
        let fatbin = fatbin
            .map_err(|e| Error::invalid(name(), e))?
            .map(|s| s.without_containers());
        if self.trace {
            tracing::trace!(
                "trace: {:>6.1}–{:<6.1}ms  {:>9.2?} headers {:>9.2?} facts {:>9.2?} payload {:>9.2?} fatbin {:>9.2?} estimate+load-time  {} ({} dynsyms)",
                start.as_secs_f64() * 1e3,
                t0.elapsed().as_secs_f64() * 1e3,
                headers,
                t_facts,
                t_payload,
                t_fatbin,
                t_tail,
                input.path,
                elf.symbols.len()
            );
        }
        let translation_units = if self.extras.translation_units {
            view.translation_units()
        } else {
            Vec::new()
        };
        let facts = FileFacts {
            path: input.path.to_string(),
            size: input.bytes.len() as u64,
            elf,
            payload,
            fatbin,
            translation_units,
            sha256,
            load_time_imports,
        };
        Ok((facts, tail))
    }
}

/// The two walks over the whole `.symtab` of a file that carries the payload: the static
/// estimate and the imports of the code run at load. Neither enters the load graph, so for a
/// file that stays mapped (a directory's) they run beside the graph instead of holding up the
/// end of the reading. On torch 2.11 they take 1.4 and 1.9 ms on linalg, the library read third,
/// and the graph 2.5 ms; `plan` on the tree went from 18.5 to 17.2 ms (41 interleaved runs).
struct Tail {
    map: std::sync::Arc<memmap2::Mmap>,
    path: String,
}

/// What the walks found: the static estimate, the load-time imports.
type Walked = (Option<payload::PayloadEstimate>, Option<Vec<String>>);

impl Tail {
    /// Both walks, side by side: the static estimate and the load-time imports. Each is `None`
    /// where it does not apply (a payload library has no static estimate; a file that does not
    /// carry the payload gets neither walk).
    fn walk(
        view: &ElfView<'_>,
        elf: &ElfFacts,
        payload: &PayloadFacts,
        spec: &PayloadSpec,
    ) -> Walked {
        if !carries_payload(elf, payload, spec) {
            return (None, None);
        }
        // The load-time walk first: the estimate's walk is two halves (`PayloadSpan::scan`), and
        // left last on this thread's queue, its second half is what the graph's thread, done
        // first, can take.
        let ((imports, t_imports), (estimate, t_estimate)) = rayon::join(
            || timed(|| view.load_time_imports()),
            || timed(|| payload::static_estimate(view, elf, payload, spec)),
        );
        tracing::trace!("trace: estimate {t_estimate:.2?} load-time {t_imports:.2?}");
        (estimate, imports)
    }

    /// The walks on the file's facts (`elf`, `payload`), read earlier from the same map.
    fn finish(
        &self,
        elf: &ElfFacts,
        payload: &PayloadFacts,
        spec: &PayloadSpec,
        t0: Option<Instant>,
    ) -> Walked {
        // Parsed once already; every read the walks make is bounds-checked against the headers.
        let Ok(view) = ElfView::parse(&self.map) else {
            return (None, None);
        };
        let start = t0.map(|t| t.elapsed());
        let walked = Tail::walk(&view, elf, payload, spec);
        if let (Some(t0), Some(start)) = (t0, start) {
            tracing::trace!(
                "trace: {:>6.1}–{:<6.1}ms  {:>9.2?} estimate+load-time beside the graph  {}",
                start.as_secs_f64() * 1e3,
                t0.elapsed().as_secs_f64() * 1e3,
                t0.elapsed() - start,
                self.path
            );
        }
        walked
    }
}
