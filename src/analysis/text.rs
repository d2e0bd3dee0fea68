//! Human-readable renderings: the `inspect` listing and dependency tree, the `plan` summary, and
//! Graphviz DOT. Machine-readable output is plain serde (JSON/YAML) of the same structures.

use std::collections::HashSet;
use std::fmt::Write;

use crate::analysis::graph::{EdgeKind, LoadGraph, NodeKind, Reach};
use crate::analysis::inspect::Inspection;
use crate::analysis::plan::{Plan, Role};
use crate::input::Tree;
use crate::output::human_bytes;

fn reach_label(r: Reach) -> &'static str {
    match r {
        Reach::Eager => "eager",
        Reach::Lazy => "lazy",
        Reach::Unreached => "unreached",
    }
}

/// `splitpkg inspect`: per-file facts, then each root's load tree with how every edge resolved.
pub fn inspect_text(ins: &Inspection) -> String {
    let mut s = String::new();
    tree_header(&mut s, ins);
    let _ = writeln!(s, "\nFILES");
    for (i, f) in ins.files.iter().enumerate() {
        file_text(&mut s, ins, i, f);
    }
    let _ = writeln!(s, "\nLOAD TREE (─ NEEDED, ┄ lazy; [how ld.so finds it])");
    s.push_str(&load_tree(&ins.graph));
    let notes = crate::analysis::declared::note_warnings(ins);
    if !notes.is_empty() {
        let _ = writeln!(s, "\nwarnings (.note.dlopen):");
        warnings_text(&mut s, &notes);
    }
    s
}

