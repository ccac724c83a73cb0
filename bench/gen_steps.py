#!/usr/bin/env python3
"""A trace of N steps and little else: the worst case for what aorta keeps per step.

Each step is a step range with one launch and the kernel it launched, so memory that grows
with the number of steps (names, spans, GPU windows) shows at a small file size. Every reader
that collects step ranges has a mode (`--format`):

- `kineto` (default): a `ProfilerStep#k` CPU span with one `aten::mm` op, one
  `cudaLaunchKernel` and its kernel (plus, unless --no-gpu-steps, the step's
  `gpu_user_annotation`).
- `chrome`: a generic Chrome trace (a JSON array): a `train_step k` slice, a
  `cudaLaunchKernel` with its correlation and the kernel; steps need
  `--step-marker 'train_step (\\d+)'`.
- `nsys`: the corpus's Nsight Systems export with its activity replaced by one NVTX range
  `ProfilerStep#k`, one runtime call and one kernel (a copy of the export's first) per step.
- `rocprof-csv`: a rocprofv3 CSV set in the directory `--out` (`1_kernel_trace.csv`,
  `1_hip_api_trace.csv`, `1_marker_api_trace.csv`): a `ProfilerStep#k` roctx range, a
  `hipLaunchKernel` and a dispatch per step.
- `rocprof-json`: the corpus's rocprofv3 JSON capture with its records replaced by the same
  three per step (the range's message in `strings.marker_api`).
- `rocpd`: the corpus's rocpd database with its dispatches replaced by the same three per
  step (a marker region whose event's `extdata` holds the message, a `hipLaunchKernel`
  region, a dispatch).

aorta refuses a trace past 1,000,000 step annotations (ranges), so the largest such trace
has 1,000,000 steps (Kineto: 999,999 with --no-gpu-steps, or 500,000 without it). With
`--markers M` the ranges name no step (`layer_fwd_{k % M}`), so there is no such limit: what
a reader keeps per roctx/NVTX marker, with M distinct messages (0: each its own).

Deterministic: the same arguments always give the same bytes (the SQLite modes: the same rows).

Usage:
  python3 bench/gen_steps.py --steps 999999 --no-gpu-steps --out OUT.json   # 597 MB
  python3 bench/gen_steps.py --format rocprof-csv --steps 1000000 --out DIR
  python3 bench/gen_steps.py --format rocprof-json --steps 2000000 --markers 100 --out OUT.json
"""

import argparse
import gzip
import json
import os
import shutil
import sqlite3

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
NSYS_SRC = os.path.join(DATA, "nsys", "cloverleaf-cuda.sqlite")
ROCPROF_JSON_SRC = os.path.join(DATA, "rocprofv3", "json", "mi350x_908_results.json.gz")
ROCPD_SRC = os.path.join(DATA, "rocprofv3", "rocpd", "mi350x_908_results.DERIVED.db")

# Every mode's step k: the range [T0 + k*STEP, +9,000 ns), the launch at +100..+200, the
# kernel at +300..+800, correlation id k + 1.
STEP = 10_000

# What range k is called: `ProfilerStep#k`, or with --markers M a marker that names no step,
# `layer_fwd_{k % M}` (M = 0: `layer_fwd_k`, each its own).
MARKERS = None


def range_name(i):
    if MARKERS is None:
        return f"ProfilerStep#{i}"
    return f"layer_fwd_{i % MARKERS if MARKERS else i}"


