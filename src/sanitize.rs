//! The one sanitiser for strings that come from an input and reach a terminal, a file name, a
//! header or a shell command (docs/security.md, "Strings from the input").
//!
//! Three kinds of operation, each used wherever such a string flows:
//! - **validate** what has a grammar of its own and lands in names, headers and commands: a
//!   distribution name (PEP 508), a version (PEP 440), a wheel tag (PEP 425), a header value (no
//!   line breaks). They answer `Err(why)`, which the caller turns into a one-line `BadInput`
//!   naming the file (exit 2), before anything is written;
//! - **quote** for the context a string is printed or written into: a POSIX shell word
//!   ([`shell_word`]), inside `"…"` ([`shell_double`]), YAML, globs, generated comments;
//! - **escape** control characters for the terminal and one-line errors ([`printable`],
//!   [`terminal_text`]): `\u{1b}` for ESC, `\0` for NUL, `\r`, `\n`, `\t`, always the same way
//!   (Rust's `char::escape_default`), so a hostile name can neither move the cursor, recolour the
//!   terminal nor fake a second line.

/// A character that must not reach a terminal raw: C0/C1 controls and DEL, and the Unicode
/// bidirectional controls that reorder what is shown (Trojan Source, CVE-2021-42574).
fn hostile(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A name, path or message on one line: every hostile character escaped (`\n`, `\u{1b}`, …).
pub fn printable(s: &str) -> String {
    if !s.chars().any(hostile) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if hostile(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Text of several lines for the terminal or a text file: newlines and tabs kept, every other
/// hostile character escaped as [`printable`] does.
pub fn terminal_text(s: &str) -> std::borrow::Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t';
    if !s.chars().any(|c| hostile(c) && !keep(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    s.chars()
        .map(|c| {
            if hostile(c) && !keep(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// One word of a POSIX shell command we print or write: as it is when it holds only characters
/// no shell treats specially, else in single quotes (a `'` inside as `'\''`), as Python's
/// `shlex.quote` does. Control characters are escaped first: a printed command never carries them.
pub fn shell_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        return s.to_string();
    }
    format!("'{}'", printable(s).replace('\'', "'\\''"))
}

// --- validation (PyPA specifications) --------------------------------------------------------

/// A string the PyPA specifications do not allow where it was found. The messages quote the
/// string with every hostile character escaped; callers prefix the field (`Name: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Not a PEP 508 distribution name.
    #[error("{} is not a distribution name (PEP 508)", quoted(.0))]
    DistName(String),
    /// Not a PEP 440 version.
    #[error("{} is not a version (PEP 440)", quoted(.0))]
    Version(String),
    /// Not a PEP 425 wheel tag.
    #[error("{} is not a wheel tag (PEP 425)", quoted(.0))]
    WheelTag(String),
    /// A control character in a header value (it would end or forge the header).
    #[error("{key} value with the control character {}: a header cannot hold it", .control.escape_default())]
    HeaderControl {
        /// The header's key.
        key: String,
        /// The control character found.
        control: char,
    },
}

/// A distribution name (PEP 508, the core metadata `Name`): ASCII letters and digits, with `.`,
/// `_`, `-` inside.
pub fn check_dist_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Invalid::DistName(name.to_string()))
    }
}

/// A version as PEP 440 reads it (the permissive form `packaging` accepts, `v` prefix, separators
/// and a local label included): `2.11.0`, `2.11.0+cu130`, `1!2.0rc1.post2.dev3`.
pub fn check_version(v: &str) -> Result<(), Invalid> {
    if Pep440(v.to_ascii_lowercase().as_bytes(), 0).whole() {
        Ok(())
    } else {
        Err(Invalid::Version(v.to_string()))
    }
}

/// One part of a wheel's compatibility tag (PEP 425: python, ABI or platform, `.`-joined for a
/// compressed set): ASCII letters, digits, `_` and `.`.
pub fn check_wheel_tag(tag: &str) -> Result<(), Invalid> {
    let ok = !tag.is_empty()
        && !tag.starts_with('.')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(Invalid::WheelTag(tag.to_string()))
    }
}

/// A header line `Key: value` for core metadata (RFC 822 style): the value may not hold a line
/// break or any other control character, which a reader would take for a new header.
pub fn header_line(key: &str, value: &str) -> Result<String, Invalid> {
    match value.chars().find(|c| c.is_control()) {
        Some(control) => Err(Invalid::HeaderControl {
            key: key.to_string(),
            control,
        }),
        None => Ok(format!("{key}: {value}")),
    }
}

/// A string shown inside a message about itself: in double quotes, every hostile character
/// escaped.
pub fn quoted(s: &str) -> String {
    format!("\"{}\"", printable(s).replace('"', "\\\""))
}

/// A cursor over a lowercased version string, following `packaging.version.VERSION_PATTERN`.
struct Pep440<'a>(&'a [u8], usize);

