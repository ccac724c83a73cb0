//! The interval arithmetic behind `aorta overlap`, on plain arrays.
//!
//! polars has no interval-union operator, and a per-row expression would not be exact anyway,
//! so this module scans time itself, in integer nanoseconds, rounding nothing. A rank's
//! activities are laid out as lanes (`layout`: per stream and step, usually slices of the
//! caller's array) and one merge of their start and end times per step (`merge`) yields
//! every METRICS.md metric, every collective kind and every stream pair at once. Steps, and
//! large steps cut in time, are swept in parallel; the whole-rank window is the sum of its
//! steps except where step windows overlap, which is swept again jointly.

mod layout;
mod merge;
// The scan against a brute-force marking of every nanosecond (property tests).
#[cfg(test)]
mod brute_force;

use rayon::prelude::*;

use layout::{Counts, Step};
use merge::{Source, Tables, CONTESTED, MAX_MASK_STREAMS};

/// Activity class, in the order of docs/METRICS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Class {
    /// Communication kernels (`comm`).
    Comm = 0,
    /// Matrix multiplies (`gemm`).
    Gemm = 1,
    /// Attention kernels (`attention`).
    Attention = 2,
    /// Every other compute kernel (`other_compute`).
    OtherCompute = 3,
    /// Copies (`memcpy`).
    Memcpy = 4,
    /// Memory sets (`memset`).
    Memset = 5,
}

impl Class {
    /// Every class, in discriminant order.
    pub const ALL: [Class; 6] = [
        Class::Comm,
        Class::Gemm,
        Class::Attention,
        Class::OtherCompute,
        Class::Memcpy,
        Class::Memset,
    ];

    /// The `category` value of `gpu_activities`; unknown text is `other_compute`.
    pub(crate) fn from_category(s: &str) -> Class {
        match Category::parse(s) {
            Some(Category::Comm) => Class::Comm,
            Some(Category::Gemm) => Class::Gemm,
            Some(Category::Attention) => Class::Attention,
            Some(Category::Memcpy) => Class::Memcpy,
            Some(Category::Memset) => Class::Memset,
            Some(Category::OtherCompute) | None => Class::OtherCompute,
        }
    }

    /// Every kernel that is not communication (memcpy and memset are neither).
    pub(crate) fn is_compute(self) -> bool {
        matches!(self, Class::Gemm | Class::Attention | Class::OtherCompute)
    }
}

use aorta_ingest::classify::Category;
/// Collective kinds, in the order of METRICS.md (ingest's list); the index is `Act::op`.
pub(crate) use aorta_ingest::classify::COMM_OPS;

/// The index of a `comm_op` value; unknown or missing kinds are `other`.
pub(crate) fn comm_op_index(s: Option<&str>) -> u8 {
    let other = COMM_OPS.len() - 1;
    s.and_then(|s| COMM_OPS.iter().position(|&k| k == s))
        .unwrap_or(other) as u8
}

/// One GPU activity: `[start, end)` in ns, its class, collective kind (comm only), and the
/// indices of its stream and step among the rank's streams and steps (24 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Act {
    /// Start, ns.
    pub start: i64,
    /// End, ns (exclusive; `end ≥ start`).
    pub end: i64,
    /// What kind of work it is.
    pub class: Class,
    /// Index of its collective kind in `COMM_OPS` (comm only).
    pub op: u8,
    /// Index of its stream among the rank's streams.
    pub stream: u16,
    /// Index of its step among the rank's steps.
    pub step: u32,
}

/// Total length of a list of sorted disjoint segments.
pub fn length(segs: &[(i64, i64)]) -> i64 {
    segs.iter().map(|&(s, e)| e - s).sum()
}

/// Length of the intersection of two sorted disjoint segment lists.
pub fn intersection(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (lo, hi) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Merges intervals pushed in start order into sorted disjoint segments (the per-stream view
/// of a step with more streams than the scan's stream masks hold).
#[derive(Debug, Default, Clone)]
pub(crate) struct Union {
    segs: Vec<(i64, i64)>,
}

impl Union {
    #[inline]
    pub(crate) fn push(&mut self, start: i64, end: i64) {
        match self.segs.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => self.segs.push((start, end)),
        }
    }

    pub(crate) fn segments(&self) -> &[(i64, i64)] {
        &self.segs
    }

    pub(crate) fn len_ns(&self) -> i64 {
        length(&self.segs)
    }
}

/// Time per collective kind in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpTime {
    pub count: i64,
    pub comm_ns: i64,
    pub exposed_comm_ns: i64,
}

