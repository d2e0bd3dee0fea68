//! CUDA device code: the `.nv_fatbin` section of a library, read from its headers alone.
//!
//! A CUDA build keeps most of its bytes here (318 MiB of torch 2.11's 954 MiB `lib/`), and how that
//! code is compressed decides which drivers can load it. `cuobjdump --list-elf` answers the first
//! question in ~10 s per large library and never the second; walking the headers takes
//! milliseconds. Layout and field meanings: `docs/fatbin.md` (from shared notes `cuda-fatbin.md`).
//!
//! The section is a sequence of *containers* (16-byte header, magic `0xBA55ED50`) separated by
//! zero padding; each container holds *entries* (PTX or ELF/SASS, 64-byte header or longer) back to
//! back. Every size in a header is untrusted: each step is bounds-checked against the container
//! and the section, and each step advances by at least one header, so a hostile section can end
//! the walk with an error but never loop or read out of range.
//!
//! Stages: [`read`] (headers only, what `inspect`/`plan` call), [`whatif`] (decompress and
//! recompress, on request), [`device`] (can a library run on a given GPU), [`scan`] (the
//! `splitpkg fatbin` command over a whole tree).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::elf::ElfView;

pub mod device;
pub mod scan;
pub mod synth;
pub mod text;
pub mod whatif;

pub use device::{Capability, ContainerFit, DeviceVerdict, Runs, device_check};
pub use whatif::{CompressMode, WhatIf, decompress_entry, what_if};

/// The ELF section that holds CUDA fat binaries.
pub const SECTION: &str = ".nv_fatbin";
/// The magic number that opens every container of the section.
pub const CONTAINER_MAGIC: u32 = 0xBA55_ED50;
/// Bytes of a container header: magic, version, header size, payload size.
pub const CONTAINER_HEADER: usize = 16;
/// Smallest entry header; sm_100+ ELF entries use 112 bytes and others have been reported (80).
pub const ENTRY_HEADER_MIN: usize = 64;

/// Entry flag bits that matter here (names from redplait/denvdis and public CUDA shims).
pub mod flags {
    /// The entry is for a 64-bit host.
    pub const BIT64: u64 = 0x1;
    /// The entry carries debug information.
    pub const DEBUG: u64 = 0x2;
    /// Older compression flag; the payload format is not known, so it is reported as `unknown`.
    pub const COMPRESSED_OLD: u64 = 0x1000;
    /// `-Xfatbin -compress-all`: LZ4 block payload.
    pub const LZ4: u64 = 0x2000;
    /// `--compress-mode=size|balance|…`: one zstd frame.
    pub const ZSTD: u64 = 0x8000;
    /// Arch-specific target: cuobjdump's `a` suffix (`sm_90a`).
    pub const ARCH_SPECIFIC: u64 = 0x10_0000;
}

/// An error in the section, with the file offset where the walk stopped.
#[derive(Debug, Clone)]
pub struct FatbinError {
    /// File offset where the walk stopped.
    pub offset: u64,
    /// The whole reason, a cause's text included (`cannot read 8 bytes: …`).
    pub reason: String,
    /// The error of the library that failed (reading the file, decompressing), when one did.
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl FatbinError {
    fn at(offset: u64, reason: impl Into<String>) -> Self {
        FatbinError {
            offset,
            reason: reason.into(),
            source: None,
        }
    }

    /// `what` failed with `source`: the reason reads `what: source`, and the source is kept.
    fn caused(
        offset: u64,
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        FatbinError {
            offset,
            reason: format!("{what}: {source}"),
            source: Some(Arc::new(source)),
        }
    }
}

/// Two errors are the same when they say the same at the same offset (the source is only the
/// cause of what the reason says).
impl PartialEq for FatbinError {
    fn eq(&self, other: &Self) -> bool {
        self.offset == other.offset && self.reason == other.reason
    }
}

impl Eq for FatbinError {}

impl fmt::Display for FatbinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SECTION} at file offset {:#x}: {}",
            self.offset, self.reason
        )
    }
}

impl std::error::Error for FatbinError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// What an entry holds, from its header's kind code.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// PTX (kind code 1): the driver can JIT-compile it for GPUs of its architecture or newer.
    Ptx,
    /// A cubin (kind code 2): SASS for one architecture.
    Elf,
    /// Any other kind code (denvdis lists 4 as an old-style cubin); kept in `Entry::kind_code`.
    Other,
}

