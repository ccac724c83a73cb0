#!/usr/bin/env python3
"""Scale the corpus's rocprofv3 capture to a benchmark set of rocprofv3 CSV files.

rocprofv3 writes one CSV per record kind and process (`<pid>_kernel_trace.csv`,
`<pid>_hip_api_trace.csv`, ...); the corpus has only small unrelated samples of those, so
this takes the dispatches of the real JSON capture (the one `gen_rocprof.py` scales) and
writes, COPIES times with fresh correlation ids and shifted times:

- `1_kernel_trace.csv`: every dispatch (the kernel trace's G3 header);
- `1_hip_api_trace.csv`: a `hipLaunchKernel` per dispatch, 5 us before its start;
- `1_rccl_api_trace.csv`: an `ncclAllReduce` around the launch of each RCCL kernel;
- `1_marker_api_trace.csv`: a `ProfilerStep#K` range around copy K (the default step marker).

so every dispatch has a launch whose step the reader looks up, and each RCCL kernel a
collective (docs/PERFORMANCE.md, "Peak RSS and the file size").

    python3 bench/gen_rocprof_csv.py --size-mb 2048 --out-dir /tmp/rocprof_csv
    bench_ingest /tmp/rocprof_csv/1_*.csv
"""
import argparse
import gzip
import json
import os

SRC = os.path.join(os.path.dirname(__file__), "../../shared/data/rocprofv3/json/mi350x_908_results.json.gz")

KERNEL_HEADER = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
    '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
    '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z",'
    '"Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
)
API_HEADER = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--size-mb", type=int, default=512, help="total size of the four files")
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args()
    with gzip.open(a.src, "rt") as f:
        doc = json.load(f)
    proc = doc["rocprofiler-sdk-tool"][0]
    names = {s["kernel_id"]: s.get("formatted_kernel_name") or s.get("kernel_name") or "?"
             for s in proc["kernel_symbols"]}
    disp = proc["buffer_records"]["kernel_dispatch"]
    t0 = min(r["start_timestamp"] for r in disp)
    span = max(r["end_timestamp"] for r in disp) - t0 + 1_000_000
    n_ids = max(r["correlation_id"]["internal"] for r in disp)
    pid = tid = 908
    # One copy's rows as templates: (kernel row pieces, launch, rccl) with {t}/{c} shifts.
    rows = []
    for r in disp:
        i = r["dispatch_info"]
        name = names.get(i["kernel_id"], "?").replace('"', '""')
        s, e, c = r["start_timestamp"], r["end_timestamp"], r["correlation_id"]["internal"]
        rows.append((i, name, s, e, c, "nccl" in name.lower()))

    def kernel(i, name, s, e, c, k):
        w, g = i["workgroup_size"], i["grid_size"]
        return (f'"KERNEL_DISPATCH","Agent {i["agent_id"]["handle"]}",{i["queue_id"]["handle"]},0,{tid},'
                f'{i["dispatch_id"] + k * n_ids},{i["kernel_id"]},"{name}",{c + k * n_ids},'
                f'{s + k * span},{e + k * span},{i["group_segment_size"]},{i["private_segment_size"]},'
                f'0,0,0,{w["x"]},{w["y"]},{w["z"]},{g["x"]},{g["y"]},{g["z"]}\n')

    def launch(c, ls):
        return f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",{pid},{tid},{c},{ls},{ls + 800}\n'

    def collective(c, ls):
        return f'"RCCL_API","ncclAllReduce",{pid},{tid},{c},{ls - 100},{ls + 900}\n'

    one = sum(len(kernel(*r[:5], 0)) + len(launch(r[4], r[2])) + (len(collective(r[4], r[2])) if r[5] else 0)
              for r in rows)
    copies = max(1, -(-(a.size_mb << 20) // one))
    os.makedirs(a.out_dir, exist_ok=True)
    path = lambda kind: os.path.join(a.out_dir, f"1_{kind}.csv")
    with open(path("kernel_trace"), "w") as kt, open(path("hip_api_trace"), "w") as hip, \
            open(path("rccl_api_trace"), "w") as rccl, open(path("marker_api_trace"), "w") as mk:
        kt.write(KERNEL_HEADER)
        for f in (hip, rccl, mk):
            f.write(API_HEADER)
        marker_corr = copies * n_ids + 1
        for k in range(copies):
            mk.write(f'"MARKER_CORE_API","ProfilerStep#{k}",{pid},{tid},{marker_corr + k},'
                     f'{t0 + k * span - 10000},{t0 + (k + 1) * span - 10001}\n')
            for (i, name, s, e, c, is_rccl) in rows:
                kt.write(kernel(i, name, s, e, c, k))
                ls, lc = s + k * span - 5000, c + k * n_ids
                hip.write(launch(lc, ls))
                if is_rccl:
                    rccl.write(collective(lc, ls))
    total = sum(os.path.getsize(path(k)) for k in ("kernel_trace", "hip_api_trace", "rccl_api_trace", "marker_api_trace"))
    print(f"{a.out_dir}: {copies} copies of {len(disp)} dispatches, {total / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
