//! Conda channels (writing them needs the feature `channel`): real `.conda` packages written with rattler ([`pack`]),
//! described in `CHANNEL/splitpkg.json` ([`info`]); stand-ins for payload packages the channel
//! lacks ([`standin`]), install scenarios with rattler's solver and installer ([`solve`]), and what
//! an installed environment holds and could switch to ([`env`]).

// The documents and `splitpkg.json` are in every build (the report and the schemas read them);
// what writes them needs rattler.
pub mod document;
#[cfg(feature = "channel")]
pub mod env;
pub mod info;
#[cfg(feature = "channel")]
pub mod pack;
#[cfg(feature = "channel")]
pub mod solve;
#[cfg(feature = "channel")]
pub mod standin;
#[cfg(feature = "channel")]
pub mod text;
