#![no_main]
//! Every target in one binary, the one named by `AORTA_FUZZ_TARGET`: a campaign ships one
//! binary to the fuzzing machine instead of nine (docs/FUZZING.md).

use std::sync::OnceLock;

fn target() -> &'static str {
    static T: OnceLock<String> = OnceLock::new();
    T.get_or_init(|| std::env::var("AORTA_FUZZ_TARGET").expect("AORTA_FUZZ_TARGET is set"))
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| aorta_fuzz::run(target(), data));
