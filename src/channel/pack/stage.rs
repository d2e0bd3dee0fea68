//! Staging: the tree's content laid out into one directory per package, in a work directory next
//! to `--out`, with the size and SHA-256 of every file as it was written. Nothing is written
//! through a link (docs/security.md).

use crate::error::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::PackOptions;
use crate::analysis::plan::{Plan, Role};
use crate::channel::info::{NOARCH, Origin, SUBDIR};
use crate::channel::standin::StandIn;
use crate::error::{Error, Result};
use crate::input::unpack::{
    Budget, DiskBudget, InArchive, Sha256Hash, Unpack, Unpacked, copy_hashed, write_hashed,
};
use crate::input::{
    MemberKind, Metadata, Tree, TreeKind, TreeMember, conda_parts, conda_tar, display_member,
    open_nofollow, open_zip, tar_bz2, walk_dir, walk_tar, walk_zip,
};
use crate::output::human_bytes;
use crate::progress::Progress;
use crate::recipe::split::{PackageModel, Split};

/// What one package is made of before it is written.
pub(super) struct Build {
    pub model: PackageModel,
    pub role: Role,
    pub standin: Option<StandIn>,
    pub subdir: &'static str,
    pub stage: PathBuf,
    /// Content paths (relative to the prefix) → what is there.
    pub content: BTreeMap<String, StagedEntry>,
    pub from: Origin,
    pub summary: String,
}

impl Build {
    fn new(
        work: &Path,
        model: PackageModel,
        role: Role,
        subdir: &'static str,
        from: Origin,
        summary: String,
    ) -> Build {
        Build {
            stage: work
                .join("stage")
                .join(format!("{}-{}-{}", model.name, model.version, model.build)),
            model,
            role,
            standin: None,
            subdir,
            content: BTreeMap::new(),
            from,
            summary,
        }
    }

    /// `NAME-VERSION-BUILD`, the package's file name without `.conda`.
    pub fn stem(&self) -> String {
        format!(
            "{}-{}-{}",
            self.model.name, self.model.version, self.model.build
        )
    }

    /// Where package path `rel` is staged: inside the stage, by the one rule for input paths.
    pub fn dst(&self, rel: &str) -> Result<PathBuf> {
        confined(&self.stage, rel)
    }

    /// Bytes of the package's regular files.
    pub fn content_bytes(&self) -> u64 {
        self.content
            .values()
            .filter_map(|s| s.file().map(|(size, _)| size))
            .sum()
    }
}

/// `root/rel` confined to `root` ([`crate::confine`]), or a refusal naming the path.
pub(super) fn confined(root: &Path, rel: &str) -> Result<PathBuf> {
    crate::confine::join_inside(root, rel).bad_at(rel, "not staged")
}

#[derive(Debug, Clone)]
pub(super) enum StagedEntry {
    File {
        size: u64,
        sha256: Sha256Hash,
    },
    /// A regular file left in the input archive (a wheel's member that is not ELF): written into
    /// the package from there ([`crate::input::unpack::InArchive`]).
    InArchive(InArchive),
    Symlink {
        target: String,
    },
}

impl StagedEntry {
    /// A regular file's size and SHA-256, wherever its bytes are.
    pub fn file(&self) -> Option<(u64, Sha256Hash)> {
        match self {
            StagedEntry::File { size, sha256 } => Some((*size, *sha256)),
            StagedEntry::InArchive(m) => Some((m.size, m.sha256)),
            StagedEntry::Symlink { .. } => None,
        }
    }
}

/// Every planned tree path → (index of its package in the builds, path in the package).
pub(super) type Placement = BTreeMap<String, (usize, String)>;

/// The model of the lazy package's variant `name`.
fn variant_model(split: &Split, name: &str) -> Result<PackageModel> {
    split
        .packages()
        .into_iter()
        .find(|m| m.variant.as_ref().is_some_and(|v| v.name == name))
        .ok_or_else(|| Error::internal(format!("the split has no {name} package")))
}