/// As the document writes it (`ptx`, `elf`, `other`).
impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Ptx => "ptx",
            Kind::Elf => "elf",
            Kind::Other => "other",
        })
    }
}

impl Kind {
    fn from_code(code: u16) -> Kind {
        match code {
            1 => Kind::Ptx,
            2 => Kind::Elf,
            _ => Kind::Other,
        }
    }

    /// The kind as tables print it (`PTX`, `SASS`, `other`).
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ptx => "PTX",
            Kind::Elf => "SASS",
            Kind::Other => "other",
        }
    }
}

/// How an entry's payload is compressed, from its header's flags.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Stored as is: no compression flag set.
    None,
    /// An LZ4 block (flag `0x2000`, nvcc `-Xfatbin -compress-all`).
    Lz4,
    /// One zstd frame (flag `0x8000`, nvcc `--compress-mode`): needs a driver from CUDA 12.4 on.
    Zstd,
    /// The old 0x1000 flag, or both LZ4 and zstd bits at once: compressed, format unknown.
    Unknown,
}

impl Compression {
    /// The compression an entry's header flags say: zstd, LZ4, none, or unknown (the old flag, or
    /// more than one).
    pub fn from_flags(f: u64) -> Compression {
        match (
            f & flags::ZSTD != 0,
            f & flags::LZ4 != 0,
            f & flags::COMPRESSED_OLD != 0,
        ) {
            (true, false, false) => Compression::Zstd,
            (false, true, false) => Compression::Lz4,
            (false, false, false) => Compression::None,
            _ => Compression::Unknown,
        }
    }

    /// The compression's name (`none`, `lz4`, `zstd`, `unknown`).
    pub fn label(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
            Compression::Unknown => "unknown",
        }
    }
}

/// One entry, as its header describes it. Offsets are file offsets.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Entry")]
pub struct FatbinEntry {
    /// File offset of the entry header.
    pub offset: u64,
    /// `ptx`, `elf` (SASS) or `other`, from `kind_code`.
    pub kind: Kind,
    /// The header's kind code as is: 1 PTX, 2 ELF, anything else `other`.
    pub kind_code: u16,
    /// SM number: 90 for sm_90 / compute_90.
    pub arch: u32,
    /// Flag `0x100000`: an arch-specific target (the `a` of `sm_90a`), which runs only on exactly
    /// that compute capability.
    pub arch_specific: bool,
    /// Bytes of the entry header (64, or 112 for sm_100+ cubins; any size from 64 is accepted);
    /// the payload follows it.
    pub header_size: u32,
    /// The header's flag bits as a number: `0x1` 64-bit, `0x2` debug, `0x1000` old compression
    /// flag, `0x2000` LZ4, `0x8000` zstd, `0x100000` arch-specific, and others not interpreted.
    pub flags: u64,
    /// How the payload is compressed, from `flags`.
    pub compression: Compression,
    /// Bytes reserved for the payload (compressed size rounded up to 8).
    pub stored: u64,
    /// Exact length of the compressed payload (0 when the header leaves it unset).
    pub compressed: u64,
    /// Size after decompression; for an uncompressed entry whose header leaves it 0, `stored`.
    pub uncompressed: u64,
}

impl FatbinEntry {
    /// The name cuobjdump uses: `sm_90`, `sm_90a`.
    pub fn name(&self) -> String {
        arch_name(self.arch, self.arch_specific)
    }

    /// File offset of the entry's payload (just after its header).
    pub fn payload_offset(&self) -> u64 {
        self.offset + self.header_size as u64
    }
}

/// The architecture's name as cuobjdump writes it: `sm_90`, or `sm_90a` when arch-specific.
pub fn arch_name(arch: u32, arch_specific: bool) -> String {
    format!("sm_{arch}{}", if arch_specific { "a" } else { "" })
}

/// One container of `.nv_fatbin`: a header and the entries that follow it back to back. The CUDA
/// runtime registers each container separately.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Container {
    /// File offset of the container header (its magic `0xBA55ED50`).
    pub offset: u64,
    /// The header's format version; always 1 (the walk stops at any other).
    pub version: u16,
    /// Bytes of the container header (16 in every file seen; any size from 16 is accepted).
    pub header_size: u16,
    /// Bytes after the header that belong to the container: its entries and any zero tail. The
    /// container ends at `offset + header_size + payload_size`.
    pub payload_size: u64,
    /// The entries, in file order.
    pub entries: Vec<FatbinEntry>,
}

impl Container {
    /// File offset just past the container (its header and its payload).
    pub fn end(&self) -> u64 {
        self.offset + self.header_size as u64 + self.payload_size
    }
}

