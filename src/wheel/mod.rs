//! `splitpkg wheel`: a CUDA torch wheel split into pip wheels — the **core** (the input without
//! the lazy library, under the input's own distribution name) and one **lazy** wheel per variant
//! of the lazy library (`torch-cuda-linalg`), driven by the same plan and split model as the conda
//! side (`recipe::split`: which variants exist, which one is preferred, what the other must pass).
//!
//! How the wheels find each other is designed from what real pip and uv do, measured on stand-in
//! wheels (`tools/wheel-installer-facts.py`, docs/evidence/wheel-installers/):
//! - the core's version gains the local label `split` (`2.11.0+split`, `2.11.0+cu130.split`) and
//!   requires the lazy distribution at the same public version (`torch-cuda-linalg==2.11.0`);
//! - each lazy wheel requires exactly that core (`torch==2.11.0+split`), which a monolithic
//!   `torch 2.11.0` does not satisfy: installing a lazy wheel over a monolithic torch replaces it
//!   with the core, so `torch/lib/libtorch_cuda_linalg.so` has one owner;
//! - installers take the highest local label, so the preferred variant's label sorts highest
//!   (`+1.magma` over `+0.nomagma`); the slim install is one pin
//!   (`torch-cuda-linalg==2.11.0+0.nomagma`).
//!
//! Members travel as their raw compressed streams (never inflated and deflated again); only the
//! dist-info files are written fresh. One inflate pass verifies the input RECORD, one reads every
//! written wheel back against its own RECORD, and the union of the core and each lazy wheel is
//! checked to be the input's content (lossless).

pub mod document;
pub mod record;
mod text;
mod writer;

use crate::error::Context;
use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zip::{DateTime, ZipArchive};

use crate::analysis::inspect::Inspection;
use crate::analysis::plan::Plan;
use crate::error::{Error, Result};
use crate::input::pip::{MARKER, MARKER_SCHEMA, MARKER_VERSION, MarkerVariant, VariantMarker};
use crate::input::{Tree, TreeKind, map_file};
use crate::output::Pending;
use crate::progress::Progress;
use crate::recipe::split::{Split, SplitVariant};
use crate::sanitize::{self, shell_word};
use record::RecordEntry;
use writer::{Copies, Finished, Writer};

// The document and its text keep their paths (`wheel::WheelReport`, `wheel::report_text`).
pub use document::{
    MissingWheel, SCHEMA, VARIANTS_DIR, VariantSet, WheelCommands, WheelLayout, WheelReport,
    WrittenWheel,
};
pub use text::report_text;

/// What `wheel` is asked to do beyond the split.
pub struct WheelOptions<'a> {
    /// The directory the wheels go into (created; wheels of the same names are replaced).
    pub out: PathBuf,
    /// The lazy distribution's name [default: from the lazy library, `libtorch_cuda_linalg.so` →
    /// `torch-cuda-linalg`].
    pub lazy_dist: Option<String>,
    /// The other build of the lazy library (`--lazy-variant nomagma=FILE`).
    pub lazy_variant: Option<(String, PathBuf)>,
    /// Where progress lines go.
    pub progress: &'a Progress,
}

/// The input wheel as `wheel` needs it: its distribution, dist-info, tags and verified RECORD.
struct InputWheel<'a> {
    display: String,
    archive: ZipArchive<Cursor<&'a [u8]>>,
    /// The mapped wheel the archive reads.
    data: &'a [u8],
    name: String,
    version: String,
    /// `torch-2.11.0` (the prefix of `.dist-info/` and `.data/`).
    dist_info_stem: String,
    /// `cp311-cp311-manylinux_2_28_x86_64`.
    tags: String,
    metadata: String,
    /// Member path → (RECORD hash, size), every member but RECORD.
    record: BTreeMap<String, (String, u64)>,
    /// Member paths in archive order, with their index.
    members: Vec<(usize, String)>,
}

/// `wheel` takes a `.whl` only: checked before anything is read, so a directory or a conda
/// package is refused at once with what to use instead.
pub fn require_wheel(kind: TreeKind, source: &Path) -> Result<()> {
    if kind != TreeKind::Wheel {
        return Err(Error::Usage(format!(
            "{}: `wheel` splits a .whl; for a tree or a conda package use `pack`",
            source.display()
        )));
    }
    Ok(())
}

/// Whether a member of the wheel at `path` has a file name one of `patterns` selects. Read from
/// the zip's central directory alone, so a wheel with no lazy library (torch 1.10) is answered
/// before anything is inflated. (A lazy library is named by its file name here: a wheel has no
/// symlinks, so a library is stored under the name it is loaded by.)
pub fn has_lazy_member(
    path: &Path,
    patterns: &[crate::analysis::lazy::LazyPattern],
) -> Result<bool> {
    let map = map_file(path)?;
    let archive = zip::ZipArchive::new(std::io::Cursor::new(&map[..]))
        .bad_at(path.display(), "not a readable zip archive")?;
    Ok(archive.file_names().filter_map(|n| n.ok()).any(|n| {
        patterns
            .iter()
            .any(|p| p.matches(Tree::file_name(&n), None))
    }))
}

