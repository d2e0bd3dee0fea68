//! The confinement proof.
//!
//! CONFINED means: with the lazy library removed from the graph, no root can reach a file that holds
//! or references payload code, by any edge, eager or lazy; and the lazy library itself is reached
//! only lazily. Both halves are checked on the graph ld.so would build (see [`crate::analysis::graph`]), and a
//! refutation comes with the shortest witness path. Payload-aware glue left in eagerly loaded files
//! does not break confinement but changes what the core reports, so it is listed as warnings.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::analysis::graph::{Edge, EdgeKind, LoadGraph, NodeKind, Reach};
use crate::analysis::inspect::Inspection;
use crate::analysis::payload::demangle;
use crate::analysis::warning::CORE_STATE_CONSEQUENCE;
pub use crate::analysis::warning::{Warning, WarningKind};
use crate::elf::{DefinedPrints, Lookup};
use crate::input::Tree;

/// Whether the payload can move to an optional output: `confined` (it can), `not-confined`
/// (something loads it at start-up, or no lazy library was found) or `not-present` (no payload
/// code, library or reference in the tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The payload is reached only through lazily loaded libraries: it can move to an optional
    /// output.
    Confined,
    /// Something loads the payload at start-up, or no lazy library was found.
    NotConfined,
    /// The tree has no payload code, library or reference to one.
    NotPresent,
}

impl Verdict {
    /// The exit status the verdict maps to: pass for CONFINED, the "no" status otherwise.
    pub fn exit(self) -> crate::Exit {
        crate::Exit::pass_or_no(self == Verdict::Confined)
    }

    /// The verdict as people read it and the channel documents record it (`NOT CONFINED`).
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Confined => "CONFINED",
            Verdict::NotConfined => "NOT CONFINED",
            Verdict::NotPresent => "NOT PRESENT",
        }
    }
}

/// A recorded verdict label that is none of the three.
#[derive(Debug, Clone, thiserror::Error)]
#[error("not a verdict: {0:?} (CONFINED, NOT CONFINED, NOT PRESENT)")]
pub struct BadVerdict(String);

impl std::str::FromStr for Verdict {
    type Err = BadVerdict;
    fn from_str(s: &str) -> Result<Verdict, BadVerdict> {
        [Verdict::Confined, Verdict::NotConfined, Verdict::NotPresent]
            .into_iter()
            .find(|v| v.label() == s)
            .ok_or_else(|| BadVerdict(s.to_string()))
    }
}

/// A verdict written as its label (`NOT CONFINED`), as the channel documents record it; the plan
/// writes the kebab-case name. `#[serde(with = "as_label")]`, `#[schemars(schema_with = …)]`.
pub mod as_label {
    use super::Verdict;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write the verdict as its label.
    pub fn serialize<S: Serializer>(v: &Verdict, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.label())
    }

    /// Read a label back; any other string is refused with the three labels named.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Verdict, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }

    /// The JSON schema of the label: one of the three strings.
    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "enum": ["CONFINED", "NOT CONFINED", "NOT PRESENT"] })
    }

    /// The same for an optional verdict.
    pub mod option {
        use super::Verdict;
        use serde::{Deserialize, Deserializer, Serializer};

        /// Write the verdict as its label, or null.
        pub fn serialize<S: Serializer>(v: &Option<Verdict>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => s.serialize_str(v.label()),
                None => s.serialize_none(),
            }
        }

        /// Read a label or null back.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Verdict>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|s| s.parse().map_err(serde::de::Error::custom))
                .transpose()
        }

        /// The JSON schema: one of the three labels, or null.
        pub fn schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
            let mut s = super::schema(g);
            s.insert(
                "enum".into(),
                serde_json::json!(["CONFINED", "NOT CONFINED", "NOT PRESENT", null]),
            );
            s
        }
    }
}

/// One edge of the load graph: a step of a witness path, or a lazy edge into a lazy library.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// Tree path of the file that makes the request.
    pub from: String,
    /// Tree path of the file the request resolves to; for a library that is no tree file (a system
    /// library, a file outside the tree, one not found), the file name requested.
    pub to: String,
    /// The name as requested: the NEEDED entry, the `dlopen` literal, or the `.note.dlopen`
    /// alternative the ld.so model resolved.
    pub name: String,
    /// How the request is made: `needed` (DT_NEEDED, loaded with the requester), `lazy` (a
    /// `dlopen` literal, loaded when that code runs) or `dlopen-note` (declared in `.note.dlopen`).
    pub kind: EdgeKind,
    /// How ld.so would find it, for people: `rpath of libtorch_cuda.so ($ORIGIN → lib)`,
    /// `system (glibc)`, `not found (external)`, …; a declared step says so first.
    pub how: String,
    /// For a step declared by the requester's `.note.dlopen`: the entry (feature, priority, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<crate::elf::DlopenEntry>,
}

/// A load chain that refutes confinement, from a root (an executable, a Python extension module,
/// or a library nothing in the tree loads) either to payload code or a reference to it without
/// passing through a lazy library, or to a lazy library that carries the payload and loads at
/// start-up.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Witness {
    /// One line, e.g. `_C.so → libtorch_python.so (NEEDED) → libtorch_cuda.so (NEEDED) → defines magma_dgetrf_gpu`.
    pub summary: String,
    /// The chain edge by edge, the first from the root; empty when the root itself is the end.
    pub steps: Vec<Step>,
    /// What is at the end: `defines magma_dgetrf_gpu`, `is payload library libmagma.so`, ...
    pub reason: String,
}

/// How the payload sits in (or outside) the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PayloadForm {
    /// A payload library file (`libmagma.so`).
    Library,
    /// Payload code linked into another file (MAGMA inside `libtorch_cuda_linalg.so`).
    Static,
    /// A payload library NEEDed but not in the tree (another package provides it).
    External,
}

impl PayloadForm {
    /// The form's name as the plan writes it (`library`, `static`, `external`).
    pub fn label(self) -> &'static str {
        match self {
            PayloadForm::Library => "library",
            PayloadForm::Static => "static",
            PayloadForm::External => "external",
        }
    }
}

/// A file of the tree that holds payload code, or a payload library the tree requests but lacks.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PayloadFile {
    /// Tree path, or the requested name for payload libraries outside the tree.
    pub path: String,
    /// `library` (a payload library file), `static` (payload code linked into this file) or
    /// `external` (a payload library requested, NEEDed or `dlopen`ed, but not in the tree).
    pub form: PayloadForm,
    /// How the roots reach it: `eager` (loaded at start-up), `lazy` (only after a run-time load)
    /// or `unreached` (no process started from a root loads it).
    pub reach: Reach,
    /// File size for files in the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// How many of its bytes are payload, part by part: the whole file for a payload library, an
    /// estimate for static payload; absent for an external library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<crate::analysis::payload::PayloadEstimate>,
    /// Example payload symbols the file defines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
    /// For an external payload library: the package that provides it, where `data/providers.json`
    /// knows (see [`crate::analysis::providers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<crate::analysis::providers::Provider>,
}

/// A library `--lazy` selected: where it is, how the roots reach it and what loads it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LazyLibrary {
    /// Tree path of the library.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// How the roots reach it: `lazy` (only after a run-time load, as confinement needs), `eager`
    /// (at start-up; a library nothing in the tree loads counts as loaded from outside at start-up)
    /// or `unreached` (no process started from a root loads it).
    pub reach: Reach,
    /// Lazy edges into it: `libtorch_cuda.so → libtorch_cuda_linalg.so via rpath of libtorch_cuda.so ($ORIGIN → lib)`.
    pub loaded_by: Vec<Step>,
    /// Its own loader contract, when the plan has several lazy libraries (the plan's `contract` is
    /// then their union); absent for one, whose contract is the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
}

