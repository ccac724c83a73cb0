#![no_main]
//! The `rocprof_csv` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("rocprof_csv", data));
