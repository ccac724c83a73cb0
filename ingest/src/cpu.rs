//! The processor check: one line, not SIGILL, where this build cannot run.
//!
//! Why: the workspace builds for x86-64-v3 (AVX2, BMI1/2, FMA, LZCNT, MOVBE: every x86 server
//! processor since 2013–2015; `.cargo/config.toml`), which takes 4–13 % off ingest's CPU time
//! (docs/PERFORMANCE.md, "x86-64-v3"). Copied to an older processor, a binary would die on its
//! first such instruction with no word of why. The check is C compiled for the base x86-64
//! (`cpu_check.c`, `build.rs`): built for AVX, rustc writes even a plain 16-byte copy as an
//! AVX instruction, so no Rust function of this build could be trusted to run there, and
//! `is_x86_feature_detected!` answers `true` without asking for every feature the build
//! assumes. It runs as a constructor, before `main`.

/// Keeps the check in the binary: a program that links this crate calls it once, at start
/// (the check itself has run by then). Always `true`.
pub fn linked() -> bool {
    #[cfg(all(target_arch = "x86_64", not(windows)))]
    {
        extern "C" {
            fn aorta_cpu_checked() -> std::ffi::c_int;
        }
        // SAFETY: a C function of no arguments that returns 1 (`cpu_check.c`).
        unsafe { aorta_cpu_checked() == 1 }
    }
    #[cfg(not(all(target_arch = "x86_64", not(windows))))]
    true
}
