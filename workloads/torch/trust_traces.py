"""Small PyTorch runs whose traces check aorta's trust rules (docs/WORKLOADS.md, "Traces for
the trust checks"): what each run computes is known from its shapes, so the numbers `aorta
perf`, `aorta launches` and `aorta breakdown` derive from the traces can be checked.

* `sdpa`: `scaled_dot_product_attention` forward and backward under each backend PyTorch
  offers (`torch.nn.attention.sdpa_kernel`: flash, memory-efficient, cuDNN, math), one trace
  per backend (`sdpa_<backend>.pt.trace.json.gz`); a backend this GPU or build cannot run is
  reported and skipped. The FLOPs of each call follow from the shapes in `aorta_params`
  (forward 4·B·H·S²·D, backward 2.5× that, non-causal); CUDA events give each backend's
  time per call in `sdpa_summary.json`.
* `ddp_tf32`: DistributedDataParallel over a stack of FP32 linears with
  `torch.backends.cuda.matmul.allow_tf32 = True`, so cuBLAS runs TF32 GEMMs, on every rank of
  torchrun (`ddp_tf32_rank<r>.pt.trace.json.gz`); the GEMM FLOPs per step and their CUDA-event
  time are in `ddp_tf32_summary_rank<r>.json`. On CUDA 12+ PyTorch launches the GEMMs and the
  NCCL kernels through the driver API (`cuLaunchKernelEx`), which these traces record.

    python3 workloads/torch/trust_traces.py sdpa --output-dir out
    torchrun --nproc-per-node 2 workloads/torch/trust_traces.py ddp_tf32 --output-dir out
"""

import argparse
import json
import os
import sys

from aorta_metrics import env_knobs


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("sdpa", "ddp_tf32"))
    p.add_argument("--output-dir", default="trust-traces-out")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--iters", type=int, default=5)
    return p.parse_args(argv)


def sdpa_flops(b, h, s, d):
    """(forward, backward) FLOPs of one non-causal SDPA call: QK^T and PV are 2·B·H·S²·D each;
    the backward recomputes nothing in this count and does 2.5× the forward's matmul work."""
    fwd = 4 * b * h * s * s * d
    return fwd, 2.5 * fwd


def timed(torch, fn, iters):
    """Median ms of `fn()` over `iters` calls, by CUDA events."""
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def profiled(torch, fn, path, params, steps=2):
    from torch.profiler import ProfilerActivity, profile, schedule
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(1 + steps):
            prof.add_metadata_json("aorta_params", json.dumps(params))
            fn()
            prof.step()
    torch.cuda.synchronize()


def run_sdpa(torch, args):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = args.batch, args.heads, args.seq, args.head_dim
    fwd, bwd = sdpa_flops(b, h, s, d)
    summary = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "shape": {"batch": b, "heads": h, "seq": s, "head_dim": d, "dtype": "bf16"},
               "flops": {"forward": fwd, "backward": bwd}, "backends": {}}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))

        def step():
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, v)
                out.backward(torch.ones_like(out))
        try:
            step()
            torch.cuda.synchronize()
        except RuntimeError as e:
            print(f"sdpa {name}: not available here: {str(e).splitlines()[0]}", flush=True)
            summary["backends"][name] = {"error": str(e).splitlines()[0]}
            continue

        def fwd_only():
            with sdpa_kernel([backend]), torch.no_grad():
                F.scaled_dot_product_attention(q, k, v)
        ms_fwd = timed(torch, fwd_only, args.iters)
        ms_step = timed(torch, step, args.iters)
        params = {"workload": "trust_traces.sdpa", "backend": name, "batch": b, "heads": h,
                  "seq": s, "head_dim": d, "dtype": "bf16", **env_knobs(os.environ)}
        path = os.path.join(args.output_dir, f"sdpa_{name.lower()}.pt.trace.json.gz")
        profiled(torch, step, path, params)
        summary["backends"][name] = {"forward_ms": ms_fwd, "step_ms": ms_step,
                                     "forward_tflops": fwd / ms_fwd / 1e9, "trace": path}
        print(f"sdpa {name}: forward {ms_fwd:.3f} ms ({fwd / ms_fwd / 1e9:.1f} TFLOP/s), "
              f"forward+backward {ms_step:.3f} ms -> {path}", flush=True)
    with open(os.path.join(args.output_dir, "sdpa_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def run_ddp_tf32(torch, args):
    import torch.distributed as dist
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    layers = [torch.nn.Linear(args.hidden, args.hidden, bias=False) for _ in range(args.layers)]
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).cuda(),
                                                      device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.tokens, args.hidden, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        opt.step()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    ms = timed(torch, step, args.iters)
    # Forward 2·T·H² per layer; backward 2× that (input and weight gradients).
    flops = 3 * 2 * args.tokens * args.hidden * args.hidden * args.layers
    params = {"workload": "trust_traces.ddp_tf32", "allow_tf32": True, "hidden": args.hidden,
              "layers": args.layers, "tokens": args.tokens, "world_size": world,
              **env_knobs(os.environ)}
    path = os.path.join(args.output_dir, f"ddp_tf32_rank{rank}.pt.trace.json.gz")
    profiled(torch, step, path, params)
    summary = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rank": rank,
               "world_size": world, "step_ms": ms, "gemm_flops_per_step": flops,
               "tflops": flops / ms / 1e9}
    with open(os.path.join(args.output_dir, f"ddp_tf32_summary_rank{rank}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"ddp_tf32 rank {rank}/{world}: step {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s "
          f"(TF32 GEMMs, by CUDA events) -> {path}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("trust_traces.py: error: PyTorch is not installed in this Python")
    if not torch.cuda.is_available():
        sys.exit("trust_traces.py: error: no CUDA device")
    os.makedirs(args.output_dir, exist_ok=True)
    {"sdpa": run_sdpa, "ddp_tf32": run_ddp_tf32}[args.mode](torch, args)


if __name__ == "__main__":
    main()
