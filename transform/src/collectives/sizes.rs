//! Communication kernels per (kind, message size, dtype, group size): calls, time per call,
//! algorithm bandwidth = bytes / time and bus bandwidth with the NCCL factors of METRICS.md
//! (all_reduce 2(n−1)/n; all_gather, reduce_scatter (n−1)/n; others 1).
//!
//! `aorta compare` (its collective level) and `aorta overlap --by collective` print these
//! numbers, so they are computed here once.
//!
//! The time is each kernel's *transfer* time where its collective was matched across ranks
//! (`Job`): the part after the last member arrived. Waiting for a late rank is not the
//! library's doing, so it must not make the bandwidth look lower; it shows up as skew, beside
//! the time. Unmatched kernels (a single traced rank) count whole.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use polars::prelude::*;

use crate::nccl::{bus_factor, message_bytes};
use crate::rows::{ints, str_column, strs};
use crate::summary::spread;

use crate::dataset::{self, DatasetError};
use crate::steps;

use super::Job;

/// (comm_op, bytes, dtype, group size).
pub(crate) type SizeKey = (String, Option<i64>, Option<String>, Option<i64>);

/// One call: its transfer time (its duration when unmatched) and its instance's skew.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub(crate) time_ns: i64,
    pub(crate) duration_ns: i64,
    pub(crate) skew_ns: Option<i64>,
}

/// Every call of one group of runs, per key.
pub(crate) type Calls = BTreeMap<SizeKey, Vec<Call>>;

/// The `gpu_activities` columns `calls` reads.
pub(crate) const COLUMNS: [&str; 11] = [
    "run",
    "rank",
    "step",
    "category",
    "comm_op",
    "start_ns",
    "end_ns",
    "in_msg_nelems",
    "out_msg_nelems",
    "group_size",
    "dtype",
];

/// (run, rank, start) → (transfer, skew) of each matched comm kernel of `jobs`.
fn matched(jobs: &[Job]) -> HashMap<(String, i64, i64), (i64, i64)> {
    let mut out = HashMap::new();
    for job in jobs {
        for (r, rk) in job.ranks.iter().enumerate() {
            for k in &rk.kernels {
                let (Some((wait, _)), Some(a)) = (job.timing(r, k), job.arrivals[k.inst as usize])
                else {
                    continue;
                };
                let t = (k.end - k.start - wait, a.last - a.first);
                out.insert((job.run.clone(), rk.rank, k.start), t);
            }
        }
    }
    out
}

/// The comm kernels of `acts` (with `COLUMNS`), per run and key, timed by `jobs`' matching.
pub fn calls_by_run(acts: &DataFrame, jobs: &[Job]) -> BTreeMap<String, Calls> {
    let df = acts;
    let (cat, op, dtype) = (strs(df, "category"), strs(df, "comm_op"), strs(df, "dtype"));
    let (inp, out, n) = (
        ints(df, "in_msg_nelems"),
        ints(df, "out_msg_nelems"),
        ints(df, "group_size"),
    );
    let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
    let (run, rank) = (strs(df, "run"), ints(df, "rank"));
    let matched = matched(jobs);
    let mut calls: BTreeMap<String, Calls> = BTreeMap::new();
    for i in (0..df.height()).filter(|&i| cat[i] == Some("comm")) {
        let key = (
            op[i].unwrap_or("other").to_string(),
            message_bytes(inp[i], out[i], dtype[i]),
            dtype[i].map(str::to_string),
            n[i],
        );
        let start = start[i].unwrap_or(0);
        let dur = (end[i].unwrap_or(0) - start).max(0);
        let at = (
            run[i].unwrap_or("").to_string(),
            rank[i].unwrap_or(0),
            start,
        );
        let m = matched.get(&at);
        let run_calls = calls.entry(at.0).or_default();
        run_calls.entry(key).or_default().push(Call {
            time_ns: m.map_or(dur, |m| m.0),
            duration_ns: dur,
            skew_ns: m.map(|m| m.1),
        });
    }
    calls
}

/// How a key reads in a table: `all_gather 8388608 B BFloat16 x8`.
pub(crate) fn key_text(k: &SizeKey) -> String {
    let or = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    format!(
        "{} {} B {} x{}",
        k.0,
        or(k.1.map(|b| b.to_string())),
        or(k.2.clone()),
        or(k.3.map(|n| n.to_string()))
    )
}

