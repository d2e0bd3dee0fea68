//! Every fatbin reader on arbitrary bytes: the section walk, the summary, bounded decompression of
//! each entry, the device check, and the same through an ELF wrapper (`splitpkg::fuzz::fatbin`).
//! Any panic, hang or out-of-memory is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    splitpkg::fuzz::fatbin(data);
});
