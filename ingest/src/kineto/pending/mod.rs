//! Rows whose steps wait for the end of the file.
//!
//! Why: a row's step is the `ProfilerStep#N` span around it (CPU rows) or around the runtime
//! call that launched it (GPU rows), and Kineto writes spans and launches wherever its
//! buffers drained (after the ops they contain; kernels before their launches), and the
//! base time wherever it likes. Reading the file twice, once for these links and once for
//! the rows, cost a quarter of single-core ingest time. So the one walk writes each batch
//! of rows, as fixed-size records with what their steps wait for, to an unnamed temporary
//! file (about a fifth of the trace's size; it sits in the page cache, not in the process),
//! and `settle` reads the batches back in file order once every span and launch is known,
//! gives each row its step and absolute times, and hands them to the sink batch by batch,
//! as the two-pass reader did.
//!
//! On many cores neither end may run on one thread alone (docs/PERFORMANCE.md, issue 33): the
//! spill thread only re-maps strings, classifies each GPU name once (the walk leaves GPU rows
//! unclassified, so that it never waits for the rule table to compile: `classify::sets`) and
//! makes records, and a thread of its own writes them
//! (so the walk's queue of batches no longer fills behind it: 20 MB less peak memory at one
//! job) and indexes each batch (`Ix`: where its records are, how many, how many GPU streams
//! it adds). On one thread the settle (`settle.rs`) feeds the sinks batch by batch (so does the
//! fuzzer, which encodes nothing, reading a group of batches while the last group is settled
//! on the pool), so the sink flushes after the very batches it did. On two or more
//! (`groups.rs`) the index says where every flush, Arrow batch and row group of the sinks
//! falls, and many of them are built at once; every file is byte for byte what one thread
//! writes either way.

use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytemuck::{Pod, Zeroable};

use rustc_hash::FxHashMap;

use crate::classify::{Category, Class, Classifier, Kind};
use crate::diag::Diagnostics;
use crate::error::{IngestError, Result};
use crate::rows::{Batch, CollArgs, CpuCategory, CpuRow, GpuRow, Interner, StepSource};
use crate::sink::{Parts, Sink, SinkOut};

mod groups;
mod settle;
pub(crate) use settle::settle;

/// What a CPU row's step waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuWait {
    pub pid_key: i64,
    /// Stream offset of the event, for diagnostics.
    pub off: u64,
}

/// Per row of a batch, in the same order: what its step waits for (a GPU row: its launch,
/// found by the row's correlation; the offset is for diagnostics).
#[derive(Debug, Default)]
pub(crate) struct Waits {
    pub cpu: Vec<CpuWait>,
    pub gpu: Vec<u64>,
}

/// A CPU row as written to the spill file (times trace-relative).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct CpuRec {
    start: i64,
    end: i64,
    pid_key: i64,
    tid: i64,
    correlation: i64,
    external_id: i64,
    step: i64,
    off: u64,
    name: u32,
    input_dims: u32,
    input_types: u32,
    concrete_inputs: u32,
    input_strides: u32,
    /// The category in the low byte, then one bit per `Option` that is `Some`.
    flags: u32,
}

// 8 × 8 + 6 × 4 bytes: no padding (`Pod` refuses any).
const _: () = assert!(std::mem::size_of::<CpuRec>() == 88);

/// A GPU row as written to the spill file (times trace-relative).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct GpuRec {
    device: i64,
    stream: i64,
    start: i64,
    raw_end: i64,
    correlation: i64,
    external_id: i64,
    grid: [i64; 3],
    block: [i64; 3],
    bytes: i64,
    in_msg_nelems: i64,
    out_msg_nelems: i64,
    group_size: i64,
    collective_seq: i64,
    gemm: [i64; 3],
    /// The activity's own `args.step` (see `Settle::gpu_step`).
    arg_step: i64,
    off: u64,
    name: u32,
    collective_name: u32,
    dtype: u32,
    process_group: u32,
    process_group_ranks: u32,
    comms_id: u32,
    /// One bit per `Option` that is `Some` (see `G_*`).
    flags: u32,
    kind: u8,
    category: u8,
    /// 1 + index into `Spill::comm_ops`, 0 for none.
    comm_op: u16,
}

