//! `rocprofv3 --output-format json` (`<pid>_results.json`, FORMATS.md §2.3), streamed.
//!
//! The document is `{"rocprofiler-sdk-tool": [ {process}, ... ]}`; in each process object
//! the small lookup tables (`agents`, `strings`, `kernel_symbols`) come before
//! `buffer_records` in every file seen, and the records are then turned into rows as they are
//! read, in one pass. Should the tables come after the records, the records are kept as
//! compact integers until the end of the process object and resolved then (memory grows with
//! the record count only in that case).
//!
//! Steps and RCCL collectives (`links`): rocprofiler-sdk writes the dispatches first and the
//! API records after them (`prescan` cites the writer). When a roctx message (`strings.
//! marker_api`) names a step, two pre-passes find the spans and each launch's step before the
//! records are read; a capture without such a message is read once, as before. An RCCL
//! kernel whose name does not say its collective waits (`held`), with the later dispatches
//! of its stream, until the process's RCCL calls (`rccl_api`) and its launch have been read;
//! only the RCCL kernels' launches are noted.

use crate::format::Format;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::path::Path;

use super::held::Held;
use super::links::ApiLinks;
use super::prescan::{self, Steps};
use super::records::{self, Rec, Strings};
use super::stream::Stream;
use super::wanted::Wanted;
use super::{Api, Dispatch, Emit, MemoryCopy};
use crate::classify::{Category, Class, Kind};
use crate::error::{IngestError, ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::source::{digest, Hasher};
use crate::step_span::{Span, StepMarker};
use crate::trace_event::{pick, text};
use crate::window::Window;

/// A GPU or CPU agent: `type` 2 is a GPU.
#[derive(Debug, Clone)]
struct Agent {
    gpu: bool,
    /// Index among agents of its type (`logical_node_type_id`): the device index.
    type_index: i64,
}

/// The lookup tables of one process object.
#[derive(Default)]
struct Tables {
    pid: Option<i64>,
    agents: FxHashMap<i64, Agent>,
    /// Kind and operation names, roctx messages.
    strings: Strings,
    /// kernel id → name, and its class once a dispatch needed it.
    symbols: FxHashMap<i64, (String, Option<Class>)>,
    seen_symbols: bool,
    seen_agents: bool,
}

impl Tables {
    fn complete(&self) -> bool {
        self.seen_symbols && self.seen_agents
    }
}

struct Reader<'e, 'c> {
    emit: &'e mut Emit<'c>,
    path: &'e Path,
    /// Where the launches' spool goes (the staging directory).
    staging: &'e Path,
    marker: &'e StepMarker,
    t: Tables,
    /// Records read before their tables: (buffer kind, record).
    deferred: Vec<(Bucket, Rec)>,
    gpu_names: FxHashMap<i64, String>,
    /// The first write error, reported instead of a parse error.
    failed: Option<IngestError>,
    /// The pre-passes' steps per process object, once made (`None` inside: unreadable).
    steps: Option<Option<Vec<Steps>>>,
    /// The index of the process object being read.
    proc_index: usize,
    /// Per process object: whether a dispatch, an API record was read yet.
    seen_dispatch: bool,
    seen_api: bool,
    /// Dispatches waiting for their process's RCCL calls: each RCCL kernel whose name gives
    /// no collective, and every later dispatch on the streams (device, stream) of those, so a
    /// stream's rows still reach the writer in file order; and the RCCL kernels' correlation
    /// ids.
    held: Held,
    holding: FxHashSet<(i64, i64)>,
    wanted: Wanted,
    /// The step spans of the process objects read (the `steps` table).
    spans: Vec<Span>,
}

/// Batches that may wait for the writer thread: a quarter of the CSV and rocpd readers'
/// (`rocprof::QUEUE`), 32 Ki rows. Chosen when a capture of a million roctx steps held a message
/// per step beside what every reader keeps, and peaked at 258 MB on two jobs with half of
/// `rocprof::QUEUE`, 253 MB with a quarter (since the messages are held once each and found through
/// a lookup in a file, `messages`, it peaks at ~231 MB with a quarter). This reader is slower per
/// row than its writer, so the queue rarely fills: a 789 MB capture (`gen_rocprof.py --markers`,
/// two jobs) took 2.47–2.79 s against 2.52–2.62 s with the full queue in one series, 2.26–2.41 s
/// against 2.11–2.31 s with half in another, the same CPU time. The CSV reader is faster, and lost
/// ~20 % of its wall time with a queue this small.
const QUEUE: usize = super::QUEUE / 4;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bucket {
    Dispatch,
    Copy,
    Api,
}

fn bucket(key: &str) -> Option<Bucket> {
    match key {
        "kernel_dispatch" => Some(Bucket::Dispatch),
        "memory_copy" => Some(Bucket::Copy),
        k if k.ends_with("_api") => Some(Bucket::Api),
        _ => None,
    }
}

/// A table that is JSON but not of the expected shape, placed just after it.
fn json_err(s: &Stream, what: &str, e: serde_json::Error) -> ParseErr {
    ParseErr::new(s.offset(), format!("{what}: {e}"))
}

impl Reader<'_, '_> {
    fn process(&mut self, s: &mut Stream) -> Result<(), ParseErr> {
        self.t = Tables::default();
        self.emit.forget_kernel_ids();
        self.emit.links = ApiLinks::new(self.marker.clone()).spooling_to(self.staging.into());
        (self.seen_dispatch, self.seen_api) = (false, false);
        s.object("a process object", |s, key| match key {
            "metadata" => {
                let v: Value = serde_json::from_slice(&s.raw("metadata")?)
                    .map_err(|e| json_err(s, "metadata", e))?;
                self.t.pid = v.get("pid").and_then(Value::as_i64);
                Ok(())
            }
            "agents" => {
                self.t.seen_agents = true;
                s.array("agents", |s| self.agent(s)).map(|_| ())
            }
            "strings" => self.strings(s),
            "kernel_symbols" => {
                self.t.seen_symbols = true;
                s.array("kernel_symbols", |s| self.symbol(s)).map(|_| ())
            }
            "buffer_records" => {
                self.install_steps()?;
                s.object("buffer_records", |s, kind| self.records(s, kind))
            }
            _ => s.skip(key).map(|_| ()),
        })?;
        self.proc_index += 1;
        self.settle(s.offset())
    }

    /// When a roctx message names a step (and the tables came first), the pre-passes' spans
    /// and launch steps of this process object; their error past the step limit.
    fn install_steps(&mut self) -> Result<(), ParseErr> {
        if !(self.t.complete() && self.t.strings.names_steps(self.marker)) {
            return Ok(());
        }
        if self.steps.is_none() {
            let scanned = prescan::scan(self.path, self.marker, self.staging);
            // Its error is the file's (reported instead of a parse error, as `seal`'s).
            self.steps = Some(scanned.map_err(|e| {
                let msg = e.to_string();
                self.failed = Some(e);
                ParseErr::new(0, msg)
            })?);
        }
        let all = self.steps.as_mut().expect("scanned above");
        if let Some(st) = all.as_mut().and_then(|a| a.get_mut(self.proc_index)) {
            let Steps {
                spans,
                launch_steps,
            } = std::mem::take(st);
            self.emit.links = ApiLinks::with_steps(self.marker.clone(), spans, launch_steps)
                .spooling_to(self.staging.into());
        }
        Ok(())
    }

    /// The end of a process object: records read before their tables (their API records
    /// noted first, as the CSV reader reads its API files first), then the held RCCL kernels.
    fn settle(&mut self, off: u64) -> Result<(), ParseErr> {
        let deferred = std::mem::take(&mut self.deferred);
        for (_, r) in deferred.iter().filter(|(b, _)| *b == Bucket::Api) {
            self.note_api(r).map_err(|msg| ParseErr::new(off, msg))?;
        }
        self.seen_api = true;
        self.seal(off)?;
        for (b, r) in deferred {
            self.row(b, &r, off, false)?;
        }
        self.release(off)?;
        let unread = self.t.strings.messages.take_error();
        if let Some(e) = unread.or_else(|| self.emit.links.take_read_error()) {
            // A marker named by its operation for want of its message, or a row given no
            // step for want of its launch's, is no row to keep: the file fails, as on any
            // I/O error of the staging directory.
            let e = IngestError::io(self.staging, e);
            let msg = e.to_string();
            self.failed = Some(e);
            return Err(ParseErr::new(off, msg));
        }
        // The process object's rows have their steps: its spans leave the links (moved, not
        // copied, when it is the only one).
        let spans = std::mem::take(&mut self.emit.links).into_spans();
        if self.spans.is_empty() {
            self.spans = spans;
        } else {
            self.spans.extend(spans);
        }
        Ok(())
    }

    /// Writes the held kernels, in their order, now that the RCCL calls and launches are in.
    fn release(&mut self, off: u64) -> Result<(), ParseErr> {
        self.seen_api = true;
        self.seal(off)?;
        let io_err = |e| ParseErr::new(off, format!("reading back held RCCL kernels failed: {e}"));
        self.held
            .take()
            .drain(|r| self.row(Bucket::Dispatch, r, off, false), io_err)?;
        self.holding.clear();
        self.wanted.clear();
        Ok(())
    }

    /// `ApiLinks::seal`; its I/O error is the file's (reported instead of a parse error).
    fn seal(&mut self, off: u64) -> Result<(), ParseErr> {
        self.emit.links.seal().map_err(|e| {
            let e = IngestError::io(self.staging, e);
            let msg = e.to_string();
            self.failed = Some(e);
            ParseErr::new(off, msg)
        })
    }

    fn agent(&mut self, s: &mut Stream) -> Result<(), ParseErr> {
        let v: Value =
            serde_json::from_slice(&s.raw("an agent")?).map_err(|e| json_err(s, "agent", e))?;
        let int = |k: &str| v.get(k).and_then(Value::as_i64);
        let Some(handle) = v
            .get("id")
            .and_then(|i| i.get("handle"))
            .and_then(Value::as_i64)
        else {
            return Ok(());
        };
        let gpu = int("type") == Some(2);
        let same_type = self.t.agents.values().filter(|a| a.gpu == gpu).count() as i64;
        let type_index = int("logical_node_type_id")
            .or(int("gpu_index"))
            .unwrap_or(same_type);
        let name = ["product_name", "name"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str).filter(|n| !n.is_empty()))
            .unwrap_or("")
            .to_string();
        if gpu {
            self.gpu_names.insert(type_index, name);
        }
        self.t.agents.insert(handle, Agent { gpu, type_index });
        Ok(())
    }

    fn strings(&mut self, s: &mut Stream) -> Result<(), ParseErr> {
        self.t.strings = Strings::read(s, self.staging)?;
        Ok(())
    }

    fn symbol(&mut self, s: &mut Stream) -> Result<(), ParseErr> {
        let raw = s.raw("a kernel symbol")?;
        let [id, formatted, mangled] = pick(
            &raw,
            &[b"kernel_id", b"formatted_kernel_name", b"kernel_name"],
        );
        let Some(id) = id.and_then(crate::json::int_from_value) else {
            return Ok(());
        };
        let name = [formatted, mangled]
            .into_iter()
            .flatten()
            .filter_map(text)
            .find(|n| !n.is_empty())
            .map(|n| n.into_owned())
            .unwrap_or_else(|| format!("kernel_{id}"));
        self.t.symbols.insert(id, (name, None));
        self.emit.forget_kernel_ids();
        Ok(())
    }

    fn records(&mut self, s: &mut Stream, kind: &str) -> Result<(), ParseErr> {
        let Some(b) = bucket(kind) else {
            let n = s.skip(kind)?;
            self.emit.skipped(n, || format!("buffer_records.{kind}"));
            return Ok(());
        };
        if b == Bucket::Api {
            self.seen_api = true;
        } else if self.seen_api {
            // The API arrays are all in (rocprofv3 writes them together).
            self.release(s.offset())?;
        }
        self.seen_dispatch |= b == Bucket::Dispatch;
        s.array(kind, |s| {
            let r = s.read("a record", records::parse)?;
            if !self.t.complete() {
                self.deferred.push((b, r));
                return Ok(());
            }
            self.row(b, &r, s.offset(), true)
        })
        .map(|_| ())
    }

    /// Notes everything `links` takes from an API record read before its tables (as the
    /// CSV reader reads its API files first); an error past the step limit.
    fn note_api(&mut self, r: &Rec) -> Result<(), String> {
        let (domain, name) = self.t.strings.api_names(r);
        match r.call(domain, name) {
            Some(c) => self.emit.links.note(&c),
            None => Ok(()),
        }
    }

    /// Resolves a record and hands it to the emitter (`note`: an API record's links too);
    /// a write error stops the parse.
    fn row(&mut self, b: Bucket, r: &Rec, off: u64, note: bool) -> Result<(), ParseErr> {
        let res = match b {
            Bucket::Dispatch => self.dispatch(r),
            Bucket::Copy => self.copy(r),
            Bucket::Api => self.api(r, note),
        };
        res.map_err(|e| {
            let msg = e.to_string();
            self.failed = Some(e);
            ParseErr::new(off, msg)
        })
    }

    fn device(&self, agent: Option<i64>) -> i64 {
        agent
            .and_then(|h| self.t.agents.get(&h))
            .map_or(agent.unwrap_or(-1), |a| a.type_index)
    }

    fn times(&mut self, r: &Rec, what: &str) -> Option<(i64, i64)> {
        let t = r.start.zip(r.end);
        if t.is_none() {
            self.emit.diag("missing_timestamp", || {
                format!("{what} record without timestamps")
            });
        }
        t
    }

    fn dispatch(&mut self, r: &Rec) -> Result<()> {
        let Some((start, end)) = self.times(r, "kernel_dispatch") else {
            return Ok(());
        };
        let device = self.device(r.agent);
        let id = r.kernel_id.unwrap_or(-1);
        let (name, class) = self.t.symbols.entry(id).or_insert_with(|| {
            self.emit
                .diag_only("unknown_kernel_id", || format!("kernel_id {id}"));
            (format!("kernel_{id}"), None)
        });
        let class = match class {
            Some(c) => *c,
            None => *class.insert(self.emit.classify(Kind::Kernel, name)),
        };
        // An RCCL kernel that does not say its collective waits for the RCCL calls, which
        // come after the dispatches, and so does every later dispatch on its stream: the
        // writer clips a stream's overlaps in the order its rows arrive.
        let stream = (device, r.stream.unwrap_or(0));
        let rccl = no_collective(class);
        if !self.seen_api && (rccl || self.holding.contains(&stream)) {
            if rccl {
                self.wanted.extend(r.corr).map_err(|e| {
                    IngestError::file(self.path, format!("holding RCCL kernels failed: {e}"))
                })?;
                self.holding.insert(stream);
            }
            return self.held.push(r).map_err(|e| {
                IngestError::file(self.path, format!("holding RCCL kernels failed: {e}"))
            });
        }
        let d = Dispatch {
            device,
            stream: r.stream.unwrap_or(0),
            name,
            start,
            end,
            correlation: r.corr,
            external: r.ext,
            grid: r.grid,
            workgroup: r.workgroup,
        };
        self.emit.kernel_by_id(id, &d, class)
    }

    fn copy(&mut self, r: &Rec) -> Result<()> {
        let Some((start, end)) = self.times(r, "memory_copy") else {
            return Ok(());
        };
        let gpu = |h: Option<i64>| h.and_then(|h| self.t.agents.get(&h)).filter(|a| a.gpu);
        let agent = if gpu(r.dst_agent).is_some() {
            r.dst_agent
        } else {
            r.src_agent
        };
        let name = match self.t.strings.names(r).1 {
            "" => "MEMORY_COPY".to_string(),
            op => op.to_string(),
        };
        let c = MemoryCopy {
            device: self.device(agent),
            stream: r.stream.unwrap_or(0),
            name: &name,
            start,
            end,
            correlation: r.corr,
            bytes: r.bytes,
        };
        self.emit.copy(&c)
    }

    /// An API record's row; with `note`, what `links` needs of it: its RCCL call, and its
    /// launch when dispatches may still come or a held RCCL kernel waits for it (the spans
    /// came from the pre-passes).
    fn api(&mut self, r: &Rec, note: bool) -> Result<()> {
        let Some((start, end)) = self.times(r, "API") else {
            return Ok(());
        };
        let (domain, name) = self.t.strings.api_names(r);
        let a = Api {
            domain,
            name: if name.is_empty() { "unknown" } else { name },
            pid: self.t.pid,
            tid: r.tid,
            start,
            end,
            correlation: r.corr,
            external: r.ext,
        };
        if let Some(c) = r.call(domain, name).filter(|_| note) {
            if !self.emit.links.note_rccl(&c) {
                if let (Some(tid), Some(corr)) = (r.tid, r.corr) {
                    let staging = self.staging;
                    let wanted =
                        |w: &mut Wanted| w.contains(corr).map_err(|e| IngestError::io(staging, e));
                    if !self.seen_dispatch || wanted(&mut self.wanted)? {
                        self.emit.links.note_launch(corr, tid, start);
                    }
                }
            }
        }
        self.emit.api(&a)
    }
}

