//! `splitpkg feedstock`: patch a conda-forge feedstock whose v1 recipe compiles the library in a
//! `staging:` output (conda-forge/pytorch-cpu-feedstock PR #518) so that the lazy library becomes
//! its own output in two variants, built in the same CI job from the same compile.
//!
//! The relations (names, build string, the specs tying the outputs together, what the slim
//! variant forbids, the preference) come from [`Split`], the one naming model; this module only
//! finds where they go in the maintainer's files and edits those files as text, so comments and
//! layout stay as the maintainer wrote them. A shape it does not recognise is refused with one
//! line naming what it expected; a recipe it already patched gives an empty patch.

use std::path::{Path, PathBuf};

use serde_yaml::Value;

use crate::error::{Context, Error, Result};
use crate::input::file::Links;
use crate::recipe::split::Split;

/// The files `feedstock` reads and edits, relative to the feedstock root.
const RECIPE: &str = "recipe/recipe.yaml";
const SCRIPT: &str = "recipe/build.sh";
const CBC: &str = "recipe/conda_build_config.yaml";

/// Each feedstock file is refused above this size: PR #518's recipe.yaml is 30 KB, its build.sh
/// 10 KB.
pub const MAX_FEEDSTOCK_FILE_BYTES: u64 = 16 << 20;

/// YAML nested deeper than this is refused before it is parsed: the parser's work grows with the
/// square of the depth (a recipe nested 100k deep ran until it was killed) and serde_yaml recurses
/// once per level. PR #518's recipe nests 9 levels deep.
pub const MAX_YAML_NESTING: usize = 64;

/// The mode a file `--write` creates (conda_build_config.yaml when the feedstock has none).
pub const NEW_FILE_MODE: u32 = 0o644;

/// What `feedstock` needs besides the [`Split`].
#[derive(Debug, Clone)]
pub struct FeedstockOptions {
    /// The lazy library's file name (`libtorch_cuda_linalg.so`).
    pub lazy_library: String,
    /// A core library to mark with `splitpkg note` (issue 27), off when `None`.
    pub dlopen_note: Option<String>,
}

/// Host dependencies of the staging output that the slim rebuild of the lazy library needs: the
/// CUDA runtime, BLAS, solver and sparse headers its translation units include, and the CUDA
/// version pin. Copied into the lazy output only when the staging lists them.
const REBUILD_HOST: &[&str] = &[
    "cuda-version",
    "cuda-cudart-dev",
    "libcublas-dev",
    "libcusolver-dev",
    "libcusparse-dev",
];

/// The PyTorch source patch that makes `torch.cuda.has_magma` answer from the installed files
/// (which variant of the lazy output is installed): `recipe/patches/NNNN-` + this name.
const HAS_MAGMA_PATCH: &str = "splitpkg-hasMAGMA-answers-from-installed-files.patch";
const HAS_MAGMA_PATCH_TEXT: &str =
    include_str!("../../templates/feedstock/hasMAGMA-from-installed-files.patch");

/// The recipe's build number, as its outputs' build strings end (`_${{ hash }}_${{ build_number }}`).
const BUILD_NUMBER: &str = "${{ build_number }}";

/// One file of the feedstock, before and after.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// Relative to the feedstock root (`recipe/recipe.yaml`).
    pub path: PathBuf,
    /// `None` when the file does not exist yet.
    pub before: Option<String>,
    /// The file's content after the patch.
    pub after: String,
    /// The file's permission bits now (`None` when it does not exist yet).
    pub before_mode: Option<u32>,
    /// The permission bits `--write` leaves: the file's own (an edit keeps its mode), or
    /// [`NEW_FILE_MODE`] for a new file. The diff prints git's mode lines from these two.
    pub after_mode: u32,
}

impl FileChange {
    /// This file's part of the diff, as git writes it: a `diff --git` line, the mode lines when
    /// the file is new or its executable bit changes, then the unified diff of its text.
    pub fn diff(&self) -> String {
        let name = self.path.display().to_string();
        let from = if self.before.is_some() {
            format!("a/{name}")
        } else {
            "/dev/null".to_string()
        };
        let text = unified_diff(
            self.before.as_deref().unwrap_or(""),
            &self.after,
            &from,
            &format!("b/{name}"),
        );
        let modes = mode_lines(self.before_mode, self.after_mode);
        if text.is_empty() && modes.is_empty() {
            return String::new();
        }
        format!("diff --git a/{name} b/{name}\n{modes}{text}")
    }
}

/// git's mode header lines for a file whose permission bits go from `before` (`None`: a new
/// file) to `after`. git records only the executable bit (`100644` or `100755`), so a change of
/// other bits prints nothing, as in git.
pub fn mode_lines(before: Option<u32>, after: u32) -> String {
    let git = |m: u32| if m & 0o111 != 0 { 0o100755 } else { 0o100644 };
    match before {
        None => format!("new file mode {:o}\n", git(after)),
        Some(b) if git(b) != git(after) => {
            format!("old mode {:o}\nnew mode {:o}\n", git(b), git(after))
        }
        Some(_) => String::new(),
    }
}

/// The patch: empty when the feedstock already has the split.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    /// Every file the patch writes, before and after.
    pub changes: Vec<FileChange>,
    /// What the patch could not do and a maintainer must (one line each, for stderr).
    pub notes: Vec<String>,
    /// What the patch does, in the recipe's terms (for the pull-request description); `None`
    /// for an empty patch.
    pub summary: Option<Summary>,
}

/// What a patch does, in the recipe's own names and expressions.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// The core output's package name.
    pub core: String,
    /// The lazy output's package name.
    pub lazy: String,
    /// The lazy library's file name.
    pub library: String,
    /// The variant key the lazy output is built over.
    pub key: String,
    /// The variant with the payload (`magma`) and the one without (`nomagma`).
    pub with: String,
    /// The variant without the payload (`nomagma`).
    pub without: String,
    /// The variant a plain install gets.
    pub preferred: String,
    /// Where the lazy output is built (the condition of the core's test entry), `None`: always.
    pub condition: Option<String>,
    /// The staging output the core and lazy outputs are built from.
    pub staging: String,
    /// Other outputs built from the staging, which now ignore the payload's run-export.
    pub also_ignoring: Vec<String>,
    /// The core's run dependency on the lazy output, and the lazy output's constraint on the core.
    pub core_depends: String,
    /// The lazy output's run constraint on the core.
    pub lazy_constrains: String,
    /// What the variant without the payload constrains (`libmagma <0.0a0`).
    pub forbid: Vec<String>,
    /// The packages that provide the payload (`libmagma`).
    pub payload_packages: Vec<String>,
    /// `context: build_base` before and after; `None` when the recipe has none.
    pub build_base: Option<(u64, u64)>,
    /// The core library the patch marks with `splitpkg note` (declaring the lazy library), when it
    /// adds that step.
    pub dlopen_note: Option<String>,
    /// The PyTorch source patch added for `has_magma` (`recipe/patches/0024-….patch`).
    pub source_patch: Option<String>,
}

impl Patch {
    /// A git-style unified diff of every change (`diff --git`, mode lines, `--- a/…`,
    /// `+++ b/…`), empty for an empty patch.
    pub fn diff(&self) -> String {
        self.changes.iter().map(FileChange::diff).collect()
    }

