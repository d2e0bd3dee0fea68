//! What a library does to the rest of the process while it is loaded: the imported symbols the
//! code run at load refers to. The only reader of code (`.text`) in this module tree, and only of
//! the few functions `DT_INIT`/`DT_INIT_ARRAY` name, plus the local functions they call.
//!
//! Why: a lazily loaded library usually exports nothing the core calls by name. It announces its
//! kernels from static initialisers instead — PyTorch's `REGISTER_CUDA_DISPATCH(stub, fn)` stores
//! `fn` into the `DispatchStub` object `stub` that lives in `libtorch_cpu.so`, and a
//! `DispatchInitializer` calls `registerLinalgDispatch` of `libtorch_cuda.so`. Those objects and
//! functions are imports of the library, reached from the initialiser through the GOT (or a PLT
//! stub). So "which core objects and functions does the code run at load touch" is readable from
//! any build without knowing PyTorch's macros, its symbol names or its release: the `stub` names
//! are whatever the core defines, and the rule is the same in torch 1.10 and 2.11.
//!
//! How (little-endian x86-64 and AArch64; other machines answer `None`, and a check that needs
//! the answer says it was not made): on x86-64 every position of an initialiser is tried as the
//! end of a RIP-relative `disp32`, and as a `call rel32` (`E8`). A `disp32` whose target is a GOT
//! slot the dynamic relocations bind to an imported symbol is a reference to that symbol (the
//! `mov reg, [rip+disp]` that loads an imported object's address ends with its displacement); a
//! call into a PLT stub (`[endbr64] [bnd] jmp *[rip+disp]`) is a call of the slot's symbol; a call
//! to the start of another function of the file (from `.eh_frame_hdr` or `.symtab`) is followed,
//! as that function also runs at load. An exact GOT-slot or function-start hit by chance bytes
//! is rare, and a chance hit can only add a name, never hide one. A tail call (`jmp rel32` or
//! `jmp rel8` into a PLT stub or a function start) is followed as a call is. On AArch64 the same
//! questions are asked of the addresses `ADRP` + `LDR`/`ADD` compute and of `BL`/`B` targets
//! ([`super::aarch64`]); a `BLR`/`BR` through a register is seen by the `LDR` of the GOT slot
//! that loaded it.

use std::collections::BTreeSet;

// Looked up at every byte of the code run at load (~100k times on torch 2.11's linalg): a fast
// hash for addresses.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use goblin::elf::dynamic;
use goblin::elf::header;
use goblin::elf::program_header;

use super::ElfView;

/// Longest stretch of code read as one function when the next function start is unknown.
const MAX_FUNCTION: u64 = 64 * 1024;
/// Functions read in all (initialisers and what they call), so hostile input stays cheap.
const MAX_FUNCTIONS: usize = 1024;
/// Calls followed from an initialiser.
const MAX_DEPTH: usize = 3;

/// The instruction sets whose code run at load is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Little-endian x86-64.
    X86_64,
    /// Little-endian AArch64.
    Aarch64,
}

impl Isa {
    /// The set a file's code is in, if it is one read (64-bit little-endian only: the ELF
    /// tables below are read as such).
    pub fn of(machine: u16, is_64: bool, little_endian: bool) -> Option<Isa> {
        match machine {
            _ if !is_64 || !little_endian => None,
            header::EM_X86_64 => Some(Isa::X86_64),
            header::EM_AARCH64 => Some(Isa::Aarch64),
            _ => None,
        }
    }

    /// The relocation types that bind a slot to a symbol's address: the absolute word, the
    /// GOT entry, the PLT's GOT entry (`R_X86_64_64`, `GLOB_DAT`, `JUMP_SLOT`;
    /// `R_AARCH64_ABS64`, `GLOB_DAT`, `JUMP_SLOT`).
    fn binding_relocs(self) -> [u32; 3] {
        match self {
            Isa::X86_64 => [1, 6, 7],
            Isa::Aarch64 => [257, 1025, 1026],
        }
    }

