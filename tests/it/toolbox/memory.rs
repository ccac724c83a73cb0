//! The `memory` table and `aorta memory`: a hand-made trace whose allocations, frees and peaks
//! are worked out in the comments, and the corpus's `profile_memory` traces against the same
//! peaks computed here from the raw JSON (serde_json), with each event's step found by hand
//! from the `ProfilerStep#N` spans.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::ok;
use crate::common::{corpus, events, i64s, ingest_text, raw_json, strs, table};

/// Two steps on pid 1: `ProfilerStep#1` 100–200 µs and `ProfilerStep#2` 300–400 µs. Device
/// cuda:0 (type 1, id 0), totals after each event:
/// - step 1: +1000 (1000, reserved 2048), +500 (1500), −1000 (500): allocated peak 1500,
///   reserved peak 2048;
/// - step 2: −500 (0; before it, 500), +3000 (3000, reserved 4096), −3000 (0): peak 3000,
///   reserved 4096;
/// - at 500 µs, outside both: +10 (10, reserved 4096).
///
/// cuda:1 in step 1: +7 (7, reserved 2 MiB). Host (type 0, id −1) in step 2: +8 (8), −8 (0).
/// An `[OutOfMemory]` instant and a `[memory]` event without `ts` are not rows (the second is
/// a `missing_timestamp` finding).
const TRACE: &str = r#"{
  "baseTimeNanoseconds": 1000000000000,
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 300, "dur": 100},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 110,
   "args": {"Total Reserved": 2048, "Total Allocated": 1000, "Bytes": 1000, "Addr": 4096, "Device Id": 0, "Device Type": 1, "Ev Idx": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 120.5,
   "args": {"Total Reserved": 2048, "Total Allocated": 1500, "Bytes": 500, "Addr": 8192, "Device Id": 0, "Device Type": 1, "Ev Idx": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 150,
   "args": {"Total Reserved": 2097152, "Total Allocated": 7, "Bytes": 7, "Addr": 12288, "Device Id": 1, "Device Type": 1, "Ev Idx": 2}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 190,
   "args": {"Total Reserved": 2048, "Total Allocated": 500, "Bytes": -1000, "Addr": 4096, "Device Id": 0, "Device Type": 1, "Ev Idx": 3}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", "pid": 1, "tid": 1, "ts": 195, "args": {}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 310,
   "args": {"Total Reserved": 2048, "Total Allocated": 0, "Bytes": -500, "Addr": 8192, "Device Id": 0, "Device Type": 1, "Ev Idx": 4}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 320,
   "args": {"Total Reserved": 4096, "Total Allocated": 3000, "Bytes": 3000, "Addr": 16384, "Device Id": 0, "Device Type": 1, "Ev Idx": 5}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 330,
   "args": {"Total Reserved": 0, "Total Allocated": 8, "Bytes": 8, "Addr": 64, "Device Id": -1, "Device Type": 0, "Ev Idx": 6}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 340,
   "args": {"Total Reserved": 0, "Total Allocated": 0, "Bytes": -8, "Addr": 64, "Device Id": -1, "Device Type": 0, "Ev Idx": 7}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 390,
   "args": {"Total Reserved": 4096, "Total Allocated": 0, "Bytes": -3000, "Addr": 16384, "Device Id": 0, "Device Type": 1, "Ev Idx": 8}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
   "args": {"Total Reserved": 4096, "Total Allocated": 1, "Bytes": 1, "Device Id": 0, "Device Type": 1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 500,
   "args": {"Total Reserved": 4096, "Total Allocated": 10, "Bytes": 10, "Addr": 20480, "Device Id": 0, "Device Type": 1, "Ev Idx": 9}}
  ]
}"#;

/// (device_type, device, step) → (events, allocated_peak, reserved_peak) of a peaks JSON.
type Peaks = BTreeMap<(String, i64, Option<i64>), (i64, i64, i64)>;

fn peaks_of(json: &str) -> Peaks {
    let doc: Value = serde_json::from_str(json).unwrap();
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let key = (
                r["device_type"].as_str().unwrap().to_string(),
                r["device"].as_i64().unwrap(),
                r["step"].as_i64(),
            );
            let n = |k: &str| r[k].as_i64().unwrap();
            (key, (n("events"), n("allocated_peak"), n("reserved_peak")))
        })
        .collect()
}

fn key(t: &str, d: i64, s: Option<i64>) -> (String, i64, Option<i64>) {
    (t.to_string(), d, s)
}

