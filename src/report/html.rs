//! The report as one self-contained HTML file: inline CSS and SVG, no script, no external fetch.
//! Every string that came from an input goes through [`esc`]: file names and error messages in the
//! documents are hostile as far as this page is concerned.

use std::fmt::Write;

use super::NOT_RECORDED;
use super::svg::{self, esc};
use super::{Change, Report, SlimSmoke, bytes, fmt_ms, fmt_ratio};

const STYLE: &str = "body{font-family:sans-serif;max-width:72rem;margin:1.5rem auto;padding:0 1rem;line-height:1.45;color:#111}\
h1{font-size:1.6rem}h2{border-bottom:1px solid #999;margin-top:2rem}table{border-collapse:collapse;margin:.5rem 0}\
td,th{border:1px solid #bbb;padding:.2rem .5rem;text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}td.err{font-size:.85em;max-width:28rem;overflow-wrap:anywhere}\
.answer{font-size:1.2rem;font-weight:bold;border:3px solid #111;padding:.6rem}.emulated{font-weight:bold;border:1px dashed #111;padding:0 .2rem}\
.fail{font-weight:bold;text-decoration:underline}.unknown{font-style:italic}code,pre{font-family:monospace;white-space:pre-wrap;word-break:break-all}\
svg.chart{max-width:100%;height:auto;display:block;margin:.5rem 0}";

fn variant_label(name: &str, emulated: bool) -> String {
    if emulated {
        format!("{} <span class=\"emulated\">EMULATED</span>", esc(name))
    } else {
        format!("{} (real)", esc(name))
    }
}

