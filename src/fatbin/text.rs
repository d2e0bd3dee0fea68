//! `splitpkg fatbin` as text: per library, the per-target table, compression and driver floor,
//! then the tree's totals, what-if estimates and device verdicts.

use std::fmt::Write;

use crate::output::{human_bytes, thousands};

fn ratio(num: u64, den: u64) -> String {
    if den == 0 {
        "-".into()
    } else {
        format!("×{:.1}", num as f64 / den as f64)
    }
}

/// The change from `now` to `after` in bytes and as a share of `now`, with one sign for both: `+`
/// when it grows, `−` (U+2212, as every other minus in the output) when it shrinks:
/// `+44.8 MiB, +133.3 %`.
fn size_change(now: u64, after: u64) -> String {
    let sign = if after > now {
        "+"
    } else if after < now {
        "−"
    } else {
        "±"
    };
    if now == 0 {
        return format!("{sign}{}", human_bytes(after));
    }
    let pct = 100.0 * now.abs_diff(after) as f64 / now as f64;
    format!(
        "{sign}{}, {sign}{pct:.1} %",
        human_bytes(now.abs_diff(after))
    )
}

fn fatbin_block(s: &mut String, f: &crate::fatbin::FatbinSummary, indent: &str) {
    let _ = writeln!(
        s,
        "{indent}{:<9} {:<5} {:>7} {:>10} {:>11} {:>13} {:>7}",
        "target", "kind", "entries", "containers", "stored", "uncompressed", "ratio"
    );
    for t in &f.targets {
        let _ = writeln!(
            s,
            "{indent}{:<9} {:<5} {:>7} {:>10} {:>11} {:>13} {:>7}",
            t.name,
            t.kind.label(),
            thousands(t.entries),
            thousands(t.containers),
            human_bytes(t.stored),
            human_bytes(t.uncompressed),
            ratio(t.uncompressed, t.stored)
        );
    }
    let _ = writeln!(
        s,
        "{indent}{:<9} {:<5} {:>7} {:>10} {:>11} {:>13} {:>7}",
        "total",
        "",
        thousands(f.entries),
        thousands(f.container_count),
        human_bytes(f.stored),
        human_bytes(f.uncompressed),
        ratio(f.uncompressed, f.stored)
    );
    let comp: Vec<String> = f
        .compression
        .iter()
        .map(|c| {
            format!(
                "{} ({} entries)",
                c.compression.label(),
                thousands(c.entries)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "{indent}compression: {}",
        if comp.is_empty() {
            "-".into()
        } else {
            comp.join(", ")
        }
    );
    if f.no_ptx && f.elf > 0 {
        let newest = f
            .targets
            .iter()
            .filter(|t| t.kind == crate::fatbin::Kind::Elf)
            .map(|t| t.arch / 10)
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            s,
            "{indent}no PTX to JIT: only GPUs matching a SASS target above can run this code (none newer than {newest}.x)"
        );
    } else if !f.sass_only.is_empty() {
        let _ = writeln!(
            s,
            "{indent}SASS without PTX of the same arch: {}",
            f.sass_only.join(" ")
        );
    }
}

fn driver_line(s: &mut String, d: &crate::fatbin::DriverFloor, indent: &str) {
    let Some(min) = &d.minimum else {
        let _ = writeln!(
            s,
            "{indent}driver: no floor known (no compression floor, CUDA major unknown)"
        );
        return;
    };
    let mut why = Vec::new();
    if let Some(r) = &d.runtime {
        why.push(r.why.clone());
    }
    if let Some(c) = &d.compression {
        why.push(format!("{} ({}+)", c.why, c.linux));
    }
    let raised = if d.compression_raises_floor && d.runtime.is_some() {
        "; compression raises the floor"
    } else {
        ""
    };
    let _ = writeln!(s, "{indent}driver: ≥ {min}{raised}  ({})", why.join("; "));
}

/// `splitpkg fatbin`: per library, the per-target table, compression and driver floor, then the
/// tree's totals, what-if estimates and device verdicts.
pub fn fatbin_text(r: &super::scan::FatbinReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}, {} ELF files, {}; {} with device code)",
        r.input.path,
        r.input.kind,
        r.input.elf_files,
        human_bytes(r.input.bytes),
        r.libraries.len()
    );
    match &r.cuda_runtime {
        Some(c) => {
            let _ = writeln!(s, "CUDA {} (from {})", c.major, c.from);
        }
        None => {
            let _ = writeln!(
                s,
                "CUDA major: unknown (no NEEDED libcudart/libcublas/libnvrtc name)"
            );
        }
    }
    for l in &r.libraries {
        library_text(&mut s, l);
    }
    tree_text(&mut s, &r.total);
    s
}

