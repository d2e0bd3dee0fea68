//! splitpkg's hand-written ELF symbol reader against `object::read::elf`, on the same files, in the
//! same process, interleaved (issue 13: switch to the library where it is not slower).
//!
//! For each fact `plan` needs, both sides start from the mapped file and produce the same answer,
//! which is asserted equal (in full once, then as a digest on every run):
//!
//! - `parse`: the headers every other fact starts from (`ElfView::parse`, `ElfFile64::parse`);
//! - `dynsym`: every dynamic symbol with its version (name, version, defined, type, binding, size);
//! - `imports`: the number of exports and the imported names;
//! - `hash-count`: the number of dynamic symbols as the GNU (or SysV) hash table gives it, found
//!   through the dynamic table as ld.so finds it;
//! - `lookup`: "does this file export NAME" through the file's own hash table, for each of its
//!   exports and imports (what the verdict asks of the lazy library and the core files);
//! - `symtab`: `.symtab` (`--deep`): translation units (`STT_FILE` among the locals) and the defined
//!   functions and objects named `magma*`.
//!
//! Runs alternate which side goes first; each timing is one side over all files for one fact,
//! single-threaded. Reported: median and min–max per side, the ratio object / splitpkg of the
//! medians, and the median (min–max) of the per-run ratios (both sides of one run ran back to back,
//! so that ratio is the one to trust on a busy machine).
//!
//! Usage: cargo run --release --example symbols -- [--runs N] FILE_OR_DIR...
//!        (a directory: every ELF file directly in it and in its lib/)

// A benchmark program: it prints its measurements and opens the files it is pointed at directly,
// as the baseline it measures does (the library's opener is part of what is measured against).
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::Mmap;
use object::read::elf::{
    Dyn, ElfFile64, GnuHashTable, HashTable, ProgramHeader, SectionHeader, Sym, SymbolTable,
    VersionTable,
};
use object::{Endianness, elf};
use splitpkg::elf::ElfView;

type Elf64 = elf::FileHeader64<Endianness>;

/// What one side found in one file for one fact, reduced to numbers compared on every run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Digest {
    count: u64,
    sum: u64,
}

impl Digest {
    fn add(&mut self, bytes: &[u8], extra: u64) {
        self.count += 1;
        // Length and two bytes of every name: cheap, and enough to catch a side that reads other entries.
        self.sum = self
            .sum
            .wrapping_mul(31)
            .wrapping_add(bytes.len() as u64 + extra);
        if let (Some(a), Some(b)) = (bytes.first(), bytes.last()) {
            self.sum = self.sum.wrapping_add((*a as u64) << 8 | *b as u64);
        }
    }
}

const FACTS: [&str; 6] = [
    "parse",
    "dynsym",
    "imports",
    "hash-count",
    "lookup",
    "symtab",
];

struct File {
    name: String,
    map: Arc<Mmap>,
    /// Names looked up in `lookup`: every export and import of the file.
    names: Vec<String>,
}

// --- splitpkg's reader ---------------------------------------------------------------------------

fn ours(fact: &str, f: &File) -> Digest {
    let bytes: &[u8] = &f.map;
    let view = ElfView::parse(bytes).expect("parse");
    let mut d = Digest::default();
    match fact {
        "parse" => d.count = (view.phdrs.len() + view.shdrs.len()) as u64,
        "dynsym" => {
            let syms = view.dynamic_symbols(Some(&f.map)).expect("dynsym");
            for s in syms.iter() {
                let v = s.version.map(str::as_bytes).unwrap_or(b"");
                d.add(
                    s.name.as_bytes(),
                    v.len() as u64
                        + s.defined as u64
                        + s.kind as u64 * 3
                        + s.bind as u64 * 5
                        + s.size,
                );
                d.add(v, 0);
            }
        }
        "imports" => {
            let syms = view.dynamic_symbols(Some(&f.map)).expect("dynsym");
            d.count += syms.defined as u64;
            for (n, bind) in syms.undefined_names() {
                d.add(n.as_bytes(), bind as u64);
            }
        }
        "hash-count" => d.count = view.hash_symbol_count().expect("hash").unwrap_or(0) as u64,
        "lookup" => {
            let syms = view.dynamic_symbols(Some(&f.map)).expect("dynsym");
            for n in &f.names {
                if syms.defines(n) {
                    d.add(n.as_bytes(), 0);
                }
            }
        }
        "symtab" => {
            for u in view.translation_units() {
                d.add(u.as_bytes(), 1);
            }
            if let Some((table, strs)) = view.symtab() {
                for s in table.iter() {
                    if s.defined() && (s.kind() == elf::STT_FUNC.0 || s.kind() == elf::STT_OBJECT.0)
                    {
                        let raw = strs.get(s.name as usize..).unwrap_or(&[]);
                        if raw.starts_with(b"magma")
                            && let Some(n) = splitpkg::elf::cstr_at(strs, s.name as usize)
                        {
                            d.add(n.as_bytes(), s.size);
                        }
                    }
                }
            }
        }
        _ => unreachable!(),
    }
    d
}

