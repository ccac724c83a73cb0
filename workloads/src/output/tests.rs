//! The writers' tests: traces, JSONL and summaries of simulated runs, values by hand.

use super::*;
use crate::bench::{run, SimBackend};
use crate::config::{test_config, test_copy_config, Direction};

fn sample(serial: bool) -> (BenchConfig, Vec<IterTiming>) {
    let mut cfg = test_config();
    cfg.serial = serial;
    let mut b = SimBackend::new(1.0, 1.5);
    let its = run(&mut b, &cfg.schedule()).unwrap().iters;
    (cfg, its)
}

/// A GPU activity slice (not a launch call or a step annotation on the host).
fn is_gpu(e: &Value) -> bool {
    e["ph"] == "X" && (e["cat"] == "kernel" || e["cat"] == "gpu_memcpy")
}

fn info() -> RunInfo {
    RunInfo {
        device: 1,
        device_name: "sim".into(),
        base_time_ns: 1_700_000_000_000_000_000,
        runtime: crate::launch::Runtime::Cuda,
    }
}

#[test]
fn trace_slices() {
    let (cfg, its) = sample(false);
    let t = chrome_trace(&cfg, &info(), &its);
    let ev = t["traceEvents"].as_array().unwrap();
    let xs: Vec<&Value> = ev.iter().filter(|e| is_gpu(e)).collect();
    assert_eq!(xs.len(), 3 * 3);
    let coll = xs
        .iter()
        .find(|e| e["name"] == "ncclDevKernel_AllReduce")
        .unwrap();
    assert_eq!(coll["cat"], "kernel");
    assert_eq!(coll["pid"], 1);
    assert_eq!(coll["tid"], 13);
    assert_eq!(coll["args"]["stream"], 13);
    assert_eq!(coll["args"]["Collective name"], "allreduce");
    assert_eq!(coll["args"]["bytes"], 1 << 20);
    // As PyTorch writes them: bf16 elements of the 1 MiB all-reduce, in and out.
    assert_eq!(coll["args"]["dtype"], "BFloat16");
    assert_eq!(coll["args"]["In msg nelems"], 1 << 19);
    assert_eq!(coll["args"]["Out msg nelems"], 1 << 19);
    assert_eq!(coll["ts"], 0.0);
    assert_eq!(coll["dur"], 1500.0);
    let g = xs
        .iter()
        .find(|e| e["name"] == "gemm_bf16_256x256x256")
        .unwrap();
    assert_eq!(g["tid"], 7);
    assert_eq!(g["args"]["op"], "gemm");
    assert_eq!(t["distributedInfo"]["rank"], 0);
    assert_eq!(us(1.23456789), 1234.568);
    assert!(
        t.get("aorta_straggler").is_none(),
        "no straggler was injected"
    );
}

#[test]
fn the_straggler_is_in_the_trace_and_its_stall_is_not_a_kernel() {
    let mut cfg = test_config();
    cfg.slow = Some(Slow { rank: 1, ms: 2.5 });
    let its = |cfg: &BenchConfig| {
        let mut b = SimBackend::new(1.0, 1.5);
        run(&mut b, &cfg.schedule()).unwrap().iters
    };
    // Rank 0 names the straggler but did not stall.
    let t = chrome_trace(&cfg, &info(), &its(&cfg));
    let expect = json!({"rank": 1, "delay_ms": 2.5, "measured_ms": null});
    assert_eq!(t["aorta_straggler"], expect);
    // Rank 1 stalled 2.5 ms in each of the 3 iterations; still 3 slices per iteration.
    cfg.rank = 1;
    let iters = its(&cfg);
    let t = chrome_trace(&cfg, &info(), &iters);
    assert_eq!(t["aorta_straggler"]["measured_ms"], 2.5);
    let xs = t["traceEvents"].as_array().unwrap();
    assert_eq!(xs.iter().filter(|e| is_gpu(e)).count(), 3 * 3);
    let coll = xs
        .iter()
        .find(|e| e["name"] == "ncclDevKernel_AllReduce")
        .unwrap();
    assert_eq!(coll["ts"], 2500.0);
    // The JSONL's comm stream is busy with the collective only, not the stall.
    let lines = metrics_lines(&cfg, &iters);
    assert_eq!(
        lines[0]["profile"]["overlap"]["per_stream_ms"]["allreduce"],
        1.5
    );
}