    /// `R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`: base + addend.
    fn relative_reloc(self) -> u32 {
        match self {
            Isa::X86_64 => 8,
            Isa::Aarch64 => 1027,
        }
    }
}

impl<'a> ElfView<'a> {
    /// Names (without version) of the imported symbols the code run at load refers to, sorted.
    /// `None` for a file whose code this reader does not decode ([`Isa::of`]).
    pub fn load_time_imports(&self) -> Option<Vec<String>> {
        let isa = self.isa()?;
        // The relocations and the function starts are independent walks of different tables (the
        // latter the whole `.symtab` of a library with the payload linked in): side by side.
        let ((slots, initialisers), starts) = rayon::join(
            || {
                let relocs = self.relocations();
                (
                    self.got_slots(&relocs, isa),
                    self.initialisers(&relocs, isa),
                )
            },
            || self.function_starts(),
        );
        let Some(slots) = slots else {
            return Some(Vec::new());
        };
        let mut queue: Vec<(u64, usize)> = initialisers.into_iter().map(|a| (a, 0)).collect();
        let mut seen: HashSet<u64> = HashSet::default();
        let mut out: BTreeSet<&str> = BTreeSet::new();
        while let Some((addr, depth)) = queue.pop() {
            if seen.len() >= MAX_FUNCTIONS || !seen.insert(addr) {
                continue;
            }
            let limit = addr.saturating_add(MAX_FUNCTION);
            let end = starts.next_after(addr, limit).unwrap_or(limit);
            // No function runs on past its section: `_init` has no start after it in `.init`, and
            // a sweep beyond it read `.plt`, whose GOT loads are every PLT import.
            let end = self.section_end(addr).map_or(end, |e| end.min(e));
            let Some(code) = self.code(addr, end) else {
                continue;
            };
            // A call: of the slot's symbol through a PLT stub, or of a function to read too.
            let mut follow = |target: u64| -> Option<&'a str> {
                if let Some(name) = self
                    .plt_stub_target(target, isa)
                    .and_then(|slot| slots.get(&slot))
                {
                    return Some(*name);
                }
                if depth < MAX_DEPTH && target != addr && starts.contains(target) {
                    queue.push((target, depth + 1));
                }
                None
            };
            match isa {
                Isa::X86_64 => x86_64_references(code, addr, &slots, &mut out, &mut follow),
                Isa::Aarch64 => super::aarch64::references(code, addr, |r| match r {
                    super::aarch64::Reference::Address(a) => {
                        if let Some(name) = slots.get(&a) {
                            out.insert(name);
                        }
                    }
                    super::aarch64::Reference::Call(t) => out.extend(follow(t)),
                }),
            }
        }
        Some(out.into_iter().map(str::to_string).collect())
    }

    /// The instruction set of the file's code, if it is one read.
    pub fn isa(&self) -> Option<Isa> {
        Isa::of(
            self.header.e_machine,
            self.ctx.container.is_big(),
            self.ctx.is_little_endian(),
        )
    }

    /// GOT slot address -> the imported symbol the dynamic relocations bind it to; `None` without
    /// a dynamic symbol table.
    fn got_slots(&self, relocs: &[Reloc], isa: Isa) -> Option<HashMap<u64, &'a str>> {
        let (symbols, strs) = self.dynsym_table()?;
        let mut slots = HashMap::default();
        let binding = isa.binding_relocs();
        for r in relocs
            .iter()
            .filter(|r| binding.contains(&r.kind) && r.sym != 0)
        {
            if let Some(s) = symbols.get(r.sym as usize)
                && !s.defined()
                && let Some(name) = super::cstr_at(strs, s.name as usize)
                && !name.is_empty()
            {
                slots.insert(r.offset, name);
            }
        }
        Some(slots)
    }

    /// Entry points of the code run at load: `DT_INIT` and the `DT_INIT_ARRAY` entries. An entry
    /// the file leaves 0 gets its value from its `RELATIVE` relocation.
    fn initialisers(&self, relocs: &[Reloc], isa: Isa) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .dyn_val(dynamic::DT_INIT)
            .into_iter()
            .filter(|&a| a != 0)
            .collect();
        let (Some(array), Some(size)) = (
            self.dyn_val(dynamic::DT_INIT_ARRAY),
            self.dyn_val(dynamic::DT_INIT_ARRAYSZ),
        ) else {
            return out;
        };
        let relative: HashMap<u64, u64> = relocs
            .iter()
            .filter(|r| {
                r.kind == isa.relative_reloc() && r.offset >= array && r.offset - array < size
            })
            .map(|r| (r.offset, r.addend as u64))
            .collect();
        for k in 0..(size / 8).min(MAX_FUNCTIONS as u64) {
            let slot = array.wrapping_add(8 * k);
            let stored = self
                .vaddr_to_offset(slot)
                .and_then(|o| self.bytes.get(o..o + 8))
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
            match stored
                .filter(|&v| v != 0 && v != u64::MAX)
                .or_else(|| relative.get(&slot).copied())
            {
                Some(a) if a != 0 => out.push(a),
                _ => {}
            }
        }
        out
    }

    /// The GOT slot a PLT stub at `addr` jumps through, if `addr` is one.
    fn plt_stub_target(&self, addr: u64, isa: Isa) -> Option<u64> {
        let code = self.code(addr, addr.saturating_add(20))?;
        if isa == Isa::Aarch64 {
            return super::aarch64::plt_stub_slot(code, addr);
        }
        let mut i = 0;
        if code.starts_with(&[0xF3, 0x0F, 0x1E, 0xFA]) {
            i += 4; // endbr64 (IBT's .plt.sec)
        }
        if code.get(i) == Some(&0xF2) {
            i += 1; // bnd (MPX)
        }
        if code.get(i..i + 2) != Some(&[0xFF, 0x25]) {
            return None;
        }
        let d = code.get(i + 2..i + 6)?;
        let rel = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64;
        Some(addr.wrapping_add(i as u64 + 6).wrapping_add_signed(rel))
    }

    /// The end address of the executable section holding `addr`, when the file has section
    /// headers.
    fn section_end(&self, addr: u64) -> Option<u64> {
        use goblin::elf::section_header::{SHF_ALLOC, SHF_EXECINSTR};
        let exec = (SHF_ALLOC | SHF_EXECINSTR) as u64;
        self.shdrs
            .iter()
            .filter(|s| s.sh_flags & exec == exec)
            .find(|s| addr >= s.sh_addr && addr - s.sh_addr < s.sh_size)
            .map(|s| s.sh_addr.saturating_add(s.sh_size))
    }

    /// File bytes of `start..end`, cut at the end of the executable segment holding `start`.
    fn code(&self, start: u64, end: u64) -> Option<&'a [u8]> {
        let ph = self.phdrs.iter().find(|p| {
            p.p_type == program_header::PT_LOAD
                && p.p_flags & program_header::PF_X != 0
                && start >= p.p_vaddr
                && start - p.p_vaddr < p.p_filesz
        })?;
        let end = end.min(ph.p_vaddr.saturating_add(ph.p_filesz)).max(start);
        let off = self.vaddr_to_offset(start)?;
        self.bytes.get(off..off + (end - start) as usize)
    }

    /// Function start addresses: the `.eh_frame_hdr` search table (every function with unwind
    /// information, kept by `strip`) and, when present, `.symtab`'s functions. A file with the
    /// payload linked in has ~55k of each (torch 2.11's linalg library), and the decoder asks
    /// about the few hundred functions run at load: marking them in a bitmap of the code's
    /// addresses costs a tenth of sorting and merging the two lists, which was 1–1.3 ms of the
    /// walk every `plan` of a tree waits for ([`FunctionStarts`]).
    fn function_starts(&self) -> FunctionStarts {
        let mut table: &[u8] = &[];
        let mut base = 0u64;
        if let Some(ph) = self.phdrs.iter().find(|p| p.p_type == program_header::PT_GNU_EH_FRAME)
            && let Some(hdr) = super::file_range(self.bytes.len() as u64, ph.p_offset, ph.p_filesz).map(|r| &self.bytes[r])
            // version 1, table encoded DW_EH_PE_datarel|sdata4, count DW_EH_PE_udata4, frame pointer 4 bytes
            && hdr.len() >= 12
            && hdr[0] == 1
            && hdr[2] == 0x03
            && hdr[3] == 0x3b
            && matches!(hdr[1] & 0x0f, 0x03 | 0x0b)
        {
            let count = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
            let rest = &hdr[12..];
            table = &rest[..rest.len().min(count.saturating_mul(8)) / 8 * 8];
            base = ph.p_vaddr;
        }
        // Read in place, twice (span, then bits): collecting the 55k entries first cost a copy.
        let unwound = table.chunks_exact(8).map(move |pair| {
            let rel = i32::from_le_bytes(pair[..4].try_into().unwrap()) as i64;
            base.wrapping_add_signed(rel)
        });
        let symbols: Vec<u64> = match self.symtab() {
            Some((symtab, _)) => {
                // Sized for the whole table up front: grown by doubling, the ~440 KB of starts
                // were copied and faulted in again at every step.
                let mut v = Vec::with_capacity(symtab.len());
                v.extend(
                    symtab
                        .iter()
                        .filter(|s| {
                            s.kind() == goblin::elf::sym::STT_FUNC && s.defined() && s.value != 0
                        })
                        .map(|s| s.value),
                );
                v
            }
            None => Vec::new(),
        };
        FunctionStarts::new(unwound, symbols)
    }

    /// `DT_RELA` and `DT_JMPREL` entries (x86-64 and AArch64 use RELA only).
    fn relocations(&self) -> Vec<Reloc> {
        let mut out = Vec::new();
        for (at, size) in [
            (dynamic::DT_RELA, dynamic::DT_RELASZ),
            (dynamic::DT_JMPREL, dynamic::DT_PLTRELSZ),
        ] {
            let (Some(addr), Some(len)) = (self.dyn_val(at), self.dyn_val(size)) else {
                continue;
            };
            let Some(bytes) = self
                .vaddr_to_offset(addr)
                .and_then(|o| super::file_range(self.bytes.len() as u64, o as u64, len))
                .map(|r| &self.bytes[r])
            else {
                continue;
            };
            out.extend(bytes.chunks_exact(24).map(|e| {
                let info = u64::from_le_bytes(e[8..16].try_into().unwrap());
                Reloc {
                    offset: u64::from_le_bytes(e[..8].try_into().unwrap()),
                    kind: info as u32,
                    sym: (info >> 32) as u32,
                    addend: i64::from_le_bytes(e[16..24].try_into().unwrap()),
                }
            }));
        }
        out
    }
}