/// Split `ins` (a `.whl` the plan proved CONFINED) into the core and lazy wheels under `opts.out`.
pub fn split_wheel(
    ins: &Inspection,
    plan: &Plan,
    split: &Split,
    opts: &WheelOptions,
) -> Result<WheelReport> {
    let source = &ins.tree.source;
    require_wheel(ins.tree.kind, source)?;
    let out = &opts.out;
    if out.exists() && !out.is_dir() {
        return Err(Error::Usage(format!(
            "--out {}: exists and is not a directory",
            out.display()
        )));
    }
    let lazy_paths = lazy_paths(plan, opts)?;
    let (with, without) = (
        split.variant_with_payload(true)?,
        split.variant_with_payload(false)?,
    );
    let other_file =
        crate::recipe::verify::other_variant_file(plan, opts.lazy_variant.as_ref(), with, without)?;

    let map = map_file(source)?;
    let known = known_digests(ins);
    let tracer = crate::progress::StepTrace::start("wheel");
    let trace = |step: &str| tracer.step(step);
    let mut input = InputWheel::open(source, &map, &known, opts.progress)?;
    trace("input RECORD verified");
    let job = Job::new(&input, plan, split, opts, lazy_paths, with, other_file)?;

    // Every check on the input and the options is behind us: only now does anything appear in
    // `--out` (and goes again, if still empty, should a later step fail or a signal come).
    let mut created = crate::output::CreatedDirs::default();
    for d in [out, &job.variants_dir] {
        created.create(d)?;
        crate::output::cleanup::sweep_stale(d);
    }
    let mut pending = Pending::default();
    opts.progress.start_unknown("writing wheels");
    let written = job.write_all(&mut input, &mut pending)?;
    opts.progress.finish();

    trace("wheels written");
    let checked = job.read_back(&input, written, &pending, with)?;
    job.link_core(&checked.core, &mut pending)?;
    trace("read back");
    pending.commit()?;
    created.keep();
    trace("committed");
    Ok(job.report(&input, checked))
}

/// The plan's lazy libraries: one, or several (`--lazy` repeated or a glob) that travel together
/// in one lazy distribution, as `pack` puts them in one lazy package.
fn lazy_paths(plan: &Plan, opts: &WheelOptions) -> Result<Vec<String>> {
    let lazy_paths: Vec<String> = plan.all_lazy().iter().map(|l| l.path.clone()).collect();
    if lazy_paths.is_empty() {
        return Err(Error::internal("a confined plan without a lazy library"));
    }
    if lazy_paths.len() > 1 && opts.lazy_variant.is_some() {
        return Err(Error::Usage(format!(
            "--lazy-variant: one file cannot stand for {} lazy libraries ({}); another variant of several libraries is not supported",
            lazy_paths.len(),
            lazy_paths.join(", ")
        )));
    }
    Ok(lazy_paths)
}

/// ELF members were hashed while the plan had them inflated (`Extras::digests`): the RECORD
/// check inflates only the rest, so every member is inflated once in all.
fn known_digests(ins: &Inspection) -> BTreeMap<&str, (String, u64)> {
    ins.files
        .iter()
        .filter_map(|f| {
            f.sha256
                .map(|h| (f.path.as_str(), (record::hash_field(&h), f.size)))
        })
        .collect()
}

/// A variant of the lazy library that can be written, with where its library comes from and the
/// library's size.
struct Available<'a> {
    variant: &'a SplitVariant,
    content: LazyContent,
    bytes: u64,
}

/// What one split writes, decided from the input and the options before anything is written.
struct Job<'a> {
    out: &'a Path,
    /// `--out/variants`, checked not to lead elsewhere through a link.
    variants_dir: PathBuf,
    lazy_paths: Vec<String>,
    /// The libraries by file name (`a.so, b.so`), for the summary.
    lazy_names: String,
    lazy_dist: String,
    /// The input's public version (`2.11.0`) and local label (`cu130`), if any.
    public: String,
    local: Option<String>,
    /// `2.11.0+split`.
    core_version: String,
    /// `torch==2.11.0+split`.
    requires: String,
    /// The variants that can be written, preferred first.
    available: Vec<Available<'a>>,
    missing: Vec<MissingWheel>,
    pep825: Pep825,
}

/// The written wheels read back and found to be the input's content.
struct WheelsReadBack {
    core: WrittenWheel,
    /// The local-label lazy wheels.
    lazy: Vec<WrittenWheel>,
    /// The PEP 825 set's wheels (variants and the plain fallback).
    variant_wheels: Vec<WrittenWheel>,
    /// Members matched against their own RECORD.
    members: usize,
    lossless: bool,
}

