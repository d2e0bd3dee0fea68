//! `splitpkg pack`: real `.conda` packages for every output of a confined plan, in a local channel
//! indexed with `rattler_index`.
//!
//! What goes where comes from the plan (every tree path is in exactly one output) and the metadata
//! from [`crate::recipe::split`] (names, versions, build strings, depends, constrains, track_features):
//! pack writes `Split::packages()` into `info/index.json` as they are. Packages:
//!
//! * **core** and the **lazy** library's variant found in the tree (`magma`);
//! * the other variant (`nomagma`) only from `--lazy-variant nomagma=FILE`, after FILE passed
//!   `verify-variant` against the plan's contract; without it no such package is invented;
//! * **payload** packages (`libmagma`) from the payload files in the tree, at the version the
//!   payload library names (`libmagma.so.2.8.0` → 2.8.0);
//! * **stand-ins** (see [`crate::channel::standin`]) for manifest entries no real package provides.
//!
//! Guarantees, each checked before the channel is touched:
//!
//! * *lossless*: the packages are read back and every tree path is in exactly one of core, the
//!   tree's lazy variant and the payload packages (the other variant is an alternative to the lazy
//!   output, not part of the tree);
//! * *reproducible*: sorted paths, fixed archive timestamps (`timestamp: None` in
//!   `rattler_package_streaming`), deterministic tar headers, no absolute paths or dates in
//!   `info/`; build-string hashes come from names and keys, not from the clock. zstd's
//!   multithreaded output does not depend on the thread count, so the bytes do not depend on the
//!   machine either;
//! * *atomic*: everything is built in a work directory next to `--out`; packages are renamed into
//!   the channel one by one (rename is atomic), the channel is indexed last, and
//!   `splitpkg.json` is replaced atomically. A failure before that leaves the channel untouched.
//!
//! `CHANNEL/splitpkg.json` describes every split packed into the channel (names, variants, which is
//! preferred, payload packages, stand-ins), so `solve` and `env` need no flags to find them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::analysis::contract::ContractFile;
use crate::analysis::graph::NodeKind;
use crate::analysis::inspect::Inspection;
use crate::analysis::plan::{Plan, Role};
use crate::channel::info::{CHANNEL_FILE, CHANNEL_SCHEMA, ChannelInfo, MissingVariant, NOARCH, PackRecord, PackedPackage, SUBDIR};
use crate::channel::standin::{Manifest, StandIn};
use crate::error::{Error, Result};
use crate::input::{MemberKind, Members, Tree, TreeKind, safe_member_path};
use crate::progress::Progress;
use crate::recipe::split::{PackageModel, Split, SplitOptions};

/// zstd level for the inner archives: 3 packs the 1.1 GB torch 2.11 wheel in well under a minute
/// on 2 cores; conda-forge uploads use 19 (several times slower, ~10 % smaller).
pub const DEFAULT_COMPRESSION: i32 = 3;

pub struct PackOptions<'a> {
    pub out: PathBuf,
    /// The nomagma build of the lazy library (`--lazy-variant nomagma=FILE`).
    pub lazy_variant: Option<(String, PathBuf)>,
    pub standins: Manifest,
    /// `built-in` or the manifest's file name, for the report.
    pub standins_from: String,
    pub compression_level: i32,
    pub threads: Option<u32>,
    /// Pack symlinks that point outside the tree instead of refusing them.
    pub allow_absolute_symlinks: bool,
    pub progress: &'a Progress,
}

