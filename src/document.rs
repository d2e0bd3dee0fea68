//! The JSON documents splitpkg writes and reads back, as one contract.
//!
//! Each document type is owned by the stage that writes it (`analysis::plan::Plan`,
//! `smoke::SmokeReport`, `fatbin::scan::FatbinReport`, `channel::document::PackReport`, …) and is
//! compiled in every build, whatever the features, so that every stage that reads it (the report,
//! `smoke --replay`, `env`) reads that very type rather than a copy. [`Document`] is the small
//! trait they share, in the spirit of rattler's `PackageFile`: the `schema` name, the versions
//! read and written, [`Document::from_str`] and [`Document::load`] with one set of refusals, and
//! the JSON Schema generated from the type (`docs/*.schema.json` are those files; the test
//! `it::schemas` fails with the command to run when a committed one is stale).

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::input::file::{Links, MAX_DOCUMENT_BYTES, read_text};

/// Why a document was refused. Printed after the file name, as every reader's refusals are.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The bytes are not JSON at all.
    #[error("not JSON")]
    NotJson(#[source] serde_json::Error),
    /// JSON without this document's `schema` field value.
    #[error("not a splitpkg {what} (no \"schema\": \"{schema}\")")]
    NotThisDocument {
        /// How the document is named (`plan`).
        what: &'static str,
        /// The `schema` value it had to have.
        schema: &'static str,
    },
    /// A `schema_version` this splitpkg does not read.
    #[error(
        "{what} schema_version {found} is not supported (this splitpkg reads {reads:?} and writes {writes})"
    )]
    Version {
        /// How the document is named (`plan`).
        what: &'static str,
        /// The version found, as written.
        found: String,
        /// The versions this splitpkg reads.
        reads: &'static [u32],
        /// The version this splitpkg writes.
        writes: u32,
    },
    /// The right schema and version, but fields that do not fit the document type.
    #[error("malformed {what}")]
    Malformed {
        /// How the document is named (`plan`).
        what: &'static str,
        /// serde's account of the first field that did not fit.
        #[source]
        source: serde_json::Error,
    },
}

/// A JSON document of one kind: its name, versions and schema, and how it is read.
pub trait Document: Sized + DeserializeOwned + Serialize + schemars::JsonSchema {
    /// The value of the document's `schema` field (`splitpkg-plan`).
    const SCHEMA: &'static str;
    /// The `schema_version` this splitpkg writes.
    const VERSION: u32;
    /// Every `schema_version` it reads (older ones through serde defaults).
    const READS: &'static [u32];
    /// How refusals name the document (`plan`, `smoke report`).
    const WHAT: &'static str;
    /// The generated schema's file under `docs/` (`plan.schema.json`).
    const SCHEMA_FILE: &'static str;
    /// The schema's title (`splitpkg plan`) and what the document is, for its readers.
    const TITLE: &'static str;
    /// What the document is, one sentence for the schema's description.
    const ABOUT: &'static str;

    /// Parse `text`, the contents of `file`: JSON, the right `schema`, a version this splitpkg
    /// reads, then the type. Each refusal names `file` (exit 2).
    fn from_str(text: &str, file: &str) -> Result<Self> {
        check_header::<Self>(text).map_err(|e| Error::invalid(file, e))?;
        // Straight into the type: a smoke run's 1.3 MB would cost twice as much through a Value.
        let doc: Self = serde_json::from_str(text).map_err(|source| {
            let what = Self::WHAT;
            Error::invalid(file, DocumentError::Malformed { what, source })
        })?;
        Ok(doc.upgrade())
    }

    /// Fill what an older version did not record but implies (its `schema_version` is kept, so
    /// readers still say which version they read). Serde defaults cover plain absences.
    fn upgrade(self) -> Self {
        self
    }

    /// Read `path` (bounded, following a symlink as any input path does) and parse it.
    fn load(path: &Path) -> Result<Self> {
        let text = read_text(path, Links::Follow, MAX_DOCUMENT_BYTES, Self::WHAT)?;
        Self::from_str(&text, &path.display().to_string())
    }

    /// The JSON Schema of what this version writes, as committed under `docs/`: generated from
    /// the type, with the document's name and versions pinned, which the type alone cannot say.
    fn generated_schema() -> serde_json::Value {
        // What this version writes: a field is required unless it may be left out when written.
        let generator = schemars::generate::SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator();
        let mut schema = serde_json::to_value(generator.into_root_schema_for::<Self>())
            .expect("a generated schema is JSON");
        let obj = schema
            .as_object_mut()
            .expect("a document's schema is an object");
        let id = format!(
            "https://github.com/splitpkg/splitpkg/docs/{}",
            Self::SCHEMA_FILE
        );
        obj.insert("$id".into(), id.into());
        obj.insert("title".into(), Self::TITLE.into());
        obj.insert("description".into(), Self::ABOUT.into());
        if let Some(props) = obj.get_mut("properties").and_then(|p| p.as_object_mut()) {
            props.insert(
                "schema".into(),
                serde_json::json!({
                    "const": Self::SCHEMA,
                    "description": "Which document this is; a reader refuses any other.",
                }),
            );
            props.insert(
                "schema_version".into(),
                serde_json::json!({
                    "const": Self::VERSION,
                    "description": "The version of this document's layout: a splitpkg reads the versions it knows and refuses any other.",
                }),
            );
            // Every document records its writer; the field's own doc (if any) is kept.
            if let Some(tool) = props.get_mut("tool").and_then(|t| t.as_object_mut()) {
                tool.entry("description")
                    .or_insert_with(|| "The splitpkg that wrote this document.".into());
            }
        }
        schema
    }
}

