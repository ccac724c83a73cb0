//! `--step-marker` on generic Chrome traces: a trace written by hand, whose every row's step
//! and step source is known by construction, read with and without the marker.
//!
//! Process 1 runs step 1 as an `X` slice `train_step 1` [1000, 2000] ns and step 2 as a
//! `B`/`E` pair `train_step 2` [2000, 3000] (with a nested pair inside, and `forward`, a
//! range that is no step); its runtime calls launch the kernels of process 0 by
//! `args.correlation`.

use std::path::Path;

use aorta_ingest::step_span::StepMarker;
use aorta_ingest::Options;
use proptest::prelude::*;

use crate::common::{batches, check_with, ints, step_numbers, strs};

/// A JSON array (generic Chrome, not Kineto); times in µs.
const TRACE: &str = r#"[
{"ph":"X","cat":"app","name":"train_step 1","pid":1,"tid":1,"ts":1.0,"dur":1.0},
{"ph":"X","cat":"app","name":"forward","pid":1,"tid":1,"ts":1.0,"dur":0.5},
{"ph":"B","cat":"app","name":"train_step 2","pid":1,"tid":1,"ts":2.0},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":1.2,"dur":0.3,"args":{"device":0,"stream":7,"correlation":11}},
{"ph":"X","cat":"kernel","name":"elementwise","pid":0,"tid":7,"ts":2.05,"dur":0.01,"args":{"device":0,"stream":7,"correlation":16}},
{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":3.2,"dur":0.1,"args":{"device":0,"stream":7,"correlation":13}},
{"ph":"X","cat":"kernel","name":"orphan","pid":0,"tid":7,"ts":1.6,"dur":0.1,"args":{"device":0,"stream":7}},
{"ph":"X","cat":"kernel","name":"late","pid":0,"tid":7,"ts":5.0,"dur":0.1,"args":{"device":0,"stream":7,"correlation":77}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1.1,"dur":0.01,"args":{"correlation":11}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":1.99,"dur":0.005,"args":{"correlation":16}},
{"ph":"B","cat":"app","name":"inner","pid":1,"tid":1,"ts":2.2},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":2.5,"dur":0.01,"args":{"correlation":13}},
{"ph":"E","pid":1,"tid":1,"ts":2.3},
{"ph":"i","name":"mark","pid":1,"tid":1,"ts":2.4,"s":"t"},
{"ph":"E","pid":1,"tid":1,"ts":3.0},
{"ph":"X","cat":"app","name":"after","pid":1,"tid":1,"ts":4.0,"dur":0.1}
]"#;

/// (name, start ns, step, step source) of every GPU row.
type Gpu = (String, i64, Option<i64>, String);
/// (name, start ns, step) of every CPU row.
type Cpu = (String, i64, Option<i64>);

fn rows(out: &Path) -> (Vec<Gpu>, Vec<Cpu>, Vec<i64>) {
    let mut gpu = Vec::new();
    for b in batches(out, "gpu_activities") {
        let (n, s, st, src) = (
            strs(&b, "name"),
            ints(&b, "start_ns"),
            ints(&b, "step"),
            strs(&b, "step_source"),
        );
        gpu.extend((0..b.num_rows()).map(|i| {
            (
                n[i].clone().unwrap(),
                s[i].unwrap(),
                st[i],
                src[i].clone().unwrap(),
            )
        }));
    }
    let mut cpu = Vec::new();
    for b in batches(out, "cpu_ops") {
        let (n, s, st) = (strs(&b, "name"), ints(&b, "start_ns"), ints(&b, "step"));
        cpu.extend((0..b.num_rows()).map(|i| (n[i].clone().unwrap(), s[i].unwrap(), st[i])));
    }
    gpu.sort();
    cpu.sort();
    (gpu, cpu, step_numbers(out))
}

fn ingest(trace: &Path, out: &Path, marker: Option<&str>) -> (Vec<Gpu>, Vec<Cpu>, Vec<i64>) {
    let opts = Options {
        out: out.to_path_buf(),
        step_marker: marker.map_or_else(StepMarker::default, |m| StepMarker::parse(m).unwrap()),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[trace.to_path_buf()], &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested.len(), 1);
    rows(out)
}

#[test]
fn step_marker_ranges_give_chrome_rows_their_steps() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(&trace, TRACE).unwrap();
    let g =
        |n: &str, s: i64, step: Option<i64>, src: &str| (n.to_string(), s, step, src.to_string());
    let c = |n: &str, s: i64, step: Option<i64>| (n.to_string(), s, step);

    let (gpu, cpu, steps) = ingest(&trace, &dir.path().join("a"), Some(r"^train_step (\d+)$"));
    assert_eq!(
        gpu,
        [
            // Launched at 1990 (step 1) on another thread of the process, run in step 2.
            g("elementwise", 2050, Some(1), "launch"),
            g("gemm", 1200, Some(1), "launch"),
            // Launched at 2500, in step 2.
            g("gemm", 3200, Some(2), "launch"),
            // No runtime call of its correlation, then no correlation: the GPU start.
            g("late", 5000, None, "gpu_time"),
            g("orphan", 1600, Some(1), "gpu_time"),
        ]
    );
    assert_eq!(
        cpu,
        [
            c("after", 4000, None),
            c("cudaLaunchKernel", 1100, Some(1)),
            c("cudaLaunchKernel", 1990, Some(1)),
            c("cudaLaunchKernel", 2500, Some(2)),
            c("forward", 1000, Some(1)),
            c("inner", 2200, Some(2)),
            c("mark", 2400, Some(2)),
            c("train_step 1", 1000, Some(1)),
            // Starts where step 1 ends: the later-starting span holds it.
            c("train_step 2", 2000, Some(2)),
        ]
    );
    assert_eq!(steps, [1, 2]);

    // Without the marker: the rows as before, no step.
    let (gpu, cpu, steps) = ingest(&trace, &dir.path().join("b"), None);
    assert!(
        gpu.iter().all(|r| r.2.is_none() && r.3 == "none"),
        "{gpu:?}"
    );
    assert!(cpu.iter().all(|r| r.2.is_none()), "{cpu:?}");
    assert_eq!((gpu.len(), cpu.len()), (5, 9));
    assert!(steps.is_empty());
}

