//! Stop 46 (issue 28, item 3): can a search of our own bring `plan`'s scans of `.rodata` and
//! `.dynstr` down to the floor's one load per cache line? Three ways over the same bytes of
//! libtorch_cpu.so, each with exactly aho-corasick's leftmost-first matches (`check` asserts it):
//! `teddy` (aho-corasick, what `plan` uses), `c512` / `c256` (an AVX-512BW / AVX2 filter on the
//! case-folded first three bytes of every pattern, then an exact comparison at each candidate),
//! `touch` (the floor's loop), and `teddy3`: aho-corasick with one more pattern, `$DUMMY` (`\x01\x02\x03`
//! makes its fingerprint three bytes instead of four; what `search::Searcher` now does). Not part
//! of splitpkg: a standalone crate
//! (`cargo new scanexp`, dependencies aho-corasick 1.1, memmap2 0.9), run as
//!
//!     RO=<.rodata offset hex> ROS=<size hex> DS=<.dynstr offset hex> DSS=<size hex> \
//!         scanexp libtorch_cpu.so {check|touch|teddy|teddy3|c512|c256|tt|pread} [REPEATS]
//!
//! Stop 47 added `tt` (the floor's loop, then the search, each timed: the search's own work on
//! pages already mapped and read once), `pread` (the search over `CHUNK`-byte positioned reads
//! into one buffer instead of the map) and `REV=1` (`.dynstr` before `.rodata`). Results in
//! README.md.

use aho_corasick::{AhoCorasick, MatchKind};
use std::arch::x86_64::*;
use std::time::Instant;

fn folded_prefixes(pats: &[&str]) -> Vec<[u8; 3]> {
    let mut out: Vec<[u8; 3]> = Vec::new();
    for p in pats {
        let b = p.as_bytes();
        let f = [b[0] | 0x20, b[1] | 0x20, b[2] | 0x20];
        if !out.contains(&f) { out.push(f); }
    }
    out
}

#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn filter512<const P: usize>(data: &[u8], pre: &[[u8; 3]; P], out: &mut Vec<usize>) -> usize {
    let n = data.len();
    let fold = _mm512_set1_epi8(0x20);
    let mut c = [[_mm512_setzero_si512(); 3]; P];
    for j in 0..P { for k in 0..3 { c[j][k] = _mm512_set1_epi8(pre[j][k] as i8); } }
    let mut i = 0;
    while i + 64 + 2 <= n {
        let p = data.as_ptr().add(i);
        let v0 = _mm512_or_si512(_mm512_loadu_si512(p as *const _), fold);
        let v1 = _mm512_or_si512(_mm512_loadu_si512(p.add(1) as *const _), fold);
        let v2 = _mm512_or_si512(_mm512_loadu_si512(p.add(2) as *const _), fold);
        let mut any: u64 = 0;
        for j in 0..P {
            let k = _mm512_cmpeq_epi8_mask(v0, c[j][0]);
            let k = _mm512_mask_cmpeq_epi8_mask(k, v1, c[j][1]);
            let k = _mm512_mask_cmpeq_epi8_mask(k, v2, c[j][2]);
            any |= k;
        }
        while any != 0 {
            out.push(i + any.trailing_zeros() as usize);
            any &= any - 1;
        }
        i += 64;
    }
    i
}

#[target_feature(enable = "avx2")]
unsafe fn filter256<const P: usize>(data: &[u8], pre: &[[u8; 3]; P], out: &mut Vec<usize>) -> usize {
    let n = data.len();
    let fold = _mm256_set1_epi8(0x20);
    let mut c = [[_mm256_setzero_si256(); 3]; P];
    for j in 0..P { for k in 0..3 { c[j][k] = _mm256_set1_epi8(pre[j][k] as i8); } }
    let mut i = 0;
    while i + 32 + 2 <= n {
        let p = data.as_ptr().add(i);
        let v0 = _mm256_or_si256(_mm256_loadu_si256(p as *const _), fold);
        let v1 = _mm256_or_si256(_mm256_loadu_si256(p.add(1) as *const _), fold);
        let v2 = _mm256_or_si256(_mm256_loadu_si256(p.add(2) as *const _), fold);
        let mut acc = _mm256_setzero_si256();
        for j in 0..P {
            let m = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi8(v0, c[j][0]), _mm256_cmpeq_epi8(v1, c[j][1])), _mm256_cmpeq_epi8(v2, c[j][2]));
            acc = _mm256_or_si256(acc, m);
        }
        let mut any = _mm256_movemask_epi8(acc) as u32;
        while any != 0 {
            out.push(i + any.trailing_zeros() as usize);
            any &= any - 1;
        }
        i += 32;
    }
    i
}

