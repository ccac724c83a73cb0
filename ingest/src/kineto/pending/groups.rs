//! The settle on many cores: the tables cut into their flushes and row groups up front, and
//! many of them built at once on the pool.
//!
//! Why: with the sinks of `settle.rs` fed batch by batch, half the wall time of one 1 GiB file
//! on 16 cores was the settle (docs/PERFORMANCE.md, issue 33), and it barely scaled: each
//! sink took every row on one thread (copied into its buffer, then the GPU table's sort and
//! clipping, then one Arrow batch at a time built and encoded, waiting for its slowest
//! column), and only one row group per table was ever being encoded.
//!
//! Where a sink of one thread flushes, and so which rows each Arrow batch and each row group
//! holds, follows from the batch sequence alone: a CPU flush after the batch that fills
//! `SINK_ROWS`, a GPU flush likewise but counting the rows each flush keeps back (the last
//! of every stream seen so far: the spill's index counts each batch's new streams). So:
//!
//! - **CPU rows** need nothing from each other: each row group is a task that reads its
//!   records back (`pread`, anywhere in the spill file), settles them, builds the very Arrow
//!   batches the sink built (one flush's rows cut every `ARROW_ROWS`; a batch across two row
//!   groups is built by both and sliced, as `writer::Open` slices it) and encodes them, one
//!   task per column. Several row groups are encoded at once (`ordered`) and appended in
//!   order.
//! - **GPU rows** carry state from flush to flush: the rows kept back (one per stream, to
//!   be clipped against the next flush), and the last start written per stream (for
//!   `stream_out_of_order`). Both are found from the sorted keys alone, one pass over
//!   them; the rest of a flush (copying the rows out, clipping, findings, the steps' windows
//!   and counts, building the Arrow batches) is cut into pieces of one Arrow batch each,
//!   built in parallel and joined in order. The next flush's records are read and settled
//!   meanwhile, and the last flush's batches encoded (`writer::Chain`).
//!
//! Findings are merged in file order (those with no offset keep the first example, as
//! before); the steps' windows and counts are sums, minima and maxima, so the pieces add up
//! to what one sink counted. Every file is byte for byte what one thread writes (a test
//! settles every corpus trace both ways).

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use arrow_array::RecordBatch;
use bytemuck::Pod;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::settle::Settler;
use super::{CpuRec, GpuRec, Ix};
use crate::diag::Diagnostics;
use crate::error::{IngestError, Result};
use crate::kineto::links::StepCache;
use crate::rows::{CpuRow, GpuRow, Interner};
use crate::schema::{CPU_OPS, GPU_ACTIVITIES};
use crate::sink::{self, Counts, Key, Parts, SinkOut, StepAgg, ARROW_ROWS, SINK_ROWS};
use crate::writer::{Chain, TableWriter, ROW_GROUP_ROWS};

/// Threads the pool needs for the settle here: on one or two, the sinks of `settle.rs`
/// hold less (one row group per table in the writer, not several).
const MIN_THREADS: usize = 3;

/// Whether the settle runs here: on a pool (the current thread one of its workers) of at
/// least `MIN_THREADS`, writing files.
pub(super) fn fits() -> bool {
    rayon::current_thread_index().is_some()
        && rayon::current_num_threads() >= MIN_THREADS
        && !crate::writer::discarding()
}

/// What both tables' settles share.
pub(super) struct Ctx<'a> {
    pub settler: &'a Settler<'a>,
    pub strings: &'a Interner,
    pub parts: &'a Parts,
}

/// One spill file, read anywhere by row number.
pub(super) struct Records<'a> {
    file: File,
    ix: Vec<Ix>,
    /// Row number of each batch's first record.
    starts: Vec<u64>,
    rows: u64,
    dir: &'a Path,
}

