//! Analysis: from the facts the readers collect to the proof and the proposed outputs.
//!
//! [`inspect`] reads a tree into per-file facts and the load graph ([`graph`], the ld.so model),
//! with [`payload`] (what counts as MAGMA) found on the way; [`verdict`] proves or refutes
//! confinement; [`plan`] proposes the outputs; [`text`] renders them for people.

pub mod contract;
pub mod declared;
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
// Compiled always (hidden from the docs) so the integration tests build their trees with the same
// gcc scenarios as the unit tests; nothing in the binary calls it, so nothing of it is linked in.
#[doc(hidden)]
pub mod testkit;
pub mod text;
pub mod verdict;
pub mod warning;
