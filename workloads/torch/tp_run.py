"""The torch half of tp_overlap.py: the four operators two ways, CUDA-event windows, profiler.

Kept apart from tp_overlap.py so that the knobs (`--dry-run`) and the shape arithmetic load
and are tested without torch. The operator functions (`column_*`, `row_*`) take a `comm`
object with the two collectives, so the unit tests run them on CPU with a stand-in for NCCL
(`test_tp_overlap.py`); here it is `DistComm`, torch.distributed on the NCCL group.

How the overlap method overlaps. ProcessGroupNCCL runs every collective on its own stream,
which first waits for everything already queued on the calling (compute) stream:

* column-parallel (`qkv`, `fc1`): all `--chunks` all-gathers are issued before any GEMM, so
  none of them waits for a GEMM; the GEMM of piece k waits only for all-gather k
  (`work.wait()` makes the compute stream wait for it), and runs while pieces k+1.. arrive.
* row-parallel (`proj`, `fc2`): the reduce-scatter of piece k is issued right after GEMM k,
  so it waits for that GEMM alone and runs while GEMM k+1 computes; the window ends with the
  compute stream waiting for every reduce-scatter, so its CUDA-event time covers them.

`serial` calls the collective synchronously: the compute stream waits for it before the
GEMM (or the collective waits for the GEMM), so the two never run at once.
"""

import contextlib
import datetime
import json
import os

import torch
import torch.distributed as dist
from torch.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

from tp_overlap import OPS, median, op_summary, summary_line

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class DistComm:
    """The two collectives of sequence parallelism on a torch.distributed group."""

    def __init__(self, group, size):
        self.group, self.size = group, size

    def all_gather(self, out, inp, async_op):
        return dist.all_gather_into_tensor(out, inp, group=self.group, async_op=async_op)

    def reduce_scatter(self, out, inp, async_op):
        return dist.reduce_scatter_tensor(out, inp, group=self.group, async_op=async_op)


def column_serial(comm, x, w, gathered, out):
    """out[S, n] = all_gather(x)[S, k] @ w[k, n]: the whole all-gather, then one GEMM.
    At TP 1 there is nothing to gather: the GEMM reads x itself."""
    if comm.size == 1:
        torch.mm(x, w, out=out)
        return
    comm.all_gather(gathered, x, async_op=False)
    torch.mm(gathered, w, out=out)


def column_overlap(comm, x, w, gathered, out, chunks):
    """The same product in `chunks` pieces, `out` in chunk-major row order
    (tp_overlap.chunk_major_rows): every all-gather is queued first, then GEMM k waits for
    piece k only."""
    xs = x.view(chunks, -1, x.shape[1])
    o = out.view(chunks, -1, out.shape[1])
    if comm.size == 1:
        for k in range(chunks):
            torch.mm(xs[k], w, out=o[k])
        return
    g = gathered.view(chunks, -1, x.shape[1])
    works = [comm.all_gather(g[k], xs[k], async_op=True) for k in range(chunks)]
    for k, work in enumerate(works):
        work.wait()
        torch.mm(g[k], w, out=o[k])


def row_serial(comm, a, w, partial, out):
    """out[S/TP, n] = reduce_scatter(a[S, k] @ w[k, n]): one GEMM of this rank's share of the
    reduction, then the whole reduce-scatter. At TP 1 the GEMM writes `out` directly."""
    if comm.size == 1:
        torch.mm(a, w, out=out)
        return
    torch.mm(a, w, out=partial)
    comm.reduce_scatter(out, partial, async_op=False)


def row_overlap(comm, a, w, partial, out, chunks):
    """The same in `chunks` pieces, `a` in chunk-major row order: reduce-scatter k runs
    while GEMM k+1 computes; the compute stream waits for all of them at the end."""
    a_k = a.view(chunks, -1, a.shape[1])
    o = out.view(chunks, -1, out.shape[1])
    if comm.size == 1:
        for k in range(chunks):
            torch.mm(a_k[k], w, out=o[k])
        return
    p = partial.view(chunks, -1, partial.shape[1])
    works = []
    for k in range(chunks):
        torch.mm(a_k[k], w, out=p[k])
        works.append(comm.reduce_scatter(o[k], p[k], async_op=True))
    for work in works:
        work.wait()