impl<'a> Job<'a> {
    fn new(
        input: &InputWheel,
        plan: &Plan,
        split: &'a Split,
        opts: &'a WheelOptions,
        lazy_paths: Vec<String>,
        with: &SplitVariant,
        other_file: Option<PathBuf>,
    ) -> Result<Job<'a>> {
        if let Some(absent) = lazy_paths.iter().find(|p| !input.record.contains_key(*p)) {
            return Err(Error::bad(
                &input.display,
                format!("has no {absent} (the plan's lazy library)"),
            ));
        }
        let lazy_dist = match &opts.lazy_dist {
            Some(n) => n.clone(),
            None => default_lazy_dist(&lazy_paths)?,
        };
        sanitize::check_dist_name(&lazy_dist)
            .map_err(|why| Error::usage_source("--lazy-dist", why))?;
        let (public, local) = match input.version.split_once('+') {
            Some((p, l)) => (p.to_string(), Some(l.to_string())),
            None => (input.version.clone(), None),
        };
        let out = opts.out.as_path();
        // Never written through a link: `--out/variants` → elsewhere would put the wheels there.
        let variants_dir = crate::confine::dir_inside(out, VARIANTS_DIR)
            .map_err(|e| Error::usage_source(format!("--out {}", out.display()), e))?;
        let lazy_names = plan.lazy_file_names();
        let lazy_size: u64 = lazy_paths
            .iter()
            .filter_map(|p| input.record.get(p))
            .map(|r| r.1)
            .sum();
        let (available, missing) =
            available_variants(split, with, other_file, &lazy_names, lazy_size)?;
        let pep825 = Pep825::new(
            &input.name,
            &lazy_dist,
            available.iter().map(|a| a.variant.name.as_str()),
        )?;
        let mut job = Job {
            out,
            variants_dir,
            lazy_paths,
            lazy_names,
            lazy_dist,
            public,
            local,
            core_version: String::new(),
            requires: String::new(),
            available,
            missing,
            pep825,
        };
        job.core_version = job.label("split");
        job.requires = format!("{}=={}", input.name, job.core_version);
        Ok(job)
    }

    /// The input's version with `rest` in its local label (`2.11.0+rest`, `2.11.0+cu130.rest`).
    fn label(&self, rest: &str) -> String {
        match &self.local {
            Some(l) => format!("{}+{l}.{rest}", self.public),
            None => format!("{}+{rest}", self.public),
        }
    }

    /// A lazy wheel's local-label version: the preferred variant's label sorts highest.
    fn lazy_version(&self, v: &SplitVariant) -> String {
        self.label(&format!("{}.{}", if v.preferred { 1 } else { 0 }, v.name))
    }

    /// The core, each available variant in each of its layouts, and the PEP 825 index file, all
    /// into `pending`. Each written wheel travels with the members it copied raw, for its
    /// read-back check.
    fn write_all(
        &self,
        input: &mut InputWheel,
        pending: &mut Pending,
    ) -> Result<Vec<(WrittenWheel, Copies)>> {
        let mut written = vec![self.write_core(input, pending)?];
        for a in &self.available {
            let v = a.variant;
            // The same variant in each layout: local label (today's installers), PEP 825 variant,
            // and for the preferred one the plain fallback beside the variants.
            let mut layouts = vec![
                (WheelLayout::LocalLabel, self.lazy_version(v)),
                (WheelLayout::Variant, input.version.clone()),
            ];
            if v.preferred {
                layouts.push((WheelLayout::PlainFallback, input.version.clone()));
            }
            for (layout, version) in layouts {
                let spec = LazySpec {
                    layout,
                    version,
                    variant: v,
                    marker: self.marker(v, layout, (&input.version, &input.tags)),
                };
                written.push(self.write_lazy(input, &spec, &a.content, pending)?);
            }
        }
        // The index file of the PEP 825 set, written and committed with the wheels.
        let index = self.index_file(input);
        let mut staged = pending.add(&self.variants_dir, &index)?;
        std::io::Write::write_all(&mut staged.file, self.pep825.index_json().as_bytes())
            .at(self.variants_dir.join(&index))?;
        pending.sync_in_background(&staged.path, staged.file);
        Ok(written)
    }

    /// `{lazy_dist}-{version}-variants.json`.
    fn index_file(&self, input: &InputWheel) -> String {
        format!(
            "{}-{}-variants.json",
            escaped(&self.lazy_dist),
            input.version
        )
    }

    /// Read every written wheel back against its own RECORD, then check the union.
    fn read_back(
        &self,
        input: &InputWheel,
        written: Vec<(WrittenWheel, Copies)>,
        pending: &Pending,
        with: &SplitVariant,
    ) -> Result<WheelsReadBack> {
        let mut members = 0;
        let mut contents = Vec::new();
        for (w, c) in &written {
            let (n, files) = verify_written(&pending.tmp_of(&self.out.join(&w.file)), input, c)?;
            members += n;
            contents.push(files);
        }
        let mut written = written.into_iter().map(|(w, _)| w);
        let core = written
            .next()
            .ok_or_else(|| Error::internal("no core wheel written"))?;
        let all_lazy: Vec<WrittenWheel> = written.collect();
        let lossless = lossless(input, &contents, &all_lazy, &self.lazy_paths, with);
        let (lazy, variant_wheels): (Vec<WrittenWheel>, Vec<WrittenWheel>) = all_lazy
            .into_iter()
            .partition(|w| w.layout == WheelLayout::LocalLabel);
        if !lossless {
            return Err(Error::internal(format!(
                "{}: the written wheels do not reproduce the input's files",
                input.display
            )));
        }
        Ok(WheelsReadBack {
            core,
            lazy,
            variant_wheels,
            members,
            lossless,
        })
    }

    /// The core belongs to both sets: linked (one copy on disk), copied where links cannot be
    /// made, and committed with the rest.
    fn link_core(&self, core: &WrittenWheel, pending: &mut Pending) -> Result<()> {
        pending.add_link(&self.out.join(&core.file), &self.variants_dir, &core.file)
    }

    fn report(self, input: &InputWheel, checked: WheelsReadBack) -> WheelReport {
        let find_links = self.out.display().to_string();
        let commands = commands(&find_links, &checked.core, &checked.lazy);
        let variants = self.variant_set(input, &checked.core, checked.variant_wheels);
        WheelReport {
            schema: SCHEMA.into(),
            schema_version: 1,
            tool: crate::provenance::Tool::this(),
            stamp: crate::provenance::Stamp::default(),
            input: input.display.clone(),
            out: find_links,
            core: checked.core,
            lazy: checked.lazy,
            missing: self.missing,
            input_record_verified: input.record.len(),
            written_record_verified: checked.members,
            lossless: checked.lossless,
            commands,
            variants,
        }
    }

    /// The PEP 825 set as reported, with uv's and pip's commands for it. Each pins the core, as
    /// the local-label commands do (`commands`): uv's variant mode then picks the lazy variant by
    /// preference, the other variant is named by its file, and pip takes the plain fallback.
    fn variant_set(
        &self,
        input: &InputWheel,
        core: &WrittenWheel,
        wheels: Vec<WrittenWheel>,
    ) -> VariantSet {
        let vdir = self.variants_dir.display().to_string();
        let vlinks = shell_word(&vdir);
        let core = pin(core);
        let uv_variants = format!(
            "uv pip install --preview-features wheel-variants --find-links {vlinks} {core}"
        );
        VariantSet {
            dir: vdir.clone(),
            schema: VARIANT_SCHEMA.into(),
            index: self.index_file(input),
            property: format!("{} :: {}", self.pep825.namespace, self.pep825.feature),
            uv_other: wheels
                .iter()
                .find(|w| w.layout == WheelLayout::Variant && !w.preferred)
                .map(|w| {
                    format!(
                        "{uv_variants} {}",
                        shell_word(&self.out.join(&w.file).display().to_string())
                    )
                }),
            uv_default: uv_variants,
            pip_default: format!("pip install --find-links {vlinks} {core}"),
            wheels,
        }
    }
}

