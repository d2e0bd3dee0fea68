//! `splitpkg verify-variant`: check one build of the lazy library against its variant and the
//! loader contract. Recipes run it in their test section, so a nomagma package that still carries
//! MAGMA, or one that lost an export the core needs, fails at build time instead of in a user's
//! first linalg call.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::contract::ContractFile;
use crate::analysis::payload::{self, PayloadSpec};
use crate::analysis::plan::Plan;
use crate::elf::ElfView;
use crate::error::{Error, Result};
use crate::input::Tree;
use crate::recipe::split::Variant;

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub pass: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub schema: &'static str,
    pub schema_version: u32,
    pub library: String,
    pub variant: String,
    pub with_payload: bool,
    pub pass: bool,
    pub checks: Vec<Check>,
}

pub fn verify_variant(path: &Path, variant: &str, contract: &ContractFile) -> Result<VerifyReport> {
    let Some(with_payload) = payload::variant_carries(variant, &contract.dep) else {
        return Err(Error::Usage(format!("--variant must be {} or no{}, not {variant}", contract.dep, contract.dep)));
    };
    let display = path.display().to_string();
    let map = crate::input::map_file(path)?;
    let view = ElfView::parse(&map).map_err(|e| Error::elf(&display, e))?;
    let mut spec = PayloadSpec::for_dep(&contract.dep, &[]);
    spec.symbol_prefixes = contract.symbol_prefixes.clone();
    spec.dso_prefixes = contract.library_prefixes.clone();
    let facts = view.facts(&spec.mention_words(), None).map_err(|e| Error::elf(&display, e))?;
    let name = crate::input::Tree::file_name(&display).to_string();
    let pay = payload::scan(&view, &facts, &name, map.len() as u64, &spec);

    let mut checks = Vec::new();
    let mut check = |name: &str, pass: bool, detail: String| checks.push(Check { name: name.into(), pass, detail });

    match &facts.soname {
        Some(soname) => {
            check("soname", soname == &contract.library, format!("SONAME {:?}, the loader asks for {:?}", soname, contract.library))
        }
        // Without a SONAME, ld.so knows a library by the file it opened (onnxruntime's providers).
        None => check(
            "soname",
            name == contract.library,
            format!("no SONAME: known by its file name {:?}, the loader asks for {:?}", name, contract.library),
        ),
    }
    for rc in payload::Presence::scan(&facts, &pay, &spec).rule(with_payload) {
        check(rc.name, rc.pass, rc.detail);
    }
    for (what, names) in
        [("exports what the loader looks up", &contract.loader_lookups), ("exports what core files import", &contract.required_exports)]
    {
        let missing: Vec<&String> = names.iter().filter(|n| !facts.symbols.defines(n)).collect();
        check(
            what,
            missing.is_empty(),
            if missing.is_empty() {
                format!("all {} present", names.len())
            } else {
                format!("missing: {}", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))
            },
        );
    }
    let pass = checks.iter().all(|c| c.pass);
    Ok(VerifyReport {
        schema: "splitpkg-verify",
        schema_version: 1,
        library: display,
        variant: variant.to_string(),
        with_payload,
        pass,
        checks,
    })
}

pub fn report_text(r: &VerifyReport) -> String {
    let mut s = format!("{} as {}: {}\n", r.library, r.variant, if r.pass { "PASS" } else { "FAIL" });
    for c in &r.checks {
        s.push_str(&format!("  {} {:<34} {}\n", if c.pass { "ok  " } else { "FAIL" }, c.name, c.detail));
    }
    s
}

/// The other build of the lazy library for an output format (`pack`, `wheel`): `given`
/// (`--lazy-variant NAME=FILE`) must name the variant the tree does not carry (`without`), and the
/// file must pass `verify-variant` against the plan's contract. `Ok(None)` when none was given:
/// the other variant is then reported missing ([`missing_variant_reason`]), never invented.
pub fn other_variant_file(plan: &Plan, given: Option<&(String, PathBuf)>, with: &Variant, without: &Variant) -> Result<Option<PathBuf>> {
    let Some((name, file)) = given else { return Ok(None) };
    if name != &without.name {
        return Err(Error::Usage(format!(
            "--lazy-variant {name}=…: only the {} build can be added; the {} build is the tree's own",
            without.name, with.name
        )));
    }
    let lazy = plan.lazy_library.as_ref().ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let contract = ContractFile::from_plan(plan).ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let report = verify_variant(file, name, &contract)?;
    if !report.pass {
        let failed: Vec<String> = report.checks.iter().filter(|c| !c.pass).map(|c| format!("{} ({})", c.name, c.detail)).collect();
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
pub fn missing_variant_reason(without: &Variant, lazy_path: &str) -> String {
    format!(
        "no {} build of {} was given (--lazy-variant {}=FILE); none was invented",
        without.name,
        Tree::file_name(lazy_path),
        without.name
    )
}
