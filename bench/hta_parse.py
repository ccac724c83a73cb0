#!/usr/bin/env python3
"""HTA baseline: load ONE Kineto trace file with Holistic Trace Analysis.

HTA takes a directory of per-rank trace files (names ending in .json or .gz)
and finds each file's rank by regex-scanning its first lines for
`"rank": N` (the trace's distributedInfo.rank).  We symlink the given file
into a fresh temp dir, keeping its .json / .json.gz suffix, and point
TraceAnalysis at that dir.

Prints: parse seconds (TraceAnalysis(...) = parse + align + filter, HTA's
default JSON backend unless --backend is given), rows of the rank's
DataFrame, and seconds for get_comm_comp_overlap(visualize=False).
Run under /usr/bin/time -v for wall time and peak RSS.

  bench/out/hta-venv/bin/python bench/hta_parse.py TRACE.json[.gz]
"""
import argparse
import logging
import os
import shutil
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--backend", default=None,
                help="HTA ParserBackend value (json, ijson, ijson_batched, "
                     "ijson_batch_and_compress); default: HTA's default (json)")
ap.add_argument("--no-overlap", action="store_true")
a = ap.parse_args()

t_imp = time.perf_counter()
from hta.trace_analysis import TraceAnalysis  # noqa: E402
from hta.configs.parser_config import ParserBackend, ParserConfig  # noqa: E402
import hta.version  # noqa: E402

logging.getLogger("hta").setLevel(logging.WARNING)
print(f"hta={'.'.join(map(str, hta.version.__version_tuple__))} python={sys.version.split()[0]} "
      f"import_s={time.perf_counter() - t_imp:.2f}", flush=True)

# Per-stage timers around HTA's post-parse steps (called from
# hta.common.trace.parse_trace_file); overhead is one perf_counter pair each.
import hta.common.trace as _hct  # noqa: E402
_stage_s = {}


def _timed(name, fn):
    def w(*args, **kw):
        t = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            _stage_s[name] = _stage_s.get(name, 0.0) + time.perf_counter() - t
    return w


for _n in ("parse_trace_dataframe", "add_fwd_bwd_links",
           "transform_correlation_to_index", "add_iteration"):
    setattr(_hct, _n, _timed(_n, getattr(_hct, _n)))

if a.backend:
    cfg = ParserConfig.get_default_cfg()
    cfg.set_parser_backend(ParserBackend(a.backend))
    ParserConfig.set_default_cfg(cfg)

src = os.path.abspath(a.trace)
suffix = ".json.gz" if src.endswith(".gz") else ".json"
tmp = tempfile.mkdtemp(prefix="hta_one_")
os.symlink(src, os.path.join(tmp, "rank0.pt.trace" + suffix))
try:
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=tmp)
    t1 = time.perf_counter()
    ranks = ta.t.get_ranks()
    rows = {r: len(ta.t.get_trace(r)) for r in ranks}
    print(f"parse_s={t1 - t0:.2f} ranks={ranks} rows={rows}", flush=True)
    print("stages_s: " + " ".join(f"{k}={v:.2f}" for k, v in _stage_s.items()),
          flush=True)
    if not a.no_overlap:
        t2 = time.perf_counter()
        try:
            ov = ta.get_comm_comp_overlap(visualize=False)
            t3 = time.perf_counter()
            print(f"overlap_s={t3 - t2:.2f}\n{ov.to_string()}", flush=True)
        except Exception as e:  # report, don't hide
            print(f"overlap FAILED after {time.perf_counter() - t2:.2f}s: "
                  f"{type(e).__name__}: {e}", flush=True)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
