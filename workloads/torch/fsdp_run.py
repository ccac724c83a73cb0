"""The torch half of fsdp_overlap.py: model, FSDP2 wrapping, CUDA-event timing, profiler.

Kept apart from fsdp_overlap.py so that the knobs (`--dry-run`) and the overlap rules
(aorta_metrics.py) load and are tested without torch.

Collective timing: FSDP2 issues its all-gathers and reduce-scatters through
`torch.distributed.all_gather_into_tensor` / `reduce_scatter_tensor` on its own streams.
Those entry points are wrapped (`instrument_collectives`) to record a CUDA event on the
calling stream before and after the call. For a synchronous call (FSDP2's default) the
after-event waits for the NCCL/RCCL kernel, so the range is when the collective held that
stream; an `async_op=True` call returns before the kernel ends, so its range only covers the
launch and is marked `"async_op": true` in its metadata.
"""

import contextlib
import functools
import json
import os

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule

from aorta_metrics import COLLECTIVE_STREAMS, gemm_summary, make_range, metrics_line

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "none": None}
# The step being timed; the collective wrappers add their ranges to it.
CURRENT = None


class Block(nn.Module):
    def __init__(self, hidden, mult):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, mult * hidden)
        self.down = nn.Linear(mult * hidden, hidden)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.blocks = nn.ModuleList(Block(args.hidden, args.ffn_mult) for _ in range(args.layers))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def shard(model, args):
    """fully_shard every block, then the root; set the explicit prefetch lists."""
    dtype = DTYPES[args.mixed_precision]
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()
    for b in model.blocks:
        fully_shard(b, mp_policy=mp, reshard_after_forward=args.reshard_after_forward)
    fully_shard(model, mp_policy=mp, reshard_after_forward=args.reshard_after_forward)
    depth = 1 if args.limit_all_gathers else 2
    blocks = list(model.blocks)
    for i, b in enumerate(blocks):
        ahead = blocks[i + 1:i + 1 + depth]
        if args.forward_prefetch and ahead:
            b.set_modules_to_forward_prefetch(ahead)
        behind = list(reversed(blocks[max(0, i - depth):i]))
        if args.backward_prefetch == "BACKWARD_PRE" and behind:
            b.set_modules_to_backward_prefetch(behind)


class StepTimer:
    """CUDA events of one step, turned into ms ranges once the step has finished."""

    def __init__(self):
        self.start = self._event()
        self.pending, self.marks = [], []

    @staticmethod
    def _event():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    @contextlib.contextmanager
    def range(self, stream, tag, metadata=None):
        a = self._event()
        try:
            yield
        finally:
            self.pending.append((stream, tag, a, self._event(), metadata or {}))

    def marker(self, stream, tag):
        self.marks.append((stream, tag, self._event()))

    def finish(self):
        end = self._event()
        torch.cuda.synchronize()
        ms = self.start.elapsed_time
        ranges = [make_range(s, t, ms(a), ms(b), md) for s, t, a, b, md in self.pending]
        ranges.sort(key=lambda r: r["start_ms"])
        markers = [{"stream": s, "tag": t, "time_ms": ms(e), "metadata": {}} for s, t, e in self.marks]
        return ms(end), ranges, markers


class LinearEvents:
    """CUDA events around every `nn.Linear` forward of the profiled steps: the script's own
    measure of its GEMMs. Each forward is one `aten::addmm` (bias, 2-D-folded input) and its
    one kernel, so these events time exactly the kernels the trace has under that op, and
    `aorta perf` must reproduce the rate from the trace (docs/PERF.md)."""

    def __init__(self, model):
        self.on, self.open, self.done = False, {}, []
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.register_forward_pre_hook(self._pre)
                m.register_forward_hook(self._post)

    def _pre(self, mod, inputs):
        if self.on:
            self.open[id(mod)] = StepTimer._event()

    def _post(self, mod, inputs, output):
        start = self.open.pop(id(mod), None)
        if self.on and start is not None:
            rows = inputs[0].numel() // inputs[0].shape[-1]
            self.done.append((start, StepTimer._event(), 2 * rows * mod.in_features * mod.out_features))

    def timed(self):
        """(event ms, FLOPs) per forward, after the GPU has finished."""
        torch.cuda.synchronize()
        return [(a.elapsed_time(b), f) for a, b, f in self.done]


def instrument_collectives():
    """Wrap the collective entry points FSDP2 calls so each call becomes a timed range."""
    for name, stream in COLLECTIVE_STREAMS.items():
        original = getattr(c10d, name)

        @functools.wraps(original)
        def timed(*a, _orig=original, _name=name, _stream=stream, **kw):
            if CURRENT is None:
                return _orig(*a, **kw)
            meta = {"function": _name}
            if kw.get("async_op"):
                meta["async_op"] = True
            with CURRENT.range(_stream, _name, meta):
                return _orig(*a, **kw)

        setattr(c10d, name, timed)
        setattr(dist, name, timed)


