//! Events to rows in one walk that also notes the step spans and launches.
//!
//! Times stay trace-relative and steps stay open here: the base time, the spans and the
//! launches may all come later in the file, so `pending` settles them at its end. GPU rows
//! leave here unclassified (`Category::OtherCompute`, no collective kind): the spill thread
//! classifies each name once (`pending::Spill::add`), so that the walk never waits for the
//! rule table to compile (`classify::sets`).
//!
//! Where the CPU goes per event (issue 33): `args` are picked in the order Kineto writes
//! them (`*_USUAL`, `trace_event::pick_usual`), and a CPU row's four shape texts are first
//! compared with those the last row of its name had (`Part::shape_hints`): about two thirds
//! match, and a match is neither scanned for its end nor hashed and looked up.

use super::links::{note, Partial};
use super::memory::{self, MemEvent};
use super::pending::{CpuWait, Waits};
use crate::classify::{Category, Kind};
use crate::json::layout::Layouts;
use crate::json::{Cursor, JsonError};
use crate::rows::{Batch, CollArgs, CpuCategory, CpuRow, GpuRow, StepSource};
use crate::step_span::{Span, StepMarker};
use crate::trace_event::{self, pid_key, Cat, Ev, Usual};

/// The args of a kernel in the order Kineto writes them.
static GPU_USUAL: Usual<13> = trace_event::usual(
    &GPU_ARGS,
    [
        b"External id",
        b"queued",
        b"device",
        b"context",
        b"stream",
        b"correlation",
        b"registers per thread",
        b"shared memory",
        b"blocks per SM",
        b"warps per SM",
        b"grid",
        b"block",
        b"est. achieved occupancy %",
    ],
);

/// The args of a copy or memset after its `stream` and `correlation`.
static COPY_USUAL: Usual<7> = trace_event::usual(
    &GPU_ARGS,
    [
        b"External id",
        b"device",
        b"context",
        b"stream",
        b"correlation",
        b"bytes",
        b"memory bandwidth (GB/s)",
    ],
);

/// The args of a CPU op in the order Kineto writes them (a runtime call has
/// `External id`, `cbid`, `correlation`; an op with autograd `Sequence number` and
/// `Fwd thread id` after its `External id`).
static CPU_USUAL: Usual<7> = trace_event::usual(
    &CPU_ARGS,
    [
        b"External id",
        b"Record function id",
        b"Concrete Inputs",
        b"Input type",
        b"Input Strides",
        b"Input Dims",
        b"Ev Idx",
    ],
);

static RUNTIME_USUAL: Usual<3> =
    trace_event::usual(&CPU_ARGS, [b"External id", b"cbid", b"correlation"]);

/// What every worker shares.
pub(crate) struct Ctx<'a> {
    pub step_marker: &'a StepMarker,
}

/// Phases that are valid trace events but not slices aorta tabulates.
const OTHER_PHASES: &[&[u8]] = &[
    b"i", b"I", b"s", b"t", b"f", b"M", b"C", b"b", b"n", b"e", b"S", b"T", b"p", b"F", b"N", b"O",
    b"D", b"P", b"R", b"(", b")",
];

const GPU_ARGS: [&[u8]; 22] = [
    b"device",
    b"stream",
    b"correlation",
    b"External id",
    b"external id",
    b"grid",
    b"block",
    b"bytes",
    b"Collective name",
    b"In msg nelems",
    b"Out msg nelems",
    b"Group size",
    b"dtype",
    b"Process Group Name",
    b"Process Group Ranks",
    b"Seq",
    b"Comms Id",
    b"memory bandwidth (GB/s)",
    // The GEMM shape aorta's own workloads write on their kernels.
    b"m",
    b"n",
    b"k",
    // The iteration a tool wrote on the activity itself (aorta's own workloads do): the step
    // of a trace that has no `ProfilerStep#N` spans.
    b"step",
];

/// The args of CPU slices aorta keeps; the last four as the JSON text they were written as.
const CPU_ARGS: [&[u8]; 6] = [
    b"External id",
    b"correlation",
    b"Input Dims",
    b"Input type",
    b"Concrete Inputs",
    b"Input Strides",
];

