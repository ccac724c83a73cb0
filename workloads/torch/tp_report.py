#!/usr/bin/env python3
"""The CUDA-event table of a set of tp_overlap.py runs, and their TP scaling.

    python3 workloads/torch/tp_report.py OUTDIR [--csv FILE]

reads every `OUTDIR/*/tp_summary_rank*.json` (one folder per run, as
workloads/scripts/tp_runs.sh writes them) and prints, per run, each window's time: the
slowest rank's median, since a tensor-parallel layer waits for its slowest rank. Then the
scaling of every run against one GPU, T(n) / (T(1) / n), T(1) being the TP 1 serial run (the
unchunked GEMM, no collective): 1.0 is perfect scaling, and a ratio within 0.2 of it counts
as efficient. These are the script's own event times, the reference a trace analysis of the
same windows is held against. No torch needed. `--csv FILE` also writes the operators' times
as `tp,operator,e2e_us,method` rows, the input of `aorta sweep tp --times FILE` (which takes
each operator's best method per TP size and applies the same rule).
"""

import glob
import json
import os
import sys

from tp_overlap import OPS

WINDOWS = OPS + ("fprop",)
TOLERANCE = 0.2


def load_runs(outdir):
    """{run folder: {"tp", "method", "chunks", "ranks", "ms": {window: slowest rank's median}}}."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(outdir, "*", "tp_summary_rank*.json"))):
        run = os.path.basename(os.path.dirname(path))
        try:
            with open(path) as f:
                s = json.load(f)
            ms = {op: s["ops"][op]["median_ms"] for op in OPS}
            ms["fprop"] = s["fprop"]["median_ms"]
            key = (s["tp"], s["method"], s["chunks"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"tp_report.py: error: {path}: not a tp_overlap summary ({e!r})")
        r = runs.setdefault(run, {"tp": key[0], "method": key[1], "chunks": key[2], "ranks": 0, "ms": {}})
        if (r["tp"], r["method"], r["chunks"]) != key:
            raise SystemExit(f"tp_report.py: error: {path}: tp/method/chunks {key} differ from "
                             f"the other ranks of {run}")
        r["ranks"] += 1
        for w, v in ms.items():
            r["ms"][w] = max(r["ms"].get(w, v), v)
    return runs


def scaling(runs):
    """{run: {window: T(n) / (T(1) / n)}} against the TP 1 serial run ({} without one)."""
    base = [r for r in runs.values() if r["tp"] == 1 and r["method"] == "serial"]
    if not base:
        return {}
    t1 = base[0]["ms"]
    return {name: {w: r["ms"][w] / (t1[w] / r["tp"]) for w in WINDOWS if t1[w] > 0}
            for name, r in runs.items()}


def report(runs):
    """The two tables, as lines."""
    head = f"{'run':<16} {'tp':>2} {'method':<8} {'chunks':>6} {'ranks':>5}"
    lines = ["CUDA-event time per window, ms (median over timed steps, slowest rank):",
             head + "".join(f" {w:>8}" for w in WINDOWS)]
    order = sorted(runs, key=lambda n: (runs[n]["tp"], runs[n]["method"], n))
    for name in order:
        r = runs[name]
        missing = "" if r["ranks"] == r["tp"] else f"  (only {r['ranks']} of {r['tp']} ranks)"
        lines.append(f"{name:<16} {r['tp']:>2} {r['method']:<8} {r['chunks']:>6} {r['ranks']:>5}"
                     + "".join(f" {r['ms'][w]:>8.3f}" for w in WINDOWS) + missing)
    ratios = scaling(runs)
    if not ratios:
        lines.append("no TP 1 serial run: no scaling")
        return lines
    lines.append(f"TP scaling T(n) / (T(1) / n), T(1) = the TP 1 serial run; efficient "
                 f"(*) within {TOLERANCE} of 1:")
    lines.append(f"{'run':<16}" + "".join(f" {w:>8}" for w in WINDOWS))
    for name in order:
        cells = "".join(f" {ratios[name][w]:>7.2f}{'*' if ratios[name][w] <= 1 + TOLERANCE else ' '}"
                        for w in WINDOWS if w in ratios[name])
        lines.append(f"{name:<16}{cells}")
    return lines


def csv_rows(runs):
    """`tp,operator,e2e_us,method` lines: every run's operator windows, µs."""
    lines = ["tp,operator,e2e_us,method"]
    for name in sorted(runs, key=lambda n: (runs[n]["tp"], runs[n]["method"], n)):
        r = runs[name]
        lines += [f"{r['tp']},{op},{r['ms'][op] * 1e3:.3f},{r['method']}" for op in OPS]
    return lines


def main(argv):
    csv_path = None
    if len(argv) == 3 and argv[1] == "--csv":
        csv_path, argv = argv[2], argv[:1]
    if len(argv) != 1:
        raise SystemExit("usage: tp_report.py OUTDIR [--csv FILE]   (OUTDIR holds one folder per run)")
    runs = load_runs(argv[0])
    if not runs:
        raise SystemExit(f"tp_report.py: error: {argv[0]}: no */tp_summary_rank*.json")
    print("\n".join(report(runs)))
    if csv_path:
        with open(csv_path, "w") as f:
            f.write("\n".join(csv_rows(runs)) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
