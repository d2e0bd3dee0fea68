//! Baseline for `splitpkg plan WHEEL` and `splitpkg wheel`: inflate the members of a wheel and do
//! nothing else, with the same zip reader, the same zlib-rs inflater and the same schedule as
//! splitpkg (every thread takes the next-largest member, so torch's two biggest libraries start at
//! once on the two cores). The ratio splitpkg/inflate is the cost of all the work on top of reading
//! the bytes.
//!
//! Usage: cargo run --release --example inflate -- WHEEL [--all] [--sha256]
//!
//! `--all` inflates every member (not only ELF ones): the baseline for `splitpkg wheel`, which must
//! read every member's bytes to verify the input RECORD. `--sha256` also hashes every inflated
//! member, which verifying a RECORD cannot avoid: with `--all`, the floor of any tool that checks a
//! wheel's RECORD, before it writes a byte.
//!
//! The members' first bytes (ELF or not) are read on all threads too, as splitpkg's listing has
//! read them since 2026-12-04; before, both read them on one thread.
//!
//! Until 2026-12-01 this split the members with a rayon parallel iterator, which halves the index
//! range: with `--all` (11,843 members) it put libtorch_cpu.so and libtorch_cuda.so on one thread,
//! one after the other, and the baseline took 2.4 s where 1.3 s is what two cores need.

// A benchmark program: it prints its measurements and opens the files it is pointed at directly,
// as the baseline it measures does (the library's opener is part of what is measured against).
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;
use sha2::{Digest, Sha256};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: inflate WHEEL [--all] [--sha256]");
    let all = std::env::args().any(|a| a == "--all");
    let hash = std::env::args().any(|a| a == "--sha256");
    let file = std::fs::File::open(&path).expect("open wheel");
    // SAFETY: read-only map of a file nobody modifies during the run.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map wheel");
    let bytes: &[u8] = &map;
    let archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("zip");
    // The first bytes of every member, on all threads, as splitpkg's listing reads them (each
    // member's inflater set-up is most of the listing's time).
    let mut members: Vec<(usize, u64)> = (0..archive.len())
        .into_par_iter()
        .map_init(
            || archive.clone(),
            |a, i| {
                let mut f = a.by_index(i).unwrap();
                if f.is_dir() {
                    return None;
                }
                let mut head = [0u8; 4];
                (all || (f.read_exact(&mut head).is_ok() && &head == b"\x7fELF"))
                    .then(|| (i, f.size()))
            },
        )
        .flatten()
        .collect();
    members.sort_by_key(|e| std::cmp::Reverse(e.1));
    let (next, total, digests) = (AtomicUsize::new(0), AtomicU64::new(0), AtomicU64::new(0));
    rayon::broadcast(|_| {
        let mut a = archive.clone();
        while let Some(&(i, size)) = members.get(next.fetch_add(1, Ordering::Relaxed)) {
            let mut f = a.by_index(i).unwrap();
            let mut data = Vec::with_capacity(size as usize);
            f.read_to_end(&mut data).unwrap();
            if hash {
                // Fold a digest byte in so the hash cannot be optimised away.
                digests.fetch_add(u64::from(Sha256::digest(&data)[0]), Ordering::Relaxed);
            }
            total.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
    });
    println!(
        "inflated {} {}members, {} bytes{}",
        members.len(),
        if all { "" } else { "ELF " },
        total.into_inner(),
        if hash {
            format!(", hashed (digest byte sum {})", digests.into_inner())
        } else {
            String::new()
        }
    );
}