/// The numbers of one key's calls.
struct Row<'a> {
    group: &'a str,
    key: &'a SizeKey,
    count: usize,
    mean_ns: f64,
    mean_duration_ns: f64,
    median_skew_ns: Option<f64>,
}

impl Row<'_> {
    fn algbw(&self) -> Option<f64> {
        let bytes = self.key.1? as f64;
        (self.mean_ns > 0.0).then(|| bytes / self.mean_ns)
    }

    fn busbw(&self) -> Option<f64> {
        let k = self.key;
        self.algbw().map(|a| a * bus_factor(&k.0, k.3.unwrap_or(1)))
    }
}

fn rows<'a>(groups: &'a [(&'a str, &'a Calls)]) -> Vec<Row<'a>> {
    let mean =
        |c: &[Call], f: fn(&Call) -> i64| c.iter().map(f).sum::<i64>() as f64 / c.len() as f64;
    let mut out = Vec::new();
    for (group, calls) in groups {
        for (key, c) in calls.iter() {
            let skew = spread(c.iter().map(|c| c.skew_ns.map(|x| x as f64)));
            out.push(Row {
                group,
                key,
                count: c.len(),
                mean_ns: mean(c, |c| c.time_ns),
                mean_duration_ns: mean(c, |c| c.duration_ns),
                median_skew_ns: skew.map(|s| s.median),
            });
        }
    }
    out
}

/// One row per (group, key): `group_column` (the compare side, or the run), comm_op, bytes,
/// dtype, group_size, count, mean_ms (transfer), mean_duration_ms, median_skew_ms,
/// algbw_gbps and busbw_gbps (bytes per ns = GB/s).
pub fn frame(group_column: &str, groups: &[(&str, &Calls)]) -> PolarsResult<DataFrame> {
    let rows = rows(groups);
    let floats = |f: &dyn Fn(&Row) -> Option<f64>| rows.iter().map(f).collect::<Vec<_>>();
    DataFrame::new_infer_height(vec![
        str_column(group_column, rows.iter().map(|r| r.group)),
        str_column("comm_op", rows.iter().map(|r| r.key.0.as_str())),
        Column::new(
            "bytes".into(),
            rows.iter().map(|r| r.key.1).collect::<Vec<_>>(),
        ),
        Column::new(
            "dtype".into(),
            rows.iter().map(|r| r.key.2.clone()).collect::<Vec<_>>(),
        ),
        Column::new(
            "group_size".into(),
            rows.iter().map(|r| r.key.3).collect::<Vec<_>>(),
        ),
        Column::new(
            "count".into(),
            rows.iter().map(|r| r.count as i64).collect::<Vec<_>>(),
        ),
        Column::new("mean_ms".into(), floats(&|r| Some(r.mean_ns * 1e-6))),
        Column::new(
            "mean_duration_ms".into(),
            floats(&|r| Some(r.mean_duration_ns * 1e-6)),
        ),
        Column::new(
            "median_skew_ms".into(),
            floats(&|r| r.median_skew_ns.map(|s| s * 1e-6)),
        ),
        Column::new("algbw_gbps".into(), floats(&|r| r.algbw())),
        Column::new("busbw_gbps".into(), floats(&|r| r.busbw())),
    ])
}

/// `job`'s calls per key, read from the dataset at `root` (its real steps only, as `aorta
/// compare`'s collective level counts them) and timed by the job's matching.
pub fn of_run(root: &Path, job: &Job) -> Result<Calls, DatasetError> {
    let polars = |source| DatasetError::Polars {
        path: root.join("gpu_activities"),
        source,
    };
    let cols: Vec<Expr> = COLUMNS.iter().map(|c| col(*c)).collect();
    let acts = dataset::scan(root, "gpu_activities")?
        .filter(col("run").eq(lit(job.run.as_str())))
        .select(cols)
        .collect()
        .map_err(polars)?;
    let acts = steps::drop_outside(&acts).map_err(polars)?;
    let mut by_run = calls_by_run(&acts, std::slice::from_ref(job));
    Ok(by_run.remove(&job.run).unwrap_or_default())
}