pub fn render(r: &Report) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>Should {t} split out {d}?</title><style>{STYLE}</style></head><body>\n<h1>Should {t} split out {d}?</h1>\n",
        t = esc(&r.title),
        d = esc(&r.dep.to_uppercase())
    );

    // 1. The answer.
    let _ = writeln!(
        h,
        "<h2 id=\"answer\">The answer</h2>\n<p class=\"answer\">{}</p>\n<ul>",
        esc(r.answer.headline())
    );
    match &r.saving {
        Some(s) => {
            let _ = writeln!(
                h,
                "<li>A slim ({}) environment saves <strong>{}</strong>, <strong>{:.2} %</strong> of the {} installation as planned ({}: the tree, with the payload closure in it). <small>{}</small></li>",
                esc(&r.slim),
                bytes(s.bytes),
                s.percent,
                esc(&r.dep),
                bytes(s.env_bytes),
                esc(&s.how)
            );
        }
        None if r.verdict.is_some() => {
            h.push_str("<li>No saving: there is no split (the payload is not confined).</li>\n")
        }
        None => h.push_str("<li class=\"unknown\">Bytes saved: not known (no plan).</li>\n"),
    }
    match r.slim_smoke {
        SlimSmoke::Real => {
            if r.lost_default.is_empty() {
                let _ = writeln!(
                    h,
                    "<li>Under the default backend, no op that works with {} stops working in the real {} variant.</li>",
                    esc(&r.dep),
                    esc(&r.slim)
                );
            } else {
                let _ = writeln!(
                    h,
                    "<li>Ops that <strong>stop working</strong> under the default backend in the real {} variant:<ul>",
                    esc(&r.slim)
                );
                for l in &r.lost_default {
                    let _ = writeln!(
                        h,
                        "<li><code>{}</code>: {} case(s), e.g. <code>{}</code></li>",
                        esc(&l.op),
                        l.cases,
                        esc(&l.example_reason)
                    );
                }
                h.push_str("</ul></li>\n");
            }
            if !r.lost_explicit.is_empty() {
                let ops: Vec<String> = r
                    .lost_explicit
                    .iter()
                    .map(|l| format!("<code>{}</code> ({}, {} case(s))", esc(&l.op), esc(&l.preference), l.cases))
                    .collect();
                let _ = writeln!(h, "<li>Ops that fail only when a backend is asked for explicitly: {}.</li>", ops.join(", "));
            }
        }
        SlimSmoke::Emulated => {
            let _ = writeln!(
                h,
                "<li class=\"unknown\">Ops that stop working: not known — the {} variant was <span class=\"emulated\">EMULATED</span> (cuSOLVER forced on a {} installation); this is not a real {} result.</li>",
                esc(&r.slim),
                esc(&r.dep),
                esc(&r.slim)
            );
        }
        SlimSmoke::NotRun | SlimSmoke::NoSmoke => {
            h.push_str("<li class=\"unknown\">Ops that stop working in the slim variant: not known (no smoke run of it).</li>\n")
        }
    }
    let moved: Vec<&super::RoutingLine> = r
        .routing
        .iter()
        .filter(|l| matches!(l.change, Change::Slower | Change::Faster | Change::Failed))
        .collect();
    if !r.routing.is_empty() {
        if moved.is_empty() {
            let _ = writeln!(
                h,
                "<li>Default routing: every timed op is within {:.0} % in the slim variant.</li>",
                (super::SAME_WITHIN - 1.0) * 100.0
            );
        } else {
            h.push_str("<li>Default routing, slim over full time:<ul>\n");
            for l in moved {
                let _ = writeln!(
                    h,
                    "<li><code>{}</code>: <strong>{}</strong> {} ({} vs {})</li>",
                    esc(&l.item),
                    l.change.label(),
                    l.ratio.map(fmt_ratio).unwrap_or_default(),
                    fmt_ms(l.slim_ms),
                    fmt_ms(l.full_ms)
                );
            }
            h.push_str("</ul></li>\n");
        }
    }
    match &r.platform {
        Some(p) => {
            let _ = writeln!(h, "<li>Measured on {}.</li>", esc(p));
        }
        None => h.push_str(
            "<li class=\"unknown\">GPU, driver and torch: not known (no smoke run).</li>\n",
        ),
    }
    h.push_str("</ul>\n");
    if !r.failures.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"fail\">The smoke run recorded {} failure(s): see <a href=\"#failures\">Failures</a>.</p>",
            r.failures.len()
        );
    }

    // 2. Charts.
    h.push_str("<h2 id=\"charts\">Charts</h2>\n<h3>Where the bytes go</h3>\n");
    if r.byte_bars.is_empty() {
        h.push_str("<p class=\"unknown\">Not known (no plan).</p>\n");
    } else {
        h.push_str(&svg::bytes_chart(&r.byte_bars));
        if let Some(b) = r.payload_static_in_lazy {
            let _ = writeln!(
                h,
                "<p>The payload is linked statically into the lazy {} library: {} of it is payload (plan estimate).</p>",
                esc(&r.dep),
                bytes(b)
            );
        }
    }
    let _ = writeln!(
        h,
        "<h3>Time under {} vs cuSOLVER (log scale)</h3>",
        esc(&r.dep)
    );
    if r.backend.is_empty() {
        h.push_str("<p class=\"unknown\">Not known (no bench of a real variant).</p>\n");
    } else {
        h.push_str(&svg::ratio_chart(&r.backend));
        h.push_str("<table><tr><th>op</th><th>magma</th><th>cuSOLVER</th><th>magma / cuSOLVER</th><th>error</th></tr>\n");
        for b in &r.backend {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"err\">{}</td></tr>",
                esc(&b.item),
                b.magma_cell(),
                fmt_ms(b.cusolver_ms),
                b.ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()),
                b.magma_error.as_deref().map(esc).unwrap_or_default()
            );
        }
        h.push_str("</table>\n");
    }
    if !r.routing.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Default routing: {} vs {}</h3>\n<table><tr><th>op</th><th>{}</th><th>{}</th><th>slim / full</th><th></th></tr>",
            esc(&r.slim),
            esc(&r.dep),
            esc(&r.dep),
            esc(&r.slim)
        );
        for l in &r.routing {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(&l.item),
                fmt_ms(l.full_ms),
                fmt_ms(l.slim_ms),
                l.ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()),
                l.change.label()
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h3>Device code per architecture</h3>\n");
    match &r.fatbin_total {
        Some((stored, uncompressed, driver)) => {
            h.push_str(&svg::fatbin_chart(&r.fatbin_bars));
            let _ = writeln!(
                h,
                "<p>{} stored, {} uncompressed; minimum driver {}.</p>",
                bytes(*stored),
                bytes(*uncompressed),
                esc(driver.as_deref().unwrap_or("not recorded"))
            );
        }
        None => h.push_str("<p class=\"unknown\">Not known (no fatbin scan).</p>\n"),
    }

    // 3. The proof.
    h.push_str("<h2 id=\"proof\">The proof</h2>\n");
    match r.verdict {
        Some(v) => {
            let _ = writeln!(h, "<p>Verdict: <strong>{}</strong>.</p>", esc(&format!("{v:?}").to_uppercase()));
            list(&mut h, "Reasons", &r.reasons);
            list(&mut h, "Lazy edges into the library", &r.lazy_edges);
            list(&mut h, "Witnesses (eager paths to the payload)", &r.witnesses);
            let core: Vec<String> = r.core_state_warnings.iter().map(|(f, w)| format!("{f}: {w}")).collect();
            list(&mut h, "Glue warnings: payload state compiled into the core (has_magma)", &core);
            let other: Vec<String> = r.other_warnings.iter().map(|(f, w)| format!("{f}: {w}")).collect();
            list(&mut h, "Other glue warnings", &other);
            if let Some(c) = &r.contract {
                let _ = writeln!(h, "<p>Loader contract of the lazy library: {}.</p>", esc(c));
            }
        }
        None => h.push_str("<p class=\"unknown\">Verdict, witnesses, glue warnings and contract: not known (no plan).</p>\n"),
    }
    if r.variants.is_empty() {
        h.push_str("<p class=\"unknown\">Smoke of each variant: not known (no smoke run).</p>\n");
    } else {
        let _ = writeln!(
            h,
            "<p>Smoke result: <strong>{}</strong>.</p>\n<table><tr><th>variant</th><th>torch</th><th>lazy library</th><th>cases</th><th>checks</th></tr>",
            esc(super::SmokeResult::label(r.smoke_result))
        );
        for v in &r.variants {
            let c = &v.counts;
            let checks: Vec<String> = v
                .checks
                .iter()
                .map(|k| format!("{}: {:?}", esc(&k.name), k.status).to_lowercase())
                .collect();
            let _ = writeln!(
                h,
                "<tr><td>{}{}</td><td>{}</td><td class=\"n\">{}</td><td>{} cases: {} pass, {} expected-fail, {} excluded, {} fail, {} timeout</td><td>{}</td></tr>",
                variant_label(&v.name, v.emulated),
                v.note
                    .as_ref()
                    .map(|n| format!("<br><small>{}</small>", esc(n)))
                    .unwrap_or_default(),
                esc(v.torch.as_deref().unwrap_or("not recorded")),
                match (v.emulated, v.lazy_bytes) {
                    (true, _) => "the full installation's (EMULATED)".to_string(),
                    (false, Some(b)) => format!(
                        "{}{}",
                        bytes(b),
                        v.lazy_has_magma
                            .map(|m| if m { ", has magma" } else { ", no magma" })
                            .unwrap_or("")
                    ),
                    (false, None) => "not recorded".into(),
                },
                c.cases,
                c.pass,
                c.expected_fail,
                c.excluded,
                c.fail,
                c.timeout,
                checks.join("<br>")
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h3 id=\"failures\">Failures</h3>\n");
    if r.variants.is_empty() {
        h.push_str("<p class=\"unknown\">Not known (no smoke run).</p>\n");
    } else if r.failures.is_empty() {
        h.push_str("<p>None: every case and check met its expectation.</p>\n");
    } else {
        h.push_str("<table><tr><th>variant</th><th>what</th><th>status</th><th>reason</th></tr>\n");
        for f in &r.failures {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td><code>{}</code></td><td class=\"fail\">{}</td><td><code>{}</code></td></tr>",
                variant_label(&f.variant, f.emulated),
                esc(&f.what),
                esc(&f.status),
                esc(&f.reason)
            );
        }
        h.push_str("</table>\n");
    }
    h.push_str("<h3>Packages</h3>\n");
    if r.packages.is_empty() {
        h.push_str("<p class=\"unknown\">Not known (no pack report).</p>\n");
    } else {
        h.push_str(
            "<table><tr><th>package</th><th>role</th><th>installed</th><th>archive</th></tr>\n",
        );
        for (file, role, inst, arch) in &r.packages {
            let _ = writeln!(
                h,
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(file),
                esc(role),
                bytes(*inst),
                bytes(*arch)
            );
        }
        h.push_str("</table>\n");
    }

    // 4. Provenance.
    h.push_str("<h2 id=\"provenance\">Provenance</h2>\n<table><tr><th>input</th><th>file</th><th>schema</th><th>tool</th><th>command</th><th>date</th></tr>\n");
    for p in &r.provenance {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(p.input),
            esc(&p.file),
            esc(&p.schema),
            esc(p.tool.as_deref().unwrap_or(NOT_RECORDED)),
            p.command
                .as_ref()
                .map(|c| format!("<code>{}</code>", esc(c)))
                .unwrap_or_else(|| NOT_RECORDED.into()),
            esc(&p.date)
        );
    }
    h.push_str("</table>\n");
    if !r.unknown.is_empty() {
        h.push_str("<h2 id=\"unknown\">Not known</h2>\n<ul>\n");
        for u in &r.unknown {
            let _ = writeln!(h, "<li class=\"unknown\">{}</li>", esc(u));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<p><small>Generated by <code>splitpkg report</code> from the inputs above only; the same inputs give the same bytes.</small></p>\n</body></html>\n");
    h
}

fn list(h: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        let _ = writeln!(h, "<p>{}: none.</p>", esc(title));
        return;
    }
    let _ = writeln!(h, "<p>{}:</p><ul>", esc(title));
    for i in items {
        let _ = writeln!(h, "<li><code>{}</code></li>", esc(i));
    }
    h.push_str("</ul>\n");
}