/// The variants that can be written, preferred first (the tree's own, and the other when
/// `--lazy-variant` gave it), and those that cannot, with why.
fn available_variants<'a>(
    split: &'a Split,
    with: &SplitVariant,
    other_file: Option<PathBuf>,
    lazy_names: &str,
    lazy_size: u64,
) -> Result<(Vec<Available<'a>>, Vec<MissingWheel>)> {
    let mut available = Vec::new();
    let mut missing = Vec::new();
    for v in split
        .variants
        .iter()
        .filter(|v| v.preferred)
        .chain(split.variants.iter().filter(|v| !v.preferred))
    {
        if v.with_payload == with.with_payload {
            available.push(Available {
                variant: v,
                content: LazyContent::Member,
                bytes: lazy_size,
            });
        } else if let Some(f) = &other_file {
            let n = std::fs::metadata(f).at(f)?.len();
            available.push(Available {
                variant: v,
                content: LazyContent::File(f.clone()),
                bytes: n,
            });
        } else {
            missing.push(MissingWheel {
                variant: v.name.clone(),
                why: crate::recipe::verify::missing_variant_reason(v, lazy_names),
            });
        }
    }
    Ok((available, missing))
}

/// Installer commands for the local-label set, printed for the user to paste: every word quoted
/// for the shell (the names and versions are checked already; `--out` is the user's own path,
/// spaces and all). Each command pins the core and the lazy wheel to the versions written here:
/// `--find-links` adds a directory to the index, it does not replace it, so an unpinned `torch`
/// resolves to the newest monolithic torch on the public index (2.15.0 against a split of 2.11.0,
/// issue 53), and `--no-index` fails on torch's own dependencies. A pin matches only the split's
/// local version, which no public index holds; the dependencies still come from the index.
fn commands(find_links: &str, core: &WrittenWheel, lazy: &[WrittenWheel]) -> WheelCommands {
    let links = shell_word(find_links);
    let core = pin(core);
    let install = |tool: &str, w: &WrittenWheel| {
        format!("{tool} install --find-links {links} {core} {}", pin(w))
    };
    // The variant a plain install gets: the preferred one, or the one written when it is missing.
    let first = lazy.iter().find(|w| w.preferred).or(lazy.first());
    let other = lazy
        .iter()
        .find(|w| !first.is_some_and(|f| std::ptr::eq(*w, f)));
    let or_core = |tool: &str| {
        first.map_or_else(
            || format!("{tool} install --find-links {links} {core}"),
            |w| install(tool, w),
        )
    };
    WheelCommands {
        default: or_core("pip"),
        other: other.map(|w| install("pip", w)),
        uv_default: or_core("uv pip"),
        uv_other: other.map(|w| install("uv pip", w)),
    }
}

/// `dist==version` of a written wheel, quoted for the shell: the requirement that selects exactly
/// that file (a local version label is matched only by a pin that names it).
fn pin(w: &WrittenWheel) -> String {
    shell_word(&format!("{}=={}", w.distribution, w.version))
}

/// The variant metadata format followed: variantlib 0.2.2's `VARIANT_INFO_SCHEMA_URL` (PEP 825's
/// package format with the providers draft's `static-properties`). variantlib does not check
/// `$schema` itself; `tools/check-variant-wheels.py` does.
pub const VARIANT_SCHEMA: &str = "https://variants-schema.wheelnext.dev/v0.2.0.json";

/// The PEP 825 metadata of one split: one static property `namespace :: feature` whose values are
/// the variant names, listed preferred first (the order is the default preference).
struct Pep825 {
    namespace: String,
    feature: String,
    labels: Vec<String>,
}

impl Pep825 {
    fn new<'v>(
        core: &str,
        lazy_dist: &str,
        variants: impl Iterator<Item = &'v str>,
    ) -> Result<Pep825> {
        // Namespaces and features are `[a-z0-9_]+`, values and labels `[0-9a-z._]+` (variantlib).
        let ident = |s: &str| {
            s.to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect::<String>()
        };
        let labels: Vec<String> = variants.map(str::to_string).collect();
        if let Some(bad) = labels.iter().find(|l| {
            l.is_empty()
                || l.len() > 16
                || !l
                    .chars()
                    .all(|c| matches!(c, '0'..='9' | 'a'..='z' | '_' | '.'))
        }) {
            return Err(Error::Usage(format!(
                "variant {bad:?}: not a PEP 825 variant label ([0-9a-z._], at most 16 characters)"
            )));
        }
        Ok(Pep825 {
            namespace: ident(core),
            feature: ident(lazy_dist),
            labels,
        })
    }

    /// The metadata for `labels` (one for a wheel's `variant.json`, all for the index file).
    fn json(&self, labels: &[&String]) -> String {
        use serde_json::json;
        let variants: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|l| {
                (
                    l.to_string(),
                    json!({ &self.namespace: { &self.feature: [l] } }),
                )
            })
            .collect();
        let doc = json!({
            "$schema": VARIANT_SCHEMA,
            "default-priorities": { "namespace": [&self.namespace] },
            "providers": { &self.namespace: { "static-properties": { &self.feature: &self.labels } } },
            "variants": variants,
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }

    fn variant_json(&self, label: &str) -> String {
        self.json(
            &self
                .labels
                .iter()
                .filter(|l| l.as_str() == label)
                .collect::<Vec<_>>(),
        )
    }

    fn index_json(&self) -> String {
        self.json(&self.labels.iter().collect::<Vec<_>>())
    }
}

