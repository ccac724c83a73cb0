#![no_main]
//! The `chrome` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("chrome", data));
