//! The two per-rank outputs: a Chrome/Kineto-style trace and the Python aorta JSONL.

use crate::backend::Stream;
use crate::bench::{IterTiming, OpKind};
use crate::config::BenchConfig;
use crate::error::{Error, Result};
use crate::overlap::{self, Range};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Who wrote the trace.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub device: usize,
    pub device_name: String,
    /// Wall-clock ns (epoch) taken on the host when the base event was enqueued; trace `ts`
    /// are relative to it (`baseTimeNanoseconds`). Good to about a millisecond across ranks.
    pub base_time_ns: u64,
}

/// µs with 3 decimals (ns resolution), from ms.
fn us(ms: f64) -> f64 {
    (ms * 1e6).round() / 1e3
}

fn op_fields(cfg: &BenchConfig, kind: OpKind) -> (String, &'static str, usize) {
    match kind {
        OpKind::Gemm => (cfg.gemm_name(), "gemm", cfg.gemm_bytes()),
        OpKind::Collective => (
            cfg.collective.kernel_name().to_string(),
            cfg.collective.op(),
            cfg.bytes,
        ),
    }
}

/// The Chrome trace: `{"traceEvents": [...]}` with one `X` slice (`cat` "kernel") per GEMM and
/// collective, `pid` = device, `tid` = stream.
pub fn chrome_trace(cfg: &BenchConfig, info: &RunInfo, iters: &[IterTiming]) -> Value {
    let dev = info.device as i64;
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": dev, "tid": 0,
        "args": {"name": format!("GPU {dev}")}
    })];
    for (s, label) in [(Stream::Compute, "compute"), (Stream::Comm, "comm")] {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": dev, "tid": s.id(),
            "args": {"name": format!("stream {} ({label})", s.id())}
        }));
    }
    let mut correlation = 0i64;
    for it in iters {
        for op in &it.ops {
            correlation += 1;
            let (name, opname, bytes) = op_fields(cfg, op.kind);
            let mut args = json!({
                "device": dev,
                "stream": op.stream.id(),
                "correlation": correlation,
                "op": opname,
                "bytes": bytes,
                "step": it.step,
                "dtype": cfg.dtype.name(),
            });
            if op.kind == OpKind::Collective {
                args["Collective name"] = json!(cfg.collective.collective_name());
                args["Group size"] = json!(cfg.world_size);
            } else {
                args["m"] = json!(cfg.m);
                args["n"] = json!(cfg.n);
                args["k"] = json!(cfg.k);
            }
            let ts = us(op.start_ms);
            events.push(json!({
                "ph": "X", "cat": "kernel", "name": name,
                "pid": dev, "tid": op.stream.id(),
                "ts": ts, "dur": ((us(op.end_ms) - ts) * 1e3).round() / 1e3,
                "args": args,
            }));
        }
    }
    json!({
        "schemaVersion": 1,
        "deviceProperties": [{"id": dev, "name": info.device_name}],
        "distributedInfo": {"backend": "nccl", "rank": cfg.rank, "world_size": cfg.world_size},
        "baseTimeNanoseconds": info.base_time_ns,
        "traceName": "aorta-overlap-bench",
        "traceEvents": events,
    })
}

/// One JSONL line per measured iteration, in the Python aorta `rank_*_metrics.jsonl` schema.
pub fn metrics_lines(cfg: &BenchConfig, iters: &[IterTiming]) -> Vec<Value> {
    iters
        .iter()
        .map(|it| {
            let ranges: Vec<Range> = it
                .ops
                .iter()
                .map(|op| {
                    let (name, tag, bytes) = op_fields(cfg, op.kind);
                    let stream = match op.stream {
                        Stream::Compute => overlap::COMPUTE,
                        Stream::Comm => cfg.collective.stream_name(),
                    };
                    let mut r = Range::new(
                        stream,
                        tag,
                        op.start_ms - it.start_ms,
                        op.end_ms - it.start_ms,
                    );
                    r.metadata = json!({"function": name, "bytes": bytes});
                    r
                })
                .collect();
            let total_ms = it.end_ms - it.start_ms;
            let ov = overlap::compute(&ranges, total_ms);
            json!({
                "rank": cfg.rank,
                "world_size": cfg.world_size,
                "epoch": 0,
                "step": it.step,
                "global_step": it.step,
                "profile": {
                    "index": it.step,
                    "total_ms": total_ms,
                    "ranges": ranges,
                    "markers": [],
                    "overlap": ov,
                },
            })
        })
        .collect()
}

