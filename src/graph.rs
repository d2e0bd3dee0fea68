//! The load graph: which file loads which, eagerly (DT_NEEDED) or lazily (a library name passed to a
//! loader at run time), and *how* ld.so would find each one.
//!
//! Each root is run as its own process: its NEEDED entries are loaded breadth-first, as ld.so does,
//! with the loader chain's DT_RPATH stack, then DT_RUNPATH, then the tree's default library
//! directories. Only after the eager closure is complete are the lazy edges of the loaded files
//! followed, and what they bring in is marked as reached lazily. A node reached eagerly by any root
//! is eager.
//!
//! Roots are the tree's executables and Python extension modules, plus every other shared library
//! that nothing in the tree loads: something outside the tree (ctypes, another package) may load it
//! at start-up, so it is conservatively treated as eager.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::elf::ElfFacts;
use crate::tree::{Resolve, Tree};

/// Libraries every Linux system provides: classified, not reported missing.
const SYSTEM_LIBRARIES: &[(&str, &[&str])] = &[
    (
        "glibc",
        &[
            "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1", "libresolv.so.2",
            "libanl.so.1", "libnsl.so.1", "libcrypt.so.1", "libmvec.so.1", "libBrokenLocale.so.1", "libthread_db.so.1",
            "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2", "ld64.so.2", "ld-linux-armhf.so.3",
        ],
    ),
    ("gcc runtime", &["libstdc++.so.6", "libgcc_s.so.1"]),
    ("NVIDIA driver", &["libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1", "libnvidia-ml.so", "libnvcuvid.so.1", "libnvidia-encode.so.1"]),
];

/// Directories a prefix-shaped tree exposes to every object, standing in for ld.so.cache and the
/// default paths.
const TREE_DEFAULT_DIRS: &[&str] = &["lib", "lib64", "usr/lib", "usr/lib64"];

pub fn system_group(name: &str) -> Option<&'static str> {
    if name.starts_with("libnss_") {
        return Some("glibc");
    }
    SYSTEM_LIBRARIES.iter().find(|(_, names)| names.contains(&name)).map(|(g, _)| *g)
}

/// One ELF file of the tree as the graph sees it.
pub struct GraphInput<'a> {
    pub path: &'a str,
    pub elf: &'a ElfFacts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// An ELF file of the tree (index into the inputs).
    File,
    /// Classified system library (glibc, gcc runtime, NVIDIA driver).
    System,
    /// Not in the tree and not a system library: another package provides it, or nobody does.
    External,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    Eager,
    Lazy,
    Unreached,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    Executable,
    PythonExtension,
    /// Nothing in the tree loads it; assumed to be loaded at start-up from outside.
    Unreferenced,
}

#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub id: usize,
    /// Tree path for files, the requested name otherwise.
    pub name: String,
    pub kind: NodeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_group: Option<&'static str>,
    pub reach: Reach,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<RootKind>,
    /// The edge through which BFS first reached this node eagerly (shortest eager path).
    #[serde(skip)]
    pub eager_parent: Option<usize>,
    /// The edge through which this node was first reached after crossing a lazy edge.
    #[serde(skip)]
    pub lazy_parent: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeKind {
    /// DT_NEEDED: loaded with the requester.
    Needed,
    /// A library-name literal in a file that imports a loader: loaded when that code runs.
    Lazy,
    /// Declared in a `.note.dlopen` ELF note.
    DlopenNote,
}

impl EdgeKind {
    pub fn is_lazy(self) -> bool {
        !matches!(self, EdgeKind::Needed)
    }
}

