#!/usr/bin/env python3
"""The GEMMs and collectives of one sequence-parallel tensor-parallel layer, traced per operator.

A 7B-class transformer layer's four projections under tensor parallelism with sequence
parallelism (Megatron's layout), one process per GPU, TP = WORLD_SIZE:

* `qkv`  all-gather of the sequence shards, then the column-parallel GEMM
         [tokens, hidden] x [hidden, 3*hidden/TP];
* `proj` the row-parallel GEMM [tokens, hidden/TP] x [hidden/TP, hidden], then a
         reduce-scatter over the sequence;
* `fc1`  all-gather, then [tokens, hidden] x [hidden, 2*ffn/TP] (SwiGLU's gate and up
         projections fused, as Megatron does; `--no-fc1-gated`: ffn/TP);
* `fc2`  [tokens, ffn/TP] x [ffn/TP, hidden], then reduce-scatter.

Two ways to run each operator (`--method`): `serial`, the collective and then the GEMM (or the
GEMM and then the collective) one after the other; `overlap`, the collective split into
`--chunks` pieces that NCCL runs on its own stream while the GEMM of the previous piece runs.
At TP 1 no collective is issued (the window holds the GEMM alone; `overlap` is then the GEMM
cut into chunks). Every operator runs inside a `torch.profiler.record_function` window named
after it, the four inside one `fprop` window, and CUDA events time every window of every step:
the script's own reference for what a trace analysis finds in the same windows.

    torchrun --standalone --nproc-per-node 4 workloads/torch/tp_overlap.py --method overlap \
        --output-dir out/tp4_overlap
    python3 workloads/torch/tp_overlap.py --method serial --dry-run   # knobs; no torch needed

This half parses the knobs and holds the shape and chunk arithmetic, free of torch, so it is
tested on a machine without it (`test_tp_overlap.py`); `tp_run.py` is the torch half.
"""

import argparse
import os
import sys

from aorta_metrics import env_knobs, run_torch_half

METHODS = ("serial", "overlap")
DTYPES = ("bf16", "fp16", "fp32")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# The operators in the order a layer's forward runs them.
OPS = ("qkv", "proj", "fc1", "fc2")
DEFAULT_CHUNKS = 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="The GEMM + collective of a sequence-parallel TP layer (qkv, proj, fc1, fc2) "
        "at TP = WORLD_SIZE; writes Kineto traces, tp_summary_rank{r}.json and "
        "rank_{r:02d}_metrics.jsonl (run under torchrun, one process per GPU).",
        epilog="example: torchrun --standalone --nproc-per-node 4 tp_overlap.py --method overlap "
        "--chunks 4 --output-dir out/tp4_overlap",
    )
    tp = p.add_argument_group("tensor parallelism")
    tp.add_argument("--method", choices=METHODS, required=True,
                    help="serial: collective and GEMM one after the other; overlap: the "
                    "collective in --chunks pieces beside the GEMMs of the pieces before")
    tp.add_argument("--chunks", type=int, default=None,
                    help=f"pieces per collective with --method overlap (default {DEFAULT_CHUNKS})")
    model = p.add_argument_group("shapes (Llama-2-7B by default)")
    model.add_argument("--hidden", type=int, default=4096)
    model.add_argument("--ffn", type=int, default=11008)
    model.add_argument("--heads", type=int, default=32)
    model.add_argument("--seq-len", type=int, default=4096, help="tokens per micro-batch sequence")
    model.add_argument("--batch", type=int, default=1, help="sequences per micro-batch")
    model.add_argument("--fc1-gated", action=argparse.BooleanOptionalAction, default=True,
                       help="fc1 is SwiGLU's gate and up projections fused (2*ffn columns); "
                       "off: ffn columns")
    model.add_argument("--dtype", choices=DTYPES, default="bf16")
    run = p.add_argument_group("steps and timing")
    run.add_argument("--steps", type=int, default=12)
    run.add_argument("--timing-skip", type=int, default=2,
                     help="steps left out of the medians (cuBLAS and NCCL warm-up)")
    run.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                     help="before timing, compare each operator's overlap result with its "
                     "serial result on this run's shapes")
    run.add_argument("--seed", type=int, default=0)
    prof = p.add_argument_group("profiler (torch.profiler.schedule)")
    prof.add_argument("--profile-wait", type=int, default=2)
    prof.add_argument("--profile-warmup", type=int, default=2)
    prof.add_argument("--profile-active", type=int, default=2)
    prof.add_argument("--profile-repeat", type=int, default=1)
    p.add_argument("--output-dir", default="tp-overlap-out")
    p.add_argument("--dry-run", action="store_true",
                   help="print the knobs as JSON (TP from WORLD_SIZE, else 1) and exit")
    args = p.parse_args(argv)
    check(p, args)
    return args