impl<'a> Records<'a> {
    pub(super) fn new(file: File, ix: Vec<Ix>, dir: &'a Path) -> Records<'a> {
        let mut rows = 0;
        let starts = ix
            .iter()
            .map(|x| {
                rows += u64::from(x.rows);
                rows - u64::from(x.rows)
            })
            .collect();
        Records {
            file,
            ix,
            starts,
            rows,
            dir,
        }
    }

    /// The records of rows `range` (of any batches), into `out`.
    fn read<R: Pod>(&self, range: Range<u64>, out: &mut Vec<R>) -> Result<()> {
        out.clear();
        out.resize((range.end - range.start) as usize, R::zeroed());
        // The last batch starting at or before the first row: the one holding it (batches
        // of no rows start where the next one does).
        let mut b = self.starts.partition_point(|&s| s <= range.start) - 1;
        let (mut at, mut filled) = (range.start, 0);
        while at < range.end {
            let (ix, skip) = (self.ix[b], at - self.starts[b]);
            let n = (u64::from(ix.rows) - skip).min(range.end - at) as usize;
            let dst = bytemuck::cast_slice_mut(&mut out[filled..filled + n]);
            let off = ix.off + skip * std::mem::size_of::<R>() as u64;
            let res = self.file.read_exact_at(dst, off);
            res.map_err(|e| IngestError::io(self.dir, e))?;
            (at, filled, b) = (at + n as u64, filled + n, b + 1);
        }
        Ok(())
    }
}

/// CPU time of this thread (for AORTA_TIMING: on a loaded machine the wall time of a
/// stretch of one thread counts the time it waited for a core).
#[derive(Clone, Copy)]
struct ThreadTime(std::time::Duration);

impl ThreadTime {
    fn now() -> ThreadTime {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write to.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ThreadTime(std::time::Duration::new(
            ts.tv_sec as u64,
            ts.tv_nsec as u32,
        ))
    }

