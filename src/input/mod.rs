//! Input trees: one view over a directory, a `.whl`, a `.conda` or a `.tar.bz2`.
//!
//! Archives are read in place: nothing is extracted to disk, and every ELF member is decompressed
//! once and handed to the caller's visitor while it is in memory. Directories are memory-mapped.
//! Only files that start with the ELF magic are visited; a file *named* like a shared library that
//! is neither ELF nor a linker script is rejected, because in practice it is a Git LFS pointer, an
//! HTML error page or a truncated download sitting where a library should be.
//!
//! Symlinks and hard links are recorded, and [`Tree::resolve`] follows symlinks the way the kernel
//! would, except that a link never leaves the tree: an absolute target or one that climbs above the
//! root resolves to [`Resolve::Escapes`] and is not followed.

use crate::error::Context;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::Progress;

mod display;
pub mod file;
pub mod pip;
pub mod unpack;
mod walk;

pub use display::display_member;
// `TreeMember` by name is pack's (the `channel` feature); plan's readers only see members through
// the walk functions.
#[cfg(feature = "channel")]
pub(crate) use walk::TreeMember;
pub(crate) use walk::{
    MemberKind, Metadata, conda_parts, conda_tar, open_nofollow, open_zip, tar_bz2, walk_dir,
    walk_tar, walk_zip,
};

/// Symlink hops before a lookup is declared a loop (the kernel's own limit is 40).
const MAX_SYMLINK_HOPS: usize = 40;
/// An ELF member is inflated into memory to be parsed: refuse one larger than this (docs/security.md).
/// The largest real one seen is torch 1.10.0's `libtorch_cuda.so`, 1.22 GB (torch 2.11: 456 MB).
pub const MAX_ELF_MEMBER_BYTES: u64 = 4 << 30;
/// Inflated ELF bytes held in memory at once, over all threads: a member waits until its bytes fit
/// (one larger than the budget waits until it is alone). Peak memory for archives is therefore about
/// max(budget, largest ELF member) plus the process's baseline, whatever the archive's ratio.
pub const INFLATE_BUDGET_BYTES: u64 = 2 << 30;

/// What the input is: `directory`, `wheel` (`.whl`), `conda` (`.conda`) or `tar-bz2` (a conda
/// `.tar.bz2` package).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TreeKind {
    /// A directory on disk (an unpacked package, an installed environment).
    Directory,
    /// A wheel (`.whl`, a zip).
    Wheel,
    /// A `.conda` package (a zip of zstd tarballs).
    Conda,
    /// A conda `.tar.bz2` package.
    TarBz2,
}

impl TreeKind {
    /// What kind of input `path` is: a directory, or an archive by its file extension; any other
    /// file is refused.
    pub fn detect(path: &Path) -> Result<TreeKind> {
        let meta = std::fs::metadata(path).at(path)?;
        if meta.is_dir() {
            return Ok(TreeKind::Directory);
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        if name.ends_with(".whl") {
            Ok(TreeKind::Wheel)
        } else if name.ends_with(".conda") {
            Ok(TreeKind::Conda)
        } else if name.ends_with(".tar.bz2") {
            Ok(TreeKind::TarBz2)
        } else {
            Err(Error::bad(
                path.display(),
                "not a directory, .whl, .conda or .tar.bz2 (the kind is taken from the name)",
            ))
        }
    }
}

/// What a tree entry is; the `type` tag says which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Whether it starts with the ELF magic.
        elf: bool,
        /// Set when this entry is a hard link to another entry (index into `Tree::entries`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hardlink_of: Option<usize>,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, as stored.
        target: String,
    },
    /// A directory.
    Dir,
}

/// One entry of an input tree: its relative path and what it is.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Entry")]
pub struct TreeEntry {
    /// Relative to the tree root, `/`-separated, never starting with `/` or containing `..`.
    pub path: String,
    /// A file, a symlink or a directory.
    #[serde(flatten)]
    pub kind: EntryKind,
}

/// Package identity found inside the input (conda `info/index.json`, wheel `METADATA`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct PackageMeta {
    /// The package's name: `name` in a conda package's `info/index.json`, or `Name` in a wheel's
    /// METADATA (in a pip environment, the distribution that alone owns the lazy library, else the
    /// one with the largest RECORD).
    pub name: String,
    /// Its version, from the same file.
    pub version: String,
    /// The conda build string (`build` in `info/index.json`); absent for wheels and directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The conda platform subdirectory (`subdir` in `info/index.json`, e.g. `linux-64`); absent for
    /// wheels and directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
}

impl PackageMeta {
    /// A Python distribution's name and version (no conda build or subdir).
    pub fn named(name: &str, version: &str) -> PackageMeta {
        PackageMeta {
            name: name.to_string(),
            version: version.to_string(),
            build: None,
            subdir: None,
        }
    }
}

/// An input read as a list of entries, however it was stored (directory or archive), and what is
/// needed to read a member's bytes.
#[derive(Debug)]
pub struct Tree {
    /// The path the tree was read from (directory or archive).
    pub source: PathBuf,
    /// What kind of input it was.
    pub kind: TreeKind,
    /// Sorted by path.
    pub entries: Vec<TreeEntry>,
    index: HashMap<String, usize>,
    /// The package's own metadata (dist-info or `info/index.json`), when it has one.
    pub package: Option<PackageMeta>,
    /// Things skipped on purpose (linker scripts), worth telling the user.
    pub notes: Vec<String>,
    /// Where the archive was unpacked while it was read, when asked ([`Tree::open_unpacking`]).
    pub unpacked: Option<unpack::Unpacked>,
}

/// Where a path lookup inside the tree ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolve {
    /// A regular file: its index in [`Tree::entries`].
    File(usize),
    /// A directory (or a path only implied by its children).
    Dir,
    /// Nothing at that path.
    Missing,
    /// A symlink on the way points outside the tree; it was not followed.
    Escapes {
        /// The symlink that leaves the tree.
        link: String,
        /// Where it points.
        target: String,
    },
    /// Symlinks that lead back into themselves (more hops than any real tree needs).
    Loop,
}

