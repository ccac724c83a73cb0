//! The interval arithmetic behind `aorta overlap`, on plain arrays.
//!
//! polars has no interval-union operator, and a per-row expression would not be exact anyway,
//! so this module works on a rank's activities sorted by start: one pass merges each class
//! (comm, gemm, compute, memcpy, everything, each collective kind, each stream) into a sorted
//! list of disjoint segments, and intersections are linear two-pointer walks over two such
//! lists. Everything is integer nanoseconds; nothing is rounded.

/// Activity class, in the order of ../shared/docs/METRICS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Class {
    Comm = 0,
    Gemm = 1,
    Attention = 2,
    OtherCompute = 3,
    Memcpy = 4,
    Memset = 5,
}

impl Class {
    pub const ALL: [Class; 6] = [
        Class::Comm,
        Class::Gemm,
        Class::Attention,
        Class::OtherCompute,
        Class::Memcpy,
        Class::Memset,
    ];

    /// The `category` value of `gpu_activities`; unknown text is `other_compute`.
    pub fn from_category(s: &str) -> Class {
        match s {
            "comm" => Class::Comm,
            "gemm" => Class::Gemm,
            "attention" => Class::Attention,
            "memcpy" => Class::Memcpy,
            "memset" => Class::Memset,
            _ => Class::OtherCompute,
        }
    }

    /// Every kernel that is not communication (memcpy and memset are neither).
    pub fn is_compute(self) -> bool {
        matches!(self, Class::Gemm | Class::Attention | Class::OtherCompute)
    }
}

/// Collective kinds, in the order of METRICS.md (ingest's list); the index is `Act::op`.
pub use aorta_ingest::classify::COMM_OPS;

/// The index of a `comm_op` value; unknown or missing kinds are `other`.
pub fn comm_op_index(s: Option<&str>) -> u8 {
    let other = COMM_OPS.len() - 1;
    s.and_then(|s| COMM_OPS.iter().position(|&k| k == s))
        .unwrap_or(other) as u8
}

/// One GPU activity: `[start, end)` in ns, its class, collective kind (comm only), and the
/// indices of its stream and step among the rank's streams and steps (24 bytes: the sort
/// moves these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Act {
    pub start: i64,
    pub end: i64,
    pub class: Class,
    pub op: u8,
    pub stream: u16,
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

/// Merges intervals pushed in start order into sorted disjoint segments.
#[derive(Debug, Default, Clone)]
pub struct Union {
    segs: Vec<(i64, i64)>,
}

impl Union {
    #[inline]
    pub fn push(&mut self, start: i64, end: i64) {
        match self.segs.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => self.segs.push((start, end)),
        }
    }

    pub fn segments(&self) -> &[(i64, i64)] {
        &self.segs
    }

    pub fn len_ns(&self) -> i64 {
        length(&self.segs)
    }
}

/// Time per collective kind in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpTime {
    pub count: i64,
    pub comm_ns: i64,
    pub exposed_comm_ns: i64,
}

/// The metrics of METRICS.md for one window (`window_*` are null-free here: a window with
/// no activity has start = end = 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub window_start_ns: i64,
    pub window_end_ns: i64,
    pub activity_count: i64,
    pub comm_ns: i64,
    pub gemm_ns: i64,
    pub compute_ns: i64,
    pub busy_ns: i64,
    pub memcpy_ns: i64,
    pub gemm_comm_overlap_ns: i64,
    pub compute_comm_overlap_ns: i64,
    pub gemm_memcpy_overlap_ns: i64,
    pub exposed_memcpy_ns: i64,
    pub ops: [OpTime; COMM_OPS.len()],
}

impl Metrics {
    pub fn window_ns(&self) -> i64 {
        self.window_end_ns - self.window_start_ns
    }
    pub fn idle_ns(&self) -> i64 {
        self.window_ns() - self.busy_ns
    }
    pub fn exposed_comm_ns(&self) -> i64 {
        self.comm_ns - self.compute_comm_overlap_ns
    }
    /// TP-overlap-tuner: gemm∩comm / min(gemm, comm).
    pub fn overlap_ratio(&self) -> Option<f64> {
        ratio(self.gemm_comm_overlap_ns, self.gemm_ns.min(self.comm_ns))
    }
    /// Holistic Trace Analysis: 100 × compute∩comm / comm.
    pub fn comm_overlap_pct(&self) -> Option<f64> {
        ratio(100 * self.compute_comm_overlap_ns, self.comm_ns)
    }
    /// The Python aorta report: compute∩comm / compute.
    pub fn compute_overlap_ratio(&self) -> Option<f64> {
        ratio(self.compute_comm_overlap_ns, self.compute_ns)
    }
}

/// `num / den`, null when `den` is 0.
pub fn ratio(num: i64, den: i64) -> Option<f64> {
    (den != 0).then(|| num as f64 / den as f64)
}

/// The class unions of one window, built in one pass.
#[derive(Default)]
struct Unions {
    all: Union,
    comm: Union,
    gemm: Union,
    compute: Union,
    memcpy: Union,
    /// compute ∪ comm, for exposed memcpy.
    engine: Union,
    ops: [Union; COMM_OPS.len()],
    op_counts: [i64; COMM_OPS.len()],
}

