//! The `gpu_activities` table of the settle in groups: each flush of the sink on the pool.

use std::ops::Range;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::super::{GpuRec, Ix};
use super::{Ctx, Records, ThreadTime};
use crate::diag::Diagnostics;
use crate::error::Result;
use crate::kineto::links::StepCache;
use crate::rows::GpuRow;
use crate::schema::GPU_ACTIVITIES;
use crate::sink::{self, Counts, Key, SinkOut, StepAggs, ARROW_ROWS, SINK_ROWS};
use crate::writer::{Chain, TableWriter};

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
            out.push(Flush {
                new: at..at + new,
                kept,
                last: false,
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
        let keys: Vec<Key> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| sink::key(r, at + i))
            .collect();
        Ok((rows, keys, diag))
    });
    let settled: Vec<Result<_>> = settled.collect();
    let mut new = New {
        rows: Vec::with_capacity(settled.len()),
        keys: Vec::with_capacity((f.new.end - f.new.start) as usize),
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
type Piece = (Option<RecordBatch>, Diagnostics, StepAggs, Counts);

/// Writes the `gpu_activities` table: each flush of the sink done on the pool, its batches
/// encoded while the next one's records are settled.
///
/// Why not the next flush settled beside this one's pieces (as it was): the table then held
/// two flushes of rows (~30 MB each) and the batches of two, and since the launches' lookup
/// takes ~40 ms instead of ~100 the GPU table runs beside the CPU table's row groups, not
/// after them: peak RSS at 16 jobs rose from ~205 to 231–249 MB (1 GiB fsdp2 file). Built
/// one after the other, the pieces and the next settle hold one flush of rows: 202–211 MB,
/// at the same speed (docs/PERFORMANCE.md).
pub(in crate::kineto::pending) fn gpu_table(recs: Records, cx: &Ctx) -> Result<SinkOut> {
    let mut w = TableWriter::new(&GPU_ACTIVITIES, cx.parts.path(&GPU_ACTIVITIES));
    let (mut diag, mut steps, mut counts): (Diagnostics, StepAggs, Counts) = Default::default();
    let flushes = gpu_flushes(&recs.ix);
    if recs.rows > 0 {
        w.open(sink::gpu_batch::<(&GpuRow, i64)>(&[], cx.strings).schema())?;
    }
    let mut chain = Chain::default();
    // The rows kept back by the flush before, and the last starts it wrote.
    let mut carry = Carry::default();
    let mut ready = match flushes.first() {
        Some(f) => Some(prepare(f, settle_gpu(f, &recs, cx)?, &[])),
        None => None,
    };
    // Time on this thread alone (AORTA_TIMING).
    let mut serial = std::time::Duration::ZERO;
    let (t0, mut at) = (std::time::Instant::now(), Vec::new());
    for (i, f) in flushes.iter().enumerate() {
        let t = ThreadTime::now();
        let mut r = ready.take().expect("prepared ahead");
        diag.merge(std::mem::take(&mut r.new.diag));
        let buf = Buffer {
            kept: &carry.kept,
            new: &r.new.rows,
        };
        // What the next flush starts from: known from the marks, before the pieces.
        let mut last_written = carry.last_written.clone();
        last_written.extend(r.marks.written.iter().copied());
        let kept = r.marks.kept.iter().map(|&j| buf.row(r.keys[j].4).clone());
        let next_carry = Carry {
            kept: kept.collect(),
            last_written,
        };
        serial += t.elapsed();
        let pieces = r.marks.pieces.par_iter();
        let pieces = pieces.map(|p| piece(&r.keys, p.clone(), &buf, &carry, f.last, cx));
        let pieces: Vec<Piece> = pieces.collect();
        let t = ThreadTime::now();
        let mut encode = Vec::with_capacity(pieces.len());
        for (b, d, s, c) in pieces {
            encode.extend(b);
            diag.merge(d);
            steps.merge(s);
            counts.add(c);
        }
        // This flush's rows are in its batches now: gone before the next flush's come.
        drop(r);
        carry = next_carry;
        serial += t.elapsed();
        let (prepared, written) = rayon::join(
            || {
                let f = flushes.get(i + 1)?;
                let new = settle_gpu(f, &recs, cx);
                Some(new.map(|new| prepare(f, new, &carry.kept)))
            },
            || chain.write(&mut w, &encode),
        );
        written?;
        ready = prepared.transpose()?;
        at.push(t0.elapsed().as_millis());
    }
    chain.finish(&mut w)?;
    if std::env::var_os("AORTA_TIMING").is_some() {
        let n = flushes.len();
        let end = t0.elapsed().as_millis();
        eprintln!("gpu_activities: {n} flushes done at {at:?} ms, written at {end} ms; serial (kept rows, merging) {serial:.2?} CPU");
    }
    Ok(SinkOut {
        written: w.close()?.into_iter().collect(),
        diag,
        steps,
        counts,
        vendor_hint: None,
    })
}

/// A flush ready for its pieces: its new rows settled, its buffer's keys sorted and marked.
struct Ready {
    new: New,
    keys: Vec<Key>,
    marks: Marks,
}

/// Sorts and marks the keys of flush `f`'s buffer: the rows `kept` back before it, then its
/// `new` rows. (On the pool: the buffer index in a key makes the order total, so it is the
/// order `sink::sort_keys` gives.)
fn prepare(f: &Flush, new: New, kept: &[GpuRow]) -> Ready {
    assert_eq!(kept.len(), f.kept, "the kept rows are one per stream");
    let mut keys = Vec::with_capacity(kept.len() + new.keys.len());
    keys.extend(kept.iter().enumerate().map(|(i, r)| sink::key(r, i)));
    keys.extend_from_slice(&new.keys);
    keys.par_sort_unstable();
    let marks = mark(&keys, f.last);
    Ready { new, keys, marks }
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
    let mut diag = Diagnostics::default();
    // Kept rows are known from the marks already (`mark`).
    let (out, _) = sink::written(
        keys,
        range,
        |i| buf.row(i),
        last,
        (cx.strings, &carry.last_written),
        &mut diag,
    );
    let (mut steps, mut counts) = Default::default();
    sink::tally_gpu(&out, &mut steps, &mut counts, |_, _| {});
    let batch = (!out.is_empty()).then(|| sink::gpu_batch(&out, cx.strings));
    (batch, diag, steps, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
