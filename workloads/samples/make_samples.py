#!/usr/bin/env python3
"""The README's single-rank samples, made from the project's own H100 run.

  cuda/fsdp_1gpu.json.gz  workloads/traces/fsdp-1gpu's trace (recorded by `aorta run fsdp` on
                          one H100), its two training steps, re-compressed.
  rocm/fsdp_1gpu.json.gz  SYNTHETIC: the same step as a ROCm/MI300X trace would name it
                          (hipLaunchKernel, hip_runtime_version, Cijk_ GEMM kernels, an
                          MI300X deviceProperties), with every GEMM kernel 0.8x as long and
                          nothing else moved (the step spans and the other kernels keep their
                          times, so the step time stays: the GPU simply idles more). No AMD
                          GPU was used: it exists so the
                          quickstart can show `aorta compare --reference cuda --candidate rocm`
                          on data inside the repository, and says so in every event's run.

Deterministic: the same input gives byte-identical output. Run from the repository root:
  python3 workloads/samples/make_samples.py
"""

import copy
import gzip
import json
import re
from pathlib import Path

SRC = Path("workloads/traces/fsdp-1gpu/fsdp_default/rank0_trace_step6.json.gz")
OUT = Path("workloads/samples")
GEMM = re.compile(r"nvjet|gemm|xmma|cutlass", re.I)
GEMM_SCALE = 0.8


def hip(name):
    return re.sub(r"^cuda", "hip", name)


def rocm(doc):
    out = copy.deepcopy(doc)
    for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version"):
        out.pop(k, None)
    out["hip_runtime_version"] = 60342134
    out["roctracer_version"] = 4.1
    out["aorta_params"] = {**out.get("aorta_params", {}), "synthetic": "H100 trace renamed as ROCm, GEMM kernels x0.8 (workloads/samples/make_samples.py)"}
    out["deviceProperties"] = [{"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9,
                                "computeMinor": 4, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                                "regsPerBlock": 131072, "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 304}]
    for e in out["traceEvents"]:
        if e.get("cat") == "kernel" and GEMM.search(e["name"]):
            e["dur"] = round(e["dur"] * GEMM_SCALE, 3)
            e["name"] = "Cijk_Alik_Bljk_BBS_BH_MT256x128x64_MI32x32x8x1_SN_" + re.sub(r"\W", "_", e["name"])
    for e in out["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            e["name"] = hip(e["name"])
    return out


def write(doc, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(data, compresslevel=9, mtime=0))


def main():
    doc = json.load(gzip.open(SRC))
    write(doc, OUT / "cuda" / "fsdp_1gpu.json.gz")
    write(rocm(doc), OUT / "rocm" / "fsdp_1gpu.json.gz")


if __name__ == "__main__":
    main()
