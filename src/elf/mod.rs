//! ELF facts: what the dynamic loader and a `dlopen` reader need, read lazily from a mapped file.
//!
//! The reader touches the ELF header, the program and section header tables, `PT_DYNAMIC`, the
//! dynamic string and symbol tables, the version tables and read-only data. It never reads `.text`
//! (but for the load-time initialisers [`ElfView::load_time_imports`] decodes, asked for files that
//! carry the payload only) or the `.nv_fatbin` payload. Dynamic-table entries hold *virtual
//! addresses*; they are mapped to file offsets through the `PT_LOAD` that covers them, because
//! patchelf'd files (torch 2.11's `libtorch_cuda.so`) keep `.dynstr` in an extra segment near the
//! end of the file where address and offset differ.
//!
//! Every offset and size read from the file is bounds-checked; a broken or truncated file yields an
//! [`ElfError`], never a panic or an out-of-range read.

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::dynamic::{self, Dyn};
use goblin::elf::header::{self, Header};
use goblin::elf::program_header::{self, ProgramHeader};
use goblin::elf::section_header::{self, SectionHeader};
use goblin::elf::sym;
use scroll::Pread;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;

use memmap2::Mmap;
use object::Endianness;

mod aarch64;
mod error;
mod load_time;
pub mod note;
mod search;
mod symbols;
pub use error::ElfError;
pub use load_time::Isa;
pub use note::{DlopenEntry, DlopenNotes, NoteProblem, Priority};
pub use search::case_variants;
pub use symbols::{
    Bytes, DefinedPrints, DynSymbols, HashKind, Lookup, RawSym, Sym, SymTable, SymbolRecord,
};

/// Bytes either side of a library-name literal searched for symbol names the loader looks up.
const NEIGHBOUR_WINDOW: usize = 512;
/// Longest C string accepted as a library-name literal.
const MAX_LITERAL: usize = 256;

/// A parsed ELF whose bytes are still in memory. Later stages (payload scan, fatbin walk) read
/// through it while the caller keeps the map or buffer alive.
pub struct ElfView<'a> {
    /// The whole file.
    pub bytes: &'a [u8],
    /// The ELF header.
    pub header: Header,
    /// Class (32/64-bit) and byte order, to read the other structures with.
    pub ctx: Ctx,
    /// The program headers (empty when the file has none).
    pub phdrs: Vec<ProgramHeader>,
    /// The section headers (empty when the file has none: `e_shoff` 0).
    pub shdrs: Vec<SectionHeader>,
    shstrtab: Range<usize>,
    /// The `PT_DYNAMIC` entries, up to DT_NULL (empty for a static file).
    pub dynamic: Vec<Dyn>,
    dynstr: Range<usize>,
}

