//! `splitpkg index`: a static simple index of wheels, written or updated in place — what a release
//! engineer puts behind any static web server (`python3 -m http.server`, nginx, S3) so pip and uv
//! install the split from an index URL, as PyTorch serves its own (variant) wheels.
//!
//! Layout (one directory per project, PEP 503-normalised, the files beside their page):
//!
//! ```text
//! INDEX/index.html, INDEX/index.json                 the projects (PEP 503 HTML, PEP 691 JSON)
//! INDEX/torch/index.html, INDEX/torch/index.json     the files, `#sha256=`, `data-requires-python`,
//!                                                    `data-core-metadata` (PEP 658/714)
//! INDEX/torch/torch-2.11.0+split-….whl               the wheel
//! INDEX/torch/torch-2.11.0+split-….whl.metadata      its METADATA (PEP 658)
//! INDEX/torch-cuda-linalg/torch_cuda_linalg-2.11.0-variants.json   PEP 825, for a variant set
//! ```
//!
//! An update keeps every file already there, under the directory's lock (`output::lock_dir`, as
//! `pack` takes its channel's): a file given again with the same bytes changes nothing, a different
//! file under a published name is refused. Only a `-variants.json` changes, as PEP 825 lets it: it
//! is the union of every variant wheel's `variant.json` of that version.
//!
//! One index holds one of `splitpkg wheel`'s two sets: installers compare versions before variants,
//! so a local-label wheel (`2.11.0+1.magma`) would win over every PEP 825 variant of `2.11.0`. A
//! project with both is refused.
//!
//! One index serves one preference of the PEP 825 set (`prefer.rs`): uv installs the variant its
//! `-variants.json` lists first, so `--prefer nomagma` writes the slim index from the same wheels.
//! With `--share-with DEFAULT` (`share.rs`) the slim index hard-links DEFAULT's copies of those
//! wheels instead of holding its own: one copy of the core on disk for both, each index still one
//! self-contained directory (why links and not URLs into DEFAULT: `share.rs`).
//!
//! The printed commands (`commands.rs`) install from `--url`, pinned to the split, the other
//! variant too; the serve command serves that URL where `index` can know how (loopback `http`).

pub mod commands;
pub mod dist;
pub mod page;
pub mod prefer;
pub mod share;

pub use commands::{IndexCommands, IndexUrl, OtherCommand};
pub use share::Sharing;

use crate::error::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::input::file::{Links, read_bounded};
use crate::output::Pending;
use crate::progress::Progress;
use dist::{IndexedWheel, check_file_name, read_wheel, sha256_file, variants_file_name};
use page::{
    FileEntry, Meta, PAGE_CAP, ProjectPage, project_html, read_json, root_pages, to_json, url_of,
};

/// The `schema` value of the report `index --json` prints.
pub const SCHEMA: &str = "splitpkg-index";

/// What `index` is asked to do besides the wheels it is given.
pub struct IndexOptions<'a> {
    /// The index directory (created; updated in place).
    pub out: PathBuf,
    /// `--prefer`: the value each PEP 825 set's `-variants.json` lists first (`prefer.rs`).
    pub prefer: Option<String>,
    /// `--url`: where the index is served, for the printed commands (`commands::DEFAULT_URL`).
    pub url: Option<String>,
    /// `--share-with`: an index whose copies of the same wheels are hard-linked (`share.rs`).
    pub share_with: Option<PathBuf>,
    /// The progress bar of the reads and copies.
    pub progress: &'a Progress,
}

/// What happened to a file of the index in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FileStatus {
    /// Written by this run.
    Added,
    /// Given again with the bytes the index has: nothing written.
    Unchanged,
    /// In the index already and not given: left as it is.
    Kept,
    /// A `-variants.json` rewritten with more variants (PEP 825 lets it change).
    Updated,
}

/// Which of `splitpkg wheel`'s sets the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(rename = "Layout")]
pub enum IndexLayout {
    /// PEP 825 variant wheels (with their `-variants.json`) and their plain fallbacks.
    Variants,
    /// Versions with local labels (`+1.magma`, `+0.nomagma`), for installers without variants.
    LocalLabel,
    /// Neither: plain wheels.
    Plain,
}

/// One file on a project's page of the index.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexedFile {
    /// The file's name on the project's page.
    pub filename: String,
    /// What this run did with it: `added`, `unchanged`, `kept` or `updated`.
    pub status: FileStatus,
    /// SHA-256 of the file, as its link on the page carries it.
    pub sha256: String,
    /// Bytes of the file.
    pub size: u64,
    /// The PEP 825 variant label of a variant wheel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The page marks the file yanked (PEP 592); absent when it does not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yanked: bool,
}

