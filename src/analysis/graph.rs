//! The load graph: which file loads which, eagerly (DT_NEEDED) or lazily (a library name passed to a
//! loader at run time), and *how* ld.so would find each one.
//!
//! Each root is run as its own process: its NEEDED entries are loaded breadth-first, as ld.so does.
//! A name already loaded (by file name or SONAME) is reused before any search; otherwise the
//! loader chain's DT_RPATH stack (the first object that loaded each file: ld.so's `l_loader`), then
//! `--ld-library-path`, then DT_RUNPATH, then the system directories (unless DF_1_NODEFLIB).
//! `$ORIGIN` is the directory an object was opened from (a symlink's, not its target's); candidates
//! of another ELF class or machine are skipped, as ld.so skips them. An absolute NEEDED path or
//! search-path entry outside a directory input is looked up where it points, and a file there is
//! reported as loaded from outside the tree (like a system library), not as missing. The search
//! depends on the process (an inherited DT_RPATH, what is already loaded), so an edge records the
//! roots whose processes took it, and one request may have several edges. Only after the eager
//! closure is complete are the lazy edges of the loaded files followed, and what they bring in is
//! marked as reached lazily. A node reached eagerly by any root is eager.
//!
//! Roots are the tree's executables (a program: only ld.so is loaded before its NEEDED entries)
//! and Python extension modules, plus every other shared library that nothing in the tree loads:
//! something outside the tree (ctypes, another package) may load it at start-up, so it is
//! conservatively treated as eager. Those are dlopened by a program outside the tree, which has
//! libc loaded already. Every library the tree does load is also run once on its own, as such an
//! outside program (or `ld.so --list LIB`) would load it: its own search path only. Those
//! processes add edges (their ids are in the edges' `roots`), never reach.

use std::collections::{BTreeMap, VecDeque};

// The model hashes paths, names and indices tens of thousands of times per tree; keys are the
// tree's own strings and small integers, so a fast non-keyed hash is enough (no order reaches
// any output: every listing is sorted or in the order the processes ran).
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde::{Deserialize, Serialize};

use crate::analysis::hwcaps;
use crate::elf::{DlopenEntry, ElfFacts};
use crate::input::{Resolve, Tree, TreeKind};

/// Libraries every Linux system provides: classified, not reported missing.
const SYSTEM_LIBRARIES: &[(&str, &[&str])] = &[
    (
        "glibc",
        &[
            "libc.so.6",
            "libm.so.6",
            "libdl.so.2",
            "libpthread.so.0",
            "librt.so.1",
            "libutil.so.1",
            "libresolv.so.2",
            "libanl.so.1",
            "libnsl.so.1",
            "libcrypt.so.1",
            "libmvec.so.1",
            "libBrokenLocale.so.1",
            "libthread_db.so.1",
            "ld-linux-x86-64.so.2",
            "ld-linux-aarch64.so.1",
            "ld-linux.so.2",
            "ld64.so.2",
            "ld-linux-armhf.so.3",
        ],
    ),
    ("gcc runtime", &["libstdc++.so.6", "libgcc_s.so.1"]),
    (
        "NVIDIA driver",
        &[
            "libcuda.so.1",
            "libcuda.so",
            "libnvidia-ml.so.1",
            "libnvidia-ml.so",
            "libnvcuvid.so.1",
            "libnvidia-encode.so.1",
        ],
    ),
];

/// A conda prefix's python carries DT_RPATH `$ORIGIN/../lib`: in a process that python starts, every
/// object without DT_RUNPATH also searches the prefix's `lib/` (ld.so tries the executable's
/// DT_RPATH after the loader chain's). Only that is modelled: ld.so has no default directory inside
/// a prefix, so a wheel's `lib/`, or a prefix's `lib/` for its own executables, is never searched.
const PREFIX_LIB: &str = "lib";

/// What the loader is given besides the files: `LD_LIBRARY_PATH`.
#[derive(Debug, Clone, Default)]
pub struct LoaderEnv {
    /// `LD_LIBRARY_PATH` entries, in order. Absolute ones are mapped into the tree when they point
    /// inside it (directory inputs); relative ones name tree directories.
    pub ld_library_path: Vec<String>,
}

/// The group a library name belongs to when every Linux system provides it (`glibc`, `gcc runtime`,
/// `NVIDIA driver`; any `libnss_*` is glibc's), or None.
pub fn system_group(name: &str) -> Option<&'static str> {
    if name.starts_with("libnss_") {
        return Some("glibc");
    }
    SYSTEM_LIBRARIES
        .iter()
        .find(|(_, names)| names.contains(&name))
        .map(|(g, _)| *g)
}

/// One ELF file of the tree as the graph sees it.
pub struct GraphInput<'a> {
    /// Its path inside the tree.
    pub path: &'a str,
    /// What the ELF reader found in it.
    pub elf: &'a ElfFacts,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord, Deserialize, schemars::JsonSchema,
)]
/// What a node of the load graph stands for.
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// An ELF file of the tree (index into the inputs).
    File,
    /// Classified system library (glibc, gcc runtime, NVIDIA driver).
    System,
    /// Not in the tree and not a system library: another package provides it, or nobody does.
    External,
}

/// How the processes started from the roots reach a node: `eager` (loaded at start-up), `lazy`
/// (only after a run-time load) or `unreached` (not loaded by any of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    /// Loaded at start-up by at least one root's process.
    Eager,
    /// Not loaded at start-up by any root's process, but loaded after a run-time load (a lazy
    /// edge).
    Lazy,
    /// Loaded by none of the roots' processes.
    Unreached,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
/// Why a file is a root: a process of its own is started from it.
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    /// An ELF executable (a program): only ld.so is loaded before its NEEDED entries.
    Executable,
    /// A Python extension module, imported (dlopened) by a python that has libc loaded already.
    PythonExtension,
    /// Nothing in the tree loads it; assumed to be loaded at start-up from outside.
    Unreferenced,
}

/// One node of the load graph: a file of the tree, or a library name requested that is not in it
/// (a system library, one another package provides, or one nobody does).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Node {
    /// The node's index in [`LoadGraph::nodes`]; edges name nodes by it.
    pub id: usize,
    /// Tree path for files, the requested name otherwise.
    pub name: String,
    /// A tree file, a system library or an external one.
    pub kind: NodeKind,
    /// For a tree file: its index into the graph's inputs; None for other nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<usize>,
    /// For a system library: its group ([`system_group`]); None otherwise. Borrowed from that
    /// list when built, owned when read back from a document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_group: Option<std::borrow::Cow<'static, str>>,
    /// Whether the roots' processes load it at start-up, only lazily, or not at all.
    pub reach: Reach,
    /// Why it is a root, when it is one; None for a file only loaded by others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<RootKind>,
    /// The edge through which BFS first reached this node eagerly (shortest eager path).
    #[serde(skip)]
    pub eager_parent: Option<usize>,
    /// The edge through which this node was first reached after crossing a lazy edge.
    #[serde(skip)]
    pub lazy_parent: Option<usize>,
}

/// How a file requests a library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    /// DT_NEEDED: loaded with the requester.
    Needed,
    /// A library-name literal in a file that imports a loader: loaded when that code runs.
    Lazy,
    /// Declared in the requester's `.note.dlopen` ELF note (UAPI.12); the edge carries the entry.
    DlopenNote,
}

