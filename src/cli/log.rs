//! The binary's `tracing` subscriber: what the library reports on stderr and how much of it.
//!
//! The library emits events and spans (`tracing`), never prints; this decides which reach the
//! terminal. By default splitpkg's own `info` and above (the notes a command prints), with `-v`
//! its `debug` events (when each step of a long command finished), with `-vv` its `trace` events
//! (each file's timings). `SPLITPKG_LOG`, or else `RUST_LOG`, is a full filter instead
//! (`splitpkg::channel=debug`, `rattler=info`). `SPLITPKG_TRACE=1`, the switch bench/ and older
//! scripts use, is `-vv`. Other crates' events (rattler's) stay off unless a filter names them.
//!
//! Each event prints as its message alone, one line, as the `eprintln!` lines it replaced did (a
//! timing line carries its own `trace:` prefix, a smoke note its `smoke:`); warnings and errors
//! get the CLI's `splitpkg: warning:` / `splitpkg: error:` prefix.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the subscriber for this process; `verbose` is the count of `-v` flags.
pub fn init(verbose: u8) {
    let filter = from_env().unwrap_or_else(|| {
        let trace = std::env::var_os("SPLITPKG_TRACE").is_some();
        EnvFilter::new(default_directive(verbose, trace))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(Plain)
        .init();
}

/// The filter `SPLITPKG_LOG` (else `RUST_LOG`) gives. One that does not parse is reported on one
/// line, naming the variable, and the default filter is used: logging never stops a command.
fn from_env() -> Option<EnvFilter> {
    let (var, value) = ["SPLITPKG_LOG", "RUST_LOG"].iter().find_map(|var| {
        let value = std::env::var(var).ok().filter(|v| !v.trim().is_empty())?;
        Some((var, value))
    })?;
    EnvFilter::try_new(&value)
        .inspect_err(|e| {
            splitpkg::output::stderr_line(format_args!(
                "splitpkg: warning: {var}={}: not a tracing filter ({}); using the default",
                splitpkg::sanitize::printable(&format!("{value:?}")),
                splitpkg::sanitize::printable(&e.to_string())
            ))
        })
        .ok()
}

/// The filter without SPLITPKG_LOG/RUST_LOG: from the `-v` count, or `SPLITPKG_TRACE` (`trace`).
fn default_directive(verbose: u8, trace: bool) -> &'static str {
    match verbose {
        _ if trace => "splitpkg=trace",
        0 => "splitpkg=info",
        1 => "splitpkg=debug",
        _ => "splitpkg=trace",
    }
}

/// The message (and any other fields, `key=value`) on one line, prefixed by level only for
/// warnings and errors.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => write!(writer, "splitpkg: error: ")?,
            Level::WARN => write!(writer, "splitpkg: warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_v_shows_one_level_more() {
        assert_eq!(default_directive(0, false), "splitpkg=info");
        assert_eq!(default_directive(1, false), "splitpkg=debug");
        assert_eq!(default_directive(2, false), "splitpkg=trace");
        assert_eq!(default_directive(7, false), "splitpkg=trace");
        assert_eq!(
            default_directive(0, true),
            "splitpkg=trace",
            "SPLITPKG_TRACE is -vv"
        );
    }
}
