//! Dynamic symbols as a lazy view over the file's own tables.
//!
//! Nothing is decoded per symbol up front: a 450 MB library has ~80k dynamic symbols, and on a
//! virtual machine where a page fault costs several microseconds, materialising them (names,
//! entries, an index) cost more than everything else the reader does. Instead the view keeps the
//! raw `.dynsym`, `.dynstr`, `.gnu.version` and hash-table bytes (shared with the file's memory map
//! for directories, copied for archive members) and answers questions the way ld.so does:
//! `defines(name)` walks the file's GNU (or SysV) hash table.

use std::ops::{Deref, Range};
use std::sync::Arc;

use goblin::elf::sym;
use memmap2::Mmap;
use object::Endianness;
use object::elf::{Sym32, Sym64};
use serde::Serialize;

/// Bytes that outlive the parse: a range of a shared memory map, or an owned copy.
#[derive(Clone)]
pub enum Bytes {
    /// A range of the file's shared memory map.
    Map(Arc<Mmap>, Range<usize>),
    /// A copy of the bytes, for a file read into a buffer.
    Owned(Arc<[u8]>),
}

impl Bytes {
    /// No bytes (an owned empty slice).
    pub fn empty() -> Self {
        Bytes::Owned(Arc::from(&[][..]))
    }

    /// Keep `range` of `file`: by reference into `map` when the file is mapped, else by copy.
    pub fn keep(file: &[u8], range: Range<usize>, map: Option<&Arc<Mmap>>) -> Self {
        match map {
            Some(m) => Bytes::Map(m.clone(), range),
            None => Bytes::Owned(Arc::from(&file[range])),
        }
    }
}

/// A symbol name to look up in the hash tables of several files: its GNU and SysV hashes are
/// computed on first use and kept. The loader contract asks up to a dozen files about each of
/// thousands of names; hashing each name once per file was most of
/// [`DynSymbols::defines`]'s time.
pub struct Lookup<'a> {
    name: &'a str,
    gnu: std::cell::OnceCell<u32>,
    sysv: std::cell::OnceCell<u32>,
}

impl<'a> Lookup<'a> {
    /// A lookup of `name`; its hashes are computed when first asked for.
    pub fn new(name: &'a str) -> Self {
        Lookup {
            name,
            gnu: std::cell::OnceCell::new(),
            sysv: std::cell::OnceCell::new(),
        }
    }

    fn gnu(&self) -> u32 {
        *self
            .gnu
            .get_or_init(|| object::elf::gnu_hash(self.name.as_bytes()))
    }

    fn sysv(&self) -> u32 {
        *self
            .sysv
            .get_or_init(|| object::elf::hash(self.name.as_bytes()))
    }
}

/// Prints of the names a symbol table defines, to turn most other names away before a lookup.
/// A print mixes a name's length with three eight-byte windows of it (start, middle, end): it
/// costs finding the name's end and three loads, where the GNU hash that
/// [`DynSymbols::defines_lookup`] needs costs a multiply per byte. Equal names have equal prints,
/// so a name whose print is absent is not defined; a present one is looked up. The loader
/// contract's required exports ask one library about the ~11.5k imports of torch 2.11's core
/// files; hashing each of them was a third of that question's time and checking them as UTF-8
/// another seventh.
pub struct DefinedPrints<'a> {
    symbols: &'a DynSymbols,
    /// Open addressing over a power-of-two table; 0 marks an empty slot (no print is 0).
    slots: Vec<u64>,
}

impl<'a> DefinedPrints<'a> {
    /// The prints of every defined symbol of `symbols`.
    pub fn new(symbols: &'a DynSymbols) -> Self {
        let size = (2 * symbols.defined + 1).next_power_of_two().max(16);
        let mut slots = vec![0u64; size];
        let raw = symbols.raw();
        // Every defined entry, whether or not the hash table lists it: a superset of what
        // `defines_lookup` can find, which is all a prefilter needs.
        for s in raw.iter().skip(1).filter(|s| s.defined()) {
            if let Some(name) = super::cbytes_at(&symbols.strtab, s.name as usize) {
                let p = print(name);
                let i = slot_of(&slots, p);
                slots[i] = p;
            }
        }
        DefinedPrints { symbols, slots }
    }

    /// False when the table surely does not define `name`.
    fn may_define(&self, name: &[u8]) -> bool {
        let p = print(name);
        self.slots[slot_of(&self.slots, p)] == p
    }