#[derive(Debug, Clone, Serialize)]
pub struct Lossless {
    /// Tree paths (files, hard links, symlinks) the plan assigns.
    pub tree_paths: usize,
    /// Tree paths found in exactly one package after reading the packages back.
    pub placed_once: usize,
    pub missing: Vec<String>,
    pub doubled: Vec<String>,
    /// Package paths that are not tree paths (must be none).
    pub extra: Vec<String>,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackReport {
    pub schema: &'static str,
    pub schema_version: u32,
    pub input: PackInput,
    pub channel: String,
    pub core: String,
    pub lazy: String,
    pub dep: String,
    pub record: PackRecord,
    pub standins: Vec<PackedPackage>,
    /// Stand-ins not written because a real package of that name is in this pack.
    pub standins_replaced_by_real: Vec<String>,
    pub standins_from: String,
    pub lossless: Lossless,
    /// Every tree path → the package file that holds it.
    pub paths: BTreeMap<String, String>,
    pub real_bytes: u64,
    pub represented_bytes: u64,
    pub compression_level: i32,
    pub indexed: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PackInput {
    pub path: String,
    pub kind: TreeKind,
    pub verdict: String,
    pub files: usize,
    pub bytes: u64,
}

/// Adjust the emit-style options for packing: core depends on stand-ins that provide a library
/// a core file NEEDs and the tree lacks (what run-exports would add in a real build), and the
/// payload pin falls back to the payload stand-in's version when the tree has no payload library.
pub fn options_for_pack(mut options: SplitOptions, ins: &Inspection, plan: &Plan, manifest: &Manifest) -> SplitOptions {
    let core: BTreeSet<&str> =
        plan.outputs.iter().filter(|o| o.role == Role::Core).flat_map(|o| o.files.iter().map(String::as_str)).collect();
    let g = &ins.graph;
    let mut deps = BTreeSet::new();
    for n in g.nodes.iter().filter(|n| n.kind == NodeKind::External) {
        if !g.in_edges(n.id).any(|e| core.contains(g.nodes[e.from].name.as_str())) {
            continue;
        }
        if let Some(s) = manifest.standins.iter().find(|s| s.provides.iter().any(|p| p == &n.name))
            && !options.payload_packages.contains(&s.name)
        {
            deps.insert(format!("{} >={}", s.name, s.version));
        }
    }
    options.external_depends = deps.into_iter().collect();
    if options.payload_version.is_empty()
        && let Some(s) = options.payload_packages.first().and_then(|p| manifest.get(p))
    {
        options.payload_version = s.version.clone();
    }
    options
}

/// What one package is made of before it is written.
struct Build {
    model: PackageModel,
    role: Role,
    standin: Option<StandIn>,
    subdir: &'static str,
    stage: PathBuf,
    /// Content paths (relative to the prefix) → what is there.
    content: BTreeMap<String, Staged>,
    from: String,
    summary: String,
}

#[derive(Debug, Clone)]
enum Staged {
    File { size: u64, sha256: String },
    Symlink { target: String },
}

/// The work directory, removed when pack returns; with it, on failure, any ancestors of `--out`
/// that pack created (so a failed run leaves nothing behind). Only empty directories are removed.
struct WorkDir(PathBuf, Vec<PathBuf>, bool);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if !self.2 {
            for d in &self.1 {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

pub fn pack(ins: &Inspection, plan: &Plan, split: &Split, opts: &PackOptions) -> Result<PackReport> {
    let o = &split.options;
    let input = &ins.tree.source;
    let out = &opts.out;
    if out.exists() && !out.is_dir() {
        return Err(Error::Usage(format!("--out {}: exists and is not a directory", out.display())));
    }
    if !(1..=22).contains(&opts.compression_level) {
        return Err(Error::Usage(format!("--compression-level {}: zstd levels are 1 to 22", opts.compression_level)));
    }
    if ins.tree.kind == TreeKind::Directory
        && let (Ok(i), Some(parent)) = (input.canonicalize(), absolute_parent(out))
        && parent.starts_with(&i)
    {
        return Err(Error::Usage(format!("--out {} is inside the input tree {}", out.display(), input.display())));
    }
    // The channel's description first: a channel that holds another split is refused before any work.
    let existing = if out.join(CHANNEL_FILE).exists() { Some(ChannelInfo::load(out)?) } else { None };
    same_split(existing.as_ref(), o, &plan.options.dep, out)?;

    // A link out of the tree would point wherever the installing machine has that path.
    if !opts.allow_absolute_symlinks
        && let Some((path, target)) = ins.tree.outside_symlinks().next()
    {
        return Err(Error::bad(
            member_name(&ins.tree, path),
            format!("symlink to {target} points outside the package; refusing (pass --allow-absolute-symlinks to pack it as it is)"),
        ));
    }

    let lazy_lib = plan.lazy_library.as_ref().ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
    let with = split.variants.iter().find(|v| v.with_payload).expect("payload variant").clone();
    let without = split.variants.iter().find(|v| !v.with_payload).expect("slim variant").clone();
    let mut missing_variants = Vec::new();
    let mut notes = Vec::new();
    // The other variant: checked before anything is built.
    let other_file = match &opts.lazy_variant {
        Some((name, file)) => {
            if name != &without.name {
                return Err(Error::Usage(format!(
                    "--lazy-variant {name}=…: only the {} build can be added; the {} build is the tree's own",
                    without.name, with.name
                )));
            }
            let contract = ContractFile::from_plan(plan).ok_or_else(|| Error::internal("a confined plan without a lazy library"))?;
            let report = crate::recipe::verify::verify_variant(file, name, &contract)?;
            if !report.pass {
                let failed: Vec<String> = report.checks.iter().filter(|c| !c.pass).map(|c| format!("{} ({})", c.name, c.detail)).collect();
                return Err(Error::Refused(format!(
                    "{}: not a {name} build of {}: {}",
                    file.display(),
                    Tree::file_name(&lazy_lib.path),
                    failed.join("; ")
                )));
            }
            Some(file.clone())
        }
        None => {
            missing_variants.push(MissingVariant {
                variant: without.name.clone(),
                why: format!(
                    "no {} build of {} was given (--lazy-variant {}=FILE); none was invented",
                    without.name,
                    Tree::file_name(&lazy_lib.path),
                    without.name
                ),
            });
            None
        }
    };

    // Names, versions and build strings become file names: only conda's characters, no `/`.
    for m in split.packages() {
        for (what, v) in [("name", &m.name), ("version", &m.version), ("build", &m.build)] {
            if v.is_empty() || v.starts_with('.') || !v.chars().all(|c| c.is_ascii_alphanumeric() || "._+!-".contains(c)) {
                return Err(Error::bad(
                    input.display(),
                    format!("package {what} {v:?} is not a conda {what} (letters, digits and ._+!- only); refusing"),
                ));
            }
        }
    }

    // Work directory next to --out, so the final renames stay on one file system.
    let out_abs = absolute(out)?;
    let parent = out_abs.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    // Deepest first, so that removing them on failure goes bottom-up.
    let created: Vec<PathBuf> = parent.ancestors().take_while(|a| !a.exists()).map(Path::to_path_buf).collect();
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let out_name = out_abs.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "channel".into());
    let mut work = WorkDir(parent.join(format!(".{out_name}.splitpkg-pack-{}", std::process::id())), created, false);
    let _ = std::fs::remove_dir_all(&work.0);
    std::fs::create_dir_all(&work.0).map_err(|e| Error::io(&work.0, e))?;

    // The packages and where every tree path goes.
    let models = split.packages();
    let core_model = models.iter().find(|m| m.variant.is_none()).expect("core model").clone();
    let model_of = |v: &str| models.iter().find(|m| m.variant.as_ref().is_some_and(|x| x.name == v)).expect("variant model").clone();
    let input_name = Tree::file_name(&input.display().to_string()).to_string();
    let version_text = &o.version;
    let mut builds: Vec<Build> = Vec::new();
    let new_build = |model: PackageModel, role: Role, subdir: &'static str, from: String, summary: String| Build {
        stage: work.0.join("stage").join(format!("{}-{}-{}", model.name, model.version, model.build)),
        model,
        role,
        standin: None,
        subdir,
        content: BTreeMap::new(),
        from,
        summary,
    };
    builds.push(new_build(
        core_model,
        Role::Core,
        SUBDIR,
        "tree".into(),
        format!("{} {version_text}: everything of {input_name} except {}", o.core_name, Tree::file_name(&lazy_lib.path)),
    ));
    builds.push(new_build(
        model_of(&with.name),
        Role::Lazy,
        SUBDIR,
        "tree".into(),
        format!("{} {version_text}, {} variant (the build in {input_name})", Tree::file_name(&lazy_lib.path), with.name),
    ));
    let mut placement: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for output in &plan.outputs {
        for path in &output.files {
            let idx = match output.role {
                Role::Core => 0,
                Role::Lazy => 1,
                Role::Payload => {
                    let name = split
                        .payload_package_for(path)
                        .ok_or_else(|| Error::Usage("the plan has payload files but no --payload-package".into()))?;
                    match builds.iter().position(|b| b.role == Role::Payload && b.model.name == name) {
                        Some(i) => i,
                        None => {
                            let version = if o.payload_version.is_empty() { "0".to_string() } else { o.payload_version.clone() };
                            builds.push(new_build(
                                split.payload_package(name, &version),
                                Role::Payload,
                                SUBDIR,
                                "tree".into(),
                                format!("{name} {version}: the {} payload files of {input_name}", plan.options.dep),
                            ));
                            builds.len() - 1
                        }
                    }
                }
            };
            let rel = split.install_path(path);
            if rel == "info" || rel.starts_with("info/") {
                return Err(Error::bad(member_name(&ins.tree, path), "would land in the package's info/ (its metadata); refusing"));
            }
            placement.insert(path.clone(), (idx, rel));
        }
    }
    let tree_paths: BTreeSet<String> = placement.keys().cloned().collect();

    // Stage the tree's content.
    let stages: Vec<PathBuf> = builds.iter().map(|b| b.stage.clone()).collect();
    let staged = stage_tree(input, ins.tree.kind, &placement, &stages, opts.progress)?;
    for (path, (idx, rel)) in &placement {
        let s = staged
            .get(path)
            .ok_or_else(|| Error::internal(format!("{}: {path} was planned but not found while unpacking", input.display())))?;
        builds[*idx].content.insert(rel.clone(), s.clone());
    }

    // The other variant: the given file where the tree has the library, the same links around it.
    if let Some(file) = &other_file {
        let mut b = new_build(
            model_of(&without.name),
            Role::Lazy,
            SUBDIR,
            format!("--lazy-variant {}", Tree::file_name(&file.display().to_string())),
            format!("{} {version_text}, {} variant", Tree::file_name(&lazy_lib.path), without.name),
        );
        let mut lazy_paths: Vec<String> = plan.outputs.iter().filter(|o| o.role == Role::Lazy).flat_map(|o| o.files.clone()).collect();
        // Files first, links last: nothing is ever written through a link.
        lazy_paths.sort_by_key(|p| matches!(staged[p], Staged::Symlink { .. }));
        for path in lazy_paths {
            let rel = split.install_path(&path);
            let dst = b.stage.join(&rel);
            match &staged[&path] {
                Staged::Symlink { target } => {
                    make_symlink(target, &dst)?;
                    b.content.insert(rel, Staged::Symlink { target: target.clone() });
                }
                Staged::File { .. } => {
                    let src = File::open(file).map_err(|e| Error::io(file, e))?;
                    let (size, sha256) = write_hashed(&dst, src, true, opts.progress).map_err(|e| Error::io(&dst, e))?;
                    b.content.insert(rel, Staged::File { size, sha256 });
                }
            }
        }
        builds.push(b);
    }

    // Stand-ins for the packages the split refers to (payload packages, providers of the core's
    // external libraries) that no real package here provides.
    let real_names: BTreeSet<String> = builds.iter().map(|b| b.model.name.clone()).collect();
    let referenced: BTreeSet<String> = o
        .payload_packages
        .iter()
        .cloned()
        .chain(o.external_depends.iter().filter_map(|d| d.split_whitespace().next().map(str::to_string)))
        .collect();
    let mut replaced = Vec::new();
    for s in &opts.standins.standins {
        if real_names.contains(&s.name) {
            replaced.push(s.name.clone());
            continue;
        }
        if !referenced.contains(&s.name) {
            notes.push(format!("stand-in {} not made: nothing in this split refers to it", s.name));
            continue;
        }
        let mut b = new_build(
            crate::recipe::split::standin_package(&s.name, &s.version),
            Role::Payload,
            NOARCH,
            format!("stand-in manifest ({})", opts.standins_from),
            format!("stand-in for {} {}: no library inside; represents {} bytes", s.name, s.version, s.represents_bytes),
        );
        for (rel, bytes) in s.files() {
            let dst = b.stage.join(&rel);
            let (size, sha256) = write_hashed(&dst, &bytes[..], false, &Progress::hidden()).map_err(|e| Error::io(&dst, e))?;
            b.content.insert(rel, Staged::File { size, sha256 });
        }
        b.standin = Some(s.clone());
        builds.push(b);
    }
    for p in &referenced {
        if !builds.iter().any(|b| &b.model.name == p) {
            notes.push(format!(
                "{p} is neither in the tree nor in the stand-in manifest{}",
                if o.payload_packages.contains(p) && !split.payload_static {
                    format!(": the {} variant cannot be installed from this channel alone", with.name)
                } else {
                    String::new()
                }
            ));
        }
    }

    // Write every package into the work directory.
    let total: u64 = builds.iter().map(|b| content_bytes(&b.content) * 2).sum();
    opts.progress.start("packing", total);
    let mut written = Vec::new();
    let mut base = 0u64;
    for b in &builds {
        let info = info_files(b, split, plan, &input_name)?;
        for (rel, bytes) in &info {
            let dst = b.stage.join(rel);
            write_hashed(&dst, &bytes[..], false, &Progress::hidden()).map_err(|e| Error::io(&dst, e))?;
        }
        let mut rels: Vec<String> = b.content.keys().cloned().chain(info.iter().map(|(r, _)| r.clone())).collect();
        rels.sort();
        let paths: Vec<PathBuf> = rels.iter().map(|r| b.stage.join(r)).collect();
        let stem = format!("{}-{}-{}", b.model.name, b.model.version, b.model.build);
        let dir = work.0.join("pkgs").join(b.subdir);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let dst = dir.join(format!("{stem}.conda"));
        let f = File::create(&dst).map_err(|e| Error::io(&dst, e))?;
        opts.progress.set_message(&b.model.name);
        let bar = opts.progress.bar().map(|bar| {
            Box::new(Bar { bar, base, content: content_bytes(&b.content), phase: 0 })
                as Box<dyn rattler_package_streaming::write::ProgressBar>
        });
        rattler_package_streaming::write::write_conda_package(
            std::io::BufWriter::new(f),
            &b.stage,
            &paths,
            rattler_conda_types::compression_level::CompressionLevel::Numeric(opts.compression_level),
            opts.threads,
            &stem,
            None,
            bar,
        )
        .map_err(|e| Error::failed(format!("writing {}", dst.display()), e))?;
        base += content_bytes(&b.content) * 2;
        written.push((format!("{}/{stem}.conda", b.subdir), dst));
        // The stage is no longer needed: free its disk space before the next package.
        let _ = std::fs::remove_dir_all(&b.stage);
    }
    opts.progress.finish();

    // Read the packages back: metadata as modelled, content lossless.
    let mut count: BTreeMap<String, usize> = tree_paths.iter().map(|p| (p.clone(), 0)).collect();
    let mut paths_map = BTreeMap::new();
    let mut extra = Vec::new();
    let mut packed = Vec::new();
    for (b, (file, path)) in builds.iter().zip(&written) {
        let index: rattler_conda_types::package::IndexJson =
            rattler_package_streaming::seek::read_package_file(path).map_err(|e| Error::failed(format!("reading back {file}"), e))?;
        check_index(&index, &b.model, file)?;
        let paths: rattler_conda_types::package::PathsJson =
            rattler_package_streaming::seek::read_package_file(path).map_err(|e| Error::failed(format!("reading back {file}"), e))?;
        let content: BTreeSet<String> = paths.paths.iter().map(|p| p.relative_path.to_string_lossy().replace('\\', "/")).collect();
        let expected: BTreeSet<String> = b.content.keys().cloned().collect();
        if content != expected {
            return Err(Error::internal(format!("{file}: paths.json lists {} paths, {} were staged", content.len(), expected.len())));
        }
        let counts_for_tree =
            b.standin.is_none() && !(b.role == Role::Lazy && b.model.variant.as_ref().is_some_and(|v| v.name == without.name));
        if counts_for_tree {
            for rel in &content {
                let tree_path = rel.strip_prefix(&split.install_prefix).unwrap_or(rel);
                match count.get_mut(tree_path) {
                    Some(c) => {
                        *c += 1;
                        paths_map.insert(tree_path.to_string(), file.clone());
                    }
                    None => extra.push(format!("{file}: {rel}")),
                }
            }
        }
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let variant = b.model.variant.as_ref();
        packed.push(PackedPackage {
            file: file.clone(),
            name: b.model.name.clone(),
            version: b.model.version.clone(),
            build: b.model.build.clone(),
            build_number: b.model.build_number,
            role: if b.standin.is_some() { "standin".into() } else { role_name(b.role).into() },
            variant: variant.map(|v| v.name.clone()),
            preferred: variant.map(|v| v.preferred),
            standin: b.standin.is_some(),
            files: content.len(),
            bytes: content_bytes(&b.content),
            represents_bytes: b.standin.as_ref().map(|s| s.represents_bytes),
            archive_bytes: meta.len(),
            sha256: sha256_file(path).map_err(|e| Error::io(path, e))?,
            from: b.from.clone(),
            depends: b.model.depends.clone(),
            constrains: b.model.constrains.clone(),
            track_features: b.model.track_features.clone(),
        });
    }
    let missing: Vec<String> = count.iter().filter(|(_, c)| **c == 0).map(|(p, _)| p.clone()).collect();
    let doubled: Vec<String> = count.iter().filter(|(_, c)| **c > 1).map(|(p, _)| p.clone()).collect();
    let lossless = Lossless {
        tree_paths: tree_paths.len(),
        placed_once: count.values().filter(|c| **c == 1).count(),
        ok: missing.is_empty() && doubled.is_empty() && extra.is_empty() && tree_paths.len() == plan.input.files,
        missing,
        doubled,
        extra,
    };
    if !lossless.ok {
        return Err(Error::internal(format!(
            "not lossless: {} of {} tree paths placed once ({} in the plan); missing {:?}, doubled {:?}, not from the tree {:?}",
            lossless.placed_once,
            lossless.tree_paths,
            plan.input.files,
            first(&lossless.missing),
            first(&lossless.doubled),
            first(&lossless.extra)
        )));
    }

    // The channel description, merged with what the channel already holds.
    let record = PackRecord {
        version: o.version.clone(),
        build_keys: o.build_keys.clone(),
        prefer: o.prefer.clone(),
        preferred: split.preferred().name.clone(),
        track_feature: split.track_feature(),
        payload_static: split.payload_static,
        input: input_name.clone(),
        cuda_runtime: plan.input.cuda_runtime,
        packages: packed.iter().filter(|p| !p.standin).cloned().collect(),
        missing_variants,
        variant_sizes: plan.outputs.iter().filter(|o| o.role == Role::Lazy).flat_map(|o| o.variants.clone()).collect(),
    };
    let standins: Vec<PackedPackage> = packed.iter().filter(|p| p.standin).cloned().collect();

    // Into the channel, under its lock (so parallel packs into one channel take turns): the
    // channel description read again and merged, packages by rename, stale files of a replaced
    // pack removed, index, description. A failure from here on leaves the new packages in the
    // channel; running the same pack again (same bytes) completes it (docs/security.md).
    work.2 = true;
    std::fs::create_dir_all(&out_abs).map_err(|e| Error::io(&out_abs, e))?;
    let _lock = lock_channel(&out_abs)?;
    let existing = if out_abs.join(CHANNEL_FILE).exists() { Some(ChannelInfo::load(&out_abs)?) } else { None };
    same_split(existing.as_ref(), o, &plan.options.dep, out)?;
    let mut info = existing.unwrap_or_else(|| ChannelInfo {
        schema: CHANNEL_SCHEMA.into(),
        schema_version: 1,
        core: o.core_name.clone(),
        lazy: o.lazy_name.clone(),
        dep: plan.options.dep.clone(),
        lazy_library: Tree::file_name(&lazy_lib.path).to_string(),
        variants: split.variants.iter().map(|v| v.name.clone()).collect(),
        payload_packages: Vec::new(),
        packs: Vec::new(),
        standins: Vec::new(),
    });
    let mut stale: Vec<String> = Vec::new();
    if let Some(old) = info.packs.iter().find(|p| p.version == record.version && p.build_keys == record.build_keys) {
        stale.extend(old.packages.iter().map(|p| p.file.clone()));
    }
    info.packs.retain(|p| !(p.version == record.version && p.build_keys == record.build_keys));
    info.packs.push(record.clone());
    info.packs.sort_by(|a, b| (&a.version, &a.build_keys).cmp(&(&b.version, &b.build_keys)));
    for s in &standins {
        if let Some(old) = info.standins.iter().find(|x| x.name == s.name) {
            stale.push(old.file.clone());
        }
        info.standins.retain(|x| x.name != s.name);
        info.standins.push(s.clone());
    }
    // A real package replaces a stand-in of the same name.
    for p in &record.packages {
        if let Some(old) = info.standins.iter().find(|x| x.name == p.name) {
            stale.push(old.file.clone());
        }
        info.standins.retain(|x| x.name != p.name);
    }
    info.standins.sort_by(|a, b| a.name.cmp(&b.name));
    for p in &o.payload_packages {
        if !info.payload_packages.contains(p) {
            info.payload_packages.push(p.clone());
        }
    }
    let keep: BTreeSet<&str> = info.all_packages().map(|p| p.file.as_str()).collect();
    stale.retain(|f| !keep.contains(f.as_str()));

    for sub in [SUBDIR, NOARCH] {
        let d = out_abs.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
    }
    for (file, path) in &written {
        let dst = out_abs.join(file);
        std::fs::rename(path, &dst).map_err(|e| Error::io(&dst, e))?;
    }
    for f in &stale {
        let _ = std::fs::remove_file(out_abs.join(f));
    }
    let indexed = index_channel(&out_abs)?;
    check_repodata(&out_abs, &packed)?;
    let text = serde_json::to_string_pretty(&info).map_err(|e| Error::failed("JSON", e))? + "\n";
    crate::output::write_atomic(&out_abs.join(CHANNEL_FILE), text.as_bytes())?;

    if other_file.is_none() {
        notes.push(format!(
            "only the {} variant of {} was packed: scenarios that need {} are not applicable on this channel",
            with.name, o.lazy_name, without.name
        ));
    }
    if split.payload_static {
        notes.push(format!(
            "{} is linked into {} (static): the {} variant carries it and depends on no payload package",
            plan.options.dep,
            Tree::file_name(&lazy_lib.path),
            with.name
        ));
    }
    let real_bytes = packed.iter().filter(|p| !p.standin).map(|p| p.bytes).sum();
    let represented_bytes = packed.iter().filter_map(|p| p.represents_bytes).sum();
    Ok(PackReport {
        schema: "splitpkg-pack",
        schema_version: 1,
        input: PackInput {
            path: input.display().to_string(),
            kind: ins.tree.kind,
            verdict: plan.verdict.label().into(),
            files: plan.input.files,
            bytes: plan.input.bytes,
        },
        channel: out.display().to_string(),
        core: o.core_name.clone(),
        lazy: o.lazy_name.clone(),
        dep: plan.options.dep.clone(),
        record,
        standins,
        standins_replaced_by_real: replaced,
        standins_from: opts.standins_from.clone(),
        lossless,
        paths: paths_map,
        real_bytes,
        represented_bytes,
        compression_level: opts.compression_level,
        indexed,
        notes,
    })
}

/// A channel holds one split: refuse to add another (checked before any work and again under the
/// channel lock, where a concurrent pack may have created the channel meanwhile).
fn same_split(existing: Option<&ChannelInfo>, o: &crate::recipe::split::SplitOptions, dep: &str, out: &Path) -> Result<()> {
    match existing {
        Some(e) if e.core != o.core_name || e.lazy != o.lazy_name || e.dep != dep => Err(Error::Usage(format!(
            "{}: the channel holds the split {} / {} ({}); this one is {} / {} ({dep}): use another --out",
            out.join(CHANNEL_FILE).display(),
            e.core,
            e.lazy,
            e.dep,
            o.core_name,
            o.lazy_name,
        ))),
        _ => Ok(()),
    }
}

/// `CHANNEL/.splitpkg.lock`, held exclusively (flock) until dropped. The file stays: removing a
/// lock file while another process waits on it would let a third lock a new one beside it.
fn lock_channel(channel: &Path) -> Result<File> {
    let path = channel.join(".splitpkg.lock");
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| Error::io(&path, e))?;
    f.lock().map_err(|e| Error::io(&path, e))?;
    Ok(f)
}

/// How a refusal names a tree path: `ARCHIVE:MEMBER`, or the file's path for a directory.
fn member_name(tree: &Tree, path: &str) -> String {
    if tree.kind == TreeKind::Directory {
        tree.source.join(path).display().to_string()
    } else {
        format!("{}:{path}", tree.source.display())
    }
}

fn first(v: &[String]) -> Vec<&String> {
    v.iter().take(5).collect()
}

pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Core => "core",
        Role::Lazy => "lazy",
        Role::Payload => "payload",
    }
}