    fn elapsed(self) -> std::time::Duration {
        ThreadTime::now().0.saturating_sub(self.0)
    }
}

/// Row groups of a table encoded at once: one per two threads of the pool. Each holds its
/// encoded pages and a few Arrow batches.
fn groups_ahead() -> usize {
    (rayon::current_num_threads() / 2).max(1)
}

thread_local! {
    /// A worker's CPU rows of one Arrow batch, kept from batch to batch: 8,192 of them are
    /// just over the 1 MiB above which the allocator maps fresh pages for every batch
    /// (`alloc::tune_allocator`; 60,000 more page faults per GB). Taken out, not borrowed:
    /// building the batch may run other tasks on this thread, which take their own.
    static CPU_ROWS: std::cell::Cell<Vec<CpuRow>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Arrow batches of a CPU row group built at once, before they are encoded.
const CPU_RUN: usize = 4;

/// The Arrow batches of the CPU table, as row ranges: each flush of the sink (after the
/// batch that fills `SINK_ROWS`, and at the end) cut every `ARROW_ROWS`.
fn cpu_batches(ix: &[Ix]) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut cut = |from: u64, to: u64| {
        let mut a = from;
        while a < to {
            let b = (a + ARROW_ROWS as u64).min(to);
            out.push(a..b);
            a = b;
        }
    };
    let (mut start, mut buffered) = (0, 0);
    for x in ix {
        buffered += u64::from(x.rows);
        if buffered >= SINK_ROWS as u64 {
            cut(start, start + buffered);
            (start, buffered) = (start + buffered, 0);
        }
    }
    cut(start, start + buffered);
    out
}

/// Writes the `cpu_ops` table: its row groups built on the pool, appended in order.
pub(super) fn cpu_table(recs: Records, cx: &Ctx, walk_diag: Diagnostics) -> Result<SinkOut> {
    let mut w = TableWriter::new(&CPU_OPS, cx.parts.path(&CPU_OPS));
    let mut diag = walk_diag;
    let mut counts = Counts::default();
    if recs.rows > 0 {
        w.open(sink::cpu_batch(&[], cx.strings).schema())?;
        let batches = cpu_batches(&recs.ix);
        let groups = recs.rows.div_ceil(ROW_GROUP_ROWS as u64) as usize;
        let (mut failed, mut appending) = (None, std::time::Duration::ZERO);
        let (t0, mut at) = (std::time::Instant::now(), Vec::new());
        let ahead = groups_ahead();
        let w = &mut w;
        let groups_of = w.groups();
        ordered(
            groups,
            ahead,
            |k| cpu_group(k, &batches, recs.rows, &groups_of),
            |group| cpu_step(group, &batches, &recs, cx),
            cpu_end,
            |res| {
                let t = ThreadTime::now();
                let res = res.and_then(|(chunks, rows, d, c)| {
                    diag.merge(d);
                    counts.add(c);
                    w.append_chunks(chunks, rows)
                });
                appending += t.elapsed();
                at.push(t0.elapsed().as_millis());
                res.map_err(|e| failed = Some(e)).is_ok()
            },
        );
        if std::env::var_os("AORTA_TIMING").is_some() {
            eprintln!(
                "cpu_ops: {groups} row groups, {ahead} at once, appended at {at:?} ms, in {appending:.2?} CPU"
            );
        }
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(SinkOut {
        written: w.close()?.into_iter().collect(),
        diag,
        steps: BTreeMap::new(),
        counts,
        vendor_hint: None,
    })
}

/// An encoded row group: its column chunks, rows, findings and counts.
type Encoded = (
    Vec<parquet::arrow::arrow_writer::ArrowColumnChunk>,
    usize,
    Diagnostics,
    Counts,
);

/// A CPU row group being built, `CPU_RUN` Arrow batches a step (`ordered`).
struct CpuGroup {
    /// Its rows.
    own: Range<u64>,
    /// The Arrow batches (indexes into the table's) still to build.
    todo: Range<usize>,
    g: crate::writer::Group,
    diag: Diagnostics,
    counts: Counts,
}

/// Row group `k` of the CPU table, about to be built.
fn cpu_group(
    k: usize,
    batches: &[Range<u64>],
    rows: u64,
    groups: &crate::writer::Groups,
) -> Result<CpuGroup> {
    let r = ROW_GROUP_ROWS as u64;
    let own = k as u64 * r..((k as u64 + 1) * r).min(rows);
    let first = batches.partition_point(|b| b.end <= own.start);
    let last = batches.partition_point(|b| b.start < own.end);
    Ok(CpuGroup {
        own,
        todo: first..last,
        g: groups.group(k)?,
        diag: Diagnostics::default(),
        counts: Counts::default(),
    })
}

/// The next `CPU_RUN` Arrow batches of a CPU row group: their records read back, settled,
/// built into the batches the sink built (`batches`), and encoded. False once it is done
/// (or failed).
fn cpu_step(
    group: &mut Result<CpuGroup>,
    batches: &[Range<u64>],
    recs: &Records,
    cx: &Ctx,
) -> bool {
    let Ok(cg) = group else {
        return false;
    };
    let next = cg.todo.start..(cg.todo.start + CPU_RUN).min(cg.todo.end);
    cg.todo.start = next.end;
    let own = cg.own.clone();
    let built = batches[next].par_iter().map(|b| {
        let mine = b.start.max(own.start)..b.end.min(own.end);
        let (mut cache, mut d, mut theirs) = Default::default();
        let mut read: Vec<CpuRec> = Vec::new();
        recs.read(b.clone(), &mut read)?;
        let mut rows = CPU_ROWS.with(std::cell::Cell::take);
        rows.clear();
        rows.extend((b.start..).zip(&read).map(|(at, rec)| {
            // Rows of the batch in the next or last group: their findings are that group's.
            let d = if mine.contains(&at) {
                &mut d
            } else {
                &mut theirs
            };
            cx.settler.cpu(&mut cache, rec, cx.strings, d)
        }));
        drop(read);
        let at = (mine.start - b.start) as usize;
        let mut c = Counts::default();
        for row in &rows[at..at + (mine.end - mine.start) as usize] {
            c.span(row.start, row.end);
        }
        c.cpu = mine.end - mine.start;
        let batch = sink::cpu_batch(&rows, cx.strings);
        CPU_ROWS.with(|r| r.set(rows));
        Ok((batch.slice(at, c.cpu as usize), d, c))
    });
    let built: Vec<Result<_>> = built.collect();
    let mut run = Vec::with_capacity(built.len());
    for res in built {
        match res {
            Ok((b, d, c)) => {
                cg.diag.merge(d);
                cg.counts.add(c);
                run.push(b);
            }
            Err(e) => {
                *group = Err(e);
                return false;
            }
        }
    }
    if let Err(e) = cg.g.encode(&run) {
        *group = Err(e);
        return false;
    }
    !cg.todo.is_empty()
}

/// A built CPU row group, encoded.
fn cpu_end(group: Result<CpuGroup>) -> Result<Encoded> {
    let cg = group?;
    let rows = cg.g.rows;
    Ok((cg.g.close()?, rows, cg.diag, cg.counts))
}

/// One flush of the GPU sink: the records of the batches it took, the rows it held back
/// from the flush before (one per stream seen before), and whether it is the last one.
#[derive(Debug, Clone)]
struct Flush {
    new: Range<u64>,
    kept: usize,
    last: bool,
}

/// The GPU sink's flushes: after each batch that fills `SINK_ROWS` with the rows kept
/// back, and once at the end.
fn gpu_flushes(ix: &[Ix]) -> Vec<Flush> {
    let mut out = Vec::new();
    let (mut at, mut new, mut streams, mut kept) = (0, 0, 0, 0);
    for x in ix {
        new += u64::from(x.rows);
        streams += x.new_streams as usize;
        if kept as u64 + new >= SINK_ROWS as u64 {
            let (new_, last) = (at..at + new, false);
            out.push(Flush {
                new: new_,
                kept,
                last,
            });
            (at, new, kept) = (at + new, 0, streams);
        }
    }
    if kept as u64 + new > 0 {
        out.push(Flush {
            new: at..at + new,
            kept,
            last: true,
        });
    }
    out
}

/// Records settled per task: 4,096 GPU rows (~0.9 MB, as many records ~0.85 MB) stay under
/// the allocator's 1 MiB mapping threshold (`alloc::tune_allocator`), so their buffers come
/// from the heap, not from fresh pages. (32 in the unit tests, like `sink::SINK_ROWS`.)
const SETTLE_ROWS: usize = if cfg!(test) { 1 << 5 } else { 1 << 12 };

/// The new rows of a GPU flush, settled, in pieces of `SETTLE_ROWS`, with their sort keys.
struct New {
    rows: Vec<Vec<GpuRow>>,
    keys: Vec<Key>,
    diag: Diagnostics,
}

/// Settles the new rows of flush `f`.
fn settle_gpu(f: &Flush, recs: &Records, cx: &Ctx) -> Result<New> {
    let step = SETTLE_ROWS as u64;
    let pieces: Vec<u64> = (f.new.start..f.new.end).step_by(SETTLE_ROWS).collect();
    let settled = pieces.par_iter().map(|&a| {
        let mut read: Vec<GpuRec> = Vec::new();
        recs.read(a..(a + step).min(f.new.end), &mut read)?;
        let (mut cache, mut diag) = (StepCache::default(), Diagnostics::default());
        let settled = read.iter();
        let rows: Vec<GpuRow> = settled
            .map(|r| cx.settler.gpu(&mut cache, r, cx.strings, &mut diag))
            .collect();
        // Keys index the flush's buffer: the kept rows first.
        let at = f.kept + (a - f.new.start) as usize;
        let keys = rows.iter().enumerate();
        let keys = keys.map(|(i, r)| (r.device, r.stream, r.start, r.raw_end, (at + i) as u32));
        let keys: Vec<Key> = keys.collect();
        Ok((rows, keys, diag))
    });
    let settled: Vec<Result<_>> = settled.collect();
    let mut new = New {
        rows: Vec::with_capacity(settled.len()),
        keys: Vec::with_capacity((f.new.end - f.new.start) as usize + f.kept),
        diag: Diagnostics::default(),
    };
    for res in settled {
        let (rows, keys, diag): (Vec<GpuRow>, Vec<Key>, _) = res?;
        new.diag.merge(diag);
        new.rows.push(rows);
        new.keys.extend(keys);
    }
    Ok(new)
}

/// A GPU flush's buffer: the rows kept from the flush before, then the new ones.
struct Buffer<'a> {
    kept: &'a [GpuRow],
    new: &'a [Vec<GpuRow>],
}

impl Buffer<'_> {
    /// Row `i` of the buffer (the index a key carries).
    fn row(&self, i: u32) -> &GpuRow {
        let i = i as usize;
        match i.checked_sub(self.kept.len()) {
            None => &self.kept[i],
            Some(j) => &self.new[j / SETTLE_ROWS][j % SETTLE_ROWS],
        }
    }
}

