//! TP overlap operator by operator, measured from traces: the Megatron TP overlap tuner's
//! per-operator numbers (GEMM time, comm time, their overlap, end-to-end), taken inside
//! named CPU windows instead of over a whole trace, with medians over every instance.
//!
//! Why windows: one layer's `qkv`, `proj`, `fc1` and `fc2` run back to back, each with its
//! own collective; only the CPU range around each call says which GEMM and which
//! all-gather belong together. Why ownership by launch: the comm of an overlapped operator
//! runs on another stream, often past the window's end on the CPU, so a time cut would lose
//! it; the launch call (runtime or driver API: cuBLASLt and NCCL launch through
//! `cuLaunchKernelEx`) lies inside the window, and its correlation id names the GPU work.
//! Why medians: a first step that waits for the other ranks, or a step the profiler slowed,
//! is one instance among all steps of all ranks of all repeats, and must not move the answer.
//! The rules are in docs/SWEEPS.md, "Per-window TP overlap from traces".

mod own;

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;
use serde_json::{Map, Value};

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, strs};

use super::tp_scaling::Timing;
use own::{Call, Gpu, Range, Role};

/// The operator names whose ranges are windows (exact, case-sensitive names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowNames {
    /// `qkv`, `proj`, `fc1`, `fc2` by default.
    pub operators: Vec<String>,
}

impl Default for WindowNames {
    fn default() -> WindowNames {
        WindowNames {
            operators: ["qkv", "proj", "fc1", "fc2"].map(String::from).to_vec(),
        }
    }
}

/// One instance of a window: one operator, one phase, one step of one rank of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowInstance {
    /// Run label.
    pub run: String,
    /// Rank.
    pub rank: i64,
    /// The profiler step the window's range started in (null in a trace without steps).
    pub step: Option<i64>,
    /// The operator (`qkv`, …).
    pub operator: String,
    /// `fprop`, `dgrad`, `wgrad`, or `bwd` (a `backward` range with no finer phase).
    pub phase: String,
    /// Union of the owned GEMM kernels, ns.
    pub gemm_ns: i64,
    /// Union of the owned comm activities (NCCL/RCCL and userbuffers kernels, peer copies), ns.
    pub comm_ns: i64,
    /// Intersection of those two unions, ns.
    pub overlap_ns: i64,
    /// First start to last end of all owned GPU work (copies and sets included), ns.
    pub e2e_ns: i64,
    /// Owned GEMM kernels.
    pub num_gemm_events: usize,
    /// Owned comm activities.
    pub num_comm_events: usize,
}

/// Every measured window instance of `runs` (every run when empty), ordered by run, rank,
/// then the windows' start. A window that launched no GPU work is left out.
pub fn instances(
    data: &Path,
    runs: &[String],
    names: &WindowNames,
) -> Result<Vec<WindowInstance>, DatasetError> {
    let of_runs = if runs.is_empty() {
        lit(true)
    } else {
        dataset::of_runs(runs)
    };
    let collect = |table: &str, lf: LazyFrame| {
        lf.collect().map_err(|source| DatasetError::Polars {
            path: data.join(table),
            source,
        })
    };
    let cols = |c: &[&str]| c.iter().map(|c| col(*c)).collect::<Vec<_>>();
    let annotations = dataset::scan(data, "cpu_ops")?
        .filter(of_runs.and(col("category").eq(lit("user_annotation"))))
        .select(cols(&[
            "run", "rank", "pid", "tid", "name", "start_ns", "end_ns", "step",
        ]))
        .sort(["run", "rank", "start_ns"], SortMultipleOptions::default());
    let annotations = collect("cpu_ops", annotations)?;
    let ranges = ranges(&annotations);
    // Launches and activities only of the runs that have a window: most datasets have none,
    // and a large trace has millions of launch calls.
    let mut with_windows: Vec<String> = ranges
        .iter()
        .filter(|r| own::window_of(r.name, names).is_some())
        .map(|r| r.thread.0.to_string())
        .collect();
    with_windows.dedup();
    if with_windows.is_empty() {
        return Ok(Vec::new());
    }
    let of_runs = dataset::of_runs(&with_windows);
    let calls = dataset::scan(data, "cpu_ops")?
        .filter(
            of_runs
                .clone()
                .and(crate::launch::launch_calls())
                .and(col("correlation").is_not_null()),
        )
        .select(cols(&[
            "run",
            "rank",
            "pid",
            "tid",
            "start_ns",
            "correlation",
        ]));
    let acts = dataset::scan(data, "gpu_activities")?
        .filter(of_runs.and(col("correlation").is_not_null()))
        .select(cols(&[
            "run",
            "rank",
            "category",
            "start_ns",
            "end_ns",
            "correlation",
        ]));
    let (calls, acts) = (collect("cpu_ops", calls)?, collect("gpu_activities", acts)?);
    let calls = launch_calls(&calls);
    let gpu = gpu_work(&acts);
    let mut out = own::measure(&ranges, &calls, &gpu, names);
    out.sort_by(|a, b| (&a.run, a.rank).cmp(&(&b.run, b.rank)));
    Ok(out)
}

