//! `splitpkg fatbin`: the device code of every library in a tree (or of one ELF file), with the
//! optional what-if and device checks, as one serialisable report (`docs/fatbin.schema.json`).

use crate::error::Context;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::whatif::{Watch, WhatIfEstimate, what_if_watched};
use super::{
    Capability, CompressMode, CudaRuntime, DeviceVerdict, DriverFloor, FatbinSummary, Runs, WhatIf,
    cuda_major_from_needed, device_check, driver_floor, needed_names, read_from, total,
};
use crate::elf::ElfView;
use crate::error::{Error, Result};
use crate::input::display_member;
use crate::input::{ElfInput, Tree, TreeKind};
use crate::progress::Progress;
pub use crate::provenance::Tool;

/// The `schema` of a fatbin report.
pub const SCHEMA: &str = "splitpkg-fatbin";
/// The version of the fatbin report's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// What `splitpkg fatbin` was asked to do besides the scan itself.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Estimate the stored size under each of these (decompresses and recompresses every entry:
    /// from seconds per GiB for lz4 to an hour and more per GiB at zstd:19; the cost is estimated
    /// and said before the long part starts).
    pub what_if: Vec<CompressMode>,
    /// Check each library against these devices.
    pub devices: Vec<Capability>,
    /// Keep the container → entry layout in the report.
    pub entries: bool,
    /// Print each file's header-walk time on stderr (also with `SPLITPKG_TRACE`).
    pub time: bool,
}

/// What was read.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Input {
    /// The path as given on the command line.
    pub path: String,
    /// `directory`, `wheel`, `conda`, `tar-bz2`, or `file` for a single ELF file.
    pub kind: String,
    /// ELF files read, with device code or not (symlinks are not followed; a file hard-linked
    /// under several names counts once).
    pub elf_files: u64,
    /// Bytes of those ELF files (archive members as unpacked); other files are not counted.
    pub bytes: u64,
}

/// The options the report was made with.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Options")]
pub struct RecordedOptions {
    /// The `--what-if` modes in the order given (`zstd` is written `zstd:3`); empty without it.
    pub what_if: Vec<CompressMode>,
    /// The `--device` compute capabilities in the order given, as `sm_XY`; empty without it.
    pub device: Vec<Capability>,
    /// Whether `--entries` was given: each library's `fatbin.containers` then holds the layout.
    pub entries: bool,
}

/// One library with device code.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibraryFatbin {
    /// Relative to the tree root, `/`-separated; for a single ELF file, its file name.
    pub path: String,
    /// Bytes of the file (an archive member as unpacked).
    pub size: u64,
    /// The CUDA major this library targets: from its own NEEDED names, else the tree's
    /// (`cuda_runtime` of the report); absent when neither tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<CudaRuntime>,
    /// The minimum driver this library needs, from its `cuda_runtime` and its compression.
    pub driver: DriverFloor,
    /// Its `.nv_fatbin`, from the headers; the container → entry layout only with `--entries`.
    pub fatbin: FatbinSummary,
    /// One estimate per `--what-if` mode, in the order of `options.what_if`; absent without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub what_if: Vec<WhatIf>,
    /// One verdict per `--device`, in the order of `options.device`; absent without it. Always
    /// computed from the full layout, with or without `--entries`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device: Vec<DeviceVerdict>,
    /// Header walk time (section lookup, walk, summary); not serialised, it varies run to run.
    #[serde(skip)]
    pub walk: Duration,
}

/// A device against the whole tree.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceTotal {
    /// The compute capability checked, as `sm_XY`.
    pub device: Capability,
    /// The worst of the libraries' verdicts.
    pub runs: Runs,
    /// Libraries (`path` as in `libraries`) that run on it only through PTX JIT, in path order.
    pub jit: Vec<String>,
    /// Libraries (`path` as in `libraries`) with a container that has no code for it, in path
    /// order.
    pub cannot_run: Vec<String>,
}