/// A wheel given but not put in the index, and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeftOut {
    /// The wheel's file name.
    pub filename: String,
    /// Why it was not indexed.
    pub why: String,
}

/// One project of the index and its page's files.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectReport {
    /// PEP 503-normalised: the page is `NAME/`.
    pub name: String,
    /// Every file on the project's page after this run.
    pub files: Vec<IndexedFile>,
}

/// What `index` did: the projects written, their files, and the wheels left out.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexReport {
    /// Which document this is: `splitpkg-index`.
    pub schema: String,
    /// The version of the index report's layout.
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
    pub tool: crate::provenance::Tool,
    /// The command that wrote this report (filled by the CLI) and, with `SOURCE_DATE_EPOCH`, the
    /// date.
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    /// The index directory (`--out`).
    pub out: String,
    /// Which of `splitpkg wheel`'s sets the index holds: `variants`, `local-label` or `plain`.
    pub layout: IndexLayout,
    /// `--prefer`: the value every PEP 825 set of the index lists first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    /// Every project of the index, with its files.
    pub projects: Vec<ProjectReport>,
    /// Wheels given and not indexed: with `--prefer`, the plain fallback of a variant set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// Files this run wrote.
    pub added: usize,
    /// Files given again with the bytes the index has.
    pub unchanged: usize,
    /// Files already in the index and not given.
    pub kept: usize,
    /// How to serve the index and install from it.
    pub commands: IndexCommands,
    /// The wheels this run wrote: hard-linked to `--share-with`'s copies, or copied (absent, as
    /// none, in reports written before `--share-with`).
    #[serde(default)]
    pub sharing: Sharing,
}

impl crate::document::Document for IndexReport {
    const SCHEMA: &'static str = SCHEMA;
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    const WHAT: &'static str = "index report";
    const SCHEMA_FILE: &'static str = "index.schema.json";
    const TITLE: &'static str = "splitpkg index";
    const ABOUT: &'static str = "Output of `splitpkg index --json`: every file of the static simple index after this run, what the run did with it, and how to serve the index. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it. Written only after every file and page is in place: a refused run prints one error line and changes nothing.";
}

/// Write or update the index `opts.out` with the wheels in `inputs` (`.whl` files, or directories
/// whose `.whl` files are taken, not their subdirectories).
pub fn update_index(inputs: &[PathBuf], opts: &IndexOptions) -> Result<IndexReport> {
    let out = &opts.out;
    let prefer = opts.prefer.as_deref();
    not_a_link_or_file(out, "--out")?;
    if let Some(p) = prefer.filter(|p| !dist::is_label(p)) {
        return Err(Error::Usage(format!(
            "--prefer {p:?}: not a variant value ([0-9a-z._])"
        )));
    }
    let url = IndexUrl::parse(opts.url.as_deref().unwrap_or(commands::DEFAULT_URL))?;
    let mut share = share::Share::new(opts.share_with.clone())?;
    let wheels = read_wheels(&wheel_paths(inputs)?, opts.progress)?;
    let mut by_project: BTreeMap<String, Vec<&IndexedWheel>> = BTreeMap::new();
    for w in &wheels {
        by_project.entry(w.project.clone()).or_default().push(w);
    }

    prefer::check(out, &wheels, prefer)?;
    let (projects, left_out) =
        write_index(out, &wheels, &by_project, prefer, &mut share, opts.progress)?;
    let count = |s: FileStatus| {
        projects
            .iter()
            .flat_map(|p| &p.files)
            .filter(|f| f.status == s)
            .count()
    };
    let layout = layout_of(&projects);
    let sets = newest_sets(out, &projects)?;
    Ok(IndexReport {
        schema: SCHEMA.into(),
        schema_version: 1,
        tool: crate::provenance::Tool::this(),
        stamp: crate::provenance::Stamp::default(),
        out: out.display().to_string(),
        layout,
        prefer: opts.prefer.clone(),
        left_out,
        added: count(FileStatus::Added) + count(FileStatus::Updated),
        unchanged: count(FileStatus::Unchanged),
        kept: count(FileStatus::Kept),
        commands: commands::commands(out, &url, &projects, layout, prefer, &sets),
        projects,
        sharing: share.report,
    })
}