/// Entries of one (kind, architecture name) in a library or a tree.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct TargetStats {
    /// `ptx`, `elf` (SASS) or `other`.
    pub kind: Kind,
    /// `sm_90a`.
    pub name: String,
    /// SM number: 90 for sm_90 / compute_90.
    pub arch: u32,
    /// Whether the target is arch-specific (the `a` of `sm_90a`, flag `0x100000`).
    pub arch_specific: bool,
    /// Entries of this kind and target.
    pub entries: u64,
    /// Containers holding at least one such entry.
    pub containers: u64,
    /// Payload bytes of those entries, as stored in the file (compressed entries count
    /// compressed; headers excluded).
    pub stored: u64,
    /// Payload bytes of those entries after decompression, as their headers claim.
    pub uncompressed: u64,
    /// The compressions those entries use, each once, in the order none, lz4, zstd, unknown.
    pub compression: Vec<Compression>,
}

/// Entries of one compression in a library or a tree.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct CompressionStats {
    /// The compression these entries use.
    pub compression: Compression,
    /// Entries with that compression.
    pub entries: u64,
    /// Payload bytes of those entries, as stored in the file (headers excluded).
    pub stored: u64,
    /// Payload bytes of those entries after decompression, as their headers claim.
    pub uncompressed: u64,
}

/// What `splitpkg` knows about one library's device code without decompressing it.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FatbinSummary {
    /// File offset of `.nv_fatbin`; 0 in a tree's total, which adds up several files.
    pub section_offset: u64,
    /// Bytes of `.nv_fatbin` (its section header's size): container headers, entries and
    /// padding. In a tree's total, the libraries' sections added up.
    pub section_size: u64,
    /// Zero bytes between and after containers.
    pub padding: u64,
    /// Containers in the section.
    pub container_count: u64,
    /// Entries in all containers: `ptx + elf + other`.
    pub entries: u64,
    /// PTX entries.
    pub ptx: u64,
    /// ELF entries (cubins: SASS).
    pub elf: u64,
    /// Entries of any other kind code.
    pub other: u64,
    /// Payload bytes reserved in the file (excluding headers).
    pub stored: u64,
    /// Payload bytes after decompression, as the entry headers claim (nothing is decompressed).
    pub uncompressed: u64,
    /// Per (architecture name, kind), ascending by architecture.
    pub targets: Vec<TargetStats>,
    /// Per compression present, in the order none, lz4, zstd, unknown.
    pub compression: Vec<CompressionStats>,
    /// SASS targets with no PTX of the same architecture to JIT from.
    pub sass_only: Vec<String>,
    /// True when there is no PTX at all: GPUs newer than every SASS major cannot run this code.
    pub no_ptx: bool,
    /// The minimum driver the compression alone requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_floor: Option<DriverReq>,
    /// The format itself (container → entries). Empty when dropped for a compact report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<Container>,
}

impl FatbinSummary {
    /// The same summary without the per-entry layout (for compact JSON).
    pub fn without_containers(mut self) -> Self {
        self.containers = Vec::new();
        self
    }

    /// Entries in file order.
    pub fn entries_in_order(&self) -> impl Iterator<Item = &FatbinEntry> {
        self.containers.iter().flat_map(|c| c.entries.iter())
    }
}

// --- the walk ----------------------------------------------------------------------------------

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Where the walk reads header bytes from: the section in memory, or the file itself.
///
/// A mapped file is the wrong medium for this walk: ~3,200 headers lie spread over 284 MiB of
/// torch 2.11's `libtorch_cuda.so`, and the kernel maps 16 pages around every page fault, so
/// touching them through a map costs ~45k page-table entries. Reading each header with `pread`
/// touches nothing else.
pub trait Source {
    /// Section length in bytes.
    fn len(&self) -> usize;
    /// Whether the section is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exactly `n` bytes at `pos`; the caller guarantees `pos + n <= len()`.
    fn bytes(&self, pos: usize, n: usize) -> Result<Cow<'_, [u8]>, FatbinError>;
    /// Position of the first non-zero byte in `from..to`.
    fn first_nonzero(&self, from: usize, to: usize) -> Result<Option<usize>, FatbinError> {
        let mut pos = from;
        while pos < to {
            let n = (to - pos).min(256);
            let chunk = self.bytes(pos, n)?;
            if let Some(i) = chunk.iter().position(|&b| b != 0) {
                return Ok(Some(pos + i));
            }
            pos += n;
        }
        Ok(None)
    }
}

