//! SVG drawing, the one module for it: the report's inline charts (`report::svg` feeds them its
//! model) and the standalone picture `splitpkg env --svg` writes (`channel::env::svg` feeds it an
//! environment). Plain data in, a string out: no stage's types, no script, no external fonts, and
//! every figure readable without colour (bars carry a text label with their value; the report's
//! bars also a fill pattern). Output is deterministic: the same data give the same bytes.

use std::fmt::Write;

use crate::output::human_bytes;

/// Escaping for text and attribute values of the report's page and charts, whose strings come
/// from documents that are hostile as far as the page is concerned: the markup characters and
/// both quotes, and control characters shown as `\u{…}` (never passed through raw).
pub fn escape(s: &str) -> String {
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

/// Escaping for the environment picture: the markup characters and the double quote.
fn escape_markup(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A generous estimate of the width of `text` in a sans-serif font of `size` px: 0.62 em a
/// character (DejaVu Sans, the widest common default, averages about 0.55 em over ASCII text),
/// so a picture is sized to its labels without measuring a font.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

// ---- the report's charts: inline in an HTML page ----

/// Width of the longest bar, in SVG units.
pub const BAR_MAX: f64 = 480.0;
/// Pixels per decade on the ratio chart; the chart spans 1/100 … 100.
pub const DECADE: f64 = 120.0;
const LABEL_W: f64 = 230.0;
const ROW_H: f64 = 26.0;

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

/// The chart's `<svg>` element (with its title and patterns), left open.
fn open(prefix: &str, title: &str, width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"{prefix}\" role=\"img\" aria-label=\"{t}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\"><title>{t}</title>{}",
        defs(prefix),
        t = escape(title)
    )
}

/// One bar of a [`bar_chart`].
#[derive(Debug, Clone)]
pub struct Bar {
    /// The bar's label, left of it.
    pub label: String,
    /// The plotted value (also in the bar's `data-value`).
    pub value: u64,
    /// Which fill pattern (cycled).
    pub pattern: usize,
    /// The value as the chart prints it next to the bar.
    pub text: String,
}

/// Horizontal bars proportional to their values, largest = [`BAR_MAX`]. `id` names the `<svg>`
/// element and prefixes its patterns' ids.
pub fn bar_chart(id: &str, title: &str, rows: &[Bar]) -> String {
    let max = rows.iter().map(|r| r.value).max().unwrap_or(0).max(1) as f64;
    let width = LABEL_W + BAR_MAX + 260.0;
    let height = ROW_H * rows.len() as f64 + 12.0;
    let mut s = open(id, title, width, height);
    for (i, bar) in rows.iter().enumerate() {
        let y = 6.0 + ROW_H * i as f64;
        let w = bar.value as f64 / max * BAR_MAX;
        let _ = write!(
            s,
            "<g class=\"bar\"><text x=\"{lx:.0}\" y=\"{ty:.1}\" text-anchor=\"end\">{l}</text>\
<rect x=\"{LABEL_W:.0}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.0}\" fill=\"url(#{id}-{p})\" stroke=\"#222\" data-value=\"{value}\"/>\
<text x=\"{vx:.2}\" y=\"{ty:.1}\" class=\"value\">{t}</text></g>",
            lx = LABEL_W - 6.0,
            ty = y + 14.0,
            l = escape(&bar.label),
            h = ROW_H - 8.0,
            p = PATTERNS[bar.pattern % PATTERNS.len()],
            value = bar.value,
            vx = LABEL_W + w + 6.0,
            t = escape(&bar.text),
        );
    }
    s.push_str("</svg>");
    s
}

/// One row of a [`ratio_chart`].
#[derive(Debug, Clone)]
pub struct RatioRow {
    /// The row's label, left of it.
    pub label: String,
    /// The plotted ratio; a row without one shows only its text.
    pub ratio: Option<f64>,
    /// What the chart prints at the row's end.
    pub text: String,
}

/// The x offset of a ratio on the log axis, relative to 1×, clamped to ±2 decades.
pub fn log_offset(ratio: f64) -> f64 {
    (ratio.log10().clamp(-2.0, 2.0)) * DECADE
}

/// Ratios on a log scale centred on 1× (1/100 … 100): a bar right of the axis (cross-hatched) is
/// above 1, one left of it (dotted) below.
pub fn ratio_chart(id: &str, title: &str, rows: &[RatioRow]) -> String {
    let centre = LABEL_W + 2.0 * DECADE;
    let width = LABEL_W + 4.0 * DECADE + 330.0;
    let height = ROW_H * rows.len() as f64 + 40.0;
    let mut s = open(id, title, width, height);
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
    let text_x = LABEL_W + 4.0 * DECADE + 8.0;
    for (i, r) in rows.iter().enumerate() {
        let y = 6.0 + ROW_H * i as f64;
        let ty = y + 14.0;
        let _ = write!(
            s,
            "<g class=\"bar\"><text x=\"{lx:.0}\" y=\"{ty:.1}\" text-anchor=\"end\">{l}</text>",
            lx = LABEL_W - 6.0,
            l = escape(&r.label)
        );
        if let Some(ratio) = r.ratio {
            let off = log_offset(ratio);
            let (x, w) = if off >= 0.0 {
                (centre, off)
            } else {
                (centre + off, -off)
            };
            let pattern = if ratio >= 1.0 { "cross" } else { "dots" };
            let _ = write!(
                s,
                "<rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.0}\" fill=\"url(#{id}-{pattern})\" stroke=\"#222\" data-value=\"{ratio}\"/>",
                h = ROW_H - 8.0,
            );
        }
        let _ = write!(
            s,
            "<text x=\"{text_x:.0}\" y=\"{ty:.1}\" class=\"value\">{t}</text></g>",
            t = escape(&r.text)
        );
    }
    s.push_str("</svg>");
    s
}

// ---- the environment picture: a standalone .svg file ----

/// What a segment of a [`StackedBar`] holds; each has its colour (and class name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Bytes neither lazy nor payload.
    Other,
    /// Such bytes represented by stand-ins.
    OtherStandIn,
    /// The lazily loaded library's own bytes.
    Lazy,
    /// The payload (what the split moves out).
    Payload,
    /// Payload represented by stand-ins (hatched).
    PayloadStandIn,
}

