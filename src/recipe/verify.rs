//! `splitpkg verify-variant`: check one build of the lazy library against its variant and the
//! loader contract. Recipes run it in their test section, so a nomagma package that still carries
//! MAGMA, or one that lost an export the core needs, fails at build time instead of in a user's
//! first linalg call.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis::contract::ContractFile;
use crate::analysis::payload::{self, PayloadSpec};
use crate::analysis::plan::Plan;
use crate::elf::ElfView;
use crate::error::{Context, Error, Result};
use crate::input::Tree;
use crate::recipe::needed;
use crate::recipe::split::SplitVariant;

/// One check `verify-variant` made on a built lazy library, and what it found.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecipeCheck {
    /// What the check is about.
    pub name: String,
    /// Whether the library passed it.
    pub pass: bool,
    /// What was found, in one line.
    pub detail: String,
    /// The check could not run (code of a machine splitpkg does not read): it fails unless the
    /// user accepts unchecked items ([`VerifyReport::accept_unchecked`]), and never reads "ok".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

impl RecipeCheck {
    fn new(name: &str, pass: bool, detail: String) -> RecipeCheck {
        RecipeCheck {
            name: name.into(),
            pass,
            detail,
            unchecked: false,
        }
    }

    /// A check that could not run: failed, and says why.
    fn not_checked(name: &str, why: String) -> RecipeCheck {
        RecipeCheck {
            name: name.into(),
            pass: false,
            detail: format!("not checked: {why}"),
            unchecked: true,
        }
    }
}

/// What `verify-variant` found: whether a built lazy library is the variant its name says. Read
/// back (`Deserialize`) by the tests, and by whoever keeps a build's report, as it is written.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyReport {
    /// Which document this is: `splitpkg-verify`.
    pub schema: String,
    /// The version of the report's layout.
    pub schema_version: u32,
    /// The library checked, as given.
    pub library: String,
    /// The variant it should be (`magma`, `nomagma`).
    pub variant: String,
    /// Whether that variant carries the payload.
    pub with_payload: bool,
    /// Whether every check passed (an unchecked one only when it was accepted).
    pub pass: bool,
    /// Every check, in order.
    pub checks: Vec<RecipeCheck>,
    /// What was not checked, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `verify-variant --json`, and each check a build keeps (`build-variant`'s `verify`).
impl crate::document::Document for VerifyReport {
    const SCHEMA: &'static str = "splitpkg-verify";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "verify report";
    const SCHEMA_FILE: &'static str = "verify.schema.json";
    const TITLE: &'static str = "splitpkg verify-variant report";
    const ABOUT: &'static str = "What `splitpkg verify-variant --json` found: whether a built lazy library is the variant its name says, check by check. Fields are only added within a schema_version.";
}

