//! Baseline for `splitpkg plan WHEEL`: inflate every ELF member of a wheel and do nothing else,
//! with the same zip reader, the same zlib-rs inflater and the same two-thread split as splitpkg.
//! The ratio plan/inflate is the cost of all the analysis on top of reading the bytes.
//!
//! Usage: cargo run --release --example inflate -- WHEEL [--all]
//!
//! `--all` inflates every member (not only ELF ones): the floor for `splitpkg wheel`, which must
//! read every member's bytes to verify the input RECORD.

use std::io::Read;

use rayon::prelude::*;

fn main() {
    let path = std::env::args().nth(1).expect("usage: inflate WHEEL [--all]");
    let all = std::env::args().any(|a| a == "--all");
    let file = std::fs::File::open(&path).expect("open wheel");
    // SAFETY: read-only map of a file nobody modifies during the run.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map wheel");
    let bytes: &[u8] = &map;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("zip");
    let mut elf = Vec::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        if f.is_dir() {
            continue;
        }
        let mut head = [0u8; 4];
        if all || (f.read_exact(&mut head).is_ok() && &head == b"\x7fELF") {
            elf.push((i, f.size()));
        }
    }
    elf.sort_by_key(|e| std::cmp::Reverse(e.1));
    let total: u64 = elf
        .par_iter()
        .map_init(
            || archive.clone(),
            |a, &(i, size)| {
                let mut f = a.by_index(i).unwrap();
                let mut data = Vec::with_capacity(size as usize);
                f.read_to_end(&mut data).unwrap();
                data.len() as u64
            },
        )
        .sum();
    println!("inflated {} {}members, {} bytes", elf.len(), if all { "" } else { "ELF " }, total);
}