/// The libraries with device code, added up.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Total {
    /// Libraries with device code (the length of `libraries`).
    pub libraries: u64,
    /// Every library's summary added up (without layout).
    pub fatbin: FatbinSummary,
    /// The tree's driver floor: the report's `cuda_runtime` and the compression of all
    /// libraries together.
    pub driver: DriverFloor,
    /// Per `--what-if` mode, the libraries' estimates added up, in the order of
    /// `options.what_if`; absent without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub what_if: Vec<WhatIf>,
    /// Per `--device`, the verdict over all libraries, in the order of `options.device`; absent
    /// without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device: Vec<DeviceTotal>,
}

/// The report of `splitpkg fatbin --json`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FatbinReport {
    /// Which document this is: `splitpkg-fatbin`.
    pub schema: String,
    /// The version of the fatbin report's layout.
    pub schema_version: u32,
    /// The splitpkg that wrote this document.
    pub tool: Tool,
    /// The command that wrote this report (filled by the CLI) and, with `SOURCE_DATE_EPOCH`, the date.
    #[serde(flatten)]
    pub stamp: crate::provenance::Stamp,
    /// What was read.
    pub input: Input,
    /// The options the report was made with.
    pub options: RecordedOptions,
    /// The CUDA major the build targets, when a NEEDED name tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime: Option<CudaRuntime>,
    /// Every ELF file with a `.nv_fatbin` section, sorted by path; files without one are only
    /// counted in `input.elf_files`.
    pub libraries: Vec<LibraryFatbin>,
    /// The libraries added up.
    pub total: Total,
}

impl crate::document::Document for FatbinReport {
    const SCHEMA: &'static str = SCHEMA;
    const VERSION: u32 = SCHEMA_VERSION;
    const READS: &'static [u32] = &[SCHEMA_VERSION];
    const WHAT: &'static str = "fatbin report";
    const SCHEMA_FILE: &'static str = "fatbin.schema.json";
    const TITLE: &'static str = "splitpkg fatbin";
    const ABOUT: &'static str = "Output of `splitpkg fatbin --json`: CUDA device code (.nv_fatbin) per library and for the tree. Versioned by `schema_version`: fields are only added within a version; a removal or change of meaning bumps it. Byte counts are integers; offsets are file offsets. Format notes: docs/fatbin.md.";
}

impl FatbinReport {
    /// `No` when some library cannot run on a requested device.
    pub fn exit(&self) -> crate::Exit {
        crate::Exit::pass_or_no(!self.total.device.iter().any(|d| d.runs == Runs::No))
    }
}

struct FileScan {
    path: String,
    size: u64,
    cuda: Option<(u32, String)>,
    lib: Option<LibraryFatbin>,
}

/// A what-if's estimate, said on stderr before the long part starts, and its progress: a bar of
/// uncompressed bytes for a single file (in a tree, the tree's own bar runs, and each library
/// says its estimate as it starts).
struct WhatIfWatch<'a> {
    path: &'a str,
    bar: Option<&'a Progress>,
}

impl Watch for WhatIfWatch<'_> {
    fn estimate(&self, e: &WhatIfEstimate) {
        tracing::info!("fatbin: {}: {e}", crate::sanitize::printable(self.path));
        if let Some(bar) = self.bar {
            bar.start("what-if", e.bytes);
            bar.inc(e.sample);
        }
    }

    fn done(&self, bytes: u64) {
        if let Some(bar) = self.bar {
            bar.inc(bytes);
        }
    }
}

