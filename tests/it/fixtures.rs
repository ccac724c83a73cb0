//! Small hand-made traces whose answers were worked out by hand (in the comments), plus the
//! JSONL logs checked against a serde_json walk written here.

use crate::common::*;
use std::path::Path;

/// Stream 7: A 0–10 µs, B 5–8 µs, C 20–25 µs; stream 8: D 2–102 µs; stream 9: E at
/// 1.0005 µs lasting 0.0004 µs. One `ProfilerStep#7` span 0–15 µs on pid 1, and runtime
/// calls for A (corr 1, at 1 µs) and C (corr 3, at 16 µs).
const TRACE: &str = r#"{
  "baseTimeNanoseconds": 1000000000000,
  "distributedInfo": {"rank": 3, "world_size": 4},
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 0, "dur": 15},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 16, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "A_gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 10, "args": {"stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "B", "pid": 0, "tid": 7, "ts": 5, "dur": 3, "args": {"stream": 7, "correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "C", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"stream": 7, "correlation": 3}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32", "pid": 0, "tid": 8, "ts": 2, "dur": 100, "args": {"stream": 8}},
  {"ph": "X", "cat": "kernel", "name": "E", "pid": 0, "tid": 9, "ts": 1.0005, "dur": 0.0004}
  ]
}"#;

#[test]
fn clipping_steps_and_rounding_match_the_hand_computed_answers() {
    let dir = ingest_text("t.json", TRACE, |_| {});
    let ds = dir.path().join("ds");
    let df = table(&ds, "gpu_activities", "in");
    let base = 1_000_000_000_000i64;
    let mut rows: Vec<(String, i64, i64, i64, Option<i64>, String)> = (0..df.height())
        .map(|i| {
            (
                strs(&df, "name")[i].clone().unwrap(),
                i64s(&df, "start_ns")[i].unwrap() - base,
                i64s(&df, "end_ns")[i].unwrap() - base,
                i64s(&df, "raw_end_ns")[i].unwrap() - base,
                i64s(&df, "step")[i],
                strs(&df, "step_source")[i].clone().unwrap(),
            )
        })
        .collect();
    rows.sort();
    let row = |n: &str, s, e, r, step: Option<i64>, src: &str| {
        (n.to_string(), s, e, r, step, src.to_string())
    };
    assert_eq!(
        rows,
        vec![
            // A overlaps B on stream 7: clipped to B's start (5 µs), 10 µs kept as raw.
            row("A_gemm", 0, 5_000, 10_000, Some(7), "launch"),
            // B has no runtime call: step from its own start against the step spans.
            row("B", 5_000, 8_000, 8_000, Some(7), "gpu_time"),
            // C was launched at 16 µs, after the step ended.
            row("C", 20_000, 25_000, 25_000, None, "launch"),
            // 1.0005 µs rounds half up to 1001 ns; 0.4 ns of duration rounds to 0.
            row("E", 1_001, 1_001, 1_001, Some(7), "gpu_time"),
            row(
                "ncclDevKernel_AllReduce_Sum_f32",
                2_000,
                102_000,
                102_000,
                Some(7),
                "gpu_time"
            ),
        ]
    );
    let cats = strs(&df, "category");
    let ops = strs(&df, "comm_op");
    let names = strs(&df, "name");
    for i in 0..df.height() {
        let (c, o) = match names[i].as_deref().unwrap() {
            "A_gemm" => ("gemm", None),
            "ncclDevKernel_AllReduce_Sum_f32" => ("comm", Some("all_reduce")),
            _ => ("other_compute", None),
        };
        assert_eq!((cats[i].as_deref(), ops[i].as_deref()), (Some(c), o));
    }
    let diag = table(&ds, "diagnostics", "in");
    let found: Vec<(String, i64)> = strs(&diag, "code")
        .into_iter()
        .zip(i64s(&diag, "count"))
        .map(|(c, n)| (c.unwrap(), n.unwrap()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("kernel_without_launch".into(), 3),
            ("outside_steps".into(), 2),
            ("same_stream_overlap".into(), 1),
        ]
    );
    let runs = table(&ds, "runs", "in");
    assert_eq!(i64s(&runs, "rank"), vec![Some(3)]);
    assert_eq!(i64s(&runs, "base_time_ns"), vec![Some(base)]);
    let steps = table(&ds, "steps", "in");
    assert_eq!(i64s(&steps, "step"), vec![None, Some(7)]);
    // Step 7's GPU window: first start (A at 0) to last clipped end (D at 102 µs).
    assert_eq!(i64s(&steps, "gpu_start_ns")[1], Some(base));
    assert_eq!(i64s(&steps, "gpu_end_ns")[1], Some(base + 102_000));
    assert_eq!(i64s(&steps, "cpu_end_ns")[1], Some(base + 15_000));
}

