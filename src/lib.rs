//! splitpkg: prove from the binaries that an optional component (MAGMA) of a CUDA PyTorch build is
//! reachable only through a lazily loaded library, and split the package along that line.
//!
//! Data flows one way, one module per stage:
//!
//! ```text
//! tree (dir/.whl/.conda/.tar.bz2) → elf (facts) → payload (scan) → graph (ld.so model)
//!      → verdict (proof) → plan → emit | pack | solve | smoke
//! ```
//!
//! [`inspect::inspect`] runs the first four stages; [`verdict::analyse`] and [`plan::make_plan`]
//! turn the result into the verdict and the proposed outputs. [`fatbin`] reads the CUDA device code
//! (`.nv_fatbin`) of a library from its headers: per-architecture counts and sizes, compression and
//! the driver it needs, whether it runs on a given GPU.
//!
//! Features (all default): `cli` (clap, for the binary), `channel` (pack, solve, env: the rattler
//! crates) and `gpu` (smoke: cudarc). Without them the library is the readers, the proof, plan and
//! emit; the fuzz target links that.

pub mod elf;
pub mod emit;
#[cfg(feature = "channel")]
pub mod env;
pub mod error;
pub mod fatbin;
pub mod graph;
pub mod inspect;
pub mod output;
#[cfg(feature = "channel")]
pub mod pack;
pub mod payload;
pub mod plan;
pub mod progress;
pub mod report;
#[cfg(feature = "gpu")]
pub mod smoke;
#[cfg(feature = "channel")]
pub mod solve;
pub mod split;
#[cfg(feature = "channel")]
pub mod standin;
pub mod tree;
pub mod verdict;
pub mod verify;

pub use error::{Error, Result};