// 22 × 8 + 7 × 4 + 4 bytes: no padding (`Pod` refuses any); a field added later may need an
// explicit `_pad` to keep it so.
const _: () = assert!(std::mem::size_of::<GpuRec>() == 208);

const C_PID: u32 = 1 << 8;
const C_TID: u32 = 1 << 9;
const C_CORR: u32 = 1 << 10;
const C_EXT: u32 = 1 << 11;
const C_STEP: u32 = 1 << 12;
const C_DIMS: u32 = 1 << 13;
const C_TYPES: u32 = 1 << 14;
const C_CONCRETE: u32 = 1 << 15;
const C_STRIDES: u32 = 1 << 16;

const G_CORR: u32 = 1;
const G_EXT: u32 = 1 << 1;
const G_GRID: u32 = 1 << 2; // three bits
const G_BLOCK: u32 = 1 << 5; // three bits
const G_BYTES: u32 = 1 << 8;
const G_COLL: u32 = 1 << 9;
const G_COLL_NAME: u32 = 1 << 10;
const G_DTYPE: u32 = 1 << 11;
const G_PG: u32 = 1 << 12;
const G_PG_RANKS: u32 = 1 << 13;
const G_IN: u32 = 1 << 14;
const G_OUT: u32 = 1 << 15;
const G_GROUP: u32 = 1 << 16;
const G_SEQ: u32 = 1 << 17;
const G_COMMS_ID: u32 = 1 << 18;
const G_GEMM: u32 = 1 << 19; // three bits
const G_ARG_STEP: u32 = 1 << 22;

/// `v`'s value (0 when `None`), and `bit` when it is `Some`.
fn put<T: Default>(v: Option<T>, bit: u32, flags: &mut u32) -> T {
    if v.is_some() {
        *flags |= bit;
    }
    v.unwrap_or_default()
}

/// `Some(v)` when `bit` is set in `flags`.
fn get<T>(v: T, bit: u32, flags: u32) -> Option<T> {
    (flags & bit != 0).then_some(v)
}

/// The records of one batch, on their way to the files (GPU, CPU).
type Recs = (Vec<GpuRec>, Vec<CpuRec>);

/// Where one batch's records lie in a spill file, and what the sinks' flushes depend on.
///
/// Why: the settle on many cores (`groups`) reads any batch at any time, so it needs where
/// each starts; and where a sink of one thread flushes follows from the rows of each batch
/// and, for GPU rows, the streams seen so far (`groups::Plan`), so the settle can cut the
/// table into its flushes and row groups before reading a row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ix {
    /// Offset of the first record in the file.
    pub off: u64,
    pub rows: u32,
    /// (device, stream) pairs of the batch's GPU rows that no batch before it had.
    pub new_streams: u32,
}

/// The files' batch indexes (GPU, CPU).
type Index = (Vec<Ix>, Vec<Ix>);

/// The index entry of `recs`, written at `at`, which it moves past them.
fn index<R: Pod>(at: &mut u64, recs: &[R], new_streams: u32) -> Ix {
    let off = *at + 8;
    *at = off + std::mem::size_of_val(recs) as u64;
    Ix {
        off,
        rows: recs.len() as u32,
        new_streams,
    }
}

/// The (device, stream) pairs of `recs` not in `seen`, which takes them.
fn new_streams(recs: &[GpuRec], seen: &mut rustc_hash::FxHashSet<(i64, i64)>) -> u32 {
    let mut new = 0;
    let mut last = None;
    for r in recs {
        let s = (r.device, r.stream);
        if last != Some(s) {
            last = Some(s);
            new += seen.insert(s) as u32;
        }
    }
    new
}

/// Batches of records the spill thread may queue for the file writer (a few hundred KB each).
const WRITE_QUEUE: usize = 4;