impl EdgeKind {
    /// Whether the request is resolved at run time (a literal or a `.note.dlopen` entry) rather
    /// than at start-up (DT_NEEDED).
    pub fn is_lazy(self) -> bool {
        !matches!(self, EdgeKind::Needed)
    }
}

/// How ld.so would find (or fail to find) the requested name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "via", rename_all = "kebab-case")]
pub enum How {
    /// A DT_RPATH entry of `of` (the requester or one of the objects that loaded it).
    Rpath {
        /// The object whose DT_RPATH held the entry (tree path).
        of: String,
        /// The DT_RPATH entry as written (`$ORIGIN/../lib`).
        entry: String,
        /// The tree directory it expanded to (`""` for the tree's root).
        dir: String,
    },
    /// The requester's own DT_RUNPATH.
    Runpath {
        /// The DT_RUNPATH entry as written.
        entry: String,
        /// The tree directory it expanded to (`""` for the tree's root).
        dir: String,
    },
    /// An `LD_LIBRARY_PATH` entry (`--ld-library-path`).
    LdLibraryPath {
        /// The `--ld-library-path` entry as given.
        entry: String,
        /// The tree directory it names (`""` for the tree's root).
        dir: String,
    },
    /// A conda prefix's `lib/`, standing in for the DT_RPATH `$ORIGIN/../lib` of the prefix's python
    /// that loads this root from outside the tree (see [`PREFIX_LIB`]).
    TreeDefault {
        /// The prefix's library directory (`lib`).
        dir: String,
    },
    /// The NEEDED entry is a path (absolute: mapped into the tree when it points inside it).
    Path {
        /// The path as requested (a NEEDED entry or literal with a slash); it names a file of the
        /// tree.
        path: String,
    },
    /// A library with this soname (or file name) is already loaded in the process, so ld.so does
    /// not search: `by` is the object whose request loaded it there (the root, for the root
    /// itself), not the library.
    AlreadyLoaded {
        /// Tree path of the object whose request loaded the library into the process first.
        by: String,
    },
    /// Not on any search path, but a file of that name exists in the tree: ld.so would not find it
    /// without `LD_LIBRARY_PATH`.
    TreeElsewhere {
        /// The tree directory where a file of that name lies.
        dir: String,
    },
    /// A classified system library.
    System {
        /// The system library's group (`glibc`, `gcc runtime`, `NVIDIA driver`).
        group: String,
    },
    /// Loaded from outside the tree: an absolute NEEDED path, or an absolute search-path entry
    /// (`entry`), naming a file that exists there with the process's ELF class and machine. Only a
    /// directory input sits at a known place, so only there is this answered; as for a system
    /// library, what is loaded is whatever that file is on the machine that runs it.
    OutsideTree {
        /// The absolute path of the file on this machine.
        path: String,
        /// The absolute search-path entry that led there; absent when the request itself was that
        /// path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entry: Option<String>,
    },
    /// A system library ld.so will not load for this requester: it has DF_1_NODEFLIB, which rules
    /// out the default directories and the ld.so.cache entries in them, and nothing in the process
    /// loaded the library before.
    Nodeflib {
        /// The system library's group (`glibc`, `gcc runtime`, `NVIDIA driver`).
        group: String,
    },
    /// Not found. `tried` lists the directories searched; `outside` lists search-path entries that
    /// point outside the tree (e.g. `$ORIGIN/../../nvidia/cu13/lib`), which were not searched.
    NotFound {
        /// The tree directories searched, in order.
        tried: Vec<String>,
        /// Search-path entries pointing outside the tree, which were not searched.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outside: Vec<String>,
    },
}

impl How {
    /// One line for people: which search-path entry (and of which object) found it, or why it was
    /// not found.
    pub fn describe(&self) -> String {
        match self {
            How::Rpath { of, entry, dir } => {
                format!("rpath of {} ({entry} → {})", file_name(of), show_dir(dir))
            }
            How::Runpath { entry, dir } => format!("runpath ({entry} → {})", show_dir(dir)),
            How::LdLibraryPath { entry, dir } => {
                format!("LD_LIBRARY_PATH ({entry} → {})", show_dir(dir))
            }
            How::TreeDefault { dir } => format!(
                "prefix {}/ (its python's DT_RPATH $ORIGIN/../lib)",
                show_dir(dir)
            ),
            How::Path { path } => format!("by path {path}"),
            How::AlreadyLoaded { by } => format!("already loaded (by {})", file_name(by)),
            How::TreeElsewhere { dir } => {
                format!("NOT on the search path; only by name in {}", show_dir(dir))
            }
            How::System { group } => format!("system ({group})"),
            How::OutsideTree { path, .. } => format!("outside the tree ({path})"),
            How::Nodeflib { group } => {
                format!("NOT found: DF_1_NODEFLIB rules out the system dirs ({group})")
            }
            How::NotFound { outside, .. } if !outside.is_empty() => {
                format!(
                    "not found in the tree (external; search path leaves the tree: {})",
                    outside.join(", ")
                )
            }
            How::NotFound { .. } => "not found (external)".to_string(),
        }
    }
}

fn show_dir(d: &str) -> &str {
    if d.is_empty() { "." } else { d }
}

fn file_name(p: &str) -> &str {
    Tree::file_name(p)
}

/// One request of a library by a file: an edge of the load graph from the requester to the node it
/// resolved to.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Edge {
    /// The edge's index in [`LoadGraph::edges`].
    pub id: usize,
    /// Node id of the requesting file.
    pub from: usize,
    /// Node id of what the request resolved to.
    pub to: usize,
    /// The name as requested (NEEDED entry or literal).
    pub name: String,
    /// Needed at start-up, a library-name literal, or a `.note.dlopen` entry.
    pub kind: EdgeKind,
    /// How ld.so finds the name (the `via` tag says which way), or why it does not.
    pub how: How,
    /// Node ids of the roots whose processes resolved the request this way, and of the libraries
    /// whose own processes did (a library loaded on its own by an outside program).
    pub roots: Vec<usize>,
    /// For a [`EdgeKind::DlopenNote`] edge: the note's entry (every alternative, feature,
    /// description, priority). `name` is the alternative the ld.so model resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<DlopenEntry>,
    /// A declared edge whose name the requester also holds as a `dlopen` literal: declared and
    /// found agree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub literal_too: bool,
}

impl Edge {
    /// `how` for people: a declared edge says so before how ld.so finds it.
    pub fn how_text(&self) -> String {
        match &self.declared {
            Some(d) => format!(
                "{}; {}",
                declared_text(d, self.literal_too),
                self.how.describe()
            ),
            None => self.how.describe(),
        }
    }
}

/// `declared by .note.dlopen (feature linalg, required: "…"; also a literal)`.
pub fn declared_text(d: &DlopenEntry, literal_too: bool) -> String {
    let mut parts = Vec::new();
    if let Some(f) = &d.feature {
        parts.push(format!("feature {f}"));
    }
    parts.push(d.priority.as_str().to_string());
    if d.soname.len() > 1 {
        parts.push(format!("alternatives {}", d.soname.join(", ")));
    }
    if let Some(text) = &d.description {
        parts.push(format!("{text:?}"));
    }
    if literal_too {
        parts.push("also a dlopen literal".into());
    }
    format!("declared by .note.dlopen ({})", parts.join(", "))
}