/// The lazy library's imports that one provider answers.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportGroup {
    /// Tree path of the file that defines them (the first in the lazy library's NEEDED closure,
    /// breadth-first as ld.so looks); else `weak (may stay unresolved)`,
    /// `system or external libraries` (the lazy library NEEDs a system library) or
    /// `unresolved in the tree`.
    pub provider: String,
    /// How many undefined dynamic symbols of the lazy library it answers (with several lazy
    /// libraries, added up over them).
    pub count: usize,
    /// Up to six of those symbols, demangled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<String>,
}

/// Why a library's registrations at load were not read: a check that needs them cannot pass
/// (`verify-variant` says "not checked" and fails unless told to accept it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NotRead {
    /// Why they were not read.
    pub reason: NotReadReason,
    /// The file's ELF machine (`PPC64`, `S390`, …).
    pub machine: String,
}

/// Why a file's registrations at load were not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NotReadReason {
    /// splitpkg does not decode this machine's code: it reads little-endian x86-64 and AArch64
    /// ([`crate::elf::Isa`]).
    CodeNotDecoded,
}

impl NotRead {
    /// Why `file`'s registrations were not read, when its code was to be read (it carries the
    /// payload, so the walk ran) and gave nothing.
    pub fn of(file: &crate::analysis::inspect::FileFacts) -> Option<NotRead> {
        file.load_time_imports.is_none().then(|| NotRead {
            reason: NotReadReason::CodeNotDecoded,
            machine: file.elf.machine.clone(),
        })
    }

    /// The reason in words, for check details and text reports.
    pub fn describe(&self) -> String {
        match self.reason {
            NotReadReason::CodeNotDecoded => format!(
                "splitpkg cannot read {} code (it reads x86-64 and AArch64)",
                self.machine
            ),
        }
    }
}

/// The loader ↔ lazy-library contract a replacement (nomagma) library must honour.
#[derive(Debug, Clone, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct Contract {
    /// Symbol names the loader stores next to the library name and the lazy library defines:
    /// looked up by name (`dlsym`) after loading.
    pub loader_lookups: Vec<String>,
    /// Symbols other core files import that only the lazy library defines.
    pub required_exports: Vec<String>,
    /// What the lazy library imports, by providing file.
    pub imports: Vec<ImportGroup>,
    /// The lazy library's strong exports on the core's side ([`crate::analysis::contract::provided_exports`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provided_exports: Vec<String>,
    /// Core objects and functions its code run at load refers to: its dispatch registrations
    /// ([`crate::analysis::contract::load_registrations`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_registrations: Vec<String>,
    /// Why `load_registrations` could not be read from the lazy library's code (then it is
    /// empty because nothing was read, not because nothing registers); absent when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_registrations_not_read: Option<NotRead>,
    /// Every dynamic symbol the lazy library defines (for `verify-variant`).
    #[serde(skip)]
    pub exports: Vec<String>,
    /// With several lazy libraries, whether this one's build in the tree carries the payload itself
    /// (defines it or NEEDs a payload library). One that does not (onnxruntime's providers_shared)
    /// is the same in both variants and is checked as the variant without the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carries_payload: Option<bool>,
}

/// The proof: the verdict, why, and the evidence it rests on.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Analysis {
    /// Whether the payload is confined to the lazy libraries.
    pub verdict: Verdict,
    /// Why the verdict is what it is, one sentence each.
    pub reasons: Vec<String>,
    /// For NOT CONFINED: up to 5 chains by which a root loads payload code (or a reference to it)
    /// at start-up, files holding payload code first.
    pub witnesses: Vec<Witness>,
    /// Every lazy library `--lazy` selected, sorted by path (none, one, or several).
    pub lazy_libraries: Vec<LazyLibrary>,
    /// Every file of the tree that holds payload code, and every payload library requested but
    /// missing.
    pub payload: Vec<PayloadFile>,
    /// What the split must take care of beyond the verdict (state in core files, files not read,
    /// …).
    pub warnings: Vec<Warning>,
    /// What the core asks of the lazy library: the symbols it must export and the registrations it
    /// must make.
    pub contract: Contract,
    /// Tree file indices that hold payload code (for the planner).
    #[serde(skip)]
    pub payload_file_ids: Vec<usize>,
    /// Tree file indices of the lazy libraries, in the order of `lazy_libraries`.
    #[serde(skip)]
    pub lazy_file_ids: Vec<usize>,
    /// `--lazy` globs that selected no file (a command-line mistake the pipeline refuses).
    #[serde(skip)]
    pub empty_globs: Vec<String>,
}

const MAX_WITNESSES: usize = 5;

/// The proof for the lazy libraries `lazy` selects (`--lazy`, exact names or globs; see
/// [`crate::analysis::lazy`]): with all of them cut out of the graph no root may reach payload code,
/// and each must be reached only lazily.
pub fn analyse<S: AsRef<str>>(ins: &Inspection, lazy: &[S]) -> Analysis {
    prove(ins, lazy).finish(ins)
}

/// An [`Analysis`] proved before the payload walks of the inspection ended: all of it but what
/// those walks add, the payload files' static estimates and the contract's load registrations.
/// `plan` proves beside the walks ([`crate::analysis::inspect::inspect_then`]): on torch 2.11
/// the proof and the walks are each ~2 ms of work, which ran one after the other.
pub struct Proved {
    analysis: Analysis,
    /// The core files of each lazy library (in `lazy_file_ids` order): where its load-time
    /// code's imports must be defined to count as registrations.
    core_files: Vec<Vec<usize>>,
}

impl Proved {
    /// The analysis, with what the walks found in `ins` (the inspection proved, now complete).
    pub fn finish(mut self, ins: &Inspection) -> Analysis {
        let a = &mut self.analysis;
        for (p, &f) in a.payload.iter_mut().zip(&a.payload_file_ids) {
            p.estimate = ins.files[f].payload.estimate.clone();
        }
        let each: Vec<(Vec<String>, Option<NotRead>)> =
            (a.lazy_file_ids.iter().zip(&self.core_files))
                .map(|(&lf, core)| {
                    let core_defines = |n: &str| core_define(ins, core, &Lookup::new(n));
                    let file = &ins.files[lf];
                    // Only a file that carries the payload is walked (see `FileFacts`).
                    let unread = (file.carries_payload(&ins.spec))
                        .then(|| NotRead::of(file))
                        .flatten();
                    let found = crate::analysis::exports::load_registrations(file, &core_defines);
                    (found, unread)
                })
                .collect();
        match each.as_slice() {
            [] => {}
            [(one, unread)] => {
                a.contract.load_registrations = one.clone();
                a.contract.load_registrations_not_read = unread.clone();
            }
            several => {
                for (l, (r, unread)) in a.lazy_libraries.iter_mut().zip(several) {
                    if let Some(c) = &mut l.contract {
                        c.load_registrations = r.clone();
                        c.load_registrations_not_read = unread.clone();
                    }
                }
                a.contract.load_registrations = union(several.iter().flat_map(|(r, _)| r));
                a.contract.load_registrations_not_read =
                    several.iter().find_map(|(_, unread)| unread.clone());
            }
        }
        self.analysis
    }
}