/// The spill being written (owned by the spill thread): one file per table, so that the two
/// tables can be settled and written at once.
///
/// The files are written by a thread of their own, fed records: re-mapping each batch's
/// strings and making its records was about as much of the spill thread's time as writing
/// them, and one file on 16 cores walked about as fast as that one thread went.
pub(crate) struct Spill {
    out: Option<SyncSender<Recs>>,
    /// Record buffers the writer is done with, for the next batches.
    back: Receiver<Recs>,
    writer: Option<JoinHandle<io::Result<(File, File, Index)>>>,
    /// Where the files are, for error messages (they have no names of their own).
    dir: PathBuf,
    strings: Interner,
    diag: Diagnostics,
    comm_ops: Vec<&'static str>,
    batches: u64,
    /// Classifies the GPU rows, which the walk leaves unclassified (`extract`), each name once.
    classifier: Arc<Classifier>,
    classes: FxHashMap<(u32, Kind), Class>,
    /// The collective kind a `Collective name` arg names (by string id).
    coll_ops: FxHashMap<u32, Option<&'static str>>,
}

/// A spill file read back, closed on a thread of its own once dropped.
///
/// Why: the last close of an unnamed temporary file frees its page cache there and then
/// (~13 ms for the ~100 MB of CPU records of a 960 MB trace, on the 2-core VM), and each
/// table's settle ended waiting for it.
pub(crate) struct SpillFile(Option<File>);

impl SpillFile {
    fn new(file: File) -> SpillFile {
        SpillFile(Some(file))
    }
}

impl std::ops::Deref for SpillFile {
    type Target = File;
    fn deref(&self) -> &File {
        self.0.as_ref().expect("taken only when dropped")
    }
}

impl std::ops::DerefMut for SpillFile {
    fn deref_mut(&mut self) -> &mut File {
        self.0.as_mut().expect("taken only when dropped")
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            // A thread that cannot be started drops the file here, with its closure.
            let closer = std::thread::Builder::new().name("aorta-spill-close".into());
            let _ = closer.spawn(move || drop(f));
        }
    }
}

/// Written spill files, ready to be settled.
pub(crate) struct Spilled {
    gpu: SpillFile,
    cpu: SpillFile,
    dir: PathBuf,
    strings: Interner,
    diag: Diagnostics,
    comm_ops: Vec<&'static str>,
    batches: u64,
    index: Index,
}

impl Spill {
    /// Unnamed temporary files in `dir` (removed by the OS when closed, even on a crash).
    pub(crate) fn create(dir: &Path, classifier: Arc<Classifier>) -> Result<Spill> {
        let io = |e| IngestError::io(dir, e);
        std::fs::create_dir_all(dir).map_err(io)?;
        // Unbuffered: a batch's records go to the kernel in one write, and come back in one
        // read straight into the records (a buffer would copy every byte once more).
        let mut gpu_out = tempfile::tempfile_in(dir).map_err(io)?;
        let mut cpu_out = tempfile::tempfile_in(dir).map_err(io)?;
        let (out, recs) = sync_channel::<Recs>(WRITE_QUEUE);
        let (give_back, back) = sync_channel::<Recs>(WRITE_QUEUE);
        let writer = std::thread::spawn(move || {
            let (mut ix, mut seen): (Index, _) = Default::default();
            let (mut gpu_at, mut cpu_at) = (0, 0);
            for (gpu, cpu) in recs {
                write_recs(&mut gpu_out, &gpu)?;
                write_recs(&mut cpu_out, &cpu)?;
                let new = new_streams(&gpu, &mut seen);
                ix.0.push(index(&mut gpu_at, &gpu, new));
                ix.1.push(index(&mut cpu_at, &cpu, 0));
                let _ = give_back.try_send((gpu, cpu));
            }
            Ok((gpu_out, cpu_out, ix))
        });
        Ok(Spill {
            out: Some(out),
            back,
            writer: Some(writer),
            dir: dir.to_path_buf(),
            strings: Interner::default(),
            diag: Diagnostics::default(),
            comm_ops: Vec::new(),
            batches: 0,
            classifier,
            classes: FxHashMap::default(),
            coll_ops: FxHashMap::default(),
        })
    }

