//! Per-window TP overlap (`aorta_transform::tuning::tp_windows`, docs/SWEEPS.md "Per-window
//! TP overlap from traces"):
//!
//! - a hand-made Kineto trace with known windows, a runtime and a driver launch, a GEMM, an
//!   NCCL kernel, a peer-to-peer copy and a set, a launch outside every window and a nested
//!   phase range, against hand-computed unions, intersection and e2e;
//! - the TP layer measured on 4 × H200 (tests/golden/device/tp, `workloads/torch/tp_overlap.py`:
//!   `record_function` windows in an `fprop` range, cuBLAS `nvjet_*` GEMMs, NCCL kernels
//!   launched through `cuLaunchKernelEx`): every window is found, its kernels' names are the
//!   expected ones, its numbers equal an independent reading of the raw trace (serde_json,
//!   launch by launch), serial runs overlap nothing, and the e2e agrees with the workload's
//!   own CUDA-event time of the same window and step;
//! - the scaling check fed by the windows recommends what the CUDA-event times recommend
//!   through `workloads/torch/tp_report.py --csv` (TP 1 for every operator and overall).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use aorta_transform::tuning::tp_scaling::{self, DEFAULT_TOLERANCE};
use aorta_transform::tuning::tp_windows::{self, WindowInstance, WindowNames};

use crate::common::{ingest_text, raw_json, strs};

/// Hand-computed (µs): window `qkv` [20, 100] inside `fprop` launches a GEMM through the
/// driver (GPU [1000, 1060)), an NCCL all-gather through the runtime ([1040, 1100), another
/// stream), a peer copy ([1090, 1120)) and a set ([990, 995)). GEMM 60, comm union
/// [1040, 1120) = 80, overlap [1040, 1060) = 20, e2e 1120 − 990 = 130. A GEMM launched at
/// 200, inside `fprop` but in no window, is nobody's. Window `proj` [500, 600] inside `dgrad`
/// inside `backward` is dgrad, and owns its one GEMM.
#[test]
fn a_hand_made_trace_by_hand() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
      {"ph": "X", "cat": "user_annotation", "name": "fprop", "pid": 1, "tid": 1, "ts": 10, "dur": 290},
      {"ph": "X", "cat": "user_annotation", "name": "qkv", "pid": 1, "tid": 1, "ts": 20, "dur": 80},
      {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 30, "dur": 2, "args": {"correlation": 1}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 40, "dur": 2, "args": {"correlation": 2}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 50, "dur": 2, "args": {"correlation": 3}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 60, "dur": 2, "args": {"correlation": 4}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 200, "dur": 2, "args": {"correlation": 5}},
      {"ph": "X", "cat": "user_annotation", "name": "backward", "pid": 1, "tid": 1, "ts": 400, "dur": 500},
      {"ph": "X", "cat": "user_annotation", "name": "dgrad", "pid": 1, "tid": 1, "ts": 450, "dur": 350},
      {"ph": "X", "cat": "user_annotation", "name": "proj", "pid": 1, "tid": 1, "ts": 500, "dur": 100},
      {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 510, "dur": 2, "args": {"correlation": 6}},
      {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 990, "dur": 5, "args": {"stream": 7, "correlation": 4, "bytes": 64}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "pid": 0, "tid": 7, "ts": 1000, "dur": 60, "args": {"stream": 7, "correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 8, "ts": 1040, "dur": 60, "args": {"stream": 8, "correlation": 2}},
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 0, "tid": 9, "ts": 1090, "dur": 30, "args": {"stream": 9, "correlation": 3, "bytes": 1048576}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", "pid": 0, "tid": 7, "ts": 1200, "dur": 100, "args": {"stream": 7, "correlation": 5}},
      {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", "pid": 0, "tid": 7, "ts": 1400, "dur": 100, "args": {"stream": 7, "correlation": 6}}
    ]}"#;
    let dir = ingest_text("rank0.json", trace, |_| {});
    let got = tp_windows::instances(&dir.path().join("ds"), &[], &WindowNames::default()).unwrap();
    let key = |w: &WindowInstance| (w.operator.clone(), w.phase.clone(), w.step);
    assert_eq!(
        got.iter().map(key).collect::<Vec<_>>(),
        [
            ("qkv".into(), "fprop".into(), Some(4)),
            ("proj".into(), "dgrad".into(), Some(4))
        ]
    );
    let q = &got[0];
    assert_eq!(
        (q.gemm_ns, q.comm_ns, q.overlap_ns, q.e2e_ns),
        (60_000, 80_000, 20_000, 130_000)
    );
    assert_eq!((q.num_gemm_events, q.num_comm_events), (1, 2));
    let p = &got[1];
    assert_eq!(
        (p.gemm_ns, p.comm_ns, p.overlap_ns, p.e2e_ns),
        (100_000, 0, 0, 100_000)
    );
    // The GEMM of correlation 5 ([1200, 1300)) is in neither window: the two windows' GEMM
    // kernels are 2 of the trace's 3.
    assert_eq!(q.num_gemm_events + p.num_gemm_events, 2);
    // Through the rows: one instance each, the tuner's fields of the measured pass.
    let rows = tp_windows::by_config(&got, &|r: &str| Some(r.to_string()));
    assert_eq!(rows.len(), 2);
    let qkv = rows.iter().find(|r| r.operator == "qkv").unwrap();
    assert_eq!(qkv.overlap_ratio, 20.0 / 60.0);
    let f = qkv.tuner_fields();
    assert_eq!(f["forward_e2e_time_us"], 130.0);
    assert_eq!(f["backward_e2e_time_us"], Value::Null);
    // Runs named: only theirs; other names: no window.
    let ds = dir.path().join("ds");
    let names = WindowNames::default();
    assert_eq!(
        tp_windows::instances(&ds, &["in".into()], &names).unwrap(),
        got
    );
    assert!(tp_windows::instances(&ds, &["other".into()], &names)
        .unwrap()
        .is_empty());
    let others = WindowNames {
        operators: vec!["attn".into()],
    };
    assert!(tp_windows::instances(&ds, &[], &others).unwrap().is_empty());
}

