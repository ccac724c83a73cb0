//! Chrome events to rows: `X` slices and instants at once, on the worker that parsed them;
//! `B`/`E` edges kept in file order and paired in `Pairs::take`, the driver's one sequential
//! step, so a pair split across two windows (or two workers) still meets.

use rustc_hash::FxHashMap;

use super::steps;
use crate::classify::{Category, Classifier, Kind};
use crate::diag::Diagnostics;
use crate::kineto::links::Links;
use crate::rows::{Batch, CpuCategory, CpuRow, GpuRow, StepSource};
use crate::trace_event::{self, pid_key, Cat, Ev};

/// Phases that are valid trace events but not slices (flows, counters, async, objects…).
const OTHER_PHASES: &[&[u8]] = &[
    b"s", b"t", b"f", b"M", b"C", b"b", b"n", b"e", b"S", b"T", b"p", b"F", b"N", b"O", b"D", b"P",
    b"R", b"(", b")",
];

/// The `args` a GPU slice may carry (Kineto's names, which other writers copy).
const GPU_ARGS: [&[u8]; 8] = [
    b"device",
    b"stream",
    b"correlation",
    b"External id",
    b"external id",
    b"grid",
    b"block",
    b"bytes",
];

/// The ids a CPU slice may carry.
const CPU_ARGS: [&[u8]; 2] = [b"correlation", b"External id"];

/// Which table a slice goes to, with the `args` it needs there.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Cpu {
        category: CpuCategory,
        correlation: Option<i64>,
        external_id: Option<i64>,
    },
    Gpu {
        kind: Kind,
        device: i64,
        stream: i64,
        correlation: Option<i64>,
        external_id: Option<i64>,
        grid: [Option<i64>; 3],
        block: [Option<i64>; 3],
        bytes: Option<i64>,
    },
    /// `gpu_user_annotation`: GPU-side copies of CPU annotations; counted, not written.
    Skip,
}

/// A slice with its times resolved, ready to become a row.
pub(crate) struct Slice<'s> {
    pub name: &'s str,
    pub target: Target,
    pub pid: Option<i64>,
    /// The process as step spans are keyed (`trace_event::pid_key`).
    pub pid_key: i64,
    pub tid: Option<i64>,
    pub start: i64,
    pub raw_end: i64,
    pub off: u64,
}

/// An open `B`, waiting for its `E`.
#[derive(Debug, Clone)]
pub(crate) struct Open {
    pub name: String,
    pub target: Target,
    pub pid: Option<i64>,
    pub pid_key: i64,
    pub tid: Option<i64>,
    pub ts: Option<i64>,
    pub off: u64,
}

/// A `B` or `E`, in file order.
pub(crate) enum Edge {
    Begin((i64, i64), Box<Open>),
    End {
        thread: (i64, i64),
        ts: Option<i64>,
        off: u64,
    },
}

/// What one worker produced from a run of events.
#[derive(Default)]
pub(crate) struct Part {
    pub batch: Batch,
    pub edges: Vec<Edge>,
}

/// The first Kineto category in a (comma-separated) `cat`, as a table and its `args`.
pub(crate) fn target(ev: &Ev) -> Target {
    let cat = ev
        .cat
        .split(|&b| b == b',')
        .map(|c| Cat::of(c.trim_ascii()))
        .find(|c| *c != Cat::Other)
        .unwrap_or(Cat::Other);
    let category = match cat {
        Cat::Kernel | Cat::Memcpy | Cat::Memset => return gpu_target(ev, cat),
        Cat::GpuUserAnnotation => return Target::Skip,
        Cat::UserAnnotation => CpuCategory::UserAnnotation,
        Cat::Runtime => CpuCategory::Runtime,
        Cat::Driver => CpuCategory::Driver,
        Cat::PythonFunction => CpuCategory::PythonFunction,
        Cat::CpuOp | Cat::Other => CpuCategory::CpuOp,
    };
    let [corr, ext] = ev
        .args
        .map(|a| trace_event::pick(a, &CPU_ARGS))
        .unwrap_or_default();
    Target::Cpu {
        category,
        correlation: corr.and_then(trace_event::int),
        external_id: ext.and_then(trace_event::int),
    }
}