    /// Appends one batch (its strings re-mapped into the spill's own table).
    pub(crate) fn add(&mut self, batch: Batch, waits: Waits) -> Result<()> {
        let (gpu, cpu, diag) = batch.remap(&mut self.strings);
        self.diag.merge(diag);
        let (mut gpu_recs, mut cpu_recs) = self.back.try_recv().unwrap_or_default();
        gpu_recs.clear();
        gpu_recs.extend(
            gpu.iter()
                .zip(&waits.gpu)
                .map(|(r, &off)| self.gpu_rec(r, off)),
        );
        cpu_recs.clear();
        cpu_recs.extend(cpu.iter().zip(&waits.cpu).map(|(r, w)| cpu_rec(r, w)));
        // Every batch goes to both files, even with no rows of a table: each sink then gets
        // the batches the one sink of the two-pass reader got, and flushes where it did.
        let sent = self.out.as_ref().map(|o| o.send((gpu_recs, cpu_recs)));
        if !matches!(sent, Some(Ok(()))) {
            // The writer stopped: its error is the one to report.
            let stopped = io::Error::other("the spill writer stopped");
            let stopped = IngestError::io(&self.dir, stopped);
            return Err(self.join_writer().err().unwrap_or(stopped));
        }
        self.batches += 1;
        Ok(())
    }

    /// Waits for the writer to write what it was sent, and takes the files back.
    fn join_writer(&mut self) -> Result<(File, File, Index)> {
        drop(self.out.take());
        let writer = self.writer.take();
        let res = writer.map(|w| w.join().expect("the spill writer does not panic"));
        let res = res.unwrap_or_else(|| Err(io::Error::other("the spill writer stopped")));
        res.map_err(|e| IngestError::io(&self.dir, e))
    }

    /// Rewinds the files for reading.
    pub(crate) fn finish(mut self) -> Result<Spilled> {
        let (gpu, cpu, index) = self.join_writer()?;
        let dir = self.dir;
        let io = |e| IngestError::io(&dir, e);
        let rewind = |mut file: File| -> Result<SpillFile> {
            file.rewind().map_err(io)?;
            Ok(SpillFile::new(file))
        };
        Ok(Spilled {
            gpu: rewind(gpu)?,
            cpu: rewind(cpu)?,
            dir: dir.clone(),
            strings: self.strings,
            diag: self.diag,
            comm_ops: self.comm_ops,
            batches: self.batches,
            index,
        })
    }

    /// The row's category and, for a comm activity, its collective kind: from the
    /// `Collective name` arg when it names one, else from the kernel name, else "other".
    fn class_of(&mut self, r: &GpuRow) -> Class {
        let (classifier, strings) = (&self.classifier, &self.strings);
        let (category, name_op) = *self
            .classes
            .entry((r.name, r.kind))
            .or_insert_with(|| classifier.classify(r.kind, strings.get(r.name)));
        if category != Category::Comm {
            return (category, None);
        }
        let arg = r.coll.as_ref().and_then(|c| c.collective_name);
        let op = arg.and_then(|id| {
            *self
                .coll_ops
                .entry(id)
                .or_insert_with(|| classifier.collective_op(strings.get(id)))
        });
        (category, Some(op.or(name_op).unwrap_or("other")))
    }

