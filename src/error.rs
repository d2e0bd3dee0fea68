//! The library's error type (`thiserror`), with the outcome the CLI maps it to — in one place,
//! [`Error::exit`] (the numbers are [`Exit::code`]'s).
//!
//! The CLI contract (see README) is: 0 success/confined, 1 a negative verdict, 2 bad input or usage,
//! 3 a failure of the tool or of a library it drives. Every `BadInput` names the file it is about,
//! and every error prints as one line that keeps its cause chain (`context: cause: cause's cause`),
//! so the message is enough to act on and greppable in CI logs. Layers with errors of their own
//! (the ELF reader, the smoke runner) convert into this one with `#[from]`, keeping them as source.

use std::fmt;
use std::path::{Path, PathBuf};

// File and member names, reasons and causes: control characters (a newline or an escape sequence
// in a hostile name or JSON value) are escaped, everything else is shown as it is.
use crate::exit::Exit;
use crate::sanitize::printable;

/// The library's `Result`: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A cause kept as `#[source]`: an error from zip, serde, rattler, minijinja, tokio….
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every error of the library: which file or step it is about, its cause kept as the source, and
/// (through [`Error::exit`]) the outcome the CLI maps it to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Hostile, broken or unsupported input. Exit code 2.
    #[error("{}: {}", printable(file), printable(&one_line(reason)))]
    BadInput {
        /// The file (or member, `archive:member`) the input is about.
        file: String,
        /// Why it is refused, in the tool's words.
        reason: String,
    },
    /// Bad input that a library found (a zip, tar, YAML or JSON reader's error): prints as
    /// `BadInput` with `reason: cause` (or the cause alone when `reason` is empty,
    /// [`Error::bad_in`]), keeping the cause as the source. Exit code 2.
    ///
    /// Differs from [`Error::Invalid`] only in its text: this one prints the cause's own
    /// `Display` (the words a `BadInput` carried before the cause was kept), `Invalid` prints the
    /// whole source chain. Both are kept, not merged, because merging would change messages that
    /// users and tests read: a reader whose message was `file: reason: cause` uses this one, a
    /// reader whose error type is ours and layered (a document refusal, a fatbin walk) `Invalid`.
    #[error("{}: {}", printable(file), printable(&one_line(&reason_and_cause(reason, source))))]
    BadSource {
        /// The file (or member, `archive:member`) the input is about.
        file: String,
        /// What the tool was reading when the cause was found; empty when the cause says it all.
        reason: String,
        /// The library's error, kept as the source.
        #[source]
        source: Cause,
    },
    /// An ELF file the reader refuses (not ELF, truncated, offsets outside the file). Exit code 2;
    /// prints as a `BadInput` would, with the reader's error kept as the source.
    #[error("{}: {}", printable(file), chain(source))]
    Elf {
        /// The file (or member, `archive:member`) the input is about.
        file: String,
        /// The ELF reader's error, kept as the source.
        #[source]
        source: crate::elf::ElfError,
    },
    /// Input a reader refuses, with the reader's error kept as the source (a `.nv_fatbin` walk, a
    /// contract file's JSON). Exit code 2; prints as a `BadInput` would, with the source's whole
    /// chain (`file: cause: cause's cause`) where [`Error::BadSource`] prints `reason: cause`.
    #[error("{}: {}", printable(file), chain(source.as_ref()))]
    Invalid {
        /// The file (or member, `archive:member`) the input is about.
        file: String,
        /// The library's error, kept as the source.
        #[source]
        source: Cause,
    },
    /// An I/O failure on a named path. Exit code 2: the input could not be read.
    #[error("{}: {}", printable(&path.display().to_string()), chain(source))]
    Io {
        /// The path the I/O was on.
        path: PathBuf,
        /// The I/O error, kept as the source.
        #[source]
        source: std::io::Error,
    },
    /// A command-line combination that cannot work. Exit code 2.
    #[error("{}", printable(&one_line(.0)))]
    Usage(#[doc = "What cannot work, naming the flags."] String),
    /// A command-line value that a library (or one of the tool's own checks) refused: prints as
    /// [`Error::Usage`] with `value: cause` (the cause alone when `value` is empty), byte for byte
    /// what `Usage(format!("{value}: {cause}"))` printed, but the cause stays the source. Exit 2.
    #[error("{}", printable(&one_line(&reason_and_cause(value, source))))]
    UsageSource {
        /// The flag and the value refused (`--virtual NAME`); empty when the cause names them.
        value: String,
        /// The error that refused it, kept as the source.
        #[source]
        source: Cause,
    },
    /// The input is fine but the answer is no (pack on a plan that is not confined). Exit code 1.
    #[error("{}", printable(&one_line(.0)))]
    Refused(#[doc = "Why the answer is no."] String),
    /// A library the tool drives failed (writer, solver, indexer, template engine). Exit code 3.
    #[error("{}: {}", printable(&one_line(context)), chain(source.as_ref()))]
    Failed {
        /// What the tool was doing.
        context: String,
        /// The library's error, kept as the source.
        #[source]
        source: Cause,
    },
    /// An invariant of the tool itself does not hold (a bug, or a lossless check that failed).
    /// Exit code 3.
    #[error("{}", printable(&one_line(.0)))]
    Internal(#[doc = "Which invariant broke."] String),
}

impl Error {
    /// Hostile, broken or unsupported input in `file`, for a reason the tool words itself (exit 2).
    /// A library's error goes to [`Error::bad_in`] or [`Error::bad_source`] instead, as the cause.
    pub fn bad(file: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::BadInput {
            file: file.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Bad input that `source` (a library's error) found: `file: reason: source`, as
    /// [`Error::bad`] with the reason and cause joined would print, but the cause stays the source.
    pub fn bad_source(
        file: impl fmt::Display,
        reason: impl fmt::Display,
        source: impl Into<Cause>,
    ) -> Self {
        Error::BadSource {
            file: file.to_string(),
            reason: reason.to_string(),
            source: source.into(),
        }
    }

    /// Bad input in `file` that `source` found and words alone: `file: source`, byte for byte what
    /// [`Error::bad`]`(file, source)` prints, but the cause stays the source instead of text.
    pub fn bad_in(file: impl fmt::Display, source: impl Into<Cause>) -> Self {
        Self::bad_source(file, "", source)
    }

    /// The ELF reader refused `file`.
    pub fn elf(file: impl fmt::Display, source: crate::elf::ElfError) -> Self {
        Error::Elf {
            file: file.to_string(),
            source,
        }
    }

    /// A reader refused `file`; `source` says why and is kept as the cause.
    pub fn invalid(file: impl fmt::Display, source: impl Into<Cause>) -> Self {
        Error::Invalid {
            file: file.to_string(),
            source: source.into(),
        }
    }

    /// A command-line `value` that `source` refused (exit 2): `value: source`, as
    /// [`Error::Usage`] would print it, with the cause kept as the source.
    pub fn usage_source(value: impl fmt::Display, source: impl Into<Cause>) -> Self {
        Error::UsageSource {
            value: value.to_string(),
            source: source.into(),
        }
    }

    /// An I/O failure on `path` (exit 2); [`Context::at`] builds it from an `io::Result`.
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// A library call failed: `context` says what the tool was doing, `source` is kept as the cause.
    pub fn failed(context: impl fmt::Display, source: impl Into<Cause>) -> Self {
        Error::Failed {
            context: context.to_string(),
            source: source.into(),
        }
    }

    /// A broken invariant of the tool (exit 3).
    pub fn internal(msg: impl fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }

    /// Which outcome this error is (its exit code is [`Exit::code`]'s).
    pub fn exit(&self) -> Exit {
        match self {
            Error::Refused(_) => Exit::No,
            Error::BadInput { .. }
            | Error::BadSource { .. }
            | Error::Elf { .. }
            | Error::Invalid { .. }
            | Error::Io { .. }
            | Error::Usage(_)
            | Error::UsageSource { .. } => Exit::BadInput,
            Error::Failed { .. } | Error::Internal(_) => Exit::Failure,
        }
    }
}

/// The context a failed call needs to become an [`Error`], said once at the call instead of in a
/// hand-written `map_err` closure: `fs::read(p).at(p)?`, `zip.by_index(i).bad_at(file, "member")?`.
///
/// Implemented for every `Result` whose error can be kept as a [`Cause`] (io, zip, rattler, serde,
/// minijinja…); each method builds the same variant, and so prints the same text, as the
/// constructor it names. The arguments are evaluated before the call, so pass borrowed, cheap
/// values (a path, `path.display()`, a literal); a reason that must be formatted stays a closure.
pub trait Context<T, E> {
    /// An I/O failure on `path`: [`Error::io`].
    fn at(self, path: impl AsRef<Path>) -> Result<T>
    where
        E: Into<std::io::Error>;
    /// Bad input in `file` that the library found: [`Error::bad_source`] (`file: reason: cause`).
    fn bad_at(self, file: impl fmt::Display, reason: impl fmt::Display) -> Result<T>;
    /// A reader refused `file`, the cause says why: [`Error::invalid`] (`file: cause`).
    fn invalid_at(self, file: impl fmt::Display) -> Result<T>;
    /// Bad input in `file`, the cause's own text says why: [`Error::bad_in`] (`file: cause`, as
    /// `Error::bad(file, cause)` printed, but the cause is kept as the source, not flattened).
    fn bad_in(self, file: impl fmt::Display) -> Result<T>;
    /// The library failed while the tool was doing `context`: [`Error::failed`] (exit 3).
    fn failed_at(self, context: impl fmt::Display) -> Result<T>;
    /// The ELF reader refused `file`: [`Error::elf`] (exit 2, printed as bad input).
    fn elf_at(self, file: impl fmt::Display) -> Result<T>
    where
        E: Into<crate::elf::ElfError>;
}

impl<T, E: Into<Cause>> Context<T, E> for std::result::Result<T, E> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>
    where
        E: Into<std::io::Error>,
    {
        self.map_err(|e| Error::io(path, e.into()))
    }

    fn bad_at(self, file: impl fmt::Display, reason: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::bad_source(file, reason, e))
    }

    fn bad_in(self, file: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::bad_in(file, e))
    }

    fn invalid_at(self, file: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::invalid(file, e))
    }

    fn failed_at(self, context: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::failed(context, e))
    }

    fn elf_at(self, file: impl fmt::Display) -> Result<T>
    where
        E: Into<crate::elf::ElfError>,
    {
        self.map_err(|e| Error::elf(file, e.into()))
    }
}