/// A GPU slice: device from `args.device` else `pid`, stream from `args.stream` else `tid`.
fn gpu_target(ev: &Ev, cat: Cat) -> Target {
    let a = ev
        .args
        .map(|a| trace_event::pick(a, &GPU_ARGS))
        .unwrap_or_default();
    let kind = match cat {
        Cat::Memcpy => Kind::Memcpy,
        Cat::Memset => Kind::Memset,
        _ => Kind::Kernel,
    };
    Target::Gpu {
        kind,
        device: a[0]
            .and_then(trace_event::int)
            .or_else(|| ev.pid.and_then(trace_event::int))
            .unwrap_or(0),
        stream: a[1]
            .and_then(trace_event::int)
            .or_else(|| ev.tid.and_then(stream_from_tid))
            .unwrap_or(0),
        correlation: a[2].and_then(trace_event::int),
        external_id: a[3].or(a[4]).and_then(trace_event::int),
        grid: a[5].map(trace_event::dim3).unwrap_or_default(),
        block: a[6].map(trace_event::dim3).unwrap_or_default(),
        bytes: a[7].and_then(trace_event::int),
    }
}

/// A GPU stream from a `tid`: `7`, `"7"`, or `"stream 7"`.
fn stream_from_tid(tid: &[u8]) -> Option<i64> {
    trace_event::int(tid).or_else(|| {
        let t = trace_event::text(tid)?;
        t.trim().strip_prefix("stream")?.trim().parse().ok()
    })
}

/// An event's name as text (empty when missing).
pub(crate) fn name(ev: &Ev) -> String {
    ev.name
        .and_then(trace_event::text)
        .unwrap_or_default()
        .into_owned()
}

/// The thread a `B`/`E` belongs to: (pid, tid), string ids hashed.
pub(crate) fn thread(ev: &Ev) -> (i64, i64) {
    (pid_key(ev.pid), pid_key(ev.tid))
}

/// Reads one parsed event into `part`: rows for `X` and instants (with their steps when
/// `links` has them), edges for `B`/`E`.
pub(crate) fn event(ev: &Ev, part: &mut Part, off: u64, links: Option<&Links>) {
    let diag = &mut part.batch.diag;
    let at = Some(off as i64);
    match ev.ph {
        b"X" => {
            let Some(ts) = timestamp(ev, diag, at) else {
                return;
            };
            let dur = duration(ev, diag, at);
            let Some(end) = ts.checked_add(dur) else {
                diag.add("time_overflow", at, || format!("ts {ts} ns + dur {dur} ns"));
                return;
            };
            let n = name(ev);
            let slice = slice(ev, &n, ts, end, off);
            push(&mut part.batch, slice, links);
        }
        b"i" | b"I" => {
            let Some(ts) = timestamp(ev, diag, at) else {
                return;
            };
            let n = name(ev);
            let mut s = slice(ev, &n, ts, ts, off);
            // An instant is a point on a CPU thread, whatever its category.
            if !matches!(s.target, Target::Cpu { .. }) {
                s.target = Target::Cpu {
                    category: CpuCategory::CpuOp,
                    correlation: None,
                    external_id: None,
                };
            }
            push(&mut part.batch, s, links);
        }
        b"B" => {
            let open = Open {
                name: name(ev),
                target: target(ev),
                pid: ev.pid.and_then(trace_event::int),
                pid_key: pid_key(ev.pid),
                tid: ev.tid.and_then(trace_event::int),
                ts: ev.ts.and_then(trace_event::micros),
                off,
            };
            part.edges.push(Edge::Begin(thread(ev), Box::new(open)));
        }
        b"E" => part.edges.push(Edge::End {
            thread: thread(ev),
            ts: ev.ts.and_then(trace_event::micros),
            off,
        }),
        ph if OTHER_PHASES.contains(&ph) => {}
        ph => diag.add("unknown_phase", at, || {
            format!("ph \"{}\"", String::from_utf8_lossy(ph))
        }),
    }
}

fn slice<'s>(ev: &Ev, name: &'s str, start: i64, raw_end: i64, off: u64) -> Slice<'s> {
    Slice {
        name,
        target: target(ev),
        pid: ev.pid.and_then(trace_event::int),
        pid_key: pid_key(ev.pid),
        tid: ev.tid.and_then(trace_event::int),
        start,
        raw_end,
        off,
    }
}

fn timestamp(ev: &Ev, diag: &mut Diagnostics, at: Option<i64>) -> Option<i64> {
    let ts = ev.ts.and_then(trace_event::micros);
    if ts.is_none() {
        diag.add("missing_timestamp", at, || {
            "slice without a usable ts".into()
        });
    }
    ts
}

/// `dur` in ns; 0 (with a finding) when missing or unreadable.
fn duration(ev: &Ev, diag: &mut Diagnostics, at: Option<i64>) -> i64 {
    match ev.dur.map(trace_event::micros) {
        Some(Some(d)) => d,
        Some(None) => {
            let raw = String::from_utf8_lossy(ev.dur.unwrap_or_default()).into_owned();
            diag.add("unparsable_value", at, || format!("dur {raw}"));
            0
        }
        None => {
            diag.add("missing_duration", at, || "X slice without dur".into());
            0
        }
    }
}

