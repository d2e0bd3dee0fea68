//! One error type for the library, with the exit code the CLI maps it to.
//!
//! The CLI contract (see README) is: 0 success/confined, 1 a negative verdict, 2 bad input or usage.
//! Every `BadInput` names the file it is about, so the one-line message is enough to act on.

use std::fmt;
use std::path::{Path, PathBuf};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug)]
pub enum Error {
    /// Hostile, broken or unsupported input. Exit code 2.
    BadInput { file: String, reason: String },
    /// An I/O failure on a named path. Exit code 2: the input could not be read.
    Io { path: PathBuf, source: std::io::Error },
    /// A command-line combination that cannot work. Exit code 2.
    Usage(String),
    /// The input is fine but the answer is no (emit on a plan that is not confined). Exit code 1.
    Refused(String),
    /// A failure of the tool itself or of a downstream step (solver, writer). Exit code 3.
    Other(String),
}

impl Error {
    pub fn bad(file: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::BadInput { file: file.to_string(), reason: reason.to_string() }
    }

    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }

    pub fn other(msg: impl fmt::Display) -> Self {
        Error::Other(msg.to_string())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Refused(_) => 1,
            Error::BadInput { .. } | Error::Io { .. } | Error::Usage(_) => 2,
            Error::Other(_) => 3,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Keep each variant to one line: CI logs and users grep for the file name.
            Error::BadInput { file, reason } => write!(f, "{}: {}", printable(file), one_line(reason)),
            Error::Io { path, source } => write!(f, "{}: {}", printable(&path.display().to_string()), one_line(&source.to_string())),
            Error::Usage(msg) | Error::Refused(msg) => write!(f, "{}", one_line(msg)),
            Error::Other(msg) => write!(f, "{}", one_line(msg)),
        }
    }
}

impl std::error::Error for Error {}

/// A file or member name as it can be shown on one line: control characters (a newline in a
/// hostile member name) escaped, everything else as it is.
fn printable(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
