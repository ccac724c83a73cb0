#!/usr/bin/env python3
"""SIGKILL an `aorta ingest` at random moments; the dataset must be the old one or the new.

Scenario (every trial the same): a dataset holds one run, `base` (the corpus trace
h200_fsdp2/rank0, gzip). The ingest that is killed re-reads `base` after it was recompressed
(same rows, new content hash: its parts are replaced, the old ones removed) and adds `big`,
the benchmark trace (1 GiB, or the 256 MiB one). So a commit both adds and removes parts.

Per trial: the old dataset is restored (`cp -al` of a reference: ingest only ever renames
files in, never writes into one), the ingest starts, and after a random delay it gets
SIGKILL: in even trials uniform in [0, 1.2 x its full run time], in odd ones uniform in
[0.85, 1.05] x that time, where the commit is. Then:
  * the dataset as a reader sees it (every path with no component starting with `.`: the
    staging directory, the lock record and the commit journal are hidden, and no glob of a
    table reaches them) must equal, file for file and byte for byte, the old reference or
    the new one; or, when the kill fell among the commit's renames, the journal
    (`.commit.json`) must be there, and the next ingest must finish it into the new one;
  * every table must read with polars (`scan_parquet(<table>/**/*.parquet, hive)`), with
    the row count of the reference it equals (any count in the mid-commit case);
  * every 10th trial, the same ingest runs again to the end (it takes over the lock the
    killed one left) and must give the new dataset exactly.

Usage (the venv of notebooks/requirements.txt has polars):
  .venv/bin/python bench/kill_ingest.py --aorta target/release/aorta \\
      --big bench/out/kineto_1g.json --trials 200 --work bench/out/kill
Prints one line per trial and a summary; --json FILE writes the summary as JSON.
"""

import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/data/kineto/cuda/h200_fsdp2/rank0.pt.trace.json.gz"


def visible(ds: Path) -> dict:
    """Relative path -> sha1 of every file a reader of the tables can see."""
    out = {}
    for root, dirs, files in os.walk(ds):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.startswith("."):
                continue
            p = Path(root) / f
            h = hashlib.sha1()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
            out[str(p.relative_to(ds))] = h.hexdigest()
    return out


def table_rows(ds: Path) -> dict:
    """Rows per table, read with polars (hive partitions on)."""
    rows = {}
    for t in sorted(p.name for p in ds.iterdir() if p.is_dir() and not p.name.startswith(".")):
        glob = str(ds / t / "**" / "*.parquet")
        rows[t] = pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item()
    return rows


def ingest(aorta: str, traces: Path, ds: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [aorta, "ingest", str(traces), "-o", str(ds), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "AORTA_LOCK_WAIT": "0"},
    )


def run_to_end(aorta: str, traces: Path, ds: Path) -> float:
    t0 = time.monotonic()
    p = ingest(aorta, traces, ds)
    _, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"ingest failed ({p.returncode}): {err.decode()}")
    return time.monotonic() - t0


def restore(ref: Path, ds: Path) -> None:
    if ds.exists():
        shutil.rmtree(ds)
    subprocess.run(["cp", "-al", str(ref), str(ds)], check=True)


def setup(work: Path, big: Path, aorta: str):
    """The inputs and the two reference datasets; the full ingest time."""
    if work.exists():
        shutil.rmtree(work)
    base, bigdir = work / "traces/base", work / "traces/big"
    base.mkdir(parents=True)
    shutil.copy(CORPUS, base / "rank0.pt.trace.json.gz")
    old = work / "ref_old"
    run_to_end(aorta, work / "traces", old)
    # The new inputs: base recompressed (same rows, another hash), big added.
    raw = gzip.decompress((base / "rank0.pt.trace.json.gz").read_bytes())
    (base / "rank0.pt.trace.json.gz").write_bytes(gzip.compress(raw, compresslevel=1, mtime=0))
    bigdir.mkdir()
    os.symlink(big.resolve(), bigdir / "rank0.pt.trace.json")
    new = work / "ref_new"
    times = []
    for _ in range(4):  # the first one warms the page cache, not counted
        restore(old, new)
        times.append(run_to_end(aorta, work / "traces", new))
    return old, new, times[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aorta", required=True)
    ap.add_argument("--big", required=True, type=Path)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("bench/out/kill"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    old, new, durations = setup(a.work, a.big, a.aorta)
    ref = {"old": (visible(old), table_rows(old)), "new": (visible(new), table_rows(new))}
    assert ref["old"][0] != ref["new"][0]
    full = sorted(durations)[len(durations) // 2]
    print(f"full ingest {full:.2f} s; old {len(ref['old'][0])} files, new {len(ref['new'][0])} files", flush=True)
    ds, traces = a.work / "ds", a.work / "traces"
    counts = {"old": 0, "new": 0, "finished": 0, "mid_commit": 0, "neither": 0, "recovered": 0}
    failures = []
    for i in range(a.trials):
        restore(old, ds)
        # The full run time: the median of the last runs that ended on their own.
        full = sorted(durations[-9:])[len(durations[-9:]) // 2]
        delay = full * (rng.uniform(0, 1.2) if i % 2 == 0 else rng.uniform(0.85, 1.05))
        t0 = time.monotonic()
        p = ingest(a.aorta, traces, ds)
        try:
            p.wait(timeout=delay)
            finished = True
            durations.append(time.monotonic() - t0)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            finished = False
        files = visible(ds)
        state = next((k for k, (f, _) in ref.items() if f == files), None)
        rows = table_rows(ds)
        ok = state is not None and rows == ref[state][1]
        mid = state is None and not finished and (ds / ".commit.json").exists()
        if finished:
            ok = ok and p.returncode == 0 and state == "new"
            counts["finished"] += 1
        elif state:
            counts[state] += 1
        elif mid:
            run_to_end(a.aorta, traces, ds)
            ok = visible(ds) == ref["new"][0] and table_rows(ds) == ref["new"][1]
            counts["mid_commit"] += ok
            state = "mid-commit, finished by the next ingest" if ok else None
        if not ok:
            counts["neither"] += 1
            extra = sorted(set(files) - set(ref["new"][0]) - set(ref["old"][0]))[:5]
            failures.append({"trial": i, "delay_s": delay, "rows": rows, "unknown_files": extra})
        if i % 10 == 9 and not mid:
            restore(old, ds)
            durations.append(run_to_end(a.aorta, traces, ds))
            again = visible(ds) == ref["new"][0] and table_rows(ds) == ref["new"][1]
            counts["recovered"] += again
            if not again:
                failures.append({"trial": i, "rerun": "did not give the new dataset"})
        print(f"trial {i:3d} kill at {delay:6.2f} s: {'finished' if finished else state or 'NEITHER'}", flush=True)
    summary = {
        "aorta": a.aorta,
        "big": str(a.big),
        "big_bytes": a.big.stat().st_size,
        "full_ingest_s": full,
        "trials": a.trials,
        "counts": counts,
        "reruns": a.trials // 10,
        "failures": failures,
    }
    print(json.dumps(summary, indent=2))
    if a.json:
        a.json.write_text(json.dumps(summary, indent=2))
    shutil.rmtree(a.work)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