/// x86-64: every byte offset of `code` (at `addr`) tried as the end of a RIP-relative `disp32`
/// naming a GOT slot, as a `call rel32` (`E8`) and as a tail call's `jmp rel32` (`E9`) or
/// `jmp rel8` (`EB`: gcc -O2 ends a function with `jmp` to its last callee, the short form when
/// the callee is a nearby function of the same section), whose targets go to `follow`. A jump
/// inside the function (a loop, an `if`) lands on no function start and no PLT stub, so `follow`
/// ignores it; a function is read once however many jumps reach it (the caller's `seen`).
fn x86_64_references<'a>(
    code: &[u8],
    addr: u64,
    slots: &HashMap<u64, &'a str>,
    out: &mut BTreeSet<&'a str>,
    follow: &mut impl FnMut(u64) -> Option<&'a str>,
) {
    for i in 0..code.len() {
        let here = addr.wrapping_add(i as u64);
        if i > 0 && code[i - 1] == 0xEB {
            let rel = code[i] as i8 as i64;
            out.extend(follow(here.wrapping_add(1).wrapping_add_signed(rel)));
        }
        let Some(d) = code.get(i..i + 4) else {
            continue;
        };
        let rel = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64;
        let target = here.wrapping_add(4).wrapping_add_signed(rel);
        if let Some(name) = slots.get(&target) {
            out.insert(name);
        }
        if i > 0 && matches!(code[i - 1], 0xE8 | 0xE9) {
            out.extend(follow(target));
        }
    }
}

