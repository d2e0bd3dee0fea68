//! The loader ↔ lazy-library contract as a file: what every build of the lazy library must export
//! and must (or must not) carry. Written by `emit` next to the recipes (`contract.json`), checked
//! by `verify-variant`, `pack --lazy-variant` and `smoke`; derived from the plan's proof.

use serde::{Deserialize, Serialize};

use crate::analysis::plan::Plan;

/// The loader ↔ lazy-library contract, as shipped next to a recipe for `splitpkg verify-variant`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContractFile {
    pub schema: String,
    pub schema_version: u32,
    /// File name of the lazy library.
    pub library: String,
    pub dep: String,
    pub symbol_prefixes: Vec<String>,
    pub library_prefixes: Vec<String>,
    /// Names the loader looks up by name: every variant must export them.
    pub loader_lookups: Vec<String>,
    /// Names core files import from the lazy library: every variant must export them.
    pub required_exports: Vec<String>,
}

impl ContractFile {
    /// The contract of the plan's one lazy library; `None` without one, or with several (see
    /// [`Self::each`]).
    pub fn from_plan(plan: &Plan) -> Option<ContractFile> {
        let lazy = plan.lazy_library.as_ref()?;
        Some(Self::of(plan, &lazy.path, &plan.contract.loader_lookups, &plan.contract.required_exports))
    }

    /// One contract per lazy library: the plan's for one, each library's own for several.
    pub fn each(plan: &Plan) -> Vec<ContractFile> {
        if let Some(c) = Self::from_plan(plan) {
            return vec![c];
        }
        plan.lazy_libraries
            .iter()
            .map(|l| match &l.contract {
                Some(c) => Self::of(plan, &l.path, &c.loader_lookups, &c.required_exports),
                None => Self::of(plan, &l.path, &[], &[]),
            })
            .collect()
    }

    /// The contract of the lazy library named `file_name` (`verify-variant LIB --plan`): the plan's
    /// one, or the one of that name among several.
    pub fn for_library(plan: &Plan, file_name: &str) -> Result<ContractFile, String> {
        let all = Self::each(plan);
        match all.as_slice() {
            [] => Err("the plan has no lazy library".into()),
            [one] => Ok(one.clone()),
            several => several.iter().find(|c| c.library == file_name).cloned().ok_or_else(|| {
                format!(
                    "the plan has {} lazy libraries ({}) and none is named {file_name}",
                    several.len(),
                    several.iter().map(|c| c.library.as_str()).collect::<Vec<_>>().join(", ")
                )
            }),
        }
    }

    fn of(plan: &Plan, path: &str, loader_lookups: &[String], required_exports: &[String]) -> ContractFile {
        ContractFile {
            schema: "splitpkg-contract".into(),
            schema_version: 1,
            library: crate::input::Tree::file_name(path).to_string(),
            dep: plan.options.dep.clone(),
            symbol_prefixes: plan.options.symbol_prefixes.clone(),
            library_prefixes: plan.options.library_prefixes.clone(),
            loader_lookups: loader_lookups.to_vec(),
            required_exports: required_exports.to_vec(),
        }
    }
}