/// [`analyse`] without what the inspection's payload walks add ([`Proved::finish`] adds it): it
/// reads neither `payload.estimate` nor `load_time_imports`.
pub fn prove<S: AsRef<str>>(ins: &Inspection, lazy: &[S]) -> Proved {
    let g = &ins.graph;
    let lazy_label = lazy
        .iter()
        .map(|s| s.as_ref())
        .collect::<Vec<_>>()
        .join(", ");

    let selection = crate::analysis::lazy::select(ins, lazy);
    let mut reasons = selection.reasons.clone();
    let (lazy_files, empty_globs) = (selection.files, selection.empty_globs);
    let cut: HashSet<usize> = lazy_files
        .iter()
        .filter_map(|&f| g.node_of_file(f))
        .collect();
    let payload = PayloadNodes::find(ins);
    let referencing: Vec<usize> = ins
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.payload.referenced.is_empty() && !f.payload.holds_code())
        .map(|(i, _)| i)
        .collect();

    // Reachability with the lazy libraries cut out: anything payload-related reached here is exposed.
    let (outside, parent) = reach_without(g, &cut);
    let proof = ProofState {
        ins,
        lazy_files,
        cut,
        outside,
        parent,
        payload,
        referencing,
    };
    let mut witnesses = proof.exposure_witnesses();
    let (mut lazy_libraries, eager) = proof.lazy_libraries();
    // Those witnesses come first, in path order.
    for w in eager.into_iter().rev() {
        witnesses.insert(0, w);
    }
    let verdict = proof.verdict(&witnesses, &lazy_libraries, &lazy_label, &mut reasons);

    let built_with = !proof.payload.files.is_empty() || config_names_payload(ins);
    let mut warnings = glue_warnings(ins, &proof.outside, &proof.cut, built_with);
    warnings.extend(crate::analysis::declared::note_warnings(ins));
    // Each lazy library's core files, once: its contract and `Proved::finish` both ask them.
    let core_files: Vec<Vec<usize>> = (proof.lazy_files.iter())
        .map(|&lf| core_files(ins, lf, &proof.outside))
        .collect();
    let contract = proof.contract(&mut lazy_libraries, &core_files);
    let ProofState {
        lazy_files,
        payload,
        ..
    } = proof;
    let analysis = Analysis {
        verdict,
        reasons,
        witnesses,
        lazy_libraries,
        payload: payload.files,
        warnings,
        contract,
        payload_file_ids: payload.file_ids,
        lazy_file_ids: lazy_files,
        empty_globs,
    };
    Proved {
        analysis,
        core_files,
    }
}

/// Payload nodes: files holding payload code, and payload libraries requested but not in the tree.
struct PayloadNodes {
    files: Vec<PayloadFile>,
    nodes: Vec<usize>,
    /// Tree file indices of the files among them.
    file_ids: Vec<usize>,
}

impl PayloadNodes {
    fn find(ins: &Inspection) -> Self {
        let g = &ins.graph;
        let cuda = crate::fatbin::cuda_major_from_needed(
            ins.files
                .iter()
                .flat_map(|f| f.elf.needed.iter().map(String::as_str)),
        )
        .map(|r| r.0);
        let mut files = Vec::new();
        let mut nodes: Vec<usize> = Vec::new();
        let mut file_ids = Vec::new();
        for (i, f) in ins.files.iter().enumerate() {
            if !f.payload.holds_code() {
                continue;
            }
            let node = g.node_of_file(i).expect("every file has a node");
            nodes.push(node);
            file_ids.push(i);
            let mut symbols = f.payload.defined.samples.clone();
            symbols.extend(f.payload.defined_hidden.samples.iter().cloned());
            symbols.truncate(8);
            files.push(PayloadFile {
                path: f.path.clone(),
                form: if f.payload.library {
                    PayloadForm::Library
                } else {
                    PayloadForm::Static
                },
                reach: g.nodes[node].reach,
                size: Some(f.size),
                estimate: f.payload.estimate.clone(),
                symbols,
                provider: None,
            });
        }
        for n in &g.nodes {
            if n.kind == NodeKind::External && ins.spec.is_payload_library(&n.name) {
                nodes.push(n.id);
                files.push(PayloadFile {
                    path: n.name.clone(),
                    form: PayloadForm::External,
                    reach: n.reach,
                    size: None,
                    estimate: None,
                    symbols: Vec::new(),
                    provider: crate::analysis::providers::lookup(&n.name, cuda),
                });
            }
        }
        PayloadNodes {
            files,
            nodes,
            file_ids,
        }
    }
}

/// What the steps of the proof share: the lazy libraries cut out of the graph, what the roots
/// reach without them, and where the payload is.
struct ProofState<'a> {
    ins: &'a Inspection,
    /// Tree file indices of the lazy libraries, sorted by path.
    lazy_files: Vec<usize>,
    /// Their graph nodes.
    cut: HashSet<usize>,
    /// Nodes the roots reach with `cut` removed, and the edge each was first reached by.
    outside: HashSet<usize>,
    parent: HashMap<usize, usize>,
    payload: PayloadNodes,
    /// Files that reference payload symbols without holding payload code.
    referencing: Vec<usize>,
}

impl ProofState<'_> {
    /// Shortest paths from a root to payload code (or a reference to it) that avoid the lazy
    /// libraries.
    fn exposure_witnesses(&self) -> Vec<Witness> {
        let g = &self.ins.graph;
        let (outside, cut) = (&self.outside, &self.cut);
        let mut exposed: Vec<usize> = self
            .payload
            .nodes
            .iter()
            .copied()
            .filter(|n| outside.contains(n) && !cut.contains(n))
            .collect();
        for &f in &self.referencing {
            let n = g.node_of_file(f).unwrap();
            if outside.contains(&n) && !cut.contains(&n) {
                exposed.push(n);
            }
        }
        // Files holding payload code make the clearest witnesses; mere references come after them.
        let references_only = |n: usize| {
            g.nodes[n]
                .file
                .is_some_and(|f| !self.ins.files[f].payload.holds_code())
        };
        exposed.sort_by_key(|&n| (references_only(n), path_to(g, &self.parent, n).len(), n));
        exposed.dedup();
        let mut witnesses = Vec::new();
        for &n in exposed.iter().take(MAX_WITNESSES) {
            let steps = path_to(g, &self.parent, n);
            let reason = self.witness_end(n).unwrap_or_default();
            witnesses.push(make_witness(g, steps, reason, n));
        }
        witnesses
    }

    /// What is at the end of a witness path: the payload library, a payload symbol it defines or
    /// references, or the payload library it needs from outside the tree.
    fn witness_end(&self, node: usize) -> Option<String> {
        let n = &self.ins.graph.nodes[node];
        if let Some(fi) = n.file {
            let f = &self.ins.files[fi];
            if f.payload.library {
                return Some(format!("is payload library {}", Tree::file_name(&f.path)));
            }
            if let Some(s) = f.payload.defined.samples.first().or(f
                .payload
                .defined_hidden
                .samples
                .first())
            {
                return Some(format!("defines {s}"));
            }
            if let Some(s) = f.payload.referenced.samples.first() {
                return Some(format!("references {s}"));
            }
            None
        } else if self.ins.spec.is_payload_library(&n.name) {
            Some(format!(
                "needs payload library {} (not in the tree)",
                n.name
            ))
        } else {
            None
        }
    }

    /// Each lazy library must be reached only lazily: the libraries with what loads them, and a
    /// witness for each that loads at start-up while it carries the payload.
    fn lazy_libraries(&self) -> (Vec<LazyLibrary>, Vec<Witness>) {
        let (ins, g) = (self.ins, &self.ins.graph);
        let mut lazy_libraries = Vec::new();
        let mut eager = Vec::new();
        for &lf in &self.lazy_files {
            let Some(ln) = g.node_of_file(lf) else {
                continue;
            };
            let node = &g.nodes[ln];
            if node.reach == Reach::Eager {
                let payload_nodes = &self.payload.nodes;
                let holds = payload_nodes.contains(&ln) || reaches_payload(g, ln, payload_nodes);
                if holds {
                    eager.push(eager_witness(g, ln));
                }
            }
            lazy_libraries.push(LazyLibrary {
                path: ins.files[lf].path.clone(),
                size: ins.files[lf].size,
                reach: node.reach,
                loaded_by: loaded_by(g, ln),
                contract: None,
            });
        }
        (lazy_libraries, eager)
    }

    /// The verdict, with the reasons it adds.
    fn verdict(
        &self,
        witnesses: &[Witness],
        lazy_libraries: &[LazyLibrary],
        lazy_label: &str,
        reasons: &mut Vec<String>,
    ) -> Verdict {
        let spec = &self.ins.spec;
        if self.payload.files.is_empty() && self.referencing.is_empty() {
            reasons.push(format!(
                "no {} code, library or reference found in the tree",
                spec.name
            ));
            Verdict::NotPresent
        } else if !witnesses.is_empty() {
            if self.lazy_files.is_empty() {
                reasons.push(format!(
                    "no lazy library named {lazy_label} in the tree: {} is loaded eagerly",
                    spec.name
                ));
            }
            Verdict::NotConfined
        } else if !lazy_libraries.is_empty() {
            for l in lazy_libraries.iter().filter(|l| l.loaded_by.is_empty()) {
                reasons.push(format!(
                    "{} is never loaded: no loader in the tree names it",
                    l.path
                ));
            }
            match lazy_libraries {
                [one] => reasons.push(format!(
                    "every path from a root to {} code crosses a lazy edge into {}, which nothing loads eagerly",
                    spec.name, one.path
                )),
                several => reasons.push(format!(
                    "every path from a root to {} code crosses a lazy edge into one of {} lazy libraries ({}), none of which anything loads eagerly",
                    spec.name,
                    several.len(),
                    several.iter().map(|l| l.path.as_str()).collect::<Vec<_>>().join(", ")
                )),
            }
            Verdict::Confined
        } else {
            reasons.push(format!("no lazy library named {lazy_label} in the tree"));
            Verdict::NotConfined
        }
    }

    /// The loader contract: the one lazy library's, or the union of several (each library then
    /// keeps its own in `lazy_libraries`).
    /// `core_files`: each lazy library's, in `lazy_files` order.
    fn contract(&self, lazy_libraries: &mut [LazyLibrary], core_files: &[Vec<usize>]) -> Contract {
        let ins = self.ins;
        match self.lazy_files.as_slice() {
            [] => Contract::default(),
            [one] => contract(ins, *one, &core_files[0]),
            several => {
                let each: Vec<Contract> = (several.iter().zip(core_files))
                    .map(|(&lf, core)| contract(ins, lf, core))
                    .collect();
                for ((l, c), &lf) in lazy_libraries.iter_mut().zip(&each).zip(several) {
                    let f = &ins.files[lf];
                    let carries = f.carries_payload(&ins.spec);
                    l.contract = Some(Contract {
                        carries_payload: Some(carries),
                        ..c.clone()
                    });
                }
                merge_contracts(&each)
            }
        }
    }
}

