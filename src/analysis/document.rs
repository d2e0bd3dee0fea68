//! The analysis stage's own JSON document: `inspect --json` ([`InspectReport`]), the facts of an
//! [`Inspection`] as the types that hold them serialise.

use serde::{Deserialize, Serialize};

use crate::analysis::graph::{Edge, Node};
use crate::analysis::inspect::{FileFacts, Inspection};
use crate::analysis::payload::PayloadSpec;
use crate::input::{PackageMeta, TreeKind};

/// The `schema` of `inspect --json`.
pub const SCHEMA_NAME: &str = "splitpkg-inspect";
/// The `schema_version` this splitpkg writes.
pub const SCHEMA_VERSION: u32 = 1;

/// The document of `splitpkg inspect --json`: what was read, the payload it was read for, every
/// ELF file's facts and the load graph.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InspectReport {
    /// Which document this is: `splitpkg-inspect`.
    pub schema: String,
    /// The version of the inspect document's layout.
    pub schema_version: u32,
    /// The input as read.
    pub input: InspectedInput,
    /// The payload the files were scanned for (`--dep`).
    pub dep: PayloadSpec,
    /// Every ELF file of the tree, with what was read of it (with `--symbols`, `elf.symbols`
    /// lists every dynamic symbol).
    pub files: Vec<FileFacts>,
    /// The load graph's nodes, indexed by their `id`.
    pub nodes: Vec<Node>,
    /// The load graph's edges, naming nodes by their `id`.
    pub edges: Vec<Edge>,
}

/// The input of an inspection: where it was read from and what it held.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InspectedInput {
    /// The path given, as the tree was read from it.
    pub path: String,
    /// What kind of input it was.
    pub kind: TreeKind,
    /// The package's own metadata (dist-info or `info/index.json`); null when it has none.
    pub package: Option<PackageMeta>,
    /// How many entries the tree holds.
    pub entries: usize,
    /// The bytes of its regular files.
    pub bytes: u64,
    /// Things skipped on purpose (linker scripts), worth telling the user.
    pub notes: Vec<String>,
}

impl crate::document::Document for InspectReport {
    const SCHEMA: &'static str = SCHEMA_NAME;
    const VERSION: u32 = SCHEMA_VERSION;
    const READS: &'static [u32] = &[SCHEMA_VERSION];
    const WHAT: &'static str = "inspect report";
    const SCHEMA_FILE: &'static str = "inspect.schema.json";
    const TITLE: &'static str = "splitpkg inspect";
    const ABOUT: &'static str = "Output of `splitpkg inspect --json`: the facts of every ELF file of a tree and the load graph over them. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it.";
}

impl InspectReport {
    /// The document of `ins`; with `symbols`, each file's `elf.symbols` lists its dynamic symbols.
    pub fn new(ins: Inspection, symbols: bool) -> InspectReport {
        let Inspection {
            tree,
            mut files,
            graph,
            spec,
        } = ins;
        if symbols {
            for f in &mut files {
                f.elf.symbol_list = Some(f.elf.symbols.to_list());
            }
        }
        InspectReport {
            schema: SCHEMA_NAME.to_string(),
            schema_version: SCHEMA_VERSION,
            input: InspectedInput {
                path: tree.source.display().to_string(),
                kind: tree.kind,
                entries: tree.entries.len(),
                bytes: tree.total_file_bytes(),
                package: tree.package,
                notes: tree.notes,
            },
            dep: spec,
            files,
            nodes: graph.nodes,
            edges: graph.edges,
        }
    }
}