impl<'a> ElfView<'a> {
    /// Parse the headers and the dynamic section of `bytes`: an error names the first thing that is
    /// not ELF or points outside the file.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ElfError> {
        if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
            return Err(ElfError::NotElf);
        }
        let class = bytes[header::EI_CLASS];
        let data = bytes[header::EI_DATA];
        if class != header::ELFCLASS32 && class != header::ELFCLASS64 {
            return Err(ElfError::BadClass(class));
        }
        if data != header::ELFDATA2LSB && data != header::ELFDATA2MSB {
            return Err(ElfError::BadEncoding(data));
        }
        let header: Header = bytes.pread(0).map_err(|_| ElfError::TruncatedHeader)?;
        let container = if class == header::ELFCLASS64 {
            Container::Big
        } else {
            Container::Little
        };
        let endian = if data == header::ELFDATA2LSB {
            Endian::Little
        } else {
            Endian::Big
        };
        let ctx = Ctx::new(container, endian);
        let len = bytes.len() as u64;

        let phdrs = if header.e_phnum == 0 {
            Vec::new()
        } else {
            // goblin reads each entry at the class's size whatever e_phentsize says; ld.so refuses
            // a file whose entries are another size ("ELF file's phentsize not the expected size").
            let expected = ProgramHeader::size(ctx);
            if usize::from(header.e_phentsize) != expected {
                return Err(ElfError::PhentSize {
                    found: header.e_phentsize,
                    expected,
                });
            }
            let need = header
                .e_phoff
                .checked_add(header.e_phnum as u64 * ProgramHeader::size(ctx) as u64);
            if need.is_none_or(|n| n > len) {
                return Err(ElfError::ProgramHeadersPastEnd {
                    offset: header.e_phoff,
                    count: header.e_phnum,
                    len,
                });
            }
            ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx)
                .map_err(|source| ElfError::Headers {
                    what: "program headers",
                    source,
                })?
        };
        check_segments(&header, &phdrs, len)?;

        let shdrs = if header.e_shoff == 0 {
            Vec::new()
        } else {
            let count = header.e_shnum as u64;
            let entsize = SectionHeader::size(ctx) as u64;
            // e_shnum == 0 with a table means the count lives in section 0's sh_size; goblin handles it.
            let need = header.e_shoff.checked_add(count.max(1) * entsize);
            if need.is_none_or(|n| n > len) {
                return Err(ElfError::SectionHeadersPastEnd {
                    offset: header.e_shoff,
                    len,
                });
            }
            SectionHeader::parse(bytes, header.e_shoff as usize, header.e_shnum as usize, ctx)
                .map_err(|source| ElfError::Headers {
                    what: "section headers",
                    source,
                })?
        };
        let mut shstrndx = header.e_shstrndx as usize;
        if shstrndx == section_header::SHN_XINDEX as usize {
            shstrndx = shdrs.first().map(|s| s.sh_link as usize).unwrap_or(0);
        }
        let shstrtab = shdrs
            .get(shstrndx)
            .and_then(|s| file_range(len, s.sh_offset, s.sh_size))
            .unwrap_or(0..0);

        let mut view = ElfView {
            bytes,
            header,
            ctx,
            phdrs,
            shdrs,
            shstrtab,
            dynamic: Vec::new(),
            dynstr: 0..0,
        };
        view.read_dynamic()?;
        Ok(view)
    }

    fn read_dynamic(&mut self) -> Result<(), ElfError> {
        let Some(ph) = self
            .phdrs
            .iter()
            .find(|p| p.p_type == program_header::PT_DYNAMIC)
        else {
            return Ok(());
        };
        let size = <Dyn as scroll::ctx::SizeWith<Ctx>>::size_with(&self.ctx);
        let start = ph.p_offset as usize;
        let count = ph.p_filesz as usize / size;
        let mut out = Vec::with_capacity(count.min(4096));
        for i in 0..count {
            let d: Dyn = self
                .bytes
                .pread_with(start + i * size, self.ctx)
                .map_err(|source| ElfError::DynamicEntry { index: i, source })?;
            if d.d_tag == dynamic::DT_NULL {
                break;
            }
            out.push(d);
        }
        self.dynamic = out;
        if let (Some(addr), Some(sz)) = (
            self.dyn_val(dynamic::DT_STRTAB),
            self.dyn_val(dynamic::DT_STRSZ),
        ) {
            let off = self.vaddr_to_offset(addr).ok_or(ElfError::Unmapped {
                tag: "DT_STRTAB",
                addr,
            })?;
            self.dynstr = file_range(self.bytes.len() as u64, off as u64, sz).ok_or(
                ElfError::StringTablePastEnd {
                    offset: off,
                    size: sz,
                },
            )?;
        }
        Ok(())
    }

    /// The value of the first dynamic entry with `tag`, if any.
    pub fn dyn_val(&self, tag: u64) -> Option<u64> {
        self.dynamic
            .iter()
            .find(|d| d.d_tag == tag)
            .map(|d| d.d_val)
    }

    /// Map a virtual address to a file offset through the `PT_LOAD` segment that holds it in the file.
    pub fn vaddr_to_offset(&self, addr: u64) -> Option<usize> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == program_header::PT_LOAD)
            .find(|p| addr >= p.p_vaddr && addr - p.p_vaddr < p.p_filesz)
            .and_then(|p| usize::try_from(p.p_offset + (addr - p.p_vaddr)).ok())
    }

    /// A section's name from the section-name table (`""` when it has none or it points outside).
    pub fn section_name(&self, sh: &SectionHeader) -> &'a str {
        let tab = &self.bytes[self.shstrtab.clone()];
        cstr_at(tab, sh.sh_name).unwrap_or("")
    }

    /// Bytes of the section-name table (0 when the file has none).
    pub fn section_names_len(&self) -> usize {
        self.shstrtab.len()
    }

    /// The first section with this name, if any.
    pub fn section(&self, name: &str) -> Option<&SectionHeader> {
        self.shdrs.iter().find(|s| self.section_name(s) == name)
    }

    /// File bytes of a section; `None` for NOBITS or one that runs past the end of the file.
    pub fn section_bytes(&self, sh: &SectionHeader) -> Option<&'a [u8]> {
        if sh.sh_type == section_header::SHT_NOBITS {
            return None;
        }
        file_range(self.bytes.len() as u64, sh.sh_offset, sh.sh_size).map(|r| &self.bytes[r])
    }

    /// The NUL-terminated string at offset `off` of the dynamic string table, if it is inside it
    /// and UTF-8.
    pub fn dynstr(&self, off: u64) -> Option<&'a str> {
        cstr_at(&self.bytes[self.dynstr.clone()], off as usize)
    }

    /// Read-only data sections (`.rodata*`), or, in a file without section headers, the read-only
    /// non-executable `PT_LOAD` segments. Strings only present in `.dynstr`/`.gnu.version_r` do not
    /// count as literals, so those are cut out of the segment fallback.
    pub fn rodata_ranges(&self) -> Vec<Range<usize>> {
        let len = self.bytes.len() as u64;
        if !self.shdrs.is_empty() {
            return self
                .shdrs
                .iter()
                .filter(|s| {
                    s.sh_type == section_header::SHT_PROGBITS
                        && s.sh_flags & section_header::SHF_ALLOC as u64 != 0
                        && s.sh_flags
                            & (section_header::SHF_WRITE | section_header::SHF_EXECINSTR) as u64
                            == 0
                        && self.section_name(s).starts_with(".rodata")
                })
                .filter_map(|s| file_range(len, s.sh_offset, s.sh_size))
                .collect();
        }
        let mut out = Vec::new();
        for p in &self.phdrs {
            if p.p_type == program_header::PT_LOAD
                && p.p_flags & (program_header::PF_X | program_header::PF_W) == 0
                && let Some(r) = file_range(len, p.p_offset, p.p_filesz)
            {
                out.extend(subtract(r, self.dynstr.clone()));
            }
        }
        out
    }

    /// Source file names of the translation units the linker saw (`STT_FILE` symbols in `.symtab`),
    /// in table order, each once. Empty for a stripped file. Only the local part of the table
    /// (`0..sh_info`) can hold them, so the global symbols are never read.
    pub fn translation_units(&self) -> Vec<String> {
        let Some(sh) = self
            .shdrs
            .iter()
            .find(|s| s.sh_type == section_header::SHT_SYMTAB)
        else {
            return Vec::new();
        };
        let Some((table, strs)) = self.symtab() else {
            return Vec::new();
        };
        let locals = (sh.sh_info as usize).min(table.len());
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for i in 0..locals {
            let Some(s) = table.get(i) else { break };
            if s.kind() != goblin::elf::sym::STT_FILE {
                continue;
            }
            if let Some(name) = cstr_at(strs, s.name as usize)
                && !name.is_empty()
                && seen.insert(name)
            {
                out.push(name.to_string());
            }
        }
        out
    }

    /// The static symbol table (`.symtab`) and its string table, when the file is not stripped.
    ///
    /// The entries decode through `object` ([`SymTable`]), but the table is walked here rather than
    /// through `object`'s `SymbolTable`/`StringTable`, whose names come only whole (a NUL search per
    /// symbol): the `--deep` scan rejects ~all of 80k names on their first bytes. Measured with
    /// `bench/symbols.rs` (`symtab`): `object` took 1.23–1.29× this walk's time per run.
    pub fn symtab(&self) -> Option<(SymTable<'a>, &'a [u8])> {
        let sh = self
            .shdrs
            .iter()
            .find(|s| s.sh_type == section_header::SHT_SYMTAB)?;
        let strsh = self.shdrs.get(sh.sh_link as usize)?;
        let strs = self.section_bytes(strsh)?;
        let r = file_range(self.bytes.len() as u64, sh.sh_offset, sh.sh_size)?;
        Some((self.sym_table(r), strs))
    }
}

