//! `aorta breakdown` and `aorta launches` on a hand-made trace (tests/fixtures/idle/rank0.json)
//! where every kind of idle is known by construction, checked twice: against the values worked
//! out by hand below, and against a brute force over the fixture's raw events (serde_json, one
//! nanosecond at a time). The corpus test is in `idle_corpus`.
//!
//! The fixture (µs; streams 7, 9, 13; steps 1 [0, 400) and 2 [400, 800) on the CPU):
//!
//! | kernel | stream | call (start, dur) | GPU span | step |
//! |---|---|---|---|---|
//! | K1 gemm | 7 | 10, 5 | 20–100 | 1 |
//! | K2 elementwise | 7 | 30, 5 | 100.01–150 | 1 (10 ns after K1, queued: kernel-wait) |
//! | C1 nccl all-reduce | 13 | 40, 5 | 180–260 | 1 (60 µs alone: non-compute, comm) |
//! | K4 elementwise | 7 | 50, 5 | 300–320 | 1 (queued since 50: gap 260–300 other) |
//! | M1 memcpy | 9 | 60, 5 (`cudaMemcpyAsync`) | 330–340 | 1 (gap 320–330 other; memory time 10) |
//! | K3 gemm | 7 | 160, 5 | 170–200 | 1 (launched after K2 ended at 150: host-wait 20) |
//! | K5 gemm | 7 | 410, 5 | 420–500 | 2 |
//! | K6 elementwise | 13 | 420, 5 (thread 2) | 450–480 | 2 (under K5: no gap) |
//! | K8 elementwise | 9 | none (correlation 999) | 520–530 | 2 (launch unknown: gap 500–520 other) |
//! | K7 gemm | 7 | 560, 5 | 570–600 | 2 (host-wait 530–570) |
//! | K9 gemm | 7 | 850, 5 | 870–900 | outside (`-`) |
//! | K10 elementwise | 7 | 905, 1 | 910–920 | outside (host-wait 900–910) |

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{numpy_quantile, ok};

/// The fixture ingested (run label `idle`).
fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let opts = aorta_ingest::Options {
        out: ds.clone(),
        label: Some("idle".into()),
        ..Default::default()
    };
    aorta_ingest::ingest(&[fixture_path()], &opts, &Default::default()).unwrap();
    (dir, ds)
}

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/idle/rank0.json")
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// The row of `rows` whose step is `step` (`None`: null).
fn at_step(rows: &Value, step: Option<i64>) -> &Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["step"].as_i64() == step)
        .unwrap_or_else(|| panic!("no step {step:?} in {rows}"))
}

fn ints(row: &Value, cols: &[&str]) -> Vec<i64> {
    cols.iter().map(|c| row[*c].as_i64().unwrap()).collect()
}

const BREAKDOWN: [&str; 11] = [
    "window_ns",
    "compute_ns",
    "non_compute_ns",
    "comm_only_ns",
    "memory_only_ns",
    "idle_ns",
    "host_wait_ns",
    "kernel_wait_ns",
    "other_idle_ns",
    "gaps",
    "activities",
];

