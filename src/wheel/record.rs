//! A wheel's `RECORD` (PEP 376 / the binary distribution format): one CSV row per file —
//! path, `sha256=` + URL-safe base64 of the digest without padding, size — and the RECORD itself
//! with empty hash and size.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// One row: a member's path and, except for RECORD (and its signatures), its digest and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordEntry {
    /// The member's path inside the wheel, as RECORD writes it.
    pub path: String,
    /// `sha256=…` exactly as the wheel spec writes it.
    pub hash: Option<String>,
    /// Its size in bytes; None for RECORD itself.
    pub size: Option<u64>,
}

/// `sha256=` + URL-safe base64 without padding, the form RECORD uses.
pub fn hash_field(digest: &[u8]) -> String {
    format!("sha256={}", URL_SAFE_NO_PAD.encode(digest))
}

/// The RECORD hash field of `bytes`.
pub fn hash_of(bytes: &[u8]) -> String {
    hash_field(&Sha256::digest(bytes))
}

/// A RECORD row that cannot be read; each names its line (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A quoted field is not closed.
    #[error("RECORD line {line}: unbalanced quotes")]
    UnbalancedQuotes {
        /// The RECORD line, from 1.
        line: usize,
    },
    /// A line does not have the three fields (path, hash, size).
    #[error("RECORD line {line}: {fields} fields, expected 3")]
    Fields {
        /// The RECORD line, from 1.
        line: usize,
        /// How many fields it has.
        fields: usize,
    },
    /// A hash is not `sha256=…`.
    #[error("RECORD line {line}: {path}: hash {hash:?} is not sha256")]
    NotSha256 {
        /// The RECORD line, from 1.
        line: usize,
        /// The member's path.
        path: String,
        /// The hash as written.
        hash: String,
    },
    /// A size is not a number.
    #[error("RECORD line {line}: {path}: size {size:?} is not a number")]
    Size {
        /// The RECORD line, from 1.
        line: usize,
        /// The member's path.
        path: String,
        /// The size as written.
        size: String,
    },
}

/// Parse RECORD text: CSV with `"` quoting (a path may hold a comma). `Err` names the row.
pub fn parse(text: &str) -> Result<Vec<RecordEntry>, RecordError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let line_no = i + 1;
        let fields = split_csv(line).ok_or(RecordError::UnbalancedQuotes { line: line_no })?;
        let [path, hash, size] =
            <[String; 3]>::try_from(fields).map_err(|f| RecordError::Fields {
                line: line_no,
                fields: f.len(),
            })?;
        let hash = (!hash.is_empty()).then_some(hash);
        if let Some(h) = &hash
            && !h.starts_with("sha256=")
        {
            return Err(RecordError::NotSha256 {
                line: line_no,
                path,
                hash: h.clone(),
            });
        }
        let size = if size.is_empty() {
            None
        } else {
            match size.parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    return Err(RecordError::Size {
                        line: line_no,
                        path,
                        size,
                    });
                }
            }
        };
        out.push(RecordEntry { path, hash, size });
    }
    Ok(out)
}

/// RECORD text for `entries`, rows in the order given, `\n` line ends (as pip and wheel write it).
pub fn write(entries: &[RecordEntry]) -> String {
    let mut s = String::new();
    for e in entries {
        s.push_str(&quote(&e.path));
        s.push(',');
        s.push_str(e.hash.as_deref().unwrap_or(""));
        s.push(',');
        if let Some(n) = e.size {
            s.push_str(&n.to_string());
        }
        s.push('\n');
    }
    s
}

fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

fn split_csv(line: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        let cur = fields.last_mut()?;
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(String::new()),
            (c, _) => cur.push(c),
        }
    }
    (!quoted).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_with_quoting() {
        let entries = vec![
            RecordEntry {
                path: "torch/lib/a,b \"q\".so".into(),
                hash: Some(hash_of(b"x")),
                size: Some(1),
            },
            RecordEntry {
                path: "torch-2.11.0.dist-info/RECORD".into(),
                hash: None,
                size: None,
            },
        ];
        let text = write(&entries);
        assert_eq!(
            text.lines().next().unwrap(),
            "\"torch/lib/a,b \"\"q\"\".so\",sha256=LXEWQrcmsEQBYnyp-6wy9chTD7GQPMTbAiWHF5IaSIE,1"
        );
        assert_eq!(parse(&text).unwrap(), entries);
    }

    #[test]
    fn malformed_rows_are_refused() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(err("a,sha256=x\n"), "RECORD line 1: 2 fields, expected 3");
        assert!(err("a,md5=x,1\n").contains("not sha256"));
        assert_eq!(
            err("x,,\na,sha256=x,ten\n"),
            "RECORD line 2: a: size \"ten\" is not a number"
        );
        assert!(err("\"a,sha256=x,1\n").contains("unbalanced"));
    }
}
