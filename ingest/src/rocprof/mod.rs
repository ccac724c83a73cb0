//! rocprofv3 (rocprofiler-sdk) outputs: CSV files, the `--output-format json` document and
//! the rocpd SQLite database (ROCm 7's default), all into the tables Kineto fills.
//!
//! The three containers carry the same records (FORMATS.md §2): kernel dispatches and memory
//! copies become `gpu_activities`, host API calls and markers become `cpu_ops`. What differs
//! is only how a record is found and named, so each reader (`csv`, `json`, `rocpd`) turns its
//! container into the plain values of `Emit`, which classifies, batches and hands rows to
//! the same writer thread the Kineto reader uses. Timestamps are integer ns already
//! (`CLOCK_BOOTTIME` of the profiled host, not the Unix epoch). rocprof has no profiler
//! steps: steps come from roctx marker ranges (`--step-marker`, `ProfilerStep#N` by
//! default), and RCCL kernels' collectives from the RCCL API calls around their launches
//! (`links`), the same way in all three readers; without markers `step` is null.

pub(crate) mod csv;
mod held;
pub(crate) mod json;
mod links;
mod messages;
mod prescan;
mod records;
pub(crate) mod rocpd;
mod stream;
mod wanted;

use crate::file::RankSource;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rustc_hash::FxHashMap;

use crate::classify::Category;
use crate::classify::{Class, Classifier, Kind};
use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::rows::{Batch, CpuCategory, CpuRow, GpuRow, StepSource};
use crate::sink::{Parts, SinkOut};
use links::ApiLinks;

/// Rows per batch handed to the writer thread. Small on purpose: a batch of ~250-byte rows
/// stays under glibc's 1 MiB mmap threshold (see `tune_allocator`), so its memory is reused
/// from the heap instead of being mapped, faulted in and zeroed afresh for every batch
/// (with 32 Ki-row batches that was a fifth of single-core ingest time).
const BATCH_ROWS: usize = 2048;

/// Batches that may wait for the writer thread: one flush's worth. While the writer sorts
/// and encodes a flush, the reader keeps going instead of stopping after a few batches (with
/// 4, reader and writer mostly took turns, and two cores were no faster than one). Bounds
/// the queue at ~30 MB of rows. (The JSON reader queues fewer: `json::QUEUE`.)
pub(crate) const QUEUE: usize = crate::sink::FLUSH_ROWS / BATCH_ROWS;

/// A kernel dispatch, as every container writes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dispatch<'a> {
    pub device: i64,
    pub stream: i64,
    pub name: &'a str,
    pub start: i64,
    pub end: i64,
    /// `correlation_id.internal`: links to the API call that launched it.
    pub correlation: Option<i64>,
    /// `correlation_id.external` (0 = none).
    pub external: Option<i64>,
    /// Work-items, as rocprof writes them.
    pub grid: [Option<i64>; 3],
    pub workgroup: [Option<i64>; 3],
}

/// A memory copy (`MEMORY_COPY_HOST_TO_DEVICE`…, the direction is its name).
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryCopy<'a> {
    pub device: i64,
    pub stream: i64,
    pub name: &'a str,
    pub start: i64,
    pub end: i64,
    pub correlation: Option<i64>,
    pub bytes: Option<i64>,
}

/// A host API call or marker range.
#[derive(Debug, Clone, Default)]
pub(crate) struct Api<'a> {
    /// `HIP_RUNTIME_API_EXT`, `HSA_CORE_API`, `MARKER_CORE_API`, `RCCL_API`…
    pub domain: &'a str,
    pub name: &'a str,
    pub pid: Option<i64>,
    pub tid: Option<i64>,
    pub start: i64,
    pub end: i64,
    pub correlation: Option<i64>,
    pub external: Option<i64>,
}

/// `cpu_ops.category` of an API domain: markers are user annotations, HSA is the driver
/// layer under HIP, everything else (HIP, RCCL, rocDecode…) a runtime call.
pub(crate) fn api_category(domain: &str) -> CpuCategory {
    if is_marker(domain) {
        CpuCategory::UserAnnotation
    } else if has_prefix(domain, "HSA") {
        CpuCategory::Driver
    } else {
        CpuCategory::Runtime
    }
}

/// Whether `domain` starts with `prefix`, ASCII case ignored (no allocation: one call per
/// API record).
pub(crate) fn has_prefix(domain: &str, prefix: &str) -> bool {
    domain
        .get(..prefix.len())
        .is_some_and(|d| d.eq_ignore_ascii_case(prefix))
}

