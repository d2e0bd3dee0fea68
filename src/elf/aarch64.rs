//! The few A64 instructions the load-time reader needs ([`super::load_time`]): how AArch64 code
//! names a GOT slot (`ADRP` of its page, then `LDR` of the slot or `ADD` of its offset; `ADR`
//! and `LDR` (literal) where the linker relaxed the pair) and where it calls (`BL`, and `B` for a
//! tail call). Everything else is skipped, as a register whose value is no longer known.
//!
//! Why a decoder of our own: six fixed-width encodings are all it takes, and a disassembler crate
//! would bring thousands of lines to read them. Unlike x86-64, where every byte offset is tried
//! as the end of a `disp32`, an address here is split over two instructions, so registers are
//! followed through a linear sweep of the function: an `ADRP` sets one, the `ADD`/`LDR` that uses
//! it gives the address. An instruction not decoded forgets the register its low five bits name
//! (the destination of nearly every A64 instruction that writes one), and a call forgets the
//! registers a callee may change: a stale page can only give a wrong address, never hide a slot.

/// What one instruction refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reference {
    /// An address the code loads from or computes (a GOT slot, when it is one).
    Address(u64),
    /// The target of a `BL` or a `B` (a PLT stub, or another function run at load).
    Call(u64),
}

/// `BTI c`, which a BTI-enabled PLT stub (and function) starts with.
const BTI_C: u32 = 0xD503_245F;

/// Every [`Reference`] the code at `addr` makes, in order.
pub(super) fn references(code: &[u8], addr: u64, mut found: impl FnMut(Reference)) {
    // The value of x0..x30 where it is known; 31 (SP / XZR) never is.
    let mut regs: [Option<u64>; 32] = [None; 32];
    for (k, word) in code.chunks_exact(4).enumerate() {
        let pc = addr.wrapping_add(4 * k as u64);
        let insn = u32::from_le_bytes(word.try_into().unwrap());
        let rd = (insn & 31) as usize;
        let rn = ((insn >> 5) & 31) as usize;
        match decode(insn, pc) {
            Some(Insn::Adr(value)) => regs[rd] = Some(value),
            Some(Insn::AddImm(imm)) => {
                // An address computed rather than loaded counts as x86-64's `lea` does.
                regs[rd] = regs[rn].map(|v| v.wrapping_add(imm));
                if let Some(value) = regs[rd] {
                    found(Reference::Address(value));
                }
            }
            Some(Insn::LdrImm(imm)) => {
                if let Some(base) = regs[rn] {
                    found(Reference::Address(base.wrapping_add(imm)));
                }
                regs[rd] = None;
            }
            Some(Insn::LdrLiteral(at)) => {
                found(Reference::Address(at));
                regs[rd] = None;
            }
            Some(Insn::Branch { target, link }) => {
                found(Reference::Call(target));
                if link {
                    // AAPCS64: x0..x18 and the link register are the callee's to change.
                    regs[..19].fill(None);
                    regs[30] = None;
                }
            }
            None => regs[rd] = None,
        }
        regs[31] = None;
    }
}

/// The GOT slot a PLT stub at `code` (address `addr`) jumps through, if it is one:
/// `[BTI c] ADRP x16, page; LDR x17, [x16, #off]; ADD x16, x16, #off; BR x17`.
pub(super) fn plt_stub_slot(code: &[u8], addr: u64) -> Option<u64> {
    let mut words = code
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()));
    let mut pc = addr;
    let mut first = words.next()?;
    if first == BTI_C {
        first = words.next()?;
        pc = pc.wrapping_add(4);
    }
    let second = words.next()?;
    let third = words.next()?;
    let fourth = words.next()?;
    // x16 is the page, x17 the loaded target, and the stub ends in `BR x17`.
    let (Some(Insn::Adr(page)), Some(Insn::LdrImm(off))) = (decode(first, pc), decode(second, 0))
    else {
        return None;
    };
    let is_br_x17 = fourth == 0xD61F_0220;
    let regs_fit = first & 31 == 16 && second & 31 == 17 && (second >> 5) & 31 == 16;
    let adds_to_x16 = matches!(decode(third, 0), Some(Insn::AddImm(_))) && third & 0x3FF == 0x210;
    (is_br_x17 && regs_fit && adds_to_x16 && first & 0x8000_0000 != 0)
        .then(|| page.wrapping_add(off))
}

