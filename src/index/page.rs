//! The pages of a static simple index: each project's `index.json` (PEP 691, API 1.1 with PEP 700's
//! `versions` and `size`) is the model, and its `index.html` (PEP 503, with PEP 658/714 metadata
//! attributes) is rendered from it; the root lists the projects the same two ways. A project's
//! `index.json` is also what an update reads back, but only for its list of files and what a
//! release engineer sets there by hand (`yanked`, `upload-time`): every entry is rebuilt from the
//! file it names (`index::verified_entry`), so a URL or key an earlier page carried is never served.

use crate::error::Context;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// The simple API version the pages declare (PEP 700's `versions` and `size` need 1.1).
pub const API_VERSION: &str = "1.1";
/// An existing page larger than this is not one this tool wrote.
pub const PAGE_CAP: u64 = 64 << 20;

/// The `meta` object every PEP 691 page starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The PEP 691 API version the page is written in.
    #[serde(rename = "api-version")]
    pub api_version: String,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            api_version: API_VERSION.into(),
        }
    }
}

/// One file of a project page, under PEP 691's names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The file's name, the last segment of its URL.
    pub filename: String,
    /// Relative to the page (the file sits beside it), percent-encoded.
    pub url: String,
    /// Hash name to hex digest (`sha256`), as PEP 691 lays them out.
    pub hashes: BTreeMap<String, String>,
    /// The wheel's `Requires-Python`, for installers that skip what cannot run.
    #[serde(
        rename = "requires-python",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub requires_python: Option<String>,
    /// PEP 658 metadata file (`FILE.metadata`): `{"sha256": …}`.
    #[serde(
        rename = "core-metadata",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub core_metadata: Option<serde_json::Value>,
    /// The same, under the name older clients read (PEP 714 asks for both).
    #[serde(
        rename = "dist-info-metadata",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub dist_info_metadata: Option<serde_json::Value>,
    /// `true` or a reason; set by hand, never by this tool, and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yanked: Option<serde_json::Value>,
    /// Bytes of the file (PEP 700); absent on pages written by other tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Any other key (`upload-time`, `provenance`, …), kept as it is.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl FileEntry {
    /// The file's SHA-256 (hex), when the page lists one.
    pub fn sha256(&self) -> Option<&str> {
        self.hashes.get("sha256").map(String::as_str)
    }
}

/// A project page (PEP 691 JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectPage {
    /// The page's API version.
    pub meta: Meta,
    /// The PEP 503-normalised project name.
    pub name: String,
    /// Every file of the project, sorted by file name.
    pub files: Vec<FileEntry>,
    /// The project's versions (PEP 700), kept from the page or derived from its files.
    #[serde(default)]
    pub versions: Vec<String>,
    /// Any other key, kept as it is.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RootProject {
    name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RootPage {
    meta: Meta,
    projects: Vec<RootProject>,
}

/// A file name as a relative URL: everything but unreserved characters percent-encoded (`+` as
/// `%2B`: S3 and some other static hosts read a raw `+` in a path as a space).
pub fn url_of(filename: &str) -> String {
    filename
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Text for an HTML attribute or element.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Read a page this tool (or a person) wrote earlier: bounded, and refused with one line when it
/// is not a page of this shape.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    use crate::input::file::{Links, read_bounded};
    let text = read_bounded(path, Links::Refuse, PAGE_CAP, "page")?;
    serde_json::from_slice(&text).bad_at(
        path.display(),
        "not a simple-index page this tool can update",
    )
}

/// A page as pretty JSON with a final newline, as every page this tool writes is laid out.
pub fn to_json<T: Serialize>(page: &T) -> Result<String> {
    serde_json::to_string_pretty(page)
        .map(|s| s + "\n")
        .failed_at("JSON")
}

/// PEP 503 HTML of a project page.
pub fn project_html(page: &ProjectPage) -> String {
    let mut s = String::new();
    let name = escape(&page.name);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"{}\">\n    <title>Links for {name}</title>\n  </head>\n  <body>\n    <h1>Links for {name}</h1>\n",
        escape(&page.meta.api_version)
    );
    for f in &page.files {
        let mut attrs = String::new();
        if let Some(r) = &f.requires_python {
            let _ = write!(attrs, " data-requires-python=\"{}\"", escape(r));
        }
        if let Some(h) = f
            .core_metadata
            .as_ref()
            .and_then(|m| m.get("sha256"))
            .and_then(|h| h.as_str())
        {
            let _ = write!(
                attrs,
                " data-core-metadata=\"sha256={0}\" data-dist-info-metadata=\"sha256={0}\"",
                escape(h)
            );
        }
        match &f.yanked {
            Some(serde_json::Value::String(why)) => {
                let _ = write!(attrs, " data-yanked=\"{}\"", escape(why));
            }
            Some(serde_json::Value::Bool(true)) => attrs.push_str(" data-yanked=\"\""),
            _ => {}
        }
        let fragment = f
            .sha256()
            .map(|h| format!("#sha256={}", escape(h)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "    <a href=\"{}{fragment}\"{attrs}>{}</a><br/>",
            escape(&f.url),
            escape(&f.filename)
        );
    }
    s.push_str("  </body>\n</html>\n");
    s
}

/// The root pages (JSON, HTML) listing `projects` (normalised names).
pub fn root_pages(projects: &[String]) -> Result<(String, String)> {
    let root = RootPage {
        meta: Meta::default(),
        projects: projects
            .iter()
            .map(|p| RootProject { name: p.clone() })
            .collect(),
    };
    let mut html = format!(
        "<!DOCTYPE html>\n<html>\n  <head>\n    <meta name=\"pypi:repository-version\" content=\"{API_VERSION}\">\n    <title>Simple index</title>\n  </head>\n  <body>\n"
    );
    for p in projects {
        let _ = writeln!(
            html,
            "    <a href=\"{}/\">{}</a><br/>",
            url_of(p),
            escape(p)
        );
    }
    html.push_str("  </body>\n</html>\n");
    Ok((to_json(&root)?, html))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_and_links() {
        let page = ProjectPage {
            meta: Meta::default(),
            name: "torch".into(),
            files: vec![FileEntry {
                filename: "torch-2.11.0+split-cp311-cp311-linux_x86_64.whl".into(),
                url: url_of("torch-2.11.0+split-cp311-cp311-linux_x86_64.whl"),
                hashes: BTreeMap::from([("sha256".to_string(), "ab".to_string())]),
                requires_python: Some(">=3.10".into()),
                core_metadata: Some(serde_json::json!({"sha256": "cd"})),
                dist_info_metadata: Some(serde_json::json!({"sha256": "cd"})),
                yanked: Some(serde_json::json!("broken \"build\"")),
                size: Some(3),
                other: BTreeMap::new(),
            }],
            versions: vec!["2.11.0+split".into()],
            other: BTreeMap::new(),
        };
        let html = project_html(&page);
        assert!(html.contains(
            "<a href=\"torch-2.11.0%2Bsplit-cp311-cp311-linux_x86_64.whl#sha256=ab\" data-requires-python=\"&gt;=3.10\" data-core-metadata=\"sha256=cd\" data-dist-info-metadata=\"sha256=cd\" data-yanked=\"broken &quot;build&quot;\">torch-2.11.0+split-cp311-cp311-linux_x86_64.whl</a>"
        ), "{html}");
        let back: ProjectPage = serde_json::from_str(&to_json(&page).unwrap()).unwrap();
        assert_eq!(back, page);
    }
}
