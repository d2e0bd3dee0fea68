//! Why the ELF reader refuses a file. Every variant is about the input (exit code 2 through
//! [`crate::Error::Elf`]); the messages are the one-line reasons the CLI prints after the file name.

// issue 54: 38 public items still to document here.
#![allow(missing_docs)]

/// A file the ELF reader cannot take: not ELF, truncated, or pointing outside itself.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    // --- not an ELF file this reader knows ------------------------------------------------------
    #[error("not an ELF file")]
    NotElf,
    #[error("unknown ELF class {0}")]
    BadClass(u8),
    #[error("unknown ELF data encoding {0}")]
    BadEncoding(u8),

    // --- truncated: a table the headers name runs past the end of the file -------------------------
    #[error("truncated ELF header")]
    TruncatedHeader,
    #[error(
        "truncated: program headers at {offset:#x} ({count} entries) run past the end of the file ({len} bytes)"
    )]
    ProgramHeadersPastEnd { offset: u64, count: u16, len: u64 },
    #[error(
        "truncated: segment {index} ({kind}) ends at {end:#x}, past the end of the file ({len} bytes)"
    )]
    SegmentPastEnd {
        index: usize,
        kind: &'static str,
        end: u64,
        len: u64,
    },
    #[error("truncated: section headers at {offset:#x} run past the end of the file ({len} bytes)")]
    SectionHeadersPastEnd { offset: u64, len: u64 },
    #[error("dynamic string table at {offset:#x} (+{size}) runs past the end of the file")]
    StringTablePastEnd { offset: usize, size: u64 },
    #[error("dynamic symbol table at {offset:#x} ({count} entries) runs past the end of the file")]
    SymbolTablePastEnd { offset: usize, count: usize },

    // --- headers ld.so refuses to load ------------------------------------------------------------
    #[error(
        "e_phentsize is {found}, not {expected} (the size of a program header): ld.so refuses to load it"
    )]
    PhentSize { found: u16, expected: usize },
    /// What the file lacks.
    #[error("{0}: ld.so refuses to load it")]
    NotLoadable(&'static str),
    #[error(
        "segment {index} (PT_LOAD): address and file offset differ modulo the page size: ld.so refuses to load it"
    )]
    LoadMisaligned { index: usize },

    // --- headers or entries that do not decode -----------------------------------------------------
    /// `what` is "program headers" or "section headers".
    #[error("bad {what}")]
    Headers {
        what: &'static str,
        #[source]
        source: goblin::error::Error,
    },
    #[error("bad dynamic entry {index}")]
    DynamicEntry {
        index: usize,
        #[source]
        source: goblin::error::Error,
    },

    // --- bad offsets: references that lead nowhere -------------------------------------------------
    /// A dynamic-table address (`DT_STRTAB`, `DT_SYMTAB`) that no `PT_LOAD` maps.
    #[error("{tag} address {addr:#x} is not inside any PT_LOAD segment")]
    Unmapped { tag: &'static str, addr: u64 },
    #[error("dynamic entry {tag} points outside the string table")]
    BadString { tag: &'static str },

    // --- hash tables -------------------------------------------------------------------------------
    #[error("DT_HASH table is truncated")]
    HashTruncated,
    #[error("DT_GNU_HASH table is truncated or inconsistent")]
    GnuHashBroken,
}