    /// Write every changed file as one transaction ([`crate::output::Pending`]): all of them or
    /// none, on a refusal (a directory or a symlink where a file goes, an immutable file), a
    /// failed rename and a signal. Each file keeps its mode. Files are checked to be unchanged
    /// since they were read, so an edit made meanwhile (by a tool that does not take the
    /// feedstock's lock, `output::lock_tree`) is not overwritten.
    pub fn write(&self, root: &Path) -> Result<()> {
        let mut tx = crate::output::Pending::default();
        let mut created = crate::output::CreatedDirs::default();
        for c in &self.changes {
            let path = root.join(&c.path);
            if c.before.is_none() {
                // A new file (the source patch) may need its directory (`recipe/patches/`),
                // removed again if the transaction does not commit.
                created.create(crate::output::atomic::parent_of(&path))?;
            }
            // Staged first: a FIFO or a link at the path is refused before it is read again.
            let mut staged = tx.add_path(path.clone())?;
            let now = crate::input::file::read_text(
                &path,
                Links::Refuse,
                MAX_FEEDSTOCK_FILE_BYTES,
                "feedstock file",
            )
            .ok();
            if now != c.before {
                return Err(Error::bad(
                    path.display(),
                    "changed while it was being patched; nothing written",
                ));
            }
            use std::io::Write;
            staged.file.write_all(c.after.as_bytes()).at(&path)?;
            tx.sync_in_background(&staged.path, staged.file);
        }
        tx.commit()?;
        created.keep();
        Ok(())
    }
}

/// One CI configuration of the feedstock (`.ci_support/NAME.yaml`, written by conda-smithy).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CiConfig {
    /// The file name (`linux_64_cuda_compiler_version13.0.yaml`).
    pub file: String,
    /// The configuration's `target_platform` (`linux-64`).
    pub target_platform: String,
    /// `None` for a CPU configuration (`cuda_compiler_version: None`).
    pub cuda: Option<String>,
    /// `sbsa`, `tegra` for CUDA on linux-aarch64: one libtorch build each (PR #518's CUDA 12.9
    /// file lists both).
    pub arm_variants: Vec<String>,
}

impl CiConfig {
    /// Whether the lazy output is built in this configuration: CUDA on linux, the condition under
    /// which conda-forge's `libtorch` test lists the library.
    pub fn builds_lazy(&self) -> bool {
        self.cuda.is_some() && self.target_platform.starts_with("linux-")
    }

    /// The core builds this configuration makes: one per arm variant where it lists them.
    pub fn core_builds(&self) -> usize {
        if self.cuda.is_some() && self.target_platform == "linux-aarch64" {
            self.arm_variants.len().max(1)
        } else {
            1
        }
    }
}

/// The feedstock's CI configurations, sorted by file name; none without `.ci_support/`.
pub fn ci_configs(root: &Path) -> Result<Vec<CiConfig>> {
    let dir = root.join(".ci_support");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter(|n| n != "migrations")
        .map(|n| ci_config(&dir.join(&n), n))
        .collect()
}

fn ci_config(path: &Path, file: String) -> Result<CiConfig> {
    let text = read(path)?;
    check_nesting(path, &text)?;
    let v: Value = serde_yaml::from_str(&text).bad_at(path.display(), "not YAML")?;
    // conda-smithy writes each key as a list (of one value, but for keys zipped together).
    let all = |k: &str| -> Vec<String> {
        match v.get(k) {
            Some(Value::Sequence(s)) => s
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            Some(x) => x.as_str().map(str::to_string).into_iter().collect(),
            None => Vec::new(),
        }
    };
    let first = |k: &str| all(k).into_iter().next();
    Ok(CiConfig {
        target_platform: first("target_platform")
            .unwrap_or_else(|| file.split('_').take(2).collect::<Vec<_>>().join("-")),
        cuda: first("cuda_compiler_version").filter(|c| c != "None"),
        arm_variants: all("arm_variant_type"),
        file,
    })
}

/// The feedstock's files this command reads and edits.
struct Files {
    recipe: PathBuf,
    script: PathBuf,
    cbc: PathBuf,
}

/// Compute the patch for the feedstock at `root` (the directory holding `recipe/` and
/// `.ci_support/`).
pub fn patch(root: &Path, split: &Split, opts: &FeedstockOptions) -> Result<Patch> {
    let files = locate(root)?;
    let recipe_text = read(&files.recipe)?;
    let script_text = read(&files.script)?;
    let cbc_text = read_if_present(&files.cbc)?;
    let recipe = Recipe::parse(&files.recipe, &recipe_text)?;
    let o = &split.options;
    let key_line = format!("{}:", o.variant_key);
    let have = [
        recipe
            .items
            .iter()
            .any(|it| Recipe::name_of(&it.value, "package").as_deref() == Some(&o.lazy_name)),
        script_text
            .lines()
            .any(|l| l.trim() == format!("{})", o.lazy_name)),
        cbc_text
            .as_deref()
            .is_some_and(|t| t.lines().any(|l| l.trim_end() == key_line)),
    ];
    if have.iter().all(|h| *h) {
        return Ok(Patch::default());
    }
    if have.iter().any(|h| *h) {
        return Err(Error::bad(
            root.display(),
            format!(
                "partly split already (output {}: {}, build.sh stage: {}, {} in conda_build_config.yaml: {}); restore the files and run again",
                o.lazy_name, have[0], have[1], o.variant_key, have[2]
            ),
        ));
    }

    let shape = recipe.shape(&files.recipe, split, opts)?;
    // The core's build-string keys (`${{ flavor }}`) are the split's build keys.
    let mut split = split.clone();
    split.options.build_keys = shape.build_keys_expr.clone();
    let split = &split;
    let recipe_after = recipe.patched(&files.recipe, split, opts, &shape)?;
    let mut notes = Vec::new();
    let (recipe_after, build_base) = match bump_build_base(&recipe_after) {
        Some((text, n)) => (text, Some((n, n + 1))),
        None => {
            notes.push(format!(
                "{}: no `build_base: N` in context: bump the build number by hand, so that no pre-split {} of this version matches the new pins",
                files.recipe.display(),
                o.core_name
            ));
            (recipe_after, None)
        }
    };
    let (recipe_after, source_patch) = with_source_patch(&files.recipe, &recipe_after)?;
    // A new file: confined like the others, and never one that is there already.
    let at = crate::confine::no_links_inside(root, &source_patch)
        .invalid_at(root.join(&source_patch).display())?;
    if std::fs::symlink_metadata(&at).is_ok() {
        return Err(Error::bad(
            at.display(),
            "exists already; the has_magma source patch would replace it",
        ));
    }
    let mut summary = summary(&recipe, split, opts, &shape, build_base);
    summary.source_patch = Some(source_patch.clone());
    let script_after = patch_script(&files.script, &script_text, split, opts, &shape)?;
    let cbc_after = patch_cbc(cbc_text.as_deref(), split);
    Ok(Patch {
        changes: vec![
            change(root, RECIPE, Some(recipe_text), recipe_after)?,
            change(root, SCRIPT, Some(script_text), script_after)?,
            change(root, CBC, cbc_text, cbc_after)?,
            change(root, &source_patch, None, HAS_MAGMA_PATCH_TEXT.to_string())?,
        ],
        notes,
        summary: Some(summary),
    })
}

