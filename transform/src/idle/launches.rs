//! The CPU side of every launch (HTA's `get_cuda_kernel_launch_stats`) and the GPU's launch
//! queue (`get_queue_length_time_series`), per rank or step.
//!
//! A launch is a GPU activity and the launch call with its correlation id (any runtime or
//! driver API call, `crate::launch::LAUNCH_CATEGORIES`: `cudaLaunchKernel`, `cuLaunchKernelEx`,
//! `cudaMemcpyAsync`, `cudaGraphLaunch`, `hipExtModuleLaunchKernel`…, not a list of names).
//! Per launch: the call's CPU duration, the launch delay (activity start − call end, HTA's
//! documented definition) and the time from the call's start to the activity's start. Per
//! group: counts, p50 and p99 of those, the longest launch gaps (CPU time between one launch
//! call and the next on any thread of the rank, when no launch call runs), and the queue.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;

use super::queue::{self, Series};
use super::{key_columns, Act, By, Call, Input, Key};
use crate::dataset::DatasetError;
use crate::rows::str_column;
use crate::summary::quantile;

/// One launch gap: CPU time with no launch call running, before `after`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gap {
    /// The end of the calls before it (the latest end so far).
    pub start: i64,
    pub ns: i64,
    pub before: Call,
    pub after: Call,
    /// The activity `after` launched.
    pub act: Act,
}

/// The launch statistics of some runs.
pub struct Launches {
    /// Per group. Columns: `run`, `rank`, (`step`), `activities`, `kernels`, `launched`
    /// (activities with a launch call), `cpu_p50_ns`, `cpu_p99_ns` (the calls' durations),
    /// `delay_p50_ns`, `delay_p99_ns` (activity start − call end), `to_start_p50_ns`
    /// (activity start − call start), `longest_gap_ns`, `queue_max`, `queue_mean` (the
    /// launched-not-started activities, summed over streams, time-weighted over the group's
    /// launch window).
    pub rows: DataFrame,
    /// The `top` longest launch gaps per group, longest first. Columns: `run`, `rank`,
    /// (`step`), `gap_ns`, `gap_start_ns`, `before`, `after` (call names), `kernel` (what
    /// `after` launched).
    pub gaps: DataFrame,
    /// The queue per group and stream. Columns: `run`, `rank`, (`step`), `stream`,
    /// `queue_max`, `queue_mean`.
    pub queues: DataFrame,
    /// The queue's time series per rank and stream: `run`, `rank`, `stream`, `ts_ns`,
    /// `queue_length` (from `ts_ns` until the next point).
    pub series: DataFrame,
}

/// The launch statistics of every rank or step of `runs`.
pub fn compute(root: &Path, runs: &[String], by: By, top: usize) -> Result<Launches, DatasetError> {
    let input = Input::load(root, runs)?;
    of_input(&input, by, top).map_err(|source| DatasetError::Polars {
        path: root.join("gpu_activities"),
        source,
    })
}

/// One group's numbers, before they become columns.
#[derive(Default)]
struct Acc {
    activities: i64,
    kernels: i64,
    cpu: Vec<f64>,
    delay: Vec<f64>,
    to_start: Vec<f64>,
    gaps: Vec<Gap>,
    /// Per stream: (max, area); and the launch window.
    queue: BTreeMap<i64, (i64, i128)>,
    window: Option<(i64, i64)>,
}

/// The launch statistics of rows already loaded.
pub(crate) fn of_input(input: &Input, by: By, top: usize) -> PolarsResult<Launches> {
    let mut groups: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut series: Vec<(&str, i64, i64, Series)> = Vec::new();
    for ((run, rank), acts) in &input.ranks {
        for a in acts {
            add_launch(groups.entry(input.key(run, *rank, a, by)).or_default(), a);
        }
        for g in gaps(acts) {
            let acc = groups.entry(input.key(run, *rank, &g.act, by)).or_default();
            acc.gaps.push(g);
        }
        let queues = queue::of_rank(acts);
        let mine = groups
            .iter_mut()
            .filter(|(k, _)| &k.run == run && k.rank == *rank);
        for (_, acc) in mine {
            if let Some((from, to)) = acc.window {
                for (stream, s) in &queues {
                    acc.queue.insert(*stream, s.over(from, to));
                }
            }
        }
        series.extend(
            queues
                .into_iter()
                .map(|(st, s)| (run.as_str(), *rank, st, s)),
        );
    }
    for acc in groups.values_mut() {
        acc.gaps
            .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.start.cmp(&b.start)));
        acc.gaps.truncate(top);
        acc.queue.retain(|_, q| q.0 > 0);
    }
    Ok(Launches {
        rows: rows_frame(&groups, by)?,
        gaps: gaps_frame(input, &groups, by)?,
        queues: queues_frame(&groups, by)?,
        series: series_frame(&series)?,
    })
}

fn add_launch(acc: &mut Acc, a: &Act) {
    acc.activities += 1;
    acc.kernels += i64::from(a.kernel);
    let Some(c) = a.call else {
        return;
    };
    acc.cpu.push((c.end - c.start) as f64);
    acc.delay.push((a.start - c.end) as f64);
    acc.to_start.push((a.start - c.start) as f64);
    acc.window = Some(match acc.window {
        None => (c.start, a.start),
        Some((f, t)) => (f.min(c.start), t.max(a.start)),
    });
}