/// An ELF member as the visitor sees it.
pub struct ElfInput<'a> {
    /// The member's path inside the tree.
    pub path: &'a str,
    /// The member's bytes (inflated, or mapped for a directory).
    pub bytes: &'a [u8],
    /// The file's memory map, for directories: symbol tables stay borrowed from it. (Populating
    /// the ranges the reader touches with `MADV_POPULATE_READ` measured 5 % slower than faulting
    /// them in: the kernel maps 16 pages around each fault already.)
    pub map: Option<&'a Arc<Mmap>>,
    /// The open file behind `map`: scattered small reads (`.nv_fatbin` headers) use `pread`.
    pub file: Option<&'a File>,
}

impl Tree {
    /// Read the tree at `path` and call `visit` once for every ELF file in it, in parallel.
    /// Results come back keyed by entry index. The first visitor error aborts the walk.
    pub fn open<T, F>(path: &Path, progress: &Progress, visit: F) -> Result<(Tree, Vec<(usize, T)>)>
    where
        T: Send,
        F: Fn(ElfInput<'_>) -> Result<T> + Sync,
    {
        Tree::open_unpacking(path, None, progress, visit)
    }

    /// [`Tree::open`], and with `unpack`, a wheel's members are unpacked into `unpack.dir` while it is
    /// read and its ELF members read from there ([`unpack`]; other kinds ignore it).
    pub fn open_unpacking<T, F>(
        path: &Path,
        unpack: Option<&unpack::Unpack>,
        progress: &Progress,
        visit: F,
    ) -> Result<(Tree, Vec<(usize, T)>)>
    where
        T: Send,
        F: Fn(ElfInput<'_>) -> Result<T> + Sync,
    {
        let kind = TreeKind::detect(path)?;
        let mut builder = TreeBuilder::new(path, kind);
        let results = match (kind, unpack) {
            (TreeKind::Directory, _) => read_directory(path, &mut builder, progress, &visit)?,
            (TreeKind::Wheel, None) => read_wheel(path, &mut builder, progress, &visit)?,
            (TreeKind::Wheel, Some(u)) => {
                read_wheel_unpacking(path, u, &mut builder, progress, &visit)?
            }
            (TreeKind::Conda, _) => read_conda(path, &mut builder, progress, &visit)?,
            (TreeKind::TarBz2, _) => read_tar(
                &path.display().to_string(),
                tar_bz2(path)?,
                &mut builder,
                progress,
                &visit,
                true,
            )?,
        };
        builder.finish(results)
    }

    /// The entry at `path` (a tree path, no leading `/`), without following links.
    pub fn get(&self, path: &str) -> Option<&TreeEntry> {
        self.index.get(path).map(|&i| &self.entries[i])
    }

    /// The index in [`Tree::entries`] of the entry at `path`.
    pub fn index_of(&self, path: &str) -> Option<usize> {
        self.index.get(path).copied()
    }

    /// Follow `path` through symlinks (and hard links to their first name) without leaving the tree.
    pub fn resolve(&self, path: &str) -> Resolve {
        let mut pending: Vec<String> = split_rev(path);
        let mut cur: Vec<String> = Vec::new();
        let mut hops = 0usize;
        while let Some(part) = pending.pop() {
            match part.as_str() {
                "" | "." => continue,
                ".." => {
                    if cur.pop().is_none() {
                        return Resolve::Escapes {
                            link: path.to_string(),
                            target: path.to_string(),
                        };
                    }
                    continue;
                }
                _ => {}
            }
            cur.push(part);
            let joined = cur.join("/");
            let Some(&idx) = self.index.get(&joined) else {
                return Resolve::Missing;
            };
            match &self.entries[idx].kind {
                EntryKind::Dir => {
                    if pending.is_empty() {
                        return Resolve::Dir;
                    }
                }
                EntryKind::File { hardlink_of, .. } => {
                    if !pending.is_empty() {
                        return Resolve::Missing;
                    }
                    return Resolve::File(hardlink_of.unwrap_or(idx));
                }
                EntryKind::Symlink { target } => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Resolve::Loop;
                    }
                    if target.starts_with('/') {
                        return Resolve::Escapes {
                            link: joined,
                            target: target.clone(),
                        };
                    }
                    cur.pop();
                    // Depth check: a relative target may not climb above the root.
                    if climbs_above_root(cur.len(), target) {
                        return Resolve::Escapes {
                            link: joined,
                            target: target.clone(),
                        };
                    }
                    pending.extend(split_rev(target));
                }
            }
        }
        Resolve::Dir
    }

    /// Symlinks whose target leaves the tree: absolute, or climbing above the root from the
    /// link's directory (read lexically; other links on the way are not followed). `plan` warns
    /// about them and `pack` refuses them unless told otherwise (docs/security.md).
    pub fn outside_symlinks(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().filter_map(|e| match &e.kind {
            EntryKind::Symlink { target } if symlink_leaves(&e.path, target) => {
                Some((e.path.as_str(), target.as_str()))
            }
            _ => None,
        })
    }

    /// Total bytes of regular files, counting hard-linked data once.
    pub fn total_file_bytes(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| match e.kind {
                EntryKind::File {
                    size,
                    hardlink_of: None,
                    ..
                } => size,
                _ => 0,
            })
            .sum()
    }

    /// Directory part of a tree path (`""` for the root).
    pub fn parent(path: &str) -> &str {
        path.rfind('/').map(|i| &path[..i]).unwrap_or("")
    }

    /// Last component of a tree path (the whole path at the root).
    pub fn file_name(path: &str) -> &str {
        path.rfind('/').map(|i| &path[i + 1..]).unwrap_or(path)
    }
}

