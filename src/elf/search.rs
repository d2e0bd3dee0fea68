//! String searches over a file's tables: one shared multi-pattern searcher per pattern set, and
//! the case spellings the payload's words are searched in.
//!
//! Building an Aho-Corasick searcher costs 20–50 µs; a plan of torch's 13 files used to build
//! three per file. The sets are the same for every file of a run, so each is built once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use aho_corasick::{AhoCorasick, Match, MatchKind, PatternID};

/// Three control characters, which symbol names and messages do not hold (a table that does
/// costs only time), added to a set whose patterns are all longer. aho-corasick's
/// SIMD searcher (Teddy) fingerprints as many leading bytes as the shortest pattern has, four at
/// most; with this one it fingerprints three, and the set's search of torch's `.dynstr` tables runs
/// 20–40 % faster (docs/evidence/plan-floor/). Its matches are dropped ([`Searcher::find_iter`]),
/// and it is added only where it can touch no pattern ([`disjoint`]), so the set's own matches stay
/// exactly what they are without it.
const PACER: &str = "\u{1}\u{2}\u{3}";

/// A leftmost-first searcher for one pattern set. The patterns keep their indices; a pacer
/// ([`PACER`]), when added, comes after them and never shows in the matches.
pub(crate) struct Searcher {
    ac: AhoCorasick,
    pacer: Option<PatternID>,
}

impl Searcher {
    fn new(patterns: &[String]) -> Option<Searcher> {
        let paced = patterns.iter().all(|p| p.len() > PACER.len()) && disjoint(&[PACER], patterns);
        let mut all = patterns.to_vec();
        if paced {
            all.push(PACER.to_string());
        }
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&all)
            .ok()?;
        let pacer = paced.then(|| PatternID::new_unchecked(patterns.len()));
        Some(Searcher { ac, pacer })
    }

    /// The set's non-overlapping leftmost-first matches in `haystack`, in order.
    pub(crate) fn find_iter<'a>(&'a self, haystack: &'a [u8]) -> impl Iterator<Item = Match> + 'a {
        let pacer = self.pacer;
        self.ac
            .find_iter(haystack)
            .filter(move |m| Some(m.pattern()) != pacer)
    }
}

/// The searcher for `patterns`, built on first use and shared afterwards; `None` when the set
/// cannot be searched (aho-corasick refuses it).
pub(crate) fn searcher<S: AsRef<str>>(patterns: &[S]) -> Option<Arc<Searcher>> {
    static BUILT: OnceLock<Mutex<HashMap<Vec<String>, Arc<Searcher>>>> = OnceLock::new();
    let key: Vec<String> = patterns.iter().map(|p| p.as_ref().to_string()).collect();
    let built = BUILT.get_or_init(Default::default);
    if let Some(ac) = built.lock().ok()?.get(&key) {
        return Some(Arc::clone(ac));
    }
    let ac = Arc::new(Searcher::new(&key)?);
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

    /// The pacer changes how fast a set is searched, never what is found: on a haystack with the
    /// pacer's bytes next to, between and inside the patterns, the matches are a plain
    /// leftmost-first search's.
    #[test]
    fn a_paced_set_finds_what_the_set_alone_finds() {
        let set: Vec<String> = ["dlopen", "dlmopen", "14DynamicLibraryC", "PyInit_", "magma"]
            .map(String::from)
            .to_vec();
        let paced = Searcher::new(&set).unwrap();
        assert!(
            paced.pacer.is_some(),
            "every pattern is longer than three bytes"
        );
        let plain = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&set)
            .unwrap();
        let hay = "\u{1}\u{2}\u{3}dlopen\0_ZN2at14DynamicLibraryC1E\u{1}\u{2}\u{3}\u{1}\u{2}\u{3}\
                   magmagma\0PyInit_\u{1}\u{2}\u{3}magma\0dl\u{1}\u{2}\u{3}open\0dlmopen\u{1}\u{2}";
        let found: Vec<Match> = paced.find_iter(hay.as_bytes()).collect();
        let want: Vec<Match> = plain.find_iter(hay.as_bytes()).collect();
        assert_eq!(found, want);
        assert_eq!(found.len(), 6, "{found:?}");
    }

    #[test]
    fn no_pacer_where_it_could_not_help_or_could_touch_a_pattern() {
        let set = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // A three-byte pattern already makes the fingerprint three bytes.
        assert!(
            Searcher::new(&set(&[".so", "magma"]))
                .unwrap()
                .pacer
                .is_none()
        );
        // A pattern that begins where the pacer ends could lose a match to it.
        assert!(
            Searcher::new(&set(&["\u{3}abcd", "magma"]))
                .unwrap()
                .pacer
                .is_none()
        );
        assert!(Searcher::new(&set(&["magma"])).unwrap().pacer.is_some());
    }

    #[test]
    fn a_set_is_built_once() {
        let a = searcher(&["one", "two"]).unwrap();
        let b = searcher(&["one".to_string(), "two".to_string()]).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
