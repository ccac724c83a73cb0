//! `args.step` on Kineto GPU activities: a trace written by hand whose every kernel's step is
//! known by construction. Without `ProfilerStep#N` spans the activity's own `args.step` is
//! its step (`step_source` `arg`), and the steps table has one row per such step; with spans,
//! the launch decides as before and `args.step` is ignored.

use std::path::Path;

use crate::common::{batches, ingest, ints, step_numbers, strs};

/// Kernels of steps 0 and 1 (one launched by a runtime call, one not) and one without
/// `args.step`; times in µs from `baseTimeNanoseconds`.
fn trace(with_spans: bool) -> String {
    let spans = if with_spans {
        r#"{"ph":"X","cat":"user_annotation","name":"ProfilerStep#5","pid":1,"tid":1,"ts":0.0,"dur":10.0},"#
    } else {
        ""
    };
    format!(
        r#"{{"schemaVersion":1,"baseTimeNanoseconds":1700000000000000000,"traceEvents":[{spans}
{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1.0,"dur":0.5,"args":{{"correlation":1}}}},
{{"ph":"X","cat":"kernel","name":"gemm_a","pid":0,"tid":7,"ts":2.0,"dur":1.0,"args":{{"device":0,"stream":7,"correlation":1,"step":0}}}},
{{"ph":"X","cat":"kernel","name":"gemm_b","pid":0,"tid":7,"ts":4.0,"dur":1.0,"args":{{"device":0,"stream":7,"correlation":2,"step":1}}}},
{{"ph":"X","cat":"kernel","name":"gemm_c","pid":0,"tid":7,"ts":6.0,"dur":1.0,"args":{{"device":0,"stream":7,"correlation":3}}}}
]}}"#
    )
}

/// (name, step, step source) of one GPU row.
type Row = (String, Option<i64>, String);

/// (name, step, step source) of every GPU row, sorted by name.
fn gpu_steps(out: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for b in batches(out, "gpu_activities") {
        let (n, st, src) = (strs(&b, "name"), ints(&b, "step"), strs(&b, "step_source"));
        rows.extend(
            (0..b.num_rows()).map(|i| (n[i].clone().unwrap(), st[i], src[i].clone().unwrap())),
        );
    }
    rows.sort();
    rows
}

fn run(with_spans: bool) -> (Vec<Row>, Vec<i64>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rank0.trace.json");
    std::fs::write(&file, trace(with_spans)).unwrap();
    let out = dir.path().join("out");
    ingest(&[file], &out).unwrap();
    (gpu_steps(&out), step_numbers(&out))
}

#[test]
fn without_step_spans_the_activitys_own_step_is_kept() {
    let (gpu, steps) = run(false);
    let row = |n: &str, s: Option<i64>, src: &str| (n.to_string(), s, src.to_string());
    assert_eq!(
        gpu,
        [
            row("gemm_a", Some(0), "arg"),
            row("gemm_b", Some(1), "arg"),
            row("gemm_c", None, "none"),
        ]
    );
    assert_eq!(steps, [0, 1]);
}

#[test]
fn with_step_spans_the_launch_decides() {
    let (gpu, steps) = run(true);
    let row = |n: &str, s: Option<i64>, src: &str| (n.to_string(), s, src.to_string());
    // gemm_a's launch lies in ProfilerStep#5; the unlaunched ones fall back on their GPU time,
    // which lies in it too: their `args.step` (0, 1) is not used.
    assert_eq!(
        gpu,
        [
            row("gemm_a", Some(5), "launch"),
            row("gemm_b", Some(5), "gpu_time"),
            row("gemm_c", Some(5), "gpu_time"),
        ]
    );
    assert_eq!(steps, [5]);
}
