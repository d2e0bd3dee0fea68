//! The report as one self-contained HTML file (`templates/report/report.html.j2`): inline CSS and
//! SVG, no script, no external fetch. Every string from an input is auto-escaped by the template
//! environment (`template.rs`): file names and error messages in the documents are hostile as far
//! as this page is concerned.

use minijinja::Value;

use super::{Report, svg};
use crate::error::Result;

/// The page as self-contained HTML: the template with the charts drawn as inline SVG.
pub fn render(r: &Report) -> Result<String> {
    // The charts come drawn, their text escaped by crate::svg; the template shows each where the
    // page has its data.
    let charts = minijinja::context! {
        charts => minijinja::context! {
            bytes => Value::from_safe_string(svg::bytes_chart(&r.byte_bars)),
            ratio => Value::from_safe_string(svg::ratio_chart(&r.backend)),
            fatbin => Value::from_safe_string(svg::fatbin_chart(&r.fatbin_bars)),
        }
    };
    super::template::render("report.html", r, charts)
}
