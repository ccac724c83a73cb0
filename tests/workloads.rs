//! The project's own GPU traces (workloads/traces, from `aorta-overlap-bench` on 2×H200)
//! ingest with the structure the benchmark built: GEMMs on the compute stream, collectives
//! on the comm stream, overlapping unless the run was forced serial.

mod common;

use common::*;
use std::path::Path;

/// Total length of the intersection of two interval sets, by merging each and walking both
/// (written here, independent of aorta's code).
fn overlap_ns(mut a: Vec<(i64, i64)>, mut b: Vec<(i64, i64)>) -> i64 {
    fn merge(v: &mut [(i64, i64)]) -> Vec<(i64, i64)> {
        v.sort();
        let mut out: Vec<(i64, i64)> = Vec::new();
        for &(s, e) in v.iter() {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }
    let (a, b) = (merge(&mut a), merge(&mut b));
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        total += (a[i].1.min(b[j].1) - a[i].0.max(b[j].0)).max(0);
        if a[i].1 < b[j].1 {
            i += 1
        } else {
            j += 1
        }
    }
    total
}

#[test]
fn overlap_bench_traces_have_the_structure_the_benchmark_built() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/traces/overlap-bench");
    let dir = tempfile::tempdir().unwrap();
    let opts = aorta_ingest::Options {
        out: dir.path().to_path_buf(),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[root], &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested.len(), 16, "4 runs × 2 ranks × (trace + JSONL)");
    for (run, op, serial) in [
        ("allreduce_overlap", "all_reduce", false),
        ("allreduce_serial", "all_reduce", true),
        ("allgather_overlap", "all_gather", false),
        ("reducescatter_overlap", "reduce_scatter", false),
    ] {
        let df = table(dir.path(), "gpu_activities", run);
        let ranks = i64s(&df, "rank");
        for rank in [0, 1] {
            let (mut gemm, mut comm) = (vec![], vec![]);
            for i in (0..df.height()).filter(|&i| ranks[i] == Some(rank)) {
                let span = (
                    i64s(&df, "start_ns")[i].unwrap(),
                    i64s(&df, "end_ns")[i].unwrap(),
                );
                let (cat, stream) = (
                    strs(&df, "category")[i].clone().unwrap(),
                    i64s(&df, "stream")[i],
                );
                match cat.as_str() {
                    "gemm" => {
                        assert_eq!(stream, Some(7), "{run}");
                        gemm.push(span)
                    }
                    "comm" => {
                        assert_eq!(stream, Some(13), "{run}");
                        assert_eq!(strs(&df, "comm_op")[i].as_deref(), Some(op), "{run}");
                        comm.push(span)
                    }
                    other => panic!("{run}: unexpected category {other}"),
                }
            }
            assert!(!gemm.is_empty() && !comm.is_empty(), "{run} rank {rank}");
            let ov = overlap_ns(gemm, comm);
            if serial {
                assert_eq!(ov, 0, "{run} rank {rank}: forced serial");
            } else {
                assert!(ov > 0, "{run} rank {rank}: independent streams overlap");
            }
        }
    }
}

/// workloads/torch: the JSONL overlap rules and the knob parsing, through Python's unittest
/// (values computed by hand there; no torch needed, so it runs on the test machine).
#[test]
fn torch_script_unit_tests_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/torch");
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(&dir)
        .output()
        .expect("python3 runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Ran 8 tests"), "{err}");
}