    fn defines(&self, name: &str) -> bool {
        self.symbols.defines_lookup(&Lookup::new(name))
    }
}

/// How many names ahead [`DynSymbols::imports_defined_by`] asks for: the names are cold (spread
/// over megabytes of string table read long before), and waiting for each in turn left the
/// question bound by memory latency.
const PREFETCH_AHEAD: usize = 16;

/// Ask the CPU to start loading the cache line at `tab[off]` (no effect past the end, or on
/// other architectures).
#[inline]
fn prefetch(tab: &[u8], off: u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = tab.get(off as usize) {
        // SAFETY: a prefetch is a hint that never faults; the address is inside `tab`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (b as *const u8).cast(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (tab, off);
}

/// A name's print: its length and its first, middle and last eight bytes (zero-padded when
/// shorter), mixed by multiply and shift; never 0.
fn print(name: &[u8]) -> u64 {
    let n = name.len();
    let word = |at: usize| {
        let mut w = [0u8; 8];
        let end = (at + 8).min(n);
        w[..end - at].copy_from_slice(&name[at..end]);
        u64::from_le_bytes(w)
    };
    let mut h = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for w in [word(0), word(n / 2), word(n.saturating_sub(8))] {
        h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 32;
    }
    h | 1
}

/// The slot of `print` in `slots` (a power of two long, never full): where it is, or the empty
/// slot where it would go.
fn slot_of(slots: &[u64], print: u64) -> usize {
    let mask = slots.len() - 1;
    let mut i = (print >> 7) as usize & mask;
    while slots[i] != 0 && slots[i] != print {
        i = (i + 1) & mask;
    }
    i
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m, r) => &m[r.clone()],
            Bytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({})", self.len())
    }
}

/// One symbol-table entry, decoded from either ELF class.
#[derive(Debug, Clone, Copy)]
pub struct RawSym {
    /// `st_name`: offset of the name in the string table.
    pub name: u32,
    /// `st_info`: the symbol's type (low 4 bits) and binding (high 4 bits).
    pub info: u8,
    /// `st_shndx`: the section it is defined in, or SHN_UNDEF for an import.
    pub shndx: u16,
    /// `st_value`: its address.
    pub value: u64,
    /// `st_size`: its size in bytes.
    pub size: u64,
}

impl RawSym {
    /// The symbol type (`STT_*`), the low 4 bits of `st_info`.
    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }
    /// The binding (`STB_*`), the high 4 bits of `st_info`.
    pub fn bind(&self) -> u8 {
        self.info >> 4
    }
    /// Whether the file defines it (`st_shndx` is not SHN_UNDEF).
    pub fn defined(&self) -> bool {
        self.shndx != object::elf::SHN_UNDEF.0
    }

    fn from_object<S: object::read::elf::Sym<Endian = Endianness>>(s: &S, e: Endianness) -> Self {
        RawSym {
            name: s.st_name(e),
            info: s.st_info().0,
            shndx: s.st_shndx(e).0,
            value: s.st_value(e).into(),
            size: s.st_size(e).into(),
        }
    }
}

/// A symbol table (`.dynsym` or `.symtab`) over borrowed bytes, its entries decoded by `object`'s
/// ELF types (`Sym32`/`Sym64`, any byte order, no alignment needed). They replaced fixed-offset
/// reads: with them, listing imports went from 0.40–0.47× to 0.75–1.02× of `object`'s own time,
/// and the `.symtab` walk from 0.92–0.95× to 1.23–1.29× (`bench/symbols.rs`, per-run ratios
/// object / splitpkg on torch 2.11's tree, 2 busy cores).
#[derive(Clone, Copy)]
pub struct SymTable<'a> {
    entries: Entries<'a>,
    endian: Endianness,
}