/// `libtorch_cuda_linalg.so` → `torch-cuda-linalg`; several libraries → the words their names
/// share (`libfoo_providers_a.so`, `libfoo_providers_b.so` → `foo-providers`).
fn default_lazy_dist(lazy_paths: &[String]) -> Result<String> {
    let name = |p: &String| {
        let file = Tree::file_name(p);
        let stem = file.split(".so").next().unwrap_or(file);
        stem.strip_prefix("lib").unwrap_or(stem).replace('_', "-")
    };
    let names: Vec<String> = lazy_paths.iter().map(name).collect();
    let Some((first, rest)) = names.split_first() else {
        return Err(Error::internal("no lazy library"));
    };
    let words: Vec<&str> = first.split('-').collect();
    let shared = (0..=words.len())
        .rev()
        .map(|n| words[..n].join("-"))
        .find(|w| {
            rest.iter()
                .all(|r| r == w || r.starts_with(&format!("{w}-")))
        });
    match shared {
        Some(w) if !w.is_empty() => Ok(w),
        _ => Err(Error::Usage(format!(
            "the lazy libraries ({}) share no name: give the lazy distribution's name with --lazy-dist",
            lazy_paths.join(", ")
        ))),
    }
}

/// A distribution name as it appears in wheel and dist-info file names (PEP 427 escaping).
pub(crate) fn escaped(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl<'a> InputWheel<'a> {
    fn open(
        path: &Path,
        bytes: &'a [u8],
        known: &BTreeMap<&str, (String, u64)>,
        progress: &Progress,
    ) -> Result<InputWheel<'a>> {
        let display = path.display().to_string();
        let file = Tree::file_name(&display).to_string();
        let mut archive =
            ZipArchive::new(Cursor::new(bytes)).bad_at(&display, "not a readable zip archive")?;
        let mut members = Vec::with_capacity(archive.len());
        for i in 0..archive.len() {
            let f = archive.by_index_raw(i).bad_in(&display)?;
            let name = f.name().bad_in(&display)?.into_owned();
            if !f.is_dir() {
                members.push((i, name));
            }
        }
        // The one dist-info directory with a METADATA.
        let metas: Vec<&String> = members
            .iter()
            .map(|(_, n)| n)
            .filter(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
            .collect();
        let [meta_path] = metas.as_slice() else {
            return Err(Error::bad(
                &display,
                format!(
                    "{} .dist-info/METADATA files at the top level, expected one",
                    metas.len()
                ),
            ));
        };
        let dist_info_stem = meta_path
            .trim_end_matches(".dist-info/METADATA")
            .to_string();
        let metadata = read_member(&mut archive, &display, meta_path)?;
        let field = |key: &str| {
            metadata
                .lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        };
        let at = format!("{display}:{meta_path}");
        let name = field("Name:").ok_or_else(|| Error::bad(&at, "no Name"))?;
        let version = field("Version:").ok_or_else(|| Error::bad(&at, "no Version"))?;
        // Name, version and the header go into new METADATA, file names and printed commands.
        sanitize::check_dist_name(&name).bad_at(&at, "Name")?;
        sanitize::check_version(&version).bad_at(&at, "Version")?;
        check_header(&metadata).bad_in(&at)?;
        // Tags: the last three dash-separated parts of the file name; they name the written wheels.
        let parts: Vec<&str> = file.trim_end_matches(".whl").split('-').collect();
        if parts.len() < 5 {
            return Err(Error::bad(
                &display,
                "not a wheel file name (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl)",
            ));
        }
        for t in &parts[parts.len() - 3..] {
            sanitize::check_wheel_tag(t).bad_at(&display, "file name")?;
        }
        let tags = parts[parts.len() - 3..].join("-");
        let record_path = format!("{dist_info_stem}.dist-info/RECORD");
        let record_text = read_member(&mut archive, &display, &record_path)?;
        let entries = record::parse(&record_text).bad_in(format!("{display}:{record_path}"))?;
        let mut record = BTreeMap::new();
        for e in entries {
            if let (Some(h), Some(n)) = (e.hash, e.size) {
                record.insert(e.path, (h, n));
            }
        }
        // A row for a file the archive does not hold: the input is not the wheel its RECORD describes.
        if let Some(absent) = record.keys().find(|p| archive.index_for_name(p).is_none()) {
            return Err(Error::bad(
                format!("{display}:{record_path}"),
                format!("lists {absent}, which is not in the archive"),
            ));
        }
        let input = InputWheel {
            display,
            archive,
            data: bytes,
            name,
            version,
            dist_info_stem,
            tags,
            metadata,
            record,
            members,
        };
        input.verify_record(&record_path, known, progress)?;
        Ok(input)
    }

    /// Every member but RECORD (and its signatures) is in RECORD with its bytes' hash and size;
    /// members in `known` were hashed already (by the plan's pass) and are not inflated again.
    fn verify_record(
        &self,
        record_path: &str,
        known: &BTreeMap<&str, (String, u64)>,
        progress: &Progress,
    ) -> Result<()> {
        let signatures = [format!("{record_path}.jws"), format!("{record_path}.p7s")];
        let todo: Vec<&(usize, String)> = self
            .members
            .iter()
            .filter(|(_, n)| n != record_path && !signatures.contains(n))
            .collect();
        progress.start_count("verifying RECORD", todo.len() as u64, "members");
        let result = todo
            .par_iter()
            .map_init(
                || self.archive.clone(),
                |archive, (i, name)| {
                    let at = format!("{}:{name}", self.display);
                    let Some((hash, size)) = self.record.get(name) else {
                        return Err(Error::bad(&at, "not listed in RECORD"));
                    };
                    let (got_hash, got_size) = match known.get(name.as_str()) {
                        Some(k) => k.clone(),
                        None => hash_member(archive, *i, &at)?,
                    };
                    progress.inc(1);
                    if &got_hash != hash || got_size != *size {
                        return Err(Error::bad(
                            &at,
                            format!("RECORD says {hash} ({size} bytes), the member is {got_hash} ({got_size} bytes)"),
                        ));
                    }
                    Ok(())
                },
            )
            .collect::<Result<()>>();
        progress.finish();
        result
    }

    fn is_dist_info(&self, path: &str) -> bool {
        path.starts_with(&format!("{}.dist-info/", self.dist_info_stem))
    }

    /// The archive's own name index (a hash map): a linear search per member made writing the
    /// core quadratic in the member count (11,842 in torch 2.11).
    fn index_of(&self, path: &str) -> Option<usize> {
        self.archive.index_for_name(path)
    }

    /// Copy member `path` into `w` as its raw compressed stream, renamed to `to`, with its row
    /// from the verified RECORD.
    fn copy_into(&mut self, w: &mut Writer, path: &str, to: &str) -> Result<()> {
        let i = self
            .index_of(path)
            .ok_or_else(|| Error::internal(format!("{path} vanished from the input")))?;
        let row = self
            .record
            .get(path)
            .cloned()
            .ok_or_else(|| Error::internal(format!("{path} not in the verified RECORD")))?;
        w.copy(
            &mut self.archive,
            i,
            &format!("{}:{path}", self.display),
            to,
            row,
        )
    }
}

fn read_member(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    display: &str,
    path: &str,
) -> Result<String> {
    use crate::input::file::{MAX_METADATA_BYTES, read_capped_text};
    let at = format!("{display}:{path}");
    let f = archive.by_name(path).bad_in(&at)?;
    // Metadata files are small: above the cap the wheel is refused (never a truncated copy).
    read_capped_text(f, &at, MAX_METADATA_BYTES, "dist-info file")
}

/// A METADATA header [`check_header`] refuses to copy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header with the control character {}: refusing to copy it", .0.escape_default())]
struct ControlInHeader(char);

/// The METADATA header is copied into the core wheel: a carriage return or another control
/// character in it is a header Python's parser reads and ours does not (`Name: x\rRequires-Dist: y`).
fn check_header(metadata: &str) -> std::result::Result<(), ControlInHeader> {
    let head = metadata.split("\n\n").next().unwrap_or_default();
    match head
        .lines()
        .flat_map(|l| l.chars())
        .find(|&c| c.is_control() && c != '\t')
    {
        Some(c) => Err(ControlInHeader(c)),
        None => Ok(()),
    }
}

/// RECORD hash and size of member `i`, inflated once.
fn hash_member(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    i: usize,
    at: &str,
) -> Result<(String, u64)> {
    // One buffer per thread: a fresh 1 MiB per member meant zeroing gigabytes for the
    // ~11,000 small members of a torch wheel.
    thread_local!(static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 1 << 20]));
    let mut f = archive.by_index(i).bad_in(at)?;
    let mut h = Sha256::new();
    let mut n = 0u64;
    BUF.with_borrow_mut(|buf| {
        loop {
            let k = f.read(buf).bad_in(at)?;
            if k == 0 {
                return Ok(());
            }
            h.update(&buf[..k]);
            n += k as u64;
        }
    })?;
    Ok((record::hash_field(&h.finalize()), n))
}