const OPS: [&str; 4] = ["qkv", "proj", "fc1", "fc2"];

fn tp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/device/tp")
}

/// The fixture's runs (`tp2_overlap`, …), each ingested under its directory's name.
fn fixture_dataset(runs: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for run in runs {
        let opts = aorta_ingest::Options {
            out: tmp.path().to_path_buf(),
            label: Some(run.to_string()),
            ..Default::default()
        };
        aorta_ingest::ingest(&traces(run), &opts, &Default::default())
            .unwrap_or_else(|e| panic!("{run}: {e}"));
    }
    tmp
}

fn traces(run: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(tp_dir().join(run))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_trace_step6.json.gz"))
        .collect();
    v.sort();
    v
}

/// One GPU activity of a raw trace: name, trace category, stream, [start, end) µs.
#[derive(Debug)]
struct RawAct {
    name: String,
    cat: String,
    stream: i64,
    start: f64,
    end: f64,
}

fn stream(g: &Value) -> i64 {
    g["args"]["stream"].as_i64().unwrap_or(-1)
}

/// One window of a raw trace, read independently: its name, step, and the (name, category
/// word, start µs, end µs) of the GPU activities whose launch call (cuda_runtime or
/// cuda_driver, same pid and tid) starts inside it, and the GPU's idle time just before.
struct RawWindow {
    op: String,
    step: i64,
    acts: Vec<RawAct>,
    /// How long the compute stream ran nothing before the window's first activity, µs.
    idle_before: f64,
    /// The window's CPU span, µs.
    cpu_us: f64,
}