/// Read and check every wheel (in parallel), sorted by file name; a file name given twice with
/// other bytes is refused.
fn read_wheels(paths: &[PathBuf], progress: &Progress) -> Result<Vec<IndexedWheel>> {
    progress.start("reading wheels", paths.len() as u64);
    let read: Result<Vec<IndexedWheel>> = paths
        .par_iter()
        .map(|p| {
            let w = read_wheel(p);
            progress.inc(1);
            w
        })
        .collect();
    progress.finish();
    let mut wheels = read?;
    wheels.sort_by(|a, b| a.filename.cmp(&b.filename));
    wheels.dedup_by(|a, b| a.filename == b.filename && a.sha256 == b.sha256);
    if let Some(w) = wheels.windows(2).find(|w| w[0].filename == w[1].filename) {
        return Err(Error::bad(
            w[1].path.display(),
            format!(
                "{} is also given as {}, with other bytes",
                w[1].filename,
                w[0].path.display()
            ),
        ));
    }
    Ok(wheels)
}

/// Every input is read and checked: only now does anything appear in --out. Under the index's
/// lock, the projects given are updated, the projects already there have their pages regenerated
/// from their files (an earlier page is never served as it was: `load_project`), and the root
/// pages are written; all in one commit. Returns every project, sorted, and the wheels left out.
fn write_index(
    out: &Path,
    wheels: &[IndexedWheel],
    by_project: &BTreeMap<String, Vec<&IndexedWheel>>,
    prefer: Option<&str>,
    share: &mut share::Share,
    progress: &Progress,
) -> Result<(Vec<ProjectReport>, Vec<LeftOut>)> {
    std::fs::create_dir_all(out).at(out)?;
    let _lock = crate::output::lock_dir(out)?;
    crate::output::cleanup::sweep_once(out);
    // Again under the lock: another run may have changed the index since.
    prefer::check(out, wheels, prefer)?;
    let mut pending = Pending::default();
    let mut projects = Vec::new();
    let mut left_out = Vec::new();
    progress.start_unknown("writing the index");
    for (name, new) in by_project {
        let ctx = IndexRun {
            prefer,
            left_out: &mut left_out,
            share: &mut *share,
            pending: &mut pending,
        };
        projects.push(update_project(out, name, new, ctx)?);
    }
    let mut names = project_dirs(out)?;
    names.extend(by_project.keys().cloned());
    for name in names.iter().filter(|n| !by_project.contains_key(*n)) {
        projects.push(keep_project(out, name, &mut pending)?);
    }
    write_root(out, &names, &mut pending)?;
    pending.commit()?;
    progress.finish();
    projects.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((projects, left_out))
}

/// A project already in the index and not given: its pages regenerated from its files (so a
/// stored URL or key an earlier page carried is not served on), its files reported as kept.
fn keep_project(out: &Path, name: &str, pending: &mut Pending) -> Result<ProjectReport> {
    let dir = out.join(name);
    let mut page = load_project(&dir, name)?;
    write_project_pages(&dir, &mut page, pending)?;
    let files = page
        .files
        .iter()
        .map(|f| report_file(f, FileStatus::Kept, None))
        .collect();
    Ok(ProjectReport {
        name: name.to_string(),
        files,
    })
}

/// Which of `splitpkg wheel`'s sets the index holds, from its files.
fn layout_of(projects: &[ProjectReport]) -> IndexLayout {
    let all_files = || projects.iter().flat_map(|p| &p.files);
    if all_files().any(|f| f.filename.ends_with(VARIANTS_SUFFIX)) {
        IndexLayout::Variants
    } else if all_files().any(|f| f.filename.contains('+')) {
        IndexLayout::LocalLabel
    } else {
        IndexLayout::Plain
    }
}

pub(crate) const VARIANTS_SUFFIX: &str = "-variants.json";

/// The wheels named by `inputs`, in order: a file is taken as it is (it must be a `.whl`), a
/// directory for the `.whl` files directly in it.
fn wheel_paths(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for i in inputs {
        let meta = std::fs::metadata(i).at(i)?;
        if meta.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(i)
                .at(i)?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "whl") && p.is_file())
                .collect();
            if found.is_empty() {
                return Err(Error::bad(
                    i.display(),
                    "has no .whl files (a directory gives the wheels directly in it)",
                ));
            }
            found.sort();
            out.extend(found);
        } else if i.extension().is_some_and(|e| e == "whl") {
            out.push(i.clone());
        } else {
            return Err(Error::bad(
                i.display(),
                "not a .whl or a directory of them (a -variants.json is written from the variant wheels)",
            ));
        }
    }
    Ok(out)
}

/// `path` may not be a symbolic link (the index would be written where it points) or a file.
fn not_a_link_or_file(path: &Path, what: &str) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Usage(format!(
            "{what} {}: is a symbolic link; give the directory itself",
            path.display()
        ))),
        Ok(m) if !m.is_dir() => Err(Error::Usage(format!(
            "{what} {}: exists and is not a directory",
            path.display()
        ))),
        _ => Ok(()),
    }
}

