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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, strs};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error("{root}: run `{run}` has no rank {rank} (ranks: {ranks})")]
    NoRank {
        root: PathBuf,
        run: String,
        rank: i64,
        ranks: String,
    },
    #[error("{root}: run `{run}` rank {rank} has no step {step} (steps: {steps})")]
    NoStep {
        root: PathBuf,
        run: String,
        rank: i64,
        step: i64,
        steps: String,
    },
}

/// The colour of each category: Chrome's reserved colour names (catapult's
/// `color_scheme.js`), which chrome://tracing draws; Perfetto keeps them as the slice's
/// `cname` arg. A category not listed gets none.
pub const COLOURS: &[(&str, &str)] = &[
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

/// Sort index of the first GPU process: after every CPU process.
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

/// The rows of one step of one rank.
pub struct Window {
    pub run: String,
    pub rank: i64,
    /// Null: a trace without steps (its whole capture).
    pub step: Option<i64>,
    /// The first slice's start: time zero of the written trace.
    pub t0_ns: i64,
    pub gpu: DataFrame,
    pub cpu: DataFrame,
}

/// The rows of `run`'s `rank` (default: its lowest) in `step` (default: the rank's first; a
/// rank without steps exports its whole capture).
pub fn load(
    root: &Path,
    run: &str,
    rank: Option<i64>,
    step: Option<i64>,
) -> Result<Window, ExportError> {
    let this_run = dataset::of_runs(&[run.to_string()]);
    let steps = dataset::read_where(root, "steps", this_run.clone(), &["rank", "step"])?;
    let (ranks, nums) = (ints(&steps, "rank"), ints(&steps, "step"));
    let all: BTreeSet<i64> = ranks.iter().flatten().copied().collect();
    let rank = rank.or_else(|| all.first().copied()).unwrap_or(0);
    if !all.contains(&rank) {
        return Err(ExportError::NoRank {
            root: root.to_path_buf(),
            run: run.to_string(),
            rank,
            ranks: list(&all),
        });
    }
    let of_rank: BTreeSet<i64> = (0..steps.height())
        .filter(|&i| ranks[i] == Some(rank))
        .filter_map(|i| nums[i])
        .collect();
    let step = match step {
        Some(s) if !of_rank.contains(&s) => {
            return Err(ExportError::NoStep {
                root: root.to_path_buf(),
                run: run.to_string(),
                rank,
                step: s,
                steps: list(&of_rank),
            })
        }
        Some(s) => Some(s),
        None => of_rank.first().copied(),
    };
    let step_is = match step {
        Some(s) => col("step").eq(lit(s)),
        None => col("step").is_null(),
    };
    let rows = this_run.and(col("rank").eq(lit(rank))).and(step_is);
    let gpu = dataset::read_where(root, "gpu_activities", rows.clone(), &GPU_COLUMNS)?;
    let cpu_cats = CPU_CATEGORIES
        .iter()
        .fold(lit(false), |e, c| e.or(col("category").eq(lit(*c))));
    let cpu = dataset::read_where(root, "cpu_ops", rows.and(cpu_cats), &CPU_COLUMNS)?;
    let t0_ns = ints(&gpu, "start_ns")
        .into_iter()
        .chain(ints(&cpu, "start_ns"))
        .flatten()
        .min()
        .unwrap_or(0);
    Ok(Window {
        run: run.to_string(),
        rank,
        step,
        t0_ns,
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

/// The window as Chrome trace-format JSON (one event per line).
pub fn chrome_trace(w: &Window) -> String {
    let mut events: Vec<String> = Vec::new();
    let gpu = gpu_slices(w);
    let cpu = cpu_slices(w);
    metadata(&gpu, &cpu, &mut events);
    for s in gpu.iter().chain(&cpu) {
        events.push(slice_event(s, w.t0_ns));
    }
    flows(w, &mut events);
    let other = serde_json::json!({
        "generator": "aorta export perfetto",
        "run": w.run, "rank": w.rank, "step": w.step, "t0_ns": w.t0_ns,
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

/// `"key": value` pairs of the integers that are set.
fn int_args(pairs: &[(&str, Option<i64>)]) -> String {
    pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("\"{k}\": {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn gpu_slices(w: &Window) -> Vec<Slice<'_>> {
    let g = &w.gpu;
    let (dev, stream, corr) = (ints(g, "device"), ints(g, "stream"), ints(g, "correlation"));
    let (start, end) = (ints(g, "start_ns"), ints(g, "end_ns"));
    let (name, cat, kind) = (strs(g, "name"), strs(g, "category"), strs(g, "kind"));
    (0..g.height())
        .map(|i| Slice {
            pid: dev[i].unwrap_or(0),
            tid: stream[i].unwrap_or(0),
            name: name[i].unwrap_or(""),
            cat: cat[i].unwrap_or(""),
            start: start[i].unwrap_or(0),
            end: end[i].or(start[i]).unwrap_or(0),
            args: format!(
                "\"kind\": {}{}",
                json_str(kind[i].unwrap_or("")),
                prefixed(int_args(&[("correlation", corr[i])]))
            ),
        })
        .collect()
}

fn prefixed(s: String) -> String {
    if s.is_empty() {
        s
    } else {
        format!(", {s}")
    }
}

fn cpu_slices(w: &Window) -> Vec<Slice<'_>> {
    let c = &w.cpu;
    let (pid, tid) = (ints(c, "pid"), ints(c, "tid"));
    let (corr, ext) = (ints(c, "correlation"), ints(c, "external_id"));
    let (start, end) = (ints(c, "start_ns"), ints(c, "end_ns"));
    let (name, cat) = (strs(c, "name"), strs(c, "category"));
    (0..c.height())
        .map(|i| Slice {
            // A string pid (no integer in the dataset) shows as process -1.
            pid: pid[i].unwrap_or(-1),
            tid: tid[i].unwrap_or(0),
            name: name[i].unwrap_or(""),
            cat: cat[i].unwrap_or(""),
            start: start[i].unwrap_or(0),
            end: end[i].or(start[i]).unwrap_or(0),
            args: int_args(&[("correlation", corr[i]), ("External id", ext[i])]),
        })
        .collect()
}

/// Process and thread names and the order of the processes: CPU processes first, then one
/// process per GPU with one thread per stream.
fn metadata(gpu: &[Slice], cpu: &[Slice], events: &mut Vec<String>) {
    let meta = |name: &str, pid: i64, tid: Option<i64>, arg: String| {
        let tid = tid.map_or(String::new(), |t| format!(", \"tid\": {t}"));
        format!("{{\"ph\": \"M\", \"name\": \"{name}\", \"pid\": {pid}{tid}, \"args\": {{{arg}}}}}")
    };
    let tracks = |slices: &[Slice]| -> BTreeMap<i64, BTreeSet<i64>> {
        let mut m: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        for s in slices {
            m.entry(s.pid).or_default().insert(s.tid);
        }
        m
    };
    for (pid, tids) in tracks(cpu) {
        let name = json_str(&format!("CPU process {pid}"));
        events.push(meta("process_name", pid, None, format!("\"name\": {name}")));
        events.push(meta(
            "process_sort_index",
            pid,
            None,
            format!("\"sort_index\": {pid}"),
        ));
        for t in tids {
            let name = json_str(&format!("thread {t}"));
            events.push(meta(
                "thread_name",
                pid,
                Some(t),
                format!("\"name\": {name}"),
            ));
        }
    }
    for (dev, streams) in tracks(gpu) {
        let name = json_str(&format!("GPU {dev}"));
        events.push(meta("process_name", dev, None, format!("\"name\": {name}")));
        let sort = GPU_SORT + dev;
        events.push(meta(
            "process_sort_index",
            dev,
            None,
            format!("\"sort_index\": {sort}"),
        ));
        for s in streams {
            let name = json_str(&format!("stream {s}"));
            events.push(meta(
                "thread_name",
                dev,
                Some(s),
                format!("\"name\": {name}"),
            ));
            events.push(meta(
                "thread_sort_index",
                dev,
                Some(s),
                format!("\"sort_index\": {s}"),
            ));
        }
    }
}

/// A flow arrow (`ac2g`, as Kineto names it) from each runtime or driver call in the window
/// to the GPU activity with its correlation id.
fn flows(w: &Window, events: &mut Vec<String>) {
    let c = &w.cpu;
    let (cat, corr) = (strs(c, "category"), ints(c, "correlation"));
    let (pid, tid, start) = (ints(c, "pid"), ints(c, "tid"), ints(c, "start_ns"));
    let launches: BTreeMap<i64, usize> = (0..c.height())
        .filter(|&i| matches!(cat[i], Some("runtime" | "driver")))
        .filter_map(|i| Some((corr[i]?, i)))
        .collect();
    let g = &w.gpu;
    let (gcorr, dev, stream, gstart) = (
        ints(g, "correlation"),
        ints(g, "device"),
        ints(g, "stream"),
        ints(g, "start_ns"),
    );
    let t0 = w.t0_ns;
    for k in 0..g.height() {
        let Some((id, &i)) = gcorr[k].and_then(|id| Some((id, launches.get(&id)?))) else {
            continue;
        };
        events.push(format!(
            "{{\"ph\": \"s\", \"id\": {id}, \"name\": \"ac2g\", \"cat\": \"ac2g\", \"pid\": {}, \"tid\": {}, \"ts\": {}}}",
            pid[i].unwrap_or(-1),
            tid[i].unwrap_or(0),
            us(start[i].unwrap_or(t0) - t0)
        ));
        events.push(format!(
            "{{\"ph\": \"f\", \"bp\": \"e\", \"id\": {id}, \"name\": \"ac2g\", \"cat\": \"ac2g\", \"pid\": {}, \"tid\": {}, \"ts\": {}}}",
            dev[k].unwrap_or(0),
            stream[k].unwrap_or(0),
            us(gstart[k].unwrap_or(t0) - t0)
        ));
    }
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
