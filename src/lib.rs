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

pub mod elf;
pub mod emit;
pub mod env;
pub mod error;
pub mod fatbin;
pub mod graph;
pub mod inspect;
pub mod output;
pub mod pack;
pub mod payload;
pub mod plan;
pub mod progress;
pub mod report;
pub mod split;
pub mod smoke;
pub mod solve;
pub mod standin;
pub mod tree;
pub mod verify;
pub mod verdict;

pub use error::{Error, Result};
