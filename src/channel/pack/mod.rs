//! `splitpkg pack`: real `.conda` packages for every output of a confined plan, in a local channel
//! indexed (`repodata.json` written as `rattler_index` writes it, see `repodata`).
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
//! * *reproducible*: sorted paths, fixed archive timestamps (rattler's, see [`conda`]),
//!   deterministic tar headers, no absolute paths or dates in
//!   `info/`; build-string hashes come from names and keys, not from the clock. zstd's
//!   multithreaded output does not depend on the thread count, so the bytes do not depend on the
//!   machine either;
//! * *atomic*: everything is built in a work directory next to `--out`; packages are renamed into
//!   the channel one by one (rename is atomic), the channel is indexed last, and
//!   `splitpkg.json` is replaced atomically. A failure before that leaves the channel untouched.
//!
//! `CHANNEL/splitpkg.json` describes every split packed into the channel (names, variants, which is
//!
//! The stages, one file each: [`stage`] lays the tree out into one directory per package,
//! [`metadata`] writes each package's `info/`, [`conda`] writes one `.conda`, [`publish`] writes
//! every package, reads them back, moves them into the channel, indexes it and records the pack in
//! `splitpkg.json`.

mod conda;
mod metadata;
mod publish;
mod repodata;
mod stage;

use crate::error::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::analysis::graph::NodeKind;
use crate::analysis::inspect::Inspection;
use crate::analysis::plan::{Plan, Role};
use crate::analysis::verdict::LazyLibrary;
pub use crate::channel::document::{Lossless, PackInput, PackReport};
use crate::channel::info::{
    CHANNEL_FILE, CHANNEL_SCHEMA, ChannelInfo, MissingVariant, Origin, PackRecord, PackedPackage,
};
use crate::channel::standin::Manifest;
use crate::error::{Error, Result};
use crate::input::{Tree, TreeKind, display_member};
use crate::progress::Progress;
use crate::recipe::split::{Split, SplitOptions, SplitVariant};

pub use metadata::role_name;

/// zstd level for the inner archives: 3 packs the 1.1 GB torch 2.11 wheel in well under a minute
/// on 2 cores; conda-forge uploads use 19 (several times slower, ~10 % smaller).
pub const DEFAULT_COMPRESSION: i32 = 3;

/// Everything `splitpkg pack` was asked to do.
pub struct PackOptions<'a> {
    /// The channel directory written (`--out`).
    pub out: PathBuf,
    /// The nomagma build of the lazy library (`--lazy-variant nomagma=FILE`).
    pub lazy_variant: Option<(String, PathBuf)>,
    /// The stand-ins for external packages the channel lacks (built-in, or `--standins`).
    pub standins: Manifest,
    /// `built-in` or the manifest's file name, for the report.
    pub standins_from: String,
    /// zstd level of the inner archives ([`DEFAULT_COMPRESSION`] unless given).
    pub compression_level: i32,
    /// zstd worker threads; None: one per available CPU.
    pub threads: Option<u32>,
    /// Pack symlinks that point outside the tree instead of refusing them.
    pub allow_absolute_symlinks: bool,
    /// The most bytes staging may unpack (`--max-unpacked`); `None`: the free space of the file
    /// system the work directory is on.
    pub max_unpacked: Option<u64>,
    /// Where progress lines go.
    pub progress: &'a Progress,
}

/// Adjust the emit-style options for packing: core depends on stand-ins that provide a library
/// a core file NEEDs and the tree lacks (what run-exports would add in a real build), and the
/// payload pin falls back to the payload stand-in's version when the tree has no payload library.
pub fn options_for_pack(
    mut options: SplitOptions,
    ins: &Inspection,
    plan: &Plan,
    manifest: &Manifest,
) -> SplitOptions {
    let core: BTreeSet<&str> = plan
        .outputs
        .iter()
        .filter(|o| o.role == Role::Core)
        .flat_map(|o| o.files.iter().map(String::as_str))
        .collect();
    let g = &ins.graph;
    let mut deps = BTreeSet::new();
    for n in g.nodes.iter().filter(|n| n.kind == NodeKind::External) {
        if !g
            .in_edges(n.id)
            .any(|e| core.contains(g.nodes[e.from].name.as_str()))
        {
            continue;
        }
        if let Some(s) = manifest
            .standins
            .iter()
            .find(|s| s.provides.iter().any(|p| p == &n.name))
            && !options.payload_packages.contains(&s.name)
        {
            deps.insert(format!("{} >={}", s.name, s.version));
        }
    }
    options.external_depends = deps.into_iter().collect();
    if options.payload_version.is_empty()
        && let Some(s) = options
            .payload_packages
            .first()
            .and_then(|p| manifest.get(p))
    {
        options.payload_version = s.version.clone();
    }
    options
}

