//! Synthetic `.nv_fatbin` sections, byte-for-byte in the layout of `docs/fatbin.md`.
//!
//! There is no nvcc on the build machines, so tests, the fuzz seeds and smoke fixtures assemble
//! device code here: containers of PTX/ELF entries with zstd, LZ4-block or no compression, 64- or
//! 112-byte headers, zero padding between containers.

use super::{CONTAINER_MAGIC, Compression, flags};

/// One entry to write. `payload` is the stored payload before rounding up to 8 bytes.
#[derive(Debug, Clone)]
pub struct SynthEntry {
    /// The header's kind code: 1 PTX, 2 ELF (SASS).
    pub kind: u16,
    /// The architecture number (`90` for sm_90).
    pub arch: u32,
    /// The header's flag bits ([`flags`]): compression and the like.
    pub flags: u64,
    /// The header size written (64 before sm_100, 112 from it on).
    pub header_size: u32,
    /// The stored payload, before the rounding up to 8 bytes.
    pub payload: Vec<u8>,
    /// The header's compressed-size field: the payload's length, or 0 when uncompressed.
    pub compressed: u32,
    /// The payload's size uncompressed.
    pub uncompressed: u64,
}

impl SynthEntry {
    /// An ELF (SASS) entry holding `raw`, compressed as asked. Headers are 112 bytes from sm_100
    /// on, as nvcc writes them; 64 before.
    pub fn elf(arch: u32, raw: &[u8], compression: Compression) -> Self {
        Self::new(2, arch, raw, compression)
    }

    /// A PTX entry holding `text`, compressed as asked.
    pub fn ptx(arch: u32, text: &[u8], compression: Compression) -> Self {
        Self::new(1, arch, text, compression)
    }

    fn new(kind: u16, arch: u32, raw: &[u8], compression: Compression) -> Self {
        let (payload, bits) = match compression {
            Compression::None => (raw.to_vec(), 0),
            Compression::Zstd => (
                zstd::bulk::compress(raw, 3).expect("zstd compresses"),
                flags::ZSTD,
            ),
            Compression::Lz4 => (lz4_flex::block::compress(raw), flags::LZ4),
            Compression::Unknown => (raw.to_vec(), flags::COMPRESSED_OLD),
        };
        let ext = kind == 2 && arch >= 100;
        SynthEntry {
            kind,
            arch,
            flags: 0x11 | bits | if ext { 0x100_0000 } else { 0 },
            header_size: if ext { 112 } else { 64 },
            compressed: if compression == Compression::None {
                0
            } else {
                payload.len() as u32
            },
            uncompressed: raw.len() as u64,
            payload,
        }
    }

    /// The `a` variant (`sm_90a`).
    pub fn arch_specific(mut self) -> Self {
        self.flags |= flags::ARCH_SPECIFIC;
        self
    }

    /// The same entry with header size `n` written instead (hostile and unusual headers).
    pub fn with_header_size(mut self, n: u32) -> Self {
        self.header_size = n;
        self
    }

    /// Bytes of the payload as stored: rounded up to 8.
    pub fn stored(&self) -> u64 {
        (self.payload.len() as u64).div_ceil(8) * 8
    }

    /// The entry as it lies in the section: header, payload and padding.
    pub fn bytes(&self) -> Vec<u8> {
        let hs = self.header_size.max(64) as usize;
        let mut h = vec![0u8; hs];
        h[0..2].copy_from_slice(&self.kind.to_le_bytes());
        h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        h[4..8].copy_from_slice(&self.header_size.to_le_bytes());
        h[8..16].copy_from_slice(&self.stored().to_le_bytes());
        h[16..20].copy_from_slice(&self.compressed.to_le_bytes());
        h[20..24].copy_from_slice(&(if hs > 64 { 64u32 } else { 0 }).to_le_bytes());
        h[24..26].copy_from_slice(&8u16.to_le_bytes());
        h[26..28].copy_from_slice(&1u16.to_le_bytes());
        h[28..32].copy_from_slice(&self.arch.to_le_bytes());
        h[40..48].copy_from_slice(&self.flags.to_le_bytes());
        h[56..64].copy_from_slice(&self.uncompressed.to_le_bytes());
        h.truncate(self.header_size.max(64) as usize);
        let mut out = h;
        out.extend_from_slice(&self.payload);
        out.resize(out.len() + (self.stored() as usize - self.payload.len()), 0);
        out
    }
}