/// Does a symlink at `path` with `target` point outside the tree (absolute, or above the root)?
pub fn symlink_leaves(path: &str, target: &str) -> bool {
    if target.starts_with('/') {
        return true;
    }
    climbs_above_root(
        Tree::parent(path)
            .split('/')
            .filter(|p| !p.is_empty())
            .count(),
        target,
    )
}

/// Does relative `target`, followed from a directory `depth` levels below the root, step above it
/// at any point?
fn climbs_above_root(depth: usize, target: &str) -> bool {
    let mut depth = depth as isize;
    for p in target.split('/') {
        match p {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

fn split_rev(path: &str) -> Vec<String> {
    path.split('/').rev().map(str::to_string).collect()
}

/// Refuse an ELF member above [`MAX_ELF_MEMBER_BYTES`]: checked on the size the archive claims,
/// before anything is inflated (a member that inflates past its claim is an error of its own).
fn check_elf_size(name: &str, size: u64) -> Result<()> {
    if size > MAX_ELF_MEMBER_BYTES {
        return Err(Error::bad(
            name,
            format!(
                "ELF member of {size} bytes (inflated) is above the {} GiB cap for one library; refusing (docs/security.md)",
                MAX_ELF_MEMBER_BYTES >> 30
            ),
        ));
    }
    Ok(())
}

/// A buffer for `size` inflated bytes, or a clean error when memory cannot be had.
fn inflate_buffer(name: &str, size: u64) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    data.try_reserve_exact(size as usize)
        .map_err(|_| Error::bad(name, format!("cannot allocate {size} bytes to inflate it")))?;
    Ok(data)
}

/// Bytes of inflated ELF members in memory, bounded by [`INFLATE_BUDGET_BYTES`].
struct Budget {
    used: Mutex<u64>,
    freed: std::sync::Condvar,
}

struct Held<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Budget {
    fn new() -> Self {
        Budget {
            used: Mutex::new(0),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Wait until `bytes` fit (or nothing else is held). `cooperative`: the caller may be a pool
    /// thread whose pending jobs are what will free the budget, so it runs them while it waits.
    fn take(&self, bytes: u64, cooperative: bool) -> Held<'_> {
        let bytes = bytes.min(INFLATE_BUDGET_BYTES);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used != 0 && *used + bytes > INFLATE_BUDGET_BYTES {
            if cooperative {
                drop(used);
                if !matches!(rayon::yield_now(), Some(rayon::Yield::Executed)) {
                    let g = self.used.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = self
                        .freed
                        .wait_timeout(g, std::time::Duration::from_millis(2));
                }
                used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            } else {
                used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
            }
        }
        *used += bytes;
        Held {
            budget: self,
            bytes,
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

/// Map a whole file read-only. Every reader of the crate goes through bounds-checked accesses on
/// the map, so a file changed underneath gives wrong answers or errors, never a bad memory access
/// beyond the mapping (the kernel keeps a truncated file's pages readable as zeros or SIGBUS, the
/// usual caveat of mmap).
pub fn map_file(path: &Path) -> Result<Mmap> {
    Ok(open_mapped(path)?.1)
}

/// [`map_file`], and the open file it maps.
fn open_mapped(path: &Path) -> Result<(File, Mmap)> {
    let file = file::open_regular(path, file::Links::Follow)?;
    // SAFETY: read-only private map; see above.
    let map = unsafe { Mmap::map(&file) }.at(path)?;
    Ok((file, map))
}

/// Does this file name look like a shared library (`libfoo.so`, `libfoo.so.1.2`, `_C.cpython-311-x86_64-linux-gnu.so`)?
pub fn named_like_shared_library(name: &str) -> bool {
    let Some(pos) = name.find(".so") else {
        return false;
    };
    // Take the last ".so" that is followed only by version components.
    let mut start = pos;
    while let Some(next) = name[start + 3..].find(".so") {
        start = start + 3 + next;
    }
    let rest = &name[start + 3..];
    start > 0
        && (rest.is_empty()
            || rest
                .split('.')
                .skip(1)
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && rest.starts_with('.'))
}

/// What the first bytes of a non-ELF file named like a library say it is.
fn classify_non_elf(head: &[u8]) -> NonElf {
    let text = String::from_utf8_lossy(&head[..head.len().min(256)]);
    let t = text.trim_start();
    if t.starts_with("/* GNU ld script")
        || t.starts_with("INPUT")
        || t.starts_with("GROUP")
        || t.starts_with("OUTPUT_FORMAT")
    {
        NonElf::LinkerScript
    } else if t.starts_with("version https://git-lfs") {
        NonElf::Bad("a Git LFS pointer, not the library (fetch the LFS object)".into())
    } else if head.is_empty() {
        NonElf::Bad("empty file where a shared library is expected".into())
    } else if t.starts_with("<!DOCTYPE") || t.starts_with("<html") {
        NonElf::Bad("an HTML page, not a shared library (a failed download?)".into())
    } else {
        let shown: String = head
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ");
        NonElf::Bad(format!(
            "not an ELF file although named like a shared library (first bytes: {shown})"
        ))
    }
}

enum NonElf {
    LinkerScript,
    Bad(String),
}

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

struct TreeBuilder {
    source: PathBuf,
    kind: TreeKind,
    entries: BTreeMap<String, EntryKind>,
    package: Option<PackageMeta>,
    notes: Vec<String>,
    /// (link name, first name) pairs; turned into `hardlink_of` indices once the order is final.
    hardlinks: Vec<(String, String)>,
    unpacked: Option<unpack::Unpacked>,
}

impl TreeBuilder {
    fn new(source: &Path, kind: TreeKind) -> Self {
        TreeBuilder {
            source: source.to_path_buf(),
            kind,
            entries: BTreeMap::new(),
            package: None,
            notes: Vec::new(),
            hardlinks: Vec::new(),
            unpacked: None,
        }
    }

    fn add(&mut self, path: String, kind: EntryKind) {
        // Archives may list a path twice (later wins, as tar extraction would do).
        self.entries.insert(path, kind);
    }

    /// Check the start of a non-ELF file. Library-named files must be ELF or a linker script.
    fn check_non_elf(&mut self, display: &str, path: &str, head: &[u8]) -> Result<()> {
        if !named_like_shared_library(Tree::file_name(path)) {
            return Ok(());
        }
        match classify_non_elf(head) {
            NonElf::LinkerScript => {
                self.notes
                    .push(format!("{path}: linker script, not a library; skipped"));
                Ok(())
            }
            NonElf::Bad(reason) => Err(Error::bad(display, reason)),
        }
    }

    fn finish<T>(self, results: Vec<(String, T)>) -> Result<(Tree, Vec<(usize, T)>)> {
        let mut entries: BTreeMap<String, EntryKind> = self.entries;
        for (link, first) in &self.hardlinks {
            if let Some(kind) = entries.get(first).cloned() {
                entries.insert(link.clone(), kind);
            }
        }
        // Archives often omit directory entries; add them so path walks see real directories.
        // A parent already seen had its own parents added then: stop climbing there (torch 2.11's
        // wheel: 12,482 members under 639 directories; looking up every member's whole chain of
        // parents made `finish` take 9-12 ms).
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut dirs = Vec::new();
        for path in entries.keys() {
            let mut p = path.as_str();
            while let Some(i) = p.rfind('/') {
                p = &p[..i];
                if !seen.insert(p) {
                    break;
                }
                if !entries.contains_key(p) {
                    dirs.push(p.to_string());
                }
            }
        }
        drop(seen);
        for d in dirs {
            entries.insert(d, EntryKind::Dir);
        }
        let index: HashMap<String, usize> = entries
            .keys()
            .enumerate()
            .map(|(i, p)| (p.clone(), i))
            .collect();
        let mut out: Vec<TreeEntry> = entries
            .into_iter()
            .map(|(path, kind)| TreeEntry { path, kind })
            .collect();
        for (link, first) in &self.hardlinks {
            if let (Some(&l), Some(&f)) = (index.get(link), index.get(first))
                && let EntryKind::File { hardlink_of, .. } = &mut out[l].kind
            {
                *hardlink_of = Some(f);
            }
        }
        let mut notes = self.notes;
        let mut results_by_index = Vec::with_capacity(results.len());
        for (path, value) in results {
            let idx = index[&path];
            results_by_index.push((idx, value));
        }
        results_by_index.sort_by_key(|(i, _)| *i);
        let mut tree = Tree {
            source: self.source,
            kind: self.kind,
            entries: out,
            index,
            package: self.package,
            notes: Vec::new(),
            unpacked: self.unpacked,
        };
        // Symlinks that cannot be followed inside the tree: say so once, here.
        for e in &tree.entries {
            if let EntryKind::Symlink { target } = &e.kind {
                match tree.resolve(&e.path) {
                    Resolve::Escapes { .. } => notes.push(format!(
                        "{}: symlink to {target} leaves the tree; not followed",
                        e.path
                    )),
                    Resolve::Loop => notes.push(format!("{}: symlink loop", e.path)),
                    Resolve::Missing => {
                        notes.push(format!("{}: dangling symlink to {target}", e.path))
                    }
                    Resolve::File(_) | Resolve::Dir => {}
                }
            }
        }
        notes.sort();
        tree.notes = notes;
        Ok((tree, results_by_index))
    }
}

// --- directories -------------------------------------------------------------------------------

/// A regular file of a directory tree: (path relative to the root, full path, size).
type DirFile = (String, PathBuf, u64);
/// Per file: is it ELF, its first bytes, and the visitor's result when it is.
type Sniffed<T> = (bool, Vec<u8>, Option<T>);

fn read_directory<T, F>(
    root: &Path,
    b: &mut TreeBuilder,
    progress: &Progress,
    visit: &F,
) -> Result<Vec<(String, T)>>
where
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    let mut files: Vec<DirFile> = Vec::new();
    let mut hardlinks: Vec<(String, String)> = Vec::new();
    for m in walk_dir(root)? {
        match m.kind {
            MemberKind::Symlink => b.add(
                m.path,
                EntryKind::Symlink {
                    target: m.link.unwrap_or_default(),
                },
            ),
            MemberKind::Dir => b.add(m.path, EntryKind::Dir),
            MemberKind::File => {
                let full = root.join(&m.path);
                files.push((m.path, full, m.size));
            }
            MemberKind::Hardlink => hardlinks.push((m.path, m.link.unwrap_or_default())),
        }
    }
    // Largest first, one file per task: the two 450 MB libraries of a torch tree then start on
    // different cores instead of queueing behind each other. Results keep this order; the
    // builder sorts entries by path.
    files.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));

    // Sniff magic and parse in parallel; most of the time goes to the few big libraries.
    let total: u64 = files.iter().map(|f| f.2).sum();
    progress.start("reading", total);
    let sniffed: Vec<Result<Sniffed<T>>> = largest_first(&files, |(rel, full, size)| {
        let mut f = open_nofollow(full).at(full)?;
        let mut head = vec![0u8; 256.min(*size as usize)];
        f.read_exact(&mut head).at(full)?;
        if head.starts_with(ELF_MAGIC) {
            // SAFETY: the map is read-only and private to this call; a concurrent writer could
            // change bytes under us, which the ELF reader tolerates because every read is bounds-checked.
            let map = Arc::new(unsafe { Mmap::map(&f) }.at(full)?);
            let value = visit(ElfInput {
                path: rel,
                bytes: &map,
                map: Some(&map),
                file: Some(&f),
            })?;
            progress.inc(*size);
            Ok((true, Vec::new(), Some(value)))
        } else {
            progress.inc(*size);
            Ok((false, head, None))
        }
    });
    progress.finish();

    let mut results = Vec::new();
    for ((rel, _, size), r) in files.into_iter().zip(sniffed) {
        let (elf, head, value) = r?;
        if !elf {
            b.check_non_elf(&root.join(&rel).display().to_string(), &rel, &head)?;
        }
        b.add(
            rel.clone(),
            EntryKind::File {
                size,
                elf,
                hardlink_of: None,
            },
        );
        if let Some(v) = value {
            results.push((rel, v));
        }
    }
    b.package = read_directory_package(root)?;
    b.hardlinks.extend(hardlinks);
    Ok(results)
}

/// Run `f` on every item, on every thread of the pool, each thread taking the next item in order:
/// with items sorted by decreasing size this is largest-first list scheduling. (A parallel iterator
/// splits the index range in halves instead, which put torch's two largest libraries on the same
/// thread one after the other.) Results come back in item order.
fn largest_first<I: Sync, T: Send>(items: &[I], f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    rayon::broadcast(|_| {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            let value = f(item);
            *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item was taken")
        })
        .collect()
}

/// An unpacked wheel keeps `*.dist-info/METADATA`; read its name and version if it is there. A
/// pip environment (site-packages) has one per installed distribution: the tree is named after the
/// largest, the one whose RECORD lists the most files (a longer RECORD; torch's beside pip's), and
/// ties by name. `plan` then names it after the distribution that owns the lazy library, when one
/// does (see `pipeline::plan_tree`). A METADATA that is there but cannot be read (a FIFO,
/// `/dev/zero` behind a symlink, too large, a hostile Name) is an error naming it; a dist-info
/// without one names nothing.
fn read_directory_package(root: &Path) -> Result<Option<PackageMeta>> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Ok(None);
    };
    let mut best: Option<(u64, String, std::path::PathBuf)> = None;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".dist-info") {
            let record = std::fs::symlink_metadata(e.path().join("RECORD"))
                .map(|m| m.len())
                .unwrap_or(0);
            let better = best.as_ref().is_none_or(|(r, n, _)| {
                (record, std::cmp::Reverse(&name)) > (*r, std::cmp::Reverse(n))
            });
            if better {
                best = Some((record, name, e.path()));
            }
        }
    }
    let Some((_, _, dist_info)) = best else {
        return Ok(None);
    };
    let path = dist_info.join("METADATA");
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let text = file::read_text(
        &path,
        file::Links::Refuse,
        file::MAX_METADATA_BYTES,
        "METADATA",
    )?;
    parse_wheel_metadata(&text)
        .map(|m| checked_dist(m, &path.display().to_string()))
        .transpose()
}

