//! The fuzz targets' inputs replayed through the same entry points (`aorta_ingest::fuzzing`)
//! without instrumentation, so CI holds what the fuzz campaigns found (docs/FUZZING.md):
//! every committed seed (`fuzz/seeds/<target>/`) is read without error, and every minimized
//! crasher (`fuzz/regressions/<target>/`) is read without a panic, any error being one line
//! that names the file (`fuzzing::read` asserts that).

use std::path::{Path, PathBuf};

use aorta_ingest::fuzzing::{self, Reader, Scratch};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted (none when the directory is absent).
fn inputs(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Runs the target named `target` on `bytes`; `Err` carries the error line.
fn run(scratch: &Scratch, target: &str, bytes: &[u8]) -> Result<(), String> {
    match target {
        "rank_map" => fuzzing::rank_map(bytes).map(drop).map_err(|e| e.to_string()),
        "rules" => fuzzing::rules(bytes).map_err(|e| e.to_string()),
        t => {
            let r = Reader::ALL.into_iter().find(|r| r.name() == t).unwrap();
            fuzzing::read(scratch, r, bytes)
                .map(drop)
                .map_err(|e| e.to_string())
        }
    }
}

fn targets() -> Vec<&'static str> {
    let mut t: Vec<&str> = Reader::ALL.iter().map(|r| r.name()).collect();
    t.extend(["rank_map", "rules"]);
    t
}

#[test]
fn every_seed_is_read() {
    let scratch = Scratch::new().unwrap();
    let mut n = 0;
    for t in targets() {
        for (p, bytes) in inputs("seeds", t) {
            run(&scratch, t, &bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 9, "only {n} seeds under {}", fuzz_dir().display());
}

#[test]
fn no_crasher_panics() {
    let scratch = Scratch::new().unwrap();
    for t in targets() {
        for (p, bytes) in inputs("regressions", t) {
            let go = std::panic::AssertUnwindSafe(|| run(&scratch, t, &bytes));
            let res = std::panic::catch_unwind(go);
            assert!(res.is_ok(), "{} panics", p.display());
        }
    }
}
