//! What would the device code weigh under another compression? Decompress every entry and
//! compress it again, so a maintainer sees the saving (and the driver floor it costs) before
//! spending a multi-hour rebuild on `--compress-mode`.
//!
//! This is the expensive path (torch 2.11's libtorch_cuda.so inflates to 4.4 GiB), taken only on
//! request. Every allocation is bounded: a header's uncompressed size is believed only up to
//! [`uncompressed_limit`] of its compressed size, and a payload that decompresses to anything but
//! exactly that size is an error.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{
    Compression, DriverReq, FatbinEntry, FatbinError, FatbinSummary, Kind, compression_floor,
};

/// No single cubin in a real build is near this; torch 2.11's largest entries are tens of MiB.
pub const MAX_ENTRY_UNCOMPRESSED: u64 = 1 << 30;
/// Ratio beyond which a header's uncompressed size is not believed (torch 2.11 averages ×15.8).
pub const MAX_RATIO: u64 = 1024;
/// Small entries may still claim this much, whatever their compressed size.
pub const RATIO_FLOOR: u64 = 64 << 20;

/// The most bytes an entry of `compressed` bytes is allowed to claim.
pub fn uncompressed_limit(compressed: u64) -> u64 {
    compressed
        .saturating_mul(MAX_RATIO)
        .clamp(RATIO_FLOOR, MAX_ENTRY_UNCOMPRESSED)
}

/// A compression to estimate: `none`, `lz4` (LZ4 block, what `-compress-all` writes) or
/// `zstd[:LEVEL]` (zstd's default level 3 when none is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressMode {
    /// Stored uncompressed.
    None,
    /// LZ4 block compression (what `-compress-all` writes).
    Lz4,
    /// One zstd frame at this level.
    Zstd(i32),
}

impl CompressMode {
    /// The compression an entry written in this mode would carry in its header flags.
    pub fn compression(self) -> Compression {
        match self {
            CompressMode::None => Compression::None,
            CompressMode::Lz4 => Compression::Lz4,
            CompressMode::Zstd(_) => Compression::Zstd,
        }
    }
}

impl fmt::Display for CompressMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressMode::None => write!(f, "none"),
            CompressMode::Lz4 => write!(f, "lz4"),
            CompressMode::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

crate::string_form!(CompressMode, "CompressMode", "^(none|lz4|zstd:-?[0-9]+)$");

/// An argument that is not a compression mode (`--what-if`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compression {given:?}: expected none, lz4, zstd or zstd:LEVEL ({min}..={max})")]
pub struct BadCompressMode {
    /// The argument as given.
    pub given: String,
    /// The zstd levels the linked library accepts.
    pub min: i32,
    /// The highest zstd level the linked library accepts.
    pub max: i32,
}

impl FromStr for CompressMode {
    type Err = BadCompressMode;
    fn from_str(s: &str) -> Result<Self, BadCompressMode> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("compress=").unwrap_or(&t);
        match t {
            "none" => return Ok(CompressMode::None),
            "lz4" => return Ok(CompressMode::Lz4),
            "zstd" | "zstd:default" => {
                return Ok(CompressMode::Zstd(zstd::DEFAULT_COMPRESSION_LEVEL));
            }
            _ => {}
        }
        let range = zstd::compression_level_range();
        if let Some(l) = t.strip_prefix("zstd:")
            && let Ok(level) = l.parse::<i32>()
            && range.contains(&level)
        {
            return Ok(CompressMode::Zstd(level));
        }
        Err(BadCompressMode {
            given: s.to_string(),
            min: *range.start(),
            max: *range.end(),
        })
    }
}

/// The entry's payload, decompressed and checked against the header's uncompressed size.
/// `bytes` holds the file from offset `base` on (the whole file: `base` 0).
pub fn decompress_entry(bytes: &[u8], base: u64, e: &FatbinEntry) -> Result<Vec<u8>, FatbinError> {
    decompress_with_limit(bytes, base, e, uncompressed_limit(e.compressed))
}