/// The hand-worked numbers of the table in the module docs.
#[test]
fn breakdown_and_idle_split_of_the_hand_made_trace_are_the_hand_worked_values() {
    let (_dir, ds) = fixture();
    let ds = ds.to_str().unwrap();
    // The literal 30 ns threshold (HTA's documented unit) for the hand-worked values; the
    // default (30 µs, HTA's effective unit) is checked below.
    let step = json(&[
        "breakdown",
        ds,
        "--by",
        "step",
        "--kernel-wait-ns",
        "30",
        "--format",
        "json",
    ]);
    let rows = &step["rows"];
    // Step 1: window 20–340; busy 80 + 49.99 + 90 + 20 + 10; compute K1 K2 K3 K4; C1 alone
    // 200–260; M1 alone; gaps 0.01 kernel-wait, 20 host-wait, 40 + 10 other.
    let s1 = [
        320_000, 179_990, 70_000, 60_000, 10_000, 70_010, 20_000, 10, 50_000, 4, 6,
    ];
    assert_eq!(ints(at_step(rows, Some(1)), &BREAKDOWN), s1);
    // Step 2: window 420–600, all compute; gap 500–520 ended by K8 (no launch): other;
    // 530–570 ended by K7 launched at 560: host-wait.
    let s2 = [180_000, 120_000, 0, 0, 0, 60_000, 40_000, 0, 20_000, 2, 4];
    assert_eq!(ints(at_step(rows, Some(2)), &BREAKDOWN), s2);
    let out = [50_000, 40_000, 0, 0, 0, 10_000, 10_000, 0, 0, 1, 2];
    assert_eq!(ints(at_step(rows, None), &BREAKDOWN), out);
    let r1 = at_step(rows, Some(1));
    let pct = |c: &str| r1[c].as_f64().unwrap();
    assert!((pct("compute_pct") - 100.0 * 179.99 / 320.0).abs() < 1e-9);
    assert!((pct("kernel_wait_pct") - 100.0 * 0.01 / 70.01).abs() < 1e-9);

    // The whole rank: the steps' gaps, plus 340–420 (K5 launched at 410) and 600–870 (K9
    // launched at 850), both host-wait.
    let rank = json(&[
        "breakdown",
        ds,
        "--streams",
        "--kernel-wait-ns",
        "30",
        "--format",
        "json",
    ]);
    let whole = [
        900_000, 339_990, 70_000, 60_000, 10_000, 490_010, 420_000, 10, 70_000, 9, 12,
    ];
    assert_eq!(ints(&rank["rows"][0], &BREAKDOWN), whole);
    // HTA's split per stream: stream 7's gaps before K2 (kernel-wait), K3, K5, K7, K9, K10
    // (host-wait 20 + 100 + 70 + 270 + 10) and K4 (100, other); stream 9's 340–520 before
    // K8 (no launch: other); stream 13's 260–450 before K6 (launched at 420: host-wait).
    let streams: BTreeMap<i64, Vec<i64>> = rank["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let cols = ["host_wait_ns", "kernel_wait_ns", "other_idle_ns", "gaps"];
            (r["stream"].as_i64().unwrap(), ints(r, &cols))
        })
        .collect();
    let want = BTreeMap::from([
        (7, vec![470_000, 10, 100_000, 7]),
        (9, vec![0, 0, 180_000, 1]),
        (13, vec![190_000, 0, 0, 1]),
    ]);
    assert_eq!(streams, want);

    // A threshold under the 10 ns gap makes it other.
    let five = json(&[
        "breakdown",
        ds,
        "--by",
        "step",
        "--kernel-wait-ns",
        "5",
        "--format",
        "json",
    ]);
    let cols = ["kernel_wait_ns", "other_idle_ns"];
    assert_eq!(ints(at_step(&five["rows"], Some(1)), &cols), [0, 50_010]);

    // The default, 30 µs: step 1's 10 µs gap before M1 (queued since 60) becomes kernel-wait
    // too; the 40 µs before K4 (queued since 50) stays other.
    let default = json(&["breakdown", ds, "--by", "step", "--format", "json"]);
    let s1_30us = [
        320_000, 179_990, 70_000, 60_000, 10_000, 70_010, 20_000, 10_010, 40_000, 4, 6,
    ];
    assert_eq!(
        ints(at_step(&default["rows"], Some(1)), &BREAKDOWN),
        s1_30us
    );
}

