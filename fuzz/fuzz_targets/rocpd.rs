#![no_main]
//! The `rocpd` target (docs/FUZZING.md).

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run("rocpd", data));