fn content_bytes(c: &BTreeMap<String, Staged>) -> u64 {
    c.values().map(|s| if let Staged::File { size, .. } = s { *size } else { 0 }).sum()
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() { Ok(p.to_path_buf()) } else { Ok(std::env::current_dir().map_err(|e| Error::io(".", e))?.join(p)) }
}

/// The nearest existing ancestor of `p`, canonicalized (for "is --out inside the input").
fn absolute_parent(p: &Path) -> Option<PathBuf> {
    let mut cur = absolute(p).ok()?;
    loop {
        if let Ok(c) = cur.canonicalize() {
            return Some(c);
        }
        if !cur.pop() {
            return None;
        }
    }
}

/// Progress of one package on the shared bar: the writer reports the tar phase and then the
/// compression phase, each from 0 to about the content size.
struct Bar {
    bar: indicatif::ProgressBar,
    base: u64,
    content: u64,
    phase: u64,
}

impl rattler_package_streaming::write::ProgressBar for Bar {
    fn set_progress(&mut self, progress: u64, _message: &str) {
        self.bar.set_position(self.base + (self.phase.saturating_sub(1)) * self.content + progress.min(self.content));
    }

    fn set_total(&mut self, _total: u64) {
        self.phase = (self.phase + 1).min(2);
    }
}

