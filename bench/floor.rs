//! Floor for `splitpkg plan DIR`: touch only the bytes the plan has to look at, and analyse nothing.
//!
//! For every ELF file (two threads, largest first, as splitpkg schedules them): map it, read the
//! section headers, touch one byte per cache line of `.dynsym`, `.dynstr`, `.gnu.version*`,
//! `.gnu.hash` and `.rodata*` (where dlopen literals and build-config text live), and walk the
//! `.nv_fatbin` headers with the same positioned reads splitpkg uses. For the files named after
//! DIR — those the plan says carry the payload (`payload.files` of `plan --json`) — also the tables
//! the plan's two walks of such a file read: `.symtab`, `.strtab` (the static estimate, the
//! function starts), `.eh_frame_hdr`, `.rela.dyn`, `.rela.plt` and `.init_array` (the code run at
//! load). No strings are compared, no symbols decoded, no graph built. The time left between this
//! and `splitpkg plan` is the cost of the analysis; the time between this and libtree is the cost
//! of reading what libtree never reads.
//!
//! With `--searches`, `.dynstr` and `.rodata*` are not touched but searched, with the pattern sets
//! and the searcher `plan` uses for them (`splitpkg::elf::search_table`, magma's words), and the
//! matches only counted: the least that any `plan` finding dlopen literals and payload mentions
//! must do (issue 28, item 3).
//!
//! Usage: cargo run --release --example floor -- [--searches] DIR [CARRIER...]
//! (CARRIER: a path under DIR)

// A benchmark program: it prints its measurements and opens the files it is pointed at directly,
// as the baseline it measures does (the library's opener is part of what is measured against).
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::Header;
use goblin::elf::section_header::SectionHeader;
use rayon::prelude::*;
use scroll::Pread;

/// What to touch: `FLOOR_PARTS` is a comma list of `tables`, `rodata`, `fatbin`, `walks` (default:
/// all).
fn part(name: &str) -> bool {
    std::env::var("FLOOR_PARTS")
        .map(|v| v.split(',').any(|p| p == name))
        .unwrap_or(true)
}

/// The string tables `plan` searches, and how to search one: `None` for the floor's reads.
fn searched(name: &str) -> Option<splitpkg::elf::SearchedTable> {
    match name {
        ".dynstr" => Some(splitpkg::elf::SearchedTable::Dynstr),
        n if n.starts_with(".rodata") => Some(splitpkg::elf::SearchedTable::Rodata),
        _ => None,
    }
}

/// `searches`: the words to search the string tables for, as `plan` would (`None`: touch them).
fn touched(path: &std::path::Path, carries: bool, searches: Option<&[&str]>) -> u64 {
    let file = std::fs::File::open(path).expect("open");
    // SAFETY: read-only map of a file nobody modifies during the run.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let b: &[u8] = &map;
    let header: Header = b.pread(0).expect("ELF header");
    let ctx = Ctx::new(
        if header.e_ident[4] == 2 {
            Container::Big
        } else {
            Container::Little
        },
        Endian::Little,
    );
    let shdrs = SectionHeader::parse(b, header.e_shoff as usize, header.e_shnum as usize, ctx)
        .expect("section headers");
    let names = &shdrs[header.e_shstrndx as usize];
    let name_of = |sh: &SectionHeader| {
        let tab = &b[names.sh_offset as usize..(names.sh_offset + names.sh_size) as usize];
        let s = &tab[sh.sh_name..];
        std::str::from_utf8(&s[..s.iter().position(|&c| c == 0).unwrap_or(0)]).unwrap_or("")
    };
    let mut sum = 0u64;
    for sh in &shdrs {
        let n = name_of(sh);
        let wanted = (part("tables")
            && matches!(
                n,
                ".dynsym" | ".dynstr" | ".gnu.version" | ".gnu.version_r" | ".gnu.hash"
            ))
            || (part("rodata") && n.starts_with(".rodata"))
            || (part("walks")
                && carries
                && matches!(
                    n,
                    ".symtab"
                        | ".strtab"
                        | ".eh_frame_hdr"
                        | ".rela.dyn"
                        | ".rela.plt"
                        | ".init_array"
                ));
        if wanted && sh.sh_type != goblin::elf::section_header::SHT_NOBITS {
            let s = &b[sh.sh_offset as usize..(sh.sh_offset + sh.sh_size) as usize];
            sum += match (searches, searched(n)) {
                (Some(words), Some(table)) => splitpkg::elf::search_table(table, s, words) as u64,
                _ => s.iter().step_by(64).map(|&x| x as u64).sum::<u64>(),
            };
        }
        if n == ".nv_fatbin" && part("fatbin") {
            let src = splitpkg::fatbin::FileSource::new(&file, sh.sh_offset, sh.sh_size as usize);
            sum += splitpkg::fatbin::walk(&src, sh.sh_offset)
                .expect("fatbin")
                .len() as u64;
        }
    }
    sum
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let searches = args.first().is_some_and(|a| a == "--searches");
    if searches {
        args.remove(0);
    }
    let dir = args
        .first()
        .cloned()
        .expect("usage: floor [--searches] DIR [CARRIER...]");
    let carriers: Vec<std::path::PathBuf> = args[1..]
        .iter()
        .map(|c| std::path::Path::new(&dir).join(c))
        .collect();
    let mut files: Vec<(std::path::PathBuf, u64)> = walkdir::WalkDir::new(&dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let mut head = [0u8; 4];
            std::fs::File::open(e.path())
                .and_then(|mut f| f.read_exact(&mut head))
                .is_ok()
                && &head == b"\x7fELF"
        })
        .map(|e| {
            (
                e.path().to_path_buf(),
                e.metadata().map(|m| m.len()).unwrap_or(0),
            )
        })
        .collect();
    // A carrier that names no ELF file here would leave its tables out of the floor unnoticed.
    for c in &carriers {
        assert!(
            files.iter().any(|(p, _)| p == c),
            "{} is not an ELF file under {dir}",
            c.display()
        );
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    // The words `plan` searches for by default (`--dep magma`).
    let spec = splitpkg::analysis::payload::PayloadSpec::for_dep("magma", &[]);
    let words = spec.mention_words();
    let searches = searches.then_some(&words[..]);
    let sum: u64 = files
        .par_iter()
        .with_max_len(1)
        .map(|(p, _)| touched(p, carriers.contains(p), searches))
        .sum();
    println!("{} ELF files, checksum {sum}", files.len());
}