/// The timestamp new members get: the input METADATA's (deterministic, and plausible).
fn metadata_time(input: &mut InputWheel) -> Result<DateTime> {
    let path = format!("{}.dist-info/METADATA", input.dist_info_stem);
    let i = input
        .index_of(&path)
        .ok_or_else(|| Error::internal("METADATA vanished"))?;
    let f = input.archive.by_index_raw(i).bad_in(&input.display)?;
    Ok(f.last_modified().unwrap_or_default())
}

/// The METADATA header with `Version` replaced and `extra` lines added at the end of the header.
fn edit_metadata(metadata: &str, version: &str, extra: &[String]) -> String {
    let (head, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i], &metadata[i..]),
        None => (metadata.trim_end_matches('\n'), "\n"),
    };
    let mut out: Vec<String> = head
        .lines()
        .map(|l| {
            if l.starts_with("Version:") {
                format!("Version: {version}")
            } else {
                l.to_string()
            }
        })
        .collect();
    out.extend(extra.iter().cloned());
    format!(
        "{}{}",
        out.join("\n"),
        if body.is_empty() { "\n" } else { body }
    )
}

impl Job<'_> {
    fn write_core(
        &self,
        input: &mut InputWheel,
        pending: &mut Pending,
    ) -> Result<(WrittenWheel, Copies)> {
        let version = &self.core_version;
        let esc = escaped(&input.name);
        let file = format!("{esc}-{version}-{}.whl", input.tags);
        let staged = pending.add(self.out, &file)?;
        let tmp = staged.path.clone();
        let old = input.dist_info_stem.clone();
        let new = format!("{esc}-{version}");
        let time = metadata_time(input)?;
        let mut w = Writer::create(staged, format!("{new}.dist-info"), time)?;
        let meta_path = format!("{old}.dist-info/METADATA");
        let record_path = format!("{old}.dist-info/RECORD");
        let renamed = |p: &str| -> String {
            for suffix in [".dist-info/", ".data/"] {
                if let Some(rest) = p.strip_prefix(&format!("{old}{suffix}")) {
                    return format!("{new}{suffix}{rest}");
                }
            }
            p.to_string()
        };
        let members: Vec<String> = input.members.iter().map(|(_, n)| n.clone()).collect();
        for path in &members {
            if self.lazy_paths.contains(path)
                || path == &record_path
                || path.starts_with(&format!("{record_path}."))
            {
                continue;
            }
            if path == &meta_path {
                let requires = sanitize::header_line(
                    "Requires-Dist",
                    &format!("{}=={}", self.lazy_dist, self.public),
                )
                .map_err(Error::internal)?;
                let text = edit_metadata(&input.metadata, version, &[requires]);
                w.add(&renamed(path), text.as_bytes(), 0o644)?;
            } else {
                input.copy_into(&mut w, path, &renamed(path))?;
            }
        }
        let Finished {
            bytes,
            members,
            copies,
            sha256,
        } = w.finish(&tmp, pending)?;
        let wheel = WrittenWheel {
            file,
            layout: WheelLayout::Core,
            distribution: input.name.clone(),
            version: version.to_string(),
            variant: None,
            preferred: true,
            bytes,
            sha256,
            members,
        };
        Ok((wheel, copies))
    }

    /// The marker a lazy wheel carries (`input::pip`), so `plan` on an installed environment can
    /// say which variant is there and how to get the other.
    fn marker(
        &self,
        v: &SplitVariant,
        layout: WheelLayout,
        (version, tags): (&str, &str),
    ) -> VariantMarker {
        let dist = &self.lazy_dist;
        let variants = self
            .available
            .iter()
            .map(|a| MarkerVariant {
                name: a.variant.name.clone(),
                with_payload: a.variant.with_payload,
                library_bytes: a.bytes,
                install: match layout {
                    WheelLayout::LocalLabel => format!("{dist}=={}", self.lazy_version(a.variant)),
                    _ => lazy_file_name(dist, version, tags, Some(&a.variant.name)),
                },
            })
            .collect();
        VariantMarker {
            schema: MARKER_SCHEMA.into(),
            schema_version: MARKER_VERSION,
            lazy_library: self.lazy_paths[0].clone(),
            variant: v.name.clone(),
            with_payload: v.with_payload,
            preferred: v.preferred,
            variants,
        }
    }

    /// One lazy wheel: the library (the input's member or the other build), fresh METADATA, the
    /// marker, `variant.json` in the PEP 825 layout, and WHEEL and the licence files.
    fn write_lazy(
        &self,
        input: &mut InputWheel,
        spec: &LazySpec,
        content: &LazyContent,
        pending: &mut Pending,
    ) -> Result<(WrittenWheel, Copies)> {
        let (dist, version, variant) = (&self.lazy_dist, &spec.version, spec.variant);
        let label = (spec.layout == WheelLayout::Variant).then_some(variant.name.as_str());
        let file = lazy_file_name(dist, version, &input.tags, label);
        let dir = if spec.layout == WheelLayout::LocalLabel {
            self.out
        } else {
            self.variants_dir.as_path()
        };
        let staged = pending.add(dir, &file)?;
        let tmp = staged.path.clone();
        let dist_info = format!("{}-{version}.dist-info", escaped(dist));
        let time = metadata_time(input)?;
        let mut w = Writer::create(staged, dist_info.clone(), time)?;
        match content {
            LazyContent::Member => {
                for p in &self.lazy_paths {
                    input.copy_into(&mut w, p, p)?;
                }
            }
            // Only with one lazy library (`--lazy-variant` is refused for several).
            LazyContent::File(f) => {
                let file = crate::input::open_nofollow(f).at(f)?;
                w.add(&self.lazy_paths[0], file, 0o755)?;
            }
        }
        let meta = self.lazy_metadata(input, spec)?;
        w.add(&format!("{dist_info}/METADATA"), meta.as_bytes(), 0o644)?;
        let marker = serde_json::to_string_pretty(&spec.marker)
            .failed_at("writing the variant marker")?
            + "\n";
        w.add(&format!("{dist_info}/{MARKER}"), marker.as_bytes(), 0o644)?;
        if label.is_some() {
            w.add(
                &format!("{dist_info}/variant.json"),
                self.pep825.variant_json(&variant.name).as_bytes(),
                0o644,
            )?;
        }
        copy_licences(input, &mut w, &dist_info)?;
        let Finished {
            bytes,
            members,
            copies,
            sha256,
        } = w.finish(&tmp, pending)?;
        let rel = if spec.layout == WheelLayout::LocalLabel {
            file
        } else {
            format!("{VARIANTS_DIR}/{file}")
        };
        let wheel = WrittenWheel {
            file: rel,
            layout: spec.layout,
            distribution: dist.to_string(),
            version: version.to_string(),
            variant: Some(variant.name.clone()),
            preferred: variant.preferred,
            bytes,
            sha256,
            members,
        };
        Ok((wheel, copies))
    }

    /// A lazy wheel's METADATA, written fresh: its name, version, what it is, and the exact core
    /// it requires.
    fn lazy_metadata(&self, input: &InputWheel, spec: &LazySpec) -> Result<String> {
        let variant = spec.variant;
        let summary = format!(
            "{} of {} {} ({} variant, {}), split out by splitpkg",
            self.lazy_names,
            input.name,
            input.version,
            variant.name,
            if variant.with_payload {
                "with the payload"
            } else {
                "without the payload"
            }
        );
        let header =
            |key: &str, value: &str| sanitize::header_line(key, value).bad_in(&input.display);
        Ok([
            header("Metadata-Version", "2.1")?,
            header("Name", &self.lazy_dist)?,
            header("Version", &spec.version)?,
            header("Summary", &summary)?,
            header("Requires-Dist", &self.requires)?,
        ]
        .join("\n")
            + "\n")
    }
}

