//! The findings that do not change the verdict ([`Warning`], [`WarningKind`]): written by the
//! proof (`verdict`) and the `.note.dlopen` reader (`declared`), in a file of their own so that
//! neither of those two imports the other.

use serde::{Deserialize, Serialize};

/// A finding that does not change the verdict: the file, what was found and what it means.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warning {
    /// Tree path of the file it is about: a core file, a file with a `.note.dlopen`, or a symlink.
    pub file: String,
    /// What was found, with how many (`1 magma-aware dynamic symbol(s) outside the lazy library`).
    pub what: String,
    /// What it means for the split or for a packager, and what to do where something can be done.
    pub consequence: String,
    /// Examples of what was found (symbols, strings, `dlopen` names or note problems), at most
    /// eight; absent when there are none (a symlink pointing outside the tree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// The kind, written for the kinds added after schema version 1 first shipped (the
    /// `.note.dlopen` ones); absent otherwise, and [`Warning::kind`] reads the text as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<WarningKind>,
}

/// What a [`Warning`] is about, for decisions (the recipe's HAS_MAGMA.md); the text is for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WarningKind {
    /// PyTorch's MAGMA state (`hasMAGMA`, `set_magma_init_fn`) is compiled into a core file: the
    /// slim variant still reports `torch.cuda.has_magma == True`.
    CoreState,
    /// Other payload-aware code or text in the core.
    Other,
    /// A `dlopen` literal that the file's `.note.dlopen` does not declare.
    UndeclaredDlopen,
    /// A library a `.note.dlopen` declares that is not in the tree (nor a system library).
    DeclaredNotFound,
    /// A `.note.dlopen` that could not be read whole (bad JSON, alignment, truncated, …).
    MalformedNote,
}

/// The consequence of [`WarningKind::CoreState`]. The plan JSON (schema version 1) has no kind
/// field, so the kind is recovered from this exact text — one constant, written and compared here
/// only — which keeps a plan read back from JSON deciding the same as the plan it was written from.
pub(crate) const CORE_STATE_CONSEQUENCE: &str = "MAGMA state is compiled into this core file: with only the nomagma lazy library installed, \
torch.cuda.has_magma stays True, torch.__config__.show() still lists Magma, and \
preferred_linalg_library('magma') is still accepted (the MAGMA-only ops then fail at run time)";

impl Warning {
    /// What kind of warning this is: the recorded kind, or for a plan written before kinds were
    /// recorded, the kind its message reads as.
    pub fn kind(&self) -> WarningKind {
        if let Some(k) = self.kind {
            return k;
        }
        if self.consequence == CORE_STATE_CONSEQUENCE {
            WarningKind::CoreState
        } else {
            WarningKind::Other
        }
    }
}
