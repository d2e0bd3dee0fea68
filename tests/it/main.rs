//! The integration tests: one binary, one module per area (as uv and ripgrep do), so the crate
//! graph is linked once, the gcc fixtures are built once per run (`common::fixtures`), and the
//! slow full-tier tests (the fuzz build, rattler-build, pip and uv) overlap the rest instead of
//! running alone at the end of their own binary.
//!
//! `cargo test --release --test it` runs them all; `cargo test --release --test it smoke::` one
//! module; the full tier adds `--features full-tests`.

// Tests read the files they wrote and the outputs they check directly (the bound and the
// regular-file check guard the tool, not its test harness), and print what a failure needs to be
// understood (a command's output, a skipped tier).
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

mod common;

mod architecture;
mod atomic;
mod bad_input;
mod emit;
mod fatbin;
mod feedstock;
mod feedstock_hostile;
mod generic;
mod has_magma;
mod hints;
mod hostile_paths;
mod hostile_strings;
mod index;
mod inspect;
mod install_commands;
mod loader;
mod loader_aarch64;
mod note;
mod pack;
mod plan;
mod real_corpus;
mod report;
mod schemas;
mod security;
mod ship;
mod smoke;
mod snapshots;
mod variant_contract;
mod wheel;
