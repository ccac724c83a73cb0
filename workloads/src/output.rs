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
use crate::launch::Runtime;
use crate::overlap::{self, Range};
use clap::ValueEnum;
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
    /// The runtime that ran it: names the launch calls (`cudaLaunchKernel`, `hipLaunchKernel`).
    pub runtime: Runtime,
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
    /// The run's flags, by flag name without `--` (trace `aorta_params`, with the
    /// environment knobs of [`crate::knobs`]).
    fn flags(&self) -> Map<String, Value>;
}

/// A clap value's name as the flag takes it (`all-reduce`, `both`).
fn flag_value<V: ValueEnum>(v: &V) -> Value {
    v.to_possible_value()
        .map(|p| Value::from(p.get_name()))
        .unwrap_or(Value::Null)
}

/// The GEMM flags both workloads share.
fn gemm_flags(g: &GemmShape) -> Map<String, Value> {
    args(json!({"m": g.m, "n": g.n, "k": g.k, "dtype": g.dtype.name()}))
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
    fn flags(&self) -> Map<String, Value> {
        let mut f = gemm_flags(&self.gemm);
        f.extend(args(json!({
            "collective": flag_value(&self.collective),
            "bytes": self.bytes,
            "iters": self.iters,
            "warmup": self.warmup,
            "gemms-per-iter": self.gemms_per_iter,
            "collectives-per-iter": self.collectives_per_iter,
            "serial": self.serial,
            "world_size": self.world_size,
        })));
        if let Some(slow) = self.slow {
            f.insert("slow-rank".into(), slow.rank.into());
            f.insert("slow-ms".into(), slow.ms.into());
        }
        f
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
    fn flags(&self) -> Map<String, Value> {
        let mut f = gemm_flags(&self.gemm);
        f.extend(args(json!({
            "copy-bytes": self.copy_bytes,
            "direction": flag_value(&self.direction),
            "copies-per-iter": self.copies_per_iter,
            "gemms-per-iter": self.gemms_per_iter,
            "iters": self.iters,
            "warmup": self.warmup,
            "serial": self.write_serial,
            "world_size": self.world_size,
        })));
        f
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

/// The host process's `pid`/`tid` in the trace: this process, its main thread (`tid` = `pid`
/// on Linux), as Kineto writes the OS ids.
fn host_ids() -> i64 {
    i64::from(std::process::id())
}

/// The launch call that enqueues an op of `label`, as the runtime's profiler names it.
fn launch_name(runtime: Runtime, label: &OpLabel) -> &'static str {
    match (runtime, label.cat == "gpu_memcpy") {
        (Runtime::Cuda, false) => "cudaLaunchKernel",
        (Runtime::Cuda, true) => "cudaMemcpyAsync",
        (Runtime::Rocm, false) => "hipLaunchKernel",
        (Runtime::Rocm, true) => "hipMemcpyAsync",
    }
}

/// An `X` event from ms start and end: `ts`/`dur` in µs with 3 decimals.
fn slice(
    cat: &str,
    name: &str,
    pid: i64,
    tid: i64,
    (start, end): (f64, f64),
    args: Value,
) -> Value {
    let ts = us(start);
    let dur = ((us(end) - ts) * 1e3).round() / 1e3;
    json!({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})
}

/// The Chrome trace: `{"traceEvents": [...]}` with one `X` slice per op (`cat` from its label),
/// `pid` = device, `tid` = stream; on the host process, one `ProfilerStep#N` annotation per
/// iteration and one runtime launch event per op (`cuda_runtime`, the op's `correlation`),
/// as Kineto writes them; and the run's flags and environment knobs in `aorta_params`.
pub(crate) fn chrome_trace<W: Workload>(w: &W, info: &RunInfo, iters: &[IterTiming]) -> Value {
    let dev = info.device as i64;
    let host = host_ids();
    let mut events = metadata_events(dev, iters);
    events.push(json!({
        "ph": "M", "name": "process_name", "pid": host, "tid": 0,
        "args": {"name": w.trace_name()}
    }));
    events.push(json!({
        "ph": "M", "name": "thread_name", "pid": host, "tid": host,
        "args": {"name": "main"}
    }));
    for it in iters {
        let name = format!("ProfilerStep#{}", it.step);
        let span = (it.host.start_ms, it.host.end_ms);
        events.push(slice("user_annotation", &name, host, host, span, json!({})));
    }
    for (correlation, (step, op, label)) in labelled(w, iters).enumerate() {
        let correlation = correlation + 1;
        let launch = (op.launch.start_ms, op.launch.end_ms);
        let call = launch_name(info.runtime, &label);
        let call_args = json!({"correlation": correlation});
        events.push(slice("cuda_runtime", call, host, host, launch, call_args));
        let mut args = json!({
            "device": dev,
            "stream": op.stream.id(),
            "correlation": correlation,
            "op": label.op,
            "bytes": label.bytes,
            "step": step,
        });
        args.as_object_mut().unwrap().extend(label.args);
        let mut ev = slice(
            label.cat,
            &label.name,
            dev,
            op.stream.id(),
            (op.start_ms, op.end_ms),
            args,
        );
        let dur = ev["dur"].as_f64().unwrap_or(0.0);
        if label.cat == "gpu_memcpy" && dur > 0.0 {
            // bytes per ns = GB/s, as Kineto's memcpy args have it.
            let gbs = label.bytes as f64 / (dur * 1e3);
            ev["args"]["memory bandwidth (GB/s)"] = json!((gbs * 1e3).round() / 1e3);
        }
        events.push(ev);
    }
    let mut trace = json!({
        "schemaVersion": 1,
        "deviceProperties": [{"id": dev, "name": info.device_name}],
        "distributedInfo": {"backend": "nccl", "rank": w.rank(), "world_size": w.world_size()},
        "baseTimeNanoseconds": info.base_time_ns,
        "traceName": w.trace_name(),
        "aorta_params": crate::knobs::params(w.flags()),
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
mod tests;