/// The work directory of one pack, made before the input is read: a wheel is unpacked into it
/// while it is planned ([`Workspace::unpack`], for [`crate::analysis::inspect::Extras::unpack`]),
/// and staged from there by hard link. Removed when the pack ends, whatever the outcome.
pub struct Workspace {
    work: crate::output::WorkDir,
    /// Where and how much to unpack, for a wheel input.
    pub unpack: Option<crate::input::unpack::Unpack>,
}

impl Workspace {
    /// Make the work directory beside `out` and, for a wheel input, say where it is unpacked to
    /// (bounded by `max_unpacked`).
    pub fn create(input: &Path, out: &Path, max_unpacked: Option<u64>) -> Result<Workspace> {
        let work = crate::output::WorkDir::create(&absolute(out)?, crate::output::WorkKind::Pack)?;
        let unpack = stage::unpack_for(input, &work.dir, max_unpacked)?;
        Ok(Workspace { work, unpack })
    }
}

/// Pack a confined tree into the channel: the split's packages and stand-ins written, read back and
/// checked against the tree, and the channel re-indexed.
pub fn pack(
    ins: &Inspection,
    plan: &Plan,
    split: &Split,
    opts: &PackOptions,
    workspace: Workspace,
) -> Result<PackReport> {
    let input = &ins.tree.source;
    check_request(ins, plan, split, opts)?;
    // Several lazy libraries share one lazy package (the plan's one lazy output).
    let lazy_libs = plan.all_lazy();
    if lazy_libs.is_empty() {
        return Err(Error::internal("a confined plan without a lazy library"));
    }
    let (with, without) = (
        split.variant_with_payload(true)?,
        split.variant_with_payload(false)?,
    );
    let (other_file, missing_variants) = other_variant(plan, opts, with, without, &lazy_libs)?;
    check_names(split, input)?;
    let packing = Packing {
        ins,
        plan,
        split,
        opts,
        input_name: Tree::file_name(&input.display().to_string()).to_string(),
        with,
        without,
    };
    let trace = crate::progress::StepTrace::start("pack");
    let out_abs = absolute(&opts.out)?;
    let mut work = workspace.work;
    let mut notes = Vec::new();
    let staged = packing.stage(&mut work, other_file.as_deref(), &trace, &mut notes)?;

    // Write, read back (lossless, metadata as modelled), then into the channel.
    let builds = &staged.builds;
    let mut written =
        publish::write_packages(builds, &ins.tree, split, plan, &mut work, &out_abs, opts)?;
    trace.step("write");
    let (read, lossless, paths) = publish::read_back(
        builds,
        &mut written,
        split,
        plan,
        &staged.tree_paths,
        &packing.without.name,
    )?;
    let packed: Vec<PackedPackage> = read.iter().map(|r| r.package.clone()).collect();
    trace.step("read back");
    let record = packing.record(&packed, missing_variants);
    let standins: Vec<PackedPackage> = packed.iter().filter(|p| p.standin).cloned().collect();
    let this = packing.channel_info(&lazy_libs, &record, &standins);
    let indexed = publish::publish(&out_abs, &opts.out, &mut work, this, &written, &read)?;
    trace.step("publish and index");

    packing.notes(&written, other_file.is_some(), &mut notes);
    Ok(packing.report(PackResult {
        record,
        standins,
        replaced: staged.replaced,
        lossless,
        paths,
        real_bytes: packed.iter().filter(|p| !p.standin).map(|p| p.bytes).sum(),
        represented_bytes: packed.iter().filter_map(|p| p.represents_bytes).sum(),
        indexed,
        notes,
    }))
}

