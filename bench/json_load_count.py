#!/usr/bin/env python3
"""Baseline + validation: json.load one trace (plain or .gz) and count.

Prints elapsed seconds for json.load alone and the counts that
gen_kineto.py prints as "expected" (events, cat=="kernel", CPU
ProfilerStep# spans).  Run under /usr/bin/time -v for peak RSS.
"""
import gzip
import json
import sys
import time

path = sys.argv[1]
t0 = time.perf_counter()
# Same read path as HTA's JSON backend (hta.common.trace_file.read_trace):
# plain -> text-mode read() then json.loads(str); .gz -> json.loads(bytes).
if path.endswith(".gz"):
    with gzip.open(path, "rb") as f:
        d = json.loads(f.read())
else:
    with open(path, "r") as f:
        d = json.loads(f.read())
t1 = time.perf_counter()
ev = d["traceEvents"]
kern = sum(1 for e in ev if e.get("cat") == "kernel")
steps = sum(1 for e in ev if e.get("cat") == "user_annotation"
            and str(e.get("name", "")).startswith("ProfilerStep#"))
print(f"json_load_s={t1 - t0:.2f} events={len(ev)} kernel_events={kern} "
      f"profiler_step_cpu_spans={steps} top_keys={list(d.keys())}")
