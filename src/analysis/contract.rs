//! The loader ↔ lazy-library contract as a file: what every build of the lazy library must export
//! and must (or must not) carry. Written by `emit` next to the recipes (`contract.json`), checked
//! by `verify-variant`, `pack --lazy-variant`, `wheel --lazy-variant`, `smoke` and
//! `tools/build-lazy-variant` (all through [`crate::recipe::verify::verify_variant`]); derived
//! from the plan's proof and from the stock library itself ([`provided_exports`],
//! [`load_registrations`]).

use serde::{Deserialize, Serialize};

// Re-exported: the contract's fields are documented as what these two read.
pub use crate::analysis::exports::{load_registrations, provided_exports};
use crate::analysis::plan::Plan;
use crate::analysis::verdict::NotRead;
use crate::document::Document;
use crate::error::{Error, Result};

/// The contract file's schema name and version. Version 2 added `provided_exports` and
/// `load_registrations`; a version-1 file records names only and is refused (re-run `emit`).
pub const SCHEMA_NAME: &str = "splitpkg-contract";
/// The version of the contract file's layout.
pub const SCHEMA_VERSION: u32 = 2;

/// The loader ↔ lazy-library contract, as shipped next to a recipe for `splitpkg verify-variant`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ContractFile {
    /// Which document this is: `splitpkg-contract`.
    pub schema: String,
    /// The version of the contract file's layout.
    pub schema_version: u32,
    /// File name of the lazy library.
    pub library: String,
    /// The payload's name (`magma`).
    pub dep: String,
    /// Symbol-name prefixes that mark payload code (from the plan's options).
    pub symbol_prefixes: Vec<String>,
    /// Library file-name prefixes that mark payload libraries (from the plan's options).
    pub library_prefixes: Vec<String>,
    /// Names the loader looks up by name: every variant must export them.
    pub loader_lookups: Vec<String>,
    /// Names core files import from the lazy library: every variant must export them.
    pub required_exports: Vec<String>,
    /// The stock library's strong exports on the core's side, not the payload's
    /// ([`provided_exports`]): every variant must define them. (Defaults to empty when reading,
    /// so that a version-1 file reaches the version check and its message.)
    #[serde(default)]
    pub provided_exports: Vec<String>,
    /// Core objects and functions the stock library's code run at load refers to — its dispatch
    /// registrations ([`load_registrations`]): every variant's load-time code must refer to them.
    #[serde(default)]
    pub load_registrations: Vec<String>,
    /// Why the stock library's registrations were not read (its machine's code is not decoded):
    /// then none can be checked, and `verify-variant` says so instead of passing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_registrations_not_read: Option<NotRead>,
}

/// `contract.json` is read as every document is ([`Document::load`]: bounded, regular file), but
/// its refusals stay its own: they name the contract's versions, which users already meet.
impl Document for ContractFile {
    const SCHEMA: &'static str = SCHEMA_NAME;
    const VERSION: u32 = SCHEMA_VERSION;
    const READS: &'static [u32] = &[SCHEMA_VERSION];
    const WHAT: &'static str = "contract";
    const SCHEMA_FILE: &'static str = "contract.schema.json";
    const TITLE: &'static str = "splitpkg contract";
    const ABOUT: &'static str = "The loader and lazy-library contract `splitpkg emit` writes next to a recipe and `splitpkg verify-variant --contract` checks a built variant against.";

    fn from_str(text: &str, file: &str) -> Result<Self> {
        Self::parse_checked(text, file)
    }
}

/// Why a plan has no contract for the lazy library asked for ([`ContractFile::for_library`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoContract {
    /// The plan has no lazy library at all.
    #[error("the plan has no lazy library")]
    NoLazyLibrary,
    #[error(
        "the plan has {} lazy libraries ({}) and none is named {name}",
        libraries.len(),
        libraries.join(", ")
    )]
    /// The plan has lazy libraries, but none by the name asked for.
    NoneNamed {
        /// The file name asked for.
        name: String,
        /// The file names of the plan's lazy libraries.
        libraries: Vec<String>,
    },
}