/// The packages the tree's content goes into — core, the tree's lazy variant (`with`), and a
/// payload package per name the plan's payload files map to — and where every tree path goes.
pub(super) fn layout(
    tree: &Tree,
    plan: &Plan,
    split: &Split,
    with: &str,
    input_name: &str,
    work: &Path,
) -> Result<(Vec<Build>, Placement)> {
    let o = &split.options;
    let lazy_file = plan.lazy_file_names();
    if lazy_file.is_empty() {
        return Err(Error::internal("a confined plan without a lazy library"));
    }
    let core_model = split
        .packages()
        .into_iter()
        .find(|m| m.variant.is_none())
        .ok_or_else(|| Error::internal("the split has no core package"))?;
    let version_text = &o.version;
    let mut builds = vec![
        Build::new(
            work,
            core_model,
            Role::Core,
            SUBDIR,
            Origin::Tree,
            format!(
                "{} {version_text}: everything of {input_name} except {lazy_file}",
                o.core_name
            ),
        ),
        Build::new(
            work,
            variant_model(split, with)?,
            Role::Lazy,
            SUBDIR,
            Origin::Tree,
            format!("{lazy_file} {version_text}, {with} variant (the build in {input_name})"),
        ),
    ];
    let mut placement = Placement::new();
    for output in &plan.outputs {
        for path in &output.files {
            let idx = match output.role {
                Role::Core => 0,
                Role::Lazy => 1,
                Role::Payload => {
                    let name = split.payload_package_for(path).ok_or_else(|| {
                        Error::Usage("the plan has payload files but no --payload-package".into())
                    })?;
                    match builds
                        .iter()
                        .position(|b| b.role == Role::Payload && b.model.name == name)
                    {
                        Some(i) => i,
                        None => {
                            let version = if o.payload_version.is_empty() {
                                "0".to_string()
                            } else {
                                o.payload_version.clone()
                            };
                            builds.push(Build::new(
                                work,
                                split.payload_package(name, &version),
                                Role::Payload,
                                SUBDIR,
                                Origin::Tree,
                                format!(
                                    "{name} {version}: the {} payload files of {input_name}",
                                    plan.options.dep
                                ),
                            ));
                            builds.len() - 1
                        }
                    }
                }
            };
            let rel = split.install_path(path);
            if rel == "info" || rel.starts_with("info/") {
                return Err(Error::bad(
                    display_member(&tree.source, tree.kind, path),
                    "would land in the package's info/ (its metadata); refusing",
                ));
            }
            placement.insert(path.clone(), (idx, rel));
        }
    }
    Ok((builds, placement))
}

/// Stage the tree's content into the builds' stages; returns what was staged per tree path.
pub(super) fn stage_tree(
    tree: &Tree,
    placement: &Placement,
    builds: &mut [Build],
    work: &Path,
    max_unpacked: Option<u64>,
    progress: &Progress,
) -> Result<BTreeMap<String, StagedEntry>> {
    let stages: Vec<PathBuf> = builds.iter().map(|b| b.stage.clone()).collect();
    let budget = DiskBudget::new(&tree.source, disk_budget(work, max_unpacked)?);
    let staged = stage_members(tree, placement, &stages, &budget, progress)?;
    for (path, (idx, rel)) in placement {
        let s = staged.get(path).ok_or_else(|| {
            Error::internal(format!(
                "{}: {path} was planned but not found while unpacking",
                tree.source.display()
            ))
        })?;
        builds[*idx].content.insert(rel.clone(), s.clone());
    }
    Ok(staged)
}