class Operator:
    """One operator's tensors on this rank, allocated once, and how to run it."""

    def __init__(self, name, shape, tp, dtype, device, gen):
        self.name, self.kind = name, shape["parallel"]
        tokens, k, n = shape["gemm"]
        shard = tokens // tp

        def rand(*size):
            return torch.randn(*size, device=device, dtype=dtype, generator=gen)

        # Inputs of unit variance and weights scaled by 1/sqrt(k) keep outputs near 1.
        self.w = rand(k, n) / k ** 0.5
        if self.kind == "column":
            self.inp = rand(shard, k)
            self.buf = torch.empty(tokens, k, device=device, dtype=dtype) if tp > 1 else None
            self.out = torch.empty(tokens, n, device=device, dtype=dtype)
        else:
            self.inp = rand(tokens, k)
            self.buf = torch.empty(tokens, n, device=device, dtype=dtype) if tp > 1 else None
            self.out = torch.empty(shard, n, device=device, dtype=dtype)

    def run(self, comm, method, chunks, inp=None, out=None):
        inp = self.inp if inp is None else inp
        out = self.out if out is None else out
        if self.kind == "column":
            if method == "serial":
                column_serial(comm, inp, self.w, self.buf, out)
            else:
                column_overlap(comm, inp, self.w, self.buf, out, chunks)
        elif method == "serial":
            row_serial(comm, inp, self.w, self.buf, out)
        else:
            row_overlap(comm, inp, self.w, self.buf, out, chunks)


def to_chunk_major(t, tp, chunks):
    """Rows of a full-sequence tensor from serial (rank-major) to chunk-major order."""
    rows = t.shape[0] // (tp * chunks)
    return t.reshape(tp, chunks, rows, -1).transpose(0, 1).reshape(t.shape)


def check_op(op, comm, tp, chunks):
    """Runs `op` both ways on its own inputs and compares: a column-parallel result is
    compared after putting the serial one in chunk-major order; a row-parallel operator gets
    its input in chunk-major order for the overlap method, and must give the same shard.
    Returns (max |difference|, max |serial result|)."""
    serial = torch.empty_like(op.out)
    op.run(comm, "serial", 1, out=serial)
    overlapped = torch.empty_like(op.out)
    if op.kind == "column":
        op.run(comm, "overlap", chunks, out=overlapped)
        serial = to_chunk_major(serial, tp, chunks)
    else:
        op.run(comm, "overlap", chunks, inp=to_chunk_major(op.inp, tp, chunks), out=overlapped)
    diff = (serial.float() - overlapped.float()).abs().max().item()
    return diff, serial.float().abs().max().item()


class Windows:
    """A `record_function` window per operator and CUDA events at its two ends."""

    def __init__(self):
        self.events = []  # (step, name, start, end)

    @contextlib.contextmanager
    def window(self, step, name):
        with record_function(name):
            a = torch.cuda.Event(enable_timing=True)
            a.record()
            yield
            b = torch.cuda.Event(enable_timing=True)
            b.record()
        self.events.append((step, name, a, b))

    def times(self, steps):
        """{window: [ms per step]}, after the GPU has finished."""
        torch.cuda.synchronize()
        out = {}
        for step, name, a, b in self.events:
            out.setdefault(name, [None] * steps)[step] = a.elapsed_time(b)
        return out


def fprop(ops, comm, args, windows, step):
    with windows.window(step, "fprop"):
        for op in ops:
            with windows.window(step, op.name):
                op.run(comm, args.method, args.chunks)


def trace_handler(out, rank):
    def handler(prof):
        prof.export_chrome_trace(os.path.join(out, f"rank{rank}_trace_step{prof.step_num}.json.gz"))
    return handler


