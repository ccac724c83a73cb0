//! The temporal breakdown and the idle split (HTA's `get_temporal_breakdown` and
//! `get_idle_time_breakdown`).
//!
//! HTA computes the breakdown over a rank's kernels merged across all streams: the window is
//! the first kernel's start to the last one's end, idle is the window minus the union of
//! every kernel, compute the union of the compute kernels, non-compute the rest (time when
//! only communication, memcpy or memset runs). Ours is the same, with aorta's categories
//! (compute: gemm, attention, other_compute; non-compute: comm, memcpy, memset), per rank or
//! per step.
//!
//! HTA splits idle time *per stream*: each gap between two consecutive kernels of a stream is
//! host-wait when the next kernel's launch call started after the previous kernel ended
//! (nothing was queued), else kernel-wait when it is shorter than `consecutive_kernel_delay`,
//! else other. Per-stream gaps add up to more than the rank's idle time (one stream waits
//! while another runs), so our main split applies the same rule to the gaps of the merged
//! timeline, where it sums to the idle of the breakdown; HTA's per-stream split is kept as
//! well ([`Breakdown::streams`]).

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;

use super::{key_columns, pct, Act, By, Input, Key};
use crate::comm_split::union;
use crate::dataset::DatasetError;
use crate::sweep::{length, Class};

/// HTA's `consecutive_kernel_delay` default as HTA applies it: 30 µs. Its docs say 30 ns, but
/// HTA (0.5 included) reads Kineto's µs timestamps as they are, so its 30 is 30 µs in effect;
/// this default makes `aorta breakdown` reproduce HTA's idle split (docs/TOOLBOX.md).
pub const KERNEL_WAIT_NS: i64 = 30_000;

/// A kernel-wait threshold in words: `30 µs`, `30 ns`.
pub fn threshold_text(ns: i64) -> String {
    if ns != 0 && ns % 1_000 == 0 {
        format!("{} µs", ns / 1_000)
    } else {
        format!("{ns} ns")
    }
}

/// The kinds of idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Nothing was queued: the next activity's launch call started after the gap began.
    HostWait,
    /// Queued, and the gap is shorter than the threshold: launch overhead.
    KernelWait,
    /// Queued but blocked longer (an event, another stream), or the launch is unknown.
    Other,
}

/// The kind of the gap `[gap_start, next.start)`, by the activity that ends it.
pub(crate) fn classify(gap_start: i64, next: &Act, kernel_wait_ns: i64) -> Idle {
    if next.call.is_some_and(|c| c.start > gap_start) {
        Idle::HostWait
    } else if next.call.is_some() && next.start - gap_start < kernel_wait_ns {
        // Queued (its launch known, before the gap); an unknown launch is no evidence of it.
        Idle::KernelWait
    } else {
        Idle::Other
    }
}

/// Idle time by kind, and the number of gaps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    /// Gaps whose next activity's launch call started after the gap began: the host was late.
    pub host_wait_ns: i64,
    /// Gaps shorter than the kernel-wait threshold with the work already queued: launch overhead.
    pub kernel_wait_ns: i64,
    /// The other gaps: queued but blocked longer (an event, another stream), or launch unknown.
    pub other_ns: i64,
    /// Idle gaps counted in the window.
    pub gaps: i64,
}

impl Split {
    fn add(&mut self, kind: Idle, ns: i64) {
        self.gaps += 1;
        match kind {
            Idle::HostWait => self.host_wait_ns += ns,
            Idle::KernelWait => self.kernel_wait_ns += ns,
            Idle::Other => self.other_ns += ns,
        }
    }

    pub(crate) fn total(&self) -> i64 {
        self.host_wait_ns + self.kernel_wait_ns + self.other_ns
    }
}