/// A wheel's Name and Version as the PyPA specifications allow them: they reach file names,
/// headers and printed install commands.
fn checked_dist(meta: PackageMeta, at: &str) -> Result<PackageMeta> {
    crate::sanitize::check_dist_name(&meta.name).bad_at(at, "Name")?;
    crate::sanitize::check_version(&meta.version).bad_at(at, "Version")?;
    Ok(meta)
}

// --- wheels (zip) ------------------------------------------------------------------------------

/// A regular file member of a wheel, listed by [`list_wheel`].
struct ZipFile {
    index: usize,
    path: String,
    size: u64,
    elf: bool,
    exec: bool,
}

/// Walk the wheel's members into `b` (and its METADATA into `b.package`); returns its ELF members,
/// or with `all` every regular file member, biggest first (so the two cores finish together).
///
/// The walk reads no content. The first bytes of every member are read beside it, on all threads
/// ([`zip_heads`]): setting up each member's inflater (its first block's Huffman tables) is most
/// of a wheel's listing, 76–84 ms for torch 2.11's 12,482 members when one thread did it all. What
/// decides (the member rules, ELF or not, a library-named file that is neither ELF nor a linker
/// script, the METADATA) then runs in archive order, so the first error is the one a sequential
/// walk meets first.
fn list_wheel(
    display: &str,
    bytes: &[u8],
    archive: &mut walk::Zip<'_>,
    b: &mut TreeBuilder,
    all: bool,
) -> Result<Vec<ZipFile>> {
    let mut walker = archive.clone();
    let ((members, walked), mut heads) = rayon::join(
        || {
            let mut members = Vec::new();
            let walked = walk_zip(display, bytes, &mut walker, |m, _| {
                members.push(m.clone());
                Ok(())
            });
            (members, walked)
        },
        || zip_heads(archive, ELF_MAGIC.len() as u64),
    );
    let mut files = Vec::new();
    let mut metadata_text = None;
    for m in &members {
        let rel = &m.path;
        match m.kind {
            MemberKind::Dir => b.add(rel.clone(), EntryKind::Dir),
            MemberKind::Symlink => b.add(
                rel.clone(),
                EntryKind::Symlink {
                    target: m.link.clone().unwrap_or_default(),
                },
            ),
            MemberKind::Hardlink => {
                return Err(Error::internal(format!(
                    "{display}:{rel}: a zip member cannot be a hard link"
                )));
            }
            MemberKind::File => {
                let at = format!("{display}:{rel}");
                let head = std::mem::replace(&mut heads[m.index], Ok(Vec::new()))
                    .map_err(|e| e.into_error(display, m))?;
                let elf = head.starts_with(ELF_MAGIC);
                if elf {
                    check_elf_size(&at, m.size)?;
                } else {
                    if named_like_shared_library(Tree::file_name(rel)) {
                        let head = zip_head(display, archive, m, 256)?;
                        b.check_non_elf(&at, rel, &head)?;
                    }
                    if rel.ends_with(".dist-info/METADATA") && !rel[..rel.len() - 9].contains('/') {
                        // The first MiB, as text (empty when it is not UTF-8).
                        let text = zip_head(display, archive, m, 1 << 20)?;
                        metadata_text = Some((at, String::from_utf8(text).unwrap_or_default()));
                    }
                }
                if elf || all {
                    files.push(ZipFile {
                        index: m.index,
                        path: rel.clone(),
                        size: m.size,
                        elf,
                        exec: m.executable(),
                    });
                }
                b.add(
                    rel.clone(),
                    EntryKind::File {
                        size: m.size,
                        elf,
                        hardlink_of: None,
                    },
                );
            }
        }
    }
    walked?;
    b.package = match metadata_text {
        Some((at, text)) => parse_wheel_metadata(&text)
            .map(|m| checked_dist(m, &at))
            .transpose()?,
        None => None,
    };
    files.sort_by_key(|m| std::cmp::Reverse(m.size));
    Ok(files)
}