fn summary(
    recipe: &Recipe,
    split: &Split,
    opts: &FeedstockOptions,
    shape: &Shape,
    build_base: Option<(u64, u64)>,
) -> Summary {
    let o = &split.options;
    let also_ignoring = recipe
        .items
        .iter()
        .enumerate()
        .filter(|(n, it)| {
            *n != shape.core
                && it.value.get("inherit").and_then(Value::as_str) == Some(shape.staging.as_str())
        })
        .filter_map(|(_, it)| Recipe::name_of(&it.value, "package"))
        .collect();
    Summary {
        core: o.core_name.clone(),
        lazy: o.lazy_name.clone(),
        library: opts.lazy_library.clone(),
        key: o.variant_key.clone(),
        with: variant_name(split, true).to_string(),
        without: variant_name(split, false).to_string(),
        preferred: split.preferred().name.clone(),
        condition: shape.cond.clone(),
        staging: shape.staging.clone(),
        also_ignoring,
        core_depends: split.same_build_number(&o.lazy_name, BUILD_NUMBER),
        lazy_constrains: split.same_build_number(&o.core_name, BUILD_NUMBER),
        forbid: split.forbid_payload(),
        payload_packages: o.payload_packages.clone(),
        build_base,
        dlopen_note: opts.dlopen_note.clone(),
        source_patch: None,
    }
}

/// The recipe with the `has_magma` source patch listed under its first source's `patches:` (the
/// key is added when the source has none), and the patch's path from the feedstock root. It is
/// numbered after the highest `patches/NNNN-` the recipe lists.
fn with_source_patch(path: &Path, text: &str) -> Result<(String, String)> {
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let refuse = |why: &str| Error::bad(path.display(), why.to_string());
    let source = lines
        .iter()
        .position(|l| l.trim_end() == "source:")
        .ok_or_else(|| refuse("no top-level `source:` to add the has_magma source patch to"))?;
    let end = block_end(&lines, source, 0, lines.len());
    let first = (source + 1..end)
        .find(|&i| !blank_or_comment(&lines[i]))
        .ok_or_else(|| refuse("an empty `source:`"))?;
    // A list of sources (`- url: …`): its first item's keys are two columns right of the dash.
    let (item, key_col) = match lines[first].trim_start().strip_prefix("- ") {
        Some(_) => (first, indent(&lines[first]) + 2),
        None => (first, indent(&lines[first])),
    };
    let item_end = (item + 1..end)
        .find(|&i| !blank_or_comment(&lines[i]) && indent(&lines[i]) < key_col)
        .unwrap_or(end);
    let number = lines
        .iter()
        .filter_map(|l| l.split("patches/").nth(1))
        .filter_map(|rest| rest.get(..4)?.parse::<u32>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let rel = format!("patches/{number:04}-{HAS_MAGMA_PATCH}");
    let pad = |n: usize, s: &str| format!("{}{s}", " ".repeat(n));
    let entry = |col: usize| {
        vec![
            pad(
                col,
                "# torch.cuda.has_magma answers from the installed variant of the lazy library (added by `splitpkg feedstock`)",
            ),
            pad(col, &format!("- {rel}")),
        ]
    };
    let (at, add) = match find_key(&lines, item, item_end, key_col, "patches") {
        Some(k) => {
            let k_end = block_end(&lines, k, key_col, item_end);
            (last_content(&lines, k, k_end) + 1, entry(key_col + 2))
        }
        None => {
            let mut l = vec![pad(key_col, "patches:")];
            l.extend(entry(key_col + 2));
            (last_content(&lines, item, item_end) + 1, l)
        }
    };
    let mut out = lines;
    out.splice(at..at, add);
    Ok((out.join("\n") + "\n", format!("recipe/{rel}")))
}

/// The recipe with `context: build_base: N` raised to N + 1: the core's contents change (it no
/// longer ships the lazy library), and the pins between core and lazy package end in the build
/// number, so the new builds match only each other. The text and the old N; `None` without such
/// a line.
fn bump_build_base(text: &str) -> Option<(String, u64)> {
    let lines: Vec<&str> = text.lines().collect();
    let context = lines.iter().position(|l| l.trim_end() == "context:")?;
    let end = (context + 1..lines.len())
        .find(|&i| !blank_or_comment(lines[i]) && indent(lines[i]) == 0)
        .unwrap_or(lines.len());
    let at = (context + 1..end)
        .find(|&i| indent(lines[i]) == 2 && lines[i].trim_start().starts_with("build_base:"))?;
    let rest = lines[at].trim_start().strip_prefix("build_base:")?;
    let (value, comment) = match rest.find('#') {
        Some(c) => (&rest[..c], &rest[c..]),
        None => (rest, ""),
    };
    let n: u64 = value.trim().parse().ok()?;
    let comment = if comment.is_empty() {
        String::new()
    } else {
        format!("  {comment}")
    };
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out[at] = format!("  build_base: {}{comment}", n + 1);
    Some((out.join("\n") + "\n", n))
}

/// The change of the file `rel`, with its mode now and the one `--write` leaves.
fn change(root: &Path, rel: &str, before: Option<String>, after: String) -> Result<FileChange> {
    use std::os::unix::fs::PermissionsExt;
    let path = root.join(rel);
    let before_mode = match &before {
        Some(_) => Some(
            std::fs::symlink_metadata(&path)
                .at(&path)?
                .permissions()
                .mode()
                & 0o7777,
        ),
        None => None,
    };
    Ok(FileChange {
        path: PathBuf::from(rel),
        before,
        after,
        before_mode,
        after_mode: before_mode.unwrap_or(NEW_FILE_MODE),
    })
}

/// The feedstock's files, each confined to the feedstock ([`crate::confine::no_links_inside`]):
/// a `recipe/` that is a link, or a link at any file this command reads or writes, is refused
/// before anything is read.
fn locate(root: &Path) -> Result<Files> {
    let inside =
        |rel: &str| crate::confine::no_links_inside(root, rel).invalid_at(root.join(rel).display());
    let (recipe, script, cbc) = (inside(RECIPE)?, inside(SCRIPT)?, inside(CBC)?);
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    if !exists(&recipe) {
        let why = if exists(&inside("recipe/meta.yaml")?) {
            "recipe/meta.yaml is a v0 recipe; expected recipe/recipe.yaml (v1, rattler-build) with a staging output"
        } else {
            "expected a feedstock: recipe/recipe.yaml (v1) and .ci_support/"
        };
        return Err(Error::bad(root.display(), why));
    }
    if !root.join(".ci_support").is_dir() {
        return Err(Error::bad(
            root.display(),
            "no .ci_support/: expected a feedstock root (recipe/ and .ci_support/)",
        ));
    }
    Ok(Files {
        recipe,
        script,
        cbc,
    })
}

/// A feedstock file through the one bounded opener: a regular file (never a FIFO, a device or a
/// link), at most [`MAX_FEEDSTOCK_FILE_BYTES`], UTF-8 without CR line endings.
fn read(path: &Path) -> Result<String> {
    let text = crate::input::file::read_text(
        path,
        Links::Refuse,
        MAX_FEEDSTOCK_FILE_BYTES,
        "feedstock file",
    )?;
    if text.contains('\r') {
        return Err(Error::bad(
            path.display(),
            "has CR line endings; expected a Unix text file",
        ));
    }
    Ok(text)
}

/// [`read`], or `None` where nothing is at `path` (a feedstock without conda_build_config.yaml).
/// Anything else that is there — a FIFO, a directory, a file that is not UTF-8 — is refused, never
/// taken for a missing file and replaced.
fn read_if_present(path: &Path) -> Result<Option<String>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => read(path).map(Some),
    }
}

