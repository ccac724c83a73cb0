//! Benchmark driver: ingests the given files into a fresh directory and prints MB/s.
//! Used by bench/run.sh (wrapped in /usr/bin/time -v for peak RSS); see docs/PERFORMANCE.md.

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    assert!(aorta_ingest::cpu::linked());
    aorta_ingest::tune_allocator();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let jobs = args.iter().position(|a| a == "--jobs").map(|i| {
        let n = args[i + 1].parse().expect("--jobs N");
        args.drain(i..i + 2);
        n
    });
    // `--keep DIR`: write there and keep the dataset (to look at its size).
    let keep = args.iter().position(|a| a == "--keep").map(|i| {
        let d = PathBuf::from(&args[i + 1]);
        args.drain(i..i + 2);
        d
    });
    // `--step-marker REGEX`, as `aorta ingest` takes it.
    let step_marker = args
        .iter()
        .position(|a| a == "--step-marker")
        .map(|i| {
            let m = aorta_ingest::step_span::StepMarker::parse(&args[i + 1]).unwrap();
            args.drain(i..i + 2);
            m
        })
        .unwrap_or_default();
    // `--shard I/N`, as `aorta ingest` takes it (several shards write one `--keep DIR`).
    let shard = args.iter().position(|a| a == "--shard").map(|i| {
        let s = aorta_ingest::shard::Shard::parse(&args[i + 1]).expect("--shard I/N");
        args.drain(i..i + 2);
        s
    });
    let tmp = std::env::temp_dir().join(format!("aorta-bench-{}", std::process::id()));
    let out = keep.clone().unwrap_or(tmp);
    let paths: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    let opts = aorta_ingest::Options {
        out: out.clone(),
        jobs,
        force: true,
        step_marker,
        shard,
        ..Default::default()
    };
    let t0 = Instant::now();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.unwrap_or(0))
        .build()
        .unwrap();
    let s = pool
        .install(|| aorta_ingest::ingest(&paths, &opts, &Default::default()))
        .unwrap_or_else(|e| panic!("{e}"));
    let secs = t0.elapsed().as_secs_f64();
    let mb = s.bytes as f64 / 1e6;
    println!(
        "files {} bytes {:.1} MB events {} rows {:?} time {:.2} s => {:.0} MB/s (threads {})",
        s.ingested.len(),
        mb,
        s.events(),
        s.rows(),
        secs,
        mb / secs,
        jobs.map_or("all".to_string(), |j: usize| j.to_string()),
    );
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(out);
    }
}
