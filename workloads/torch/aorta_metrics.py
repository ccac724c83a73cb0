"""Per-iteration overlap and the `rank_*_metrics.jsonl` line, without torch.

`fsdp_overlap.py` times its streams with CUDA events and hands the ranges to `overlap()`
here; keeping this half free of torch lets it be tested on a machine without a GPU
(`test_aorta_metrics.py`) and keeps the rules in one readable place. The rules are the
Python aorta tool's (../../docs/WORKLOADS.md, FORMATS.md §5), the same ones
`workloads/src/overlap.rs` implements for the Rust workloads:

* the busy set of every elementary interval between range boundaries decides everything;
* `overlap_ms` has `compute_comm` (compute busy with any other stream), `compute_allreduce`
  and `compute_reducescatter`, and `idle`, each only when non-zero;
* `idle` counts gaps between ranges; only when there was no gap is it the tail from the last
  range's end to `total_ms`;
* `per_stream_ms` lists busy streams only, `utilization` every stream in `STREAMS`.
"""

import importlib
import json
import sys

COMPUTE = "compute"
# The streams the Python tool names (and lists in `utilization` even when idle).
STREAMS = ("compute", "allreduce", "reducescatter", "aux")
# Collective entry points and the stream name the Python tool files them under.
COLLECTIVE_STREAMS = {
    "all_gather_into_tensor": "aux",
    "reduce_scatter_tensor": "reducescatter",
    "all_reduce": "allreduce",
}

# Environment variables recorded as run parameters: anything NCCL, RCCL, HIP, HSA, NVSHMEM or
# PyTorch's NCCL layer may read (the same list as workloads/src/knobs.rs), recorded as set,
# whether or not the library acts on it.
ENV_PREFIXES = ("NCCL_", "RCCL_", "HSA_", "HIP_", "NVSHMEM_", "TORCH_NCCL_", "TORCH_SYMM_MEM_")
ENV_NAMES = ("CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF")


def env_knobs(environ):
    """The GPU libraries' knobs set in `environ` (a mapping), sorted by name."""
    return {k: environ[k] for k in sorted(environ)
            if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def run_torch_half(script, args, knobs, module):
    """What each workload script's main does once its knobs are checked: print them as JSON
    (`--dry-run`, no torch needed), else import its torch-dependent half `module` (only now,
    so that the knobs work without torch) and call its `run(args, knobs)`; one error line and
    exit 1 without PyTorch."""
    if args.dry_run:
        print(json.dumps(knobs, indent=2))
        return
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"{script}: error: PyTorch is not installed in this Python (pip install torch)",
              file=sys.stderr)
        sys.exit(1)
    importlib.import_module(module).run(args, knobs)


def make_range(stream, tag, start_ms, end_ms, metadata=None):
    """One timed range, as it appears in `profile.ranges`."""
    return {
        "stream": stream,
        "tag": tag,
        "start_ms": start_ms,
        "end_ms": end_ms,
        "duration_ms": end_ms - start_ms,
        "metadata": metadata or {},
    }


def _busy(ranges, t0, t1):
    return sorted({r["stream"] for r in ranges if r["start_ms"] <= t0 and r["end_ms"] >= t1})


def _add(d, key, value):
    d[key] = d.get(key, 0.0) + value


def overlap(ranges, total_ms):
    """`profile.overlap` of one iteration."""
    out = {"per_stream_ms": {}, "overlap_ms": {}, "active_segments": [], "utilization": {}}
    if not ranges:
        return out
    bounds = sorted({b for r in ranges for b in (r["start_ms"], r["end_ms"])})
    idle, gap_seen = 0.0, False
    for t0, t1 in zip(bounds, bounds[1:]):
        active = _busy(ranges, t0, t1)
        if not active:
            gap_seen, idle = True, idle + (t1 - t0)
            continue
        _account(out, active, t0, t1)
    if not gap_seen:
        idle = max(total_ms - bounds[-1], 0.0)
    if idle > 0.0:
        out["overlap_ms"]["idle"] = idle
    if total_ms > 0:
        streams = sorted(set(STREAMS) | set(out["per_stream_ms"]))
        out["utilization"] = {s: out["per_stream_ms"].get(s, 0.0) / total_ms for s in streams}
    return out


def _account(out, active, t0, t1):
    length = t1 - t0
    for s in active:
        _add(out["per_stream_ms"], s, length)
    if COMPUTE in active:
        if len(active) > 1:
            _add(out["overlap_ms"], "compute_comm", length)
        for s in ("allreduce", "reducescatter"):
            if s in active:
                _add(out["overlap_ms"], "compute_" + s, length)
    segments = out["active_segments"]
    if segments and segments[-1]["end_ms"] == t0 and segments[-1]["active_streams"] == active:
        segments[-1]["end_ms"] = t1
    else:
        segments.append({"start_ms": t0, "end_ms": t1, "active_streams": active})


def metrics_line(rank, world_size, step, loss, grad_norm, lr, total_ms, ranges, markers):
    """One `rank_*_metrics.jsonl` record (epoch 0: the workload has no data epochs)."""
    return {
        "rank": rank,
        "world_size": world_size,
        "epoch": 0,
        "step": step,
        "global_step": step,
        "loss": loss,
        "grad_norm": grad_norm,
        "lr": lr,
        "profile": {
            "index": step,
            "total_ms": total_ms,
            "ranges": ranges,
            "markers": markers,
            "overlap": overlap(ranges, total_ms),
        },
    }


def gemm_summary(rank, world, out, timed):
    """The machine-readable line of the script's own GEMM rate: `timed` is one (event ms,
    FLOPs) pair per `nn.Linear` forward of the profiled steps (the trace's `aten::addmm`),
    and the rate is their FLOPs over their summed CUDA-event time, the way `aorta perf`
    divides an operator's FLOPs by its kernels' time."""
    ms = sum(t for t, _ in timed)
    flops = sum(f for _, f in timed)
    return {"aorta_summary": {
        "workload": "fsdp_overlap.py",
        "rank": rank,
        "world_size": world,
        "mode": "profiled steps",
        "output_dir": out,
        "gemm": {
            "op": "aten::addmm",
            "what": "nn.Linear forward",
            "count": len(timed),
            "flops": flops,
            "event_ms": ms,
            "tflops": flops / (ms * 1e-3) / 1e12 if ms > 0 else None,
        },
    }}