/// `info/index.json`, `info/paths.json`, `info/about.json` for one package.
fn info_files(b: &Build, split: &Split, plan: &Plan, input_name: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let m = &b.model;
    let noarch = b.subdir == NOARCH;
    let mut index = serde_json::json!({
        "name": m.name,
        "version": m.version,
        "build": m.build,
        "build_number": m.build_number,
        "depends": m.depends,
        "subdir": b.subdir,
    });
    if !m.constrains.is_empty() {
        index["constrains"] = serde_json::json!(m.constrains);
    }
    if !m.track_features.is_empty() {
        index["track_features"] = serde_json::json!(m.track_features.join(","));
    }
    if noarch {
        index["noarch"] = serde_json::json!("generic");
    } else {
        index["arch"] = serde_json::json!("x86_64");
        index["platform"] = serde_json::json!("linux");
    }
    if b.standin.is_some() {
        index["license"] = serde_json::json!("stand-in");
    }
    let parsed: rattler_conda_types::package::IndexJson =
        serde_json::from_value(index).map_err(|e| Error::failed(format!("index.json for {}", m.name), e))?;
    let index_text = serde_json::to_string_pretty(&parsed).map_err(|e| Error::failed("JSON", e))? + "\n";

    let entries: Vec<serde_json::Value> = b
        .content
        .iter()
        .map(|(rel, s)| match s {
            Staged::File { size, sha256 } => {
                serde_json::json!({"_path": rel, "path_type": "hardlink", "sha256": sha256, "size_in_bytes": size})
            }
            Staged::Symlink { .. } => serde_json::json!({"_path": rel, "path_type": "softlink"}),
        })
        .collect();
    let paths = serde_json::json!({"paths": entries, "paths_version": 1});
    // Through rattler's own type, so a field it would reject fails here, not in an installer.
    let parsed: rattler_conda_types::package::PathsJson =
        serde_json::from_value(paths.clone()).map_err(|e| Error::failed(format!("paths.json for {}", m.name), e))?;
    if parsed.paths.len() != b.content.len() {
        return Err(Error::internal(format!("paths.json for {}: lost entries", m.name)));
    }
    let paths_text = serde_json::to_string_pretty(&paths).map_err(|e| Error::failed("JSON", e))? + "\n";

    let extra = match &b.standin {
        Some(s) => s.about_extra(),
        None => {
            let mut e = serde_json::json!({
                "splitpkg_role": role_name(b.role),
                "splitpkg_input": input_name,
                "splitpkg_verdict": plan.verdict.label(),
                "splitpkg_version": env!("CARGO_PKG_VERSION"),
            });
            if let Some(v) = &m.variant {
                e["splitpkg_variant"] = serde_json::json!(v.name);
                e["splitpkg_preferred"] = serde_json::json!(v.preferred);
            }
            if b.role == Role::Lazy && !m.track_features.is_empty() {
                e["splitpkg_track_feature"] = serde_json::json!(split.track_feature());
            }
            e
        }
    };
    let mut about = serde_json::json!({
        "summary": b.summary,
        "description": "Packed by splitpkg pack from the split plan; see docs/pack.md.",
        "extra": extra,
    });
    if b.standin.is_some() {
        about["license"] = serde_json::json!("stand-in");
    }
    let _: rattler_conda_types::package::AboutJson =
        serde_json::from_value(about.clone()).map_err(|e| Error::failed(format!("about.json for {}", m.name), e))?;
    let about_text = serde_json::to_string_pretty(&about).map_err(|e| Error::failed("JSON", e))? + "\n";
    Ok(vec![
        ("info/about.json".into(), about_text.into_bytes()),
        ("info/index.json".into(), index_text.into_bytes()),
        ("info/paths.json".into(), paths_text.into_bytes()),
    ])
}