fn report_file(f: &FileEntry, status: FileStatus, variant: Option<String>) -> IndexedFile {
    IndexedFile {
        filename: f.filename.clone(),
        status,
        sha256: f.sha256().unwrap_or_default().to_string(),
        size: f.size.unwrap_or_default(),
        variant,
        yanked: f
            .yanked
            .as_ref()
            .is_some_and(|y| y != &serde_json::Value::Bool(false)),
    }
}

/// The project's page as the index has it, or a new one. Nothing an earlier page says is served
/// on trust (`verified_entry`); of the page itself only its name is read back (checked against its
/// directory): `meta` is this tool's, and any other key is dropped (PEP 708's `tracks` and
/// `alternate-locations` would send installers to another index).
fn load_project(dir: &Path, name: &str) -> Result<ProjectPage> {
    let path = dir.join("index.json");
    let mut page = ProjectPage {
        meta: Meta::default(),
        name: name.to_string(),
        files: Vec::new(),
        versions: Vec::new(),
        other: BTreeMap::new(),
    };
    if !regular_or_missing(&path)? {
        return Ok(page);
    }
    let stored: ProjectPage = read_json(&path)?;
    let at = path.display().to_string();
    if stored.name != name {
        return Err(Error::bad(
            &at,
            format!(
                "is the page of {:?}, in the directory of {name:?}",
                stored.name
            ),
        ));
    }
    for f in &stored.files {
        if page.files.iter().any(|e| e.filename == f.filename) {
            return Err(Error::bad(&at, format!("lists {} twice", f.filename)));
        }
        page.files.push(verified_entry(dir, f, &at)?);
    }
    Ok(page)
}

/// An entry of a stored page rebuilt from the file it names, which must be a regular file beside
/// the page: the `url` from the file name (a stored `javascript:…`, off-site or `../` URL is never
/// read back), the size from the file (another size than the page's means the file changed behind
/// the index's back: refused, its hash would be stale), the PEP 658 digest from the `.metadata`
/// file beside it. The SHA-256 and `requires-python` must have their shapes. Of what a person may
/// set by hand, `yanked` (true or a reason) and `upload-time` are kept; any other key is dropped.
fn verified_entry(dir: &Path, f: &FileEntry, at: &str) -> Result<FileEntry> {
    check_file_name(&f.filename, at)?;
    let lists = |why: String| Error::bad(at, format!("lists {}, {why}", f.filename));
    let size = match std::fs::symlink_metadata(dir.join(&f.filename)) {
        Ok(m) if m.is_file() => m.len(),
        _ => {
            return Err(lists(format!(
                "which is not a regular file in {}",
                dir.display()
            )));
        }
    };
    if let Some(listed) = f.size.filter(|s| *s != size) {
        return Err(lists(format!(
            "of {listed} bytes; the file has {size}: it changed behind the index's back"
        )));
    }
    let sha = f
        .sha256()
        .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .ok_or_else(|| lists("without a SHA-256 (64 lower-case hex digits)".into()))?;
    if let Some(r) = f
        .requires_python
        .as_deref()
        .filter(|r| !dist::is_specifier(r))
    {
        return Err(lists(format!(
            "with Requires-Python {r:?}, not a version specifier"
        )));
    }
    let digest = metadata_digest(dir, &f.filename)?;
    let upload_time = f.other.get("upload-time").filter(|v| v.is_string());
    Ok(FileEntry {
        filename: f.filename.clone(),
        url: url_of(&f.filename),
        hashes: BTreeMap::from([("sha256".to_string(), sha.to_string())]),
        requires_python: f.requires_python.clone(),
        core_metadata: digest.clone(),
        dist_info_metadata: digest,
        yanked: f.yanked.clone().filter(|y| y.is_boolean() || y.is_string()),
        size: Some(size),
        other: upload_time
            .map(|t| BTreeMap::from([("upload-time".to_string(), t.clone())]))
            .unwrap_or_default(),
    })
}

/// The PEP 658 digest of wheel `filename`'s `.metadata` file in `dir`, none when it has none
/// (or is not a wheel): the page links only a metadata file that is there.
fn metadata_digest(dir: &Path, filename: &str) -> Result<Option<serde_json::Value>> {
    let path = dir.join(format!("{filename}.metadata"));
    if !filename.ends_with(".whl") || !regular_or_missing(&path)? {
        return Ok(None);
    }
    let bytes = read_bounded(&path, Links::Refuse, dist::METADATA_CAP, "PEP 658 metadata")?;
    let sha = crate::output::hex(&Sha256::digest(&bytes));
    Ok(Some(serde_json::json!({ "sha256": sha })))
}

