#!/usr/bin/env python3
"""Scale a real rocprofv3 JSON (`--output-format json`) to a benchmark size.

Keeps the real file's metadata, agents, strings and kernel_symbols, and writes its
`kernel_dispatch` records COPIES times, each copy shifted past the previous one in time and
with fresh correlation/dispatch ids, so the result is a valid, realistic single-process trace
of the requested size (docs/PERFORMANCE.md, "rocprofv3 JSON").

    python3 bench/gen_rocprof.py --size-mb 512 --out /tmp/rocprof_512m.json

`--markers` also writes what a capture made with `--marker-trace --hip-runtime-trace` holds:
one `hipLaunchKernel` record per dispatch (its correlation id, 5 µs before the kernel
starts) and one roctx range `train_step K` around each copy K (with its message in
`strings.marker_api`), in rocprofv3's order (dispatches, then `hip_api`, then
`marker_api`): the input for `--step-marker 'train_step (\d+)'`.
"""
import argparse
import gzip
import json
import os

SRC = os.path.join(os.path.dirname(__file__), "../../shared/data/rocprofv3/json/mi350x_908_results.json.gz")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--size-mb", type=int, default=512)
    ap.add_argument("--out", required=True)
    ap.add_argument("--markers", action="store_true")
    a = ap.parse_args()
    with gzip.open(a.src, "rt") as f:
        doc = json.load(f)
    proc = doc["rocprofiler-sdk-tool"][0]
    disp = proc["buffer_records"]["kernel_dispatch"]
    proc["buffer_records"]["kernel_dispatch"] = []
    t0 = min(r["start_timestamp"] for r in disp)
    span = max(r["end_timestamp"] for r in disp) - t0 + 1_000_000
    n_ids = max(r["correlation_id"]["internal"] for r in disp)
    one = sum(len(json.dumps(r, separators=(",", ":"))) + 1 for r in disp)
    copies = max(1, -(-(a.size_mb << 20) // one))
    kinds = [k["kind"] for k in proc["strings"]["buffer_records"]]
    ops = lambda k: proc["strings"]["buffer_records"][kinds.index(k)]["operations"]
    # Marker ids above every dispatch's.
    marker_id = lambda k: copies * n_ids + 1 + k
    if a.markers:
        proc["strings"]["marker_api"] = [
            {"key": marker_id(k), "value": f"train_step {k}"} for k in range(copies)
        ]
    head = json.dumps(doc, separators=(",", ":"))
    # Split the document where the (now empty) dispatch list is, and the API lists.
    parts = []
    for key in ["kernel_dispatch", "hip_api", "marker_api"]:
        marker = f'"{key}":[]'
        i = head.index(marker) + len(marker) - 1
        parts.append(head[:i])
        head = head[i:]
    parts.append(head)

    def api(kind, op, corr, s, e):
        return json.dumps(
            {"size": 64, "kind": kinds.index(kind), "operation": ops(kind).index(op),
             "correlation_id": {"internal": corr, "external": 0},
             "start_timestamp": s, "end_timestamp": e, "thread_id": 908},
            separators=(",", ":"))

    with open(a.out, "w") as out:
        out.write(parts[0])
        first = True
        for k in range(copies):
            for r in disp:
                r = json.loads(json.dumps(r))
                r["start_timestamp"] += k * span
                r["end_timestamp"] += k * span
                r["correlation_id"]["internal"] += k * n_ids
                r["dispatch_info"]["dispatch_id"] += k * n_ids
                out.write(("" if first else ",") + json.dumps(r, separators=(",", ":")))
                first = False
        out.write(parts[1])
        if a.markers:
            first = True
            for k in range(copies):
                for r in disp:
                    s = r["start_timestamp"] + k * span - 5000
                    corr = r["correlation_id"]["internal"] + k * n_ids
                    out.write(("" if first else ",") + api("HIP_RUNTIME_API_EXT", "hipLaunchKernel", corr, s, s + 800))
                    first = False
        out.write(parts[2])
        if a.markers:
            out.write(",".join(
                api("MARKER_CORE_RANGE_API", "roctxThreadRangeA", marker_id(k), t0 + k * span - 10000, t0 + (k + 1) * span - 10001)
                for k in range(copies)))
        out.write(parts[3])
    print(f"{a.out}: {copies} copies of {len(disp)} dispatches, {os.path.getsize(a.out) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