/// The instructions decoded, with what each adds or points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Insn {
    /// `ADRP` (the page of `pc` plus the immediate) or `ADR` (`pc` plus it): a known value.
    Adr(u64),
    /// `ADD Xd, Xn, #imm` (64-bit, immediate, shifted or not).
    AddImm(u64),
    /// `LDR Xt, [Xn, #imm]` (64-bit, unsigned offset, already scaled).
    LdrImm(u64),
    /// `LDR Xt, label` (64-bit literal): the address loaded from.
    LdrLiteral(u64),
    /// `B` or `BL`.
    Branch { target: u64, link: bool },
}

fn decode(insn: u32, pc: u64) -> Option<Insn> {
    let sext = |value: u32, bits: u32| ((value << (32 - bits)) as i32 >> (32 - bits)) as i64;
    if insn & 0x1F00_0000 == 0x1000_0000 {
        // ADR / ADRP: op, immlo (2 bits), 10000, immhi (19 bits), Rd.
        let imm = sext((((insn >> 5) & 0x7FFFF) << 2) | ((insn >> 29) & 3), 21);
        return Some(Insn::Adr(if insn & 0x8000_0000 != 0 {
            (pc & !0xFFF).wrapping_add_signed(imm << 12)
        } else {
            pc.wrapping_add_signed(imm)
        }));
    }
    if insn & 0xFF80_0000 == 0x9100_0000 {
        let imm = u64::from((insn >> 10) & 0xFFF);
        return Some(Insn::AddImm(if insn & (1 << 22) != 0 {
            imm << 12
        } else {
            imm
        }));
    }
    if insn & 0xFFC0_0000 == 0xF940_0000 {
        return Some(Insn::LdrImm(u64::from((insn >> 10) & 0xFFF) * 8));
    }
    if insn & 0xFF00_0000 == 0x5800_0000 {
        let imm = sext((insn >> 5) & 0x7FFFF, 19);
        return Some(Insn::LdrLiteral(pc.wrapping_add_signed(imm * 4)));
    }
    if insn & 0x7C00_0000 == 0x1400_0000 {
        let imm = sext(insn & 0x03FF_FFFF, 26);
        return Some(Insn::Branch {
            target: pc.wrapping_add_signed(imm * 4),
            link: insn & 0x8000_0000 != 0,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings from the Arm ARM, as GNU as writes them.
    #[test]
    fn the_got_load_the_address_and_the_calls_are_read() {
        // At 0x1000: the GOT load of a slot, an address computed, a call and a tail call, then a
        // register overwritten by an instruction not decoded: its old page is not used.
        let words: [u32; 8] = [
            0xF000_00E1, // adrp x1, 0x20000 (page 0x1000 + 31 pages)
            0xF947_F021, // ldr x1, [x1, #0xfe0]
            0xB000_0000, // adrp x0, 0x2000 (page 0x1000 + 1 page)
            0x9100_4000, // add x0, x0, #0x10
            0x9400_0030, // bl +0xc0 (pc 0x1010 → 0x10d0)
            0x17FF_FFC3, // b -0xf4 (pc 0x1014 → 0x0f20)
            0xAA02_03E1, // mov x1, x2
            0xF940_0423, // ldr x3, [x1, #8]
        ];
        let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut seen = Vec::new();
        references(&code, 0x1000, |r| seen.push(r));
        assert_eq!(
            seen,
            [
                Reference::Address(0x20000 + 0xfe0),
                Reference::Address(0x2010),
                Reference::Call(0x10d0),
                Reference::Call(0x0f20),
            ]
        );
    }

    #[test]
    fn a_plt_stub_gives_its_slot_with_or_without_bti() {
        let stub: [u32; 4] = [0x9000_0110, 0xF940_0E11, 0x9100_6210, 0xD61F_0220];
        let bytes: Vec<u8> = stub.iter().flat_map(|w| w.to_le_bytes()).collect();
        // adrp x16, +0x20000 page; ldr x17, [x16, #0x18]; add x16, x16, #0x18; br x17
        assert_eq!(plt_stub_slot(&bytes, 0x5010), Some(0x25000 + 0x18));
        let with_bti: Vec<u8> = std::iter::once(BTI_C)
            .chain(stub)
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(plt_stub_slot(&with_bti, 0x500c), Some(0x25000 + 0x18));
        // Not a stub: the same words but the branch is `BLR x17`.
        let mut other = bytes.clone();
        other[12..].copy_from_slice(&0xD63F_0220u32.to_le_bytes());
        assert_eq!(plt_stub_slot(&other, 0x5010), None);
    }
}
