//! Generic Chrome Trace Event Format files (FORMATS.md §3): traces written by tools other
//! than the PyTorch profiler: JSON arrays (possibly without their closing `]`), objects,
//! `B`/`E` pairs, instants.
//!
//! Why a reader beside Kineto's: Kineto's reader holds rows back until their launches and
//! steps are known, which generic traces do not have, and it never sees `B`/`E` (Kineto
//! writes none). This one streams with the same `Driver` (windows parsed on every worker);
//! `B`/`E` edges are paired in file order in the driver's sequential `take`, so the only
//! memory that grows with the file is the stack of still-open `B`s per thread.
//! Timestamps stay on the trace's own clock (µs text → exact ns); there is no base time.
//! Steps come only from `--step-marker`, through a walk made first (`steps`).

mod slices;
mod steps;

use crate::format::Format;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::classify::Classifier;
use crate::error::{IngestError, ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::json::{Cursor, JsonError};
use crate::kineto::links::Links;
use crate::sink::Parts;
use crate::source::{digest, Hasher};
use crate::step_span::StepMarker;
use crate::trace_event;
use crate::walk::{Driver, Shape, Visitor};
use crate::window::Window;
use crate::writer_thread::{spawn_writer, Feed};
use slices::{Pairs, Part};

/// Batches that may wait for the writer thread: one per parsed run (1 MiB of the file with
/// two or more workers, `walk::runs_for`). Fewer than the Kineto walk's 64
/// (`writer_thread::WRITER_QUEUE`): a generic trace's events can be short, so a run's batch
/// is many rows, and 64 of them held ~90 MB of rows when a trace of a million small steps
/// kept the writer busy (330 MB peak RSS on two jobs; 251 MB with 12). It costs wall time
/// where the writer is the bottleneck (an 830 MB Chrome copy of the fsdp2 mix, two jobs:
/// 1.14–1.22 s against 1.07–1.22 s), not CPU time.
const QUEUE: usize = 12;

/// What those batches may hold (`Batch::heap_bytes`). A run of very short events is many rows:
/// at a million steps (`bench/gen_steps.py --format chrome`) a batch holds ~8,800 rows,
/// 2.2 MB, and the twelve batches took ~25 MB of the ~240 MB peak, a tenth of the bound on
/// peak RSS. With 8 MiB (three such batches) that file peaks ~23 MB lower, at ~7 % more wall
/// time on two cores (4 MiB: one batch, +12 %; 12 MiB: −16 MB, +2 %); a Chrome copy of the
/// fsdp2 mix (0.54 MB a batch) reads as before (docs/PERFORMANCE.md, "The Chrome queue in
/// bytes").
const QUEUE_BYTES: usize = 8 << 20;

fn drive(job: &FileJob, v: &mut impl Visitor, hash: Option<Hasher>) -> Result<Shape> {
    let win = Window::open(&job.path, job.progress.clone(), hash)
        .map_err(|e| IngestError::io(&job.path, e))?;
    Driver::new(win).run(v).map_err(|e| e.at(&job.path))
}

/// The pass that writes rows: workers parse, `take` pairs and sends to the writer thread.
struct RowPass<'a> {
    classifier: &'a Classifier,
    /// The step spans and launches, with `--step-marker`.
    links: Option<Links>,
    pairs: Mutex<Pairs>,
    tx: Option<Feed>,
    failed: Arc<AtomicBool>,
}

impl Visitor for RowPass<'_> {
    type Part = Part;

    fn meta(&mut self, _key: &str, _raw: &[u8]) -> Result<(), ParseErr> {
        Ok(())
    }

    fn event(&self, c: &mut Cursor<'_>, part: &mut Part, off: u64) -> Result<(), JsonError> {
        let ev = trace_event::parse(c)?;
        slices::event(&ev, part, off, self.links.as_ref());
        Ok(())
    }

    fn take(&self, mut part: Part) -> Result<(), ParseErr> {
        let mut pairs = self.pairs.lock().expect("pairs not poisoned");
        pairs.take(&mut part, self.links.as_ref());
        slices::classify(&mut part.batch, self.classifier);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(part.batch));
        if !sent || self.failed.load(Ordering::Relaxed) {
            return Err(ParseErr::new(0, "stopped: writing the output failed"));
        }
        Ok(())
    }
}

