//! Where parsed rows go: the same-stream clipping, step windows, counts, and the Parquet
//! writers of `gpu_activities` and `cpu_ops`, flushed every `FLUSH_ROWS` so memory stays flat.
//! On the pool a flush builds the next Arrow batch while the last is encoded (`write_chunks`).
//!
//! The Kineto settle on many cores (`kineto::pending::groups`) does what these sinks do
//! without them, flush by flush and row group by row group on the pool; it shares their
//! parts (`Key`, `clipped`, `out_of_order`, `tally_gpu`, the batch builders), so the
//! two cannot drift apart, and a test compares their files byte for byte.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::classify::Kind;
use crate::diag::Diagnostics;
use crate::dict::{labels, DictBuilder};
use crate::error::Result;
use crate::rows::{Batch, CpuRow, GpuRow, Interner};
use crate::schema::{Table, CPU_OPS, GPU_ACTIVITIES};
use crate::writer::{i64_array, opt_i64_array, Cols, TableWriter};

mod keys;
mod steps;
pub(crate) use keys::{key, sort_keys, Key};
pub(crate) use steps::{StepAgg, StepAggs};

/// Rows buffered per table before they are written as one Arrow batch.
pub(crate) const FLUSH_ROWS: usize = 1 << 17;

/// Rows a sink buffers per table before it flushes them: `FLUSH_ROWS`, but 512 in the
/// unit tests, so that the corpus's small traces make many flushes, Arrow batches and row
/// groups (`ARROW_ROWS`, `writer::ROW_GROUP_ROWS`) for the settle's tests to compare.
pub(crate) const SINK_ROWS: usize = if cfg!(test) { 1 << 9 } else { FLUSH_ROWS };

/// Rows per Arrow batch handed to the Parquet writer. A flush is cut into batches this
/// small so that the rows a batch reads (~2 MB) stay in cache while its ~25 columns are
/// built one after another, and its arrays (64 KiB per int64 column) are reused from the
/// heap instead of being mapped and faulted in afresh (glibc maps blocks over 1 MiB).
/// (128 in the unit tests: see `SINK_ROWS`.)
pub(crate) const ARROW_ROWS: usize = if cfg!(test) { 1 << 7 } else { 1 << 13 };

/// Where one input file's tables go (inside the staging directory).
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    pub root: PathBuf,
    pub run: String,
    pub rank: i64,
    pub tag: String,
}

impl Parts {
    pub(crate) fn rel(&self, table: &Table) -> PathBuf {
        crate::schema::partition_dir(table.name, &self.run, self.rank)
            .join(format!("part-{}.parquet", self.tag))
    }