/// A set of function start addresses, asked two things: is an address one, and which is the
/// first after an address (below a limit).
enum FunctionStarts {
    /// One bit per byte of the address span the starts cover, `lo` first.
    Bitmap { lo: u64, bits: Vec<u64> },
    /// Sorted, each once: for starts spread over [`FunctionStarts::MAX_SPAN`] bytes or more (a
    /// huge or hostile file), where the bitmap would cost more than sorting.
    Sorted(Vec<u64>),
}

impl FunctionStarts {
    /// Widest span of addresses kept as a bitmap (8 MiB of bits; torch 2.11's linalg library
    /// spans 7.5 MB, a 0.9 MiB bitmap).
    const MAX_SPAN: u64 = 64 << 20;

    fn new(a: impl IntoIterator<Item = u64, IntoIter: Clone>, b: Vec<u64>) -> Self {
        let a = a.into_iter();
        let span = a
            .clone()
            .chain(b.iter().copied())
            .fold(None, |span, s| match span {
                None => Some((s, s)),
                Some((lo, hi)) => Some((s.min(lo), s.max(hi))),
            });
        let Some((lo, hi)) = span else {
            return FunctionStarts::Sorted(Vec::new());
        };
        if hi - lo >= Self::MAX_SPAN {
            return FunctionStarts::sorted(a.collect(), b);
        }
        let mut bits = vec![0u64; ((hi - lo) / 64 + 1) as usize];
        for s in a.chain(b) {
            let i = s - lo;
            bits[(i / 64) as usize] |= 1 << (i % 64);
        }
        FunctionStarts::Bitmap { lo, bits }
    }

