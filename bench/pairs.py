#!/usr/bin/env python3
"""Two builds of `bench_ingest` against each other, in alternating pairs.

    python3 bench/pairs.py [--pairs 8] [--jobs 2] [--cpus 0,1] BEFORE AFTER FILE [-- ARGS...]

Runs BEFORE and AFTER on FILE in turn, ABBA (the first of each pair alternates, so neither
build always runs on a page cache or a CPU just warmed by the other), each pinned with
`taskset -c CPUS` and given `--jobs JOBS` and ARGS (e.g. `--step-marker 'train_step (\\d+)'`).
The input is read (`cat`) before every run: this VM's kernel pages out page cache left idle
for a minute (docs/PERFORMANCE.md, "Flows matched, not read").

Per run: wall time (`time.perf_counter`), and CPU time (user + system) and peak RSS of the
child alone (`os.wait4`; RSS in MB as docs/PERFORMANCE.md gives it: KiB ÷ 1000, like
`/usr/bin/time`'s `%M` ÷ 1000). Prints each build's median, fastest and slowest wall time,
median CPU time and peak RSS range, then the medians of the pairwise AFTER / BEFORE ratios
of wall and CPU time: on a noisy machine a ratio taken within each pair moves less than
either build's own times.

FILE may be a directory (a rocprofv3 CSV set): every file under it is read before each run,
and MB/s counts them all. BEFORE and AFTER may be the same build, to see the machine's noise.

A run that exits non-zero stops the script with its stderr: a build that fails is not timed.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def run(binary, args):
    """One run: (wall seconds, CPU seconds, peak RSS as `/usr/bin/time` `%M` ÷ 1000)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"{binary} {' '.join(args)}: exit status {status >> 8}\n{err.decode(errors='replace')}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1000


def inputs(path):
    """The files that FILE names: itself, or every file under a directory."""
    if not os.path.isdir(path):
        return [path]
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--cpus", default="0,1", help="taskset -c list (default 0,1)")
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("file")
    ap.add_argument("args", nargs="*", help="after `--`: passed to both builds")
    a = ap.parse_args()
    args = ["--jobs", a.jobs, *a.args, a.file]
    files = inputs(a.file)
    builds = (a.before, a.after)
    # By position, not by path: the same build twice is a valid pair.
    res = ([], [])
    for i in range(a.pairs):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
            res[k].append(run("taskset", ["-c", a.cpus, builds[k], *args]))
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    for name, r in zip(("before", "after"), res):
        w = [x[0] for x in r]
        c = [x[1] for x in r]
        m = [x[2] for x in r]
        med = statistics.median(w)
        print(f"{name}: wall median {med:.3f} s ({mb / med:,.0f} MB/s), "
              f"{min(w):.3f}-{max(w):.3f} s; CPU median {statistics.median(c):.3f} s; "
              f"peak RSS {min(m):.1f}-{max(m):.1f} MB")
    ratio = lambda k: statistics.median(res[1][i][k] / res[0][i][k] for i in range(a.pairs))
    print(f"after / before over {a.pairs} pairs: wall {ratio(0):.3f}, CPU {ratio(1):.3f}")


if __name__ == "__main__":
    main()
