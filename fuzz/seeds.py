#!/usr/bin/env python3
"""Builds the seed corpora of the fuzz targets (docs/FUZZING.md) in fuzz/corpus/<target>/.

The committed synthetic seeds (fuzz/seeds/<target>/) are copied, and small excerpts of the
trace corpus beside the checkout (../shared/data) are cut at run time: the corpus itself is
never committed. Excerpts keep each file's metadata and a sample of its events (a few of each
kind, with the steps and launches they link to), or, for SQLite, the schema and a few rows of
every table plus the rows they reference, in a database of 512-byte pages.

    python3 fuzz/seeds.py [--data ../shared/data] [--out fuzz/corpus]
"""

import argparse
import gzip
import json
import shutil
import sqlite3
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
TARGETS = ["kineto", "chrome", "jsonl", "rocprof_csv", "rocprof_json", "rocpd", "nsys",
           "rank_map", "rules"]


def load_json(p):
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rb") as f:
        return json.loads(f.read())


def trace_text(meta, events):
    """Kineto's own layout: one event per line, `", "` and `": "` separators."""
    body = ",\n".join("  " + json.dumps(e) for e in events)
    rest = "".join(f',\n  {json.dumps(k)}: {json.dumps(v)}' for k, v in meta.items())
    return '{\n  "traceEvents": [\n' + body + "\n  ]" + rest + "\n}\n"


def sample_events(events, per_kind=3):
    """A few events of every (ph, cat), the step annotations, and each kept kernel's launch."""
    seen, keep = {}, []
    for e in events:
        if not isinstance(e, dict):
            continue
        kind = (e.get("ph"), e.get("cat"))
        step = str(e.get("name", "")).startswith("ProfilerStep#")
        if step or seen.get(kind, 0) < per_kind:
            seen[kind] = seen.get(kind, 0) + 1
            keep.append(e)
    corr = {e.get("args", {}).get("correlation") for e in keep if isinstance(e.get("args"), dict)}
    corr.discard(None)
    for e in events:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict) and args.get("correlation") in corr and e not in keep:
            keep.append(e)
    return keep[:200]


def kineto_seeds(data, out):
    files = sorted((data / "kineto").rglob("*.json*")) + sorted((data / "aorta_py").rglob("*trace*.json.gz"))
    for p in files:
        if ".jsonl" in p.name:
            continue
        doc = load_json(p)
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        meta = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
        text = trace_text(meta, sample_events(events))
        name = p.parent.name + "_" + p.name.split(".")[0]
        (out / "kineto" / f"{name}.json").write_text(text)
        (out / "chrome" / f"{name}.json").write_text(text)
    # One compressed seed, so the decompressors are in the corpus from the start.
    small = next(iter(sorted((out / "kineto").iterdir())), None)
    if small:
        (out / "kineto" / "compressed.json.gz").write_bytes(gzip.compress(small.read_bytes()))
    broken = data / "broken" / "truncated_tmp_style.pt.trace.json.tmp"
    if broken.exists():
        (out / "kineto" / "truncated.json").write_bytes(broken.read_bytes()[-8192:])
    for p in sorted((data / "chrome").glob("*.json")):
        shutil.copy(p, out / "chrome" / p.name)


def jsonl_seeds(data, out):
    for p in sorted(data.rglob("*.jsonl")):
        lines = p.read_text().splitlines(keepends=True)[:3]
        if sum(map(len, lines)) > 16384:
            lines = lines[:1]
        (out / "jsonl" / f"{p.parent.name}_{p.name}").write_text("".join(lines))


def csv_seeds(data, out):
    csvs = sorted((data / "rocprofv3" / "csv").glob("*.csv"))
    for p in csvs:
        shutil.copy(p, out / "rocprof_csv" / p.name)
    by_name = {p.name: p.read_bytes() for p in csvs}
    kernels = [n for n in by_name if n.startswith("kernel_trace")]
    others = [n for n in by_name if n in ("memory_copy_trace.csv", "hip_api_trace.csv",
                                            "marker_api_trace.csv", "rccl_trace.csv")]
    for k in kernels:
        joined = b"\0".join([by_name[k]] + [by_name[o] for o in others])
        (out / "rocprof_csv" / f"job_{k}").write_bytes(joined)


def shrink_lists(x, n):
    if isinstance(x, list):
        return [shrink_lists(v, n) for v in x[:n]]
    if isinstance(x, dict):
        return {k: shrink_lists(v, n) for k, v in x.items()}
    return x


