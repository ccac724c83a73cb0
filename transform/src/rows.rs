//! Rows of the overlap tables, before they become polars frames.
//!
//! The trace path knows every metric and the JSONL path only some, so one row type with
//! optional fields serves both; `frame` lays each table out in the order `aorta_ingest::schema`
//! declares, so the tables written are the tables documented.

use aorta_ingest::schema::{Table, OVERLAP_STREAMS, OVERLAP_STREAM_PAIRS};
use polars::prelude::*;

use crate::intervals::{ratio, Metrics};

/// The metric columns shared by `overlap_steps` and `overlap_ranks`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MetricRow {
    pub window_start_ns: Option<i64>,
    pub window_end_ns: Option<i64>,
    pub window_ns: Option<i64>,
    pub step_ns: Option<i64>,
    pub idle_before_ns: Option<i64>,
    pub idle_after_ns: Option<i64>,
    pub activity_count: i64,
    pub comm_ns: Option<i64>,
    pub gemm_ns: Option<i64>,
    pub compute_ns: Option<i64>,
    pub busy_ns: Option<i64>,
    pub idle_ns: Option<i64>,
    pub memcpy_ns: Option<i64>,
    pub gemm_comm_overlap_ns: Option<i64>,
    pub compute_comm_overlap_ns: Option<i64>,
    pub exposed_comm_ns: Option<i64>,
    pub tp_overlap_ratio: Option<f64>,
    pub comm_hidden_pct: Option<f64>,
    pub compute_overlap_ratio: Option<f64>,
    pub gemm_memcpy_overlap_ns: Option<i64>,
    pub exposed_memcpy_ns: Option<i64>,
    pub comm_wait_ns: Option<i64>,
    pub comm_transfer_ns: Option<i64>,
    pub exposed_transfer_ns: Option<i64>,
}

impl From<&Metrics> for MetricRow {
    fn from(m: &Metrics) -> Self {
        let empty = m.activity_count == 0;
        MetricRow {
            window_start_ns: (!empty).then_some(m.window_start_ns),
            window_end_ns: (!empty).then_some(m.window_end_ns),
            window_ns: Some(m.window_ns()),
            activity_count: m.activity_count,
            comm_ns: Some(m.comm_ns),
            gemm_ns: Some(m.gemm_ns),
            compute_ns: Some(m.compute_ns),
            busy_ns: Some(m.busy_ns),
            idle_ns: Some(m.idle_ns()),
            memcpy_ns: Some(m.memcpy_ns),
            gemm_comm_overlap_ns: Some(m.gemm_comm_overlap_ns),
            compute_comm_overlap_ns: Some(m.compute_comm_overlap_ns),
            exposed_comm_ns: Some(m.exposed_comm_ns()),
            tp_overlap_ratio: m.tp_overlap_ratio(),
            comm_hidden_pct: m.comm_hidden_pct(),
            compute_overlap_ratio: m.compute_overlap_ratio(),
            gemm_memcpy_overlap_ns: Some(m.gemm_memcpy_overlap_ns),
            exposed_memcpy_ns: Some(m.exposed_memcpy_ns),
            ..MetricRow::default()
        }
    }
}

impl MetricRow {
    /// The wait/transfer split of the rank's comm kernels (`aorta collectives`).
    pub(crate) fn with_split(mut self, s: Option<crate::comm_split::Split>) -> Self {
        self.comm_wait_ns = s.map(|s| s.comm_wait_ns);
        self.comm_transfer_ns = s.map(|s| s.comm_transfer_ns);
        self.exposed_transfer_ns = s.map(|s| s.exposed_transfer_ns);
        self
    }