/// Appends a slice's row to `b` (classified later, by `classify`), with its step when
/// `links` has them (`--step-marker`, `steps`).
pub(crate) fn push(b: &mut Batch, s: Slice, links: Option<&Links>) {
    let at = Some(s.off as i64);
    if s.raw_end < s.start {
        let d = s.raw_end - s.start;
        b.diag
            .add("negative_duration", at, || format!("{}: {d} ns", s.name));
    }
    let end = s.raw_end.max(s.start);
    let name = b.strings.id(s.name);
    match s.target {
        Target::Skip => b.diag.add("skipped_category", at, || {
            format!("gpu_user_annotation {}", s.name)
        }),
        Target::Cpu {
            category,
            correlation,
            external_id,
        } => b.cpu.push(CpuRow {
            category,
            name,
            pid: s.pid,
            tid: s.tid,
            start: s.start,
            end,
            correlation,
            external_id,
            step: links
                .and_then(|l| steps::cpu_step(l, s.pid_key, s.start, &mut b.diag, s.off, s.name)),
            input_dims: None,
            input_types: None,
            concrete_inputs: None,
            input_strides: None,
        }),
        Target::Gpu { correlation, .. } => {
            let step = match links {
                Some(l) => steps::gpu_step(l, correlation, s.start, &mut b.diag, s.off, s.name),
                None => (None, StepSource::None),
            };
            b.gpu
                .push(gpu_row(s.target, name, (s.start, end, s.raw_end), step))
        }
    }
}

fn gpu_row(
    t: Target,
    name: u32,
    (start, end, raw_end): (i64, i64, i64),
    (step, step_source): (Option<i64>, StepSource),
) -> GpuRow {
    let Target::Gpu {
        kind,
        device,
        stream,
        correlation,
        external_id,
        grid,
        block,
        bytes,
    } = t
    else {
        unreachable!("called for GPU targets only")
    };
    GpuRow {
        device,
        stream,
        kind,
        name,
        // Classified by `classify` once the batch is complete (one lookup per name).
        category: Category::OtherCompute,
        comm_op: None,
        start,
        end,
        raw_end,
        correlation,
        external_id,
        step,
        step_source,
        grid,
        block,
        bytes,
        coll: None,
    }
}

/// Sets the category (and collective kind) of every GPU row of `b`.
pub(crate) fn classify(b: &mut Batch, classifier: &Classifier) {
    let mut seen = FxHashMap::default();
    for r in &mut b.gpu {
        let (category, op) = *seen
            .entry((r.name, r.kind))
            .or_insert_with(|| classifier.classify(r.kind, b.strings.get(r.name)));
        r.category = category;
        r.comm_op = (category == Category::Comm).then(|| op.unwrap_or("other"));
    }
}

/// Open `B`s per thread, across the whole file.
#[derive(Default)]
pub(crate) struct Pairs {
    open: FxHashMap<(i64, i64), Vec<Open>>,
}

impl Pairs {
    /// Pairs `part`'s edges in order, adding the finished slices to its batch.
    pub(crate) fn take(&mut self, part: &mut Part, links: Option<&Links>) {
        for edge in part.edges.drain(..) {
            match edge {
                Edge::Begin(thread, open) => self.open.entry(thread).or_default().push(*open),
                Edge::End { thread, ts, off } => {
                    let b = &mut part.batch;
                    match self.open.get_mut(&thread).and_then(Vec::pop) {
                        None => b.diag.add("unmatched_end", Some(off as i64), || {
                            format!("E on pid/tid {thread:?} with no open B")
                        }),
                        Some(open) => close(b, open, ts, off, links),
                    }
                }
            }
        }
    }

    /// The `B`s never closed: counted (first one as the example), not written.
    pub(crate) fn finish(self, diag: &mut Diagnostics) {
        let mut left: Vec<Open> = self.open.into_values().flatten().collect();
        left.sort_by_key(|o| o.off);
        if let Some(first) = left.first() {
            let n = left.len() as u64;
            diag.add_n("unmatched_begin", n, Some(first.off as i64), || {
                format!("{} (B with no E)", first.name)
            });
        }
    }
}

/// The row of a matched pair.
fn close(b: &mut Batch, open: Open, end_ts: Option<i64>, off: u64, links: Option<&Links>) {
    let (Some(start), Some(end)) = (open.ts, end_ts) else {
        b.diag.add("missing_timestamp", Some(off as i64), || {
            format!("{}: B or E without a usable ts", open.name)
        });
        return;
    };
    let s = Slice {
        name: &open.name,
        target: open.target.clone(),
        pid: open.pid,
        pid_key: open.pid_key,
        tid: open.tid,
        start,
        raw_end: end,
        off: open.off,
    };
    push(b, s, links);
}