impl Source for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn bytes(&self, pos: usize, n: usize) -> Result<Cow<'_, [u8]>, FatbinError> {
        Ok(Cow::Borrowed(&self[pos..pos + n]))
    }
    fn first_nonzero(&self, from: usize, to: usize) -> Result<Option<usize>, FatbinError> {
        Ok(self[from..to]
            .iter()
            .position(|&b| b != 0)
            .map(|i| from + i))
    }
}

/// A section read from an open file with positioned reads. Reads are served from a small window
/// so that a container header and its first entry header cost one system call.
pub struct FileSource<'a> {
    file: &'a std::fs::File,
    /// File offset of the section.
    base: u64,
    len: usize,
    window: std::cell::RefCell<(usize, Vec<u8>)>,
}

impl<'a> FileSource<'a> {
    const WINDOW: usize = 256;

    /// The section at file offset `base`, `len` bytes long, of an open file.
    pub fn new(file: &'a std::fs::File, base: u64, len: usize) -> Self {
        FileSource {
            file,
            base,
            len,
            window: std::cell::RefCell::new((0, Vec::new())),
        }
    }
}

impl Source for FileSource<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn bytes(&self, pos: usize, n: usize) -> Result<Cow<'_, [u8]>, FatbinError> {
        use std::os::unix::fs::FileExt;
        let mut w = self.window.borrow_mut();
        if !(pos >= w.0 && pos + n <= w.0 + w.1.len()) {
            let want = n.max(Self::WINDOW).min(self.len - pos);
            w.1.resize(want, 0);
            let at = self.base.saturating_add(pos as u64);
            self.file.read_exact_at(&mut w.1, at).map_err(|e| {
                FatbinError::caused(at, format_args!("cannot read {want} bytes"), e)
            })?;
            w.0 = pos;
        }
        let start = pos - w.0;
        Ok(Cow::Owned(w.1[start..start + n].to_vec()))
    }
}

/// Walk the bytes of a `.nv_fatbin` section that starts at file offset `base`.
///
/// Headers only; payload bytes are never read (except to confirm that a short tail is padding).
/// Callers must keep every reported offset relative to `base`.
pub fn parse(data: &[u8], base: u64) -> Result<Vec<Container>, FatbinError> {
    walk(data, base)
}

/// [`parse`] over any [`Source`].
pub fn walk<S: Source + ?Sized>(src: &S, base: u64) -> Result<Vec<Container>, FatbinError> {
    let len = src.len();
    let at = |pos: usize| base.saturating_add(pos as u64);
    let mut out = Vec::new();
    let mut pos = 0usize;
    // Padding is zeros in 8-byte steps in every file seen; any run of zeros is accepted, which is
    // safe because a container must then start with its (non-zero) magic.
    while let Some(next) = src.first_nonzero(pos, len)? {
        pos = next;
        if len - pos < CONTAINER_HEADER {
            return Err(FatbinError::at(
                at(pos),
                format!(
                    "truncated container header: {} bytes left in the section, {CONTAINER_HEADER} needed",
                    len - pos
                ),
            ));
        }
        let h = src.bytes(pos, CONTAINER_HEADER)?;
        let magic = u32_at(&h, 0);
        if magic != CONTAINER_MAGIC {
            return Err(FatbinError::at(
                at(pos),
                format!("bad container magic {magic:#010x} (expected {CONTAINER_MAGIC:#010x})"),
            ));
        }
        let version = u16_at(&h, 4);
        let header_size = u16_at(&h, 6);
        let payload_size = u64_at(&h, 8);
        if version != 1 {
            return Err(FatbinError::at(
                at(pos),
                format!("unsupported container version {version} (only 1 is known)"),
            ));
        }
        if (header_size as usize) < CONTAINER_HEADER {
            return Err(FatbinError::at(
                at(pos),
                format!("container header size {header_size} is below {CONTAINER_HEADER}"),
            ));
        }
        let end =
            (pos as u64).checked_add(header_size as u64).and_then(|x| x.checked_add(payload_size)).filter(|&e| e <= len as u64).ok_or_else(
                || {
                    FatbinError::at(
                        at(pos),
                        format!(
                            "container of {payload_size} payload bytes runs past the end of the section ({} bytes left after its header)",
                            (len - pos).saturating_sub(header_size as usize)
                        ),
                    )
                },
            )? as usize;
        let entries = parse_entries(src, pos + header_size as usize, end, base)?;
        out.push(Container {
            offset: at(pos),
            version,
            header_size,
            payload_size,
            entries,
        });
        pos = end;
    }
    Ok(out)
}

