//! Progress on stderr for long work (inflating a 500 MB wheel, packing, solving).
//!
//! Shown only when stderr is a terminal and the caller did not ask for quiet output, so CI logs and
//! `--json` pipelines stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

pub struct Progress {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    pub fn new(enabled: bool) -> Self {
        Progress { enabled: enabled && std::io::stderr().is_terminal(), bar: Mutex::new(None) }
    }

    pub fn hidden() -> Self {
        Progress { enabled: false, bar: Mutex::new(None) }
    }

    pub fn start(&self, what: &str, total_bytes: u64) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        *self.bar.lock().unwrap() = Some(bar);
    }

    pub fn start_unknown(&self, what: &str) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::with_template("{msg:>12} {spinner} {bytes} {bytes_per_sec}").expect("static template"));
        bar.set_message(what.to_string());
        *self.bar.lock().unwrap() = Some(bar);
    }

    /// The current bar, for code that drives it directly (a writer's own progress callbacks).
    pub fn bar(&self) -> Option<ProgressBar> {
        self.bar.lock().unwrap().clone()
    }

    pub fn set_message(&self, what: &str) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.set_message(what.to_string());
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.inc(n);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap().take() {
            bar.finish_and_clear();
        }
    }
}
