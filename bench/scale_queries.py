"""Times the job's cross-rank queries of scale/ on DuckDB and Spark over one dataset, and
checks them against `aorta collectives` / `aorta overlap` (docs/PERFORMANCE.md, "Beyond one
machine").

    .venv/bin/python bench/scale_queries.py DATASET [--aorta target/release/aorta] [--spark-master local[2]]

DuckDB: the views of scale/queries.duckdb.sql, each materialized (wall time per view and in
all, peak RSS of this process). Spark: scale/spark_queries.py --json as a subprocess (wall
time, session start included). With --aorta: every number of both engines is compared with
aorta's JSON (equal to the ns, or the script exits 1). Prints one JSON line.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VIEWS = ["rank_totals", "clock_offsets", "instance_skew", "stragglers"]


def duck(ds):
    con = duckdb.connect()
    con.execute("SET VARIABLE dataset = $1", [ds])
    con.execute(open(os.path.join(ROOT, "scale/queries.duckdb.sql")).read())
    out, secs = {}, {}
    t_all = time.monotonic()
    for v in VIEWS:
        t0 = time.monotonic()
        cur = con.execute(f"SELECT * FROM {v}")
        cols = [d[0] for d in cur.description]
        out[v] = [dict(zip(cols, r)) for r in cur.fetchall()]
        secs[v] = round(time.monotonic() - t0, 2)
    secs["all"] = round(time.monotonic() - t_all, 2)
    return out, secs


def spark(ds, master):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scale/spark_queries.py"), ds, "--json", "--master", master],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1]), round(time.monotonic() - t0, 2)


def aorta_rows(aorta, cmd, ds, by):
    p = subprocess.run([aorta, cmd, ds, "--by", by, "--json"], capture_output=True, text=True, check=True)
    return [r for run in json.loads(p.stdout)["runs"] for r in run["rows"]]


def keyed(rows, key, fields):
    return {tuple(r[k] for k in key): tuple(r[f] for f in fields) for r in rows}


def check(name, views, want):
    bad = []
    for view, key, fields in [
        ("rank_totals", ("run", "rank"), ("comm_ns", "compute_ns")),
        ("instance_skew", ("run", "process_group", "seq"),
         ("first_arrival_ns", "last_arrival_ns", "skew_ns", "last_rank", "caused_ns")),
        ("stragglers", ("run", "rank"), ("times_last", "caused_ns", "straggler_rank")),
        ("clock_offsets", ("run", "rank"), ("clock_offset_ns",)),
    ]:
        got = keyed(views[view], key, fields)
        exp = keyed(want[view], key, fields)
        if got != exp:
            diff = [k for k in exp if got.get(k) != exp[k]][:3]
            bad.append(f"{name} {view}: {len(got)} rows vs {len(exp)}; first differences {diff}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--aorta")
    ap.add_argument("--spark-master", default="local[2]")
    a = ap.parse_args()
    ds = os.path.abspath(a.dataset)
    d_views, d_secs = duck(ds)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    s_views, s_secs = spark(ds, a.spark_master)
    report = {"duckdb_seconds": d_secs, "duckdb_peak_rss_mb": rss_mb, "spark_seconds": s_secs,
              "rows": {v: len(d_views[v]) for v in VIEWS}}
    bad = []
    if a.aorta:
        ranks = aorta_rows(a.aorta, "collectives", ds, "rank")
        want = {
            "rank_totals": [r for r in aorta_rows(a.aorta, "overlap", ds, "rank") if r["source"] == "trace"],
            "instance_skew": aorta_rows(a.aorta, "collectives", ds, "instance"),
            "stragglers": ranks,
            "clock_offsets": ranks,
        }
        bad = check("duckdb", d_views, want) + check("spark", s_views, want)
        report["equal_to_aorta"] = not bad
        report["differences"] = bad
    print(json.dumps(report, sort_keys=True))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
