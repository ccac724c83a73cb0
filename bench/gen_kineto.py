#!/usr/bin/env python3
"""Deterministic Kineto trace scaler for benchmarks.

Scales a real PyTorch/Kineto trace to a target size by replicating its
profiler steps with shifted timestamps.  No randomness: the same source,
size and options always give byte-identical output.

What a replica k (k = 0 .. R-1) changes, at the text level, per event:
  * "ts"                : + k * (span + gap), integer-ns arithmetic, written
                          back as decimal microseconds with exactly 3 decimals
  * "ProfilerStep#N"    : N + k * nsteps (CPU user_annotation and GPU
                          gpu_user_annotation alike), so steps stay unique and
                          increasing
  * "correlation": N    : + k * ID_OFF
  * "External id": N    : + k * ID_OFF
  * "id": N (flows s/f) : + k * ID_OFF
ID_OFF = max(all correlation, External id and flow ids) + 1.  One shared
offset is used on purpose: Kineto's ac2g flow ids equal the correlation ids
of the runtime call / kernel they link, and that equality must survive.
Every other byte of an event (dur, args, whitespace, key order) is copied
verbatim from the source.

Layout of the output:
  * the header (everything up to and including `"traceEvents": [`) once,
    byte for byte (metadata keys incl. baseTimeNanoseconds, distributedInfo);
  * for each replica, all non-metadata events (ph != "M") in source order
    (this includes the "Trace" span and the ph "i" instants, shifted);
  * the ph "M" metadata events (process/thread names, sort indices) ONCE,
    unshifted, at the end of traceEvents;
  * the source trailer (`]`, trailing keys such as traceName, `}`) verbatim.

With --array the output is a generic Chrome trace instead: the same events as a bare JSON
array (`[` ... `]`), without the source's header and trailer keys, so that aorta reads it
with its Chrome reader (steps then need `--step-marker 'ProfilerStep#(\\d+)'`).

Size: --size-mb is in MiB (1 MiB = 1048576 bytes).  Replicas are added while
that brings the output closer to the target (unless --replicas is given).

Usage:
  python3 bench/gen_kineto.py [--mix fsdp2|rocm | --source SRC.json[.gz]] \
      --size-mb 1024 --out OUT.json [--gzip] [--gzip-level 6] [--gap-us 1000] [--array]
"""

import os
import argparse
import gzip
import json
import re
import sys
import time

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")

# The event mixes the benchmark covers (`--mix`), each a real corpus trace:
#   fsdp2: PyTorch 2.11 CUDA profile of FSDP2 on 2xH200 (rank 0): long CPU op trees with
#          shapes, GEMM and NCCL kernels, GPU-side step annotations;
#   rocm:  PyTorch profile of an MI350X through the rocprofiler-sdk Kineto backend: HIP
#          runtime calls, kernels without `External id`, no GPU-side step annotations, short
#          steps (a step span every ~140 events, against ~5,900 in fsdp2).
MIXES = {
    "fsdp2": os.path.join(CORPUS, "kineto", "cuda", "h200_fsdp2", "rank0.pt.trace.json.gz"),
    "rocm": os.path.join(CORPUS, "kineto", "rocm", "mi350x_aorta", "smci350_200691.pt.trace.json"),
}
DEFAULT_SOURCE = MIXES["fsdp2"]

# One pass over an event's text picks out every field that changes per replica.
FIELD_RE = re.compile(
    r'(?P<tsk>"ts":\s*)(?P<ts>-?\d+(?:\.\d+)?)'
    r'|(?P<stepk>ProfilerStep#)(?P<step>\d+)'
    r'|(?P<idk>"(?:correlation|External id|id)":\s*)(?P<id>\d+)'
)

TS, STEP, ID = 0, 1, 2


def parse_ts_ns(text):
    """'4464418948386.134' -> 4464418948386134 (exact, no float)."""
    neg = text.startswith("-")
    if neg:
        text = text[1:]
    if "." in text:
        ip, fp = text.split(".", 1)
    else:
        ip, fp = text, ""
    if len(fp) > 3:
        raise ValueError(f"ts with more than 3 decimals: {text!r}")
    v = int(ip) * 1000 + int((fp + "000")[:3])
    return -v if neg else v


def fmt_ts_ns(v):
    neg = v < 0
    q, r = divmod(-v if neg else v, 1000)
    return f"{'-' if neg else ''}{q}.{r:03d}"


