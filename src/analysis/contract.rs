//! The loader ↔ lazy-library contract as a file: what every build of the lazy library must export
//! and must (or must not) carry. Written by `emit` next to the recipes (`contract.json`), checked
//! by `verify-variant`, `pack --lazy-variant`, `wheel --lazy-variant`, `smoke` and
//! `tools/build-lazy-variant` (all through [`crate::recipe::verify::verify_variant`]); derived
//! from the plan's proof and from the stock library itself ([`provided_exports`],
//! [`load_registrations`]).

// issue 54: 9 public items still to document here.
#![allow(missing_docs)]

use serde::{Deserialize, Serialize};

use crate::analysis::inspect::FileFacts;
use crate::analysis::payload::{PayloadSpec, demangle};
use crate::analysis::plan::Plan;
use crate::analysis::verdict::NotRead;
use crate::error::{Error, Result};

/// The contract file's schema name and version. Version 2 added `provided_exports` and
/// `load_registrations`; a version-1 file records names only and is refused (re-run `emit`).
pub const SCHEMA_NAME: &str = "splitpkg-contract";
pub const SCHEMA_VERSION: u32 = 2;

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

/// Why a plan has no contract for the lazy library asked for ([`ContractFile::for_library`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoContract {
    #[error("the plan has no lazy library")]
    NoLazyLibrary,
    #[error(
        "the plan has {} lazy libraries ({}) and none is named {name}",
        libraries.len(),
        libraries.join(", ")
    )]
    NoneNamed {
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

    /// A contract file's text, checked for its schema (`file` names it in the error).
    pub fn parse(text: &str, file: &std::path::Path) -> Result<ContractFile> {
        let c: ContractFile = serde_json::from_str(text)
            .map_err(|e| Error::invalid(file.display(), NotAContract(e)))?;
        if c.schema != SCHEMA_NAME {
            return Err(Error::bad(
                file.display(),
                format!(
                    "not a contract file: schema {:?}, expected {SCHEMA_NAME:?}",
                    c.schema
                ),
            ));
        }
        if c.schema_version != SCHEMA_VERSION {
            return Err(Error::bad(
                file.display(),
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

/// What the stock lazy library exports for the core: its strong (`STB_GLOBAL`) functions and
/// objects whose mangled name sits in a top-level C++ namespace the library's own imports from the
/// core sit in (`at`, `c10`, `caffe2` for torch, read from the file, not assumed), minus the
/// payload's (`magma_*`, and wrappers whose own name starts with the component's name, such as
/// `at::native::magmaCholesky<double>`).
///
/// Why this rule: weak exports are inline or template copies every user emits itself; C names
/// and foreign namespaces (LAPACK's `dgetrf_`, MAGMA's `zgemm_task`, CUDA's `__half`) come in
/// with the statically linked component. What is left is what the project's own sources of the
/// library define: a build that leaves out a translation unit, or a stub, lacks some of it. On
/// torch 2.11 this is 192 names, on 1.13.1 182: the same set `tools/build-lazy-variant` used
/// to compare by hand, and every one of them is present in the real nomagma build.
pub fn provided_exports(
    lazy: &FileFacts,
    core_defines: &dyn Fn(&str) -> bool,
    spec: &PayloadSpec,
) -> Vec<String> {
    let namespaces: std::collections::HashSet<&str> = lazy
        .elf
        .symbols
        .undefined_names()
        .filter(|(n, _)| core_defines(n))
        .filter_map(|(n, _)| top_namespace(n))
        .collect();
    if namespaces.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = lazy
        .elf
        .symbols
        .iter()
        .filter(|s| s.defined && s.bind == goblin::elf::sym::STB_GLOBAL)
        .filter(|s| {
            matches!(
                s.kind,
                goblin::elf::sym::STT_FUNC
                    | goblin::elf::sym::STT_OBJECT
                    | goblin::elf::sym::STT_GNU_IFUNC
            )
        })
        .map(|s| s.name)
        .filter(|n| top_namespace(n).is_some_and(|ns| namespaces.contains(ns)))
        .filter(|n| !spec.is_payload_symbol(n) && !names_component(n, spec))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The imports the stock library's code run at load refers to that a core file defines: the
/// `DispatchStub` objects its static initialisers store kernels into and the registration
/// functions they call (see [`crate::elf::ElfView::load_time_imports`] for how they are read).
/// Names the payload's own initialisers touch elsewhere (CUDA's `__cudaRegisterFunction`) are not
/// the core's and drop out.
pub fn load_registrations(lazy: &FileFacts, core_defines: &dyn Fn(&str) -> bool) -> Vec<String> {
    lazy.load_time_imports
        .iter()
        .flatten()
        .filter(|n| core_defines(n))
        .cloned()
        .collect()
}

/// The outermost namespace of a mangled C++ entity, of its vtable, typeinfo or typeinfo name:
/// `at` for `_ZN2at6native3fooEv` and `_ZTVN3c105ErrorE`. `None` for C names, global-scope C++
/// names and `std`.
fn top_namespace(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("_Z")?;
    let rest = ["TV", "TI", "TS"]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .unwrap_or(rest);
    let rest = rest.strip_prefix('N')?.trim_start_matches(['r', 'V', 'K']);
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    rest.get(digits..digits + len)
}

/// Whether the entity's own name (last scope, no template arguments) starts with a component's
/// name: `at::native::magmaCholesky<double>(…)` for MAGMA.
fn names_component(name: &str, spec: &PayloadSpec) -> bool {
    // The own name is spelled out in the mangled one, so a name that nowhere contains a
    // component's name cannot start with it: skip the demangler (about 10 µs a name, 2 ms of
    // a torch plan) for those.
    let components = spec.component_names();
    let spelled = |c: &&str| {
        c.is_empty()
            || name
                .as_bytes()
                .windows(c.len())
                .any(|w| w.eq_ignore_ascii_case(c.as_bytes()))
    };
    if !components.iter().any(spelled) {
        return false;
    }
    let full = demangle(name);
    let mut depth = 0usize;
    let mut base = String::new();
    for c in full.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            _ if depth == 0 => base.push(c),
            _ => {}
        }
    }
    let own = base
        .rsplit("::")
        .next()
        .unwrap_or("")
        .rsplit(' ')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    components
        .iter()
        .any(|c| own.starts_with(&c.to_ascii_lowercase()))
}
