#!/usr/bin/env python3
"""Synthetic N-rank Kineto job with known clock offsets and known stragglers.

Takes the GPU kernel sequence of a REAL Kineto rank trace (default: the
PyTorch 2.11 FSDP2 H200 trace, 24 NCCL collectives per ProfilerStep), and
builds an N-rank job from it: one Kineto trace per rank plus a ground-truth
JSON with the injected per-host clock offsets, the injected delays and the
exact wait every rank sees at every delayed collective instance.

Time model (integer ns of one "true" clock; no float anywhere):
  * Each rank repeats the template steps: compute segment, collective,
    compute segment, collective, ..., tail compute.  All kernels of a rank are
    serialized (the next one starts after the previous one ended plus the
    template's idle gap), on their template streams, so no stream overlaps.
  * Collective instance k (seq, per rank, in launch order, all kinds):
      t_base[k]    = end of the common compute segment + the template gap
      arrival_r[k] = t_base[k] + jitter_r[k] + delay_r[k]
      end_r[k]     = max_r arrival_r[k] + transfer[k] + end_jitter_r[k]
    transfer[k] = the template kernel's duration; the comm kernel of rank r
    runs [arrival_r, end_r].  A delay lengthens the compute kernel just before
    the collective (real compute time, not a gap).  The next segment starts on
    every rank at max_r end_r[k] + gap (blocking collectives, lockstep ranks).
  * Raw timestamps of rank r = true + offset_r.  Ranks r // G share a host
    and an offset; host 0 has offset 0, others a seeded random offset in
    [-max_offset, +max_offset] ns.
  * jitter_r[k] in [0, --jitter-ns], end_jitter_r[k] in [0, --end-jitter-ns]:
    seeded per rank (random.Random("SEED:jitter:RANK")), so every worker can
    regenerate its own values and the parent only needs the per-instance max.

Output: OUT/rank{r}.pt.trace.json.gz (Kineto object format, one event per
line, ts/dur written "%d.%03d" from integer ns relative to the source's
baseTimeNanoseconds) and OUT/ground_truth.json.  See bench/README.md.
"""

import argparse
import decimal
import gzip
import json
import multiprocessing
import os
import random
import sys
import time
import zlib

DEFAULT_SOURCE = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "kineto", "cuda", "h200_fsdp2",
    "rank0.pt.trace.json.gz"))

LAUNCH_LEAD_NS = 5000      # cudaLaunchKernel starts 5 us before its kernel
LAUNCH_DUR_NS = 3000       # ... and lasts 3 us (less if the kernel is shorter)
STEP_PAD_NS = 2000         # ProfilerStep span = launches of the step +- 2 us
MIN_STEP_GAP_NS = 20000    # idle GPU gap between two steps, at least 20 us
DEFAULT_STEP_GAP_NS = 100000
CBID_LAUNCH_KERNEL = 211
CORR_BASE = 1000           # first correlation id of every rank
EXT_BASE = 1               # first External id of every rank
PG_RANKS_TRUNCATE = 30     # PyTorch's kTruncatLength for list-valued comm args
SENT_EXT = -987654321      # placeholders while building format strings
SENT_CORR = -987654322

KIND_BY_COLL_NAME = {
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce": "all_reduce",
    "_allgather_base": "all_gather", "allgather": "all_gather", "all_gather": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_coalesced": "all_gather",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "alltoall": "all_to_all", "alltoall_base": "all_to_all", "all_to_all": "all_to_all",
    "send": "send_recv", "recv": "send_recv", "recvanysource": "send_recv",
    "broadcast": "broadcast", "reduce": "reduce",
}
KIND_BY_KERNEL = [  # substring of the kernel name (lower case) -> kind
    ("allreduce", "all_reduce"), ("all_reduce", "all_reduce"),
    ("reducescatter", "reduce_scatter"), ("allgather", "all_gather"),
    ("alltoall", "all_to_all"), ("sendrecv", "send_recv"),
    ("broadcast", "broadcast"), ("reduce", "reduce"),
]


# ----------------------------------------------------------------------------
# exact time text
# ----------------------------------------------------------------------------

def us_text_to_ns(v):
    """JSON number (parsed as Decimal or int) in microseconds -> int ns."""
    if isinstance(v, int):
        return v * 1000
    d = decimal.Decimal(v) * 1000
    if d != d.to_integral_value():
        raise SystemExit(f"timestamp with sub-ns digits: {v}")
    return int(d)