/// A contract file whose text is not the contract's JSON (the parser's error kept as the source).
#[derive(Debug, thiserror::Error)]
#[error("not a contract file: {0}")]
struct NotAContract(#[source] serde_json::Error);

impl ContractFile {
    /// The contract of the plan's one lazy library; `None` without one, or with several (see
    /// [`Self::each`]).
    pub fn from_plan(plan: &Plan) -> Option<ContractFile> {
        let lazy = plan.lazy_library.as_ref()?;
        let c = &plan.contract;
        let mut file = Self::of(
            plan,
            &lazy.path,
            [
                &c.loader_lookups,
                &c.required_exports,
                &c.provided_exports,
                &c.load_registrations,
            ],
        );
        file.load_registrations_not_read = c.load_registrations_not_read.clone();
        Some(file)
    }

    /// One contract per lazy library: the plan's for one, each library's own for several.
    pub fn each(plan: &Plan) -> Vec<ContractFile> {
        if let Some(c) = Self::from_plan(plan) {
            return vec![c];
        }
        plan.lazy_libraries
            .iter()
            .map(|l| match &l.contract {
                Some(c) => ContractFile {
                    load_registrations_not_read: c.load_registrations_not_read.clone(),
                    ..Self::of(
                        plan,
                        &l.path,
                        [
                            &c.loader_lookups,
                            &c.required_exports,
                            &c.provided_exports,
                            &c.load_registrations,
                        ],
                    )
                },
                None => Self::of(plan, &l.path, [&Vec::new(); 4]),
            })
            .collect()
    }

    /// The contract of the lazy library named `file_name` (`verify-variant LIB --plan`): the plan's
    /// one, or the one of that name among several.
    pub fn for_library(plan: &Plan, file_name: &str) -> Result<ContractFile, NoContract> {
        let all = Self::each(plan);
        match all.as_slice() {
            [] => Err(NoContract::NoLazyLibrary),
            [one] => Ok(one.clone()),
            several => several
                .iter()
                .find(|c| c.library == file_name)
                .cloned()
                .ok_or_else(|| NoContract::NoneNamed {
                    name: file_name.to_string(),
                    libraries: several.iter().map(|c| c.library.clone()).collect(),
                }),
        }
    }

    /// A contract file's text, checked for its schema (`file` names it in the error): the
    /// contract's own refusals, which predate [`Document`]'s and are kept word for word.
    fn parse_checked(text: &str, file: &str) -> Result<ContractFile> {
        let c: ContractFile =
            serde_json::from_str(text).map_err(|e| Error::invalid(file, NotAContract(e)))?;
        if c.schema != SCHEMA_NAME {
            return Err(Error::bad(
                file,
                format!(
                    "not a contract file: schema {:?}, expected {SCHEMA_NAME:?}",
                    c.schema
                ),
            ));
        }
        if c.schema_version != SCHEMA_VERSION {
            return Err(Error::bad(
                file,
                format!(
                    "contract schema version {} (this splitpkg reads {SCHEMA_VERSION}: version 1 recorded names only, not the \
                     stock library's exports and load-time registrations); re-run splitpkg emit",
                    c.schema_version
                ),
            ));
        }
        Ok(c)
    }

    fn of(
        plan: &Plan,
        path: &str,
        [
            loader_lookups,
            required_exports,
            provided_exports,
            load_registrations,
        ]: [&Vec<String>; 4],
    ) -> ContractFile {
        ContractFile {
            schema: SCHEMA_NAME.into(),
            schema_version: SCHEMA_VERSION,
            library: crate::input::Tree::file_name(path).to_string(),
            dep: plan.options.dep.clone(),
            symbol_prefixes: plan.options.symbol_prefixes.clone(),
            library_prefixes: plan.options.library_prefixes.clone(),
            loader_lookups: loader_lookups.clone(),
            required_exports: required_exports.clone(),
            provided_exports: provided_exports.clone(),
            load_registrations: load_registrations.clone(),
            load_registrations_not_read: None,
        }
    }
}
