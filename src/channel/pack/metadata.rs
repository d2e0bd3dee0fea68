//! Each package's `info/`: `index.json` (exactly the split model's metadata), `paths.json` (every
//! staged path with its size and SHA-256) and `about.json` (what the package is, where it came from).

use crate::error::Context;
use std::collections::BTreeMap;

use rattler_conda_types::package::{BuildString, IndexJson, PathType, PathsEntry};
use rattler_conda_types::{NoArchType, PackageName, VersionWithSource};
use serde::Serialize;

use super::stage::{Build, StagedEntry};
use crate::analysis::plan::{Plan, Role};
use crate::channel::info::NOARCH;
use crate::channel::standin::AboutExtra;
use crate::error::{Error, Result};
use crate::recipe::split::{PackageModel, Split};

/// The role's name as the package metadata writes it (`core`, `lazy`, `payload`).
pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Core => "core",
        Role::Lazy => "lazy",
        Role::Payload => "payload",
    }
}

/// `info/index.json`, `info/paths.json`, `info/about.json` for one package.
pub(super) fn info_files(
    b: &Build,
    split: &Split,
    plan: &Plan,
    input_name: &str,
) -> Result<Vec<(String, Vec<u8>)>> {
    Ok(vec![
        (
            "info/about.json".into(),
            pretty(&about(
                b,
                &split.track_feature(),
                plan.verdict.label(),
                input_name,
            ))?,
        ),
        ("info/index.json".into(), pretty(&index(b)?)?),
        ("info/paths.json".into(), pretty(&paths(b))?),
    ])
}

fn pretty(value: &impl Serialize) -> Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(value).failed_at("JSON")?;
    text.push(b'\n');
    Ok(text)
}

/// `info/index.json`: the split model's metadata as they are, and where the package installs.
fn index(b: &Build) -> Result<IndexJson> {
    let m = &b.model;
    let noarch = b.subdir == NOARCH;
    Ok(IndexJson {
        arch: (!noarch).then(|| "x86_64".to_string()),
        // Unchecked, as reading an index.json takes it: the build string passed `pack`'s own
        // check (conda's characters), which allows `-` and `!`, which CEP 26's parser refuses.
        build: BuildString::new_unchecked(m.build.clone()),
        build_number: m.build_number,
        constrains: m.constrains.clone(),
        depends: m.depends.clone(),
        extra_depends: BTreeMap::new(),
        features: None,
        flags: Vec::new(),
        license: b.standin.is_some().then(|| "stand-in".to_string()),
        license_family: None,
        name: PackageName::try_from(m.name.as_str())
            .failed_at(format_args!("index.json for {}", m.name))?,
        noarch: if noarch {
            NoArchType::generic()
        } else {
            NoArchType::none()
        },
        platform: (!noarch).then(|| "linux".to_string()),
        purls: None,
        python_site_packages_path: None,
        repodata_revision: None,
        subdir: Some(b.subdir.to_string()),
        timestamp: None,
        track_features: m.track_features.clone(),
        version: m
            .version
            .parse::<VersionWithSource>()
            .failed_at(format_args!("index.json for {}", m.name))?,
    })
}

/// `info/paths.json`: rattler's `PathsEntry` for every staged path, listed in byte order of the
/// path (the order of `Build::content`).
///
/// Not serialized through `PathsJson`: its `Serialize` sorts the entries by `PathBuf`, component
/// by component (`a/b` before `a-b` and `a.h`), while packs have always listed them in byte order
/// (`a-b`, `a.h`, `a/b`). Going through `PathsJson` would reorder the entries of any package with
/// such neighbours (a wheel's `torch-1.13.1.dist-info/` beside `torch/`) and change its bytes.
#[derive(Serialize)]
struct InfoPaths {
    paths: Vec<PathsEntry>,
    paths_version: u64,
}

fn paths(b: &Build) -> InfoPaths {
    let entry = |rel: &String, s: &StagedEntry| {
        let (path_type, sha256, size_in_bytes) = match s {
            StagedEntry::File { size, sha256 } => (PathType::HardLink, Some(*sha256), Some(*size)),
            StagedEntry::InArchive(m) => (PathType::HardLink, Some(m.sha256), Some(m.size)),
            StagedEntry::Symlink { .. } => (PathType::SoftLink, None, None),
        };
        PathsEntry {
            relative_path: rel.into(),
            no_link: false,
            path_type,
            prefix_placeholder: None,
            sha256,
            size_in_bytes,
        }
    };
    InfoPaths {
        paths: b.content.iter().map(|(rel, s)| entry(rel, s)).collect(),
        paths_version: 1,
    }
}

/// `info/about.json` as packed.
///
/// Not rattler's `AboutJson`: it serializes its fields in alphabetical order (`description`,
/// `extra`, `license`, `summary`) and `extra` as a sorted map, while packs have always had
/// `summary` first and `extra` in the order below (the JSON was built with serde_json's
/// `preserve_order`, which the rattler crates turn on). `AboutJson` would change the bytes of
/// every package; `about_reads_as_rattlers_about_json` checks that rattler reads this one.
#[derive(Serialize)]
struct About<'a> {
    summary: &'a str,
    description: &'static str,
    extra: Extra<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    license: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Extra<'a> {
    Packed(PackedExtra<'a>),
    StandIn(AboutExtra),
}