/// A container (16-byte header) of `entries` back to back.
pub fn container(entries: &[SynthEntry]) -> Vec<u8> {
    let body: Vec<u8> = entries.iter().flat_map(|e| e.bytes()).collect();
    let mut out = Vec::with_capacity(16 + body.len());
    out.extend_from_slice(&CONTAINER_MAGIC.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Containers with `padding` zero bytes after each (nvcc pads to 8).
pub fn section(containers: &[Vec<u8>], padding: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in containers {
        out.extend_from_slice(c);
        out.resize(out.len() + padding, 0);
    }
    out
}

/// Something shaped like a cubin: an EM_CUDA ELF header, then `len` bytes of compressible,
/// deterministic filler (instruction-like words with repeats), so compression ratios are plausible.
pub fn fake_cubin(arch: u32, len: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; len.max(64)];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[7] = 0x41;
    out[8] = 8;
    out[18..20].copy_from_slice(&190u16.to_le_bytes());
    out[48..52].copy_from_slice(&(arch << 8).to_le_bytes());
    let mut x = seed | 1;
    let mut i = 64;
    while i + 16 <= out.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Few distinct opcodes and small immediates: compresses roughly like SASS does.
        let word = [
            (x % 23) as u8,
            0x79,
            0,
            0,
            (x >> 8) as u8 & 0x0f,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            (x >> 16) as u8 & 3,
            0x0f,
            0,
        ];
        out[i..i + 16].copy_from_slice(&word);
        i += 16;
    }
    out.truncate(len);
    out
}

/// A small section in the shape of torch's: `containers` containers, each with the `archs`
/// cycle as zstd SASS, 8 bytes of padding between.
pub fn torch_like(containers: usize, archs: &[u32]) -> Vec<u8> {
    let cs: Vec<Vec<u8>> = (0..containers)
        .map(|c| {
            let entries: Vec<SynthEntry> = archs
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    SynthEntry::elf(
                        a,
                        &fake_cubin(a, 512 + 64 * i, (c * 31 + i) as u64),
                        Compression::Zstd,
                    )
                })
                .collect();
            container(&entries)
        })
        .collect();
    section(&cs, 8)
}

/// A 64-bit ELF holding `section` as `.nv_fatbin`: header and three section headers (null,
/// `.nv_fatbin`, `.shstrtab`), nothing else. For fuzz seeds and tests that need no gcc.
pub fn minimal_elf(section: &[u8]) -> Vec<u8> {
    let names = b"\0.nv_fatbin\0.shstrtab\0";
    let data_off = 64u64;
    let names_off = data_off + section.len() as u64;
    let shoff = (names_off + names.len() as u64).div_ceil(8) * 8;
    let mut out = vec![0u8; shoff as usize + 3 * 64];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2; // 64-bit
    out[5] = 1; // little-endian
    out[6] = 1;
    out[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    out[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes());
    out[58..60].copy_from_slice(&64u16.to_le_bytes());
    out[60..62].copy_from_slice(&3u16.to_le_bytes());
    out[62..64].copy_from_slice(&2u16.to_le_bytes());
    out[64..64 + section.len()].copy_from_slice(section);
    out[names_off as usize..names_off as usize + names.len()].copy_from_slice(names);
    let sh = |name: u32, typ: u32, off: u64, size: u64| {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&typ.to_le_bytes());
        h[24..32].copy_from_slice(&off.to_le_bytes());
        h[32..40].copy_from_slice(&size.to_le_bytes());
        h[48..56].copy_from_slice(&1u64.to_le_bytes());
        h
    };
    let s = shoff as usize;
    out[s + 64..s + 128].copy_from_slice(&sh(1, 1, data_off, section.len() as u64));
    out[s + 128..s + 192].copy_from_slice(&sh(12, 3, names_off, names.len() as u64));
    out
}