/// One group's breakdown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Row {
    pub(crate) activities: i64,
    /// First start to last end.
    pub window_ns: i64,
    /// The union of every activity.
    pub(crate) busy_ns: i64,
    /// The union of the compute activities.
    pub compute_ns: i64,
    /// `busy − compute`: only non-compute activities run.
    pub non_compute_ns: i64,
    /// Of the non-compute time, when communication runs (the rest is memcpy/memset only).
    pub(crate) comm_ns: i64,
    /// `window − busy`.
    pub idle_ns: i64,
    /// `idle_ns` split by kind of gap (the three add up to `idle_ns`).
    pub idle: Split,
}

/// The breakdown of some runs.
pub struct Breakdown {
    /// Columns: `run`, `rank`, (`step`), `activities`, `window_ns`, `compute_ns`,
    /// `non_compute_ns`, `comm_only_ns`, `memory_only_ns`, `idle_ns`, `compute_pct`,
    /// `non_compute_pct`, `idle_pct` (of the window), `host_wait_ns`, `kernel_wait_ns`,
    /// `other_idle_ns`, `host_wait_pct`, `kernel_wait_pct`, `other_idle_pct` (of idle),
    /// `gaps`.
    pub rows: DataFrame,
    /// HTA's per-stream idle split. Columns: `run`, `rank`, (`step`), `stream`, `idle_ns`,
    /// `host_wait_ns`, `kernel_wait_ns`, `other_idle_ns`, `gaps`.
    pub streams: DataFrame,
}

/// The breakdown of every rank or step of `runs`.
pub fn compute(
    root: &Path,
    runs: &[String],
    by: By,
    kernel_wait_ns: i64,
) -> Result<Breakdown, DatasetError> {
    let input = Input::load(root, runs)?;
    of_input(&input, by, kernel_wait_ns).map_err(|source| DatasetError::Polars {
        path: root.join("gpu_activities"),
        source,
    })
}

/// The breakdown of every group of rows already loaded, in key order.
pub fn rows(input: &Input, by: By, kernel_wait_ns: i64) -> Vec<(Key, Row)> {
    input
        .groups(by)
        .into_iter()
        .map(|(k, acts)| (k, row(&acts, kernel_wait_ns)))
        .collect()
}

/// The breakdown of rows already loaded.
pub(crate) fn of_input(input: &Input, by: By, kernel_wait_ns: i64) -> PolarsResult<Breakdown> {
    let groups = input.groups(by);
    let rows: Vec<(&Key, Row)> = groups
        .iter()
        .map(|(k, acts)| (k, row(acts, kernel_wait_ns)))
        .collect();
    let mut streams: Vec<(&Key, i64, Split)> = Vec::new();
    for (k, acts) in &groups {
        for (s, split) in per_stream(acts, kernel_wait_ns) {
            streams.push((k, s, split));
        }
    }
    Ok(Breakdown {
        rows: rows_frame(&rows, by)?,
        streams: streams_frame(&streams, by)?,
    })
}

/// The breakdown of one group's activities (sorted by start).
pub(crate) fn row(acts: &[Act], kernel_wait_ns: i64) -> Row {
    let spans = |keep: &dyn Fn(Class) -> bool| {
        union(
            acts.iter()
                .filter(|a| keep(a.class))
                .map(|a| (a.start, a.end))
                .collect(),
        )
    };
    let busy = length(&spans(&|_| true));
    let compute = length(&spans(&|c| c.is_compute()));
    let comm_or_compute = length(&spans(&|c| c.is_compute() || c == Class::Comm));
    let window = match (acts.first(), acts.iter().map(|a| a.end).max()) {
        (Some(first), Some(end)) => end - first.start,
        _ => 0,
    };
    Row {
        activities: acts.len() as i64,
        window_ns: window,
        busy_ns: busy,
        compute_ns: compute,
        non_compute_ns: busy - compute,
        comm_ns: comm_or_compute - compute,
        idle_ns: window - busy,
        idle: merged_split(acts, kernel_wait_ns),
    }
}