/// Whether the index has a file at `path`: false when nothing is there, true for a regular file.
/// Anything else (a symbolic link such as `.metadata` -> /etc/passwd, a FIFO, a device, a
/// directory) is refused with one line naming it: an index reads, serves and replaces only
/// regular files of its own, and the check opens nothing that could block.
fn regular_or_missing(path: &Path) -> Result<bool> {
    match crate::input::open_nofollow(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// What one run carries through every project it updates.
struct IndexRun<'a> {
    prefer: Option<&'a str>,
    left_out: &'a mut Vec<LeftOut>,
    share: &'a mut share::Share,
    pending: &'a mut Pending,
}

/// The `-variants.json` of each project's newest version, as this run left it: `(project,
/// document)`, which the printed commands read the preferred variant from.
fn newest_sets(out: &Path, projects: &[ProjectReport]) -> Result<Vec<(String, serde_json::Value)>> {
    let mut sets = Vec::new();
    for p in projects {
        if let Some(file) = commands::newest_set(p) {
            sets.push((p.name.clone(), read_json(&out.join(&p.name).join(file))?));
        }
    }
    Ok(sets)
}

/// Add `new` to the project `name`'s directory and pages, staged in `pending`. With `prefer`, a
/// plain wheel of a version with a variant set (the fallback, the publisher's default build) is
/// left out: pip, and uv without variant mode, would install it from this index.
fn update_project(
    out: &Path,
    name: &str,
    new: &[&IndexedWheel],
    ctx: IndexRun,
) -> Result<ProjectReport> {
    let IndexRun {
        prefer,
        left_out,
        share,
        pending,
    } = ctx;
    let dir = out.join(name);
    not_a_link_or_file(&dir, "the project directory")?;
    std::fs::create_dir_all(&dir).at(&dir)?;
    let mut page = load_project(&dir, name)?;
    let mut status: BTreeMap<String, (FileStatus, Option<String>)> = page
        .files
        .iter()
        .map(|f| (f.filename.clone(), (FileStatus::Kept, None)))
        .collect();
    let sets: BTreeSet<String> = new
        .iter()
        .filter(|w| w.variant.is_some())
        .map(|w| variants_file_name(w))
        .chain(
            page.files
                .iter()
                .map(|f| f.filename.clone())
                .filter(|f| f.ends_with(VARIANTS_SUFFIX)),
        )
        .collect();
    let (new, fallbacks): (Vec<&IndexedWheel>, Vec<&IndexedWheel>) = new.iter().partition(|w| {
        prefer.is_none() || w.variant.is_some() || !sets.contains(&variants_file_name(w))
    });
    for w in fallbacks {
        left_out.push(LeftOut {
            filename: w.filename.clone(),
            why: format!(
                "--prefer {}: the plain fallback of a variant set is the publisher's default build; pip and uv without variant mode would install it from this index",
                prefer.unwrap_or_default()
            ),
        });
    }
    let new = new.as_slice();
    for w in new {
        let s = add_wheel(&dir, w, &mut page, &status, share, pending)?;
        let label = w.variant.as_ref().map(|(l, _)| l.clone());
        status.insert(w.filename.clone(), (s, label));
    }
    update_variant_sets(&dir, new, prefer, &mut page, &mut status, pending)?;
    refuse_mixed_sets(&dir, &page)?;
    write_project_pages(&dir, &mut page, pending)?;
    let files = page
        .files
        .iter()
        .map(|f| {
            let (s, v) = status
                .get(&f.filename)
                .cloned()
                .unwrap_or((FileStatus::Kept, None));
            report_file(f, s, v)
        })
        .collect();
    Ok(ProjectReport {
        name: name.to_string(),
        files,
    })
}

/// Stage wheel `w` and its `.metadata` into the project directory `dir` (unless the index has
/// them, with the same bytes) and list it on the page. Returns what happened to it: unchanged when
/// the page listed it and the file was there, else added.
fn add_wheel(
    dir: &Path,
    w: &IndexedWheel,
    page: &mut ProjectPage,
    status: &BTreeMap<String, (FileStatus, Option<String>)>,
    share: &mut share::Share,
    pending: &mut Pending,
) -> Result<FileStatus> {
    let on_disk = dir.join(&w.filename);
    let present = regular_or_missing(&on_disk)?;
    if present {
        same_file(&on_disk, w)?;
    } else if !share.link(w, dir, pending)? {
        stage_copy(w, dir, pending)?;
        share.copied(w);
    }
    // The `.metadata` is the wheel's METADATA: whatever else is there is replaced.
    stage_if_changed(
        dir,
        &format!("{}.metadata", w.filename),
        &w.metadata,
        pending,
    )?;
    let digest = serde_json::json!({ "sha256": crate::output::hex(&Sha256::digest(&w.metadata)) });
    // Listed or not, the entry says what the verified file is; a yank set by hand stays.
    let (yanked, other) = page
        .files
        .iter()
        .find(|f| f.filename == w.filename)
        .map(|f| (f.yanked.clone(), f.other.clone()))
        .unwrap_or_default();
    page.files.retain(|f| f.filename != w.filename);
    page.files.push(FileEntry {
        filename: w.filename.clone(),
        url: url_of(&w.filename),
        hashes: BTreeMap::from([("sha256".to_string(), w.sha256.clone())]),
        requires_python: w.requires_python.clone(),
        core_metadata: Some(digest.clone()),
        dist_info_metadata: Some(digest),
        yanked,
        size: Some(w.size),
        other,
    });
    Ok(if present && status.contains_key(&w.filename) {
        FileStatus::Unchanged
    } else {
        FileStatus::Added
    })
}

/// The project's pages, files sorted and versions listed, staged where they changed.
fn write_project_pages(dir: &Path, page: &mut ProjectPage, pending: &mut Pending) -> Result<()> {
    page.files.sort_by(|a, b| a.filename.cmp(&b.filename));
    let versions: BTreeSet<String> = page
        .files
        .iter()
        .filter(|f| f.filename.ends_with(".whl"))
        .filter_map(|f| f.filename.split('-').nth(1).map(str::to_string))
        .collect();
    page.versions = versions.into_iter().collect();
    stage_if_changed(dir, "index.json", to_json(page)?.as_bytes(), pending)?;
    stage_if_changed(dir, "index.html", project_html(page).as_bytes(), pending)?;
    Ok(())
}

/// A file already in the index under `w`'s name must be `w`'s bytes: a published file is never
/// replaced (installers and their caches trust a name once seen).
fn same_file(on_disk: &Path, w: &IndexedWheel) -> Result<()> {
    let (sha, size) = sha256_file(on_disk)?;
    if sha == w.sha256 && size == w.size {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: the index already has this file name with other bytes (sha256 {sha}); {} is sha256 {}: a published file is never replaced, give the new build another version or build tag",
        on_disk.display(),
        w.path.display(),
        w.sha256
    )))
}

