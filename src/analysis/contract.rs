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
    pub fn from_plan(plan: &Plan) -> Option<ContractFile> {
        let lazy = plan.lazy_library.as_ref()?;
        Some(ContractFile {
            schema: "splitpkg-contract".into(),
            schema_version: 1,
            library: crate::input::Tree::file_name(&lazy.path).to_string(),
            dep: plan.options.dep.clone(),
            symbol_prefixes: plan.options.symbol_prefixes.clone(),
            library_prefixes: plan.options.library_prefixes.clone(),
            loader_lookups: plan.contract.loader_lookups.clone(),
            required_exports: plan.contract.required_exports.clone(),
        })
    }
}