def kineto_step(i, gpu_steps):
    t = 1000 * i
    ev = [
        f'{{"ph":"X","cat":"user_annotation","name":"{range_name(i)}","pid":1,"tid":1,"ts":{t}.000,"dur":900.000,"args":{{"External id":{4 * i + 1}}}}}',
        f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{t + 10}.000,"dur":100.000,"args":{{"External id":{4 * i + 2}}}}}',
        f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t + 20}.000,"dur":10.000,"args":{{"External id":{4 * i + 2},"correlation":{i + 1}}}}}',
        f'{{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":{t + 40}.000,"dur":50.000,"args":{{"External id":{4 * i + 2},"correlation":{i + 1},"device":0,"stream":7}}}}',
    ]
    if gpu_steps:
        ev.append(
            f'{{"ph":"X","cat":"gpu_user_annotation","name":"{range_name(i)}","pid":0,"tid":7,"ts":{t + 30}.000,"dur":80.000,"args":{{"External id":{4 * i + 1}}}}}'
        )
    return ",\n".join(ev)


def kineto(a):
    with open(a.out, "w") as out:
        out.write('{"schemaVersion":1,"deviceProperties":[],"traceEvents":[\n')
        for i in range(a.steps):
            out.write((",\n" if i else "") + kineto_step(i, not a.no_gpu_steps))
        out.write("\n]}\n")


def chrome(a):
    def step(i):
        t = STEP * i // 1000  # µs
        return ",\n".join([
            f'{{"ph":"X","cat":"cpu","name":"train_step {i}","pid":1,"tid":1,"ts":{t},"dur":9}}',
            f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t + 0.1:.1f},"dur":0.1,"args":{{"correlation":{i + 1}}}}}',
            f'{{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":{t + 0.3:.1f},"dur":0.5,"args":{{"correlation":{i + 1},"device":0,"stream":7}}}}',
        ])

    with open(a.out, "w") as out:
        out.write("[\n")
        for i in range(a.steps):
            out.write((",\n" if i else "") + step(i))
        out.write("\n]\n")


