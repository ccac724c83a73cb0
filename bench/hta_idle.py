#!/usr/bin/env python3
"""`aorta breakdown --streams` against Holistic Trace Analysis's `get_idle_time_breakdown`,
per rank and per stream (host-wait, kernel-wait, other idle), on one directory of per-rank
Kineto traces.

HTA analyses only the GPU activities launched before the start of the trace's last
ProfilerStep (`Trace._filter_irrelevant_gpu_kernels`). So that both tools see the same
activities, this script first writes each trace with exactly those GPU events kept (every
CPU event stays, so HTA's own filter keeps them all again), then runs HTA on it (with
`HTA_DISABLE_NS_ROUNDING=1`, its µs floats unrounded, and its default
`consecutive_kernel_delay` of 30, µs in effect) and `aorta ingest` + `aorta breakdown
--streams` on it (whose default kernel-wait threshold is 30 µs), and prints both with the
relative difference. Exit 1 when one differs by more than --tolerance (1 %) and 1 µs.

  bench/out/hta-venv/bin/python bench/hta_idle.py TRACE_DIR [--aorta target/debug/aorta]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# The calls HTA's launch statistics select by name (`get_cuda_kernel_launch_stats`); its idle
# split joins every CPU event by correlation, driver calls included.
HTA_LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def hta_filtered(path, out_dir):
    """Writes `path` to `out_dir` with only the GPU events HTA analyses; returns the count kept
    and dropped."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    cpu = [e for e in events if e.get("cat") not in GPU_CATS and e.get("ph") == "X"]
    starts = [e["ts"] for e in cpu if str(e.get("name", "")).startswith("ProfilerStep")]
    last_start = max(starts)
    launched = {e["args"]["correlation"]: e["name"] for e in cpu
                if "correlation" in e.get("args", {}) and e["ts"] < last_start}
    keep, dropped, other_calls = [], 0, 0
    for e in events:
        corr = e.get("args", {}).get("correlation")
        if e.get("cat") in GPU_CATS and corr not in launched:
            dropped += 1
            continue
        if e.get("cat") in GPU_CATS and launched[corr] not in HTA_LAUNCH_NAMES:
            other_calls += 1
        keep.append(e)
    trace["traceEvents"] = keep
    name = os.path.basename(path)
    with gzip.open(os.path.join(out_dir, name if name.endswith(".gz") else name + ".gz"), "wt") as f:
        json.dump(trace, f)
    return len([e for e in keep if e.get("cat") in GPU_CATS]), dropped, other_calls


def hta_split(trace_dir):
    """HTA's idle split per (rank, stream), ns, and its launched activities per rank."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis
    a = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(a.t.traces)
    df, _ = a.get_idle_time_breakdown(ranks=ranks, visualize=False)
    out = {}
    for _, r in df.iterrows():
        # HTA's times are µs.
        out.setdefault((int(r["rank"]), int(r["stream"])), {})[r["idle_category"]] = r["idle_time"] * 1e3
    stats = a.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    return out, {r: len(stats[r]) for r in ranks}


def aorta_split(aorta, trace_dir, work):
    ds = os.path.join(work, "ds")
    subprocess.run([aorta, "ingest", trace_dir, "-o", ds, "-q", "--label", "hta"], check=True)
    doc = json.loads(subprocess.run([aorta, "breakdown", ds, "--streams", "--format", "json"],
                                    check=True, capture_output=True, text=True).stdout)
    split = {(r["rank"], r["stream"]): {"host_wait": r["host_wait_ns"],
                                        "kernel_wait": r["kernel_wait_ns"],
                                        "other": r["other_idle_ns"]} for r in doc["streams"]}
    launches = json.loads(subprocess.run([aorta, "launches", ds, "--format", "json"], check=True,
                                         capture_output=True, text=True).stdout)
    return split, {r["rank"]: r["launched"] for r in launches["rows"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace_dir")
    ap.add_argument("--aorta", default="target/debug/aorta")
    ap.add_argument("--tolerance", type=float, default=0.01)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hta-idle-")
    filtered = os.path.join(work, "traces")
    os.makedirs(filtered)
    other_calls = []
    for name in sorted(os.listdir(args.trace_dir)):
        if name.endswith((".json", ".json.gz")) and "trace" in name:
            kept, dropped, other = hta_filtered(os.path.join(args.trace_dir, name), filtered)
            other_calls.append(other)
            print(f"{name}: {kept} GPU activities analysed, {dropped} outside HTA's window, "
                  f"{other} launched by calls HTA's launch statistics do not select by name")
    (hta, hta_launched), (ours, launched) = hta_split(filtered), aorta_split(args.aorta, filtered, work)
    worst = 0.0
    # aorta counts every launch call; HTA's statistics those of its four names.
    for rank, other in zip(sorted(hta_launched), other_calls):
        print(f"rank {rank}: launched activities HTA {hta_launched[rank]} + {other} by other "
              f"calls (driver API) = aorta {launched.get(rank)}")
        if hta_launched[rank] + other != launched.get(rank):
            worst = float("inf")
    print("rank stream kind          HTA_us     aorta_us   diff_%")
    for key in sorted(set(hta) | set(ours)):
        for kind in ("host_wait", "kernel_wait", "other"):
            h, a = hta.get(key, {}).get(kind, 0.0), float(ours.get(key, {}).get(kind, 0))
            diff = abs(a - h) / h if h else (0.0 if a == 0 else float("inf"))
            if abs(a - h) > 1e3:
                worst = max(worst, diff)
            print(f"{key[0]:<4} {key[1]:<6} {kind:<12} {h / 1e3:>10.3f} {a / 1e3:>10.3f} "
                  f"{100 * diff:>8.3f}")
    print(f"largest difference over 1 µs: {100 * worst:.3f} %")
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