def ms_text_to_ns(text):
    d = decimal.Decimal(text) * 1000000
    if d != d.to_integral_value():
        raise SystemExit(f"{text!r} ms is not a whole number of ns")
    return int(d)


def ns_text(v):
    q, r = divmod(v, 1000)
    return "%d.%03d" % (q, r)


def defloat(o):
    """Decimal -> float for re-serialising non-time args (shortest repr)."""
    if isinstance(o, decimal.Decimal):
        return float(o)
    if isinstance(o, list):
        return [defloat(x) for x in o]
    if isinstance(o, dict):
        return {k: defloat(x) for k, x in o.items()}
    return o


# ----------------------------------------------------------------------------
# template
# ----------------------------------------------------------------------------

def is_comm_name(name):
    n = name.lower()
    return "nccl" in n or "rccl" in n or n.startswith("multimem_all_reduce") \
        or "userbuffers" in n or n.startswith("cross_device_reduce")


def kind_of(name, args):
    cn = args.get("Collective name")
    if isinstance(cn, str) and cn.lower() in KIND_BY_COLL_NAME:
        return KIND_BY_COLL_NAME[cn.lower()]
    n = name.lower()
    for sub, k in KIND_BY_KERNEL:
        if sub in n:
            return k
    return "other"


def load_template(path, which, keep):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw.decode("utf-8"), parse_float=decimal.Decimal)
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        raise SystemExit("source is not a Kineto object-format trace")
    evs = doc["traceEvents"]
    kernels, launch_ts, cpu_steps, gpu_steps = [], {}, [], []
    for e in evs:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), e.get("name", "")
        a = e.get("args") or {}
        if cat == "kernel":
            kernels.append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in a:
            launch_ts[a["correlation"]] = us_text_to_ns(e["ts"])
        elif isinstance(name, str) and name.startswith("ProfilerStep#"):
            span = (us_text_to_ns(e["ts"]), us_text_to_ns(e["ts"]) + us_text_to_ns(e.get("dur", 0)),
                    int(name[len("ProfilerStep#"):]))
            if cat == "user_annotation":
                cpu_steps.append(span)
            elif cat == "gpu_user_annotation":
                gpu_steps.append(span)
    if not kernels:
        raise SystemExit("source has no cat=='kernel' events")
    cpu_steps.sort()
    gpu_steps.sort()

    def step_of(e):
        a = e.get("args") or {}
        lt = launch_ts.get(a.get("correlation"))
        if lt is not None:
            for s, t, n in cpu_steps:
                if s <= lt <= t:
                    return n
        kt = us_text_to_ns(e["ts"])
        for s, t, n in gpu_steps:
            if s <= kt <= t:
                return n
        return None

    if cpu_steps or gpu_steps:
        by_step = {}
        for e in kernels:
            n = step_of(e)
            if n is not None:
                by_step.setdefault(n, []).append(e)
    else:
        by_step = {0: kernels}
    numbers = sorted(by_step)
    if which != "all":
        if int(which) not in by_step:
            raise SystemExit(f"--template-step {which}: source steps are {numbers}")
        numbers = [int(which)]

    ktable = []          # kernel index -> (name, stream, args dict, is_comm, kind)
    kindex = {}
    steps = []           # per template step: dict(number, first_ns, last_end, segments)
    for n in numbers:
        ks = sorted(by_step[n], key=lambda e: (us_text_to_ns(e["ts"]), (e.get("args") or {}).get("correlation", 0)))
        items = []       # (gap, dur, kidx, is_comm)
        first = us_text_to_ns(ks[0]["ts"])
        max_end = first
        for e in ks:
            ts, dur = us_text_to_ns(e["ts"]), us_text_to_ns(e.get("dur", 0))
            a = defloat(e.get("args") or {})
            name = e["name"]
            stream = a.get("stream", e.get("tid"))
            comm = is_comm_name(name)
            kkey = (name, stream, json.dumps({k: v for k, v in a.items() if k not in ("correlation", "External id")},
                                             sort_keys=True, default=str))
            if kkey not in kindex:
                kindex[kkey] = len(ktable)
                ktable.append((name, stream, a, comm, kind_of(name, a) if comm else None))
            items.append((max(0, ts - max_end), max(0, dur), kindex[kkey], comm))
            max_end = max(max_end, ts + max(0, dur))
        # split into segments: [compute...] + collective, ..., tail [compute...]
        segments, cur = [], []
        for gap, dur, ki, comm in items:
            if comm:
                segments.append((thin(cur, keep), (gap, dur, ki)))
                cur = []
            else:
                cur.append((gap, dur, ki))
        segments.append((thin(cur, keep), None))
        steps.append({"number": n, "first_ns": first, "last_end": max_end, "segments": segments})
    for i, st in enumerate(steps):
        if i > 0:
            g = st["first_ns"] - steps[i - 1]["last_end"]
        elif len(steps) > 1:
            g = steps[1]["first_ns"] - steps[0]["last_end"]
        else:
            g = DEFAULT_STEP_GAP_NS
        st["gap_before"] = max(MIN_STEP_GAP_NS, g)
    header = {
        "deviceProperties": defloat(doc.get("deviceProperties") or []),
        "baseTimeNanoseconds": doc.get("baseTimeNanoseconds"),
    }
    return steps, ktable, header