impl Pep440<'_> {
    fn whole(mut self) -> bool {
        self.eat(b"v");
        if !self.digits() {
            return false;
        }
        if self.eat(b"!") && !self.digits() {
            return false;
        }
        while self.peek() == Some(b'.') && self.0.get(self.1 + 1).is_some_and(u8::is_ascii_digit) {
            self.1 += 1;
            self.digits();
        }
        self.suffix(&["alpha", "a", "beta", "b", "preview", "pre", "c", "rc"]);
        let at = self.1;
        if !(self.eat(b"-") && self.digits()) {
            self.1 = at;
            self.suffix(&["post", "rev", "r"]);
        }
        self.suffix(&["dev"]);
        if self.eat(b"+") {
            loop {
                if !self.alnums() {
                    return false;
                }
                if !matches!(self.peek(), Some(b'-' | b'_' | b'.')) {
                    break;
                }
                self.1 += 1;
            }
        }
        self.1 == self.0.len()
    }

    /// `[-_.]?WORD[-_.]?[0-9]*`, or nothing (the position is kept).
    fn suffix(&mut self, words: &[&str]) {
        let at = self.1;
        if matches!(self.peek(), Some(b'-' | b'_' | b'.')) {
            self.1 += 1;
        }
        match words
            .iter()
            .find(|w| self.0[self.1..].starts_with(w.as_bytes()))
        {
            Some(w) => {
                self.1 += w.len();
                if matches!(self.peek(), Some(b'-' | b'_' | b'.'))
                    && self.0.get(self.1 + 1).is_some_and(u8::is_ascii_digit)
                {
                    self.1 += 1;
                }
                self.digits();
            }
            None => self.1 = at,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.0.get(self.1).copied()
    }

    fn eat(&mut self, s: &[u8]) -> bool {
        let hit = self.0[self.1..].starts_with(s);
        if hit {
            self.1 += s.len();
        }
        hit
    }

    fn digits(&mut self) -> bool {
        self.run(|b| b.is_ascii_digit())
    }

    fn alnums(&mut self) -> bool {
        self.run(|b| b.is_ascii_alphanumeric())
    }

    fn run(&mut self, f: impl Fn(u8) -> bool) -> bool {
        let start = self.1;
        while self.peek().is_some_and(&f) {
            self.1 += 1;
        }
        self.1 > start
    }
}

// --- quoting for generated recipes and scripts -------------------------------------------------

/// Inside `"…"` in sh/bash: only `\`, `"`, `$` and `` ` `` are special there.
pub fn shell_double(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | '"' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Inside `"…"` in YAML (a double-quoted scalar): `\` and `"` are escaped.
pub fn yaml_double(s: &str) -> String {
    let j = serde_json::to_string(s).expect("a string serialises");
    j[1..j.len() - 1].to_string()
}

/// A YAML sequence item: left plain when YAML reads it back unchanged, else double-quoted.
pub fn yaml_item(s: &str) -> String {
    let first = s.chars().next();
    let plain = !s.is_empty()
        && !s.chars().any(|c| c.is_control())
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with([':', ' '])
        && !first.is_some_and(|c| " -?:,[]{}#&*!|>'\"%@`".contains(c));
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).expect("a string serialises")
    }
}