/// [`decompress_entry`] with an explicit cap on the uncompressed size.
pub fn decompress_with_limit(
    bytes: &[u8],
    base: u64,
    e: &FatbinEntry,
    limit: u64,
) -> Result<Vec<u8>, FatbinError> {
    let err = |reason: String| FatbinError::at(e.offset, reason);
    let stored = e
        .payload_offset()
        .checked_sub(base)
        .and_then(|start| Some((start, start.checked_add(e.stored)?)))
        .filter(|&(_, end)| end <= bytes.len() as u64)
        .map(|(start, end)| &bytes[start as usize..end as usize])
        .ok_or_else(|| {
            err(format!(
                "payload of {} bytes is outside the data given",
                e.stored
            ))
        })?;
    if e.compression == Compression::None {
        if e.uncompressed > e.stored {
            return Err(err(format!(
                "uncompressed entry claims {} bytes but stores {}",
                e.uncompressed, e.stored
            )));
        }
        return Ok(stored[..e.uncompressed as usize].to_vec());
    }
    if e.compression == Compression::Unknown {
        return Err(err(format!(
            "compression format unknown (flags {:#x})",
            e.flags
        )));
    }
    if e.compressed == 0 || e.compressed > e.stored {
        return Err(err(format!(
            "compressed size {} is not within the {} stored bytes",
            e.compressed, e.stored
        )));
    }
    if e.uncompressed > limit {
        return Err(err(format!(
            "claims {} uncompressed bytes from {} compressed (limit {limit}); refusing to allocate",
            e.uncompressed, e.compressed
        )));
    }
    let input = &stored[..e.compressed as usize];
    let want = e.uncompressed as usize;
    let out = match e.compression {
        Compression::Zstd => zstd::bulk::decompress(input, want)
            .map_err(|x| FatbinError::caused(e.offset, "zstd payload does not decompress", x))?,
        Compression::Lz4 => {
            let mut out = vec![0u8; want];
            let n = lz4_flex::block::decompress_into(input, &mut out)
                .map_err(|x| FatbinError::caused(e.offset, "LZ4 payload does not decompress", x))?;
            out.truncate(n);
            out
        }
        Compression::None | Compression::Unknown => unreachable!("handled above"),
    };
    if out.len() != want {
        return Err(err(format!(
            "payload decompresses to {} bytes, header says {want}",
            out.len()
        )));
    }
    Ok(out)
}

/// Bytes an entry's payload would take in the file (rounded up to 8, as nvcc stores them).
fn stored_len(n: usize) -> u64 {
    (n as u64).div_ceil(8) * 8
}

/// One zstd compressor per zstd mode (reused across a thread's entries), `None` for the others.
fn compressors(modes: &[CompressMode]) -> Vec<Option<zstd::bulk::Compressor<'static>>> {
    modes
        .iter()
        .map(|m| match m {
            CompressMode::Zstd(l) => zstd::bulk::Compressor::new(*l).ok(),
            _ => None,
        })
        .collect()
}

/// One entry decompressed and compressed under each mode: (stored length, seconds) per mode.
fn recompress(
    file: &[u8],
    e: &FatbinEntry,
    modes: &[CompressMode],
    ctx: &mut [Option<zstd::bulk::Compressor<'static>>],
) -> Result<Vec<(u64, f64)>, FatbinError> {
    let raw = decompress_entry(file, 0, e)?;
    let mut out = Vec::with_capacity(modes.len());
    for (i, m) in modes.iter().enumerate() {
        let t = Instant::now();
        let n = match m {
            CompressMode::None => raw.len(),
            CompressMode::Lz4 => lz4_flex::block::compress(&raw).len(),
            CompressMode::Zstd(l) => match ctx[i].as_mut() {
                Some(c) => c.compress(&raw).map(|v| v.len()),
                None => zstd::bulk::compress(&raw, *l).map(|v| v.len()),
            }
            .map_err(|x| FatbinError::caused(e.offset, "zstd compression failed", x))?,
        };
        out.push((stored_len(n), t.elapsed().as_secs_f64()));
    }
    Ok(out)
}

/// The entries of one (kind, architecture name) under one compression.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIfTarget {
    /// `ptx`, `elf` (SASS) or `other`.
    pub kind: Kind,
    /// cuobjdump's name: `sm_90a`.
    pub name: String,
    /// SM number: 90 for sm_90 / compute_90.
    pub arch: u32,
    /// Whether the target is arch-specific (the `a` of `sm_90a`).
    pub arch_specific: bool,
    /// Payload bytes of those entries, as stored in the file now (compressed entries count
    /// compressed).
    pub stored_now: u64,
    /// Payload bytes of those entries compressed under `mode`, each rounded up to 8.
    pub stored_after: u64,
}

