//! Generic Chrome traces (not Kineto's) built here, with every expected row worked out by
//! hand in the comments, and the corpus's catapult sample against a serde_json walk.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// A JSON *array* trace that a streaming writer left without its closing `]`.
///
/// pid 1 tid 2: B outer @10 µs, B inner @12.5, E @15 (closes inner), E @30 (closes outer),
/// E @31 (nothing open: unmatched), instant "marker" @25.
/// pid 1 tid 3: B other_thread @11, E @20.25 (its own stack, so it closes other_thread even
/// though tid 2 has slices open). pid 1 tid 4: B never_closed @40 (unmatched).
/// pid 0: a `kernel` X on stream 7 (13–17 µs) and a `gpu_memcpy` X on tid 8 (1–3 µs).
/// Two `M` events name the process and a thread: no rows.
const ARRAY: &str = r#"[
{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "trainer"}},
{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
{"ph": "B", "name": "outer", "cat": "app", "pid": 1, "tid": 2, "ts": 10},
{"ph": "B", "name": "inner", "pid": 1, "tid": 2, "ts": 12.5},
{"ph": "B", "name": "other_thread", "pid": 1, "tid": 3, "ts": 11},
{"ph": "E", "pid": 1, "tid": 2, "ts": 15},
{"ph": "E", "pid": 1, "tid": 3, "ts": 20.25},
{"ph": "X", "name": "ampere_sgemm_128x64_nn", "cat": "kernel", "pid": 0, "tid": 7, "ts": 13, "dur": 4, "args": {"device": 0, "stream": 7}},
{"ph": "E", "pid": 1, "tid": 2, "ts": 30},
{"ph": "E", "pid": 1, "tid": 2, "ts": 31},
{"ph": "i", "name": "marker", "pid": 1, "tid": 2, "ts": 25, "s": "t"},
{"ph": "B", "name": "never_closed", "pid": 1, "tid": 4, "ts": 40},
{"ph": "X", "name": "Memcpy HtoD", "cat": "gpu_memcpy", "pid": 0, "tid": 8, "ts": 1, "dur": 2, "args": {"bytes": 4096}},
"#;

type CpuRow = (String, Option<i64>, Option<i64>, i64, i64, String);

/// (name, kind, category, device, stream, start, end, bytes).
type GpuRow = (String, String, String, i64, i64, i64, i64, Option<i64>);

fn cpu_rows(ds: &Path, run: &str) -> Vec<CpuRow> {
    let df = table(ds, "cpu_ops", run);
    let (names, cats) = (strs(&df, "name"), strs(&df, "category"));
    let (pid, tid) = (i64s(&df, "pid"), i64s(&df, "tid"));
    let (s, e) = (i64s(&df, "start_ns"), i64s(&df, "end_ns"));
    let mut rows: Vec<CpuRow> = (0..df.height())
        .map(|i| {
            let n = names[i].clone().unwrap();
            (
                n,
                pid[i],
                tid[i],
                s[i].unwrap(),
                e[i].unwrap(),
                cats[i].clone().unwrap(),
            )
        })
        .collect();
    rows.sort_by_key(|r| (r.3, r.0.clone()));
    rows
}

fn diagnostics(ds: &Path, run: &str) -> BTreeMap<String, i64> {
    let df = table(ds, "diagnostics", run);
    let (codes, counts) = (strs(&df, "code"), i64s(&df, "count"));
    (0..df.height())
        .map(|i| (codes[i].clone().unwrap(), counts[i].unwrap()))
        .collect()
}

#[test]
fn unterminated_array_pairs_begin_end_per_thread() {
    let dir = ingest_text("trace.json", ARRAY, |_| {});
    let ds = dir.path().join("ds");
    let row = |n: &str, tid, s, e| {
        (
            n.to_string(),
            Some(1),
            Some(tid),
            s,
            e,
            "cpu_op".to_string(),
        )
    };
    assert_eq!(
        cpu_rows(&ds, "in"),
        vec![
            row("outer", 2, 10_000, 30_000),
            row("other_thread", 3, 11_000, 20_250),
            row("inner", 2, 12_500, 15_000),
            row("marker", 2, 25_000, 25_000),
        ]
    );
    let gpu = table(&ds, "gpu_activities", "in");
    let mut got: Vec<GpuRow> = (0..gpu.height())
        .map(|i| {
            (
                strs(&gpu, "name")[i].clone().unwrap(),
                strs(&gpu, "kind")[i].clone().unwrap(),
                strs(&gpu, "category")[i].clone().unwrap(),
                i64s(&gpu, "device")[i].unwrap(),
                i64s(&gpu, "stream")[i].unwrap(),
                i64s(&gpu, "start_ns")[i].unwrap(),
                i64s(&gpu, "end_ns")[i].unwrap(),
                i64s(&gpu, "bytes")[i],
            )
        })
        .collect();
    got.sort_by_key(|r| r.5);
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        vec![
            (
                s("Memcpy HtoD"),
                s("memcpy"),
                s("memcpy"),
                0,
                8,
                1_000,
                3_000,
                Some(4096)
            ),
            (
                s("ampere_sgemm_128x64_nn"),
                s("kernel"),
                s("gemm"),
                0,
                7,
                13_000,
                17_000,
                None
            ),
        ]
    );
    let d = diagnostics(&ds, "in");
    assert_eq!(d.get("unmatched_end"), Some(&1), "{d:?}");
    assert_eq!(d.get("unmatched_begin"), Some(&1), "{d:?}");
    assert_eq!(
        d.get("unknown_phase"),
        None,
        "M and i are known phases: {d:?}"
    );
    let runs = table(&ds, "runs", "in");
    assert_eq!(strs(&runs, "format"), [Some("chrome".to_string())]);
    // Every element of the array is an event: 13.
    assert_eq!(i64s(&runs, "event_count"), [Some(13)]);
    assert_eq!(i64s(&runs, "cpu_op_count"), [Some(4)]);
    // Both GPU slices ran on device 0 (pid 0).
    assert_eq!(i64s(&runs, "device_index"), [Some(0)]);
}

