//! `--step-marker REGEX`: steps from annotation ranges other than `ProfilerStep#N`, for
//! captures without the PyTorch profiler (an nsys export of a NVTX-annotated loop, a Kineto
//! trace annotated by hand). The expected steps are worked out by hand from the fixtures.

use std::path::Path;

use crate::common::cli::*;
use crate::common::*;
use crate::nsys_chrome_corpus::{gpu_rows, two_process_export};

const MARKER: &str = r"^train_step (\d+)$";

/// The two-process nsys fixture with its step ranges renamed `train_step 11` and
/// `train_step 12`: with the marker every row takes the step it took from `ProfilerStep#1`
/// and `#2`, plus 10; without it there are no steps at all.
#[test]
fn nvtx_ranges_named_by_a_marker_are_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let (db, renamed) = (tmp.path().join("a.sqlite"), tmp.path().join("b.sqlite"));
    two_process_export(&db);
    two_process_export(&renamed);
    let c = rusqlite::Connection::open(&renamed).unwrap();
    c.execute_batch(
        "UPDATE NVTX_EVENTS SET text = 'train_step 11' WHERE text = 'ProfilerStep#1';
         UPDATE StringIds SET value = 'train_step 12' WHERE value = 'ProfilerStep#2';",
    )
    .unwrap();
    drop(c);
    let base = 1_700_000_000_000_000_000;
    let rows = |path: &Path, extra: &[&str]| {
        let out = tmp.path().join(format!("ds-{}", extra.len()));
        let _ = std::fs::remove_dir_all(&out);
        let mut args = vec!["--label", "two", "-q"];
        args.extend(extra);
        let o = ingest(&[path], &out, &args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        gpu_rows(&out, "two", base)
    };
    let want: Vec<_> = rows(&db, &[])
        .into_iter()
        .map(|mut r| {
            r.4 = r.4.map(|s| s + 10);
            r
        })
        .collect();
    assert!(want.iter().any(|r| r.4 == Some(11)) && want.iter().any(|r| r.4 == Some(12)));
    assert_eq!(rows(&renamed, &["--step-marker", MARKER]), want);
    assert!(rows(&renamed, &[]).iter().all(|r| r.4.is_none()));
}

/// A Kineto trace with no `ProfilerStep`: two `train_step N` annotations of 1,000 µs, each
/// launching one kernel. With the marker the kernels are steps 3 and 4 and the `steps` table
/// holds both spans; re-ingesting under another marker reads the file again.
#[test]
fn kineto_annotations_named_by_a_marker_are_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("rank0.json");
    let mut ev = vec![];
    for (k, step) in [(0u32, 3u32), (1, 4)] {
        let o = 1000 * k;
        ev.push(format!(r#"{{"ph": "X", "cat": "user_annotation", "name": "train_step {step}", "pid": 1, "tid": 1, "ts": {o}, "dur": 1000}}"#));
        ev.push(format!(r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 5, "args": {{"correlation": {}}}}}"#, o + 10, 100 + k));
        ev.push(format!(r#"{{"ph": "X", "cat": "kernel", "name": "k{k}", "pid": 0, "tid": 7, "ts": {}, "dur": 50, "args": {{"stream": 7, "correlation": {}}}}}"#, o + 100, 100 + k));
    }
    std::fs::write(
        &trace,
        format!(r#"{{"traceEvents": [{}]}}"#, ev.join(",\n")),
    )
    .unwrap();
    let out = tmp.path().join("ds");
    let o = ingest(
        &[&trace],
        &out,
        &["--label", "m", "-q", "--step-marker", MARKER],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let acts = table(&out, "gpu_activities", "m");
    let mut got: Vec<(String, Option<i64>)> = strs(&acts, "name")
        .into_iter()
        .zip(i64s(&acts, "step"))
        .map(|(n, s)| (n.unwrap(), s))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [("k0".to_string(), Some(3)), ("k1".to_string(), Some(4))]
    );
    let steps = table(&out, "steps", "m");
    let mut spans: Vec<(Option<i64>, Option<i64>)> = i64s(&steps, "step")
        .into_iter()
        .zip(
            i64s(&steps, "cpu_end_ns")
                .into_iter()
                .zip(i64s(&steps, "cpu_start_ns")),
        )
        .map(|(s, (e, b))| (s, e.zip(b).map(|(e, b)| e - b)))
        .collect();
    spans.sort();
    assert_eq!(
        spans,
        [(Some(3), Some(1_000_000)), (Some(4), Some(1_000_000))]
    );
    // The default marker finds no step in this trace; the file is read again, not skipped.
    let o = ingest(&[&trace], &out, &["--label", "m"]);
    assert!(
        stderr(&o).contains("ingested 1 of 1 files"),
        "{}",
        stderr(&o)
    );
    let acts = table(&out, "gpu_activities", "m");
    assert!(i64s(&acts, "step").iter().all(Option::is_none));
    // A marker without a capture group is a usage error naming the flag.
    let o = ingest(&[&trace], &out, &["--step-marker", "train_step"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("capture group"), "{}", stderr(&o));
}