#[test]
fn launch_statistics_and_queue_of_the_hand_made_trace_are_the_hand_worked_values() {
    let (_dir, ds) = fixture();
    let ds = ds.to_str().unwrap();
    let doc = json(&[
        "launches", ds, "--by", "step", "--top", "2", "--format", "json",
    ]);
    let s1 = at_step(&doc["rows"], Some(1));
    assert_eq!(ints(s1, &["activities", "kernels", "launched"]), [6, 5, 6]);
    // Delays (start − call end, µs): 5, 65.01, 135, 245, 265, 5 → median (65.01 + 135) / 2.
    assert_eq!(s1["delay_p50_ns"].as_f64(), Some(100_005.0));
    assert_eq!(s1["cpu_p50_ns"].as_f64(), Some(5_000.0));
    // Launch gaps of step 1 (µs): 15→30, 35→40, 45→50, 55→60 and 65→160, the longest.
    assert_eq!(s1["longest_gap_ns"].as_i64(), Some(95_000));
    // Queue over 10–330 µs: stream 7 340.01 µs·kernels, 13 140, 9 270.
    assert_eq!(s1["queue_max"].as_i64(), Some(2));
    assert!((s1["queue_mean"].as_f64().unwrap() - 750_010.0 / 320_000.0).abs() < 1e-12);
    let s2 = at_step(&doc["rows"], Some(2));
    assert_eq!(
        ints(s2, &["activities", "launched", "queue_max"]),
        [4, 3, 1]
    );
    assert!((s2["queue_mean"].as_f64().unwrap() - 50.0 / 160.0).abs() < 1e-12);
    let gaps: Vec<(Option<i64>, i64, &str, &str)> = doc["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["step"].as_i64(),
                g["gap_ns"].as_i64().unwrap(),
                g["before"].as_str().unwrap(),
                g["kernel"].as_str().unwrap(),
            )
        })
        .collect();
    let gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64";
    let fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>";
    assert_eq!(
        gaps,
        [
            (None, 285_000, "cudaLaunchKernel", gemm),
            (None, 50_000, "cudaLaunchKernel", fill),
            (Some(1), 95_000, "cudaMemcpyAsync", gemm),
            (Some(1), 15_000, "cudaLaunchKernel", fill),
            (Some(2), 245_000, "cudaLaunchKernel", gemm),
            (Some(2), 135_000, "cudaLaunchKernel", gemm),
        ]
    );
}

/// One GPU activity of the raw fixture.
struct Raw {
    stream: i64,
    start: i64,
    end: i64,
    compute: bool,
    comm: bool,
    /// Its runtime call: (start, end, name).
    call: Option<(i64, i64, String)>,
    step: Option<i64>,
}

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// The fixture's activities read with serde_json: category by name (gemm and elementwise
/// compute, nccl comm, gpu_memcpy memory), call by correlation, step by the CPU
/// `ProfilerStep` span holding the call's start (or, without a call, the activity's start).
fn raw_events() -> Vec<Raw> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(fixture_path()).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let span = |e: &Value| (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"]));
    let mut steps = vec![];
    let mut calls = HashMap::new();
    for e in events {
        let name = e["name"].as_str().unwrap();
        if let Some(n) = name.strip_prefix("ProfilerStep#") {
            steps.push((span(e), n.parse::<i64>().unwrap()));
        } else if e["cat"] == "cuda_runtime" {
            let (s, t) = span(e);
            calls.insert(
                e["args"]["correlation"].as_i64().unwrap(),
                (s, t, name.to_string()),
            );
        }
    }
    let step_of = |t: i64| {
        steps
            .iter()
            .find(|((s, e), _)| *s <= t && t < *e)
            .map(|x| x.1)
    };
    events
        .iter()
        .filter(|e| e["cat"] == "kernel" || e["cat"] == "gpu_memcpy")
        .map(|e| {
            let name = e["name"].as_str().unwrap();
            let (start, end) = span(e);
            let call = calls
                .get(&e["args"]["correlation"].as_i64().unwrap())
                .cloned();
            Raw {
                stream: e["args"]["stream"].as_i64().unwrap(),
                start,
                end,
                compute: name.contains("gemm") || name.contains("elementwise"),
                comm: name.contains("nccl"),
                step: step_of(call.as_ref().map_or(start, |c| c.0)),
                call,
            }
        })
        .collect()
}

