//! Why the ELF reader refuses a file. Every variant is about the input (exit code 2 through
//! [`crate::Error::Elf`]); the messages are the one-line reasons the CLI prints after the file name.

/// A file the ELF reader cannot take: not ELF, truncated, or pointing outside itself.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    // --- not an ELF file this reader knows ------------------------------------------------------
    /// The file does not start with the ELF magic (or is shorter than the identification).
    #[error("not an ELF file")]
    NotElf,
    /// `EI_CLASS` is neither 32- nor 64-bit.
    #[error("unknown ELF class {0}")]
    BadClass(u8),
    /// `EI_DATA` is neither little- nor big-endian.
    #[error("unknown ELF data encoding {0}")]
    BadEncoding(u8),

    // --- truncated: a table the headers name runs past the end of the file -------------------------
    /// The file is shorter than its ELF header.
    #[error("truncated ELF header")]
    TruncatedHeader,
    #[error(
        "truncated: program headers at {offset:#x} ({count} entries) run past the end of the file ({len} bytes)"
    )]
    /// The program header table runs past the end of the file.
    ProgramHeadersPastEnd {
        /// Its file offset (`e_phoff`).
        offset: u64,
        /// Its entry count (`e_phnum`).
        count: u16,
        /// The file's length in bytes.
        len: u64,
    },
    #[error(
        "truncated: segment {index} ({kind}) ends at {end:#x}, past the end of the file ({len} bytes)"
    )]
    /// A segment's file bytes run past the end of the file.
    SegmentPastEnd {
        /// The segment's index in the program header table.
        index: usize,
        /// Its type (`PT_LOAD`, `PT_DYNAMIC`, …).
        kind: &'static str,
        /// The file offset where it ends.
        end: u64,
        /// The file's length in bytes.
        len: u64,
    },
    /// The section header table runs past the end of the file.
    #[error("truncated: section headers at {offset:#x} run past the end of the file ({len} bytes)")]
    SectionHeadersPastEnd {
        /// Its file offset (`e_shoff`).
        offset: u64,
        /// The file's length in bytes.
        len: u64,
    },
    /// The dynamic string table runs past the end of the file.
    #[error("dynamic string table at {offset:#x} (+{size}) runs past the end of the file")]
    StringTablePastEnd {
        /// Its file offset.
        offset: usize,
        /// Its size in bytes (DT_STRSZ).
        size: u64,
    },
    /// The dynamic symbol table runs past the end of the file.
    #[error("dynamic symbol table at {offset:#x} ({count} entries) runs past the end of the file")]
    SymbolTablePastEnd {
        /// Its file offset.
        offset: usize,
        /// Its entry count (from the `.dynsym` section header, else the hash table).
        count: usize,
    },

    // --- headers ld.so refuses to load ------------------------------------------------------------
    #[error(
        "e_phentsize is {found}, not {expected} (the size of a program header): ld.so refuses to load it"
    )]
    /// `e_phentsize` is not the size of a program header for the file's class.
    PhentSize {
        /// The header's `e_phentsize`.
        found: u16,
        /// The size of a program header for the file's class.
        expected: usize,
    },
    /// What the file lacks.
    #[error("{0}: ld.so refuses to load it")]
    NotLoadable(&'static str),
    #[error(
        "segment {index} (PT_LOAD): address and file offset differ modulo the page size: ld.so refuses to load it"
    )]
    /// A PT_LOAD segment's address and file offset differ modulo the page size.
    LoadMisaligned {
        /// The segment's index in the program header table.
        index: usize,
    },

    // --- headers or entries that do not decode -----------------------------------------------------
    /// `what` is "program headers" or "section headers".
    #[error("bad {what}")]
    Headers {
        /// Which headers (`ELF header`, `program headers`, …).
        what: &'static str,
        /// goblin's error.
        #[source]
        source: goblin::error::Error,
    },
    /// A dynamic entry goblin could not read.
    #[error("bad dynamic entry {index}")]
    DynamicEntry {
        /// The entry's index in the dynamic section.
        index: usize,
        /// goblin's error.
        #[source]
        source: goblin::error::Error,
    },

    // --- bad offsets: references that lead nowhere -------------------------------------------------
    /// A dynamic-table address (`DT_STRTAB`, `DT_SYMTAB`) that no `PT_LOAD` maps.
    #[error("{tag} address {addr:#x} is not inside any PT_LOAD segment")]
    Unmapped {
        /// The dynamic tag whose address it is (`DT_STRTAB`, …).
        tag: &'static str,
        /// The address.
        addr: u64,
    },
    /// A dynamic entry (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) points outside the string
    /// table.
    #[error("dynamic entry {tag} points outside the string table")]
    BadString {
        /// The tag (`DT_NEEDED`, …).
        tag: &'static str,
    },

    // --- hash tables -------------------------------------------------------------------------------
    /// The DT_HASH table runs past the end of the file.
    #[error("DT_HASH table is truncated")]
    HashTruncated,
    /// The DT_GNU_HASH table runs past the end of the file or contradicts itself.
    #[error("DT_GNU_HASH table is truncated or inconsistent")]
    GnuHashBroken,
}