/// An error and its sources on one line, `a: b: c`, skipping a source whose text its parent
/// already ends with (many libraries repeat their cause in their own message).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = one_line(&e.to_string());
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = one_line(&s.to_string());
        if !text.is_empty() && !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    printable(&out)
}

/// `reason: cause`, or the cause alone when there is no reason ([`Error::bad_in`]).
fn reason_and_cause(reason: &str, source: &Cause) -> String {
    if reason.is_empty() {
        source.to_string()
    } else {
        format!("{reason}: {source}")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer failure")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn failed_keeps_the_cause_chain_on_one_line() {
        let cause = Outer(std::io::Error::other("disk\nfull"));
        let e = Error::failed("writing x.conda", cause);
        assert_eq!(e.to_string(), "writing x.conda: outer failure: disk full");
        assert_eq!(e.exit(), Exit::Failure);
        assert!(
            std::error::Error::source(&e).is_some(),
            "the cause is kept as source"
        );
    }

    #[test]
    fn io_errors_name_the_path_and_escape_control_characters() {
        let e = Error::io("a\nb", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(e.to_string(), "a\\nb: entity not found");
        assert_eq!(e.exit(), Exit::BadInput);
    }

    #[test]
    fn elf_errors_read_as_bad_input_and_keep_their_cause() {
        let e = Error::elf(
            "lib/libx.so",
            crate::elf::ElfView::parse(b"\x7fELF\x03\x01 and more bytes")
                .err()
                .unwrap(),
        );
        assert_eq!(e.to_string(), "lib/libx.so: unknown ELF class 3");
        assert_eq!(
            e.to_string(),
            Error::bad("lib/libx.so", "unknown ELF class 3").to_string()
        );
        assert_eq!(e.exit(), Exit::BadInput);
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<crate::elf::ElfError>()));
    }

    /// The context trait builds the very errors the hand-written closures built: same text, same
    /// exit, and the library's error kept as the source instead of flattened into the reason.
    #[test]
    fn context_methods_print_as_the_constructors_and_keep_the_cause() {
        let io = || Err::<(), _>(std::io::Error::from(std::io::ErrorKind::NotFound));
        let e = io().at("a\nb").unwrap_err();
        assert_eq!(e.to_string(), "a\\nb: entity not found");
        assert_eq!(e.exit(), Exit::BadInput);
        let cause = || Outer(std::io::Error::other("disk\nfull"));
        let e = Err::<(), _>(cause()).bad_in("x.whl").unwrap_err();
        assert_eq!(e.to_string(), Error::bad("x.whl", cause()).to_string());
        assert_eq!(e.to_string(), "x.whl: outer failure");
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<Outer>()));
        let e = Err::<(), _>(cause()).bad_at("x.whl", "member").unwrap_err();
        assert_eq!(e.to_string(), "x.whl: member: outer failure");
        assert_eq!(e.exit(), Exit::BadInput);
        // Invalid prints the whole chain, BadSource the cause's own text (see the variants' docs).
        let e = Err::<(), _>(cause()).invalid_at("x.whl").unwrap_err();
        assert_eq!(e.to_string(), "x.whl: outer failure: disk full");
        assert_eq!(e.exit(), Exit::BadInput);
        let e = Err::<(), _>(cause()).failed_at("writing").unwrap_err();
        assert_eq!(e.to_string(), "writing: outer failure: disk full");
        assert_eq!(e.exit(), Exit::Failure);
        let parse = || crate::elf::ElfView::parse(b"not ELF").map(|_| ());
        let e = parse().elf_at("x.so").unwrap_err();
        let built = Error::elf("x.so", parse().unwrap_err());
        assert_eq!(e.to_string(), built.to_string());
        assert_eq!(e.exit(), Exit::BadInput);
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<crate::elf::ElfError>()));
    }

    #[test]
    fn exit_codes_are_mapped_in_one_place() {
        assert_eq!(Error::Refused("no".into()).exit(), Exit::No);
        assert_eq!(Error::Usage("no".into()).exit(), Exit::BadInput);
        assert_eq!(Error::bad("f", "r").exit(), Exit::BadInput);
        assert_eq!(Error::internal("bug").exit(), Exit::Failure);
    }

    /// A refused command-line value prints what `Usage(format!("{value}: {e}"))` printed (the
    /// cause alone without a value), exits 2, and keeps the library's error as the source.
    #[test]
    fn usage_source_prints_as_usage_and_keeps_the_cause() {
        let cause = || Outer(std::io::Error::other("disk\nfull"));
        let e = Error::usage_source("--virtual __cuda\u{1b}", cause());
        let flat = Error::Usage(format!("--virtual __cuda\u{1b}: {}", cause()));
        assert_eq!(e.to_string(), flat.to_string());
        assert_eq!(e.exit(), Exit::BadInput);
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<Outer>()));
        let alone = Error::usage_source("", cause());
        assert_eq!(
            alone.to_string(),
            Error::Usage(cause().to_string()).to_string()
        );
    }
}