    pub(crate) fn path(&self, table: &Table) -> PathBuf {
        self.root.join(self.rel(table))
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Counts {
    pub gpu: u64,
    pub kernels: u64,
    pub cpu: u64,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// GPU activities per device index.
    pub devices: BTreeMap<i64, u64>,
}

impl Counts {
    pub(crate) fn span(&mut self, start: i64, end: i64) {
        self.first_ns = Some(self.first_ns.map_or(start, |f| f.min(start)));
        self.last_ns = Some(self.last_ns.map_or(end, |l| l.max(end)));
    }

    /// Counts written CPU rows.
    pub(crate) fn add_cpu(&mut self, rows: &[CpuRow]) {
        for r in rows {
            self.span(r.start, r.end);
        }
        self.cpu += rows.len() as u64;
    }

    /// Adds the counts of other rows of the same file.
    pub(crate) fn add(&mut self, oc: Counts) {
        self.gpu += oc.gpu;
        self.kernels += oc.kernels;
        self.cpu += oc.cpu;
        if let (Some(a), Some(b)) = (oc.first_ns, oc.last_ns) {
            self.span(a, b);
        }
        for (d, n) in oc.devices {
            *self.devices.entry(d).or_default() += n;
        }
    }
}

pub(crate) struct Sink {
    /// Shared with the other table's sink in a settle (`with_strings`): one copy of strings
    /// that grow with the trace (a `ProfilerStep#N` name a step), not one a table.
    strings: Arc<Interner>,
    gpu_buf: Vec<GpuRow>,
    /// The sort key of every buffered GPU row (see `sort_keys`), and scratch for sorting.
    keys: Vec<Key>,
    scratch: Vec<Key>,
    cpu_buf: Vec<CpuRow>,
    gpu_w: TableWriter,
    cpu_w: TableWriter,
    pub diag: Diagnostics,
    pub steps: StepAggs,
    /// Start of the last activity written per (device, stream).
    last_written: FxHashMap<(i64, i64), i64>,
    pub counts: Counts,
}

/// What a finished sink leaves behind.
pub(crate) struct SinkOut {
    pub written: Vec<(PathBuf, u64)>,
    pub diag: Diagnostics,
    pub steps: StepAggs,
    pub counts: Counts,
    /// `cuda` or `rocm` from runtime API names (`cudaLaunchKernel` / `hipLaunchKernel`).
    pub vendor_hint: Option<&'static str>,
}

impl SinkOut {
    /// Joins the outputs of two sinks that wrote different tables of one file.
    pub(crate) fn merge(mut self, o: SinkOut) -> SinkOut {
        self.written.extend(o.written);
        self.diag.merge(o.diag);
        self.steps.merge(o.steps);
        self.counts.add(o.counts);
        self.vendor_hint = self.vendor_hint.or(o.vendor_hint);
        self
    }
}

/// The vendor whose runtime API names (`cuda*`/`cu*` vs `hip*`) appear in `strings`.
pub(crate) fn vendor_hint(strings: &Interner) -> Option<&'static str> {
    let api = |s: &str, p: &str| {
        s.strip_prefix(p)
            .and_then(|r| r.chars().next())
            .is_some_and(|c| c.is_ascii_uppercase())
    };
    let (mut cuda, mut hip) = (0, 0);
    for s in strings.iter() {
        cuda += (api(s, "cuda") || api(s, "cu")) as u32;
        hip += api(s, "hip") as u32;
    }
    match (cuda, hip) {
        (0, 0) => None,
        (c, h) if h > c => Some("rocm"),
        _ => Some("cuda"),
    }
}

impl Sink {
    pub(crate) fn new(parts: &Parts) -> Sink {
        Sink::with_strings(parts, Arc::default())
    }

    /// A sink whose string ids are those of `strings` (see `add_rows`).
    pub(crate) fn with_strings(parts: &Parts, strings: Arc<Interner>) -> Sink {
        Sink {
            strings,
            gpu_buf: Vec::new(),
            keys: Vec::new(),
            scratch: Vec::new(),
            cpu_buf: Vec::new(),
            gpu_w: TableWriter::new(&GPU_ACTIVITIES, parts.path(&GPU_ACTIVITIES)),
            cpu_w: TableWriter::new(&CPU_OPS, parts.path(&CPU_OPS)),
            diag: Diagnostics::default(),
            steps: StepAggs::default(),
            last_written: FxHashMap::default(),
            counts: Counts::default(),
        }
    }

    pub(crate) fn add(&mut self, batch: Batch) -> Result<()> {
        let (gpu, cpu, diag) = batch.remap(Arc::make_mut(&mut self.strings));
        self.add_rows(gpu, cpu, diag)
    }

