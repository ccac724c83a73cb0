//! One input file's job and what it produced: the per-file tables every format shares
//! (`runs`, `steps`, `diagnostics`) are written here, once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::classify::Classifier;
use crate::diag::Diagnostics;
use crate::error::Result;
use crate::format::Format;
use crate::schema::{DIAGNOSTICS, RUNS, SCHEMA_VERSION, STEPS};
use crate::sink::{Parts, SinkOut, StepAgg, StepAggs};
use crate::step_set::StepSet;
use crate::step_span::Span;
use crate::writer::{write_all, Cols};

pub(crate) use crate::rank_map::RankMap;

/// Everything a reader needs to turn one file into parts.
pub(crate) struct FileJob {
    pub path: PathBuf,
    /// Read with `path` as one job (the other CSV files of a rocprofv3 process).
    pub siblings: Vec<PathBuf>,
    pub label: String,
    pub rank_flag: Option<i64>,
    /// `--rank-map`: process id → rank (empty without the flag).
    pub rank_map: Arc<RankMap>,
    /// Known when the file was hashed to decide whether to skip it; otherwise the reader
    /// hashes it while reading.
    pub content_hash: Option<String>,
    /// The canonical path, the file's identity in the manifest.
    pub source_key: String,
    pub file_bytes: u64,
    pub staging: PathBuf,
    pub classifier: Arc<Classifier>,
    /// Which annotation ranges are steps (`--step-marker`).
    pub step_marker: Arc<crate::step_span::StepMarker>,
    /// Bytes read from disk so far (both passes), for progress.
    pub progress: Arc<AtomicU64>,
    /// `--param KEY=VALUE` pairs, added to the file's `runs.params`.
    pub params: Arc<Vec<(String, String)>>,
}

impl FileJob {
    /// The input's content hash: the planner's, else computed now by the same rule
    /// (`source::hash_files`), for readers that do not hash while they read.
    pub(crate) fn hash(&self) -> Result<String> {
        match &self.content_hash {
            Some(h) => Ok(h.clone()),
            None => crate::source::hash_files(&self.path, &self.siblings),
        }
    }
}

/// Rows per table and the part files written (relative to the dataset root).
#[derive(Debug, Clone, Default)]
pub struct FileOutcome {
    pub(crate) parts: Vec<PathBuf>,
    /// Rows written per table name.
    pub rows: BTreeMap<&'static str, u64>,
    pub(crate) events: u64,
    /// Data-quality findings (diagnostics) in the file, summed over codes.
    pub warnings: u64,
    /// `warnings` per diagnostic code (what `--strict` checks).
    pub(crate) findings: BTreeMap<&'static str, u64>,
    pub(crate) run: String,
    /// The rank the file was read as (`runs.rank`).
    pub rank: i64,
    pub(crate) content_hash: String,
    /// What the file says about its job (`job::decide`).
    pub(crate) identity: crate::job::Identity,
}

/// Where a file's rank came from (`runs.rank_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum RankSource {
    DistributedInfo,
    RankMap,
    FileName,
    Flag,
    /// The JSONL record's own field.
    Record,
    /// One of several processes of an Nsight Systems file, numbered in pid order.
    PidOrder,
    /// The rocpd process environment's `RANK`.
    Environment,
    /// Nothing said: rank 0, with a diagnostic.
    #[default]
    Default,
}

impl RankSource {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            RankSource::DistributedInfo => "distributed_info",
            RankSource::RankMap => "rank_map",
            RankSource::FileName => "file_name",
            RankSource::Flag => "flag",
            RankSource::Record => "record",
            RankSource::PidOrder => "pid_order",
            RankSource::Environment => "environment",
            RankSource::Default => "default",
        }
    }
}

/// The `runs` row being assembled.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunInfo {
    pub format: Format,
    pub platform: &'static str,
    pub device_name: Option<String>,
    pub device_index: Option<i64>,
    pub world_size: Option<i64>,
    pub rank: i64,
    pub rank_source: RankSource,
    pub runtime_version: Option<String>,
    /// `runs.params`: a JSON object, when the file carries any.
    pub params: Option<String>,
    pub base_time_ns: Option<i64>,
    pub event_count: u64,
    pub metric_count: u64,
    pub content_hash: String,
    pub diag: Diagnostics,
    /// Steps with a row of their own and nothing else to say (a metrics log's), beside the
    /// sink's (see `step_set`).
    pub step_set: StepSet,
}

