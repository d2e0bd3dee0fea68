//! splitpkg: prove from the binaries that an optional component (MAGMA) of a CUDA PyTorch build is
//! reachable only through a lazily loaded library, and split the package along that line.
//!
//! Data flows one way, one folder per stage (docs/architecture.md):
//!
//! ```text
//! input (dir/.whl/.conda/.tar.bz2) → elf, fatbin (facts) → analysis (payload, load graph, verdict,
//!      plan) → recipe (split model, emit, verify-variant) → channel (pack, solve, env) | smoke
//! ```
//!
//! [`analysis::pipeline::plan_tree`] is the one inspect → analyse → plan sequence every command
//! uses. [`fatbin`] reads the CUDA device code (`.nv_fatbin`) of a library from its headers.
//!
//! Features (all default): `cli` (clap, for the binary), `channel` (the [`channel`] folder: the
//! rattler crates) and `gpu` (smoke's CUDA driver probe: cudarc). Without them the library is the
//! readers, the proof, plan, emit, report and every document type ([`document`]); the fuzz targets
//! link that.

pub mod analysis;
pub mod channel;
/// The one rule for joining a path from an input to a directory that is written or deleted in.
pub mod confine;
pub mod document;
pub mod elf;
pub mod error;
pub mod exit;
pub mod fatbin;
/// The fuzz harnesses of the cargo-fuzz targets under `fuzz/`, above every stage they drive.
#[doc(hidden)]
pub mod fuzz;
pub mod index;
pub mod input;
pub mod output;
pub mod progress;
/// Tool, command and date every JSON document records.
pub mod provenance;
pub mod recipe;
/// The one-page answer from every stage's JSON; reads them through typed views, so it needs no feature.
pub mod report;
/// The one sanitiser for input strings that reach a terminal, a file name, a header or a shell command.
pub mod sanitize;
pub mod smoke;
/// SVG drawing for the report's charts and `env --svg`'s picture: plain data in, a string out.
pub mod svg;
pub mod version;
pub mod wheel;

pub use error::{Error, Result};
pub use exit::Exit;