/// Brute force of one group, nanosecond by nanosecond over its window: (window, compute,
/// non-compute, comm-only, idle, host-wait, kernel-wait, other, gaps).
fn brute_breakdown(acts: &[&Raw], kernel_wait: i64) -> [i64; 9] {
    let w0 = acts.iter().map(|a| a.start).min().unwrap();
    let w1 = acts.iter().map(|a| a.end).max().unwrap();
    let at =
        |t: i64, f: &dyn Fn(&Raw) -> bool| acts.iter().any(|a| a.start <= t && t < a.end && f(a));
    let mut out = [0i64; 9];
    out[0] = w1 - w0;
    let mut gap_from = None;
    for t in w0..w1 {
        let busy = at(t, &|_| true);
        let compute = at(t, &|a| a.compute);
        out[1] += i64::from(compute);
        out[2] += i64::from(busy && !compute);
        out[3] += i64::from(busy && !compute && at(t, &|a| a.comm));
        out[4] += i64::from(!busy);
        match (busy, gap_from) {
            (false, None) => gap_from = Some(t),
            (true, Some(g0)) => {
                // The gap [g0, t) is host-wait when everything starting at t was launched
                // after g0; else kernel-wait when short and queued (a launch known); else
                // other.
                let next: Vec<&&Raw> = acts.iter().filter(|a| a.start == t).collect();
                let host = next
                    .iter()
                    .all(|a| a.call.as_ref().is_some_and(|c| c.0 > g0));
                let slot = if host {
                    5
                } else if t - g0 < kernel_wait && next.iter().any(|a| a.call.is_some()) {
                    6
                } else {
                    7
                };
                out[slot] += t - g0;
                out[8] += 1;
                gap_from = None;
            }
            _ => {}
        }
    }
    out
}

/// Brute force of the queue over a group's launch window: (max, mean) of the activities of
/// the whole rank launched (call start ≤ t) and not started (t < start), summed over streams,
/// sampled every nanosecond.
fn brute_queue(all: &[Raw], group: &[&Raw]) -> (i64, f64) {
    let launched: Vec<&&Raw> = group.iter().filter(|a| a.call.is_some()).collect();
    let from = launched
        .iter()
        .map(|a| a.call.as_ref().unwrap().0)
        .min()
        .unwrap();
    let to = launched.iter().map(|a| a.start).max().unwrap();
    let (mut area, mut max) = (0i64, 0i64);
    for t in from..to {
        let mut per_stream: HashMap<i64, i64> = HashMap::new();
        for a in all {
            if a.call.as_ref().is_some_and(|c| c.0 <= t) && t < a.start {
                *per_stream.entry(a.stream).or_default() += 1;
            }
        }
        area += per_stream.values().sum::<i64>();
        max = max.max(per_stream.values().copied().max().unwrap_or(0));
    }
    (max, area as f64 / (to - from) as f64)
}