/// How ld.so would find (or fail to find) the requested name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "kebab-case")]
pub enum How {
    /// A DT_RPATH entry of `of` (the requester or one of the objects that loaded it).
    Rpath { of: String, entry: String, dir: String },
    /// The requester's own DT_RUNPATH.
    Runpath { entry: String, dir: String },
    /// The tree's default library directories (a prefix's `lib/`), standing in for ld.so.cache.
    TreeDefault { dir: String },
    /// A library with this soname is already loaded in the process.
    AlreadyLoaded { by: String },
    /// Not on any search path, but a file of that name exists in the tree: ld.so would not find it
    /// without `LD_LIBRARY_PATH`.
    TreeElsewhere { dir: String },
    /// A classified system library.
    System { group: String },
    /// Not found. `tried` lists the directories searched; `outside` lists search-path entries that
    /// point outside the tree (e.g. `$ORIGIN/../../nvidia/cu13/lib`), which were not searched.
    NotFound {
        tried: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        outside: Vec<String>,
    },
}

impl How {
    pub fn describe(&self) -> String {
        match self {
            How::Rpath { of, entry, dir } => format!("rpath of {} ({entry} → {})", file_name(of), show_dir(dir)),
            How::Runpath { entry, dir } => format!("runpath ({entry} → {})", show_dir(dir)),
            How::TreeDefault { dir } => format!("tree default dir {}", show_dir(dir)),
            How::AlreadyLoaded { by } => format!("already loaded (by {})", file_name(by)),
            How::TreeElsewhere { dir } => format!("NOT on the search path; only by name in {}", show_dir(dir)),
            How::System { group } => format!("system ({group})"),
            How::NotFound { outside, .. } if !outside.is_empty() => {
                format!("not found in the tree (external; search path leaves the tree: {})", outside.join(", "))
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

#[derive(Debug, Clone, Serialize)]
pub struct Edge {
    pub id: usize,
    pub from: usize,
    pub to: usize,
    /// The name as requested (NEEDED entry or literal).
    pub name: String,
    pub kind: EdgeKind,
    pub how: How,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadGraph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    #[serde(skip)]
    by_file: HashMap<usize, usize>,
    #[serde(skip)]
    by_external: HashMap<String, usize>,
}

impl LoadGraph {
    pub fn node_of_file(&self, file: usize) -> Option<usize> {
        self.by_file.get(&file).copied()
    }

    pub fn out_edges(&self, node: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.from == node)
    }

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
    pub fn build(tree: &Tree, files: &[GraphInput<'_>], is_payload_library: impl Fn(&str) -> bool) -> LoadGraph {
        let mut b = Builder::new(tree, files);
        let entry_roots: Vec<(usize, RootKind)> = files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                if f.elf.is_executable() {
                    Some((i, RootKind::Executable))
                } else if f.elf.python_extension {
                    Some((i, RootKind::PythonExtension))
                } else {
                    None
                }
            })
            .collect();
        for (f, kind) in entry_roots {
            b.run_process(f, kind);
        }
        // Unreferenced libraries: first those nothing in the tree even names by its own search path
        // (true tops), then whatever is still unreached (cycles), in path order for determinism.
        let tentative = b.tentative_targets();
        let loadable = |f: &GraphInput<'_>| matches!(f.elf.elf_type, crate::elf::ElfType::SharedLibrary);
        for pass in 0..2 {
            for (i, f) in files.iter().enumerate() {
                let node = b.graph.by_file[&i];
                if b.graph.nodes[node].reach != Reach::Unreached || !loadable(f) {
                    continue;
                }
                if is_payload_library(Tree::file_name(f.path)) || f.elf.soname.as_deref().is_some_and(&is_payload_library) {
                    continue;
                }
                if pass == 0 && tentative.contains_key(&i) {
                    continue;
                }
                b.run_process(i, RootKind::Unreferenced);
            }
        }
        b.graph
    }
}

struct Builder<'t, 'a> {
    tree: &'t Tree,
    files: &'t [GraphInput<'a>],
    graph: LoadGraph,
    /// (from node, name, kind) → edge id, so each request is resolved and recorded once.
    edge_index: HashMap<(usize, String, EdgeKind), usize>,
    file_by_entry: HashMap<usize, usize>,
    /// Path lookups are repeated for every requester sharing an RPATH: remember them.
    lookups: std::cell::RefCell<HashMap<String, Option<usize>>>,
    /// Search-path entries expanded per object (`None`: outside the tree). torch's libraries carry
    /// ~20 RPATH entries each and name ~100 libraries: expand each entry once, not per name.
    expanded: std::cell::RefCell<HashMap<(usize, String), Option<String>>>,
    /// Tree entries by file name, for the "found only elsewhere in the tree" diagnosis.
    by_name: HashMap<&'t str, Vec<usize>>,
}

impl<'t, 'a> Builder<'t, 'a> {
    fn new(tree: &'t Tree, files: &'t [GraphInput<'a>]) -> Self {
        let mut graph = LoadGraph { nodes: Vec::new(), edges: Vec::new(), by_file: HashMap::new(), by_external: HashMap::new() };
        let mut file_by_entry = HashMap::new();
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
        let mut by_name: HashMap<&'t str, Vec<usize>> = HashMap::new();
        for (i, e) in tree.entries.iter().enumerate() {
            if !matches!(e.kind, crate::tree::EntryKind::Dir) {
                by_name.entry(Tree::file_name(&e.path)).or_default().push(i);
            }
        }
        Builder { tree, files, graph, edge_index: HashMap::new(), file_by_entry, lookups: Default::default(), expanded: Default::default(), by_name }
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
            kind: if group.is_some() { NodeKind::System } else { NodeKind::External },
            file: None,
            system_group: group,
            reach: Reach::Unreached,
            root: None,
            eager_parent: None,
            lazy_parent: None,
        });
        self.graph.by_external.insert(name.to_string(), id);
        id
    }