/// What ld.so checks of the segments before it maps a file (glibc `_dl_map_object_from_fd`), so
/// that no command judges a library the loader would refuse: the segments it maps and reads lie
/// inside the file; a shared library has a `PT_LOAD` ("object file has no loadable segments") and
/// a `PT_DYNAMIC` ("object file has no dynamic section"), and maps each `PT_LOAD` at an address
/// congruent to its offset modulo the page ("ELF load command address/offset not page-aligned";
/// 4 KiB, the smallest page of any Linux target). A file without program headers (an object
/// file, a section-only test file) is not loaded by anyone and is read as it is.
fn check_segments(h: &Header, phdrs: &[ProgramHeader], len: u64) -> Result<(), ElfError> {
    for (i, ph) in phdrs.iter().enumerate() {
        if ph.p_type == program_header::PT_LOAD || ph.p_type == program_header::PT_DYNAMIC {
            let end = ph.p_offset.checked_add(ph.p_filesz);
            if end.is_none_or(|e| e > len) {
                return Err(ElfError::SegmentPastEnd {
                    index: i,
                    kind: program_header::pt_to_str(ph.p_type),
                    end: ph.p_offset.saturating_add(ph.p_filesz),
                    len,
                });
            }
        }
    }
    if h.e_type != header::ET_DYN || phdrs.is_empty() {
        return Ok(());
    }
    let has = |t: u32| phdrs.iter().any(|p| p.p_type == t);
    if !has(program_header::PT_LOAD) {
        return Err(ElfError::NotLoadable("no PT_LOAD segment"));
    }
    if !has(program_header::PT_DYNAMIC) {
        return Err(ElfError::NotLoadable(
            "a shared object (ET_DYN) without a PT_DYNAMIC segment",
        ));
    }
    const PAGE: u64 = 4096;
    if let Some(index) = phdrs.iter().position(|p| {
        p.p_type == program_header::PT_LOAD
            && !p.p_vaddr.wrapping_sub(p.p_offset).is_multiple_of(PAGE)
    }) {
        return Err(ElfError::LoadMisaligned { index });
    }
    Ok(())
}

/// `start..start+size` if it lies inside a file of `len` bytes.
pub fn file_range(len: u64, start: u64, size: u64) -> Option<Range<usize>> {
    let end = start.checked_add(size)?;
    if end > len {
        return None;
    }
    Some(start as usize..end as usize)
}

fn subtract(r: Range<usize>, cut: Range<usize>) -> Vec<Range<usize>> {
    if cut.is_empty() || cut.end <= r.start || cut.start >= r.end {
        return vec![r];
    }
    let mut out = Vec::new();
    if cut.start > r.start {
        out.push(r.start..cut.start);
    }
    if cut.end < r.end {
        out.push(cut.end..r.end);
    }
    out
}

/// The NUL-terminated string at `off`, if it is valid UTF-8 and terminated inside `tab`.
pub fn cstr_at(tab: &[u8], off: usize) -> Option<&str> {
    std::str::from_utf8(cbytes_at(tab, off)?).ok()
}

/// The bytes of the NUL-terminated string at `off`, without the NUL; `None` when it is not
/// terminated inside `tab`.
pub(crate) fn cbytes_at(tab: &[u8], off: usize) -> Option<&[u8]> {
    let rest = tab.get(off..)?;
    Some(&rest[..memchr::memchr(0, rest)?])
}

// --- facts -------------------------------------------------------------------------------------

/// What the ELF header's `e_type` (and a `PT_INTERP`) says the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ElfType {
    /// `ET_EXEC`: a position-dependent program.
    Executable,
    /// `ET_DYN` with a `PT_INTERP`: a position-independent program.
    PieExecutable,
    /// `ET_DYN` without a `PT_INTERP`: a shared library.
    SharedLibrary,
    /// `ET_REL`: an object file, never loaded by ld.so.
    Relocatable,
    /// `ET_CORE`: a core dump.
    Core,
    /// Any other `e_type`.
    Other,
}

/// Bytes of the sections that matter for sizing, by kind (SHT_NOBITS sections count 0).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SectionSizes {
    /// `.text`.
    pub text: u64,
    /// Every `.rodata*` section.
    pub rodata: u64,
    /// `.nv_fatbin`: the CUDA device code.
    pub nv_fatbin: u64,
    /// Every `.debug_*` and `.zdebug_*` section.
    pub debug: u64,
    /// `.symtab` + `.strtab`: present in unstripped files, never loaded at run time.
    pub symtab: u64,
}

/// A string in read-only data that names a shared library: a `dlopen` candidate.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LibLiteral {
    /// Base name, e.g. `libtorch_cuda_linalg.so`.
    pub name: String,
    /// The literal as written, when it carries a directory part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<String>,
    /// File offset of the first occurrence.
    pub offset: u64,
    /// Identifier-like strings stored next to it (the loader's `dlsym` names are usually here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<String>,
}

/// What one ELF file tells the load model and the payload scan: its identity, how it loads others
/// and what its read-only data names.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ElfFacts {
    /// 32 or 64.
    pub class: u8,
    /// `e_machine` as goblin names it (`X86_64`, `AARCH64`).
    pub machine: String,
    /// Program, shared library, or another kind of ELF.
    pub elf_type: ElfType,
    /// The `PT_INTERP` path (the program's dynamic loader), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<String>,
    /// DT_SONAME, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soname: Option<String>,
    /// DT_NEEDED entries, in order.
    pub needed: Vec<String>,
    /// DT_RPATH entries, unexpanded. `None` when the tag is absent (different from an empty value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpath: Option<Vec<String>>,
    /// DT_RUNPATH entries, unexpanded. `None` when the tag is absent (different from an empty
    /// value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runpath: Option<Vec<String>>,
    /// DT_FLAGS_1 has DF_1_NODEFLIB: ld.so does not search the default directories for this file's
    /// requests.
    pub nodeflib: bool,
    /// Bytes of the sections that matter for sizing.
    pub sections: SectionSizes,
    /// Loader entry points this file imports (`dlopen`, `dlmopen`, `at::DynamicLibrary::DynamicLibrary`).
    pub loader_imports: Vec<String>,
    /// Strings in read-only data that name a shared library: the `dlopen` candidates.
    pub library_literals: Vec<LibLiteral>,
    /// Read-only strings containing one of the words asked for (the payload name).
    pub mentions: Mentions,
    /// Libraries declared in the file's `.note.dlopen` (UAPI.12, the one standard way to declare
    /// lazy edges): see [`note`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dlopen_notes: Vec<DlopenEntry>,
    /// What was wrong with those notes (the malformed parts are skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dlopen_note_problems: Vec<NoteProblem>,
    /// Exports a `PyInit_*` function: a CPython extension module.
    pub python_extension: bool,
    /// How many dynamic symbols it defines and how many it imports.
    pub dynamic_symbols: SymbolCounts,
    /// The dynamic symbol table, for the lookups after the facts are read (not serialised; an
    /// empty table when the facts are read back from JSON).
    #[serde(skip)]
    pub symbols: DynSymbols,
    /// Every dynamic symbol (name, version, size, kind, binding), in table order: written by
    /// `inspect --json --symbols` only, absent otherwise.
    #[serde(default, rename = "symbols", skip_serializing_if = "Option::is_none")]
    pub symbol_list: Option<Vec<symbols::SymbolRecord>>,
}