/// What the GPU table carries from one flush to the next.
#[derive(Default)]
struct Carry {
    /// The last row of every stream, not written yet (in stream order).
    kept: Vec<GpuRow>,
    /// Start of the last row written per stream.
    last_written: FxHashMap<(i64, i64), i64>,
}

/// What one piece of a flush gives: its Arrow batch (none when it writes no row), findings,
/// the steps' windows and counts.
type Piece = (
    Option<RecordBatch>,
    Diagnostics,
    BTreeMap<Option<i64>, StepAgg>,
    Counts,
);

/// Writes the `gpu_activities` table: each flush of the sink done on the pool, while the
/// next one's records are settled and the last one's batches encoded.
pub(super) fn gpu_table(recs: Records, cx: &Ctx) -> Result<SinkOut> {
    let mut w = TableWriter::new(&GPU_ACTIVITIES, cx.parts.path(&GPU_ACTIVITIES));
    let (mut diag, mut steps, mut counts): (Diagnostics, _, Counts) = Default::default();
    let flushes = gpu_flushes(&recs.ix);
    if recs.rows > 0 {
        w.open(sink::gpu_batch::<GpuRow>(&[], cx.strings).schema())?;
    }
    let mut chain = Chain::default();
    let mut carry = Carry::default();
    let mut scratch = Vec::new();
    // The settled rows' vectors, for the flush after next.
    let mut next = flushes.first().map(|f| settle_gpu(f, &recs, cx));
    let mut encode: Vec<RecordBatch> = Vec::new();
    // Time on this thread alone (AORTA_TIMING).
    let mut serial = std::time::Duration::ZERO;
    let (t0, mut at) = (std::time::Instant::now(), Vec::new());
    for (i, f) in flushes.iter().enumerate() {
        let t = ThreadTime::now();
        let new = next.take().expect("settled ahead")?;
        diag.merge(new.diag);
        assert_eq!(carry.kept.len(), f.kept, "the kept rows are one per stream");
        let buf = Buffer {
            kept: &carry.kept,
            new: &new.rows,
        };
        let mut keys = std::mem::take(&mut scratch);
        keys.clear();
        let kept_keys = carry.kept.iter().enumerate();
        keys.extend(kept_keys.map(|(i, r)| (r.device, r.stream, r.start, r.raw_end, i as u32)));
        keys.extend_from_slice(&new.keys);
        keys.par_sort_unstable();
        let marks = mark(&keys, f.last);
        serial += t.elapsed();
        let ((pieces, settled), written) = rayon::join(
            || {
                rayon::join(
                    || {
                        let pieces = marks.pieces.par_iter();
                        let pieces =
                            pieces.map(|r| piece(&keys, r.clone(), &buf, &carry, f.last, cx));
                        pieces.collect::<Vec<Piece>>()
                    },
                    || flushes.get(i + 1).map(|f| settle_gpu(f, &recs, cx)),
                )
            },
            || chain.write(&mut w, &encode),
        );
        written?;
        let t = ThreadTime::now();
        next = settled;
        encode.clear();
        for (b, d, s, c) in pieces {
            encode.extend(b);
            diag.merge(d);
            sink::add_steps(&mut steps, s);
            counts.add(c);
        }
        let kept = marks
            .kept
            .iter()
            .map(|&j| buf.row(keys[j].4).clone())
            .collect();
        carry.last_written.extend(marks.written);
        carry.kept = kept;
        scratch = keys;
        serial += t.elapsed();
        at.push(t0.elapsed().as_millis());
    }
    chain.write(&mut w, &encode)?;
    chain.finish(&mut w)?;
    if std::env::var_os("AORTA_TIMING").is_some() {
        let n = flushes.len();
        let end = t0.elapsed().as_millis();
        eprintln!("gpu_activities: {n} flushes done at {at:?} ms, written at {end} ms; serial (keys, marks, kept rows) {serial:.2?} CPU");
    }
    Ok(SinkOut {
        written: w.close()?.into_iter().collect(),
        diag,
        steps,
        counts,
        vendor_hint: None,
    })
}