/// The index.json read back from a package must carry exactly the model's metadata.
fn check_index(index: &rattler_conda_types::package::IndexJson, m: &PackageModel, file: &str) -> Result<()> {
    let got = (
        index.name.as_normalized().to_string(),
        index.version.to_string(),
        index.build.to_string(),
        index.build_number,
        index.depends.clone(),
        index.constrains.clone(),
        index.track_features.clone(),
    );
    let want = (
        m.name.clone(),
        m.version.clone(),
        m.build.clone(),
        m.build_number,
        m.depends.clone(),
        m.constrains.clone(),
        m.track_features.clone(),
    );
    if got != want {
        return Err(Error::internal(format!("{file}: index.json read back as {got:?}, the split says {want:?}")));
    }
    Ok(())
}

/// Index the channel with rattler_index and remove its `.tmp/` work directory.
fn index_channel(channel: &Path) -> Result<Vec<String>> {
    let rt = crate::channel::solve::runtime()?;
    let config = rattler_index::IndexFsConfig {
        channel: channel.to_path_buf(),
        target_platform: None,
        repodata_patch: None,
        write_zst: false,
        write_shards: false,
        repodata_revisions: Vec::new(),
        package_revision_assignment: rattler_index::PackageRevisionAssignment::default(),
        force: true,
        max_parallel: 4,
        multi_progress: None,
    };
    rt.block_on(rattler_index::index_fs(config)).map_err(|e| Error::failed(format!("rattler_index on {}", channel.display()), e))?;
    let _ = std::fs::remove_dir_all(channel.join(".tmp"));
    let mut out = Vec::new();
    for sub in [SUBDIR, NOARCH] {
        let p = channel.join(sub).join("repodata.json");
        if p.exists() {
            out.push(format!("{sub}/repodata.json"));
        }
    }
    Ok(out)
}

