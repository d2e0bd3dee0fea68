//! How a member of an input is named in messages.

use std::path::Path;

use super::TreeKind;

/// How a member is named in messages: a real path for directories, `archive:member` otherwise.
pub fn display_member(tree_source: &Path, kind: TreeKind, member: &str) -> String {
    match kind {
        TreeKind::Directory => tree_source.join(member).display().to_string(),
        _ => format!("{}:{member}", tree_source.display()),
    }
}