/// What a package made from the input is, for `env` and for people reading `about.json`.
#[derive(Serialize)]
struct PackedExtra<'a> {
    splitpkg_role: &'static str,
    splitpkg_input: &'a str,
    splitpkg_verdict: &'static str,
    splitpkg_version: &'static str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    splitpkg_variant: Option<&'a str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    splitpkg_preferred: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    splitpkg_track_feature: Option<String>,
}

fn about<'a>(
    b: &'a Build,
    track_feature: &str,
    verdict: &'static str,
    input_name: &'a str,
) -> About<'a> {
    let m = &b.model;
    let extra = match &b.standin {
        Some(s) => Extra::StandIn(s.about_extra()),
        None => Extra::Packed(PackedExtra {
            splitpkg_role: role_name(b.role),
            splitpkg_input: input_name,
            splitpkg_verdict: verdict,
            splitpkg_version: env!("CARGO_PKG_VERSION"),
            splitpkg_variant: m.variant.as_ref().map(|v| v.name.as_str()),
            splitpkg_preferred: m.variant.as_ref().map(|v| v.preferred),
            splitpkg_track_feature: (b.role == Role::Lazy && !m.track_features.is_empty())
                .then(|| track_feature.to_string()),
        }),
    };
    About {
        summary: &b.summary,
        description: "Packed by splitpkg pack from the split plan; see docs/pack.md.",
        extra,
        license: b.standin.as_ref().map(|_| "stand-in"),
    }
}

/// The index.json read back from a package must carry exactly the model's metadata.
pub(super) fn check_index(index: &IndexJson, m: &PackageModel, file: &str) -> Result<()> {
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
        return Err(Error::internal(format!(
            "{file}: index.json read back as {got:?}, the split says {want:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use rattler_conda_types::package::{AboutJson, PathsJson};

    use super::*;
    use crate::channel::info::SUBDIR;
    use crate::recipe::split::SplitVariant;

    fn build(role: Role, variant: Option<SplitVariant>, content: &[(&str, StagedEntry)]) -> Build {
        let model = PackageModel {
            name: "libtorch-cuda-linalg".into(),
            version: "2.11.0".into(),
            build: "magma_h1234567_0".into(),
            build_number: 0,
            depends: vec!["libmagma >=2.8.0,<2.9.0a0".into()],
            constrains: vec![],
            track_features: vec![],
            variant,
        };
        Build {
            model,
            role,
            standin: None,
            subdir: SUBDIR,
            stage: PathBuf::new(),
            content: content
                .iter()
                .map(|(p, s)| (p.to_string(), s.clone()))
                .collect(),
            from: crate::channel::info::Origin::Tree,
            summary: "the summary".into(),
        }
    }

    #[test]
    fn paths_are_listed_in_byte_order_and_read_as_rattlers_paths_json() {
        let file = StagedEntry::File {
            size: 3,
            sha256: rattler_digest::compute_bytes_digest::<rattler_digest::Sha256>(b"abc"),
        };
        let b = build(
            Role::Core,
            None,
            &[
                ("torch/_C/__init__.pyi", file.clone()),
                ("torch-1.dist-info/METADATA", file.clone()),
                ("torch/_C.so", StagedEntry::Symlink { target: "x".into() }),
            ],
        );
        let text = String::from_utf8(pretty(&paths(&b)).unwrap()).unwrap();
        let at = |p: &str| text.find(&format!("\"{p}\"")).unwrap();
        assert!(
            at("torch-1.dist-info/METADATA") < at("torch/_C.so")
                && at("torch/_C.so") < at("torch/_C/__init__.pyi"),
            "{text}"
        );
        assert!(
            text.contains(
                "\"sha256\": \"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\""
            ),
            "{text}"
        );
        let parsed: PathsJson = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.paths.len(), 3);
    }

    #[test]
    fn about_keeps_its_field_order_and_reads_as_rattlers_about_json() {
        let magma = SplitVariant {
            name: "magma".into(),
            with_payload: true,
            preferred: true,
        };
        let b = build(Role::Lazy, Some(magma), &[]);
        let text =
            String::from_utf8(pretty(&about(&b, "tf", "CONFINED", "torch.whl")).unwrap()).unwrap();
        let expect = r#"{
  "summary": "the summary",
  "description": "Packed by splitpkg pack from the split plan; see docs/pack.md.",
  "extra": {
    "splitpkg_role": "lazy",
    "splitpkg_input": "torch.whl",
    "splitpkg_verdict": "CONFINED",
    "splitpkg_version": "VERSION",
    "splitpkg_variant": "magma",
    "splitpkg_preferred": true
  }
}
"#;
        assert_eq!(text, expect.replace("VERSION", env!("CARGO_PKG_VERSION")));
        let parsed: AboutJson = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.summary.as_deref(), Some("the summary"));
        assert_eq!(parsed.extra["splitpkg_variant"], "magma");
    }

    #[test]
    fn index_is_the_model_and_reads_back_as_it() {
        let b = build(Role::Lazy, None, &[]);
        let text = pretty(&index(&b).unwrap()).unwrap();
        let parsed: IndexJson = serde_json::from_slice(&text).unwrap();
        check_index(&parsed, &b.model, "x.conda").unwrap();
        assert_eq!(parsed.subdir.as_deref(), Some(SUBDIR));
    }
}
