//! `note`: write a copy of an ELF library with a `.note.dlopen` entry added (UAPI.12).

use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::elf::note::{self, NoteWriteError};
use splitpkg::elf::{DlopenEntry, Priority};
use splitpkg::error::{Context, Error, Result};
use splitpkg::input::MAX_ELF_MEMBER_BYTES;
use splitpkg::input::file::{Links, open_regular, read_capped};
use splitpkg::output::{emit as write_out, write_atomic_as};

use super::to_json;

pub const NOTE_HELP: &str = "Appends the note, a new section-name table and a new section header table at the end of a copy of LIB: every loaded byte stays as it was except the ELF header's e_shoff, e_shnum and e_shstrndx (ld.so never reads them). The note is a non-allocated SHT_NOTE section .note.dlopen (owner FDO, type 0x407c0c0a), which `readelf -n`, dlopen-notes.py, dh_dlopenlibdeps and the RPM generator read. An existing .note.dlopen is merged into it: one note, one JSON array; an entry with the same soname list is replaced.

Exit codes: 0 written, 2 bad input or usage (nothing written).

Examples:
  splitpkg note lib/libtorch_cuda.so --out lib/libtorch_cuda.so \\
    --soname libtorch_cuda_linalg.so --feature linalg --priority required
  splitpkg note libfoo.so --out out/libfoo.so --soname libbar.so.1 \\
    --soname libbar.so --feature bar --priority suggested \\
    --description 'Bar support' --json";

#[derive(Args)]
pub struct NoteArgs {
    /// The ELF shared library (or executable) to copy.
    library: PathBuf,
    /// Where to write the copy (atomically; may be LIB itself).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// A soname the library loads at run time; repeat for alternatives, most preferred first.
    #[arg(long, required = true, value_name = "NAME")]
    soname: Vec<String>,
    /// The feature the library provides (entries with the same feature are needed together).
    #[arg(long, value_name = "NAME")]
    feature: String,
    /// How much it matters: required, recommended or suggested.
    #[arg(long, value_enum)]
    priority: PriorityArg,
    /// One line for people (no control characters).
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PriorityArg {
    Required,
    Recommended,
    Suggested,
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Priority {
        match p {
            PriorityArg::Required => Priority::Required,
            PriorityArg::Recommended => Priority::Recommended,
            PriorityArg::Suggested => Priority::Suggested,
        }
    }
}

pub fn note(a: NoteArgs) -> Result<Exit> {
    let entry = DlopenEntry {
        soname: a.soname,
        feature: Some(a.feature),
        description: a.description,
        priority: a.priority.into(),
    };
    entry.check().map_err(|e| Error::usage_source("", e))?;
    // The one opener: a FIFO or a device is refused before it can block or stream forever, and the
    // read stops at the ELF size cap. The mode comes from the file that was read.
    let file = open_regular(&a.library, Links::Follow)?;
    let name = a.library.display().to_string();
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        file.metadata().at(&a.library)?.permissions().mode()
    };
    let bytes = read_capped(file, &name, MAX_ELF_MEMBER_BYTES, "ELF file")?;
    let (out, written) = note::add_note(&bytes, entry).map_err(|e| match e {
        NoteWriteError::Elf(source) => Error::elf(&name, source),
        other => Error::invalid(&name, other),
    })?;
    // The copy keeps the library's mode (an executable stays executable).
    write_atomic_as(&a.out, &out, Some(mode))?;
    let text = if a.json {
        to_json(&written)?
    } else {
        format!(
            "wrote {}: .note.dlopen at {:#x} with {} entr{}{}: {}\n",
            a.out.display(),
            written.note_offset,
            written.entries.len(),
            if written.entries.len() == 1 {
                "y"
            } else {
                "ies"
            },
            if written.merged_existing {
                " (merged with the existing note)"
            } else {
                ""
            },
            written.json
        )
    };
    write_out(None, &text)?;
    Ok(Exit::Success)
}