/// Strings in read-only data that contain a searched word: all counted, the first few kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Mentions {
    /// How many strings contain one of the words.
    pub count: usize,
    /// The first few of them (up to 8), without duplicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<String>,
}

/// Mention samples kept per file.
const MENTION_SAMPLES: usize = 8;

/// Dynamic symbols by whether the file defines them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SymbolCounts {
    /// Entries the file defines (exports), the null entry 0 not counted.
    pub defined: usize,
    /// Named entries the file leaves undefined (imports).
    pub undefined: usize,
}

impl ElfFacts {
    /// An executable, position-dependent or not.
    pub fn is_executable(&self) -> bool {
        matches!(self.elf_type, ElfType::Executable | ElfType::PieExecutable)
    }

    /// Whether it imports any loader entry point (`dlopen` and the like): a file that can load
    /// libraries lazily.
    pub fn imports_loader(&self) -> bool {
        !self.loader_imports.is_empty()
    }
}

/// PyTorch's `at::DynamicLibrary` constructors (complete and base object) are the names that
/// start with `_ZN2at` + [`CTOR_CLASS`] + `1` or `2`; the argument list changed across releases,
/// so only the class and constructor part is matched. The string table is searched for the part
/// after `_ZN2at`, and the scope is checked at each hit: nearly every name libtorch exports starts
/// with `_ZN2at`, and a pattern that began there left the searcher confirming a candidate at
/// most of them (0.73 → 0.39 ms over libtorch_cpu's 5.6 MB `.dynstr` in memory; the file's facts
/// in a plan, pages cold, 7.55 → 5.05 ms).
const CTOR_SCOPE: &str = "_ZN2at";
const CTOR_CLASS: &str = "14DynamicLibraryC";

/// The loader entry points `.dynstr` is searched for ([`ElfView::facts`]).
const LOADER_NAMES: [&str; 4] = ["dlopen", "dlmopen", CTOR_CLASS, "PyInit_"];

/// The `.dynstr` search's patterns, and whether the payload words' spellings are among them: the
/// loader entry points, then the spellings when one pass can find both, which it can when the
/// symbols' strings are this table (`same_table`) and no spelling touches an entry point.
fn dynstr_patterns(spellings: &[String], same_table: bool) -> (Vec<String>, bool) {
    let shared = same_table && search::disjoint(&LOADER_NAMES, spellings);
    let mut patterns: Vec<String> = LOADER_NAMES.iter().map(|n| n.to_string()).collect();
    if shared {
        patterns.extend(spellings.iter().cloned());
    }
    (patterns, shared)
}

/// The `.rodata` search's patterns: library names (`.so`) first, then the payload words'
/// spellings.
fn rodata_patterns(words: &[&str]) -> Vec<String> {
    let mut patterns: Vec<String> = vec![".so".to_string()];
    patterns.extend(
        search::case_variants(words)
            .into_iter()
            .filter(|v| v != ".so"),
    );
    patterns
}

/// A string table [`ElfView::facts`] searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchedTable {
    /// The dynamic string table (`.dynstr`), with the loader names' patterns.
    Dynstr,
    /// The read-only data (`.rodata*`), with the library-name and payload-word patterns.
    Rodata,
}

/// How many matches the search `facts` runs over such a table for `words` finds, with the same
/// pattern set and searcher (a `.dynstr` as that of a file with symbols); nothing else is done
/// with them. `bench/floor.rs --searches` runs it in place of the floor's read of those tables:
/// the least that any `plan` which finds dlopen literals and mentions must do.
pub fn search_table(table: SearchedTable, bytes: &[u8], words: &[&str]) -> usize {
    let patterns = match table {
        SearchedTable::Dynstr => dynstr_patterns(&search::case_variants(words), true).0,
        SearchedTable::Rodata => rodata_patterns(words),
    };
    search::searcher(&patterns).map_or(0, |ac| ac.find_iter(bytes).count())
}

impl<'a> ElfView<'a> {
    /// Read the facts. `words` are searched (ASCII case-insensitively) in read-only data in the
    /// same pass as the library-name literals; the strings holding them are returned as mentions.
    /// `map` is the file's shared memory map, when there is one: the symbol view then borrows the
    /// tables from it instead of copying them, and the searched read-only data is unmapped
    /// ([`Self::drop_mapped_rodata`]).
    pub fn facts(&self, words: &[&str], map: Option<&Arc<Mmap>>) -> Result<ElfFacts, ElfError> {
        let h = &self.header;
        let interp_ph = self
            .phdrs
            .iter()
            .find(|p| p.p_type == program_header::PT_INTERP);
        let interpreter = interp_ph
            .and_then(|p| file_range(self.bytes.len() as u64, p.p_offset, p.p_filesz))
            .and_then(|r| cstr_at(&self.bytes[r], 0).map(str::to_string));
        let elf_type = match h.e_type {
            header::ET_EXEC => ElfType::Executable,
            header::ET_DYN if interpreter.is_some() => ElfType::PieExecutable,
            header::ET_DYN => ElfType::SharedLibrary,
            header::ET_REL => ElfType::Relocatable,
            header::ET_CORE => ElfType::Core,
            _ => ElfType::Other,
        };

        let mut needed = Vec::new();
        let mut soname = None;
        let mut rpath: Option<Vec<String>> = None;
        let mut runpath: Option<Vec<String>> = None;
        let mut nodeflib = false;
        for d in &self.dynamic {
            let s = || {
                self.dynstr(d.d_val)
                    .map(str::to_string)
                    .ok_or(ElfError::BadString {
                        tag: dynamic::tag_to_str(d.d_tag),
                    })
            };
            match d.d_tag {
                dynamic::DT_NEEDED => needed.push(s()?),
                dynamic::DT_SONAME => soname = Some(s()?),
                dynamic::DT_RPATH => rpath
                    .get_or_insert_with(Vec::new)
                    .extend(split_path_list(&s()?)),
                dynamic::DT_RUNPATH => runpath
                    .get_or_insert_with(Vec::new)
                    .extend(split_path_list(&s()?)),
                dynamic::DT_FLAGS_1 => nodeflib |= d.d_val & dynamic::DF_1_NODEFLIB != 0,
                _ => {}
            }
        }

        let mut symbols = self.dynamic_symbols(map)?;
        let (loader_imports, python_extension) =
            self.loader_imports(&mut symbols, &search::case_variants(words));

        let sections = self.section_sizes();
        let (library_literals, mentions) = self.scan_rodata(words);
        if let Some(map) = map {
            self.drop_mapped_rodata(map);
        }
        let notes = self.dlopen_notes();
        let dynamic_symbols = SymbolCounts {
            defined: symbols.defined,
            undefined: symbols.undefined(),
        };
        Ok(ElfFacts {
            class: if self.ctx.container.is_big() { 64 } else { 32 },
            machine: header::machine_to_str(h.e_machine).to_string(),
            elf_type,
            interpreter,
            soname,
            needed,
            rpath,
            runpath,
            nodeflib,
            sections,
            loader_imports,
            library_literals,
            mentions,
            dlopen_notes: notes.entries,
            dlopen_note_problems: notes.problems,
            python_extension,
            dynamic_symbols,
            symbols,
            symbol_list: None,
        })
    }