/// A literal file name in a glob (rattler-build `files`, `package_contents`): every glob
/// metacharacter in a one-character class.
pub fn glob_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// Text for a generated comment line: control characters, Jinja delimiters and selector
/// brackets cannot survive into it.
pub fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect::<String>()
        .replace('{', "(")
        .replace('}', ")")
        .replace('[', "(")
        .replace(']', ")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_paths_are_unchanged() {
        let p = "lib/python3.11/site-packages/torch/lib/libtorch_cuda_linalg.so";
        assert_eq!(shell_double(p), p);
        assert_eq!(yaml_double(p), p);
        assert_eq!(glob_literal(p), p);
        assert_eq!(shell_word(p), p);
        assert_eq!(printable(p), p);
        assert_eq!(
            yaml_item(&format!("test -f \"$PREFIX/{p}\"")),
            format!("test -f \"$PREFIX/{p}\"")
        );
    }

    #[test]
    fn hostile_paths_are_inert() {
        assert_eq!(
            shell_double("a$(touch${IFS}X)`id`\"b"),
            "a\\$(touch\\${IFS}X)\\`id\\`\\\"b"
        );
        assert_eq!(yaml_double("a\"b"), "a\\\"b");
        assert_eq!(yaml_item("rm -f a: b"), "\"rm -f a: b\"");
        assert_eq!(yaml_item("x #y"), "\"x #y\"");
        assert_eq!(yaml_item("'q"), "\"'q\"");
        assert_eq!(glob_literal("lib[1]*.so{a}"), "lib[[]1[]][*].so[{]a[}]");
        assert_eq!(comment("a{{ x }}\n# [win]"), "a(( x ))?# (win)");
    }

    #[test]
    fn control_characters_are_escaped_the_same_way_everywhere() {
        assert_eq!(
            printable("a\x1b[31mb\0c\x07d\re\nf"),
            "a\\u{1b}[31mb\\u{0}c\\u{7}d\\re\\nf"
        );
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(
            terminal_text("a\x1b]0;x\x07\n\tb\r"),
            "a\\u{1b}]0;x\\u{7}\n\tb\\r"
        );
        assert!(matches!(
            terminal_text("plain\ntext"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn shell_words_run_as_one_literal_argument() {
        for s in [
            "torch;touch PWNED",
            "$(touch PWNED)",
            "a'b",
            "`id`",
            "",
            "x y",
            "a\nb",
            "torch-cuda-linalg==2.11.0+0.nomagma",
        ] {
            let w = shell_word(s);
            let o = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {w}"))
                .output()
                .unwrap();
            let want = printable(s);
            assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{w}");
        }
        assert_eq!(
            shell_word("torch-cuda-linalg==2.11.0+0.nomagma"),
            "torch-cuda-linalg==2.11.0+0.nomagma"
        );
        assert_eq!(shell_word("a b"), "'a b'");
    }

    #[test]
    fn pypa_names_versions_and_tags() {
        for ok in ["torch", "torch-cuda-linalg", "A.b_c-9", "x"] {
            assert!(check_dist_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "x-",
            "torch\rRequires-Dist: evil",
            "torch;id",
            "$(id)",
            "t\x1b[31m",
            "a b",
            "tör",
        ] {
            assert!(check_dist_name(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "2.11.0",
            "2.11.0+cu130",
            "1.10.2+cu113.split",
            "1!2.0rc1.post2.dev3",
            "v1.0",
            "1.0-1",
            "1.0a",
            "2.5.1+1.magma",
            "1.0.post",
        ] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "2.11.0;id",
            "2.11.0+",
            "2.11.0+a..b",
            "1.0 x",
            "x1.0",
            "1.0$(id)",
            "1.0\r",
            "1..0",
            "+cu1",
        ] {
            assert!(check_version(bad).is_err(), "{bad:?}");
        }
        for ok in ["cp311", "manylinux_2_28_x86_64", "py2.py3", "none"] {
            assert!(check_wheel_tag(ok).is_ok(), "{ok}");
        }
        for bad in ["", "x;id", "$(id)", "a/b", ".x", "a b"] {
            assert!(check_wheel_tag(bad).is_err(), "{bad:?}");
        }
        assert_eq!(header_line("Name", "torch").unwrap(), "Name: torch");
        assert!(
            header_line("Name", "torch\rRequires-Dist: evil")
                .unwrap_err()
                .to_string()
                .contains("\\r")
        );
        assert!(
            check_dist_name("a\x1bb")
                .unwrap_err()
                .to_string()
                .contains("\\u{1b}")
        );
    }
}