/// Refuse YAML nested deeper than [`MAX_YAML_NESTING`] before parsing it. The count is an upper
/// bound, never less than the parser's depth: block levels (the indentations still open), compact
/// nesting on one line (`- - - x`), and flow brackets, counted wherever they appear except in
/// whole-line comments (inside a quoted string they may over-count, which only a string with
/// dozens of unmatched brackets notices).
fn check_nesting(path: &Path, text: &str) -> Result<()> {
    let mut open: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let col = line.len() - body.len();
        while open.last().is_some_and(|&c| c >= col) {
            open.pop();
        }
        open.push(col);
        let mut compact = 0;
        let mut rest = body;
        while let Some(r) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("? ")) {
            compact += 1;
            rest = r.trim_start_matches([' ', '\t']);
        }
        let mut peak = flow;
        for b in body.bytes() {
            match b {
                b'[' | b'{' => {
                    flow += 1;
                    peak = peak.max(flow);
                }
                b']' | b'}' => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if open.len() + compact + peak > MAX_YAML_NESTING {
            return Err(Error::bad(
                path.display(),
                format!(
                    "line {}: YAML nested more than {MAX_YAML_NESTING} levels deep; refusing to parse it",
                    n + 1
                ),
            ));
        }
    }
    Ok(())
}

/// A value copied from the recipe into the YAML `feedstock` writes, as one YAML scalar
/// ([`crate::recipe::emit::yaml_scalar`]); refused when none reads back as the same string.
fn ys(path: &Path, what: &str, value: &str) -> Result<String> {
    crate::recipe::emit::yaml_scalar(value).ok_or_else(|| {
        Error::bad(
            path.display(),
            format!(
                "{what} {value:?} cannot be written back as one YAML string; refusing to copy it"
            ),
        )
    })
}

/// [`ys`] for each value of a list.
fn ys_all(path: &Path, what: &str, values: &[String]) -> Result<Vec<String>> {
    values.iter().map(|v| ys(path, what, v)).collect()
}

/// The recipe as lines plus its parsed outputs.
struct Recipe {
    lines: Vec<String>,
    /// Column of the `-` of each output item.
    dash: usize,
    items: Vec<Item>,
}

/// One output: its line span and parsed value.
struct Item {
    start: usize,
    end: usize,
    value: Value,
}

/// Where the split goes in this recipe.
struct Shape {
    staging: String,
    core: usize,
    /// The test entry naming the library in the core output: its lines and the condition it was under.
    test_lines: (usize, usize),
    cond: Option<String>,
    stage_var: String,
    script_env: Vec<String>,
    script_file: String,
    ignore_keys: Vec<String>,
    ignore_by_name: Vec<String>,
    compilers: Vec<String>,
    host: Vec<String>,
    payload_devel: Vec<String>,
    build_keys_expr: String,
}

impl Recipe {
    fn parse(path: &Path, text: &str) -> Result<Recipe> {
        check_nesting(path, text)?;
        let doc: Value = serde_yaml::from_str(text).bad_at(path.display(), "not YAML")?;
        if doc.get("schema_version").and_then(Value::as_u64) != Some(1) {
            return Err(Error::bad(
                path.display(),
                "expected a v1 recipe (schema_version: 1)",
            ));
        }
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let outputs = lines.iter().position(|l| l.trim_end() == "outputs:").ok_or_else(|| {
            Error::bad(path.display(), "no top-level outputs: list; expected a multi-output recipe with a staging output")
        })?;
        let first = (outputs + 1..lines.len())
            .find(|&i| !blank_or_comment(&lines[i]))
            .filter(|&i| lines[i].trim_start().starts_with("- "))
            .ok_or_else(|| Error::bad(path.display(), "outputs: is not a block list"))?;
        let dash = indent(&lines[first]);
        let end = (first..lines.len())
            .find(|&i| !blank_or_comment(&lines[i]) && indent(&lines[i]) < dash)
            .unwrap_or(lines.len());
        let starts: Vec<usize> = (first..end)
            .filter(|&i| indent(&lines[i]) == dash && lines[i].trim_start().starts_with("- "))
            .collect();
        let mut items = Vec::new();
        for (n, &s) in starts.iter().enumerate() {
            let e = starts.get(n + 1).copied().unwrap_or(end);
            let body: String = (s..e)
                .map(|i| {
                    let l = if i == s {
                        format!("{}  {}", " ".repeat(dash), &lines[i][dash + 2..])
                    } else {
                        lines[i].clone()
                    };
                    let cut = indent(&l).min(dash + 2);
                    format!("{}\n", &l[cut..])
                })
                .collect();
            let value: Value = serde_yaml::from_str(&body).bad_at(
                path.display(),
                format_args!("output at line {} is not YAML", s + 1),
            )?;
            items.push(Item {
                start: s,
                end: e,
                value,
            });
        }
        Ok(Recipe { lines, dash, items })
    }

    fn name_of(v: &Value, kind: &str) -> Option<String> {
        v.get(kind)?.get("name")?.as_str().map(str::to_string)
    }

    /// Find the staging output, the core output that inherits it and lists the library in its
    /// tests, and everything the new output copies from them.
    fn shape(&self, path: &Path, split: &Split, opts: &FeedstockOptions) -> Result<Shape> {
        let o = &split.options;
        let (core, staging, st, test) = self.core_and_staging(path, split, opts)?;
        let (test_lines, cond) = self.test_entry(path, test)?;
        let cv = &self.items[core].value;
        let (script_file, stage_var, script_env) = build_script(path, cv, &o.core_name)?;
        let build_keys_expr = build_keys_expr(path, cv, &o.core_name)?;
        let name = |s: &str| s.split_whitespace().next().unwrap_or_default().to_string();
        let st_host = strings_at(&st.value, &["requirements", "host"]);
        let payload_devel: Vec<String> = st_host
            .iter()
            .filter(|h| {
                o.payload_packages
                    .iter()
                    .any(|p| name(h).starts_with(p.as_str()))
            })
            .map(|h| name(h))
            .collect();
        if payload_devel.is_empty() {
            return Err(Error::bad(
                path.display(),
                format!(
                    "staging output {staging}: no host dependency named {}*; expected the development package whose run-export brings {}",
                    o.payload_packages.join("*/"),
                    o.payload_packages.join(", ")
                ),
            ));
        }
        Ok(Shape {
            staging,
            core,
            test_lines,
            cond,
            stage_var,
            script_env,
            script_file,
            ignore_keys: strings_at(cv, &["build", "variant", "ignore_keys"]),
            ignore_by_name: strings_at(cv, &["requirements", "ignore_run_exports", "by_name"]),
            compilers: strings_at(&st.value, &["requirements", "build"])
                .into_iter()
                .filter(|b| b.starts_with("${{ compiler(") || b.starts_with("${{ stdlib("))
                .collect(),
            host: st_host
                .iter()
                .filter(|h| REBUILD_HOST.contains(&name(h).as_str()))
                .cloned()
                .collect(),
            payload_devel,
            build_keys_expr,
        })
    }