#[test]
fn object_form_and_the_rank_map() {
    // The same events in an object container (closed this time), with a rank map naming
    // pid 1: the whole file lands under that rank.
    let body = ARRAY.trim_end().trim_end_matches(',');
    let text = format!("{{\"displayTimeUnit\": \"ns\", \"traceEvents\": {body}]}}");
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("ranks.txt");
    std::fs::write(&map, "# pid rank\n1 5\n").unwrap();
    let ds = ingest_text("t.json", &text, |o| o.rank_map = Some(map.clone()));
    let ds = ds.path().join("ds");
    assert_eq!(cpu_rows(&ds, "in").len(), 4);
    let runs = table(&ds, "runs", "in");
    assert_eq!(i64s(&runs, "rank"), [Some(5)]);
    assert_eq!(strs(&runs, "rank_source"), [Some("rank_map".to_string())]);
    assert!(ds.join("cpu_ops/run=in/rank=5").is_dir());

    // Pids mapping to two ranks: the lowest mapped pid (0, the GPU slices') decides, and the
    // conflict is a finding.
    std::fs::write(&map, "1 5\n0 2\n").unwrap();
    let dir2 = ingest_text("t.json", &text, |o| o.rank_map = Some(map.clone()));
    let ds2 = dir2.path().join("ds");
    assert_eq!(i64s(&table(&ds2, "runs", "in"), "rank"), [Some(2)]);
    assert_eq!(diagnostics(&ds2, "in").get("rank_map_ambiguous"), Some(&1));
}