/// `lib_dirs`: check every strong import against the NEEDED libraries, looked up there first
/// ([`needed`]); `None` where the libraries the variant will meet are not at hand (`pack` and
/// `wheel` take a built file from elsewhere: the check belongs to the build, which runs
/// `verify-variant`).
pub fn verify_variant(
    path: &Path,
    variant: &str,
    contract: &ContractFile,
    lib_dirs: Option<&[PathBuf]>,
) -> Result<VerifyReport> {
    let Some(with_payload) = payload::variant_carries(variant, &contract.dep) else {
        return Err(Error::Usage(format!(
            "--variant must be {} or no{}, not {variant}",
            contract.dep, contract.dep
        )));
    };
    let display = path.display().to_string();
    let map = crate::input::map_file(path)?;
    let view = ElfView::parse(&map).elf_at(&display)?;
    let mut spec = PayloadSpec::for_dep(&contract.dep, &[]);
    spec.symbol_prefixes = contract.symbol_prefixes.clone();
    spec.dso_prefixes = contract.library_prefixes.clone();
    let facts = view.facts(&spec.mention_words(), None).elf_at(&display)?;
    let name = crate::input::Tree::file_name(&display).to_string();
    let pay = payload::scan(&view, &facts, &name, map.len() as u64, &spec);

    let mut checks = Vec::new();
    let mut check =
        |name: &str, pass: bool, detail: String| checks.push(RecipeCheck::new(name, pass, detail));

    match &facts.soname {
        Some(soname) => check(
            "soname",
            soname == &contract.library,
            format!(
                "SONAME {:?}, the loader asks for {:?}",
                soname, contract.library
            ),
        ),
        // Without a SONAME, ld.so knows a library by the file it opened (onnxruntime's providers).
        None => check(
            "soname",
            name == contract.library,
            format!(
                "no SONAME: known by its file name {:?}, the loader asks for {:?}",
                name, contract.library
            ),
        ),
    }
    for rc in payload::Presence::scan(&facts, &pay, &spec).rule(with_payload) {
        check(rc.name, rc.pass, rc.detail);
    }
    checks.extend(contract_checks(&view, &facts, contract));
    let mut notes = Vec::new();
    if let Some(dirs) = lib_dirs {
        let r = needed::resolve(path, &view, &facts, dirs);
        // Without --lib-dir, a library whose dependencies are not installed beside it (a lazy
        // package's own test environment, a file taken out of its tree) is not failed for that:
        // the report says what was not checked. Named directories make the check strict.
        if r.not_found.is_empty() || !dirs.is_empty() {
            checks.push(imports_check(&r));
        } else {
            notes.push(format!(
                "imports not checked: NEEDED {} not found (pass --lib-dir DIR where they are)",
                r.not_found.join(", ")
            ));
        }
    }
    let pass = checks.iter().all(|c| c.pass);
    Ok(VerifyReport {
        schema: "splitpkg-verify".into(),
        schema_version: 1,
        library: display,
        variant: variant.to_string(),
        with_payload,
        pass,
        checks,
        notes,
    })
}

/// The checks of what the stock library does for the core, beyond carrying the payload or not:
/// the names the loader looks up, the core imports and the stock file provides, and the
/// registrations it makes at load. `smoke`'s identity check applies them too
/// ([`check_contract`]).
pub fn contract_checks(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    contract: &ContractFile,
) -> Vec<RecipeCheck> {
    let mut checks = Vec::new();
    let mut check =
        |name: &str, pass: bool, detail: String| checks.push(RecipeCheck::new(name, pass, detail));
    for (what, names) in [
        ("exports what the loader looks up", &contract.loader_lookups),
        ("exports what core files import", &contract.required_exports),
        // What the stock library provides without being named by the core: a stub with the
        // right SONAME, or a build that left a translation unit out, lacks some of it.
        (
            "exports what the stock provides",
            &contract.provided_exports,
        ),
    ] {
        let missing: Vec<&String> = names.iter().filter(|n| !facts.symbols.defines(n)).collect();
        check(what, missing.is_empty(), presence(names.len(), &missing));
    }
    checks.push(registrations_check(view, facts, contract));
    checks
}

/// The dispatch registrations the stock library makes while it is loaded: without them every
/// call the core routes to this library finds no kernel (or, for the unguarded wrappers, reloads
/// forever). Where either side's code was not read the check is not made, and says so: an empty
/// list read from nothing must not pass for "registers nothing".
fn registrations_check(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    contract: &ContractFile,
) -> RecipeCheck {
    const NAME: &str = "registers at load like the stock";
    if let Some(unread) = &contract.load_registrations_not_read {
        return RecipeCheck::not_checked(
            NAME,
            format!(
                "the stock library's registrations were not read: {}",
                unread.describe()
            ),
        );
    }
    let Some(refs) = view.load_time_imports() else {
        return RecipeCheck::not_checked(
            NAME,
            format!(
                "splitpkg cannot read {} code (it reads x86-64 and AArch64); {} registrations to check",
                facts.machine,
                contract.load_registrations.len()
            ),
        );
    };
    let missing: Vec<&String> = contract
        .load_registrations
        .iter()
        .filter(|n| refs.binary_search(n).is_err())
        .collect();
    RecipeCheck::new(
        NAME,
        missing.is_empty(),
        presence(contract.load_registrations.len(), &missing),
    )
}