    /// The sorted form of the starts in `a` and `b`.
    fn sorted(mut a: Vec<u64>, b: Vec<u64>) -> Self {
        a.extend(b);
        a.sort_unstable();
        a.dedup();
        FunctionStarts::Sorted(a)
    }

    fn contains(&self, addr: u64) -> bool {
        match self {
            FunctionStarts::Bitmap { lo, bits } => addr.checked_sub(*lo).is_some_and(|i| {
                bits.get((i / 64) as usize)
                    .is_some_and(|w| w & (1 << (i % 64)) != 0)
            }),
            FunctionStarts::Sorted(v) => v.binary_search(&addr).is_ok(),
        }
    }

    /// The first start above `addr` and below `limit`.
    fn next_after(&self, addr: u64, limit: u64) -> Option<u64> {
        let found = match self {
            FunctionStarts::Bitmap { lo, bits } => {
                // From the bit after `addr` (or the first bit), one word at a time up to `limit`.
                let from = addr.saturating_add(1).max(*lo) - lo;
                let end = limit.saturating_sub(*lo).min(bits.len() as u64 * 64);
                let mut w = from / 64;
                let mut word =
                    bits.get(w as usize).copied().unwrap_or(0) & (u64::MAX << (from % 64));
                loop {
                    if word != 0 {
                        break Some(lo + w * 64 + u64::from(word.trailing_zeros()));
                    }
                    w += 1;
                    if w * 64 >= end {
                        break None;
                    }
                    word = bits[w as usize];
                }
            }
            FunctionStarts::Sorted(v) => v.get(v.partition_point(|&s| s <= addr)).copied(),
        };
        found.filter(|&s| s < limit)
    }
}

struct Reloc {
    offset: u64,
    kind: u32,
    sym: u32,
    addend: i64,
}

#[cfg(test)]
mod tests {
    use super::{FunctionStarts, HashMap, x86_64_references};
    use std::collections::BTreeSet;

