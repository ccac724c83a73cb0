//! `aorta export perfetto`: one step of one rank as a Chrome trace-format JSON file, for
//! Perfetto (ui.perfetto.dev, trace_processor) and chrome://tracing.
//!
//! Why a trimmed trace and not the original: the profiler's file holds every step of the
//! capture (often hundreds of MB, too big for the UI), and none of what aorta worked out.
//! This one holds the step's rows as the dataset has them: the GPU activities attributed to
//! the step (by their launch, docs/METRICS.md) as slices on one track per stream, the CPU
//! operators, annotations and runtime/driver calls of the step on their threads (Python
//! function rows are left out: they double every op), each slice's category as its `cat`
//! and a colour (`cname`, from one table), and a flow arrow from each launch to its kernel.
//!
//! Times are written relative to the window's first slice (`otherData.t0_ns` gives it), as
//! exact decimal microseconds: absolute epoch nanoseconds do not fit a double.
//!
//! Several ranks of one step go on one timeline in *aligned* time, raw − the rank's
//! `runs.clock_offset_ns` (estimated by `aorta collectives`, docs/COLLECTIVES.md; taken as
//! 0 where it has not run), each rank's processes named `rank R …`. Process ids are the
//! file's own (numbered in order), so two hosts' equal pids and device indices stay apart.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, strs};

/// Why `aorta export perfetto` could not write the window.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The dataset could not be read.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A requested rank is not in the run's `steps` table.
    #[error("{root}: run `{run}` has no rank {rank} (ranks: {ranks})")]
    NoRank {
        /// The dataset's root.
        root: PathBuf,
        /// The run.
        run: String,
        /// The rank asked for.
        rank: i64,
        /// The run's ranks, comma-separated (the first 20).
        ranks: String,
    },
    /// The requested step is not one of the rank's steps.
    #[error("{root}: run `{run}` rank {rank} has no step {step} (steps: {steps})")]
    NoStep {
        /// The dataset's root.
        root: PathBuf,
        /// The run.
        run: String,
        /// The rank.
        rank: i64,
        /// The step asked for.
        step: i64,
        /// The rank's steps, comma-separated (the first 20; `none` for a trace without steps).
        steps: String,
    },
}

/// The colour of each category: Chrome's reserved colour names (catapult's
/// `color_scheme.js`), which chrome://tracing draws; Perfetto keeps them as the slice's
/// `cname` arg. A category not listed gets none.
pub(crate) const COLOURS: &[(&str, &str)] = &[
    ("gemm", "thread_state_running"),
    ("attention", "rail_animation"),
    ("comm", "terrible"),
    ("other_compute", "good"),
    ("memcpy", "yellow"),
    ("memset", "olive"),
    ("cpu_op", "generic_work"),
    ("user_annotation", "grey"),
    ("runtime", "rail_response"),
    ("driver", "rail_load"),
];

/// CPU row categories exported (`python_function` rows are not).
const CPU_CATEGORIES: [&str; 4] = ["cpu_op", "user_annotation", "runtime", "driver"];

/// Process order: rank r's CPU processes from 2r × `GPU_SORT`, its GPUs from (2r + 1) ×
/// `GPU_SORT` (plus the process's number in the file).
const GPU_SORT: i64 = 1_000_000;

const GPU_COLUMNS: [&str; 8] = [
    "device",
    "stream",
    "kind",
    "name",
    "category",
    "start_ns",
    "end_ns",
    "correlation",
];

const CPU_COLUMNS: [&str; 8] = [
    "category",
    "name",
    "pid",
    "tid",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
];

/// Which ranks to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranks {
    /// The run's lowest rank.
    Lowest,
    /// These ranks, on one timeline.
    Listed(Vec<i64>),
    /// Every rank of the run, on one timeline.
    All,
}

/// The rows of one rank in the window.
pub struct RankWindow {
    /// The rank.
    pub rank: i64,
    /// Subtracted from its times: `runs.clock_offset_ns` with several ranks (null: not
    /// estimated, taken as 0), 0 for one rank.
    pub offset_ns: i64,
    /// Whether `runs.clock_offset_ns` was known (always true for one rank).
    pub aligned: bool,
    /// Its `gpu_activities` rows attributed to the step (raw times).
    pub gpu: DataFrame,
    /// Its `cpu_ops` rows of the step: operators, annotations, runtime and driver calls.
    pub cpu: DataFrame,
}

/// One step of some ranks of a run.
pub struct Window {
    /// The run label.
    pub run: String,
    /// Null: a trace without steps (its whole capture).
    pub step: Option<i64>,
    /// The first slice's (aligned) start: time zero of the written trace.
    pub(crate) t0_ns: i64,
    /// The ranks shown, ascending.
    pub ranks: Vec<RankWindow>,
}