/// The link editor's `--no-undefined`, made on the finished file: a NEEDED library that cannot be
/// found fails too, since what it would define cannot be shown.
fn imports_check(r: &needed::Resolution) -> RecipeCheck {
    let name = "imports resolved by NEEDED";
    if !r.not_found.is_empty() {
        let detail = format!(
            "NEEDED {} not found (pass --lib-dir DIR where they are)",
            r.not_found.join(", ")
        );
        return RecipeCheck::new(name, false, detail);
    }
    let detail = if r.unresolved.is_empty() {
        format!("all {} strong imports defined", r.imports)
    } else {
        format!(
            "{} of {} defined by none: {}",
            r.unresolved.len(),
            r.imports,
            first_few(&r.unresolved)
        )
    };
    RecipeCheck::new(name, r.unresolved.is_empty(), detail)
}

/// [`contract_checks`] of the library at `path`.
pub fn check_contract(path: &Path, contract: &ContractFile) -> Result<Vec<RecipeCheck>> {
    let display = path.display().to_string();
    let map = crate::input::map_file(path)?;
    let view = ElfView::parse(&map).elf_at(&display)?;
    let facts = view.facts(&[], None).elf_at(&display)?;
    Ok(contract_checks(&view, &facts, contract))
}

/// "all N present", or the missing names, demangled (the first 5, then a count).
fn presence(total: usize, missing: &[&String]) -> String {
    if missing.is_empty() {
        return format!("all {total} present");
    }
    format!("missing: {}", first_few(missing))
}

