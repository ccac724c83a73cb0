//! The overlap tables of the Python aorta tool's own logs (`rank_*_metrics.jsonl`).
//!
//! Those logs carry no kernels, only per-iteration CUDA-event numbers under
//! `profile.overlap.*` (docs/INPUTS.md, "The Python aorta tool's JSONL logs"), so only what means the same as
//! METRICS.md is filled: the window (`total_ms`), compute (`per_stream_ms.compute`),
//! compute ∩ comm (`overlap_ms.compute_comm`), per-stream busy time, and the compute overlap
//! of the `allreduce` / `reducescatter` streams. Its `idle` (gaps between ranges only) is a
//! different quantity and is not written as `idle_ns`.

use std::collections::BTreeMap;

use aorta_ingest::schema::{OVERLAP_COLLECTIVES, OVERLAP_RANKS, OVERLAP_STEPS};
use polars::prelude::*;

use crate::overlap_tables::{sort_rows, OverlapTables};
use crate::rows::{
    frame, metric_columns, ms_to_ns, pairs_frame, str_column, streams_frame, MetricRow,
};

const PREFIX: &str = "profile.overlap.";
const TOTAL: &str = "profile.total_ms";

/// Python stream name → collective kind, for the streams the tool dedicates to one kind.
const COMM_STREAMS: &[(&str, &str)] = &[
    ("allreduce", "all_reduce"),
    ("reducescatter", "reduce_scatter"),
];

/// The numbers of one iteration, keyed by the part after `profile.overlap.`.
type Step = BTreeMap<String, f64>;

/// Iterations per (run, rank, step) from the `metrics` table; ranks without any
/// `profile.overlap.*` key are left out.
fn group(metrics: &DataFrame) -> PolarsResult<BTreeMap<Key, Step>> {
    let (run, rank) = (
        metrics.column("run")?.str()?,
        metrics.column("rank")?.i64()?,
    );
    let (step, key) = (
        metrics.column("step")?.i64()?,
        metrics.column("key")?.str()?,
    );
    let value = metrics.column("value")?.f64()?;
    let mut out: BTreeMap<_, Step> = BTreeMap::new();
    for i in 0..metrics.height() {
        let (Some(k), Some(v)) = (key.get(i), value.get(i)) else {
            continue;
        };
        let k = match k.strip_prefix(PREFIX) {
            Some(rest) if !rest.starts_with("active_segments") => rest,
            _ if k == TOTAL => "total_ms",
            _ => continue,
        };
        let id = (
            run.get(i).unwrap_or("").to_string(),
            rank.get(i).unwrap_or(0),
            step.get(i),
        );
        out.entry(id).or_default().insert(k.to_string(), v);
    }
    out.retain(|_, s| s.keys().any(|k| k != "total_ms"));
    Ok(out)
}

fn ns(s: &Step, key: &str) -> Option<i64> {
    s.get(key).map(|&v| ms_to_ns(v))
}

/// `per_stream_ms` lists only active streams and `overlap_ms` only non-zero keys: absent is 0.
fn ns0(s: &Step, key: &str) -> i64 {
    ns(s, key).unwrap_or(0)
}

fn metric_row(s: &Step) -> MetricRow {
    MetricRow {
        window_ns: ns(s, "total_ms"),
        compute_ns: Some(ns0(s, "per_stream_ms.compute")),
        compute_comm_overlap_ns: Some(ns0(s, "overlap_ms.compute_comm")),
        ..MetricRow::default()
    }
    .with_ratios()
}

/// The overlap tables of the JSONL iterations in `metrics` (columns run, rank, step, key,
/// value).
pub(crate) fn overlap(metrics: &DataFrame) -> PolarsResult<OverlapTables> {
    let steps = group(metrics)?;
    let mut b = Cols::default();
    let mut ranks: BTreeMap<(String, i64), (i64, MetricRow)> = BTreeMap::new();
    for ((run, rank, step), s) in &steps {
        let row = metric_row(s);
        b.step_key.push((run.clone(), *rank, *step));
        b.step_rows.push(row.clone());
        let acc = ranks.entry((run.clone(), *rank)).or_default();
        acc.0 += 1;
        acc.1 = add(&acc.1, &row);
        b.add_streams(run, *rank, *step, s);
    }
    for ((run, rank), (n, row)) in ranks {
        b.rank_key.push((run, rank, None));
        b.step_counts.push(n);
        b.rank_rows.push(row.with_ratios());
    }
    b.finish()
}

