//! What every target shares: one scratch directory per fuzzing process, rayon kept to one
//! thread (16 fuzzers run side by side; small inputs are parsed by one worker), and Parquet
//! output discarded once its batches are built (see `fuzzing::discard_parquet`).

use std::sync::OnceLock;

pub use aorta_ingest::fuzzing::Reader;
use aorta_ingest::fuzzing::Scratch;

/// Runs `reader` on `data`; errors are expected, panics are findings.
pub fn read(reader: Reader, data: &[u8]) {
    static SCRATCH: OnceLock<Scratch> = OnceLock::new();
    let scratch = SCRATCH.get_or_init(|| {
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build_global();
        aorta_ingest::fuzzing::discard_parquet();
        Scratch::new().expect("a scratch directory")
    });
    let _ = aorta_ingest::fuzzing::read(scratch, reader, data);
}

/// Runs the target called `name` (a file of `fuzz_targets/`) on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "rank_map" => drop(aorta_ingest::fuzzing::rank_map(data)),
        "rules" => drop(aorta_ingest::fuzzing::rules(data)),
        _ => match Reader::ALL.into_iter().find(|r| r.name() == name) {
            Some(r) => read(r, data),
            None => panic!("no fuzz target `{name}`"),
        },
    }
}