/// The two fields every document starts with; the rest of the text is skipped unread.
#[derive(serde::Deserialize)]
struct Header {
    schema: Option<String>,
    schema_version: Option<serde_json::Value>,
}

/// JSON, this document's `schema` name and a `schema_version` this splitpkg reads, checked before
/// the type is: a wrong document is named as such, not as a missing field.
fn check_header<D: Document>(text: &str) -> std::result::Result<(), DocumentError> {
    let not_this = DocumentError::NotThisDocument {
        what: D::WHAT,
        schema: D::SCHEMA,
    };
    let header = match serde_json::from_str::<Header>(text) {
        Ok(h) => h,
        Err(e) if e.is_syntax() || e.is_eof() => return Err(DocumentError::NotJson(e)),
        Err(_) => return Err(not_this),
    };
    if header.schema.as_deref() != Some(D::SCHEMA) {
        return Err(not_this);
    }
    let version = header.schema_version;
    let read = |v: &serde_json::Value| {
        v.as_u64()
            .is_some_and(|v| D::READS.iter().any(|r| u64::from(*r) == v))
    };
    if !version.as_ref().is_some_and(read) {
        return Err(DocumentError::Version {
            what: D::WHAT,
            found: version.map_or_else(
                || "absent".into(),
                |v| crate::sanitize::printable(&v.to_string()),
            ),
            reads: D::READS,
            writes: D::VERSION,
        });
    }
    Ok(())
}

/// Serde and schema for a type written as its `Display` string and read back with `FromStr`
/// (`sm_90`, `zstd:3`): one string in the document and its schema, with the pattern it must match.
#[macro_export]
#[doc(hidden)]
macro_rules! string_form {
    ($ty:ty, $name:literal, $pattern:literal) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "pattern": $pattern })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Document;
    use std::path::Path;

    /// Every committed document parses with the type its writer uses: real runs, old versions.
    fn parses<D: Document>(files: &[&str]) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for f in files {
            if let Err(e) = D::load(&root.join(f)) {
                panic!("{f}: {e}");
            }
        }
    }

    #[test]
    fn committed_documents_parse_with_the_shared_types() {
        parses::<crate::analysis::plan::Plan>(&["docs/evidence/report-inputs/plan.json"]);
        parses::<crate::smoke::SmokeReport>(&[
            "docs/evidence/smoke.json",
            "docs/evidence/report-inputs/smoke.json",
            "docs/evidence/wheel-gpu/smoke.json",
            "docs/evidence/wheel-gpu/index/smoke.json",
            "docs/evidence/smoke-time/smoke-after.json",
            "docs/evidence/smoke-time/smoke-before.json",
            "docs/evidence/nomagma-real/smoke-after-switch.json",
            "docs/evidence/nomagma-real/smoke-copy.json",
            "docs/evidence/nomagma-real/smoke-envs.json",
            "docs/evidence/feedstock/h200-conda-layout/smoke.json",
            "tests/data/smoke-synthetic-broken.json",
            "tests/data/smoke-synthetic-ok.json",
        ]);
        parses::<crate::fatbin::scan::FatbinReport>(&["docs/evidence/report-inputs/fatbin.json"]);
        parses::<crate::channel::document::PackReport>(&["docs/evidence/report-inputs/pack.json"]);
        parses::<crate::wheel::WheelReport>(&[
            "docs/evidence/wheel-gpu/wheel.json",
            "docs/evidence/wheel-gpu/index/wheel.json",
        ]);
        parses::<crate::index::IndexReport>(&["docs/evidence/wheel-gpu/index/index-again.json"]);
    }

    /// Each refusal names the file and says which check failed, before any field is read.
    #[test]
    fn refusals_name_the_file_and_the_check() {
        use crate::analysis::plan::Plan;
        use crate::smoke::SmokeReport;
        let refused = |text: &str| Plan::from_str(text, "p.json").unwrap_err().to_string();
        assert!(
            refused("{").starts_with("p.json: not JSON: "),
            "{}",
            refused("{")
        );
        for not_plan in [
            "[1]",
            "{}",
            r#"{"schema":"splitpkg-smoke","schema_version":2}"#,
        ] {
            assert_eq!(
                refused(not_plan),
                r#"p.json: not a splitpkg plan (no "schema": "splitpkg-plan")"#
            );
        }
        assert_eq!(
            refused(r#"{"schema":"splitpkg-plan","schema_version":7}"#),
            "p.json: plan schema_version 7 is not supported (this splitpkg reads [1] and writes 1)"
        );
        assert_eq!(
            refused(r#"{"schema":"splitpkg-plan"}"#),
            "p.json: plan schema_version absent is not supported (this splitpkg reads [1] and writes 1)"
        );
        assert!(
            refused(r#"{"schema":"splitpkg-plan","schema_version":1}"#)
                .starts_with("p.json: malformed plan: missing field")
        );
        // A smoke run reads both versions it ever wrote.
        let e = SmokeReport::from_str(r#"{"schema":"splitpkg-smoke","schema_version":3}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("reads [1, 2] and writes 2"), "{e}");
    }
}