    /// Adds rows whose string ids are already the sink's own.
    pub(crate) fn add_rows(
        &mut self,
        gpu: Vec<GpuRow>,
        cpu: Vec<CpuRow>,
        diag: Diagnostics,
    ) -> Result<()> {
        self.diag.merge(diag);
        self.push_gpu(gpu);
        room(&mut self.cpu_buf, cpu.len());
        self.cpu_buf.extend(cpu);
        if self.gpu_buf.len() >= SINK_ROWS {
            self.flush_gpu(false)?;
        }
        if self.cpu_buf.len() >= SINK_ROWS {
            self.flush_cpu()?;
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<SinkOut> {
        self.flush_gpu(true)?;
        self.flush_cpu()?;
        let written = [self.gpu_w.close()?, self.cpu_w.close()?]
            .into_iter()
            .flatten()
            .collect();
        Ok(SinkOut {
            written,
            vendor_hint: vendor_hint(&self.strings),
            diag: self.diag,
            steps: self.steps,
            counts: self.counts,
        })
    }

    /// Sorts the buffer per stream, clips same-stream overlaps and writes all but the last
    /// activity of each stream (kept to be clipped against the next buffer), unless `last`.
    /// Rows are written from the buffer with their clipped ends beside them (`Written`):
    /// a copy of the buffer's rows was 60 MB of the peak.
    fn flush_gpu(&mut self, last: bool) -> Result<()> {
        sort_keys(&mut self.keys, &mut self.scratch);
        let buf = std::mem::take(&mut self.gpu_buf);
        let keys = std::mem::take(&mut self.keys);
        let (out, kept) = written(
            &keys,
            0..keys.len(),
            |i| &buf[i as usize],
            last,
            (&self.strings, &self.last_written),
            &mut self.diag,
        );
        let keep: Vec<GpuRow> = kept.iter().map(|&i| buf[i as usize].clone()).collect();
        let res = self.write_gpu(&out);
        drop(out);
        self.keys = keys;
        self.keys.clear();
        self.gpu_buf = buf;
        self.gpu_buf.clear();
        self.push_gpu(keep);
        res
    }

    /// Buffers GPU rows with their sort keys, taken while the rows are in cache.
    fn push_gpu(&mut self, rows: Vec<GpuRow>) {
        room(&mut self.keys, rows.len());
        room(&mut self.gpu_buf, rows.len());
        let at = self.gpu_buf.len();
        let keys = rows.iter().enumerate().map(|(i, r)| key(r, at + i));
        self.keys.extend(keys);
        self.gpu_buf.extend(rows);
    }

    fn write_gpu(&mut self, rows: &[(&GpuRow, i64)]) -> Result<()> {
        self.tally_gpu(rows);
        write_chunks(&mut self.gpu_w, rows, |c| gpu_batch(c, &self.strings))
    }

    /// Steps, counts and the last start per stream.
    fn tally_gpu(&mut self, rows: &[(&GpuRow, i64)]) {
        let last_written = &mut self.last_written;
        tally_gpu(rows, &mut self.steps, &mut self.counts, |stream, start| {
            last_written.insert(stream, start);
        });
    }

    fn flush_cpu(&mut self) -> Result<()> {
        self.counts.add_cpu(&self.cpu_buf);
        let strings = &self.strings;
        let res = write_chunks(&mut self.cpu_w, &self.cpu_buf, |c| cpu_batch(c, strings));
        self.cpu_buf.clear();
        res
    }
}

/// Makes room in `v` for `more` rows: at first for a flush's rows and an eighth more (a
/// batch's rows fit), not for the next power of two. Why: a buffer that doubles past
/// `SINK_ROWS` holds twice what a flush writes, 35 MB of the peak in the GPU and CPU
/// buffers together. A larger batch still fits: it grows the buffer to what it needs.
fn room<T>(v: &mut Vec<T>, more: usize) {
    if v.len() + more > v.capacity() {
        let want = (v.len() + more).max(SINK_ROWS + SINK_ROWS / 8);
        v.reserve_exact(want - v.len());
    }
}

/// The end of `r` clipped to where the next activity of its stream starts, with a
/// diagnostic when that is before it ends.
pub(crate) fn clipped(
    diag: &mut Diagnostics,
    strings: &Interner,
    r: &GpuRow,
    next_start: i64,
) -> i64 {
    if next_start >= r.end {
        return r.end;
    }
    let ns = r.end - next_start;
    diag.add("same_stream_overlap", None, || {
        let name = strings.get(r.name);
        format!(
            "{name} on stream {} ends {ns} ns after the next one starts",
            r.stream
        )
    });
    next_start.max(r.start)
}

/// The rows of `keys[range]` (sorted: `sort_keys`) as a flush writes them, `row` giving the
/// buffer's row of a key: each clipped against the next row of its stream, with a finding
/// where a stream's first row in the flush starts before the last one an earlier flush
/// wrote of it (`last_written`). The last row of each stream is kept back for the next flush
/// (its buffer index returned) unless this flush is the `last`. Keys outside `range` are
/// looked at, never written: the settle in groups writes a flush in pieces.
pub(crate) fn written<'a>(
    keys: &[Key],
    range: Range<usize>,
    row: impl Fn(u32) -> &'a GpuRow,
    last: bool,
    (strings, last_written): (&Interner, &FxHashMap<(i64, i64), i64>),
    diag: &mut Diagnostics,
) -> (Vec<(&'a GpuRow, i64)>, Vec<u32>) {
    let stream = |k: &Key| (k.0, k.1);
    let (mut out, mut kept) = (Vec::with_capacity(range.len()), Vec::new());
    for j in range {
        let k = &keys[j];
        let r = row(k.4);
        if j.checked_sub(1)
            .is_none_or(|p| stream(&keys[p]) != stream(k))
        {
            out_of_order(diag, strings, last_written, r);
        }
        match keys.get(j + 1) {
            Some(next) if stream(next) == stream(k) => {
                out.push((r, clipped(diag, strings, r, next.2)));
            }
            _ if !last => kept.push(k.4),
            _ => out.push((r, r.end)),
        }
    }
    (out, kept)
}

/// A GPU row as a flush writes it: a row and its end (clipped).
///
/// Why not rows alone: the settle on the pool (`kineto::pending::groups`) writes a flush's
/// rows straight from its buffer, with their clipped ends beside them, instead of copying
/// each ~230-byte row once more (the copy was most of a flush's serial time).
pub(crate) trait Written: Sync {
    fn row(&self) -> &GpuRow;
    fn end(&self) -> i64;
}

impl Written for (&GpuRow, i64) {
    fn row(&self) -> &GpuRow {
        self.0
    }

    fn end(&self) -> i64 {
        self.1
    }
}

/// The finding for `r`, the first row of its stream in a flush, when it starts before the
/// last row of its stream that an earlier flush wrote.
pub(crate) fn out_of_order(
    diag: &mut Diagnostics,
    strings: &Interner,
    last_written: &FxHashMap<(i64, i64), i64>,
    r: &GpuRow,
) {
    if last_written
        .get(&(r.device, r.stream))
        .is_some_and(|&w| r.start < w)
    {
        diag.add("stream_out_of_order", None, || strings.get(r.name).into());
    }
}

/// Adds written GPU rows to the steps' windows and the counts, once per run of rows that
/// share a stream and a step (rows come sorted by stream and start) rather than once per
/// row; `written` gets each run's stream and the start of its last row.
pub(crate) fn tally_gpu<W: Written>(
    rows: &[W],
    steps: &mut StepAggs,
    counts: &mut Counts,
    mut written: impl FnMut((i64, i64), i64),
) {
    let same = |a: &W, b: &W| {
        let (a, b) = (a.row(), b.row());
        (a.device, a.stream, a.step) == (b.device, b.stream, b.step)
    };
    let mut fresh = steps.fresh();
    for run in rows.chunk_by(same) {
        let (first, last) = (run[0].row(), run[run.len() - 1].row());
        written((first.device, first.stream), last.start);
        let start = run
            .iter()
            .map(|r| r.row().start)
            .min()
            .expect("runs are not empty");
        let end = run.iter().map(W::end).max().expect("runs are not empty");
        let kernels = run.iter().filter(|r| r.row().kind == Kind::Kernel).count() as u64;
        fresh.note(first.step, (start, end), run.len() as u64, kernels);
        counts.kernels += kernels;
        *counts.devices.entry(first.device).or_default() += run.len() as u64;
        counts.span(start, end);
    }
    fresh.done();
    counts.gpu += rows.len() as u64;
}

/// Writes `rows` as Arrow batches of `ARROW_ROWS`, each built by `batch`.
///
/// Why: on the pool, a batch's columns are built in parallel, then encoded in parallel
/// (`writer::Open`), and each step waits for its slowest column (the CPU table has 13), so on
/// many cores most workers idled in both. Here the next batch is built while the last one is
/// encoded: twice the work at each wait. The writer gets the same batches in the same order.
fn write_chunks<R: Sync>(
    w: &mut TableWriter,
    rows: &[R],
    batch: impl Fn(&[R]) -> RecordBatch + Sync,
) -> Result<()> {
    let mut chunks = rows.chunks(ARROW_ROWS);
    if !crate::writer::on_pool() || rayon::current_num_threads() < 2 {
        return chunks.try_for_each(|c| w.write(&batch(c)));
    }
    let mut next = chunks.next().map(&batch);
    while let Some(b) = next {
        let (built, written) = rayon::join(|| chunks.next().map(&batch), || w.write(&b));
        written?;
        next = built;
    }
    Ok(())
}

/// Builds the columns of a batch on the current rayon pool, one task per column (each with
/// its own dictionary scratch), and assembles them in schema order.
///
/// Why: with the encoding of columns spread over the pool (`writer::Open`), building the
/// Arrow arrays from the rows was the larger part of what stayed serial in a sink.
fn par_batch<R: Sync>(
    table: &'static Table,
    rows: &[R],
    s: &Interner,
    col: impl Fn(&str, &[R], &Interner, &mut DictBuilder) -> ArrayRef + Sync,
) -> RecordBatch {
    let names: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    // Off the pool (a writer thread), one column after another (see `writer::on_pool`).
    let arrays: Vec<ArrayRef> = if crate::writer::on_pool() {
        // Each worker keeps its scratch (sized to the strings) from batch to batch.
        thread_local!(static DICT: RefCell<DictBuilder> = RefCell::default());
        let arrays = names.par_iter();
        arrays
            .map(|name| DICT.with(|d| col(name, rows, s, &mut d.borrow_mut())))
            .collect()
    } else {
        let mut d = DictBuilder::default();
        names
            .iter()
            .map(|name| col(name, rows, s, &mut d))
            .collect()
    };
    let mut b = Cols::new(table);
    for (name, a) in names.into_iter().zip(arrays) {
        b.push(name, a);
    }
    b.finish()
}

pub(crate) fn gpu_batch<W: Written>(rows: &[W], s: &Interner) -> RecordBatch {
    par_batch(&GPU_ACTIVITIES, rows, s, gpu_col::<W>)
}

fn gpu_col<W: Written>(name: &str, rows: &[W], s: &Interner, d: &mut DictBuilder) -> ArrayRef {
    // Each getter is a closure of its own, passed on generically, so that it is inlined into
    // the loop that builds its column: as a `fn` pointer it was an indirect call per row and
    // column, ~3 % of a Kineto ingest's CPU (docs/PERFORMANCE.md).
    let each = || rows.iter().map(W::row);
    match name {
        "device" => i64_array(each().map(|r| r.device)),
        "stream" => i64_array(each().map(|r| r.stream)),
        "kind" => labels(each().map(|r| Some(r.kind.as_str()))),
        "name" => d.build(s, each().map(|r| Some(r.name))),
        "category" => labels(each().map(|r| Some(r.category.as_str()))),
        "comm_op" => labels(each().map(|r| r.comm_op)),
        "start_ns" => i64_array(each().map(|r| r.start)),
        // The clipped end (a flush writes rows with their ends beside them: `Written`).
        "end_ns" => i64_array(rows.iter().map(W::end)),
        "raw_end_ns" => i64_array(each().map(|r| r.raw_end)),
        "correlation" => opt_i64_array(each().map(|r| r.correlation)),
        "external_id" => opt_i64_array(each().map(|r| r.external_id)),
        "step" => opt_i64_array(each().map(|r| r.step)),
        "step_source" => labels(each().map(|r| Some(r.step_source.as_str()))),
        "grid_x" => opt_i64_array(each().map(|r| r.grid[0])),
        "grid_y" => opt_i64_array(each().map(|r| r.grid[1])),
        "grid_z" => opt_i64_array(each().map(|r| r.grid[2])),
        "block_x" => opt_i64_array(each().map(|r| r.block[0])),
        "block_y" => opt_i64_array(each().map(|r| r.block[1])),
        "block_z" => opt_i64_array(each().map(|r| r.block[2])),
        "bytes" => opt_i64_array(each().map(|r| r.bytes)),
        "collective_name" => d.build(s, each().map(|r| r.coll.as_ref()?.collective_name)),
        "in_msg_nelems" => opt_i64_array(each().map(|r| r.coll.as_ref()?.in_msg_nelems)),
        "out_msg_nelems" => opt_i64_array(each().map(|r| r.coll.as_ref()?.out_msg_nelems)),
        "group_size" => opt_i64_array(each().map(|r| r.coll.as_ref()?.group_size)),
        "dtype" => d.build(s, each().map(|r| r.coll.as_ref()?.dtype)),
        "process_group" => d.build(s, each().map(|r| r.coll.as_ref()?.process_group)),
        "process_group_ranks" => d.build(s, each().map(|r| r.coll.as_ref()?.process_group_ranks)),
        "collective_seq" => opt_i64_array(each().map(|r| r.coll.as_ref()?.collective_seq)),
        "comms_id" => d.build(s, each().map(|r| r.coll.as_ref()?.comms_id)),
        "gemm_m" => opt_i64_array(each().map(|r| r.coll.as_ref()?.gemm[0])),
        "gemm_n" => opt_i64_array(each().map(|r| r.coll.as_ref()?.gemm[1])),
        "gemm_k" => opt_i64_array(each().map(|r| r.coll.as_ref()?.gemm[2])),
        other => unreachable!("gpu_activities has no column {other} here (schema.rs)"),
    }
}

pub(crate) fn cpu_batch(rows: &[CpuRow], s: &Interner) -> RecordBatch {
    par_batch(&CPU_OPS, rows, s, cpu_col)
}

/// As `gpu_col`: each getter inlined into its column's loop.
fn cpu_col(name: &str, rows: &[CpuRow], s: &Interner, d: &mut DictBuilder) -> ArrayRef {
    let each = || rows.iter();
    match name {
        "category" => labels(each().map(|r| Some(r.category.as_str()))),
        "name" => d.build(s, each().map(|r| Some(r.name))),
        "pid" => opt_i64_array(each().map(|r| r.pid)),
        "tid" => opt_i64_array(each().map(|r| r.tid)),
        "start_ns" => i64_array(each().map(|r| r.start)),
        "end_ns" => i64_array(each().map(|r| r.end)),
        "correlation" => opt_i64_array(each().map(|r| r.correlation)),
        "external_id" => opt_i64_array(each().map(|r| r.external_id)),
        "step" => opt_i64_array(each().map(|r| r.step)),
        "input_dims" => d.build(s, each().map(|r| r.input_dims)),
        "input_types" => d.build(s, each().map(|r| r.input_types)),
        "concrete_inputs" => d.build(s, each().map(|r| r.concrete_inputs)),
        "input_strides" => d.build(s, each().map(|r| r.input_strides)),
        other => unreachable!("cpu_ops has no column {other} here (schema.rs)"),
    }
}

#[cfg(test)]
mod tests;
