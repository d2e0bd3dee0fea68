//! The report as GitHub Markdown (`templates/report/report.md.j2`), for pasting into an issue: the
//! same content as the HTML page, with tables in place of the charts (GitHub does not render inline
//! SVG in comments). Every string from an input is auto-escaped with [`escape`], so that a hostile
//! name cannot open a link, an HTML tag or a table cell.

use super::Report;
// The page's escapers, kept at their public path.
pub use super::markdown::{code, escape};
use crate::error::Result;

/// The page as Markdown, from its template.
pub fn render(r: &Report) -> Result<String> {
    super::template::render("report.md", r, minijinja::context! {})
}