/// Copy `w` into `dir` under a temporary name, hashing as it goes: the copy must be the bytes
/// that were read and hashed.
fn stage_copy(w: &IndexedWheel, dir: &Path, pending: &mut Pending) -> Result<()> {
    let mut src = crate::input::open_nofollow(&w.path).at(&w.path)?;
    let crate::output::StagedFile {
        path: tmp,
        file: mut dst,
    } = pending.add(dir, &w.filename)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = src.read(&mut buf).at(&w.path)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        dst.write_all(&buf[..k]).at(&tmp)?;
    }
    if crate::output::hex(&h.finalize()) != w.sha256 {
        return Err(Error::bad(
            w.path.display(),
            "changed while it was copied into the index",
        ));
    }
    pending.sync_in_background(&tmp, dst);
    Ok(())
}

fn stage_bytes(dir: &Path, name: &str, bytes: &[u8], pending: &mut Pending) -> Result<()> {
    let mut staged = pending.add(dir, name)?;
    staged.file.write_all(bytes).at(&staged.path)?;
    pending.sync_in_background(&staged.path, staged.file);
    Ok(())
}

/// Pages (and `.metadata` files) are rewritten only when their bytes change, so a repeated run
/// touches nothing. What is there is read through the bounded opener: a FIFO, a link or a device
/// at a page's place is refused, never read or replaced.
fn stage_if_changed(dir: &Path, name: &str, bytes: &[u8], pending: &mut Pending) -> Result<()> {
    let path = dir.join(name);
    if regular_or_missing(&path)? && read_bounded(&path, Links::Refuse, PAGE_CAP, "page")? == bytes
    {
        return Ok(());
    }
    stage_bytes(dir, name, bytes, pending)
}