/// The lazy edges into node `ln`, one step per loader and kind: the graph keeps an edge per way a
/// file was found (each process has its own search path), but the loader is the same file; the
/// first process's resolution is the one shown (ld.so's first loader wins).
fn loaded_by(g: &LoadGraph, ln: usize) -> Vec<Step> {
    let mut loaded_by: Vec<Step> = Vec::new();
    for st in g
        .in_edges(ln)
        .filter(|e| e.kind.is_lazy())
        .map(|e| step(g, e))
    {
        if !loaded_by
            .iter()
            .any(|o| o.from == st.from && o.kind == st.kind)
        {
            loaded_by.push(st);
        }
    }
    loaded_by
}

/// The witness for a lazy library (node `ln`) that loads at start-up.
fn eager_witness(g: &LoadGraph, ln: usize) -> Witness {
    let node = &g.nodes[ln];
    let steps = g.eager_path(ln);
    let reason = if node.root.is_some() && steps.is_empty() {
        format!(
            "{} is loaded at start-up: nothing in the tree NEEDs or names it, so something outside may load it",
            Tree::file_name(&node.name)
        )
    } else {
        "the lazy library is NEEDed, so it loads at start-up".to_string()
    };
    make_witness(g, steps.into_iter().cloned().collect(), reason, ln)
}

/// The contract of several lazy libraries as one: every name any of them must export or is looked
/// up by, and their imports by provider.
fn merge_contracts(each: &[Contract]) -> Contract {
    let union = |f: &dyn Fn(&Contract) -> &Vec<String>| union(each.iter().flat_map(f));
    let mut groups: BTreeMap<String, ImportGroup> = BTreeMap::new();
    for g in each.iter().flat_map(|c| c.imports.iter()) {
        let e = groups.entry(g.provider.clone()).or_insert(ImportGroup {
            provider: g.provider.clone(),
            count: 0,
            samples: Vec::new(),
        });
        e.count += g.count;
        for s in &g.samples {
            if e.samples.len() < 6 && !e.samples.contains(s) {
                e.samples.push(s.clone());
            }
        }
    }
    let mut imports: Vec<ImportGroup> = groups.into_values().collect();
    imports.sort_by(|a, b| b.count.cmp(&a.count).then(a.provider.cmp(&b.provider)));
    Contract {
        loader_lookups: union(&|c| &c.loader_lookups),
        required_exports: union(&|c| &c.required_exports),
        imports,
        provided_exports: union(&|c| &c.provided_exports),
        load_registrations: union(&|c| &c.load_registrations),
        load_registrations_not_read: None,
        exports: union(&|c| &c.exports),
        carries_payload: None,
    }
}

/// The names, sorted, each once.
fn union<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = names.cloned().collect();
    v.sort();
    v.dedup();
    v
}

/// BFS over every edge from every root, never entering `cut`. Returns the reached set and parents.
fn reach_without(g: &LoadGraph, cut: &HashSet<usize>) -> (HashSet<usize>, HashMap<usize, usize>) {
    let mut seen = HashSet::new();
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut q = VecDeque::new();
    let mut roots: Vec<usize> = g
        .nodes
        .iter()
        .filter(|n| n.root.is_some() && !cut.contains(&n.id))
        .map(|n| n.id)
        .collect();
    roots.sort_by_key(|&r| (g.nodes[r].root, r));
    for r in roots {
        seen.insert(r);
        q.push_back(r);
    }
    let mut adj: HashMap<usize, Vec<&Edge>> = HashMap::new();
    for e in &g.edges {
        adj.entry(e.from).or_default().push(e);
    }
    while let Some(n) = q.pop_front() {
        for e in adj.get(&n).into_iter().flatten() {
            if cut.contains(&e.to) || !seen.insert(e.to) {
                continue;
            }
            parent.insert(e.to, e.id);
            q.push_back(e.to);
        }
    }
    (seen, parent)
}

fn reaches_payload(g: &LoadGraph, from: usize, payload: &[usize]) -> bool {
    let mut seen = HashSet::from([from]);
    let mut q = VecDeque::from([from]);
    while let Some(n) = q.pop_front() {
        if payload.contains(&n) {
            return true;
        }
        for e in g.out_edges(n) {
            if seen.insert(e.to) {
                q.push_back(e.to);
            }
        }
    }
    false
}

fn path_to(g: &LoadGraph, parent: &HashMap<usize, usize>, node: usize) -> Vec<Edge> {
    let mut out = Vec::new();
    let mut cur = node;
    while let Some(&e) = parent.get(&cur) {
        out.push(g.edges[e].clone());
        cur = g.edges[e].from;
        if out.len() > g.nodes.len() {
            break;
        }
    }
    out.reverse();
    out
}

fn step(g: &LoadGraph, e: &Edge) -> Step {
    Step {
        from: g.nodes[e.from].name.clone(),
        to: g.nodes[e.to].name.clone(),
        name: e.name.clone(),
        kind: e.kind,
        how: e.how_text(),
        declared: e.declared.clone(),
    }
}

