//! How to serve an index and install from it: the commands `index` prints, for the URL the index
//! is served at (`--url`, `http://127.0.0.1:8000/` by default).
//!
//! Every command pins every project of the index to its newest version there (`newest`): with the
//! public index reachable an unpinned `torch` resolves to the newest monolithic torch (issue 53).
//! pip merges `--extra-index-url` with its index with no precedence, so the pin is what makes it
//! take the split; uv takes a package from the first index that has it, so the local one comes as
//! `--index`, ahead of uv's default index. Neither command names the public index: torch's own
//! dependencies come from the index the user's installer is set up with (PyPI unless configured
//! otherwise, a mirror where one is). Every word from the user (`--out`, `--url`) is one shell word.
//!
//! The serve command is printed only where `index` knows it is right: an `http` URL on this
//! machine's loopback, bound to that host and port, serving the directory whose URL path is the
//! URL's (`--out` itself for `/`, the directory above it for `/simple-slim/` when `--out` is
//! `…/simple-slim`, which serves every index beside it under one root too). For another host, or
//! `https`, it is a `#` comment that says what to serve where.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::prefer::{StaticProperty, label_of};
use super::{IndexLayout, ProjectReport, VARIANTS_SUFFIX};
use crate::error::{Error, Result};
use crate::sanitize::shell_word;

/// The default `--url`: what `python3 -m http.server` serves by default, on loopback.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8000/";

/// `--url`, checked: `http` or `https`, a host, a port, a path of plain segments ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexUrl {
    /// The URL as printed, ending in `/`.
    pub text: String,
    /// Whether the scheme is `https` (pip then needs no `--trusted-host`).
    pub https: bool,
    /// The host as written (`[::1]` with its brackets).
    pub host: String,
    /// The port, given or the scheme's default.
    pub port: u16,
    /// The path's segments (none for `/`).
    pub segments: Vec<String>,
}

impl IndexUrl {
    /// Parse `--url`. Refused: another scheme, user information (a password in a printed
    /// command), a query or fragment, a port that is not 1–65535, an empty, `.` or `..` path
    /// segment, any character a URL path or host does not need.
    pub fn parse(s: &str) -> Result<IndexUrl> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "--url {}: {why} (an index URL such as {DEFAULT_URL})",
                shell_word(s)
            ))
        };
        let (https, rest) = if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(bad("not an http:// or https:// URL"));
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.contains('@') {
            return Err(bad(
                "has user information; give credentials to the installer, not the printed command",
            ));
        }
        let (host, port) = split_port(authority).ok_or_else(|| bad("the port is not 1-65535"))?;
        if !valid_host(host) {
            return Err(bad(
                "no host, or a host that is not a name or an IP address",
            ));
        }
        let path_ok = |c: char| c.is_ascii_alphanumeric() || "-._~%+/".contains(c);
        if !path.chars().all(path_ok) {
            return Err(bad(
                "the path has a character other than A-Z a-z 0-9 - . _ ~ % + / (no query or fragment)",
            ));
        }
        let inner = path.strip_prefix('/').unwrap_or(path);
        let inner = inner.strip_suffix('/').unwrap_or(inner);
        let segments: Vec<String> = if inner.is_empty() {
            Vec::new()
        } else {
            inner.split('/').map(str::to_string).collect()
        };
        if segments
            .iter()
            .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(bad("the path has an empty, . or .. segment"));
        }
        let port = port.unwrap_or(if https { 443 } else { 80 });
        let mut text = format!("{}://{authority}/", if https { "https" } else { "http" });
        for p in &segments {
            text.push_str(p);
            text.push('/');
        }
        Ok(IndexUrl {
            text,
            https,
            host: host.to_string(),
            port,
            segments,
        })
    }

    /// Whether the host is this machine's loopback, which `http.server` can bind.
    fn loopback(&self) -> bool {
        let h = self.host.trim_start_matches('[').trim_end_matches(']');
        h == "localhost"
            || h == "::1"
            || h.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|a| a.is_loopback())
    }

    /// The command that serves `out` at this URL, or a `#` comment saying what to serve where.
    pub fn serve(&self, out: &Path) -> String {
        let url = shell_word(&self.text);
        let out_word = shell_word(&out.display().to_string());
        if self.https || !self.loopback() {
            return format!(
                "# serve {out_word} at {url} with a static web server (docs/wheel.md, \"Serving it\")"
            );
        }
        let Some(root) = served_root(out, &self.segments) else {
            return format!(
                "# serve {out_word} at {url}: its path is not {out_word}'s name, so serve the directory that holds it at that path"
            );
        };
        let bind = self.host.trim_start_matches('[').trim_end_matches(']');
        format!(
            "python3 -m http.server --bind {} --directory {} {}",
            shell_word(bind),
            shell_word(&root.display().to_string()),
            self.port
        )
    }
}