/// The run's ranks and each rank's steps, from the `steps` table.
fn rank_steps(root: &Path, run: &str) -> Result<BTreeMap<i64, BTreeSet<i64>>, ExportError> {
    let of_run = dataset::of_runs(&[run.to_string()]);
    let steps = dataset::read_where(root, "steps", of_run, &["rank", "step"])?;
    let (ranks, nums) = (ints(&steps, "rank"), ints(&steps, "step"));
    let mut out: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for i in 0..steps.height() {
        let Some(r) = ranks[i] else { continue };
        out.entry(r).or_default().extend(nums[i]);
    }
    Ok(out)
}

/// The rows of `ranks` of `run` in `step` (default: the first rank's first; a rank without
/// steps exports its whole capture).
pub fn load(
    root: &Path,
    run: &str,
    ranks: &Ranks,
    step: Option<i64>,
) -> Result<Window, ExportError> {
    let all = rank_steps(root, run)?;
    let chosen: Vec<i64> = match ranks {
        Ranks::Lowest => all.keys().take(1).copied().collect(),
        Ranks::Listed(v) => v.clone(),
        Ranks::All => all.keys().copied().collect(),
    };
    let no_step = |rank, step| ExportError::NoStep {
        root: root.to_path_buf(),
        run: run.to_string(),
        rank,
        step,
        steps: list(&all[&rank]),
    };
    let mut step = step;
    for &rank in &chosen {
        let Some(steps) = all.get(&rank) else {
            return Err(ExportError::NoRank {
                root: root.to_path_buf(),
                run: run.to_string(),
                rank,
                ranks: list(&all.keys().copied().collect()),
            });
        };
        step = step.or_else(|| steps.first().copied());
        if let Some(s) = step.filter(|s| !steps.contains(s)) {
            return Err(no_step(rank, s));
        }
    }
    let offsets = if chosen.len() > 1 {
        clock_offsets(root, run)?
    } else {
        chosen.iter().map(|&r| (r, Some(0))).collect()
    };
    let mut windows = Vec::new();
    for &rank in &chosen {
        let offset = offsets.get(&rank).copied().flatten();
        windows.push(rank_window(root, run, rank, step, offset)?);
    }
    let t0_ns = windows
        .iter()
        .flat_map(|w| {
            let starts = ints(&w.gpu, "start_ns")
                .into_iter()
                .chain(ints(&w.cpu, "start_ns"));
            starts.flatten().map(move |s| s - w.offset_ns)
        })
        .min()
        .unwrap_or(0);
    Ok(Window {
        run: run.to_string(),
        step,
        t0_ns,
        ranks: windows,
    })
}

/// `runs.clock_offset_ns` of each rank of `run` (the first file's, per rank).
fn clock_offsets(root: &Path, run: &str) -> Result<BTreeMap<i64, Option<i64>>, ExportError> {
    let of_run = dataset::of_runs(&[run.to_string()]);
    let runs = dataset::read_where(root, "runs", of_run, &["rank", "clock_offset_ns"])?;
    let (rank, off) = (ints(&runs, "rank"), ints(&runs, "clock_offset_ns"));
    let mut out = BTreeMap::new();
    for i in (0..runs.height()).rev() {
        if let Some(r) = rank[i] {
            let slot: &mut Option<i64> = out.entry(r).or_default();
            *slot = off[i].or(*slot);
        }
    }
    Ok(out)
}

fn rank_window(
    root: &Path,
    run: &str,
    rank: i64,
    step: Option<i64>,
    offset: Option<i64>,
) -> Result<RankWindow, ExportError> {
    let step_is = match step {
        Some(s) => col("step").eq(lit(s)),
        None => col("step").is_null(),
    };
    let rows = dataset::of_runs(&[run.to_string()])
        .and(col("rank").eq(lit(rank)))
        .and(step_is);
    let gpu = dataset::read_where(root, "gpu_activities", rows.clone(), &GPU_COLUMNS)?;
    let cpu_cats = CPU_CATEGORIES
        .iter()
        .fold(lit(false), |e, c| e.or(col("category").eq(lit(*c))));
    let cpu = dataset::read_where(root, "cpu_ops", rows.and(cpu_cats), &CPU_COLUMNS)?;
    Ok(RankWindow {
        rank,
        offset_ns: offset.unwrap_or(0),
        aligned: offset.is_some(),
        gpu,
        cpu,
    })
}