/// One lazy request of a file: a literal, or a note entry's alternatives (most preferred first).
struct LazyRequest<'e> {
    names: Vec<String>,
    kind: EdgeKind,
    declared: Option<&'e DlopenEntry>,
    literal_too: bool,
}

/// Which file loads which: the nodes (files and the names they request) and the edges (requests),
/// as ld.so would resolve them for each root.
#[derive(Debug, Clone, Serialize)]
pub struct LoadGraph {
    /// Every node, indexed by its id.
    pub nodes: Vec<Node>,
    /// Every edge, indexed by its id.
    pub edges: Vec<Edge>,
    #[serde(skip)]
    by_file: HashMap<usize, usize>,
    #[serde(skip)]
    by_external: HashMap<String, usize>,
}

impl LoadGraph {
    /// The node of the tree file with input index `file`, if it is in the graph.
    pub fn node_of_file(&self, file: usize) -> Option<usize> {
        self.by_file.get(&file).copied()
    }

    /// The edges requested by `node`.
    pub fn out_edges(&self, node: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.from == node)
    }

    /// The edges that resolve to `node`.
    pub fn in_edges(&self, node: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.to == node)
    }

    /// The shortest eager path from a root to `node`, as edges in order.
    pub fn eager_path(&self, node: usize) -> Vec<&Edge> {
        self.path_via(node, |n| n.eager_parent)
    }

    /// The first path that reached `node` after a lazy edge: eager edges up to the loader, the lazy
    /// edge, then the edges from the lazily loaded library.
    pub fn lazy_path(&self, node: usize) -> Vec<&Edge> {
        self.path_via(node, |n| n.lazy_parent.or(n.eager_parent))
    }

    fn path_via(&self, node: usize, parent: impl Fn(&Node) -> Option<usize>) -> Vec<&Edge> {
        let mut out = Vec::new();
        let mut cur = node;
        let mut guard = 0;
        while let Some(e) = parent(&self.nodes[cur]) {
            out.push(&self.edges[e]);
            cur = self.edges[e].from;
            guard += 1;
            if guard > self.nodes.len() {
                break;
            }
        }
        out.reverse();
        out
    }

    /// Build the graph. `files` are the tree's ELF files; `tree` answers path lookups.
    pub fn build(
        tree: &Tree,
        files: &[GraphInput<'_>],
        is_payload_library: impl Fn(&str) -> bool,
    ) -> LoadGraph {
        Self::build_with(tree, files, is_payload_library, &LoaderEnv::default())
    }

    /// [`LoadGraph::build`] with the loader's environment.
    pub fn build_with(
        tree: &Tree,
        files: &[GraphInput<'_>],
        is_payload_library: impl Fn(&str) -> bool,
        env: &LoaderEnv,
    ) -> LoadGraph {
        let mut b = GraphBuilder::new(tree, files, env);
        let entry_roots: Vec<(usize, Start)> = files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                if f.elf.is_executable() {
                    Some((i, Start::Program(RootKind::Executable)))
                } else if f.elf.python_extension {
                    Some((i, Start::Dlopen(RootKind::PythonExtension)))
                } else {
                    None
                }
            })
            .collect();
        for (f, start) in entry_roots {
            b.run_process(f, start);
        }
        // Unreferenced libraries: first those nothing in the tree even names by its own search path
        // (true tops), then whatever is still unreached (cycles), in path order for determinism.
        let tentative = b.tentative_targets();
        let loadable = |f: &GraphInput<'_>| {
            matches!(f.elf.elf_type, crate::elf::ElfType::SharedLibrary)
                && !is_payload_library(Tree::file_name(f.path))
                && !f.elf.soname.as_deref().is_some_and(&is_payload_library)
        };
        for pass in 0..2 {
            for (i, f) in files.iter().enumerate() {
                let node = b.graph.by_file[&i];
                if b.graph.nodes[node].reach != Reach::Unreached || !loadable(f) {
                    continue;
                }
                if pass == 0 && tentative.contains_key(&i) {
                    continue;
                }
                b.run_process(i, Start::Dlopen(RootKind::Unreferenced));
            }
        }
        // Every other library as loaded on its own (see `Start::OnItsOwn`).
        for (i, f) in files.iter().enumerate() {
            if loadable(f)
                && !f.elf.is_executable()
                && b.graph.nodes[b.graph.by_file[&i]].root.is_none()
            {
                b.run_process(i, Start::OnItsOwn);
            }
        }
        b.graph
    }
}

struct GraphBuilder<'t, 'a> {
    tree: &'t Tree,
    files: &'t [GraphInput<'a>],
    graph: LoadGraph,
    /// (from node, name, kind, to node, how) → edge id: a request that several processes resolve the
    /// same way is one edge; resolved differently — another file, or the same file through another
    /// object's DT_RPATH (each process has its own loader chain) — it is several. Misses are one
    /// edge whatever directories each process tried (`how` is `None` in the key; the first
    /// process's list is kept).
    /// Keyed by (from, kind, to), then searched by name and how: the lookup builds no key (it ran
    /// for every NEEDED name in every process, ~730 times on torch 2.11).
    edge_index: HashMap<(usize, EdgeKind, usize), Vec<EdgeEntry>>,
    file_by_entry: HashMap<usize, usize>,
    /// Path lookups are repeated for every requester sharing an RPATH: remember them.
    lookups: std::cell::RefCell<HashMap<String, Option<usize>>>,
    /// The path a search-path probe looks up, built here rather than in a new string per probe.
    probe: std::cell::RefCell<String>,
    /// Search-path entries expanded per object and the directory it was opened from (`None`:
    /// outside the tree). torch's libraries carry ~20 RPATH entries each and name ~100 libraries:
    /// expand each entry once, not per name.
    /// Keyed by [`entry_key`] (object, origin, entry), built in `probe`'s buffer.
    expanded: std::cell::RefCell<HashMap<String, Dir>>,
    /// ELF class and machine of files outside a directory input that a search reached (`None`:
    /// not a loadable ELF file), read once each.
    outside_heads: std::cell::RefCell<HashMap<String, Option<(u8, String)>>>,
    /// Tree entries by file name, for the "found only elsewhere in the tree" diagnosis.
    by_name: HashMap<&'t str, Vec<usize>>,
    /// The tree's root as an absolute path (as given, and canonical) without the leading `/`:
    /// absolute search-path entries and NEEDED paths under it are inside the tree. Empty for
    /// archives, whose install location is unknown.
    root_abs: Vec<String>,
    /// `LD_LIBRARY_PATH` entries and the directory each names.
    ld_library_path: Vec<(String, Dir)>,
    /// A conda prefix: a conda package, or a directory with `conda-meta/` or
    /// `lib/python3.*/site-packages/` (see [`PREFIX_LIB`]).
    prefix: bool,
    /// Everything a search-path walk depends on besides requester and name (the process's ELF class
    /// and machine, whether a prefix python runs it, the directories the requester and the loader
    /// chain's DT_RPATH holders were opened from), interned.
    contexts: HashMap<Vec<(usize, String)>, usize>,
    /// (requester, context, name) → the walk's result, shared by every process with that context.
    walks: HashMap<(usize, usize), HashMap<String, std::rc::Rc<Walk>>>,
    /// Tree directories holding a hardware-capability subdirectory (`tls/`, `glibc-hwcaps/`, …):
    /// only these are searched through them (`hwcaps`), so no other directory pays the probes.
    hwcap_parents: HashSet<String>,
}