/// What one pass over a flush's sorted keys finds.
struct Marks {
    /// Ranges of keys that write `ARROW_ROWS` rows each (the last one fewer), covering all.
    pieces: Vec<Range<usize>>,
    /// The keys kept back (the last of each stream, unless this is the last flush).
    kept: Vec<usize>,
    /// Each stream's start of its last row written, where it writes one.
    written: Vec<((i64, i64), i64)>,
}

fn mark(keys: &[Key], last: bool) -> Marks {
    let stream = |k: &Key| (k.0, k.1);
    let mut m = Marks {
        pieces: Vec::new(),
        kept: Vec::new(),
        written: Vec::new(),
    };
    let (mut from, mut rows) = (0, 0);
    for (j, k) in keys.iter().enumerate() {
        let ends = keys.get(j + 1).is_none_or(|n| stream(n) != stream(k));
        if ends && !last {
            m.kept.push(j);
            if let Some(p) = j.checked_sub(1).map(|p| &keys[p]) {
                if stream(p) == stream(k) {
                    m.written.push((stream(k), p.2));
                }
            }
            continue;
        }
        rows += 1;
        if rows == ARROW_ROWS {
            m.pieces.push(from..j + 1);
            (from, rows) = (j + 1, 0);
        }
    }
    if from < keys.len() {
        // The rest: its rows, and kept keys (whose first-of-stream check counts).
        m.pieces.push(from..keys.len());
    }
    m
}