fn list(v: &BTreeSet<i64>) -> String {
    if v.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = v.iter().take(20).map(i64::to_string).collect();
    let more = if v.len() > 20 { ", …" } else { "" };
    format!("{}{more}", shown.join(", "))
}

/// ns after `t0` as exact decimal µs (`12.345`).
fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn colour(category: &str) -> Option<&'static str> {
    COLOURS.iter().find(|c| c.0 == category).map(|c| c.1)
}

/// One slice as it is written.
struct Slice<'a> {
    pid: i64,
    tid: i64,
    name: &'a str,
    cat: &'a str,
    start: i64,
    end: i64,
    args: String,
}

/// The processes of the file: (rank, GPU or not, the dataset's pid or device) → the file's
/// pid, numbered in order, and each one's threads.
#[derive(Default)]
struct Procs {
    ids: BTreeMap<(i64, bool, i64), i64>,
    threads: BTreeMap<i64, BTreeSet<i64>>,
}

impl Procs {
    fn pid(&mut self, rank: i64, gpu: bool, own: i64, tid: i64) -> i64 {
        let next = self.ids.len() as i64 + 1;
        let pid = *self.ids.entry((rank, gpu, own)).or_insert(next);
        self.threads.entry(pid).or_default().insert(tid);
        pid
    }
}

/// The window as Chrome trace-format JSON (one event per line).
pub fn chrome_trace(w: &Window) -> String {
    let mut procs = Procs::default();
    let mut slices = Vec::new();
    let mut flows = Vec::new();
    for r in &w.ranks {
        let first = slices.len();
        gpu_slices(r, &mut procs, &mut slices);
        let gpu_end = slices.len();
        cpu_slices(r, &mut procs, &mut slices);
        flows.extend(links(r, first, gpu_end));
    }
    let mut events = metadata(&procs, w.ranks.len() > 1);
    let t0 = w.t0_ns;
    events.extend(slices.iter().map(|s| slice_event(s, t0)));
    for (id, &(s, f)) in flows.iter().enumerate() {
        events.push(flow_event("s", id, &slices[s], t0));
        events.push(flow_event("f", id, &slices[f], t0));
    }
    let ranks: Vec<serde_json::Value> = w
        .ranks
        .iter()
        .map(|r| serde_json::json!({"rank": r.rank, "clock_offset_ns": r.offset_ns, "aligned": r.aligned}))
        .collect();
    let other = serde_json::json!({
        "generator": "aorta export perfetto",
        "run": w.run, "step": w.step, "t0_ns": w.t0_ns, "ranks": ranks,
    });
    format!(
        "{{\"displayTimeUnit\": \"ns\", \"otherData\": {other},\n\"traceEvents\": [\n{}\n]}}\n",
        events.join(",\n")
    )
}

fn slice_event(s: &Slice, t0: i64) -> String {
    let mut e = format!(
        "{{\"ph\": \"X\", \"name\": {}, \"cat\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {}, \"dur\": {}",
        json_str(s.name),
        json_str(s.cat),
        s.pid,
        s.tid,
        us(s.start - t0),
        us(s.end - s.start),
    );
    if let Some(c) = colour(s.cat) {
        let _ = write!(e, ", \"cname\": \"{c}\"");
    }
    let _ = write!(e, ", \"args\": {{{}}}}}", s.args);
    e
}

/// One end of a launch-to-kernel arrow (`ac2g`, as Kineto names them): `s` at the launch,
/// `f` bound to the enclosing slice (the kernel) at its start.
fn flow_event(ph: &str, id: usize, s: &Slice, t0: i64) -> String {
    let bp = if ph == "f" { ", \"bp\": \"e\"" } else { "" };
    format!(
        "{{\"ph\": \"{ph}\"{bp}, \"id\": {id}, \"name\": \"ac2g\", \"cat\": \"ac2g\", \"pid\": {}, \"tid\": {}, \"ts\": {}}}",
        s.pid,
        s.tid,
        us(s.start - t0)
    )
}

