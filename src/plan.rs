//! The plan: which files go to which output, how big each is, and what a slim environment saves.
//!
//! Three outputs come out of a confined tree: the **core** (everything that loads at start-up or
//! does not depend on the payload), the **lazy** library with a payload and a no-payload variant,
//! and the **payload** closure (payload libraries in the tree plus whatever only they need), which
//! becomes optional. The plan is the one source of truth for `emit` and `pack`.
//!
//! The JSON form is versioned (`schema_version`) and described by `docs/plan.schema.json`.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::graph::{NodeKind, Reach};
use crate::inspect::Inspection;
use crate::payload::{Estimate, PayloadSpec};
use crate::tree::{EntryKind, PackageMeta, Resolve, TreeKind};
use crate::verdict::{Analysis, Contract, ImportGroup, LazyLibrary, PayloadFile, Verdict, Warning, Witness};

pub const SCHEMA_NAME: &str = "splitpkg-plan";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    pub schema_version: u32,
    pub tool: Tool,
    pub input: InputSummary,
    pub options: PlanOptions,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub witnesses: Vec<Witness>,
    pub lazy_library: Option<LazyLibrary>,
    pub payload: PayloadSummary,
    pub outputs: Vec<Output>,
    pub saving: Saving,
    pub warnings: Vec<Warning>,
    pub contract: ContractSummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InputSummary {
    pub path: String,
    pub kind: TreeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageMeta>,
    pub files: usize,
    pub elf_files: usize,
    pub bytes: u64,
    /// Major version of the CUDA runtime the tree NEEDs (`libcudart.so.13` → 13), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanOptions {
    pub lazy: String,
    pub dep: String,
    pub symbol_prefixes: Vec<String>,
    pub library_prefixes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PayloadSummary {
    pub files: Vec<PayloadFile>,
    /// Payload libraries the tree requests but does not contain (another package provides them).
    pub external: Vec<String>,
    /// Estimated payload bytes inside the tree.
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Core,
    Lazy,
    Payload,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Output {
    pub role: Role,
    /// Tree paths (files, hard links and symlinks), sorted.
    pub files: Vec<String>,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
    /// Payload libraries this output needs that are not in the tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Variant {
    /// `magma` / `nomagma` (the payload name, with and without `no`).
    pub name: String,
    pub with_payload: bool,
    /// Bytes of the lazy library in this variant: measured for the one in the tree, estimated otherwise.
    pub bytes: u64,
    pub measured: bool,
    pub how: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saving {
    /// Bytes a slim environment does not install, out of this tree.
    pub bytes: u64,
    pub percent_of_tree: f64,
    pub how: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContractSummary {
    pub loader_lookups: Vec<String>,
    pub required_exports: Vec<String>,
    pub imports: Vec<ImportGroup>,
    pub exports: usize,
}

impl From<&Contract> for ContractSummary {
    fn from(c: &Contract) -> Self {
        ContractSummary {
            loader_lookups: c.loader_lookups.clone(),
            required_exports: c.required_exports.clone(),
            imports: c.imports.clone(),
            exports: c.exports.len(),
        }
    }
}

pub fn variant_names(spec: &PayloadSpec) -> (String, String) {
    (spec.name.clone(), format!("no{}", spec.name))
}

pub fn make_plan(ins: &Inspection, analysis: &Analysis, lazy_name: &str) -> Plan {
    let tree = &ins.tree;
    let g = &ins.graph;
    let total = tree.total_file_bytes();

    let external: Vec<String> = analysis.payload.iter().filter(|p| p.form == "external").map(|p| p.path.clone()).collect();
    let payload_bytes: u64 = analysis.payload.iter().filter_map(|p| p.estimate.as_ref().map(|e| e.bytes)).sum();

    let mut outputs = Vec::new();
    let mut saving = Saving { bytes: 0, percent_of_tree: 0.0, how: "no split: the payload is not confined".into() };
    if analysis.verdict == Verdict::Confined
        && let Some(lazy_file) = analysis.lazy_file_id
    {
        // Payload libraries and what only they need.
        let payload_lib_nodes: HashSet<usize> = analysis
            .payload_file_ids
            .iter()
            .filter(|&&f| ins.files[f].payload.library)
            .filter_map(|&f| g.node_of_file(f))
            .chain(g.nodes.iter().filter(|n| n.kind == NodeKind::External && ins.spec.is_payload_library(&n.name)).map(|n| n.id))
            .collect();
        let needed_by_rest = reach_avoiding(ins, &payload_lib_nodes);
        let mut payload_files: HashSet<usize> = HashSet::new();
        let mut q: VecDeque<usize> = payload_lib_nodes.iter().copied().collect();
        let mut seen: HashSet<usize> = payload_lib_nodes.clone();
        while let Some(n) = q.pop_front() {
            if let Some(f) = g.nodes[n].file {
                payload_files.insert(f);
            }
            for e in g.out_edges(n) {
                if !needed_by_rest.contains(&e.to) && seen.insert(e.to) {
                    q.push_back(e.to);
                }
            }
        }

        // Assign every tree entry; symlinks and hard links follow what they point at.
        let entry_of_file: BTreeMap<usize, usize> =
            ins.files.iter().enumerate().filter_map(|(i, f)| tree.index_of(&f.path).map(|e| (e, i))).collect();
        let mut buckets: BTreeMap<Role, (Vec<String>, u64)> = BTreeMap::new();
        for (idx, e) in tree.entries.iter().enumerate() {
            let (target_entry, own_bytes) = match &e.kind {
                EntryKind::Dir => continue,
                EntryKind::File { size, hardlink_of, .. } => (hardlink_of.unwrap_or(idx), if hardlink_of.is_some() { 0 } else { *size }),
                EntryKind::Symlink { .. } => match tree.resolve(&e.path) {
                    Resolve::File(t) => (t, 0),
                    _ => (idx, 0),
                },
            };
            let role = match entry_of_file.get(&target_entry) {
                Some(&f) if f == lazy_file => Role::Lazy,
                Some(f) if payload_files.contains(f) => Role::Payload,
                _ => Role::Core,
            };
            let b = buckets.entry(role).or_default();
            b.0.push(e.path.clone());
            b.1 += own_bytes;
        }
        let lazy_facts = &ins.files[lazy_file];
        let static_estimate: Option<&Estimate> = lazy_facts.payload.estimate.as_ref().filter(|_| !lazy_facts.payload.library);
        let (with, without) = variant_names(&ins.spec);
        let nomagma_bytes = lazy_facts.size.saturating_sub(static_estimate.map(|e| e.bytes).unwrap_or(0));
        let variants = vec![
            Variant {
                name: with.clone(),
                with_payload: true,
                bytes: lazy_facts.size,
                measured: true,
                how: "the library in this tree".into(),
            },
            Variant {
                name: without.clone(),
                with_payload: false,
                bytes: nomagma_bytes,
                measured: false,
                how: match static_estimate {
                    Some(e) => format!("this library minus the estimated static {} ({} bytes: {})", ins.spec.name, e.bytes, e.method),
                    None => format!("same code without the {} dependency (it links {} dynamically)", ins.spec.name, ins.spec.name),
                },
            },
        ];
        for role in [Role::Core, Role::Lazy, Role::Payload] {
            let (files, bytes) = buckets.remove(&role).unwrap_or_default();
            if role == Role::Payload && files.is_empty() && external.is_empty() {
                continue;
            }
            outputs.push(Output {
                role,
                files,
                bytes,
                variants: if role == Role::Lazy { variants.clone() } else { Vec::new() },
                external: if role == Role::Payload { external.clone() } else { Vec::new() },
            });
        }
        let payload_out = outputs.iter().find(|o| o.role == Role::Payload).map(|o| o.bytes).unwrap_or(0);
        let lazy_delta = lazy_facts.size - nomagma_bytes;
        let bytes = payload_out + lazy_delta;
        saving = Saving {
            bytes,
            percent_of_tree: if total > 0 { (bytes as f64 * 10000.0 / total as f64).round() / 100.0 } else { 0.0 },
            how: format!(
                "{} payload-output bytes + {} estimated {} bytes inside the lazy library{}",
                payload_out,
                lazy_delta,
                ins.spec.name,
                if external.is_empty() { String::new() } else { format!("; plus the external package(s) providing {}", external.join(", ")) }
            ),
        };
    }

    Plan {
        schema: SCHEMA_NAME.to_string(),
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "splitpkg".to_string(), version: env!("CARGO_PKG_VERSION").to_string() },
        input: InputSummary {
            path: tree.source.display().to_string(),
            kind: tree.kind,
            package: tree.package.clone(),
            files: tree.entries.iter().filter(|e| !matches!(e.kind, EntryKind::Dir)).count(),
            elf_files: ins.files.len(),
            bytes: total,
            cuda_runtime: ins
                .files
                .iter()
                .flat_map(|f| f.elf.needed.iter())
                .filter_map(|n| n.strip_prefix("libcudart.so.").and_then(|v| v.split('.').next()?.parse().ok()))
                .max(),
        },
        options: PlanOptions {
            lazy: lazy_name.to_string(),
            dep: ins.spec.name.clone(),
            symbol_prefixes: ins.spec.symbol_prefixes.clone(),
            library_prefixes: ins.spec.dso_prefixes.clone(),
        },
        verdict: analysis.verdict,
        reasons: analysis.reasons.clone(),
        witnesses: analysis.witnesses.clone(),
        lazy_library: analysis.lazy_library.clone(),
        payload: PayloadSummary { files: analysis.payload.clone(), external, bytes: payload_bytes },
        outputs,
        saving,
        warnings: analysis.warnings.clone(),
        contract: ContractSummary::from(&analysis.contract),
    }
}

/// Nodes reachable from the roots over every edge without entering `avoid`.
fn reach_avoiding(ins: &Inspection, avoid: &HashSet<usize>) -> HashSet<usize> {
    let g = &ins.graph;
    let mut seen: HashSet<usize> = g.nodes.iter().filter(|n| n.root.is_some() && !avoid.contains(&n.id)).map(|n| n.id).collect();
    let mut q: VecDeque<usize> = seen.iter().copied().collect();
    while let Some(n) = q.pop_front() {
        for e in g.out_edges(n) {
            if !avoid.contains(&e.to) && seen.insert(e.to) {
                q.push_back(e.to);
            }
        }
    }
    // Files nothing reaches at all (e.g. unreferenced payload libraries) are not "needed by the rest".
    seen.retain(|&n| g.nodes[n].reach != Reach::Unreached || g.nodes[n].root.is_some());
    seen
}