    /// The ratios again, from whatever totals are known (for rows summed from steps).
    pub(crate) fn with_ratios(mut self) -> Self {
        let r = |n: Option<i64>, d: Option<i64>| ratio(n?, d?);
        let min = self.gemm_ns.zip(self.comm_ns).map(|(g, c)| g.min(c));
        self.tp_overlap_ratio = r(self.gemm_comm_overlap_ns, min);
        self.comm_hidden_pct = r(self.compute_comm_overlap_ns.map(|x| 100 * x), self.comm_ns);
        self.compute_overlap_ratio = r(self.compute_comm_overlap_ns, self.compute_ns);
        self
    }
}

type I64Get = fn(&MetricRow) -> Option<i64>;
type F64Get = fn(&MetricRow) -> Option<f64>;

const INT_COLUMNS: &[(&str, I64Get)] = &[
    ("window_start_ns", |r| r.window_start_ns),
    ("window_end_ns", |r| r.window_end_ns),
    ("window_ns", |r| r.window_ns),
    ("step_ns", |r| r.step_ns),
    ("idle_before_ns", |r| r.idle_before_ns),
    ("idle_after_ns", |r| r.idle_after_ns),
    ("activity_count", |r| Some(r.activity_count)),
    ("comm_ns", |r| r.comm_ns),
    ("gemm_ns", |r| r.gemm_ns),
    ("compute_ns", |r| r.compute_ns),
    ("busy_ns", |r| r.busy_ns),
    ("idle_ns", |r| r.idle_ns),
    ("memcpy_ns", |r| r.memcpy_ns),
    ("gemm_comm_overlap_ns", |r| r.gemm_comm_overlap_ns),
    ("compute_comm_overlap_ns", |r| r.compute_comm_overlap_ns),
    ("exposed_comm_ns", |r| r.exposed_comm_ns),
    ("gemm_memcpy_overlap_ns", |r| r.gemm_memcpy_overlap_ns),
    ("exposed_memcpy_ns", |r| r.exposed_memcpy_ns),
    ("comm_wait_ns", |r| r.comm_wait_ns),
    ("comm_transfer_ns", |r| r.comm_transfer_ns),
    ("exposed_transfer_ns", |r| r.exposed_transfer_ns),
];

const FLOAT_COLUMNS: &[(&str, F64Get)] = &[
    ("tp_overlap_ratio", |r| r.tp_overlap_ratio),
    ("comm_hidden_pct", |r| r.comm_hidden_pct),
    ("compute_overlap_ratio", |r| r.compute_overlap_ratio),
];

/// The metric columns of `rows`, in no particular order (`frame` orders them).
pub(crate) fn metric_columns(rows: &[MetricRow]) -> Vec<Column> {
    let ints = INT_COLUMNS.iter().map(|(name, get)| {
        let v: Vec<Option<i64>> = rows.iter().map(get).collect();
        Column::new((*name).into(), v)
    });
    let floats = FLOAT_COLUMNS.iter().map(|(name, get)| {
        let v: Vec<Option<f64>> = rows.iter().map(get).collect();
        Column::new((*name).into(), v)
    });
    ints.chain(floats).collect()
}

/// Builds one table: `columns` (any order, partition columns included) laid out and typed as
/// the schema declares.
pub(crate) fn frame(table: &Table, columns: Vec<Column>) -> PolarsResult<DataFrame> {
    let df = DataFrame::new_infer_height(columns)?;
    let schema = crate::dataset::polars_schema(table);
    let cols: Vec<Expr> = schema
        .iter()
        .map(|(name, dtype)| col(name.clone()).cast(dtype.clone()))
        .collect();
    df.lazy().select(cols).collect()
}

/// `overlap_streams`: the key columns, then stream, activity count and busy ns per row.
pub(crate) fn streams_frame(
    mut keys: Vec<Column>,
    (stream, count, busy): (Vec<String>, Vec<i64>, Vec<i64>),
) -> PolarsResult<DataFrame> {
    keys.extend([
        str_column("stream", stream),
        Column::new("activity_count".into(), count),
        Column::new("busy_ns".into(), busy),
    ]);
    frame(&OVERLAP_STREAMS, keys)
}

