//! The `splitpkg` command line: parse and dispatch. The commands live in `cli/`, the work in the
//! library.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;

fn main() -> ExitCode {
    // Before any thread: temporaries are removed on SIGINT/SIGTERM (output::cleanup).
    splitpkg::output::cleanup::install();
    let parsed = cli::Cli::try_parse().unwrap_or_else(|e| usage_error(e));
    cli::log::init(parsed.verbose);
    match cli::run(parsed) {
        Ok(exit) => exit.into(),
        Err(e) => {
            splitpkg::output::stderr_line(format_args!("splitpkg: error: {e}"));
            e.exit().into()
        }
    }
}

/// A command line clap refuses: one line, as every other error (the first paragraph of clap's message,
/// control characters in the echoed value escaped), exit 2. Help and version print as clap has them.
fn usage_error(e: clap::Error) -> ! {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    // The first paragraph is the error (with the missing arguments listed below its first line).
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .flat_map(str::split_whitespace)
        .collect();
    let message = first.join(" ");
    splitpkg::output::stderr_line(format_args!(
        "splitpkg: error: {} (see --help)",
        splitpkg::sanitize::printable(message.trim_start_matches("error: "))
    ));
    std::process::exit(splitpkg::Exit::BadInput.code().into());
}
