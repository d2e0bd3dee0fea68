//! The ELF dlopen metadata note (UAPI.12, "ELF dlopen metadata" v1.0): read and write.
//!
//! A note with owner `"FDO"` and type [`NT_FDO_DLOPEN_METADATA`] whose descriptor is a
//! NUL-terminated JSON array of objects: `soname` (alternatives, most preferred first; required),
//! `feature`, `description`, `priority` (`required`, `recommended` (default), `suggested`).
//! systemd's `ELF_NOTE_DLOPEN` macro puts it in an allocated section `.note.dlopen` (alignment 4),
//! which the linker maps into a `PT_NOTE` segment.
//!
//! **Reading** looks where the loader and the tools look: every `PT_NOTE` segment (what a
//! section-stripped file still has), every `SHT_NOTE` section (the spec: find the note by type) and
//! any section named `.note.dlopen` (the reference reader, `dlopen-notes.py`, finds it by name). A
//! note seen through both a segment and a section is read once (by its file offset), and the same
//! entry declared twice is kept once. A malformed note is a [`NoteProblem`], never an error: the
//! rest of the file is still read.
//!
//! **Writing** ([`add_note`]) never moves or changes a loaded byte other than the ELF header's
//! three section-table fields (`e_shoff`, `e_shnum`, `e_shstrndx`, which ld.so never reads): the
//! merged note, a new section-name table and a new section header table are appended at the end of
//! the file, and the note is a non-allocated `SHT_NOTE` section `.note.dlopen`. Adding a `PT_NOTE`
//! would need a larger program header table, which lives inside the first `PT_LOAD` and cannot grow
//! without relinking. An existing `.note.dlopen` section (allocated, in a `PT_NOTE`) keeps its
//! loaded bytes but is renamed `.note.dlopen.orig` and typed `SHT_PROGBITS`, so readers that go by
//! section (`readelf -n`, `dlopen-notes.py`) see exactly one note: the merged one.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;

use goblin::elf::program_header;
use goblin::elf::section_header;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

use super::{ElfError, ElfView, file_range, read_u32};

/// ELF note type of the FDO dlopen metadata.
pub const NT_FDO_DLOPEN_METADATA: u32 = 0x407c_0c0a;
/// The note's owner, NUL included (`namesz` is 4).
pub const OWNER: &[u8; 4] = b"FDO\0";
/// The section systemd's macro and [`add_note`] write.
pub const SECTION: &str = ".note.dlopen";
/// What an existing `.note.dlopen` section is renamed to when [`add_note`] merges it.
pub const MERGED_SECTION: &str = ".note.dlopen.orig";
/// Largest descriptor read: a note listing every library a program could load is a few KiB.
pub const MAX_DESC: u64 = 64 * 1024;

/// How much a declared library matters (the spec's `priority`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// The program does not work without it: a hard dependency (`Depends`, `Requires`).
    Required,
    /// Wanted in the usual installation (`Recommends`): the spec's default.
    #[default]
    Recommended,
    /// Extra functionality (`Suggests`).
    Suggested,
}

impl Priority {
    /// The priority as the spec writes it in the note's JSON (`required`, `recommended`,
    /// `suggested`).
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Required => "required",
            Priority::Recommended => "recommended",
            Priority::Suggested => "suggested",
        }
    }

    fn parse(s: &str) -> Option<Priority> {
        [
            Priority::Required,
            Priority::Recommended,
            Priority::Suggested,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// One object of the note's JSON array. Field order is the spec's and the written order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DlopenEntry {
    /// Alternatives, most preferred first; never empty, no `/`.
    pub soname: Vec<String>,
    /// The feature the library provides, in the note's words (`linalg`); absent when it gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// What the library is for, in the note's words; absent when the note gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How much the program needs it: `required`, `recommended` (also when the note gives none)
    /// or `suggested`.
    #[serde(default)]
    pub priority: Priority,
}

impl DlopenEntry {
    /// Why this entry cannot be written as the spec asks: no soname, a soname with a `/` or
    /// nothing in it, or a control character anywhere (the spec forbids them and `\u` escapes).
    pub fn check(&self) -> Result<(), EntryError> {
        if self.soname.is_empty() {
            return Err(EntryError::NoSoname);
        }
        for s in &self.soname {
            if s.is_empty() {
                return Err(EntryError::EmptySoname);
            }
            if s.contains('/') {
                return Err(EntryError::SonameWithSlash(s.clone()));
            }
        }
        let texts = self
            .soname
            .iter()
            .chain(&self.feature)
            .chain(&self.description);
        if let Some(t) = texts.into_iter().find(|t| t.chars().any(char::is_control)) {
            return Err(EntryError::Control(t.clone()));
        }
        Ok(())
    }
}

/// Why [`DlopenEntry::check`] refuses an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The entry lists no soname.
    #[error("at least one soname is required")]
    NoSoname,
    /// One of its sonames is the empty string.
    #[error("a soname is empty")]
    EmptySoname,
    /// A soname holds a `/` (a path, which the spec rules out).
    #[error("soname {0:?} contains a '/': the note names libraries, not paths")]
    SonameWithSlash(String),
    /// A string of the entry holds a control character.
    #[error("{0:?} contains a control character, which the note's JSON may not hold")]
    Control(String),
}