fn parse_entries<S: Source + ?Sized>(
    src: &S,
    start: usize,
    end: usize,
    base: u64,
) -> Result<Vec<FatbinEntry>, FatbinError> {
    let at = |pos: usize| base.saturating_add(pos as u64);
    let mut entries = Vec::new();
    let mut e = start;
    while e < end {
        let left = end - e;
        let rest = src.bytes(e, left.min(ENTRY_HEADER_MIN))?;
        // A zero tail inside a container is padding, not an entry (kind 0 does not exist).
        if left < ENTRY_HEADER_MIN || u32_at(&rest, 4) < ENTRY_HEADER_MIN as u32 {
            if src.first_nonzero(e, end)?.is_none() {
                break;
            }
            if left < ENTRY_HEADER_MIN {
                return Err(FatbinError::at(
                    at(e),
                    format!(
                        "truncated entry header: {left} bytes left in the container, {ENTRY_HEADER_MIN} needed"
                    ),
                ));
            }
            return Err(FatbinError::at(
                at(e),
                format!(
                    "entry header size {} is below {ENTRY_HEADER_MIN}",
                    u32_at(&rest, 4)
                ),
            ));
        }
        let kind_code = u16_at(&rest, 0);
        let header_size = u32_at(&rest, 4);
        let stored = u64_at(&rest, 0x08);
        let compressed = u32_at(&rest, 0x10) as u64;
        let arch = u32_at(&rest, 0x1C);
        let flag_bits = u64_at(&rest, 0x28);
        let uncompressed_field = u64_at(&rest, 0x38);
        let next = (header_size as u64).checked_add(stored).filter(|&n| n <= left as u64).ok_or_else(|| {
            FatbinError::at(
                at(e),
                format!(
                    "entry of {header_size}-byte header and {stored} payload bytes runs past the end of its container ({left} bytes left)"
                ),
            )
        })? as usize;
        let compression = Compression::from_flags(flag_bits);
        let uncompressed = if compression == Compression::None && uncompressed_field == 0 {
            stored
        } else {
            uncompressed_field
        };
        entries.push(FatbinEntry {
            offset: at(e),
            kind: Kind::from_code(kind_code),
            kind_code,
            arch,
            arch_specific: flag_bits & flags::ARCH_SPECIFIC != 0,
            header_size,
            flags: flag_bits,
            compression,
            stored,
            compressed,
            uncompressed,
        });
        // next >= header_size >= 64: the walk always moves forward.
        e += next;
    }
    Ok(entries)
}

/// Per-target and per-compression totals of a walked section.
pub fn summarise(
    section_offset: u64,
    section_size: u64,
    containers: Vec<Container>,
) -> FatbinSummary {
    #[derive(Default)]
    struct Acc {
        entries: u64,
        containers: u64,
        stored: u64,
        uncompressed: u64,
        compression: Vec<Compression>,
        last_container: Option<usize>,
    }
    let mut targets: BTreeMap<(u32, bool, Kind), Acc> = BTreeMap::new();
    let mut comp: BTreeMap<Compression, CompressionStats> = BTreeMap::new();
    let (mut ptx, mut elf, mut other, mut stored, mut uncompressed, mut used) =
        (0, 0, 0, 0u64, 0u64, 0u64);
    for (ci, c) in containers.iter().enumerate() {
        used += c.header_size as u64 + c.payload_size;
        for e in &c.entries {
            match e.kind {
                Kind::Ptx => ptx += 1,
                Kind::Elf => elf += 1,
                Kind::Other => other += 1,
            }
            stored += e.stored;
            uncompressed = uncompressed.saturating_add(e.uncompressed);
            let a = targets
                .entry((e.arch, e.arch_specific, e.kind))
                .or_default();
            a.entries += 1;
            a.stored += e.stored;
            a.uncompressed = a.uncompressed.saturating_add(e.uncompressed);
            if !a.compression.contains(&e.compression) {
                a.compression.push(e.compression);
                a.compression.sort();
            }
            if a.last_container != Some(ci) {
                a.last_container = Some(ci);
                a.containers += 1;
            }
            let s = comp.entry(e.compression).or_insert(CompressionStats {
                compression: e.compression,
                entries: 0,
                stored: 0,
                uncompressed: 0,
            });
            s.entries += 1;
            s.stored += e.stored;
            s.uncompressed = s.uncompressed.saturating_add(e.uncompressed);
        }
    }
    let targets: Vec<TargetStats> = targets
        .into_iter()
        .map(|((arch, arch_specific, kind), a)| TargetStats {
            kind,
            name: arch_name(arch, arch_specific),
            arch,
            arch_specific,
            entries: a.entries,
            containers: a.containers,
            stored: a.stored,
            uncompressed: a.uncompressed,
            compression: a.compression,
        })
        .collect();
    let sass_only = sass_only(&targets);
    let compression: Vec<CompressionStats> = comp.into_values().collect();
    let compression_floor = compression_floor(compression.iter().map(|c| c.compression));
    FatbinSummary {
        section_offset,
        section_size,
        padding: section_size.saturating_sub(used),
        container_count: containers.len() as u64,
        entries: ptx + elf + other,
        ptx,
        elf,
        other,
        stored,
        uncompressed,
        no_ptx: ptx == 0,
        sass_only,
        targets,
        compression,
        compression_floor,
        containers,
    }
}