fn ranges(df: &DataFrame) -> Vec<Range<'_>> {
    let (run, rank, pid, tid) = (
        strs(df, "run"),
        ints(df, "rank"),
        ints(df, "pid"),
        ints(df, "tid"),
    );
    let (name, start, end, step) = (
        strs(df, "name"),
        ints(df, "start_ns"),
        ints(df, "end_ns"),
        ints(df, "step"),
    );
    (0..df.height())
        .filter_map(|i| {
            Some(Range {
                thread: (run[i]?, rank[i]?, pid[i], tid[i]),
                name: name[i]?,
                start: start[i]?,
                end: end[i]?,
                step: step[i],
            })
        })
        .collect()
}

fn launch_calls(df: &DataFrame) -> Vec<Call<'_>> {
    let (run, rank, pid, tid) = (
        strs(df, "run"),
        ints(df, "rank"),
        ints(df, "pid"),
        ints(df, "tid"),
    );
    let (start, corr) = (ints(df, "start_ns"), ints(df, "correlation"));
    (0..df.height())
        .filter_map(|i| {
            Some(Call {
                thread: (run[i]?, rank[i]?, pid[i], tid[i]),
                start: start[i]?,
                correlation: corr[i]?,
            })
        })
        .collect()
}

fn gpu_work(df: &DataFrame) -> Vec<Gpu<'_>> {
    let (run, rank, category) = (strs(df, "run"), ints(df, "rank"), strs(df, "category"));
    let (start, end, corr) = (
        ints(df, "start_ns"),
        ints(df, "end_ns"),
        ints(df, "correlation"),
    );
    (0..df.height())
        .filter_map(|i| {
            Some(Gpu {
                run: run[i]?,
                rank: rank[i]?,
                role: Role::of_category(category[i]),
                start: start[i]?,
                end: end[i]?,
                correlation: corr[i]?,
            })
        })
        .collect()
}

/// One (configuration, operator, phase): medians over every instance of it, i.e. all steps
/// of all ranks of all runs of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct TpConfigRow {
    /// The configuration's name.
    pub config: String,
    /// The operator.
    pub operator: String,
    /// The phase.
    pub phase: String,
    /// How many window instances the medians are over.
    pub instances: usize,
    /// Median GEMM time, µs.
    pub gemm_us: f64,
    /// Median comm time, µs.
    pub comm_us: f64,
    /// Median overlap time, µs.
    pub overlap_us: f64,
    /// Median end-to-end time, µs.
    pub e2e_us: f64,
    /// `overlap_us / min(gemm_us, comm_us)` of the medians; 0 when either is 0.
    pub overlap_ratio: f64,
    /// Median GEMM kernels per instance (the lower middle of an even count: a whole number).
    pub num_gemm_events: usize,
    /// Median comm activities per instance (as `num_gemm_events`).
    pub num_comm_events: usize,
}

