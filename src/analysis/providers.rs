//! Which package provides a library the tree needs but does not contain: the SONAME → package table
//! in `data/providers.json` (data, not code: add a row there, not a branch here). The plan names the
//! provider of each external payload library (`payload.files[].provider`), and the split constrains
//! those packages (`recipe::split::default_payload_packages`).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

const TABLE_JSON: &str = include_str!("../../data/providers.json");

/// The packages that ship one library: a PyPI distribution and a conda-forge package, where known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provider {
    /// The PyPI distribution that ships it (`nvidia-cudnn-cu13`); absent when `data/providers.json`
    /// names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip: Option<String>,
    /// The conda-forge package that ships it (`cudnn`); absent when `data/providers.json` names
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conda: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ProviderTable {
    schema: String,
    schema_version: u32,
    providers: Vec<ProviderEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderEntry {
    sonames: Vec<String>,
    /// Only for trees whose CUDA runtime has this major version.
    #[serde(default)]
    cuda: Option<u32>,
    #[serde(default)]
    pip: Option<String>,
    #[serde(default)]
    conda: Option<String>,
}

fn table() -> &'static ProviderTable {
    static TABLE: OnceLock<ProviderTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let t: ProviderTable = serde_json::from_str(TABLE_JSON)
            .expect("data/providers.json parses (checked by its unit test)");
        assert_eq!(
            (t.schema.as_str(), t.schema_version),
            ("splitpkg-providers", 1),
            "data/providers.json schema"
        );
        t
    })
}

/// The provider of `soname` for a tree whose CUDA runtime major is `cuda` (`None`: none NEEDed).
/// An entry tied to a CUDA major applies only to that major; `None` when the table does not know.
pub fn lookup(soname: &str, cuda: Option<u32>) -> Option<Provider> {
    table()
        .providers
        .iter()
        .find(|e| e.sonames.iter().any(|s| s == soname) && e.cuda.is_none_or(|c| Some(c) == cuda))
        .map(|e| Provider {
            pip: e.pip.clone(),
            conda: e.conda.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_each_soname_has_one_row_per_cuda_major() {
        let t = table();
        assert!(!t.providers.is_empty());
        let mut seen = std::collections::BTreeSet::new();
        for e in &t.providers {
            assert!(
                e.pip.is_some() || e.conda.is_some(),
                "{:?} names no package",
                e.sonames
            );
            for s in &e.sonames {
                assert!(
                    s.starts_with("lib") && s.contains(".so"),
                    "{s} is not a library name"
                );
                assert!(
                    seen.insert((s.clone(), e.cuda)),
                    "{s} (cuda {:?}) is listed twice",
                    e.cuda
                );
                // A row for every major and one for none would make the answer depend on row order.
                if e.cuda.is_some() {
                    assert!(
                        !seen.contains(&(s.clone(), None)),
                        "{s} has rows with and without a CUDA major"
                    );
                }
            }
        }
    }

    #[test]
    fn a_provider_depends_on_the_cuda_major_where_the_soname_does_not() {
        let p = |s, c| lookup(s, c).map(|p| (p.pip, p.conda));
        let some = |a: &str, b: &str| Some((Some(a.to_string()), Some(b.to_string())));
        assert_eq!(
            p("libcudnn.so.9", Some(13)),
            some("nvidia-cudnn-cu13", "cudnn")
        );
        assert_eq!(
            p("libcudnn.so.9", Some(12)),
            some("nvidia-cudnn-cu12", "cudnn")
        );
        assert_eq!(
            p("libcudnn.so.9", None),
            None,
            "no CUDA runtime: the wheel series is unknown"
        );
        assert_eq!(
            p("libcublasLt.so.13", None),
            some("nvidia-cublas", "libcublas")
        );
        assert_eq!(
            p("libmagma.so.2", Some(12)),
            Some((None, Some("libmagma".to_string())))
        );
        assert_eq!(p("libfoo.so.1", Some(13)), None);
    }
}
