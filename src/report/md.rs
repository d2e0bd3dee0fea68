//! The report as GitHub Markdown (`templates/report/report.md.j2`), for pasting into an issue: the
//! same content as the HTML page, with tables in place of the charts (GitHub does not render inline
//! SVG in comments). Every string from an input is auto-escaped with [`escape`], so that a hostile
//! name cannot open a link, an HTML tag or a table cell.

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
