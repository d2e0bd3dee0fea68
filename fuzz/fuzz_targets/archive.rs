//! The archive readers (`splitpkg::fuzz::archive`): bytes as a `.whl`, `.tar.bz2` or
//! `.conda`, read as `plan` reads them. Any panic, hang or unbounded allocation is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    splitpkg::fuzz::archive(data);
});