/// `rank3`, `rank-3`, `rank_03`, `worker3` in a file name.
pub(crate) fn rank_from_name(path: &std::path::Path) -> Option<i64> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    for key in ["rank", "worker"] {
        let mut rest = name.as_str();
        while let Some(i) = rest.find(key) {
            rest = &rest[i + key.len()..];
            let digits: String = rest
                .trim_start_matches(['-', '_'])
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

impl RunInfo {
    pub(crate) fn new(format: Format, content_hash: String) -> RunInfo {
        RunInfo {
            format,
            platform: "unknown",
            content_hash,
            ..RunInfo::default()
        }
    }

    /// The unique name of this file's parts: its identity and content.
    pub(crate) fn tag(&self, job: &FileJob) -> String {
        let id = format!("{}{}", job.source_key, self.content_hash);
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(id.as_bytes()))
    }

    /// Rank from the trace, else the file name, else `--rank`, else 0 (with a diagnostic).
    pub(crate) fn resolve_rank(&mut self, job: &FileJob, from_trace: Option<i64>) -> i64 {
        self.resolve_rank_of(job, from_trace, &[])
    }

    /// Rank from the trace, else the rank map (the first of `pids` it names), else the file
    /// name, else `--rank`, else 0 (with a diagnostic).
    pub(crate) fn resolve_rank_of(
        &mut self,
        job: &FileJob,
        from_trace: Option<i64>,
        pids: &[i64],
    ) -> i64 {
        let mapped = pids.iter().find_map(|&p| job.rank_map.get(p));
        let (rank, source) = if let Some(r) = from_trace {
            (r, RankSource::DistributedInfo)
        } else if let Some(r) = mapped {
            (r, RankSource::RankMap)
        } else if let Some(r) = rank_from_name(&job.path) {
            (r, RankSource::FileName)
        } else if let Some(r) = job.rank_flag {
            (r, RankSource::Flag)
        } else {
            self.diag.add("rank_default", None, || {
                "no rank in the trace, the rank map or the file name, and no --rank".into()
            });
            (0, RankSource::Default)
        };
        self.rank = rank;
        self.rank_source = source;
        rank
    }

    /// Writes `steps`, `runs` and `diagnostics` and sums up the file.
    pub(crate) fn finish(
        mut self,
        job: &FileJob,
        parts: &Parts,
        out: SinkOut,
        cpu_spans: (&[Span], i64),
    ) -> Result<FileOutcome> {
        self.diag.merge(out.diag);
        let mut outcome = FileOutcome {
            run: parts.run.clone(),
            rank: parts.rank,
            events: self.event_count,
            content_hash: self.content_hash.clone(),
            identity: crate::job::Identity {
                rank: parts.rank,
                rank_named: self.rank_source != RankSource::Default,
                world_size: self.world_size,
                device: self.device_name.clone(),
                first_ns: out.counts.first_ns,
                last_ns: out.counts.last_ns,
                trace: self.format != Format::Jsonl,
            },
            ..FileOutcome::default()
        };
        let mut written = out.written;
        let steps = step_rows(&out.steps, cpu_spans.0, cpu_spans.1);
        let (steps_part, step_count) = write_steps(&parts.path(&STEPS), steps, &self.step_set)?;
        written.extend(steps_part);
        let counts = &out.counts;
        let diag_rows = self.diag.total();
        let runs = runs_batch(&self, job, counts, step_count, diag_rows);
        written.extend(write_all(&RUNS, &parts.path(&RUNS), runs)?);
        written.extend(write_all(
            &DIAGNOSTICS,
            &parts.path(&DIAGNOSTICS),
            diag_batch(&self.diag),
        )?);
        outcome.warnings = diag_rows;
        outcome.findings = self
            .diag
            .findings
            .iter()
            .map(|(c, f)| (*c, f.count))
            .collect();
        for (path, rows) in written {
            let rel = path
                .strip_prefix(&parts.root)
                .unwrap_or(&path)
                .to_path_buf();
            let table = rel
                .iter()
                .next()
                .map(|t| t.to_string_lossy().to_string())
                .unwrap_or_default();
            if let Some(t) = crate::schema::table(&table) {
                *outcome.rows.entry(t.name).or_default() += rows;
            }
            outcome.parts.push(rel);
        }
        Ok(outcome)
    }
}

/// One row per step: the CPU step spans joined with the GPU windows from the sink.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StepRow {
    pub step: Option<i64>,
    pub cpu: Option<(i64, i64)>,
    pub gpu: StepAgg,
}