impl Part {
    fn class(self) -> &'static str {
        match self {
            Part::Other => "other",
            Part::OtherStandIn => "rep",
            Part::Lazy => "lazy",
            Part::Payload => "payload",
            Part::PayloadStandIn => "payload-rep",
        }
    }

    fn fill(self) -> &'static str {
        match self {
            Part::Other => "#bdbdbd",
            Part::OtherStandIn => "#d9d9d9",
            Part::Lazy => "#3182bd",
            Part::Payload => "#e6550d",
            Part::PayloadStandIn => "url(#hatch)",
        }
    }
}

/// One segment of a stacked bar: its name (the tooltip), bytes and part.
#[derive(Debug, Clone)]
pub struct Segment {
    /// The segment's name, shown as its tooltip.
    pub name: String,
    /// Its bytes: the segment's width on the shared scale.
    pub bytes: u64,
    /// What it is (its colour).
    pub part: Part,
}

/// One row of a [`Stacked`] picture: a label and its segments, left to right.
#[derive(Debug, Clone)]
pub struct StackedBar {
    /// The row's label, left of the bar.
    pub label: String,
    /// The bar's segments, left to right.
    pub segments: Vec<Segment>,
    /// Printed after the bar (its total, and a note).
    pub value: String,
}

/// A picture of stacked byte bars, one per row, on one scale, with a legend and a footer line.
#[derive(Debug, Clone)]
pub struct Stacked {
    /// The `<title>` element (what a viewer shows as the file's name).
    pub title: String,
    /// The bold line at the top.
    pub heading: String,
    /// The rows, top to bottom.
    pub bars: Vec<StackedBar>,
    /// Each part shown and its legend text.
    pub legend: Vec<(Part, String)>,
    /// The line under the picture (what was measured, how).
    pub footer: String,
}