// --- object::read::elf ---------------------------------------------------------------------------

/// The file bytes at a virtual address, through the `PT_LOAD` that holds it (to the segment's end).
fn at_vaddr<'a>(file: &ElfFile64<'a>, data: &'a [u8], addr: u64) -> Option<&'a [u8]> {
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == elf::PT_LOAD)
        .find_map(|p| {
            let (vaddr, filesz) = (p.p_vaddr(e), p.p_filesz(e));
            (addr >= vaddr && addr - vaddr < filesz)
                .then(|| p.data(e, data).ok())
                .flatten()
                .map(|d| &d[(addr - vaddr) as usize..])
        })
}

fn dyn_val(file: &ElfFile64<'_>, data: &[u8], tag: elf::DynamicTag) -> Option<u64> {
    let e = file.endian();
    let ph = file
        .elf_program_headers()
        .iter()
        .find(|p| p.p_type(e) == elf::PT_DYNAMIC)?;
    let dynamic = ph.dynamic(e, data).ok()??;
    dynamic
        .iter()
        .take_while(|d| d.d_tag(e) != elf::DT_NULL)
        .find(|d| d.d_tag(e) == tag)
        .map(|d| d.d_val(e))
}

enum ObjHash<'a> {
    Gnu(GnuHashTable<'a, Elf64>),
    Sysv(HashTable<'a, Elf64>),
}

fn obj_hash<'a>(file: &ElfFile64<'a>, data: &'a [u8]) -> Option<ObjHash<'a>> {
    let e = file.endian();
    if let Some(t) = dyn_val(file, data, elf::DT_GNU_HASH).and_then(|a| at_vaddr(file, data, a)) {
        return GnuHashTable::parse(e, t).ok().map(ObjHash::Gnu);
    }
    dyn_val(file, data, elf::DT_HASH)
        .and_then(|a| at_vaddr(file, data, a))
        .and_then(|t| HashTable::parse(e, t).ok())
        .map(ObjHash::Sysv)
}

fn obj_versions<'a>(file: &ElfFile64<'a>, data: &'a [u8]) -> VersionTable<'a, Elf64> {
    file.elf_section_table()
        .versions(file.endian(), data)
        .expect("versions")
        .unwrap_or_default()
}

fn theirs(fact: &str, f: &File) -> Digest {
    let data: &[u8] = &f.map;
    let file = ElfFile64::<Endianness>::parse(data).expect("object parse");
    let e = file.endian();
    let dynsym: &SymbolTable<'_, Elf64> = file.elf_dynamic_symbol_table();
    let strings = dynsym.strings();
    let name_of = |s: &elf::Sym64<Endianness>| {
        s.name(e, strings)
            .ok()
            .filter(|n| !n.is_empty() && std::str::from_utf8(n).is_ok())
    };
    let mut d = Digest::default();
    match fact {
        "parse" => {
            d.count = (file.elf_program_headers().len() + file.elf_section_table().len()) as u64
        }
        "dynsym" => {
            let versions = obj_versions(&file, data);
            for (i, s) in dynsym.enumerate().skip(1) {
                let Some(n) = name_of(s) else { continue };
                let v = versions
                    .version(versions.version_index(e, i).index())
                    .ok()
                    .flatten()
                    .map(|v| v.name())
                    .unwrap_or(&[]);
                let defined = !s.is_undefined(e);
                d.add(
                    n,
                    v.len() as u64
                        + defined as u64
                        + s.st_type().0 as u64 * 3
                        + s.st_bind().0 as u64 * 5
                        + s.st_size(e),
                );
                d.add(v, 0);
            }
        }
        "imports" => {
            for s in dynsym.iter().skip(1) {
                if !s.is_undefined(e) {
                    d.count += 1;
                } else if s.st_name(e) != 0
                    && let Ok(n) = s.name(e, strings)
                    && std::str::from_utf8(n).is_ok()
                {
                    d.add(n, s.st_bind().0 as u64);
                }
            }
        }
        "hash-count" => {
            d.count = match obj_hash(&file, data) {
                Some(ObjHash::Gnu(h)) => h
                    .symbol_table_length(e)
                    .map(u64::from)
                    .unwrap_or(h.symbol_base() as u64),
                Some(ObjHash::Sysv(h)) => h.symbol_table_length() as u64,
                None => 0,
            }
        }
        "lookup" => {
            let versions = obj_versions(&file, data);
            let hash = obj_hash(&file, data);
            for n in &f.names {
                let b = n.as_bytes();
                let hit = match &hash {
                    Some(ObjHash::Gnu(h)) => {
                        h.find(e, b, elf::gnu_hash(b), None, dynsym, &versions)
                    }
                    Some(ObjHash::Sysv(h)) => h.find(e, b, elf::hash(b), None, dynsym, &versions),
                    None => None,
                };
                if hit.is_some_and(|(_, s)| !s.is_undefined(e)) {
                    d.add(b, 0);
                }
            }
        }
        "symtab" => {
            let symtab = file.elf_symbol_table();
            let strs = symtab.strings();
            let sections = file.elf_section_table();
            let locals = sections
                .section(symtab.section())
                .map(|s| s.sh_info(e) as usize)
                .unwrap_or(0);
            let mut seen = std::collections::HashSet::new();
            for s in symtab.iter().take(locals) {
                if s.st_type() == elf::STT_FILE
                    && let Ok(n) = s.name(e, strs)
                    && !n.is_empty()
                    && std::str::from_utf8(n).is_ok()
                    && seen.insert(n)
                {
                    d.add(n, 1);
                }
            }
            for s in symtab.iter() {
                if !s.is_undefined(e)
                    && (s.st_type() == elf::STT_FUNC || s.st_type() == elf::STT_OBJECT)
                    && let Ok(n) = s.name(e, strs)
                    && n.starts_with(b"magma")
                    && std::str::from_utf8(n).is_ok()
                {
                    d.add(n, s.st_size(e));
                }
            }
        }
        _ => unreachable!(),
    }
    d
}

// --- full comparison, once -----------------------------------------------------------------------

type Row = (String, Option<String>, bool, u8, u8, u64);

fn full_ours(f: &File) -> Vec<Row> {
    let view = ElfView::parse(&f.map).expect("parse");
    let syms = view.dynamic_symbols(Some(&f.map)).expect("dynsym");
    syms.iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.version.map(str::to_string),
                s.defined,
                s.kind,
                s.bind,
                s.size,
            )
        })
        .collect()
}