/// What one worker accumulates: rows and what their steps wait for, the step spans and
/// launches it met.
#[derive(Default)]
pub(crate) struct Part {
    pub batch: Batch,
    pub waits: Waits,
    pub links: Partial,
    /// The allocator's `[memory]` events, in file order.
    pub memory: Vec<MemEvent>,
    /// By name id: the shape ids the last CPU row of that name had (`NO_SHAPE`: none, or
    /// not written in the canonical layout), the likely texts of the next one's shapes.
    shape_hints: Vec<[u32; 4]>,
    /// The members up to `cat` of the flows met (`trace_event::parse_if`).
    layouts: Layouts,
}

/// No shape hint (`Part::shape_hints`).
const NO_SHAPE: u32 = u32::MAX;

impl Part {
    /// A part for about `bytes` bytes of events, its row buffers sized for them (growing
    /// them row by row copied every row about once more: 2.5 % of the instructions).
    pub(crate) fn for_bytes(bytes: usize) -> Part {
        // The benchmark trace (a real FSDP2 profile) has a CPU row per ~540 bytes and a GPU
        // row per ~3,000; reserve a little more.
        let (cpu, gpu) = (bytes / 400, bytes / 2000);
        let mut p = Part::default();
        p.batch.cpu.reserve(cpu);
        p.batch.gpu.reserve(gpu);
        p.waits.cpu.reserve(cpu);
        p.waits.gpu.reserve(gpu);
        p
    }
}

struct Worker<'p, 'c, 'l> {
    ctx: &'c Ctx<'l>,
    b: &'p mut Batch,
    waits: &'p mut Waits,
    links: &'p mut Partial,
    memory: &'p mut Vec<MemEvent>,
    shape_hints: &'p mut Vec<[u32; 4]>,
    /// Stream offset of the event, for diagnostics.
    off: u64,
}

/// Reads the event at the cursor into `part`'s rows.
pub(crate) fn event(
    ctx: &Ctx,
    c: &mut Cursor<'_>,
    part: &mut Part,
    off: u64,
) -> Result<(), JsonError> {
    // Flows, metadata and instants other than the allocator's are counted, never read past
    // their `ph` and `cat` (a flow's members up to `cat` matched against an earlier flow's).
    let wanted = |ph: &[u8], cat: Option<&[u8]>| {
        ph == b"X" || cat.map_or(ph == b"i", |cat| memory::may_be(ph, cat))
    };
    let (ev, _) = trace_event::parse_if(c, wanted, Some(&mut part.layouts))?;
    let mut wk = Worker {
        ctx,
        b: &mut part.batch,
        waits: &mut part.waits,
        links: &mut part.links,
        memory: &mut part.memory,
        shape_hints: &mut part.shape_hints,
        off,
    };
    wk.event(&ev);
    Ok(())
}