    /// Which files some other file would load by its own search path alone (no inherited RPATH):
    /// used only to pick unreferenced roots in a sensible order.
    fn tentative_targets(&self) -> HashMap<usize, ()> {
        let mut out = HashMap::new();
        for (i, f) in self.files.iter().enumerate() {
            let names = f.elf.needed.iter().chain(f.elf.library_literals.iter().map(|l| &l.name));
            for name in names {
                if let (Some(t), _) = self.search(name, i, &[], &HashMap::new())
                    && t != i
                {
                    out.insert(t, ());
                }
            }
        }
        out
    }

    /// Emulate one process started from `root`: eager BFS, then lazy edges until nothing new.
    fn run_process(&mut self, root: usize, kind: RootKind) {
        let root_node = self.graph.by_file[&root];
        if self.graph.nodes[root_node].root.is_none() && self.graph.nodes[root_node].reach == Reach::Unreached {
            self.graph.nodes[root_node].root = Some(kind);
        }
        self.graph.nodes[root_node].reach = Reach::Eager;
        // Objects loaded in this process, by soname and by file name (what ld.so matches against).
        let mut loaded: HashMap<String, usize> = HashMap::new();
        let mut in_process: Vec<bool> = vec![false; self.files.len()];
        let mut chains: HashMap<usize, Vec<usize>> = HashMap::new();
        self.mark_loaded(root, &mut loaded);
        in_process[root] = true;
        chains.insert(root, Vec::new());

        let mut queue: VecDeque<usize> = VecDeque::from([root]);
        self.bfs(&mut queue, &mut loaded, &mut in_process, &mut chains, false);

        // Lazy phase: files loaded so far may dlopen names; what that brings in is lazy.
        let mut lazy_done: Vec<bool> = vec![false; self.files.len()];
        loop {
            let mut progressed = false;
            let candidates: Vec<usize> = (0..self.files.len()).filter(|&f| in_process[f] && !lazy_done[f]).collect();
            for f in candidates {
                lazy_done[f] = true;
                let requests = self.lazy_requests(f);
                for (name, ekind) in requests {
                    let chain = chains.get(&f).cloned().unwrap_or_default();
                    let from = self.graph.by_file[&f];
                    let edge = self.resolve_edge(from, f, &name, ekind, &chain, &loaded);
                    let tnode = self.graph.edges[edge].to;
                    if let Some(tf) = self.graph.nodes[tnode].file {
                        if !in_process[tf] {
                            in_process[tf] = true;
                            self.mark_loaded(tf, &mut loaded);
                            let mut c = chain.clone();
                            c.push(f);
                            chains.insert(tf, c);
                            self.reach(tnode, edge, true);
                            let mut q = VecDeque::from([tf]);
                            self.bfs(&mut q, &mut loaded, &mut in_process, &mut chains, true);
                            progressed = true;
                        }
                    } else {
                        self.reach(tnode, edge, true);
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn lazy_requests(&self, f: usize) -> Vec<(String, EdgeKind)> {
        let elf = self.files[f].elf;
        let mut out: Vec<(String, EdgeKind)> = Vec::new();
        if elf.imports_loader() {
            for lit in &elf.library_literals {
                // A literal equal to the file's own soname is the library naming itself.
                if elf.soname.as_deref() == Some(lit.name.as_str()) {
                    continue;
                }
                out.push((lit.full.clone().unwrap_or_else(|| lit.name.clone()), EdgeKind::Lazy));
            }
        }
        for n in &elf.dlopen_notes {
            out.push((n.clone(), EdgeKind::DlopenNote));
        }
        out
    }

    fn bfs(
        &mut self,
        queue: &mut VecDeque<usize>,
        loaded: &mut HashMap<String, usize>,
        in_process: &mut [bool],
        chains: &mut HashMap<usize, Vec<usize>>,
        lazy: bool,
    ) {
        while let Some(f) = queue.pop_front() {
            let chain = chains.get(&f).cloned().unwrap_or_default();
            let needed = self.files[f].elf.needed.clone();
            let from = self.graph.by_file[&f];
            for name in needed {
                let edge = self.resolve_edge(from, f, &name, EdgeKind::Needed, &chain, loaded);
                let tnode = self.graph.edges[edge].to;
                self.reach(tnode, edge, lazy);
                if let Some(tf) = self.graph.nodes[tnode].file
                    && !in_process[tf]
                {
                    in_process[tf] = true;
                    self.mark_loaded(tf, loaded);
                    let mut c = chain.clone();
                    c.push(f);
                    chains.insert(tf, c);
                    queue.push_back(tf);
                }
            }
        }
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
        loaded.entry(Tree::file_name(file.path).to_string()).or_insert(f);
        if let Some(s) = &file.elf.soname {
            loaded.entry(s.clone()).or_insert(f);
        }
    }

    /// The edge for `name` requested by file `f` (node `from`): resolved by the first process that
    /// asks, reused by later ones.
    fn resolve_edge(&mut self, from: usize, f: usize, name: &str, kind: EdgeKind, chain: &[usize], loaded: &HashMap<String, usize>) -> usize {
        let key = (from, name.to_string(), kind);
        if let Some(&e) = self.edge_index.get(&key) {
            return e;
        }
        let (target, how) = self.search(name, f, chain, loaded);
        self.add_edge(key, target, how)
    }

    fn add_edge(&mut self, key: (usize, String, EdgeKind), target: Option<usize>, how: How) -> usize {
        let (from, name, kind) = (key.0, key.1.clone(), key.2);
        let id = self.graph.edges.len();
        let to = match target {
            Some(f) => self.graph.by_file[&f],
            None => self.external_node(Tree::file_name(&name)),
        };
        self.graph.edges.push(Edge { id, from, to, name, kind, how });
        self.edge_index.insert(key, id);
        id
    }

}

impl<'t, 'a> Builder<'t, 'a> {
    /// The ld.so search for `name` requested by file `req`, whose loaders (root first) are `chain`:
    /// the tree file that satisfies it, if any, and how it was (or was not) found.
    fn search(&self, name: &str, req: usize, chain: &[usize], loaded: &HashMap<String, usize>) -> (Option<usize>, How) {
        let elf = self.files[req].elf;
        if name.contains('/') {
            // A path: ld.so opens it as given. Only a tree-relative one can be answered here.
            let f = self.lookup_file(name.trim_start_matches('/'));
            return match f {
                Some(f) => (Some(f), How::TreeDefault { dir: Tree::parent(name).to_string() }),
                None => (None, How::NotFound { tried: vec![name.to_string()], outside: Vec::new() }),
            };
        }
        if let Some(&f) = loaded.get(name) {
            return (Some(f), How::AlreadyLoaded { by: self.files[f].path.to_string() });
        }
        let mut tried = Vec::new();
        let mut outside = Vec::new();
        // 1. DT_RPATH of the requester and of every object up the loader chain, unless the
        //    requester has DT_RUNPATH.
        if elf.runpath.is_none() {
            let mut objs = vec![req];
            objs.extend(chain.iter().rev().copied());
            for o in objs {
                let Some(rpath) = &self.files[o].elf.rpath else { continue };
                for entry in rpath {
                    if let Some(f) = self.try_entry(o, entry, name, &mut tried, &mut outside) {
                        return (Some(f.1), How::Rpath { of: self.files[o].path.to_string(), entry: entry.clone(), dir: f.0 });
                    }
                }
            }
        }
        // 2. LD_LIBRARY_PATH is the user's environment, not the package's: not modelled.
        // 3. The requester's own DT_RUNPATH (not inherited).
        if let Some(runpath) = &elf.runpath {
            for entry in runpath {
                if let Some(f) = self.try_entry(req, entry, name, &mut tried, &mut outside) {
                    return (Some(f.1), How::Runpath { entry: entry.clone(), dir: f.0 });
                }
            }
        }
        // 4./5. ld.so.cache and default directories, unless DF_1_NODEFLIB.
        if !elf.nodeflib {
            for dir in TREE_DEFAULT_DIRS {
                tried.push(dir.to_string());
                if let Some(f) = self.lookup_file(&format!("{dir}/{name}")) {
                    return (Some(f), How::TreeDefault { dir: dir.to_string() });
                }
            }
        }
        if let Some(group) = system_group(name) {
            return (None, How::System { group: group.to_string() });
        }
        // Not on any search path. Point at a same-named file elsewhere in the tree, flagged.
        if let Some(f) = self.find_by_name(name) {
            return (Some(f), How::TreeElsewhere { dir: Tree::parent(self.files[f].path).to_string() });
        }
        tried.dedup();
        outside.dedup();
        (None, How::NotFound { tried, outside })
    }

    /// Expand one search-path entry of object `o` and look for `name` in it.
    fn try_entry(&self, o: usize, entry: &str, name: &str, tried: &mut Vec<String>, outside: &mut Vec<String>) -> Option<(String, usize)> {
        let key = (o, entry.to_string());
        let cached = self.expanded.borrow().get(&key).cloned();
        let dir = match cached {
            Some(d) => d,
            None => {
                let d = self.expand_entry(o, entry);
                self.expanded.borrow_mut().insert(key, d.clone());
                d
            }
        };
        let Some(dir) = dir else {
            outside.push(entry.to_string());
            return None;
        };
        tried.push(dir.clone());
        let path = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
        self.lookup_file(&path).map(|f| (dir, f))
    }

    /// The tree directory a search-path entry of object `o` names, or `None` when it leaves the tree.
    fn expand_entry(&self, o: usize, entry: &str) -> Option<String> {
        let origin = Tree::parent(self.files[o].path);
        let elf = self.files[o].elf;
        let lib = if elf.class == 64 { "lib64" } else { "lib" };
        let platform = match elf.machine.as_str() {
            "X86_64" => "x86_64",
            "AARCH64" => "aarch64",
            "PPC64" => "ppc64le",
            _ => "unknown",
        };
        let expanded = entry
            .replace("${ORIGIN}", "\u{0}O")
            .replace("$ORIGIN", "\u{0}O")
            .replace("${LIB}", lib)
            .replace("$LIB", lib)
            .replace("${PLATFORM}", platform)
            .replace("$PLATFORM", platform);
        // Absolute paths name the build or target machine, relative ones the current directory:
        // neither is inside the tree.
        let rest = expanded.strip_prefix("\u{0}O")?;
        normalize(&format!("{origin}{rest}"))
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

    fn find_by_name(&self, name: &str) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &i in self.by_name.get(name).into_iter().flatten() {
            let e = &self.tree.entries[i];
            if let Some(f) = self.lookup_file(&e.path) {
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
