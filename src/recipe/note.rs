//! The build step that stamps a `.note.dlopen` (UAPI.12) into the core: each file that loads a lazy
//! library declares it, `required`, so a distribution that packages the build gets the
//! core → lazy-library dependency from the binary alone (`dh_dlopenlibdeps`, the RPM generator;
//! see docs/dlopen-note.md). Off by default (`emit --dlopen-note`); one `splitpkg note` call per
//! loader and lazy library. Shared by every recipe writer: [`NoteStep::from_plan`] says what to
//! declare, [`note_step`] renders the shell lines.

use serde::Serialize;

use crate::analysis::plan::Plan;
use crate::elf::Priority;
use crate::input::Tree;
use crate::recipe::split::Split;
use crate::sanitize as quote;

/// One `splitpkg note` call: `loader` declares `soname`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct NoteCall {
    /// The loader's tree path: relative to the install tree the build writes (`build-variants.sh`'s
    /// `$INSTALL`, the recipe's `core/`); `Split::install_path` maps it under a prefix.
    pub loader: String,
    /// The name the loader passes to `dlopen` (the lazy library's).
    pub soname: String,
    /// The feature the note names the edge by (`linalg`).
    pub feature: String,
}

/// What the step declares: every (loader, lazy library) edge of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoteStep {
    /// Every (loader, lazy library) edge, sorted by loader and soname.
    pub calls: Vec<NoteCall>,
    /// The note's priority for every edge (`required`).
    pub priority: Priority,
    /// The note's description: the payload, its builds and the package (`magma (magma or nomagma
    /// build), packaged as libtorch-cuda-linalg`).
    pub description: String,
}

impl NoteStep {
    /// The edges of `plan`'s lazy libraries, `required`. `feature` names them all when given;
    /// otherwise each is named from the file names: what the lazy library's name adds to its
    /// loader's (`libtorch_cuda.so` → `libtorch_cuda_linalg.so`: `linalg`), else its own stem.
    pub fn from_plan(plan: &Plan, split: &Split, feature: Option<&str>) -> NoteStep {
        let mut calls = Vec::new();
        // A set beside the list: a plan may carry hundreds of thousands of edges (a loader's
        // `.note.dlopen` declaring as many libraries), and `Vec::contains` made this quadratic.
        let mut seen = rustc_hash::FxHashSet::default();
        for l in plan.all_lazy() {
            for s in &l.loaded_by {
                let soname = Tree::file_name(&s.name).to_string();
                let feature = feature
                    .map(str::to_string)
                    .unwrap_or_else(|| feature_from_names(Tree::file_name(&s.from), &soname));
                let call = NoteCall {
                    loader: s.from.clone(),
                    soname,
                    feature,
                };
                if seen.insert(call.clone()) {
                    calls.push(call);
                }
            }
        }
        calls.sort_by(|a, b| (&a.loader, &a.soname).cmp(&(&b.loader, &b.soname)));
        let variants: Vec<&str> = split.variants.iter().map(|v| v.name.as_str()).collect();
        let description = format!(
            "{} ({} build), packaged as {}",
            plan.options.dep,
            variants.join(" or "),
            split.options.lazy_name
        );
        NoteStep {
            calls,
            priority: Priority::Required,
            description,
        }
    }
}

/// `lib` + stem + `.so…` → stem.
fn stem(name: &str) -> &str {
    let n = name.strip_prefix("lib").unwrap_or(name);
    n.split(".so").next().unwrap_or(n)
}

/// The feature a lazy library adds to its loader, from their file names.
pub fn feature_from_names(loader: &str, lazy: &str) -> String {
    let (l, z) = (stem(loader), stem(lazy));
    match z.strip_prefix(l).map(|r| r.trim_start_matches(['_', '-'])) {
        Some(rest)
            if !rest.is_empty()
                && z.len() > l.len()
                && z.as_bytes()[l.len()].is_ascii_punctuation() =>
        {
            rest.to_string()
        }
        _ => z.to_string(),
    }
}

/// The shell lines of the step: a comment and one `splitpkg note` per call, each file rewritten in
/// place under `root` (a shell expression such as `$INSTALL`, left unquoted for expansion).
pub fn note_step(step: &NoteStep, root: &str) -> String {
    let mut s = String::from(
        "# Declare the lazy library in its loader's ELF .note.dlopen (UAPI.12): distributions that read the\n\
         # note (dh_dlopenlibdeps, the RPM generator) derive the dependency from the binary. Loaded bytes\n\
         # stay as they were; see docs/dlopen-note.md of splitpkg.\n",
    );
    for c in &step.calls {
        let file = format!("\"{root}/{}\"", quote::shell_double(&c.loader));
        s.push_str(&format!(
            "splitpkg note {file} --out {file} --soname \"{}\" --feature \"{}\" --priority {} --description \"{}\"\n",
            quote::shell_double(&c.soname),
            quote::shell_double(&c.feature),
            step.priority.as_str(),
            quote::shell_double(&step.description)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_from_file_names() {
        assert_eq!(
            feature_from_names("libtorch_cuda.so", "libtorch_cuda_linalg.so"),
            "linalg"
        );
        assert_eq!(
            feature_from_names("libfoo_core.so", "libfoo_providers_a.so"),
            "foo_providers_a"
        );
        assert_eq!(
            feature_from_names("libtorch_cuda.so.2", "libtorch_cuda-linalg.so.2"),
            "linalg"
        );
        assert_eq!(feature_from_names("libx.so", "libxy.so"), "xy");
    }

    #[test]
    fn the_step_quotes_what_it_names() {
        let step = NoteStep {
            calls: vec![NoteCall {
                loader: "lib/lib$x.so".into(),
                soname: "libz.so".into(),
                feature: "linalg".into(),
            }],
            priority: Priority::Required,
            description: "magma (magma or nomagma build)".into(),
        };
        let text = note_step(&step, "$INSTALL");
        assert!(text.contains(
            r#"splitpkg note "$INSTALL/lib/lib\$x.so" --out "$INSTALL/lib/lib\$x.so" --soname "libz.so" --feature "linalg" --priority required"#
        ), "{text}");
    }
}
