//! Analysis: from the facts the readers collect to the proof and the proposed outputs.
//!
//! [`inspect`] reads a tree into per-file facts and the load graph ([`graph`], the ld.so model),
//! with [`payload`] (what counts as MAGMA) found on the way; [`verdict`] proves or refutes
//! confinement; [`plan`] proposes the outputs; [`text`] renders them for people; [`document`] is
//! `inspect --json`'s document.

pub mod contract;
pub mod declared;
pub mod document;
pub mod environment;
pub mod exports;
pub mod graph;
pub mod hwcaps;
pub mod inspect;
pub mod lazy;
pub mod payload;
pub mod pipeline;
pub mod plan;
pub mod providers;
pub mod pylock;
pub mod switch;
// Test-only: the unit tests build it under cfg(test), the integration tests through the `testkit`
// feature (which `full-tests` turns on, so CI builds the crate graph once); the library and the
// binary of a default build do not contain it.
#[cfg(any(test, feature = "testkit"))]
#[doc(hidden)]
pub mod testkit;
pub mod text;
pub mod verdict;
pub mod warning;