def thin(seg, keep):
    """Keep at most `keep` compute kernels of a segment: the longest ones, in
    template order, durations scaled (integer ns) so the segment's total
    compute time is unchanged; the segment's idle gaps are summed and spread
    evenly over the kept kernels."""
    if keep is None or len(seg) <= keep:
        return list(seg)
    if keep == 0:
        return []
    order = sorted(range(len(seg)), key=lambda i: (-seg[i][1], i))[:keep]
    order.sort()
    total_dur = sum(d for _, d, _ in seg)
    total_gap = sum(g for g, _, _ in seg)
    kept_dur = sum(seg[i][1] for i in order)
    out = []
    for j, i in enumerate(order):
        g = total_gap // keep + (total_gap % keep if j == 0 else 0)
        d = seg[i][1] * total_dur // kept_dur if kept_dur else seg[i][1]
        out.append([g, d, seg[i][2]])
    if kept_dur:
        longest = max(range(len(out)), key=lambda j: (out[j][1], -j))
        out[longest][1] += total_dur - sum(x[1] for x in out)
    return [tuple(x) for x in out]


# ----------------------------------------------------------------------------
# per-rank random values
# ----------------------------------------------------------------------------

def _uniform_list(rng, n, hi):
    """n values in [0, hi] from rng (seeded, portable)."""
    if hi == 0:
        return [0] * n
    if hi < 256:
        # one random byte per value, mapped onto 0..hi (bias < 1/256; C speed)
        table = bytes(b * (hi + 1) // 256 for b in range(256))
        return list(rng.randbytes(n).translate(table))
    g = rng.getrandbits
    return [g(64) % (hi + 1) for _ in range(n)]


def rank_jitters(seed, rank, k_total, jit, ejit):
    """(arrival jitter, end jitter) lists of one rank, one value per instance."""
    rng = random.Random("%d:jitter:%d" % (seed, rank))
    return _uniform_list(rng, k_total, jit), _uniform_list(rng, k_total, ejit)


# ----------------------------------------------------------------------------
# writer (one rank per call; runs in worker processes)
# ----------------------------------------------------------------------------

CFG = None


def init_worker(cfg):
    global CFG
    CFG = cfg


def kernel_format(cfg, ki, dev, cpid):
    name, stream, targs, comm, _ = cfg["ktable"][ki]
    a = {"External id": SENT_EXT}
    for k, v in targs.items():
        if k != "External id":
            a[k] = v
    a["device"] = dev
    a["stream"] = stream
    a["correlation"] = SENT_CORR
    if comm:
        a["Group size"] = cfg["ranks"]
        a["Process Group Name"] = "0"
        a["Process Group Description"] = targs.get("Process Group Description", "default_pg")
        a["Process Group Ranks"] = cfg["pg_ranks"]
    at = json.dumps(a, separators=(",", ":")).replace("%", "%%")
    at = at.replace('"External id":%d' % SENT_EXT, '"External id":%d', 1)
    at = at.replace('"correlation":%d' % SENT_CORR, '"correlation":%d', 1)
    if at.count("%d") != 2:
        raise SystemExit("could not place External id / correlation in kernel args")
    nm = json.dumps(name).replace("%", "%%")
    cpu = '"pid":%d,"tid":%d' % (cpid, cpid)
    gpu = '"pid":%d,"tid":%d' % (dev, stream)
    # launch, its flow start, the kernel, its flow end
    fmt = ('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel",' + cpu +
           ',"ts":%d.%03d,"dur":%d.%03d,"args":{"External id":%d,"cbid":' + str(CBID_LAUNCH_KERNEL) +
           ',"correlation":%d}},\n')
    if cfg["flows"]:
        fmt += '{"ph":"s","id":%d,' + cpu + ',"ts":%d.%03d,"cat":"ac2g","name":"ac2g"},\n'
    fmt += '{"ph":"X","cat":"kernel","name":' + nm + ',' + gpu + ',"ts":%d.%03d,"dur":%d.%03d,"args":' + at + '},\n'
    if cfg["flows"]:
        fmt += '{"ph":"f","id":%d,' + gpu + ',"ts":%d.%03d,"cat":"ac2g","name":"ac2g","bp":"e"},\n'
    return fmt, stream


def write_rank(rank):
    cfg = CFG
    t_start = time.perf_counter()
    dev = rank % cfg["hosts_of"]
    cpid = cfg["cpu_pid_base"] + rank
    off = cfg["offsets"][rank]
    jit, ejit = rank_jitters(cfg["seed"], rank, cfg["instances"], cfg["jitter_ns"], cfg["end_jitter_ns"])
    mydel = cfg["delays_by_rank"].get(rank, {})
    ma, me = cfg["max_arrive"], cfg["max_end_jitter"]
    flows = cfg["flows"]
    fmts = {}
    streams = set()

    def fmt_of(ki):
        f = fmts.get(ki)
        if f is None:
            f, s = kernel_format(cfg, ki, dev, cpid)
            fmts[ki] = f
            streams.add(s)
        return f

    path = os.path.join(cfg["out"], "rank%d.pt.trace.json.gz" % rank)
    comp = zlib.compressobj(cfg["gzip_level"], zlib.DEFLATED, 31)
    fh = open(path, "wb")
    written = 0
    buf = []

    def flush(final=False):
        nonlocal buf, written
        data = "".join(buf).encode("utf-8")
        buf = []
        out = comp.compress(data)
        if final:
            out += comp.flush()
        fh.write(out)
        written += len(out)

    dist = {"backend": "nccl", "rank": rank, "world_size": cfg["ranks"]}
    head = ('{\n"schemaVersion":1,\n"deviceProperties":' + json.dumps(cfg["device_props"], separators=(",", ":")) +
            ',\n"distributedInfo":' + json.dumps(dist, separators=(",", ":")) +
            ',\n"displayTimeUnit":"ms",\n"baseTimeNanoseconds":' + str(cfg["base_time_ns"]) +
            ',\n"traceEvents":[\n')
    buf.append(head)

    def emit(f, start, d, launch_basis):
        # One kernel of duration d at start, with its launch (and flow pair) before it.
        nonlocal corr, ext, nkern, first_launch, last_launch_end
        ld = LAUNCH_DUR_NS if launch_basis >= LAUNCH_DUR_NS else launch_basis
        ls = start - LAUNCH_LEAD_NS
        lq, lr = divmod(ls, 1000)
        sq, sr = divmod(start, 1000)
        dq, dr = divmod(d, 1000)
        ldq, ldr = divmod(ld, 1000)
        if flows:
            buf.append(f % (lq, lr, ldq, ldr, ext, corr, corr, lq, lr, sq, sr, dq, dr, ext, corr, corr, sq, sr))
        else:
            buf.append(f % (lq, lr, ldq, ldr, ext, corr, sq, sr, dq, dr, ext, corr))
        if first_launch is None:
            first_launch = ls
        last_launch_end = ls + ld
        corr += 1
        ext += 1
        nkern += 1

    t = cfg["origin_ns"] + off       # raw clock of this rank
    first_launch = last_launch_end = None
    corr = CORR_BASE
    ext = EXT_BASE
    k = 0
    nkern = 0
    tsteps = cfg["tsteps"]
    step_fmt = ('{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":' + str(cpid) +
                ',"tid":' + str(cpid) + ',"ts":%d.%03d,"dur":%d.%03d,"args":{"External id":%d}},\n')
    for s in range(cfg["steps"]):
        ts_ = tsteps[s % len(tsteps)]
        pending_gap = ts_["gap_before"] if s > 0 else 0
        first_launch = None
        last_launch_end = None
        step_ext = ext
        ext += 1
        for comp_list, coll in ts_["segments"]:
            n_c = len(comp_list)
            delay = mydel.get(k, 0) if coll is not None else 0
            for i, (gap, dur, ki) in enumerate(comp_list):
                f = fmt_of(ki)
                start = t + gap + pending_gap
                pending_gap = 0
                d = dur + delay if (delay and i == n_c - 1) else dur
                emit(f, start, d, dur)
                t = start + dur
            if coll is None:
                continue
            gap, transfer, ki = coll
            f = fmt_of(ki)
            tb = t + gap + pending_gap
            pending_gap = 0
            arrive = tb + jit[k] + delay
            end = tb + ma[k] + transfer + ejit[k]
            d = end - arrive
            emit(f, arrive, d, transfer)
            t = tb + ma[k] + transfer + me[k]
            k += 1
        ss = first_launch - STEP_PAD_NS
        se = last_launch_end + STEP_PAD_NS
        buf.append(step_fmt % ((cfg["first_step"] + s,) + divmod(ss, 1000) + divmod(se - ss, 1000) + (step_ext,)))
        if len(buf) > 4000:
            flush()
    # metadata events, the last one without a trailing comma
    m0 = ns_text(cfg["origin_ns"] + off - 10 * LAUNCH_LEAD_NS)
    meta = [
        '{"name":"process_name","ph":"M","ts":%s,"pid":%d,"tid":0,"args":{"name":"python"}}' % (m0, cpid),
        '{"name":"process_labels","ph":"M","ts":%s,"pid":%d,"tid":0,"args":{"labels":"CPU"}}' % (m0, cpid),
        '{"name":"process_name","ph":"M","ts":%s,"pid":%d,"tid":0,"args":{"name":"python"}}' % (m0, dev),
        '{"name":"process_labels","ph":"M","ts":%s,"pid":%d,"tid":0,"args":{"labels":"GPU %d"}}' % (m0, dev, dev),
        '{"name":"thread_name","ph":"M","ts":%s,"pid":%d,"tid":%d,"args":{"name":"thread %d (python)"}}'
        % (m0, cpid, cpid, cpid),
    ]
    for s in sorted(streams):
        meta.append('{"name":"thread_name","ph":"M","ts":%s,"pid":%d,"tid":%d,"args":{"name":"stream %d "}}'
                    % (m0, dev, s, s))
    buf.append(",\n".join(meta))
    buf.append('\n],\n"traceName":"rank%d.pt.trace.json"\n}\n' % rank)
    flush(final=True)
    fh.close()
    return rank, written, nkern, k, time.perf_counter() - t_start


def pg_ranks_text(n, full):
    """`Process Group Ranks` as PyTorch's profiler writes it: the list as a
    string, truncated to its first 30 entries plus ", ..." when longer
    (torch/csrc/profiler/util.cpp format_list, kTruncatLength = 30)."""
    if full or n <= PG_RANKS_TRUNCATE:
        return "[" + ", ".join(map(str, range(n))) + "]"
    return "[" + ", ".join(map(str, range(PG_RANKS_TRUNCATE))) + ", ...]"


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(
        description="Synthetic N-rank Kineto job with known clock offsets and injected stragglers "
                    "(ground truth for cross-rank collective analysis).")
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="real Kineto rank trace used as template")
    ap.add_argument("--template-step", default="all",
                    help="ProfilerStep number of the source to use, or 'all' (default): the output cycles "
                         "through the source's steps")
    ap.add_argument("--ranks", type=int, required=True, help="number of ranks N")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--steps", type=int, help="number of output steps (default: the template's step count)")
    g.add_argument("--instances", type=int, help="minimum number of collective instances (sets --steps)")
    ap.add_argument("--compute-per-collective", type=int, default=None, metavar="K",
                    help="keep at most K compute kernels between two collectives (the longest, durations "
                         "scaled to keep the segment's compute time); default: keep all")
    ap.add_argument("--delay", action="append", default=[], metavar="RANK:SEQ:MS",
                    help="inject MS milliseconds of extra compute on RANK before collective SEQ (repeatable)")
    ap.add_argument("--delays-random", type=int, default=0, metavar="COUNT",
                    help="inject COUNT random delays (seeded): one random rank per chosen instance, "
                         "uniform in [0.5, 5] ms")
    ap.add_argument("--jitter-ns", type=int, default=200, help="arrival jitter, uniform in [0, J] ns")
    ap.add_argument("--end-jitter-ns", type=int, default=100, help="end jitter, uniform in [0, J] ns")
    ap.add_argument("--hosts-of", type=int, default=8, help="ranks per host (same clock) (default 8)")
    ap.add_argument("--max-offset-ms", default="50", help="host clock offsets in +-this many ms (default 50)")
    ap.add_argument("--full-pg-ranks", action="store_true",
                    help="write every rank in 'Process Group Ranks' (default: like PyTorch, the first 30 "
                         "then ', ...' when N > 30)")
    ap.add_argument("--no-flows", action="store_true", help="omit the ac2g flow events (smaller files)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gzip-level", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args()
    t0 = time.perf_counter()

    n = a.ranks
    if n < 1 or a.hosts_of < 1:
        raise SystemExit("--ranks and --hosts-of must be >= 1")
    if a.compute_per_collective is not None and a.compute_per_collective < 1:
        raise SystemExit("--compute-per-collective must be >= 1 (a delay needs a compute kernel)")
    if a.jitter_ns < 0 or a.end_jitter_ns < 0:
        raise SystemExit("jitters must be >= 0")
    if sys.version_info < (3, 9):
        raise SystemExit("needs Python >= 3.9 (random.randbytes)")
    tsteps, ktable, header = load_template(a.source, a.template_step, a.compute_per_collective)
    per_step = [sum(1 for _, c in st["segments"] if c is not None) for st in tsteps]
    if sum(per_step) == 0:
        raise SystemExit("the template has no collective (NCCL/RCCL) kernels")
    if a.instances is not None:
        steps, tot = 0, 0
        while tot < a.instances:
            tot += per_step[steps % len(tsteps)]
            steps += 1
    else:
        steps = a.steps if a.steps is not None else len(tsteps)
    # per-instance template facts: kind, step number, delayable
    first_step = tsteps[0]["number"]
    inst_kind, inst_step, inst_delayable = [], [], []
    for s in range(steps):
        st = tsteps[s % len(tsteps)]
        for comp_list, coll in st["segments"]:
            if coll is None:
                continue
            inst_kind.append(ktable[coll[2]][4])
            inst_step.append(first_step + s)
            inst_delayable.append(len(comp_list) > 0)
    k_total = len(inst_kind)

    # delays
    delays = {}   # (rank, seq) -> ns
    for spec in a.delay:
        try:
            r_s, k_s, ms = spec.split(":")
            r, kk, d = int(r_s), int(k_s), ms_text_to_ns(ms)
        except (ValueError, decimal.InvalidOperation):
            raise SystemExit(f"--delay {spec!r}: expected RANK:SEQ:MS")
        if not (0 <= r < n and 0 <= kk < k_total) or d <= 0:
            raise SystemExit(f"--delay {spec!r}: rank/seq out of range or delay <= 0")
        if not inst_delayable[kk]:
            raise SystemExit(f"--delay {spec!r}: instance {kk} has no compute kernel before it")
        if (r, kk) in delays:
            raise SystemExit(f"--delay {spec!r}: given twice")
        delays[(r, kk)] = d
    if a.delays_random:
        used = {kk for _, kk in delays}
        cand = [kk for kk in range(k_total) if inst_delayable[kk] and kk not in used]
        if a.delays_random > len(cand):
            raise SystemExit(f"--delays-random {a.delays_random}: only {len(cand)} instances available")
        rng = random.Random("%d:delays" % a.seed)
        for kk in sorted(rng.sample(cand, a.delays_random)):
            delays[(rng.randrange(n), kk)] = rng.randint(500000, 5000000)
    delays_by_rank = {}
    for (r, kk), d in delays.items():
        delays_by_rank.setdefault(r, {})[kk] = d
    delayed_seqs = sorted({kk for _, kk in delays})

    # clock offsets per host
    max_off = ms_text_to_ns(a.max_offset_ms)
    rng = random.Random("%d:offsets" % a.seed)
    n_hosts = (n + a.hosts_of - 1) // a.hosts_of
    host_off = [0] + [rng.randint(-max_off, max_off) for _ in range(n_hosts - 1)]
    offsets = [host_off[r // a.hosts_of] for r in range(n)]

    # per-instance max over ranks of (jitter + delay) and of end jitter
    max_arrive = [0] * k_total
    max_ej = [0] * k_total
    at_delayed = {kk: [0] * n for kk in delayed_seqs}   # jitter + delay of every rank
    for r in range(n):
        j, e = rank_jitters(a.seed, r, k_total, a.jitter_ns, a.end_jitter_ns)
        dr = delays_by_rank.get(r)
        if dr:
            for kk, d in dr.items():
                j[kk] += d
        for kk in delayed_seqs:
            at_delayed[kk][r] = j[kk]
        max_arrive = list(map(max, max_arrive, j))
        max_ej = list(map(max, max_ej, e))

    # device properties: the source's, extended to hosts_of devices
    props = list(header["deviceProperties"])
    if props:
        ids = {p.get("id") for p in props}
        for i in range(a.hosts_of):
            if i not in ids:
                p = dict(props[0])
                p["id"] = i
                props.append(p)
        props.sort(key=lambda p: p.get("id", 0))
    base = header["baseTimeNanoseconds"]
    cfg = {
        "ranks": n, "hosts_of": a.hosts_of, "seed": a.seed, "instances": k_total, "steps": steps,
        "jitter_ns": a.jitter_ns, "end_jitter_ns": a.end_jitter_ns, "offsets": offsets,
        "delays_by_rank": delays_by_rank, "max_arrive": max_arrive, "max_end_jitter": max_ej,
        "flows": not a.no_flows, "ktable": ktable, "tsteps": tsteps, "first_step": first_step,
        "origin_ns": tsteps[0]["first_ns"], "pg_ranks": pg_ranks_text(n, a.full_pg_ranks),
        "device_props": props, "base_time_ns": int(base) if base is not None else 0,
        "cpu_pid_base": 100000, "gzip_level": a.gzip_level, "out": a.out,
    }
    os.makedirs(a.out, exist_ok=True)
    results = []
    if a.jobs <= 1 or n == 1:
        init_worker(cfg)
        results = [write_rank(r) for r in range(n)]
    else:
        try:
            ctx = multiprocessing.get_context("fork")
        except ValueError:
            ctx = multiprocessing.get_context()
        with ctx.Pool(min(a.jobs, n), initializer=init_worker, initargs=(cfg,)) as pool:
            results = list(pool.imap_unordered(write_rank, range(n), chunksize=1))
    results.sort()
    kern_per_rank = results[0][2]
    assert all(r[2] == kern_per_rank and r[3] == k_total for r in results)

    # ground truth
    kinds = {}
    for kd in inst_kind:
        kinds[kd] = kinds.get(kd, 0) + 1
    gt_delays = [{"rank": r, "seq": kk, "delay_ns": d, "kind": inst_kind[kk], "step": inst_step[kk]}
                 for (r, kk), d in sorted(delays.items(), key=lambda x: (x[0][1], x[0][0]))]
    expected = []
    for kk in delayed_seqs:
        v = at_delayed[kk]
        mx = max(v)
        last = v.index(mx)          # ties: lowest rank
        expected.append({"seq": kk, "last_rank": last, "kind": inst_kind[kk], "step": inst_step[kk],
                         "wait_ns": {str(r): mx - v[r] for r in range(n) if r != last}})
    gt = {
        "ranks": n, "instances": k_total, "hosts_of": a.hosts_of,
        "offset_ns": {str(r): offsets[r] - offsets[0] for r in range(n)},
        "delays": gt_delays,
        "expected": expected,
        "source": a.source,
        "args": vars(a),
        "steps": steps, "first_step": first_step,
        "collectives_per_step": per_step, "kinds": kinds,
        "kernels_per_rank": kern_per_rank,
        "files": ["rank%d.pt.trace.json.gz" % r for r in range(n)],
    }
    with open(os.path.join(a.out, "ground_truth.json"), "w") as f:
        json.dump(gt, f, indent=1)
        f.write("\n")
    total = sum(r[1] for r in results)
    print("gen_collectives: ranks=%d instances=%d steps=%d kernels/rank=%d delays=%d bytes=%d (%.1f MiB gz) "
          "seconds=%.1f out=%s" % (n, k_total, steps, kern_per_rank, len(delays), total, total / 1048576,
                                   time.perf_counter() - t0, a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