/// What the steps of one pack share: the planned input, the split, the options and the two
/// variants of the lazy package.
struct Packing<'a> {
    ins: &'a Inspection,
    plan: &'a Plan,
    split: &'a Split,
    opts: &'a PackOptions<'a>,
    /// The input's file name (no directories: the channel must not depend on the machine).
    input_name: String,
    /// The variant with the payload (the tree's) and the slim one.
    with: &'a SplitVariant,
    without: &'a SplitVariant,
}

/// The packages staged in the work directory, before they are written.
struct StagedPackages {
    builds: Vec<stage::Build>,
    /// Every tree path the plan places.
    tree_paths: BTreeSet<String>,
    /// Stand-ins not staged because a real package of that name is in this pack.
    replaced: Vec<String>,
}

/// What a pack made, for its report.
struct PackResult {
    record: PackRecord,
    standins: Vec<PackedPackage>,
    replaced: Vec<String>,
    lossless: Lossless,
    paths: BTreeMap<String, String>,
    real_bytes: u64,
    represented_bytes: u64,
    indexed: Vec<String>,
    notes: Vec<String>,
}

impl Packing<'_> {
    /// Lay the packages out in a work directory next to --out and stage their content: the tree's,
    /// the other variant's (`--lazy-variant`) and the stand-ins'.
    fn stage(
        &self,
        work: &mut crate::output::WorkDir,
        other_file: Option<&Path>,
        trace: &crate::progress::StepTrace,
        notes: &mut Vec<String>,
    ) -> Result<StagedPackages> {
        let (ins, plan, split, opts) = (self.ins, self.plan, self.split, self.opts);
        let (mut builds, placement) = stage::layout(
            &ins.tree,
            plan,
            split,
            &self.with.name,
            &self.input_name,
            &work.dir,
        )?;
        let tree_paths: BTreeSet<String> = placement.keys().cloned().collect();
        let staged = stage::stage_tree(
            &ins.tree,
            &placement,
            &mut builds,
            &work.dir,
            opts.max_unpacked,
            opts.progress,
        )?;
        if let Some(u) = &ins.tree.unpacked {
            // Staged by hard link: the unpacked names are no longer needed (the stages hold the data).
            work.remove_later(u.dir.clone());
        }
        trace.step("stage");
        if let Some(file) = other_file {
            builds.push(stage::other_variant(
                file,
                &self.without.name,
                plan,
                split,
                &staged,
                &work.dir,
                opts.progress,
            )?);
        }
        let replaced =
            stage::standins(&mut builds, split, opts, &self.with.name, &work.dir, notes)?;
        Ok(StagedPackages {
            builds,
            tree_paths,
            replaced,
        })
    }

    /// This pack as `splitpkg.json` records it.
    fn record(
        &self,
        packed: &[PackedPackage],
        missing_variants: Vec<MissingVariant>,
    ) -> PackRecord {
        let (o, plan, split) = (&self.split.options, self.plan, self.split);
        PackRecord {
            version: o.version.clone(),
            build_keys: o.build_keys.clone(),
            prefer: o.prefer.clone(),
            preferred: split.preferred().name.clone(),
            track_feature: split.track_feature(),
            payload_static: split.payload_static,
            input: self.input_name.clone(),
            cuda_runtime: plan.input.cuda_runtime,
            packages: packed.iter().filter(|p| !p.standin).cloned().collect(),
            missing_variants,
            variant_sizes: plan
                .outputs
                .iter()
                .filter(|o| o.role == Role::Lazy)
                .flat_map(|o| o.variants.clone())
                .collect(),
        }
    }

    /// The channel's description with this pack in it (merged with what the channel holds when
    /// published).
    fn channel_info(
        &self,
        lazy_libs: &[&LazyLibrary],
        record: &PackRecord,
        standins: &[PackedPackage],
    ) -> ChannelInfo {
        let (o, plan, split) = (&self.split.options, self.plan, self.split);
        ChannelInfo {
            schema: CHANNEL_SCHEMA.into(),
            schema_version: 1,
            core: o.core_name.clone(),
            lazy: o.lazy_name.clone(),
            dep: plan.options.dep.clone(),
            lazy_library: Tree::file_name(&lazy_libs[0].path).to_string(),
            variants: split.variants.iter().map(|v| v.name.clone()).collect(),
            payload_packages: o.payload_packages.clone(),
            packs: vec![record.clone()],
            standins: standins.to_vec(),
            lazy_libraries: if lazy_libs.len() > 1 {
                lazy_libs
                    .iter()
                    .map(|l| Tree::file_name(&l.path).to_string())
                    .collect()
            } else {
                Vec::new()
            },
            deps: plan.options.deps.clone(),
        }
    }

    /// Notes on what was kept, what was not packed, and a payload linked in statically.
    fn notes(&self, written: &[publish::PackOutput], other_packed: bool, notes: &mut Vec<String>) {
        let (o, plan, split) = (&self.split.options, self.plan, self.split);
        let kept: Vec<&str> = written
            .iter()
            .filter(|o| o.kept)
            .map(|o| o.file.as_str())
            .collect();
        if !kept.is_empty() {
            notes.push(format!(
                "kept what the channel already held with the same content (not compressed again): {}",
                kept.join(", ")
            ));
        }
        if !other_packed {
            notes.push(format!(
                "only the {} variant of {} was packed: scenarios that need {} are not applicable on this channel",
                self.with.name, o.lazy_name, self.without.name
            ));
        }
        if split.payload_static {
            notes.push(format!(
                "{} is linked into {} (static): the {} variant carries it and depends on no payload package",
                plan.options.dep,
                plan.lazy_file_names(),
                self.with.name
            ));
        }
    }

    fn report(&self, r: PackResult) -> PackReport {
        let (o, plan, opts) = (&self.split.options, self.plan, self.opts);
        PackReport {
            schema: "splitpkg-pack".into(),
            schema_version: 1,
            tool: crate::provenance::Tool::this(),
            stamp: crate::provenance::Stamp::default(),
            input: PackInput {
                path: self.ins.tree.source.display().to_string(),
                kind: self.ins.tree.kind,
                verdict: plan.verdict,
                files: plan.input.files,
                bytes: plan.input.bytes,
            },
            channel: opts.out.display().to_string(),
            core: o.core_name.clone(),
            lazy: o.lazy_name.clone(),
            dep: plan.options.dep.clone(),
            record: r.record,
            standins: r.standins,
            standins_replaced_by_real: r.replaced,
            standins_from: opts.standins_from.clone(),
            lossless: r.lossless,
            paths: r.paths,
            real_bytes: r.real_bytes,
            represented_bytes: r.represented_bytes,
            compression_level: opts.compression_level,
            indexed: r.indexed,
            notes: r.notes,
        }
    }
}

