#!/usr/bin/env python3
"""A Kineto trace of N steps and little else: the worst case for what aorta keeps per step.

Each step is a `ProfilerStep#k` CPU span with one `aten::mm` op, one `cudaLaunchKernel` and
the kernel it launched (plus, unless --no-gpu-steps, the step's `gpu_user_annotation`), so
memory that grows with the number of steps (names, spans, GPU windows) shows at a small file
size. Kineto traces are refused past 1,000,000 step annotations (CPU and GPU together), so
the largest such file has 999,999 steps with --no-gpu-steps, or 500,000 without it.

Deterministic: the same arguments always give the same bytes.

Usage:
  python3 bench/gen_steps.py --steps 999999 --no-gpu-steps --out OUT.json   # 597 MB
"""

import argparse


def step(i, gpu_steps):
    t = 1000 * i
    ev = [
        f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{t}.000,"dur":900.000,"args":{{"External id":{4 * i + 1}}}}}',
        f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{t + 10}.000,"dur":100.000,"args":{{"External id":{4 * i + 2}}}}}',
        f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t + 20}.000,"dur":10.000,"args":{{"External id":{4 * i + 2},"correlation":{i + 1}}}}}',
        f'{{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":{t + 40}.000,"dur":50.000,"args":{{"External id":{4 * i + 2},"correlation":{i + 1},"device":0,"stream":7}}}}',
    ]
    if gpu_steps:
        ev.append(
            f'{{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#{i}","pid":0,"tid":7,"ts":{t + 30}.000,"dur":80.000,"args":{{"External id":{4 * i + 1}}}}}'
        )
    return ",\n".join(ev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--no-gpu-steps", action="store_true", help="no gpu_user_annotation per step")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.out, "w") as out:
        out.write('{"schemaVersion":1,"deviceProperties":[],"traceEvents":[\n')
        for i in range(a.steps):
            out.write((",\n" if i else "") + step(i, not a.no_gpu_steps))
        out.write("\n]}\n")


if __name__ == "__main__":
    main()