/// An edge of `Builder::edge_index`: its name, how it was resolved (`None` for a miss) and its id.
type EdgeEntry = (String, Option<How>, usize);

/// Where a search-path entry points. Shared strings: a directory is cloned into the list of
/// every walk that tries it (~3,800 probes on torch 2.11).
#[derive(Debug, Clone)]
enum Dir {
    /// A directory of the tree.
    Tree(std::rc::Rc<str>),
    /// An absolute directory outside a directory input: a real place on this machine.
    Abs(std::rc::Rc<str>),
    /// Outside the tree, nowhere known (an archive's `$ORIGIN/../..`, a relative entry).
    Unknown,
}

/// A file found in one directory.
enum Hit {
    /// Its tree directory and file.
    Tree(std::rc::Rc<str>, usize),
    /// Its absolute path outside the tree.
    Outside(String),
}

/// What a walk found.
enum Found {
    /// The file, how, and the tree path it was opened by.
    Tree(usize, How, String),
    /// A file outside the tree ([`How::OutsideTree`]).
    Outside(How),
}

/// The result of walking DT_RPATH, LD_LIBRARY_PATH and DT_RUNPATH for one name.
struct Walk {
    found: Option<Found>,
    tried: Vec<std::rc::Rc<str>>,
    outside: Vec<String>,
}

/// One process: what ld.so has loaded so far, and from where.
struct Process {
    /// The root file and its node.
    root: usize,
    root_node: usize,
    /// Started by a conda prefix's python, outside the tree (see [`PREFIX_LIB`]).
    prefix_python: bool,
    /// Whether what the process loads counts towards the nodes' reach (see [`Start::OnItsOwn`]).
    marks_reach: bool,
    /// Loaded objects by soname and by file name (what ld.so matches a request against).
    loaded: HashMap<String, usize>,
    /// System libraries loaded (and ld.so itself, always there).
    system_loaded: HashSet<String>,
    in_process: Vec<bool>,
    /// For each loaded file, the objects that loaded it, root first.
    chains: HashMap<usize, Vec<usize>>,
    /// The tree path each loaded file was opened by: its `$ORIGIN` is that path's directory.
    opened: HashMap<usize, String>,
    /// Each loaded file's search context (index into `Builder::contexts`).
    context: HashMap<usize, usize>,
}

/// How a process comes to load its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// A tree executable: the program itself. Only ld.so is there before its NEEDED entries are
    /// searched (so a DF_1_NODEFLIB program finds no libc).
    Program(RootKind),
    /// A library dlopened by a program outside the tree (a python extension, an unreferenced
    /// library). That program is dynamically linked, so libc is loaded already: ld.so matches a
    /// request for `libc.so.6` against it by SONAME before any search, DF_1_NODEFLIB or not. The
    /// program's own DT_RPATH is unknown, except a conda prefix's python's (see [`PREFIX_LIB`]).
    Dlopen(RootKind),
    /// A library the tree loads, dlopened on its own by an outside program as well (ctypes,
    /// `ld.so --list`, another package): its own search path, without the DT_RPATH its loaders
    /// in the tree lend it. Its edges are recorded for this process; the nodes' reach is left to
    /// the processes that load it from the tree.
    OnItsOwn,
}

impl Start {
    fn root_kind(self) -> Option<RootKind> {
        match self {
            Start::Program(k) | Start::Dlopen(k) => Some(k),
            Start::OnItsOwn => None,
        }
    }
}

impl Process {
    fn new(
        root: usize,
        root_node: usize,
        start: Start,
        prefix_python: bool,
        files: usize,
    ) -> Process {
        let mut system_loaded: HashSet<String> = SYSTEM_LIBRARIES[0]
            .1
            .iter()
            .filter(|n| n.starts_with("ld"))
            .map(|n| n.to_string())
            .collect();
        if !matches!(start, Start::Program(_)) {
            system_loaded.insert("libc.so.6".to_string());
        }
        Process {
            root,
            root_node,
            prefix_python,
            marks_reach: start != Start::OnItsOwn,
            loaded: HashMap::default(),
            system_loaded,
            in_process: vec![false; files],
            chains: HashMap::default(),
            opened: HashMap::default(),
            context: HashMap::default(),
        }
    }

    fn origin(&self, f: usize) -> &str {
        self.opened.get(&f).map(|p| Tree::parent(p)).unwrap_or("")
    }
}

