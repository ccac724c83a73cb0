#![no_main]
//! The `rocprof_json` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("rocprof_json", data));