fn sass_only(targets: &[TargetStats]) -> Vec<String> {
    targets
        .iter()
        .filter(|t| t.kind == Kind::Elf)
        .filter(|t| {
            !targets.iter().any(|p| {
                p.kind == Kind::Ptx && p.arch == t.arch && p.arch_specific == t.arch_specific
            })
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The file's `.nv_fatbin`, walked and summarised; `None` when the file has no device code.
pub fn read(view: &ElfView<'_>) -> Result<Option<FatbinSummary>, FatbinError> {
    read_from(view, None)
}

/// [`read`], taking the headers from `file` with positioned reads when the view is a map of it.
pub fn read_from(
    view: &ElfView<'_>,
    file: Option<&std::fs::File>,
) -> Result<Option<FatbinSummary>, FatbinError> {
    let Some(sh) = view.section(SECTION) else {
        return Ok(None);
    };
    let Some(data) = view.section_bytes(sh) else {
        return Err(FatbinError::at(
            sh.sh_offset,
            format!(
                "section of {} bytes is not in the file ({} bytes) or has no file data",
                sh.sh_size,
                view.bytes.len()
            ),
        ));
    };
    let containers = match file {
        Some(f) => walk(&FileSource::new(f, sh.sh_offset, data.len()), sh.sh_offset)?,
        None => parse(data, sh.sh_offset)?,
    };
    Ok(Some(summarise(sh.sh_offset, sh.sh_size, containers)))
}

/// Add up summaries (a tree's libraries) per target and per compression.
pub fn total<'a>(summaries: impl IntoIterator<Item = &'a FatbinSummary>) -> FatbinSummary {
    let mut out = summarise(0, 0, Vec::new());
    let mut targets: BTreeMap<(u32, bool, Kind), TargetStats> = BTreeMap::new();
    let mut comp: BTreeMap<Compression, CompressionStats> = BTreeMap::new();
    for s in summaries {
        out.section_size += s.section_size;
        out.padding += s.padding;
        out.container_count += s.container_count;
        out.entries += s.entries;
        out.ptx += s.ptx;
        out.elf += s.elf;
        out.other += s.other;
        out.stored += s.stored;
        out.uncompressed = out.uncompressed.saturating_add(s.uncompressed);
        for t in &s.targets {
            let a = targets
                .entry((t.arch, t.arch_specific, t.kind))
                .or_insert_with(|| TargetStats {
                    entries: 0,
                    containers: 0,
                    stored: 0,
                    uncompressed: 0,
                    compression: Vec::new(),
                    ..t.clone()
                });
            a.entries += t.entries;
            a.containers += t.containers;
            a.stored += t.stored;
            a.uncompressed = a.uncompressed.saturating_add(t.uncompressed);
            for c in &t.compression {
                if !a.compression.contains(c) {
                    a.compression.push(*c);
                    a.compression.sort();
                }
            }
        }
        for c in &s.compression {
            let a = comp.entry(c.compression).or_insert(CompressionStats {
                compression: c.compression,
                entries: 0,
                stored: 0,
                uncompressed: 0,
            });
            a.entries += c.entries;
            a.stored += c.stored;
            a.uncompressed = a.uncompressed.saturating_add(c.uncompressed);
        }
    }
    out.targets = targets.into_values().collect();
    out.compression = comp.into_values().collect();
    out.sass_only = sass_only(&out.targets);
    out.no_ptx = out.ptx == 0;
    out.compression_floor = compression_floor(out.compression.iter().map(|c| c.compression));
    out
}

// --- drivers -----------------------------------------------------------------------------------

/// A minimum NVIDIA driver, with the reason it is needed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct DriverReq {
    /// Linux driver version, e.g. `550.54.14`.
    pub linux: String,
    /// The CUDA toolkit release whose driver that is.
    pub cuda: String,
    /// Why the floor applies, one sentence (`the CUDA 12 runtime needs driver 525.60.13 or newer`).
    pub why: String,
}

impl DriverReq {
    fn new(linux: &str, cuda: &str, why: &str) -> Self {
        DriverReq {
            linux: linux.into(),
            cuda: cuda.into(),
            why: why.into(),
        }
    }
}

/// zstd-compressed fatbins (nvcc `--compress-mode`) are not loadable by drivers released before the
/// CUDA 12.4 toolkit (nvcc docs); RAPIDS pins that to 550.54.14 on CUDA 12. LZ4 (`-compress-all`)
/// and uncompressed entries raise nothing.
pub fn compression_floor(kinds: impl IntoIterator<Item = Compression>) -> Option<DriverReq> {
    let kinds: Vec<Compression> = kinds.into_iter().collect();
    if kinds.contains(&Compression::Zstd) {
        Some(DriverReq::new(
            "550.54.14",
            "12.4",
            "zstd-compressed device code (nvcc --compress-mode) needs a driver from CUDA 12.4 or newer",
        ))
    } else {
        None
    }
}

/// The CUDA major version a build targets, and how it was found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct CudaRuntime {
    /// The CUDA major version (13), from the SONAME of a NEEDED CUDA library.
    pub major: u32,
    /// e.g. `NEEDED libcudart.so.13 in lib/libtorch_cuda.so`.
    pub from: String,
}

