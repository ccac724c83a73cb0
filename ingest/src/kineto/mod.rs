//! PyTorch profiler (Kineto) traces: `.json`, `.json.gz`, `.json.zst`, and the `.tmp` a
//! crashed writer leaves (which fails with its offset).
//!
//! One streaming walk over the file: windows of events are parsed in parallel into rows,
//! noting the metadata, step spans and launches as they go (`links`); the rows wait in a
//! spill file until those are all known (`pending`), then go to the sink with their steps.

mod extract;
pub(crate) mod launches;
pub(crate) mod links;
mod memory;
mod pending;
pub(crate) mod spool;

use crate::format::Format;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{IngestError, ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::json::{Cursor, JsonError};
use crate::sink::Parts;
use crate::source::{digest, Hasher};
use crate::walk::{Driver, Shape, Visitor};
use crate::window::Window;
use extract::Ctx;
use links::{LinkPass, Links, Meta};

fn drive(job: &FileJob, v: &mut impl Visitor, hash: Option<Hasher>) -> Result<Shape> {
    let win = Window::open(&job.path, job.progress.clone(), hash)
        .map_err(|e| crate::error::IngestError::io(&job.path, e))?;
    Driver::new(win).run(v).map_err(|e| e.at(&job.path))
}

/// The walk. Workers parse; their rows go over a bounded channel to the spill thread, and
/// what they noted is absorbed into `links` in file order.
struct RowPass<'a> {
    ctx: Ctx<'a>,
    taken: Mutex<Taken>,
    tx: Option<pending::Sender>,
    failed: Arc<AtomicBool>,
}

/// What the walk's parts add up to (`Visitor::take`).
struct Taken {
    links: Links,
    /// The `[memory]` events, in file order (they skip the rows' spill).
    memory: memory::MemLog,
    /// Why the memory events could not be written to their spool's file (the walk stops).
    memory_error: Option<std::io::Error>,
}

impl Taken {
    fn new(links: Links, memory: memory::MemLog) -> Mutex<Taken> {
        Mutex::new(Taken {
            links,
            memory,
            memory_error: None,
        })
    }
}

impl Visitor for RowPass<'_> {
    type Part = extract::Part;

    fn part(&self, bytes: usize) -> extract::Part {
        extract::Part::for_bytes(bytes)
    }

    fn meta(&mut self, key: &str, raw: &[u8]) -> Result<(), ParseErr> {
        let t = self.taken.get_mut().expect("taken not poisoned");
        t.links.meta.take(key, raw);
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

    fn take(&self, part: extract::Part) -> Result<(), ParseErr> {
        let mut t = self.taken.lock().expect("taken not poisoned");
        t.links.absorb(part.links)?;
        if let Err(e) = t
            .memory
            .extend(part.memory.iter().map(memory::MemRec::from))
        {
            t.memory_error = Some(e);
            return Err(ParseErr::new(0, "stopped: writing the output failed"));
        }
        let sent = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.send((part.batch, part.waits)).is_ok());
        if !sent || self.failed.load(Ordering::Relaxed) {
            // The spill failed (disk full…); its own error is what gets reported.
            return Err(ParseErr::new(0, "stopped: writing the output failed"));
        }
        Ok(())
    }
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let t0 = std::time::Instant::now();
    // A new file is hashed as the walk reads it, not by a separate read.
    let hasher = job.content_hash.is_none().then(Hasher::default);
    let failed = Arc::new(AtomicBool::new(false));
    let (tx, spiller) = pending::spawn(&job.staging, failed.clone(), job.classifier.clone())?;
    let mut walk = RowPass {
        ctx: Ctx {
            step_marker: &job.step_marker,
        },
        taken: Taken::new(
            Links::spilling_to(job.staging.clone()),
            memory::MemLog::in_dir(job.staging.clone()),
        ),
        tx: Some(tx),
        failed,
    };
    let res = drive(job, &mut walk, hasher.clone());
    drop(walk.tx.take());
    let spilled = spiller.join().expect("spill thread does not panic");
    let mut taken = walk.taken.into_inner().expect("taken not poisoned");
    let spool_error = taken.links.take_spill_error().or(taken.memory_error.take());
    // A failed spill (the rows', the launches' or the memory events') stops the walk: its
    // error is the one to report.
    let spilled = match (spilled, res, spool_error) {
        (Err(e), _, _) => return Err(e),
        (Ok(_), _, Some(e)) => return Err(IngestError::io(&job.staging, e)),
        (Ok(_), Err(e), None) => return Err(first_error(job, e)),
        (Ok(s), Ok(shape), None) => (s, shape),
    };
    let (spilled, shape) = spilled;
    let t1 = t0.elapsed();
    let content_hash = match (&job.content_hash, &hasher) {
        (Some(h), _) => h.clone(),
        (None, h) => digest(h.as_ref().expect("hasher set above")),
    };
    let mut links = taken.links;
    // The launches' lookup is built by the settle (beside the CPU rows, on many cores).
    let launches = links.finish_spans();
    let mut info = RunInfo::new(Format::Kineto, content_hash);
    let rank = info.resolve_rank(job, links.meta.rank);
    let parts = Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        tag: info.tag(job),
    };
    let base = links.meta.base_time_ns.unwrap_or(0);
    let mut out = pending::settle(spilled, &mut links, launches, base, &parts)?;
    if let Some(e) = links.take_launch_error() {
        return Err(IngestError::io(&job.staging, e));
    }
    out.written.extend(memory::write(
        taken.memory,
        &links,
        base,
        &parts,
        &job.staging,
    )?);
    if std::env::var_os("AORTA_TIMING").is_some() {
        // Stage timings for benchmarking (docs/PERFORMANCE.md).
        let t2 = t0.elapsed();
        let (blocks, file, asked, reads) = links.launch_stats();
        eprintln!(
            "{}: walk {t1:.2?}, settle {:.2?} (launch lookup {} kB held, {blocks} blocks, {} kB \
             in its file, ~{asked} questions from the file, {reads} blocks read)",
            job.path.display(),
            t2 - t1,
            links.launch_bytes() / 1000,
            file / 1000
        );
    }
    describe(&mut info, &links.meta, &out, shape.events);
    info.finish(job, &parts, out, (links.cpu_spans(), base))
}

