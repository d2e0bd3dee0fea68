//! `--lazy`: which files are the lazily loaded libraries. Each argument is an exact name (a file
//! name or SONAME, as before) or a glob over them (`libfoo_providers_*.so`: `*`, `?` and `[...]`
//! classes); the lazy set is every file any argument selects. A glob that selects nothing is a
//! mistake in the command line, refused by the pipeline (exit 2); so is an exact name that selects
//! nothing while the tree loads another library lazily on the way to the payload (a mistyped name:
//! the pipeline names the closest ones, [`closest_names`]). Where nothing in the tree is loaded
//! lazily on the way to the payload, an exact name that selects nothing is an answer (the payload
//! is loaded eagerly: NOT CONFINED, torch 1.10).

use crate::analysis::inspect::Inspection;
use crate::input::Tree;

/// One `--lazy` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LazyPattern {
    /// A file name or SONAME, matched exactly; of several files so named the first is taken.
    Name(String),
    /// A glob over file names and SONAMEs; every file it matches is taken.
    Glob(String),
}

impl LazyPattern {
    /// A `--lazy` argument: a glob when it holds `*`, `?` or `[`, else a name.
    pub fn parse(s: &str) -> LazyPattern {
        if s.contains(['*', '?', '[']) {
            LazyPattern::Glob(s.to_string())
        } else {
            LazyPattern::Name(s.to_string())
        }
    }

    /// The argument as given.
    pub fn text(&self) -> &str {
        match self {
            LazyPattern::Name(s) | LazyPattern::Glob(s) => s,
        }
    }

    /// Whether a file with this name and SONAME is selected.
    pub fn matches(&self, file_name: &str, soname: Option<&str>) -> bool {
        match self {
            LazyPattern::Name(n) => file_name == n || soname == Some(n.as_str()),
            LazyPattern::Glob(g) => {
                glob_match(g.as_bytes(), file_name.as_bytes())
                    || soname.is_some_and(|s| glob_match(g.as_bytes(), s.as_bytes()))
            }
        }
    }
}

/// The files `--lazy` selects, and what the selection has to say.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Indices into `Inspection::files`, sorted by path, each once.
    pub files: Vec<usize>,
    /// Notes for the verdict's reasons (`2 files are named X; using Y`, a name that selects nothing
    /// while others select something).
    pub reasons: Vec<String>,
    /// Globs that select no file.
    pub empty_globs: Vec<String>,
}

/// The lazy set of `patterns` in `ins`.
pub fn select<S: AsRef<str>>(ins: &Inspection, patterns: &[S]) -> Selection {
    let mut sel = Selection::default();
    let mut missing = Vec::new();
    for p in patterns.iter().map(|p| LazyPattern::parse(p.as_ref())) {
        let hits: Vec<usize> = ins
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| p.matches(Tree::file_name(&f.path), f.elf.soname.as_deref()))
            .map(|(i, _)| i)
            .collect();
        match (&p, hits.as_slice()) {
            (LazyPattern::Glob(g), []) => sel.empty_globs.push(g.clone()),
            (LazyPattern::Name(n), []) => missing.push(n.clone()),
            (LazyPattern::Name(n), [first, ..]) => {
                if hits.len() > 1 {
                    sel.reasons.push(format!(
                        "{} files are named {n}; using {}",
                        hits.len(),
                        ins.files[*first].path
                    ));
                }
                sel.files.push(*first);
            }
            (LazyPattern::Glob(_), _) => sel.files.extend(hits),
        }
    }
    sel.files
        .sort_by(|&a, &b| ins.files[a].path.cmp(&ins.files[b].path));
    sel.files.dedup();
    // With nothing selected the verdict says so itself; otherwise an unmatched name is a note.
    if !sel.files.is_empty() {
        for n in missing {
            sel.reasons
                .push(format!("--lazy {n}: no file has this name or SONAME"));
        }
    }
    sel
}