/// Refusals that need no work: `--out` and the compression level, a channel that holds another
/// split, links out of the tree.
fn check_request(ins: &Inspection, plan: &Plan, split: &Split, opts: &PackOptions) -> Result<()> {
    let input = &ins.tree.source;
    let out = &opts.out;
    if out.exists() && !out.is_dir() {
        return Err(Error::Usage(format!(
            "--out {}: exists and is not a directory",
            out.display()
        )));
    }
    if !(1..=22).contains(&opts.compression_level) {
        return Err(Error::Usage(format!(
            "--compression-level {}: zstd levels are 1 to 22",
            opts.compression_level
        )));
    }
    if ins.tree.kind == TreeKind::Directory
        && let (Ok(i), Some(parent)) = (input.canonicalize(), absolute_parent(out))
        && parent.starts_with(&i)
    {
        return Err(Error::Usage(format!(
            "--out {} is inside the input tree {}",
            out.display(),
            input.display()
        )));
    }
    // The channel's description first: a channel that holds another split is refused before any work.
    if out.join(CHANNEL_FILE).exists() {
        let o = &split.options;
        publish::same_split(
            &ChannelInfo::load(out)?,
            &o.core_name,
            &o.lazy_name,
            &plan.options.dep,
            out,
        )?;
    }

    // A link out of the tree would point wherever the installing machine has that path.
    if !opts.allow_absolute_symlinks
        && let Some((path, target)) = ins.tree.outside_symlinks().next()
    {
        return Err(Error::bad(
            display_member(&ins.tree.source, ins.tree.kind, path),
            format!(
                "symlink to {target} points outside the package; refusing (pass --allow-absolute-symlinks to pack it as it is)"
            ),
        ));
    }
    Ok(())
}
/// The other variant of the lazy library (`--lazy-variant`, checked by `verify-variant`), or why
/// it is missing.
fn other_variant(
    plan: &Plan,
    opts: &PackOptions,
    with: &SplitVariant,
    without: &SplitVariant,
    lazy_libs: &[&LazyLibrary],
) -> Result<(Option<PathBuf>, Vec<MissingVariant>)> {
    if let (Some((name, _)), [_, _, ..]) = (&opts.lazy_variant, lazy_libs) {
        return Err(Error::Usage(format!(
            "--lazy-variant {name}=FILE is one library, and this plan's lazy package holds {} ({}): packing another variant of several lazy libraries is not supported; pack without --lazy-variant",
            lazy_libs.len(),
            plan.lazy_file_names()
        )));
    }
    match crate::recipe::verify::other_variant_file(
        plan,
        opts.lazy_variant.as_ref(),
        with,
        without,
    )? {
        Some(file) => Ok((Some(file), Vec::new())),
        None => Ok((
            None,
            vec![MissingVariant {
                variant: without.name.clone(),
                why: crate::recipe::verify::missing_variant_reason(
                    without,
                    &plan.lazy_file_names(),
                ),
            }],
        )),
    }
}