/// The rows that keys `range` of a flush write, as `Sink::flush_gpu` writes them (clipped
/// against the next row of their stream, checked against the last written), with the
/// findings, the steps' windows and counts, built into their Arrow batch.
fn piece(
    keys: &[Key],
    range: Range<usize>,
    buf: &Buffer,
    carry: &Carry,
    last: bool,
    cx: &Ctx,
) -> Piece {
    let stream = |k: &Key| (k.0, k.1);
    let mut diag = Diagnostics::default();
    // Rows as written: the buffer's, with their clipped ends (`sink::Written`).
    let mut out: Vec<(&GpuRow, i64)> = Vec::with_capacity(range.len());
    for j in range {
        let k = &keys[j];
        let r = buf.row(k.4);
        if j.checked_sub(1)
            .is_none_or(|p| stream(&keys[p]) != stream(k))
        {
            sink::out_of_order(&mut diag, cx.strings, &carry.last_written, r);
        }
        match keys.get(j + 1) {
            Some(next) if stream(next) == stream(k) => {
                out.push((r, sink::clipped(&mut diag, cx.strings, r, next.2)));
            }
            _ if !last => {}
            _ => out.push((r, r.end)),
        }
    }
    let (mut steps, mut counts) = Default::default();
    sink::tally_gpu(&out, &mut steps, &mut counts, |_, _| {});
    let batch = (!out.is_empty()).then(|| sink::gpu_batch(&out, cx.strings));
    (batch, diag, steps, counts)
}

/// Runs tasks `0..n` on the pool, at most `ahead` of them started and not yet taken, and
/// hands their results to `take` in order (on whichever thread finished the one it waited
/// for). Task `k` is `begin(k)`, then `step` until it returns false, then `end`; once `take`
/// returns false no more tasks start.
///
/// Why steps: each step is a rayon task of its own. A thread waiting in a `join` (the GPU
/// table's flushes, the launches' lookup) runs tasks it steals, and one that stole a whole
/// row group came back to its own work only a row group later.
fn ordered<S: Send, T: Send>(
    n: usize,
    ahead: usize,
    begin: impl Fn(usize) -> S + Sync,
    step: impl Fn(&mut S) -> bool + Sync,
    end: impl Fn(S) -> T + Sync,
    take: impl FnMut(T) -> bool + Send,
) {
    let o = Ordered {
        n,
        begin,
        step,
        end,
        state: Mutex::new(Taken {
            started: ahead.min(n),
            taken: 0,
            done: BTreeMap::new(),
            take,
            stop: false,
        }),
    };
    let o = &o;
    rayon::scope(|s| {
        for k in 0..ahead.min(n) {
            o.spawn(s, k, (o.begin)(k));
        }
    });
}

/// What `ordered` runs.
struct Ordered<B, P, E, Tk> {
    n: usize,
    begin: B,
    step: P,
    end: E,
    state: Mutex<Tk>,
}

/// What `ordered` has started and taken.
struct Taken<T, F> {
    started: usize,
    taken: usize,
    done: BTreeMap<usize, T>,
    take: F,
    stop: bool,
}