fn filter_dispatch(data: &[u8], pre: &[[u8; 3]], out: &mut Vec<usize>, wide: bool) -> usize {
    unsafe {
        macro_rules! go { ($p:literal) => { if wide { filter512::<$p>(data, pre.try_into().unwrap(), out) } else { filter256::<$p>(data, pre.try_into().unwrap(), out) } } }
        match pre.len() { 1 => go!(1), 2 => go!(2), 3 => go!(3), 4 => go!(4), 5 => go!(5), 6 => go!(6), _ => 0 }
    }
}

fn scan_custom(data: &[u8], pats: &[&str], wide: bool) -> Vec<(usize, usize)> {
    let pre = folded_prefixes(pats);
    let mut cands = Vec::new();
    let done = filter_dispatch(data, &pre, &mut cands, wide);
    cands.extend(done..data.len());
    let mut out = Vec::new();
    let mut next = 0;
    for c in cands {
        if c < next { continue; }
        for (pi, p) in pats.iter().enumerate() {
            if data[c..].starts_with(p.as_bytes()) { out.push((c, pi)); next = c + p.len(); break; }
        }
    }
    out
}

fn hexenv(k: &str) -> usize { usize::from_str_radix(&std::env::var(k).unwrap(), 16).unwrap() }

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let mode = &args[2];
    let reps: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(1);
    let ranges: Vec<(usize, usize, Vec<&str>)> = vec![
        (hexenv("RO"), hexenv("ROS"), vec![".so", "magma", "Magma", "MAGMA"]),
        (hexenv("DS"), hexenv("DSS"), vec!["dlopen", "dlmopen", "14DynamicLibraryC", "PyInit_", "magma", "Magma", "MAGMA"]),
    ];
    let mut ranges = ranges;
    if std::env::var("REV").is_ok() {
        ranges.reverse();
    }
    let f = std::fs::File::open(path).unwrap();
    let acs: Vec<AhoCorasick> = ranges.iter().map(|r| AhoCorasick::builder().match_kind(MatchKind::LeftmostFirst).build(&r.2).unwrap()).collect();
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    let mut line = String::new();
    for _ in 0..reps {
        for (ri, (off, len, pats)) in ranges.iter().enumerate() {
            let data = &map[*off..*off + *len];
            let t = Instant::now();
            let r: usize = match mode.as_str() {
                "touch" => data.iter().step_by(64).map(|&b| b as usize).sum(),
                "tt" => {
                    let t1 = Instant::now();
                    let a: usize = data.iter().step_by(64).map(|&b| b as usize).sum();
                    line += &format!("(touch {:.3}) ", t1.elapsed().as_secs_f64() * 1e3);
                    let t2 = Instant::now();
                    let b: usize = acs[ri]
                        .find_iter(data)
                        .map(|m| m.start() + m.pattern().as_usize())
                        .sum();
                    line += &format!("(teddy {:.3}) ", t2.elapsed().as_secs_f64() * 1e3);
                    a + b
                }
                "pread" => {
                    use std::os::unix::fs::FileExt;
                    let chunk: usize = std::env::var("CHUNK").map_or(1 << 20, |c| c.parse().unwrap());
                    let mut buf = vec![0u8; chunk];
                    let (mut at, mut r) = (0, 0);
                    while at < *len {
                        let n = chunk.min(len - at);
                        f.read_exact_at(&mut buf[..n], (off + at) as u64).unwrap();
                        r += acs[ri]
                            .find_iter(&buf[..n])
                            .map(|m| m.start() + m.pattern().as_usize())
                            .sum::<usize>();
                        at += n;
                    }
                    r
                }
                "teddy" => acs[ri].find_iter(data).map(|m| m.start() + m.pattern().as_usize()).sum(),
                "teddy3" => { let mut p: Vec<String> = pats.iter().map(|s| s.to_string()).collect(); p.push(std::env::var("DUMMY").unwrap()); let ac = AhoCorasick::builder().match_kind(MatchKind::LeftmostFirst).build(&p).unwrap(); let t2 = Instant::now(); let r = ac.find_iter(data).map(|m| m.start() + m.pattern().as_usize()).sum(); line += &format!("(build {:.3}) ", (t2 - t).as_secs_f64()*1e3); r }
                "c512" => scan_custom(data, pats, true).iter().map(|m| m.0 + m.1).sum(),
                "c256" => scan_custom(data, pats, false).iter().map(|m| m.0 + m.1).sum(),
                "check" => { let a: Vec<(usize,usize)> = acs[ri].find_iter(data).map(|m| (m.start(), m.pattern().as_usize())).collect(); for w in [true,false] { let b = scan_custom(data, pats, w); assert_eq!(a, b); } a.len() }
                _ => panic!(),
            };
            line += &format!("{} {:.3} ", ["ro", "ds"][ri], t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(r);
        }
    }
    println!("{line}");
}