/// Names, versions and build strings become file names: only conda's characters, no `/`.
fn check_names(split: &Split, input: &Path) -> Result<()> {
    for m in split.packages() {
        for (what, v) in [
            ("name", &m.name),
            ("version", &m.version),
            ("build", &m.build),
        ] {
            if v.is_empty()
                || v.starts_with('.')
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+!-".contains(c))
            {
                return Err(Error::bad(
                    input.display(),
                    format!(
                        "package {what} {v:?} is not a conda {what} (letters, digits and ._+!- only); refusing"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir().at(".")?.join(p))
    }
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

/// Text report of a pack.
pub fn report_text(r: &PackReport) -> String {
    use crate::output::human_bytes;
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "packed {} ({}) into {}",
        r.input.path,
        r.input.verdict.label(),
        r.channel
    );
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
            _ => p.role.to_string(),
        };
        let size = match p.represents_bytes {
            Some(b) => format!("represents {b} bytes ({}), not real bytes", human_bytes(b)),
            None => format!("{} files, {}", p.files, human_bytes(p.bytes)),
        };
        let _ = writeln!(
            s,
            "  {:<70} {:<22} {size}, archive {}",
            p.file,
            what,
            human_bytes(p.archive_bytes)
        );
        if p.from != Origin::Tree {
            let _ = writeln!(s, "  {:<70} from {}", "", p.from);
        }
    }
    for m in &r.record.missing_variants {
        let _ = writeln!(s, "  no {} package: {}", m.variant, m.why);
    }
    if !r.standins_replaced_by_real.is_empty() {
        let _ = writeln!(
            s,
            "  no stand-in for {}: real package(s) from the tree",
            r.standins_replaced_by_real.join(", ")
        );
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
        per.iter()
            .map(|(f, n)| format!("{} {n}", f.rsplit('/').next().unwrap_or(f)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "bytes: {} real in {} packages; stand-ins represent {} more (counted apart)",
        human_bytes(r.real_bytes),
        r.record.packages.len(),
        human_bytes(r.represented_bytes)
    );
    let _ = writeln!(s, "indexed: {}", r.indexed.join(", "));
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
        let data: Vec<u8> = (0..24u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f)
            .collect();
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
