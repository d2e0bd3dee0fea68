//! What the stock lazy library offers the core, read from the library itself: its strong exports
//! in the core's namespaces ([`provided_exports`]) and the registrations its code run at load makes
//! ([`load_registrations`]). The proof (`verdict`) records both in the loader contract; they live
//! apart from the contract file (`contract`), which is built from the plan, so the proof does not
//! import what is built from its own result.

use crate::analysis::inspect::FileFacts;
use crate::analysis::payload::{PayloadSpec, demangle};

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