/// The error a file's reading ends with: the first error of a strict links walk (one that
/// reads every event up to its `cat`, and slices it notes in full), else `e`.
///
/// Why: these are the errors, at the offsets, that ingest reported when it read every file
/// twice (links first, then rows). The row walk reads more of each event than the links walk,
/// so it can stop earlier, at a flaw in a part of an event the links walk only skips; the
/// strict re-read keeps every error line as it was, and costs a re-read only of files that
/// fail.
fn first_error(job: &FileJob, e: IngestError) -> IngestError {
    let mut strict = LinkPass {
        marker: (*job.step_marker).clone(),
        links: Links::without_launches().into(),
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
pub(crate) fn platform(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::AtomicU64;

    fn walk(path: &Path, v: &mut impl Visitor) {
        let win = Window::open(path, Arc::new(AtomicU64::new(0)), None).unwrap();
        Driver::new(win).run(v).unwrap();
    }

    /// Every Kineto trace of the corpus; `None` (a failure under `CI=true`) without one.
    fn corpus_traces() -> Option<Vec<PathBuf>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/kineto");
        let mut files = Vec::new();
        traces(&root, &mut files);
        let ci = std::env::var("CI").as_deref() == Ok("true");
        assert!(!(files.is_empty() && ci), "no corpus at {root:?}");
        (!files.is_empty()).then_some(files)
    }

    /// A row walk sending its batches to `tx`, its launches and memory events kept in memory.
    fn row_pass<'a>(
        step_marker: &'a crate::step_span::StepMarker,
        tx: pending::Sender,
    ) -> RowPass<'a> {
        RowPass {
            ctx: Ctx { step_marker },
            taken: Taken::new(Links::default(), memory::MemLog::default()),
            tx: Some(tx),
            failed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn traces(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let name = p.to_string_lossy();
            if p.is_dir() {
                traces(&p, out);
            } else if name.ends_with(".json") || name.ends_with(".json.gz") {
                out.push(p);
            }
        }
    }

    /// The row walk notes the metadata, step spans and launches that a walk reading only
    /// them (the first pass of the two-pass reader this replaced) finds, on every Kineto
    /// trace of the corpus.
    #[test]
    fn the_row_walk_notes_what_the_links_walk_finds() {
        let Some(files) = corpus_traces() else {
            return;
        };
        for path in files {
            let mut reference = LinkPass::default();
            walk(&path, &mut reference);
            let (tx, rx) = std::sync::mpsc::sync_channel(crate::writer_thread::WRITER_QUEUE);
            let drain = std::thread::spawn(move || rx.into_iter().count());
            let marker = Default::default();
            let mut rows = row_pass(&marker, tx);
            walk(&path, &mut rows);
            drop(rows.tx.take());
            drain.join().unwrap();
            let mut links = rows.taken.into_inner().unwrap().links;
            links.finish().unwrap();
            let want = reference.finish();
            assert_eq!(format!("{links:?}"), format!("{want:?}"), "{path:?}");
        }
    }

    /// Walks `path` on a pool of four workers (so that both settles below get the same
    /// spilled batches), then settles it on `settle_on` into `out`: what the sinks report.
    fn spill_and_settle(path: &Path, settle_on: &rayon::ThreadPool, out: &Path) -> (String, u64) {
        let walk_on = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let classifier = Arc::new(crate::classify::Classifier::builtin());
        let (spilled, mut links) = walk_on.install(|| {
            let failed = Arc::new(AtomicBool::new(false));
            let (tx, spiller) = pending::spawn(out, failed, classifier).unwrap();
            let marker = Default::default();
            let mut rows = row_pass(&marker, tx);
            walk(path, &mut rows);
            drop(rows.tx.take());
            let links = rows.taken.into_inner().unwrap().links;
            (spiller.join().unwrap().unwrap(), links)
        });
        let launches = links.finish_spans();
        let parts = Parts {
            root: out.to_path_buf(),
            run: "r".into(),
            rank: 0,
            tag: "t".into(),
        };
        let base = links.meta.base_time_ns.unwrap_or(0);
        let o = settle_on
            .install(|| pending::settle(spilled, &mut links, launches, base, &parts))
            .unwrap();
        let written: Vec<_> = o
            .written
            .iter()
            .map(|(p, n)| (p.strip_prefix(out), n))
            .collect();
        let text = format!("{written:?} {:?} {:?} {:?}", o.diag, o.steps, o.counts);
        (text, o.counts.cpu)
    }

    /// The settle on a pool of four (`pending::groups`: row groups and flushes cut up front
    /// and built at once, two row groups of a table encoded at a time), and on a pool of two
    /// (one row group at a time), writes the very files,
    /// with the same findings, steps and counts, that the settle on one thread (the sinks fed
    /// one batch at a time, as before) writes, on every Kineto trace of the corpus.
    #[test]
    fn settling_on_the_pool_writes_what_settling_on_one_thread_writes() {
        let Some(files) = corpus_traces() else {
            return;
        };
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let (one, two, four) = (pool(1), pool(2), pool(4));
        let mut cpu_rows = 0;
        // The most row groups a file of each table had.
        let mut groups = [0, 0];
        for path in files {
            let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let want = spill_and_settle(&path, &one, a.path());
            let c = tempfile::tempdir().unwrap();
            let got = spill_and_settle(&path, &two, c.path());
            assert_eq!(got, want, "{path:?} on two threads");
            let got = spill_and_settle(&path, &four, b.path());
            assert_eq!(got, want, "{path:?}");
            let tables = [&crate::schema::CPU_OPS, &crate::schema::GPU_ACTIVITIES];
            for (table, most) in tables.into_iter().zip(&mut groups) {
                let rel = crate::schema::partition_dir(table.name, "r", 0).join("part-t.parquet");
                let (x, y) = (a.path().join(&rel), b.path().join(&rel));
                assert_eq!(x.exists(), y.exists(), "{path:?} {rel:?}");
                if x.exists() {
                    use parquet::file::reader::FileReader;
                    let file = std::fs::File::open(&x).unwrap();
                    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
                    *most = (*most).max(reader.metadata().num_row_groups());
                    let x = std::fs::read(x).unwrap();
                    assert!(x == std::fs::read(y).unwrap(), "{path:?} {rel:?}");
                    let z = std::fs::read(c.path().join(&rel)).unwrap();
                    assert!(x == z, "{path:?} {rel:?} on two threads");
                }
            }
            cpu_rows = cpu_rows.max(want.1);
        }
        // A trace with several groups of batches (`pending::GROUP_BYTES`), and one with
        // several flushes and row groups of each table (`sink::SINK_ROWS` is small here):
        // row groups cut at other rows or appended out of order are other bytes.
        assert!(
            cpu_rows > 2 * crate::writer::ROW_GROUP_ROWS as u64,
            "{cpu_rows}"
        );
        assert!(groups.iter().all(|&g| g >= 3), "{groups:?}");
    }
}