def rocprof_json_seeds(data, out):
    for p in sorted((data / "rocprofv3" / "json").glob("*.json*")):
        doc = load_json(p)
        tools = doc.get("rocprofiler-sdk-tool", [])
        small = []
        for t in tools:
            s = shrink_lists(t, 4)
            dispatches = t.get("buffer_records", {}).get("kernel_dispatch", [])
            s["buffer_records"]["kernel_dispatch"].extend(dispatches[40:400:40])
            ids = {d.get("dispatch_info", {}).get("kernel_id")
                   for d in s["buffer_records"]["kernel_dispatch"]}
            s["kernel_symbols"] = [k for k in t.get("kernel_symbols", [])
                                   if k.get("kernel_id") in ids]
            small.append(s)
        text = json.dumps({"rocprofiler-sdk-tool": small}, indent=1)
        (out / "rocprof_json" / "908_results.json").write_text(text)


def short(v, n=256):
    """Long text (an agent's JSON description, an environment dump) cut to `n` bytes."""
    if isinstance(v, str) and len(v) > n:
        return "{}" if v.startswith("{") else v[:n]
    return v


# The tables the Nsight Systems reader queries (the export has ~90, mostly empty enums).
NSYS_TABLES = {"StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
               "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT",
               "EXPORT_META_DATA"}


def sqlite_excerpt(src, dst, keep=None, rows=8, extra=60):
    """The schema of `src` (its tables in `keep`, when given) and a few rows of each table,
    plus the rows they reference by id."""
    dst.unlink(missing_ok=True)
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(dst)
    d.execute("PRAGMA page_size = 512")
    objs = s.execute("SELECT type, name, sql, tbl_name FROM sqlite_master WHERE sql IS NOT NULL")
    objs = [o[:3] for o in objs if keep is None or o[3] in keep]
    order = {"table": 0, "index": 1, "view": 2, "trigger": 3}
    tables = [n for t, n, _ in objs if t == "table" and not n.startswith("sqlite_")]
    for t, n, sql in sorted(objs, key=lambda o: order.get(o[0], 9)):
        if not n.startswith("sqlite_"):
            d.execute(sql)
    kept, ints = {}, set()
    for t in tables:
        got = s.execute(f'SELECT * FROM "{t}" LIMIT {rows}').fetchall()
        kept[t] = got
        ints.update(v for r in got for v in r if isinstance(v, int))
    for t in tables:
        more = [r for r in s.execute(f'SELECT * FROM "{t}" LIMIT 100000')
                if isinstance(r[0], int) and r[0] in ints and r not in kept[t]][:extra]
        for r in kept[t] + more:
            marks = ",".join("?" * len(r))
            d.execute(f'INSERT OR IGNORE INTO "{t}" VALUES ({marks})', [short(v) for v in r])
    d.commit()
    d.execute("VACUUM")
    d.close()


def sqlite_seeds(data, out):
    for p in sorted((data / "rocprofv3" / "rocpd").glob("*.db")):
        sqlite_excerpt(p, out / "rocpd" / (p.stem + ".db"))
    for p in sorted((data / "nsys").glob("*.sqlite")):
        sqlite_excerpt(p, out / "nsys" / p.name, keep=NSYS_TABLES)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=FUZZ.parent.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=FUZZ / "corpus")
    a = ap.parse_args()
    if not a.data.is_dir():
        raise SystemExit(f"no trace corpus at {a.data}")
    for t in TARGETS:
        d = a.out / t
        d.mkdir(parents=True, exist_ok=True)
        seeds = FUZZ / "seeds" / t
        for p in sorted(seeds.iterdir()) if seeds.is_dir() else []:
            shutil.copy(p, d / p.name)
    shutil.copy(FUZZ.parent / "ingest" / "rules" / "default.toml", a.out / "rules" / "default.toml")
    kineto_seeds(a.data, a.out)
    jsonl_seeds(a.data, a.out)
    csv_seeds(a.data, a.out)
    rocprof_json_seeds(a.data, a.out)
    sqlite_seeds(a.data, a.out)
    for t in TARGETS:
        files = list((a.out / t).iterdir())
        size = sum(f.stat().st_size for f in files)
        print(f"{t:13} {len(files):3} seeds, {size:8} bytes, largest {max((f.stat().st_size for f in files), default=0)}")


if __name__ == "__main__":
    main()
