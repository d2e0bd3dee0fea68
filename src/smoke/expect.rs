//! Expected-outcome tables: per variant, which cases must pass, which must fail cleanly with a
//! given message, and which are excluded (known stock bugs). Built-in tables come from
//! `expect.json` (shipped in the binary); `--expect FILE` adds or replaces tables by name.

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::cases::{COMPLEX, Case, REAL};
use crate::error::Context;
use crate::error::{Error, Result};

/// The built-in expected-outcome tables (`expect.json`, compiled in).
pub const BUILTIN: &str = include_str!("expect.json");

/// What a table rule expects of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The op succeeds and its residual is within tolerance.
    Pass,
    /// The op raises a RuntimeError whose message matches `pattern`.
    Error,
    /// Either of the above.
    PassOrError,
    /// Recorded but not judged (a known bug); a timeout or a crash still fails.
    Excluded,
}

/// One rule of an expectation table: which cases it is about (every listed field must match)
/// and what they are expected to do.
#[derive(Debug, Clone, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Rule")]
pub struct ExpectRule {
    /// Ops the rule is about (`linalg.cholesky`); any op when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub op: Vec<String>,
    /// dtype names, or the classes `real` and `complex`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dtype: Vec<String>,
    /// Preferences the rule is about (`default`, `cusolver`, `magma`); any when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preference: Vec<String>,
    /// Shapes as the case ids spell them (`64x64`, `8x32x32`): a rule about sizes names them
    /// exactly, so it also holds for recordings made before a tag existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<String>,
    /// Every listed tag must be on the case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Applies only when torch.version.cuda is lower than this (`12.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_below: Option<String>,
    /// What the rule expects of a matching case; None means `pass`.
    pub expect: Option<Outcome>,
    /// The regular expression an expected error's message must match (required with `error` and
    /// `pass-or-error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Why the rule expects what it does, carried into the case's expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// An expected-outcome table: a description and its rules.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// What the table is for (which variant, what it expects).
    #[serde(default)]
    pub description: String,
    /// The rules, in order: the first that matches a case decides (a case no rule matches is
    /// expected to pass).
    #[serde(default)]
    pub rules: Vec<ExpectRule>,
}

#[derive(Debug, Clone, Deserialize)]
struct TableFile {
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    about: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    schema_version: Option<u32>,
    tables: BTreeMap<String, Table>,
}

/// What one case is expected to do, with where that came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Expectation {
    /// What the case must do: `pass`, `error`, `pass-or-error` or `excluded`; `pass` when no rule
    /// of the table matches.
    pub outcome: Outcome,
    /// The regex an expected error's message must match (anywhere in it). Absent when the deciding
    /// rule has none, and always for `<table>#default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The deciding rule's note, shown in reports; an excluded case's reason begins with its text
    /// up to the first `:`. Absent when the rule has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `table#rule-index` of the deciding rule, or `table#default`.
    pub rule: String,
}

/// The tables in force: built-ins plus any user file, by name.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Every table in force, by name.
    pub tables: BTreeMap<String, Table>,
    /// Where each table came from (`built-in` or a file path).
    pub origin: BTreeMap<String, String>,
}

impl Tables {
    /// The built-in tables alone.
    pub fn builtin() -> Tables {
        let file: TableFile = serde_json::from_str(BUILTIN).expect("built-in expect.json parses");
        let origin = file
            .tables
            .keys()
            .map(|k| (k.clone(), "built-in".to_string()))
            .collect();
        let t = Tables {
            tables: file.tables,
            origin,
        };
        t.validate("built-in expect.json")
            .expect("built-in expect.json is valid");
        t
    }

    /// Built-ins, then the tables of `path` on top (same name replaces).
    pub fn with_file(path: &Path) -> Result<Tables> {
        let text = crate::input::file::read_text(
            path,
            crate::input::file::Links::Follow,
            crate::input::file::MAX_DOCUMENT_BYTES,
            "expectation table",
        )?;
        Tables::with_text(&text, &path.display().to_string())
    }

