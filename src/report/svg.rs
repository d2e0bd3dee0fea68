//! The report's charts, drawn by [`crate::svg`] from the model: where the bytes go, stored device
//! code per architecture, and magma over cuSOLVER time on a log scale. Each bar carries its
//! plotted value in a `data-value` attribute, so a test can check that lengths are proportional
//! to the values.

use super::{BackendLine, ByteBar, FatbinBar, SAME_WITHIN, fmt_ms, fmt_ratio};
use crate::svg::{Bar, RatioRow, bar_chart};

pub use crate::svg::{BAR_MAX, DECADE, log_offset};

/// Where the bytes go: core, each lazy variant, payload; one pattern each.
pub fn bytes_chart(rows: &[ByteBar]) -> String {
    let rows: Vec<Bar> = rows
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let how = if b.measured { "" } else { ", estimated" };
            Bar {
                label: b.label.clone(),
                value: b.bytes,
                pattern: i,
                text: format!(
                    "{} ({} B{how})",
                    crate::output::human_bytes(b.bytes),
                    crate::output::thousands(b.bytes)
                ),
            }
        })
        .collect();
    bar_chart(
        "chart-bytes",
        "Where the bytes go (installed bytes per output)",
        &rows,
    )
}

/// Stored device code per architecture.
pub fn fatbin_chart(rows: &[FatbinBar]) -> String {
    let rows: Vec<Bar> = rows
        .iter()
        .map(|b| Bar {
            label: b.label.clone(),
            value: b.bytes,
            pattern: 0,
            text: b.size.clone(),
        })
        .collect();
    bar_chart(
        "chart-fatbin",
        "Stored device code bytes per architecture",
        &rows,
    )
}

/// magma / cuSOLVER per op on a log scale centred on 1×: right of the axis MAGMA is slower.
pub fn ratio_chart(rows: &[BackendLine]) -> String {
    let rows: Vec<RatioRow> = rows
        .iter()
        .map(|r| RatioRow {
            label: r.item.clone(),
            ratio: r.ratio,
            text: match r.ratio {
                Some(ratio) => {
                    // Within the noise band the direction is not worth a word.
                    let verdict = if ratio > SAME_WITHIN {
                        "MAGMA slower"
                    } else if ratio < 1.0 / SAME_WITHIN {
                        "MAGMA faster"
                    } else {
                        "about the same"
                    };
                    format!(
                        "{} {verdict} ({} vs {})",
                        fmt_ratio(ratio),
                        fmt_ms(r.magma_ms).replace(" ms", ""),
                        fmt_ms(r.cusolver_ms)
                    )
                }
                None if r.magma_error.is_some() => "MAGMA failed (no ratio)".into(),
                None => "no ratio (a timing is missing)".into(),
            },
        })
        .collect();
    crate::svg::ratio_chart(
        "chart-ratio",
        "Time under MAGMA over time under cuSOLVER, per op (log scale)",
        &rows,
    )
}
