//! The ELF readers on arbitrary bytes (`splitpkg::fuzz::elf`): headers, dynamic tables,
//! symbols through the hash tables, versions, `.rodata` literals, `.symtab` translation units and
//! the payload scan. Any panic, hang or out-of-memory is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    splitpkg::fuzz::elf(data);
});
