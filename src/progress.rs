//! Progress on stderr for long work (inflating a 500 MB wheel, packing, solving).
//!
//! Shown only when stderr is a terminal and the caller did not ask for quiet output, so CI logs and
//! `--json` pipelines stay clean.

use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// No estimate before this much time has passed or this share of the work is done: the first
/// ticks (opening files, the first large member) say nothing about the rate, and an early
/// "eta 14m" for a 15 s job is worse than none.
const ETA_AFTER: Duration = Duration::from_secs(2);
const ETA_AFTER_FRACTION: f32 = 0.05;

/// The ` eta …` part of a bar, empty until the estimate means something.
fn eta_text(elapsed: Duration, fraction: f32, eta: Duration) -> String {
    if elapsed < ETA_AFTER || !(ETA_AFTER_FRACTION..1.0).contains(&fraction) {
        return String::new();
    }
    format!(" eta {}", HumanDuration(eta))
}

/// A bar style: `counted` is the template part that shows the position (bytes, or a count of
/// `unit`s), then the estimate once it means something.
fn style(counted: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!("{{msg:>12}} [{{bar:30}}] {counted}{{eta_known}}"))
        .expect("static template")
        .with_key(
            "eta_known",
            |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&eta_text(s.elapsed(), s.fraction(), s.eta()));
            },
        )
        .progress_chars("=> ")
}

/// The byte progress bar on stderr, drawn only when stderr is a terminal and the command was not
/// asked to be quiet.
pub struct Progress {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    /// A bar shown if `enabled` and stderr is a terminal.
    pub fn new(enabled: bool) -> Self {
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }

    /// A bar that never draws (library callers, tests, `--quiet`).
    pub fn hidden() -> Self {
        Progress {
            enabled: false,
            bar: Mutex::new(None),
        }
    }

    /// A bar over `total_bytes` bytes.
    pub fn start(&self, what: &str, total_bytes: u64) {
        self.start_styled(
            what,
            total_bytes,
            style("{bytes}/{total_bytes} {bytes_per_sec}"),
        );
    }

    /// A bar over `total` things that are not bytes (`unit`: "members", "files"): `1/12,410 members`.
    pub fn start_count(&self, what: &str, total: u64, unit: &str) {
        self.start_styled(
            what,
            total,
            style(&format!("{{human_pos}}/{{human_len}} {unit}")),
        );
    }

    fn start_styled(&self, what: &str, total: u64, style: ProgressStyle) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(style);
        bar.set_message(what.to_string());
        *self.bar.lock().unwrap() = Some(bar);
    }

    /// Start a spinner for `what` whose total is not known (bytes counted as they come).
    pub fn start_unknown(&self, what: &str) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{msg:>12} {spinner} {bytes} {bytes_per_sec}")
                .expect("static template"),
        );
        bar.set_message(what.to_string());
        *self.bar.lock().unwrap() = Some(bar);
    }

    /// The current bar, for code that drives it directly (a writer's own progress callbacks).
    pub fn bar(&self) -> Option<ProgressBar> {
        self.bar.lock().unwrap().clone()
    }

    /// Replace the bar's label (`what` it is working on now).
    pub fn set_message(&self, what: &str) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.set_message(what.to_string());
        }
    }

    /// Count `n` more bytes done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.inc(n);
        }
    }

    /// Remove the bar from the terminal: the command's output follows.
    pub fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap().take() {
            bar.finish_and_clear();
        }
    }
}

/// When each step of a long command finished: a `debug` span for the command, and in it one
/// `debug` event per step (`-v`, or `SPLITPKG_TRACE=1`; bench/ uses them to say where the time
/// went).
pub struct StepTrace {
    what: &'static str,
    started: std::time::Instant,
    span: tracing::Span,
}

impl StepTrace {
    /// Start timing the command `what` (its span opens here).
    pub fn start(what: &'static str) -> StepTrace {
        StepTrace {
            what,
            started: std::time::Instant::now(),
            span: tracing::debug_span!("steps", what),
        }
    }

    /// Record, at debug level, that `step` finished and when.
    pub fn step(&self, step: &str) {
        let _in = self.span.enter();
        tracing::debug!(
            "trace: {} {step} done at {:.0} ms",
            self.what,
            self.started.elapsed().as_secs_f64() * 1e3
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A terminal that keeps the last line drawn.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            if !s.trim().is_empty() {
                *self.0.lock().unwrap() = s.to_string();
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn drawn(total: u64, pos: u64, style: ProgressStyle) -> String {
        let screen = Screen::default();
        let bar = ProgressBar::with_draw_target(
            Some(total),
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
        );
        bar.set_style(style);
        bar.set_message("verifying");
        bar.set_position(pos);
        bar.tick();
        screen.0.lock().unwrap().clone()
    }

    #[test]
    fn a_count_of_members_is_not_shown_as_bytes() {
        let line = drawn(12_410, 1, style("{human_pos}/{human_len} members"));
        assert!(line.contains("1/12,410 members"), "{line}");
        assert!(!line.contains(" B") && !line.contains("KiB"), "{line}");
        let line = drawn(
            12_410 << 10,
            1 << 20,
            style("{bytes}/{total_bytes} {bytes_per_sec}"),
        );
        assert!(line.contains("1.00 MiB/12.12 MiB"), "{line}");
    }

    #[test]
    fn no_estimate_until_it_means_something() {
        // At the start: nothing, however long the rate says it would take.
        assert!(!drawn(100, 1, style("{pos}")).contains("eta"));
        assert_eq!(
            eta_text(Duration::from_millis(300), 0.5, Duration::from_secs(840)),
            ""
        );
        assert_eq!(
            eta_text(Duration::from_secs(5), 0.01, Duration::from_secs(840)),
            ""
        );
        assert_eq!(eta_text(Duration::from_secs(5), 1.0, Duration::ZERO), "");
        assert_eq!(
            eta_text(Duration::from_secs(5), 0.25, Duration::from_secs(15)),
            " eta 15 seconds"
        );
    }
}