    /// The core output (its index), the staging output it inherits (name and item), and the line
    /// of the core's test entry that names the library.
    fn core_and_staging(
        &self,
        path: &Path,
        split: &Split,
        opts: &FeedstockOptions,
    ) -> Result<(usize, String, &Item, usize)> {
        let o = &split.options;
        let lib_short = lib_short(&opts.lazy_library);
        let expected = || {
            Error::bad(
                path.display(),
                format!(
                    "no staging output that builds {}: expected `package: {}` with `inherit:` a `staging:` output and `{}` in its tests",
                    opts.lazy_library, o.core_name, lib_short
                ),
            )
        };
        let core = self
            .items
            .iter()
            .position(|it| Self::name_of(&it.value, "package").as_deref() == Some(&o.core_name))
            .ok_or_else(expected)?;
        let cv = &self.items[core].value;
        let staging = cv.get("inherit").and_then(|i| {
            i.as_str()
                .map(str::to_string)
                .or_else(|| i.get("from")?.as_str().map(str::to_string))
        });
        let staging = staging.ok_or_else(expected)?;
        let st = self
            .items
            .iter()
            .find(|it| Self::name_of(&it.value, "staging").as_deref() == Some(&staging))
            .ok_or_else(expected)?;
        let test = (self.items[core].start..self.items[core].end)
            .find(|&i| self.lines[i].trim() == format!("- {lib_short}"))
            .ok_or_else(expected)?;
        Ok((core, staging, st, test))
    }

    /// The lines of the test entry at line `test` and the condition it sits under: the entry
    /// alone under `- if: COND / then:` (as in PR #518), or a plain list item.
    fn test_entry(&self, path: &Path, test: usize) -> Result<((usize, usize), Option<String>)> {
        let (test_lines, cond) = if test >= 2
            && self.lines[test - 1].trim() == "then:"
            && self.lines[test - 2].trim_start().starts_with("- if:")
            && indent(&self.lines[test - 1]) == indent(&self.lines[test - 2]) + 2
            && self
                .lines
                .get(test + 1)
                .is_none_or(|l| blank_or_comment(l) || indent(l) < indent(&self.lines[test - 1]))
        {
            let c = self.lines[test - 2].trim_start()["- if:".len()..].trim();
            ((test - 2, test), Some(c))
        } else {
            ((test, test), None)
        };
        // The condition as YAML reads it (unquoted, a trailing comment dropped), so it is written
        // back as a value, never as the text it was.
        let cond = match cond {
            None => None,
            Some(c) => Some(
                serde_yaml::from_str::<Value>(c)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .ok_or_else(|| {
                        Error::bad(
                            path.display(),
                            format!(
                                "line {}: expected `- if: COND` with a string condition",
                                test - 1
                            ),
                        )
                    })?,
            ),
        };
        Ok((test_lines, cond))
    }

    /// Lines that add the payload packages to an output's `ignore_run_exports.by_name`.
    fn ignore_payload(
        &self,
        path: &Path,
        item: &Item,
        split: &Split,
    ) -> Result<(usize, Vec<String>)> {
        let o = &split.options;
        let field = self.dash + 2;
        let pad = |n: usize, s: &str| format!("{}{s}", " ".repeat(n));
        let name = Self::name_of(&item.value, "package").unwrap_or_default();
        let Some(req) = find_key(&self.lines, item.start, item.end, field, "requirements") else {
            return Err(Error::bad(
                path.display(),
                format!("output {name}: expected a requirements: section"),
            ));
        };
        let req_end = block_end(&self.lines, req, field, item.end);
        let why = pad(
            0,
            &format!(
                "# {} goes with the {} variant of {} (added by `splitpkg feedstock`)",
                o.payload_packages.join(", "),
                variant_name(split, true),
                o.lazy_name
            ),
        );
        let ire = find_key(&self.lines, req, req_end, field + 2, "ignore_run_exports");
        let by_name = ire.and_then(|i| {
            find_key(
                &self.lines,
                i,
                block_end(&self.lines, i, field + 2, req_end),
                field + 4,
                "by_name",
            )
        });
        Ok(match (ire, by_name) {
            (_, Some(bn)) => {
                let bn_end = block_end(&self.lines, bn, field + 4, req_end);
                let at = (bn + 1..bn_end)
                    .find(|&i| !blank_or_comment(&self.lines[i]))
                    .map(|i| indent(&self.lines[i]))
                    .unwrap_or(field + 6);
                let mut l = vec![pad(at, why.trim())];
                l.extend(
                    o.payload_packages
                        .iter()
                        .map(|p| pad(at, &format!("- {p}"))),
                );
                (last_content(&self.lines, bn, bn_end) + 1, l)
            }
            (None, None) => {
                let mut l = vec![
                    pad(field + 2, "ignore_run_exports:"),
                    pad(field + 4, "by_name:"),
                    pad(field + 6, why.trim()),
                ];
                l.extend(
                    o.payload_packages
                        .iter()
                        .map(|p| pad(field + 6, &format!("- {p}"))),
                );
                (last_content(&self.lines, req, req_end) + 1, l)
            }
            (Some(_), None) => {
                return Err(Error::bad(
                    path.display(),
                    format!(
                        "output {name}: ignore_run_exports without by_name:; expected a by_name list"
                    ),
                ));
            }
        })
    }

    /// Where and what to insert so that `lines` end the list `key:` of the block `block..end`
    /// (its keys at column `col`), creating the key when the block has none.
    fn append_to(
        &self,
        block: usize,
        end: usize,
        col: usize,
        key: &str,
        lines: Vec<String>,
    ) -> (usize, Vec<String>) {
        match find_key(&self.lines, block, end, col, key) {
            Some(k) => {
                let k_end = block_end(&self.lines, k, col, end);
                (last_content(&self.lines, k, k_end) + 1, lines)
            }
            None => {
                let mut l = vec![format!("{}{key}:", " ".repeat(col))];
                l.extend(lines);
                (block + 1, l)
            }
        }
    }

    /// The core's requirements gain the lazy output (either variant, where the library exists)
    /// as a run dependency, and with `--dlopen-note` splitpkg as a build requirement under the
    /// same condition.
    fn core_requirements(
        &self,
        path: &Path,
        split: &Split,
        opts: &FeedstockOptions,
        shape: &Shape,
    ) -> Result<Vec<(usize, Vec<String>)>> {
        let o = &split.options;
        let core = &self.items[shape.core];
        let field = self.dash + 2;
        let pad = |n: usize, s: &str| format!("{}{s}", " ".repeat(n));
        let req = find_key(&self.lines, core.start, core.end, field, "requirements").ok_or_else(
            || {
                Error::bad(
                    path.display(),
                    format!("output {}: expected a requirements: section", o.core_name),
                )
            },
        )?;
        let req_end = block_end(&self.lines, req, field, core.end);
        let spec = ys(
            path,
            "build string",
            &split.same_build_number(&o.lazy_name, BUILD_NUMBER),
        )?;
        let cond = match &shape.cond {
            Some(c) => Some(ys(path, "condition", c)?),
            None => None,
        };
        // `- ITEM`, under `- if: COND / then:` where the lazy output has a condition.
        let under_cond = |at: usize, item: &str| match &cond {
            Some(c) => vec![
                pad(at, &format!("- if: {c}")),
                pad(at + 2, "then:"),
                pad(at + 4, &format!("- {item}")),
            ],
            None => vec![pad(at, &format!("- {item}"))],
        };
        let mut run_lines = vec![pad(
            field + 4,
            &format!(
                "# {} comes from {} (either variant), added by `splitpkg feedstock`",
                opts.lazy_library, o.lazy_name
            ),
        )];
        run_lines.extend(under_cond(field + 4, &spec));
        let mut inserts = vec![self.append_to(req, req_end, field + 2, "run", run_lines)];
        if opts.dlopen_note.is_some() {
            let mut l = vec![pad(
                field + 4,
                "# `splitpkg note` in build.sh (added by `splitpkg feedstock`)",
            )];
            l.extend(under_cond(
                field + 4,
                &crate::recipe::emit::splitpkg_requirement(),
            ));
            inserts.push(self.append_to(req, req_end, field + 2, "build", l));
        }
        Ok(inserts)
    }

