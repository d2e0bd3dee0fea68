//! Conda channels (feature `channel`): real `.conda` packages written with rattler ([`pack`]),
//! described in `CHANNEL/splitpkg.json` ([`info`]); stand-ins for payload packages the channel
//! lacks ([`standin`]), install scenarios with rattler's solver and installer ([`solve`]), and what
//! an installed environment holds and could switch to ([`env`]).

pub mod env;
pub mod info;
pub mod pack;
pub mod solve;
pub mod standin;