/// The walk for the steps also gives `--rank-map` the trace's pids (pid 1 → rank 3; the
/// GPU rows' pid 0 is not in the map).
#[test]
fn the_step_walk_gives_the_rank_map_its_pids() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(&trace, TRACE).unwrap();
    let map = dir.path().join("ranks.txt");
    std::fs::write(&map, "1 3\n").unwrap();
    let opts = Options {
        out: dir.path().join("out"),
        rank_map: Some(map),
        step_marker: StepMarker::parse(r"^train_step (\d+)$").unwrap(),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[trace], &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested[0].1.rank, 3);
    let (_, cpu, steps) = rows(&dir.path().join("out"));
    assert_eq!(steps, [1, 2]);
    assert_eq!(cpu.iter().filter(|r| r.2.is_some()).count(), 8);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The trace cut anywhere or with bytes overwritten, read with the marker: it ingests or
    /// fails naming the file and an offset in it, nothing left behind.
    #[test]
    fn damaged_traces_with_a_step_marker(frac in 0.0f64..1.0, len in 0usize..16, byte in any::<u8>()) {
        let marker = StepMarker::parse(r"^train_step (\d+)$").unwrap();
        let at = ((TRACE.len() as f64) * frac) as usize;
        check_with("trace.json", &TRACE.as_bytes()[..at], marker.clone())?;
        let mut b = TRACE.as_bytes().to_vec();
        for x in b.iter_mut().skip(at).take(len) {
            *x = byte;
        }
        check_with("trace.json", &b, marker)?;
    }
}