/// Bar geometry of [`stacked_bars`].
const STACK_W: f64 = 470.0;
const STACK_H: f64 = 34.0;

/// The picture is as wide as its longest text: labels come from the environment (a prefix path,
/// a variant name) and are never clipped.
fn stacked_layout(p: &Stacked) -> (f64, f64) {
    let left = p
        .bars
        .iter()
        .map(|b| 20.0 + text_width(&b.label, 12.0))
        .fold(190.0f64, f64::max);
    let width = [
        760.0,
        20.0 + text_width(&p.heading, 14.0),
        20.0 + text_width(&p.footer, 11.0),
        p.bars
            .iter()
            .map(|b| left + STACK_W + 16.0 + text_width(&b.value, 12.0))
            .fold(0.0, f64::max),
    ]
    .into_iter()
    .fold(0.0f64, f64::max)
    .ceil();
    (left, width)
}

/// A self-contained, deterministic picture of stacked byte bars (a standalone file).
pub fn stacked_bars(p: &Stacked) -> String {
    let (left, width) = stacked_layout(p);
    let height = 210.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(s, r##"<title>{}</title>"##, escape_markup(&p.title));
    let _ = writeln!(
        s,
        r##"<defs><pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fdd0a2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#e6550d" stroke-width="2"/></pattern></defs>"##
    );
    let _ = writeln!(
        s,
        r##"<rect width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="22" font-size="14" font-weight="bold">{}</text>"##,
        escape_markup(&p.heading)
    );
    let max: u64 = p
        .bars
        .iter()
        .map(|b| b.segments.iter().map(|s| s.bytes).sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1);
    for (i, b) in p.bars.iter().enumerate() {
        stacked_row(&mut s, b, 45.0 + i as f64 * 55.0, left, max);
    }
    // Only what the bars draw: a legend entry for a part no bar has (the payload when it is linked
    // into the lazy library, stand-ins when there are none) would describe a colour not in the picture.
    let drawn = |part: Part| {
        p.bars
            .iter()
            .flat_map(|b| &b.segments)
            .any(|seg| seg.part == part && seg.bytes > 0)
    };
    let mut x = 10.0;
    for (part, label) in p.legend.iter().filter(|(part, _)| drawn(*part)) {
        let _ = writeln!(
            s,
            r##"<rect x="{x:.1}" y="168" width="12" height="12" fill="{}"/><text x="{:.1}" y="178">{}</text>"##,
            part.fill(),
            x + 16.0,
            escape_markup(label)
        );
        x += 24.0 + label.len() as f64 * 6.5;
    }
    let _ = writeln!(
        s,
        r##"<text x="10" y="200" font-size="11" fill="#555555">{}</text>"##,
        escape_markup(&p.footer)
    );
    s.push_str("</svg>\n");
    s
}

/// One bar at height `y`: its label, its non-empty segments from `left`, its value.
fn stacked_row(s: &mut String, b: &StackedBar, y: f64, left: f64, max: u64) {
    let _ = writeln!(
        s,
        r##"<text x="10" y="{:.1}">{}</text>"##,
        y + STACK_H / 2.0 + 4.0,
        escape_markup(&b.label)
    );
    let mut x = left;
    for seg in &b.segments {
        if seg.bytes == 0 {
            continue;
        }
        let wd = STACK_W * seg.bytes as f64 / max as f64;
        let _ = writeln!(
            s,
            r##"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{wd:.1}" height="{STACK_H}" fill="{fill}"><title>{}: {}</title></rect>"##,
            escape_markup(&seg.name),
            human_bytes(seg.bytes),
            class = seg.part.class(),
            fill = seg.part.fill(),
        );
        x += wd;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}">{}</text>"##,
        x + 6.0,
        y + STACK_H / 2.0 + 4.0,
        escape_markup(&b.value)
    );
}