/// The process ids of a trace's events (a pass of its own, made only for `--rank-map`).
#[derive(Default)]
struct PidScan {
    pids: Mutex<BTreeSet<i64>>,
}

impl Visitor for PidScan {
    type Part = BTreeSet<i64>;

    fn meta(&mut self, _key: &str, _raw: &[u8]) -> Result<(), ParseErr> {
        Ok(())
    }

    fn event(&self, c: &mut Cursor<'_>, part: &mut Self::Part, _: u64) -> Result<(), JsonError> {
        let ev = trace_event::parse(c)?;
        if let Some(pid) = ev.pid.and_then(trace_event::int) {
            part.insert(pid);
        }
        Ok(())
    }

    fn take(&self, part: Self::Part) -> Result<(), ParseErr> {
        self.pids.lock().expect("pids not poisoned").extend(part);
        Ok(())
    }
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let hasher = job.content_hash.is_none().then(Hasher::default);
    // Whichever pass reads the file first hashes it.
    let mut unhashed = hasher.clone();
    let mut info = RunInfo::new(Format::Chrome, String::new());
    // `--step-marker`: the walk for the steps, which also gives the pids for the rank map.
    let mut links = None;
    let mut pids = None;
    if let StepMarker::Regex(_) = *job.step_marker {
        let want_pids = !job.rank_map.is_empty();
        let mut scan =
            steps::StepScan::new((*job.step_marker).clone(), want_pids, job.staging.clone());
        let walked = drive(job, &mut scan, unhashed.take());
        if let Some(e) = scan.take_spill_error() {
            return Err(IngestError::io(&job.staging, e));
        }
        walked?;
        pids = Some(scan.take_pids());
        links = Some(
            scan.finish()
                .map_err(|e| IngestError::io(&job.staging, e))?,
        );
    }
    let rank = if job.rank_map.is_empty() {
        info.resolve_rank(job, None)
    } else {
        let pids = match pids {
            Some(p) => p,
            None => {
                let mut scan = PidScan::default();
                drive(job, &mut scan, unhashed.take())?;
                scan.pids.into_inner().expect("pids not poisoned")
            }
        };
        rank_of_pids(&mut info, job, &pids)
    };
    let parts = Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        // The content hash is known only after the pass; the source alone names the parts
        // (a re-ingest replaces them in place at commit).
        tag: format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(job.source_key.as_bytes())
        ),
    };
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, writer) = spawn_writer(parts.clone(), failed.clone(), (QUEUE, QUEUE_BYTES));
    let mut pass = RowPass {
        classifier: &job.classifier,
        links,
        pairs: Mutex::default(),
        tx: Some(tx),
        failed,
    };
    let res = drive(job, &mut pass, unhashed);
    drop(pass.tx.take());
    let out = writer.join().expect("writer thread does not panic");
    let shape = res?;
    let out = out?;
    if let Some(e) = pass.links.as_ref().and_then(Links::take_launch_error) {
        return Err(IngestError::io(&job.staging, e));
    }
    let pairs = pass.pairs.into_inner().expect("pairs not poisoned");
    pairs.finish(&mut info.diag);
    info.content_hash = match (&job.content_hash, &hasher) {
        (Some(h), _) => h.clone(),
        (None, Some(h)) => digest(h),
        (None, None) => unreachable!("a new file is hashed by one of the passes"),
    };
    info.event_count = shape.events;
    info.platform = out.vendor_hint.unwrap_or("unknown");
    let busiest = out.counts.devices.iter().max_by_key(|(_, n)| **n);
    info.device_index = busiest.map(|(d, _)| *d);
    let spans = pass.links.as_ref().map_or(&[][..], Links::cpu_spans);
    info.finish(job, &parts, out, (spans, 0))
}

/// The rank of a trace whose pids the rank map may name: the lowest mapped pid's, with a
/// finding when its pids map to several ranks.
fn rank_of_pids(info: &mut RunInfo, job: &FileJob, pids: &BTreeSet<i64>) -> i64 {
    let pids: Vec<i64> = pids.iter().copied().collect();
    let ranks: BTreeSet<i64> = pids.iter().filter_map(|&p| job.rank_map.get(p)).collect();
    if ranks.len() > 1 {
        info.diag.add("rank_map_ambiguous", None, || {
            format!("the trace's pids map to ranks {ranks:?}; the lowest mapped pid's was used")
        });
    }
    info.resolve_rank_of(job, None, &pids)
}
