//! The text table of `aorta overlap`: aligned columns, nanoseconds shown as milliseconds,
//! a `total` row (the rank's whole window) after each rank's steps. The numbers are formatted
//! by `aorta_reports::fmt`, so the HTML report shows them with the same decimals.

use anyhow::Result;
use aorta_reports::fmt;
use polars::prelude::*;

use crate::text_table::{self, Align};

/// How a column is shown.
#[derive(Clone, Copy)]
pub(crate) enum Show {
    /// As written (keys).
    Plain,
    /// Integer ns as ms, 3 decimals.
    Ms,
    /// A ratio, 3 decimals.
    Ratio,
    /// A percentage, 1 decimal.
    Pct,
    /// Float ns as ms, 3 decimals.
    MsFloat,
    /// Float ms, 3 decimals.
    MsValue,
    /// GB/s, as the reports show bandwidth.
    Gbps,
    /// TFLOP/s (or FLOP per byte), 1 decimal.
    Tflops,
    /// TB/s, 3 decimals.
    Tbps,
    /// FLOPs as TFLOP, 3 decimals.
    Tflop,
    /// A byte count in binary units (`1.5 GiB`).
    Bytes,
}

pub(crate) type Col = (&'static str, &'static str, Show);

pub(crate) const METRIC_COLUMNS: &[Col] = &[
    ("step_time", "step_ns", Show::Ms),
    ("window", "window_ns", Show::Ms),
    ("busy", "busy_ns", Show::Ms),
    ("compute", "compute_ns", Show::Ms),
    ("gemm", "gemm_ns", Show::Ms),
    ("comm", "comm_ns", Show::Ms),
    ("gemm∩comm", "gemm_comm_overlap_ns", Show::Ms),
    ("exposed_comm", "exposed_comm_ns", Show::Ms),
    ("comm_wait", "comm_wait_ns", Show::Ms),
    ("exposed_transfer", "exposed_transfer_ns", Show::Ms),
    ("tp_overlap_ratio", "tp_overlap_ratio", Show::Ratio),
    ("comm_hidden_pct", "comm_hidden_pct", Show::Pct),
    (
        "compute_overlap_ratio",
        "compute_overlap_ratio",
        Show::Ratio,
    ),
    ("memcpy", "memcpy_ns", Show::Ms),
    ("exposed_memcpy", "exposed_memcpy_ns", Show::Ms),
];

pub(crate) const COLLECTIVE_COLUMNS: &[Col] = &[
    ("kernels", "activity_count", Show::Plain),
    ("comm", "comm_ns", Show::Ms),
    ("exposed_comm", "exposed_comm_ns", Show::Ms),
];

/// `aorta overlap --by size` (`collectives::sizes::frame`), after its key columns.
pub(crate) const SIZE_COLUMNS: &[Col] = &[
    ("calls", "count", Show::Plain),
    ("transfer", "mean_ms", Show::MsValue),
    ("duration", "mean_duration_ms", Show::MsValue),
    ("skew", "median_skew_ms", Show::MsValue),
    ("algbw_GB/s", "algbw_gbps", Show::Gbps),
    ("busbw_GB/s", "busbw_gbps", Show::Gbps),
];

/// The key columns of `SIZE_COLUMNS`' rows.
pub(crate) const SIZE_KEYS: &[&str] = &["comm_op", "bytes", "dtype", "group_size"];

fn cell(df: &DataFrame, name: &str, i: usize, show: Show) -> String {
    let v = df
        .column(name)
        .ok()
        .and_then(|c| c.get(i).ok())
        .unwrap_or(AnyValue::Null);
    match (v, show) {
        (AnyValue::Null, _) => "-".into(),
        (AnyValue::Int64(x), Show::Ms) => fmt::ms_ns(x),
        (AnyValue::Float64(x), Show::Ratio) => fmt::ratio(x),
        (AnyValue::Float64(x), Show::Pct) => fmt::pct(x),
        (AnyValue::Float64(x), Show::MsFloat) => fmt::ms(x * 1e-6),
        (AnyValue::Float64(x), Show::MsValue) => fmt::ms(x),
        (AnyValue::Float64(x), Show::Gbps) => fmt::gbps(x),
        (AnyValue::Float64(x), Show::Tflops) => fmt::tflops(x),
        (AnyValue::Float64(x), Show::Tbps) => fmt::tbps(x),
        (AnyValue::Int64(x), Show::Tflop) => format!("{:.3}", x as f64 * 1e-12),
        (AnyValue::Int64(x), Show::Bytes) => fmt::bytes(x),
        (AnyValue::String(s), _) => s.to_string(),
        (AnyValue::StringOwned(s), _) => s.to_string(),
        (other, _) => other.to_string(),
    }
}

/// How a key column is shown: as written, except a message size (`bytes`, `--by size`),
/// which reads in binary units as the pages show it (`256 MiB`; CSV and JSON keep the count).
fn key_show(key: &str) -> Show {
    if key == "bytes" {
        Show::Bytes
    } else {
        Show::Plain
    }
}

fn row(df: &DataFrame, i: usize, keys: &[&str], cols: &[Col]) -> Vec<String> {
    let k = keys.iter().map(|&k| cell(df, k, i, key_show(k)));
    k.chain(cols.iter().map(|&(_, c, s)| cell(df, c, i, s)))
        .collect()
}

/// The same rank and source in two frames?
fn same_group(a: &DataFrame, i: usize, b: &DataFrame, j: usize) -> bool {
    ["rank", "source"]
        .iter()
        .all(|k| cell(a, k, i, Show::Plain) == cell(b, k, j, Show::Plain))
}

/// `rows` as aligned text; with `totals`, each (rank, source) group of rows is followed by
/// its totals row, keyed `total`.
pub(crate) fn render(
    rows: &DataFrame,
    totals: Option<&DataFrame>,
    keys: &[&str],
    cols: &[Col],
) -> Result<String> {
    render_within(rows, totals, keys, cols, None)
}

/// `render`, fitted into a width where given (`fit`: the width, and per key column the
/// fewest characters it is cut down to, with an ellipsis; `text_table`).
pub(crate) fn render_within(
    rows: &DataFrame,
    totals: Option<&DataFrame>,
    keys: &[&str],
    cols: &[Col],
    fit: Option<(usize, &[usize])>,
) -> Result<String> {
    let mut lines: Vec<Vec<String>> = vec![keys
        .iter()
        .map(|k| k.to_string())
        .chain(cols.iter().map(|c| c.0.to_string()))
        .collect()];
    for i in 0..rows.height() {
        lines.push(row(rows, i, keys, cols));
        let last_of_group = i + 1 == rows.height() || !same_group(rows, i, rows, i + 1);
        if let (true, Some(t)) = (last_of_group, totals) {
            if let Some(j) = (0..t.height()).find(|&j| same_group(rows, i, t, j)) {
                let mut r = row(t, j, keys, cols);
                r[keys.len() - 1] = "total".into();
                lines.push(r);
            }
        }
    }
    // Keys flush left (and cut to fit), numbers flush right.
    let align: Vec<Align> = (0..keys.len() + cols.len())
        .map(|c| match (c < keys.len(), fit) {
            (false, _) => Align::Right,
            (true, None) => Align::Left,
            (true, Some((_, floors))) => {
                Align::Cut(floors.get(c).copied().unwrap_or(text_table::MIN_CUT))
            }
        })
        .collect();
    Ok(text_table::render(&lines, &align, fit.map(|f| f.0)))
}
