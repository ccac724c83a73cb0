//! rocprofv3 CSV output (FORMATS.md §2.2): one file per record kind and process,
//! `<pid>_kernel_trace.csv`, `<pid>_memory_copy_trace.csv`, `<pid>_hip_api_trace.csv`…
//!
//! A file's kind comes from its header, not its name (renamed samples are common), and
//! columns are found by name, case-insensitively, because four header generations of the
//! kernel trace exist (G1 without streams, G2 with thread/dispatch ids, G3 with stream and
//! register counts, G4 `Guid,`-prefixed from `rocpd2csv`). The files of one process (same
//! directory and `<prefix>` before `kernel_trace.csv`) are one ingest job: `group` forms
//! those jobs, the kernel trace being the job's path and the others its siblings.

use crate::format::Format;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::classify::Kind;
use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::rocprof::links::{ApiLinks, Call};
use crate::rocprof::{Api, Dispatch, Emit, MemoryCopy};

/// What a CSV file holds, from its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CsvKind {
    Kernel,
    Copy,
    Api,
    Agents,
    /// Not a timeline aorta writes: why.
    NotTrace(&'static str),
}

/// The files that travel with `<prefix>kernel_trace.csv`.
const SIBLINGS: &[&str] = &[
    "memory_copy_trace.csv",
    "hip_api_trace.csv",
    "hsa_api_trace.csv",
    "marker_api_trace.csv",
    "rccl_api_trace.csv",
    "agent_info.csv",
];

/// Lower-cased column names of a header.
fn columns(header: &csv::StringRecord) -> Vec<String> {
    header
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect()
}

/// The kind of a file with this header.
pub(crate) fn kind_of(cols: &[String]) -> CsvKind {
    let has = |n: &str| cols.iter().any(|c| c == n);
    let timed = has("start_timestamp") && has("end_timestamp");
    if has("counter_name") {
        CsvKind::NotTrace("counter collection: per-dispatch counter values, not a timeline")
    } else if timed && has("kernel_name") {
        CsvKind::Kernel
    } else if timed && has("direction") {
        CsvKind::Copy
    } else if timed && has("domain") && has("function") {
        CsvKind::Api
    } else if has("node_id") && has("agent_type") {
        CsvKind::Agents
    } else if has("totaldurationns") {
        CsvKind::NotTrace("statistics summary (*_stats.csv), not a timeline")
    } else if has("allocation_size") {
        CsvKind::NotTrace("memory allocations: aorta has no table for them")
    } else if has("alloc_flags") {
        CsvKind::NotTrace("scratch memory events: aorta has no table for them")
    } else {
        CsvKind::NotTrace("CSV without the columns of a rocprofv3 trace")
    }
}

fn reader(path: &Path) -> Result<csv::Reader<Box<dyn std::io::Read + Send>>> {
    let (r, _) =
        crate::source::open(path, Default::default()).map_err(|e| IngestError::io(path, e))?;
    Ok(csv::ReaderBuilder::new().flexible(false).from_reader(r))
}

/// The kind of the CSV file at `path`, from its header line.
pub(crate) fn sniff(path: &Path) -> Result<CsvKind> {
    let mut r = reader(path)?;
    match r.headers() {
        Ok(h) if h.len() > 1 => Ok(kind_of(&columns(h))),
        Ok(_) => Ok(CsvKind::NotTrace("empty or one-column CSV")),
        Err(e) => Err(csv_err(path, e)),
    }
}

/// `path` and the prefix before its `kernel_trace.csv`, if it is named that way.
fn prefix_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy().to_string();
    name.strip_suffix("kernel_trace.csv").map(str::to_string)
}

/// One ingest job: a primary file and its siblings; or a file skipped, with the reason.
#[derive(Debug, Clone)]
pub(crate) enum Planned {
    Job(PathBuf, Vec<PathBuf>),
    Skip(PathBuf, String),
}