/// A note that could not be read as the spec writes it. The file is still read; the note (or the
/// entry, or the soname) is skipped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "problem", rename_all = "kebab-case")]
pub enum NoteProblem {
    /// The note (or the section holding it) runs past the end of its section, segment or file.
    Truncated {
        /// File offset of the note (or of the section holding it).
        offset: u64,
    },
    /// The note is not 4-byte aligned, or sits in a container aligned otherwise.
    Misaligned {
        /// File offset of the note.
        offset: u64,
        /// The alignment of the section or segment holding it (1 when the note itself is not 4-byte
        /// aligned).
        align: u64,
    },
    /// The descriptor is larger than [`MAX_DESC`].
    TooLarge {
        /// File offset of the note.
        offset: u64,
        /// The descriptor's size in bytes.
        size: u64,
    },
    /// The descriptor has no terminating NUL.
    Unterminated {
        /// File offset of the note.
        offset: u64,
    },
    /// The descriptor is not UTF-8.
    NotUtf8 {
        /// File offset of the note.
        offset: u64,
    },
    /// The descriptor is not a JSON array.
    BadJson {
        /// File offset of the note.
        offset: u64,
        /// What the JSON parser said.
        error: String,
    },
    /// Entry `index` is not an object with a list of soname strings, or has a field of the wrong type.
    BadEntry {
        /// File offset of the note.
        offset: u64,
        /// The entry's position in the array, from 0.
        index: usize,
        /// What is wrong with it.
        why: String,
    },
    /// A soname with a `/` (a path, which the spec rules out): that alternative is dropped.
    SonameWithSlash {
        /// File offset of the note.
        offset: u64,
        /// The soname as written.
        soname: String,
    },
}

impl fmt::Display for NoteProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoteProblem::Truncated { offset } => {
                write!(f, ".note.dlopen at {offset:#x} is truncated")
            }
            NoteProblem::Misaligned { offset, align } => {
                write!(
                    f,
                    ".note.dlopen at {offset:#x} is aligned to {align}, not 4 as the spec requires"
                )
            }
            NoteProblem::TooLarge { offset, size } => {
                write!(
                    f,
                    ".note.dlopen at {offset:#x} has a {size}-byte descriptor (limit {MAX_DESC})"
                )
            }
            NoteProblem::Unterminated { offset } => write!(
                f,
                ".note.dlopen at {offset:#x}: descriptor is not NUL-terminated"
            ),
            NoteProblem::NotUtf8 { offset } => {
                write!(f, ".note.dlopen at {offset:#x}: descriptor is not UTF-8")
            }
            NoteProblem::BadJson { offset, error } => {
                write!(f, ".note.dlopen at {offset:#x}: not a JSON array: {error}")
            }
            NoteProblem::BadEntry { offset, index, why } => {
                write!(f, ".note.dlopen at {offset:#x}: entry {index}: {why}")
            }
            NoteProblem::SonameWithSlash { offset, soname } => {
                write!(
                    f,
                    ".note.dlopen at {offset:#x}: soname {soname:?} contains a '/' (skipped)"
                )
            }
        }
    }
}

/// Everything the file's dlopen notes declare, and what was wrong with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlopenNotes {
    /// Every entry declared, deduplicated, in the order read.
    pub entries: Vec<DlopenEntry>,
    /// Every problem found, deduplicated, in the order found.
    pub problems: Vec<NoteProblem>,
    /// File offsets (and padding) of the notes read, to read each once: a hostile section that
    /// covers the same bytes with another alignment reads them differently and must not hide them.
    seen: HashSet<(u64, usize)>,
    /// `entries` and `problems` as sets: a file may declare hundreds of thousands of notes, and
    /// deduplicating them by `Vec::contains` was quadratic (250k entries: 43 s in `plan`).
    entry_set: FxHashSet<DlopenEntry>,
    problem_set: FxHashSet<NoteProblem>,
}

impl DlopenNotes {
    fn push(&mut self, e: DlopenEntry) {
        if self.entry_set.insert(e.clone()) {
            self.entries.push(e);
        }
    }

    fn problem(&mut self, p: NoteProblem) {
        if self.problem_set.insert(p.clone()) {
            self.problems.push(p);
        }
    }
}

/// Where notes may live: a file range, its alignment, and whether a problem there is ours to
/// report (a section named `.note.dlopen` is; someone else's note segment is not).
struct NoteContainer {
    range: Range<usize>,
    align: u64,
    ours: bool,
}

impl<'a> ElfView<'a> {
    /// The file's dlopen metadata (see the module documentation for where it is looked for).
    pub fn dlopen_notes(&self) -> DlopenNotes {
        let mut out = DlopenNotes::default();
        let len = self.bytes.len() as u64;
        let mut containers = Vec::new();
        for p in self
            .phdrs
            .iter()
            .filter(|p| p.p_type == program_header::PT_NOTE)
        {
            if let Some(range) = file_range(len, p.p_offset, p.p_filesz) {
                containers.push(NoteContainer {
                    range,
                    align: p.p_align,
                    ours: false,
                });
            }
        }
        for sh in &self.shdrs {
            let named = self.section_name(sh) == SECTION;
            if sh.sh_type == section_header::SHT_NOBITS
                || !(named || sh.sh_type == section_header::SHT_NOTE)
            {
                continue;
            }
            match file_range(len, sh.sh_offset, sh.sh_size) {
                Some(range) => containers.push(NoteContainer {
                    range,
                    align: sh.sh_addralign,
                    ours: named,
                }),
                None if named => out.problem(NoteProblem::Truncated {
                    offset: sh.sh_offset,
                }),
                None => {}
            }
        }
        for c in containers {
            walk_notes(self.bytes, &c, self.ctx.is_little_endian(), &mut out);
        }
        out
    }
}

