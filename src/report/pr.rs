//! The pull-request description `feedstock --pr-body` writes with its patch: what changes per
//! output, per CI configuration, what a slim environment saves (measured from the payload
//! packages given), what the slim variant loses (from a real smoke run, when given), how users
//! pick a variant and how to revert. Markdown, rendered by `templates/report/feedstock-pr.md.j2`
//! with every value from the feedstock escaped.

use std::path::PathBuf;

use serde::Serialize;

pub use super::model::Worth;
use super::model::{LostOp, RoutingLine};
use super::{Inputs, LoadedDocument};
use crate::error::{Error, Result};
use crate::recipe::feedstock::{CiConfig, Summary};
use crate::smoke::SmokeReport;

/// A payload package measured for one CUDA version (`--pr-payload 13.0=libmagma-….conda`).
#[derive(Debug, Clone)]
pub struct Payload {
    /// The CUDA version it was measured for (`13.0`).
    pub cuda: String,
    /// The payload package (`.conda`) measured.
    pub file: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
struct ConfigLine {
    file: String,
    platform: String,
    cuda: String,
    lazy: bool,
    lazy_builds: usize,
    saving: String,
}

#[derive(Debug, Clone, Serialize)]
struct SavingLine {
    cuda: String,
    file: String,
    bytes: String,
    worth: String,
}

#[derive(Debug, Clone, Serialize)]
struct SmokeFacts {
    file: String,
    device: String,
    lost_default: Vec<LostOp>,
    lost_explicit: Vec<LostOp>,
    moved: Vec<RoutingLine>,
    real: bool,
}

#[derive(Debug, Clone, Serialize)]
struct Body<'a> {
    s: &'a Summary,
    version_line: &'static str,
    configs: Vec<ConfigLine>,
    savings: Vec<SavingLine>,
    smoke: Option<SmokeFacts>,
    unmeasured: Vec<String>,
    /// The install commands users run: the slim environment, and a switch to each variant.
    slim: String,
    switch_with: String,
    switch_without: String,
    smoke_command: String,
    revert_constraint: String,
}

/// The description, as Markdown.
pub fn render(
    summary: &Summary,
    configs: &[CiConfig],
    payloads: &[Payload],
    smoke: Option<LoadedDocument<SmokeReport>>,
) -> Result<String> {
    let savings = payloads
        .iter()
        .map(measure)
        .collect::<Result<Vec<(SavingLine, u64)>>>()?;
    let lines = configs
        .iter()
        .map(|c| config_line(c, &savings))
        .collect::<Vec<_>>();
    let unmeasured = configs
        .iter()
        .filter(|c| c.builds_lazy())
        .filter_map(|c| c.cuda.clone())
        .filter(|cuda| !savings.iter().any(|(s, _)| &s.cuda == cuda))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let body = Body {
        s: summary,
        version_line: crate::provenance::VERSION_LINE,
        configs: lines,
        savings: savings.into_iter().map(|(s, _)| s).collect(),
        smoke: smoke.map(smoke_facts),
        unmeasured,
        slim: format!(
            "conda install pytorch \"{}=*=*{}_*\"",
            summary.lazy, summary.without
        ),
        switch_with: format!("conda install \"{}=*=*_{}_*\"", summary.lazy, summary.with),
        switch_without: format!(
            "conda install \"{}=*=*_{}_*\"",
            summary.lazy, summary.without
        ),
        smoke_command: format!(
            "splitpkg smoke --variant {w}=ENV_{w} --variant {wo}=ENV_{wo} --bench --json --out smoke.json",
            w = summary.with,
            wo = summary.without
        ),
        revert_constraint: format!("{} <0.0a0", summary.lazy),
    };
    super::template::render("feedstock-pr.md", &body, minijinja::context! {})
}

/// The installed bytes of a payload package: its files, read from the package itself.
fn measure(p: &Payload) -> Result<(SavingLine, u64)> {
    let (tree, _) =
        crate::input::Tree::open(&p.file, &crate::progress::Progress::hidden(), |_| Ok(()))?;
    let bytes = tree.total_file_bytes();
    if bytes == 0 {
        return Err(Error::bad(
            p.file.display(),
            "a payload package without files",
        ));
    }
    let line = SavingLine {
        cuda: p.cuda.clone(),
        file: crate::input::Tree::file_name(&p.file.display().to_string()).to_string(),
        bytes: super::bytes(bytes),
        worth: Worth::of(bytes).label().to_string(),
    };
    Ok((line, bytes))
}

fn config_line(c: &CiConfig, savings: &[(SavingLine, u64)]) -> ConfigLine {
    let saving = match (&c.cuda, c.builds_lazy()) {
        (Some(cuda), true) => savings
            .iter()
            .find(|(s, _)| &s.cuda == cuda)
            .map_or("not measured".to_string(), |(s, _)| s.bytes.clone()),
        _ => "none (no split)".to_string(),
    };
    ConfigLine {
        file: c.file.clone(),
        platform: if c.core_builds() > 1 || (c.cuda.is_some() && !c.arm_variants.is_empty()) {
            format!("{} ({})", c.target_platform, c.arm_variants.join(", "))
        } else {
            c.target_platform.clone()
        },
        cuda: c.cuda.clone().unwrap_or_else(|| "none (CPU)".into()),
        lazy: c.builds_lazy(),
        // Two per core build: every arm variant is a libtorch build of its own.
        lazy_builds: 2 * c.core_builds(),
        saving,
    }
}

fn smoke_facts(s: LoadedDocument<SmokeReport>) -> SmokeFacts {
    let device = s
        .doc
        .device
        .as_ref()
        .map_or_else(|| "not recorded".to_string(), |d| d.name.clone());
    // Its file name only: a description is pasted into a pull request, not a machine path.
    let file = crate::input::Tree::file_name(&s.file).to_string();
    let report = super::build::build(&Inputs {
        smoke: Some(s),
        ..Inputs::default()
    });
    let lost = report.slim_real.clone().unwrap_or_default();
    SmokeFacts {
        file,
        device,
        real: report.slim_real.is_some(),
        lost_default: lost.default,
        lost_explicit: lost.explicit,
        moved: report.routing_moved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_follows_the_2024_thresholds() {
        assert_eq!(Worth::of(385_000_000), Worth::NotWorthIt);
        assert_eq!(Worth::of(599_999_999), Worth::NotWorthIt);
        assert_eq!(Worth::of(600_000_000), Worth::GrayZone);
        assert_eq!(Worth::of(1_999_999_999), Worth::GrayZone);
        assert_eq!(Worth::of(2_000_000_000), Worth::WorthIt);
    }
}
