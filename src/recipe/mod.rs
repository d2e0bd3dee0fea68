//! Recipes: the split model every output format shares ([`split`]), the conda-build and
//! rattler-build recipes rendered from it ([`emit`]), and the check a lazy-library build must pass
//! before it may stand for a variant ([`verify`]).

pub mod emit;
pub mod feedstock;
pub mod split;
pub mod verify;
