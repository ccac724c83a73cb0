//! The scan itself: one merge of lanes' start and end times.
//!
//! Between two consecutive times the set of running activities is fixed; its *key* is the
//! OR of what each lane runs (class bits, collective kind bits) and its *mask* the set of
//! busy streams. The scan adds the elapsed time to `class[key]` and `streams[mask]`, and
//! every metric of METRICS.md is then a sum over those two tables: comm∩compute is the time
//! of keys with both bits, a stream pair's overlap the time of masks with both streams. So
//! one pass gives every class, every kind and every stream pair at once, where intersecting
//! unions two at a time took a walk per pair.

use std::cell::RefCell;

use super::layout::{within, Counts};
use super::{Act, Class, Metrics, StreamView, COMM_OPS};

const BUSY: u16 = 1;
const COMM: u16 = 1 << 1;
const GEMM: u16 = 1 << 2;
const COMPUTE: u16 = 1 << 3;
const MEMCPY: u16 = 1 << 4;
const OP_SHIFT: u32 = 5;
/// Set on the keys of time in a contested range (see `layout::contested`).
pub(super) const CONTESTED: u16 = 1 << (OP_SHIFT + COMM_OPS.len() as u32);
/// Size of the class table.
pub(super) const KEYS: usize = (CONTESTED as usize) << 1;
/// Stream masks get a dense table up to this many streams in a step.
pub(super) const MAX_MASK_STREAMS: usize = 16;

/// The class and kind bits of one activity.
fn bits(a: &Act) -> u16 {
    BUSY | match a.class {
        Class::Comm => COMM | 1 << (OP_SHIFT + (a.op as u32).min(COMM_OPS.len() as u32 - 1)),
        Class::Gemm => GEMM | COMPUTE,
        Class::Attention | Class::OtherCompute => COMPUTE,
        Class::Memcpy => MEMCPY,
        Class::Memset => 0,
    }
}

/// One lane to merge: its activities and the stream bit it sets.
pub(super) struct Source<'s> {
    pub acts: &'s [Act],
    pub mask: u32,
}

/// Time per key and per stream mask, as (key, ns) pairs; a key may appear more than once.
#[derive(Default)]
pub(super) struct Tables {
    pub class: Vec<(u32, i64)>,
    pub streams: Vec<(u32, i64)>,
}

impl Tables {
    pub(super) fn add(&mut self, o: Tables) {
        self.class.extend(o.class);
        self.streams.extend(o.streams);
    }
}

/// A dense table and the dirty bitmap of its 64-entry blocks.
#[derive(Default)]
struct Dense {
    table: Vec<i64>,
    dirty: Vec<u64>,
}

impl Dense {
    fn sized(&mut self, n: usize) -> &mut Dense {
        if self.table.len() < n {
            self.table.resize(n, 0);
            self.dirty.resize(n.div_ceil(64 * 64), 0);
        }
        self
    }

    #[inline]
    fn add(&mut self, key: usize, len: i64) {
        self.table[key] += len;
        touch(&mut self.dirty, key);
    }

    fn drain(&mut self) -> Vec<(u32, i64)> {
        drain(&mut self.table, &mut self.dirty)
    }
}

#[derive(Default)]
struct Scratch {
    class: Dense,
    masks: Dense,
}

thread_local! {
    /// Dense tables the scan adds into, one pair per worker thread, reused (zeroed as
    /// they are drained): a fresh 128 KiB table per task cost more than small steps' scans.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The non-zero entries of `dense`, which is left zeroed; `dirty` has a bit per 64 entries
/// that may be non-zero (and is cleared), so small scans do not scan the whole table.
fn drain(dense: &mut [i64], dirty: &mut [u64]) -> Vec<(u32, i64)> {
    let mut out = Vec::new();
    for (w, word) in dirty.iter_mut().enumerate() {
        let mut bits = std::mem::take(word);
        while bits != 0 {
            let block = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let entries = dense[block * 64..].iter_mut().take(64).enumerate();
            for (i, v) in entries.filter(|(_, v)| **v != 0) {
                out.push(((block * 64 + i) as u32, std::mem::take(v)));
            }
        }
    }
    out
}

/// Marks the 64-entry block of `key` in a dirty bitmap.
#[inline]
fn touch(dirty: &mut [u64], key: usize) {
    dirty[key >> 12] |= 1 << ((key >> 6) & 63);
}

/// A lane's position: the next activity, whether it has started, and what it sets while
/// running (`key`, and `mask` when it is an activity's stream).
struct Cursor<'s> {
    acts: &'s [Act],
    i: usize,
    open: bool,
    next: i64,
    key: u16,
    mask: u32,
    stream: u32,
}

