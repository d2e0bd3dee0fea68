//! The `splitpkg` command line: parse and dispatch. The commands live in `cli/`, the work in the
//! library.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Before any thread: temporaries are removed on SIGINT/SIGTERM (output::cleanup).
    splitpkg::output::cleanup::install();
    match cli::run(cli::Cli::parse()) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("splitpkg: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