/// The lower median of counts.
fn median_count(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// Medians over every instance of (configuration, operator, phase): all steps of all ranks
/// of all runs of the configuration. `config_of_run` names a run's configuration; instances
/// of runs it names none for are left out. Rows are ordered by configuration, operator and
/// phase.
pub fn by_config(
    instances: &[WindowInstance],
    config_of_run: &dyn Fn(&str) -> Option<String>,
) -> Vec<TpConfigRow> {
    let mut configs: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut groups: BTreeMap<(String, &str, &str), Vec<&WindowInstance>> = BTreeMap::new();
    for w in instances {
        let config = configs
            .entry(&w.run)
            .or_insert_with(|| config_of_run(&w.run));
        if let Some(c) = config {
            groups
                .entry((c.clone(), &w.operator, &w.phase))
                .or_default()
                .push(w);
        }
    }
    groups
        .into_iter()
        .map(|((config, operator, phase), ws)| {
            let us = |f: fn(&WindowInstance) -> i64| {
                crate::summary::median(&ws.iter().map(|w| f(w) as f64 / 1e3).collect::<Vec<_>>())
                    .unwrap_or(0.0)
            };
            let (gemm_us, comm_us, overlap_us) =
                (us(|w| w.gemm_ns), us(|w| w.comm_ns), us(|w| w.overlap_ns));
            let least = gemm_us.min(comm_us);
            TpConfigRow {
                config,
                operator: operator.to_string(),
                phase: phase.to_string(),
                instances: ws.len(),
                gemm_us,
                comm_us,
                overlap_us,
                e2e_us: us(|w| w.e2e_ns),
                overlap_ratio: if least > 0.0 { overlap_us / least } else { 0.0 },
                num_gemm_events: median_count(ws.iter().map(|w| w.num_gemm_events).collect()),
                num_comm_events: median_count(ws.iter().map(|w| w.num_comm_events).collect()),
            }
        })
        .collect()
}

impl TpConfigRow {
    /// Whether the row is of the forward pass (`fprop`) rather than the backward (`dgrad`,
    /// `wgrad`, `bwd`).
    fn is_forward(&self) -> bool {
        self.phase == "fprop"
    }

    /// The Megatron TP overlap tuner's fields for this row. A row is one phase: an `fprop`
    /// row fills `forward_*` and leaves `backward_*` null, a `dgrad`/`wgrad`/`bwd` row the
    /// other way round; null, not 0, because that pass was not measured in this row (0 would
    /// read as "took no time"). `operator_e2e_time_us` is the row's e2e, `total_overlap_ratio`
    /// its overlap ratio (over the one phase measured, the tuner's total is that phase's).
    pub fn tuner_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let num = |x: f64| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number);
        for (pass, measured) in [
            ("forward", self.is_forward()),
            ("backward", !self.is_forward()),
        ] {
            let v = |x: f64| if measured { num(x) } else { Value::Null };
            m.insert(format!("{pass}_gemm_time_us"), v(self.gemm_us));
            m.insert(format!("{pass}_comm_time_us"), v(self.comm_us));
            m.insert(format!("{pass}_overlap_time_us"), v(self.overlap_us));
            m.insert(format!("{pass}_overlap_ratio"), v(self.overlap_ratio));
            m.insert(format!("{pass}_e2e_time_us"), v(self.e2e_us));
        }
        m.insert("operator_e2e_time_us".into(), num(self.e2e_us));
        m.insert("total_overlap_ratio".into(), num(self.overlap_ratio));
        m.insert("num_gemm_events".into(), self.num_gemm_events.into());
        m.insert("num_comm_events".into(), self.num_comm_events.into());
        m
    }
}

/// A param as a whole number: a JSON number, or a string of digits (`--param tp=2`).
fn whole(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A param's value: the top-level key, else the same key inside an `aorta_params` object
/// (where aorta's own workloads write their flags).
fn param<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    params
        .get(key)
        .or_else(|| params.get("aorta_params")?.as_object()?.get(key))
}

/// Rows → the scaling check's input: tp from the configuration's `tp` param (a number or a
/// string of digits), method from its `method` param (None when absent), the row's phase
/// and e2e. Rows whose configuration has no `tp` (or a `tp` of 0) are left out: they have no
/// place on the scaling axis.
pub fn timings(
    rows: &[TpConfigRow],
    params_of_config: &dyn Fn(&str) -> Option<Map<String, Value>>,
) -> Vec<Timing> {
    rows.iter()
        .filter_map(|r| {
            let params = params_of_config(&r.config)?;
            let tp = param(&params, "tp").and_then(whole).filter(|&n| n > 0)?;
            let method = param(&params, "method").map(|m| match m {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            Some(Timing {
                tp,
                operator: r.operator.clone(),
                e2e_us: r.e2e_us,
                method,
                phase: Some(r.phase.clone()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