/// A marker (roctx) domain.
pub(crate) fn is_marker(domain: &str) -> bool {
    has_prefix(domain, "MARKER") || has_prefix(domain, "ROCTX")
}

/// `0` is rocprof's "no external correlation".
pub(crate) fn nonzero(v: Option<i64>) -> Option<i64> {
    v.filter(|&x| x != 0)
}

/// Collects rows into batches for the writer thread.
pub(crate) struct Emit<'a> {
    classifier: &'a Classifier,
    batch: Batch,
    tx: Option<crate::writer_thread::Feed>,
    failed: Arc<AtomicBool>,
    writer: Option<JoinHandle<Result<SinkOut>>>,
    /// Records read (every row written, plus records skipped with a diagnostic).
    pub events: u64,
    /// The batch's string id of each kernel name by the reader's kernel id (see
    /// `kernel_by_id`); cleared with every batch sent.
    names: FxHashMap<i64, u32>,
    /// Step spans, RCCL calls and launches from the API records read so far.
    pub links: ApiLinks,
}

impl<'a> Emit<'a> {
    /// An emitter whose writer thread takes up to `queue` batches waiting (`QUEUE`).
    pub(crate) fn new(classifier: &'a Classifier, parts: &Parts, queue: usize) -> Emit<'a> {
        let failed = Arc::new(AtomicBool::new(false));
        let (tx, writer) =
            crate::writer_thread::spawn_writer(parts.clone(), failed.clone(), (queue, usize::MAX));
        Emit {
            classifier,
            batch: Batch::default(),
            tx: Some(tx),
            failed,
            writer: Some(writer),
            events: 0,
            names: FxHashMap::default(),
            links: ApiLinks::default(),
        }
    }

    pub(crate) fn classify(&self, kind: Kind, name: &str) -> Class {
        self.classifier.classify(kind, name)
    }

    pub(crate) fn diag(&mut self, code: &'static str, example: impl FnOnce() -> String) {
        self.events += 1;
        self.batch.diag.add(code, None, example);
    }

    /// A finding about a record that is still written.
    pub(crate) fn diag_only(&mut self, code: &'static str, example: impl FnOnce() -> String) {
        self.batch.diag.add(code, None, example);
    }

    /// `n` records of a kind aorta has no table for (memory allocations, PC samples…).
    pub(crate) fn skipped(&mut self, n: u64, example: impl FnOnce() -> String) {
        self.events += n;
        self.batch.diag.add_n("skipped_category", n, None, example);
    }

    /// A dispatch whose class the caller already knows (readers cache it per kernel id).
    pub(crate) fn kernel(&mut self, d: &Dispatch, class: Class) -> Result<()> {
        let name = self.batch.strings.id(d.name);
        self.push_kernel(d, class, name)
    }

    /// Like `kernel`, for readers that name kernels by an id (`kernel_id`): the name is
    /// interned once per batch and id instead of hashed and compared for every dispatch
    /// (a tenth of the rocprof JSON reader's time). The caller keeps `id` → name fixed
    /// until `forget_kernel_ids`.
    pub(crate) fn kernel_by_id(&mut self, id: i64, d: &Dispatch, class: Class) -> Result<()> {
        let name = match self.names.get(&id) {
            Some(&n) => n,
            None => {
                let n = self.batch.strings.id(d.name);
                self.names.insert(id, n);
                n
            }
        };
        self.push_kernel(d, class, name)
    }

    /// Kernel ids start to name other kernels (a new process object).
    pub(crate) fn forget_kernel_ids(&mut self) {
        self.names.clear();
    }

    /// A GPU row's step: the span holding its launch, else its start (`links`).
    fn gpu_step(&self, corr: Option<i64>, start: i64) -> (Option<i64>, StepSource) {
        if let Some(step) = self.links.launch_step(corr) {
            return (Some(step), StepSource::Launch);
        }
        match self.links.step_at(start) {
            Some(step) => (Some(step), StepSource::GpuTime),
            None => (None, StepSource::None),
        }
    }

    fn push_kernel(&mut self, d: &Dispatch, class: Class, name: u32) -> Result<()> {
        let raw_end = d.end;
        let end = self.checked_end(d.start, d.end, d.name);
        let (step, step_source) = self.gpu_step(d.correlation, d.start);
        let comm_op = match class {
            (Category::Comm, None | Some("other")) => {
                self.links.launch_rccl(d.correlation).or(class.1)
            }
            _ => class.1,
        };
        self.batch.gpu.push(GpuRow {
            device: d.device,
            stream: d.stream,
            kind: Kind::Kernel,
            name,
            category: class.0,
            comm_op,
            start: d.start,
            end,
            raw_end,
            correlation: d.correlation,
            external_id: nonzero(d.external),
            step,
            step_source,
            grid: d.grid,
            block: d.workgroup,
            bytes: None,
            coll: None,
        });
        self.row()
    }

    pub(crate) fn copy(&mut self, c: &MemoryCopy) -> Result<()> {
        let (category, comm_op) = self.classify(Kind::Memcpy, c.name);
        let name = self.batch.strings.id(c.name);
        let end = self.checked_end(c.start, c.end, c.name);
        let (step, step_source) = self.gpu_step(c.correlation, c.start);
        self.batch.gpu.push(GpuRow {
            device: c.device,
            stream: c.stream,
            kind: Kind::Memcpy,
            name,
            category,
            comm_op,
            start: c.start,
            end,
            raw_end: c.end,
            correlation: c.correlation,
            external_id: None,
            step,
            step_source,
            grid: [None; 3],
            block: [None; 3],
            bytes: c.bytes,
            coll: None,
        });
        self.row()
    }

    pub(crate) fn api(&mut self, a: &Api) -> Result<()> {
        let name = self.batch.strings.id(a.name);
        let end = self.checked_end(a.start, a.end, a.name);
        let step = self.links.step_at(a.start);
        self.batch.cpu.push(CpuRow {
            category: api_category(a.domain),
            name,
            pid: a.pid,
            tid: a.tid,
            start: a.start,
            end,
            correlation: a.correlation,
            external_id: nonzero(a.external),
            step,
            input_dims: None,
            input_types: None,
            concrete_inputs: None,
            input_strides: None,
        });
        self.row()
    }

    fn checked_end(&mut self, start: i64, end: i64, name: &str) -> i64 {
        if end >= start {
            return end;
        }
        self.batch.diag.add("negative_duration", None, || {
            format!("{name}: end before start")
        });
        start
    }

    fn row(&mut self) -> Result<()> {
        self.events += 1;
        if self.batch.gpu.len() + self.batch.cpu.len() >= BATCH_ROWS {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        self.names.clear();
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(batch));
        if !sent || self.failed.load(Ordering::Relaxed) {
            // The writer's own error is what gets reported (see `finish`).
            return self.join().and(Err(IngestError::File {
                path: String::new(),
                msg: "writing the output failed".into(),
            }));
        }
        Ok(())
    }

    fn join(&mut self) -> Result<SinkOut> {
        drop(self.tx.take());
        match self.writer.take() {
            Some(w) => w.join().expect("writer thread does not panic"),
            None => Err(IngestError::File {
                path: String::new(),
                msg: "writer already finished".into(),
            }),
        }
    }

    /// Sends the last rows and waits for the writer.
    pub(crate) fn finish(mut self) -> Result<SinkOut> {
        self.send()?;
        self.join()
    }
}

/// A reader that stops early (a parse error) still waits for the writer thread here, so no
/// part file is being written while the failed run's staging directory is removed.
impl Drop for Emit<'_> {
    fn drop(&mut self) {
        if self.writer.is_some() {
            let _ = self.join();
        }
    }
}