/// `overlap_stream_pairs`: the key columns, then both streams and their overlap per row.
pub(crate) fn pairs_frame<A: AsRef<str>>(
    mut keys: Vec<Column>,
    (a, b, overlap): (Vec<A>, Vec<String>, Vec<i64>),
) -> PolarsResult<DataFrame> {
    keys.extend([
        str_column("stream", a),
        str_column("other_stream", b),
        Column::new("overlap_ns".into(), overlap),
    ]);
    frame(&OVERLAP_STREAM_PAIRS, keys)
}

/// A string column from anything that displays.
pub(crate) fn str_column<T: AsRef<str>>(name: &str, v: impl IntoIterator<Item = T>) -> Column {
    // Straight into the string array: no `String` per row (a 1,000-rank `collectives` frame
    // repeats a long process-group key millions of times).
    StringChunked::from_iter_values(name.into(), v.into_iter()).into_column()
}

/// Milliseconds (the Python tool's unit) to integer nanoseconds, rounded to the nearest.
pub(crate) fn ms_to_ns(ms: f64) -> i64 {
    (ms * 1e6).round() as i64
}

/// A column as `&str` values (missing column or wrong type: all null).
pub fn strs<'a>(df: &'a DataFrame, name: &str) -> Vec<Option<&'a str>> {
    match df.column(name).ok().and_then(|c| c.str().ok()) {
        Some(ca) => ca.iter().collect(),
        None => vec![None; df.height()],
    }
}

/// A column as `i64` values (missing column or wrong type: all null).
pub fn ints(df: &DataFrame, name: &str) -> Vec<Option<i64>> {
    match df.column(name).ok().and_then(|c| c.i64().ok()) {
        Some(ca) => ca.iter().collect(),
        None => vec![None; df.height()],
    }
}

/// Random access to one string column (a missing column or another type reads as null):
/// for columns of which a few rows are read, where `strs` would convert them all.
pub(crate) struct StrAt<'a>(Option<&'a StringChunked>);

impl<'a> StrAt<'a> {
    pub(crate) fn of(df: &'a DataFrame, name: &str) -> StrAt<'a> {
        StrAt(df.column(name).ok().and_then(|c| c.str().ok()))
    }

    pub(crate) fn get(&self, i: usize) -> Option<&'a str> {
        self.0?.get(i)
    }

    /// Every value in order (`n` nulls for a missing column): sequential reads, chunk by
    /// chunk, cheaper than `get` over every row.
    pub(crate) fn iter(&self, n: usize) -> Box<dyn Iterator<Item = Option<&'a str>> + 'a> {
        match self.0 {
            Some(c) => Box::new(c.iter()),
            None => Box::new(std::iter::repeat_n(None, n)),
        }
    }
}

/// Random access to one integer column, as `StrAt`.
pub(crate) struct IntAt<'a>(Option<&'a Int64Chunked>);

impl<'a> IntAt<'a> {
    pub(crate) fn of(df: &'a DataFrame, name: &str) -> IntAt<'a> {
        IntAt(df.column(name).ok().and_then(|c| c.i64().ok()))
    }

    pub(crate) fn get(&self, i: usize) -> Option<i64> {
        self.0?.get(i)
    }

    /// As `StrAt::iter`.
    pub(crate) fn iter(&self, n: usize) -> Box<dyn Iterator<Item = Option<i64>> + 'a> {
        match self.0 {
            Some(c) => Box::new(c.iter()),
            None => Box::new(std::iter::repeat_n(None, n)),
        }
    }
}

/// A column as `f64` values (missing column or wrong type: all null).
pub fn floats(df: &DataFrame, name: &str) -> Vec<Option<f64>> {
    match df.column(name).ok().and_then(|c| c.f64().ok()) {
        Some(ca) => ca.iter().collect(),
        None => vec![None; df.height()],
    }
}