    /// Built-ins, then the tables of a table file's `text` on top; `origin` names the file in
    /// errors and in each table's origin. `with_file` and the fuzz harness both read through here.
    pub fn with_text(text: &str, origin: &str) -> Result<Tables> {
        let file: TableFile =
            serde_json::from_str(text).bad_at(origin, "not an expectation table file")?;
        if let Some(s) = &file.schema
            && s != "splitpkg-smoke-expect"
        {
            return Err(Error::bad(
                origin,
                format!("schema is {s:?}, expected \"splitpkg-smoke-expect\""),
            ));
        }
        let mut t = Tables::builtin();
        let user = Tables {
            origin: file
                .tables
                .keys()
                .map(|k| (k.clone(), origin.to_string()))
                .collect(),
            tables: file.tables,
        };
        user.validate(origin)?;
        t.tables.extend(user.tables);
        t.origin.extend(user.origin);
        Ok(t)
    }

    fn validate(&self, what: &str) -> Result<()> {
        for (name, table) in &self.tables {
            for (i, r) in table.rules.iter().enumerate() {
                let at = format!("{what}: table {name:?} rule {i}");
                let Some(outcome) = r.expect else {
                    return Err(Error::bad(
                        at,
                        "missing \"expect\" (pass, error, pass-or-error or excluded)",
                    ));
                };
                if matches!(outcome, Outcome::Error | Outcome::PassOrError) && r.pattern.is_none() {
                    return Err(Error::bad(
                        at,
                        "an \"error\" rule needs a \"pattern\" the message must match",
                    ));
                }
                if let Some(p) = &r.pattern {
                    Regex::new(p).bad_at(&at, format_args!("bad pattern {p:?}"))?;
                }
                if let Some(v) = &r.cuda_below
                    && crate::version::parse(v.trim()).is_none()
                {
                    return Err(Error::bad(
                        at,
                        format!("cuda_below {v:?} is not a version like 12.8"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The table named `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    /// The names of every table, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tables.keys().cloned().collect()
    }
}

/// `a < b` for dotted versions (`12.6 < 12.8`, `13.0 ≥ 12.8`).
pub fn version_below(a: &str, b: &str) -> Option<bool> {
    crate::version::compare(a.trim(), b.trim()).map(|o| o.is_lt())
}

fn dtype_matches(list: &[String], dtype: &str) -> bool {
    list.is_empty()
        || list.iter().any(|d| {
            d == dtype
                || (d == "real" && REAL.contains(&dtype))
                || (d == "complex" && COMPLEX.contains(&dtype))
        })
}

impl ExpectRule {
    /// Whether the rule applies to `case` (with torch's CUDA version `cuda`, when known): each
    /// non-empty list holds the case's value, every tag is on the case, and `cuda_below` holds.
    pub fn matches(&self, case: &Case, cuda: Option<&str>) -> bool {
        (self.op.is_empty() || self.op.contains(&case.op))
            && dtype_matches(&self.dtype, &case.dtype)
            && (self.preference.is_empty()
                || self
                    .preference
                    .iter()
                    .any(|p| p == case.preference.as_str()))
            && (self.shape.is_empty() || self.shape.contains(&case.shape))
            && self.tags.iter().all(|t| case.tags.contains(t))
            && match (&self.cuda_below, cuda) {
                (None, _) => true,
                // Unknown CUDA version: the condition cannot be shown to hold.
                (Some(_), None) => false,
                (Some(limit), Some(have)) => version_below(have, limit).unwrap_or(false),
            }
    }
}

/// The expectation for `case` under table `name`: the first matching rule, else pass.
pub fn expectation(
    table_name: &str,
    table: &Table,
    case: &Case,
    cuda: Option<&str>,
) -> Expectation {
    for (i, r) in table.rules.iter().enumerate() {
        if r.matches(case, cuda) {
            return Expectation {
                outcome: r.expect.unwrap_or(Outcome::Pass),
                pattern: r.pattern.clone(),
                note: r.note.clone(),
                rule: format!("{table_name}#{i}"),
            };
        }
    }
    Expectation {
        outcome: Outcome::Pass,
        pattern: None,
        note: None,
        rule: format!("{table_name}#default"),
    }
}