/// One library's device code under one compression.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WhatIf {
    /// The compression estimated: `none`, `lz4` or `zstd:LEVEL`.
    pub mode: CompressMode,
    /// Entries decompressed and compressed again: every entry of the section.
    pub entries: u64,
    /// Measured by decompressing (equals the headers' claim, or the run fails).
    pub uncompressed: u64,
    /// Payload bytes now and after (headers and padding unchanged).
    pub stored_now: u64,
    /// Payload bytes with every entry compressed under `mode`, each rounded up to 8 as nvcc
    /// stores them.
    pub stored_after: u64,
    /// Bytes of `.nv_fatbin` now (the summary's `section_size`).
    pub section_now: u64,
    /// Bytes the section would take: `section_now - stored_now + stored_after`.
    pub section_after: u64,
    /// `section_now - section_after`: positive is a saving.
    pub saving: i64,
    /// The payload bytes per (kind, architecture name), ascending by architecture.
    pub targets: Vec<WhatIfTarget>,
    /// The driver floor this compression would impose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverReq>,
    /// Seconds spent compressing, summed over entries (threads overlap; a busy machine inflates it).
    /// Decompression is shared between modes and not included.
    pub compress_seconds: f64,
}

/// What a what-if will cost, measured on its first entries before the rest start: said before
/// the long part (zstd:19 recompresses torch 2.11's 4.4 GiB at a few MiB/s a thread).
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIfEstimate {
    /// The modes, as given.
    pub modes: Vec<CompressMode>,
    /// Uncompressed bytes of device code to recompress under each mode, the sample included.
    pub bytes: u64,
    /// Uncompressed bytes the rate was measured on (the first entries, in file order).
    pub sample: u64,
    /// Uncompressed bytes per second one thread gets through, every mode included.
    pub rate: f64,
    /// Threads that share the rest.
    pub threads: usize,
    /// Seconds the rest should take: `(bytes - sample) / rate / threads`.
    pub seconds: f64,
}

impl fmt::Display for WhatIfEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::output::human_bytes;
        let modes: Vec<String> = self.modes.iter().map(|m| m.to_string()).collect();
        write!(
            f,
            "{} recompresses {} of device code: estimate about {} on {} thread{} (~{}/s a thread, measured on the first {})",
            modes.join(", "),
            human_bytes(self.bytes),
            minutes(self.seconds),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            human_bytes(self.rate as u64),
            human_bytes(self.sample),
        )
    }
}