/// Forms the jobs of a set of CSV files (any directories), in the order given.
pub(crate) fn group(files: &[PathBuf]) -> Result<Vec<Planned>> {
    let mut kinds = BTreeMap::new();
    for f in files {
        kinds.insert(f.clone(), sniff(f)?);
    }
    let mut claimed = std::collections::HashSet::new();
    let mut siblings: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for (f, k) in &kinds {
        let Some(prefix) = prefix_of(f).filter(|_| *k == CsvKind::Kernel) else {
            continue;
        };
        let dir = f.parent().unwrap_or(Path::new(""));
        for s in SIBLINGS {
            let p = dir.join(format!("{prefix}{s}"));
            if kinds
                .get(&p)
                .is_some_and(|k| !matches!(k, CsvKind::NotTrace(_) | CsvKind::Kernel))
            {
                claimed.insert(p.clone());
                siblings.entry(f.clone()).or_default().push(p);
            }
        }
    }
    let mut out = Vec::new();
    for f in files {
        if claimed.contains(f) {
            continue;
        }
        out.push(match &kinds[f] {
            CsvKind::NotTrace(why) => Planned::Skip(f.clone(), why.to_string()),
            CsvKind::Agents => Planned::Skip(
                f.clone(),
                "agent table without a kernel trace of the same prefix".into(),
            ),
            _ => Planned::Job(f.clone(), siblings.remove(f).unwrap_or_default()),
        });
    }
    Ok(out)
}

fn csv_err(path: &Path, e: csv::Error) -> IngestError {
    let line = e.position().map_or(0, |p| p.line());
    let msg = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("row has {len} fields, the header has {expected_len}")
        }
        _ => e.to_string(),
    };
    IngestError::Line {
        path: path.display().to_string(),
        line,
        msg,
    }
}

/// A row with its columns found by name (lower-case name → position, built once per file).
struct Row<'a> {
    rec: &'a csv::StringRecord,
    cols: &'a rustc_hash::FxHashMap<String, usize>,
    path: &'a Path,
    line: u64,
}

impl Row<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        let i = *self.cols.get(name)?;
        self.rec.get(i).map(str::trim)
    }

    /// An integer column that may be absent or empty (`None`), but not malformed.
    fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| self.err(format!("{name} is not an integer: {v:?}"))),
        }
    }

    fn required(&self, name: &str) -> Result<i64> {
        self.int(name)?
            .ok_or_else(|| self.err(format!("{name} is missing")))
    }

    fn err(&self, msg: String) -> IngestError {
        IngestError::Line {
            path: self.path.display().to_string(),
            line: self.line,
            msg,
        }
    }

    fn times(&self) -> Result<(i64, i64)> {
        Ok((
            self.required("start_timestamp")?,
            self.required("end_timestamp")?,
        ))
    }

    fn xyz(&self, names: [&str; 3]) -> Result<[Option<i64>; 3]> {
        Ok([
            self.int(names[0])?,
            self.int(names[1])?,
            self.int(names[2])?,
        ])
    }
}

/// Agent ids → device index, from `agent_info.csv` when the group has one.
#[derive(Default)]
struct Agents {
    /// `Agent N` (N = logical node id, rocprof's default) → index among GPUs.
    by_node: BTreeMap<i64, i64>,
    names: BTreeMap<i64, String>,
}

impl Agents {
    /// `"Agent 4"`, `"GPU 0"`, `4`: the device index.
    fn device(&self, raw: Option<&str>) -> Option<i64> {
        let raw = raw?.trim();
        if let Some(n) = raw.strip_prefix("GPU ") {
            return n.trim().parse().ok();
        }
        let n: i64 = raw
            .strip_prefix("Agent ")
            .unwrap_or(raw)
            .trim()
            .parse()
            .ok()?;
        Some(self.by_node.get(&n).copied().unwrap_or(n))
    }

    fn is_gpu(&self, raw: Option<&str>) -> bool {
        let raw = raw.unwrap_or("").trim();
        if raw.starts_with("GPU") {
            return true;
        }
        let n = raw
            .strip_prefix("Agent ")
            .unwrap_or(raw)
            .trim()
            .parse::<i64>();
        n.is_ok_and(|n| self.by_node.contains_key(&n))
    }
}