/// `bar`: the progress to draw the what-if on (a single file; `None` in a tree, whose bar is in use).
fn scan_one(
    input: ElfInput<'_>,
    name: &dyn Fn() -> String,
    opts: &ScanOptions,
    trace: bool,
    bar: Option<&Progress>,
) -> Result<FileScan> {
    let view = ElfView::parse(input.bytes).map_err(|e| Error::elf(name(), e))?;
    let started = Instant::now();
    let summary = read_from(&view, input.file).map_err(|e| Error::invalid(name(), e))?;
    let walk = started.elapsed();
    let cuda = cuda_major_from_needed(needed_names(&view));
    let size = input.bytes.len() as u64;
    let Some(mut summary) = summary else {
        return Ok(FileScan {
            path: input.path.to_string(),
            size,
            cuda,
            lib: None,
        });
    };
    if trace {
        timing(
            opts.time,
            format_args!(
                "fatbin: header walk {:>8.3} ms  {}  ({} containers, {} entries)",
                walk.as_secs_f64() * 1e3,
                input.path,
                summary.container_count,
                summary.entries
            ),
        );
    }
    let mut whatifs = Vec::new();
    if !opts.what_if.is_empty() {
        let t = Instant::now();
        let watch = WhatIfWatch {
            path: input.path,
            bar,
        };
        let done = what_if_watched(input.bytes, &summary, &opts.what_if, &watch);
        if let Some(bar) = bar {
            bar.finish();
        }
        whatifs = done.map_err(|e| Error::invalid(name(), e))?;
        if trace {
            timing(
                opts.time,
                format_args!(
                    "fatbin: what-if {:>8.2} s  {}",
                    t.elapsed().as_secs_f64(),
                    input.path
                ),
            );
        }
    }
    let device = opts
        .devices
        .iter()
        .map(|&d| device_check(&summary, d))
        .collect();
    if !opts.entries {
        summary = summary.without_containers();
    }
    let lib = LibraryFatbin {
        path: input.path.to_string(),
        size,
        cuda_runtime: None,
        driver: driver_floor(None, None),
        fatbin: summary,
        what_if: whatifs,
        device,
        walk,
    };
    Ok(FileScan {
        path: input.path.to_string(),
        size,
        cuda,
        lib: Some(lib),
    })
}

/// A per-file timing: shown by default with `--time`, else a `trace` event (`-vv`).
fn timing(time: bool, line: std::fmt::Arguments<'_>) {
    if time {
        tracing::info!("{line}");
    } else {
        tracing::trace!("{line}");
    }
}

/// Read every ELF file under `path` (directory, .whl, .conda, .tar.bz2, or one ELF file).
pub fn scan(path: &Path, opts: &ScanOptions, progress: &Progress) -> Result<FatbinReport> {
    let trace = opts.time || tracing::enabled!(tracing::Level::TRACE);
    let (kind, mut files) = scan_files(path, opts, progress, trace)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));

    let tree_cuda = cuda_of_build(&files);
    let elf_files = files.len() as u64;
    let bytes = files.iter().map(|f| f.size).sum();
    let libraries = with_device_code(files, tree_cuda.as_ref());

    let fatbin = total(libraries.iter().map(|l| &l.fatbin));
    let driver = driver_floor(
        tree_cuda.as_ref().map(|c| c.major),
        fatbin.compression_floor.clone(),
    );
    let what_if_total = opts
        .what_if
        .iter()
        .enumerate()
        .map(|(i, &m)| sum_what_if(m, libraries.iter().map(|l| &l.what_if[i])))
        .collect();
    let device = opts
        .devices
        .iter()
        .enumerate()
        .map(|(i, &d)| device_total(d, libraries.iter().map(|l| (l.path.as_str(), &l.device[i]))))
        .collect();
    Ok(FatbinReport {
        schema: SCHEMA.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        stamp: crate::provenance::Stamp::default(),
        input: Input {
            path: path.display().to_string(),
            kind,
            elf_files,
            bytes,
        },
        options: RecordedOptions {
            what_if: opts.what_if.clone(),
            device: opts.devices.clone(),
            entries: opts.entries,
        },
        cuda_runtime: tree_cuda,
        total: Total {
            libraries: libraries.len() as u64,
            fatbin,
            driver,
            what_if: what_if_total,
            device,
        },
        libraries,
    })
}

/// Every ELF file of the input, scanned, and the input's kind (`file` for one ELF file).
fn scan_files(
    path: &Path,
    opts: &ScanOptions,
    progress: &Progress,
    trace: bool,
) -> Result<(String, Vec<FileScan>)> {
    let meta = std::fs::metadata(path).at(path)?;
    if meta.is_file() && is_elf_file(path)? {
        let file = crate::input::file::open_regular(path, crate::input::file::Links::Follow)?;
        let map = Arc::new(crate::input::map_file(path)?);
        let display = path.display().to_string();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| display.clone());
        let input = ElfInput {
            path: &name,
            bytes: &map,
            map: Some(&map),
            file: Some(&file),
        };
        let one = scan_one(input, &|| display.clone(), opts, trace, Some(progress))?;
        Ok(("file".to_string(), vec![one]))
    } else {
        let kind = TreeKind::detect(path)?;
        let (_tree, results) = Tree::open(path, progress, |input| {
            let member = input.path.to_string();
            scan_one(
                input,
                &|| display_member(path, kind, &member),
                opts,
                trace,
                None,
            )
        })?;
        let kind = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        Ok((kind, results.into_iter().map(|(_, f)| f).collect()))
    }
}