/// The other variant: the given file where the tree has the library, the same links around it.
pub(super) fn other_variant(
    file: &Path,
    without: &str,
    plan: &Plan,
    split: &Split,
    staged: &BTreeMap<String, StagedEntry>,
    work: &Path,
    progress: &Progress,
) -> Result<Build> {
    let lazy_lib = plan
        .lazy_library
        .as_ref()
        .ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let mut b = Build::new(
        work,
        variant_model(split, without)?,
        Role::Lazy,
        SUBDIR,
        Origin::LazyVariant(Tree::file_name(&file.display().to_string()).to_string()),
        format!(
            "{} {}, {without} variant",
            Tree::file_name(&lazy_lib.path),
            split.options.version
        ),
    );
    let mut lazy: Vec<(String, &StagedEntry)> =
        plan.outputs
            .iter()
            .filter(|o| o.role == Role::Lazy)
            .flat_map(|o| o.files.iter())
            .map(|p| {
                staged.get(p).map(|s| (p.clone(), s)).ok_or_else(|| {
                    Error::internal(format!("{p} is in the plan but was not staged"))
                })
            })
            .collect::<Result<_>>()?;
    // Files first, links last: nothing is ever written through a link.
    lazy.sort_by_key(|(_, s)| matches!(s, StagedEntry::Symlink { .. }));
    for (path, staged) in lazy {
        let rel = split.install_path(&path);
        let dst = b.dst(&rel)?;
        match staged {
            StagedEntry::Symlink { target } => {
                make_symlink(target, &dst)?;
                b.content.insert(
                    rel,
                    StagedEntry::Symlink {
                        target: target.clone(),
                    },
                );
            }
            StagedEntry::File { .. } | StagedEntry::InArchive(_) => {
                let src =
                    crate::input::file::open_regular(file, crate::input::file::Links::Follow)?;
                let (size, sha256) = write_hashed(&dst, src, true, progress).at(&dst)?;
                b.content.insert(rel, StagedEntry::File { size, sha256 });
            }
        }
    }
    Ok(b)
}