/// The first `len` bytes of every member but directories, by archive index, read on all threads
/// (each with its own handle on the archive).
fn zip_heads(archive: &walk::Zip<'_>, len: u64) -> Vec<std::result::Result<Vec<u8>, HeadError>> {
    use rayon::prelude::*;
    (0..archive.len())
        .into_par_iter()
        .map_init(|| archive.clone(), |a, i| read_head(a, i, len))
        .collect()
}

/// The first `len` bytes of member `index` (fewer when it is shorter; none for a directory).
fn read_head(
    archive: &mut walk::Zip<'_>,
    index: usize,
    len: u64,
) -> std::result::Result<Vec<u8>, HeadError> {
    let mut f = archive.by_index(index).map_err(HeadError::Open)?;
    let mut head = Vec::with_capacity(len.min(256) as usize);
    if !f.is_dir() {
        f.by_ref()
            .take(len)
            .read_to_end(&mut head)
            .map_err(HeadError::Read)?;
    }
    Ok(head)
}

/// Why a member's first bytes could not be read; [`HeadError::into_error`] names the member once
/// the walk has checked its name.
enum HeadError {
    Open(zip::result::ZipError),
    Read(std::io::Error),
}

impl HeadError {
    fn into_error(self, display: &str, m: &walk::TreeMember) -> Error {
        match self {
            HeadError::Open(e) => Error::bad_source(display, format!("member {}", m.index), e),
            HeadError::Read(e) => Error::bad_source(display, &m.path, e),
        }
    }
}