/// The metrics of METRICS.md for one window (`window_*` are null-free here: a window with
/// no activity has start = end = 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub(crate) window_start_ns: i64,
    pub(crate) window_end_ns: i64,
    pub(crate) activity_count: i64,
    pub(crate) comm_ns: i64,
    pub(crate) gemm_ns: i64,
    pub(crate) compute_ns: i64,
    pub(crate) busy_ns: i64,
    pub(crate) memcpy_ns: i64,
    pub(crate) gemm_comm_overlap_ns: i64,
    /// |U(compute) ∩ U(comm)|, ns: the communication hidden under compute.
    pub compute_comm_overlap_ns: i64,
    pub(crate) gemm_memcpy_overlap_ns: i64,
    pub(crate) exposed_memcpy_ns: i64,
    pub(crate) ops: [OpTime; COMM_OPS.len()],
}

impl Metrics {
    pub(crate) fn window_ns(&self) -> i64 {
        self.window_end_ns - self.window_start_ns
    }
    pub(crate) fn idle_ns(&self) -> i64 {
        self.window_ns() - self.busy_ns
    }
    pub(crate) fn exposed_comm_ns(&self) -> i64 {
        self.comm_ns - self.compute_comm_overlap_ns
    }
    /// TP-overlap-tuner: gemm∩comm / min(gemm, comm).
    pub(crate) fn tp_overlap_ratio(&self) -> Option<f64> {
        ratio(self.gemm_comm_overlap_ns, self.gemm_ns.min(self.comm_ns))
    }
    /// Holistic Trace Analysis: 100 × compute∩comm / comm.
    pub(crate) fn comm_hidden_pct(&self) -> Option<f64> {
        ratio(100 * self.compute_comm_overlap_ns, self.comm_ns)
    }
    /// The Python aorta report: compute∩comm / compute.
    pub(crate) fn compute_overlap_ratio(&self) -> Option<f64> {
        ratio(self.compute_comm_overlap_ns, self.compute_ns)
    }
}

/// `num / den`, null when `den` is 0.
pub(crate) fn ratio(num: i64, den: i64) -> Option<f64> {
    (den != 0).then(|| num as f64 / den as f64)
}

/// Busy time per stream and pairwise stream overlap of one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamView {
    /// (stream index, activity count, busy ns), for every stream with an activity.
    pub(crate) busy: Vec<(u16, i64, i64)>,
    /// (stream a, stream b, overlap ns) with a < b, for pairs that overlap (> 0 ns).
    pub(crate) pairs: Vec<(u16, u16, i64)>,
}

/// Everything `aorta overlap` computes for one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankResult {
    /// The whole window: every activity of the rank.
    pub whole: Metrics,
    /// Per step index (`Act::step`, 0..steps): the step's window and its per-stream view.
    pub steps: Vec<(Metrics, StreamView)>,
}

/// Activities per scan task: a larger step is cut in time into tasks of about this size.
const CHUNK: usize = 1 << 18;

/// A piece of scanning: part of one step (inside a contested range or outside all), or a
/// contested range across all steps.
enum Task {
    Step {
        step: usize,
        lo: i64,
        hi: i64,
        contested: bool,
    },
    Joint {
        lo: i64,
        hi: i64,
    },
}

/// The whole window and every step of `0..steps` (`Act::step` must be below `steps`).
/// `acts` may come in any order; it is reordered only if a stream's activities of one step
/// are not contiguous.
pub fn rank(acts: &mut [Act], steps: usize) -> RankResult {
    rank_in_chunks(acts, steps, CHUNK)
}

/// `rank` with steps cut into tasks of about `chunk` activities (tests cut small steps).
#[doc(hidden)]
pub(crate) fn rank_in_chunks(acts: &mut [Act], steps: usize, chunk: usize) -> RankResult {
    let steps = layout::steps(acts, steps);
    let contested = layout::contested(&steps);
    let done: Vec<(Task, Tables)> = tasks(&steps, &contested, chunk.max(1))
        .into_par_iter()
        .map(|t| {
            let tables = run(&t, &steps);
            (t, tables)
        })
        .collect();
    let mut per_step: Vec<Tables> = steps.iter().map(|_| Tables::default()).collect();
    let mut whole = Vec::new();
    for (task, t) in done {
        match task {
            Task::Step { step, .. } => per_step[step].add(t),
            Task::Joint { .. } => whole.extend(t.class),
        }
    }
    let mut counts = Counts::default();
    for (s, t) in steps.iter().zip(&per_step) {
        counts.add(&s.counts);
        let alone = t.class.iter().filter(|(k, _)| k & CONTESTED as u32 == 0);
        whole.extend(alone);
    }
    RankResult {
        whole: merge::metrics(&whole, &counts),
        steps: steps
            .iter()
            .zip(&per_step)
            .map(|(s, t)| (merge::metrics(&t.class, &s.counts), view(s, t)))
            .collect(),
    }
}

