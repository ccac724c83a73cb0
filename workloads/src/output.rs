//! The two per-rank outputs: a Chrome/Kineto-style trace and the Python aorta JSONL, for
//! either workload.
//!
//! The writers know ops only through [`Workload::label`], so the overlap bench (GEMMs +
//! collectives) and the copy-overlap bench (GEMMs + memcpys) share them; a memcpy is labelled
//! the way Kineto labels one (`cat` `gpu_memcpy`, `Memcpy HtoD (Pinned -> Device)`), so ingest
//! classifies it as a copy rather than a kernel.

use crate::backend::{CopyDir, Op, Stream};
use crate::bench::IterTiming;
use crate::config::{BenchConfig, CopyConfig, GemmShape, Slow};
use crate::error::{Error, Result};
use crate::overlap::{self, Range};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Who wrote the trace.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// Index of the GPU this rank drove, among the visible ones.
    pub device: usize,
    /// The device's name as its runtime reports it (trace `deviceProperties`).
    pub device_name: String,
    /// Wall-clock ns (epoch) taken on the host when the base event was enqueued; trace `ts`
    /// are relative to it (`baseTimeNanoseconds`). Good to about a millisecond across ranks.
    pub base_time_ns: u64,
}

/// How one op appears in both outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct OpLabel {
    /// Trace `name` and JSONL `metadata.function`.
    pub(crate) name: String,
    /// Trace `cat`: `kernel` or `gpu_memcpy`.
    pub(crate) cat: &'static str,
    /// `args.op` and the JSONL range `tag`.
    pub(crate) op: &'static str,
    /// Bytes the op moves (GEMM: A+B+C; collective: the message; copy: the copy).
    pub(crate) bytes: usize,
    /// The Python aorta stream name of the JSONL range.
    pub(crate) stream: &'static str,
    /// Further trace `args`.
    pub(crate) args: Map<String, Value>,
}

/// What the writers need to know about a workload.
pub trait Workload {
    /// Trace `traceName`: the binary.
    fn trace_name(&self) -> &'static str;
    /// This process's rank: it names the output files and the trace's `distributedInfo`.
    fn rank(&self) -> usize;
    /// Number of ranks of the run (`distributedInfo.world_size`).
    fn world_size(&self) -> usize;
    /// The GEMM on the compute stream.
    fn gemm(&self) -> &GemmShape;
    /// The label of `op`; `None` for an op this workload never schedules.
    fn label(&self, op: Op) -> Option<OpLabel>;
    /// The Python aorta stream name of the side stream (for the summary).
    fn side_stream_name(&self) -> &'static str;
    /// The straggler the run injected, if any (trace `aorta_straggler`).
    fn slow(&self) -> Option<Slow> {
        None
    }
}

fn args(pairs: Value) -> Map<String, Value> {
    match pairs {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The GEMM: `gemm_{dtype}_{m}x{n}x{k}`, a kernel on the `compute` stream.
pub(crate) fn gemm_label(g: &GemmShape) -> OpLabel {
    OpLabel {
        name: g.name(),
        cat: "kernel",
        op: "gemm",
        bytes: g.bytes(),
        stream: overlap::COMPUTE,
        args: args(json!({"dtype": g.dtype.name(), "m": g.m, "n": g.n, "k": g.k})),
    }
}

/// One async copy of `bytes`, named as Kineto names a pinned-memory copy.
pub(crate) fn copy_label(dir: CopyDir, bytes: usize) -> OpLabel {
    let (name, op) = match dir {
        CopyDir::HtoD => ("Memcpy HtoD (Pinned -> Device)", "memcpy_htod"),
        CopyDir::DtoH => ("Memcpy DtoH (Device -> Pinned)", "memcpy_dtoh"),
    };
    OpLabel {
        name: name.into(),
        cat: "gpu_memcpy",
        op,
        bytes,
        stream: "memcpy",
        args: Map::new(),
    }
}

impl Workload for BenchConfig {
    fn trace_name(&self) -> &'static str {
        "aorta-overlap-bench"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world_size
    }
    fn gemm(&self) -> &GemmShape {
        &self.gemm
    }
    fn label(&self, op: Op) -> Option<OpLabel> {
        match op {
            Op::Gemm => Some(gemm_label(&self.gemm)),
            Op::Collective => Some(OpLabel {
                name: self.collective.kernel_name().into(),
                cat: "kernel",
                op: self.collective.op(),
                bytes: self.bytes,
                stream: self.collective.stream_name(),
                args: args(json!({
                    "dtype": self.gemm.dtype.torch_name(),
                    "Collective name": self.collective.collective_name(),
                    "In msg nelems": self.collective_buffers().0 / self.gemm.dtype.size(),
                    "Out msg nelems": self.collective_buffers().1 / self.gemm.dtype.size(),
                    "Group size": self.world_size,
                })),
            }),
            Op::Copy(_) | Op::Delay(_) => None,
        }
    }
    fn side_stream_name(&self) -> &'static str {
        self.collective.stream_name()
    }
    fn slow(&self) -> Option<Slow> {
        self.slow
    }
}

