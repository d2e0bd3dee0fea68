//! The one member walker: `plan`'s tree readers ([`super::Tree::open`]) and `pack`'s stager see a
//! directory or an archive as the same sequence of [`TreeMember`]s — path, kind, size, mode, link, and
//! a reader for the content — with the member rules of docs/security.md applied in archive order,
//! so a member one accepts is a member the other stages.
//!
//! Archives are walked once, in order ([`walk_tar`], [`walk_zip`]); a caller that reads members
//! in parallel keeps what it needs of each [`TreeMember`] (a zip member is opened again by its
//! [`TreeMember::index`]). A directory is listed first ([`walk_dir`]) and its files opened by name,
//! never through a link ([`open_nofollow`]).

use crate::error::Context;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Refuse archive members (regular files) that claim to be larger than this: no torch library is
/// near it, and a hostile archive could otherwise make us allocate without bound.
const MAX_MEMBER_BYTES: u64 = 16 << 30;

/// One member of a tree, the member rules applied.
#[derive(Debug, Clone)]
pub(crate) struct TreeMember {
    /// Relative to the root, `/`-separated, normalised (no `./`, `//`, `..`, never absolute).
    pub path: String,
    pub kind: MemberKind,
    /// A regular file's size (for an archive, as the archive claims it: the reader of its content
    /// checks what it gets). 0 for the other kinds.
    pub size: u64,
    /// Unix mode bits, when the tree records them (pack keeps the execute bits; plan has no use
    /// for them).
    #[cfg_attr(not(feature = "channel"), allow(dead_code))]
    pub mode: Option<u32>,
    /// A symlink's target as stored; a hard link's first name (for an archive, the normalised
    /// earlier member it names; for a directory, the shortest name of the same file).
    pub link: Option<String>,
    /// Position in the walk: the member's index in a zip archive, to open it again by.
    pub index: usize,
}

impl TreeMember {
    /// Is any execute bit set?
    #[cfg_attr(not(feature = "channel"), allow(dead_code))]
    pub(crate) fn executable(&self) -> bool {
        self.mode.is_some_and(|m| m & 0o111 != 0)
    }
}

/// What a tar walk does with `info/`: `None` for an archive that is all content (the
/// `pkg-*.tar.zst` of a `.conda`), or a function that gets the package metadata of a `.tar.bz2`
/// (path and content of every `info/` member, outside the member rules: it is not installed).
pub(crate) type Metadata<'a> = Option<&'a mut dyn FnMut(&str, &mut dyn Read) -> Result<()>>;

/// Walk a tar archive, calling `visit` for every directory, symlink, hard link and regular file
/// member in archive order, with the member's content as the reader (what a file member's visit
/// leaves unread is drained, so a truncated archive is noticed at that member). Other member
/// types (devices, fifos) are not package content and are skipped.
pub(crate) fn walk_tar(
    display: &str,
    reader: impl Read,
    mut metadata: Metadata<'_>,
    mut visit: impl FnMut(&TreeMember, &mut dyn Read) -> Result<()>,
) -> Result<()> {
    let mut rules = Members::default();
    let mut tar = tar::Archive::new(reader);
    let entries = tar.entries().bad_at(display, "not a tar archive")?;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.bad_at(display, "broken tar archive")?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(path) = safe_member_path(display, &raw)? else {
            continue;
        };
        if let Some(f) = metadata.as_mut()
            && (path == "info" || path.starts_with("info/"))
        {
            f(&path, &mut entry)?;
            continue;
        }
        let etype = entry.header().entry_type();
        let kind = if etype.is_dir() {
            MemberKind::Dir
        } else if etype.is_symlink() {
            MemberKind::Symlink
        } else if etype.is_hard_link() {
            MemberKind::Hardlink
        } else if etype.is_file() || etype == tar::EntryType::Continuous {
            MemberKind::File
        } else {
            continue;
        };
        let link_name = |entry: &tar::Entry<'_, _>| -> std::io::Result<String> {
            Ok(entry
                .link_name()?
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default())
        };
        // A hard link names an earlier member: normalised like a member name, checked by the rules.
        let named = match kind {
            MemberKind::Hardlink => {
                let raw = link_name(&entry).bad_in(format_args!("{display}:{path}"))?;
                Some(safe_member_path(display, &raw)?.unwrap_or_default())
            }
            _ => None,
        };
        rules.check(display, &path, kind, named.as_deref())?;
        let link = match kind {
            MemberKind::Symlink => Some(link_name(&entry).bad_at(display, &path)?),
            _ => named,
        };
        let size = if kind == MemberKind::File {
            entry.size()
        } else {
            0
        };
        if size > MAX_MEMBER_BYTES {
            return Err(Error::bad(
                display,
                format!("member {path} claims {size} bytes; refusing"),
            ));
        }
        let mode = entry.header().mode().ok();
        let member = TreeMember {
            path,
            kind,
            size,
            mode,
            link,
            index,
        };
        visit(&member, &mut entry)?;
        if kind == MemberKind::File {
            std::io::copy(&mut entry, &mut std::io::sink())
                .bad_at(display, format_args!("{}: truncated", member.path))?;
        }
    }
    Ok(())
}

