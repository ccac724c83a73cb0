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
//!   task per column (`writer::Group`). Half as many row groups as the pool has threads are
//!   built at once, each in steps of `CPU_RUN` batches (`ordered`), and appended in order.
//! - **GPU rows** carry state from flush to flush: the rows kept back (one per stream, to
//!   be clipped against the next flush), and the last start written per stream (for
//!   `stream_out_of_order`). Both are found from the sorted keys alone, one pass over
//!   them (`mark`); the rest of a flush (clipping, findings, the steps' windows and counts,
//!   building the Arrow batches straight from the buffer: `sink::Written`) is cut into pieces
//!   of one Arrow batch each, built in parallel and joined in order. The next flush's records
//!   are read and settled while this flush's batches are encoded (`writer::Chain`): one
//!   flush of rows in memory at a time (`gpu_table` says why).
//!   The launches' lookup, which only GPU rows ask, is built while the CPU rows are
//!   (`settle.rs`), on one thread: not on the pool that the CPU row groups fill.
//!
//! Findings are merged in file order (those with no offset keep the first example, as
//! before); the steps' windows and counts are sums, minima and maxima, so the pieces add up
//! to what one sink counted. Every file is byte for byte what one thread writes (a test
//! settles every corpus trace both ways).

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bytemuck::Pod;

use super::settle::Settler;
use super::{Ix, SpillFile};
use crate::error::{IngestError, Result};
use crate::rows::Interner;
use crate::sink::Parts;

/// Threads the pool needs for the settle here: on one, the sinks of `settle.rs`. On two, the
/// settle here took 2 % (914 MB fsdp2) to 5 % (2 GB rocm mix) less wall time than the sinks
/// for ~10 MB more peak memory (one row group of a table at a time, as they encode it, but
/// both tables' settles side by side; docs/PERFORMANCE.md).
const MIN_THREADS: usize = 2;

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
    file: SpillFile,
    ix: Vec<Ix>,
    /// Row number of each batch's first record.
    starts: Vec<u64>,
    rows: u64,
    dir: &'a Path,
}

impl<'a> Records<'a> {
    pub(super) fn new(file: SpillFile, ix: Vec<Ix>, dir: &'a Path) -> Records<'a> {
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
        super::settle::fit(out, (range.end - range.start) as usize);
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

mod cpu;
mod gpu;
mod ordered;

pub(super) use cpu::cpu_table;
pub(super) use gpu::gpu_table;