/// A duration as a person plans with it: seconds under two minutes, then minutes, then hours.
fn minutes(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{:.0} s", s.max(1.0)),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// Who follows a what-if: told the estimate once the sample is measured, then the uncompressed
/// bytes of each entry as it finishes (every mode done for it).
pub trait Watch: Sync {
    /// The estimate, once the sample is measured.
    fn estimate(&self, e: &WhatIfEstimate);
    /// One more entry finished: its uncompressed bytes (every mode done for it).
    fn done(&self, bytes: u64);
}

/// No one follows.
pub struct Unwatched;

impl Watch for Unwatched {
    fn estimate(&self, _: &WhatIfEstimate) {}
    fn done(&self, _: u64) {}
}

/// Entries measured on one thread before the estimate: the first this many uncompressed bytes
/// (at least one entry). 8 MiB takes a few seconds at zstd:19 and is real work, not thrown away.
pub const SAMPLE_BYTES: u64 = 8 << 20;

/// Decompress every entry of `s` once and compress it under each of `modes`. `file` is the whole
/// file (offsets in `s` are file offsets); `s` must keep its container layout.
pub fn what_if(
    file: &[u8],
    s: &FatbinSummary,
    modes: &[CompressMode],
) -> Result<Vec<WhatIf>, FatbinError> {
    what_if_watched(file, s, modes, &Unwatched)
}

/// [`what_if`], telling `watch` the estimate (measured on the first [`SAMPLE_BYTES`]) before the
/// rest starts, then each entry as it is done.
pub fn what_if_watched(
    file: &[u8],
    s: &FatbinSummary,
    modes: &[CompressMode],
    watch: &dyn Watch,
) -> Result<Vec<WhatIf>, FatbinError> {
    let entries: Vec<&FatbinEntry> = s.entries_in_order().collect();
    if entries.len() as u64 != s.entries {
        return Err(FatbinError::at(
            s.section_offset,
            "what-if needs the container layout; the summary was made without it",
        ));
    }
    let total: u64 = entries.iter().map(|e| e.uncompressed).sum();
    let mut taken = 0u64;
    let first = entries
        .iter()
        .take_while(|e| {
            let more = taken < SAMPLE_BYTES;
            taken += e.uncompressed;
            more
        })
        .count();
    let started = Instant::now();
    let mut ctx = compressors(modes);
    let mut sizes = Vec::with_capacity(entries.len());
    for e in &entries[..first] {
        sizes.push(recompress(file, e, modes, &mut ctx)?);
        watch.done(e.uncompressed);
    }
    let sample: u64 = entries[..first].iter().map(|e| e.uncompressed).sum();
    let rate = sample as f64 / started.elapsed().as_secs_f64().max(1e-6);
    let threads = rayon::current_num_threads().max(1);
    // A section without device code has nothing to estimate (and no rate to divide by).
    if sample > 0 {
        watch.estimate(&WhatIfEstimate {
            modes: modes.to_vec(),
            bytes: total,
            sample,
            rate,
            threads,
            seconds: total.saturating_sub(sample) as f64 / rate / threads as f64,
        });
    }
    // Per entry: compressed length and CPU time under each mode.
    let rest: Vec<Vec<(u64, f64)>> = entries[first..]
        .par_iter()
        .map_init(
            || compressors(modes),
            |ctx, e| {
                let r = recompress(file, e, modes, ctx)?;
                watch.done(e.uncompressed);
                Ok(r)
            },
        )
        .collect::<Result<_, FatbinError>>()?;
    sizes.extend(rest);
    Ok(summarise(s, &entries, modes, &sizes))
}

/// Per mode, the entries' sizes (`sizes[entry][mode]`) added up per target and for the section.
fn summarise(
    s: &FatbinSummary,
    entries: &[&FatbinEntry],
    modes: &[CompressMode],
    sizes: &[Vec<(u64, f64)>],
) -> Vec<WhatIf> {
    let uncompressed: u64 = entries.iter().map(|e| e.uncompressed).sum();
    let mut results = Vec::with_capacity(modes.len());
    for (i, &mode) in modes.iter().enumerate() {
        let mut targets: Vec<WhatIfTarget> = Vec::new();
        let (mut now, mut after, mut secs) = (0u64, 0u64, 0f64);
        for (e, per) in entries.iter().zip(sizes) {
            let (n, t) = per[i];
            now += e.stored;
            after += n;
            secs += t;
            let name = e.name();
            match targets
                .iter_mut()
                .find(|x| x.kind == e.kind && x.name == name)
            {
                Some(x) => {
                    x.stored_now += e.stored;
                    x.stored_after += n;
                }
                None => targets.push(WhatIfTarget {
                    kind: e.kind,
                    name,
                    arch: e.arch,
                    arch_specific: e.arch_specific,
                    stored_now: e.stored,
                    stored_after: n,
                }),
            }
        }
        targets.sort_by_key(|t| (t.arch, t.arch_specific, t.kind));
        let section_after = s.section_size.saturating_sub(now) + after;
        results.push(WhatIf {
            mode,
            entries: entries.len() as u64,
            uncompressed,
            stored_now: now,
            stored_after: after,
            section_now: s.section_size,
            section_after,
            saving: s.section_size as i64 - section_after as i64,
            targets,
            driver: compression_floor([mode.compression()]),
            compress_seconds: secs,
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!("none".parse::<CompressMode>().unwrap(), CompressMode::None);
        assert_eq!(
            "compress=lz4".parse::<CompressMode>().unwrap(),
            CompressMode::Lz4
        );
        assert_eq!(
            "zstd".parse::<CompressMode>().unwrap(),
            CompressMode::Zstd(3)
        );
        assert_eq!(
            "zstd:19".parse::<CompressMode>().unwrap().to_string(),
            "zstd:19"
        );
        assert!("zstd:99".parse::<CompressMode>().is_err());
        assert!("gzip".parse::<CompressMode>().is_err());
    }

    #[test]
    fn limits() {
        assert_eq!(uncompressed_limit(0), RATIO_FLOOR);
        assert_eq!(uncompressed_limit(u64::MAX), MAX_ENTRY_UNCOMPRESSED);
        assert_eq!(uncompressed_limit(1 << 20), MAX_ENTRY_UNCOMPRESSED);
    }
}