fn raw_windows(trace: &Path) -> Vec<RawWindow> {
    let doc = raw_json(trace);
    let ev = doc["traceEvents"].as_array().unwrap();
    let f = |e: &Value, k: &str| e[k].as_f64().unwrap_or(0.0);
    let steps: Vec<(i64, f64, f64)> = ev
        .iter()
        .filter(|e| e["cat"] == "user_annotation")
        .filter_map(|e| {
            let n = e["name"].as_str()?.strip_prefix("ProfilerStep#")?;
            Some((n.parse().ok()?, f(e, "ts"), f(e, "ts") + f(e, "dur")))
        })
        .collect();
    let gpu: HashMap<i64, Vec<&Value>> = ev
        .iter()
        .filter(|e| {
            ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
        })
        .fold(HashMap::new(), |mut m, e| {
            if let Some(c) = e["args"]["correlation"].as_i64() {
                m.entry(c).or_default().push(e);
            }
            m
        });
    let spans: Vec<(i64, f64, f64)> = gpu
        .values()
        .flatten()
        .map(|g| (stream(g), f(g, "ts"), f(g, "ts") + f(g, "dur")))
        .collect();
    let calls: Vec<&Value> = ev
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
        .collect();
    ev.iter()
        .filter(|e| e["cat"] == "user_annotation" && OPS.contains(&e["name"].as_str().unwrap()))
        .map(|w| {
            let (a, b) = (f(w, "ts"), f(w, "ts") + f(w, "dur"));
            let step = steps
                .iter()
                .find(|s| s.1 <= a && a <= s.2)
                .expect("a window inside a step")
                .0;
            let mut acts = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for c in &calls {
                let t = f(c, "ts");
                let same = c["pid"] == w["pid"] && c["tid"] == w["tid"];
                let Some(corr) = c["args"]["correlation"].as_i64() else {
                    continue;
                };
                if same && a <= t && t <= b && seen.insert(corr) {
                    for g in gpu.get(&corr).into_iter().flatten() {
                        acts.push(RawAct {
                            name: g["name"].as_str().unwrap().to_string(),
                            cat: g["cat"].as_str().unwrap().to_string(),
                            stream: stream(g),
                            start: f(g, "ts"),
                            end: f(g, "ts") + f(g, "dur"),
                        });
                    }
                }
            }
            let first = acts.iter().map(|a| a.start).fold(f64::INFINITY, f64::min);
            // The compute stream: the GEMMs'.
            let compute = acts
                .iter()
                .find(|a| a.name.starts_with("nvjet_"))
                .map(|a| a.stream);
            let busy_until = spans
                .iter()
                .filter(|s| Some(s.0) == compute && s.1 < first)
                .map(|s| s.2)
                .fold(f64::NEG_INFINITY, f64::max);
            RawWindow {
                op: w["name"].as_str().unwrap().to_string(),
                step,
                acts,
                idle_before: (first - busy_until).max(0.0),
                cpu_us: b - a,
            }
        })
        .collect()
}

