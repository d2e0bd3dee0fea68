//! String searches over a file's tables: one shared multi-pattern searcher per pattern set, and
//! the case spellings the payload's words are searched in.
//!
//! Building an Aho-Corasick searcher costs 20–50 µs; a plan of torch's 13 files used to build
//! three per file. The sets are the same for every file of a run, so each is built once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use aho_corasick::{AhoCorasick, MatchKind};

/// The leftmost-first searcher for `patterns`, built on first use and shared afterwards; `None`
/// when the set cannot be searched (aho-corasick refuses it).
pub(crate) fn searcher<S: AsRef<str>>(patterns: &[S]) -> Option<Arc<AhoCorasick>> {
    static BUILT: OnceLock<Mutex<HashMap<Vec<String>, Arc<AhoCorasick>>>> = OnceLock::new();
    let key: Vec<String> = patterns.iter().map(|p| p.as_ref().to_string()).collect();
    let built = BUILT.get_or_init(Default::default);
    if let Some(ac) = built.lock().ok()?.get(&key) {
        return Some(Arc::clone(ac));
    }
    let ac = Arc::new(
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&key)
            .ok()?,
    );
    built.lock().ok()?.insert(key, Arc::clone(&ac));
    Some(ac)
}

/// The spellings a word is searched in: lower case, capitalised and upper case (`magma`, `Magma`,
/// `MAGMA`), each once, empty words left out. Explicit spellings rather than a case-insensitive
/// search: with a handful of patterns aho-corasick uses its SIMD searcher, several times faster.
pub fn case_variants<S: AsRef<str>>(words: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words.iter().map(AsRef::as_ref).filter(|w| !w.is_empty()) {
        let lower = w.to_ascii_lowercase();
        let mut cap = lower.clone();
        if let Some(first) = cap.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        for v in [lower.clone(), cap, lower.to_ascii_uppercase()] {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// Whether a match of one set can never touch a match of the other: no pattern contains or
/// starts inside another. Then one leftmost-first pass over both sets finds exactly the matches
/// each set finds alone, and two searches of the same table can share a pass.
pub(crate) fn disjoint<A: AsRef<str>, B: AsRef<str>>(a: &[A], b: &[B]) -> bool {
    a.iter()
        .all(|x| b.iter().all(|y| !touch(x.as_ref(), y.as_ref())))
}

fn touch(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let overhang = |x: &[u8], y: &[u8]| (1..=x.len().min(y.len())).any(|k| x.ends_with(&y[..k]));
    a.is_empty()
        || b.is_empty()
        || a.windows(b.len()).any(|w| w == b)
        || b.windows(a.len()).any(|w| w == a)
        || overhang(a, b)
        || overhang(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_a_word() {
        assert_eq!(case_variants(&["Magma"]), ["magma", "Magma", "MAGMA"]);
        assert_eq!(case_variants(&["", "x"]), ["x", "X"]);
    }

    #[test]
    fn sets_that_can_share_a_pass() {
        assert!(disjoint(&["dlopen", "PyInit_"], &["magma", "MAGMA"]));
        // "open" lies inside "dlopen"; "_magma" starts where "PyInit_" ends.
        assert!(!disjoint(&["dlopen"], &["open"]));
        assert!(!disjoint(&["PyInit_"], &["_magma"]));
        assert!(!disjoint(&["ab"], &["bc"]));
        assert!(!disjoint(&["x"], &[""]));
    }

    #[test]
    fn a_set_is_built_once() {
        let a = searcher(&["one", "two"]).unwrap();
        let b = searcher(&["one".to_string(), "two".to_string()]).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