#[test]
fn metrics_overlap_and_serial() {
    let (cfg, its) = sample(false);
    let lines = metrics_lines(&cfg, &its);
    assert_eq!(lines.len(), 3);
    let l = &lines[2];
    assert_eq!(l["step"], 2);
    assert_eq!(l["world_size"], 2);
    let p = &l["profile"];
    assert_eq!(p["total_ms"], 2.0);
    assert_eq!(p["ranges"].as_array().unwrap().len(), 3);
    assert_eq!(p["ranges"][0]["start_ms"], 0.0);
    assert_eq!(p["overlap"]["overlap_ms"]["compute_comm"], 1.5);
    assert_eq!(p["overlap"]["overlap_ms"]["compute_allreduce"], 1.5);
    assert_eq!(p["overlap"]["per_stream_ms"]["allreduce"], 1.5);
    let s = summary(&cfg, &lines, &its);
    assert_eq!(s.overlap_ratio, 1.0);
    // GEMM 2*256^3 flop in 1 ms; 1 MiB all-reduce in 1.5 ms.
    assert_eq!(s.gemm_tflops, 2.0 * 256f64.powi(3) / 1e-3 / 1e12);
    assert_eq!(s.side_gbs, (1 << 20) as f64 / 1.5e-3 / 1e9);
    // 3 iterations × 2 GEMMs of 1 ms each (9 slices: 2 GEMMs and 1 all-reduce each).
    assert_eq!(s.gemm_count, 6);
    assert!((s.gemm_ms - 6.0).abs() < 1e-9, "{}", s.gemm_ms);
    let j = summary_json(&cfg, Path::new("d/rank0.trace.json"), &s, "overlapped");
    let g = &j["aorta_summary"]["gemm"];
    assert_eq!(
        (g["m"].as_u64(), g["dtype"].as_str()),
        (Some(256), Some("bf16"))
    );
    assert_eq!(g["tflops"].as_f64(), Some(s.gemm_tflops));
    assert_eq!(g["count"].as_u64(), Some(6));
    assert_eq!(j["aorta_summary"]["trace"], "d/rank0.trace.json");

    let (cfg, its) = sample(true);
    let lines = metrics_lines(&cfg, &its);
    let p = &lines[0]["profile"];
    assert_eq!(p["total_ms"], 3.5);
    assert!(p["overlap"]["overlap_ms"].get("compute_comm").is_none());
    assert_eq!(summary(&cfg, &lines, &its).overlap_ms, 0.0);
}

#[test]
fn writes_files() {
    let (cfg, its) = sample(false);
    let lines = metrics_lines(&cfg, &its);
    let dir = tempfile::tempdir().unwrap();
    let (t, j) = write_outputs(dir.path(), &cfg, &info(), &its, &lines).unwrap();
    assert!(t.ends_with("rank0.trace.json"));
    assert!(j.ends_with("rank_00_metrics.jsonl"));
    let v: Value = serde_json::from_slice(&std::fs::read(&t).unwrap()).unwrap();
    assert!(v["traceEvents"].is_array());
    let text = std::fs::read_to_string(&j).unwrap();
    assert_eq!(text.lines().count(), 3);
}

fn copy_sample(serial: bool) -> (CopyConfig, Vec<IterTiming>) {
    let mut cfg = test_copy_config(); // 3 GEMMs, 1 MiB copies, 2 iters
    cfg.direction = Direction::Both;
    let mut b = SimBackend::new(1.0, 0.0);
    (b.h2d_ms, b.d2h_ms) = (2.0, 0.5);
    let its = run(&mut b, &cfg.schedule(serial)).unwrap().iters;
    (cfg, its)
}

#[test]
fn copy_trace_is_kineto_memcpy() {
    let (cfg, its) = copy_sample(false);
    let t = chrome_trace(&cfg, &info(), &its);
    assert_eq!(t["traceName"], "aorta-copy-overlap");
    let ev = t["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["name"] == "thread_name" && e["pid"] == 1)
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stream 7 (compute)", "stream 14 (memcpy)"]);
    let copies: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "gpu_memcpy").collect();
    assert_eq!(copies.len(), 2 * 2);
    let h = copies[0];
    assert_eq!(h["name"], "Memcpy HtoD (Pinned -> Device)");
    assert_eq!(
        (h["ts"].as_f64(), h["dur"].as_f64()),
        (Some(0.0), Some(2000.0))
    );
    assert_eq!(h["tid"], 14);
    assert_eq!(h["args"]["op"], "memcpy_htod");
    assert_eq!(h["args"]["bytes"], 1 << 20);
    // 1048576 B in 2 ms = 0.524288 GB/s; in 0.5 ms = 2.097152 GB/s.
    assert_eq!(h["args"]["memory bandwidth (GB/s)"], 0.524);
    let d = copies[1];
    assert_eq!(d["name"], "Memcpy DtoH (Device -> Pinned)");
    assert_eq!(
        (d["ts"].as_f64(), d["dur"].as_f64()),
        (Some(2000.0), Some(500.0))
    );
    assert_eq!(d["args"]["memory bandwidth (GB/s)"], 2.097);
    assert!(d["args"].get("dtype").is_none());
    let g = ev.iter().find(|e| e["args"]["op"] == "gemm").unwrap();
    assert_eq!(
        (g["cat"].as_str(), g["name"].as_str()),
        (Some("kernel"), Some("gemm_fp16_128x64x32"))
    );
}