/// WHEEL (same tags) and the licence files travel with the library into `dist_info`.
fn copy_licences(input: &mut InputWheel, w: &mut Writer, dist_info: &str) -> Result<()> {
    let old = format!("{}.dist-info/", input.dist_info_stem);
    let members: Vec<String> = input.members.iter().map(|(_, n)| n.clone()).collect();
    for path in &members {
        let Some(rest) = path.strip_prefix(&old) else {
            continue;
        };
        let upper = rest.to_ascii_uppercase();
        if rest == "WHEEL"
            || rest.starts_with("licenses/")
            || ["LICENSE", "NOTICE", "COPYING"]
                .iter()
                .any(|p| upper.starts_with(p))
        {
            input.copy_into(w, path, &format!("{dist_info}/{rest}"))?;
        }
    }
    Ok(())
}

/// Where a lazy wheel's library comes from.
enum LazyContent {
    /// The input's own member (the variant the tree carries).
    Member,
    /// Another build (`--lazy-variant`), already checked by `verify-variant`.
    File(PathBuf),
}

/// One lazy wheel to write: a variant in one layout.
struct LazySpec<'a> {
    layout: WheelLayout,
    version: String,
    variant: &'a SplitVariant,
    marker: VariantMarker,
}

/// `{dist}-{version}-{tags}[-{label}].whl` (PEP 427 escaping; the label is PEP 825's).
fn lazy_file_name(dist: &str, version: &str, tags: &str, label: Option<&str>) -> String {
    match label {
        Some(l) => format!("{}-{version}-{tags}-{l}.whl", escaped(dist)),
        None => format!("{}-{version}-{tags}.whl", escaped(dist)),
    }
}