#[derive(Clone, Copy)]
enum Entries<'a> {
    Elf32(&'a [Sym32<Endianness>]),
    Elf64(&'a [Sym64<Endianness>]),
}

impl<'a> SymTable<'a> {
    /// The whole entries in `bytes` (a trailing partial entry is not one).
    pub fn new(bytes: &'a [u8], is64: bool, le: bool) -> Self {
        let endian = if le {
            Endianness::Little
        } else {
            Endianness::Big
        };
        let n = bytes.len() / Self::entsize(is64);
        // Cannot fail: the count fits the bytes and the entry types have alignment 1.
        let entries = if is64 {
            Entries::Elf64(
                object::pod::slice_from_bytes(bytes, n)
                    .map(|t| t.0)
                    .unwrap_or_default(),
            )
        } else {
            Entries::Elf32(
                object::pod::slice_from_bytes(bytes, n)
                    .map(|t| t.0)
                    .unwrap_or_default(),
            )
        };
        SymTable { entries, endian }
    }

    /// The size of one symbol table entry for the class (16 bytes for 32-bit, 24 for 64-bit).
    pub fn entsize(is64: bool) -> usize {
        if is64 {
            std::mem::size_of::<Sym64<Endianness>>()
        } else {
            std::mem::size_of::<Sym32<Endianness>>()
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        match self.entries {
            Entries::Elf32(t) => t.len(),
            Entries::Elf64(t) => t.len(),
        }
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`, decoded to the host's byte order; None past the end.
    pub fn get(&self, i: usize) -> Option<RawSym> {
        match self.entries {
            Entries::Elf32(t) => t.get(i).map(|s| RawSym::from_object(s, self.endian)),
            Entries::Elf64(t) => t.get(i).map(|s| RawSym::from_object(s, self.endian)),
        }
    }

    /// The entries before `mid` and from `mid` on (`mid` past the end: all, and none).
    pub fn split_at(self, mid: usize) -> (Self, Self) {
        let part = |entries| SymTable {
            entries,
            endian: self.endian,
        };
        match self.entries {
            Entries::Elf32(t) => {
                let (a, b) = t.split_at(mid.min(t.len()));
                (part(Entries::Elf32(a)), part(Entries::Elf32(b)))
            }
            Entries::Elf64(t) => {
                let (a, b) = t.split_at(mid.min(t.len()));
                (part(Entries::Elf64(a)), part(Entries::Elf64(b)))
            }
        }
    }

    /// Every entry in order, decoded to the host's byte order.
    pub fn iter(self) -> impl Iterator<Item = RawSym> + 'a {
        let e = self.endian;
        let (t32, t64) = match self.entries {
            Entries::Elf32(t) => (t, &[][..]),
            Entries::Elf64(t) => (&[][..], t),
        };
        t32.iter()
            .map(move |s| RawSym::from_object(s, e))
            .chain(t64.iter().map(move |s| RawSym::from_object(s, e)))
    }
}

/// Which hash table a file's dynamic symbols are looked up through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    /// DT_GNU_HASH.
    Gnu,
    /// DT_HASH (System V).
    Sysv,
}

/// A decoded dynamic symbol.
#[derive(Debug, Clone, Copy)]
pub struct Sym<'a> {
    /// Its name from the dynamic string table (never empty).
    pub name: &'a str,
    /// `st_size`: its size in bytes.
    pub size: u64,
    /// The symbol type (`STT_*`).
    pub kind: u8,
    /// The binding (`STB_*`).
    pub bind: u8,
    /// Whether the file defines it (an export) rather than imports it.
    pub defined: bool,
    /// Its version name (from `.gnu.version`), when it has one other than the base or local
    /// version.
    pub version: Option<&'a str>,
    /// The version is hidden (bit 15 of its `.gnu.version` entry): only a request for that exact
    /// version binds to it.
    pub hidden_version: bool,
}

/// A dynamic symbol as written to JSON (`inspect --symbols`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct SymbolRecord {
    /// The symbol's name.
    pub name: String,
    /// Its version name, when it has one other than the base or local version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether the file defines it (an export) rather than imports it.
    pub defined: bool,
    /// Its size in bytes (`st_size`).
    pub size: u64,
    /// Its type in lower case (`func`, `object`, …).
    pub kind: String,
    /// Its binding in lower case (`global`, `weak`, …).
    pub bind: String,
}

/// A file's dynamic symbol table with its string, version and hash tables, kept beyond the parse to
/// answer which names it defines and imports.
#[derive(Debug, Clone)]
pub struct DynSymbols {
    table: Bytes,
    strtab: Bytes,
    versym: Option<Bytes>,
    hash: Option<(HashKind, Bytes)>,
    /// Version names by version index (at most 0x7fff), as `object`'s `VersionTable` keeps them:
    /// a hash map here cost a fifth of listing every symbol with its version (`bench/symbols.rs`).
    versions: Vec<Option<String>>,
    is64: bool,
    le: bool,
    /// How many entries are defined (exports), the null entry 0 not counted.
    pub defined: usize,
    /// Indices of the imported (undefined, named) entries, found in the one pass that counts them:
    /// the contract asks for imports of every core file, and 90 % of a big library's entries are
    /// exports that would otherwise be walked again.
    imports: Vec<u32>,
    /// Where some words occur in the string table, found by the pass that reads it for the loader
    /// entry points ([`Self::remember`]): [`Self::containing`] asks for the same words next.
    found: Option<NeedleHits>,
}

/// Hits of a set of needles in the string table: (string start, hit position), in table order.
#[derive(Debug, Clone)]
struct NeedleHits {
    /// The needles, sorted, each once.
    needles: Vec<String>,
    hits: Vec<(usize, usize)>,
}

impl Default for DynSymbols {
    fn default() -> Self {
        DynSymbols {
            table: Bytes::empty(),
            strtab: Bytes::empty(),
            versym: None,
            hash: None,
            versions: Vec::new(),
            is64: true,
            le: true,
            defined: 0,
            imports: Vec::new(),
            found: None,
        }
    }
}

impl DynSymbols {
    pub(crate) fn new(
        table: Bytes,
        strtab: Bytes,
        versym: Option<Bytes>,
        hash: Option<(HashKind, Bytes)>,
        versions: Vec<Option<String>>,
        is64: bool,
        le: bool,
    ) -> Self {
        let mut defined = 0;
        let mut imports = Vec::new();
        for (i, s) in SymTable::new(&table, is64, le).iter().enumerate().skip(1) {
            if s.defined() {
                defined += 1;
            } else if s.name != 0 {
                imports.push(i as u32);
            }
        }
        DynSymbols {
            table,
            strtab,
            versym,
            hash,
            versions,
            is64,
            le,
            defined,
            imports,
            found: None,
        }
    }

    /// Keep where `needles` occur in the string table (hits as [`string_hits`] gives them), found
    /// by a pass over the table that searched for them among other names.
    pub(crate) fn remember(&mut self, needles: &[String], hits: Vec<(usize, usize)>) {
        self.found = Some(NeedleHits {
            needles: needle_set(needles),
            hits,
        });
    }

    /// The string table's bytes.
    pub(crate) fn strtab(&self) -> &[u8] {
        &self.strtab
    }

    /// Number of imported (undefined, named) symbols.
    pub fn undefined(&self) -> usize {
        self.imports.len()
    }

    fn raw(&self) -> SymTable<'_> {
        SymTable::new(&self.table, self.is64, self.le)
    }

    /// The number of entries, not counting the null entry 0.
    pub fn len(&self) -> usize {
        self.raw().len().saturating_sub(1)
    }

    /// Whether the table has no entries besides the null one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name at a string-table offset, if it is terminated and valid UTF-8.
    pub fn name_at(&self, off: u32) -> Option<&str> {
        super::cstr_at(&self.strtab, off as usize)
    }

    fn decode(&self, i: usize, s: RawSym) -> Option<Sym<'_>> {
        let name = self.name_at(s.name)?;
        if name.is_empty() {
            return None;
        }
        let (ver, hidden) = self
            .versym
            .as_ref()
            .and_then(|v| v.get(2 * i..2 * i + 2))
            .map(|b| {
                if self.le {
                    u16::from_le_bytes([b[0], b[1]])
                } else {
                    u16::from_be_bytes([b[0], b[1]])
                }
            })
            .map(|v| (v & 0x7fff, v & 0x8000 != 0))
            .unwrap_or((0, false));
        Some(Sym {
            name,
            size: s.size,
            kind: s.kind(),
            bind: s.bind(),
            defined: s.defined(),
            version: if ver > 1 {
                self.versions.get(ver as usize).and_then(Option::as_deref)
            } else {
                None
            },
            hidden_version: hidden,
        })
    }

    /// Every named entry, decoded with its version (entry 0 and nameless ones skipped).
    pub fn iter(&self) -> impl Iterator<Item = Sym<'_>> {
        self.raw()
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(move |(i, s)| self.decode(i, s))
    }

    /// Names of exported symbols. Filters on the raw entry first, so nothing else is decoded.
    pub fn defined_names(&self) -> impl Iterator<Item = &str> {
        self.raw()
            .iter()
            .skip(1)
            .filter(|s| s.defined())
            .filter_map(|s| self.name_at(s.name))
            .filter(|n| !n.is_empty())
    }

    /// Names of imported symbols, with their binding (`STB_WEAK` imports may stay unresolved).
    pub fn undefined_names(&self) -> impl Iterator<Item = (&str, u8)> {
        let raw = self.raw();
        self.imports
            .iter()
            .filter_map(move |&i| raw.get(i as usize))
            .filter_map(|s| self.name_at(s.name).map(|n| (n, s.bind())))
    }

    /// The imports among `provider`'s names, each once, in string-table order: the names of
    /// [`Self::undefined_names`] that `provider`'s [`Self::defines_lookup`] finds. Most imports
    /// are turned away by their print ([`DefinedPrints`]) before they are checked as UTF-8 or
    /// hashed for the lookup.
    pub fn imports_defined_by<'s>(
        &'s self,
        provider: &DefinedPrints<'_>,
    ) -> impl Iterator<Item = &'s str> {
        let offs = self.import_offsets();
        (0..offs.len()).filter_map(move |i| {
            if let Some(&ahead) = offs.get(i + PREFETCH_AHEAD) {
                prefetch(&self.strtab, ahead);
            }
            let name = super::cbytes_at(&self.strtab, offs[i] as usize)?;
            if !provider.may_define(name) {
                return None;
            }
            let name = std::str::from_utf8(name).ok()?;
            provider.defines(name).then_some(name)
        })
    }

    /// String-table offsets of the imported names, sorted, each once. A large library's names
    /// are spread over megabytes; visiting them in address order turns thousands of cache and TLB
    /// misses into a forward sweep the prefetcher follows.
    fn import_offsets(&self) -> Vec<u32> {
        let raw = self.raw();
        let mut offs: Vec<u32> = self
            .imports
            .iter()
            .filter_map(|&i| raw.get(i as usize))
            .map(|s| s.name)
            .collect();
        offs.sort_unstable();
        offs.dedup();
        offs
    }

    /// Symbols whose names contain any of `needles`: one search over the string table, then one
    /// pass over the entries matching hit offsets. Names may share tails, so a hit belongs to every
    /// symbol whose name starts at or before it within the same string.
    pub fn containing(&self, needles: &[&str]) -> Vec<Sym<'_>> {
        let searched;
        let hits: &[(usize, usize)] = match &self.found {
            Some(f) if f.needles == needle_set(needles) => &f.hits,
            _ => {
                let Some(ac) = super::search::searcher(needles) else {
                    return Vec::new();
                };
                searched = string_hits(&self.strtab, ac.find_iter(&self.strtab[..]));
                &searched
            }
        };
        if hits.is_empty() {
            return Vec::new();
        }
        // Hits come in table order, so they are sorted by string start already.
        let mut out = Vec::new();
        for (i, s) in self.raw().iter().enumerate().skip(1) {
            let off = s.name as usize;
            // The hits of the string holding `off` have the greatest start <= off; one of them must
            // lie at or after `off` (then no NUL separates them).
            let j = hits.partition_point(|&(start, _)| start <= off);
            let found = j > 0 && {
                let s0 = hits[j - 1].0;
                hits[..j]
                    .iter()
                    .rev()
                    .take_while(|h| h.0 == s0)
                    .any(|&(_, pos)| pos >= off)
            };
            if found && let Some(sym) = self.decode(i, s) {
                out.push(sym);
            }
        }
        out
    }

    /// Does this file export `name`? Answered through the file's own hash table, as ld.so does.
    ///
    /// Hand-written on purpose, although `object`'s `GnuHashTable::find`/`HashTable::find` are as
    /// fast (`bench/symbols.rs`, `lookup`: object / splitpkg 0.89–1.04× per run over six interleaved
    /// runs of 21 on torch 2.11's tree): their `find` needs a `SymbolTable`, which `object` builds
    /// only from section headers (a section-stripped library has none; ld.so never reads them);
    /// GNU `find` shifts by the file's `bloom_shift` unchecked, a panic under overflow checks on the
    /// input kept in `fuzz/regressions/elf/gnu-bloom-shift-overflow`; and SysV `find` follows a
    /// looping chain up to `nchain` steps per lookup, where [`Self::sysv_lookup`] stops at the cycle.
    ///
    /// ```text
    /// cargo run --release --example symbols -- $(fixtures/corpus/fetch --unpack torch-2.11.0-cu130 | awk '$1=="tree"{print $3}')
    /// ```
    pub fn defines(&self, name: &str) -> bool {
        self.defines_lookup(&Lookup::new(name))
    }

    /// [`Self::defines`] for a name asked of several files: its hash is computed once.
    pub fn defines_lookup(&self, name: &Lookup<'_>) -> bool {
        match &self.hash {
            Some((HashKind::Gnu, h)) => self.gnu_lookup(h, name).unwrap_or(false),
            Some((HashKind::Sysv, h)) => self.sysv_lookup(h, name).unwrap_or(false),
            None => self.defined_names().any(|n| n == name.name),
        }
    }

    fn u32_at(&self, b: &[u8], off: usize) -> Option<u32> {
        let s: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
        Some(if self.le {
            u32::from_le_bytes(s)
        } else {
            u32::from_be_bytes(s)
        })
    }

    /// Is symbol `idx` defined and named `name`? The bytes are compared in place: the name
    /// followed by the terminator is exactly what [`Self::name_at`] would return as `name`, without
    /// finding the end and checking UTF-8 first.
    fn matches(&self, idx: usize, name: &str) -> bool {
        let n = name.as_bytes();
        self.raw().get(idx).is_some_and(|s| {
            let at = s.name as usize;
            s.defined()
                && self.strtab.get(at..at.saturating_add(n.len())) == Some(n)
                && self.strtab.get(at + n.len()) == Some(&0)
        })
    }

    fn gnu_lookup(&self, h: &[u8], lookup: &Lookup<'_>) -> Option<bool> {
        let name = lookup.name;
        let nbuckets = self.u32_at(h, 0)? as usize;
        let symoffset = self.u32_at(h, 4)? as usize;
        let bloom_size = self.u32_at(h, 8)? as usize;
        let bloom_shift = self.u32_at(h, 12)?;
        if nbuckets == 0 || bloom_size == 0 {
            return Some(false);
        }
        let hash = lookup.gnu();
        let word_bits = if self.is64 { 64 } else { 32 };
        let word_bytes = word_bits / 8;
        let bloom_at = 16 + ((hash as usize / word_bits) % bloom_size) * word_bytes;
        let word = if self.is64 {
            let b: [u8; 8] = h.get(bloom_at..bloom_at + 8)?.try_into().ok()?;
            if self.le {
                u64::from_le_bytes(b)
            } else {
                u64::from_be_bytes(b)
            }
        } else {
            self.u32_at(h, bloom_at)? as u64
        };
        // A hostile shift of 32 or more: C's `hash >> shift` is undefined there and x86, where
        // ld.so runs, masks the count to 5 bits; wrapping_shr does the same instead of panicking
        // (found by the `elf` fuzz target).
        let mask = (1u64 << (hash as usize % word_bits))
            | (1u64 << (hash.wrapping_shr(bloom_shift) as usize % word_bits));
        if word & mask != mask {
            return Some(false);
        }
        let buckets = 16 + bloom_size * word_bytes;
        let chains = buckets + nbuckets * 4;
        let mut idx = self.u32_at(h, buckets + (hash as usize % nbuckets) * 4)? as usize;
        if idx < symoffset {
            return Some(false);
        }
        // Bounded by the table: a chain never runs past the last symbol.
        while idx < self.raw().len() {
            let ch = self.u32_at(h, chains + (idx - symoffset) * 4)?;
            if (ch | 1) == (hash | 1) && self.matches(idx, name) {
                return Some(true);
            }
            if ch & 1 == 1 {
                break;
            }
            idx += 1;
        }
        Some(false)
    }

    fn sysv_lookup(&self, h: &[u8], lookup: &Lookup<'_>) -> Option<bool> {
        let name = lookup.name;
        let nbucket = self.u32_at(h, 0)? as usize;
        let nchain = self.u32_at(h, 4)? as usize;
        if nbucket == 0 {
            return Some(false);
        }
        let hash = lookup.sysv() as usize;
        let mut idx = self.u32_at(h, 8 + (hash % nbucket) * 4)? as usize;
        // A chain visits each symbol at most once: bounded by the chain table and the symbol
        // table, and a cycle (a hostile table) is caught by Brent's method within a few times its
        // length instead of walking all of nchain for every lookup.
        let limit = nchain.min(self.raw().len());
        let (mut tortoise, mut power, mut lam) = (idx, 1usize, 0usize);
        let mut steps = 0;
        while idx != 0 && steps <= limit {
            if self.matches(idx, name) {
                return Some(true);
            }
            if idx >= nchain {
                return Some(false);
            }
            idx = self.u32_at(h, 8 + nbucket * 4 + idx * 4)? as usize;
            steps += 1;
            if idx == tortoise {
                return Some(false);
            }
            lam += 1;
            if lam == power {
                tortoise = idx;
                power *= 2;
                lam = 0;
            }
        }
        Some(false)
    }

    /// Every named symbol as a serialisable record (the `symbols` listing).
    pub fn to_list(&self) -> Vec<SymbolRecord> {
        self.iter()
            .map(|s| SymbolRecord {
                name: s.name.to_string(),
                version: s.version.map(str::to_string),
                defined: s.defined,
                size: s.size,
                kind: sym::type_to_str(s.kind).to_ascii_lowercase(),
                bind: sym::bind_to_str(s.bind).to_ascii_lowercase(),
            })
            .collect()
    }
}

/// `needles` sorted, each once: the key [`DynSymbols::remember`] keeps hits under.
fn needle_set<S: AsRef<str>>(needles: &[S]) -> Vec<String> {
    let mut set: Vec<String> = needles.iter().map(|n| n.as_ref().to_string()).collect();
    set.sort();
    set.dedup();
    set
}

/// (string start, hit position) for each match in a string table; a string ends at the next NUL.
pub(crate) fn string_hits(
    text: &[u8],
    matches: impl Iterator<Item = aho_corasick::Match>,
) -> Vec<(usize, usize)> {
    matches
        .map(|m| {
            let start = text[..m.start()]
                .iter()
                .rposition(|&b| b == 0)
                .map(|i| i + 1)
                .unwrap_or(0);
            (start, m.start())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_glibc() {
        // Reference values from the ELF gABI and glibc's dl_new_hash, for the functions the lookups use.
        assert_eq!(object::elf::gnu_hash(b""), 0x0000_1505);
        assert_eq!(object::elf::gnu_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(object::elf::gnu_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(object::elf::hash(b"printf"), 0x0779_05a6);
    }

    /// Both classes and byte orders decode through `object`'s entry types as the fixed-offset
    /// reads they replaced did.
    #[test]
    fn entries_of_both_classes_and_byte_orders() {
        // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64.
        let mut le64 = vec![0u8; 24];
        le64[..4].copy_from_slice(&7u32.to_le_bytes());
        le64[4] = 0x12; // STB_GLOBAL, STT_FUNC
        le64[6..8].copy_from_slice(&13u16.to_le_bytes());
        le64[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
        le64[16..24].copy_from_slice(&42u64.to_le_bytes());
        le64.extend_from_slice(&[0xff; 5]); // a partial entry is not one
        // Elf32_Sym: name u32, value u32, size u32, info u8, other u8, shndx u16.
        let mut be32 = vec![0u8; 16];
        be32[..4].copy_from_slice(&7u32.to_be_bytes());
        be32[4..8].copy_from_slice(&0x1000u32.to_be_bytes());
        be32[8..12].copy_from_slice(&42u32.to_be_bytes());
        be32[12] = 0x12;
        be32[14..16].copy_from_slice(&13u16.to_be_bytes());
        for t in [
            SymTable::new(&le64, true, true),
            SymTable::new(&be32, false, false),
        ] {
            assert_eq!(t.len(), 1);
            let s = t.get(0).unwrap();
            assert_eq!(
                (s.name, s.kind(), s.bind(), s.shndx, s.value, s.size),
                (7, 2, 1, 13, 0x1000, 42)
            );
            assert!(s.defined() && t.get(1).is_none());
            assert_eq!(t.iter().count(), 1);
        }
    }

    /// The halves of a split hold every entry once, in order, wherever the split falls.
    #[test]
    fn split_halves_keep_every_entry_in_order() {
        let mut bytes = Vec::new();
        for name in 1u32..=5 {
            let mut e = [0u8; 24];
            e[..4].copy_from_slice(&name.to_le_bytes());
            bytes.extend_from_slice(&e);
        }
        let t = SymTable::new(&bytes, true, true);
        for mid in [0, 2, 5, 9] {
            let (a, b) = t.split_at(mid);
            assert_eq!(a.len(), mid.min(5));
            let names: Vec<u32> = a.iter().chain(b.iter()).map(|s| s.name).collect();
            assert_eq!(names, [1, 2, 3, 4, 5]);
        }
    }

    /// A name matches only the whole terminated string: not a longer one it begins, not one the
    /// table cuts off before its terminator.
    #[test]
    fn a_lookup_matches_whole_terminated_names_only() {
        // Symbols 1..=3 name "ab", "abc" and the unterminated "xy" at the end of the strings.
        let strtab = b"\0ab\0abc\0xy";
        let mut table = vec![0u8; 24];
        for off in [1u32, 4, 8] {
            let mut e = [0u8; 24];
            e[..4].copy_from_slice(&off.to_le_bytes());
            e[4] = 0x12; // STB_GLOBAL, STT_FUNC
            e[6..8].copy_from_slice(&1u16.to_le_bytes()); // defined
            table.extend_from_slice(&e);
        }
        let syms = DynSymbols::new(
            Bytes::Owned(Arc::from(table)),
            Bytes::Owned(Arc::from(&strtab[..])),
            None,
            None,
            Vec::new(),
            true,
            true,
        );
        assert!(syms.matches(1, "ab") && syms.matches(2, "abc"));
        assert!(!syms.matches(2, "ab") && !syms.matches(1, "a"));
        assert!(!syms.matches(3, "xy") && !syms.matches(3, "x"));
        assert!(!syms.matches(4, "ab"));
    }

    /// Tables of named entries: (name, defined), in order, after the null entry.
    fn table_of(entries: &[(&str, bool)]) -> DynSymbols {
        let mut strtab = vec![0u8];
        let mut table = vec![0u8; 24];
        for (name, defined) in entries {
            let mut e = [0u8; 24];
            e[..4].copy_from_slice(&(strtab.len() as u32).to_le_bytes());
            e[4] = 0x12; // STB_GLOBAL, STT_FUNC
            e[6..8].copy_from_slice(&u16::from(*defined).to_le_bytes());
            table.extend_from_slice(&e);
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
        }
        let (table, strtab) = (Arc::from(table), Arc::from(strtab));
        DynSymbols::new(
            Bytes::Owned(table),
            Bytes::Owned(strtab),
            None,
            None,
            Vec::new(),
            true,
            true,
        )
    }

    /// The prints only turn names away: the imports a provider defines are exactly what the
    /// lookup finds among all imports, for names shorter than a window, as long as three, and
    /// sharing starts and ends with a defined name.
    #[test]
    fn imports_defined_by_a_provider_are_what_its_lookup_finds() {
        let long = "_ZN2at6native12_GLOBAL__N_117apply_lu_factorERKNS_6TensorE";
        let twin = "_ZN2at6native12_GLOBAL__N_117apply_lu_solve__ERKNS_6TensorE";
        let provider = table_of(&[
            ("a", true),
            ("magma_init", true),
            (long, true),
            ("x", false),
        ]);
        let user = table_of(&[
            ("a", false),
            ("b", false),
            ("magma_init", false),
            ("magma_initx", false),
            (long, false),
            (twin, false),
            ("x", false),
            ("a", true),
        ]);
        let prints = DefinedPrints::new(&provider);
        let fast: Vec<&str> = user.imports_defined_by(&prints).collect();
        let slow: std::collections::BTreeSet<&str> = user
            .undefined_names()
            .map(|(n, _)| n)
            .filter(|n| provider.defines_lookup(&Lookup::new(n)))
            .collect();
        assert_eq!(
            fast.iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>(),
            slow
        );
        // Each once, in string-table order.
        assert_eq!(fast, ["a", "magma_init", long]);
    }

    /// A SysV chain that loops (hostile, issue 12): every lookup ends at once, not after nchain steps.
    #[test]
    fn sysv_chain_cycles_end_the_lookup() {
        let nsyms = 1 << 20;
        let table = Bytes::Owned(Arc::from(vec![0u8; nsyms * 24]));
        let strtab = Bytes::Owned(Arc::from(&b"\0x\0"[..]));
        for chain in [[1u32, 1, 0], [1, 2, 1]] {
            // nbucket 1, nchain u32::MAX (claimed), bucket[0] = 1, then chain[0..3].
            let mut h = Vec::new();
            for w in [1u32, u32::MAX, 1].into_iter().chain(chain) {
                h.extend_from_slice(&w.to_le_bytes());
            }
            let syms = DynSymbols::new(
                table.clone(),
                strtab.clone(),
                None,
                Some((HashKind::Sysv, Bytes::Owned(Arc::from(h)))),
                Vec::new(),
                true,
                true,
            );
            let started = std::time::Instant::now();
            for _ in 0..10_000 {
                assert!(!syms.defines("x"));
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(1),
                "{:?}",
                started.elapsed()
            );
        }
    }
}