/// The tree: where, what kind, how big, the package and the reader's notes.
fn tree_header(s: &mut String, ins: &Inspection) {
    let t = &ins.tree;
    let _ = writeln!(
        s,
        "{} ({}, {} entries, {} ELF files, {})",
        t.source.display(),
        serde_json::to_value(t.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        t.entries.len(),
        ins.files.len(),
        human_bytes(t.total_file_bytes())
    );
    if let Some(p) = &t.package {
        let _ = writeln!(
            s,
            "package: {} {}{}",
            p.name,
            p.version,
            p.build
                .as_deref()
                .map(|b| format!(" {b}"))
                .unwrap_or_default()
        );
    }
    for n in &t.notes {
        let _ = writeln!(s, "note: {n}");
    }
}

/// One ELF file (`i`-th of the inspection): its dynamic section, sections and payload facts.
fn file_text(s: &mut String, ins: &Inspection, i: usize, f: &crate::analysis::inspect::FileFacts) {
    let e = &f.elf;
    let node = ins.graph.node_of_file(i).map(|n| &ins.graph.nodes[n]);
    let _ = writeln!(
        s,
        "{}  {}  {}{}{}",
        f.path,
        human_bytes(f.size),
        serde_json::to_value(e.elf_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        node.map(|n| format!("  [{}]", reach_label(n.reach)))
            .unwrap_or_default(),
        if e.python_extension {
            "  python-extension"
        } else {
            ""
        },
    );
    if let Some(so) = &e.soname {
        let _ = writeln!(s, "    soname   {so}");
    }
    if let Some(r) = &e.rpath {
        let _ = writeln!(s, "    rpath    {}", r.join(":"));
    }
    if let Some(r) = &e.runpath {
        let _ = writeln!(s, "    runpath  {}", r.join(":"));
    }
    if !e.needed.is_empty() {
        let _ = writeln!(s, "    needed   {}", e.needed.join(", "));
    }
    if !e.loader_imports.is_empty() {
        let _ = writeln!(s, "    loader   {}", e.loader_imports.join(", "));
    }
    if !e.library_literals.is_empty() {
        let names: Vec<&str> = e.library_literals.iter().map(|l| l.name.as_str()).collect();
        let _ = writeln!(s, "    literals {}", names.join(", "));
    }
    for d in &e.dlopen_notes {
        let _ = writeln!(
            s,
            "    declared {} [{}]",
            d.soname.join(" | "),
            crate::analysis::graph::declared_text(d, false)
        );
    }
    for p in &e.dlopen_note_problems {
        let _ = writeln!(s, "    ! {p}");
    }
    let sec = &e.sections;
    let _ = writeln!(
        s,
        "    sections .text {}  .rodata {}  .nv_fatbin {}   symbols {} defined, {} undefined",
        human_bytes(sec.text),
        human_bytes(sec.rodata),
        human_bytes(sec.nv_fatbin),
        e.dynamic_symbols.defined,
        e.dynamic_symbols.undefined
    );
    let p = &f.payload;
    if p.holds_code() || !p.referenced.is_empty() || p.is_glue() {
        payload_facts_text(s, &ins.spec.name, p);
    }
}

/// What a file holds of the payload, on one line.
fn payload_facts_text(s: &mut String, dep: &str, p: &crate::analysis::payload::PayloadFacts) {
    let mut parts = Vec::new();
    if p.library {
        parts.push("payload library".to_string());
    }
    if !p.defined.is_empty() {
        parts.push(format!(
            "defines {} (e.g. {})",
            p.defined.count, p.defined.samples[0]
        ));
    }
    if !p.defined_hidden.is_empty() {
        parts.push(format!("{} hidden in .symtab", p.defined_hidden.count));
    }
    if !p.referenced.is_empty() {
        parts.push(format!("references {}", p.referenced.count));
    }
    if !p.glue_symbols.is_empty() {
        parts.push(format!("{} glue symbols", p.glue_symbols.count));
    }
    if !p.mentions.is_empty() {
        parts.push(format!("{} strings mention it", p.mentions.count));
    }
    if let Some(est) = &p.estimate {
        parts.push(format!("≈ {} payload", human_bytes(est.bytes)));
    }
    let _ = writeln!(s, "    {dep}  {}", parts.join("; "));
}

/// Each warning: file and what, a few examples, the consequence.
fn warnings_text(s: &mut String, warnings: &[crate::analysis::verdict::Warning]) {
    for w in warnings {
        let _ = writeln!(s, "  ! {}: {}", w.file, w.what);
        for e in w.examples.iter().take(3) {
            let _ = writeln!(s, "      e.g. {e}");
        }
        let _ = writeln!(s, "      → {}", w.consequence);
    }
}

/// Each root's tree is its own process: only the edges that process took (ld.so finds a name
/// differently per process: through the requester's DT_RPATH in one, already loaded in another).
/// A subtree printed before is referred to ("see above") only where this process took the same
/// edges below it; otherwise it is printed again.
fn load_tree(g: &LoadGraph) -> String {
    let mut s = String::new();
    let mut roots: Vec<&crate::analysis::graph::Node> =
        g.nodes.iter().filter(|n| n.root.is_some()).collect();
    roots.sort_by_key(|n| (n.root, n.name.clone()));
    let mut shown = Shown::default();
    for r in roots {
        let kind = serde_json::to_value(r.root)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(s, "{} [root: {kind}]", r.name);
        let key = (r.id, shown.below(g, r.id, r.id));
        shown.printed.insert(key);
        walk(g, (r.id, r.id), "", &mut shown, &mut s);
    }
    s
}

/// What the load tree printed: subtrees by their node and the edges below it.
#[derive(Default)]
struct Shown {
    printed: HashSet<(usize, Vec<usize>)>,
    /// `below` per (node, root), computed once.
    below: std::collections::HashMap<(usize, usize), Vec<usize>>,
}

impl Shown {
    /// The ids of every edge `root`'s process took from `node` down, sorted.
    fn below(&mut self, g: &LoadGraph, node: usize, root: usize) -> Vec<usize> {
        if let Some(b) = self.below.get(&(node, root)) {
            return b.clone();
        }
        let (mut edges, mut seen, mut stack) = (Vec::new(), HashSet::from([node]), vec![node]);
        while let Some(n) = stack.pop() {
            for e in process_edges(g, n, root) {
                edges.push(e.id);
                if seen.insert(e.to) {
                    stack.push(e.to);
                }
            }
        }
        edges.sort_unstable();
        self.below.insert((node, root), edges.clone());
        edges
    }
}

/// The edges `root`'s process took from `node`: NEEDED entries in file order first (as ld.so loads
/// them), then lazy ones.
fn process_edges(g: &LoadGraph, node: usize, root: usize) -> Vec<&crate::analysis::graph::Edge> {
    let mut edges: Vec<&crate::analysis::graph::Edge> = g
        .out_edges(node)
        .filter(|e| e.roots.contains(&root))
        .collect();
    edges.sort_by_key(|e| e.kind.is_lazy());
    edges
}

fn walk(
    g: &LoadGraph,
    (node, root): (usize, usize),
    prefix: &str,
    shown: &mut Shown,
    s: &mut String,
) {
    let edges = process_edges(g, node, root);
    let count = edges.len();
    for (i, e) in edges.into_iter().enumerate() {
        let last = i + 1 == count;
        let (branch, cont) = if last { ("└", " ") } else { ("├", "│") };
        let line = if e.kind.is_lazy() { "┄┄" } else { "──" };
        let to = &g.nodes[e.to];
        let repeat = to.kind == NodeKind::File && {
            let key = (e.to, shown.below(g, e.to, root));
            !shown.printed.insert(key)
        };
        let _ = writeln!(
            s,
            "{prefix}{branch}{line} {}{} [{}]{}",
            e.name,
            if to.kind == NodeKind::File && Tree::file_name(&to.name) != e.name {
                format!(" = {}", to.name)
            } else {
                String::new()
            },
            e.how_text(),
            if repeat { " (see above)" } else { "" }
        );
        if to.kind == NodeKind::File && !repeat {
            walk(g, (e.to, root), &format!("{prefix}{cont}   "), shown, s);
        }
    }
}

/// Graphviz: files as boxes (payload in red, the lazy library in blue), system libraries dashed,
/// external ones grey; lazy edges dashed.
pub fn dot<S: AsRef<str>>(ins: &Inspection, lazy: &[S]) -> String {
    let g = &ins.graph;
    let lazy: Vec<crate::analysis::lazy::LazyPattern> = lazy
        .iter()
        .map(|l| crate::analysis::lazy::LazyPattern::parse(l.as_ref()))
        .collect();
    let mut s = String::from(
        "digraph load {\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n",
    );
    for n in &g.nodes {
        if n.reach == Reach::Unreached && n.root.is_none() && n.kind != NodeKind::File {
            continue;
        }
        let label = Tree::file_name(&n.name);
        let style = match n.kind {
            NodeKind::File => {
                let f = &ins.files[n.file.unwrap()];
                if lazy
                    .iter()
                    .any(|p| p.matches(Tree::file_name(&f.path), f.elf.soname.as_deref()))
                {
                    "shape=box, color=blue, penwidth=2".to_string()
                } else if f.payload.holds_code() {
                    "shape=box, color=red, penwidth=2".to_string()
                } else {
                    "shape=box".to_string()
                }
            }
            NodeKind::System => "shape=ellipse, style=dashed".to_string(),
            NodeKind::External if ins.spec.is_payload_library(&n.name) => {
                "shape=ellipse, color=red".to_string()
            }
            NodeKind::External => "shape=ellipse, color=gray50, fontcolor=gray50".to_string(),
        };
        let _ = writeln!(s, "  n{} [label=\"{}\", {style}];", n.id, escape(label));
    }
    for e in &g.edges {
        let style = match e.kind {
            EdgeKind::Needed => String::new(),
            _ => ", style=dashed, label=\"lazy\"".to_string(),
        };
        let _ = writeln!(
            s,
            "  n{} -> n{} [tooltip=\"{}\"{style}];",
            e.from,
            e.to,
            escape(&e.how_text())
        );
    }
    s.push_str("}\n");
    s
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// `splitpkg plan`: verdict first, then evidence, outputs, saving, warnings and contract.
pub fn plan_text(plan: &Plan) -> String {
    let mut s = String::new();
    verdict_text(&mut s, plan);
    lazy_libraries_text(&mut s, plan);
    if let Some(inst) = &plan.installed {
        installed_text(&mut s, inst, plan);
    }
    payload_text(&mut s, plan);
    if let Some(d) = &plan.device_code {
        device_code_text(&mut s, d, plan);
    }
    if !plan.outputs.is_empty() {
        outputs_text(&mut s, plan);
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(s, "\nwarnings:");
        warnings_text(&mut s, &plan.warnings);
    }
    plan_contracts_text(&mut s, plan);
    s
}

/// The input, the verdict with the flags it answers, its reasons and witnesses.
fn verdict_text(s: &mut String, plan: &Plan) {
    let i = &plan.input;
    let pkg = i
        .package
        .as_ref()
        .map(|p| format!("{} {}, ", p.name, p.version))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{} ({pkg}{} files, {} ELF, {})",
        i.path,
        i.files,
        i.elf_files,
        human_bytes(i.bytes)
    );
    let lazy_flags = if plan.options.lazy_patterns.is_empty() {
        format!("--lazy {}", plan.options.lazy)
    } else {
        plan.options
            .lazy_patterns
            .iter()
            .map(|p| format!("--lazy {p}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        s,
        "\nverdict: {}  ({} via {lazy_flags})",
        plan.verdict.label(),
        plan.options.dep
    );
    for r in &plan.reasons {
        let _ = writeln!(s, "  {r}");
    }
    for w in &plan.witnesses {
        let _ = writeln!(s, "  witness: {}", w.summary);
        for st in &w.steps {
            let _ = writeln!(
                s,
                "      {} → {} [{}; {}]",
                Tree::file_name(&st.from),
                st.name,
                kind_label(st.kind),
                st.how
            );
        }
    }
}

/// The lazy library (or the several sharing one lazy output) and what loads it.
fn lazy_libraries_text(s: &mut String, plan: &Plan) {
    if let Some(l) = &plan.lazy_library {
        let _ = writeln!(
            s,
            "\nlazy library: {} ({}, reached {})",
            l.path,
            human_bytes(l.size),
            reach_label(l.reach)
        );
        for st in &l.loaded_by {
            let _ = writeln!(
                s,
                "  loaded by {} → {} [{}; {}]",
                st.from,
                st.name,
                kind_label(st.kind),
                st.how
            );
        }
    }
    if !plan.lazy_libraries.is_empty() {
        let _ = writeln!(
            s,
            "\nlazy libraries ({}, one shared lazy output):",
            plan.lazy_libraries.len()
        );
        for l in &plan.lazy_libraries {
            let _ = writeln!(
                s,
                "  {} ({}, reached {})",
                l.path,
                human_bytes(l.size),
                reach_label(l.reach)
            );
            for st in &l.loaded_by {
                let _ = writeln!(
                    s,
                    "    loaded by {} → {} [{}; {}]",
                    st.from,
                    st.name,
                    kind_label(st.kind),
                    st.how
                );
            }
        }
    }
}

/// Every payload file: form, reach, estimate with its parts, example symbols, provider.
fn payload_text(s: &mut String, plan: &Plan) {
    let _ = writeln!(s, "\npayload ({}):", plan.options.dep);
    if plan.payload.files.is_empty() {
        let _ = writeln!(s, "  none found");
    }
    for p in &plan.payload.files {
        let est = p
            .estimate
            .as_ref()
            .map(|e| format!("≈ {}", human_bytes(e.bytes)))
            .unwrap_or_default();
        let size = p
            .size
            .map(|b| format!(" of {}", human_bytes(b)))
            .unwrap_or_default();
        let provider = p
            .provider
            .as_ref()
            .map(|pr| {
                let names: Vec<String> = [("pip", &pr.pip), ("conda", &pr.conda)]
                    .iter()
                    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k} {v}")))
                    .collect();
                format!("  provided by {}", names.join(", "))
            })
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  {}  {}  {}  {est}{size}{provider}",
            p.path,
            p.form.label(),
            reach_label(p.reach)
        );
        if let Some(e) = &p.estimate {
            for part in &e.parts {
                let _ = writeln!(
                    s,
                    "      {:<32} {:>10}  {}",
                    part.what.label(),
                    human_bytes(part.bytes),
                    part.how
                );
            }
        }
        if !p.symbols.is_empty() {
            let _ = writeln!(
                s,
                "      e.g. {}",
                p.symbols
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}

/// The tree's device code and the driver floor it sets.
fn device_code_text(s: &mut String, d: &crate::analysis::plan::DeviceCode, plan: &Plan) {
    let _ = writeln!(
        s,
        "\ndevice code: {} stored in {} libraries ({:.2} % of the tree), {} uncompressed, {}; of which {} is {}",
        human_bytes(d.stored),
        d.libraries,
        d.percent_of_tree,
        human_bytes(d.uncompressed),
        if d.compression.is_empty() {
            "uncompressed".to_string()
        } else {
            d.compression.join(", ")
        },
        human_bytes(plan.payload.device_code),
        plan.options.dep
    );
    let _ = writeln!(
        s,
        "  driver floor: {}{}  ({})",
        d.driver_minimum.as_deref().unwrap_or("unknown"),
        d.cuda_floor
            .as_deref()
            .map(|c| format!(", raised by compression to the CUDA {c} driver"))
            .unwrap_or_default(),
        d.why
    );
}

/// The outputs with their variants and (short lists of) files, then the saving.
fn outputs_text(s: &mut String, plan: &Plan) {
    let _ = writeln!(s, "\noutputs:");
    for o in &plan.outputs {
        let role = match o.role {
            Role::Core => "core",
            Role::Lazy => "lazy",
            Role::Payload => "payload (optional)",
        };
        let _ = writeln!(
            s,
            "  {role:<20} {:>6} files  {:>10}{}",
            o.files.len(),
            human_bytes(o.bytes),
            if o.device_code > 0 {
                format!("  (device code {})", human_bytes(o.device_code))
            } else {
                String::new()
            }
        );
        for v in &o.variants {
            let _ = writeln!(
                s,
                "      variant {:<10} {:>10}  {}{}",
                v.name,
                human_bytes(v.bytes),
                if v.measured {
                    "measured"
                } else {
                    "estimated: "
                },
                if v.measured {
                    String::new()
                } else {
                    v.how.clone()
                }
            );
        }
        if o.role != Role::Core && o.files.len() <= 12 {
            for f in &o.files {
                let _ = writeln!(s, "      {f}");
            }
        }
        for x in &o.external {
            let _ = writeln!(s, "      external: {x}");
        }
    }
    let _ = writeln!(
        s,
        "\nsaving in a slim environment: {} ({:.2} % of the tree)\n  {}",
        human_bytes(plan.saving.bytes),
        plan.saving.percent_of_tree,
        plan.saving.how
    );
    if let Some(env) = &plan.saving.environment {
        environment_text(s, env);
    }
}

/// The saving against the environment a user installs, or why that is not known.
fn environment_text(s: &mut String, env: &crate::analysis::plan::Environment) {
    match (env.bytes, env.saving_bytes, env.percent) {
        (Some(bytes), Some(saving), Some(percent)) => {
            let measure = match env.source {
                crate::analysis::plan::EnvSource::Lock => "download sizes",
                _ => "on disk",
            };
            let _ = writeln!(
                s,
                "of the environment: {}{percent:.2} % ({} of {}{}, {measure})\n  {}",
                if env.lower_bound { "at most " } else { "" },
                human_bytes(saving),
                if env.lower_bound { "at least " } else { "" },
                human_bytes(bytes),
                env.how
            );
        }
        _ => {
            let _ = writeln!(s, "of the environment: {}", env.how);
        }
    }
}

/// The loader contract: the plan's for one lazy library, each library's own for several.
fn plan_contracts_text(s: &mut String, plan: &Plan) {
    if plan.lazy_library.is_some() {
        let _ = writeln!(s, "\ncontract (loader ↔ lazy library):");
        contract_text(
            s,
            &plan.contract.loader_lookups,
            &plan.contract.required_exports,
            &plan.contract.imports,
            plan.contract.exports,
        );
    }
    for l in &plan.lazy_libraries {
        if let Some(c) = &l.contract {
            let _ = writeln!(s, "\ncontract (loader ↔ {}):", l.path);
            contract_text(
                s,
                &c.loader_lookups,
                &c.required_exports,
                &c.imports,
                c.exports.len(),
            );
        }
    }
}

fn contract_text(
    s: &mut String,
    loader_lookups: &[String],
    required_exports: &[String],
    imports: &[crate::analysis::verdict::ImportGroup],
    exports: usize,
) {
    if loader_lookups.is_empty() {
        let _ = writeln!(
            s,
            "  looked up by name: none (no exported name stored next to the library name; the library acts through its static initialisers)"
        );
    } else {
        let _ = writeln!(s, "  looked up by name: {}", loader_lookups.join(", "));
    }
    if required_exports.is_empty() {
        let _ = writeln!(s, "  imported from it by core files: none");
    } else {
        let _ = writeln!(
            s,
            "  imported from it by core files: {}",
            required_exports.join(", ")
        );
    }
    let total: usize = imports.iter().map(|g| g.count).sum();
    let _ = writeln!(s, "  it imports {total} symbols, exports {}:", exports);
    for g in imports {
        let _ = writeln!(
            s,
            "    {:>6} from {}  (e.g. {})",
            g.count,
            g.provider,
            g.samples
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn kind_label(k: EdgeKind) -> &'static str {
    match k {
        EdgeKind::Needed => "NEEDED",
        EdgeKind::Lazy => "lazy",
        EdgeKind::DlopenNote => "dlopen note",
    }
}

/// A pip environment: who owns the lazy library, which variant, what switching saves.
fn installed_text(s: &mut String, inst: &crate::analysis::plan::Installed, plan: &Plan) {
    // Read from the environment (a plan JSON may also come from elsewhere): shown escaped, and the
    // requirement as one shell word.
    use crate::sanitize::printable;
    let lazy = plan
        .lazy_library
        .as_ref()
        .map(|l| l.path.as_str())
        .unwrap_or_default();
    match inst.owners.as_slice() {
        [] => {
            let _ = writeln!(
                s,
                "\ninstalled (pip): no installed distribution lists {lazy} in its RECORD"
            );
        }
        [one] => {
            let what = match (&inst.variant, &one.marker) {
                (Some(v), Some(m)) => format!(
                    "variant {v}{}{}",
                    if m.preferred {
                        ", the preferred one"
                    } else {
                        ""
                    },
                    if one.pep825_variant {
                        ", from a PEP 825 variant wheel"
                    } else {
                        ""
                    }
                ),
                _ => "not a split (the library came with the distribution itself)".to_string(),
            };
            let _ = writeln!(
                s,
                "\ninstalled (pip): {} {} owns {lazy}: {what}",
                printable(&one.name),
                printable(&one.version)
            );
            for t in &inst.switch {
                let change = if t.saves_bytes >= 0 {
                    format!("saves {}", human_bytes(t.saves_bytes as u64))
                } else {
                    format!("adds {}", human_bytes(t.saves_bytes.unsigned_abs()))
                };
                let needs = if t.needs_wheels {
                    "needs --wheels DIR_OR_INDEX_URL (this environment does not record where the wheels came from; DIR below is a placeholder): "
                } else {
                    ""
                };
                // Built from checked names, versions and paths, each word quoted for the shell;
                // escaped again, as everything read from the environment is.
                let _ = writeln!(
                    s,
                    "  switch to {}: {change}: {needs}{}",
                    printable(&t.variant),
                    printable(&t.command)
                );
            }
        }
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|o| format!("{} {}", o.name, o.version))
                .collect();
            let _ = writeln!(
                s,
                "\ninstalled (pip): WARNING: {} distributions own {lazy} ({}): uninstalling one deletes the other's file (pypa/pip#4625)",
                many.len(),
                names.join(", ")
            );
        }
    }
}