impl Unions {
    #[inline]
    fn push(&mut self, a: &Act) {
        let (s, e) = (a.start, a.end);
        self.all.push(s, e);
        match a.class {
            Class::Comm => {
                self.comm.push(s, e);
                self.engine.push(s, e);
                self.ops[a.op as usize].push(s, e);
                self.op_counts[a.op as usize] += 1;
            }
            Class::Gemm => {
                self.gemm.push(s, e);
                self.compute.push(s, e);
                self.engine.push(s, e);
            }
            Class::Attention | Class::OtherCompute => {
                self.compute.push(s, e);
                self.engine.push(s, e);
            }
            Class::Memcpy => self.memcpy.push(s, e),
            Class::Memset => {}
        }
    }
}

/// Every metric of one window; `acts` sorted by start (ties in any order).
pub fn window(acts: &[Act]) -> Metrics {
    debug_assert!(acts.windows(2).all(|w| w[0].start <= w[1].start));
    let mut u = Unions::default();
    let mut end = i64::MIN;
    for a in acts {
        u.push(a);
        end = end.max(a.end);
    }
    let (window_start_ns, window_end_ns) = match acts.first() {
        Some(first) => (first.start, end),
        None => (0, 0),
    };
    let compute = u.compute.segments();
    let memcpy_ns = u.memcpy.len_ns();
    let mut ops = [OpTime::default(); COMM_OPS.len()];
    for (k, op) in ops.iter_mut().enumerate() {
        let comm_ns = u.ops[k].len_ns();
        op.count = u.op_counts[k];
        op.comm_ns = comm_ns;
        op.exposed_comm_ns = comm_ns - intersection(u.ops[k].segments(), compute);
    }
    Metrics {
        window_start_ns,
        window_end_ns,
        activity_count: acts.len() as i64,
        comm_ns: u.comm.len_ns(),
        gemm_ns: u.gemm.len_ns(),
        compute_ns: length(compute),
        busy_ns: u.all.len_ns(),
        memcpy_ns,
        gemm_comm_overlap_ns: intersection(u.gemm.segments(), u.comm.segments()),
        compute_comm_overlap_ns: intersection(compute, u.comm.segments()),
        gemm_memcpy_overlap_ns: intersection(u.gemm.segments(), u.memcpy.segments()),
        exposed_memcpy_ns: memcpy_ns - intersection(u.memcpy.segments(), u.engine.segments()),
        ops,
    }
}

/// Busy time per stream and pairwise stream overlap of one window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamView {
    /// (stream index, activity count, busy ns), for every stream with an activity.
    pub busy: Vec<(u16, i64, i64)>,
    /// (stream a, stream b, overlap ns) with a < b, for pairs that overlap (> 0 ns).
    pub pairs: Vec<(u16, u16, i64)>,
}

/// The per-stream view of one window; `acts` sorted by start.
pub fn streams(acts: &[Act]) -> StreamView {
    let n = acts
        .iter()
        .map(|a| a.stream as usize + 1)
        .max()
        .unwrap_or(0);
    let mut unions = vec![Union::default(); n];
    let mut counts = vec![0i64; n];
    for a in acts {
        unions[a.stream as usize].push(a.start, a.end);
        counts[a.stream as usize] += 1;
    }
    let used: Vec<usize> = (0..n).filter(|&i| counts[i] > 0).collect();
    let busy = used
        .iter()
        .map(|&i| (i as u16, counts[i], unions[i].len_ns()))
        .collect();
    let mut pairs = Vec::new();
    for (x, &i) in used.iter().enumerate() {
        for &j in &used[x + 1..] {
            let ov = intersection(unions[i].segments(), unions[j].segments());
            if ov > 0 {
                pairs.push((i as u16, j as u16, ov));
            }
        }
    }
    StreamView { busy, pairs }
}

/// Sorts by start. The sort is stable and run-adaptive: a dataset holds each stream's
/// activities in start order, so this merges sorted runs instead of sorting from scratch.
/// (A hand-written k-way merge was slower here: streams interleave finely in time.)
pub fn sort_by_start(acts: &mut [Act]) {
    acts.sort_by_key(|a| a.start);
}

/// Everything `aorta overlap` computes for one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankResult {
    /// The whole window: every activity of the rank.
    pub whole: Metrics,
    /// Per step index (`Act::step`, 0..steps): the step's window and its per-stream view.
    pub steps: Vec<(Metrics, StreamView)>,
}

/// Sorts `acts` by start and computes the whole window and every step of `0..steps`.
pub fn rank(acts: &mut [Act], steps: usize) -> RankResult {
    sort_by_start(acts);
    let whole = window(acts);
    let per_step = split_steps(acts, steps)
        .iter()
        .map(|a| (window(a), streams(a)))
        .collect();
    RankResult {
        whole,
        steps: per_step,
    }
}

/// Partitions start-sorted activities by step index, keeping start order within each step.
fn split_steps(acts: &[Act], steps: usize) -> Vec<Vec<Act>> {
    if steps == 1 {
        return vec![acts.to_vec()];
    }
    let mut counts = vec![0usize; steps];
    for a in acts {
        counts[a.step as usize] += 1;
    }
    let mut out: Vec<Vec<Act>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    for a in acts {
        out[a.step as usize].push(*a);
    }
    out
}
