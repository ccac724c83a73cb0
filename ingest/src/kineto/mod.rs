//! PyTorch profiler (Kineto) traces: `.json`, `.json.gz`, `.json.zst`, and the `.tmp` a
//! crashed writer leaves (which fails with its offset).
//!
//! Two streaming passes over the file (see `links` for why): pass 1 collects metadata, step
//! spans and launches; pass 2 parses windows of events in parallel into rows.

pub mod event;
pub mod extract;
pub mod links;
pub mod stream;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{IngestError, ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::json::{Cursor, JsonError};
use crate::rows::Batch;
use crate::sink::{Parts, Sink, SinkOut};
use crate::source::{digest, Hasher};
use crate::window::Window;
use extract::Ctx;
use links::{LinkPass, Meta};
use stream::{Driver, Visitor};

fn drive(job: &FileJob, v: &mut impl Visitor, hash: Option<Hasher>) -> Result<stream::Shape> {
    let win = Window::open(&job.path, job.progress.clone(), hash)
        .map_err(|e| crate::error::IngestError::io(&job.path, e))?;
    Driver::new(win).run(v).map_err(|e| e.at(&job.path))
}

/// Pass 2. Workers parse; the rows go over a bounded channel to a writer thread that owns
/// the `Sink`, so Parquet encoding overlaps with parsing the next window.
struct RowPass<'a> {
    ctx: Ctx<'a>,
    tx: Option<SyncSender<Batch>>,
    failed: Arc<AtomicBool>,
}

impl Visitor for RowPass<'_> {
    type Part = extract::Part;

    fn meta(&mut self, _key: &str, _raw: &[u8]) -> Result<(), ParseErr> {
        Ok(())
    }

    fn event(
        &self,
        c: &mut Cursor<'_>,
        part: &mut extract::Part,
        off: u64,
    ) -> Result<(), JsonError> {
        extract::event(&self.ctx, c, part, off)
    }

    fn take(&mut self, part: extract::Part) -> Result<(), ParseErr> {
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send(part.batch).is_ok());
        if !sent || self.failed.load(Ordering::Relaxed) {
            // The writer failed (disk full…); its own error is what gets reported.
            return Err(ParseErr::new(0, "stopped: writing the output failed"));
        }
        Ok(())
    }
}

/// Batches the Kineto and Chrome readers may queue for the writer thread (one per parsed
/// sub-window, a few thousand rows). With 4, the workers stalled on every 131 Ki-row flush
/// of the writer; 64 let them go on (1 GiB on two cores: wall −15 %, peak RSS +20 MB).
pub(crate) const WRITER_QUEUE: usize = 64;

/// The writer thread: owns the sink until the channel closes; `queue` batches may wait.
pub(crate) fn spawn_writer(
    parts: Parts,
    failed: Arc<AtomicBool>,
    queue: usize,
) -> (SyncSender<Batch>, JoinHandle<Result<SinkOut>>) {
    let (tx, rx) = sync_channel::<Batch>(queue);
    let handle = std::thread::spawn(move || {
        let mut sink = Sink::new(&parts);
        let mut busy = std::time::Duration::ZERO;
        for batch in rx {
            let t = std::time::Instant::now();
            if let Err(e) = sink.add(batch) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
            busy += t.elapsed();
        }
        let t = std::time::Instant::now();
        let out = sink.finish();
        if std::env::var_os("AORTA_TIMING").is_some() {
            eprintln!("writer busy {busy:.2?}, final flush {:.2?}", t.elapsed());
        }
        out
    });
    (tx, handle)
}