/// Every step in pieces of about `chunk` activities (cut at start times of its longest
/// lane) and at the edges of contested ranges, then every contested range.
fn tasks(steps: &[Step], contested: &[(i64, i64)], chunk: usize) -> Vec<Task> {
    let mut out = Vec::new();
    for (step, s) in steps.iter().enumerate() {
        let longest = s.lanes.iter().map(|l| &l.acts[..]).max_by_key(|a| a.len());
        let longest = longest.unwrap_or(&[]);
        let n = (s.counts.count as usize / chunk).clamp(1, longest.len().max(1));
        let mut cuts = vec![i64::MIN, i64::MAX - 1];
        cuts.extend((1..n).map(|k| longest[k * longest.len() / n].start));
        let (from, to) = (s.counts.start, s.counts.end);
        let near = contested.iter().filter(|&&(lo, hi)| lo < to && hi > from);
        cuts.extend(near.flat_map(|&(lo, hi)| [lo, hi]));
        cuts.sort_unstable();
        cuts.dedup();
        out.extend(cuts.windows(2).map(|w| Task::Step {
            step,
            lo: w[0],
            hi: w[1],
            contested: inside(contested, w[0]),
        }));
    }
    out.extend(contested.iter().map(|&(lo, hi)| Task::Joint { lo, hi }));
    out
}

/// Whether `t` lies in one of the sorted disjoint `ranges`.
fn inside(ranges: &[(i64, i64)], t: i64) -> bool {
    let i = ranges.partition_point(|r| r.1 <= t);
    ranges.get(i).is_some_and(|r| r.0 <= t)
}

/// How many streams get mask bits in a step's scan: all of them, or none past the limit.
fn masked(s: &Step) -> usize {
    if s.streams.len() <= MAX_MASK_STREAMS {
        s.streams.len()
    } else {
        0
    }
}

fn run(task: &Task, steps: &[Step]) -> Tables {
    match *task {
        Task::Step {
            step,
            lo,
            hi,
            contested,
        } => {
            let s = &steps[step];
            let src: Vec<Source> = s
                .lanes
                .iter()
                .map(|l| Source {
                    acts: &l.acts,
                    mask: 1u32.checked_shl(l.slot as u32).unwrap_or(0),
                })
                .collect();
            let flag = if contested { CONTESTED } else { 0 };
            if masked(s) == s.streams.len() {
                merge::scan::<true>(&src, (lo, hi), flag, masked(s))
            } else {
                merge::scan::<false>(&src, (lo, hi), flag, 0)
            }
        }
        Task::Joint { lo, hi } => {
            let src: Vec<Source> = steps
                .iter()
                .filter(|s| s.counts.start < hi && s.counts.end > lo)
                .flat_map(|s| &s.lanes)
                .map(|l| Source {
                    acts: &l.acts,
                    mask: 0,
                })
                .collect();
            merge::scan::<false>(&src, (lo, hi), 0, 0)
        }
    }
}

/// A step's per-stream view: from its mask table, or stream by stream past the mask limit.
fn view(s: &Step, t: &Tables) -> StreamView {
    if masked(s) == s.streams.len() {
        return merge::stream_view(&t.streams, &s.streams);
    }
    let unions: Vec<Union> = (0..s.streams.len())
        .map(|slot| {
            let mut acts: Vec<Act> = s
                .lanes
                .iter()
                .filter(|l| l.slot == slot)
                .flat_map(|l| l.acts.iter().copied())
                .collect();
            acts.sort_by_key(|a| a.start);
            let mut u = Union::default();
            for a in &acts {
                u.push(a.start, a.end);
            }
            u
        })
        .collect();
    let mut v = StreamView::default();
    for (i, &(id, count)) in s.streams.iter().enumerate() {
        v.busy.push((id, count, unions[i].len_ns()));
        for j in i + 1..s.streams.len() {
            let ov = intersection(unions[i].segments(), unions[j].segments());
            if ov > 0 {
                v.pairs.push((id, s.streams[j].0, ov));
            }
        }
    }
    v
}

/// Every metric of one window (all of `acts`, in any order); the brute-force tests' entry.
#[cfg(test)]
pub(crate) fn window(acts: &[Act]) -> Metrics {
    single(acts).0
}

/// The per-stream view of one window (all of `acts`, in any order); the brute-force tests'
/// entry.
#[cfg(test)]
pub(crate) fn streams(acts: &[Act]) -> StreamView {
    single(acts).1
}

#[cfg(test)]
fn single(acts: &[Act]) -> (Metrics, StreamView) {
    let mut all: Vec<Act> = acts.iter().map(|a| Act { step: 0, ..*a }).collect();
    rank(&mut all, 1).steps.pop().unwrap_or_default()
}

/// Sorts by start (the tests' canonical order; the scan does not need it).
#[cfg(test)]
pub(crate) fn sort_by_start(acts: &mut [Act]) {
    acts.sort_by_key(|a| a.start);
}
