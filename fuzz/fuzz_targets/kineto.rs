#![no_main]
//! The `kineto` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("kineto", data));