/// Read every note in a container; keep the FDO dlopen ones.
fn walk_notes(file: &[u8], c: &NoteContainer, le: bool, out: &mut DlopenNotes) {
    // Notes are padded to the container's alignment: 8 for `.note.gnu.property`-style containers,
    // else 4 (the spec's).
    let pad = if c.align == 8 { 8 } else { 4 };
    let data = &file[c.range.clone()];
    let base = c.range.start as u64;
    let mut off = 0usize;
    while off.saturating_add(12) <= data.len() {
        let at = base + off as u64;
        let (Some(namesz), Some(descsz), Some(ntype)) = (
            read_u32(data, off, le),
            read_u32(data, off + 4, le),
            read_u32(data, off + 8, le),
        ) else {
            break;
        };
        let name = data.get(off + 12..).and_then(|r| r.get(..namesz as usize));
        let is_ours = ntype == NT_FDO_DLOPEN_METADATA && name == Some(&OWNER[..]);
        // The spec's alignment is 4: read otherwise, the descriptor would start elsewhere.
        if is_ours && (c.align != 4 || !at.is_multiple_of(4)) {
            out.problem(NoteProblem::Misaligned {
                offset: at,
                align: if at.is_multiple_of(4) { c.align } else { 1 },
            });
            break;
        }
        let desc_start = (off + 12).saturating_add(round_up(namesz as usize, pad));
        let desc_end = desc_start.saturating_add(descsz as usize);
        if desc_end > data.len() {
            if is_ours || c.ours {
                out.problem(NoteProblem::Truncated { offset: at });
            }
            break;
        }
        if is_ours && out.seen.insert((at, pad)) {
            read_desc(&data[desc_start..desc_end], at, out);
        }
        off = desc_start.saturating_add(round_up(descsz as usize, pad));
    }
}

fn round_up(n: usize, to: usize) -> usize {
    n.saturating_add(to - 1) & !(to - 1)
}

/// One note's descriptor: the NUL-terminated JSON array.
fn read_desc(desc: &[u8], at: u64, out: &mut DlopenNotes) {
    if desc.len() as u64 > MAX_DESC {
        return out.problem(NoteProblem::TooLarge {
            offset: at,
            size: desc.len() as u64,
        });
    }
    let Some(nul) = memchr::memchr(0, desc) else {
        return out.problem(NoteProblem::Unterminated { offset: at });
    };
    let Ok(text) = std::str::from_utf8(&desc[..nul]) else {
        return out.problem(NoteProblem::NotUtf8 { offset: at });
    };
    let items = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(_) => {
            return out.problem(NoteProblem::BadJson {
                offset: at,
                error: "the top level is not an array".into(),
            });
        }
        Err(e) => {
            return out.problem(NoteProblem::BadJson {
                offset: at,
                error: e.to_string(),
            });
        }
    };
    for (index, item) in items.iter().enumerate() {
        match read_entry(item, at, out) {
            Ok(Some(e)) => out.push(e),
            Ok(None) => {}
            Err(why) => out.problem(NoteProblem::BadEntry {
                offset: at,
                index,
                why: why.to_string(),
            }),
        }
    }
}

/// One array element; `Ok(None)` when every soname was dropped (reported as it was).
fn read_entry(
    item: &serde_json::Value,
    at: u64,
    out: &mut DlopenNotes,
) -> Result<Option<DlopenEntry>, BadEntry> {
    let obj = item.as_object().ok_or(BadEntry::NotAnObject)?;
    let names = obj
        .get("soname")
        .and_then(|v| v.as_array())
        .ok_or(BadEntry::NoSonameList)?;
    let mut soname = Vec::new();
    for n in names {
        let n = n
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or(BadEntry::Soname)?;
        if n.contains('/') {
            out.problem(NoteProblem::SonameWithSlash {
                offset: at,
                soname: n.to_string(),
            });
        } else {
            soname.push(n.to_string());
        }
    }
    let text = |key: &'static str| -> Result<Option<String>, BadEntry> {
        match obj.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or(BadEntry::NotAString(key)),
        }
    };
    let priority = match text("priority")? {
        None => Priority::default(),
        Some(p) => Priority::parse(&p).ok_or(BadEntry::Priority(p))?,
    };
    let entry = DlopenEntry {
        soname,
        feature: text("feature")?,
        description: text("description")?,
        priority,
    };
    // The spec rules out control characters; a `\u001b` escape would otherwise reach a terminal.
    if entry
        .soname
        .iter()
        .chain(&entry.feature)
        .chain(&entry.description)
        .any(|t| t.chars().any(char::is_control))
    {
        return Err(BadEntry::Control);
    }
    Ok((!entry.soname.is_empty()).then_some(entry))
}