/// One row per step, in step order: the CPU step spans (joined per step) beside the GPU
/// windows from the sink, merged as they go, so that a trace of a million steps holds no
/// second table of them.
fn step_rows<'a>(
    aggs: &'a StepAggs,
    spans: &'a [Span],
    base: i64,
) -> impl Iterator<Item = StepRow> + 'a {
    let (mut cpu, mut gpu) = (cpu_windows(spans, base).peekable(), aggs.iter().peekable());
    std::iter::from_fn(move || {
        let c = cpu.peek().map(|c| Some(c.0));
        let g = gpu.peek().map(|g| g.0);
        let step = match (c, g) {
            (Some(c), Some(g)) => c.min(g),
            (c, g) => c.or(g)?,
        };
        let mut row = StepRow {
            step,
            ..StepRow::default()
        };
        if c == Some(step) {
            row.cpu = cpu.next().map(|(_, a, b)| (a, b));
        }
        if g == Some(step) {
            row.gpu = gpu.next().map(|(_, agg)| agg).unwrap_or_default();
        }
        Some(row)
    })
}

/// The CPU window of each step (first start, last end, `base` added), in step order.
/// Spans come sorted by start, which in a trace is step order too: then they are not copied.
fn cpu_windows(spans: &[Span], base: i64) -> impl Iterator<Item = (i64, i64, i64)> + '_ {
    let window = move |s: &Span| (s.step, s.start + base, s.end + base);
    let each: Box<dyn Iterator<Item = (i64, i64, i64)> + '_> = if spans.is_sorted_by_key(|s| s.step)
    {
        Box::new(spans.iter().map(window))
    } else {
        let mut v: Vec<_> = spans.iter().map(window).collect();
        v.sort_by_key(|w| w.0);
        Box::new(v.into_iter())
    };
    let mut each = each.peekable();
    std::iter::from_fn(move || {
        let (step, mut a, mut b) = each.next()?;
        while let Some((_, x, y)) = each.next_if(|w| w.0 == step) {
            a = a.min(x);
            b = b.max(y);
        }
        Some((step, a, b))
    })
}

/// Steps written a chunk at a time, so that the table's rows are never all in memory.
const STEP_CHUNK: usize = 1 << 16;

/// Writes the `steps` table: `rows` (sorted by step) with a row of its own for each step of
/// `set` they lack, in step order; one row of no step when there is none at all. Returns the
/// part and its rows.
fn write_steps(
    path: &Path,
    rows: impl Iterator<Item = StepRow>,
    set: &StepSet,
) -> Result<(Option<(PathBuf, u64)>, u64)> {
    let mut w = crate::writer::TableWriter::new(&STEPS, path.to_path_buf());
    let (mut rows, mut set) = (rows.peekable(), set.iter().peekable());
    let (mut chunk, mut count) = (Vec::new(), 0u64);
    loop {
        let from_set = |s: i64| StepRow {
            step: Some(s),
            ..StepRow::default()
        };
        let next = match (rows.peek(), set.peek()) {
            (Some(r), Some(&s)) if Some(s) < r.step => set.next().map(from_set),
            (Some(r), Some(&s)) if Some(s) == r.step => {
                set.next();
                rows.next()
            }
            (Some(_), _) => rows.next(),
            (None, _) => set.next().map(from_set),
        };
        let done = next.is_none();
        chunk.extend(next);
        if chunk.len() == STEP_CHUNK || (done && !chunk.is_empty()) {
            w.write(&steps_batch(&chunk))?;
            count += chunk.len() as u64;
            chunk.clear();
        }
        if done {
            break;
        }
    }
    if count == 0 {
        w.write(&steps_batch(&[StepRow::default()]))?;
        count = 1;
    }
    Ok((w.close()?, count))
}