/// For each version with variant wheels among `new`: the `-variants.json` as the union of the one
/// in the index and every new wheel's `variant.json`, linked from the page (without
/// `core-metadata`, `requires-python` or `yanked`, as PEP 825 asks), `prefer` listed first
/// (`prefer::check` has judged the preference already).
fn update_variant_sets(
    dir: &Path,
    new: &[&IndexedWheel],
    prefer: Option<&str>,
    page: &mut ProjectPage,
    status: &mut BTreeMap<String, (FileStatus, Option<String>)>,
    pending: &mut Pending,
) -> Result<()> {
    let mut sets: BTreeMap<String, Vec<&IndexedWheel>> = BTreeMap::new();
    for w in new.iter().filter(|w| w.variant.is_some()) {
        sets.entry(variants_file_name(w)).or_default().push(w);
    }
    for (file, members) in sets {
        check_file_name(&file, &dir.display().to_string())?;
        let path = dir.join(&file);
        let existing: Option<serde_json::Value> = if regular_or_missing(&path)? {
            Some(read_json(&path)?)
        } else {
            None
        };
        let mut merged = None;
        for w in &members {
            if let Some((_, doc)) = &w.variant {
                merged = Some(merge_variant(merged, doc, &w.path, &file)?);
            }
        }
        let Some(mut merged) = merged else { continue };
        if let Some(e) = &existing {
            // The index's file in the wheels' own order (a preference undone), then the union.
            merged = merge_variant(
                Some(prefer::in_order_of(e, &merged)),
                &merged,
                &members[0].path,
                &file,
            )?;
        }
        prefer::apply(&mut merged, prefer);
        if existing.as_ref() == Some(&merged) {
            status
                .entry(file.clone())
                .or_insert((FileStatus::Unchanged, None))
                .0 = FileStatus::Unchanged;
            continue;
        }
        let text = to_json(&merged)?;
        stage_bytes(dir, &file, text.as_bytes(), pending)?;
        let entry = FileEntry {
            filename: file.clone(),
            url: url_of(&file),
            hashes: BTreeMap::from([(
                "sha256".to_string(),
                crate::output::hex(&Sha256::digest(text.as_bytes())),
            )]),
            requires_python: None,
            core_metadata: None,
            dist_info_metadata: None,
            yanked: None,
            size: Some(text.len() as u64),
            other: BTreeMap::new(),
        };
        page.files.retain(|f| f.filename != file);
        page.files.push(entry);
        let s = if existing.is_some() {
            FileStatus::Updated
        } else {
            FileStatus::Added
        };
        status.insert(file, (s, None));
    }
    Ok(())
}

/// `doc` (one wheel's `variant.json`) merged into `into`: every key but `variants` must agree, and
/// a label already listed must have the same properties.
fn merge_variant(
    into: Option<serde_json::Value>,
    doc: &serde_json::Value,
    wheel: &Path,
    file: &str,
) -> Result<serde_json::Value> {
    let Some(mut into) = into else {
        return Ok(doc.clone());
    };
    let disagree = |what: &str| {
        Error::bad(
            wheel.display(),
            format!("its variant.json disagrees with {file} on {what}"),
        )
    };
    let (Some(a), Some(b)) = (into.as_object_mut(), doc.as_object()) else {
        return Err(disagree("its shape"));
    };
    for (k, v) in b.iter().filter(|(k, _)| k.as_str() != "variants") {
        if a.get(k) != Some(v) {
            return Err(disagree(k));
        }
    }
    let Some(variants) = a.get_mut("variants").and_then(|v| v.as_object_mut()) else {
        return Err(disagree("variants"));
    };
    for (label, props) in b
        .get("variants")
        .and_then(|v| v.as_object())
        .into_iter()
        .flatten()
    {
        match variants.get(label) {
            Some(p) if p != props => return Err(disagree(&format!("variant {label}"))),
            Some(_) => {}
            None => {
                variants.insert(label.clone(), props.clone());
            }
        }
    }
    Ok(into)
}

/// A project with PEP 825 variant sets and local-label versions is refused: installers compare
/// versions before variants, so `2.11.0+1.magma` would beat every variant of `2.11.0`.
fn refuse_mixed_sets(dir: &Path, page: &ProjectPage) -> Result<()> {
    let variants = page
        .files
        .iter()
        .find(|f| f.filename.ends_with(VARIANTS_SUFFIX));
    let local = page.files.iter().find(|f| {
        f.filename.ends_with(".whl")
            && f.filename
                .split('-')
                .nth(1)
                .is_some_and(|v| v.contains('+'))
    });
    if let (Some(v), Some(l)) = (variants, local) {
        return Err(Error::Usage(format!(
            "{}: one index cannot hold both of `splitpkg wheel`'s sets ({} has a local version label, {} is a PEP 825 variant set): installers compare versions before variants, so the label would beat every variant; publish each set in its own index (docs/wheel.md)",
            dir.display(),
            l.filename,
            v.filename
        )));
    }
    Ok(())
}