/// Why an element of a note's array is not an entry (the `why` of [`NoteProblem::BadEntry`]).
#[derive(Debug, thiserror::Error)]
enum BadEntry {
    #[error("not a JSON object")]
    NotAnObject,
    #[error("no \"soname\" list")]
    NoSonameList,
    #[error("a soname is not a non-empty string")]
    Soname,
    #[error("\"{0}\" is not a string")]
    NotAString(&'static str),
    #[error("priority {0:?} is not required, recommended or suggested")]
    Priority(String),
    #[error("a string holds a control character")]
    Control,
}

// --- writing -------------------------------------------------------------------------------------

/// Why [`add_note`] refuses a file.
#[derive(Debug, thiserror::Error)]
pub enum NoteWriteError {
    /// The file is not ELF the reader can take.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// The ELF type is neither ET_DYN nor ET_EXEC (the type code is kept).
    #[error("not a shared library or executable (ELF type {0})")]
    NotLoadable(u16),
    /// The file uses extended section numbering (65280 or more sections), which the writer does not
    /// rewrite.
    #[error("uses extended section numbering (65280 or more sections)")]
    ExtendedNumbering,
    /// The copy carries the section headers over: headers readelf calls broken would stay broken.
    #[error("broken section headers: {0}")]
    Sections(#[from] SectionProblem),
    /// The file's existing dlopen note, which would be merged, is malformed.
    #[error("its dlopen note is malformed: {0}")]
    Malformed(NoteProblem),
    /// An entry to add breaks the spec's rules.
    #[error(transparent)]
    BadEntry(#[from] EntryError),
    /// The merged entries did not serialise (not expected: they are strings and an enum).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The copy would be larger than a 32-bit ELF file can address (4 GiB).
    #[error("the result would exceed the 4 GiB a 32-bit ELF file can address")]
    TooLarge,
    /// Readers (this one included) skip a larger descriptor: the note would be written but lost.
    #[error(
        "the merged note's descriptor would be {size} bytes, above the {MAX_DESC} a reader takes"
    )]
    DescriptorTooLarge {
        /// The merged descriptor's size in bytes.
        size: u64,
    },
}

/// What [`add_note`] wrote.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Written")]
pub struct WrittenNote {
    /// The merged entries, as the note's JSON array holds them.
    pub entries: Vec<DlopenEntry>,
    /// The note's JSON text (without the NUL).
    pub json: String,
    /// Where the note starts in the new file.
    pub note_offset: u64,
    /// An existing `.note.dlopen` section was merged (and renamed [`MERGED_SECTION`]).
    pub merged_existing: bool,
}

/// A copy of ELF `bytes` with `entry` in its dlopen note, merged with the entries the file already
/// declares (an entry with the same soname list is replaced). See the module documentation for
/// the layout and what stays byte-identical.
pub fn add_note(
    bytes: &[u8],
    entry: DlopenEntry,
) -> Result<(Vec<u8>, WrittenNote), NoteWriteError> {
    entry.check()?;
    let view = ElfView::parse(bytes)?;
    check_writable(&view)?;
    let entries = merged_entries(&view, entry)?;
    let json = serde_json::to_string(&entries)?;
    let size = json.len() as u64 + 1;
    if size > MAX_DESC {
        return Err(NoteWriteError::DescriptorTooLarge { size });
    }

    let w = Layout::new(&view);
    let mut out = bytes.to_vec();
    pad_to(&mut out, 4);
    let note_offset = out.len() as u64;
    let note = note_bytes(&json, w.le);
    out.extend_from_slice(&note);

    let SectionTable {
        mut sections,
        shstrndx,
        merged_existing,
    } = SectionTable::with_note(&view, note_offset, note.len() as u64);
    append_names(&mut out, &mut sections, shstrndx);

    pad_to(&mut out, if w.is64 { 8 } else { 4 });
    let shoff = out.len() as u64;
    for (_, s) in &sections {
        w.write_shdr(&mut out, s);
    }
    if !w.is64 && out.len() as u64 > u32::MAX as u64 {
        return Err(NoteWriteError::TooLarge);
    }
    w.patch_header(&mut out, shoff, sections.len() as u16, shstrndx as u16);
    Ok((
        out,
        WrittenNote {
            entries,
            json,
            note_offset,
            merged_existing,
        },
    ))
}

/// Why a file's section headers cannot be carried into the copy: each is what `readelf -S`
/// reports as broken (a name or link that points nowhere, a section outside the file), and the
/// copy would keep it, or lose names readers find the note by.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SectionProblem {
    /// `e_shentsize` is not the size of a section header for the file's class.
    #[error("e_shentsize is {found}, not {expected} (the size of a section header)")]
    EntrySize {
        /// The header's `e_shentsize`.
        found: u16,
        /// The size of a section header for the file's class.
        expected: usize,
    },
    /// `e_shstrndx` names a section past the table.
    #[error("e_shstrndx {index} is out of range ({count} sections)")]
    NameTableOutOfRange {
        /// The header's `e_shstrndx`.
        index: u16,
        /// How many section headers there are.
        count: usize,
    },
    /// `e_shstrndx` names a section that is not SHT_STRTAB.
    #[error("e_shstrndx {index} is not a string table")]
    NameTableNotStrtab {
        /// The header's `e_shstrndx`.
        index: u16,
    },
    #[error(
        "section {index} ({offset:#x}, {size} bytes) runs past the end of the file ({len} bytes)"
    )]
    /// A section's bytes run past the end of the file.
    PastEnd {
        /// The section's index.
        index: usize,
        /// Its `sh_offset`.
        offset: u64,
        /// Its `sh_size`.
        size: u64,
        /// The file's length in bytes.
        len: u64,
    },
    /// A section's name offset is outside the section-name table.
    #[error("section {index}'s name offset {name} is outside the section-name table")]
    NameOutside {
        /// The section's index.
        index: usize,
        /// Its `sh_name`: an offset into the section-name table.
        name: usize,
    },
    /// A section's `sh_link` names a section past the table.
    #[error("section {index} links to section {link}, out of range ({count} sections)")]
    LinkOutOfRange {
        /// The section's index.
        index: usize,
        /// Its `sh_link`.
        link: u32,
        /// How many section headers there are.
        count: usize,
    },
    /// Two sections (not SHT_NOBITS) overlap in the file.
    #[error("sections {first} and {second} overlap in the file")]
    Overlap {
        /// The index of the first.
        first: usize,
        /// The index of the second.
        second: usize,
    },
}