/// The tree's library names (file names and SONAMEs) a `--lazy` name that selects nothing most
/// likely meant, best first, at most three: `lazily_loaded` (the libraries the tree loads lazily
/// on the way to the payload) first, then the names within a third of its length in edit distance
/// or sharing its stem (`libtorch_cuda` for `libtorch_cuda.so.2`).
pub fn closest_names(ins: &Inspection, name: &str, lazily_loaded: &[String]) -> Vec<String> {
    let stem = |n: &str| n.split(".so").next().unwrap_or(n).to_string();
    let mut scored: Vec<(bool, usize, String)> = Vec::new();
    let names = ins.files.iter().flat_map(|f| {
        let file = Tree::file_name(&f.path).to_string();
        std::iter::once(file).chain(f.elf.soname.clone())
    });
    for n in names.filter(|n| crate::elf::is_library_name(n)) {
        let distance = edit_distance(name.as_bytes(), n.as_bytes());
        let preferred = lazily_loaded.contains(&n);
        let (a, b) = (stem(name), stem(&n));
        let near = distance <= (name.len() / 3).max(2) || a.starts_with(&b) || b.starts_with(&a);
        if preferred || near {
            scored.push((!preferred, distance, n));
        }
    }
    scored.sort();
    let mut out: Vec<String> = Vec::new();
    for (_, _, n) in scored {
        if !out.contains(&n) && out.len() < 3 {
            out.push(n);
        }
    }
    out
}

/// Levenshtein distance over bytes (two rows): names are short, a few hundred per tree.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let swap = prev[j] + usize::from(x != y);
            cur[j + 1] = swap.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// `*` (any run), `?` (one byte) and `[...]` classes (`[abc]`, `[a-z]`, `[!x]`), over whole names.
pub fn glob_match(pat: &[u8], name: &[u8]) -> bool {
    // Iterative matching with one backtrack point (the last `*`): linear in practice, no recursion.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(b'?') => {
                p += 1;
                n += 1;
                continue;
            }
            Some(b'[') => match class(&pat[p..], name[n]) {
                Some((true, len)) => {
                    p += len;
                    n += 1;
                    continue;
                }
                // An unclosed `[` is a literal.
                None if name[n] == b'[' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            },
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, sn)) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Whether `c` is in the class at the start of `pat` (`[...]`), and the class's length; `None` for
/// an unclosed class.
fn class(pat: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while let Some(&b) = pat.get(i) {
        if b == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if pat.get(i + 1) == Some(&b'-') && pat.get(i + 2).is_some_and(|&e| e != b']') {
            hit |= (b..=pat[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= b == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        let m = |p: &str, n: &str| glob_match(p.as_bytes(), n.as_bytes());
        assert!(m(
            "libonnxruntime_providers_*.so",
            "libonnxruntime_providers_cuda.so"
        ));
        assert!(m(
            "libonnxruntime_providers_*.so",
            "libonnxruntime_providers_.so"
        ));
        assert!(!m(
            "libonnxruntime_providers_*.so",
            "libonnxruntime_providers_cuda.so.1"
        ));
        assert!(!m("libonnxruntime_providers_*.so", "libonnxruntime.so.1"));
        assert!(m("lib?.so", "libx.so") && !m("lib?.so", "libxy.so"));
        assert!(m("libfoo_[ab].so", "libfoo_a.so") && !m("libfoo_[ab].so", "libfoo_c.so"));
        assert!(
            m("libfoo_[a-c]*.so", "libfoo_cuda.so") && !m("libfoo_[!a-c]*.so", "libfoo_cuda.so")
        );
        assert!(m("*", "anything") && m("**x", "x") && !m("*x", "xy"));
        assert!(m("lib[x.so", "lib[x.so"), "an unclosed class is literal");
        assert!(m("a*b*c", "a-b-b-c") && !m("a*b*c", "a-b-b-"));
    }

    #[test]
    fn edit_distances() {
        let d = |a: &str, b: &str| edit_distance(a.as_bytes(), b.as_bytes());
        assert_eq!(d("libfoo.so", "libfoo.so"), 0);
        assert_eq!(d("libtorch_cuda_linalg.so", "libtorch_cuda_linalq.so"), 1);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("kitten", "sitting"), 3);
    }

    #[test]
    fn names_and_globs_are_told_apart() {
        assert_eq!(
            LazyPattern::parse("libtorch_cuda_linalg.so"),
            LazyPattern::Name("libtorch_cuda_linalg.so".into())
        );
        assert_eq!(
            LazyPattern::parse("libfoo_*.so"),
            LazyPattern::Glob("libfoo_*.so".into())
        );
        assert!(
            LazyPattern::parse("libfoo.so.1").matches("libfoo.so.1.2.3", Some("libfoo.so.1")),
            "by SONAME"
        );
        assert!(
            LazyPattern::parse("libfoo*.so.1").matches("other", Some("libfoo.so.1")),
            "a glob over the SONAME too"
        );
    }
}