/// An RCCL kernel whose name gives no collective (`ncclDevKernel_Generic_1`): its
/// collective is the RCCL call's around its launch.
fn no_collective(c: Class) -> bool {
    matches!(c, (Category::Comm, None | Some("other")))
}

fn walk(reader: &mut Reader, s: &mut Stream) -> Result<(), ParseErr> {
    s.object("the document", |s, key| match key {
        "rocprofiler-sdk-tool" => s
            .array("rocprofiler-sdk-tool", |s| reader.process(s))
            .map(|_| ()),
        _ => s.skip(key).map(|_| ()),
    })?;
    s.expect_end()
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let hasher = job.content_hash.is_none().then(Hasher::default);
    let win = Window::open(&job.path, job.progress.clone(), hasher.clone())
        .map_err(|e| IngestError::io(&job.path, e))?;
    // Ranks are not in rocprof JSON: the rank map (by the pid of `<pid>_results.json`), the
    // file name, `--rank` or 0. The hash is only known
    // after reading, so the part tag uses the path and size until then.
    let mut info = RunInfo::new(
        Format::RocprofJson,
        job.content_hash.clone().unwrap_or_default(),
    );
    if job.content_hash.is_none() {
        info.content_hash = format!("{}", job.file_bytes);
    }
    let pids: Vec<i64> = super::pid_from_name(&job.path).into_iter().collect();
    let parts = super::parts_for(job, &mut info, None, &pids);
    let mut emit = Emit::new(&job.classifier, &parts, QUEUE);
    let mut reader = Reader {
        emit: &mut emit,
        path: &job.path,
        staging: &job.staging,
        marker: &job.step_marker,
        t: Tables::default(),
        deferred: Vec::new(),
        gpu_names: FxHashMap::default(),
        failed: None,
        steps: None,
        proc_index: 0,
        seen_dispatch: false,
        seen_api: false,
        held: Held::new(&job.staging),
        holding: FxHashSet::default(),
        wanted: Wanted::new(job.staging.clone()),
        spans: Vec::new(),
    };
    let res = walk(&mut reader, &mut Stream::new(win));
    let (failed, names) = (reader.failed.take(), std::mem::take(&mut reader.gpu_names));
    let mut spans = std::mem::take(&mut reader.spans);
    // What the reader held for the last process object (its `strings`, one message a step)
    // goes before the sinks' last flush.
    drop(reader);
    // One process object's spans come sorted; a stable sort's buffer (half of them) is not
    // needed (the `steps` table takes each step's first start and last end, in any order).
    if !spans.is_sorted_by_key(|s| (s.start, s.end)) {
        spans.sort_unstable_by_key(|s| (s.start, s.end));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    res.map_err(|e| e.at(&job.path))?;
    let events = emit.events;
    let out = emit.finish()?;
    info.content_hash = match (&job.content_hash, &hasher) {
        (Some(h), _) => h.clone(),
        (None, h) => digest(h.as_ref().expect("hasher set above")),
    };
    super::finish(job, info, &parts, (out, &spans), events, &|d| {
        names.get(&d).cloned()
    })
}