    /// Bytes of the sections that matter for sizing, added up by kind.
    fn section_sizes(&self) -> SectionSizes {
        let mut sections = SectionSizes::default();
        for sh in &self.shdrs {
            let name = self.section_name(sh);
            let size = if sh.sh_type == section_header::SHT_NOBITS {
                0
            } else {
                sh.sh_size
            };
            // Sizes come from the file: saturate rather than wrap on hostile headers (found by the
            // `elf` fuzz target).
            let slot = match name {
                ".text" => &mut sections.text,
                ".nv_fatbin" => &mut sections.nv_fatbin,
                ".symtab" | ".strtab" => &mut sections.symtab,
                n if n.starts_with(".rodata") => &mut sections.rodata,
                n if n.starts_with(".debug_") || n.starts_with(".zdebug_") => &mut sections.debug,
                _ => continue,
            };
            *slot = slot.saturating_add(size);
        }
        sections
    }

    /// Unmap the pages of read-only data from this process once they have been searched: the
    /// ~28 MB of a torch tree's `.rodata` are most of the pages `plan` maps, and what a process
    /// still maps at exit the kernel tears down on one thread before the parent learns of the exit
    /// (3.7–4.9 ms of `plan`'s ~20 ms on torch 2.11, 1.9–2.5 ms with this). Dropping them here does
    /// that work on the reading threads instead: 41 interleaved runs each way, run twice,
    /// 22.8/23.0 -> 21.1/21.0 ms. Only whole pages inside the ranges are dropped; a later read
    /// refaults them from the page cache. Without section headers the ranges are the whole
    /// read-only segment, dynamic symbol tables included: those refault when the verdict reads them.
    fn drop_mapped_rodata(&self, map: &Mmap) {
        const PAGE: usize = 4096;
        for r in self.rodata_ranges() {
            let (start, end) = (r.start.next_multiple_of(PAGE), r.end / PAGE * PAGE);
            if end > start {
                // SAFETY: `map` is a read-only, private map of a file: MADV_DONTNEED only drops
                // page-table entries, and the next access maps the same file bytes again. An
                // error leaves the pages mapped, which is what happened before.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
    }

    /// The dynamic symbol table (found through DT_SYMTAB) and the dynamic string table.
    pub fn dynsym_table(&self) -> Option<(SymTable<'a>, &'a [u8])> {
        let range = self.dynsym_range().ok().flatten()?;
        Some((self.sym_table(range), &self.bytes[self.dynstr.clone()]))
    }

    fn sym_table(&self, range: Range<usize>) -> SymTable<'a> {
        SymTable::new(
            &self.bytes[range],
            self.ctx.container.is_big(),
            self.ctx.is_little_endian(),
        )
    }

    fn dynsym_range(&self) -> Result<Option<Range<usize>>, ElfError> {
        let Some(addr) = self.dyn_val(dynamic::DT_SYMTAB) else {
            return Ok(None);
        };
        let off = self.vaddr_to_offset(addr).ok_or(ElfError::Unmapped {
            tag: "DT_SYMTAB",
            addr,
        })?;
        let count = self.dynsym_count(off)?;
        let entsize = SymTable::entsize(self.ctx.container.is_big());
        count
            .checked_mul(entsize)
            .and_then(|n| file_range(self.bytes.len() as u64, off as u64, n as u64))
            .map(Some)
            .ok_or(ElfError::SymbolTablePastEnd { offset: off, count })
    }

    /// The dynamic symbols, their versions and hash table, found through the dynamic table as the
    /// loader finds them. `map` as in [`Self::facts`].
    pub fn dynamic_symbols(&self, map: Option<&Arc<Mmap>>) -> Result<DynSymbols, ElfError> {
        let Some(range) = self.dynsym_range()? else {
            return Ok(DynSymbols::default());
        };
        let is64 = self.ctx.container.is_big();
        let le = self.ctx.is_little_endian();
        let count = range.len() / SymTable::entsize(is64);
        let len = self.bytes.len() as u64;
        let keep = |r: Range<usize>| Bytes::keep(self.bytes, r, map);
        let versym = self
            .dyn_val(dynamic::DT_VERSYM)
            .and_then(|a| self.vaddr_to_offset(a))
            .and_then(|off| file_range(len, off as u64, 2 * count as u64))
            .map(keep);
        let hash = if let Some(off) = self
            .dyn_val(dynamic::DT_GNU_HASH)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            self.gnu_hash_size(off, count)
                .and_then(|n| file_range(len, off as u64, n as u64))
                .map(|r| (HashKind::Gnu, keep(r)))
        } else if let Some(off) = self
            .dyn_val(dynamic::DT_HASH)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            let le32 = |o| read_u32(self.bytes, o, le).map(|v| v as u64);
            match (le32(off), le32(off + 4)) {
                (Some(nb), Some(nc)) => file_range(len, off as u64, 8 + 4 * (nb + nc))
                    .map(|r| (HashKind::Sysv, keep(r))),
                _ => None,
            }
        } else {
            None
        };
        Ok(DynSymbols::new(
            keep(range),
            keep(self.dynstr.clone()),
            versym,
            hash,
            self.version_names(),
            is64,
            le,
        ))
    }

    /// Loader entry points this file imports, and whether it exports a `PyInit_*` function. The
    /// string table is searched once for the few names that matter; only symbols pointing at a
    /// hit are decoded. The same pass looks for `words` (their case spellings, as
    /// [`DynSymbols::containing`] is asked for them next) and leaves their hits with `symbols`:
    /// a big library's string table is megabytes, and a second pass over it cost as much again.
    fn loader_imports(&self, symbols: &mut DynSymbols, words: &[String]) -> (Vec<String>, bool) {
        let text = &self.bytes[self.dynstr.clone()];
        // The symbol view's strings are this `.dynstr` (mapped or copied) whenever the file has a
        // symbol table, and empty when it has none (`dynamic_symbols`): equal lengths are the same
        // table. Comparing the bytes instead cost 0.4-0.7 ms on libtorch_cpu's 5.5 MB.
        let same_table = symbols.strtab().len() == text.len();
        debug_assert!(!same_table || symbols.strtab() == text);
        let (patterns, shared) = dynstr_patterns(words, same_table);
        let ac = search::searcher(&patterns).expect("static patterns and words");
        let mut hits: Vec<(u32, usize)> = Vec::new();
        let mut word_hits = Vec::new();
        for m in ac.find_iter(text) {
            let p = m.pattern().as_usize();
            if p >= LOADER_NAMES.len() {
                word_hits.push(m);
                continue;
            }
            let Some(start) = name_start(text, &m) else {
                continue;
            };
            let at_start = start == 0 || text[start - 1] == 0;
            let exact = text.get(m.end()) == Some(&0);
            if at_start && (p >= 2 || exact) {
                hits.push((start as u32, p));
            }
        }
        if shared {
            symbols.remember(words, symbols::string_hits(text, word_hits.into_iter()));
        }
        let mut imports: Vec<String> = Vec::new();
        let mut python = false;
        if hits.is_empty() {
            return (imports, python);
        }
        hits.sort_unstable();
        let Some((table, _)) = self.dynsym_table() else {
            return (imports, python);
        };
        for s in table.iter() {
            let Ok(i) = hits.binary_search_by_key(&s.name, |h| h.0) else {
                continue;
            };
            let label = match hits[i].1 {
                3 if s.defined() && s.kind() == sym::STT_FUNC => {
                    python = true;
                    continue;
                }
                0 if !s.defined() => "dlopen",
                1 if !s.defined() => "dlmopen",
                2 if !s.defined() => "at::DynamicLibrary::DynamicLibrary",
                _ => continue,
            };
            if !imports.iter().any(|x| x == label) {
                imports.push(label.to_string());
            }
        }
        imports.sort();
        (imports, python)
    }

    /// Size of a GNU hash table: header, bloom filter, buckets, and one chain word per hashed symbol.
    fn gnu_hash_size(&self, off: usize, count: usize) -> Option<usize> {
        let le = self.ctx.is_little_endian();
        let nbuckets = read_u32(self.bytes, off, le)? as usize;
        let symoffset = read_u32(self.bytes, off + 4, le)? as usize;
        let bloom_size = read_u32(self.bytes, off + 8, le)? as usize;
        let word = if self.ctx.container.is_big() { 8 } else { 4 };
        16usize
            .checked_add(bloom_size.checked_mul(word)?)?
            .checked_add(nbuckets.checked_mul(4)?)?
            .checked_add(count.saturating_sub(symoffset).checked_mul(4)?)
    }

    /// Number of dynamic symbols: from the section header when present, else from the hash tables
    /// (what a loader has to do with a section-stripped file).
    fn dynsym_count(&self, off: usize) -> Result<usize, ElfError> {
        let entsize = SymTable::entsize(self.ctx.container.is_big()) as u64;
        if let Some(sh) = self
            .shdrs
            .iter()
            .find(|s| s.sh_type == section_header::SHT_DYNSYM && s.sh_offset as usize == off)
        {
            return Ok((sh.sh_size / entsize) as usize);
        }
        Ok(self.hash_symbol_count()?.unwrap_or(0))
    }

    /// Number of dynamic symbols as the hash tables give it (DT_HASH's `nchain`, else the end of
    /// DT_GNU_HASH's last chain); `None` without a hash table.
    ///
    /// Kept hand-written although `object`'s `symbol_table_length` is faster (`bench/symbols.rs`,
    /// `hash-count`: 0.01 against 0.10 ms for torch 2.11's 13 files, parse included): it answers
    /// `None` for a valid GNU table that hashes no symbol (torch's `libtorch_global_deps.so`: symbol
    /// base 1, every bucket empty; the count is 1) and for a symbol base of 0, so a section-stripped
    /// library that exports nothing would lose its dynamic symbols. The count is read only for
    /// files without section headers, 5 µs a file.
    pub fn hash_symbol_count(&self) -> Result<Option<usize>, ElfError> {
        let le = self.ctx.is_little_endian();
        if let Some(hash) = self
            .dyn_val(dynamic::DT_HASH)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            return read_u32(self.bytes, hash + 4, le)
                .map(|n| Some(n as usize))
                .ok_or(ElfError::HashTruncated);
        }
        if let Some(gh) = self
            .dyn_val(dynamic::DT_GNU_HASH)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            return self
                .gnu_hash_count(gh)
                .map(Some)
                .ok_or(ElfError::GnuHashBroken);
        }
        Ok(None)
    }

    fn gnu_hash_count(&self, off: usize) -> Option<usize> {
        let le = self.ctx.is_little_endian();
        let b = self.bytes;
        let nbuckets = read_u32(b, off, le)? as usize;
        let symoffset = read_u32(b, off + 4, le)? as usize;
        let bloom_size = read_u32(b, off + 8, le)? as usize;
        let word = if self.ctx.container.is_big() { 8 } else { 4 };
        let buckets = off
            .checked_add(16)?
            .checked_add(bloom_size.checked_mul(word)?)?;
        let chains = buckets.checked_add(nbuckets.checked_mul(4)?)?;
        let mut max = 0usize;
        for i in 0..nbuckets {
            max = max.max(read_u32(b, buckets + 4 * i, le)? as usize);
        }
        if max < symoffset {
            return Some(symoffset);
        }
        let mut idx = max;
        // Each chain ends with an entry whose low bit is set; bounded by the file size.
        loop {
            let v = read_u32(
                b,
                chains.checked_add((idx - symoffset).checked_mul(4)?)?,
                le,
            )?;
            if v & 1 == 1 {
                return Some(idx + 1);
            }
            idx += 1;
        }
    }

    /// Version index → name, from both DT_VERDEF (defined) and DT_VERNEED (required) chains. The
    /// chains are found through the dynamic table, as ld.so finds them: `object`'s `VersionTable`
    /// reads them only from section headers, which a section-stripped library lacks (as it reads
    /// `.dynsym` itself: its `ElfFile::parse` leaves DT_SYMTAB without sections as a TODO). That
    /// costs speed: listing every dynamic symbol with its version took `object` 0.66–0.87× of this
    /// reader's time per run (`bench/symbols.rs`, `dynsym`). The records themselves are decoded by
    /// `object`'s ELF types.
    fn version_names(&self) -> Vec<Option<String>> {
        use object::elf::{Verdaux, Verdef, Vernaux, Verneed};
        let mut out: Vec<Option<String>> = Vec::new();
        // A symbol's version index has 15 bits (`.gnu.version` masks the hidden bit): larger ones
        // can never be asked for.
        let mut insert = |index: u16, name: &str| {
            let i = index as usize;
            if i > 0x7fff {
                return;
            }
            if out.len() <= i {
                out.resize(i + 1, None);
            }
            out[i] = Some(name.to_string());
        };
        let e = self.endian();
        let b = self.bytes;
        let strtab = &b[self.dynstr.clone()];
        if let Some(mut off) = self
            .dyn_val(dynamic::DT_VERDEF)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            let num = self.dyn_val(dynamic::DT_VERDEFNUM).unwrap_or(0).min(65535);
            for _ in 0..num {
                let Some(def) = record::<Verdef<Endianness>>(b, off) else {
                    break;
                };
                if def.vd_cnt.get(e) > 0
                    && let Some(name) =
                        record::<Verdaux<Endianness>>(b, off + def.vd_aux.get(e) as usize)
                            .and_then(|aux| cstr_at(strtab, aux.vda_name.get(e) as usize))
                {
                    insert(def.vd_ndx.get(e).0, name);
                }
                match def.vd_next.get(e) {
                    0 => break,
                    next => off += next as usize,
                }
            }
        }
        if let Some(mut off) = self
            .dyn_val(dynamic::DT_VERNEED)
            .and_then(|a| self.vaddr_to_offset(a))
        {
            let num = self.dyn_val(dynamic::DT_VERNEEDNUM).unwrap_or(0).min(65535);
            for _ in 0..num {
                let Some(need) = record::<Verneed<Endianness>>(b, off) else {
                    break;
                };
                let mut a = off + need.vn_aux.get(e) as usize;
                for _ in 0..need.vn_cnt.get(e) {
                    let Some(aux) = record::<Vernaux<Endianness>>(b, a) else {
                        break;
                    };
                    if let Some(n) = cstr_at(strtab, aux.vna_name.get(e) as usize) {
                        insert(aux.vna_other(e).index().0, n);
                    }
                    match aux.vna_next.get(e) {
                        0 => break,
                        next => a += next as usize,
                    }
                }
                match need.vn_next.get(e) {
                    0 => break,
                    next => off += next as usize,
                }
            }
        }
        out
    }

    fn endian(&self) -> Endianness {
        if self.ctx.is_little_endian() {
            Endianness::Little
        } else {
            Endianness::Big
        }
    }

    /// One pass over read-only data for library-name literals (`lib*.so[.N…]`, optionally with a
    /// directory, standing as whole C strings) and for the strings that contain any of `words`.
    pub fn scan_rodata(&self, words: &[&str]) -> (Vec<LibLiteral>, Mentions) {
        let mut literals: Vec<LibLiteral> = Vec::new();
        let mut mentions = Mentions::default();
        let Some(ac) = search::searcher(&rodata_patterns(words)) else {
            return (literals, mentions);
        };
        for range in self.rodata_ranges() {
            let data = &self.bytes[range.clone()];
            let mut last_mention_start = usize::MAX;
            for m in ac.find_iter(data) {
                let pos = m.start();
                if m.pattern().as_usize() > 0 {
                    let start = data[..pos]
                        .iter()
                        .rposition(|&b| b == 0)
                        .map(|i| i + 1)
                        .unwrap_or(0);
                    if start != last_mention_start {
                        last_mention_start = start;
                        mentions.count += 1;
                        if mentions.samples.len() < MENTION_SAMPLES {
                            let end = memchr::memchr(0, &data[pos..])
                                .map(|e| pos + e)
                                .unwrap_or(data.len());
                            let text: String = String::from_utf8_lossy(&data[start..end])
                                .trim()
                                .chars()
                                .take(100)
                                .collect();
                            if !mentions.samples.contains(&text) {
                                mentions.samples.push(text);
                            }
                        }
                    }
                    continue;
                }
                let Some((start, end)) = literal_bounds(data, pos) else {
                    continue;
                };
                let Ok(full) = std::str::from_utf8(&data[start..end]) else {
                    continue;
                };
                let base = full.rsplit('/').next().unwrap_or(full);
                if !is_library_name(base) {
                    continue;
                }
                if literals
                    .iter()
                    .any(|l| l.full.as_deref().unwrap_or(&l.name) == full)
                {
                    continue;
                }
                literals.push(LibLiteral {
                    name: base.to_string(),
                    full: (base != full).then(|| full.to_string()),
                    offset: (range.start + start) as u64,
                    neighbours: neighbours(data, start, end),
                });
            }
        }
        (literals, mentions)
    }
}

