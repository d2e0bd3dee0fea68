//! The human output of `splitpkg env`: the environment's report as text (`report_text`), the
//! switch's (`switch_text`), and the SVG bar chart of the two environments (`svg`, drawn by
//! [`crate::svg`]). Plain data in (the `env` documents), a string out.

use crate::channel::document::{EnvPackage, EnvReport, PackageRole, SwitchReport};

fn signed(n: i64) -> String {
    let h = crate::output::human_bytes(n.unsigned_abs());
    if n < 0 {
        format!("saves {h}")
    } else if n > 0 {
        format!("costs {h}")
    } else {
        "no change".to_string()
    }
}

/// `env --switch`'s human text: what changed, then the environment after the switch.
pub fn switch_text(r: &SwitchReport) -> String {
    let mut s = format!(
        "switched {} from {} to {} (rattler installer, channel {})\n",
        r.prefix, r.from, r.to, r.channel
    );
    s.push_str(&format!(
        "  solved: {}\n",
        r.specs
            .iter()
            .map(|x| format!("\"{x}\""))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    for x in &r.removed {
        s.push_str(&format!("  - {x}\n"));
    }
    for x in &r.installed {
        s.push_str(&format!("  + {x}\n"));
    }
    let delta = r.after.real_bytes as i64 - r.before.real_bytes as i64;
    s.push_str(&format!(
        "  installed bytes: {} → {} ({}{})\n\n",
        r.before.real_bytes,
        r.after.real_bytes,
        if delta >= 0 { "+" } else { "" },
        delta
    ));
    s.push_str(&report_text(&r.after));
    s
}

/// `env`'s human text: the installed variant, what switching would save and how to switch.
pub fn report_text(r: &EnvReport) -> String {
    use crate::output::human_bytes;
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} {} {} → the {} variant",
        r.prefix, r.lazy, r.version, r.build, r.variant
    );
    let _ = writeln!(
        s,
        "installed: {} packages, {} real{}",
        r.packages.len(),
        human_bytes(r.real_bytes),
        if r.represented_bytes > 0 {
            format!(
                " + {} represented by stand-ins (not on disk)",
                human_bytes(r.represented_bytes)
            )
        } else {
            String::new()
        }
    );
    for p in &r.packages {
        let size = match p.represents_bytes {
            Some(b) => format!("[stand-in] represents {}", human_bytes(b)),
            None => human_bytes(p.bytes),
        };
        let _ = writeln!(
            s,
            "  {:<24} {:<10} {:<34} {:<8} {size}",
            p.name, p.version, p.build, p.role
        );
    }
    let w = &r.switch;
    let _ = writeln!(s, "\nswitching to {}:", w.to);
    match (w.real_delta, w.lazy_after) {
        (Some(d), Some(after)) => {
            let _ = writeln!(
                s,
                "  {}{} real ({} → {}{}{})",
                if w.estimated { "estimated: " } else { "" },
                signed(d),
                human_bytes(r.real_bytes),
                human_bytes(w.real_after.unwrap_or(0)),
                format_args!(
                    "; {} {} → {}",
                    r.lazy,
                    human_bytes(w.lazy_now),
                    human_bytes(after)
                ),
                if w.payload_removed.is_empty() && w.payload_added.is_empty() {
                    String::new()
                } else if !w.payload_removed.is_empty() {
                    format!("; removes {}", w.payload_removed.join(", "))
                } else {
                    format!("; adds {}", w.payload_added.join(", "))
                }
            );
        }
        _ => {
            let _ = writeln!(s, "  real bytes: {}", w.sizes_from);
        }
    }
    if w.represented_delta != 0 {
        let _ = writeln!(
            s,
            "  and {} represented by stand-ins",
            signed(w.represented_delta)
        );
    }
    let _ = writeln!(s, "  sizes from: {}", w.sizes_from);
    // The notes are about the switch (a missing build, what the solver removes): said before the
    // commands they qualify, so a reader meets the warning before the command it warns about.
    for n in &r.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    let _ = writeln!(s, "  conda: {}", w.commands.conda);
    let _ = writeln!(s, "  mamba: {}", w.commands.mamba);
    let _ = writeln!(s, "  pixi:  {}", w.commands.pixi);
    s
}