/// Every package we wrote is in the index with the metadata we wrote.
fn check_repodata(channel: &Path, packed: &[PackedPackage]) -> Result<()> {
    let mut records: HashMap<String, rattler_conda_types::PackageRecord> = HashMap::new();
    for sub in [SUBDIR, NOARCH] {
        let p = channel.join(sub).join("repodata.json");
        let rd = rattler_conda_types::RepoData::from_path(&p).map_err(|e| Error::failed(p.display(), e))?;
        for (id, rec) in rd.conda_packages {
            records.insert(format!("{sub}/{}", id), rec);
        }
    }
    for p in packed {
        let r = records.get(&p.file).ok_or_else(|| Error::internal(format!("rattler_index did not index {}", p.file)))?;
        let same = r.name.as_normalized() == p.name
            && r.version.to_string() == p.version
            && r.build == p.build
            && r.depends == p.depends
            && r.constrains == p.constrains
            && r.track_features == p.track_features;
        if !same {
            return Err(Error::internal(format!("{}: repodata.json disagrees with the package metadata", p.file)));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// Write `r` to `dst` (parents created, an existing file replaced), returning size and SHA-256.
fn write_hashed(dst: &Path, mut r: impl Read, exec: bool, progress: &Progress) -> std::io::Result<(u64, String)> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(p) = dst.parent() {
        std::fs::create_dir_all(p)?;
    }
    let _ = std::fs::remove_file(dst);
    // A new file, never through a link: O_EXCL refuses any name that exists (a symlink included).
    let file = std::fs::OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_NOFOLLOW).open(dst)?;
    let mut f = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        f.write_all(&buf[..k])?;
        n += k as u64;
        progress.inc(k as u64);
    }
    f.flush()?;
    drop(f);
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(if exec { 0o755 } else { 0o644 }))?;
    Ok((n, hex(&h.finalize())))
}