    /// The recipe with the core output edited and the lazy output added after it.
    fn patched(
        &self,
        path: &Path,
        split: &Split,
        opts: &FeedstockOptions,
        shape: &Shape,
    ) -> Result<String> {
        let core = &self.items[shape.core];
        let pad = |n: usize, s: &str| format!("{}{s}", " ".repeat(n));
        let mut inserts = self.core_requirements(path, split, opts, shape)?;
        // The staging's payload run-export now belongs to the magma variant only: the core and
        // every other output built from the staging (pytorch has libmagma-devel in its host too,
        // and the lazy output's magma variant in its host through the core) ignore it.
        for (n, item) in self.items.iter().enumerate() {
            let inherits =
                item.value.get("inherit").and_then(Value::as_str) == Some(shape.staging.as_str());
            if n == shape.core || inherits {
                inserts.push(self.ignore_payload(path, item, split)?);
            }
        }

        // The new output, after the core output (before the next output's banner comment).
        let mut at = core.end;
        while at > core.start + 1
            && (blank_or_comment(&self.lines[at - 1]) && indent(&self.lines[at - 1]) <= self.dash
                || self.lines[at - 1].trim().is_empty())
        {
            at -= 1;
        }
        let block = render_output(path, split, opts, shape)?;
        let mut l = vec![String::new()];
        l.extend(block.lines().map(|s| {
            if s.is_empty() {
                String::new()
            } else {
                pad(self.dash, s)
            }
        }));
        inserts.push((at, l));

        // Assemble: every insert is at an index of the original lines; the moved test entry is
        // dropped.
        let (a, b) = shape.test_lines;
        let mut out: Vec<String> = Vec::new();
        for i in 0..=self.lines.len() {
            for (_, l) in inserts.iter().filter(|(at, _)| *at == i) {
                out.extend(l.iter().cloned());
            }
            if i < self.lines.len() && !(a..=b).contains(&i) {
                out.push(self.lines[i].clone());
            }
        }
        Ok(out.join("\n") + "\n")
    }
}

/// The new output, at column 0 (the caller indents it like the other outputs). Every value that
/// comes from the recipe (`path`) is passed to the template as a YAML scalar ([`ys`]).
fn render_output(
    path: &Path,
    split: &Split,
    opts: &FeedstockOptions,
    shape: &Shape,
) -> Result<String> {
    let o = &split.options;
    let env = crate::recipe::emit::environment()?;
    let key_expr = format!("${{{{ {} }}}}", o.variant_key);
    let skip = match &shape.cond {
        Some(c) => Some(ys(path, "condition", &format!("${{{{ not ({c}) }}}}"))?),
        None => None,
    };
    let by_name: Vec<String> = shape
        .ignore_by_name
        .iter()
        .filter(|n| !o.payload_packages.contains(n))
        .cloned()
        .collect();
    let ctx = minijinja::context! {
        lib => opts.lazy_library.as_str(),
        lib_short => ys(path, "library", &lib_short(&opts.lazy_library))?,
        lazy => o.lazy_name.as_str(),
        core => o.core_name.as_str(),
        staging => ys(path, "staging output name", &shape.staging)?,
        key => o.variant_key.as_str(),
        key_expr => key_expr.as_str(),
        with => variant_name(split, true),
        with_upper => variant_name(split, true).to_uppercase(),
        without => variant_name(split, false),
        preferred => split.preferred().name.as_str(),
        non_preferred => split.non_preferred().name.as_str(),
        track_feature => split.track_feature(),
        build_string => ys(path, "build string", &split.lazy_build_string(&key_expr, "${{ hash }}", BUILD_NUMBER))?,
        skip => skip,
        ignore_keys => ys_all(path, "variant ignore key", &shape.ignore_keys)?,
        stage_var => ys(path, "script env key", &shape.stage_var)?,
        script_env => shape.script_env.clone(),
        script_file => ys(path, "script file", &shape.script_file)?,
        splitpkg_requirement => crate::recipe::emit::splitpkg_requirement(),
        compilers => ys_all(path, "build requirement", &shape.compilers)?,
        host => ys_all(path, "host requirement", &shape.host)?,
        payload_devel => ys_all(path, "host requirement", &shape.payload_devel)?,
        payload_packages => o.payload_packages.clone(),
        core_spec => ys(path, "build string", &split.same_build_number(&o.core_name, BUILD_NUMBER))?,
        forbid => split.forbid_payload(),
        ignore_by_name => ys_all(path, "ignore_run_exports name", &by_name)?,
    };
    env.get_template("feedstock-output.yaml")
        .and_then(|t| t.render(&ctx))
        .failed_at("rendering the feedstock output")
}

/// build.sh: the core stage stops installing the library, the stage that links the Python
/// package's `lib/` to `$PREFIX/lib` checks the library is a link there, and a new stage installs
/// the variant.
fn patch_script(
    path: &Path,
    text: &str,
    split: &Split,
    opts: &FeedstockOptions,
    shape: &Shape,
) -> Result<String> {
    let o = &split.options;
    let script = StageCase::find(path, text, &shape.stage_var)?;
    let core_arm = script.core_arm(&o.core_name)?;
    let core_end = script.arm_end(core_arm);
    let torch_dir = script.torch_dir(core_arm, core_end, &o.core_name)?;
    let lib = &opts.lazy_library;
    let core_add = script.core_additions(split, opts);
    let link_check = script.link_check(core_arm, lib, &o.lazy_name);
    let new_arm = script.new_stage(split, lib, &torch_dir)?;
    let default_arm = script
        .arms
        .iter()
        .copied()
        .find(|&i| script.lines[i].trim() == "*)")
        .unwrap_or(script.esac);

    let mut inserts: Vec<(usize, Vec<String>)> = vec![(core_end, core_add), (default_arm, new_arm)];
    inserts.extend(link_check);
    let lines = &script.lines;
    let mut out: Vec<String> = Vec::new();
    for i in 0..=lines.len() {
        for (_, l) in inserts.iter().filter(|(at, _)| *at == i) {
            out.extend(l.iter().cloned());
        }
        if i < lines.len() {
            out.push(lines[i].to_string());
        }
    }
    Ok(out.join("\n") + "\n")
}

/// The `case ${STAGE} in … esac` of a feedstock's build.sh that selects the stage the recipe sets.
struct StageCase<'a> {
    path: &'a Path,
    lines: Vec<&'a str>,
    /// The stage variable (`build.script.env` of the core output).
    var: &'a str,
    /// The `esac` line.
    esac: usize,
    /// The indentation of the arms' patterns, and the lines where arms start.
    arm_indent: usize,
    arms: Vec<usize>,
}