pub(crate) fn steps_batch(rows: &[StepRow]) -> arrow_array::RecordBatch {
    let mut b = Cols::new(&STEPS);
    b.opt_i64("step", rows.iter().map(|r| r.step));
    b.opt_i64("cpu_start_ns", rows.iter().map(|r| r.cpu.map(|c| c.0)));
    b.opt_i64("cpu_end_ns", rows.iter().map(|r| r.cpu.map(|c| c.1)));
    b.opt_i64("gpu_start_ns", rows.iter().map(|r| r.gpu.start));
    b.opt_i64("gpu_end_ns", rows.iter().map(|r| r.gpu.end));
    b.i64(
        "gpu_activity_count",
        rows.iter().map(|r| r.gpu.activities as i64),
    );
    b.i64("kernel_count", rows.iter().map(|r| r.gpu.kernels as i64));
    b.finish()
}

/// The file's own params (a JSON object, or none) with the `--param` pairs added as top-level
/// keys (the command line wins); none when both are empty.
fn with_params(own: Option<&str>, extra: &[(String, String)]) -> Option<String> {
    if extra.is_empty() {
        return own.map(str::to_string);
    }
    let mut m: serde_json::Map<String, serde_json::Value> = own
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    for (k, v) in extra {
        m.insert(k.clone(), serde_json::Value::String(v.clone()));
    }
    serde_json::to_string(&m).ok()
}

pub(crate) fn runs_batch(
    info: &RunInfo,
    job: &FileJob,
    c: &crate::sink::Counts,
    step_count: u64,
    diag_count: u64,
) -> arrow_array::RecordBatch {
    let mut b = Cols::new(&RUNS);
    let path = job.path.display().to_string();
    b.str("source_path", [path.as_str()]);
    b.str("format", [info.format.as_str()]);
    b.str("platform", [info.platform]);
    b.opt_str("device_name", [info.device_name.as_deref()]);
    b.opt_i64("device_index", [info.device_index]);
    b.opt_i64("world_size", [info.world_size]);
    b.str("rank_source", [info.rank_source.as_str()]);
    b.opt_str("runtime_version", [info.runtime_version.as_deref()]);
    let params = with_params(info.params.as_deref(), &job.params);
    b.opt_str("params", [params.as_deref()]);
    b.opt_i64("base_time_ns", [info.base_time_ns]);
    // The clock columns belong to the job, not the file: `aorta collectives` fills them.
    b.opt_i64("clock_offset_ns", [None]);
    b.opt_i64("clock_offset_spread_ns", [None]);
    b.opt_str("clock_source", [None]);
    b.opt_i64("first_ns", [c.first_ns]);
    b.opt_i64("last_ns", [c.last_ns]);
    b.i64("event_count", [info.event_count as i64]);
    b.i64("gpu_activity_count", [c.gpu as i64]);
    b.i64("kernel_count", [c.kernels as i64]);
    b.i64("cpu_op_count", [c.cpu as i64]);
    b.i64("step_count", [step_count as i64]);
    b.i64("metric_count", [info.metric_count as i64]);
    b.i64("diagnostic_count", [diag_count as i64]);
    b.i64("file_bytes", [job.file_bytes as i64]);
    b.str("content_hash", [info.content_hash.as_str()]);
    b.str("rules_version", [job.classifier.version()]);
    b.opt_str("user_rules", [job.classifier.user_rules()]);
    b.str("aorta_version", [env!("CARGO_PKG_VERSION")]);
    b.i64("schema_version", [SCHEMA_VERSION as i64]);
    b.finish()
}

fn diag_batch(d: &Diagnostics) -> arrow_array::RecordBatch {
    let mut b = Cols::new(&DIAGNOSTICS);
    b.str("code", d.findings.keys().copied());
    b.i64("count", d.findings.values().map(|f| f.count as i64));
    b.str("example", d.findings.values().map(|f| f.example.as_str()));
    b.opt_i64("offset", d.findings.values().map(|f| f.offset));
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::rank_from_name;
    use std::path::Path;

    #[test]
    fn ranks_in_file_names() {
        let r = |n: &str| rank_from_name(Path::new(n));
        assert_eq!(r("rank0.pt.trace.json.gz"), Some(0));
        assert_eq!(r("rank-3.json.gz"), Some(3));
        assert_eq!(r("rank_01_metrics.jsonl"), Some(1));
        assert_eq!(r("worker7.pt.trace.json.gz"), Some(7));
        assert_eq!(r("step_times_rank1.jsonl"), Some(1));
        assert_eq!(r("bert-small.json.gz"), None);
        assert_eq!(r("ranked.json"), None);
    }
}