/// The first `len` bytes of a walked zip member, errors naming it.
fn zip_head(
    display: &str,
    archive: &mut walk::Zip<'_>,
    m: &walk::TreeMember,
    len: u64,
) -> Result<Vec<u8>> {
    read_head(archive, m.index, len).map_err(|e| e.into_error(display, m))
}

fn read_wheel<T, F>(
    path: &Path,
    b: &mut TreeBuilder,
    progress: &Progress,
    visit: &F,
) -> Result<Vec<(String, T)>>
where
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    let display = path.display().to_string();
    let map = map_file(path)?;
    let bytes: &[u8] = &map;
    let mut archive = open_zip(&display, bytes, "not a readable zip archive")?;
    let elf_members = list_wheel(&display, bytes, &mut archive, b, false)?;
    let total: u64 = elf_members.iter().map(|m| m.size).sum();
    progress.start("inflating", total);
    let budget = Budget::new();
    // Largest first on every thread: torch's two biggest libraries start at once, each on its own
    // core (a parallel iterator's halving had the biggest one wait for a run of smaller ones).
    let results: Vec<Result<(String, T)>> = largest_first(&elf_members, |m| {
        let mut archive = archive.clone();
        let name = format!("{display}:{}", m.path);
        let mut f = archive.by_index(m.index).bad_in(&name)?;
        let value = if f.compression() == zip::CompressionMethod::Stored && f.data_start().is_some()
        {
            // Stored members are already plain bytes in the map: no copy.
            let start = f.data_start().unwrap() as usize;
            let end = start
                .checked_add(m.size as usize)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(|| {
                    Error::bad(&name, "stored member runs past the end of the archive")
                })?;
            visit(ElfInput {
                path: &m.path,
                bytes: &bytes[start..end],
                map: None,
                file: None,
            })?
        } else {
            let _held = budget.take(m.size, false);
            let mut data = inflate_buffer(&name, m.size)?;
            (&mut f)
                .take(m.size + 1)
                .read_to_end(&mut data)
                .bad_at(&name, "cannot inflate")?;
            if data.len() as u64 != m.size {
                return Err(Error::bad(
                    &name,
                    format!(
                        "member inflates to {} bytes, header says {}",
                        data.len(),
                        m.size
                    ),
                ));
            }
            visit(ElfInput {
                path: &m.path,
                bytes: &data,
                map: None,
                file: None,
            })?
        };
        progress.inc(m.size);
        Ok((m.path.clone(), value))
    });
    progress.finish();
    results.into_iter().collect()
}