impl Worker<'_, '_, '_> {
    /// Where the current event starts, for diagnostics.
    fn offset(&self) -> Option<i64> {
        Some(self.off as i64)
    }

    fn name(&mut self, ev: &Ev) -> u32 {
        // Most names repeat: look the raw bytes up first (no unescaping, no UTF-8 check).
        if let Some(id) = ev.name.and_then(trace_event::plain_string) {
            if let Some(id) = self.b.strings.find(id) {
                return id;
            }
        }
        let text = ev.name.and_then(trace_event::text);
        self.b.strings.id(text.as_deref().unwrap_or(""))
    }

    fn event(&mut self, ev: &Ev) {
        if ev.ph != b"X" {
            if ev.name == Some(memory::NAME) && memory::may_be(ev.ph, ev.cat) {
                self.memory_event(ev);
                return;
            }
            if !OTHER_PHASES.contains(&ev.ph) {
                let ph = String::from_utf8_lossy(ev.ph);
                self.b.diag.add("unknown_phase", self.offset(), || {
                    format!("ph \"{ph}\" (B/E pairs are read by the generic Chrome reader, for traces without Kineto markers)")
                });
            }
            return;
        }
        let cat = Cat::of(ev.cat);
        let cpu = match cat {
            Cat::Kernel | Cat::Memcpy | Cat::Memset => None,
            Cat::CpuOp => Some(CpuCategory::CpuOp),
            Cat::UserAnnotation => Some(CpuCategory::UserAnnotation),
            Cat::Runtime => Some(CpuCategory::Runtime),
            Cat::Driver => Some(CpuCategory::Driver),
            Cat::PythonFunction => Some(CpuCategory::PythonFunction),
            Cat::GpuUserAnnotation => {
                note(self.links, ev, self.ctx.step_marker, self.off);
                return;
            }
            Cat::Other => {
                self.b.diag.add("skipped_category", self.offset(), || {
                    let c = String::from_utf8_lossy(ev.cat);
                    format!("cat \"{c}\" (first of the skipped slices)")
                });
                return;
            }
        };
        let Some((start, raw_end)) = self.times(ev) else {
            return;
        };
        match cpu {
            None => self.gpu(ev, cat, start, raw_end),
            Some(c) => self.cpu(ev, c, start, raw_end),
        }
    }

    fn memory_event(&mut self, ev: &Ev) {
        match memory::read(ev) {
            Some(m) => self.memory.push(m),
            None => self.b.diag.add("missing_timestamp", self.offset(), || {
                "[memory] event without a usable ts".into()
            }),
        }
    }

    /// (start, start + dur) in trace ns, with the duration findings.
    fn times(&mut self, ev: &Ev) -> Option<(i64, i64)> {
        let off = self.offset();
        let Some(ts) = ev.ts.and_then(trace_event::micros) else {
            self.b.diag.add("missing_timestamp", off, || {
                "slice without a usable ts".into()
            });
            return None;
        };
        let dur = match ev.dur.map(trace_event::micros) {
            Some(Some(d)) => d,
            Some(None) => {
                self.b.diag.add("unparsable_value", off, || {
                    format!(
                        "dur {}",
                        String::from_utf8_lossy(ev.dur.unwrap_or_default())
                    )
                });
                0
            }
            None => {
                self.b
                    .diag
                    .add("missing_duration", off, || "X slice without dur".into());
                0
            }
        };
        if dur < 0 {
            self.b
                .diag
                .add("negative_duration", off, || format!("dur {dur} ns"));
        }
        let end = ts.checked_add(dur);
        if end.is_none() {
            self.b.diag.add("time_overflow", off, || {
                format!("ts {ts} ns + dur {dur} ns")
            });
        }
        Some((ts, end?))
    }

    fn gpu(&mut self, ev: &Ev, cat: Cat, start: i64, raw_end: i64) {
        let kind = match cat {
            Cat::Memcpy => Kind::Memcpy,
            Cat::Memset => Kind::Memset,
            _ => Kind::Kernel,
        };
        let usual: &[_] = match kind {
            Kind::Kernel => &GPU_USUAL,
            _ => &COPY_USUAL,
        };
        let a = ev
            .args
            .map(|a| trace_event::pick_usual(a, &GPU_ARGS, usual))
            .unwrap_or_default();
        let name = self.name(ev);
        let correlation = a[2].and_then(trace_event::int);
        let coll = self.coll_args(&a);
        // The step waits for the launches (see `pending`); until then `step` holds the
        // activity's own `args.step`, which `pending` keeps for a trace without step spans.
        let (step, step_source) = (a[21].and_then(trace_event::int), StepSource::None);
        self.waits.gpu.push(self.off);
        let stream = a[1]
            .and_then(trace_event::int)
            .or_else(|| ev.tid.and_then(stream_from_tid));
        self.b.gpu.push(GpuRow {
            device: a[0]
                .and_then(trace_event::int)
                .or_else(|| ev.pid.and_then(trace_event::int))
                .unwrap_or(0),
            stream: stream.unwrap_or(0),
            kind,
            name,
            // Classified by the spill thread (`pending::Spill::add`).
            category: Category::OtherCompute,
            comm_op: None,
            start,
            end: raw_end.max(start),
            raw_end,
            correlation,
            external_id: a[3].or(a[4]).and_then(trace_event::int),
            step,
            step_source,
            grid: a[5].map(trace_event::dim3).unwrap_or_default(),
            block: a[6].map(trace_event::dim3).unwrap_or_default(),
            bytes: a[7].and_then(trace_event::int),
            coll,
        });
    }

    fn coll_args(&mut self, a: &[Option<&[u8]>; GPU_ARGS.len()]) -> Option<Box<CollArgs>> {
        if a[8..17].iter().chain(&a[18..21]).all(Option::is_none) {
            return None;
        }
        let mut s = |v: Option<&[u8]>| v.and_then(trace_event::text).map(|t| self.b.strings.id(&t));
        Some(Box::new(CollArgs {
            collective_name: s(a[8]),
            dtype: s(a[12]),
            process_group: s(a[13]),
            process_group_ranks: s(a[14]),
            // An integer id is kept as its decimal text, as written.
            comms_id: s(a[16]),
            in_msg_nelems: a[9].and_then(trace_event::int),
            out_msg_nelems: a[10].and_then(trace_event::int),
            group_size: a[11].and_then(trace_event::int),
            collective_seq: a[15].and_then(trace_event::int),
            gemm: [18, 19, 20].map(|i| a[i].and_then(trace_event::int)),
        }))
    }

    fn cpu(&mut self, ev: &Ev, category: CpuCategory, start: i64, raw_end: i64) {
        let name = self.name(ev);
        let hints = self
            .shape_hints
            .get(name as usize)
            .copied()
            .unwrap_or([NO_SHAPE; 4]);
        let ([ext, corr, dims, types, concrete, strides], hit) = match (category, ev.args) {
            (CpuCategory::PythonFunction, _) | (_, None) => ([None; 6], 0),
            (CpuCategory::Runtime | CpuCategory::Driver, Some(a)) => {
                (trace_event::pick_usual(a, &CPU_ARGS, &RUNTIME_USUAL), 0)
            }
            (_, Some(a)) => {
                // A shape is likely the one the last row of this name had: found by its
                // bytes, it is neither scanned for its end nor looked up.
                let text = |i: usize| {
                    (hints[i] != NO_SHAPE).then(|| self.b.strings.get(hints[i]).as_bytes())
                };
                let hinted = [None, None, text(0), text(1), text(2), text(3)];
                trace_event::pick_hinted(a, &CPU_ARGS, &CPU_USUAL, &hinted)
            }
        };
        let pid = ev.pid.and_then(trace_event::int);
        // `pid_key`, without reading a numeric pid twice.
        let key = pid.unwrap_or_else(|| pid_key(ev.pid));
        let correlation = corr.and_then(trace_event::int);
        let end = raw_end.max(start);
        // A step annotation (`ProfilerStep#N`, or `--step-marker`) is its own step; other rows
        // wait for the spans.
        let step = match ev.name.and_then(|n| self.ctx.step_marker.step(n)) {
            Some(n) if category == CpuCategory::UserAnnotation => {
                let span = Span {
                    start,
                    end,
                    step: n,
                };
                self.links.cpu_span(key, span, self.off);
                Some(n)
            }
            _ => None,
        };
        if let (CpuCategory::Runtime | CpuCategory::Driver, Some(c)) = (category, correlation) {
            self.links.launch(c, start, key);
        }
        self.waits.cpu.push(CpuWait {
            pid_key: key,
            off: self.off,
        });
        // A shape seen before is found by its bytes, without checking them for UTF-8 again;
        // a new one is stored in the canonical layout whatever the trace's whitespace.
        let mut next_hints = [NO_SHAPE; 4];
        let mut shape = |k: usize, v: Option<&[u8]>| {
            if hit & (1 << (k + 2)) != 0 {
                next_hints[k] = hints[k];
                return Some(hints[k]);
            }
            let (id, as_written) = self.b.strings.shape_as_written(v?)?;
            if as_written {
                next_hints[k] = id;
            }
            Some(id)
        };
        let input_dims = shape(0, dims);
        let input_types = shape(1, types);
        let concrete_inputs = shape(2, concrete);
        let input_strides = shape(3, strides);
        if next_hints != hints {
            let at = name as usize;
            if self.shape_hints.len() <= at {
                self.shape_hints.resize(at + 1, [NO_SHAPE; 4]);
            }
            self.shape_hints[at] = next_hints;
        }
        self.b.cpu.push(CpuRow {
            category,
            name,
            pid,
            tid: ev.tid.and_then(trace_event::int),
            start,
            end,
            correlation,
            external_id: ext.and_then(trace_event::int),
            step,
            input_dims,
            input_types,
            concrete_inputs,
            input_strides,
        });
    }
}

/// A GPU stream from a `tid`: `7`, `"7"`, or legacy `"stream 7"`.
fn stream_from_tid(tid: &[u8]) -> Option<i64> {
    trace_event::int(tid).or_else(|| {
        let t = trace_event::text(tid)?;
        t.trim().strip_prefix("stream")?.trim().parse().ok()
    })
}