/// Every step's breakdown, idle split, launch delays, launch gaps and queue equal the brute
/// force over the raw events.
#[test]
fn breakdown_and_launches_equal_a_brute_force_over_the_raw_events() {
    let (_dir, ds) = fixture();
    let ds = ds.to_str().unwrap();
    let raw = raw_events();
    let b = json(&["breakdown", ds, "--by", "step", "--format", "json"]);
    let l = json(&[
        "launches", ds, "--by", "step", "--top", "10", "--format", "json",
    ]);
    let cols = [
        "window_ns",
        "compute_ns",
        "non_compute_ns",
        "comm_only_ns",
        "idle_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_idle_ns",
        "gaps",
    ];
    // Every call in start order, for the gaps: the one before each is the latest end of
    // the calls that started earlier.
    let mut calls: Vec<(i64, i64, Option<i64>)> = raw
        .iter()
        .filter_map(|a| a.call.as_ref().map(|c| (c.0, c.1, a.step)))
        .collect();
    calls.sort();
    for step in [Some(1), Some(2), None] {
        let group: Vec<&Raw> = raw.iter().filter(|a| a.step == step).collect();
        let row = at_step(&b["rows"], step);
        assert_eq!(
            ints(row, &cols),
            brute_breakdown(&group, 30_000),
            "step {step:?}"
        );
        let lr = at_step(&l["rows"], step);
        let delays: Vec<i64> = group
            .iter()
            .filter_map(|a| a.call.as_ref().map(|c| a.start - c.1))
            .collect();
        for (col, q) in [("delay_p50_ns", 0.5), ("delay_p99_ns", 0.99)] {
            let got = lr[col].as_f64().unwrap();
            assert!(
                (got - numpy_quantile(&delays, q)).abs() < 1e-6,
                "{col} {step:?}"
            );
        }
        let (max, mean) = brute_queue(&raw, &group);
        assert_eq!(lr["queue_max"].as_i64(), Some(max), "step {step:?}");
        assert!(
            (lr["queue_mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "step {step:?}"
        );
        let mut gaps: Vec<i64> = (1..calls.len())
            .filter(|&i| calls[i].2 == step)
            .map(|i| calls[i].0 - calls[..i].iter().map(|c| c.1).max().unwrap())
            .filter(|&g| g > 0)
            .collect();
        gaps.sort_by(|a, b| b.cmp(a));
        let got: Vec<i64> = l["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["step"].as_i64() == step)
            .map(|g| g["gap_ns"].as_i64().unwrap())
            .collect();
        assert_eq!(got, gaps, "step {step:?}");
    }
}

/// A missing dataset, an unknown run: one error line naming it, exit status 2, nothing
/// written into the dataset; the table and CSV forms print the same rows as JSON.
#[test]
fn bad_input_is_one_error_line_and_the_formats_agree() {
    use crate::common::cli::{aorta, code, snapshot, stderr};
    let (dir, ds) = fixture();
    let missing = dir.path().join("nothing-here");
    for cmd in ["breakdown", "launches"] {
        let o = aorta(&[cmd.as_ref(), missing.as_os_str()]);
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).contains("nothing-here"), "{}", stderr(&o));
        let before = snapshot(&ds);
        let o = aorta(&[
            cmd.as_ref(),
            ds.as_os_str(),
            "--run".as_ref(),
            "nope".as_ref(),
        ]);
        assert_eq!(code(&o), 2, "{}", stderr(&o));
        assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
        assert_eq!(snapshot(&ds), before);
    }
    let ds = ds.to_str().unwrap();
    let csv = ok(&["breakdown", ds, "--by", "step", "--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(lines[0].starts_with("run,rank,step,activities,window_ns,compute_ns"));
    assert!(lines
        .contains(&"idle,0,,2,50000,40000,0,0,0,10000,80.0,0.0,20.0,10000,0,0,100.0,0.0,0.0,1"));
    let table = ok(&["breakdown", ds, "--by", "step"]);
    assert!(
        table.contains("\n  0     -              2   0.050"),
        "{table}"
    );
    let q = ok(&["launches", ds, "--queue-series", "--format", "csv"]);
    // Stream 7's queue: 16 changes (8 launches, 8 starts), stream 13's 4, stream 9's 2.
    assert_eq!(q.lines().count(), 1 + 16 + 4 + 2, "{q}");
}

/// `aorta report`'s compute / non-compute / idle table on the fixture: the rank's hand-worked
/// numbers (module docs), in ms, at the default 30 µs kernel-wait threshold: the gaps before
/// K2 (0.01 µs) and M1 (10 µs) are kernel-wait, those before K4 (40 µs) and K8 (no launch)
/// other.
#[test]
fn the_report_section_shows_the_hand_worked_numbers() {
    let (dir, ds) = fixture();
    let html = dir.path().join("r.html");
    ok(&["report", ds.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2 id=\"idle\">Compute, non-compute and idle per rank</h2>"));
    // The headline quotes the same hand-worked numbers: idle 0.490 of 0.900 ms, 0.420 of it
    // host-wait.
    assert!(
        page.contains(
            "Idle: 54.4 % of the window (0.490 ms of 0.900 ms), mostly host-wait (0.420 ms"
        ),
        "the headline's idle verdict"
    );
    let cells = [
        "0", "0.900", "0.340", "0.070", "0.490", "54.4", "0.420", "0.010", "0.060", "9",
    ];
    let row: String = cells
        .iter()
        .map(|c| format!("<td class=\"n\">{c}</td>"))
        .collect();
    assert!(
        page.contains(&format!("<tr><td>idle</td>{row}</tr>")),
        "{row}"
    );
}