/// [`read_wheel`] that unpacks every ELF member into `unpack.dir` first ([`unpack`]): each is then
/// visited through a map of its unpacked file, as a directory's files are, so no inflated library
/// is held in memory. The other regular members are hashed and stay in the archive
/// ([`unpack::InArchive`]). The disk budget is charged for every member, in archive order, before
/// anything is written: the member that crosses it is refused, and nothing is unpacked.
fn read_wheel_unpacking<T, F>(
    path: &Path,
    u: &unpack::Unpack,
    b: &mut TreeBuilder,
    progress: &Progress,
    visit: &F,
) -> Result<Vec<(String, T)>>
where
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    let display = path.display().to_string();
    let (file, map) = open_mapped(path)?;
    let bytes: &[u8] = &map;
    let mut archive = open_zip(&display, bytes, "not a readable zip archive")?;
    let members = list_wheel(&display, bytes, &mut archive, b, true)?;
    let disk = unpack::DiskBudget::new(path, u.budget.clone());
    // Every member is charged, written to a file or not: what the budget bounds is what unpacking
    // the archive produces, and a member left in it is inflated into the package all the same.
    let mut by_index: Vec<&ZipFile> = members.iter().collect();
    by_index.sort_by_key(|m| m.index);
    for m in by_index {
        disk.charge(&m.path, m.size)?;
    }
    std::fs::create_dir(&u.dir).at(&u.dir)?;
    unpack::directories(
        &u.dir,
        members.iter().filter(|m| m.elf).map(|m| m.path.as_str()),
    )?;
    progress.start("unpacking", members.iter().map(|m| m.size).sum());
    // The same archive once more, read with positioned reads for the member data (see
    // `PositionedFile`); the walk above checked it through the map.
    let reader = unpack::PositionedFile::new(file).at(path)?;
    let data = zip::ZipArchive::new(reader).bad_at(&display, "not a readable zip archive")?;
    type Visited<T> = Result<(String, (u64, unpack::Sha256Hash), Option<T>)>;
    let results: Vec<Visited<T>> = largest_first(&members, |m| {
        let mut archive = data.clone();
        let name = format!("{display}:{}", m.path);
        let f = archive.by_index(m.index).bad_in(&name)?;
        if !m.elf {
            return Ok((
                m.path.clone(),
                unpack::hash_member(&name, m.size, f, progress)?,
                None,
            ));
        }
        let (dst, digest) = unpack::member(&u.dir, &name, &m.path, m.size, m.exec, f, progress)?;
        let f = open_nofollow(&dst).at(&dst)?;
        // SAFETY: a read-only map of a file this process just wrote in its own work directory.
        let map = Arc::new(unsafe { Mmap::map(&f) }.at(&dst)?);
        let value = visit(ElfInput {
            path: &m.path,
            bytes: &map,
            map: Some(&map),
            file: Some(&f),
        })?;
        Ok((m.path.clone(), digest, Some(value)))
    });
    progress.finish();
    let by_path: HashMap<&str, &ZipFile> = members.iter().map(|m| (m.path.as_str(), m)).collect();
    let mut files = HashMap::new();
    let mut in_archive = HashMap::new();
    let mut out = Vec::new();
    for r in results {
        let (path, (size, sha256), value) = r?;
        match value {
            Some(v) => {
                out.push((path.clone(), v));
                files.insert(path, (size, sha256));
            }
            None => {
                let m = by_path[path.as_str()];
                in_archive.insert(
                    path,
                    unpack::InArchive {
                        index: m.index,
                        size,
                        sha256,
                        exec: m.exec,
                    },
                );
            }
        }
    }
    b.unpacked = Some(unpack::Unpacked {
        dir: u.dir.clone(),
        files,
        in_archive,
        archive: data,
    });
    Ok(out)
}

fn parse_wheel_metadata(text: &str) -> Option<PackageMeta> {
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Name: ") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("Version: ") {
            version = Some(v.trim().to_string());
        }
    }
    Some(PackageMeta {
        name: name?,
        version: version?,
        build: None,
        subdir: None,
    })
}

// --- conda packages ----------------------------------------------------------------------------

fn read_conda<T, F>(
    path: &Path,
    b: &mut TreeBuilder,
    progress: &Progress,
    visit: &F,
) -> Result<Vec<(String, T)>>
where
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    let display = path.display().to_string();
    let map = map_file(path)?;
    let bytes: &[u8] = &map;
    let mut archive = open_zip(&display, bytes, "not a .conda archive (zip)")?;
    let (pkg, info) = conda_parts(&display, &mut archive)?;
    // Metadata first: it is tiny, and the package identity is useful to report.
    {
        let mut tar = tar::Archive::new(conda_tar(&display, &mut archive, info, "info archive")?);
        let entries = tar.entries().bad_at(&display, "info archive")?;
        for entry in entries {
            let mut entry = entry.bad_at(&display, "info archive")?;
            let p = entry
                .path()
                .bad_in(&display)?
                .to_string_lossy()
                .into_owned();
            if p == "info/index.json" {
                b.package = Some(read_index_json(&display, &mut entry)?);
            }
        }
    }
    read_tar(
        &display,
        conda_tar(&display, &mut archive, pkg, "pkg archive")?,
        b,
        progress,
        visit,
        false,
    )
}

/// The package identity in `info/index.json` (its first MiB).
fn read_index_json(display: &str, r: &mut dyn Read) -> Result<PackageMeta> {
    let text = file::read_capped_text(
        r,
        &format!("{display}:info/index.json"),
        1 << 20,
        "info/index.json",
    )?;
    parse_index_json(display, &text)
}

fn parse_index_json(display: &str, text: &str) -> Result<PackageMeta> {
    let v: serde_json::Value = serde_json::from_str(text).bad_at(display, "info/index.json")?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let meta = PackageMeta {
        name: s("name").ok_or_else(|| Error::bad(display, "info/index.json has no name"))?,
        version: s("version")
            .ok_or_else(|| Error::bad(display, "info/index.json has no version"))?,
        build: s("build"),
        subdir: s("subdir"),
    };
    // Conda's own rules (names `[a-z0-9._-]`, versions and builds without spaces or shell
    // characters), checked as loosely as conda reads them: these reach plans, recipes and text.
    let conda_word = |v: &str| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+!*".contains(c))
    };
    for (key, value) in [
        ("name", Some(&meta.name)),
        ("version", Some(&meta.version)),
        ("build", meta.build.as_ref()),
        ("subdir", meta.subdir.as_ref()),
    ] {
        if let Some(v) = value.filter(|v| !conda_word(v)) {
            return Err(Error::bad(
                format!("{display}:info/index.json"),
                format!(
                    "{key} {} holds characters conda does not allow",
                    crate::sanitize::quoted(v)
                ),
            ));
        }
    }
    Ok(meta)
}

