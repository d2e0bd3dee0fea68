//! Where a JSON document came from: the tool and version that wrote it, the exact command, and
//! (when it can be had without breaking determinism) the date. Every stage's JSON carries these
//! fields the same way, so `report` can say how each of its inputs was made.
//!
//! The date: documents that must be byte-identical for the same input (plan, fatbin, pack, wheel)
//! record one only when `SOURCE_DATE_EPOCH` is set — the reproducible-builds convention, which a
//! CI job or `docs/evidence/make-report.sh` sets on purpose. A GPU run (`smoke`) is never
//! reproducible to the byte (it times things), so it records the wall-clock date when that
//! variable is absent.

use serde::{Deserialize, Serialize};

/// The git commit this binary was built from (build.rs: `SPLITPKG_COMMIT`, the work tree's HEAD,
/// `cargo package`'s or `git archive`'s record), or `unknown`.
pub const COMMIT: &str = env!("SPLITPKG_BUILD_COMMIT");

/// What `splitpkg --version` prints after the name.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SPLITPKG_BUILD_COMMIT"),
    ")"
);

/// The program that wrote a document (the `tool` object of every JSON document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    /// `splitpkg`.
    pub name: String,
    /// The release (`Cargo.toml`'s version).
    pub version: String,
    /// The git commit of the build ([`COMMIT`]); absent in documents written before 0.1.0 recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Tool {
    /// This build of splitpkg.
    pub fn this() -> Tool {
        Tool {
            name: "splitpkg".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: Some(COMMIT.into()),
        }
    }
}

impl Default for Tool {
    fn default() -> Self {
        Tool::this()
    }
}

/// The command that wrote a document and, where it can be had, the date: flattened into every
/// document (`"command": [...], "date": "..."`), each absent when not recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stamp {
    /// argv of the run (filled by the CLI; empty from a library caller, which never guesses one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// RFC 3339 UTC (see the module docs for when a document has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

impl Stamp {
    /// For a document that must be byte-identical for the same input: this process's command
    /// line, and a date only from `SOURCE_DATE_EPOCH`.
    pub fn reproducible() -> Stamp {
        Stamp {
            command: command(),
            date: source_date(),
        }
    }
}

/// The command line of this process, as given (`argv`, lossily decoded). Empty when a library
/// caller builds a document itself: the CLI fills it, the library never guesses one.
pub fn command() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// `SOURCE_DATE_EPOCH` as an RFC 3339 UTC date, if set and valid.
pub fn source_date() -> Option<String> {
    let secs: i64 = std::env::var("SOURCE_DATE_EPOCH")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    rfc3339(secs)
}

/// The date a run happened: `SOURCE_DATE_EPOCH` when set, else now.
pub fn run_date() -> Option<String> {
    source_date().or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        rfc3339(i64::try_from(now.as_secs()).ok()?)
    })
}

fn rfc3339(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_seconds() {
        assert_eq!(rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(1_796_126_400).as_deref(),
            Some("2026-12-01T12:00:00Z")
        );
    }
}
