//! `splitpkg wheel` as text: the wheels written, the checks, and the commands that install them.

use super::document::{VARIANTS_DIR, WheelLayout, WheelReport};

/// The report as text: the wheels, and the commands that install them.
pub fn report_text(r: &WheelReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{} → {}", r.input, r.out);
    let _ = writeln!(
        s,
        "  core  {}  ({})",
        r.core.file,
        crate::output::human_bytes(r.core.bytes)
    );
    for w in &r.lazy {
        let _ = writeln!(
            s,
            "  lazy  {}  ({}){}",
            w.file,
            crate::output::human_bytes(w.bytes),
            if w.preferred {
                "  ← a plain install gets this one"
            } else {
                ""
            }
        );
    }
    for m in &r.missing {
        let _ = writeln!(s, "  not written: {} ({})", m.variant, m.why);
    }
    let _ = writeln!(
        s,
        "checked: input RECORD ({} members), written wheels read back ({} members), lossless: {}",
        r.input_record_verified,
        r.written_record_verified,
        if r.lossless { "yes" } else { "NO" }
    );
    let _ = writeln!(
        s,
        "install (pinned to this split; torch's other dependencies come from your package index):\n  {}\n  {}",
        r.commands.default, r.commands.uv_default
    );
    if let (Some(o), Some(u)) = (&r.commands.other, &r.commands.uv_other) {
        let _ = writeln!(
            s,
            "the other variant (also switches an installed environment):\n  {o}\n  {u}"
        );
    }
    let v = &r.variants;
    let _ = writeln!(s, "PEP 825 set in {} ({}; {}):", v.dir, v.index, v.property);
    for w in &v.wheels {
        let what = match w.layout {
            WheelLayout::PlainFallback => "plain fallback (installers without variant support)",
            _ if w.preferred => "variant, preferred",
            _ => "variant",
        };
        let _ = writeln!(
            s,
            "  {}  ({})  {what}",
            w.file.trim_start_matches(&format!("{VARIANTS_DIR}/")),
            crate::output::human_bytes(w.bytes)
        );
    }
    let _ = writeln!(s, "  {}", v.uv_default);
    if let Some(o) = &v.uv_other {
        let _ = writeln!(s, "  {o}");
    }
    s
}