/// Libraries whose SONAME major follows the CUDA major (cuFFT, cuSOLVER, cuRAND and cuDNN do not).
const CUDA_VERSIONED: [&str; 5] = [
    "libcudart",
    "libcublasLt",
    "libcublas",
    "libnvrtc",
    "libnvJitLink",
];

/// CUDA major from NEEDED names such as `libcudart.so.13` or auditwheel's `libcudart-3f3c6934.so.11.0`.
/// Returns the major and the name it came from; cudart wins over the others.
pub fn cuda_major_from_needed<'a>(
    needed: impl IntoIterator<Item = &'a str>,
) -> Option<(u32, String)> {
    let mut best: Option<(usize, u32, String)> = None;
    for name in needed {
        for (rank, stem) in CUDA_VERSIONED.iter().enumerate() {
            let Some(rest) = name.strip_prefix(stem) else {
                continue;
            };
            // `libcublas` must not match `libcublasLt`: what follows is `.so` or `-<hash>.so`.
            let rest = match rest.strip_prefix('-') {
                Some(r) => match r.find(".so.") {
                    Some(i) if r[..i].bytes().all(|b| b.is_ascii_alphanumeric()) => &r[i..],
                    _ => continue,
                },
                None => rest,
            };
            let Some(ver) = rest.strip_prefix(".so.") else {
                continue;
            };
            let Ok(major) = ver.split('.').next().unwrap_or("").parse::<u32>() else {
                continue;
            };
            if best.as_ref().is_none_or(|b| rank < b.0) {
                best = Some((rank, major, name.to_string()));
            }
        }
    }
    best.map(|(_, m, n)| (m, n))
}

/// NEEDED names of a parsed file (bounded by its dynamic table).
pub fn needed_names<'a>(view: &ElfView<'a>) -> Vec<&'a str> {
    view.dynamic
        .iter()
        .filter(|d| d.d_tag == goblin::elf::dynamic::DT_NEEDED)
        .filter_map(|d| view.dynstr(d.d_val))
        .collect()
}

/// The driver a CUDA runtime of this major needs under minor-version compatibility (NVIDIA,
/// "CUDA Compatibility", Table 1: 11.x ≥ 450, 12.x ≥ 525, 13.x ≥ 580).
pub fn runtime_floor(major: u32) -> Option<DriverReq> {
    match major {
        11 => Some(DriverReq::new(
            "450.80.02",
            "11.0",
            "the CUDA 11 runtime needs driver 450.80.02 or newer",
        )),
        12 => Some(DriverReq::new(
            "525.60.13",
            "12.0",
            "the CUDA 12 runtime needs driver 525.60.13 or newer",
        )),
        13 => Some(DriverReq::new(
            "580",
            "13.0",
            "the CUDA 13 runtime needs driver 580 or newer",
        )),
        _ => None,
    }
}