/// The idle split of the merged timeline: every gap in the union of the activities, by the
/// activity that ends it (the first to start; among those, the earliest launched).
pub(crate) fn merged_split(acts: &[Act], kernel_wait_ns: i64) -> Split {
    let mut split = Split::default();
    let Some(first) = acts.first() else {
        return split;
    };
    let mut reach = first.end;
    for a in &acts[1..] {
        if a.start > reach {
            split.add(classify(reach, a, kernel_wait_ns), a.start - reach);
        }
        reach = reach.max(a.end);
    }
    split
}

/// HTA's split, stream by stream: the gap before each activity of a stream after its first,
/// from the previous activity's end (never negative: ingest clips same-stream overlaps).
pub(crate) fn per_stream(acts: &[Act], kernel_wait_ns: i64) -> BTreeMap<i64, Split> {
    let mut prev: BTreeMap<i64, i64> = BTreeMap::new();
    let mut out: BTreeMap<i64, Split> = BTreeMap::new();
    for a in acts {
        let split = out.entry(a.stream).or_default();
        if let Some(end) = prev.insert(a.stream, a.end) {
            split.add(classify(end, a, kernel_wait_ns), (a.start - end).max(0));
        }
    }
    out
}

fn rows_frame(rows: &[(&Key, Row)], by: By) -> PolarsResult<DataFrame> {
    let mut cols = key_columns(rows.iter().map(|r| r.0), by);
    let int = |name: &str, f: fn(&Row) -> i64| {
        Column::new(
            name.into(),
            rows.iter().map(|r| f(&r.1)).collect::<Vec<_>>(),
        )
    };
    let share = |name: &str, f: fn(&Row) -> (i64, i64)| {
        Column::new(
            name.into(),
            rows.iter()
                .map(|r| {
                    let (part, whole) = f(&r.1);
                    pct(part, whole)
                })
                .collect::<Vec<_>>(),
        )
    };
    cols.extend([
        int("activities", |r| r.activities),
        int("window_ns", |r| r.window_ns),
        int("compute_ns", |r| r.compute_ns),
        int("non_compute_ns", |r| r.non_compute_ns),
        int("comm_only_ns", |r| r.comm_ns),
        int("memory_only_ns", |r| r.non_compute_ns - r.comm_ns),
        int("idle_ns", |r| r.idle_ns),
        share("compute_pct", |r| (r.compute_ns, r.window_ns)),
        share("non_compute_pct", |r| (r.non_compute_ns, r.window_ns)),
        share("idle_pct", |r| (r.idle_ns, r.window_ns)),
        int("host_wait_ns", |r| r.idle.host_wait_ns),
        int("kernel_wait_ns", |r| r.idle.kernel_wait_ns),
        int("other_idle_ns", |r| r.idle.other_ns),
        share("host_wait_pct", |r| (r.idle.host_wait_ns, r.idle_ns)),
        share("kernel_wait_pct", |r| (r.idle.kernel_wait_ns, r.idle_ns)),
        share("other_idle_pct", |r| (r.idle.other_ns, r.idle_ns)),
        int("gaps", |r| r.idle.gaps),
    ]);
    DataFrame::new_infer_height(cols)
}

fn streams_frame(rows: &[(&Key, i64, Split)], by: By) -> PolarsResult<DataFrame> {
    let mut cols = key_columns(rows.iter().map(|r| r.0), by);
    let int = |name: &str, f: fn(&(&Key, i64, Split)) -> i64| {
        Column::new(name.into(), rows.iter().map(f).collect::<Vec<_>>())
    };
    cols.extend([
        int("stream", |r| r.1),
        int("idle_ns", |r| r.2.total()),
        int("host_wait_ns", |r| r.2.host_wait_ns),
        int("kernel_wait_ns", |r| r.2.kernel_wait_ns),
        int("other_idle_ns", |r| r.2.other_ns),
        int("gaps", |r| r.2.gaps),
    ]);
    DataFrame::new_infer_height(cols)
}