impl<S, T, B, P, E, F> Ordered<B, P, E, Taken<T, F>>
where
    S: Send,
    T: Send,
    B: Fn(usize) -> S + Sync,
    P: Fn(&mut S) -> bool + Sync,
    E: Fn(S) -> T + Sync,
    F: FnMut(T) -> bool + Send,
{
    /// The next step of task `k` (at `state`), as a task of its own.
    fn spawn<'s>(&'s self, s: &rayon::Scope<'s>, k: usize, mut state: S)
    where
        S: 's,
    {
        s.spawn(move |s| {
            if (self.step)(&mut state) {
                self.spawn(s, k, state);
            } else {
                self.done(s, k, (self.end)(state));
            }
        });
    }

    /// Task `k` is done: takes what is next in order, and starts as many tasks.
    fn done<'s>(&'s self, s: &rayon::Scope<'s>, k: usize, res: T)
    where
        S: 's,
    {
        let mut st = self.state.lock().expect("no task panics holding it");
        st.done.insert(k, res);
        while !st.stop {
            let at = st.taken;
            let Some(res) = st.done.remove(&at) else {
                break;
            };
            st.taken += 1;
            if !(st.take)(res) {
                st.stop = true;
            }
            if !st.stop && st.started < self.n {
                let k = st.started;
                st.started += 1;
                self.spawn(s, k, (self.begin)(k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Tasks that finish in reverse order are taken in order, never more than `ahead` of
    /// them running or waiting to be taken, and none start after `take` says stop.
    #[test]
    fn ordered_takes_results_in_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for (n, ahead, stop_at) in [(20, 3, None), (5, 8, None), (0, 2, None), (30, 4, Some(7))] {
            let (running, most, ran) = (
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            );
            let mut taken = Vec::new();
            pool.install(|| {
                ordered(
                    n,
                    ahead,
                    |k| {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        ran.fetch_add(1, Ordering::SeqCst);
                        // Steps: later tasks have fewer, so they finish first.
                        (k, 3 - k % 4)
                    },
                    |(_, left): &mut (usize, usize)| {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                        *left = left.saturating_sub(1);
                        *left > 0
                    },
                    |(k, left)| {
                        assert_eq!(left, 0);
                        k
                    },
                    |k| {
                        running.fetch_sub(1, Ordering::SeqCst);
                        taken.push(k);
                        Some(k) != stop_at
                    },
                )
            });
            let want: Vec<usize> = (0..stop_at.map_or(n, |s| s + 1)).collect();
            assert_eq!(taken, want, "{n} {ahead}");
            assert!(most.load(Ordering::SeqCst) <= ahead, "{n} {ahead}");
            // Stopped: the tasks started before the stop, at most `ahead` past it.
            let ran = ran.load(Ordering::SeqCst);
            assert!(ran <= want.len() + ahead, "{ran}");
        }
    }

    /// The flushes follow the sink: after the batch that fills `SINK_ROWS` (the kept rows,
    /// one per stream seen so far, counted), and once at the end with what is left.
    #[test]
    fn gpu_flushes_fall_where_the_sink_flushes() {
        let ix = |rows: u32, new_streams: u32| Ix {
            off: 0,
            rows,
            new_streams,
        };
        let s = SINK_ROWS as u32;
        // 3 streams; flushes after batch 1 (s - 10 + 10 rows), then after batch 3 (3 kept +
        // s - 3 rows), then the last with 3 kept + 5 rows.
        let f = gpu_flushes(&[ix(s - 10, 2), ix(10, 1), ix(s - 4, 0), ix(1, 0), ix(5, 0)]);
        let got: Vec<_> = f.iter().map(|f| (f.new.clone(), f.kept, f.last)).collect();
        let s = s as u64;
        assert_eq!(
            got,
            vec![
                (0..s, 0, false),
                (s..2 * s - 3, 3, false),
                (2 * s - 3..2 * s + 2, 3, true)
            ]
        );
        // No rows at all: no flush.
        assert!(gpu_flushes(&[ix(0, 0)]).is_empty());
    }

    /// A CPU flush is cut into Arrow batches from its own first row.
    #[test]
    fn cpu_batches_restart_at_each_flush() {
        let ix = |rows: u32| Ix {
            off: 0,
            rows,
            new_streams: 0,
        };
        let (s, a) = (SINK_ROWS as u64, ARROW_ROWS as u64);
        let got = cpu_batches(&[ix(s as u32 + 3), ix(a as u32 + 1)]);
        let mut want: Vec<Range<u64>> = (0..s / a).map(|i| i * a..(i + 1) * a).collect();
        want.push(s..s + 3);
        want.push(s + 3..s + 3 + a);
        want.push(s + 3 + a..s + 4 + a);
        assert_eq!(got, want);
    }
}