/// The build's CUDA major: from the libraries that carry device code first, then any file.
fn cuda_of_build(files: &[FileScan]) -> Option<CudaRuntime> {
    files
        .iter()
        .filter(|f| f.lib.is_some())
        .chain(files.iter())
        .find_map(|f| {
            f.cuda.as_ref().map(|(m, n)| CudaRuntime {
                major: *m,
                from: format!("NEEDED {n} in {}", f.path),
            })
        })
}

/// The libraries with device code, each with its CUDA major (its own NEEDED name, else the
/// tree's) and the driver floor that sets.
fn with_device_code(files: Vec<FileScan>, tree_cuda: Option<&CudaRuntime>) -> Vec<LibraryFatbin> {
    let mut libraries = Vec::new();
    for f in files {
        let Some(mut lib) = f.lib else { continue };
        lib.cuda_runtime = match f.cuda {
            Some((m, n)) => Some(CudaRuntime {
                major: m,
                from: format!("NEEDED {n}"),
            }),
            None => tree_cuda.cloned(),
        };
        lib.driver = driver_floor(
            lib.cuda_runtime.as_ref().map(|c| c.major),
            lib.fatbin.compression_floor.clone(),
        );
        libraries.push(lib);
    }
    libraries
}

/// A device against the whole tree: the libraries it runs only through PTX JIT, those it cannot
/// run, and the worst verdict.
fn device_total<'a>(
    device: Capability,
    verdicts: impl Iterator<Item = (&'a str, &'a DeviceVerdict)>,
) -> DeviceTotal {
    let verdicts: Vec<(&str, &DeviceVerdict)> = verdicts.collect();
    let pick = |r: Runs| {
        verdicts
            .iter()
            .filter(|(_, v)| v.runs == r)
            .map(|(p, _)| p.to_string())
            .collect::<Vec<_>>()
    };
    let (jit, cannot_run) = (pick(Runs::Jit), pick(Runs::No));
    let runs = if !cannot_run.is_empty() {
        Runs::No
    } else if !jit.is_empty() {
        Runs::Jit
    } else {
        Runs::Yes
    };
    DeviceTotal {
        device,
        runs,
        jit,
        cannot_run,
    }
}

fn is_elf_file(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut head = [0u8; 4];
    let mut f = crate::input::file::open_regular(path, crate::input::file::Links::Follow)?;
    let n = f.read(&mut head).at(path)?;
    Ok(n == 4 && &head == b"\x7fELF")
}

/// The tree's what-if for one mode: the libraries' numbers added up.
fn sum_what_if<'a>(mode: CompressMode, items: impl Iterator<Item = &'a WhatIf>) -> WhatIf {
    let mut out: Option<WhatIf> = None;
    for w in items {
        let Some(o) = out.as_mut() else {
            out = Some(w.clone());
            continue;
        };
        o.entries += w.entries;
        o.uncompressed += w.uncompressed;
        o.stored_now += w.stored_now;
        o.stored_after += w.stored_after;
        o.section_now += w.section_now;
        o.section_after += w.section_after;
        o.saving += w.saving;
        o.compress_seconds += w.compress_seconds;
        for t in &w.targets {
            match o
                .targets
                .iter_mut()
                .find(|x| x.kind == t.kind && x.name == t.name)
            {
                Some(x) => {
                    x.stored_now += t.stored_now;
                    x.stored_after += t.stored_after;
                }
                None => o.targets.push(t.clone()),
            }
        }
    }
    let mut out = out.unwrap_or_else(|| WhatIf {
        mode,
        entries: 0,
        uncompressed: 0,
        stored_now: 0,
        stored_after: 0,
        section_now: 0,
        section_after: 0,
        saving: 0,
        targets: Vec::new(),
        driver: super::compression_floor([mode.compression()]),
        compress_seconds: 0.0,
    });
    out.targets
        .sort_by_key(|t| (t.arch, t.arch_specific, t.kind));
    out
}