impl Workload for CopyConfig {
    fn trace_name(&self) -> &'static str {
        "aorta-copy-overlap"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world_size
    }
    fn gemm(&self) -> &GemmShape {
        &self.gemm
    }
    fn label(&self, op: Op) -> Option<OpLabel> {
        match op {
            Op::Gemm => Some(gemm_label(&self.gemm)),
            Op::Copy(dir) => Some(copy_label(dir, self.copy_bytes)),
            Op::Collective | Op::Delay(_) => None,
        }
    }
    fn side_stream_name(&self) -> &'static str {
        "memcpy"
    }
}

/// µs with 3 decimals (ns resolution), from ms.
fn us(ms: f64) -> f64 {
    (ms * 1e6).round() / 1e3
}

/// The timed ops of all iterations with their labels: (step, op, label).
fn labelled<'a, W: Workload>(
    w: &'a W,
    iters: &'a [IterTiming],
) -> impl Iterator<Item = (usize, &'a crate::bench::OpTiming, OpLabel)> + 'a {
    iters.iter().flat_map(move |it| {
        it.ops
            .iter()
            .filter_map(move |op| w.label(op.kind).map(|l| (it.step, op, l)))
    })
}

/// Process and thread (stream) name metadata for the streams the iterations used.
fn metadata_events(dev: i64, iters: &[IterTiming]) -> Vec<Value> {
    let mut streams: Vec<Stream> = iters
        .iter()
        .flat_map(|it| it.ops.iter().map(|o| o.stream))
        .chain([Stream::Compute])
        .collect();
    streams.sort();
    streams.dedup();
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": dev, "tid": 0,
        "args": {"name": format!("GPU {dev}")}
    })];
    for s in streams {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": dev, "tid": s.id(),
            "args": {"name": format!("stream {} ({})", s.id(), s.label())}
        }));
    }
    events
}

/// The Chrome trace: `{"traceEvents": [...]}` with one `X` slice per op (`cat` from its label),
/// `pid` = device, `tid` = stream.
pub(crate) fn chrome_trace<W: Workload>(w: &W, info: &RunInfo, iters: &[IterTiming]) -> Value {
    let dev = info.device as i64;
    let mut events = metadata_events(dev, iters);
    for (correlation, (step, op, label)) in labelled(w, iters).enumerate() {
        let ts = us(op.start_ms);
        let dur = ((us(op.end_ms) - ts) * 1e3).round() / 1e3;
        let mut args = json!({
            "device": dev,
            "stream": op.stream.id(),
            "correlation": correlation + 1,
            "op": label.op,
            "bytes": label.bytes,
            "step": step,
        });
        args.as_object_mut().unwrap().extend(label.args);
        if label.cat == "gpu_memcpy" && dur > 0.0 {
            // bytes per ns = GB/s, as Kineto's memcpy args have it.
            let gbs = label.bytes as f64 / (dur * 1e3);
            args["memory bandwidth (GB/s)"] = json!((gbs * 1e3).round() / 1e3);
        }
        events.push(json!({
            "ph": "X", "cat": label.cat, "name": label.name,
            "pid": dev, "tid": op.stream.id(), "ts": ts, "dur": dur, "args": args,
        }));
    }
    let mut trace = json!({
        "schemaVersion": 1,
        "deviceProperties": [{"id": dev, "name": info.device_name}],
        "distributedInfo": {"backend": "nccl", "rank": w.rank(), "world_size": w.world_size()},
        "baseTimeNanoseconds": info.base_time_ns,
        "traceName": w.trace_name(),
        "traceEvents": events,
    });
    if let Some(slow) = w.slow() {
        trace["aorta_straggler"] = straggler(slow, iters);
    }
    trace
}