/// `"key": value` pairs of the integers that are set.
fn int_args(pairs: &[(&str, Option<i64>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("\"{k}\": {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A GPU activity per slice, one track per (device, stream); correlation in its args.
fn gpu_slices<'a>(r: &'a RankWindow, procs: &mut Procs, out: &mut Vec<Slice<'a>>) {
    let g = &r.gpu;
    let (dev, stream, corr) = (ints(g, "device"), ints(g, "stream"), ints(g, "correlation"));
    let (start, end) = (ints(g, "start_ns"), ints(g, "end_ns"));
    let (name, cat, kind) = (strs(g, "name"), strs(g, "category"), strs(g, "kind"));
    for i in 0..g.height() {
        let tid = stream[i].unwrap_or(0);
        let start = start[i].unwrap_or(0) - r.offset_ns;
        let mut args = format!("\"kind\": {}", json_str(kind[i].unwrap_or("")));
        if let Some(c) = corr[i] {
            let _ = write!(args, ", \"correlation\": {c}");
        }
        out.push(Slice {
            pid: procs.pid(r.rank, true, dev[i].unwrap_or(0), tid),
            tid,
            name: name[i].unwrap_or(""),
            cat: cat[i].unwrap_or(""),
            start,
            end: end[i].map_or(start, |e| e - r.offset_ns),
            args,
        });
    }
}

/// A CPU row per slice on its thread; correlation and External id in its args.
fn cpu_slices<'a>(r: &'a RankWindow, procs: &mut Procs, out: &mut Vec<Slice<'a>>) {
    let c = &r.cpu;
    let (pid, tid) = (ints(c, "pid"), ints(c, "tid"));
    let (corr, ext) = (ints(c, "correlation"), ints(c, "external_id"));
    let (start, end) = (ints(c, "start_ns"), ints(c, "end_ns"));
    let (name, cat) = (strs(c, "name"), strs(c, "category"));
    for i in 0..c.height() {
        let t = tid[i].unwrap_or(0);
        let start = start[i].unwrap_or(0) - r.offset_ns;
        out.push(Slice {
            // A string pid (no integer in the dataset) is process -1.
            pid: procs.pid(r.rank, false, pid[i].unwrap_or(-1), t),
            tid: t,
            name: name[i].unwrap_or(""),
            cat: cat[i].unwrap_or(""),
            start,
            end: end[i].map_or(start, |e| e - r.offset_ns),
            args: int_args(&[("correlation", corr[i]), ("External id", ext[i])]),
        });
    }
}

/// Process and thread names and the process order: each rank's CPU processes, then its GPUs
/// with one thread per stream. With several ranks every name starts with `rank R`.
fn metadata(procs: &Procs, many: bool) -> Vec<String> {
    let meta = |name: &str, pid: i64, tid: Option<i64>, arg: String| {
        let tid = tid.map_or(String::new(), |t| format!(", \"tid\": {t}"));
        format!("{{\"ph\": \"M\", \"name\": \"{name}\", \"pid\": {pid}{tid}, \"args\": {{{arg}}}}}")
    };
    let mut events = Vec::new();
    for (&(rank, gpu, own), &pid) in &procs.ids {
        let prefix = if many {
            format!("rank {rank} ")
        } else {
            String::new()
        };
        let (what, thread) = if gpu {
            (format!("{prefix}GPU {own}"), "stream")
        } else {
            (format!("{prefix}CPU process {own}"), "thread")
        };
        let sort = rank * 2 * GPU_SORT + i64::from(gpu) * GPU_SORT + pid;
        events.push(meta(
            "process_name",
            pid,
            None,
            format!("\"name\": {}", json_str(&what)),
        ));
        events.push(meta(
            "process_sort_index",
            pid,
            None,
            format!("\"sort_index\": {sort}"),
        ));
        for &t in &procs.threads[&pid] {
            let name = json_str(&format!("{thread} {t}"));
            events.push(meta(
                "thread_name",
                pid,
                Some(t),
                format!("\"name\": {name}"),
            ));
            events.push(meta(
                "thread_sort_index",
                pid,
                Some(t),
                format!("\"sort_index\": {t}"),
            ));
        }
    }
    events
}

/// (launch, activity) of each GPU activity whose correlation is a runtime or driver call of
/// the same rank in the window, as indices of the rank's slices (its GPU rows from `gpu_at`,
/// its CPU rows from `cpu_at`, in row order).
fn links(r: &RankWindow, gpu_at: usize, cpu_at: usize) -> Vec<(usize, usize)> {
    let (cat, corr) = (strs(&r.cpu, "category"), ints(&r.cpu, "correlation"));
    let launches: BTreeMap<i64, usize> = (0..r.cpu.height())
        .filter(|&i| matches!(cat[i], Some("runtime" | "driver")))
        .filter_map(|i| Some((corr[i]?, i)))
        .collect();
    let gcorr = ints(&r.gpu, "correlation");
    (0..r.gpu.height())
        .filter_map(|k| {
            let i = launches.get(&gcorr[k]?)?;
            Some((cpu_at + i, gpu_at + k))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::us;

    #[test]
    fn microseconds_are_exact_decimals() {
        assert_eq!(us(0), "0.000");
        assert_eq!(us(12_345_678), "12345.678");
        assert_eq!(us(999), "0.999");
        assert_eq!(us(-1_500), "-1.500");
    }
}
