//! Recipes: the split model every output format shares ([`split`]), the conda-build and
//! rattler-build recipes rendered from it ([`emit`]), and the check a lazy-library build must pass
//! before it may stand for a variant ([`verify`]), and the optional build step that declares the
//! lazy library in its loader's `.note.dlopen` ([`note`]).

pub mod build;
pub mod emit;
pub mod feedstock;
pub mod needed;
pub mod note;
pub mod split;
pub mod verify;