fn make_symlink(target: &str, dst: &Path) -> Result<()> {
    if let Some(p) = dst.parent() {
        std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
    }
    let _ = std::fs::remove_file(dst);
    std::os::unix::fs::symlink(target, dst).map_err(|e| Error::io(dst, e))
}

/// Put every planned tree path into its package's stage; returns what was staged per tree path.
///
/// Archives are walked with the same member rules as the tree reader ([`Members`]), so a member
/// the plan did not see is refused, not staged. Nothing is written through a link: regular files
/// are created new with `O_NOFOLLOW` while the stages hold no symlink at all, hard links are
/// copied from the staged member they name (never from the file system), and symlinks are
/// created last.
fn stage_tree(
    input: &Path,
    kind: TreeKind,
    placement: &BTreeMap<String, (usize, String)>,
    stages: &[PathBuf],
    progress: &Progress,
) -> Result<BTreeMap<String, Staged>> {
    let display = input.display().to_string();
    let dst_of = |path: &str| -> Option<PathBuf> { placement.get(path).map(|(i, rel)| stages[*i].join(rel)) };
    let unplanned = |path: &str| Error::internal(format!("{display}: {path} is in the input but not in the plan"));
    let out = match kind {
        TreeKind::Directory => {
            let total: u64 = placement.keys().filter_map(|p| std::fs::symlink_metadata(input.join(p)).ok()).map(|m| m.len()).sum();
            progress.start("staging", total);
            let items: Vec<(&String, PathBuf)> = placement.keys().map(|p| (p, dst_of(p).expect("planned"))).collect();
            let results: Vec<Result<(String, Staged)>> = items
                .par_iter()
                .map(|(path, dst)| {
                    let src = input.join(path);
                    let meta = std::fs::symlink_metadata(&src).map_err(|e| Error::io(&src, e))?;
                    if meta.file_type().is_symlink() {
                        let target = std::fs::read_link(&src).map_err(|e| Error::io(&src, e))?.to_string_lossy().into_owned();
                        return Ok(((*path).clone(), Staged::Symlink { target }));
                    }
                    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
                    let exec = meta.permissions().mode() & 0o111 != 0;
                    let f =
                        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&src).map_err(|e| Error::io(&src, e))?;
                    let (size, sha256) = write_hashed(dst, f, exec, progress).map_err(|e| Error::io(dst, e))?;
                    Ok(((*path).clone(), Staged::File { size, sha256 }))
                })
                .collect();
            progress.finish();
            results.into_iter().collect::<Result<BTreeMap<_, _>>>()?
        }
        TreeKind::Wheel => {
            let file = File::open(input).map_err(|e| Error::io(input, e))?;
            // SAFETY: read-only private map; the zip reader bounds-checks every access.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(input, e))?;
            let bytes: &[u8] = &map;
            let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
                .map_err(|e| Error::bad(&display, format!("not a readable zip archive: {e}")))?;
            if archive.has_duplicate_names() {
                return Err(crate::input::duplicate_zip_name(&display, bytes, &archive));
            }
            let mut members = Vec::new();
            let mut rules = Members::default();
            let mut total = 0;
            for i in 0..archive.len() {
                let f = archive.by_index_raw(i).map_err(|e| Error::bad(&display, e))?;
                let raw = f.name().map_err(|e| Error::bad(&display, e))?.into_owned();
                let Some(rel) = safe_member_path(&display, &raw)? else { continue };
                let kind = if f.is_dir() {
                    MemberKind::Dir
                } else if f.is_symlink() {
                    MemberKind::Symlink
                } else {
                    MemberKind::File
                };
                rules.check(&display, &rel, kind, None)?;
                if kind == MemberKind::Dir {
                    continue;
                }
                total += f.size();
                members.push((i, rel));
            }
            progress.start("unpacking", total);
            let results: Vec<Result<(String, Staged)>> = members
                .par_iter()
                .map_init(
                    || archive.clone(),
                    |archive, (i, rel)| {
                        let name = format!("{display}:{rel}");
                        let mut f = archive.by_index(*i).map_err(|e| Error::bad(&name, e))?;
                        let dst = dst_of(rel).ok_or_else(|| unplanned(rel))?;
                        if f.is_symlink() {
                            let mut target = String::new();
                            (&mut f).take(4096).read_to_string(&mut target).map_err(|e| Error::bad(&name, e))?;
                            return Ok((rel.clone(), Staged::Symlink { target }));
                        }
                        let exec = f.unix_mode().is_some_and(|m| m & 0o111 != 0);
                        let expect = f.size();
                        let (size, sha256) =
                            write_hashed(&dst, &mut f, exec, progress).map_err(|e| Error::bad(&name, format!("cannot unpack: {e}")))?;
                        if size != expect {
                            return Err(Error::bad(&name, format!("member inflates to {size} bytes, header says {expect}")));
                        }
                        Ok((rel.clone(), Staged::File { size, sha256 }))
                    },
                )
                .collect();
            progress.finish();
            results.into_iter().collect::<Result<BTreeMap<_, _>>>()?
        }
        TreeKind::Conda => {
            let file = File::open(input).map_err(|e| Error::io(input, e))?;
            let mut archive = zip::ZipArchive::new(file).map_err(|e| Error::bad(&display, format!("not a .conda archive (zip): {e}")))?;
            let pkg = (0..archive.len())
                .find(|&i| {
                    archive
                        .by_index_raw(i)
                        .ok()
                        .and_then(|f| f.name().ok().map(|n| n.starts_with("pkg-") && n.ends_with(".tar.zst")))
                        .unwrap_or(false)
                })
                .ok_or_else(|| Error::bad(&display, "a .conda must hold pkg-*.tar.zst"))?;
            let f = archive.by_index(pkg).map_err(|e| Error::bad(&display, e))?;
            let dec = zstd::stream::read::Decoder::new(f).map_err(|e| Error::bad(&display, format!("pkg archive: {e}")))?;
            stage_tar(&display, dec, false, &dst_of, progress)?
        }
        TreeKind::TarBz2 => {
            let file = File::open(input).map_err(|e| Error::io(input, e))?;
            let dec = bzip2::read::MultiBzDecoder::new(std::io::BufReader::new(file));
            stage_tar(&display, dec, true, &dst_of, progress)?
        }
    };
    // Links last, into stages that hold only directories and regular files.
    for (path, staged) in &out {
        if let Staged::Symlink { target } = staged {
            make_symlink(target, &dst_of(path).ok_or_else(|| unplanned(path))?)?;
        }
    }
    Ok(out)
}