/// One library: its section, the per-target table, driver floor, what-if and device lines.
fn library_text(s: &mut String, l: &super::scan::LibraryFatbin) {
    use crate::fatbin::Runs;
    let f = &l.fatbin;
    let _ = writeln!(
        s,
        "\n{}  .nv_fatbin {} of {}: {} containers, {} entries ({} SASS, {} PTX{})",
        l.path,
        human_bytes(f.section_size),
        human_bytes(l.size),
        thousands(f.container_count),
        thousands(f.entries),
        thousands(f.elf),
        thousands(f.ptx),
        if f.other > 0 {
            format!(", {} other", thousands(f.other))
        } else {
            String::new()
        }
    );
    fatbin_block(s, f, "  ");
    driver_line(s, &l.driver, "  ");
    for w in &l.what_if {
        let _ = writeln!(
            s,
            "  what-if {:<8} stored {} → {} ({}), section {} → {}",
            w.mode.to_string(),
            human_bytes(w.stored_now),
            human_bytes(w.stored_after),
            size_change(w.stored_now, w.stored_after),
            human_bytes(w.section_now),
            human_bytes(w.section_after)
        );
    }
    for d in &l.device {
        let via: Vec<String> = d
            .via
            .iter()
            .map(|v| format!("{} {} ×{}", v.kind.label(), v.name, thousands(v.containers)))
            .collect();
        let verdict = match d.runs {
            Runs::Yes => "runs (SASS)".to_string(),
            Runs::Jit => format!("runs, {} containers only through PTX JIT", thousands(d.jit)),
            Runs::No => format!(
                "CANNOT RUN: {} of {} containers have no code for it",
                thousands(d.none),
                thousands(d.containers)
            ),
        };
        let _ = writeln!(
            s,
            "  device {}: {verdict}{}",
            d.device,
            if via.is_empty() {
                String::new()
            } else {
                format!("  [{}]", via.join(", "))
            }
        );
    }
}

/// The tree's totals: device code, per-target table, driver floor, what-if and device verdicts.
fn tree_text(s: &mut String, t: &super::scan::Total) {
    use crate::fatbin::Runs;
    let _ = writeln!(
        s,
        "\ntree: {} libraries with device code, .nv_fatbin {} in {} containers, {} entries ({} SASS, {} PTX)",
        t.libraries,
        human_bytes(t.fatbin.section_size),
        thousands(t.fatbin.container_count),
        thousands(t.fatbin.entries),
        thousands(t.fatbin.elf),
        thousands(t.fatbin.ptx)
    );
    if t.libraries > 0 {
        fatbin_block(s, &t.fatbin, "  ");
        driver_line(s, &t.driver, "  ");
    }
    for w in &t.what_if {
        let floor = w
            .driver
            .as_ref()
            .map(|d| format!("; needs driver ≥ {}", d.linux))
            .unwrap_or_else(|| "; no driver floor".into());
        let _ = writeln!(
            s,
            "  what-if {:<8} .nv_fatbin {} → {} ({}){floor}",
            w.mode.to_string(),
            human_bytes(w.section_now),
            human_bytes(w.section_after),
            size_change(w.section_now, w.section_after)
        );
    }
    for d in &t.device {
        let verdict = match d.runs {
            Runs::Yes => "every library runs (SASS)".to_string(),
            Runs::Jit => format!("runs; through PTX JIT in {}", d.jit.join(", ")),
            Runs::No => format!("CANNOT RUN: {}", d.cannot_run.join(", ")),
        };
        let _ = writeln!(s, "  device {}: {verdict}", d.device);
    }
}

#[cfg(test)]
mod tests {
    use super::size_change;

    #[test]
    fn a_size_change_has_one_sign_for_bytes_and_percent() {
        // The new user's case: the section grows from 33.6 to 78.4 MiB.
        assert_eq!(size_change(35_232_153, 82_208_358), "+44.8 MiB, +133.3 %");
        assert_eq!(size_change(82_208_358, 35_232_153), "−44.8 MiB, −57.1 %");
        assert_eq!(size_change(1024, 1024), "±0 B, ±0.0 %");
        assert_eq!(size_change(0, 10), "+10 B");
        for (now, after) in [(100u64, 50u64), (50, 100), (7, 1 << 40)] {
            let s = size_change(now, after);
            let signs: Vec<char> = s.chars().filter(|c| ['+', '−', '-'].contains(c)).collect();
            assert!(
                signs.len() == 2 && signs[0] == signs[1] && !signs.contains(&'-'),
                "{s}"
            );
        }
    }
}