/// Stand-ins for the packages the split refers to (payload packages, providers of the core's
/// external libraries) that no real package here provides. Returns the stand-ins not made because
/// a real package of that name is in this pack; says in `notes` what else was left out.
pub(super) fn standins(
    builds: &mut Vec<Build>,
    split: &Split,
    opts: &PackOptions,
    with: &str,
    work: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<String>> {
    let o = &split.options;
    let real_names: BTreeSet<String> = builds.iter().map(|b| b.model.name.clone()).collect();
    let referenced: BTreeSet<String> = o
        .payload_packages
        .iter()
        .cloned()
        .chain(
            o.external_depends
                .iter()
                .filter_map(|d| d.split_whitespace().next().map(str::to_string)),
        )
        .collect();
    let mut replaced = Vec::new();
    for s in &opts.standins.standins {
        if real_names.contains(&s.name) {
            replaced.push(s.name.clone());
            continue;
        }
        if !referenced.contains(&s.name) {
            notes.push(format!(
                "stand-in {} not made: nothing in this split refers to it",
                s.name
            ));
            continue;
        }
        let mut b = Build::new(
            work,
            crate::recipe::split::standin_package(&s.name, &s.version),
            Role::Payload,
            NOARCH,
            Origin::StandinManifest(opts.standins_from.clone()),
            format!(
                "stand-in for {} {}: no library inside; represents {} bytes",
                s.name, s.version, s.represents_bytes
            ),
        );
        for (rel, bytes) in s.files() {
            let dst = b.dst(&rel)?;
            let (size, sha256) =
                write_hashed(&dst, &bytes[..], false, &Progress::hidden()).at(&dst)?;
            b.content.insert(rel, StagedEntry::File { size, sha256 });
        }
        b.standin = Some(s.clone());
        builds.push(b);
    }
    for p in &referenced {
        if !builds.iter().any(|b| &b.model.name == p) {
            notes.push(format!(
                "{p} is neither in the tree nor in the stand-in manifest{}",
                if o.payload_packages.contains(p) && !split.payload_static {
                    format!(": the {with} variant cannot be installed from this channel alone")
                } else {
                    String::new()
                }
            ));
        }
    }
    Ok(replaced)
}

/// The disk budget for unpacking `input` into `work`: `--max-unpacked`, or what an unprivileged
/// writer may still use on the work directory's file system (statvfs `f_bavail`, through
/// rattler's fs4).
pub(super) fn disk_budget(work: &Path, max_unpacked: Option<u64>) -> Result<Budget> {
    Ok(match max_unpacked {
        Some(n) => Budget {
            limit: n,
            why: format!("--max-unpacked {}", human_bytes(n)),
        },
        None => {
            let free = fs4::available_space(work).at(work)?;
            Budget {
                limit: free,
                why: format!(
                    "the {} free in {}",
                    human_bytes(free),
                    work.parent().unwrap_or(work).display()
                ),
            }
        }
    })
}

/// How `pack` asks the input reader to unpack a wheel into the work directory while planning it
/// ([`crate::input::unpack`]); `None` for other inputs, which are staged from the source.
pub fn unpack_for(input: &Path, work: &Path, max_unpacked: Option<u64>) -> Result<Option<Unpack>> {
    if TreeKind::detect(input)? != TreeKind::Wheel {
        return Ok(None);
    }
    Ok(Some(Unpack {
        dir: work.join("unpacked"),
        budget: disk_budget(work, max_unpacked)?,
    }))
}

/// Stage the open input file `f` at `dst` as a hard link to it when that gives the package the
/// same bytes a copy would (the tar header takes the file's mode, and tar's deterministic mode
/// keeps only the owner's execute bit: it must agree with `exec`) and the file system allows it
/// (same device; `protected_hardlinks`); a copy otherwise. Either way the content is hashed from
/// `f`. The link is made to the open file (`/proc/self/fd`), never to a path that could have been
/// swapped since, and nothing ever writes into a staged file: stages are only added to and
/// removed.
fn link_or_copy(
    f: std::fs::File,
    dst: &Path,
    exec: bool,
    progress: &Progress,
) -> std::io::Result<(u64, Sha256Hash)> {
    let mode = f.metadata()?.permissions().mode();
    if let Some(p) = dst.parent() {
        std::fs::create_dir_all(p)?;
    }
    if (mode & 0o100 != 0) == exec && mode & 0o7000 == 0 && hard_link_open(&f, dst).is_ok() {
        let (n, sha256, _) = copy_hashed(f, std::io::sink(), progress)?;
        return Ok((n, sha256));
    }
    write_hashed(dst, f, exec, progress)
}

/// `linkat` of an open file to `dst` (its directory exists; `dst` must not exist).
fn hard_link_open(f: &std::fs::File, dst: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    let to = std::ffi::CString::new(dst.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that live across the call.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn make_symlink(target: &str, dst: &Path) -> Result<()> {
    if let Some(p) = dst.parent() {
        std::fs::create_dir_all(p).at(p)?;
    }
    let _ = std::fs::remove_file(dst);
    std::os::unix::fs::symlink(target, dst).at(dst)
}

/// Stage every planned tree path at `stages[package]/path-in-package`; returns what was staged per
/// tree path.
///
/// The input is walked with the tree reader's own walker ([`crate::input::walk_dir`],
/// [`walk_zip`], [`walk_tar`]): the same members, the same member rules, so a member the plan did
/// not see is refused, not staged. Nothing is written through a link: regular files are created
/// new with `O_NOFOLLOW` while the stages hold no symlink at all, an archive's hard links are
/// copied from the staged member they name (never from the file system), and symlinks are
/// created last.
fn stage_members(
    tree: &Tree,
    placement: &Placement,
    stages: &[PathBuf],
    budget: &DiskBudget,
    progress: &Progress,
) -> Result<BTreeMap<String, StagedEntry>> {
    let s = Staging {
        tree,
        display: tree.source.display().to_string(),
        placement,
        stages,
        budget,
        progress,
    };
    let input = tree.source.as_path();
    let dst_of = |path: &str| s.dst_of(path);
    let out = match tree.kind {
        TreeKind::Directory => s.directory()?,
        TreeKind::Wheel => s.wheel()?,
        TreeKind::Conda => {
            let display = &s.display;
            let map = crate::input::map_file(input)?;
            let mut archive = open_zip(display, &map, "not a .conda archive (zip)")?;
            let (pkg, _) = conda_parts(display, &mut archive)?;
            stage_tar(
                display,
                conda_tar(display, &mut archive, pkg, "pkg archive")?,
                false,
                &dst_of,
                budget,
                progress,
            )?
        }
        TreeKind::TarBz2 => {
            stage_tar(&s.display, tar_bz2(input)?, true, &dst_of, budget, progress)?
        }
    };
    // Links last, into stages that hold only directories and regular files.
    for (path, staged) in &out {
        if let StagedEntry::Symlink { target } = staged {
            make_symlink(target, &s.dst_of(path)?)?;
        }
    }
    Ok(out)
}

/// What staging one input shares: the tree, where each of its paths goes, the stages, the disk
/// budget and the progress bar.
struct Staging<'a> {
    tree: &'a Tree,
    /// The input, as errors name it.
    display: String,
    placement: &'a Placement,
    stages: &'a [PathBuf],
    budget: &'a DiskBudget,
    progress: &'a Progress,
}

impl Staging<'_> {
    /// Where tree path `path` is staged, confined to its package's stage.
    fn dst_of(&self, path: &str) -> Result<PathBuf> {
        self.placement
            .get(path)
            .ok_or_else(|| {
                Error::internal(format!(
                    "{}: {path} is in the input but not in the plan",
                    self.display
                ))
            })
            .and_then(|(i, rel)| confined(&self.stages[*i], rel))
    }

    /// A directory's hard links are names of one file: each is copied by its own name.
    fn directory(&self) -> Result<BTreeMap<String, StagedEntry>> {
        let (input, progress) = (self.tree.source.as_path(), self.progress);
        let members: Vec<TreeMember> = walk_dir(input)?
            .into_iter()
            .filter(|m| m.kind != MemberKind::Dir)
            .collect();
        progress.start("staging", members.iter().map(|m| m.size).sum());
        let results: Vec<Result<(String, StagedEntry)>> = members
            .par_iter()
            .map(|m| {
                let dst = self.dst_of(&m.path)?;
                if let Some(staged) = symlink(m) {
                    return Ok((m.path.clone(), staged));
                }
                self.budget.charge(&m.path, m.size)?;
                let src = input.join(&m.path);
                let f = open_nofollow(&src).at(&src)?;
                let (size, sha256) = link_or_copy(f, &dst, m.executable(), progress).at(&dst)?;
                Ok((m.path.clone(), StagedEntry::File { size, sha256 }))
            })
            .collect();
        progress.finish();
        results.into_iter().collect()
    }

    /// The reader unpacked the wheel while planning it (`Workspace`): stage those files.
    fn wheel(&self) -> Result<BTreeMap<String, StagedEntry>> {
        let (input, display, progress) = (self.tree.source.as_path(), &self.display, self.progress);
        let u = self.tree.unpacked.as_ref().ok_or_else(|| {
            Error::internal(format!("{display}: a wheel staged without unpacking it"))
        })?;
        let map = crate::input::map_file(input)?;
        let bytes: &[u8] = &map;
        let mut archive = open_zip(display, bytes, "not a readable zip archive")?;
        let mut members = Vec::new();
        walk_zip(display, bytes, &mut archive, |m, _| {
            if m.kind != MemberKind::Dir {
                members.push(m.clone());
            }
            Ok(())
        })?;
        // The stages are new and hold only what staging makes (directories and links to
        // regular files; symlinks come last): their directories once, then one link per file.
        for (i, stage) in self.stages.iter().enumerate() {
            std::fs::create_dir_all(stage).at(stage)?;
            crate::input::unpack::directories(
                stage,
                self.placement
                    .values()
                    .filter(|(j, _)| *j == i)
                    .map(|(_, rel)| rel.as_str()),
            )?;
        }
        progress.start("staging", members.iter().map(|m| m.size).sum());
        let results: Vec<Result<(String, StagedEntry)>> = members
            .par_iter()
            .map(|m| {
                let (i, rel) = self.placement.get(&m.path).ok_or_else(|| {
                    Error::internal(format!(
                        "{display}: {} is in the input but not in the plan",
                        m.path
                    ))
                })?;
                let dst = self.stages[*i].join(rel);
                match symlink(m) {
                    Some(staged) => Ok((m.path.clone(), staged)),
                    None => from_unpacked(u, m, &dst, progress),
                }
            })
            .collect();
        progress.finish();
        results.into_iter().collect()
    }
}

/// A member the input reader already unpacked ([`crate::input::unpack`]; the disk budget was
/// charged then): hard-linked into the stage (a copy where the file system refuses the link), with
/// the size and digest taken while it was unpacked. The unpacked file was written with the mode
/// staging gives, so the package's tar header is the same as a copy's. A member the reader left in
/// the archive stays there: the package is written from it.
fn from_unpacked(
    u: &Unpacked,
    m: &TreeMember,
    dst: &Path,
    progress: &Progress,
) -> Result<(String, StagedEntry)> {
    if let Some(member) = u.in_archive.get(&m.path) {
        progress.inc(member.size);
        return Ok((m.path.clone(), StagedEntry::InArchive(member.clone())));
    }
    let &(size, sha256) = u
        .files
        .get(&m.path)
        .ok_or_else(|| Error::internal(format!("{} was listed but not unpacked", m.path)))?;
    let src = u.dir.join(&m.path);
    let f = open_nofollow(&src).at(&src)?;
    if hard_link_open(&f, dst).is_ok() {
        progress.inc(size);
    } else {
        write_hashed(dst, f, m.executable(), progress).at(dst)?;
    }
    Ok((m.path.clone(), StagedEntry::File { size, sha256 }))
}

/// A symlink member as staged (created once every file is).
fn symlink(m: &TreeMember) -> Option<StagedEntry> {
    (m.kind == MemberKind::Symlink).then(|| StagedEntry::Symlink {
        target: m.link.clone().unwrap_or_default(),
    })
}

/// Stage a tar archive's members; `info_is_metadata` for a `.tar.bz2`, whose `info/` is not content.
fn stage_tar(
    display: &str,
    reader: impl Read,
    info_is_metadata: bool,
    dst_of: &dyn Fn(&str) -> Result<PathBuf>,
    budget: &DiskBudget,
    progress: &Progress,
) -> Result<BTreeMap<String, StagedEntry>> {
    let mut out = BTreeMap::new();
    // (link, its destination, the member it names), copied once every regular file is staged.
    let mut hardlinks: Vec<(String, PathBuf, String)> = Vec::new();
    progress.start_unknown("unpacking");
    let mut skip = |_: &str, _: &mut dyn Read| Ok(());
    let metadata: Metadata<'_> = if info_is_metadata {
        Some(&mut skip)
    } else {
        None
    };
    walk_tar(display, reader, metadata, |m, r| {
        if m.kind == MemberKind::Dir {
            return Ok(());
        }
        let dst = dst_of(&m.path)?;
        if let Some(staged) = symlink(m) {
            out.insert(m.path.clone(), staged);
        } else if m.kind == MemberKind::Hardlink {
            hardlinks.push((m.path.clone(), dst, m.link.clone().unwrap_or_default()));
        } else {
            budget.charge(&m.path, m.size)?;
            let (size, sha256) =
                write_hashed(&dst, r, m.executable(), progress).bad_at(display, &m.path)?;
            if size != m.size {
                return Err(Error::bad(
                    display,
                    format!("{}: member is truncated", m.path),
                ));
            }
            out.insert(m.path.clone(), StagedEntry::File { size, sha256 });
        }
        Ok(())
    })?;
    // Hard links, in archive order: each names an earlier file member (the member rules), so its
    // content is that member's staged copy, a regular file.
    for (rel, dst, target) in hardlinks {
        let name = format!("{display}:{rel}");
        let staged = match out.get(&target) {
            Some(s @ StagedEntry::File { .. }) => s.clone(),
            _ => {
                return Err(Error::bad(
                    &name,
                    format!(
                        "hard link to {target}, which is not an earlier regular file member; refusing"
                    ),
                ));
            }
        };
        // Each link is staged as a full copy: free in the archive, not on disk.
        if let StagedEntry::File { size, .. } = &staged {
            budget.charge(&rel, *size)?;
        }
        let src = dst_of(&target)
            .map_err(|_| Error::bad(&name, format!("hard link to a missing member {target}")))?;
        let f = open_nofollow(&src).at(&src)?;
        let exec = f
            .metadata()
            .map(|m| m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false);
        write_hashed(&dst, f, exec, progress).at(&dst)?;
        out.insert(rel, staged);
    }
    progress.finish();
    Ok(out)
}