/// Union length of `[start, end)` µs intervals.
fn union_us(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn len(v: &[(f64, f64)]) -> f64 {
    v.iter().map(|(s, e)| e - s).sum()
}

fn inter(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let mut t = 0.0;
    for x in a {
        for y in b {
            t += (x.1.min(y.1) - x.0.max(y.0)).max(0.0);
        }
    }
    t
}

/// The workload's own per-step CUDA-event time of each (rank, op, step), ms.
fn event_ms(run: &str) -> (u32, BTreeMap<(i64, String), Vec<f64>>) {
    let mut out = BTreeMap::new();
    let mut tp = 0;
    for e in std::fs::read_dir(tp_dir().join(run)).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("tp_summary_rank") {
            continue;
        }
        let s: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        tp = s["tp"].as_u64().unwrap() as u32;
        let rank = s["rank"].as_i64().unwrap();
        for (op, v) in s["ops"].as_object().unwrap() {
            let ms: Vec<f64> = v["event_ms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            out.insert((rank, op.clone()), ms);
        }
    }
    (tp, out)
}

const TP_RUNS: [&str; 6] = [
    "tp1_serial",
    "tp1_overlap",
    "tp2_serial",
    "tp2_overlap",
    "tp4_serial",
    "tp4_overlap",
];

/// TP 2 and 4, serial and overlapped: the windows' kernels by name, their numbers against
/// the raw trace, serial runs without overlap, and e2e against the CUDA events.
#[test]
fn the_measured_tp_layer_windows() {
    let runs = ["tp2_serial", "tp2_overlap", "tp4_serial", "tp4_overlap"];
    let ds = fixture_dataset(&runs);
    let all = tp_windows::instances(ds.path(), &[], &WindowNames::default()).unwrap();
    for run in runs {
        let (_, events) = event_ms(run);
        let overlapped = run.ends_with("overlap");
        for (rank, trace) in traces(run).iter().enumerate() {
            let rank = rank as i64;
            let raw = raw_windows(trace);
            let mine: Vec<&WindowInstance> = all
                .iter()
                .filter(|w| w.run == run && w.rank == rank)
                .collect();
            // Two profiled steps (4, 5) × four operators, all fprop.
            assert_eq!(raw.len(), 8, "{run} rank {rank}");
            assert_eq!(mine.len(), 8, "{run} rank {rank}");
            for (r, w) in raw.iter().zip(&mine) {
                let at = format!("{run} rank {rank} step {} {}", r.step, r.op);
                assert_eq!(
                    (&w.operator, w.step, w.phase.as_str()),
                    (&r.op, Some(r.step), "fprop"),
                    "{at}"
                );
                let gemm: Vec<(f64, f64)> = r
                    .acts
                    .iter()
                    .filter(|a| a.name.starts_with("nvjet_"))
                    .map(|a| (a.start, a.end))
                    .collect();
                let comm: Vec<(f64, f64)> = r
                    .acts
                    .iter()
                    .filter(|a| a.name.starts_with("ncclDevKernel_"))
                    .map(|a| (a.start, a.end))
                    .collect();
                assert!(!gemm.is_empty(), "{at}: no nvjet GEMM");
                // Column-parallel operators gather their input, row-parallel ones
                // reduce-scatter their output; the serial method runs one collective, the
                // overlapped one a chunk each (4).
                let want = if ["qkv", "fc1"].contains(&r.op.as_str()) {
                    "ncclDevKernel_AllGather"
                } else {
                    "ncclDevKernel_ReduceScatter"
                };
                assert_eq!(comm.len(), if overlapped { 4 } else { 1 }, "{at}");
                for a in r.acts.iter().filter(|a| a.name.starts_with("nccl")) {
                    assert!(a.name.starts_with(want), "{at}: {}", a.name);
                }
                // Every other owned activity is a set (NCCL's, or the output's).
                for a in &r.acts {
                    let known = a.name.starts_with("nvjet_")
                        || a.name.starts_with(want)
                        || a.cat == "gpu_memset";
                    assert!(known, "{at}: {a:?}");
                }
                assert_eq!(w.num_gemm_events, gemm.len(), "{at}");
                assert_eq!(w.num_comm_events, comm.len(), "{at}");
                let (g, c) = (union_us(gemm), union_us(comm));
                let first = r.acts.iter().map(|a| a.start).fold(f64::INFINITY, f64::min);
                let last = r
                    .acts
                    .iter()
                    .map(|a| a.end)
                    .fold(f64::NEG_INFINITY, f64::max);
                // The dataset clips an end to the next start on its stream (nanoseconds here).
                let close = |mine: i64, raw: f64, what: &str| {
                    let d = (mine as f64 / 1e3 - raw).abs();
                    assert!(d < 0.5, "{at} {what}: {mine} ns vs raw {raw} µs");
                };
                close(w.gemm_ns, len(&g), "gemm");
                close(w.comm_ns, len(&c), "comm");
                close(w.overlap_ns, inter(&g, &c), "overlap");
                close(w.e2e_ns, last - first, "e2e");
                if !overlapped {
                    // Serial: the GEMM waits for the gather, or the reduce-scatter for the GEMM.
                    assert_eq!(w.overlap_ns, 0, "{at}");
                }
                // The workload's CUDA events of the same step bracket the window on the
                // compute stream: each event fires when the stream reaches it, or when the CPU
                // records it if the stream is idle by then. So the events hold at least e2e;
                // more by the time the compute stream sat idle before the window's first
                // activity (waiting for the CPU to launch it: NCCL's launch takes 35-100 µs of
                // CPU here), at most the window's CPU span when the CPU is the slower side,
                // plus the events' own few µs.
                let ev_us = events[&(rank, r.op.clone())][r.step as usize] * 1e3;
                let e2e_us = w.e2e_ns as f64 / 1e3;
                let most = (e2e_us + r.idle_before).max(r.cpu_us) + 10.0;
                assert!(
                    (e2e_us - 0.5..=most).contains(&ev_us),
                    "{at}: events {ev_us} µs, e2e {e2e_us} µs, compute stream idle before {} µs, CPU span {} µs",
                    r.idle_before,
                    r.cpu_us
                );
            }
        }
    }
}

/// Every run's `runs.params` (its ranks agree), as a JSON object.
fn params_by_run(ds: &Path) -> HashMap<String, Map<String, Value>> {
    let runs = aorta_transform::dataset::read(ds, "runs").unwrap();
    let (run, params) = (strs(&runs, "run"), strs(&runs, "params"));
    run.into_iter()
        .zip(params)
        .filter_map(|(r, p)| Some((r?, serde_json::from_str(&p?).ok()?)))
        .collect()
}

/// All six runs, each a configuration: the windows' medians against the CUDA events of the
/// same instances, and the scaling check against the bench's own times.
#[test]
fn the_windows_recommend_what_the_cuda_events_recommend() {
    let ds = fixture_dataset(&TP_RUNS);
    let all = tp_windows::instances(ds.path(), &[], &WindowNames::default()).unwrap();
    let rows = tp_windows::by_config(&all, &|r: &str| Some(r.to_string()));
    assert_eq!(rows.len(), 6 * 4);
    for r in &rows {
        let (tp, events) = event_ms(&r.config);
        // Instances: two profiled steps (4, 5) of every rank.
        assert_eq!(r.instances, 2 * tp as usize, "{}", r.config);
        let mut ev: Vec<f64> = (0..tp as i64)
            .flat_map(|rank| {
                let v = &events[&(rank, r.operator.clone())];
                [v[4] * 1e3, v[5] * 1e3]
            })
            .collect();
        ev.sort_by(f64::total_cmp);
        let n = ev.len();
        let ev_median = (ev[(n - 1) / 2] + ev[n / 2]) / 2.0;
        let gap = (r.e2e_us - ev_median) / ev_median;
        if tp == 1 {
            // No collective: the window is its GEMM, the GPU never waits for a launch.
            assert!(gap.abs() < 0.03, "{} {}: {gap}", r.config, r.operator);
        } else {
            // The events add the GPU's wait for NCCL's launch (see above): e2e is below.
            assert!(
                (-0.25..=0.0).contains(&gap),
                "{} {}: {gap}",
                r.config,
                r.operator
            );
        }
        if r.config.ends_with("serial") {
            assert_eq!(r.overlap_us, 0.0, "{}", r.config);
        } else if tp > 1 {
            assert!(r.overlap_us > 0.0, "{} {}", r.config, r.operator);
        }
    }
    let params = params_by_run(ds.path());
    let times = tp_windows::timings(&rows, &|c: &str| params.get(c).cloned());
    assert_eq!(times.len(), 6 * 4);
    let mine = tp_scaling::scaling(&times, DEFAULT_TOLERANCE).unwrap();
    // The bench's own CUDA-event times, through tp_report.py --csv.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("times.csv");
    let o = std::process::Command::new("python3")
        .arg(root.join("workloads/torch/tp_report.py"))
        .arg(tp_dir())
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs =
        tp_scaling::scaling(&tp_scaling::read_times(&csv).unwrap(), DEFAULT_TOLERANCE).unwrap();
    let names =
        |v: &[(String, tp_scaling::Scaling)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&mine), names(&theirs));
    for ((op, a), (_, b)) in mine.iter().zip(&theirs) {
        assert_eq!(a.optimal_tp_size, 1, "{op}: {}", a.reason);
        assert_eq!(b.optimal_tp_size, 1, "{op}: {}", b.reason);
    }
}