#[test]
fn copy_jsonl_and_summary() {
    let (cfg, its) = copy_sample(false);
    let lines = metrics_lines(&cfg, &its);
    let p = &lines[1]["profile"];
    assert_eq!(p["total_ms"], 3.0);
    assert_eq!(p["ranges"][3]["stream"], "memcpy");
    assert_eq!(p["ranges"][3]["tag"], "memcpy_htod");
    assert_eq!(
        p["ranges"][4]["metadata"]["function"],
        "Memcpy DtoH (Device -> Pinned)"
    );
    assert_eq!(p["overlap"]["per_stream_ms"]["memcpy"], 2.5);
    assert_eq!(p["overlap"]["overlap_ms"]["compute_comm"], 2.5);
    let s = summary(&cfg, &lines, &its);
    assert_eq!((s.iter_ms, s.compute_ms, s.side_ms), (3.0, 3.0, 2.5));
    assert_eq!((s.overlap_ms, s.overlap_ratio), (2.5, 1.0));
    // Two 1 MiB copies in 2.5 ms; GEMM 2*128*64*32 flop in 1 ms.
    assert_eq!(s.side_gbs, 2.0 * 1048576.0 / 2.5e-3 / 1e9);
    assert_eq!(s.gemm_tflops, 524288.0 / 1e-3 / 1e12);

    let (cfg, its) = copy_sample(true);
    let lines = metrics_lines(&cfg, &its);
    let s = summary(&cfg, &lines, &its);
    assert_eq!((s.iter_ms, s.overlap_ms, s.overlap_ratio), (5.5, 0.0, 0.0));
}

#[test]
fn every_gpu_op_has_its_launch_call_inside_its_step() {
    let (cfg, its) = sample(false);
    let t = chrome_trace(&cfg, &info(), &its);
    let ev = t["traceEvents"].as_array().unwrap();
    let host = i64::from(std::process::id());
    let f = |e: &Value, k: &str| e[k].as_f64().unwrap();
    // One ProfilerStep#N per iteration, on the host, in order and never overlapping.
    let steps: Vec<&Value> = ev
        .iter()
        .filter(|e| e["cat"] == "user_annotation")
        .collect();
    let names: Vec<&str> = steps.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    );
    for w in steps.windows(2) {
        assert!(f(w[0], "ts") + f(w[0], "dur") <= f(w[1], "ts"));
    }
    assert!(steps.iter().all(|e| e["pid"] == host && e["tid"] == host));
    // Each GPU op: exactly one launch call with its correlation, inside its step's span, not
    // after the op starts.
    let gpu: Vec<&Value> = ev.iter().filter(|e| is_gpu(e)).collect();
    let calls: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "cuda_runtime").collect();
    assert_eq!(calls.len(), gpu.len());
    for op in gpu {
        let corr = &op["args"]["correlation"];
        let mut matched = calls.iter().filter(|c| &c["args"]["correlation"] == corr);
        let call = matched.next().expect("a launch call");
        assert!(matched.next().is_none(), "one launch per correlation");
        assert_eq!(call["name"], "cudaLaunchKernel");
        assert!(f(call, "ts") <= f(op, "ts"), "{call} after {op}");
        let step = steps[op["args"]["step"].as_u64().unwrap() as usize];
        assert!(f(step, "ts") <= f(call, "ts"));
        assert!(f(call, "ts") + f(call, "dur") <= f(step, "ts") + f(step, "dur"));
    }
    // The simulated host waits for each iteration's end: step N spans iteration N exactly.
    for (it, step) in its.iter().zip(&steps) {
        assert_eq!(f(step, "ts"), us(it.start_ms));
        assert_eq!(f(step, "ts") + f(step, "dur"), us(it.end_ms));
    }
}

#[test]
fn copies_are_launched_by_memcpy_calls_named_for_the_runtime() {
    let cfg = test_copy_config();
    let mut b = SimBackend::new(1.0, 0.0);
    (b.h2d_ms, b.d2h_ms) = (0.5, 0.25);
    let its = run(&mut b, &cfg.schedule(false)).unwrap().iters;
    let mut rocm = info();
    rocm.runtime = crate::launch::Runtime::Rocm;
    let t = chrome_trace(&cfg, &rocm, &its);
    let mut names: Vec<&str> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["hipLaunchKernel", "hipMemcpyAsync"]);
}

#[test]
fn the_flags_are_the_trace_params() {
    let mut cfg = test_config();
    cfg.slow = Some(Slow { rank: 1, ms: 2.5 });
    let (_, its) = sample(false);
    let p = &chrome_trace(&cfg, &info(), &its)["aorta_params"];
    assert_eq!(p["collective"], "all-reduce");
    assert_eq!(p["bytes"], cfg.bytes);
    assert_eq!(p["gemms-per-iter"], cfg.gemms_per_iter);
    assert_eq!(p["m"], cfg.gemm.m);
    assert_eq!(p["dtype"], "bf16");
    assert_eq!(p["serial"], false);
    assert_eq!(p["slow-rank"], 1);
    assert_eq!(p["world_size"], cfg.world_size);
    let copy = chrome_trace(&test_copy_config(), &info(), &its);
    assert_eq!(copy["aorta_params"]["direction"], "h2d");
}