/// Sums the known totals of two rows (a rank over its steps).
fn add(a: &MetricRow, b: &MetricRow) -> MetricRow {
    let s = |x: Option<i64>, y: Option<i64>| Some(x.unwrap_or(0) + y?);
    MetricRow {
        window_ns: s(a.window_ns, b.window_ns),
        compute_ns: s(a.compute_ns, b.compute_ns),
        compute_comm_overlap_ns: s(a.compute_comm_overlap_ns, b.compute_comm_overlap_ns),
        ..MetricRow::default()
    }
}

type Key = (String, i64, Option<i64>);

#[derive(Default)]
struct Cols {
    step_key: Vec<Key>,
    step_rows: Vec<MetricRow>,
    rank_key: Vec<Key>,
    rank_rows: Vec<MetricRow>,
    step_counts: Vec<i64>,
    coll_key: Vec<Key>,
    coll: (Vec<&'static str>, Vec<i64>, Vec<i64>),
    stream_key: Vec<Key>,
    streams: (Vec<String>, Vec<i64>),
    pair_key: Vec<Key>,
    pairs: (Vec<&'static str>, Vec<String>, Vec<i64>),
}

fn key_columns(keys: &[Key], with_step: bool) -> Vec<Column> {
    let mut c = vec![
        str_column("run", keys.iter().map(|k| k.0.as_str())),
        Column::new("rank".into(), keys.iter().map(|k| k.1).collect::<Vec<_>>()),
    ];
    if with_step {
        c.push(Column::new(
            "step".into(),
            keys.iter().map(|k| k.2).collect::<Vec<_>>(),
        ));
    }
    c
}

impl Cols {
    fn add_streams(&mut self, run: &str, rank: i64, step: Option<i64>, s: &Step) {
        let key = || (run.to_string(), rank, step);
        for (k, v) in s {
            if let Some(stream) = k.strip_prefix("per_stream_ms.") {
                self.stream_key.push(key());
                self.streams.0.push(stream.to_string());
                self.streams.1.push(ms_to_ns(*v));
            }
        }
        for &(stream, op) in COMM_STREAMS {
            let Some(comm) = ns(s, &format!("per_stream_ms.{stream}")) else {
                continue;
            };
            let ov = ns0(s, &format!("overlap_ms.compute_{stream}"));
            self.coll_key.push(key());
            self.coll.0.push(op);
            self.coll.1.push(comm);
            self.coll.2.push(comm - ov);
            if ov > 0 {
                self.pair_key.push(key());
                self.pairs.0.push("compute");
                self.pairs.1.push(stream.to_string());
                self.pairs.2.push(ov);
            }
        }
    }

    fn finish(self) -> PolarsResult<OverlapTables> {
        let source = |n: usize| str_column("source", vec!["jsonl"; n]);
        let mut c = key_columns(&self.step_key, true);
        c.push(source(self.step_key.len()));
        c.extend(metric_columns(&self.step_rows));
        let steps = frame(&OVERLAP_STEPS, c)?;
        let mut c = key_columns(&self.rank_key, false);
        c.push(source(self.rank_key.len()));
        c.push(Column::new("step_count".into(), self.step_counts));
        c.extend(metric_columns(&self.rank_rows));
        let ranks = frame(&OVERLAP_RANKS, c)?;
        let n = self.coll_key.len();
        let mut c = key_columns(&self.coll_key, true);
        c.extend([
            str_column("level", vec!["step"; n]),
            str_column("comm_op", self.coll.0),
            Column::new("activity_count".into(), vec![0i64; n]),
            Column::new("comm_ns".into(), self.coll.1),
            Column::new("exposed_comm_ns".into(), self.coll.2),
        ]);
        let collectives = frame(&OVERLAP_COLLECTIVES, c)?;
        let n = self.streams.0.len();
        let (stream, busy) = self.streams;
        let streams = streams_frame(
            key_columns(&self.stream_key, true),
            (stream, vec![0; n], busy),
        )?;
        let stream_pairs = pairs_frame(key_columns(&self.pair_key, true), self.pairs)?;
        Ok(OverlapTables {
            steps: sort_rows(steps)?,
            ranks: sort_rows(ranks)?,
            collectives: sort_rows(collectives)?,
            streams: sort_rows(streams)?,
            stream_pairs: sort_rows(stream_pairs)?,
        })
    }
}