impl<'a> StageCase<'a> {
    fn find(path: &'a Path, text: &'a str, var: &'a str) -> Result<Self> {
        let lines: Vec<&str> = text.lines().collect();
        let case = lines
            .iter()
            .position(|l| {
                let t = l.trim();
                [
                    format!("case ${{{var}}} in"),
                    format!("case \"${{{var}}}\" in"),
                    format!("case ${var} in"),
                    format!("case \"${var}\" in"),
                ]
                .contains(&t.to_string())
            })
            .ok_or_else(|| {
                Error::bad(
                    path.display(),
                    format!("expected `case ${{{var}}} in` selecting the stage the recipe sets"),
                )
            })?;
        let esac = (case..lines.len())
            .find(|&i| lines[i].trim() == "esac" && indent(lines[i]) == indent(lines[case]))
            .ok_or_else(|| {
                Error::bad(
                    path.display(),
                    format!(
                        "line {}: `case ${{{var}}}` without a matching esac",
                        case + 1
                    ),
                )
            })?;
        let arm_indent = indent(lines[case]) + 2;
        let arms: Vec<usize> = (case + 1..esac)
            .filter(|&i| {
                indent(lines[i]) == arm_indent
                    && lines[i].trim().ends_with(')')
                    && !lines[i].trim().starts_with('#')
            })
            .collect();
        Ok(StageCase {
            path,
            lines,
            var,
            esac,
            arm_indent,
            arms,
        })
    }

    /// The `;;` that ends the arm starting at `start` (or the `esac`).
    fn arm_end(&self, start: usize) -> usize {
        (start + 1..self.esac)
            .find(|&i| self.lines[i].trim() == ";;" && indent(self.lines[i]) <= self.arm_indent + 2)
            .unwrap_or(self.esac)
    }

    /// A line of an arm's body, indented as the arm's commands are.
    fn pad(&self, s: &str) -> String {
        format!("{}{s}", " ".repeat(self.arm_indent + 2))
    }

    /// The `CORE)` arm: the stage that installs the core output.
    fn core_arm(&self, core_name: &str) -> Result<usize> {
        let var = self.var;
        self.arms
            .iter()
            .copied()
            .find(|&i| self.lines[i].trim() == format!("{core_name})"))
            .ok_or_else(|| {
                Error::bad(
                    self.path.display(),
                    format!(
                        "no `{core_name})` arm in `case ${{{var}}}`; expected the stage that installs {core_name}"
                    ),
                )
            })
    }

    /// The directory the core stage installs from: `mv DIR/lib/* ${PREFIX}/lib/`.
    fn torch_dir(&self, core_arm: usize, core_end: usize, core_name: &str) -> Result<String> {
        (core_arm..core_end)
            .find_map(|i| {
                let w: Vec<&str> = self.lines[i].split_whitespace().collect();
                match w.as_slice() {
                    [cmd, src, dst]
                        if *cmd == "mv" && (dst.trim_end_matches('/') == "${PREFIX}/lib" || dst.trim_end_matches('/') == "$PREFIX/lib") =>
                    {
                        src.strip_suffix("/lib/*").map(str::to_string)
                    }
                    _ => None,
                }
            })
            .ok_or_else(|| {
                Error::bad(
                    self.path.display(),
                    format!("the `{core_name})` stage: expected `mv DIR/lib/* ${{PREFIX}}/lib/` (where the staging left the libraries)"),
                )
            })
    }

    /// What the core stage gains at its end: the library is removed (the lazy output installs
    /// it), and with `--dlopen-note` the loading library declares it.
    fn core_additions(&self, split: &Split, opts: &FeedstockOptions) -> Vec<String> {
        let lib = &opts.lazy_library;
        let mut core_add = vec![
            self.pad(&format!(
                "# {lib} is the {} output's (added by `splitpkg feedstock`)",
                split.options.lazy_name
            )),
            self.pad(&format!("rm -f ${{PREFIX}}/lib/{lib}")),
        ];
        if let Some(core_file) = &opts.dlopen_note {
            // Only the builds that have the file (CUDA on linux); the recipe puts splitpkg in
            // this output's build requirements under the same condition.
            let f = format!("${{PREFIX}}/lib/{core_file}");
            core_add.extend([
                self.pad(&format!("if [[ -e {f} ]]; then")),
                self.pad(&format!(
                    "  splitpkg note {f} --out {f} --soname {lib} --feature linalg --priority required"
                )),
                self.pad("fi"),
            ]);
        }
        core_add
    }

    /// The stage that links the Python package's files to $PREFIX: the library must be a link
    /// there. Where to insert the check, and its lines; none when no other arm links.
    fn link_check(
        &self,
        core_arm: usize,
        lib: &str,
        lazy_name: &str,
    ) -> Option<(usize, Vec<String>)> {
        let lines = &self.lines;
        self.arms
            .iter()
            .filter(|&&a| a != core_arm)
            .find_map(|&a| {
                let end = self.arm_end(a);
                let links = (a..end).any(|i| lines[i].trim_start().starts_with("ln -s"));
                let dir =
                    (a..end).find_map(|i| lines[i].trim().strip_prefix("pushd ").map(str::trim))?;
                links.then(|| {
                    let f = format!("{dir}/lib/{lib}");
                    (
                        end,
                        vec![
                            self.pad(&format!("# {lib} belongs to {lazy_name}: here only a link to it (added by `splitpkg feedstock`)")),
                            self.pad(&format!("if [[ -e {f} && ! -L {f} ]]; then")),
                            self.pad(&format!("  echo \"{f} is a file; expected a link to ${{PREFIX}}/lib ({lazy_name})\" >&2")),
                            self.pad("  exit 1"),
                            self.pad("fi"),
                        ],
                    )
                })
            })
    }

    /// The new arm that installs the variant (templates/feedstock-stage.sh), indented as an arm.
    fn new_stage(&self, split: &Split, lib: &str, torch_dir: &str) -> Result<Vec<String>> {
        let o = &split.options;
        let env = crate::recipe::emit::environment()?;
        let stage = env
            .get_template("feedstock-stage.sh")
            .and_then(|t| {
                t.render(minijinja::context! {
                    lazy => o.lazy_name.as_str(), lib => lib, key => o.variant_key.as_str(),
                    with => variant_name(split, true), with_upper => variant_name(split, true).to_uppercase(),
                    without => variant_name(split, false), torch_dir => torch_dir,
                })
            })
            .failed_at("rendering the build.sh stage")?;
        Ok(stage
            .lines()
            .map(|s| {
                if s.is_empty() {
                    String::new()
                } else {
                    format!("{}{s}", " ".repeat(self.arm_indent))
                }
            })
            .collect())
    }
}

/// conda_build_config.yaml gains the variant key with both values. conda-smithy writes it into each
/// linux `.ci_support` file as one list (only the lazy output uses it), so no job is added.
fn patch_cbc(text: Option<&str>, split: &Split) -> String {
    let o = &split.options;
    let mut out = text.unwrap_or_default().to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "# The variants of {} (added by `splitpkg feedstock`). Only that output uses this key,\n# so conda-smithy builds both in the same CI job; a plain install gets {}.\n{}:\n",
        o.lazy_name,
        split.preferred().name,
        o.variant_key
    ));
    for v in &split.variants {
        out.push_str(&format!("  - {}\n", v.name));
    }
    out
}

/// The name of the variant with (`true`) or without the payload; every split has both.
fn variant_name(split: &Split, payload: bool) -> &str {
    split
        .variant_with_payload(payload)
        .map_or("", |v| v.name.as_str())
}

