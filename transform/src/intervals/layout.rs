//! One rank's activities laid out for the scan, as slices of the caller's array.
//!
//! The scan merges *lanes*: activities of one stream and one step, sorted by start, none
//! overlapping the next, so that a lane's start and end times form one non-decreasing
//! sequence. A dataset holds each stream's activities in start order and steps follow each
//! other on a stream, so a lane is nearly always a slice of the array as it came (checked,
//! not assumed). Only activities that overlap on their own stream (a trace ingest could not
//! clip, or JSONL intervals) are copied, into as many lanes as the overlap needs.
//!
//! Step windows overlap where a step's last kernels still run while the next step's first
//! ones start. Those *contested* ranges are where the whole-rank window cannot be summed
//! from the steps' windows; everywhere else exactly one step is active and it can.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::ops::Range;

use rayon::prelude::*;

use super::{Act, Class, COMM_OPS};

/// Sorted, non-overlapping activities of one stream in one step.
pub(super) struct Lane<'a> {
    pub acts: Cow<'a, [Act]>,
    /// The stream's slot among its step's streams (its bit in the stream mask).
    pub slot: usize,
}

/// What is counted rather than swept: activities, kinds, and the window's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counts {
    pub count: i64,
    pub ops: [i64; COMM_OPS.len()],
    pub start: i64,
    pub end: i64,
}

impl Default for Counts {
    fn default() -> Counts {
        Counts {
            count: 0,
            ops: [0; COMM_OPS.len()],
            start: i64::MAX,
            end: i64::MIN,
        }
    }
}

impl Counts {
    fn of(acts: &[Act]) -> Counts {
        let mut c = Counts::default();
        for a in acts {
            c.start = c.start.min(a.start);
            c.end = c.end.max(a.end);
            if a.class == Class::Comm {
                c.ops[a.op as usize] += 1;
            }
        }
        c.count = acts.len() as i64;
        c
    }

    pub(super) fn add(&mut self, o: &Counts) {
        self.count += o.count;
        for (a, b) in self.ops.iter_mut().zip(o.ops) {
            *a += b;
        }
        self.start = self.start.min(o.start);
        self.end = self.end.max(o.end);
    }

    /// The window's bounds; an empty window is `(0, 0)`.
    pub(super) fn window(&self) -> (i64, i64) {
        if self.count == 0 {
            (0, 0)
        } else {
            (self.start, self.end)
        }
    }
}

/// One step: its lanes, its streams in slot order with their activity counts, its counts.
#[derive(Default)]
pub(super) struct Step<'a> {
    pub lanes: Vec<Lane<'a>>,
    pub streams: Vec<(u16, i64)>,
    pub counts: Counts,
}

/// Lays out `acts` (any order) as `steps` steps of lanes. Reorders `acts` only when a
/// stream's activities of one step are not contiguous, and clamps `end` to at least `start`.
pub(super) fn steps(acts: &mut [Act], steps: usize) -> Vec<Step<'_>> {
    for a in acts.iter_mut() {
        a.end = a.end.max(a.start);
    }
    let runs = match runs(acts) {
        Some(runs) => runs,
        None => {
            acts.sort_by_key(|a| (a.stream, a.step, a.start));
            runs(acts).unwrap_or_default()
        }
    };
    let sorted: Vec<bool> = runs
        .par_iter()
        .map(|r| acts[r.clone()].windows(2).all(|w| w[0].start <= w[1].start))
        .collect();
    for (r, ok) in runs.iter().zip(sorted) {
        if !ok {
            acts[r.clone()].sort_by_key(|a| a.start);
        }
    }
    let acts: &[Act] = acts;
    let mut out: Vec<Step> = (0..steps).map(|_| Step::default()).collect();
    let mut runs: Vec<_> = runs.into_iter().map(|r| &acts[r]).collect();
    runs.sort_by_key(|r| (r[0].step, r[0].stream));
    let lanes: Vec<(Vec<Cow<[Act]>>, Counts)> =
        runs.par_iter().map(|r| (lanes(r), Counts::of(r))).collect();
    for (run, (cows, counts)) in runs.iter().zip(lanes) {
        let step = &mut out[run[0].step as usize];
        let slot = step.streams.len();
        step.streams.push((run[0].stream, counts.count));
        step.counts.add(&counts);
        step.lanes
            .extend(cows.into_iter().map(|acts| Lane { acts, slot }));
    }
    out
}

/// The ranges of equal (stream, step), or `None` when one of them is split in pieces.
fn runs(acts: &[Act]) -> Option<Vec<Range<usize>>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut from = 0;
    for i in 1..=acts.len() {
        let a = &acts[from];
        if i == acts.len() || (acts[i].stream, acts[i].step) != (a.stream, a.step) {
            if !seen.insert((a.stream, a.step)) {
                return None;
            }
            out.push(from..i);
            from = i;
        }
    }
    Some(out)
}

/// A start-sorted run as lanes: itself when nothing overlaps, else the fewest lanes that
/// each hold non-overlapping activities (greedy on the lane that frees up first).
fn lanes(run: &[Act]) -> Vec<Cow<'_, [Act]>> {
    if run.windows(2).all(|w| w[0].end <= w[1].start) {
        return vec![Cow::Borrowed(run)];
    }
    let mut lanes: Vec<Vec<Act>> = Vec::new();
    let mut free: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    for a in run {
        let l = match free.peek() {
            Some(&Reverse((end, l))) if end <= a.start => {
                free.pop();
                l
            }
            _ => {
                lanes.push(Vec::new());
                lanes.len() - 1
            }
        };
        lanes[l].push(*a);
        free.push(Reverse((a.end, l)));
    }
    lanes.into_iter().map(Cow::Owned).collect()
}

/// Where two or more steps' windows overlap, as sorted disjoint ranges.
pub(super) fn contested(steps: &[Step]) -> Vec<(i64, i64)> {
    let mut edges: Vec<(i64, i32)> = steps
        .iter()
        .filter(|s| s.counts.count > 0 && s.counts.end > s.counts.start)
        .flat_map(|s| [(s.counts.start, 1), (s.counts.end, -1)])
        .collect();
    // At equal times ends come first: windows that only touch do not contest.
    edges.sort_unstable();
    let (mut open, mut from, mut out) = (0, 0, Vec::new());
    for (t, d) in edges {
        if open < 2 && open + d >= 2 {
            from = t;
        } else if open >= 2 && open + d < 2 && t > from {
            out.push((from, t));
        }
        open += d;
    }
    out
}

/// The part of a lane that meets `[lo, hi)`: activities ending after `lo` and starting
/// before `hi` (a lane's ends are sorted because its activities do not overlap).
pub(super) fn within(acts: &[Act], lo: i64, hi: i64) -> &[Act] {
    let first = acts.partition_point(|a| a.end <= lo);
    let last = first + acts[first..].partition_point(|a| a.start < hi);
    &acts[first..last]
}