def bench(args, knobs, rank, tp, comm, device):
    dtype = DTYPES[args.dtype]
    gen = torch.Generator(device=device).manual_seed(args.seed * 1000 + rank)
    ops = [Operator(name, knobs["shapes"][name], tp, dtype, device, gen) for name in OPS]
    checks = {}
    if args.check and args.method == "overlap":
        for op in ops:
            diff, scale = check_op(op, comm, tp, args.chunks)
            ok = diff <= 2e-2 * max(scale, 1.0)
            checks[op.name] = {"max_abs_diff": diff, "max_abs_serial": scale, "ok": ok}
            if not ok:
                print(f"tp_overlap rank {rank}: WARNING: {op.name} overlap differs from serial by "
                      f"{diff:.3g} (serial max {scale:.3g})", flush=True)
    os.makedirs(args.output_dir, exist_ok=True)
    windows = Windows()
    sched = schedule(wait=args.profile_wait, warmup=args.profile_warmup,
                     active=args.profile_active, repeat=args.profile_repeat)
    params, profiled = json.dumps(knobs), []
    dist.barrier()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 record_shapes=True, on_trace_ready=trace_handler(args.output_dir, rank)) as prof:
        for step in range(args.steps):
            # Kineto keeps metadata per collection: add it on every step it collects.
            if prof.current_action != ProfilerAction.NONE:
                prof.add_metadata_json("aorta_params", params)
            if prof.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
                profiled.append(step)
            fprop(ops, comm, args, windows, step)
            prof.step()
    times = windows.times(args.steps)
    write_outputs(args, knobs, rank, tp, times, profiled, checks)


def write_outputs(args, knobs, rank, tp, times, profiled, checks):
    skip = args.timing_skip
    summary = {
        "workload": "tp_overlap",
        "rank": rank,
        "tp": tp,
        "method": args.method,
        "chunks": args.chunks,
        "dtype": args.dtype,
        "gpu": knobs["gpu"],
        "timing": "CUDA events on the compute stream at the two ends of each record_function "
                  f"window, per step; medians over steps {skip}..{args.steps - 1}",
        "timed_steps": list(range(skip, args.steps)),
        "profiled_steps": profiled,
        "ops": {op: op_summary(knobs["shapes"][op], times[op], skip) for op in OPS},
        "fprop": {"event_ms": times["fprop"], "median_ms": median(times["fprop"][skip:])},
        "check": checks or None,
    }
    out = args.output_dir
    with open(os.path.join(out, f"tp_summary_rank{rank}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(out, f"rank_{rank:02d}_metrics.jsonl"), "w") as f:
        for step in range(args.steps):
            f.write(json.dumps({
                "rank": rank, "world_size": tp, "step": step, "profiled": step in profiled,
                "window_ms": {name: times[name][step] for name in ("fprop",) + OPS},
            }) + "\n")
    for op in OPS:
        print(summary_line(rank, tp, args.method, args.chunks, op, summary["ops"][op]), flush=True)
    print(f"tp_overlap rank {rank}: tp {tp} {args.method} chunks {args.chunks} fprop: median "
          f"{summary['fprop']['median_ms']:.3f} ms", flush=True)


def nccl_version():
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def run(args, knobs):
    if not torch.cuda.is_available():
        raise SystemExit("tp_overlap.py: error: no GPU visible to PyTorch (torch.cuda.is_available() is False)")
    rank = int(os.environ.get("RANK", "0"))
    tp = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    if local >= torch.cuda.device_count():
        raise SystemExit(f"tp_overlap.py: error: LOCAL_RANK {local} but only "
                         f"{torch.cuda.device_count()} GPU(s) visible")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29518")
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", rank=rank, world_size=tp, device_id=device,
                            timeout=datetime.timedelta(seconds=120))
    knobs = dict(knobs, **{"torch.version": torch.__version__, "cuda.version": torch.version.cuda,
                           "nccl.version": nccl_version(), "world_size": tp,
                           "gpu": torch.cuda.get_device_name(local)})
    try:
        bench(args, knobs, rank, tp, DistComm(dist.group.WORLD, tp), device)
        dist.barrier()
    finally:
        dist.destroy_process_group()