/// A self-contained, deterministic SVG: one bar per environment (now, after switching), split into
/// other packages, the lazy library and the payload (real, and represented by stand-ins, hatched).
/// The picture is drawn by [`crate::svg::stacked_bars`]; this says what is in it.
pub fn svg(r: &EnvReport) -> String {
    use crate::svg::{Part, Segment, Stacked, StackedBar};
    let now = svg_bytes_now(r);
    let w = &r.switch;
    let (payload_real_after, payload_rep_after) = svg_payload_after(r, &now);
    let segments = |lazy: u64, payload: u64, payload_rep: u64| {
        [
            ("other packages", now.other, Part::Other),
            ("other stand-ins", now.other_rep, Part::OtherStandIn),
            (r.lazy.as_str(), lazy, Part::Lazy),
            ("payload", payload, Part::Payload),
            ("payload [stand-in]", payload_rep, Part::PayloadStandIn),
        ]
        .into_iter()
        .map(|(name, bytes, part)| Segment {
            name: name.to_string(),
            bytes,
            part,
        })
        .collect::<Vec<_>>()
    };
    let bar = |label: String, segments: Vec<Segment>, note: String| {
        let total: u64 = segments.iter().map(|s| s.bytes).sum();
        let note = if note.is_empty() {
            note
        } else {
            format!(" ({note})")
        };
        StackedBar {
            label,
            value: format!("{}{note}", crate::output::human_bytes(total)),
            segments,
        }
    };
    let after_note = if w.lazy_after.is_none() {
        format!("{} size unknown", r.lazy)
    } else if w.estimated {
        format!("{} size estimated", r.lazy)
    } else {
        String::new()
    };
    let bars = vec![
        bar(
            format!("now: {}", r.variant),
            segments(w.lazy_now, now.payload_real, now.payload_rep),
            String::new(),
        ),
        bar(
            format!("after switching: {}", w.to),
            segments(
                w.lazy_after.unwrap_or(0),
                payload_real_after,
                payload_rep_after,
            ),
            after_note,
        ),
    ];
    let footer = match w.real_delta {
        Some(d) => format!(
            "switching {} real bytes{}",
            signed(d),
            if w.represented_delta != 0 {
                format!(", {} represented", signed(w.represented_delta))
            } else {
                String::new()
            }
        ),
        None => format!("sizes after switching: {}", w.sizes_from),
    };
    crate::svg::stacked_bars(&Stacked {
        title: format!("{}: {} vs {}", r.lazy, r.variant, w.to),
        heading: format!("{} in {}", r.lazy, r.prefix),
        bars,
        legend: [
            (Part::Other, "other packages"),
            (Part::OtherStandIn, "other stand-ins, represented"),
            (Part::Lazy, "lazy library"),
            (Part::Payload, "payload"),
            (Part::PayloadStandIn, "payload [stand-in], represented"),
        ]
        .into_iter()
        .map(|(part, label)| (part, label.to_string()))
        .collect(),
        footer,
    })
}

/// The installed bytes the picture splits the environment into, now.
struct SvgBytesNow {
    other: u64,
    other_rep: u64,
    payload_real: u64,
    payload_rep: u64,
}

fn svg_bytes_now(r: &EnvReport) -> SvgBytesNow {
    let sum = |keep: &dyn Fn(&EnvPackage) -> bool| -> u64 {
        r.packages.iter().filter(|p| keep(p)).map(|p| p.bytes).sum()
    };
    let represented = |keep: &dyn Fn(&EnvPackage) -> bool| -> u64 {
        r.packages
            .iter()
            .filter(|p| keep(p))
            .filter_map(|p| p.represents_bytes)
            .sum()
    };
    SvgBytesNow {
        other: sum(&|p| {
            !p.standin && p.role != PackageRole::Lazy && p.role != PackageRole::Payload
        }),
        other_rep: represented(&|p| p.role != PackageRole::Payload),
        payload_real: sum(&|p| !p.standin && p.role == PackageRole::Payload),
        payload_rep: represented(&|p| p.role == PackageRole::Payload),
    }
}

/// The payload's real and represented bytes after switching: from the channel's sizes when known,
/// otherwise none (real) when the switch removes the payload packages.
fn svg_payload_after(r: &EnvReport, now: &SvgBytesNow) -> (u64, u64) {
    let w = &r.switch;
    let rep = (now.payload_rep as i64 + w.represented_delta).max(0) as u64;
    match w.real_delta {
        Some(d) => {
            let lazy_after = w.lazy_after.unwrap_or(w.lazy_now) as i64;
            let real =
                (now.payload_real as i64 + d - (lazy_after - w.lazy_now as i64)).max(0) as u64;
            (real, rep)
        }
        None if w.payload_removed.is_empty() => (now.payload_real, rep),
        None => (0, rep),
    }
}