/// `aorta_straggler`: the injected straggler, and on the slowed rank the stall its events
/// measured (mean over the iterations, ms): the ground truth the other ranks' wait is
/// checked against.
fn straggler(slow: Slow, iters: &[IterTiming]) -> Value {
    let stalls: Vec<f64> = iters
        .iter()
        .flat_map(|it| &it.ops)
        .filter(|o| matches!(o.kind, Op::Delay(_)))
        .map(|o| o.end_ms - o.start_ms)
        .collect();
    let measured = (!stalls.is_empty())
        .then(|| (stalls.iter().sum::<f64>() / stalls.len() as f64 * 1e3).round() / 1e3);
    json!({"rank": slow.rank, "delay_ms": slow.ms, "measured_ms": measured})
}

/// One JSONL line per measured iteration, in the Python aorta `rank_*_metrics.jsonl` schema.
pub fn metrics_lines<W: Workload>(w: &W, iters: &[IterTiming]) -> Vec<Value> {
    iters
        .iter()
        .map(|it| {
            let ranges: Vec<Range> = labelled(w, std::slice::from_ref(it))
                .map(|(_, op, l)| {
                    let (t0, t1) = (op.start_ms - it.start_ms, op.end_ms - it.start_ms);
                    let mut r = Range::new(l.stream, l.op, t0, t1);
                    r.metadata = json!({"function": l.name, "bytes": l.bytes});
                    r
                })
                .collect();
            let total_ms = it.end_ms - it.start_ms;
            json!({
                "rank": w.rank(),
                "world_size": w.world_size(),
                "epoch": 0,
                "step": it.step,
                "global_step": it.step,
                "profile": {
                    "index": it.step,
                    "total_ms": total_ms,
                    "overlap": overlap::compute(&ranges, total_ms),
                    "ranges": ranges,
                    "markers": [],
                },
            })
        })
        .collect()
}

/// Means over the measured iterations, for the console line and docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Mean iteration time, ms: from the iteration-start to the iteration-end event.
    pub iter_ms: f64,
    /// Busy time of the compute stream.
    pub compute_ms: f64,
    /// Busy time of the side stream (collectives or copies).
    pub side_ms: f64,
    /// Compute busy while the side stream is (`compute_comm`).
    pub overlap_ms: f64,
    /// overlap / side busy time.
    pub overlap_ratio: f64,
    /// One GEMM's FLOPs over its mean duration.
    pub gemm_tflops: f64,
    /// GEMMs timed, and their summed CUDA-event time (ms): `gemm_tflops` is
    /// count × FLOPs ÷ this time.
    pub(crate) gemm_count: usize,
    pub(crate) gemm_ms: f64,
    /// Side-op bytes over their summed durations, GB/s (collective algbw, copy bandwidth).
    pub side_gbs: f64,
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