/// A zip archive (a wheel, or the outer archive of a `.conda`) read in place from memory.
pub(crate) type Zip<'a> = zip::ZipArchive<std::io::Cursor<&'a [u8]>>;

/// Open `bytes` as a zip archive; `what` says what it should have been.
pub(crate) fn open_zip<'a>(display: &str, bytes: &'a [u8], what: &str) -> Result<Zip<'a>> {
    zip::ZipArchive::new(std::io::Cursor::new(bytes)).bad_at(display, what)
}

/// Walk a zip archive (zip has no hard links), calling `visit` for every member in central
/// directory order with its decompressed content as the reader. A symlink's target is its content.
pub(crate) fn walk_zip(
    display: &str,
    bytes: &[u8],
    archive: &mut Zip<'_>,
    mut visit: impl FnMut(&TreeMember, &mut dyn Read) -> Result<()>,
) -> Result<()> {
    if archive.has_duplicate_names() {
        return Err(duplicate_zip_name(display, bytes, archive));
    }
    let mut rules = Members::default();
    for index in 0..archive.len() {
        let mut f = archive
            .by_index(index)
            .bad_at(display, format_args!("member {index}"))?;
        let raw = f
            .name()
            .bad_at(display, format_args!("member {index}"))?
            .into_owned();
        let Some(path) = safe_member_path(display, &raw)? else {
            continue;
        };
        let kind = if f.is_dir() {
            MemberKind::Dir
        } else if f.is_symlink() {
            MemberKind::Symlink
        } else {
            MemberKind::File
        };
        rules.check(display, &path, kind, None)?;
        if kind != MemberKind::Dir && f.size() > MAX_MEMBER_BYTES {
            return Err(Error::bad(
                display,
                format!("member {path} claims {} bytes; refusing", f.size()),
            ));
        }
        let link = if kind == MemberKind::Symlink {
            Some(super::file::read_capped_text(
                &mut f,
                &format!("{display}:{path}"),
                4096,
                "symlink target",
            )?)
        } else {
            None
        };
        let size = if kind == MemberKind::File {
            f.size()
        } else {
            0
        };
        let member = TreeMember {
            path,
            kind,
            size,
            mode: f.unix_mode(),
            link,
            index,
        };
        visit(&member, &mut f)?;
    }
    Ok(())
}

/// The indexes of a `.conda`'s inner archives: (`pkg-*.tar.zst`, `info-*.tar.zst`).
pub(crate) fn conda_parts(display: &str, archive: &mut Zip<'_>) -> Result<(usize, usize)> {
    let (mut pkg, mut info) = (None, None);
    for i in 0..archive.len() {
        let f = archive.by_index_raw(i).bad_in(display)?;
        let name = f.name().bad_in(display)?;
        if name.starts_with("pkg-") && name.ends_with(".tar.zst") {
            pkg = Some(i);
        } else if name.starts_with("info-") && name.ends_with(".tar.zst") {
            info = Some(i);
        }
    }
    match (pkg, info) {
        (Some(pkg), Some(info)) => Ok((pkg, info)),
        _ => Err(Error::bad(
            display,
            "a .conda must hold pkg-*.tar.zst and info-*.tar.zst",
        )),
    }
}

/// One inner archive of a `.conda` (an index from [`conda_parts`]) as a tar stream; `what` names
/// it in errors (`pkg archive`, `info archive`).
pub(crate) fn conda_tar<'a>(
    display: &str,
    archive: &'a mut Zip<'_>,
    index: usize,
    what: &str,
) -> Result<impl Read + 'a> {
    let f = archive.by_index(index).bad_in(display)?;
    zstd::stream::read::Decoder::new(f).bad_at(display, what)
}

