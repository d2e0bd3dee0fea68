//! The report as GitHub Markdown, for pasting into an issue: the same content as the HTML page, with
//! tables in place of the charts (GitHub does not render inline SVG in comments). Strings from the
//! inputs are escaped so that a hostile name cannot open a link, an HTML tag or a table cell.

use std::fmt::Write;

use super::NOT_RECORDED;
use super::{Change, Report, SlimSmoke, bytes, fmt_ms, fmt_ratio};

/// Escape Markdown and inline HTML; newlines become spaces (a cell or list item is one line).
pub fn esc(s: &str) -> String {
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

fn variant_label(name: &str, emulated: bool) -> String {
    if emulated {
        format!("{} **EMULATED**", esc(name))
    } else {
        format!("{} (real)", esc(name))
    }
}

pub fn render(r: &Report) -> String {
    let mut m = String::with_capacity(16 * 1024);
    let _ = writeln!(
        m,
        "# Should {} split out {}?\n",
        esc(&r.title),
        esc(&r.dep.to_uppercase())
    );
    let _ = writeln!(m, "## The answer\n\n**{}**\n", esc(r.answer.headline()));
    match &r.saving {
        Some(s) => {
            let _ = writeln!(
                m,
                "- A slim ({}) environment saves **{}**, **{:.2} %** of the {} installation as planned ({}: the tree, with the payload closure in it). {}",
                esc(&r.slim),
                bytes(s.bytes),
                s.percent,
                esc(&r.dep),
                bytes(s.env_bytes),
                esc(&s.how)
            );
        }
        None if r.verdict.is_some() => {
            m.push_str("- No saving: there is no split (the payload is not confined).\n")
        }
        None => m.push_str("- Bytes saved: not known (no plan).\n"),
    }
    match r.slim_smoke {
        SlimSmoke::Real => {
            if r.lost_default.is_empty() {
                let _ = writeln!(
                    m,
                    "- Under the default backend, no op that works with {} stops working in the real {} variant.",
                    esc(&r.dep),
                    esc(&r.slim)
                );
            } else {
                let _ = writeln!(
                    m,
                    "- Ops that **stop working** under the default backend in the real {} variant:",
                    esc(&r.slim)
                );
                for l in &r.lost_default {
                    let _ = writeln!(
                        m,
                        "  - {}: {} case(s), e.g. {}",
                        esc(&l.op),
                        l.cases,
                        esc(&l.example_reason)
                    );
                }
            }
            if !r.lost_explicit.is_empty() {
                let ops: Vec<String> = r
                    .lost_explicit
                    .iter()
                    .map(|l| {
                        format!(
                            "{} ({}, {} case(s))",
                            esc(&l.op),
                            esc(&l.preference),
                            l.cases
                        )
                    })
                    .collect();
                let _ = writeln!(
                    m,
                    "- Ops that fail only when a backend is asked for explicitly: {}.",
                    ops.join(", ")
                );
            }
        }
        SlimSmoke::Emulated => {
            let _ = writeln!(
                m,
                "- Ops that stop working: not known — the {} variant was **EMULATED** (cuSOLVER forced on a {} installation); this is not a real {} result.",
                esc(&r.slim),
                esc(&r.dep),
                esc(&r.slim)
            );
        }
        SlimSmoke::NotRun | SlimSmoke::NoSmoke => m.push_str(
            "- Ops that stop working in the slim variant: not known (no smoke run of it).\n",
        ),
    }
    let moved: Vec<&super::RoutingLine> = r
        .routing
        .iter()
        .filter(|l| matches!(l.change, Change::Slower | Change::Faster | Change::Failed))
        .collect();
    if !r.routing.is_empty() {
        if moved.is_empty() {
            let _ = writeln!(
                m,
                "- Default routing: every timed op is within {:.0} % in the slim variant.",
                (super::SAME_WITHIN - 1.0) * 100.0
            );
        } else {
            m.push_str("- Default routing, slim over full time:\n");
            for l in moved {
                let _ = writeln!(
                    m,
                    "  - {}: **{}** {} ({} vs {})",
                    esc(&l.item),
                    l.change.label(),
                    l.ratio.map(fmt_ratio).unwrap_or_default(),
                    fmt_ms(l.slim_ms),
                    fmt_ms(l.full_ms)
                );
            }
        }
    }
    match &r.platform {
        Some(p) => {
            let _ = writeln!(m, "- Measured on {}.", esc(p));
        }
        None => m.push_str("- GPU, driver and torch: not known (no smoke run).\n"),
    }
    if !r.failures.is_empty() {
        let _ = writeln!(
            m,
            "\n**The smoke run recorded {} failure(s)** (see Failures).",
            r.failures.len()
        );
    }

    m.push_str("\n## Numbers\n\n### Where the bytes go\n\n");
    if r.byte_bars.is_empty() {
        m.push_str("Not known (no plan).\n");
    } else {
        m.push_str("| output | bytes | |\n|---|---:|---|\n");
        for b in &r.byte_bars {
            let _ = writeln!(
                m,
                "| {} | {} | {} |",
                esc(&b.label),
                bytes(b.bytes),
                if b.measured { "measured" } else { "estimated" }
            );
        }
        if let Some(b) = r.payload_static_in_lazy {
            let _ = writeln!(
                m,
                "\nThe payload is linked statically into the lazy {} library: {} of it is payload (plan estimate).",
                esc(&r.dep),
                bytes(b)
            );
        }
    }
    let _ = writeln!(m, "\n### Time under {} vs cuSOLVER\n", esc(&r.dep));
    if r.backend.is_empty() {
        m.push_str("Not known (no bench of a real variant).\n");
    } else {
        m.push_str(
            "| op | magma | cuSOLVER | magma / cuSOLVER | error |\n|---|---:|---:|---:|---|\n",
        );
        for b in &r.backend {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} |",
                esc(&b.item),
                b.magma_cell(),
                fmt_ms(b.cusolver_ms),
                b.ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()),
                b.magma_error.as_deref().map(esc).unwrap_or_default()
            );
        }
    }
    if !r.routing.is_empty() {
        let _ = writeln!(
            m,
            "\n### Default routing: {} vs {}\n\n| op | {} | {} | slim / full | |\n|---|---:|---:|---:|---|",
            esc(&r.slim),
            esc(&r.dep),
            esc(&r.dep),
            esc(&r.slim)
        );
        for l in &r.routing {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} |",
                esc(&l.item),
                fmt_ms(l.full_ms),
                fmt_ms(l.slim_ms),
                l.ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()),
                l.change.label()
            );
        }
    }
    m.push_str("\n### Device code per architecture\n\n");
    match &r.fatbin_total {
        Some((stored, uncompressed, driver)) => {
            m.push_str("| architecture | stored bytes |\n|---|---:|\n");
            for (n, b) in &r.fatbin_bars {
                let _ = writeln!(m, "| {} | {} |", esc(n), bytes(*b));
            }
            let _ = writeln!(
                m,
                "\n{} stored, {} uncompressed; minimum driver {}.",
                bytes(*stored),
                bytes(*uncompressed),
                esc(driver.as_deref().unwrap_or("not recorded"))
            );
        }
        None => m.push_str("Not known (no fatbin scan).\n"),
    }

    m.push_str("\n## The proof\n\n");
    match r.verdict {
        Some(v) => {
            let _ = writeln!(
                m,
                "Verdict: **{}**.\n",
                esc(&format!("{v:?}").to_uppercase())
            );
            list(&mut m, "Reasons", &r.reasons);
            list(&mut m, "Lazy edges into the library", &r.lazy_edges);
            list(
                &mut m,
                "Witnesses (eager paths to the payload)",
                &r.witnesses,
            );
            let core: Vec<String> = r
                .core_state_warnings
                .iter()
                .map(|(f, w)| format!("{f}: {w}"))
                .collect();
            list(
                &mut m,
                "Glue warnings: payload state compiled into the core (has_magma)",
                &core,
            );
            let other: Vec<String> = r
                .other_warnings
                .iter()
                .map(|(f, w)| format!("{f}: {w}"))
                .collect();
            list(&mut m, "Other glue warnings", &other);
            if let Some(c) = &r.contract {
                let _ = writeln!(m, "Loader contract of the lazy library: {}.\n", esc(c));
            }
        }
        None => {
            m.push_str("Verdict, witnesses, glue warnings and contract: not known (no plan).\n\n")
        }
    }
    if r.variants.is_empty() {
        m.push_str("Smoke of each variant: not known (no smoke run).\n");
    } else {
        let _ = writeln!(
            m,
            "Smoke result: **{}**.\n\n| variant | torch | lazy library | cases | checks |\n|---|---|---:|---|---|",
            super::SmokeResult::label(r.smoke_result)
        );
        for v in &r.variants {
            let c = &v.counts;
            let checks: Vec<String> = v
                .checks
                .iter()
                .map(|k| format!("{}: {:?}", esc(&k.name), k.status).to_lowercase())
                .collect();
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} cases: {} pass, {} expected-fail, {} excluded, {} fail, {} timeout | {} |",
                variant_label(&v.name, v.emulated),
                esc(v.torch.as_deref().unwrap_or("not recorded")),
                match (v.emulated, v.lazy_bytes) {
                    (true, _) => "the full installation's (EMULATED)".to_string(),
                    (false, Some(b)) => bytes(b),
                    (false, None) => "not recorded".into(),
                },
                c.cases,
                c.pass,
                c.expected_fail,
                c.excluded,
                c.fail,
                c.timeout,
                checks.join(", ")
            );
        }
    }
    m.push_str("\n### Failures\n\n");
    if r.variants.is_empty() {
        m.push_str("Not known (no smoke run).\n");
    } else if r.failures.is_empty() {
        m.push_str("None: every case and check met its expectation.\n");
    } else {
        m.push_str("| variant | what | status | reason |\n|---|---|---|---|\n");
        for f in &r.failures {
            let _ = writeln!(
                m,
                "| {} | {} | **{}** | {} |",
                variant_label(&f.variant, f.emulated),
                esc(&f.what),
                esc(&f.status),
                esc(&f.reason)
            );
        }
    }
    m.push_str("\n### Packages\n\n");
    if r.packages.is_empty() {
        m.push_str("Not known (no pack report).\n");
    } else {
        m.push_str("| package | role | installed | archive |\n|---|---|---:|---:|\n");
        for (file, role, inst, arch) in &r.packages {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} |",
                esc(file),
                esc(role),
                bytes(*inst),
                bytes(*arch)
            );
        }
    }
    m.push_str("\n## Provenance\n\n| input | file | schema | tool | command | date |\n|---|---|---|---|---|---|\n");
    for p in &r.provenance {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} |",
            esc(p.input),
            esc(&p.file),
            esc(&p.schema),
            esc(p.tool.as_deref().unwrap_or(NOT_RECORDED)),
            p.command
                .as_deref()
                .map(esc)
                .unwrap_or_else(|| NOT_RECORDED.into()),
            esc(&p.date)
        );
    }
    if !r.unknown.is_empty() {
        m.push_str("\n## Not known\n\n");
        for u in &r.unknown {
            let _ = writeln!(m, "- {}", esc(u));
        }
    }
    m.push_str("\nGenerated by `splitpkg report` from the inputs above only; the same inputs give the same bytes.\n");
    m
}

fn list(m: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        let _ = writeln!(m, "{}: none.\n", esc(title));
        return;
    }
    let _ = writeln!(m, "{}:\n", esc(title));
    for i in items {
        let _ = writeln!(m, "- {}", esc(i));
    }
    m.push('\n');
}