/// Read a written wheel back against its own RECORD; returns the members checked and the
/// non-dist-info files with their hashes. (The wheel's SHA-256 was taken while it was written.)
///
/// A member copied as a raw stream is checked by comparing its compressed bytes, CRC-32 and sizes
/// with the input member it came from, whose content the input RECORD check already hashed: the
/// bytes written are the bytes verified, without inflating them again (one inflate pass verifies
/// the input and checks the output). New members (METADATA, another build of the lazy library)
/// are inflated and hashed.
fn verify_written(
    path: &Path,
    input: &InputWheel,
    copies: &Copies,
) -> Result<(usize, BTreeMap<String, String>)> {
    let display = path.display().to_string();
    let map = map_file(path)?;
    let bytes: &[u8] = &map;
    let unreadable =
        |e: zip::result::ZipError| Error::failed(format!("{display}: written wheel unreadable"), e);
    let mut archive = ZipArchive::new(Cursor::new(bytes)).map_err(unreadable)?;
    let names: Vec<String> = archive
        .file_names()
        .map(|n| n.map(|n| n.into_owned()))
        .collect::<std::result::Result<_, _>>()
        .map_err(unreadable)?;
    let record_path = names
        .iter()
        .find(|n| n.ends_with(".dist-info/RECORD"))
        .cloned()
        .ok_or_else(|| Error::internal("no RECORD written"))?;
    let text = read_member(&mut archive, &display, &record_path)?;
    let rows = record::parse(&text).map_err(Error::internal)?;
    if rows.len() != names.len() {
        return Err(Error::internal(format!(
            "{display}: {} members, RECORD lists {}",
            names.len(),
            rows.len()
        )));
    }
    type Zip<'b> = ZipArchive<Cursor<&'b [u8]>>;
    let check = |archive: &mut Zip, inp: &mut Zip, row: &RecordEntry| -> Result<bool> {
        let (Some(hash), Some(size)) = (&row.hash, row.size) else {
            return Ok(false);
        };
        let at = format!("{display}:{}", row.path);
        let bug = |e: &dyn std::fmt::Display| Error::internal(format!("{at}: {e}"));
        let j = archive
            .index_for_name(&row.path)
            .ok_or_else(|| bug(&"in RECORD, not in the archive"))?;
        match copies.get(&row.path) {
            Some(&i) => {
                let a = archive.by_index_raw(j).failed_at(&at)?;
                let b = inp.by_index_raw(i).failed_at(&at)?;
                let same_header = a.crc32() == b.crc32()
                    && a.size() == b.size()
                    && a.size() == size
                    && a.compression() == b.compression()
                    && a.compressed_size() == b.compressed_size();
                // Both archives are mapped: compare the compressed streams in place.
                let same = match (
                    raw_stream(bytes, a.data_start(), a.compressed_size()),
                    raw_stream(input.data, b.data_start(), b.compressed_size()),
                ) {
                    (Some(x), Some(y)) => x == y,
                    _ => false,
                };
                if !same_header || !same {
                    return Err(bug(&"not the input's bytes"));
                }
            }
            None => {
                let (got, got_size) = hash_member(archive, j, &at)?;
                if &got != hash || got_size != size {
                    return Err(bug(&format!(
                        "read back as {got} ({got_size} bytes), RECORD says {hash} ({size})"
                    )));
                }
            }
        }
        Ok(true)
    };
    let checked = rows
        .par_iter()
        .map_init(
            || (archive.clone(), input.archive.clone()),
            |(a, b), row| check(a, b, row),
        )
        .collect::<Result<Vec<bool>>>();
    let n = checked?.into_iter().filter(|c| *c).count();
    let files = rows
        .iter()
        .filter(|r| !r.path.contains(".dist-info/"))
        .filter_map(|r| r.hash.clone().map(|h| (r.path.clone(), h)))
        .collect();
    Ok((n, files))
}

/// A member's compressed stream inside a mapped archive, if its bounds are sane.
fn raw_stream(data: &[u8], start: Option<u64>, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(start?).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    data.get(start..end)
}

/// The core plus each lazy wheel hold exactly the input's files outside dist-info; the tree's own
/// variant byte for byte, the other all but the lazy library.
fn lossless(
    input: &InputWheel,
    contents: &[BTreeMap<String, String>],
    lazy: &[WrittenWheel],
    lazy_paths: &[String],
    with: &SplitVariant,
) -> bool {
    let want: BTreeMap<&String, &String> = input
        .record
        .iter()
        .filter(|(p, _)| !input.is_dist_info(p))
        .map(|(p, (h, _))| (p, h))
        .collect();
    let Some((core, lazies)) = contents.split_first() else {
        return false;
    };
    lazies.iter().zip(lazy).all(|(l, w)| {
        if core.keys().any(|k| l.contains_key(k)) {
            return false; // one path, two distributions
        }
        let union: BTreeMap<&String, &String> = core.iter().chain(l.iter()).collect();
        let own = w.variant.as_deref() == Some(with.name.as_str());
        union.len() == want.len()
            && union.iter().all(|(p, h)| {
                want.get(p)
                    .is_some_and(|w| w == h || (!own && lazy_paths.contains(p)))
            })
    })
}
