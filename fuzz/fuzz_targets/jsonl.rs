#![no_main]
//! The `jsonl` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("jsonl", data));