/// Means over the measured iterations, for the console line and docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub iter_ms: f64,
    pub compute_ms: f64,
    pub comm_ms: f64,
    pub overlap_ms: f64,
    /// overlap / comm busy time.
    pub overlap_ratio: f64,
    pub gemm_tflops: f64,
    /// Algorithm bandwidth of one collective (message bytes / its mean duration), GB/s.
    pub coll_algbw_gbs: f64,
}

pub fn summary(cfg: &BenchConfig, lines: &[Value], iters: &[IterTiming]) -> Summary {
    let n = lines.len().max(1) as f64;
    let get = |l: &Value, p: &str| l.pointer(p).and_then(Value::as_f64).unwrap_or(0.0);
    let comm = cfg.collective.stream_name();
    let sum = |p: &str| lines.iter().map(|l| get(l, p)).sum::<f64>() / n;
    let iter_ms = sum("/profile/total_ms");
    let compute_ms = sum("/profile/overlap/per_stream_ms/compute");
    let comm_ms = sum(&format!("/profile/overlap/per_stream_ms/{comm}"));
    let overlap_ms = sum("/profile/overlap/overlap_ms/compute_comm");
    let mean_dur = |k: OpKind| {
        let d: Vec<f64> = iters
            .iter()
            .flat_map(|i| i.ops.iter())
            .filter(|o| o.kind == k)
            .map(|o| o.end_ms - o.start_ms)
            .collect();
        if d.is_empty() {
            0.0
        } else {
            d.iter().sum::<f64>() / d.len() as f64
        }
    };
    let g = mean_dur(OpKind::Gemm);
    let c = mean_dur(OpKind::Collective);
    Summary {
        iter_ms,
        compute_ms,
        comm_ms,
        overlap_ms,
        overlap_ratio: if comm_ms > 0.0 {
            overlap_ms / comm_ms
        } else {
            0.0
        },
        gemm_tflops: if g > 0.0 {
            cfg.gemm_flops() / (g * 1e-3) / 1e12
        } else {
            0.0
        },
        coll_algbw_gbs: if c > 0.0 {
            cfg.bytes as f64 / (c * 1e-3) / 1e9
        } else {
            0.0
        },
    }
}

/// Write `DIR/rank{r}.trace.json` and `DIR/rank_{r:02}_metrics.jsonl`; returns both paths.
pub fn write_outputs(
    dir: &Path,
    cfg: &BenchConfig,
    info: &RunInfo,
    iters: &[IterTiming],
    lines: &[Value],
) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    let trace = dir.join(format!("rank{}.trace.json", cfg.rank));
    let text = chrome_trace(cfg, info, iters).to_string();
    std::fs::write(&trace, text).map_err(Error::io("writing", &trace))?;
    let jsonl = dir.join(format!("rank_{:02}_metrics.jsonl", cfg.rank));
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
    use crate::config::test_config;

    fn sample(serial: bool) -> (BenchConfig, Vec<IterTiming>) {
        let mut cfg = test_config();
        cfg.serial = serial;
        let mut b = SimBackend {
            clock: [0.0, 0.0],
            gemm_ms: 1.0,
            coll_ms: 1.5,
        };
        let (its, _) = run(&mut b, &cfg).unwrap();
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
}
