//! The claims docs/architecture.md makes about the code's shape, checked on the source itself so
//! they cannot go stale: the stage folders import only earlier stages, no two modules import each
//! other (directly or round a longer loop), no two files do either, `elf/` imports nothing else of
//! the crate, no function in `src/` is longer than 100 lines, and every file of `src/` is named in
//! docs/architecture.md.
//!
//! The reading is textual: `crate::name` in code (comments and `#[cfg(test)] mod tests` blocks
//! left out, since doc links and tests may name any module); for files, every `crate::`,
//! `super::` and `self::` path with its `use` groups expanded. rustfmt's layout (a function's
//! closing brace at its own indentation) is what makes the line count exact.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The stage folders in data-flow order (docs/architecture.md, "Folders and what they own"): a
/// folder may import one of a lower rank, never one of the same or a higher rank.
const STAGES: &[(&str, u8)] = &[
    ("input", 0),
    ("elf", 0),
    ("fatbin", 1),
    ("analysis", 2),
    ("recipe", 3),
    ("channel", 4),
    ("wheel", 4),
    ("index", 5),
    ("smoke", 5),
    ("report", 6),
];

const MAX_FN_LINES: usize = 100;

struct Source {
    /// Path relative to `src/`, e.g. `channel/pack/conda.rs`.
    rel: String,
    /// The file's code without comment lines and without its `#[cfg(test)] mod tests` block.
    code: String,
    /// The whole file, for the function lengths.
    text: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        out.push(Source {
            code: code_of(&text),
            rel,
            text,
        });
    }
    out
}

fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = tests_block_start(&lines).unwrap_or(lines.len());
    lines[..end]
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// The line where the file's `#[cfg(test)] mod tests` block starts: `#[cfg(test)]`, then only
/// comments and attributes (a lint `allow` for the tests) up to `mod tests`.
fn tests_block_start(lines: &[&str]) -> Option<usize> {
    (0..lines.len()).find(|&i| {
        lines[i] == "#[cfg(test)]"
            && lines[i + 1..]
                .iter()
                .find(|l| !(l.starts_with("//") || l.starts_with("#[")))
                .is_some_and(|l| l.starts_with("mod tests"))
    })
}

/// The top-level module a file belongs to (`channel/pack/conda.rs` → `channel`, `error.rs` →
/// `error`); `None` for the crate root and the binary's `main.rs` and `cli/`.
fn module_of(rel: &str) -> Option<&str> {
    let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
    (!matches!(top, "lib" | "main" | "cli")).then_some(top)
}

/// Which top-level modules each top-level module names as `crate::name`.
fn imports(sources: &[Source]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in sources {
        let Some(from) = module_of(&s.rel) else {
            continue;
        };
        let entry = graph.entry(from.to_string()).or_default();
        for (i, _) in s.code.match_indices("crate::") {
            let name: String = s.code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let is_module = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
            if is_module && name != from {
                entry.entry(name).or_default().insert(s.rel.clone());
            }
        }
    }
    graph
}