#[test]
fn catapult_flow_sample_matches_a_serde_walk() {
    let Some(root) = corpus() else { return };
    let path = root.join("chrome/flow_simple.json");
    let v = raw_json(&path);
    let evs = events(&v);
    // Independent answer: every `X` event is one cpu_ops row (cat "ipc" is no Kineto
    // category), times µs × 1000.
    let mut want: Vec<CpuRow> = evs
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ts = (e["ts"].as_f64().unwrap() * 1000.0) as i64;
            let dur = (e["dur"].as_f64().unwrap() * 1000.0) as i64;
            let name = e["name"].as_str().unwrap().to_string();
            (
                name,
                e["pid"].as_i64(),
                e["tid"].as_i64(),
                ts,
                ts + dur,
                "cpu_op".into(),
            )
        })
        .collect();
    want.sort_by_key(|r| (r.3, r.0.clone()));
    assert!(!want.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let opts = aorta_ingest::Options {
        out: dir.path().join("ds"),
        label: Some("flow".into()),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested.len(), 1);
    let ds = dir.path().join("ds");
    assert_eq!(cpu_rows(&ds, "flow"), want);
    assert_eq!(table(&ds, "gpu_activities", "flow").height(), 0);
    let runs = table(&ds, "runs", "flow");
    assert_eq!(strs(&runs, "format"), [Some("chrome".to_string())]);
    assert_eq!(i64s(&runs, "event_count"), [Some(evs.len() as i64)]);
    // Flow events (s/t/f) are known phases, not findings.
    assert_eq!(diagnostics(&ds, "flow").get("unknown_phase"), None);
}

#[test]
fn pairs_meet_across_windows_and_workers() {
    // ~6 MB of events: parsed in several windows, each split among workers. On tid 1 one B
    // opens before everything and its E comes last; on tid 2, pair k spans events
    // 1000k..1000k+999. Each pair's row must come out exactly once, with its own times.
    let n = 60_000;
    let mut text = String::from(
        "[\n{\"ph\": \"B\", \"name\": \"whole\", \"pid\": 1, \"tid\": 1, \"ts\": 0},\n",
    );
    let mut want_pairs = Vec::new();
    for i in 0..n {
        if i % 1000 == 0 {
            let name = format!("pair{}", i / 1000);
            text.push_str(&format!(
                "{{\"ph\": \"B\", \"name\": \"{name}\", \"pid\": 1, \"tid\": 2, \"ts\": {i}}},\n"
            ));
            want_pairs.push((name, i as i64 * 1000, (i as i64 + 999) * 1000));
        }
        text.push_str(&format!(
            "{{\"ph\": \"X\", \"name\": \"x\", \"cat\": \"c\", \"pid\": 1, \"tid\": 3, \"ts\": {i}, \"dur\": 0.5, \"args\": {{\"pad\": \"{}\"}}}},\n",
            "p".repeat(40)
        ));
        if i % 1000 == 999 {
            text.push_str(&format!(
                "{{\"ph\": \"E\", \"pid\": 1, \"tid\": 2, \"ts\": {i}}},\n"
            ));
        }
    }
    text.push_str(&format!(
        "{{\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": {n}}}\n]\n"
    ));
    assert!(text.len() > 5 << 20);
    let dir = ingest_text("big.json", &text, |_| {});
    let ds = dir.path().join("ds");
    let rows = cpu_rows(&ds, "in");
    assert_eq!(rows.len(), n + n / 1000 + 1);
    let mut pairs: Vec<(String, i64, i64)> = rows
        .iter()
        .filter(|r| r.2 == Some(2))
        .map(|r| (r.0.clone(), r.3, r.4))
        .collect();
    pairs.sort_by_key(|p| p.1);
    assert_eq!(pairs, want_pairs);
    let whole: Vec<_> = rows.iter().filter(|r| r.0 == "whole").collect();
    assert_eq!(whole.len(), 1);
    assert_eq!((whole[0].3, whole[0].4), (0, n as i64 * 1000));
    let d = diagnostics(&ds, "in");
    assert_eq!(
        d.get("unmatched_begin").or(d.get("unmatched_end")),
        None,
        "{d:?}"
    );
}