/// Where the name a loader-entry pattern matched in `text` begins: at the match, or for
/// [`CTOR_CLASS`] at the `_ZN2at` before it, when that is there and `1` or `2` follows the class;
/// `None` when it is not a constructor's name.
fn name_start(text: &[u8], m: &aho_corasick::Match) -> Option<usize> {
    if &text[m.range()] != CTOR_CLASS.as_bytes() {
        return Some(m.start());
    }
    let start = m.start().checked_sub(CTOR_SCOPE.len())?;
    let scoped = &text[start..m.start()] == CTOR_SCOPE.as_bytes();
    (scoped && matches!(text.get(m.end()), Some(b'1' | b'2'))).then_some(start)
}

/// Given the position of ".so" in `data`, return the bounds of the whole C string around it if that
/// string ends with `.so` plus optional numeric version components.
fn literal_bounds(data: &[u8], pos: usize) -> Option<(usize, usize)> {
    let mut end = pos + 3;
    while end < data.len() && data[end] == b'.' {
        let digits = data[end + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        end += 1 + digits;
    }
    if end < data.len() && data[end] != 0 {
        return None;
    }
    let mut start = pos;
    while start > 0 && data[start - 1] != 0 && pos - start < MAX_LITERAL {
        start -= 1;
    }
    if start > 0 && data[start - 1] != 0 {
        return None;
    }
    Some((start, end))
}

/// `lib` + name characters + `.so` + optional `.N` components.
pub fn is_library_name(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("lib") else {
        return false;
    };
    let Some(i) = rest.find(".so") else {
        return false;
    };
    let (stem, tail) = (&rest[..i], &rest[i + 3..]);
    !stem.is_empty()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+-.".contains(&b))
        && tail
            .split('.')
            .skip(1)
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && (tail.is_empty() || tail.starts_with('.'))
}

fn neighbours(data: &[u8], start: usize, end: usize) -> Vec<String> {
    let lo = start.saturating_sub(NEIGHBOUR_WINDOW);
    let hi = (end + NEIGHBOUR_WINDOW).min(data.len());
    let mut out = Vec::new();
    for chunk in data[lo..hi].split(|&b| b == 0) {
        if chunk.len() < 3 || chunk.len() > 200 {
            continue;
        }
        let first = chunk[0];
        if !(first.is_ascii_alphabetic() || first == b'_') {
            continue;
        }
        if !chunk
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            continue;
        }
        let s = String::from_utf8_lossy(chunk).into_owned();
        if !out.contains(&s) {
            out.push(s);
        }
        if out.len() >= 32 {
            break;
        }
    }
    out
}

