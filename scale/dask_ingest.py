"""Sharded `aorta ingest` on a Dask cluster, then the job's cross-rank step once.

    python scale/dask_ingest.py TRACES... -o DATASET --shards N [--scheduler tcp://host:8786]

Each of the N shards is one task: a worker runs `aorta ingest TRACES -o DATASET --shard i/N`
as a subprocess (aorta does the reading, on all the worker's cores; Dask only places and
retries the tasks). TRACES and DATASET must be paths every worker sees (a shared file
system). When every shard has succeeded, one more task runs the cross-rank step on the
merged dataset: `aorta collectives DATASET` and `aorta overlap DATASET` (what `--then`
names). A shard that fails is retried by Dask (`--retries`): a re-run shard is idempotent.

Without `--scheduler` the script starts a `LocalCluster` of `--local-workers` worker
processes on this machine (the tests run it that way); with it, the same code runs on an
existing cluster (`dask scheduler` + `dask worker`, dask-jobqueue on Slurm, dask-kubernetes).

Prints one line `AORTA_DASK {json}`: per shard its index, seconds and the worker that ran
it, and the cross-rank step's commands and seconds. Exit status 1 when a shard or the
cross-rank step failed. docs/SCALE.md.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time


def run(cmd):
    """Runs `cmd`; raises with its last stderr lines when it fails (Dask then retries)."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {tail}")
    return time.monotonic() - t0, p.stdout


def ingest_shard(aorta, traces, dataset, index, count, jobs):
    cmd = [aorta, "ingest", *traces, "-o", dataset, "-q", "--shard", f"{index}/{count}"]
    if jobs:
        cmd += ["-j", str(jobs)]
    secs, _ = run(cmd)
    return {"shard": index, "seconds": round(secs, 3), "host": socket.gethostname(), "pid": os.getpid()}


def cross_rank(aorta, dataset, steps):
    out = []
    for step in steps:
        secs, _ = run([aorta, step, dataset])
        out.append({"command": f"aorta {step}", "seconds": round(secs, 3)})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", help="trace files or directories (shared paths)")
    ap.add_argument("-o", "--out", required=True, help="dataset directory (shared path)")
    ap.add_argument("--shards", type=int, required=True, help="how many shards (tasks)")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler")
    ap.add_argument("--local-workers", type=int, default=2, help="LocalCluster workers without --scheduler")
    ap.add_argument("--aorta", default=shutil.which("aorta") or "aorta", help="the aorta binary, as workers see it")
    ap.add_argument("-j", "--jobs", type=int, help="threads per shard (aorta ingest -j); default all cores")
    ap.add_argument("--then", default="collectives,overlap", help="cross-rank commands after the shards ('' for none)")
    ap.add_argument("--retries", type=int, default=2, help="Dask retries of a failed shard")
    a = ap.parse_args(argv)
    if a.shards < 1:
        ap.error("--shards: 1 or more")
    from dask.distributed import Client, LocalCluster

    cluster = None
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        cluster = LocalCluster(n_workers=a.local_workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    aorta = os.path.abspath(a.aorta) if os.sep in a.aorta else a.aorta
    traces = [os.path.abspath(t) for t in a.traces]
    dataset = os.path.abspath(a.out)
    t0 = time.monotonic()
    ok = True
    report = {"shards": [], "cross_rank": [], "errors": []}
    try:
        futures = [
            client.submit(ingest_shard, aorta, traces, dataset, i, a.shards, a.jobs,
                          key=f"aorta-shard-{i}-of-{a.shards}", pure=False, retries=a.retries)
            for i in range(a.shards)
        ]
        for f in futures:
            try:
                report["shards"].append(f.result())
            except Exception as e:  # noqa: BLE001 - reported, and the exit status says it
                ok = False
                report["errors"].append(str(e))
        report["ingest_seconds"] = round(time.monotonic() - t0, 3)
        steps = [s for s in a.then.split(",") if s]
        if ok and steps:
            try:
                report["cross_rank"] = client.submit(cross_rank, aorta, dataset, steps, pure=False).result()
            except Exception as e:  # noqa: BLE001
                ok = False
                report["errors"].append(str(e))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    report["seconds"] = round(time.monotonic() - t0, 3)
    print("AORTA_DASK " + json.dumps(report, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