/// The first 5 names, demangled, then how many more.
fn first_few<S: AsRef<str>>(names: &[S]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(5)
        .map(|s| payload::demangle(s.as_ref()))
        .collect();
    let more = if names.len() > shown.len() {
        format!(" and {} more", names.len() - shown.len())
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

impl VerifyReport {
    /// `--accept-unchecked`: the checks that could not run no longer fail the report (each keeps
    /// its "not checked" detail, and a note says they were accepted).
    pub fn accept_unchecked(&mut self) {
        let mut accepted = Vec::new();
        for c in self.checks.iter_mut().filter(|c| c.unchecked) {
            c.pass = true;
            accepted.push(c.name.clone());
        }
        if !accepted.is_empty() {
            self.notes.push(format!(
                "accepted unchecked (--accept-unchecked): {}",
                accepted.join(", ")
            ));
        }
        self.pass = self.checks.iter().all(|c| c.pass);
    }
}

/// The report for people: the library, the variant and PASS or FAIL, then one line per check.
pub fn report_text(r: &VerifyReport) -> String {
    let mut s = format!(
        "{} as {}: {}\n",
        r.library,
        r.variant,
        if r.pass { "PASS" } else { "FAIL" }
    );
    for c in &r.checks {
        // An unchecked item never reads "ok", accepted or not.
        let status = match (c.unchecked, c.pass) {
            (true, true) => "n/c ",
            (false, true) => "ok  ",
            (_, false) => "FAIL",
        };
        s.push_str(&format!("  {} {:<34} {}\n", status, c.name, c.detail));
    }
    for n in &r.notes {
        s.push_str(&format!("  note {n}\n"));
    }
    s
}

/// The other build of the lazy library for an output format (`pack`, `wheel`): `given`
/// (`--lazy-variant NAME=FILE`) must name the variant the tree does not carry (`without`), and the
/// file must pass `verify-variant` against the plan's contract. `Ok(None)` when none was given:
/// the other variant is then reported missing ([`missing_variant_reason`]), never invented.
pub fn other_variant_file(
    plan: &Plan,
    given: Option<&(String, PathBuf)>,
    with: &SplitVariant,
    without: &SplitVariant,
) -> Result<Option<PathBuf>> {
    let Some((name, file)) = given else {
        return Ok(None);
    };
    if name != &without.name {
        return Err(Error::Usage(format!(
            "--lazy-variant {name}=…: only the {} build can be added; the {} build is the tree's own",
            without.name, with.name
        )));
    }
    let lazy = plan
        .lazy_library
        .as_ref()
        .ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let contract = ContractFile::from_plan(plan)
        .ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let report = verify_variant(file, name, &contract, None)?;
    if !report.pass {
        let failed: Vec<String> = report
            .checks
            .iter()
            .filter(|c| !c.pass)
            .map(|c| format!("{} ({})", c.name, c.detail))
            .collect();
        return Err(Error::Refused(format!(
            "{}: not a {name} build of {}: {}",
            file.display(),
            Tree::file_name(&lazy.path),
            failed.join("; ")
        )));
    }
    Ok(Some(file.clone()))
}

/// Why the other variant is missing when no `--lazy-variant` was given.
pub fn missing_variant_reason(without: &SplitVariant, lazy_path: &str) -> String {
    format!(
        "no {} build of {} was given (--lazy-variant {}=FILE); none was invented",
        without.name,
        Tree::file_name(lazy_path),
        without.name
    )
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    //! The variant rule on real gcc libraries: a miniature torch whose lazy library exports
    //! C++-named functions in the core's namespace and, from a static initialiser, stores kernels
    //! into dispatch-stub objects of `libtorch_cpu.so` and calls a registration function of
    //! `libtorch_cuda.so` — as `REGISTER_CUDA_DISPATCH` and `DispatchInitializer` do.
    use super::*;
    use crate::analysis::testkit::{LAZY, MAGMA, Scratch, loader};

    const CORE_CPU: &str = "struct stub { void *cpu; void *cuda; };\n\
        struct stub cholesky_stub __asm__(\"_ZN2at6native13cholesky_stubE\");\n\
        struct stub svd_stub __asm__(\"_ZN2at6native8svd_stubE\");\n\
        int at_fn(int x) __asm__(\"_ZN2at6native5at_fnEi\");\n\
        int at_fn(int x) { return x + 1; }\n";

    /// The lazy library: `with_magma` adds the payload and a MAGMA wrapper; `solver`/`blas` are
    /// its two "translation units"; `register` its static initialiser.
    fn lazy(with_magma: bool, solver: bool, blas: bool, register: bool) -> String {
        let mut c = String::from(
            "struct stub { void *cpu; void *cuda; };\n\
             extern struct stub cholesky_stub __asm__(\"_ZN2at6native13cholesky_stubE\");\n\
             extern struct stub svd_stub __asm__(\"_ZN2at6native8svd_stubE\");\n\
             extern int at_fn(int) __asm__(\"_ZN2at6native5at_fnEi\");\n\
             extern void register_dispatch(void *) __asm__(\"_ZN2at6native22registerLinalgDispatchEPv\");\n\
             static int cholesky_kernel(int x) { return at_fn(x) + 2; }\n\
             static int svd_kernel(int x) { return at_fn(x) + 3; }\n\
             int linalg_entry(int x) { return cholesky_kernel(x) + svd_kernel(x); }\n\
             int lazy_weak(int x) __asm__(\"_ZN2at6native9lazy_weakEi\") __attribute__((weak));\n\
             int lazy_weak(int x) { return x; }\n",
        );
        if with_magma {
            c.push_str(MAGMA);
            c.push_str(
                "int magma_wrapper(int x) __asm__(\"_ZN2at6native13magmaCholeskyIdEEvi\");\n\
                 int magma_wrapper(int x) { return magma_dgetrf_gpu(x); }\n",
            );
        }
        if solver {
            c.push_str(
                "int solver_handle(int x) __asm__(\"_ZN2at4cuda6solver6handleEi\");\nint solver_handle(int x) { return at_fn(x) * 5; }\n",
            );
        }
        if blas {
            c.push_str("int blas_gemm(int x) __asm__(\"_ZN2at4cuda4blas4gemmEi\");\nint blas_gemm(int x) { return at_fn(x) * 7; }\n");
        }
        if register {
            c.push_str(
                "__attribute__((constructor)) static void registrations(void) {\n\
                 \x20   cholesky_stub.cuda = (void *)cholesky_kernel;\n\
                 \x20   svd_stub.cuda = (void *)svd_kernel;\n\
                 \x20   register_dispatch((void *)cholesky_kernel);\n\
                 }\n",
            );
        }
        c
    }

    /// The tree with the stock (MAGMA) library, its contract, and the scratch to build variants in.
    fn stock() -> (Scratch, ContractFile) {
        let mut s = Scratch::new();
        s.lib("torch/lib/libtorch_cpu.so", CORE_CPU, &[])
            .lib(
                "torch/lib/libtorch_cuda.so",
                &format!(
                    "{}void register_dispatch(void *p) __asm__(\"_ZN2at6native22registerLinalgDispatchEPv\");\n\
                     void register_dispatch(void *p) {{ (void)p; }}\n",
                    loader("torch_cuda_linalg_call", LAZY, "linalg_entry")
                ),
                &["torch/lib/libtorch_cpu.so"],
            )
            .lib(&format!("torch/lib/{LAZY}"), &lazy(true, true, true, true), &["torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so"]);
        let plan = s.plan();
        let contract = ContractFile::from_plan(&plan).expect("a lazy library");
        (s, contract)
    }

    /// A build of the lazy library outside the tree the contract was made of.
    fn variant(s: &mut Scratch, dir: &str, code: &str) -> PathBuf {
        let path = format!("variants/{dir}/{LAZY}");
        s.lib(
            &path,
            code,
            &["torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so"],
        );
        s.tree().join(path)
    }

    fn failed(r: &VerifyReport) -> Vec<&str> {
        r.checks
            .iter()
            .filter(|c| !c.pass)
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn the_contract_records_the_stock_files_core_exports_and_load_time_registrations() {
        let (_s, c) = stock();
        assert_eq!(
            c.provided_exports,
            ["_ZN2at4cuda4blas4gemmEi", "_ZN2at4cuda6solver6handleEi"],
            "strong exports in the core's namespace; not the weak one, not linalg_entry (C), not magmaCholesky<double>"
        );
        assert_eq!(
            c.load_registrations,
            [
                "_ZN2at6native13cholesky_stubE",
                "_ZN2at6native22registerLinalgDispatchEPv",
                "_ZN2at6native8svd_stubE"
            ],
            "the stub objects written and the registration function called from the initialiser"
        );
        assert_eq!(c.schema_version, crate::analysis::contract::SCHEMA_VERSION);
    }

    #[test]
    fn a_faithful_rebuild_passes_and_the_stock_file_fails_only_as_nomagma() {
        let (mut s, c) = stock();
        let rebuilt = variant(&mut s, "nomagma", &lazy(false, true, true, true));
        let r = verify_variant(&rebuilt, "nomagma", &c, Some(&[])).unwrap();
        assert!(r.pass, "{}", report_text(&r));
        let stock = s.tree().join(format!("torch/lib/{LAZY}"));
        let r = verify_variant(&stock, "magma", &c, Some(&[])).unwrap();
        assert!(r.pass, "{}", report_text(&r));
        let r = verify_variant(&stock, "nomagma", &c, Some(&[])).unwrap();
        assert_eq!(
            failed(&r),
            ["no payload symbols defined"],
            "{}",
            report_text(&r)
        );
    }

    #[test]
    fn a_stub_with_the_right_soname_and_one_export_is_rejected() {
        let (mut s, c) = stock();
        let stub = variant(
            &mut s,
            "stub",
            "int at_cuda_getCurrentCUDASolverDnHandle(void) __asm__(\"_ZN2at4cuda6solver6handleEi\");\n\
             int at_cuda_getCurrentCUDASolverDnHandle(void) { return 0; }\nint linalg_entry(int x) { return x; }\n",
        );
        let r = verify_variant(&stub, "nomagma", &c, Some(&[])).unwrap();
        assert_eq!(
            failed(&r),
            [
                "exports what the stock provides",
                "registers at load like the stock"
            ],
            "{}",
            report_text(&r)
        );
        let text = report_text(&r);
        assert!(
            text.contains("missing: at::cuda::blas::gemm(int)"),
            "{text}"
        );
        assert!(
            text.contains("at::native::cholesky_stub")
                && text.contains("at::native::registerLinalgDispatch(void*)"),
            "{text}"
        );
    }

    #[test]
    fn a_build_with_a_translation_unit_left_out_is_rejected() {
        let (mut s, c) = stock();
        let no_blas = variant(&mut s, "no-blas", &lazy(false, true, false, true));
        let r = verify_variant(&no_blas, "nomagma", &c, Some(&[])).unwrap();
        assert_eq!(
            failed(&r),
            ["exports what the stock provides"],
            "{}",
            report_text(&r)
        );
        // The unit holding the registrations (torch's BatchLinearAlgebra.cpp) left out.
        let no_registrations = variant(&mut s, "no-init", &lazy(false, true, true, false));
        let r = verify_variant(&no_registrations, "nomagma", &c, Some(&[])).unwrap();
        assert_eq!(
            failed(&r),
            ["registers at load like the stock"],
            "{}",
            report_text(&r)
        );
    }

    #[test]
    fn an_import_no_needed_library_defines_is_rejected() {
        let (mut s, c) = stock();
        let code = lazy(false, true, true, true)
            + "extern int at_gone(int) __asm__(\"_ZN2at6native7at_goneEi\");\nint call_gone(int x) { return at_gone(x); }\n";
        let loose = variant(&mut s, "loose", &code);
        let r = verify_variant(&loose, "nomagma", &c, Some(&[])).unwrap();
        assert_eq!(
            failed(&r),
            ["imports resolved by NEEDED"],
            "{}",
            report_text(&r)
        );
        assert!(
            report_text(&r).contains("defined by none: at::native::at_gone(int)"),
            "{}",
            report_text(&r)
        );
        // pack and wheel apply the contract only: the libraries are not at hand there.
        assert!(verify_variant(&loose, "nomagma", &c, None).unwrap().pass);
    }

    #[test]
    fn imports_are_checked_where_the_needed_libraries_are_found_and_strictly_with_lib_dir() {
        let (mut s, c) = stock();
        let rebuilt = variant(&mut s, "nomagma", &lazy(false, true, true, true));
        // Moved away from the tree its RPATH ($ORIGIN/../../torch/lib) leads to.
        let moved = s.tree().join(format!("elsewhere/{LAZY}"));
        std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
        std::fs::copy(&rebuilt, &moved).unwrap();
        let r = verify_variant(&moved, "nomagma", &c, Some(&[])).unwrap();
        assert!(r.pass, "{}", report_text(&r));
        assert_eq!(
            r.notes,
            [
                "imports not checked: NEEDED libtorch_cpu.so, libtorch_cuda.so not found (pass --lib-dir DIR where they are)"
            ]
        );
        // A named directory makes the check strict: one that lacks them fails.
        let r = verify_variant(&moved, "nomagma", &c, Some(&[s.tree().join("variants")])).unwrap();
        assert_eq!(
            failed(&r),
            ["imports resolved by NEEDED"],
            "{}",
            report_text(&r)
        );
        assert!(
            report_text(&r)
                .contains("NEEDED libtorch_cpu.so, libtorch_cuda.so not found (pass --lib-dir"),
            "{}",
            report_text(&r)
        );
        let r = verify_variant(&moved, "nomagma", &c, Some(&[s.tree().join("torch/lib")])).unwrap();
        assert!(r.pass && r.notes.is_empty(), "{}", report_text(&r));
    }

    #[test]
    fn smokes_identity_check_applies_the_contract() {
        use crate::smoke::eval::{CheckStatus, identity_check};
        let (mut s, c) = stock();
        let spec = PayloadSpec::for_dep("magma", &[]);
        for (dir, code, pass) in [
            ("rebuilt", lazy(false, true, true, true), true),
            (
                "stub",
                "int linalg_entry(int x) { return x; }\n".to_string(),
                false,
            ),
        ] {
            let lib = variant(&mut s, dir, &code);
            let facts = crate::smoke::variant::lazy_facts(&lib, &spec).unwrap();
            assert!(!facts.has_magma, "{dir}");
            let failures: Vec<String> = check_contract(&lib, &c)
                .unwrap()
                .into_iter()
                .filter(|c| !c.pass)
                .map(|c| c.name)
                .collect();
            let id = identity_check(
                "nomagma",
                "magma",
                false,
                Some(&facts.presence()),
                Some(&failures),
                LAZY,
            );
            assert_eq!(id.status == CheckStatus::Pass, pass, "{dir}: {id:?}");
        }
    }

    #[test]
    fn pack_and_wheel_refuse_a_stub_through_the_same_rule() {
        let (mut s, _) = stock();
        let plan = s.plan();
        let stub = variant(&mut s, "stub", "int linalg_entry(int x) { return x; }\n");
        let with = SplitVariant {
            name: "magma".into(),
            with_payload: true,
            preferred: true,
        };
        let without = SplitVariant {
            name: "nomagma".into(),
            with_payload: false,
            preferred: false,
        };
        let err = other_variant_file(&plan, Some(&("nomagma".to_string(), stub)), &with, &without)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not a nomagma build") && err.contains("exports what the stock provides"),
            "{err}"
        );
    }
}