/// Stream a tar archive: decompression is sequential, ELF parsing runs on the pool meanwhile.
fn read_tar<R, T, F>(
    display: &str,
    reader: R,
    b: &mut TreeBuilder,
    progress: &Progress,
    visit: &F,
    has_info: bool,
) -> Result<Vec<(String, T)>>
where
    R: Read,
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    let pool = ElfPool {
        display,
        visit,
        progress,
        budget: Budget::new(),
        results: Mutex::new(Vec::new()),
    };
    let mut hardlinks = Vec::new();
    let mut package = None;
    progress.start_unknown("decompressing");
    let outcome: Result<()> = rayon::in_place_scope(|scope| {
        let mut index_json = |path: &str, r: &mut dyn Read| -> Result<()> {
            if path == "info/index.json" {
                package = Some(read_index_json(display, r)?);
            }
            Ok(())
        };
        let metadata: Metadata<'_> = if has_info {
            Some(&mut index_json)
        } else {
            None
        };
        walk_tar(display, reader, metadata, |m, r| {
            let rel = &m.path;
            match m.kind {
                MemberKind::Dir => b.add(rel.clone(), EntryKind::Dir),
                MemberKind::Symlink => b.add(
                    rel.clone(),
                    EntryKind::Symlink {
                        target: m.link.clone().unwrap_or_default(),
                    },
                ),
                MemberKind::Hardlink => {
                    hardlinks.push((rel.clone(), m.link.clone().unwrap_or_default()))
                }
                MemberKind::File => {
                    let size = m.size;
                    let mut head = Vec::with_capacity(256);
                    (&mut *r)
                        .take(256)
                        .read_to_end(&mut head)
                        .bad_at(display, rel)?;
                    let elf = head.starts_with(ELF_MAGIC);
                    if elf {
                        pool.spawn(scope, rel, size, head, r)?;
                    } else {
                        b.check_non_elf(&format!("{display}:{rel}"), rel, &head)?;
                    }
                    b.add(
                        rel.clone(),
                        EntryKind::File {
                            size,
                            elf,
                            hardlink_of: None,
                        },
                    );
                }
            }
            Ok(())
        })
    });
    progress.finish();
    outcome?;
    if package.is_some() {
        b.package = package;
    }
    tar_hardlinks(display, b, hardlinks)?;
    let mut out = Vec::new();
    for r in pool.results.into_inner().unwrap() {
        out.push(r?);
    }
    Ok(out)
}

/// The ELF members of a streamed archive, visited on the pool while the walk reads on: the
/// inflate budget they hold, the visitor, and where their results go.
struct ElfPool<'a, T, F> {
    display: &'a str,
    visit: &'a F,
    progress: &'a Progress,
    budget: Budget,
    results: Mutex<Vec<Result<(String, T)>>>,
}

impl<'a, T, F> ElfPool<'a, T, F>
where
    T: Send,
    F: Fn(ElfInput<'_>) -> Result<T> + Sync,
{
    /// Read the rest of the ELF member `rel` (`head` is its start) and visit it on the pool.
    fn spawn<'s>(
        &'s self,
        scope: &rayon::Scope<'s>,
        rel: &str,
        size: u64,
        head: Vec<u8>,
        r: &mut dyn Read,
    ) -> Result<()>
    where
        'a: 's,
    {
        let display = self.display;
        let name = format!("{display}:{rel}");
        check_elf_size(&name, size)?;
        // Held until the visitor is done with the bytes; the walk waits here while the members in
        // flight use up the budget.
        let held = self.budget.take(size, true);
        let mut data = inflate_buffer(&name, size)?;
        data.extend_from_slice(&head);
        r.read_to_end(&mut data)
            .bad_at(display, format_args!("{rel}: truncated"))?;
        if data.len() as u64 != size {
            return Err(Error::bad(display, format!("{rel}: member is truncated")));
        }
        let path = rel.to_string();
        scope.spawn(move |_| {
            let r = (self.visit)(ElfInput {
                path: &path,
                bytes: &data,
                map: None,
                file: None,
            })
            .map(|v| (path.clone(), v));
            self.progress.inc(data.len() as u64);
            drop(data);
            drop(held);
            self.results.lock().unwrap().push(r);
        });
        Ok(())
    }
}

/// Tar hard links name an earlier member; alias them to it.
fn tar_hardlinks(
    display: &str,
    b: &mut TreeBuilder,
    hardlinks: Vec<(String, String)>,
) -> Result<()> {
    for (link, target) in hardlinks {
        if !matches!(b.entries.get(&target), Some(EntryKind::File { .. })) {
            return Err(Error::bad(
                display,
                format!("{link}: hard link to a missing member {target}"),
            ));
        }
        b.hardlinks.push((link, target));
    }
    Ok(())
}

/// A directory inside a conda environment (`PREFIX/lib/python3.X/site-packages/torch`) whose
/// symlinks lead into that environment (conda-forge links `torch/lib/*` to `PREFIX/lib/*`): the
/// environment root, the number of such links and one of them. The process loads the libraries
/// behind the links, so the environment is what to plan. Read-only: links are read, not followed
/// outside the environment (a link leaving it is not counted).
pub fn enclosing_env(dir: &Path) -> Option<(PathBuf, usize, String)> {
    if !dir.is_dir() || dir.join("conda-meta").is_dir() {
        return None;
    }
    let dir = dir.canonicalize().ok()?;
    let env = dir
        .ancestors()
        .skip(1)
        .find(|a| a.join("conda-meta").is_dir())?
        .to_path_buf();
    let mut count = 0;
    let mut example = String::new();
    for e in walkdir::WalkDir::new(&dir)
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        if !e.path_is_symlink() {
            continue;
        }
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let joined = e.path().parent().unwrap_or(&dir).join(&target);
        let Ok(real) = joined.canonicalize() else {
            continue;
        };
        if !real.starts_with(&dir) && real.starts_with(&env) {
            if count == 0 {
                example = format!(
                    "{} -> {}",
                    e.path().strip_prefix(&dir).unwrap_or(e.path()).display(),
                    target.display()
                );
            }
            count += 1;
        }
    }
    (count > 0).then_some((env, count, example))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        for ok in [
            "libfoo.so",
            "libfoo.so.1",
            "libfoo.so.1.2.3",
            "_C.cpython-311-x86_64-linux-gnu.so",
            "libc.so.6",
        ] {
            assert!(named_like_shared_library(ok), "{ok}");
        }
        for no in [
            "foo.so.conf",
            "libfoo.a",
            "so",
            ".so",
            "libfoo.so.x",
            "libfoo.sox",
            "README",
        ] {
            assert!(!named_like_shared_library(no), "{no}");
        }
    }
}
