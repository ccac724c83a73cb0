//! `rocprofv3 --output-format json` (`<pid>_results.json`, FORMATS.md §2.3), streamed.
//!
//! The document is `{"rocprofiler-sdk-tool": [ {process}, ... ]}`; in each process object
//! the small lookup tables (`agents`, `strings`, `kernel_symbols`) come before
//! `buffer_records` in every file seen, and the records are then turned into rows as they are
//! read, in one pass. Should the tables come after the records, the records are kept as
//! compact integers until the end of the process object and resolved then (memory grows with
//! the record count only in that case).

use crate::format::Format;
use rustc_hash::FxHashMap;
use serde_json::Value;

use super::records::{self, Rec};
use super::stream::Stream;
use super::{Api, Dispatch, Emit, MemoryCopy};
use crate::classify::{Class, Kind};
use crate::error::{IngestError, ParseErr, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::source::{digest, Hasher};
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
    /// `strings.buffer_records[kind]`: the kind's name and its operation names.
    kinds: Vec<(String, Vec<String>)>,
    /// kernel id → name, and its class once a dispatch needed it.
    symbols: FxHashMap<i64, (String, Option<Class>)>,
    seen_symbols: bool,
    seen_agents: bool,
}

struct Reader<'e, 'c> {
    emit: &'e mut Emit<'c>,
    t: Tables,
    /// Records read before their tables: (buffer kind, record).
    deferred: Vec<(Bucket, Rec)>,
    gpu_names: FxHashMap<i64, String>,
    /// The first write error, reported instead of a parse error.
    failed: Option<IngestError>,
}

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
            "buffer_records" => s.object("buffer_records", |s, kind| self.records(s, kind)),
            _ => s.skip(key).map(|_| ()),
        })?;
        for (b, r) in std::mem::take(&mut self.deferred) {
            self.row(b, &r, s.offset())?;
        }
        Ok(())
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
        let v: Value =
            serde_json::from_slice(&s.raw("strings")?).map_err(|e| json_err(s, "strings", e))?;
        let list = v.get("buffer_records").and_then(Value::as_array);
        self.t.kinds = list
            .into_iter()
            .flatten()
            .map(|k| {
                let name = k
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let ops = k.get("operations").and_then(Value::as_array);
                let ops = ops.into_iter().flatten();
                (
                    name,
                    ops.map(|o| o.as_str().unwrap_or("").to_string()).collect(),
                )
            })
            .collect();
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
        s.array(kind, |s| {
            let r = s.read("a record", records::parse)?;
            if self.t.seen_symbols && self.t.seen_agents {
                self.row(b, &r, s.offset())
            } else {
                self.deferred.push((b, r));
                Ok(())
            }
        })
        .map(|_| ())
    }

    /// Resolves a record and hands it to the emitter; a write error stops the parse.
    fn row(&mut self, b: Bucket, r: &Rec, off: u64) -> Result<(), ParseErr> {
        let res = match b {
            Bucket::Dispatch => self.dispatch(r),
            Bucket::Copy => self.copy(r),
            Bucket::Api => self.api(r),
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

    fn op_name(&self, r: &Rec) -> (&str, &str) {
        let k = r
            .kind
            .and_then(|k| self.t.kinds.get(usize::try_from(k).ok()?));
        let op = r.op.and_then(|o| k?.1.get(usize::try_from(o).ok()?));
        (
            k.map_or("", |k| k.0.as_str()),
            op.map_or("", String::as_str),
        )
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
        let name = match self.op_name(r).1 {
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

    fn api(&mut self, r: &Rec) -> Result<()> {
        let Some((start, end)) = self.times(r, "API") else {
            return Ok(());
        };
        let (domain, op) = self.op_name(r);
        let (domain, op) = (domain.to_string(), op.to_string());
        let a = Api {
            domain: &domain,
            name: if op.is_empty() { "unknown" } else { &op },
            pid: self.t.pid,
            tid: r.tid,
            start,
            end,
            correlation: r.corr,
            external: r.ext,
        };
        self.emit.api(&a)
    }
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
    let mut emit = Emit::new(&job.classifier, &parts);
    let mut reader = Reader {
        emit: &mut emit,
        t: Tables::default(),
        deferred: Vec::new(),
        gpu_names: FxHashMap::default(),
        failed: None,
    };
    let res = walk(&mut reader, &mut Stream::new(win));
    let (failed, names) = (reader.failed.take(), std::mem::take(&mut reader.gpu_names));
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
    super::finish(job, info, &parts, (out, &[]), events, &|d| {
        names.get(&d).cloned()
    })
}
