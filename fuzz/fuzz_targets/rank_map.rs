#![no_main]
//! The `rank_map` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("rank_map", data));
