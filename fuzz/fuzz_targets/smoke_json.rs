//! Recorded smoke documents (`splitpkg::fuzz::smoke_json`): bytes as a `smoke --replay` report,
//! judged again and rendered, and as an `--expect` table file. Any panic or hang is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    splitpkg::fuzz::smoke_json(data);
});