impl<'t, 'a> GraphBuilder<'t, 'a> {
    fn new(tree: &'t Tree, files: &'t [GraphInput<'a>], env: &LoaderEnv) -> Self {
        let mut graph = LoadGraph {
            nodes: Vec::new(),
            edges: Vec::new(),
            by_file: HashMap::default(),
            by_external: HashMap::default(),
        };
        let mut file_by_entry = HashMap::default();
        for (i, f) in files.iter().enumerate() {
            let id = graph.nodes.len();
            graph.nodes.push(Node {
                id,
                name: f.path.to_string(),
                kind: NodeKind::File,
                file: Some(i),
                system_group: None,
                reach: Reach::Unreached,
                root: None,
                eager_parent: None,
                lazy_parent: None,
            });
            graph.by_file.insert(i, id);
            if let Some(e) = tree.index_of(f.path) {
                file_by_entry.insert(e, i);
            }
        }
        let mut by_name: HashMap<&'t str, Vec<usize>> = HashMap::default();
        let mut site_packages = false;
        for (i, e) in tree.entries.iter().enumerate() {
            if !matches!(e.kind, crate::input::EntryKind::Dir) {
                by_name.entry(Tree::file_name(&e.path)).or_default().push(i);
            }
            site_packages |= e
                .path
                .strip_prefix("lib/python3.")
                .and_then(|r| r.split_once('/'))
                .is_some_and(|(_, r)| r == "site-packages" || r.starts_with("site-packages/"));
        }
        let prefix = site_packages
            || matches!(tree.kind, TreeKind::Conda | TreeKind::TarBz2)
            || tree.index_of("conda-meta").is_some();
        let mut root_abs = Vec::new();
        if tree.kind == TreeKind::Directory {
            for p in [
                std::path::absolute(&tree.source).ok(),
                std::fs::canonicalize(&tree.source).ok(),
            ]
            .into_iter()
            .flatten()
            {
                if let Some(n) = p.to_str().and_then(normalize)
                    && !root_abs.contains(&n)
                {
                    root_abs.push(n);
                }
            }
        }
        let mut b = GraphBuilder {
            tree,
            files,
            graph,
            edge_index: HashMap::default(),
            file_by_entry,
            lookups: Default::default(),
            probe: Default::default(),
            expanded: Default::default(),
            outside_heads: Default::default(),
            by_name,
            root_abs,
            ld_library_path: Vec::new(),
            prefix,
            contexts: HashMap::default(),
            walks: HashMap::default(),
            hwcap_parents: hwcap_parents(tree),
        };
        // An empty entry is the current directory, as in ld.so; relative entries are taken from the
        // tree's root (an archive has no other directory to be in).
        b.ld_library_path = env
            .ld_library_path
            .iter()
            .map(|e| {
                (
                    e.clone(),
                    if e.starts_with('/') {
                        b.abs_dir(e)
                    } else {
                        normalize(e).map_or(Dir::Unknown, |d| Dir::Tree(d.into()))
                    },
                )
            })
            .collect();
        b
    }

    /// The tree path an absolute path names, if it lies inside the tree.
    fn abs_to_tree(&self, path: &str) -> Option<String> {
        let p = normalize(path)?;
        self.root_abs
            .iter()
            .find_map(|root| match p.strip_prefix(root.as_str()) {
                Some("") => Some(String::new()),
                Some(rest) => rest.strip_prefix('/').map(str::to_string),
                None => None,
            })
    }

    fn external_node(&mut self, name: &str) -> usize {
        if let Some(&id) = self.graph.by_external.get(name) {
            return id;
        }
        let group = system_group(name);
        let id = self.graph.nodes.len();
        self.graph.nodes.push(Node {
            id,
            name: name.to_string(),
            kind: if group.is_some() {
                NodeKind::System
            } else {
                NodeKind::External
            },
            file: None,
            system_group: group.map(std::borrow::Cow::Borrowed),
            reach: Reach::Unreached,
            root: None,
            eager_parent: None,
            lazy_parent: None,
        });
        self.graph.by_external.insert(name.to_string(), id);
        id
    }

    /// A process with `root` opened and loaded, nothing else (besides ld.so, and libc when an
    /// outside program dlopens the root).
    fn start(&self, root: usize, start: Start) -> Process {
        // A tree executable is the process's program; anything else in a prefix is loaded by the
        // prefix's python.
        let prefix_python = self.prefix && !matches!(start, Start::Program(_));
        let mut p = Process::new(
            root,
            self.graph.by_file[&root],
            start,
            prefix_python,
            self.files.len(),
        );
        p.opened.insert(root, self.files[root].path.to_string());
        self.mark_loaded(root, &mut p.loaded);
        p.in_process[root] = true;
        p.chains.insert(root, Vec::new());
        p
    }

    /// Which files some other file would load by its own search path alone (no inherited RPATH):
    /// used only to pick unreferenced roots in a sensible order.
    fn tentative_targets(&mut self) -> HashMap<usize, ()> {
        let mut out = HashMap::default();
        for (i, f) in self.files.iter().enumerate() {
            let start = if f.elf.is_executable() {
                Start::Program(RootKind::Executable)
            } else {
                Start::OnItsOwn
            };
            let mut p = self.start(i, start);
            p.loaded.clear();
            let declared = f.elf.dlopen_notes.iter().flat_map(|d| d.soname.first());
            let names = f
                .elf
                .needed
                .iter()
                .chain(f.elf.library_literals.iter().map(|l| &l.name))
                .chain(declared);
            for name in names {
                if let (Some(t), _, _) = self.search(name, i, &mut p)
                    && t != i
                {
                    out.insert(t, ());
                }
            }
        }
        out
    }

    /// Emulate one process started from `root`: eager BFS, then lazy edges until nothing new.
    fn run_process(&mut self, root: usize, start: Start) {
        let root_node = self.graph.by_file[&root];
        if let Some(kind) = start.root_kind() {
            if self.graph.nodes[root_node].root.is_none()
                && self.graph.nodes[root_node].reach == Reach::Unreached
            {
                self.graph.nodes[root_node].root = Some(kind);
            }
            self.graph.nodes[root_node].reach = Reach::Eager;
        }
        let mut p = self.start(root, start);

        let mut queue: VecDeque<usize> = VecDeque::from([root]);
        self.bfs(&mut queue, &mut p, false);

        // Lazy phase: files loaded so far may dlopen names; what that brings in is lazy.
        let mut lazy_done: Vec<bool> = vec![false; self.files.len()];
        loop {
            let mut progressed = false;
            let candidates: Vec<usize> = (0..self.files.len())
                .filter(|&f| p.in_process[f] && !lazy_done[f])
                .collect();
            for f in candidates {
                lazy_done[f] = true;
                let requests = self.lazy_requests(f);
                for r in requests {
                    let from = self.graph.by_file[&f];
                    let name = self.pick_alternative(&r.names, f, &mut p);
                    let edge = self.resolve_edge(from, f, &name, r.kind, &mut p);
                    if let Some(d) = r.declared {
                        let e = &mut self.graph.edges[edge];
                        e.declared = Some(d.clone());
                        e.literal_too |= r.literal_too;
                    }
                    let tnode = self.graph.edges[edge].to;
                    if let Some(tf) = self.graph.nodes[tnode].file {
                        if !p.in_process[tf] {
                            self.load(f, tf, edge, &mut p);
                            if p.marks_reach {
                                self.reach(tnode, edge, true);
                            }
                            let mut q = VecDeque::from([tf]);
                            self.bfs(&mut q, &mut p, true);
                            progressed = true;
                        }
                    } else if p.marks_reach {
                        self.reach(tnode, edge, true);
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }

    /// The file's lazy requests: its `dlopen` literals (when it imports a loader) and its
    /// `.note.dlopen` entries. A literal a note also declares is one request, the declared one.
    fn lazy_requests(&self, f: usize) -> Vec<LazyRequest<'a>> {
        let elf: &'a ElfFacts = self.files[f].elf;
        let declares = |name: &str| {
            elf.dlopen_notes
                .iter()
                .any(|d| d.soname.iter().any(|s| s == name))
        };
        let mut out = Vec::new();
        let mut literal_names: Vec<&str> = Vec::new();
        if elf.imports_loader() {
            for lit in &elf.library_literals {
                // A literal equal to the file's own soname is the library naming itself.
                if elf.soname.as_deref() == Some(lit.name.as_str()) {
                    continue;
                }
                let name = lit.full.as_deref().unwrap_or(&lit.name);
                literal_names.push(name);
                if !declares(name) {
                    out.push(LazyRequest {
                        names: vec![name.to_string()],
                        kind: EdgeKind::Lazy,
                        declared: None,
                        literal_too: false,
                    });
                }
            }
        }
        for d in &elf.dlopen_notes {
            let literal_too = d.soname.iter().any(|s| literal_names.contains(&s.as_str()));
            out.push(LazyRequest {
                names: d.soname.clone(),
                kind: EdgeKind::DlopenNote,
                declared: Some(d),
                literal_too,
            });
        }
        out
    }

    /// The first alternative ld.so would find for `f` in `p` (a tree file or a system library),
    /// else the most preferred one: a program tries a note's sonames in order.
    fn pick_alternative(&mut self, names: &[String], f: usize, p: &mut Process) -> String {
        if names.len() > 1 {
            for n in names {
                let (target, how, _) = self.search(n, f, p);
                if target.is_some() || matches!(how, How::System { .. }) {
                    return n.clone();
                }
            }
        }
        names.first().cloned().unwrap_or_default()
    }

    fn bfs(&mut self, queue: &mut VecDeque<usize>, p: &mut Process, lazy: bool) {
        while let Some(f) = queue.pop_front() {
            let from = self.graph.by_file[&f];
            for name in &self.files[f].elf.needed {
                let edge = self.resolve_edge(from, f, name, EdgeKind::Needed, p);
                let tnode = self.graph.edges[edge].to;
                if p.marks_reach {
                    self.reach(tnode, edge, lazy);
                }
                if let Some(tf) = self.graph.nodes[tnode].file
                    && !p.in_process[tf]
                {
                    self.load(f, tf, edge, p);
                    queue.push_back(tf);
                }
            }
        }
    }

    /// `f` loads `tf` into the process (its opened path is already recorded by the search) through
    /// `edge`. A file ld.so would not find (only elsewhere in the tree) is followed, to show what it
    /// needs, but not registered under its names: ld.so loaded nothing, so the next object that
    /// needs the name searches again.
    fn load(&self, f: usize, tf: usize, edge: usize, p: &mut Process) {
        p.in_process[tf] = true;
        if !matches!(self.graph.edges[edge].how, How::TreeElsewhere { .. }) {
            self.mark_loaded(tf, &mut p.loaded);
        }
        let mut c = p.chains.get(&f).cloned().unwrap_or_default();
        c.push(f);
        p.chains.insert(tf, c);
    }

    fn reach(&mut self, node: usize, edge: usize, lazy: bool) {
        let n = &mut self.graph.nodes[node];
        if lazy {
            if n.reach == Reach::Unreached {
                n.reach = Reach::Lazy;
            }
            if n.lazy_parent.is_none() && n.reach == Reach::Lazy {
                n.lazy_parent = Some(edge);
            }
        } else {
            n.reach = Reach::Eager;
            if n.eager_parent.is_none() && n.root.is_none() {
                n.eager_parent = Some(edge);
            }
        }
    }

    fn mark_loaded(&self, f: usize, loaded: &mut HashMap<String, usize>) {
        let file = &self.files[f];
        loaded
            .entry(Tree::file_name(file.path).to_string())
            .or_insert(f);
        if let Some(s) = &file.elf.soname {
            loaded.entry(s.clone()).or_insert(f);
        }
    }

    /// The edge for `name` requested by file `f` (node `from`) in process `p`: resolved by this
    /// process; an earlier process's edge is reused when it led to the same place.
    fn resolve_edge(
        &mut self,
        from: usize,
        f: usize,
        name: &str,
        kind: EdgeKind,
        p: &mut Process,
    ) -> usize {
        let (target, how, opened) = self.search(name, f, p);
        let to = match target {
            Some(t) => {
                if let Some(o) = opened
                    && !p.in_process[t]
                {
                    p.opened.insert(t, o);
                }
                self.graph.by_file[&t]
            }
            None => self.external_node(Tree::file_name(name)),
        };
        let how_key = if matches!(how, How::NotFound { .. }) {
            None
        } else {
            Some(how.clone())
        };
        let same = self.edge_index.entry((from, kind, to)).or_default();
        let id = match same.iter().find(|(n, h, _)| n == name && *h == how_key) {
            Some(&(_, _, e)) => e,
            None => {
                let id = self.graph.edges.len();
                let edge = Edge {
                    id,
                    from,
                    to,
                    name: name.to_string(),
                    kind,
                    how,
                    roots: Vec::new(),
                    declared: None,
                    literal_too: false,
                };
                self.graph.edges.push(edge);
                same.push((name.to_string(), how_key, id));
                id
            }
        };
        let roots = &mut self.graph.edges[id].roots;
        if !roots.contains(&p.root_node) {
            roots.push(p.root_node);
        }
        id
    }
}

impl<'t, 'a> GraphBuilder<'t, 'a> {
    /// The ld.so search for `name` requested by file `req` in process `p`: the tree file that
    /// satisfies it, if any, how it was (or was not) found, and the tree path it is opened by.
    fn search(
        &mut self,
        name: &str,
        req: usize,
        p: &mut Process,
    ) -> (Option<usize>, How, Option<String>) {
        let elf = self.files[req].elf;
        if name.contains('/') {
            return self.search_path(name, p);
        }
        // 0. An object already loaded under that name or SONAME is reused before any search (the
        //    search path, DF_1_NODEFLIB and all do not matter then).
        if let Some(&f) = p.loaded.get(name) {
            // Who brought it in: the last object of its loader chain (the library's own path read
            // "already loaded (by libtorch_cpu.so)" for libtorch_cpu.so, as if it loaded itself).
            let by = p
                .chains
                .get(&f)
                .and_then(|c| c.last())
                .copied()
                .unwrap_or(f);
            return (
                Some(f),
                How::AlreadyLoaded {
                    by: self.files[by].path.to_string(),
                },
                None,
            );
        }
        let group = system_group(name);
        if let Some(g) = group
            && p.system_loaded.contains(name)
        {
            return (
                None,
                How::System {
                    group: g.to_string(),
                },
                None,
            );
        }
        let ctx = self.context(req, p);
        let cached = self
            .walks
            .get(&(req, ctx))
            .and_then(|m| m.get(name))
            .cloned();
        let walk = match cached {
            Some(w) => w,
            None => {
                let w = std::rc::Rc::new(self.walk(name, req, p));
                (self.walks.entry((req, ctx)).or_default()).insert(name.to_string(), w.clone());
                w
            }
        };
        match &walk.found {
            Some(Found::Tree(f, how, opened)) => {
                return (Some(*f), how.clone(), Some(opened.clone()));
            }
            Some(Found::Outside(how)) => return (None, how.clone(), None),
            None => {}
        }
        // 4./5. ld.so.cache and the default directories: the system's, never the tree's.
        if let Some(g) = group {
            if elf.nodeflib {
                return (
                    None,
                    How::Nodeflib {
                        group: g.to_string(),
                    },
                    None,
                );
            }
            p.system_loaded.insert(name.to_string());
            return (
                None,
                How::System {
                    group: g.to_string(),
                },
                None,
            );
        }
        // Not on any search path. Point at a same-named file elsewhere in the tree, flagged.
        if let Some(f) = self.find_by_name(name, p) {
            return (
                Some(f),
                How::TreeElsewhere {
                    dir: Tree::parent(self.files[f].path).to_string(),
                },
                Some(self.files[f].path.to_string()),
            );
        }
        let mut tried: Vec<String> = walk.tried.iter().map(|d| d.to_string()).collect();
        let mut outside = walk.outside.clone();
        tried.dedup();
        outside.dedup();
        (None, How::NotFound { tried, outside }, None)
    }

    /// A NEEDED entry (or dlopen argument) with a slash: ld.so opens it as given, no search. An
    /// absolute one is answered in the tree when it points inside it, outside it when the file is
    /// there (a directory input); a relative one (from the current directory) is taken from the
    /// tree's root.
    fn search_path(&self, name: &str, p: &Process) -> (Option<usize>, How, Option<String>) {
        let rel = if name.starts_with('/') {
            self.abs_to_tree(name)
        } else {
            normalize(name)
        };
        let Some(rel) = rel else {
            let how = if self.outside_loadable(name, p) {
                How::OutsideTree {
                    path: name.to_string(),
                    entry: None,
                }
            } else {
                How::NotFound {
                    tried: Vec::new(),
                    outside: vec![name.to_string()],
                }
            };
            return (None, how, None);
        };
        match self.lookup_loadable(&rel, p) {
            Some(f) => (
                Some(f),
                How::Path {
                    path: name.to_string(),
                },
                Some(rel),
            ),
            None => (
                None,
                How::NotFound {
                    tried: vec![name.to_string()],
                    outside: Vec::new(),
                },
                None,
            ),
        }
    }

    /// The search context of `req` in `p` (see `Builder::contexts`).
    fn context(&mut self, req: usize, p: &mut Process) -> usize {
        if let Some(&c) = p.context.get(&req) {
            return c;
        }
        let root = self.files[p.root].elf;
        let mut key = vec![(
            usize::MAX,
            format!("{} {} {}", root.class, root.machine, p.prefix_python),
        )];
        key.push((req, p.origin(req).to_string()));
        if self.files[req].elf.runpath.is_none() {
            for &o in p.chains.get(&req).into_iter().flatten() {
                if self.files[o].elf.rpath.is_some() {
                    key.push((o, p.origin(o).to_string()));
                }
            }
        }
        let n = self.contexts.len();
        let c = *self.contexts.entry(key).or_insert(n);
        p.context.insert(req, c);
        c
    }

    /// DT_RPATH (the requester's and the loader chain's, or the prefix python's), LD_LIBRARY_PATH,
    /// DT_RUNPATH, in ld.so's order.
    fn walk(&self, name: &str, req: usize, p: &Process) -> Walk {
        let elf = self.files[req].elf;
        let mut tried = Vec::new();
        let mut outside = Vec::new();
        let found = |hit: Hit, make: &dyn Fn(String) -> How, entry: &str| match hit {
            Hit::Tree(dir, f) => {
                let opened = if dir.is_empty() {
                    name.to_string()
                } else {
                    format!("{dir}/{name}")
                };
                Some(Found::Tree(f, make(dir.to_string()), opened))
            }
            Hit::Outside(path) => Some(Found::Outside(How::OutsideTree {
                path,
                entry: Some(entry.to_string()),
            })),
        };
        // 1. DT_RPATH of the requester and of every object up the loader chain, then the
        //    program's, unless the requester has DT_RUNPATH.
        if elf.runpath.is_none() {
            let mut objs = vec![req];
            objs.extend(p.chains.get(&req).into_iter().flatten().rev().copied());
            for o in objs {
                let Some(rpath) = &self.files[o].elf.rpath else {
                    continue;
                };
                for entry in rpath {
                    if let Some(hit) = self.try_entry(o, p, entry, name, &mut tried, &mut outside) {
                        let of = self.files[o].path.to_string();
                        let make = |dir: String| How::Rpath {
                            of: of.clone(),
                            entry: entry.clone(),
                            dir,
                        };
                        return Walk {
                            found: found(hit, &make, entry),
                            tried,
                            outside,
                        };
                    }
                }
            }
            if p.prefix_python {
                tried.push(PREFIX_LIB.into());
                if let Some(f) = self.lookup_loadable(&format!("{PREFIX_LIB}/{name}"), p) {
                    let make = |dir: String| How::TreeDefault { dir };
                    return Walk {
                        found: found(Hit::Tree(PREFIX_LIB.into(), f), &make, PREFIX_LIB),
                        tried,
                        outside,
                    };
                }
            }
        }
        // 2. LD_LIBRARY_PATH.
        for (entry, dir) in &self.ld_library_path {
            if let Some(hit) = self.try_dir(dir, entry, name, p, &mut tried, &mut outside) {
                let make = |dir: String| How::LdLibraryPath {
                    entry: entry.clone(),
                    dir,
                };
                return Walk {
                    found: found(hit, &make, entry),
                    tried,
                    outside,
                };
            }
        }
        // 3. The requester's own DT_RUNPATH (not inherited).
        if let Some(runpath) = &elf.runpath {
            for entry in runpath {
                if let Some(hit) = self.try_entry(req, p, entry, name, &mut tried, &mut outside) {
                    let make = |dir: String| How::Runpath {
                        entry: entry.clone(),
                        dir,
                    };
                    return Walk {
                        found: found(hit, &make, entry),
                        tried,
                        outside,
                    };
                }
            }
        }
        Walk {
            found: None,
            tried,
            outside,
        }
    }

    /// Expand one search-path entry of object `o` (opened in `p` from its `$ORIGIN`) and look for
    /// `name` in it.
    fn try_entry(
        &self,
        o: usize,
        p: &Process,
        entry: &str,
        name: &str,
        tried: &mut Vec<std::rc::Rc<str>>,
        outside: &mut Vec<String>,
    ) -> Option<Hit> {
        let origin = p.origin(o);
        let cached = {
            let mut key = self.probe.borrow_mut();
            entry_key(&mut key, o, origin, entry);
            self.expanded.borrow().get(key.as_str()).cloned()
        };
        let dir = match cached {
            Some(d) => d,
            None => {
                // `probe` still holds the key built above.
                let key = self.probe.borrow().clone();
                let d = self.expand_entry(o, origin, entry);
                self.expanded.borrow_mut().insert(key, d.clone());
                d
            }
        };
        self.try_dir(&dir, entry, name, p, tried, outside)
    }

    /// Look for `name` in one directory a search-path entry named.
    fn try_dir(
        &self,
        dir: &Dir,
        entry: &str,
        name: &str,
        p: &Process,
        tried: &mut Vec<std::rc::Rc<str>>,
        outside: &mut Vec<String>,
    ) -> Option<Hit> {
        match dir {
            Dir::Tree(dir) => {
                tried.push(dir.clone());
                if let Some(hit) = self.try_hwcaps(dir, name, p) {
                    return Some(hit);
                }
                let found = {
                    let mut path = self.probe.borrow_mut();
                    path.clear();
                    if !dir.is_empty() {
                        path.push_str(dir);
                        path.push('/');
                    }
                    path.push_str(name);
                    self.lookup_loadable(&path, p)
                };
                found.map(|f| Hit::Tree(dir.clone(), f))
            }
            Dir::Abs(dir) => {
                outside.push(entry.to_string());
                let path = format!("{dir}/{name}");
                self.outside_loadable(&path, p)
                    .then_some(Hit::Outside(path))
            }
            Dir::Unknown => {
                outside.push(entry.to_string());
                None
            }
        }
    }

    /// ld.so tries a directory's hardware-capability subdirectories before the directory itself
    /// (those of the process's machine, in its order: `hwcaps`).
    fn try_hwcaps(&self, dir: &str, name: &str, p: &Process) -> Option<Hit> {
        if !self.hwcap_parents.contains(dir) {
            return None;
        }
        let machine = &self.files[p.root].elf.machine;
        hwcaps::subdirs(machine).iter().find_map(|sub| {
            let sub = if dir.is_empty() {
                sub.to_string()
            } else {
                format!("{dir}/{sub}")
            };
            let f = self.lookup_loadable(&format!("{sub}/{name}"), p)?;
            Some(Hit::Tree(sub.into(), f))
        })
    }

    /// Where a search-path entry of object `o`, opened from tree directory `origin`, points.
    fn expand_entry(&self, o: usize, origin: &str, entry: &str) -> Dir {
        // `$ORIGIN` becomes a marker: an entry that starts with it is joined to the tree-relative
        // origin and normalised below.
        let expanded = substitute_tokens(entry, "\u{0}O", self.files[o].elf);
        if let Some(rest) = expanded.strip_prefix("\u{0}O") {
            return normalize(&format!("{origin}{rest}"))
                .map_or(Dir::Unknown, |d| Dir::Tree(d.into()));
        }
        // A relative entry names the current directory, which is nowhere in particular.
        if expanded.starts_with('/') {
            self.abs_dir(&expanded)
        } else {
            Dir::Unknown
        }
    }

    /// An absolute directory: inside the tree when the tree is a directory at that place; outside
    /// it, a real directory of this machine (directory inputs) or an unknown one (archives, whose
    /// install location is unknown).
    fn abs_dir(&self, abs: &str) -> Dir {
        match self.abs_to_tree(abs) {
            Some(rel) => Dir::Tree(rel.into()),
            None if !self.root_abs.is_empty() => {
                normalize(abs).map_or(Dir::Unknown, |n| Dir::Abs(format!("/{n}").into()))
            }
            None => Dir::Unknown,
        }
    }

    /// Whether an absolute path outside a directory input is a file ld.so would load into `p`: a
    /// regular file (a FIFO or device is never opened) that is ELF of the process's class and
    /// machine. Reads its first 20 bytes, once per path.
    fn outside_loadable(&self, path: &str, p: &Process) -> bool {
        if self.root_abs.is_empty() || !path.starts_with('/') {
            return false;
        }
        let root = self.files[p.root].elf;
        let head = self
            .outside_heads
            .borrow_mut()
            .entry(path.to_string())
            .or_insert_with(|| elf_head(path))
            .clone();
        head.is_some_and(|(class, machine)| class == root.class && machine == root.machine)
    }
    fn lookup_file(&self, path: &str) -> Option<usize> {
        if let Some(hit) = self.lookups.borrow().get(path) {
            return *hit;
        }
        let found = match self.tree.resolve(path) {
            Resolve::File(entry) => self.file_by_entry.get(&entry).copied(),
            _ => None,
        };
        self.lookups.borrow_mut().insert(path.to_string(), found);
        found
    }

    /// A file at `path` that ld.so would load into `p`: one of another ELF class or machine is
    /// skipped (and the search goes on), as ld.so skips it.
    fn lookup_loadable(&self, path: &str, p: &Process) -> Option<usize> {
        self.lookup_file(path).filter(|&f| self.loadable(f, p))
    }

    fn loadable(&self, f: usize, p: &Process) -> bool {
        let (a, b) = (self.files[f].elf, self.files[p.root].elf);
        a.class == b.class && a.machine == b.machine
    }

    fn find_by_name(&self, name: &str, p: &Process) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &i in self.by_name.get(name).into_iter().flatten() {
            let e = &self.tree.entries[i];
            if let Some(f) = self.lookup_loadable(&e.path, p) {
                // Deterministic: the shortest, then lexicographically first path.
                let better = best.is_none_or(|b| {
                    let (bp, ep) = (self.files[b].path, self.files[f].path);
                    (ep.len(), ep) < (bp.len(), bp)
                });
                if better {
                    best = Some(f);
                }
            }
        }
        best
    }
}

/// The key of `Builder::expanded` for entry `entry` of object `o` opened from `origin`, written into
/// `out`. The origin's length goes first, so no two triples share a key whatever bytes they hold.
fn entry_key(out: &mut String, o: usize, origin: &str, entry: &str) {
    use std::fmt::Write as _;
    out.clear();
    let _ = write!(out, "{o}:{}:{origin}{entry}", origin.len());
}

/// A search-path entry with ld.so's dynamic string tokens substituted for the object `elf`:
/// `$ORIGIN` (and `${ORIGIN}`) with `origin`, `$LIB` with `lib64` or `lib` by class, `$PLATFORM`
/// with the machine's platform name.
pub fn substitute_tokens(entry: &str, origin: &str, elf: &crate::elf::ElfFacts) -> String {
    let lib = if elf.class == 64 { "lib64" } else { "lib" };
    let platform = match elf.machine.as_str() {
        "X86_64" => "x86_64",
        "AARCH64" => "aarch64",
        "PPC64" => "ppc64le",
        _ => "unknown",
    };
    // `$ORIGIN` last, so that nothing in `origin` itself is taken for a token.
    entry
        .replace("${LIB}", lib)
        .replace("$LIB", lib)
        .replace("${PLATFORM}", platform)
        .replace("$PLATFORM", platform)
        .replace("${ORIGIN}", origin)
        .replace("$ORIGIN", origin)
}

/// The ELF class and machine of the file at `path`, when it is a regular ELF file. The type is
/// checked before the file is opened, so a FIFO or a device never blocks the search.
fn elf_head(path: &str) -> Option<(u8, String)> {
    use std::io::Read;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut head = [0u8; 20];
    crate::input::file::open_regular_io(
        std::path::Path::new(path),
        crate::input::file::Links::Follow,
    )
    .ok()?
    .read_exact(&mut head)
    .ok()?;
    if &head[..4] != b"\x7fELF" {
        return None;
    }
    let class = match head[4] {
        1 => 32,
        2 => 64,
        _ => return None,
    };
    let raw = [head[18], head[19]];
    let machine = if head[5] == 2 {
        u16::from_be_bytes(raw)
    } else {
        u16::from_le_bytes(raw)
    };
    Some((
        class,
        goblin::elf::header::machine_to_str(machine).to_string(),
    ))
}

/// The tree directories with a subdirectory ld.so may search for hardware capabilities (the
/// root is the empty string).
fn hwcap_parents(tree: &Tree) -> HashSet<String> {
    let mut out = HashSet::default();
    for e in &tree.entries {
        // `start`: where `part` begins; its parent is the path before the slash ahead of it.
        let mut start = 0;
        for part in e.path.split('/') {
            if hwcaps::starts_subdir(part) {
                out.insert(e.path[..start.max(1) - 1].to_string());
            }
            start += part.len() + 1;
        }
    }
    out
}

/// Normalise `a/b/../c` inside the tree; `None` when it climbs above the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Node counts by kind and reach, for summaries.
pub fn summary(graph: &LoadGraph) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for n in &graph.nodes {
        let k = format!("{:?}/{:?}", n.kind, n.reach).to_lowercase();
        *out.entry(k).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_paths() {
        assert_eq!(normalize("lib/../lib/x").as_deref(), Some("lib/x"));
        assert_eq!(normalize("a/b/../../..").as_deref(), None);
        assert_eq!(normalize("").as_deref(), Some(""));
    }

    #[test]
    fn system_libraries_are_classified() {
        assert_eq!(system_group("libc.so.6"), Some("glibc"));
        assert_eq!(system_group("libcuda.so.1"), Some("NVIDIA driver"));
        assert_eq!(system_group("libibverbs.so.1"), None);
    }
}
