#!/usr/bin/env python3
"""FSDP2 training steps with the Python aorta knobs, traced two ways.

A thin, synthetic workload: a stack of MLP blocks (LayerNorm, up-projection, GELU,
down-projection, residual), each block and the root wrapped with FSDP2's `fully_shard`,
trained with AdamW on random data. Per rank it writes

* PyTorch profiler (Kineto) traces, `rank{r}_trace_step{N}.json.gz`, one per active
  profiler cycle, with every knob in the trace's top-level `aorta_params` object (so
  `aorta ingest` keeps them as the run's parameters), and
* `rank_{r:02d}_metrics.jsonl`: one line per step in the Python aorta schema, with CUDA-event
  ranges for forward/backward/optimizer on the `compute` stream and for every collective FSDP
  issues (`all_gather_into_tensor` → `aux`, `reduce_scatter_tensor` → `reducescatter`,
  `all_reduce` → `allreduce`, the Python tool's stream names).

Run with torchrun, one process per GPU:

    torchrun --nproc-per-node 2 workloads/torch/fsdp_overlap.py --output-dir out/fsdp
    python3 workloads/torch/fsdp_overlap.py --dry-run   # the knobs, as JSON; no torch needed

The knob names are the Python aorta configuration guide's. FSDP2 has no `limit_all_gathers`
rate limiter and no post-backward prefetch, so they map onto its explicit prefetch lists
(docs/WORKLOADS.md says exactly how).
"""

import argparse
import os

from aorta_metrics import env_knobs, run_torch_half

PRECISIONS = ("bf16", "fp16", "none")


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="FSDP2 training steps with the Python aorta knobs; writes Kineto traces "
        "and rank_*_metrics.jsonl (run under torchrun, one process per GPU).",
        epilog="example: torchrun --nproc-per-node 2 fsdp_overlap.py --batch-size 8 "
        "--no-forward-prefetch --output-dir out/fsdp",
    )
    fsdp = p.add_argument_group("FSDP scheduling")
    fsdp.add_argument("--forward-prefetch", action=argparse.BooleanOptionalAction, default=True,
                      help="explicitly prefetch the next block(s)' all-gather in forward")
    fsdp.add_argument("--limit-all-gathers", action=argparse.BooleanOptionalAction, default=True,
                      help="at most one block prefetched ahead (off: two)")
    fsdp.add_argument("--backward-prefetch", choices=("BACKWARD_PRE", "BACKWARD_POST"),
                      default="BACKWARD_PRE",
                      help="PRE: explicit prefetch of the previous block(s) in backward; "
                      "POST: FSDP2's default schedule")
    fsdp.add_argument("--reshard-after-forward", action=argparse.BooleanOptionalAction,
                      default=True, help="free gathered parameters after forward (FSDP2)")
    work = p.add_argument_group("workload intensity")
    work.add_argument("--batch-size", type=int, default=8)
    work.add_argument("--gradient-accumulation", type=int, default=1)
    work.add_argument("--mixed-precision", choices=PRECISIONS, default="bf16")
    work.add_argument("--steps", type=int, default=8)
    work.add_argument("--lr", type=float, default=1e-4)
    work.add_argument("--grad-clip", type=float, default=1.0)
    work.add_argument("--hidden", type=int, default=4096)
    work.add_argument("--layers", type=int, default=8)
    work.add_argument("--ffn-mult", type=int, default=4)
    work.add_argument("--seq-len", type=int, default=1024)
    work.add_argument("--seed", type=int, default=0)
    prof = p.add_argument_group("profiler (torch.profiler.schedule)")
    prof.add_argument("--profile-wait", type=int, default=2)
    prof.add_argument("--profile-warmup", type=int, default=2)
    prof.add_argument("--profile-active", type=int, default=2)
    prof.add_argument("--profile-repeat", type=int, default=1)
    slow = p.add_argument_group("straggler (a known late rank, for `aorta collectives`)")
    slow.add_argument("--slow-rank", type=int, default=None,
                      help="this rank's compute stream sleeps --slow-ms at the start of every "
                      "step, before its first all-gather; the other ranks wait for it")
    slow.add_argument("--slow-ms", type=float, default=None,
                      help="how long the straggler sleeps, ms (with --slow-rank)")
    p.add_argument("--output-dir", default="fsdp-overlap-out")
    p.add_argument("--dry-run", action="store_true", help="print the knobs as JSON and exit")
    args = p.parse_args(argv)
    check(p, args)
    return args


def check(p, args):
    for name in ("batch_size", "gradient_accumulation", "steps", "hidden", "layers", "ffn_mult",
                 "seq_len", "profile_active"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if (args.slow_rank is None) != (args.slow_ms is None):
        p.error("--slow-rank and --slow-ms go together")
    if args.slow_rank is not None:
        if args.slow_rank < 0:
            p.error(f"--slow-rank {args.slow_rank} must be >= 0")
        if not 0 < args.slow_ms <= 60_000:
            p.error(f"--slow-ms {args.slow_ms} must be > 0 and <= 60000")
    cycle = args.profile_wait + args.profile_warmup + args.profile_active
    if args.profile_repeat > 0 and args.steps < cycle * args.profile_repeat:
        p.error(f"--steps {args.steps} is shorter than the profiler schedule "
                f"({args.profile_repeat} x (wait+warmup+active = {cycle}))")


def knob_values(args, environ=None):
    """The knobs, under the Python aorta configuration guide's dotted names, followed by the
    GPU libraries' environment knobs (`aorta_metrics.env_knobs`) under their own names."""
    flags = {
        "workload": "fsdp_overlap",
        "fsdp.forward_prefetch": args.forward_prefetch,
        "fsdp.limit_all_gathers": args.limit_all_gathers,
        "fsdp.backward_prefetch": args.backward_prefetch,
        "fsdp.reshard_after_forward": args.reshard_after_forward,
        "training.batch_size": args.batch_size,
        "training.gradient_accumulation": args.gradient_accumulation,
        "training.mixed_precision": args.mixed_precision,
        "training.max_steps": args.steps,
        "training.lr": args.lr,
        "training.grad_clip": args.grad_clip,
        "model.hidden": args.hidden,
        "model.layers": args.layers,
        "model.ffn_mult": args.ffn_mult,
        "model.seq_len": args.seq_len,
        "profiler.wait": args.profile_wait,
        "profiler.warmup": args.profile_warmup,
        "profiler.active": args.profile_active,
        "profiler.repeat": args.profile_repeat,
        "straggler.rank": args.slow_rank,
        "straggler.delay_ms": args.slow_ms,
    }
    return {**flags, **env_knobs(os.environ if environ is None else environ)}


def main():
    args = parse_args()
    knobs = knob_values(args)
    run_torch_half("fsdp_overlap.py", args, knobs, "fsdp_run")


if __name__ == "__main__":
    main()