/// The means over the measured iterations: stream busy times and overlap from the JSONL
/// `lines` (as the Python aorta computes them), GEMM and side-op rates from the event times
/// of `iters`.
pub fn summary<W: Workload>(w: &W, lines: &[Value], iters: &[IterTiming]) -> Summary {
    let n = lines.len().max(1) as f64;
    let get = |l: &Value, p: &str| l.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
    let mean = |p: &str| lines.iter().map(|l| get(l, p)).sum::<f64>() / n;
    let side = w.side_stream_name();
    let side_ms = mean(&format!("/profile/overlap/per_stream_ms/{side}"));
    let overlap_ms = mean("/profile/overlap/overlap_ms/compute_comm");
    // (bytes or flops, ms) summed over the GEMMs and over the side ops.
    let (mut gemm, mut other) = ((0.0, 0.0), (0.0, 0.0));
    for (_, op, l) in labelled(w, iters) {
        let ms = op.end_ms - op.start_ms;
        match op.kind {
            Op::Gemm => gemm = (gemm.0 + 1.0, gemm.1 + ms),
            _ => other = (other.0 + l.bytes as f64, other.1 + ms),
        }
    }
    let flops = w.gemm().flops();
    Summary {
        iter_ms: mean("/profile/total_ms"),
        compute_ms: mean("/profile/overlap/per_stream_ms/compute"),
        side_ms,
        overlap_ms,
        overlap_ratio: ratio(overlap_ms, side_ms),
        gemm_tflops: ratio(flops * gemm.0, gemm.1 * 1e-3) / 1e12,
        gemm_count: gemm.0 as usize,
        gemm_ms: gemm.1,
        side_gbs: ratio(other.0, other.1 * 1e-3) / 1e9,
    }
}

/// The machine-readable summary line both benches print after their console line: one JSON
/// object, `{"aorta_summary": {...}}`, with the event-timed GEMM rate that `aorta perf` must
/// reproduce from the trace (docs/PERF.md, "The workloads know the truth").
pub fn summary_json<W: Workload>(w: &W, trace: &Path, s: &Summary, mode: &str) -> Value {
    let g = w.gemm();
    json!({"aorta_summary": {
        "workload": w.trace_name(),
        "rank": w.rank(),
        "world_size": w.world_size(),
        "mode": mode,
        "trace": trace.display().to_string(),
        "gemm": {
            "m": g.m, "n": g.n, "k": g.k, "dtype": g.dtype.name(),
            "flops_each": g.flops(),
            "count": s.gemm_count,
            "event_ms": s.gemm_ms,
            "tflops": s.gemm_tflops,
        },
        "iter_ms": s.iter_ms,
        "compute_ms": s.compute_ms,
        "side_ms": s.side_ms,
        "overlap_ms": s.overlap_ms,
        "side_gbs": s.side_gbs,
    }})
}

/// Write `DIR/rank{r}.trace.json` and `DIR/rank_{r:02}_metrics.jsonl`; returns both paths.
pub fn write_outputs<W: Workload>(
    dir: &Path,
    w: &W,
    info: &RunInfo,
    iters: &[IterTiming],
    lines: &[Value],
) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    let trace = dir.join(format!("rank{}.trace.json", w.rank()));
    let text = chrome_trace(w, info, iters).to_string();
    std::fs::write(&trace, text).map_err(Error::io("writing", &trace))?;
    let jsonl = dir.join(format!("rank_{:02}_metrics.jsonl", w.rank()));
    write_jsonl(&jsonl, lines).map_err(Error::io("writing", &jsonl))?;
    Ok((trace, jsonl))
}

fn write_jsonl(path: &Path, lines: &[Value]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for l in lines {
        serde_json::to_writer(&mut f, l)?;
        f.write_all(b"\n")?;
    }
    f.flush()
}

#[cfg(test)]
mod tests {
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

    fn info() -> RunInfo {
        RunInfo {
            device: 1,
            device_name: "sim".into(),
            base_time_ns: 1_700_000_000_000_000_000,
        }
    }

    #[test]
    fn trace_slices() {
        let (cfg, its) = sample(false);
        let t = chrome_trace(&cfg, &info(), &its);
        let ev = t["traceEvents"].as_array().unwrap();
        let xs: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
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
        assert_eq!(xs.iter().filter(|e| e["ph"] == "X").count(), 3 * 3);
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
            .filter(|e| e["name"] == "thread_name")
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
}
