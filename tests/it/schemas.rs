//! `docs/*.schema.json` are generated from the document types ([`Document::generated_schema`]), as uv
//! generates its settings schema: a committed schema that differs from its type fails here with
//! the command that regenerates it, so a field cannot be added to a document and not to its schema.

use std::path::Path;

use splitpkg::document::Document;

use crate::common::repo;

const REGENERATE: &str = "tools/generate-schemas";

/// The generated text of `D`'s schema and its file; rewritten when `SPLITPKG_UPDATE_SCHEMAS` is set.
fn check<D: Document>(update: bool, stale: &mut Vec<String>) -> String {
    let text = serde_json::to_string_pretty(&D::generated_schema()).unwrap() + "\n";
    let path = repo().join("docs").join(D::SCHEMA_FILE);
    if update {
        std::fs::write(&path, &text).unwrap();
    } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        stale.push(D::SCHEMA_FILE.to_string());
    }
    D::SCHEMA_FILE.to_string()
}

#[test]
fn committed_schemas_are_the_generated_ones() {
    use splitpkg::channel::document::{EnvReport, PackReport, SolveReport, SwitchReport};
    let update = std::env::var_os("SPLITPKG_UPDATE_SCHEMAS").is_some();
    let mut stale = Vec::new();
    let mut generated = vec![
        check::<splitpkg::analysis::plan::Plan>(update, &mut stale),
        check::<splitpkg::analysis::document::InspectReport>(update, &mut stale),
        check::<splitpkg::smoke::SmokeReport>(update, &mut stale),
        check::<splitpkg::fatbin::scan::FatbinReport>(update, &mut stale),
        check::<PackReport>(update, &mut stale),
        check::<splitpkg::wheel::WheelReport>(update, &mut stale),
        check::<SolveReport>(update, &mut stale),
        check::<EnvReport>(update, &mut stale),
        check::<SwitchReport>(update, &mut stale),
        check::<splitpkg::index::IndexReport>(update, &mut stale),
        check::<splitpkg::analysis::contract::ContractFile>(update, &mut stale),
        check::<splitpkg::channel::info::ChannelInfo>(update, &mut stale),
        check::<splitpkg::recipe::verify::VerifyReport>(update, &mut stale),
        check::<splitpkg::recipe::build::BuildReport>(update, &mut stale),
    ];
    assert!(
        stale.is_empty(),
        "stale schema(s) {stale:?}: the document types changed; run `{REGENERATE}` and commit docs/"
    );
    // No hand-written schema beside the generated ones.
    let mut committed: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    committed.sort();
    generated.sort();
    assert_eq!(
        committed, generated,
        "docs/*.schema.json that no document type generates"
    );
    assert!(Path::new(&repo().join(REGENERATE)).exists());
}

/// The contract files committed beside the recipes and as evidence are `emit`'s output: each is
/// valid against the generated contract schema (`emit` and `pack` tests validate fresh ones).
#[test]
fn committed_contract_files_match_their_schema() {
    for f in [
        "recipe/test/contract.json",
        "recipes/torch-2.11/conda-build/contract.json",
        "recipes/torch-2.11/rattler-build/contract.json",
        "docs/evidence/variant-contract/contract-torch-1.13.1-cu117.json",
        "docs/evidence/variant-contract/contract-torch-2.11.0-cu130.json",
    ] {
        let text = std::fs::read_to_string(repo().join(f)).unwrap();
        crate::common::assert_valid(
            "docs/contract.schema.json",
            &serde_json::from_str(&text).unwrap(),
        );
    }
}