fn make_witness(g: &LoadGraph, edges: Vec<Edge>, reason: String, end: usize) -> Witness {
    let steps: Vec<Step> = edges.iter().map(|e| step(g, e)).collect();
    let mut summary = String::new();
    if let Some(first) = edges.first() {
        summary.push_str(Tree::file_name(&g.nodes[first.from].name));
        for e in &edges {
            let label = match e.kind {
                EdgeKind::Needed => "NEEDED",
                EdgeKind::Lazy => "lazy",
                EdgeKind::DlopenNote => "dlopen note",
            };
            summary.push_str(&format!(" → {} ({label})", Tree::file_name(&e.name)));
        }
    } else {
        summary.push_str(Tree::file_name(&g.nodes[end].name));
        summary.push_str(" (root)");
    }
    if !reason.is_empty() {
        summary.push_str(" → ");
        summary.push_str(&reason);
    }
    Witness {
        summary,
        steps,
        reason,
    }
}

/// Whether the build says it was compiled with the payload: a read-only string of a file that is
/// a build-config line naming it (`  - Magma 2.8.0`, which PyTorch's `show_config` writes only
/// under `AT_MAGMA_ENABLED()`; torch 2.11's x86-64 libtorch_cuda.so has it, the aarch64 build
/// made without MAGMA does not). Read from the build, so a tree whose nomagma variant is
/// installed still shows the core was built with MAGMA.
fn config_names_payload(ins: &Inspection) -> bool {
    let lines: Vec<String> = (ins.spec.component_names().iter())
        .map(|n| format!("- {}", n.to_ascii_lowercase()))
        .collect();
    ins.files.iter().any(|f| {
        f.payload.mentions.samples.iter().any(|s| {
            let s = s.trim_start().to_ascii_lowercase();
            lines.iter().any(|l| {
                s.strip_prefix(l.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
            })
        })
    })
}

/// Payload-aware code outside the lazy library: it stays in the core, compiled with the payload on.
/// `built_with`: the build was compiled with the payload (it is in the tree, or a build-config
/// line of the core names it, [`config_names_payload`]). A build made without it (PyPI's torch
/// for aarch64) has the same symbols and texts, but they are what that build is, not a state a
/// split leaves stale: the warnings say so instead of claiming `has_magma` stays True.
fn glue_warnings(
    ins: &Inspection,
    outside: &HashSet<usize>,
    lazy_nodes: &HashSet<usize>,
    built_with: bool,
) -> Vec<Warning> {
    let g = &ins.graph;
    // Several components are named each (`cublas or cudnn`); one reads as before.
    let dep = &ins.spec.component_names().join(" or ");
    let mut out = Vec::new();
    for (i, f) in ins.files.iter().enumerate() {
        let node = g.node_of_file(i).unwrap();
        if lazy_nodes.contains(&node)
            || !outside.contains(&node)
            || f.payload.holds_code()
            || !f.payload.is_glue()
        {
            continue;
        }
        if !f.payload.glue_symbols.is_empty() {
            let torch_state = f
                .payload
                .glue_symbols
                .samples
                .iter()
                .any(|s| s.contains("hasMAGMA") || s.contains("set_magma_init_fn"));
            let consequence = if !built_with {
                format!(
                    "this build carries no {dep} (no {dep} code or library in the tree): these {dep}-aware functions \
                     are part of every build, and what the build reports about {dep} (torch.cuda.has_magma for \
                     MAGMA) is what it was compiled with; no split changes it"
                )
            } else if torch_state {
                CORE_STATE_CONSEQUENCE.to_string()
            } else {
                format!(
                    "this core file carries {dep}-aware code compiled with {dep} enabled; a no-{dep} variant of the lazy \
                     library alone will not change what it reports"
                )
            };
            out.push(Warning {
                file: f.path.clone(),
                what: format!(
                    "{} {dep}-aware dynamic symbol(s) outside the lazy library",
                    f.payload.glue_symbols.count
                ),
                consequence,
                examples: f.payload.glue_symbols.samples.clone(),
                kind: None,
            });
        }
        if !f.payload.mentions.is_empty() {
            let consequence = if built_with {
                format!(
                    "text compiled into the core still describes a build with {dep}; reports built from it (e.g. a \
                     build-config summary) will claim {dep} is present in the slim variant"
                )
            } else {
                format!(
                    "this build carries no {dep} (no {dep} code or library in the tree): the text is the build's own \
                     (messages, or a build-config summary of what it was compiled with), and no split changes it"
                )
            };
            out.push(Warning {
                file: f.path.clone(),
                what: format!(
                    "{} read-only string(s) name {dep} (build-config or messages)",
                    f.payload.mentions.count
                ),
                consequence,
                examples: f.payload.mentions.samples.clone(),
                kind: None,
            });
        }
    }
    out
}

fn contract(ins: &Inspection, lazy_file: usize, core_files: &[usize]) -> Contract {
    let g = &ins.graph;
    let lazy = &ins.files[lazy_file];
    let lazy_node = g.node_of_file(lazy_file).unwrap();

    // Names the loader keeps next to the library-name literal and the library defines.
    let mut loader_lookups = Vec::new();
    for e in g.in_edges(lazy_node).filter(|e| e.kind.is_lazy()) {
        let Some(fi) = g.nodes[e.from].file else {
            continue;
        };
        for lit in &ins.files[fi].elf.library_literals {
            if lit.full.as_deref().unwrap_or(&lit.name) != e.name {
                continue;
            }
            for n in &lit.neighbours {
                if lazy.elf.symbols.defines(n) && !loader_lookups.contains(n) {
                    loader_lookups.push(n.clone());
                }
            }
        }
    }
    loader_lookups.sort();

    // Symbols core files import that nothing but the lazy library defines.
    let core_defines = |n: &str| core_define(ins, core_files, &Lookup::new(n));
    // The four questions are independent and each reads different tables: answer them side by
    // side (the required-exports sweep alone reads ~11k import names spread over 30 MB of strings;
    // the provided exports walk every export of the lazy library).
    let ((required, provided), (imports, exports)) = rayon::join(
        || {
            rayon::join(
                || required_exports(ins, lazy, core_files),
                || crate::analysis::exports::provided_exports(lazy, &core_defines, &ins.spec),
            )
        },
        || {
            rayon::join(
                || import_groups(ins, g, lazy_file, lazy_node),
                || sorted_exports(lazy),
            )
        },
    );
    Contract {
        loader_lookups,
        required_exports: required,
        imports,
        provided_exports: provided,
        // The walk of the code run at load may still be running: see [`Proved::finish`].
        load_registrations: Vec::new(),
        load_registrations_not_read: None,
        exports,
        carries_payload: None,
    }
}

/// The files of the core of `lazy_file`: every other file the roots reach without the lazy
/// libraries (`outside`).
fn core_files(ins: &Inspection, lazy_file: usize, outside: &HashSet<usize>) -> Vec<usize> {
    (0..ins.files.len())
        .filter(|&i| i != lazy_file && outside.contains(&ins.graph.node_of_file(i).unwrap()))
        .collect()
}

/// Does any of `core_files` export the name?
fn core_define(ins: &Inspection, core_files: &[usize], name: &Lookup<'_>) -> bool {
    core_files
        .iter()
        .any(|&c| ins.files[c].elf.symbols.defines_lookup(name))
}

/// Symbols core files import that nothing but the lazy library defines.
fn required_exports(
    ins: &Inspection,
    lazy: &crate::analysis::inspect::FileFacts,
    core_files: &[usize],
) -> Vec<String> {
    use rayon::prelude::*;
    let lazy_defines = DefinedPrints::new(&lazy.elf.symbols);
    let mut required: Vec<String> = core_files
        .par_iter()
        .with_max_len(1)
        .flat_map_iter(|&i| {
            ins.files[i]
                .elf
                .symbols
                .imports_defined_by(&lazy_defines)
                .filter(|n| !core_define(ins, core_files, &Lookup::new(n)))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    required.sort();
    required.dedup();
    required
}

/// The lazy library's imports, attributed to the first provider in its NEEDED closure (ld.so's
/// breadth-first lookup order for the library's local scope).
fn import_groups(
    ins: &Inspection,
    g: &LoadGraph,
    lazy_file: usize,
    lazy_node: usize,
) -> Vec<ImportGroup> {
    let lazy = &ins.files[lazy_file];
    let order = needed_closure(g, lazy_node);
    let providers: Vec<usize> = order
        .iter()
        .filter_map(|&n| g.nodes[n].file)
        .filter(|&f| f != lazy_file)
        .collect();
    let system_needed = lazy
        .elf
        .needed
        .iter()
        .any(|n| crate::analysis::graph::system_group(n).is_some());
    let mut groups: BTreeMap<String, ImportGroup> = BTreeMap::new();
    for (name, bind) in lazy.elf.symbols.undefined_names() {
        let lookup = Lookup::new(name);
        let provider = providers
            .iter()
            .find(|&&f| ins.files[f].elf.symbols.defines_lookup(&lookup))
            .map(|&f| ins.files[f].path.clone())
            .unwrap_or_else(|| {
                if bind == goblin::elf::sym::STB_WEAK {
                    "weak (may stay unresolved)".to_string()
                } else if system_needed {
                    "system or external libraries".to_string()
                } else {
                    "unresolved in the tree".to_string()
                }
            });
        let g = groups.entry(provider.clone()).or_insert(ImportGroup {
            provider,
            count: 0,
            samples: Vec::new(),
        });
        g.count += 1;
        if g.samples.len() < 6 {
            g.samples.push(demangle(name));
        }
    }
    let mut imports: Vec<ImportGroup> = groups.into_values().collect();
    imports.sort_by(|a, b| b.count.cmp(&a.count).then(a.provider.cmp(&b.provider)));
    imports
}

/// Every name the lazy library exports, sorted.
fn sorted_exports(lazy: &crate::analysis::inspect::FileFacts) -> Vec<String> {
    let mut exports: Vec<&str> = lazy.elf.symbols.defined_names().collect();
    exports.sort_unstable();
    exports.dedup();
    exports.into_iter().map(str::to_string).collect()
}

/// Nodes reachable from `from` over NEEDED edges, breadth-first, `from` first.
fn needed_closure(g: &LoadGraph, from: usize) -> Vec<usize> {
    let mut out = vec![from];
    let mut seen = HashSet::from([from]);
    let mut i = 0;
    while i < out.len() {
        let n = out[i];
        i += 1;
        for e in g.out_edges(n).filter(|e| e.kind == EdgeKind::Needed) {
            if seen.insert(e.to) {
                out.push(e.to);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The confinement rules on small gcc-built trees (see [`crate::analysis::testkit`]).
    use super::*;
    use crate::analysis::testkit::{
        LAZY, MAGMA, Scratch, conda_layout, loader, providers_layout, providers_loader,
        wheel_layout,
    };

    /// (from, to, kind) of each step: the path a witness walks.
    fn walk(w: &Witness) -> Vec<(&str, &str, EdgeKind)> {
        w.steps
            .iter()
            .map(|s| (s.from.as_str(), s.to.as_str(), s.kind))
            .collect()
    }

    fn form(p: &PayloadFile) -> serde_json::Value {
        serde_json::to_value(p.form).unwrap()
    }

    #[test]
    fn confined_when_the_payload_is_reached_only_through_the_lazy_edge() {
        let (_, a) = conda_layout().analyse();
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        assert_eq!(a.verdict.exit(), crate::Exit::Success);
        assert!(a.witnesses.is_empty());
        let lazy = &a.lazy_libraries[0];
        assert_eq!(
            (lazy.path.as_str(), lazy.reach),
            ("lib/libtorch_cuda_linalg.so", Reach::Lazy)
        );
        let loaders: Vec<(&str, EdgeKind)> = lazy
            .loaded_by
            .iter()
            .map(|s| (s.from.as_str(), s.kind))
            .collect();
        assert_eq!(loaders, vec![("lib/libtorch_cuda.so", EdgeKind::Lazy)]);
        // libmagma is a payload library, reached only after the lazy edge.
        let magma: Vec<(&str, serde_json::Value, Reach)> = a
            .payload
            .iter()
            .map(|p| (p.path.as_str(), form(p), p.reach))
            .collect();
        assert_eq!(
            magma,
            vec![(
                "lib/libmagma.so.2",
                serde_json::json!("library"),
                Reach::Lazy
            )]
        );
        assert!(
            a.reasons
                .iter()
                .any(|r| r.contains("crosses a lazy edge into lib/libtorch_cuda_linalg.so")),
            "{:?}",
            a.reasons
        );
        // The loader keeps `linalg_entry` next to the library name, and the library defines it.
        assert_eq!(a.contract.loader_lookups, vec!["linalg_entry"]);
        assert!(a.contract.exports.contains(&"linalg_entry".to_string()));
        let magma_imports = a
            .contract
            .imports
            .iter()
            .find(|g| g.provider == "lib/libmagma.so.2")
            .expect("imports from libmagma");
        assert_eq!(magma_imports.samples, vec!["magma_dgetrf_gpu"]);
    }

    #[test]
    fn static_payload_inside_the_lazy_library_is_confined() {
        let (_, a) = wheel_layout().analyse();
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        assert_eq!(a.payload.len(), 1);
        let p = &a.payload[0];
        assert_eq!(
            (p.path.as_str(), form(p), p.reach),
            (
                "torch/lib/libtorch_cuda_linalg.so",
                serde_json::json!("static"),
                Reach::Lazy
            )
        );
        for s in ["magma_dgetrf_gpu", "magmablas_dgemm"] {
            assert!(p.symbols.iter().any(|x| x == s), "{:?}", p.symbols);
        }
        let est = p.estimate.as_ref().expect("static payload is estimated");
        assert!(est.bytes > 0 && est.bytes < p.size.unwrap(), "{est:?}");
    }

    #[test]
    fn an_eager_edge_to_the_payload_is_refuted_with_the_path() {
        // An executable NEEDs libtorch_cuda.so, which NEEDs libmagma directly.
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda.so",
            &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
            &["lib/libtorch_cpu.so", "lib/libmagma.so.2"],
        )
        .exe(
            "bin/app",
            "extern int torch_cuda_linalg_call(int);\nint main(void) { return torch_cuda_linalg_call(1); }\n",
            &["lib/libtorch_cuda.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        assert_eq!(a.verdict.exit(), crate::Exit::No);
        let w = &a.witnesses[0];
        assert_eq!(
            walk(w),
            vec![
                ("bin/app", "lib/libtorch_cuda.so", EdgeKind::Needed),
                (
                    "lib/libtorch_cuda.so",
                    "lib/libmagma.so.2",
                    EdgeKind::Needed
                )
            ]
        );
        assert_eq!(w.reason, "is payload library libmagma.so.2");
        assert_eq!(
            w.summary,
            "app → libtorch_cuda.so (NEEDED) → libmagma.so.2 (NEEDED) → is payload library libmagma.so.2"
        );
        assert_eq!(a.payload[0].reach, Reach::Eager);
    }

    #[test]
    fn a_lazy_edge_that_bypasses_the_lazy_library_is_not_confinement() {
        // Loaded by name too, but by libtorch_cuda.so itself, not through the lazy library: the
        // rule counts every edge outside the lazy library, eager or lazy.
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda.so",
            &format!(
                "{}{}",
                loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
                loader("load_magma_directly", "libmagma.so.2", "magma_init")
            ),
            &["lib/libtorch_cpu.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        assert_eq!(
            walk(&a.witnesses[0]),
            vec![("lib/libtorch_cuda.so", "lib/libmagma.so.2", EdgeKind::Lazy)],
            "{:#?}",
            a.witnesses
        );
    }

    #[test]
    fn a_lazy_library_that_is_needed_loads_at_start_up() {
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda.so",
            &loader("torch_cuda_linalg_call", LAZY, "linalg_entry"),
            &["lib/libtorch_cpu.so", "lib/libtorch_cuda_linalg.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        assert_eq!(a.lazy_libraries[0].reach, Reach::Eager);
        let w = &a.witnesses[0];
        assert_eq!(
            w.reason,
            "the lazy library is NEEDed, so it loads at start-up"
        );
        assert_eq!(
            walk(w),
            vec![(
                "lib/libtorch_cuda.so",
                "lib/libtorch_cuda_linalg.so",
                EdgeKind::Needed
            )]
        );
        // Cut out the lazy library and libmagma is unreachable: it is the only witness.
        assert_eq!(a.witnesses.len(), 1, "{:#?}", a.witnesses);
    }

    #[test]
    fn a_lazy_library_nothing_names_is_a_root() {
        // No loader names the library: something outside may load it at start-up.
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda.so",
            "extern int torch_cpu_fn(int);\nint torch_cuda_fn(int x) { return torch_cpu_fn(x); }\n",
            &["lib/libtorch_cpu.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        let w = &a.witnesses[0];
        assert!(w.steps.is_empty());
        assert_eq!(
            w.reason,
            "libtorch_cuda_linalg.so is loaded at start-up: nothing in the tree NEEDs or names it, so something outside may load it"
        );
        assert_eq!(
            w.summary,
            format!("libtorch_cuda_linalg.so (root) → {}", w.reason)
        );
    }

    #[test]
    fn a_reference_in_an_eagerly_loaded_file_is_enough_to_refute() {
        // libtorch_cpu.so imports a MAGMA symbol (no libmagma NEEDed): whoever provides it, it
        // is bound at start-up.
        let mut s = conda_layout();
        s.lib("lib/libtorch_cpu.so", "extern int magma_dgetrf_gpu(int);\nint torch_cpu_fn(int x) { return magma_dgetrf_gpu(x); }\n", &[]);
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        let w = a
            .witnesses
            .iter()
            .find(|w| w.reason == "references magma_dgetrf_gpu")
            .expect("a reference witness");
        assert_eq!(w.steps.last().unwrap().to, "lib/libtorch_cpu.so");
        // Files holding payload code come first among witnesses; none is exposed here.
        assert_eq!(a.witnesses.len(), 1, "{:#?}", a.witnesses);
    }

    #[test]
    fn without_a_lazy_library_an_eager_payload_is_refuted() {
        let mut s = Scratch::new();
        s.lib("lib/libtorch_cuda.so", MAGMA, &[]);
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotConfined);
        assert!(a.lazy_libraries.is_empty());
        assert!(
            a.reasons.iter().any(|r| r == "no lazy library named libtorch_cuda_linalg.so in the tree: magma is loaded eagerly"),
            "{:?}",
            a.reasons
        );
        assert_eq!(a.witnesses[0].reason, "defines magma_dgetrf_gpu");
        assert!(
            a.contract.loader_lookups.is_empty()
                && a.contract.required_exports.is_empty()
                && a.contract.exports.is_empty()
        );
    }

    #[test]
    fn not_present_without_payload_code_libraries_or_references() {
        let mut s = Scratch::new();
        s.lib(
            "lib/libtorch_cpu.so",
            "int torch_cpu_fn(int x) { return x + 1; }\n",
            &[],
        )
        .lib(
            "lib/libtorch_cuda_linalg.so",
            "extern int torch_cpu_fn(int);\nint linalg_entry(int x) { return torch_cpu_fn(x); }\n",
            &["lib/libtorch_cpu.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::NotPresent);
        assert_eq!(a.verdict.exit(), crate::Exit::No);
        assert_eq!(a.verdict.label(), "NOT PRESENT");
        assert!(a.payload.is_empty() && a.witnesses.is_empty());
        assert_eq!(
            a.reasons,
            vec!["no magma code, library or reference found in the tree"]
        );
        // Another component's name gives another verdict on the same tree.
        let mut t = Scratch::new();
        t.lib(
            "lib/libfoo.so.1",
            "int foo_solve(int x) { return x; }\n",
            &[],
        );
        let ins = t.inspect("foo");
        assert_eq!(analyse(&ins, &[LAZY]).verdict, Verdict::NotConfined);
        assert_eq!(
            analyse(&t.inspect("magma"), &[LAZY]).verdict,
            Verdict::NotPresent
        );
    }

    #[test]
    fn a_payload_library_the_tree_lacks_is_external() {
        // The lazy library NEEDs libmagma.so.2 but another package ships it.
        let s = conda_layout();
        std::fs::remove_file(s.tree().join("lib/libmagma.so.2")).unwrap();
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        let ext: Vec<(&str, serde_json::Value, Option<u64>)> = a
            .payload
            .iter()
            .map(|p| (p.path.as_str(), form(p), p.size))
            .collect();
        assert_eq!(
            ext,
            vec![("libmagma.so.2", serde_json::json!("external"), None)]
        );
        // NEEDed by a core file instead, the missing library is a witness of its own.
        let mut s2 = Scratch::new();
        s2.lib("lib/libmagma.so.2", MAGMA, &[]).lib(
            "lib/libtorch_cpu.so",
            "int g(int x) { return x; }\n",
            &["lib/libmagma.so.2"],
        );
        std::fs::remove_file(s2.tree().join("lib/libmagma.so.2")).unwrap();
        let (_, b) = s2.analyse();
        assert_eq!(b.verdict, Verdict::NotConfined);
        assert_eq!(
            b.witnesses[0].reason,
            "needs payload library libmagma.so.2 (not in the tree)"
        );
    }

    #[test]
    fn glue_in_core_files_is_a_warning_not_a_refutation() {
        let mut s = conda_layout();
        let glue = "void set_magma_init_fn(void (*fn)(void)) __asm__(\"_ZN2at4cuda6detail17set_magma_init_fnEPFvvE\");\n\
                    void set_magma_init_fn(void (*fn)(void)) { (void)fn; }\n\
                    const char *torch_cuda_config(void) { return \"  - Magma 2.8.0\"; }\n";
        s.lib(
            "lib/libtorch_cuda.so",
            &format!(
                "{glue}{}",
                loader("torch_cuda_linalg_call", LAZY, "linalg_entry")
            ),
            &["lib/libtorch_cpu.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        let on_cuda: Vec<&Warning> = a
            .warnings
            .iter()
            .filter(|w| w.file == "lib/libtorch_cuda.so")
            .collect();
        assert_eq!(on_cuda.len(), 2, "{on_cuda:#?}");
        let sym = on_cuda
            .iter()
            .find(|w| !w.examples.is_empty() && w.examples[0].contains("set_magma_init_fn"))
            .expect("glue symbol");
        assert!(
            sym.consequence.contains("torch.cuda.has_magma stays True"),
            "{}",
            sym.consequence
        );
        let text = on_cuda
            .iter()
            .find(|w| w.what.contains("read-only string"))
            .expect("build-config text");
        assert!(
            text.examples.iter().any(|e| e.contains("Magma 2.8.0")),
            "{text:?}"
        );
        // The lazy library itself never warns: its MAGMA awareness is what the split is for.
        assert!(
            a.warnings
                .iter()
                .all(|w| w.file != "lib/libtorch_cuda_linalg.so")
        );
    }

    #[test]
    fn required_exports_are_what_only_the_lazy_library_defines() {
        let mut s = conda_layout();
        s.lib(
            "lib/libtorch_cuda_linalg.so",
            "extern int magma_dgetrf_gpu(int);\nint linalg_entry(int x) { return magma_dgetrf_gpu(x); }\n\
             int linalg_only(int x) { return x; }\nint torch_cpu_fn(int x) { return x; }\n",
            &["lib/libmagma.so.2"],
        );
        // libtorch_cuda.so imports linalg_only (only the lazy library has it) and torch_cpu_fn
        // (libtorch_cpu.so has it too).
        s.lib(
            "lib/libtorch_cuda.so",
            &format!(
                "extern int linalg_only(int);\nextern int torch_cpu_fn(int);\nint both(int x) {{ return linalg_only(x) + torch_cpu_fn(x); }}\n{}",
                loader("torch_cuda_linalg_call", LAZY, "linalg_entry")
            ),
            &["lib/libtorch_cpu.so"],
        );
        let (_, a) = s.analyse();
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        assert_eq!(a.contract.required_exports, vec!["linalg_only"]);
    }

    #[test]
    fn two_files_with_the_lazy_name_are_reported() {
        let mut s = conda_layout();
        s.lib(
            "lib/other/libtorch_cuda_linalg.so",
            "int other(int x) { return x; }\n",
            &[],
        );
        let (_, a) = s.analyse();
        assert!(
            a.reasons.iter().any(|r| r
                == "2 files are named libtorch_cuda_linalg.so; using lib/libtorch_cuda_linalg.so"),
            "{:?}",
            a.reasons
        );
    }

    #[test]
    fn two_lazy_libraries_sharing_a_payload_are_confined_and_one_alone_is_not() {
        let s = providers_layout();
        let ins = s.inspect("heavy");
        for lazy in [
            &["libfoo_providers_*.so"][..],
            &["libfoo_providers_a.so", "libfoo_providers_b.so"],
        ] {
            let a = analyse(&ins, lazy);
            assert_eq!(a.verdict, Verdict::Confined, "{lazy:?}: {:#?}", a.witnesses);
            let paths: Vec<(&str, Reach)> = a
                .lazy_libraries
                .iter()
                .map(|l| (l.path.as_str(), l.reach))
                .collect();
            assert_eq!(
                paths,
                vec![
                    ("lib/libfoo_providers_a.so", Reach::Lazy),
                    ("lib/libfoo_providers_b.so", Reach::Lazy)
                ]
            );
            assert_eq!(
                a.reasons.last().unwrap(),
                "every path from a root to heavy code crosses a lazy edge into one of 2 lazy libraries \
                 (lib/libfoo_providers_a.so, lib/libfoo_providers_b.so), none of which anything loads eagerly"
            );
            // Each library has its own contract; the plan's is their union.
            for l in &a.lazy_libraries {
                assert_eq!(
                    l.contract.as_ref().unwrap().loader_lookups,
                    vec!["provider_entry"],
                    "{}",
                    l.path
                );
            }
            assert_eq!(a.contract.loader_lookups, vec!["provider_entry"]);
        }
        // Either provider alone leaves the other's path open: the witness walks it.
        let a = analyse(&ins, &["libfoo_providers_a.so"]);
        assert_eq!(a.verdict, Verdict::NotConfined);
        assert_eq!(
            walk(&a.witnesses[0]),
            vec![
                ("bin/foo_run", "lib/libfoo_core.so", EdgeKind::Needed),
                (
                    "lib/libfoo_core.so",
                    "lib/libfoo_providers_b.so",
                    EdgeKind::Lazy
                ),
                (
                    "lib/libfoo_providers_b.so",
                    "lib/libheavy.so.1",
                    EdgeKind::Needed
                )
            ]
        );
        assert_eq!(a.witnesses[0].reason, "is payload library libheavy.so.1");
        assert!(
            a.contract.loader_lookups == vec!["provider_entry"]
                && a.lazy_libraries[0].contract.is_none(),
            "one library: the plan's contract"
        );
    }

    #[test]
    fn a_provider_a_core_file_needs_is_refuted_through_that_file() {
        let mut s = providers_layout();
        s.lib(
            "lib/libfoo_core.so",
            &providers_loader(),
            &["lib/libfoo_providers_b.so"],
        );
        let a = analyse(&s.inspect("heavy"), &["libfoo_providers_*.so"]);
        assert_eq!(a.verdict, Verdict::NotConfined);
        let w = &a.witnesses[0];
        assert_eq!(
            walk(w),
            vec![
                ("bin/foo_run", "lib/libfoo_core.so", EdgeKind::Needed),
                (
                    "lib/libfoo_core.so",
                    "lib/libfoo_providers_b.so",
                    EdgeKind::Needed
                )
            ]
        );
        assert_eq!(
            w.reason,
            "the lazy library is NEEDed, so it loads at start-up"
        );
        assert_eq!(
            w.summary,
            "foo_run → libfoo_core.so (NEEDED) → libfoo_providers_b.so (NEEDED) → the lazy library is NEEDed, so it loads at start-up"
        );
        assert_eq!(
            a.witnesses.len(),
            1,
            "libheavy is reached only through the providers: {:#?}",
            a.witnesses
        );
        let reach: Vec<Reach> = a.lazy_libraries.iter().map(|l| l.reach).collect();
        assert_eq!(reach, vec![Reach::Lazy, Reach::Eager]);
    }

    #[test]
    fn an_unmatched_name_among_several_is_a_note_and_an_external_payload_names_its_provider() {
        let mut s = providers_layout();
        // Provider a also NEEDs cuDNN and the CUDA 12 runtime, which other packages ship.
        s.lib(
            "lib/libcudnn.so.9",
            "int cudnnCreate(void) { return 0; }\n",
            &[],
        )
        .lib(
            "lib/libcudart.so.12",
            "int cudaFree(void *p) { (void)p; return 0; }\n",
            &[],
        )
        .lib(
            "lib/libfoo_providers_a.so",
            "extern int heavy_solve(int);\nint provider_entry(int x) { return heavy_solve(x); }\n",
            &[
                "lib/libheavy.so.1",
                "lib/libcudnn.so.9",
                "lib/libcudart.so.12",
            ],
        );
        std::fs::remove_file(s.tree().join("lib/libcudnn.so.9")).unwrap();
        std::fs::remove_file(s.tree().join("lib/libcudart.so.12")).unwrap();
        let ins = crate::analysis::inspect::inspect(
            &s.tree(),
            &crate::analysis::payload::PayloadSpec::for_deps(&["heavy", "cudnn"], &[]),
            &crate::progress::Progress::hidden(),
        )
        .unwrap();
        let a = analyse(&ins, &["libfoo_providers_*.so", "libfoo_providers_gpu.so"]);
        assert_eq!(a.verdict, Verdict::Confined, "{:#?}", a.witnesses);
        assert_eq!(
            a.reasons[0],
            "--lazy libfoo_providers_gpu.so: no file has this name or SONAME"
        );
        let cudnn = a
            .payload
            .iter()
            .find(|p| p.path == "libcudnn.so.9")
            .expect("cuDNN is payload");
        assert_eq!(
            (cudnn.form, cudnn.reach),
            (PayloadForm::External, Reach::Lazy)
        );
        let p = cudnn.provider.as_ref().expect("the table knows cuDNN");
        assert_eq!(
            (p.pip.as_deref(), p.conda.as_deref()),
            (Some("nvidia-cudnn-cu12"), Some("cudnn")),
            "CUDA 12 from libcudart.so.12"
        );
        assert!(
            a.payload
                .iter()
                .find(|p| p.path == "lib/libheavy.so.1")
                .unwrap()
                .provider
                .is_none()
        );
    }
}