/// The driver floor of a library or tree: the higher of what the runtime and the compression need.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct DriverFloor {
    /// What the CUDA runtime needs; absent when its major is unknown or not 11, 12 or 13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<DriverReq>,
    /// What the compression needs; absent unless some entry is zstd-compressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<DriverReq>,
    /// The higher of the two; absent when neither is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<String>,
    /// Whether compression raises the floor above what the runtime needs anyway.
    pub compression_raises_floor: bool,
}

/// The driver floor from the CUDA runtime's major version (when known) and what the compression
/// needs (when any entry is compressed): the higher of the two.
pub fn driver_floor(cuda_major: Option<u32>, compression: Option<DriverReq>) -> DriverFloor {
    let runtime = cuda_major.and_then(runtime_floor);
    let (minimum, raises) = match (&runtime, &compression) {
        (Some(r), Some(c)) => {
            if crate::version::compare(&c.linux, &r.linux).is_some_and(|o| o.is_gt()) {
                (Some(c.linux.clone()), true)
            } else {
                (Some(r.linux.clone()), false)
            }
        }
        (Some(r), None) => (Some(r.linux.clone()), false),
        (None, Some(c)) => (Some(c.linux.clone()), true),
        (None, None) => (None, false),
    };
    DriverFloor {
        runtime,
        compression,
        minimum,
        compression_raises_floor: raises,
    }
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn cuda_major_names() {
        assert_eq!(
            cuda_major_from_needed(["libc.so.6", "libcudart.so.13"]),
            Some((13, "libcudart.so.13".into()))
        );
        assert_eq!(
            cuda_major_from_needed(["libcudart-3f3c6934.so.11.0"]).map(|x| x.0),
            Some(11)
        );
        assert_eq!(
            cuda_major_from_needed(["libcublasLt.so.12", "libcudart.so.13"]).map(|x| x.0),
            Some(13)
        );
        assert_eq!(
            cuda_major_from_needed(["libcublasLt.so.12"]).map(|x| x.0),
            Some(12)
        );
        assert_eq!(
            cuda_major_from_needed(["libcufft.so.11", "libcudnn.so.9"]),
            None
        );
        assert_eq!(cuda_major_from_needed(["libcudart_static.so.1"]), None);
    }

    /// The positioned-read walk must see exactly what the in-memory walk sees, including where
    /// and why a broken section stops it.
    #[test]
    fn file_walk_matches_memory_walk() {
        let good = synth::torch_like(5, &[75, 80, 90, 100]);
        let mut cases = vec![
            good.clone(),
            synth::section(std::slice::from_ref(&good), 24),
        ];
        cases.push(good[..good.len() / 2].to_vec());
        let mut bad_magic = good.clone();
        bad_magic[0] ^= 0xff;
        cases.push(bad_magic);
        let mut zero_tail = good.clone();
        zero_tail.extend_from_slice(&[0u8; 5000]);
        cases.push(zero_tail);
        for (i, data) in cases.iter().enumerate() {
            let base = 123u64;
            let mut tmp = tempfile::NamedTempFile::new().unwrap();
            std::io::Write::write_all(&mut tmp, &vec![0xAAu8; base as usize]).unwrap();
            std::io::Write::write_all(&mut tmp, data).unwrap();
            let file = std::fs::File::open(tmp.path()).unwrap();
            let from_file = walk(&FileSource::new(&file, base, data.len()), base);
            let from_memory = parse(data, base);
            assert_eq!(
                format!("{from_file:?}"),
                format!("{from_memory:?}"),
                "case {i}"
            );
        }
        assert!(parse(&cases[0], 0).is_ok_and(|c| c.len() == 5));
        assert!(parse(&cases[2], 0).is_err() && parse(&cases[3], 0).is_err());
    }

    #[test]
    fn floors() {
        let z = compression_floor([Compression::Zstd]);
        let f = driver_floor(Some(12), z.clone());
        assert_eq!(f.minimum.as_deref(), Some("550.54.14"));
        assert!(f.compression_raises_floor);
        let f = driver_floor(Some(13), z);
        assert_eq!(f.minimum.as_deref(), Some("580"));
        assert!(!f.compression_raises_floor);
        let f = driver_floor(Some(12), compression_floor([Compression::Lz4]));
        assert_eq!(f.minimum.as_deref(), Some("525.60.13"));
    }
}