/// Reads every row of `path`, calling `f` with each.
fn each_row(path: &Path, mut f: impl FnMut(&Row) -> Result<()>) -> Result<u64> {
    let mut r = reader(path)?;
    let header = columns(r.headers().map_err(|e| csv_err(path, e))?);
    // The first of duplicate names wins, as a scan by name would.
    let mut cols = rustc_hash::FxHashMap::default();
    for (i, c) in header.into_iter().enumerate() {
        cols.entry(c).or_insert(i);
    }
    let mut rec = csv::StringRecord::new();
    let mut n = 0;
    while r.read_record(&mut rec).map_err(|e| csv_err(path, e))? {
        let line = rec.position().map_or(0, |p| p.line());
        f(&Row {
            rec: &rec,
            cols: &cols,
            path,
            line,
        })?;
        n += 1;
    }
    Ok(n)
}

fn read_agents(path: &Path) -> Result<Agents> {
    let mut gpus = Vec::new();
    let mut names = BTreeMap::new();
    each_row(path, |r| {
        if r.get("agent_type")
            .is_some_and(|t| t.eq_ignore_ascii_case("GPU"))
        {
            let logical = r.int("logical_node_id")?.or(r.int("node_id")?);
            if let Some(l) = logical {
                gpus.push(l);
                let name = ["product_name", "name"]
                    .iter()
                    .find_map(|k| r.get(k).filter(|n| !n.is_empty()));
                names.insert(l, name.unwrap_or("").to_string());
            }
        }
        Ok(())
    })?;
    gpus.sort();
    let by_node: BTreeMap<i64, i64> = gpus
        .iter()
        .enumerate()
        .map(|(i, &l)| (l, i as i64))
        .collect();
    let names = names
        .into_iter()
        .filter_map(|(l, n)| Some((*by_node.get(&l)?, n)))
        .collect();
    Ok(Agents { by_node, names })
}

fn kernel(emit: &mut Emit, agents: &Agents, r: &Row) -> Result<()> {
    let (start, end) = r.times()?;
    let name = r.get("kernel_name").unwrap_or("");
    let class = emit.classify(Kind::Kernel, name);
    let queue = r.int("queue_id")?;
    let d = Dispatch {
        device: agents.device(r.get("agent_id")).unwrap_or(-1),
        // G1/G2 have no Stream_Id: the queue is the closest thing.
        stream: r.int("stream_id")?.or(queue).unwrap_or(0),
        name,
        start,
        end,
        correlation: r.int("correlation_id")?,
        external: None,
        grid: r.xyz(["grid_size_x", "grid_size_y", "grid_size_z"])?,
        workgroup: r.xyz(["workgroup_size_x", "workgroup_size_y", "workgroup_size_z"])?,
    };
    emit.kernel(&d, class)
}

fn copy(emit: &mut Emit, agents: &Agents, r: &Row) -> Result<()> {
    let (start, end) = r.times()?;
    let (src, dst) = (r.get("source_agent_id"), r.get("destination_agent_id"));
    let dev = if agents.is_gpu(dst) || !agents.is_gpu(src) {
        dst
    } else {
        src
    };
    let c = MemoryCopy {
        device: agents.device(dev).unwrap_or(-1),
        stream: r.int("stream_id")?.unwrap_or(0),
        name: r
            .get("direction")
            .filter(|d| !d.is_empty())
            .unwrap_or("MEMORY_COPY"),
        start,
        end,
        correlation: r.int("correlation_id")?,
        bytes: None,
    };
    emit.copy(&c)
}

fn api(emit: &mut Emit, r: &Row) -> Result<()> {
    let (start, end) = r.times()?;
    let a = Api {
        domain: r.get("domain").unwrap_or(""),
        name: r.get("function").unwrap_or(""),
        pid: r.int("process_id")?,
        tid: r.int("thread_id")?,
        start,
        end,
        correlation: r.int("correlation_id")?,
        external: None,
    };
    emit.links
        .note(&Call {
            domain: a.domain,
            name: a.name,
            tid: a.tid,
            start,
            end,
            correlation: a.correlation,
        })
        .map_err(|msg| r.err(msg))?;
    emit.api(&a)
}