/// The core output's staged build script: its file (`build`), the environment variable that
/// selects the stage (the one set to the core's name), and the rest of its environment.
fn build_script(path: &Path, cv: &Value, core_name: &str) -> Result<(String, String, Vec<String>)> {
    let script = cv.get("build").and_then(|b| b.get("script")).ok_or_else(|| {
        Error::bad(
            path.display(),
            format!("output {core_name}: expected build.script with `file:` and `env:` (the staged build script)"),
        )
    })?;
    let script_file = script
        .get("file")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let env = script.get("env").and_then(Value::as_mapping);
    let stage = env.and_then(|m| m.iter().find(|(_, v)| v.as_str() == Some(core_name)));
    let (Some((stage_var, _)), true) = (stage, script_file == "build") else {
        return Err(Error::bad(
            path.display(),
            format!(
                "output {core_name}: expected `script: {{file: build, env: {{STAGE_VARIABLE: {core_name}}}}}` (build.sh selects the stage)",
            ),
        ));
    };
    let stage_var = stage_var.as_str().unwrap_or_default().to_string();
    let script_env = env
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() != Some(stage_var.as_str()))
        .map(|(k, v)| env_line(path, core_name, k, v))
        .collect::<Result<_>>()?;
    Ok((script_file, stage_var, script_env))
}

/// One `KEY: VALUE` line of the script environment the new output repeats: the key and a string
/// value as YAML scalars ([`ys`]), a number or boolean as YAML writes it. Anything else (a nested
/// mapping, a non-string key) is refused rather than dropped: the build would differ silently.
fn env_line(path: &Path, core_name: &str, k: &Value, v: &Value) -> Result<String> {
    let refuse = || {
        Error::bad(
            path.display(),
            format!("output {core_name}: build.script.env: expected string keys and scalar values"),
        )
    };
    let key = ys(path, "script env key", k.as_str().ok_or_else(refuse)?)?;
    let value = match v {
        Value::String(s) => ys(path, "script env value", s)?,
        Value::Bool(_) | Value::Number(_) => serde_yaml::to_string(v)
            .map_err(|_| refuse())?
            .trim_end()
            .to_string(),
        _ => return Err(refuse()),
    };
    Ok(format!("{key}: {value}"))
}

/// The core output's build string without its `_${{ hash }}_${{ build_number }}` tail: the
/// expression of the build keys the new output repeats.
fn build_keys_expr(path: &Path, cv: &Value, core_name: &str) -> Result<String> {
    let build_string = cv
        .get("build")
        .and_then(|b| b.get("string"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let expr = build_string.strip_suffix("_${{ hash }}_${{ build_number }}").ok_or_else(|| {
        Error::bad(
            path.display(),
            format!(
                "output {core_name}: expected its build string to end in _${{{{ hash }}}}_${{{{ build_number }}}}, not {build_string:?}",
            ),
        )
    })?;
    Ok(expr.to_string())
}

/// The strings under `keys` in `v` (a string or a list of them, flattened), or none.
fn strings_at(v: &Value, keys: &[&str]) -> Vec<String> {
    let mut cur = Some(v);
    for k in keys {
        cur = cur.and_then(|c| c.get(*k));
    }
    cur.map(flat_strings).unwrap_or_default()
}

/// `libtorch_cuda_linalg.so` → `torch_cuda_linalg` (what `package_contents: lib:` lists).
fn lib_short(lib: &str) -> String {
    lib.strip_prefix("lib")
        .unwrap_or(lib)
        .split(".so")
        .next()
        .unwrap_or_default()
        .to_string()
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches(' ').len()
}

fn blank_or_comment(l: &str) -> bool {
    let t = l.trim();
    t.is_empty() || t.starts_with('#')
}

/// The line `key:` at exactly `col` within `from..to`.
fn find_key(lines: &[String], from: usize, to: usize, col: usize, key: &str) -> Option<usize> {
    (from..to).find(|&i| {
        indent(&lines[i]) == col && lines[i].trim_end().trim_start() == format!("{key}:")
    })
}

/// The end (exclusive) of the block that starts at `start` with its key at `col`.
fn block_end(lines: &[String], start: usize, col: usize, limit: usize) -> usize {
    (start + 1..limit)
        .find(|&i| !blank_or_comment(&lines[i]) && indent(&lines[i]) <= col)
        .unwrap_or(limit)
}

/// The last line of `from..to` with content.
fn last_content(lines: &[String], from: usize, to: usize) -> usize {
    (from..to)
        .rev()
        .find(|&i| !blank_or_comment(&lines[i]))
        .unwrap_or(from)
}

/// Every string of a requirement list, inside `if:`/`then:`/`else:` branches too.
fn flat_strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(flat_strings).collect(),
        Value::Mapping(m) => ["then", "else"]
            .iter()
            .filter_map(|k| m.get(*k))
            .flat_map(flat_strings)
            .collect(),
        _ => Vec::new(),
    }
}

/// A unified diff (three lines of context, `\\ No newline at end of file` where one is missing)
/// by Myers' algorithm ([`similar`]): time O((N+M)·D) and memory O(N+M) for N and M lines and D
/// lines changed. A patch only inserts lines and drops the moved test entry, so D stays small
/// however long the files are (a 40,000-line conda_build_config.yaml costs one pass).
pub fn unified_diff(a: &str, b: &str, from: &str, to: &str) -> String {
    if a == b {
        return String::new();
    }
    similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .diff_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(from, to)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_lines_are_the_ones_git_prints() {
        assert_eq!(mode_lines(None, 0o644), "new file mode 100644\n");
        assert_eq!(mode_lines(None, 0o750), "new file mode 100755\n");
        assert_eq!(
            mode_lines(Some(0o644), 0o755),
            "old mode 100644\nnew mode 100755\n"
        );
        assert_eq!(
            mode_lines(Some(0o755), 0o644),
            "old mode 100755\nnew mode 100644\n"
        );
        assert_eq!(
            mode_lines(Some(0o600), 0o644),
            "",
            "git keeps only the x bit"
        );
        let mode_only = FileChange {
            path: PathBuf::from(SCRIPT),
            before: Some("x\n".into()),
            after: "x\n".into(),
            before_mode: Some(0o644),
            after_mode: 0o755,
        };
        assert_eq!(
            mode_only.diff(),
            "diff --git a/recipe/build.sh b/recipe/build.sh\nold mode 100644\nnew mode 100755\n"
        );
        let same = FileChange {
            after_mode: 0o644,
            ..mode_only
        };
        assert_eq!(same.diff(), "", "no change, no diff");
    }

    #[test]
    fn the_diff_marks_a_missing_final_newline_and_keeps_context_at_three() {
        let a: String = (0..20).map(|i| format!("{i}\n")).collect();
        let b = a.replace("10\n", "10\nnew\n");
        let d = unified_diff(&a, &b, "a/f", "b/f");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -9,6 +9,7 @@\n 8\n 9\n 10\n+new\n 11\n 12\n 13\n"
        );
        let d = unified_diff("a\nb", "a\nb\nc\n", "a/f", "b/f");
        assert!(d.contains("\\ No newline at end of file"), "{d}");
    }

    #[test]
    fn nesting_is_bounded_before_parsing() {
        let p = Path::new("recipe.yaml");
        let ok = "a:\n  b:\n    - c: ${{ x }}\n    - [1, {d: 2}]\n# [[[[ in a comment\n";
        assert!(check_nesting(p, ok).is_ok());
        for deep in [
            format!("a: {}", "[".repeat(65)),
            format!("a:\n  {}x\n", "- ".repeat(65)),
            (0..66).map(|i| format!("{}k:\n", " ".repeat(i))).collect(),
        ] {
            let e = check_nesting(p, &deep).unwrap_err().to_string();
            assert!(e.starts_with("recipe.yaml: line "), "{e}");
            assert!(e.contains("nested more than 64 levels"), "{e}");
        }
    }
}