def read_source(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def split_events(text):
    """Return (header, [event_text, ...], [parsed_event, ...], sep, trailer).

    header ends right after the '[' of traceEvents; each event text is the
    exact source slice of one event object; trailer starts right after the
    last event ('\\n  ],\\n  "traceName": ...}')."""
    m = re.search(r'"traceEvents"\s*:\s*\[', text)
    if not m:
        raise SystemExit("source has no traceEvents array")
    header = text[: m.end()]
    dec = json.JSONDecoder()
    ws = re.compile(r"\s*")
    comma = re.compile(r"\s*,")
    pos = m.end()
    texts, objs, lead = [], [], []
    while True:
        k = ws.match(text, pos).end()
        if text[k] == "]":
            trailer_start = pos
            break
        obj, end = dec.raw_decode(text, k)
        lead.append(text[pos:k])
        texts.append(text[k:end])
        objs.append(obj)
        pos = end
        c = comma.match(text, pos)
        if c:
            pos = c.end()
    first_lead = lead[0] if lead else "\n  "
    # Separator between two events, as the source writes it (",\n  ").
    sep = "," + (lead[1] if len(lead) > 1 else first_lead)
    return header + first_lead, texts, objs, sep, text[trailer_start:]


def compile_template(event_texts):
    """Concatenate events into one template: literals[i] then field[i] ..."""
    literals, kinds, bases = [], [], []
    cur = []
    for t in event_texts:
        pos = 0
        for m in FIELD_RE.finditer(t):
            if m.group("tsk") is not None:
                cur.append(t[pos : m.end("tsk")])
                kinds.append(TS)
                bases.append(parse_ts_ns(m.group("ts")))
            elif m.group("stepk") is not None:
                cur.append(t[pos : m.end("stepk")])
                kinds.append(STEP)
                bases.append(int(m.group("step")))
            else:
                cur.append(t[pos : m.end("idk")])
                kinds.append(ID)
                bases.append(int(m.group("id")))
            literals.append("".join(cur))
            cur = []
            pos = m.end()
        cur.append(t[pos:])
        cur.append("\x00SEP\x00")  # placeholder, replaced below
    tail = "".join(cur)
    return literals, kinds, bases, tail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mix", choices=sorted(MIXES), default="fsdp2",
                    help="which corpus trace to scale (default fsdp2; see MIXES)")
    ap.add_argument("--source", default=None,
                    help="scale this trace instead of --mix's")
    ap.add_argument("--size-mb", type=float, default=1024.0,
                    help="target size in MiB (default 1024)")
    ap.add_argument("--replicas", type=int, default=None,
                    help="exact replica count (overrides --size-mb)")
    ap.add_argument("--gap-us", type=int, default=1000,
                    help="idle gap between replicas in microseconds (default 1000)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--gzip", action="store_true",
                    help="also write OUT.gz (same bytes, gzip)")
    ap.add_argument("--gzip-level", type=int, default=6)
    ap.add_argument("--array", action="store_true",
                    help="write a generic Chrome trace: the events as a bare JSON array")
    a = ap.parse_args()

    t0 = time.perf_counter()
    text = read_source(a.source or MIXES[a.mix])
    header, ev_texts, ev_objs, sep, trailer = split_events(text)

    body_idx = [i for i, o in enumerate(ev_objs) if o.get("ph") != "M"]
    meta_idx = [i for i, o in enumerate(ev_objs) if o.get("ph") == "M"]

    # Verify that the text-level field finder agrees with the JSON parse.
    for i, o in enumerate(ev_objs):
        t = ev_texts[i]
        n_ts = len(re.findall(r'"ts":', t))
        n_id = len(re.findall(r'"id":', t))
        if n_ts != (1 if "ts" in o else 0):
            raise SystemExit(f"event {i}: unexpected ts text {t[:200]!r}")
        if n_id and o.get("ph") not in ("s", "f", "t"):
            raise SystemExit(f"event {i}: 'id' outside a flow event: {t[:200]!r}")

    # Source statistics (integer ns).
    starts, ends, ids, steps = [], [], [], []
    # exact: ts/dur are re-read from each event's text, never via float
    dur_re = re.compile(r'"dur":\s*(-?\d+(?:\.\d+)?)')
    ts_re = re.compile(r'"ts":\s*(-?\d+(?:\.\d+)?)')
    for i, o in enumerate(ev_objs):
        t = ev_texts[i]
        m = ts_re.search(t)
        if not m:
            continue
        s = parse_ts_ns(m.group(1))
        d = dur_re.search(t)
        e = s + (parse_ts_ns(d.group(1)) if d else 0)
        starts.append(s)
        ends.append(max(s, e))
        a_ = o.get("args") or {}
        for key in ("correlation", "External id"):
            if isinstance(a_.get(key), int):
                ids.append(a_[key])
        if o.get("ph") in ("s", "f", "t") and isinstance(o.get("id"), int):
            ids.append(o["id"])
        nm = o.get("name")
        if isinstance(nm, str) and nm.startswith("ProfilerStep#"):
            steps.append(int(nm[len("ProfilerStep#"):]))
    span_ns = max(ends) - min(starts)
    shift_ns = span_ns + a.gap_us * 1000
    id_off = max(ids) + 1 if ids else 0
    step_min, step_max = (min(steps), max(steps)) if steps else (0, -1)
    nsteps = step_max - step_min + 1 if steps else 0

    literals, kinds, bases, tail = compile_template([ev_texts[i] for i in body_idx])
    # Event boundaries inside the template carry the source separator; the
    # template's tail ends with one marker after the last event: drop it
    # (replicas are joined with `sep` by the writer).
    assert tail.endswith("\x00SEP\x00")
    tail = tail[: -len("\x00SEP\x00")].replace("\x00SEP\x00", sep)
    literals = [l.replace("\x00SEP\x00", sep) for l in literals]
    meta_text = sep.join(ev_texts[i] for i in meta_idx)

    def replica_text(k):
        dts, did, dst = k * shift_ns, k * id_off, k * nsteps
        parts = []
        app = parts.append
        for lit, kind, base in zip(literals, kinds, bases):
            app(lit)
            if kind == TS:
                q, r = divmod(base + dts, 1000)
                app(f"{q}.{r:03d}")
            elif kind == ID:
                app(str(base + did))
            else:
                app(str(base + dst))
        app(tail)
        return "".join(parts)

    # Counts in the source (non-metadata events are replicated, M events once).
    n_body = len(body_idx)
    n_meta = len(meta_idx)
    n_kernel_body = sum(1 for i in body_idx if ev_objs[i].get("cat") == "kernel")
    n_kernel_meta = sum(1 for i in meta_idx if ev_objs[i].get("cat") == "kernel")
    n_step_cpu = sum(1 for i in body_idx
                     if ev_objs[i].get("cat") == "user_annotation"
                     and str(ev_objs[i].get("name", "")).startswith("ProfilerStep#"))
    n_step_gpu = sum(1 for i in body_idx
                     if ev_objs[i].get("cat") == "gpu_user_annotation"
                     and str(ev_objs[i].get("name", "")).startswith("ProfilerStep#"))

    if a.array:
        header, trailer = "[\n", "\n]\n"
    head_b = header.encode()
    sep_b = sep.encode()
    tail_b = ((sep + meta_text if meta_idx else "") + trailer).encode()
    target = int(a.size_mb * 1048576)

    out = open(a.out, "wb")
    gz = gzip.open(a.out + ".gz", "wb", compresslevel=a.gzip_level) if a.gzip else None

    def emit(b):
        out.write(b)
        if gz is not None:
            gz.write(b)

    emit(head_b)
    written = len(head_b)
    k = 0
    while True:
        if a.replicas is not None and k >= max(1, a.replicas):
            break
        rb = replica_text(k).encode()
        if k > 0:
            rb = sep_b + rb
        if a.replicas is None and k > 0:
            # stop when adding this replica moves us further from the target
            if abs(written + len(rb) + len(tail_b) - target) >= abs(written + len(tail_b) - target):
                break
        emit(rb)
        written += len(rb)
        k += 1
    emit(tail_b)
    written += len(tail_b)
    out.close()
    if gz is not None:
        gz.close()
    R = k
    elapsed = time.perf_counter() - t0

    events = n_body * R + n_meta
    print(f"wrote {a.out}: events={events} replicas={R} bytes={written} "
          f"({written / 1048576:.1f} MiB) elapsed_s={elapsed:.1f}"
          + (f" (+ {a.out}.gz, gzip level {a.gzip_level})" if gz is not None else ""))
    print(
        "expected: "
        f"events={events} "
        f"kernel_events={n_kernel_body * R + n_kernel_meta} "
        f"profiler_step_cpu_spans={n_step_cpu * R} "
        f"profiler_step_gpu_spans={n_step_gpu * R} "
        f"(source: events={n_body + n_meta} metadata_M={n_meta} kernel={n_kernel_body} "
        f"step_cpu={n_step_cpu} step_gpu={n_step_gpu} steps=#{step_min}..#{step_max}; "
        f"span_ns={span_ns} shift_ns={shift_ns} id_offset={id_off} step_offset={nsteps}; "
        f"output steps=#{step_min}..#{step_min + nsteps * R - 1})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