/// The order the files of a job are read in: the API records first, the marker and RCCL
/// traces before the others (a HIP call's step comes from the markers), then the copies and
/// dispatches, which take their steps and collectives from them (`links`).
fn read_order(files: &[&Path], kinds: &[CsvKind]) -> Vec<usize> {
    let rank = |i: usize| {
        let name = files[i].to_string_lossy().to_ascii_lowercase();
        match kinds[i] {
            CsvKind::Api if name.contains("marker") || name.contains("rccl") => 0,
            CsvKind::Api => 1,
            CsvKind::Copy => 2,
            CsvKind::Kernel => 3,
            _ => 4,
        }
    };
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| rank(i));
    order
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let mut files: Vec<&Path> = vec![&job.path];
    files.extend(job.siblings.iter().map(PathBuf::as_path));
    let hash = job.hash()?;
    let mut info = RunInfo::new(Format::RocprofCsv, hash);
    let pids: Vec<i64> = super::pid_from_name(&job.path).into_iter().collect();
    let parts = super::parts_for(job, &mut info, None, &pids);
    let kinds: Vec<CsvKind> = files.iter().map(|f| sniff(f)).collect::<Result<_>>()?;
    let agents = match files
        .iter()
        .zip(&kinds)
        .find(|(_, k)| **k == CsvKind::Agents)
    {
        Some((f, _)) => read_agents(f)?,
        None => Agents::default(),
    };
    let mut emit = Emit::new(&job.classifier, &parts, super::QUEUE);
    emit.links = ApiLinks::new((*job.step_marker).clone()).spooling_to(job.staging.clone());
    let seal = |links: &mut ApiLinks| links.seal().map_err(|e| IngestError::io(&job.staging, e));
    for i in read_order(&files, &kinds) {
        let (f, k) = (&files[i], &kinds[i]);
        if *k != CsvKind::Api {
            seal(&mut emit.links)?;
        }
        let res = match k {
            CsvKind::Kernel => each_row(f, |r| kernel(&mut emit, &agents, r)),
            CsvKind::Copy => each_row(f, |r| copy(&mut emit, &agents, r)),
            CsvKind::Api => each_row(f, |r| api(&mut emit, r)),
            CsvKind::Agents => Ok(0),
            CsvKind::NotTrace(why) => Err(IngestError::file(f, format!("not a trace: {why}"))),
        };
        res?;
    }
    seal(&mut emit.links)?;
    if let Some(e) = emit.links.take_read_error() {
        return Err(IngestError::io(&job.staging, e));
    }
    // Every row has its step: the spans leave the links (no copy of a span per step), and
    // the launches' lookups go before the sinks' last flush.
    let spans = std::mem::take(&mut emit.links).into_spans();
    let events = emit.events;
    let out = emit.finish()?;
    let names = agents.names;
    let gpu_name = |d| names.get(&d).cloned();
    super::finish(job, info, &parts, (out, &spans), events, &gpu_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(h: &str) -> Vec<String> {
        h.split(',').map(|c| c.to_ascii_lowercase()).collect()
    }

    #[test]
    fn kinds_from_headers_of_every_generation() {
        let g1 = "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp";
        let g4 = "Guid,Kind,Agent_Id,Queue_Id,Stream_Id,Kernel_Name,START_TIMESTAMP,End_Timestamp";
        assert_eq!(kind_of(&cols(g1)), CsvKind::Kernel);
        assert_eq!(kind_of(&cols(g4)), CsvKind::Kernel);
        let api =
            "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp";
        assert_eq!(kind_of(&cols(api)), CsvKind::Api);
        let stats = "Name,Calls,TotalDurationNs,AverageNs";
        assert!(matches!(kind_of(&cols(stats)), CsvKind::NotTrace(_)));
    }

    #[test]
    fn agent_ids_map_through_agent_info() {
        let a = Agents {
            by_node: [(2, 0), (3, 1)].into_iter().collect(),
            names: BTreeMap::new(),
        };
        assert_eq!(a.device(Some("Agent 3")), Some(1));
        assert_eq!(a.device(Some("GPU 5")), Some(5));
        assert_eq!(a.device(Some("7")), Some(7));
        assert!(a.is_gpu(Some("Agent 2")) && !a.is_gpu(Some("Agent 0")));
    }
}