/// The section header table as readelf checks it (see [`SectionProblem`]). A file without one
/// (`e_shoff` 0) gets a new one and has nothing to check.
fn check_sections(view: &ElfView<'_>) -> Result<(), SectionProblem> {
    let (h, shdrs) = (&view.header, &view.shdrs);
    if shdrs.is_empty() {
        return Ok(());
    }
    let expected = section_header::SectionHeader::size(view.ctx);
    if usize::from(h.e_shentsize) != expected {
        return Err(SectionProblem::EntrySize {
            found: h.e_shentsize,
            expected,
        });
    }
    let count = shdrs.len();
    let index = h.e_shstrndx;
    if index != section_header::SHN_UNDEF as u16 {
        let names = shdrs
            .get(usize::from(index))
            .ok_or(SectionProblem::NameTableOutOfRange { index, count })?;
        if names.sh_type != section_header::SHT_STRTAB {
            return Err(SectionProblem::NameTableNotStrtab { index });
        }
    }
    let len = view.bytes.len() as u64;
    let names_len = view.section_names_len();
    let in_file = |sh: &section_header::SectionHeader| sh.sh_type != section_header::SHT_NOBITS;
    // Every section's bytes first: a name table outside the file would read as empty below.
    if let Some((index, sh)) = (shdrs.iter().enumerate())
        .find(|&(_, sh)| in_file(sh) && file_range(len, sh.sh_offset, sh.sh_size).is_none())
    {
        return Err(SectionProblem::PastEnd {
            index,
            offset: sh.sh_offset,
            size: sh.sh_size,
            len,
        });
    }
    let mut spans = Vec::new();
    for (i, sh) in shdrs.iter().enumerate() {
        if index != section_header::SHN_UNDEF as u16 && sh.sh_name >= names_len.max(1) {
            return Err(SectionProblem::NameOutside {
                index: i,
                name: sh.sh_name,
            });
        }
        if sh.sh_link as usize >= count {
            return Err(SectionProblem::LinkOutOfRange {
                index: i,
                link: sh.sh_link,
                count,
            });
        }
        if in_file(sh) && sh.sh_type != section_header::SHT_NULL && sh.sh_size > 0 {
            spans.push((sh.sh_offset, sh.sh_offset + sh.sh_size, i));
        }
    }
    // Linkers never lay two sections over the same bytes; a hostile file that does would have
    // one of them rewritten (a note merged) while the other still reads the old bytes.
    spans.sort_unstable();
    match spans.windows(2).find(|w| w[1].0 < w[0].1) {
        Some(w) => Err(SectionProblem::Overlap {
            first: w[0].2.min(w[1].2),
            second: w[0].2.max(w[1].2),
        }),
        None => Ok(()),
    }
}

/// Only shared libraries and executables, with section numbering that fits the header.
fn check_writable(view: &ElfView<'_>) -> Result<(), NoteWriteError> {
    let h = &view.header;
    if !matches!(
        h.e_type,
        goblin::elf::header::ET_DYN | goblin::elf::header::ET_EXEC
    ) {
        return Err(NoteWriteError::NotLoadable(h.e_type));
    }
    if (h.e_shnum == 0 && h.e_shoff != 0)
        || h.e_shstrndx == section_header::SHN_XINDEX as u16
        || view.shdrs.len() + 3 >= 0xff00
    {
        return Err(NoteWriteError::ExtendedNumbering);
    }
    check_sections(view)?;
    Ok(())
}

/// The entries the file declares, with `entry` replacing one with the same soname list; a
/// malformed existing note is refused rather than rewritten.
fn merged_entries(
    view: &ElfView<'_>,
    entry: DlopenEntry,
) -> Result<Vec<DlopenEntry>, NoteWriteError> {
    let existing = view.dlopen_notes();
    if let Some(p) = existing.problems.into_iter().next() {
        return Err(NoteWriteError::Malformed(p));
    }
    let mut entries: Vec<DlopenEntry> = existing
        .entries
        .into_iter()
        .filter(|e| e.soname != entry.soname)
        .collect();
    entries.push(entry);
    Ok(entries)
}

/// The section headers of the new file, by name; names are interned by [`append_names`].
struct SectionTable {
    sections: Vec<(String, Shdr)>,
    /// The index of the section-name table.
    shstrndx: usize,
    /// An existing `.note.dlopen` was renamed [`MERGED_SECTION`].
    merged_existing: bool,
}

