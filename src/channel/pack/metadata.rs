//! Each package's `info/`: `index.json` (exactly the split model's metadata), `paths.json` (every
//! staged path with its size and SHA-256) and `about.json` (what the package is, where it came from).

use super::stage::{Build, Staged};
use crate::analysis::plan::{Plan, Role};
use crate::channel::info::NOARCH;
use crate::error::{Error, Result};
use crate::recipe::split::{PackageModel, Split};

pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Core => "core",
        Role::Lazy => "lazy",
        Role::Payload => "payload",
    }
}

/// `info/index.json`, `info/paths.json`, `info/about.json` for one package.
pub(super) fn info_files(b: &Build, split: &Split, plan: &Plan, input_name: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let m = &b.model;
    let noarch = b.subdir == NOARCH;
    let mut index = serde_json::json!({
        "name": m.name,
        "version": m.version,
        "build": m.build,
        "build_number": m.build_number,
        "depends": m.depends,
        "subdir": b.subdir,
    });
    if !m.constrains.is_empty() {
        index["constrains"] = serde_json::json!(m.constrains);
    }
    if !m.track_features.is_empty() {
        index["track_features"] = serde_json::json!(m.track_features.join(","));
    }
    if noarch {
        index["noarch"] = serde_json::json!("generic");
    } else {
        index["arch"] = serde_json::json!("x86_64");
        index["platform"] = serde_json::json!("linux");
    }
    if b.standin.is_some() {
        index["license"] = serde_json::json!("stand-in");
    }
    let parsed: rattler_conda_types::package::IndexJson =
        serde_json::from_value(index).map_err(|e| Error::failed(format!("index.json for {}", m.name), e))?;
    let index_text = serde_json::to_string_pretty(&parsed).map_err(|e| Error::failed("JSON", e))? + "\n";

    let entries: Vec<serde_json::Value> = b
        .content
        .iter()
        .map(|(rel, s)| match s {
            Staged::File { size, sha256 } => {
                serde_json::json!({"_path": rel, "path_type": "hardlink", "sha256": hex::encode(sha256), "size_in_bytes": size})
            }
            Staged::Symlink { .. } => serde_json::json!({"_path": rel, "path_type": "softlink"}),
        })
        .collect();
    let paths = serde_json::json!({"paths": entries, "paths_version": 1});
    // Through rattler's own type, so a field it would reject fails here, not in an installer.
    let parsed: rattler_conda_types::package::PathsJson =
        serde_json::from_value(paths.clone()).map_err(|e| Error::failed(format!("paths.json for {}", m.name), e))?;
    if parsed.paths.len() != b.content.len() {
        return Err(Error::internal(format!("paths.json for {}: lost entries", m.name)));
    }
    let paths_text = serde_json::to_string_pretty(&paths).map_err(|e| Error::failed("JSON", e))? + "\n";

    let extra = match &b.standin {
        Some(s) => s.about_extra(),
        None => {
            let mut e = serde_json::json!({
                "splitpkg_role": role_name(b.role),
                "splitpkg_input": input_name,
                "splitpkg_verdict": plan.verdict.label(),
                "splitpkg_version": env!("CARGO_PKG_VERSION"),
            });
            if let Some(v) = &m.variant {
                e["splitpkg_variant"] = serde_json::json!(v.name);
                e["splitpkg_preferred"] = serde_json::json!(v.preferred);
            }
            if b.role == Role::Lazy && !m.track_features.is_empty() {
                e["splitpkg_track_feature"] = serde_json::json!(split.track_feature());
            }
            e
        }
    };
    let mut about = serde_json::json!({
        "summary": b.summary,
        "description": "Packed by splitpkg pack from the split plan; see docs/pack.md.",
        "extra": extra,
    });
    if b.standin.is_some() {
        about["license"] = serde_json::json!("stand-in");
    }
    let _: rattler_conda_types::package::AboutJson =
        serde_json::from_value(about.clone()).map_err(|e| Error::failed(format!("about.json for {}", m.name), e))?;
    let about_text = serde_json::to_string_pretty(&about).map_err(|e| Error::failed("JSON", e))? + "\n";
    Ok(vec![
        ("info/about.json".into(), about_text.into_bytes()),
        ("info/index.json".into(), index_text.into_bytes()),
        ("info/paths.json".into(), paths_text.into_bytes()),
    ])
}

/// The index.json read back from a package must carry exactly the model's metadata.
pub(super) fn check_index(index: &rattler_conda_types::package::IndexJson, m: &PackageModel, file: &str) -> Result<()> {
    let got = (
        index.name.as_normalized().to_string(),
        index.version.to_string(),
        index.build.to_string(),
        index.build_number,
        index.depends.clone(),
        index.constrains.clone(),
        index.track_features.clone(),
    );
    let want = (
        m.name.clone(),
        m.version.clone(),
        m.build.clone(),
        m.build_number,
        m.depends.clone(),
        m.constrains.clone(),
        m.track_features.clone(),
    );
    if got != want {
        return Err(Error::internal(format!("{file}: index.json read back as {got:?}, the split says {want:?}")));
    }
    Ok(())
}