fn split_path_list(s: &str) -> Vec<String> {
    s.split(':')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The fixed-size ELF record (an `object::elf` type) at `off`; `None` when it runs past the end.
fn record<T: object::pod::Pod>(b: &[u8], off: usize) -> Option<&T> {
    object::pod::from_bytes(b.get(off..)?).ok().map(|(t, _)| t)
}

pub(crate) fn read_u32(b: &[u8], off: usize, le: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(s)
    } else {
        u32::from_be_bytes(s)
    })
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn library_name_shapes() {
        for ok in [
            "libc.so.6",
            "libtorch_cuda_linalg.so",
            "libnvidia-ml.so.1",
            "libstdc++.so.6",
            "libmkl_core.so.2",
        ] {
            assert!(is_library_name(ok), "{ok}");
        }
        for no in [
            "libfoo.so.%d",
            "foo.so",
            "lib.so",
            "libfoo.so.",
            "libfoo.sox",
            "libfoo so",
        ] {
            assert!(!is_library_name(no), "{no}");
        }
    }

    #[test]
    fn literal_must_be_a_whole_string() {
        let data = b"\0libfoo.so.1\0error loading libbar.so\0libbaz.so.x\0";
        let pos = memchr::memmem::find(data, b".so").unwrap();
        assert_eq!(literal_bounds(data, pos), Some((1, 12)));
        let pos2 = memchr::memmem::find(&data[13..], b".so").unwrap() + 13;
        let (s, e) = literal_bounds(data, pos2).unwrap();
        assert!(!is_library_name(std::str::from_utf8(&data[s..e]).unwrap()));
        let pos3 = memchr::memmem::find(&data[38..], b".so").unwrap() + 38;
        assert_eq!(literal_bounds(data, pos3), None);
    }

    /// `at::DynamicLibrary`'s complete and base constructors are loader entry points when a file
    /// imports them, whatever their arguments. Its destructor, an allocating constructor (`C3`),
    /// the class under another scope, and a constructor the file defines itself are not.
    #[test]
    fn dynamic_library_constructors_are_loader_imports() {
        let imported =
            |name: &str| format!("extern void {name}(void);\nvoid f(void) {{ {name}(); }}\n");
        let cases = [
            (imported("_ZN2at14DynamicLibraryC1EPKcS2_b"), true),
            (imported("_ZN2at14DynamicLibraryC2EPKc"), true),
            (imported("_ZN2at14DynamicLibraryD1Ev"), false),
            (imported("_ZN2at14DynamicLibraryC3Ev"), false),
            (imported("_ZN3foo2at14DynamicLibraryC1Ev"), false),
            (
                "void _ZN2at14DynamicLibraryC1Ev(void) {}\n".to_string(),
                false,
            ),
        ];
        for (code, loader) in cases {
            let mut s = crate::analysis::testkit::Scratch::new();
            s.lib("libuser.so", &code, &[]);
            let bytes = std::fs::read(s.tree().join("libuser.so")).unwrap();
            let facts = ElfView::parse(&bytes).unwrap().facts(&[], None).unwrap();
            let found = facts.loader_imports == ["at::DynamicLibrary::DynamicLibrary"];
            assert_eq!(found, loader, "{code}");
        }
    }

    /// The refusals print as they did when they were strings (tests and scripts grep for them).
    #[test]
    fn refusals_keep_their_messages() {
        assert_eq!(
            ElfView::parse(b"hello world, not an elf")
                .err()
                .unwrap()
                .to_string(),
            "not an ELF file"
        );
        let mut h = vec![0u8; 64];
        h[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        h[0x20..0x28].copy_from_slice(&(1u64 << 40).to_le_bytes()); // e_phoff
        h[0x34..0x36].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        h[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        h[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let e = ElfView::parse(&h).err().unwrap();
        assert!(
            matches!(
                e,
                ElfError::ProgramHeadersPastEnd {
                    count: 1,
                    len: 64,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "truncated: program headers at 0x10000000000 (1 entries) run past the end of the file (64 bytes)"
        );
    }

    /// What the floor's `--searches` counts: loader entry points, library names and the words'
    /// spellings, each match once; the pacer's bytes are never a match.
    #[test]
    fn table_searches_count_entry_points_library_names_and_words() {
        let dynstr = b"\0dlopen\0_ZN2at14DynamicLibraryC1Ev\0magma_init\0PyInit_x\0\x01\x02\x03\0";
        assert_eq!(search_table(SearchedTable::Dynstr, dynstr, &["magma"]), 4);
        assert_eq!(search_table(SearchedTable::Dynstr, dynstr, &[]), 3);
        let rodata = b"libtorch_cuda_linalg.so\0built with MAGMA and Magma\0dlmopen\0";
        assert_eq!(search_table(SearchedTable::Rodata, rodata, &["magma"]), 3);
        assert_eq!(search_table(SearchedTable::Rodata, rodata, &[]), 1);
    }

    #[test]
    fn not_elf_is_rejected() {
        assert!(ElfView::parse(b"hello world, not an elf").is_err());
        assert!(ElfView::parse(b"\x7fELF\x02\x01").is_err());
    }
}
