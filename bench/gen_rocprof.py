#!/usr/bin/env python3
"""Scale a real rocprofv3 JSON (`--output-format json`) to a benchmark size.

Keeps the real file's metadata, agents, strings and kernel_symbols, and writes its
`kernel_dispatch` records COPIES times, each copy shifted past the previous one in time and
with fresh correlation/dispatch ids, so the result is a valid, realistic single-process trace
of the requested size (docs/PERFORMANCE.md, "rocprofv3 JSON").

    python3 bench/gen_rocprof.py --size-mb 512 --out /tmp/rocprof_512m.json
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
    a = ap.parse_args()
    with gzip.open(a.src, "rt") as f:
        doc = json.load(f)
    proc = doc["rocprofiler-sdk-tool"][0]
    disp = proc["buffer_records"]["kernel_dispatch"]
    proc["buffer_records"]["kernel_dispatch"] = []
    head = json.dumps(doc, separators=(",", ":"))
    # Split the document where the (now empty) dispatch list is.
    marker = '"kernel_dispatch":[]'
    i = head.index(marker) + len(marker) - 1
    prefix, suffix = head[:i], head[i:]
    t0 = min(r["start_timestamp"] for r in disp)
    span = max(r["end_timestamp"] for r in disp) - t0 + 1_000_000
    n_ids = max(r["correlation_id"]["internal"] for r in disp)
    one = sum(len(json.dumps(r, separators=(",", ":"))) + 1 for r in disp)
    copies = max(1, -(-(a.size_mb << 20) // one))
    with open(a.out, "w") as out:
        out.write(prefix)
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
        out.write(suffix)
    print(f"{a.out}: {copies} copies of {len(disp)} dispatches, {os.path.getsize(a.out) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