fn stage_tar(
    display: &str,
    reader: impl Read,
    has_info: bool,
    dst_of: &dyn Fn(&str) -> Option<PathBuf>,
    progress: &Progress,
) -> Result<BTreeMap<String, Staged>> {
    let mut out = BTreeMap::new();
    let mut rules = Members::default();
    // (link, member it names), copied once every regular file is staged.
    let mut hardlinks: Vec<(String, String)> = Vec::new();
    progress.start_unknown("unpacking");
    let mut tar = tar::Archive::new(reader);
    let entries = tar.entries().map_err(|e| Error::bad(display, format!("not a tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::bad(display, format!("broken tar archive: {e}")))?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(rel) = safe_member_path(display, &raw)? else { continue };
        if has_info && (rel == "info" || rel.starts_with("info/")) {
            continue;
        }
        crate::input::check_tar_member(display, &mut rules, &rel, &entry)?;
        let etype = entry.header().entry_type();
        if etype.is_dir() {
            continue;
        }
        let Some(dst) = dst_of(&rel) else {
            if etype.is_file() || etype.is_symlink() || etype.is_hard_link() || etype == tar::EntryType::Continuous {
                return Err(Error::internal(format!("{display}: {rel} is in the input but not in the plan")));
            }
            continue;
        };
        let link = || -> Result<String> {
            Ok(entry
                .link_name()
                .map_err(|e| Error::bad(display, format!("{rel}: {e}")))?
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default())
        };
        if etype.is_symlink() {
            let target = link()?;
            out.insert(rel, Staged::Symlink { target });
        } else if etype.is_hard_link() {
            let target = link()?;
            let Some(target) = safe_member_path(display, &target)? else {
                return Err(Error::bad(display, format!("{rel}: hard link with an empty target")));
            };
            hardlinks.push((rel, target));
        } else if etype.is_file() || etype == tar::EntryType::Continuous {
            let exec = entry.header().mode().map(|m| m & 0o111 != 0).unwrap_or(false);
            let expect = entry.size();
            let (size, sha256) = write_hashed(&dst, &mut entry, exec, progress).map_err(|e| Error::bad(display, format!("{rel}: {e}")))?;
            if size != expect {
                return Err(Error::bad(display, format!("{rel}: member is truncated")));
            }
            out.insert(rel, Staged::File { size, sha256 });
        }
    }
    // Hard links, in archive order: each names an earlier file member (the rules above), so its
    // content is that member's staged copy, a regular file.
    for (rel, target) in hardlinks {
        let name = format!("{display}:{rel}");
        let staged = match out.get(&target) {
            Some(s @ Staged::File { .. }) => s.clone(),
            _ => return Err(Error::bad(&name, format!("hard link to {target}, which is not an earlier regular file member; refusing"))),
        };
        let src = dst_of(&target).ok_or_else(|| Error::bad(&name, format!("hard link to a missing member {target}")))?;
        let dst = dst_of(&rel).ok_or_else(|| Error::internal(format!("{display}: {rel} is in the input but not in the plan")))?;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&src).map_err(|e| Error::io(&src, e))?;
        let exec = f.metadata().map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false);
        write_hashed(&dst, f, exec, progress).map_err(|e| Error::io(&dst, e))?;
        out.insert(rel, staged);
    }
    progress.finish();
    Ok(out)
}

/// Text report of a pack.
pub fn report_text(r: &PackReport) -> String {
    use crate::output::human_bytes;
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "packed {} ({}) into {}", r.input.path, r.input.verdict, r.channel);
    let _ = writeln!(
        s,
        "split: {} / {} ({} preferred; the other carries track_features {})",
        r.core, r.lazy, r.record.preferred, r.record.track_feature
    );
    for p in r.record.packages.iter().chain(&r.standins) {
        let what = match (&p.variant, p.preferred) {
            (Some(v), Some(true)) => format!("{} {v} (preferred)", p.role),
            (Some(v), _) => format!("{} {v}", p.role),
            _ if p.standin => "[stand-in]".to_string(),
            _ => p.role.clone(),
        };
        let size = match p.represents_bytes {
            Some(b) => format!("represents {b} bytes ({}), not real bytes", human_bytes(b)),
            None => format!("{} files, {}", p.files, human_bytes(p.bytes)),
        };
        let _ = writeln!(s, "  {:<70} {:<22} {size}, archive {}", p.file, what, human_bytes(p.archive_bytes));
        if p.from != "tree" {
            let _ = writeln!(s, "  {:<70} from {}", "", p.from);
        }
    }
    for m in &r.record.missing_variants {
        let _ = writeln!(s, "  no {} package: {}", m.variant, m.why);
    }
    if !r.standins_replaced_by_real.is_empty() {
        let _ = writeln!(s, "  no stand-in for {}: real package(s) from the tree", r.standins_replaced_by_real.join(", "));
    }
    let l = &r.lossless;
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for f in r.paths.values() {
        *per.entry(f.as_str()).or_default() += 1;
    }
    let _ = writeln!(
        s,
        "lossless: {} of {} tree paths are in exactly one package ({}); none missing, none doubled",
        l.placed_once,
        l.tree_paths,
        per.iter().map(|(f, n)| format!("{} {n}", f.rsplit('/').next().unwrap_or(f))).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        s,
        "bytes: {} real in {} packages; stand-ins represent {} more (counted apart)",
        human_bytes(r.real_bytes),
        r.record.packages.len(),
        human_bytes(r.represented_bytes)
    );
    let _ = writeln!(s, "indexed with rattler_index: {}", r.indexed.join(", "));
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    /// zstd's multithreaded output does not depend on the worker count: what makes packages
    /// byte-identical across machines with different core counts.
    #[test]
    fn zstd_output_does_not_depend_on_threads() {
        let data: Vec<u8> = (0..24u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f).collect();
        let compress = |threads: u32| {
            let mut enc = zstd::Encoder::new(Vec::new(), 3).unwrap();
            enc.multithread(threads).unwrap();
            enc.set_pledged_src_size(Some(data.len() as u64)).unwrap();
            enc.include_contentsize(true).unwrap();
            std::io::Write::write_all(&mut enc, &data).unwrap();
            enc.finish().unwrap()
        };
        let one = compress(1);
        assert_eq!(one, compress(2));
        assert_eq!(one, compress(4));
    }
}
