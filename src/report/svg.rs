//! Inline SVG charts: no JavaScript, no external fonts, readable without colour (every bar has a
//! fill pattern and a text label with its value). Each bar carries its plotted value in a
//! `data-value` attribute, so a test can check that lengths are proportional to the values.

use std::fmt::Write;

use super::{BackendLine, ByteBar, fmt_ms, fmt_ratio};
use crate::output::{human_bytes, thousands};

/// Width of the longest bar, in SVG units.
pub const BAR_MAX: f64 = 480.0;
/// Pixels per decade on the ratio chart; the chart spans 1/100 … 100.
pub const DECADE: f64 = 120.0;
const LABEL_W: f64 = 230.0;
const ROW_H: f64 = 26.0;

/// HTML/XML escaping for text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Fill patterns, one per series, distinguishable in greyscale.
fn defs(prefix: &str) -> String {
    format!(
        "<defs>\
<pattern id=\"{prefix}-solid\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><rect width=\"6\" height=\"6\" fill=\"#4a6fa5\"/></pattern>\
<pattern id=\"{prefix}-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f2d7a6\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8a5a00\" stroke-width=\"2\"/></pattern>\
<pattern id=\"{prefix}-dots\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><rect width=\"6\" height=\"6\" fill=\"#d9ead3\"/><circle cx=\"3\" cy=\"3\" r=\"1.4\" fill=\"#2e6b1f\"/></pattern>\
<pattern id=\"{prefix}-cross\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><rect width=\"6\" height=\"6\" fill=\"#f4cccc\"/><path d=\"M0 0L6 6M6 0L0 6\" stroke=\"#8b1a1a\" stroke-width=\"1\"/></pattern>\
</defs>"
    )
}

const PATTERNS: [&str; 4] = ["solid", "hatch", "dots", "cross"];

fn open(prefix: &str, title: &str, width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"{prefix}\" role=\"img\" aria-label=\"{t}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\"><title>{t}</title>{}",
        defs(prefix),
        t = esc(title)
    )
}

/// Horizontal bars proportional to their values, largest = [`BAR_MAX`].
fn bars(prefix: &str, title: &str, rows: &[(String, u64, usize, String)]) -> String {
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1) as f64;
    let width = LABEL_W + BAR_MAX + 260.0;
    let height = ROW_H * rows.len() as f64 + 12.0;
    let mut s = open(prefix, title, width, height);
    for (i, (label, value, pattern, text)) in rows.iter().enumerate() {
        let y = 6.0 + ROW_H * i as f64;
        let w = *value as f64 / max * BAR_MAX;
        let _ = write!(
            s,
            "<g class=\"bar\"><text x=\"{lx:.0}\" y=\"{ty:.1}\" text-anchor=\"end\">{l}</text>\
<rect x=\"{LABEL_W:.0}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.0}\" fill=\"url(#{prefix}-{p})\" stroke=\"#222\" data-value=\"{value}\"/>\
<text x=\"{vx:.2}\" y=\"{ty:.1}\" class=\"value\">{t}</text></g>",
            lx = LABEL_W - 6.0,
            ty = y + 14.0,
            l = esc(label),
            h = ROW_H - 8.0,
            p = PATTERNS[pattern % PATTERNS.len()],
            vx = LABEL_W + w + 6.0,
            t = esc(text),
        );
    }
    s.push_str("</svg>");
    s
}

/// Where the bytes go: core, each lazy variant, payload.
pub fn bytes_chart(rows: &[ByteBar]) -> String {
    let rows: Vec<(String, u64, usize, String)> = rows
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let how = if b.measured { "" } else { ", estimated" };
            (
                b.label.clone(),
                b.bytes,
                i,
                format!("{} ({} B{how})", human_bytes(b.bytes), thousands(b.bytes)),
            )
        })
        .collect();
    bars(
        "chart-bytes",
        "Where the bytes go (installed bytes per output)",
        &rows,
    )
}