impl<'s> Cursor<'s> {
    fn new(s: &Source<'s>, lo: i64, hi: i64) -> Cursor<'s> {
        let mut c = Cursor {
            acts: within(s.acts, lo, hi),
            i: 0,
            open: false,
            next: 0,
            key: 0,
            mask: 0,
            stream: s.mask,
        };
        c.next = c.time(lo, hi);
        c
    }

    fn time(&self, lo: i64, hi: i64) -> i64 {
        match self.acts.get(self.i) {
            None => i64::MAX,
            Some(a) if self.open => a.end.min(hi),
            Some(a) => a.start.max(lo),
        }
    }

    /// Takes every start and end at `self.next`, then sets the running key and mask.
    fn advance(&mut self, lo: i64, hi: i64) {
        let t = self.next;
        while self.next == t {
            self.i += self.open as usize;
            self.open = !self.open;
            self.next = self.time(lo, hi);
        }
        (self.key, self.mask) = match self.acts.get(self.i) {
            Some(a) if self.open => (bits(a), self.stream),
            _ => (0, 0),
        };
    }
}

/// Sweeps `sources` over `[lo, hi)`; `flag` is OR-ed into every key (`CONTESTED` for a
/// range where step windows overlap). Stream masks of `streams` bits when `STREAMS`.
pub(super) fn scan<const STREAMS: bool>(
    sources: &[Source],
    clip: (i64, i64),
    flag: u16,
    streams: usize,
) -> Tables {
    SCRATCH.with_borrow_mut(|s| {
        let (class, masks) = (s.class.sized(KEYS), s.masks.sized(1 << streams));
        scan_into::<STREAMS>(sources, clip, flag, class, masks);
        Tables {
            class: class.drain(),
            streams: masks.drain(),
        }
    })
}

fn scan_into<const STREAMS: bool>(
    sources: &[Source],
    (lo, hi): (i64, i64),
    flag: u16,
    class: &mut Dense,
    masks: &mut Dense,
) {
    let mut cur: Vec<Cursor> = sources.iter().map(|s| Cursor::new(s, lo, hi)).collect();
    let mut t = cur.iter().map(|c| c.next).min().unwrap_or(i64::MAX);
    let (mut prev, mut key, mut mask) = (t, 0u16, 0u32);
    while t != i64::MAX {
        if key & BUSY != 0 {
            class.add((key | flag) as usize, t - prev);
            if STREAMS {
                masks.add(mask as usize, t - prev);
            }
        }
        prev = t;
        let (mut k, mut m, mut nt) = (0, 0, i64::MAX);
        for c in cur.iter_mut() {
            if c.next == t {
                c.advance(lo, hi);
            }
            k |= c.key;
            m |= c.mask;
            nt = nt.min(c.next);
        }
        (key, mask, t) = (k, m, nt);
    }
}

/// The METRICS.md metrics from a class table and the window's counts.
pub(super) fn metrics(class: &[(u32, i64)], c: &Counts) -> Metrics {
    let (window_start_ns, window_end_ns) = c.window();
    let mut m = Metrics {
        window_start_ns,
        window_end_ns,
        activity_count: c.count,
        ..Metrics::default()
    };
    for (op, &n) in m.ops.iter_mut().zip(&c.ops) {
        op.count = n;
    }
    for &(key, len) in class {
        add_key(&mut m, key as u16, len);
    }
    m
}

fn add_key(m: &mut Metrics, key: u16, len: i64) {
    let has = |b: u16| key & b != 0;
    m.busy_ns += len;
    let sum = |on: bool, v: &mut i64| *v += if on { len } else { 0 };
    sum(has(COMM), &mut m.comm_ns);
    sum(has(GEMM), &mut m.gemm_ns);
    sum(has(COMPUTE), &mut m.compute_ns);
    sum(has(MEMCPY), &mut m.memcpy_ns);
    sum(has(GEMM) && has(COMM), &mut m.gemm_comm_overlap_ns);
    sum(has(COMPUTE) && has(COMM), &mut m.compute_comm_overlap_ns);
    sum(has(GEMM) && has(MEMCPY), &mut m.gemm_memcpy_overlap_ns);
    sum(
        has(MEMCPY) && !has(COMPUTE | COMM),
        &mut m.exposed_memcpy_ns,
    );
    for (k, op) in m.ops.iter_mut().enumerate() {
        if has(1 << (OP_SHIFT + k as u32)) {
            op.comm_ns += len;
            sum(!has(COMPUTE), &mut op.exposed_comm_ns);
        }
    }
}

/// Busy time per stream and pairwise overlap from a stream-mask table; `streams` are the
/// step's (stream, activity count) in slot order.
pub(super) fn stream_view(table: &[(u32, i64)], streams: &[(u16, i64)]) -> StreamView {
    let n = streams.len();
    let (mut busy, mut pair) = (vec![0i64; n], vec![0i64; n * n]);
    for &(mask, len) in table {
        let on: Vec<usize> = (0..n).filter(|i| mask >> i & 1 == 1).collect();
        for (x, &i) in on.iter().enumerate() {
            busy[i] += len;
            for &j in &on[x + 1..] {
                pair[i * n + j] += len;
            }
        }
    }
    let mut v = StreamView::default();
    for (i, &(id, count)) in streams.iter().enumerate() {
        v.busy.push((id, count, busy[i]));
        for j in i + 1..n {
            if pair[i * n + j] > 0 {
                v.pairs.push((id, streams[j].0, pair[i * n + j]));
            }
        }
    }
    v
}
