//! The report as GitHub Markdown (`templates/report/report.md.j2`), for pasting into an issue: the
//! same content as the HTML page, with tables in place of the charts (GitHub does not render inline
//! SVG in comments). Every string from an input is auto-escaped with [`escape`], so that a hostile
//! name cannot open a link, an HTML tag or a table cell.

// issue 54: 1 public items still to document here.
#![allow(missing_docs)]

use std::fmt::Write;

use super::Report;
use crate::error::Result;

pub fn render(r: &Report) -> Result<String> {
    super::template::render("report.md", r, minijinja::context! {})
}

/// Escape Markdown and inline HTML; newlines become spaces (a cell or list item is one line).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// A Markdown code span of `s`, for op names, paths and commands: shown as typed (no `\_`
/// escapes to read around), yet unable to end early (its fence is longer than any run of
/// backticks in it), to open a table cell (`|` is escaped, which GFM undoes inside a table) or to
/// carry a control character. With `nowrap`, spaces become no-break spaces, so an op with its shape
/// and dtype (`lu_factor 64x256x256 float64`) stays on one line of a rendered table.
pub fn code(s: &str, nowrap: bool) -> String {
    let space = if nowrap { '\u{a0}' } else { ' ' };
    let mut body = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ' ' | '\n' | '\r' | '\t' => body.push(space),
            '|' => body.push_str("\\|"),
            c if c.is_control() => {
                let _ = write!(body, "\\u{{{:x}}}", c as u32);
            }
            c => body.push(c),
        }
    }
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // A span that starts or ends with a backtick needs a space inside its fence (GFM strips one).
    let pad = if body.is_empty() || body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::code;

    #[test]
    fn a_code_span_cannot_end_early_open_a_cell_or_wrap_an_op() {
        assert_eq!(code("ldl_factor_hermitian", true), "`ldl_factor_hermitian`");
        assert_eq!(
            code("lu_factor 64x256x256 float64", true),
            "`lu_factor\u{a0}64x256x256\u{a0}float64`"
        );
        assert_eq!(code("a b", false), "`a b`");
        assert_eq!(code("a``b", false), "```a``b```");
        assert_eq!(code("`x", false), "`` `x ``");
        assert_eq!(code("a|b\n<i>\u{1b}", false), "`a\\|b <i>\\u{1b}`");
    }
}