/// Every project directory of the index with a page. A symbolic link under a project's name is
/// refused: the index would list and serve whatever it points at.
fn project_dirs(out: &Path) -> Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(out).at(out)?.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if check_file_name(&name, "").is_err() || dist::normalize(&name) != name {
            continue;
        }
        let t = e.file_type().at(e.path())?;
        if t.is_symlink() {
            return Err(Error::bad(
                e.path().display(),
                "is a symbolic link where a project directory goes: an index serves only its own directories; remove it",
            ));
        }
        if t.is_dir() && regular_or_missing(&e.path().join("index.json"))? {
            names.insert(name);
        }
    }
    Ok(names)
}

/// The root pages listing `names`.
fn write_root(out: &Path, names: &BTreeSet<String>, pending: &mut Pending) -> Result<()> {
    let names: Vec<String> = names.iter().cloned().collect();
    let (json, html) = root_pages(&names)?;
    stage_if_changed(out, "index.json", json.as_bytes(), pending)?;
    stage_if_changed(out, "index.html", html.as_bytes(), pending)
}

/// The report as text.
pub fn report_text(r: &IndexReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let layout = match r.layout {
        IndexLayout::Variants => "PEP 825 variant set",
        IndexLayout::LocalLabel => "local-label set",
        IndexLayout::Plain => "plain wheels",
    };
    let prefer = r
        .prefer
        .as_deref()
        .map(|p| format!(", {p} preferred"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{} ({layout}{prefer}): {} added, {} unchanged, {} kept",
        r.out, r.added, r.unchanged, r.kept
    );
    for p in &r.projects {
        let _ = writeln!(s, "  {}/", p.name);
        for f in &p.files {
            let status = match f.status {
                FileStatus::Added => "added",
                FileStatus::Unchanged => "unchanged",
                FileStatus::Kept => "kept",
                FileStatus::Updated => "updated",
            };
            let variant = f
                .variant
                .as_deref()
                .map(|v| format!("  variant {v}"))
                .unwrap_or_default();
            let yanked = if f.yanked { "  yanked" } else { "" };
            let _ = writeln!(
                s,
                "    {:<9} {}  ({}){variant}{yanked}",
                status,
                f.filename,
                crate::output::human_bytes(f.size)
            );
        }
    }
    for l in &r.left_out {
        let _ = writeln!(s, "  left out: {} ({})", l.filename, l.why);
    }
    sharing_text(&mut s, &r.sharing);
    let _ = writeln!(
        s,
        "serve (any static server; see docs/wheel.md):\n  {}\ninstall:\n  {}\n  {}",
        r.commands.serve, r.commands.pip, r.commands.uv
    );
    for o in &r.commands.other {
        let _ = writeln!(s, "the other variant, {}:", o.label);
        for c in o.pip.iter().chain([&o.uv]) {
            let _ = writeln!(s, "  {c}");
        }
    }
    s
}

/// The wheels written as links and as copies, and why a wheel was copied though an index to link
/// from was given.
fn sharing_text(s: &mut String, sh: &Sharing) {
    use std::fmt::Write as _;
    let Some(from) = &sh.from else {
        return;
    };
    let _ = writeln!(
        s,
        "shared with {}: {} wheels linked ({}), {} copied ({})",
        crate::sanitize::printable(from),
        sh.linked_files,
        crate::output::human_bytes(sh.linked_bytes),
        sh.copied_files,
        crate::output::human_bytes(sh.copied_bytes)
    );
    for n in &sh.notes {
        let _ = writeln!(s, "  note: {}", crate::sanitize::printable(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variant_docs_merge_or_refuse() {
        let doc = |label: &str| json!({"$schema": "s", "default-priorities": {"namespace": ["torch"]}, "variants": {label: {"torch": {"x": [label]}}}});
        let w = Path::new("w.whl");
        let m = merge_variant(Some(doc("magma")), &doc("nomagma"), w, "f").unwrap();
        assert_eq!(m["variants"].as_object().unwrap().len(), 2);
        assert_eq!(
            merge_variant(Some(m.clone()), &doc("magma"), w, "f").unwrap(),
            m,
            "idempotent"
        );
        let mut other = doc("magma");
        other["variants"]["magma"] = json!({"torch": {"x": ["other"]}});
        assert!(merge_variant(Some(m.clone()), &other, w, "f").is_err());
        let mut schema = doc("slim");
        schema["$schema"] = json!("t");
        assert!(
            merge_variant(Some(m), &schema, w, "f")
                .unwrap_err()
                .to_string()
                .contains("$schema")
        );
    }
}