/// The pid rocprofv3 puts before `_` in its file names (`908_results.json`,
/// `908_kernel_trace.csv`), for the rank map.
pub(crate) fn pid_from_name(path: &std::path::Path) -> Option<i64> {
    let name = path.file_name()?.to_string_lossy();
    let (pid, _) = name.split_once('_')?;
    pid.parse().ok().filter(|p: &i64| *p > 0)
}

/// The rank of a rocprof output: the environment (rocpd only), the rank map by pid, the
/// file name, `--rank`, or 0.
pub(crate) fn parts_for(
    job: &FileJob,
    info: &mut RunInfo,
    from_env: Option<i64>,
    pids: &[i64],
) -> Parts {
    let rank = info.resolve_rank_of(job, from_env, pids);
    if from_env.is_some() {
        info.rank_source = RankSource::Environment;
    }
    Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        tag: info.tag(job),
    }
}

/// Fills the `runs` row from what the reader learned and writes the per-file tables.
pub(crate) fn finish(
    job: &FileJob,
    mut info: RunInfo,
    parts: &Parts,
    (out, spans): (SinkOut, &[crate::step_span::Span]),
    events: u64,
    gpu_names: &dyn Fn(i64) -> Option<String>,
) -> Result<FileOutcome> {
    info.platform = "rocm";
    info.event_count = events;
    info.device_index = out
        .counts
        .devices
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| *d);
    info.device_name = info.device_index.and_then(gpu_names);
    info.finish(job, parts, out, (spans, 0))
}
