//! Declared and found lazy edges side by side: what a file's `.note.dlopen` (UAPI.12) declares
//! against the `dlopen` literals the reader finds, and the notes that could not be read.
//!
//! Three warnings a maintainer can act on, each naming the file:
//! - a note that is malformed (its broken parts are skipped, here and by every packaging tool);
//! - a `dlopen` literal that no entry of the file's note declares — only for files that carry a
//!   note: a file without one has declared nothing, and torch's libraries name dozens of optional
//!   libraries (warning on each would bury the rest);
//! - a declared library that no alternative of finds in the tree (a file name, a SONAME) or among
//!   the system libraries: it must come from another package, or the note is stale.

use std::collections::HashSet;

use crate::analysis::graph::{EdgeKind, system_group};
use crate::analysis::inspect::Inspection;
use crate::analysis::warning::{Warning, WarningKind};
use crate::input::Tree;

/// Problems kept as examples per warning.
const EXAMPLES: usize = 6;

/// The dlopen-note warnings of every file, in file order.
pub fn note_warnings(ins: &Inspection) -> Vec<Warning> {
    let in_tree: HashSet<&str> = ins
        .tree
        .entries
        .iter()
        .map(|e| Tree::file_name(&e.path))
        .chain(ins.files.iter().filter_map(|f| f.elf.soname.as_deref()))
        .collect();
    let mut out = Vec::new();
    for (i, f) in ins.files.iter().enumerate() {
        let e = &f.elf;
        if !e.dlopen_note_problems.is_empty() {
            out.push(Warning {
                file: f.path.clone(),
                what: format!("{} malformed .note.dlopen part(s)", e.dlopen_note_problems.len()),
                consequence: "those parts are skipped here and by the tools that read the note (dh_dlopenlibdeps, the RPM \
                              generator, dlopen-notes): the dependencies they declare are lost; rebuild the note (systemd's \
                              ELF_NOTE_DLOPEN, or `splitpkg note`)"
                    .into(),
                examples: e.dlopen_note_problems.iter().take(EXAMPLES).map(|p| p.to_string()).collect(),
                kind: Some(WarningKind::MalformedNote),
            });
        }
        if e.dlopen_notes.is_empty() {
            continue;
        }
        let node = ins.graph.node_of_file(i);
        let mut undeclared: Vec<String> = ins
            .graph
            .edges
            .iter()
            .filter(|x| Some(x.from) == node && x.kind == EdgeKind::Lazy)
            .map(|x| x.name.clone())
            .collect();
        undeclared.sort();
        undeclared.dedup();
        if !undeclared.is_empty() {
            out.push(Warning {
                file: f.path.clone(),
                what: format!("{} dlopen literal(s) that its .note.dlopen does not declare", undeclared.len()),
                consequence: "the note is incomplete: a packaging tool that derives dependencies from it will not know these \
                              libraries are loaded at run time; declare each real one (`splitpkg note --soname NAME`)"
                    .into(),
                examples: undeclared.into_iter().take(EXAMPLES).collect(),
                kind: Some(WarningKind::UndeclaredDlopen),
            });
        }
        let missing: Vec<String> = e
            .dlopen_notes
            .iter()
            .filter(|d| {
                !d.soname
                    .iter()
                    .any(|s| in_tree.contains(s.as_str()) || system_group(s).is_some())
            })
            .map(|d| format!("{} ({})", d.soname.join(" | "), d.priority.as_str()))
            .collect();
        if !missing.is_empty() {
            out.push(Warning {
                file: f.path.clone(),
                what: format!("{} library(ies) its .note.dlopen declares are not in the tree", missing.len()),
                consequence: "another package must provide them (a packaging tool turns the priority into Depends, Recommends \
                              or Suggests), or the note is stale"
                    .into(),
                examples: missing.into_iter().take(EXAMPLES).collect(),
                kind: Some(WarningKind::DeclaredNotFound),
            });
        }
    }
    out
}