/// `host[:port]`, the port parsed (`None` when absent); `None` overall for a bad port.
fn split_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let colon = if authority.starts_with('[') {
        authority
            .find(']')
            .map(|i| i + 1)
            .filter(|&i| i < authority.len())
    } else {
        authority.rfind(':')
    };
    let Some(i) = colon else {
        return Some((authority, None));
    };
    if authority.as_bytes().get(i) != Some(&b':') {
        return None;
    }
    let digits = &authority[i + 1..];
    let port = digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse::<u16>().ok())
        .flatten()
        .filter(|p| *p != 0)?;
    Some((&authority[..i], Some(port)))
}

/// A DNS name or IPv4 address (letters, digits, `-`, `.`), or an IPv6 address in brackets.
fn valid_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// The directory whose URL path `segments` is `out`: `out` less as many trailing components,
/// which must be those names. `None` when they are not.
fn served_root(out: &Path, segments: &[String]) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let parts: Vec<Component> = out.components().collect();
    if parts.len() < segments.len() {
        return None;
    }
    let (keep, tail) = parts.split_at(parts.len() - segments.len());
    let same = tail
        .iter()
        .zip(segments)
        .all(|(c, s)| matches!(c, Component::Normal(n) if n.to_str() == Some(s.as_str())));
    if !same {
        return None;
    }
    let root: std::path::PathBuf = keep.iter().collect();
    Some(if root.as_os_str().is_empty() {
        ".".into()
    } else {
        root
    })
}

/// How to serve the index and install from it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexCommands {
    /// The URL the commands install from (`--url`); empty in reports written before the option
    /// (the recorded evidence under docs/evidence/ predates it).
    #[serde(default)]
    pub url: String,
    /// Serves the index at `url` (Python's `http.server`, for a loopback `http` URL), or a `#`
    /// comment saying what to serve where.
    pub serve: String,
    /// Installs from the served index with pip.
    pub pip: String,
    /// Installs from the served index with uv.
    pub uv: String,
    /// The other variants of the lazy distribution, each installed with the same pins otherwise:
    /// a local-label set's other labels by pin, a PEP 825 set's variants this index does not list
    /// first by the variant wheel's URL (one per platform the set has).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other: Vec<OtherCommand>,
}

/// The install commands of one other variant.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtherCommand {
    /// The local version label (`0.nomagma`) or the PEP 825 variant label (`nomagma`).
    pub label: String,
    /// The variant wheel named (a PEP 825 set, one per platform).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// With pip (none for a PEP 825 variant: pip does not read variant wheels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip: Option<String>,
    /// With uv.
    pub uv: String,
}

/// The index's commands. `sets` are the `-variants.json` documents of the lazy projects' newest
/// versions, as this run wrote them (`(project, document)`): the variant an install gets is the
/// one whose value each lists first.
pub fn commands(
    out: &Path,
    url: &IndexUrl,
    projects: &[ProjectReport],
    layout: IndexLayout,
    prefer: Option<&str>,
    sets: &[(String, serde_json::Value)],
) -> IndexCommands {
    let u = shell_word(&url.text);
    let pins = pins(projects, None);
    let preview = if layout == IndexLayout::Variants {
        "--preview-features wheel-variants "
    } else {
        ""
    };
    let pip = match prefer {
        Some(p) => format!(
            "# none: pip does not read PEP 825 variant wheels, and --prefer {p} left the plain fallback out of this index; use uv (below), or pip with the index written without --prefer"
        ),
        None => format!("pip install --extra-index-url {u} {pins}"),
    };
    let mut other = local_label_others(projects, &u);
    for (project, doc) in sets {
        for (label, file) in variant_others(projects, project, doc) {
            let wheel = format!("{}{project}/{}", url.text, super::page::url_of(&file));
            let rest = pins_but(projects, project);
            other.push(OtherCommand {
                label,
                file: Some(file),
                pip: None,
                uv: format!(
                    "uv pip install {preview}--index {u} {rest}{}",
                    shell_word(&wheel)
                ),
            });
        }
    }
    IndexCommands {
        url: url.text.clone(),
        serve: url.serve(out),
        pip,
        uv: format!("uv pip install {preview}--index {u} {pins}"),
        other,
    }
}