/// A `.tar.bz2` as a tar stream (multi-stream bzip2, as conda writes it).
pub(crate) fn tar_bz2(path: &Path) -> Result<impl Read> {
    let file = super::file::open_regular(path, super::file::Links::Follow)?;
    Ok(bzip2::read::MultiBzDecoder::new(std::io::BufReader::new(
        file,
    )))
}

/// A directory's members in walk order (sorted by name within each directory): directories,
/// symlinks and regular files; of a file with several names, the shortest name (then the first
/// in byte order) is the file and the others are hard links to it, so results do not depend on
/// directory order. Sockets, fifos and devices are not package content and are left out.
pub(crate) fn walk_dir(root: &Path) -> Result<Vec<TreeMember>> {
    use std::os::unix::fs::MetadataExt;
    let mut members: Vec<TreeMember> = Vec::new();
    // (dev, inode) → indexes of the names of a file with several.
    let mut linked: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for item in walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
    {
        let item = item.map_err(|e| {
            let p = e
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| root.display().to_string());
            Error::bad_in(p, e)
        })?;
        let path = match item.path().strip_prefix(root) {
            Ok(r) if r.as_os_str().is_empty() => continue,
            Ok(r) => r.to_string_lossy().replace('\\', "/"),
            Err(_) => continue,
        };
        let index = members.len();
        let ft = item.file_type();
        let member = if ft.is_symlink() {
            let target = std::fs::read_link(item.path()).at(item.path())?;
            TreeMember {
                path,
                kind: MemberKind::Symlink,
                size: 0,
                mode: None,
                link: Some(target.to_string_lossy().into_owned()),
                index,
            }
        } else if ft.is_dir() {
            TreeMember {
                path,
                kind: MemberKind::Dir,
                size: 0,
                mode: None,
                link: None,
                index,
            }
        } else if ft.is_file() {
            let meta = item.metadata().bad_in(item.path().display())?;
            if meta.nlink() > 1 {
                linked
                    .entry((meta.dev(), meta.ino()))
                    .or_default()
                    .push(index);
            }
            TreeMember {
                path,
                kind: MemberKind::File,
                size: meta.len(),
                mode: Some(meta.mode()),
                link: None,
                index,
            }
        } else {
            continue;
        };
        members.push(member);
    }
    for (_, mut names) in linked {
        names.sort_by(|&a, &b| {
            (members[a].path.len(), &members[a].path)
                .cmp(&(members[b].path.len(), &members[b].path))
        });
        let first = members[names[0]].path.clone();
        for &i in &names[1..] {
            members[i].kind = MemberKind::Hardlink;
            members[i].link = Some(first.clone());
        }
    }
    Ok(members)
}

/// Open a file for reading, refusing a symlink in its last component (`O_NOFOLLOW`) and anything
/// but a regular file: a directory member is read by its name, and a name swapped for a link or
/// a FIFO since the walk is neither followed nor blocks (the one opener, `input::file`).
pub(crate) use super::file::open_nofollow;

/// Normalise an archive member name, rejecting anything that could point outside the tree.
fn safe_member_path(archive: &str, raw: &str) -> Result<Option<String>> {
    if raw.contains('\0') {
        return Err(Error::bad(
            archive,
            format!("member name with a NUL byte: {raw:?}"),
        ));
    }
    let trimmed = raw.trim_start_matches("./");
    if trimmed.starts_with('/') {
        return Err(Error::bad(
            archive,
            format!("member with an absolute path: {raw}"),
        ));
    }
    let mut parts = Vec::new();
    for p in trimmed.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                return Err(Error::bad(
                    archive,
                    format!("member path climbs out of the archive: {raw}"),
                ));
            }
            _ => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let path = parts.join("/");
    // A backslash or a drive letter is a separator or a root to a Windows installer
    // (`torch\..\..\evil.py`, `C:\Windows\evil.py`): the one rule for input paths refuses them.
    crate::confine::check_relative(&path)
        .bad_at(format_args!("{archive}:{raw}"), "member name refused")?;
    Ok(Some(path))
}

/// What a member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberKind {
    Dir,
    File,
    Symlink,
    /// A tar hard link, with the (normalised) member it names.
    Hardlink,
}