fn full_theirs(f: &File) -> Vec<Row> {
    let data: &[u8] = &f.map;
    let file = ElfFile64::<Endianness>::parse(data).expect("object parse");
    let e = file.endian();
    let dynsym = file.elf_dynamic_symbol_table();
    let versions = obj_versions(&file, data);
    dynsym
        .enumerate()
        .skip(1)
        .filter_map(|(i, s)| {
            let n = std::str::from_utf8(s.name(e, dynsym.strings()).ok()?)
                .ok()
                .filter(|n| !n.is_empty())?;
            let v = versions
                .version(versions.version_index(e, i).index())
                .ok()
                .flatten()
                .map(|v| String::from_utf8_lossy(v.name()).into_owned());
            Some((
                n.to_string(),
                v,
                !s.is_undefined(e),
                s.st_type().0,
                s.st_bind().0,
                s.st_size(e),
            ))
        })
        .collect()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 11;
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        runs = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--runs N");
        args.drain(i..i + 2);
    }
    assert!(!args.is_empty(), "usage: symbols [--runs N] FILE_OR_DIR...");
    let mut paths = Vec::new();
    for a in &args {
        let p = std::path::PathBuf::from(a);
        if p.is_dir() {
            for dir in [p.clone(), p.join("lib")] {
                for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                    paths.push(entry.path());
                }
            }
        } else {
            paths.push(p);
        }
    }
    let mut files = Vec::new();
    for p in paths {
        let Ok(fh) = std::fs::File::open(&p) else {
            continue;
        };
        // SAFETY: read-only map of a file nobody modifies during the run.
        let Ok(map) = (unsafe { Mmap::map(&fh) }) else {
            continue;
        };
        if map.len() < 64 || &map[..4] != b"\x7fELF" || map[4] != 2 {
            continue;
        }
        let map = Arc::new(map);
        let view = ElfView::parse(&map).expect("parse");
        let syms = view.dynamic_symbols(Some(&map)).expect("dynsym");
        let mut names: Vec<String> = syms.defined_names().map(str::to_string).collect();
        names.extend(syms.undefined_names().map(|(n, _)| n.to_string()));
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        files.push(File { name, map, names });
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.map.len()));
    let total: usize = files.iter().map(|f| f.map.len()).sum();
    println!(
        "{} ELF files, {} bytes; {} runs per side and fact, interleaved",
        files.len(),
        total,
        runs
    );

    // The same facts from both readers, in full.
    for f in &files {
        let (a, b) = (full_ours(f), full_theirs(f));
        assert_eq!(a.len(), b.len(), "{}: dynamic symbol count", f.name);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{}: dynamic symbol", f.name);
        }
        for fact in FACTS {
            assert_eq!(ours(fact, f), theirs(fact, f), "{}: {fact}", f.name);
        }
        let dyn_syms = a.len();
        let hash = ours("hash-count", f).count;
        let found = ours("lookup", f).count;
        println!(
            "  {:<40} {:>11} bytes  {:>6} dynsyms (hash table says {}), {}/{} names found through the hash table: equal",
            f.name,
            f.map.len(),
            dyn_syms,
            hash,
            found,
            f.names.len()
        );
    }

    // Warm-up, then interleaved timed runs.
    for fact in FACTS {
        for f in &files {
            std::hint::black_box((ours(fact, f), theirs(fact, f)));
        }
    }
    let mut times: Vec<[Vec<Duration>; 2]> =
        FACTS.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for run in 0..runs {
        for (k, fact) in FACTS.iter().enumerate() {
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                let t = Instant::now();
                for f in &files {
                    let d = if side == 0 {
                        ours(fact, f)
                    } else {
                        theirs(fact, f)
                    };
                    std::hint::black_box(d);
                }
                times[k][side].push(t.elapsed());
            }
        }
    }
    println!();
    println!(
        "| fact | splitpkg median (min–max) | object median (min–max) | object / splitpkg, medians | same, per run: median (min–max) |"
    );
    println!("|---|---|---|---|---|");
    for (k, fact) in FACTS.iter().enumerate() {
        let [a, b] = &mut times[k];
        // Each run times both sides back to back: the per-run ratio cancels most of the load others put on the machine.
        let mut ratios: Vec<f64> = a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| y.as_secs_f64() / x.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let (amin, amax) = (*a.iter().min().unwrap(), *a.iter().max().unwrap());
        let (bmin, bmax) = (*b.iter().min().unwrap(), *b.iter().max().unwrap());
        let (am, bm) = (median(a), median(b));
        println!(
            "| {fact} | {} ({}–{}) | {} ({}–{}) | {:.2}× | {:.2}× ({:.2}–{:.2}) |",
            ms(am),
            ms(amin),
            ms(amax),
            ms(bm),
            ms(bmin),
            ms(bmax),
            bm.as_secs_f64() / am.as_secs_f64(),
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
}
