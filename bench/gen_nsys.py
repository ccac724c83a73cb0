#!/usr/bin/env python3
"""Scales a real Nsight Systems SQLite export by replicating its GPU activities and runtime
calls, for memory and speed benchmarks of `aorta ingest` on large exports (issue 33).

Replica k of every row of CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET and _RUNTIME gets
start/end shifted by k * (span + 1 ms) and correlationId shifted by k * (max id + 1), so
kernels keep their launches. With --steps, each replica is also one NVTX range
`ProfilerStep#k` per process of the runtime calls (an NVTX_EVENTS table is made if the
export has none), so that every launch has a step. Standard library only; deterministic.

    python3 bench/gen_nsys.py --replicas 1000 --steps --out bench/out/nsys_big.sqlite
"""
import argparse
import os
import shutil
import sqlite3
import sys

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "nsys", "cloverleaf-cuda.sqlite")
TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=SRC)
    ap.add_argument("--replicas", type=int, required=True)
    ap.add_argument("--steps", action="store_true", help="add one ProfilerStep#k NVTX range per replica and process")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if os.path.exists(a.out):
        os.remove(a.out)
    shutil.copyfile(a.source, a.out)
    c = sqlite3.connect(a.out)
    have = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = [t for t in TABLES if t in have]
    lo, hi, top = None, None, 0
    for t in tables:
        r = c.execute(f"SELECT MIN(start), MAX(end), MAX(correlationId) FROM {t}").fetchone()
        if r[0] is None:
            continue
        lo = r[0] if lo is None else min(lo, r[0])
        hi = r[1] if hi is None else max(hi, r[1])
        top = max(top, r[2] or 0)
    shift, ids = hi - lo + 1_000_000, top + 1
    for t in tables:
        cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
        sel = ", ".join(
            {"start": "start + ?1", "end": "end + ?1", "correlationId": "correlationId + ?2"}.get(col, col) for col in cols
        )
        # Replica 0 is the source itself; the others are copied from it.
        base = f"SELECT {sel} FROM {t} WHERE rowid <= ?3"
        n = c.execute(f"SELECT MAX(rowid) FROM {t}").fetchone()[0] or 0
        for k in range(1, a.replicas):
            c.execute(f"INSERT INTO {t} ({', '.join(cols)}) {base}", (k * shift, k * ids, n))
    if a.steps:
        if "NVTX_EVENTS" not in have:
            c.execute(
                "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
                "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER)"
            )
        tids = [r[0] for r in c.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY 1")]
        for k in range(a.replicas):
            for g in tids:
                c.execute(
                    "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
                    (lo + k * shift, hi + k * shift, f"ProfilerStep#{k}", g),
                )
    c.commit()
    counts = {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    c.close()
    print(f"wrote {a.out}: {os.path.getsize(a.out):,} bytes, {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