def check(p, args):
    for name in ("hidden", "ffn", "heads", "seq_len", "batch", "steps", "profile_active"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("timing_skip", "profile_wait", "profile_warmup", "profile_repeat"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.method == "serial" and args.chunks not in (None, 1):
        p.error("--chunks applies to --method overlap (serial runs each collective whole)")
    if args.chunks is not None and args.chunks < 1:
        p.error(f"--chunks {args.chunks} must be >= 1")
    args.chunks = chunks_of(args.method, args.chunks)
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.timing_skip >= args.steps:
        p.error(f"--timing-skip {args.timing_skip} leaves no step of --steps {args.steps} to time")
    cycle = args.profile_wait + args.profile_warmup + args.profile_active
    if args.profile_repeat > 0 and args.steps < cycle * args.profile_repeat:
        p.error(f"--steps {args.steps} is shorter than the profiler schedule "
                f"({args.profile_repeat} x (wait+warmup+active = {cycle}))")


def chunks_of(method, chunks):
    """Pieces per collective: 1 for serial, --chunks (default 4) for overlap."""
    if method == "serial":
        return 1
    return DEFAULT_CHUNKS if chunks is None else chunks


def tp_problems(args, tp):
    """Why these shapes cannot be split over `tp` ranks and `args.chunks` pieces ([] if they can)."""
    out = []
    if tp < 1:
        out.append(f"TP (WORLD_SIZE) {tp} must be >= 1")
        return out
    tokens = args.seq_len * args.batch
    if args.heads % tp:
        out.append(f"--heads {args.heads} is not a multiple of TP {tp}")
    if args.ffn % tp:
        out.append(f"--ffn {args.ffn} is not a multiple of TP {tp}")
    if tokens % (tp * args.chunks):
        out.append(f"tokens (--seq-len x --batch = {tokens}) are not a multiple of "
                   f"TP x chunks = {tp} x {args.chunks}")
    return out


def op_shapes(args, tp):
    """Per operator at `tp`: its collective, the tensor it moves and the GEMM, as plain data.

    `gemm` is [m, k, n] of out[m, n] = a[m, k] @ w[k, n] on one rank (m = all tokens, each rank
    computes its share of columns or of the reduction); `comm_tensor` is the full-sequence
    tensor the collective gathers or reduces ([tokens, hidden]), of which each rank holds
    `shard_tokens` rows before the all-gather or after the reduce-scatter."""
    tokens, h = args.seq_len * args.batch, args.hidden
    fc1_cols = (2 if args.fc1_gated else 1) * args.ffn
    gemms = {
        "qkv": ("column", h, 3 * h // tp),
        "proj": ("row", h // tp, h),
        "fc1": ("column", h, fc1_cols // tp),
        "fc2": ("row", args.ffn // tp, h),
    }
    out = {}
    for op in OPS:
        kind, k, n = gemms[op]
        comm = "all_gather" if kind == "column" else "reduce_scatter"
        out[op] = {
            "parallel": kind,
            "comm": comm if tp > 1 else "none",
            "comm_tensor": [tokens, h],
            "comm_bytes": tokens * h * DTYPE_BYTES[args.dtype] if tp > 1 else 0,
            "shard_tokens": tokens // tp,
            "gemm": [tokens, k, n],
            "flops": 2 * tokens * k * n,
        }
    return out


def chunk_major_rows(tp, chunks, rows):
    """Where the overlap method keeps each token of the full sequence.

    The serial all-gather lays the sequence out rank by rank (rank j's shard at rows
    j*S/TP...). The overlap method gathers piece k of every rank's shard at once, so its
    full-sequence tensors hold piece 0 of ranks 0..TP-1, then piece 1, ...: position p of the
    result holds serial row `chunk_major_rows(...)[p]`. A GEMM does not care about the order
    of its rows, and the reduce-scatter of the overlapped row-parallel operator gives every
    rank back exactly its serial shard when its input is in this order."""
    return [j * chunks * rows + k * rows + i
            for k in range(chunks) for j in range(tp) for i in range(rows)]


def knob_values(args, tp, environ):
    """The run's parameters as they go into the trace's `aorta_params` (flat names: `tp` and
    `method` are what a TP-scaling analysis groups by), followed by the GPU libraries'
    environment knobs under their own names (`aorta_metrics.env_knobs`)."""
    flags = {
        "workload": "tp_overlap",
        "tp": tp,
        "method": args.method,
        "chunks": args.chunks,
        "dtype": args.dtype,
        "hidden": args.hidden,
        "ffn": args.ffn,
        "heads": args.heads,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "tokens": args.seq_len * args.batch,
        "fc1_gated": args.fc1_gated,
        "ops": list(OPS),
        "shapes": op_shapes(args, tp),
        "steps": args.steps,
        "timing_skip": args.timing_skip,
        "seed": args.seed,
        "profiler.wait": args.profile_wait,
        "profiler.warmup": args.profile_warmup,
        "profiler.active": args.profile_active,
        "profiler.repeat": args.profile_repeat,
    }
    return {**flags, **env_knobs(environ)}


def median(xs):
    """The median of a non-empty list (the mean of the middle two for an even count)."""
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def op_summary(shape, event_ms, skip):
    """One operator's line of tp_summary_rank{r}.json: its per-step CUDA-event times, their
    median over the steps from `skip` on, and the GEMM rate that median implies (FLOPs of the
    window's GEMM over the whole window's time, collective included)."""
    med = median(event_ms[skip:])
    return dict(shape, event_ms=event_ms, median_ms=med,
                window_tflops=shape["flops"] / (med * 1e-3) / 1e12 if med > 0 else None)


def summary_line(rank, tp, method, chunks, op, s):
    """The line printed per operator."""
    m, k, n = s["gemm"]
    if s["comm"] == "none":
        what = "no collective at TP 1: the window is the GEMM alone"
    else:
        mib = s["comm_bytes"] / 2**20
        verb = "all-gather then GEMM" if s["comm"] == "all_gather" else "GEMM then reduce-scatter"
        what = f"{verb}, {mib:.3g} MiB collective"
    return (f"tp_overlap rank {rank}: tp {tp} {method} chunks {chunks} {op}: median "
            f"{s['median_ms']:.3f} ms (GEMM {m}x{k}x{n}; {what})")


def die(msg):
    print(f"tp_overlap.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    args = parse_args()
    world = os.environ.get("WORLD_SIZE", "1")
    if not world.isdigit():
        die(f"WORLD_SIZE={world!r} is not a number")
    tp = int(world)
    problems = tp_problems(args, tp)
    if problems:
        die("; ".join(problems))
    knobs = knob_values(args, tp, os.environ)
    run_torch_half("tp_overlap.py", args, knobs, "tp_run")


if __name__ == "__main__":
    main()