impl SectionTable {
    /// The section headers, renamed where needed, plus the new note section (and a name table
    /// when the file had none).
    fn with_note(view: &ElfView<'_>, note_offset: u64, note_size: u64) -> Self {
        let h = &view.header;
        let mut sections: Vec<(String, Shdr)> = view
            .shdrs
            .iter()
            .map(|s| (view.section_name(s).to_string(), Shdr::from(s)))
            .collect();
        let mut merged_existing = false;
        for (name, s) in sections.iter_mut() {
            if name == SECTION {
                *name = MERGED_SECTION.to_string();
                s.sh_type = section_header::SHT_PROGBITS;
                merged_existing = true;
            }
        }
        if sections.is_empty() {
            sections.push((String::new(), Shdr::default()));
        }
        sections.push((
            SECTION.to_string(),
            Shdr {
                sh_type: section_header::SHT_NOTE,
                offset: note_offset,
                size: note_size,
                addralign: 4,
                ..Shdr::default()
            },
        ));
        let shstrndx = match view
            .shdrs
            .get(h.e_shstrndx as usize)
            .filter(|s| s.sh_type == section_header::SHT_STRTAB)
        {
            Some(_) => h.e_shstrndx as usize,
            None => {
                sections.push((
                    ".shstrtab".to_string(),
                    Shdr {
                        sh_type: section_header::SHT_STRTAB,
                        addralign: 1,
                        ..Shdr::default()
                    },
                ));
                sections.len() - 1
            }
        };
        SectionTable {
            sections,
            shstrndx,
            merged_existing,
        }
    }
}

/// The name table: every name once, at the end of `out`, and the sections pointing into it.
fn append_names(out: &mut Vec<u8>, sections: &mut [(String, Shdr)], shstrndx: usize) {
    let mut names = vec![0u8];
    for (name, s) in sections.iter_mut() {
        s.name = if name.is_empty() {
            0
        } else {
            intern(&mut names, name)
        };
    }
    let names_offset = out.len() as u64;
    out.extend_from_slice(&names);
    sections[shstrndx].1.offset = names_offset;
    sections[shstrndx].1.size = names.len() as u64;
}

/// The note record: header, owner, NUL-terminated JSON, zero padding to 4.
pub fn note_bytes(json: &str, le: bool) -> Vec<u8> {
    let u32b = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
    let desc_len = json.len() + 1;
    let mut n = Vec::with_capacity(16 + round_up(desc_len, 4));
    n.extend_from_slice(&u32b(OWNER.len() as u32));
    n.extend_from_slice(&u32b(desc_len as u32));
    n.extend_from_slice(&u32b(NT_FDO_DLOPEN_METADATA));
    n.extend_from_slice(OWNER);
    n.extend_from_slice(json.as_bytes());
    n.push(0);
    pad_to(&mut n, 4);
    n
}

fn pad_to(v: &mut Vec<u8>, to: usize) {
    v.resize(round_up(v.len(), to), 0);
}

/// Offset of `name` in a string table, appending it when new.
fn intern(table: &mut Vec<u8>, name: &str) -> u32 {
    let needle: Vec<u8> = name.bytes().chain([0]).collect();
    if let Some(i) = memchr::memmem::find_iter(table, &needle).find(|&i| i > 0 && table[i - 1] == 0)
    {
        return i as u32;
    }
    let at = table.len() as u32;
    table.extend_from_slice(&needle);
    at
}

/// A section header as written (goblin reads them; writing is a dozen fields by hand).
#[derive(Debug, Clone, Default)]
struct Shdr {
    name: u32,
    sh_type: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    addralign: u64,
    entsize: u64,
}

impl From<&section_header::SectionHeader> for Shdr {
    fn from(s: &section_header::SectionHeader) -> Self {
        Shdr {
            name: s.sh_name as u32,
            sh_type: s.sh_type,
            flags: s.sh_flags,
            addr: s.sh_addr,
            offset: s.sh_offset,
            size: s.sh_size,
            link: s.sh_link,
            info: s.sh_info,
            addralign: s.sh_addralign,
            entsize: s.sh_entsize,
        }
    }
}

/// Class and byte order of the file being written.
struct Layout {
    is64: bool,
    le: bool,
}

impl Layout {
    fn new(view: &ElfView<'_>) -> Layout {
        Layout {
            is64: view.ctx.container.is_big(),
            le: view.ctx.is_little_endian(),
        }
    }

    fn u16(&self, v: u16) -> [u8; 2] {
        if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    }

    fn u32(&self, v: u32) -> [u8; 4] {
        if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    }

    /// An address-sized field: 8 bytes in ELF64, 4 in ELF32 (the caller checked it fits).
    fn word(&self, v: u64) -> Vec<u8> {
        match (self.is64, self.le) {
            (true, true) => v.to_le_bytes().to_vec(),
            (true, false) => v.to_be_bytes().to_vec(),
            (false, true) => (v as u32).to_le_bytes().to_vec(),
            (false, false) => (v as u32).to_be_bytes().to_vec(),
        }
    }

