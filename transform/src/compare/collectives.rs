//! The collective level: communication kernels per (kind, message size, dtype, group size),
//! with time per call, algorithm bandwidth = bytes / time and bus bandwidth with the NCCL
//! factors of METRICS.md (all_reduce 2(n−1)/n; all_gather, reduce_scatter (n−1)/n; others 1).
//!
//! The time is each kernel's *transfer* time where its collective was matched across ranks
//! (`collectives`): the part after the last member arrived. Waiting for a late rank is not
//! the vendor's doing, so it must not make one side's NCCL look slower; it shows up as skew,
//! compared beside the time. Unmatched kernels (a single traced rank) count whole.

use std::collections::{BTreeMap, HashMap};

use polars::prelude::*;

use crate::nccl::{bus_factor, message_bytes};
use crate::rows::str_column;
use crate::summary::spread;

use super::levels::{LevelRow, SIDES};
use super::load::{ints, strs, SideData};

/// (comm_op, bytes, dtype, group size).
pub(super) type CollKey = (String, Option<i64>, Option<String>, Option<i64>);

/// One call: its transfer time (its duration when unmatched) and its instance's skew.
#[derive(Debug, Clone, Copy)]
pub(super) struct Call {
    pub time_ns: i64,
    pub duration_ns: i64,
    pub skew_ns: Option<i64>,
}

/// Per side and key: every call.
pub(super) type Calls = BTreeMap<(usize, CollKey), Vec<Call>>;

/// (run, rank, start) → (transfer, skew) of each matched comm kernel of the side.
fn matched(d: &SideData) -> HashMap<(String, i64, i64), (i64, i64)> {
    let mut out = HashMap::new();
    for job in &d.jobs {
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

pub(super) fn of(sides: &[SideData; 2]) -> Calls {
    let mut calls = Calls::new();
    for (s, d) in sides.iter().enumerate() {
        let df = &d.acts;
        let (cat, op, dtype) = (strs(df, "category"), strs(df, "comm_op"), strs(df, "dtype"));
        let (inp, out, n) = (
            ints(df, "in_msg_nelems"),
            ints(df, "out_msg_nelems"),
            ints(df, "group_size"),
        );
        let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
        let (run, rank) = (strs(df, "run"), ints(df, "rank"));
        let matched = matched(d);
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
            calls.entry((s, key)).or_default().push(Call {
                time_ns: m.map_or(dur, |m| m.0),
                duration_ns: dur,
                skew_ns: m.map(|m| m.1),
            });
        }
    }
    calls
}

/// How a key reads in the levels table: `all_gather 8388608 B BFloat16 x8`.
pub(super) fn key_text(k: &CollKey) -> String {
    let or = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    format!(
        "{} {} B {} x{}",
        k.0,
        or(k.1.map(|b| b.to_string())),
        or(k.2.clone()),
        or(k.3.map(|n| n.to_string()))
    )
}

/// Per key: the transfer time, then the skew where either side has one.
pub(super) fn levels(calls: &Calls) -> Vec<LevelRow> {
    let mut rows: BTreeMap<(&CollKey, u8), LevelRow> = BTreeMap::new();
    for ((s, key), c) in calls {
        let row = rows.entry((key, 0)).or_insert_with(|| LevelRow {
            level: "collectives",
            key: key_text(key),
            unit: "ms",
            sides: [None, None],
            refused: false,
        });
        row.sides[*s] = spread(c.iter().map(|c| Some(c.time_ns as f64 * 1e-6)));
        let skew = spread(c.iter().map(|c| c.skew_ns.map(|x| x as f64 * 1e-6)));
        if skew.is_some() {
            let row = rows.entry((key, 1)).or_insert_with(|| LevelRow {
                level: "collectives",
                key: format!("{} skew", key_text(key)),
                unit: "ms",
                sides: [None, None],
                refused: false,
            });
            row.sides[*s] = skew;
        }
    }
    rows.into_values().collect()
}

pub(super) fn frame(calls: &Calls) -> PolarsResult<DataFrame> {
    let mean =
        |c: &[Call], f: fn(&Call) -> i64| c.iter().map(f).sum::<i64>() as f64 / c.len() as f64;
    let rows: Vec<(&(usize, CollKey), f64, usize)> = calls
        .iter()
        .map(|(k, c)| (k, mean(c, |c| c.time_ns), c.len()))
        .collect();
    let durations: Vec<f64> = calls
        .values()
        .map(|c| mean(c, |c| c.duration_ns) * 1e-6)
        .collect();
    let skews: Vec<Option<f64>> = calls
        .values()
        .map(|c| {
            let s = spread(c.iter().map(|c| c.skew_ns.map(|x| x as f64 * 1e-6)));
            s.map(|s| s.median)
        })
        .collect();
    let algbw = |r: &(&(usize, CollKey), f64, usize)| {
        let bytes = r.0 .1 .1? as f64;
        (r.1 > 0.0).then(|| bytes / r.1)
    };
    let busbw = |r: &(&(usize, CollKey), f64, usize)| {
        let k = &r.0 .1;
        algbw(r).map(|a| a * bus_factor(&k.0, k.3.unwrap_or(1)))
    };
    DataFrame::new_infer_height(vec![
        str_column("side", rows.iter().map(|r| SIDES[r.0 .0])),
        str_column("comm_op", rows.iter().map(|r| r.0 .1 .0.as_str())),
        Column::new(
            "bytes".into(),
            rows.iter().map(|r| r.0 .1 .1).collect::<Vec<_>>(),
        ),
        Column::new(
            "dtype".into(),
            rows.iter().map(|r| r.0 .1 .2.clone()).collect::<Vec<_>>(),
        ),
        Column::new(
            "group_size".into(),
            rows.iter().map(|r| r.0 .1 .3).collect::<Vec<_>>(),
        ),
        Column::new(
            "count".into(),
            rows.iter().map(|r| r.2 as i64).collect::<Vec<_>>(),
        ),
        Column::new(
            "mean_ms".into(),
            rows.iter().map(|r| r.1 * 1e-6).collect::<Vec<_>>(),
        ),
        Column::new("mean_duration_ms".into(), durations),
        Column::new("median_skew_ms".into(), skews),
        Column::new(
            "algbw_gbps".into(),
            rows.iter().map(algbw).collect::<Vec<_>>(),
        ),
        Column::new(
            "busbw_gbps".into(),
            rows.iter().map(busbw).collect::<Vec<_>>(),
        ),
    ])
}