def nsys(a):
    if os.path.exists(a.out):
        os.remove(a.out)
    shutil.copyfile(NSYS_SRC, a.out)
    c = sqlite3.connect(a.out)
    k = c.execute("SELECT rowid, * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 1").fetchone()
    kcols = ["rowid"] + [r[1] for r in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    r = c.execute(
        "SELECT rowid, * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = ? ORDER BY rowid LIMIT 1",
        (k[kcols.index("correlationId")],),
    ).fetchone()
    rcols = ["rowid"] + [x[1] for x in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    t0 = min(k[kcols.index("start")], r[rcols.index("start")])
    have = {x[0] for x in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for t in ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"]:
        if t in have:
            c.execute(f"DELETE FROM {t}")
    if "NVTX_EVENTS" not in have:
        c.execute(
            "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
            "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
            "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER)"
        )
    gtid = r[rcols.index("globalTid")]

    def rows(row, cols, at):
        for i in range(a.steps):
            v = list(row[1:])
            t = t0 + i * STEP + at
            v[cols.index("start") - 1] = t
            v[cols.index("end") - 1] = t + (100 if at == 100 else 500)
            v[cols.index("correlationId") - 1] = i + 1
            yield v

    ins = lambda t, cols: f"INSERT INTO {t} ({', '.join(cols[1:])}) VALUES ({', '.join('?' * (len(cols) - 1))})"
    c.executemany(ins("CUPTI_ACTIVITY_KIND_RUNTIME", rcols), rows(r, rcols, 100))
    c.executemany(ins("CUPTI_ACTIVITY_KIND_KERNEL", kcols), rows(k, kcols, 300))
    c.executemany(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
        ((t0 + i * STEP, t0 + i * STEP + 9000, range_name(i), gtid) for i in range(a.steps)),
    )
    c.commit()
    c.execute("VACUUM")
    c.close()


CSV_HEADER_API = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
CSV_HEADER_KERNEL = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
    '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
    '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z",'
    '"Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
)
T0_ROC = 1_000_000_000


def rocprof_csv(a):
    os.makedirs(a.out, exist_ok=True)
    path = lambda kind: os.path.join(a.out, f"1_{kind}.csv")
    # Marker ids above every launch's.
    with open(path("kernel_trace"), "w") as kt, open(path("hip_api_trace"), "w") as hip, \
            open(path("marker_api_trace"), "w") as mk:
        kt.write(CSV_HEADER_KERNEL)
        hip.write(CSV_HEADER_API)
        mk.write(CSV_HEADER_API)
        for i in range(a.steps):
            t, c = T0_ROC + i * STEP, i + 1
            mk.write(f'"MARKER_CORE_API","{range_name(i)}",908,908,{a.steps + 1 + i},{t},{t + 9000}\n')
            hip.write(f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",908,908,{c},{t + 100},{t + 200}\n')
            kt.write(f'"KERNEL_DISPATCH","Agent 4",1,0,908,{c},10,"gemm_kernel",{c},{t + 300},{t + 800},'
                     '0,0,8,0,16,256,1,1,1024,1,1\n')


def rocprof_json(a):
    with gzip.open(ROCPROF_JSON_SRC, "rt") as f:
        doc = json.load(f)
    proc = doc["rocprofiler-sdk-tool"][0]
    recs = proc["buffer_records"]
    disp = recs["kernel_dispatch"][0]
    for key in list(recs):
        recs[key] = []
    recs["hip_api"], recs["marker_api"] = [], []
    kinds = [k["kind"] for k in proc["strings"]["buffer_records"]]
    ops = lambda k: proc["strings"]["buffer_records"][kinds.index(k)]["operations"]
    marker_id = lambda i: a.steps + 1 + i
    proc["strings"]["marker_api"] = "@MARKERS@"
    head = json.dumps(doc, separators=(",", ":"))
    # The document split where the marker messages and the three record lists go.
    parts = []
    for key in ['"@MARKERS@"', '"kernel_dispatch":[]', '"hip_api":[]', '"marker_api":[]']:
        i = head.index(key) + (0 if key.startswith('"@') else len(key) - 1)
        parts.append(head[:i])
        head = head[i + (len(key) if key.startswith('"@') else 0):]
    parts.append(head)

    def api(kind, op, corr, s, e):
        return (f'{{"size":64,"kind":{kinds.index(kind)},"operation":{ops(kind).index(op)},'
                f'"correlation_id":{{"internal":{corr},"external":0}},'
                f'"start_timestamp":{s},"end_timestamp":{e},"thread_id":908}}')

    def dispatch(i):
        r = json.loads(json.dumps(disp))
        t = T0_ROC + i * STEP
        r["start_timestamp"], r["end_timestamp"] = t + 300, t + 800
        r["correlation_id"]["internal"] = i + 1
        r["dispatch_info"]["dispatch_id"] = i + 1
        return json.dumps(r, separators=(",", ":"))

    def each(out, f):
        for i in range(a.steps):
            out.write(("," if i else "") + f(i))

    with open(a.out, "w") as out:
        out.write(parts[0])
        out.write("[")
        each(out, lambda i: f'{{"key":{marker_id(i)},"value":"{range_name(i)}"}}')
        out.write("]")
        out.write(parts[1])
        each(out, dispatch)
        out.write(parts[2])
        each(out, lambda i: api("HIP_RUNTIME_API_EXT", "hipLaunchKernel", i + 1,
                                T0_ROC + i * STEP + 100, T0_ROC + i * STEP + 200))
        out.write(parts[3])
        each(out, lambda i: api("MARKER_CORE_RANGE_API", "roctxThreadRangeA", marker_id(i),
                                T0_ROC + i * STEP, T0_ROC + i * STEP + 9000))
        out.write(parts[4])


def rocpd(a):
    if os.path.exists(a.out):
        os.remove(a.out)
    shutil.copyfile(ROCPD_SRC, a.out)
    c = sqlite3.connect(a.out)
    suffix = c.execute(
        "SELECT substr(name, length('rocpd_event_') + 1) FROM sqlite_master "
        "WHERE type = 'table' AND name LIKE 'rocpd\\_event\\_%' ESCAPE '\\'"
    ).fetchone()[0]
    guid = suffix.replace("_", "-")
    t = lambda name: f"rocpd_{name}_{suffix}"

    def string(s):
        row = c.execute(f"SELECT id FROM {t('string')} WHERE string = ?", (s,)).fetchone()
        if row:
            return row[0]
        return c.execute(f"INSERT INTO {t('string')} (guid, string) VALUES (?, ?)", (guid, s)).lastrowid

    kcols = [x[1] for x in c.execute(f"PRAGMA table_info({t('kernel_dispatch')})")]
    k = c.execute(f"SELECT * FROM {t('kernel_dispatch')} ORDER BY id LIMIT 1").fetchone()
    kcat = c.execute(f"SELECT category_id FROM {t('event')} WHERE id = ?", (k[kcols.index("event_id")],)).fetchone()[0]
    marker_cat, push = string("MARKER_CORE_RANGE_API"), string("roctxRangePushA")
    hip_cat, launch = string("HIP_RUNTIME_API_EXT"), string("hipLaunchKernel")
    c.execute(f"DELETE FROM {t('kernel_dispatch')}")
    c.execute(f"DELETE FROM {t('region')}")
    c.execute(f"DELETE FROM {t('event')}")
    nid, pid, tid = k[kcols.index("nid")], k[kcols.index("pid")], k[kcols.index("tid")]

    def events():
        for i in range(a.steps):
            yield (3 * i + 1, guid, marker_cat, a.steps + 1 + i, 0, f'{{"message":"{range_name(i)}"}}')
            yield (3 * i + 2, guid, hip_cat, i + 1, 0, "{}")
            yield (3 * i + 3, guid, kcat, i + 1, 0, "{}")

    def regions():
        for i in range(a.steps):
            s = T0_ROC + i * STEP
            yield (2 * i + 1, guid, nid, pid, tid, s, s + 9000, push, 3 * i + 1)
            yield (2 * i + 2, guid, nid, pid, tid, s + 100, s + 200, launch, 3 * i + 2)

    def kernels():
        for i in range(a.steps):
            v = list(k)
            s = T0_ROC + i * STEP
            for col, x in [("id", i + 1), ("dispatch_id", i + 1), ("start", s + 300), ("end", s + 800),
                           ("event_id", 3 * i + 3)]:
                v[kcols.index(col)] = x
            yield v

    c.executemany(
        f"INSERT INTO {t('event')} (id, guid, category_id, stack_id, correlation_id, extdata) VALUES (?, ?, ?, ?, ?, ?)",
        events(),
    )
    c.executemany(
        f"INSERT INTO {t('region')} (id, guid, nid, pid, tid, start, end, name_id, event_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        regions(),
    )
    c.executemany(
        f"INSERT INTO {t('kernel_dispatch')} ({', '.join(kcols)}) VALUES ({', '.join('?' * len(kcols))})",
        kernels(),
    )
    c.commit()
    c.execute("VACUUM")
    c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--format", default="kineto",
                    choices=["kineto", "chrome", "nsys", "rocprof-csv", "rocprof-json", "rocpd"])
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--no-gpu-steps", action="store_true", help="kineto: no gpu_user_annotation per step")
    ap.add_argument("--out", required=True, help="the file (rocprof-csv: the directory)")
    ap.add_argument("--markers", type=int, default=None, metavar="M",
                    help="name the ranges layer_fwd_{k %% M} (0: layer_fwd_k), markers that name "
                         "no step, so none is capped: what a reader keeps per marker")
    a = ap.parse_args()
    global MARKERS
    MARKERS = a.markers
    {"kineto": kineto, "chrome": chrome, "nsys": nsys, "rocprof-csv": rocprof_csv,
     "rocprof-json": rocprof_json, "rocpd": rocpd}[a.format](a)


if __name__ == "__main__":
    main()