fn numeric_leaves(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => 1,
        serde_json::Value::Array(a) => a.iter().map(numeric_leaves).sum(),
        serde_json::Value::Object(o) => o.values().map(numeric_leaves).sum(),
        _ => 0,
    }
}

#[test]
fn aorta_jsonl_logs_become_long_form_metrics() {
    let Some(root) = corpus() else { return };
    for f in [
        root.join("jsonl/rank_00_metrics.jsonl"),
        root.join("aorta_py/h200_fsdp2_profile_overlap_2gpu/rank_01_metrics.jsonl"),
        root.join("kineto/cuda/h200_fsdp2/step_times_rank1.jsonl"),
    ] {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let want: usize = lines.iter().map(numeric_leaves).sum();
        let dir = ingest_text(f.file_name().unwrap().to_str().unwrap(), &text, |_| {});
        let ds = dir.path().join("ds");
        let m = table(&ds, "metrics", "in");
        assert_eq!(m.height(), want, "{}", f.display());
        let runs = table(&ds, "runs", "in");
        let rank = lines[0]["rank"].as_i64().unwrap();
        assert_eq!(i64s(&runs, "rank"), vec![Some(rank)]);
        assert_eq!(strs(&runs, "rank_source"), vec![Some("record".into())]);
        assert_eq!(i64s(&runs, "event_count"), vec![Some(lines.len() as i64)]);
        // Spot check: every line's loss is there under its step.
        let (keys, steps, values) = (
            strs(&m, "key"),
            i64s(&m, "step"),
            m.column("value").unwrap().f64().unwrap().clone(),
        );
        for l in &lines {
            let step = l
                .get("global_step")
                .or(l.get("step"))
                .and_then(|s| s.as_i64());
            let hit = (0..m.height())
                .find(|&i| keys[i].as_deref() == Some("loss") && steps[i] == step)
                .unwrap();
            assert_eq!(values.get(hit), l["loss"].as_f64());
        }
    }
}

#[test]
fn aorta_jsonl_overlap_fields_keep_their_paths() {
    let Some(root) = corpus() else { return };
    let f = root.join("jsonl/rank_00_metrics.jsonl");
    let dir = ingest_text(
        "rank_00_metrics.jsonl",
        &std::fs::read_to_string(&f).unwrap(),
        |_| {},
    );
    let m = table(&dir.path().join("ds"), "metrics", "in");
    let (keys, steps) = (strs(&m, "key"), i64s(&m, "step"));
    let values = m.column("value").unwrap().f64().unwrap().clone();
    let at = |k: &str, s: i64| {
        (0..m.height())
            .find(|&i| keys[i].as_deref() == Some(k) && steps[i] == Some(s))
            .map(|i| values.get(i).unwrap())
    };
    // Values copied by hand from the first line of the file.
    assert_eq!(
        at("profile.overlap.overlap_ms.compute_comm", 0),
        Some(36.80000000000001)
    );
    assert_eq!(at("profile.overlap.per_stream_ms.compute", 0), Some(131.15));
    assert_eq!(at("profile.ranges[1].end_ms", 0), Some(48.2));
    assert!(Path::new(&f).exists());
}