#[test]
fn hand_made_allocations_give_the_hand_computed_rows_and_peaks() {
    let dir = ingest_text("rank0.json", TRACE, |_| {});
    let ds = dir.path().join("ds");
    let mem = table(&ds, "memory", "in");
    // Ten events with a ts; times on the Kineto rows' clock (base + µs × 1000).
    let base = 1_000_000_000_000i64;
    let ts: Vec<i64> = i64s(&mem, "ts_ns")
        .iter()
        .map(|t| t.unwrap() - base)
        .collect();
    assert_eq!(
        ts,
        [
            110_000, 120_500, 150_000, 190_000, 310_000, 320_000, 330_000, 340_000, 390_000,
            500_000
        ]
    );
    let bytes: Vec<i64> = i64s(&mem, "bytes").iter().map(|b| b.unwrap()).collect();
    assert_eq!(bytes, [1000, 500, 7, -1000, -500, 3000, 8, -8, -3000, 10]);
    let steps = i64s(&mem, "step");
    let want: Vec<Option<i64>> = [1, 1, 1, 1, 2, 2, 2, 2, 2]
        .into_iter()
        .map(Some)
        .chain([None])
        .collect();
    assert_eq!(steps, want);
    let types = strs(&mem, "device_type");
    assert_eq!(types[6].as_deref(), Some("cpu"));
    assert_eq!(types[0].as_deref(), Some("cuda"));
    assert_eq!(i64s(&mem, "addr")[1], Some(8192));
    let diag = table(&ds, "diagnostics", "in");
    let codes = strs(&diag, "code");
    assert!(codes
        .iter()
        .any(|c| c.as_deref() == Some("missing_timestamp")));

    let ds = ds.to_str().unwrap();
    let by_step = peaks_of(&ok(&["memory", ds, "--format", "json"]));
    let want: Peaks = [
        (key("cpu", -1, Some(2)), (2, 8, 0)),
        (key("cuda", 0, None), (1, 10, 4096)),
        (key("cuda", 0, Some(1)), (3, 1500, 2048)),
        // Opens with a free: the 500 held before it is the step's first total.
        (key("cuda", 0, Some(2)), (3, 3000, 4096)),
        (key("cuda", 1, Some(1)), (1, 7, 2097152)),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_step, want);
    let by_rank = peaks_of(&ok(&["memory", ds, "--by", "rank", "--format", "json"]));
    let want: Peaks = [
        (key("cpu", -1, None), (2, 8, 0)),
        (key("cuda", 0, None), (7, 3000, 4096)),
        (key("cuda", 1, None), (1, 7, 2097152)),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_rank, want);
    let text = ok(&["memory", ds]);
    assert!(
        text.contains("2.93 KiB"),
        "the 3000-byte peak in KiB:\n{text}"
    );
    let csv = ok(&["memory", ds, "--format", "csv"]);
    assert_eq!(csv.lines().count(), 1 + 5, "{csv}");
}

#[test]
fn a_trace_without_memory_events_has_no_memory_part_and_says_so() {
    let trace = r#"{"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10}
    ]}"#;
    let dir = ingest_text("rank0.json", trace, |_| {});
    let ds = dir.path().join("ds");
    assert!(!ds.join("memory").exists());
    let text = ok(&["memory", ds.to_str().unwrap()]);
    assert!(text.contains("run in: no memory events"), "{text}");
}

/// (device type code, device id, step) → (events, allocated peak, reserved peak).
type RawPeaks = BTreeMap<(i64, i64, Option<i64>), (i64, i64, i64)>;

/// Per (device type code, device id, step) of one raw trace: events, and the allocated peak
/// (max of the total after and before each event) and reserved peak, the step being the
/// `ProfilerStep#N` CPU span of the event's process around its `ts`.
fn raw_peaks(path: &Path) -> RawPeaks {
    let raw = raw_json(path);
    let evs = events(&raw);
    let us = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let spans: Vec<(i64, i64, i64, i64)> = evs
        .iter()
        .filter(|e| e["cat"] == "user_annotation")
        .filter_map(|e| {
            let n = e["name"].as_str()?.strip_prefix("ProfilerStep#")?;
            let (s, d) = (us(&e["ts"]), us(&e["dur"]));
            Some((e["pid"].as_i64()?, s, s + d, n.parse().ok()?))
        })
        .collect();
    let mut out = BTreeMap::new();
    for e in evs.iter().filter(|e| e["name"] == "[memory]") {
        let (a, ts, pid) = (&e["args"], us(&e["ts"]), e["pid"].as_i64().unwrap());
        let step = spans
            .iter()
            .find(|s| s.0 == pid && s.1 <= ts && ts <= s.2)
            .map(|s| s.3);
        let n = |k: &str| a[k].as_i64().unwrap();
        let k = (n("Device Type"), n("Device Id"), step);
        let total = n("Total Allocated");
        let peak = total.max(total - n("Bytes"));
        let slot = out.entry(k).or_insert((0, i64::MIN, i64::MIN));
        *slot = (
            slot.0 + 1,
            slot.1.max(peak),
            slot.2.max(n("Total Reserved")),
        );
    }
    out
}

#[test]
fn corpus_memory_peaks_match_the_raw_events() {
    let Some(root) = corpus() else {
        return;
    };
    let names = [(1, "cuda"), (6, "hip"), (0, "cpu")];
    let mut checked = 0;
    for dir in ["kineto/cuda/h100_models", "kineto/rocm/mi300x_models"] {
        for model in ["bert-small", "qwen1.5-0.5b-chat"] {
            let path = root.join(dir).join(format!("{model}.json.gz"));
            let want: Peaks = raw_peaks(&path)
                .into_iter()
                .map(|((t, d, s), v)| {
                    let name = names.iter().find(|n| n.0 == t).unwrap().1;
                    (key(name, d, s), v)
                })
                .collect();
            assert!(want.values().map(|v| v.0).sum::<i64>() >= 236, "{path:?}");
            let dir = tempfile::tempdir().unwrap();
            let ds = dir.path().join("ds");
            let opts = aorta_ingest::Options {
                out: ds.clone(),
                ..Default::default()
            };
            aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default()).unwrap();
            let got = peaks_of(&ok(&["memory", ds.to_str().unwrap(), "--format", "json"]));
            assert_eq!(got, want, "{path:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}