/// Stored device code per architecture.
pub fn fatbin_chart(rows: &[(String, u64)]) -> String {
    let rows: Vec<(String, u64, usize, String)> = rows
        .iter()
        .map(|(n, b)| {
            (
                n.clone(),
                *b,
                0,
                format!("{} ({} B)", human_bytes(*b), thousands(*b)),
            )
        })
        .collect();
    bars(
        "chart-fatbin",
        "Stored device code bytes per architecture",
        &rows,
    )
}

/// The x offset of a ratio on the log axis, relative to 1×, clamped to ±2 decades.
pub fn log_offset(ratio: f64) -> f64 {
    (ratio.log10().clamp(-2.0, 2.0)) * DECADE
}

/// magma / cuSOLVER per op on a log scale centred on 1×: right of the axis MAGMA is slower.
pub fn ratio_chart(rows: &[BackendLine]) -> String {
    let centre = LABEL_W + 2.0 * DECADE;
    let width = LABEL_W + 4.0 * DECADE + 330.0;
    let height = ROW_H * rows.len() as f64 + 40.0;
    let mut s = open(
        "chart-ratio",
        "Time under MAGMA over time under cuSOLVER, per op (log scale)",
        width,
        height,
    );
    // Axis with decade ticks.
    for (i, tick) in ["0.01×", "0.1×", "1×", "10×", "100×"].iter().enumerate() {
        let x = LABEL_W + DECADE * i as f64;
        let _ = write!(
            s,
            "<line x1=\"{x:.0}\" y1=\"4\" x2=\"{x:.0}\" y2=\"{y2:.0}\" stroke=\"#999\" stroke-dasharray=\"{dash}\"/><text x=\"{x:.0}\" y=\"{ty:.0}\" text-anchor=\"middle\" class=\"tick\">{tick}</text>",
            y2 = height - 22.0,
            dash = if i == 2 { "none" } else { "2,3" },
            ty = height - 8.0,
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let y = 6.0 + ROW_H * i as f64;
        let ty = y + 14.0;
        let _ = write!(
            s,
            "<g class=\"bar\"><text x=\"{lx:.0}\" y=\"{ty:.1}\" text-anchor=\"end\">{l}</text>",
            lx = LABEL_W - 6.0,
            l = esc(&r.item)
        );
        match r.ratio {
            Some(ratio) => {
                let off = log_offset(ratio);
                let (x, w) = if off >= 0.0 {
                    (centre, off)
                } else {
                    (centre + off, -off)
                };
                let pattern = if ratio >= 1.0 { "cross" } else { "dots" };
                // Within the noise band the direction is not worth a word.
                let verdict = if ratio > super::SAME_WITHIN {
                    "MAGMA slower"
                } else if ratio < 1.0 / super::SAME_WITHIN {
                    "MAGMA faster"
                } else {
                    "about the same"
                };
                let _ = write!(
                    s,
                    "<rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.0}\" fill=\"url(#chart-ratio-{pattern})\" stroke=\"#222\" data-value=\"{ratio}\"/>\
<text x=\"{vx:.0}\" y=\"{ty:.1}\" class=\"value\">{t}</text>",
                    h = ROW_H - 8.0,
                    vx = LABEL_W + 4.0 * DECADE + 8.0,
                    t = esc(&format!(
                        "{} {verdict} ({} vs {})",
                        fmt_ratio(ratio),
                        fmt_ms(r.magma_ms).replace(" ms", ""),
                        fmt_ms(r.cusolver_ms)
                    )),
                );
            }
            None => {
                let why = match &r.magma_error {
                    Some(_) => "MAGMA failed (no ratio)".to_string(),
                    None => "no ratio (a timing is missing)".to_string(),
                };
                let _ = write!(
                    s,
                    "<text x=\"{vx:.0}\" y=\"{ty:.1}\" class=\"value\">{t}</text>",
                    vx = LABEL_W + 4.0 * DECADE + 8.0,
                    t = esc(&why)
                );
            }
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}