    fn gpu_rec(&mut self, r: &GpuRow, off: u64) -> GpuRec {
        let mut f = 0;
        let (category, comm_op) = self.class_of(r);
        let comm_op = match comm_op {
            None => 0,
            Some(op) => match self.comm_ops.iter().position(|&o| std::ptr::eq(o, op)) {
                Some(i) => i + 1,
                None => {
                    self.comm_ops.push(op);
                    self.comm_ops.len()
                }
            },
        };
        let c = r.coll.as_deref();
        let coll = |get: fn(&CollArgs) -> Option<u32>| c.and_then(get);
        let coll_i = |get: fn(&CollArgs) -> Option<i64>| c.and_then(get);
        let mut grid = [0; 3];
        let mut block = [0; 3];
        for i in 0..3 {
            grid[i] = put(r.grid[i], G_GRID << i, &mut f);
            block[i] = put(r.block[i], G_BLOCK << i, &mut f);
        }
        if c.is_some() {
            f |= G_COLL;
        }
        GpuRec {
            device: r.device,
            stream: r.stream,
            start: r.start,
            raw_end: r.raw_end,
            correlation: put(r.correlation, G_CORR, &mut f),
            external_id: put(r.external_id, G_EXT, &mut f),
            grid,
            block,
            bytes: put(r.bytes, G_BYTES, &mut f),
            in_msg_nelems: put(coll_i(|c| c.in_msg_nelems), G_IN, &mut f),
            out_msg_nelems: put(coll_i(|c| c.out_msg_nelems), G_OUT, &mut f),
            group_size: put(coll_i(|c| c.group_size), G_GROUP, &mut f),
            collective_seq: put(coll_i(|c| c.collective_seq), G_SEQ, &mut f),
            gemm: std::array::from_fn(|i| put(c.and_then(|c| c.gemm[i]), G_GEMM << i, &mut f)),
            arg_step: put(r.step, G_ARG_STEP, &mut f),
            off,
            name: r.name,
            collective_name: put(coll(|c| c.collective_name), G_COLL_NAME, &mut f),
            dtype: put(coll(|c| c.dtype), G_DTYPE, &mut f),
            process_group: put(coll(|c| c.process_group), G_PG, &mut f),
            process_group_ranks: put(coll(|c| c.process_group_ranks), G_PG_RANKS, &mut f),
            comms_id: put(coll(|c| c.comms_id), G_COMMS_ID, &mut f),
            flags: f,
            kind: Kind::ALL.iter().position(|&k| k == r.kind).unwrap_or(0) as u8,
            category: Category::ALL
                .iter()
                .position(|&k| k == category)
                .unwrap_or(0) as u8,
            comm_op: u16::try_from(comm_op).expect("a few collective names"),
        }
    }
}

fn cpu_rec(r: &CpuRow, w: &CpuWait) -> CpuRec {
    let cat = CpuCategory::ALL.iter().position(|&c| c == r.category);
    let mut f = cat.unwrap_or(0) as u32;
    // A numeric pid is its own key; a string pid has none (its key is a hash of it).
    if r.pid.is_some() {
        f |= C_PID;
    }
    CpuRec {
        start: r.start,
        end: r.end,
        pid_key: w.pid_key,
        tid: put(r.tid, C_TID, &mut f),
        correlation: put(r.correlation, C_CORR, &mut f),
        external_id: put(r.external_id, C_EXT, &mut f),
        step: put(r.step, C_STEP, &mut f),
        off: w.off,
        name: r.name,
        input_dims: put(r.input_dims, C_DIMS, &mut f),
        input_types: put(r.input_types, C_TYPES, &mut f),
        concrete_inputs: put(r.concrete_inputs, C_CONCRETE, &mut f),
        input_strides: put(r.input_strides, C_STRIDES, &mut f),
        flags: f,
    }
}

/// Batches the walk may queue for the spill thread (see `writer_thread::WRITER_QUEUE`).
pub(crate) type Sender = SyncSender<(Batch, Waits)>;

/// The spill thread: owns the spill file until the channel closes.
pub(crate) fn spawn(
    dir: &Path,
    failed: Arc<AtomicBool>,
    classifier: Arc<Classifier>,
) -> Result<(Sender, JoinHandle<Result<Spilled>>)> {
    let mut spill = Spill::create(dir, classifier)?;
    let (tx, rx) = sync_channel::<(Batch, Waits)>(crate::writer_thread::WRITER_QUEUE);
    let handle = std::thread::spawn(move || {
        for (batch, waits) in rx {
            if let Err(e) = spill.add(batch, waits) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        spill.finish()
    });
    Ok((tx, handle))
}

fn write_recs<R: Pod>(out: &mut impl Write, recs: &[R]) -> io::Result<()> {
    out.write_all(bytemuck::bytes_of(&(recs.len() as u64)))?;
    out.write_all(bytemuck::cast_slice(recs))
}
