//! The `cpu_ops` table of the settle in groups: row groups built at once, in steps.

use std::ops::Range;

use rayon::prelude::*;

use super::super::{CpuRec, Ix};
use super::ordered::ordered;
use super::{Ctx, Records, ThreadTime};
use crate::diag::Diagnostics;
use crate::error::Result;
use crate::rows::CpuRow;
use crate::schema::CPU_OPS;
use crate::sink::{self, Counts, SinkOut, ARROW_ROWS, SINK_ROWS};
use crate::writer::{TableWriter, ROW_GROUP_ROWS};

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
pub(in crate::kineto::pending) fn cpu_table(
    recs: Records,
    cx: &Ctx,
    walk_diag: Diagnostics,
) -> Result<SinkOut> {
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
        steps: Default::default(),
        counts,
        vendor_hint: None,
    })
}

/// An encoded row group: its column chunks, rows, findings and counts.
type Encoded = (Vec<crate::writer::Chunk>, usize, Diagnostics, Counts);

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
        let (at, n) = (
            (mine.start - b.start) as usize,
            (mine.end - mine.start) as usize,
        );
        let mut c = Counts::default();
        c.add_cpu(&rows[at..at + n]);
        let batch = sink::cpu_batch(&rows, cx.strings);
        CPU_ROWS.with(|r| r.set(rows));
        Ok((batch.slice(at, n), d, c))
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

#[cfg(test)]
mod tests {
    use super::*;

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