/// `name==version` of every project at its newest version, `project`'s at `instead` when given;
/// `NAME==VERSION` for an empty index.
fn pins(projects: &[ProjectReport], instead: Option<(&str, &str)>) -> String {
    let pins: Vec<String> = projects
        .iter()
        .filter_map(|p| {
            let v = match instead {
                Some((name, v)) if name == p.name => v.to_string(),
                _ => newest(p)?,
            };
            Some(shell_word(&format!("{}=={v}", p.name)))
        })
        .collect();
    if pins.is_empty() {
        "NAME==VERSION".to_string()
    } else {
        pins.join(" ")
    }
}

/// Every pin but `project`'s, each followed by a space.
fn pins_but(projects: &[ProjectReport], project: &str) -> String {
    projects
        .iter()
        .filter(|p| p.name != project)
        .filter_map(|p| {
            Some(format!(
                "{} ",
                shell_word(&format!("{}=={}", p.name, newest(p)?))
            ))
        })
        .collect()
}

/// The local-label set's other variants: each other local label of a project's newest release
/// (`2.5.1+0.nomagma` beside `2.5.1+1.magma`), highest first, pinned instead of the newest.
fn local_label_others(projects: &[ProjectReport], u: &str) -> Vec<OtherCommand> {
    let mut out = Vec::new();
    for p in projects {
        let Some(top) = newest(p) else { continue };
        let Some((release, _)) = top.split_once('+') else {
            continue;
        };
        let mut versions: Vec<String> = versions(p)
            .filter(|v| v != &top && v.split_once('+').is_some_and(|(r, _)| r == release))
            .collect();
        versions.sort_by(|a, b| pep440_order(b, a));
        versions.dedup();
        for v in versions {
            let pins = pins(projects, Some((&p.name, &v)));
            out.push(OtherCommand {
                label: v.split_once('+').map(|(_, l)| l).unwrap_or_default().into(),
                file: None,
                pip: Some(format!("pip install --extra-index-url {u} {pins}")),
                uv: format!("uv pip install --index {u} {pins}"),
            });
        }
    }
    out
}

/// The variant wheels of `project`'s set `doc` whose label is not among those with the value the
/// set lists first: (label, file), in file-name order.
fn variant_others(
    projects: &[ProjectReport],
    project: &str,
    doc: &serde_json::Value,
) -> Vec<(String, String)> {
    let Ok(sp) = StaticProperty::of(doc) else {
        return Vec::new();
    };
    let Some(first) = sp.values.first() else {
        return Vec::new();
    };
    let preferred = sp.labels_with(doc, first);
    let listed: Vec<&String> = doc
        .get("variants")
        .and_then(|v| v.as_object())
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    let Some(p) = projects.iter().find(|p| p.name == project) else {
        return Vec::new();
    };
    let Some(version) = newest(p) else {
        return Vec::new();
    };
    p.files
        .iter()
        .filter(|f| !f.yanked && f.filename.split('-').nth(1) == Some(version.as_str()))
        .filter_map(|f| {
            let (_, label) = label_of(&f.filename)?;
            (listed.iter().any(|l| *l == label) && !preferred.contains(label))
                .then(|| (label.to_string(), f.filename.clone()))
        })
        .collect()
}

/// The `-variants.json` file of `project`'s newest version, when the index has one.
pub fn newest_set(project: &ProjectReport) -> Option<String> {
    let v = newest(project)?;
    project
        .files
        .iter()
        .find(|f| {
            f.filename.ends_with(VARIANTS_SUFFIX)
                && f.filename.split('-').nth(1) == Some(v.as_str())
        })
        .map(|f| f.filename.clone())
}

/// The versions of `project`'s wheels that are not yanked.
fn versions(project: &ProjectReport) -> impl Iterator<Item = String> + '_ {
    project
        .files
        .iter()
        .filter(|f| f.filename.ends_with(".whl") && !f.yanked)
        .filter_map(|f| f.filename.split('-').nth(1).map(str::to_string))
}

