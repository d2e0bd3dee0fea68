//! Untrusted plans (`splitpkg::fuzz::plan_json`): a plan document from bytes, the split and
//! both recipe formats; rendered files must stay inside the output directory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    splitpkg::fuzz::plan_json(data);
});