    fn write_shdr(&self, out: &mut Vec<u8>, s: &Shdr) {
        out.extend_from_slice(&self.u32(s.name));
        out.extend_from_slice(&self.u32(s.sh_type));
        out.extend(self.word(s.flags));
        out.extend(self.word(s.addr));
        out.extend(self.word(s.offset));
        out.extend(self.word(s.size));
        out.extend_from_slice(&self.u32(s.link));
        out.extend_from_slice(&self.u32(s.info));
        out.extend(self.word(s.addralign));
        out.extend(self.word(s.entsize));
    }

    /// `e_shoff`, `e_shentsize`, `e_shnum`, `e_shstrndx`: the only header bytes that change.
    fn patch_header(&self, out: &mut [u8], shoff: u64, shnum: u16, shstrndx: u16) {
        let (off, rest) = if self.is64 {
            (0x28, 0x3a)
        } else {
            (0x20, 0x2e)
        };
        let w = self.word(shoff);
        out[off..off + w.len()].copy_from_slice(&w);
        let entsize = if self.is64 { 64 } else { 40 };
        out[rest..rest + 2].copy_from_slice(&self.u16(entsize));
        out[rest + 2..rest + 4].copy_from_slice(&self.u16(shnum));
        out[rest + 4..rest + 6].copy_from_slice(&self.u16(shstrndx));
    }
}