    /// The x86-64 sweep hands `follow` the target of a `call rel32`, a tail call's `jmp rel32`
    /// and its short `jmp rel8` (the forms `objdump -d` shows for gcc -O2's tail calls:
    /// it_variant_contract's fixture), each once, and reads a GOT slot's displacement.
    #[test]
    fn calls_and_tail_jumps_are_followed() {
        let at = 0x1000u64;
        let code = [
            0xE8, 0xFB, 0x00, 0x00, 0x00, // 0x1000 call 0x1100
            0xE9, 0xF6, 0x01, 0x00, 0x00, // 0x1005 jmp 0x1200
            0xEB, 0x10, // 0x100a jmp 0x101c
            0x48, 0x8B, 0x05, 0xED, 0x2F, 0x00, 0x00, // 0x100c mov rax, [rip+0x2fed] (0x4000)
        ];
        let slots: HashMap<u64, &str> = [(0x4000, "slot_sym")].into_iter().collect();
        let mut out = BTreeSet::new();
        let mut targets = Vec::new();
        x86_64_references(&code, at, &slots, &mut out, &mut |t| {
            targets.push(t);
            (t == 0x1200).then_some("tail_callee")
        });
        for t in [0x1100, 0x1200, 0x101c] {
            assert_eq!(
                targets.iter().filter(|&&x| x == t).count(),
                1,
                "{t:#x}: {targets:x?}"
            );
        }
        assert_eq!(
            out.into_iter().collect::<Vec<_>>(),
            ["slot_sym", "tail_callee"]
        );
    }

    /// The bitmap answers as the sorted list does, at the edges of words, of the span and of
    /// the limit, for starts given twice and in any order.
    #[test]
    fn bitmap_and_sorted_starts_answer_alike() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let base = 0x40_0000 + (next() % 4096);
            let n = (next() % 300) as usize + round % 2;
            let a: Vec<u64> = (0..n).map(|_| base + next() % 20_000).collect();
            let b: Vec<u64> = a
                .iter()
                .step_by(3)
                .copied()
                .chain((0..n / 2).map(|_| base + next() % 20_000))
                .collect();
            let bitmap = FunctionStarts::new(a.clone(), b.clone());
            assert!(matches!(bitmap, FunctionStarts::Bitmap { .. }) || n == 0);
            let sorted = FunctionStarts::sorted(a.clone(), b.clone());
            for q in (base.saturating_sub(130)..base + 20_130).step_by(7).chain([
                0,
                u64::MAX - 1,
                u64::MAX,
            ]) {
                assert_eq!(bitmap.contains(q), sorted.contains(q), "contains {q:#x}");
                for limit in [
                    q.saturating_add(1),
                    q.saturating_add(64),
                    q.saturating_add(1000),
                    u64::MAX,
                ] {
                    assert_eq!(
                        bitmap.next_after(q, limit),
                        sorted.next_after(q, limit),
                        "next after {q:#x} below {limit:#x}"
                    );
                }
            }
        }
        assert!(matches!(
            FunctionStarts::new(vec![0x1000, 0x1000 + FunctionStarts::MAX_SPAN], vec![]),
            FunctionStarts::Sorted(_)
        ));
        assert_eq!(
            FunctionStarts::new(vec![], vec![]).next_after(0, u64::MAX),
            None
        );
    }

    #[test]
    fn the_sorted_form_keeps_each_start_once_in_order() {
        let sorted = |a: &[u64], b: &[u64]| match FunctionStarts::sorted(a.to_vec(), b.to_vec()) {
            FunctionStarts::Sorted(v) => v,
            FunctionStarts::Bitmap { .. } => unreachable!(),
        };
        assert_eq!(sorted(&[], &[]), Vec::<u64>::new());
        assert_eq!(sorted(&[1, 4, 9], &[]), vec![1, 4, 9]);
        assert_eq!(sorted(&[], &[2, 2, 3]), vec![2, 3]);
        assert_eq!(
            sorted(&[1, 4, 4, 9, 12], &[0, 4, 5, 9, 9, 20]),
            vec![0, 1, 4, 5, 9, 12, 20]
        );
    }
}