class Straggler:
    """`--slow-rank`: a spin kernel of `--slow-ms` on this rank's compute stream at the start
    of every step. FSDP2's all-gather stream waits for the compute stream before the step's
    first all-gather, so that all-gather starts late and every other rank's waits for it.
    `torch.cuda._sleep` spins a number of GPU clock cycles: calibrated once against CUDA
    events, and the stall each step measured is logged in its JSONL ranges."""

    def __init__(self, ms):
        self.ms = ms
        n = 1 << 22
        torch.cuda._sleep(n)  # warm
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(n)
        b.record()
        b.synchronize()
        self.cycles = max(1, round(n * ms / a.elapsed_time(b)))

    def stall(self, timer, step):
        with timer.range("compute", f"epoch0_step{step}_straggler", {"delay_ms": self.ms}):
            torch.cuda._sleep(self.cycles)


def train_step(model, opt, args, step, batches, dist_info, straggler=None):
    global CURRENT
    timer = CURRENT = StepTimer()
    if straggler is not None:
        straggler.stall(timer, step)
    ga, loss_total = args.gradient_accumulation, 0.0
    for m, x in enumerate(batches):
        model.set_requires_gradient_sync(m == ga - 1)
        sfx = "" if ga == 1 else f"_micro{m}"
        with timer.range("compute", f"epoch0_step{step}_forward{sfx}"):
            loss = model(x).float().pow(2).mean() / ga
        with timer.range("compute", f"epoch0_step{step}_backward{sfx}"):
            loss.backward()
        loss_total = loss_total + loss.detach()
    with timer.range("compute", f"epoch0_step{step}_optimizer"):
        norm = None
        if args.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    timer.marker("compute", f"epoch0_step{step}_end")
    CURRENT = None
    total_ms, ranges, markers = timer.finish()
    if norm is not None:
        norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    rank, world = dist_info
    return metrics_line(rank, world, step, float(loss_total), norm, args.lr, total_ms, ranges, markers)


def trace_handler(out, rank):
    def handler(prof):
        prof.export_chrome_trace(os.path.join(out, f"rank{rank}_trace_step{prof.step_num}.json.gz"))
    return handler


def summarize(rank, lines, skip):
    """One line per rank: means over the steps after the profiler's wait phase."""
    rows = lines[skip:] or lines
    comm_streams = set(COLLECTIVE_STREAMS.values())

    def mean(f):
        return sum(f(r["profile"]) for r in rows) / len(rows)

    total = mean(lambda p: p["total_ms"])
    compute = mean(lambda p: p["overlap"]["per_stream_ms"].get("compute", 0.0))
    comm = mean(lambda p: sum(v for k, v in p["overlap"]["per_stream_ms"].items() if k in comm_streams))
    both = mean(lambda p: p["overlap"]["overlap_ms"].get("compute_comm", 0.0))
    pct = 100.0 * both / comm if comm else 0.0
    print(f"rank {rank}: {len(rows)} steps, step {total:.2f} ms, compute {compute:.2f} ms, "
          f"comm {comm:.2f} ms, compute∩comm {both:.2f} ms ({pct:.1f} % of comm), by CUDA events",
          flush=True)


def train(args, knobs, rank, world):
    torch.manual_seed(args.seed)
    model = Model(args).cuda()
    shard(model, args)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator(device="cuda").manual_seed(args.seed + rank)
    batches = [torch.randn(args.batch_size, args.seq_len, args.hidden, device="cuda", generator=gen)
               for _ in range(args.gradient_accumulation)]
    straggler = None
    if args.slow_rank is not None:
        if args.slow_rank >= world:
            raise SystemExit(f"fsdp_overlap.py: error: --slow-rank {args.slow_rank} must be < "
                             f"WORLD_SIZE {world}")
        if args.slow_rank == rank:
            straggler = Straggler(args.slow_ms)
    instrument_collectives()
    linears = LinearEvents(model)
    os.makedirs(args.output_dir, exist_ok=True)
    sched = schedule(wait=args.profile_wait, warmup=args.profile_warmup,
                     active=args.profile_active, repeat=args.profile_repeat)
    params, lines = json.dumps(knobs), []
    jsonl = os.path.join(args.output_dir, f"rank_{rank:02d}_metrics.jsonl")
    with open(jsonl, "w") as log, profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                          schedule=sched, record_shapes=True,
                                          on_trace_ready=trace_handler(args.output_dir, rank)) as prof:
        for step in range(args.steps):
            # Kineto keeps metadata per collection (none while waiting): add it on every
            # step it collects, so every cycle's trace carries it.
            if prof.current_action != ProfilerAction.NONE:
                prof.add_metadata_json("aorta_params", params)
            linears.on = prof.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
            line = train_step(model, opt, args, step, batches, (rank, world), straggler)
            linears.on = False
            log.write(json.dumps(line) + "\n")
            log.flush()
            lines.append(line)
            prof.step()
    summarize(rank, lines, args.profile_wait)
    print(json.dumps(gemm_summary(rank, world, args.output_dir, linears.timed())), flush=True)


def run(args, knobs):
    if not torch.cuda.is_available():
        raise SystemExit("fsdp_overlap.py: error: no GPU visible to PyTorch (torch.cuda.is_available() is False)")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", local))
    knobs = dict(knobs, **{"torch.version": torch.__version__, "world_size": world,
                           "gpu": torch.cuda.get_device_name(local)})
    try:
        train(args, knobs, rank, world)
    finally:
        dist.destroy_process_group()
