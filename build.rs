//! Link flags of the `aorta` binary: its relative relocations packed (DT_RELR).
//!
//! Why: the binary (polars, arrow, parquet) carries ~600,000 relative relocations. As plain
//! `.rela.dyn` entries they are 15 MB that the loader reads at every start, and they stay in
//! the process's resident memory: every command's peak RSS was 15–20 MB higher, which on a
//! trace of a million steps was the difference between `aorta ingest` staying under 256 MB
//! or not (docs/PERFORMANCE.md, "What a step keeps"). Packed, they take ~110 kB.
//!
//! Only where the machine's C library runs such binaries (glibc 2.36 and later, which also
//! comes with a linker that writes them); elsewhere the binary is linked as before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target == host && target.ends_with("-linux-gnu") && glibc_runs_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc is 2.36 or later (`getconf GNU_LIBC_VERSION`: "glibc 2.36").
fn glibc_runs_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 36),
        _ => false,
    }
}