pub fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let t0 = std::time::Instant::now();
    let mut pass1 = LinkPass::default();
    // A new file is hashed by pass 1 as it reads, not by a separate read.
    let hasher = job.content_hash.is_none().then(Hasher::default);
    let shape = drive(job, &mut pass1, hasher.clone()).map_err(|e| first_error(job, e))?;
    let content_hash = match (&job.content_hash, &hasher) {
        (Some(h), _) => h.clone(),
        (None, h) => digest(h.as_ref().expect("hasher set above")),
    };
    let t1 = t0.elapsed();
    let links = pass1.finish();
    let mut info = RunInfo::new("kineto", content_hash);
    let rank = info.resolve_rank(job, links.meta.rank);
    let parts = Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        tag: info.tag(job),
    };
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, writer) = spawn_writer(parts.clone(), failed.clone(), WRITER_QUEUE);
    let mut pass2 = RowPass {
        ctx: Ctx {
            links: &links,
            classifier: &job.classifier,
            base_ns: links.meta.base_time_ns.unwrap_or(0),
        },
        tx: Some(tx),
        failed,
    };
    let res = drive(job, &mut pass2, None);
    let t2 = t0.elapsed();
    drop(pass2.tx.take());
    let out = writer.join().expect("writer thread does not panic");
    if std::env::var_os("AORTA_TIMING").is_some() {
        // Stage timings for benchmarking (docs/PERFORMANCE.md).
        let t3 = t0.elapsed();
        eprintln!(
            "{}: links {t1:.2?}, rows {:.2?}, writer tail {:.2?}",
            job.path.display(),
            t2 - t1,
            t3 - t2
        );
    }
    res.map_err(|e| first_error(job, e))?;
    let out = out?;
    describe(&mut info, &links.meta, &out, shape.events);
    let base = links.meta.base_time_ns.unwrap_or(0);
    info.finish(job, &parts, out, (links.cpu_spans(), base))
}

/// The error a file's reading ends with, whatever pass met `e`: the first error of a strict
/// pass 1 (one that reads every event up to its `cat`), else `e` (from pass 2).
///
/// Why: the fast pass 1 skips non-slice events at their `ph`, so it can miss a malformed
/// flow that the strict one stops at, and meet a later error first (or none, leaving it to
/// pass 2, which may meet another one before it). Reporting what strict pass 1 then pass 2
/// report keeps every error and its offset as they were; it costs a re-read only of files
/// that fail.
fn first_error(job: &FileJob, e: IngestError) -> IngestError {
    let mut strict = LinkPass {
        strict: true,
        ..Default::default()
    };
    drive(job, &mut strict, None).err().unwrap_or(e)
}

/// Fills the `runs` fields that come from the trace's metadata.
fn describe(info: &mut RunInfo, meta: &Meta, out: &crate::sink::SinkOut, events: u64) {
    let counts = &out.counts;
    info.event_count = events;
    info.base_time_ns = meta.base_time_ns;
    info.world_size = meta.world_size;
    if !meta.params.is_empty() {
        info.params = serde_json::to_string(&meta.params).ok();
    }
    let device = counts
        .devices
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| *d);
    info.device_index = device;
    let props = match device {
        Some(d) => meta.devices.iter().find(|p| p.0 == d),
        None => None,
    }
    .or(if meta.devices.len() == 1 {
        meta.devices.first()
    } else {
        None
    });
    info.device_name = props.map(|p| p.1.clone()).filter(|n| !n.is_empty());
    let warp = props.and_then(|p| p.2);
    info.platform = platform(
        &meta.versions,
        info.device_name.as_deref(),
        warp,
        out.vendor_hint,
    );
    if !meta.versions.is_empty() {
        let v: Vec<String> = meta
            .versions
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        info.runtime_version = Some(v.join(" "));
    }
}

/// `cuda`, `rocm` or `unknown`: version keys first, then the device name, then warp size,
/// then the runtime API names seen in the trace.
pub fn platform(
    versions: &[(String, String)],
    device: Option<&str>,
    warp: Option<i64>,
    hint: Option<&'static str>,
) -> &'static str {
    let has = |p: &str| versions.iter().any(|(k, _)| k.starts_with(p));
    if has("roctracer") || has("rocprofiler") || has("hip_") {
        return "rocm";
    }
    if has("cupti") || has("cuda_") {
        return "cuda";
    }
    let d = device.unwrap_or("").to_ascii_lowercase();
    const CUDA: &[&str] = &[
        "nvidia", "tesla", "geforce", "quadro", "a100", "h100", "h200", "v100", "b200",
    ];
    const ROCM: &[&str] = &["amd", "instinct", "radeon", "gfx", "mi2", "mi3"];
    if CUDA.iter().any(|n| d.contains(n)) {
        return "cuda";
    }
    if ROCM.iter().any(|n| d.contains(n)) {
        return "rocm";
    }
    match warp {
        Some(64) => "rocm",
        Some(32) => "cuda",
        _ => hint.unwrap_or("unknown"),
    }
}