#[test]
fn stages_import_only_earlier_stages() {
    let rank: BTreeMap<&str, u8> = STAGES.iter().copied().collect();
    let mut wrong = Vec::new();
    for (from, targets) in imports(&sources()) {
        let Some(&r_from) = rank.get(from.as_str()) else {
            continue;
        };
        for (to, files) in targets {
            if rank.get(to.as_str()).is_some_and(|&r_to| r_to >= r_from) {
                wrong.push(format!("{from} -> {to} (in {files:?})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a stage imports a later or sibling stage: {wrong:#?}"
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let graph = imports(&sources());
    // Every module that `from` reaches; a loop is a module that reaches itself.
    let reaches = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let loops: Vec<String> = graph
        .keys()
        .filter(|m| reaches(m).contains(*m))
        .map(|m| format!("{m} -> {:?}", graph[m]))
        .collect();
    assert!(
        loops.is_empty(),
        "modules that import each other: {loops:#?}"
    );
}

#[test]
fn elf_imports_nothing_above_it() {
    let graph = imports(&sources());
    let elf = graph.get("elf").cloned().unwrap_or_default();
    assert!(
        elf.is_empty(),
        "src/elf/ imports other modules of the crate: {elf:?}"
    );
}

/// `fn` items with their length in lines, from the line that opens them to the brace that closes
/// them at the same indentation.
fn functions(text: &str) -> Vec<(usize, usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let close = format!("{indent}}}");
        let end = if line.trim_end().ends_with('}') {
            i
        } else {
            (i..lines.len()).find(|&j| lines[j] == close).unwrap_or(i)
        };
        out.push((i + 1, end - i + 1, name));
    }
    out
}

fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        let qualifier =
            w.starts_with("pub") || matches!(w, "const" | "async" | "unsafe" | "extern");
        if w == "fn" {
            let name: String = words
                .next()?
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return Some(name);
        }
        if !qualifier && !w.starts_with('"') {
            return None;
        }
    }
    None
}

#[test]
fn no_function_is_longer_than_a_screen() {
    let mut long: Vec<String> = Vec::new();
    for s in sources() {
        for (line, len, name) in functions(&s.text) {
            if len > MAX_FN_LINES {
                long.push(format!("src/{}:{line} {name} ({len} lines)", s.rel));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: {long:#?}"
    );
}

#[test]
fn the_function_scanner_measures_known_shapes() {
    // The scanner itself, on a known shape: a one-line fn, a three-line one, a declaration.
    let text = "fn a() {}\npub(crate) fn b(x: u8) -> u8 {\n    x\n}\n    fn c(&self);\n";
    let found: Vec<(usize, usize, String)> = functions(text);
    assert_eq!(
        found,
        vec![(1, 1, "a".to_string()), (2, 3, "b".to_string())]
    );
}

/// A file's module path: `analysis/verdict.rs` → `analysis::verdict`, `report/mod.rs` → `report`,
/// `lib.rs` → the crate root (empty).
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts
        .last()
        .is_some_and(|p| matches!(p.as_str(), "mod" | "lib"))
    {
        parts.pop();
    }
    parts
}

/// The paths written at the start of `code` (`crate::a::{b, c::D}` → `crate::a::b`,
/// `crate::a::c::D`), each as its segments; `use` groups are expanded, nested ones too.
fn paths_at(code: &str) -> Vec<Vec<String>> {
    let word = |s: &str| -> usize {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut segments = Vec::new();
    let mut rest = code;
    loop {
        let n = word(rest);
        if n > 0 {
            segments.push(rest[..n].to_string());
        }
        rest = &rest[n..];
        let Some(after) = rest.strip_prefix("::") else {
            return vec![segments];
        };
        rest = after;
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| {
                    paths_at(item.trim()).into_iter().map(|tail| {
                        let mut full = segments.clone();
                        full.extend(tail.into_iter().filter(|t| t != "self"));
                        full
                    })
                })
                .collect();
        }
    }
}

/// The top-level items of a `use` group, from just after its `{` to its matching `}`.
fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.retain(|i| !i.trim().is_empty());
    items
}

/// Which files of the library each file names through a `crate::`, `super::` or `self::` path:
/// the file of the longest module prefix of the path (an item of `analysis/verdict.rs` is that
/// file; a module of it, its own file). The binary (`main.rs`, `cli/`) is another crate.
fn file_imports(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<Vec<String>, &str> = sources
        .iter()
        .filter(|s| module_of(&s.rel).is_some() || s.rel == "lib.rs")
        .map(|s| (module_path(&s.rel), s.rel.as_str()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources
        .iter()
        .filter(|s| files.values().any(|f| *f == s.rel))
    {
        let here = module_path(&s.rel);
        let targets = graph.entry(s.rel.clone()).or_default();
        for (i, _) in s.code.match_indices("::") {
            let before = &s.code[..i];
            let root = ["crate", "super", "self"].into_iter().find(|r| {
                before.ends_with(r)
                    && !before[..before.len() - r.len()]
                        .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            });
            let Some(root) = root else { continue };
            for path in paths_at(&s.code[i - root.len()..]) {
                let mut full = if root == "crate" {
                    Vec::new()
                } else {
                    here.clone()
                };
                let mut rest = &path[1..];
                if root == "super" {
                    full.pop();
                    while rest.first().is_some_and(|p| p == "super") {
                        full.pop();
                        rest = &rest[1..];
                    }
                }
                full.extend(rest.iter().cloned());
                let target = (0..=full.len()).rev().find_map(|n| files.get(&full[..n]));
                if let Some(&t) = target.filter(|t| **t != s.rel) {
                    targets.insert(t.to_string());
                }
            }
        }
    }
    graph
}

/// The shortest loop of imports through `start`, if there is one: `[start, …, start]`.
fn shortest_loop(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut todo = std::collections::VecDeque::from([start]);
    while let Some(at) = todo.pop_front() {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                let mut path = vec![start.to_string()];
                let mut step = at;
                while step != start {
                    path.push(step.to_string());
                    step = parent[step];
                }
                path.push(start.to_string());
                path.reverse();
                return Some(path);
            }
            if !parent.contains_key(next.as_str()) {
                parent.insert(next, at);
                todo.push_back(next);
            }
        }
    }
    None
}

#[test]
fn no_two_files_import_each_other() {
    let graph = file_imports(&sources());
    let mut loops: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for file in graph.keys() {
        if let Some(path) = shortest_loop(&graph, file)
            && seen.insert(path.iter().cloned().collect())
        {
            loops.insert(path.join(" -> "));
        }
    }
    assert!(loops.is_empty(), "files that import each other: {loops:#?}");
}

/// The name a line defines as a type visible outside its file (`pub`, `pub(crate)`,
/// `pub(super)` … `struct`, `enum`, `type` or `trait`), if it does.
fn pub_type_defined(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub")?;
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1,
        None => rest,
    };
    let rest = rest.strip_prefix(' ')?;
    let rest = ["struct ", "enum ", "type ", "trait "]
        .iter()
        .find_map(|k| rest.strip_prefix(k))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

/// One name, one meaning: a type defined in two files (`Entry` in the fatbin walker and in the
/// wheel's RECORD) makes a reader guess which one a signature means, and a `use` of the wrong
/// one may still compile. Each stage names its own (`FatbinEntry`, `RecordEntry`).
#[test]
fn no_pub_type_name_is_defined_in_two_files() {
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources() {
        for line in source.code.lines() {
            if let Some(name) = pub_type_defined(line) {
                defined
                    .entry(name.to_string())
                    .or_default()
                    .insert(source.rel.clone());
            }
        }
    }
    let twice: BTreeMap<_, _> = defined.into_iter().filter(|(_, f)| f.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "type names defined in two files: {twice:#?}"
    );
    assert_eq!(pub_type_defined("pub(crate) enum Kind<T> {"), Some("Kind"));
    assert_eq!(
        pub_type_defined("    pub type Result<T> = Foo;"),
        Some("Result")
    );
    assert_eq!(pub_type_defined("pub fn entry() {"), None);
}

#[test]
fn the_import_reader_expands_paths_and_groups() {
    let found = paths_at("crate::a::{b, c::{D, self}, e::F as G};");
    let want: Vec<Vec<&str>> = vec![
        vec!["crate", "a", "b"],
        vec!["crate", "a", "c", "D"],
        vec!["crate", "a", "c"],
        vec!["crate", "a", "e", "F"],
    ];
    assert_eq!(found, want);
    assert_eq!(paths_at("super::x::y(1)"), vec![vec!["super", "x", "y"]]);
    assert_eq!(module_path("report/mod.rs"), vec!["report"]);
    assert_eq!(
        module_path("analysis/verdict.rs"),
        vec!["analysis", "verdict"]
    );
    // Read on a loop made up here, the reader names every file of it in order.
    let two = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let graph = BTreeMap::from([
        two("a.rs", "b.rs"),
        two("b.rs", "c.rs"),
        two("c.rs", "a.rs"),
    ]);
    assert_eq!(
        shortest_loop(&graph, "b.rs").unwrap(),
        vec!["b.rs", "c.rs", "a.rs", "b.rs"]
    );
}

/// How docs/architecture.md names a file: its path from the repository root, a folder's
/// `mod.rs` by the folder (`src/report/`).
fn doc_name(rel: &str) -> String {
    match rel.strip_suffix("mod.rs") {
        Some(folder) if folder.ends_with('/') => format!("src/{folder}"),
        _ => format!("src/{rel}"),
    }
}

#[test]
fn every_module_is_named_in_the_architecture_doc() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let missing: Vec<String> = sources()
        .iter()
        .map(|s| doc_name(&s.rel))
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "files of src/ that docs/architecture.md does not name (as `src/…`): {missing:#?}"
    );
}

#[test]
fn no_test_function_is_longer_than_a_screen() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut long: Vec<String> = Vec::new();
    for entry in walkdir::WalkDir::new(&tests).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let rel = entry.path().strip_prefix(&tests).unwrap().to_string_lossy();
        for (line, len, name) in functions(&text) {
            if len > MAX_FN_LINES {
                long.push(format!("tests/{rel}:{line} {name} ({len} lines)"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "test functions over {MAX_FN_LINES} lines: {long:#?}"
    );
}