/// File ranges of the ELF header fields [`add_note`] may change (for the byte-identity check).
pub fn section_table_fields(is64: bool) -> [Range<usize>; 2] {
    if is64 {
        [0x28..0x30, 0x3a..0x40]
    } else {
        [0x20..0x24, 0x2e..0x34]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal little-endian ELF64 shared object whose only section is `name` with `data`.
    fn elf_with_section(name: &str, data: &[u8], align: u64) -> Vec<u8> {
        let names = format!("\0{name}\0.shstrtab\0");
        let data_off = 64usize;
        let names_off = data_off + data.len();
        let shoff = (names_off + names.len()).div_ceil(8) * 8;
        let mut out = vec![0u8; shoff + 3 * 64];
        out[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        out[16..18].copy_from_slice(&3u16.to_le_bytes());
        out[18..20].copy_from_slice(&62u16.to_le_bytes());
        out[40..48].copy_from_slice(&(shoff as u64).to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&3u16.to_le_bytes());
        out[62..64].copy_from_slice(&2u16.to_le_bytes());
        out[data_off..names_off].copy_from_slice(data);
        out[names_off..names_off + names.len()].copy_from_slice(names.as_bytes());
        let w = Layout {
            is64: true,
            le: true,
        };
        let mut hdrs = Vec::new();
        w.write_shdr(&mut hdrs, &Shdr::default());
        let note = Shdr {
            name: 1,
            sh_type: 7,
            offset: data_off as u64,
            size: data.len() as u64,
            addralign: align,
            ..Shdr::default()
        };
        w.write_shdr(&mut hdrs, &note);
        let strtab = Shdr {
            name: 2 + name.len() as u32,
            sh_type: 3,
            offset: names_off as u64,
            size: names.len() as u64,
            addralign: 1,
            ..Shdr::default()
        };
        w.write_shdr(&mut hdrs, &strtab);
        out[shoff..].copy_from_slice(&hdrs);
        out
    }

    fn read(name: &str, data: &[u8], align: u64) -> DlopenNotes {
        let elf = elf_with_section(name, data, align);
        ElfView::parse(&elf).unwrap().dlopen_notes()
    }

    const GOOD: &str =
        r#"[{"soname":["libtorch_cuda_linalg.so"],"feature":"linalg","priority":"required"}]"#;

    #[test]
    fn a_well_formed_note_is_read() {
        let n = read(SECTION, &note_bytes(GOOD, true), 4);
        assert_eq!(n.problems, vec![]);
        assert_eq!(
            n.entries,
            vec![DlopenEntry {
                soname: vec!["libtorch_cuda_linalg.so".into()],
                feature: Some("linalg".into()),
                description: None,
                priority: Priority::Required
            }]
        );
    }

    #[test]
    fn several_notes_and_defaults() {
        let mut data = note_bytes(r#"[{"soname":["liba.so.1","liba.so"]}]"#, true);
        data.extend(note_bytes(
            r#"[{"soname":["libb.so"],"priority":"suggested","x-unknown":1}]"#,
            true,
        ));
        let n = read(SECTION, &data, 4);
        assert_eq!(n.problems, vec![]);
        assert_eq!(n.entries.len(), 2);
        assert_eq!(n.entries[0].soname, ["liba.so.1", "liba.so"]);
        assert_eq!(n.entries[0].priority, Priority::Recommended);
        assert_eq!(n.entries[1].priority, Priority::Suggested);
    }

    /// Each malformation is one typed problem, and what is fine in the same note is still read.
    #[test]
    fn malformed_notes_are_problems() {
        type Is = fn(&NoteProblem) -> bool;
        let cases: Vec<(&str, Vec<u8>, u64, Is)> = vec![
            ("bad json", note_bytes("[{\"soname\":", true), 4, |p| {
                matches!(p, NoteProblem::BadJson { .. })
            }),
            ("not an array", note_bytes("{}", true), 4, |p| {
                matches!(p, NoteProblem::BadJson { .. })
            }),
            ("alignment", note_bytes(GOOD, true), 8, |p| {
                matches!(p, NoteProblem::Misaligned { align: 8, .. })
            }),
            ("truncated", note_bytes(GOOD, true)[..40].to_vec(), 4, |p| {
                matches!(p, NoteProblem::Truncated { .. })
            }),
            (
                "slash",
                note_bytes(r#"[{"soname":["/usr/lib/libx.so","libx.so"]}]"#, true),
                4,
                |p| matches!(p, NoteProblem::SonameWithSlash { soname, .. } if soname == "/usr/lib/libx.so"),
            ),
            (
                "priority",
                note_bytes(r#"[{"soname":["libx.so"],"priority":"must"}]"#, true),
                4,
                |p| matches!(p, NoteProblem::BadEntry { index: 0, .. }),
            ),
            (
                "no soname",
                note_bytes(r#"[{"feature":"x"}]"#, true),
                4,
                |p| matches!(p, NoteProblem::BadEntry { .. }),
            ),
            (
                "escape",
                note_bytes(
                    r#"[{"soname":["libx.so"],"description":"\u001b[31m"}]"#,
                    true,
                ),
                4,
                |p| matches!(p, NoteProblem::BadEntry { .. }),
            ),
        ];
        for (what, data, align, is) in cases {
            let n = read(SECTION, &data, align);
            assert!(
                n.problems.len() == 1 && is(&n.problems[0]),
                "{what}: {:?}",
                n.problems
            );
        }
        // A soname with a slash drops that alternative only.
        let n = read(
            SECTION,
            &note_bytes(r#"[{"soname":["/abs/libx.so","libx.so"]}]"#, true),
            4,
        );
        assert_eq!(n.entries[0].soname, ["libx.so"]);
    }

    #[test]
    fn huge_unterminated_and_non_utf8_descriptors() {
        let raw = |desc: &[u8]| {
            let mut n = Vec::new();
            for v in [4u32, desc.len() as u32, NT_FDO_DLOPEN_METADATA] {
                n.extend(v.to_le_bytes());
            }
            n.extend(OWNER);
            n.extend(desc);
            pad_to(&mut n, 4);
            n
        };
        let huge = format!(
            "[{{\"soname\":[\"libx.so\"],\"description\":\"{}\"}}]\0",
            "a".repeat(MAX_DESC as usize)
        );
        assert!(matches!(
            read(SECTION, &raw(huge.as_bytes()), 4).problems[..],
            [NoteProblem::TooLarge { .. }]
        ));
        assert!(matches!(
            read(SECTION, &raw(b"[]"), 4).problems[..],
            [NoteProblem::Unterminated { .. }]
        ));
        assert!(matches!(
            read(SECTION, &raw(b"[\"\xff\"]\0"), 4).problems[..],
            [NoteProblem::NotUtf8 { .. }]
        ));
        // A descriptor size past the end of everything.
        let mut n = raw(b"[]\0");
        n[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            read(SECTION, &n, 4).problems[..],
            [NoteProblem::Truncated { .. }]
        ));
    }

    /// Another owner's note, or another type, is not ours: not read, not reported.
    #[test]
    fn other_notes_are_ignored() {
        let mut gnu = note_bytes(GOOD, true);
        gnu[12..16].copy_from_slice(b"GNU\0");
        let n = read(".note.gnu.build-id", &gnu, 4);
        assert_eq!(n, DlopenNotes::default());
    }

    #[test]
    fn writing_merges_and_reads_back() {
        let elf = elf_with_section(SECTION, &note_bytes(GOOD, true), 4);
        let add = DlopenEntry {
            soname: vec!["libz.so.1".into()],
            feature: Some("zlib".into()),
            description: None,
            priority: Priority::Suggested,
        };
        let (out, written) = add_note(&elf, add.clone()).unwrap();
        assert!(written.merged_existing);
        let n = ElfView::parse(&out).unwrap().dlopen_notes();
        assert_eq!(n.problems, vec![]);
        assert_eq!(n.entries.len(), 2);
        assert_eq!(n.entries[1], add);
        // Replacing: the same soname list gets the new fields.
        let again = DlopenEntry {
            priority: Priority::Required,
            ..add
        };
        let (out2, w2) = add_note(&out, again.clone()).unwrap();
        assert_eq!(w2.entries.last(), Some(&again));
        assert_eq!(
            ElfView::parse(&out2)
                .unwrap()
                .dlopen_notes()
                .entries
                .iter()
                .filter(|e| e.soname == again.soname)
                .count(),
            1
        );
    }

    #[test]
    fn writing_refuses_bad_entries_and_files() {
        let elf = elf_with_section(SECTION, &note_bytes("[", true), 4);
        let e = DlopenEntry {
            soname: vec!["libx.so".into()],
            feature: None,
            description: None,
            priority: Priority::Required,
        };
        assert!(matches!(
            add_note(&elf, e.clone()),
            Err(NoteWriteError::Malformed(NoteProblem::BadJson { .. }))
        ));
        let slash = DlopenEntry {
            soname: vec!["lib/x.so".into()],
            ..e.clone()
        };
        assert!(matches!(
            add_note(&elf, slash),
            Err(NoteWriteError::BadEntry(_))
        ));
        let ctl = DlopenEntry {
            description: Some("a\nb".into()),
            ..e.clone()
        };
        assert!(matches!(
            add_note(&elf, ctl),
            Err(NoteWriteError::BadEntry(_))
        ));
        assert!(matches!(
            add_note(b"not elf at all", e),
            Err(NoteWriteError::Elf(_))
        ));
    }
}