/// The member rules every archive walk applies, in archive order (docs/security.md):
///
/// - a name (after normalising `./` and `//`) appears once; only a directory may be listed again;
/// - no member lies under a symlink or a file member, and no symlink or file takes the name of a
///   directory that earlier members implied;
/// - a hard link names an earlier regular file (or hard link) member: never a symlink, a later
///   member or anything outside the archive.
#[derive(Default)]
struct Members {
    kinds: HashMap<String, MemberKind>,
    /// Every proper prefix of a member seen so far.
    dirs: HashSet<String>,
}

impl Members {
    fn check(
        &mut self,
        archive: &str,
        rel: &str,
        kind: MemberKind,
        link_target: Option<&str>,
    ) -> Result<()> {
        let name = || format!("{archive}:{rel}");
        for (i, _) in rel.match_indices('/') {
            let parent = &rel[..i];
            match self.kinds.get(parent) {
                Some(MemberKind::Symlink) => {
                    return Err(Error::bad(
                        name(),
                        format!(
                            "its parent {parent} is a symlink in the archive; refusing (extracting it would write through the link)"
                        ),
                    ));
                }
                Some(MemberKind::File | MemberKind::Hardlink) => {
                    return Err(Error::bad(
                        name(),
                        format!("its parent {parent} is a file in the archive; refusing"),
                    ));
                }
                Some(MemberKind::Dir) | None => {}
            }
        }
        if let Some(&prev) = self.kinds.get(rel)
            && !(prev == MemberKind::Dir && kind == MemberKind::Dir)
        {
            return Err(Error::bad(
                name(),
                "the archive holds this name twice; refusing (which one wins would depend on the extractor)",
            ));
        }
        if kind != MemberKind::Dir && self.dirs.contains(rel) {
            return Err(Error::bad(
                name(),
                "is also a directory in the archive (earlier members lie under it); refusing",
            ));
        }
        if kind == MemberKind::Hardlink {
            let target = link_target.unwrap_or_default();
            match self.kinds.get(target) {
                Some(MemberKind::File | MemberKind::Hardlink) => {}
                Some(MemberKind::Symlink) => {
                    return Err(Error::bad(
                        name(),
                        format!(
                            "hard link to {target}, which is a symlink in the archive; refusing"
                        ),
                    ));
                }
                _ => {
                    return Err(Error::bad(
                        name(),
                        format!(
                            "hard link to {target}, which is not an earlier regular file member; refusing"
                        ),
                    ));
                }
            }
        }
        self.kinds.insert(rel.to_string(), kind);
        for (i, _) in rel.match_indices('/').collect::<Vec<_>>().into_iter().rev() {
            if !self.dirs.insert(rel[..i].to_string()) {
                break;
            }
        }
        Ok(())
    }
}

/// A zip central directory that lists a name twice (the zip reader keeps one): the first such name.
fn zip_duplicate_name(bytes: &[u8], cd_start: u64, entries: usize) -> Option<String> {
    let mut seen = HashSet::new();
    let mut at = usize::try_from(cd_start).ok()?;
    for _ in 0..entries {
        let h = bytes.get(at..at.checked_add(46)?)?;
        if h[..4] != [0x50, 0x4b, 0x01, 0x02] {
            return None;
        }
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]) as usize;
        let (n, x, c) = (u16_at(28), u16_at(30), u16_at(32));
        let raw = bytes.get(at + 46..at + 46 + n)?;
        let name = String::from_utf8_lossy(raw).into_owned();
        if !seen.insert(name.clone()) {
            return Some(name);
        }
        at += 46 + n + x + c;
    }
    None
}

/// The zip reader keeps one entry per name; say which name the central directory lists twice.
fn duplicate_zip_name(display: &str, bytes: &[u8], archive: &Zip<'_>) -> Error {
    let raw_count = archive.len() + 1;
    // The raw count is not exposed; scan up to the end of the central directory.
    match zip_duplicate_name(
        bytes,
        archive.central_directory_start(),
        raw_count.max(1 << 20),
    ) {
        Some(name) => Error::bad(
            format!("{display}:{name}"),
            "the archive holds this name twice; refusing (which one wins would depend on the extractor)",
        ),
        None => Error::bad(
            display,
            "the zip central directory lists a name twice; refusing",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_are_confined() {
        assert_eq!(
            safe_member_path("a", "./lib/x.so").unwrap(),
            Some("lib/x.so".into())
        );
        assert!(safe_member_path("a", "../etc/passwd").is_err());
        assert!(safe_member_path("a", "/etc/passwd").is_err());
        assert!(safe_member_path("a", "lib/../../x").is_err());
    }
}