/// The gaps between the launch calls of one rank (every thread): each distinct call in start
/// order, and the time from the latest end before it to its start, where positive.
pub(crate) fn gaps(acts: &[Act]) -> Vec<Gap> {
    let mut calls: Vec<(Call, &Act)> = acts.iter().filter_map(|a| Some((a.call?, a))).collect();
    calls.sort_by_key(|(c, a)| (c.start, c.row, a.start));
    calls.dedup_by_key(|(c, _)| c.row);
    let mut out = Vec::new();
    let Some(&(first, _)) = calls.first() else {
        return out;
    };
    let mut reach = first;
    for &(c, a) in &calls[1..] {
        if c.start > reach.end {
            out.push(Gap {
                start: reach.end,
                ns: c.start - reach.end,
                before: reach,
                after: c,
                act: *a,
            });
        }
        if c.end > reach.end {
            reach = c;
        }
    }
    out
}

fn p(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(quantile(v, q))
}

fn rows_frame(groups: &BTreeMap<Key, Acc>, by: By) -> PolarsResult<DataFrame> {
    let mut cols = key_columns(groups.keys(), by);
    let mut accs: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = groups
        .values()
        .map(|a| (a.cpu.clone(), a.delay.clone(), a.to_start.clone()))
        .collect();
    let int = |name: &str, f: &dyn Fn(&Acc) -> Option<i64>| {
        Column::new(name.into(), groups.values().map(f).collect::<Vec<_>>())
    };
    cols.extend([
        int("activities", &|a| Some(a.activities)),
        int("kernels", &|a| Some(a.kernels)),
        int("launched", &|a| Some(a.cpu.len() as i64)),
    ]);
    type Pick = fn(&mut (Vec<f64>, Vec<f64>, Vec<f64>)) -> &mut Vec<f64>;
    let quantiles: [(&str, Pick, f64); 5] = [
        ("cpu_p50_ns", |t| &mut t.0, 0.5),
        ("cpu_p99_ns", |t| &mut t.0, 0.99),
        ("delay_p50_ns", |t| &mut t.1, 0.5),
        ("delay_p99_ns", |t| &mut t.1, 0.99),
        ("to_start_p50_ns", |t| &mut t.2, 0.5),
    ];
    for (name, pick, q) in quantiles {
        let v: Vec<Option<f64>> = accs.iter_mut().map(|t| p(pick(t), q)).collect();
        cols.push(Column::new(name.into(), v));
    }
    cols.extend([
        int("longest_gap_ns", &|a| a.gaps.first().map(|g| g.ns)),
        int("queue_max", &|a| a.queue.values().map(|q| q.0).max()),
    ]);
    let mean = |a: &Acc| {
        let (from, to) = a.window?;
        let area: i128 = a.queue.values().map(|q| q.1).sum();
        (to > from).then(|| area as f64 / (to - from) as f64)
    };
    cols.push(Column::new(
        "queue_mean".into(),
        groups.values().map(mean).collect::<Vec<_>>(),
    ));
    DataFrame::new_infer_height(cols)
}

fn gaps_frame(input: &Input, groups: &BTreeMap<Key, Acc>, by: By) -> PolarsResult<DataFrame> {
    let rows: Vec<(&Key, &Gap)> = groups
        .iter()
        .flat_map(|(k, a)| a.gaps.iter().map(move |g| (k, g)))
        .collect();
    let mut cols = key_columns(rows.iter().map(|r| r.0), by);
    cols.extend([
        Column::new(
            "gap_ns".into(),
            rows.iter().map(|r| r.1.ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "gap_start_ns".into(),
            rows.iter().map(|r| r.1.start).collect::<Vec<_>>(),
        ),
        str_column("before", rows.iter().map(|r| input.call_name(&r.1.before))),
        str_column("after", rows.iter().map(|r| input.call_name(&r.1.after))),
        str_column("kernel", rows.iter().map(|r| input.name(&r.1.act))),
    ]);
    DataFrame::new_infer_height(cols)
}

fn queues_frame(groups: &BTreeMap<Key, Acc>, by: By) -> PolarsResult<DataFrame> {
    let rows: Vec<(&Key, i64, i64, Option<f64>)> = groups
        .iter()
        .flat_map(|(k, a)| {
            let span = a.window.map_or(0, |(f, t)| t - f);
            a.queue.iter().map(move |(s, q)| {
                let mean = (span > 0).then(|| q.1 as f64 / span as f64);
                (k, *s, q.0, mean)
            })
        })
        .collect();
    let mut cols = key_columns(rows.iter().map(|r| r.0), by);
    cols.extend([
        Column::new(
            "stream".into(),
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
        ),
        Column::new(
            "queue_max".into(),
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        ),
        Column::new(
            "queue_mean".into(),
            rows.iter().map(|r| r.3).collect::<Vec<_>>(),
        ),
    ]);
    DataFrame::new_infer_height(cols)
}

fn series_frame(series: &[(&str, i64, i64, Series)]) -> PolarsResult<DataFrame> {
    let points = || {
        series
            .iter()
            .flat_map(|s| s.3.points.iter().map(move |p| (s, p)))
    };
    DataFrame::new_infer_height(vec![
        str_column("run", points().map(|(s, _)| s.0)),
        Column::new(
            "rank".into(),
            points().map(|(s, _)| s.1).collect::<Vec<_>>(),
        ),
        Column::new(
            "stream".into(),
            points().map(|(s, _)| s.2).collect::<Vec<_>>(),
        ),
        Column::new(
            "ts_ns".into(),
            points().map(|(_, p)| p.0).collect::<Vec<_>>(),
        ),
        Column::new(
            "queue_length".into(),
            points().map(|(_, p)| p.1).collect::<Vec<_>>(),
        ),
    ])
}