/// The version of `project`'s wheels an unpinned install from the index would take: the newest by
/// PEP 440's order as far as split indexes need it (release numbers numerically, then the local
/// label, `+1.magma` above `+0.nomagma`; pre-, post- and dev-releases in text order). Yanked files
/// are not candidates.
pub fn newest(project: &ProjectReport) -> Option<String> {
    versions(project).max_by(|a, b| pep440_order(a, b))
}

fn pep440_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (pa, la) = a.split_once('+').unwrap_or((a, ""));
    let (pb, lb) = b.split_once('+').unwrap_or((b, ""));
    let segment = |x: &str, y: &str| match (x.parse::<u64>(), y.parse::<u64>()) {
        (Ok(m), Ok(n)) => m.cmp(&n),
        (Ok(_), Err(_)) => Ordering::Greater,
        (Err(_), Ok(_)) => Ordering::Less,
        (Err(_), Err(_)) => x.cmp(y),
    };
    let local = || {
        let (xs, ys) = (la.split('.'), lb.split('.'));
        match (la.is_empty(), lb.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => xs
                .zip(ys)
                .map(|(x, y)| segment(x, y))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| la.split('.').count().cmp(&lb.split('.').count())),
        }
    };
    crate::version::compare(pa, pb)
        .unwrap_or_else(|| pa.cmp(pb))
        .then_with(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_the_serve_command_binds_what_they_say() {
        let u = IndexUrl::parse("http://127.0.0.1:41234").unwrap();
        assert_eq!(
            (u.text.as_str(), u.port),
            ("http://127.0.0.1:41234/", 41234)
        );
        assert_eq!(
            u.serve(Path::new("a b/idx")),
            "python3 -m http.server --bind 127.0.0.1 --directory 'a b/idx' 41234"
        );
        let u = IndexUrl::parse("http://localhost/srv/slim").unwrap();
        assert_eq!(
            (u.text.as_str(), u.port),
            ("http://localhost/srv/slim/", 80)
        );
        assert_eq!(
            u.serve(Path::new("/x/srv/slim")),
            "python3 -m http.server --bind localhost --directory /x 80"
        );
        assert_eq!(
            IndexUrl::parse("http://127.0.0.1:9/slim/")
                .unwrap()
                .serve(Path::new("slim")),
            "python3 -m http.server --bind 127.0.0.1 --directory . 9"
        );
        let u = IndexUrl::parse("http://[::1]:8001/").unwrap();
        assert!(
            u.serve(Path::new("i"))
                .starts_with("python3 -m http.server --bind ::1 ")
        );
        // Not this machine, TLS, or a path that is not --out's name: what to serve where, as a comment.
        for (url, out) in [
            ("https://example.org/simple/", "simple"),
            ("http://example.org/", "i"),
            ("https://127.0.0.1:8443/", "i"),
            ("http://127.0.0.1:8000/other/", "i"),
        ] {
            let serve = IndexUrl::parse(url).unwrap().serve(Path::new(out));
            assert!(
                serve.starts_with("# serve ") && serve.contains(url),
                "{serve}"
            );
        }
        for bad in [
            "ftp://127.0.0.1/",
            "127.0.0.1:8000",
            "http://user:pw@127.0.0.1/",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:65536/",
            "http://127.0.0.1:80x/",
            "http://127.0.0.1:/",
            "http:///x/",
            "http://127.0.0.1/a//b/",
            "http://127.0.0.1/../",
            "http://127.0.0.1/?q=1",
            "http://127.0.0.1/#f",
            "http://127.0.0.1/a b/",
            "http://127.0.0.1/$(touch x)/",
            "http://[::1/",
            "http://[nothex]/",
            "http://ex ample/",
        ] {
            let e = IndexUrl::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--url ") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn pins_take_the_version_an_unpinned_install_would() {
        use std::cmp::Ordering::*;
        for (a, b, o) in [
            ("2.5.1+1.magma", "2.5.1+0.nomagma", Greater),
            ("2.5.1+split", "2.5.1", Greater),
            ("2.10.0", "2.9.1", Greater),
            ("2.5.1+10", "2.5.1+9", Greater),
            ("2.5.1+1", "2.5.1+abc", Greater),
            ("2.5.1+1.magma", "2.5.1+1.magma.x", Less),
            ("2.5.1", "2.5.1", Equal),
        ] {
            assert_eq!(pep440_order(a, b), o, "{a} vs {b}");
            assert_eq!(pep440_order(b, a), o.reverse(), "{b} vs {a}");
        }
    }
}
