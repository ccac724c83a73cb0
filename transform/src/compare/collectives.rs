//! The collective level: communication kernels per (kind, message size, dtype, group size),
//! with time per call, algorithm bandwidth = bytes / time and bus bandwidth with the NCCL
//! factors of METRICS.md (all_reduce 2(n−1)/n; all_gather, reduce_scatter (n−1)/n; others 1).

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::rows::str_column;
use crate::summary::spread;

use super::levels::{LevelRow, SIDES};
use super::load::{ints, strs, SideData};

/// (comm_op, bytes, dtype, group size).
pub type CollKey = (String, Option<i64>, Option<String>, Option<i64>);

/// Per side and key: every call's duration in ns.
pub type Calls = BTreeMap<(usize, CollKey), Vec<i64>>;

/// Bytes per element of the dtype names PyTorch writes in `args.dtype`.
pub fn dtype_bytes(dtype: &str) -> Option<i64> {
    Some(match dtype {
        "Double" | "Long" | "ComplexFloat" => 8,
        "Float" | "Int" | "UInt32" => 4,
        "BFloat16" | "Half" | "Short" | "UInt16" => 2,
        "Byte" | "Char" | "Bool" | "Int8" | "UInt8" => 1,
        d if d.starts_with("Float8") => 1,
        _ => return None,
    })
}

/// The bus-bandwidth factor of a collective kind over `n` ranks.
pub fn bus_factor(op: &str, n: i64) -> f64 {
    let n = n.max(1) as f64;
    match op {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// Message size in bytes: the larger of input and output (all_gather's output,
/// reduce_scatter's input, all_reduce's either), as nccl-tests counts it.
fn message_bytes(inp: Option<i64>, out: Option<i64>, dtype: Option<&str>) -> Option<i64> {
    let elems = inp.max(out)?;
    Some(elems * dtype_bytes(dtype?)?)
}

pub fn of(sides: &[SideData; 2]) -> Calls {
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
        for i in (0..df.height()).filter(|&i| cat[i] == Some("comm")) {
            let key = (
                op[i].unwrap_or("other").to_string(),
                message_bytes(inp[i], out[i], dtype[i]),
                dtype[i].map(str::to_string),
                n[i],
            );
            let dur = end[i].unwrap_or(0) - start[i].unwrap_or(0);
            calls.entry((s, key)).or_default().push(dur.max(0));
        }
    }
    calls
}

/// How a key reads in the levels table: `all_gather 8388608 B BFloat16 x8`.
pub fn key_text(k: &CollKey) -> String {
    let or = |v: Option<String>| v.unwrap_or_else(|| "?".into());
    format!(
        "{} {} B {} x{}",
        k.0,
        or(k.1.map(|b| b.to_string())),
        or(k.2.clone()),
        or(k.3.map(|n| n.to_string()))
    )
}

pub fn levels(calls: &Calls) -> Vec<LevelRow> {
    let mut rows: BTreeMap<&CollKey, LevelRow> = BTreeMap::new();
    for ((s, key), durs) in calls {
        let row = rows.entry(key).or_insert_with(|| LevelRow {
            level: "collectives",
            key: key_text(key),
            unit: "ms",
            sides: [None, None],
        });
        row.sides[*s] = spread(durs.iter().map(|&d| Some(d as f64 * 1e-6)));
    }
    rows.into_values().collect()
}

pub fn frame(calls: &Calls) -> PolarsResult<DataFrame> {
    let rows: Vec<(&(usize, CollKey), f64, usize)> = calls
        .iter()
        .map(|(k, d)| (k, d.iter().sum::<i64>() as f64 / d.len() as f64, d.len()))
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
