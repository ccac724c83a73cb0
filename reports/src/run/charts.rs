//! The per-step and per-collective charts of the run report, each with its table of the same
//! numbers formatted as `aorta overlap` prints them.

use std::collections::BTreeMap;

use plotly::common::{AxisSide, Marker, Mode};
use plotly::layout::{Axis, BarMode, Margin};
use plotly::{Bar, Plot, Scatter};
use serde::Serialize;

use super::data::{CategoryRow, CollectiveRow, StepRow};
use crate::fmt;
use crate::page::{category_color, Page};

/// A plotly.js trace written as JSON, for attributes the typed traces lack.
#[derive(Clone, Serialize)]
#[serde(transparent)]
pub(crate) struct RawTrace(serde_json::Value);

impl RawTrace {
    pub(super) fn new(v: serde_json::Value) -> Box<RawTrace> {
        Box::new(RawTrace(v))
    }
}

impl plotly::Trace for RawTrace {
    fn to_json(&self) -> String {
        self.0.to_string()
    }
}

/// Which parts a chart label needs: the run when the page has several, the rank likewise.
#[derive(Clone, Copy)]
struct Many {
    runs: bool,
    ranks: bool,
}

impl Many {
    fn of<'a>(keys: impl Iterator<Item = (&'a str, i64)> + Clone) -> Many {
        let distinct = |n: usize| n > 1;
        let mut runs: Vec<&str> = keys.clone().map(|k| k.0).collect();
        runs.sort_unstable();
        runs.dedup();
        let mut ranks: Vec<i64> = keys.map(|k| k.1).collect();
        ranks.sort_unstable();
        ranks.dedup();
        Many {
            runs: distinct(runs.len()),
            ranks: distinct(ranks.len()),
        }
    }

    /// `[run ][rN ]rest`.
    fn label(self, run: &str, rank: i64, rest: &str) -> String {
        let mut l = String::new();
        if self.runs {
            l.push_str(run);
            l.push(' ');
        }
        if self.ranks {
            l.push_str(&format!("r{rank} "));
        }
        l + rest
    }
}

/// x label of a step row: `step N`, prefixed by run and rank when the page shows several.
fn step_label(run: &str, rank: i64, step: Option<i64>, many: Many) -> String {
    let s = step.map_or("step -".into(), |s| format!("step {s}"));
    many.label(run, rank, &s)
}

fn ms(ns: Option<i64>) -> Option<f64> {
    ns.map(|n| n as f64 / 1e6)
}

/// Comm, exposed comm and compute∩comm per step (bars, ms) and tp_overlap_ratio (line, right
/// axis); the table gives the same numbers as `aorta overlap`.
pub(crate) fn overlap_per_step(page: &mut Page, rows: &[StepRow]) {
    page.section("Overlap per step");
    page.note(
        "comm = time at least one communication kernel runs (union over all streams); exposed \
         comm = comm time when no compute kernel runs; compute∩comm = comm time hidden under \
         compute. tp_overlap_ratio = gemm∩comm / min(gemm, comm), right axis. Steps from JSONL logs \
         are marked (jsonl).",
    );
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let x: Vec<String> = rows
        .iter()
        .map(|r| {
            let l = step_label(&r.run, r.rank, r.step, many);
            if r.source == "trace" {
                l
            } else {
                format!("{l} ({})", r.source)
            }
        })
        .collect();
    let bar = |name: &str, v: Vec<Option<f64>>, color: &str| {
        Bar::new(x.clone(), v)
            .name(name)
            .marker(Marker::new().color(color.to_string()))
    };
    let mut plot = Plot::new();
    plot.add_trace(bar(
        "comm",
        rows.iter().map(|r| ms(r.comm_ns)).collect(),
        "#d62728",
    ));
    plot.add_trace(bar(
        "exposed comm",
        rows.iter().map(|r| ms(r.exposed_comm_ns)).collect(),
        "#ff9896",
    ));
    plot.add_trace(bar(
        "compute∩comm",
        rows.iter().map(|r| ms(r.compute_comm_overlap_ns)).collect(),
        "#2ca02c",
    ));
    let ratio: Vec<Option<f64>> = rows.iter().map(|r| r.tp_overlap_ratio).collect();
    plot.add_trace(
        Scatter::new(x.clone(), ratio)
            .name("tp_overlap_ratio")
            .mode(Mode::LinesMarkers)
            .y_axis("y2"),
    );
    plot.set_layout(
        crate::page::layout(420)
            .margin(Margin::new().top(30).bottom(60).left(70).right(70))
            .bar_mode(BarMode::Group)
            .y_axis(Axis::new().title("ms"))
            .y_axis2(
                Axis::new()
                    .title("tp_overlap_ratio")
                    .overlaying("y")
                    .side(AxisSide::Right)
                    .range(vec![0.0, 1.05]),
            ),
    );
    page.plot(&mut plot);
    page.table(
        &[
            "run",
            "rank",
            "source",
            "step",
            "window",
            "comm",
            "exposed_comm",
            "compute∩comm",
            "gemm∩comm",
            "tp_overlap_ratio",
            "comm_hidden_pct",
            "compute_overlap_ratio",
        ],
        &rows.iter().map(step_cells).collect::<Vec<_>>(),
    );
}

fn step_cells(r: &StepRow) -> Vec<String> {
    vec![
        r.run.clone(),
        r.rank.to_string(),
        r.source.clone(),
        fmt::opt(r.step, |s| s.to_string()),
        fmt::opt(r.window_ns, fmt::ms_ns),
        fmt::opt(r.comm_ns, fmt::ms_ns),
        fmt::opt(r.exposed_comm_ns, fmt::ms_ns),
        fmt::opt(r.compute_comm_overlap_ns, fmt::ms_ns),
        fmt::opt(r.gemm_comm_overlap_ns, fmt::ms_ns),
        fmt::opt(r.tp_overlap_ratio, fmt::ratio),
        fmt::opt(r.comm_hidden_pct, fmt::pct),
        fmt::opt(r.compute_overlap_ratio, fmt::ratio),
    ]
}

/// (run, rank, step).
type StepKey = (String, i64, Option<i64>);

/// GPU time per category per step, stacked: the sum of the activities' durations, so
/// overlapping kernels count twice and a stack can exceed the step's window.
pub(crate) fn categories_per_step(page: &mut Page, rows: &[CategoryRow]) {
    page.section("GPU time per category per step");
    page.note(
        "Sum of kernel (and memcpy/memset) durations per category in each step, all streams \
         together: kernels running at the same time both count, so a bar can be taller than \
         the step.",
    );
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let mut steps: Vec<StepKey> = rows
        .iter()
        .map(|r| (r.run.clone(), r.rank, r.step))
        .collect();
    steps.dedup();
    let x: Vec<String> = steps
        .iter()
        .map(|(run, rank, step)| step_label(run, *rank, *step, many))
        .collect();
    let mut by_cat: BTreeMap<&str, BTreeMap<StepKey, i64>> = BTreeMap::new();
    for r in rows {
        by_cat
            .entry(r.category.as_str())
            .or_default()
            .insert((r.run.clone(), r.rank, r.step), r.gpu_ns);
    }
    let mut plot = Plot::new();
    for (cat, vals) in &by_cat {
        let y: Vec<f64> = steps
            .iter()
            .map(|k| vals.get(k).copied().unwrap_or(0) as f64 / 1e6)
            .collect();
        plot.add_trace(
            Bar::new(x.clone(), y)
                .name(*cat)
                .marker(Marker::new().color(category_color(cat).to_string())),
        );
    }
    plot.set_layout(
        crate::page::layout(420)
            .bar_mode(BarMode::Stack)
            .y_axis(Axis::new().title("GPU time (ms, sum of durations)")),
    );
    page.plot(&mut plot);
    let cats: Vec<&str> = by_cat.keys().copied().collect();
    let mut header = vec!["run", "rank", "step"];
    header.extend(&cats);
    let table: Vec<Vec<String>> = steps
        .iter()
        .map(|k| {
            let mut r = vec![
                k.0.clone(),
                k.1.to_string(),
                fmt::opt(k.2, |s| s.to_string()),
            ];
            r.extend(
                cats.iter()
                    .map(|c| fmt::opt(by_cat[c].get(k).copied(), fmt::ms_ns)),
            );
            r
        })
        .collect();
    page.table(&header, &table);
}

/// Comm and exposed comm per collective kind over each rank's whole window.
pub(crate) fn collectives(page: &mut Page, rows: &[CollectiveRow]) {
    page.section("Exposed communication per collective kind");
    page.note(
        "Per collective kind, over each rank's whole window: comm = union of that kind's kernels; \
         exposed = the part of it when no compute kernel runs.",
    );
    if rows.is_empty() {
        page.note("No communication kernels in the reported ranks.");
        return;
    }
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let x: Vec<String> = rows
        .iter()
        .map(|r| many.label(&r.run, r.rank, &r.comm_op))
        .collect();
    let mut plot = Plot::new();
    let comm: Vec<f64> = rows.iter().map(|r| r.comm_ns as f64 / 1e6).collect();
    let exposed: Vec<f64> = rows
        .iter()
        .map(|r| r.exposed_comm_ns as f64 / 1e6)
        .collect();
    plot.add_trace(
        Bar::new(x.clone(), comm)
            .name("comm")
            .marker(Marker::new().color("#d62728")),
    );
    plot.add_trace(
        Bar::new(x, exposed)
            .name("exposed comm")
            .marker(Marker::new().color("#ff9896")),
    );
    plot.set_layout(
        crate::page::layout(380)
            .bar_mode(BarMode::Group)
            .y_axis(Axis::new().title("ms")),
    );
    page.plot(&mut plot);
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.run.clone(),
                r.rank.to_string(),
                r.comm_op.clone(),
                r.count.to_string(),
                fmt::ms_ns(r.comm_ns),
                fmt::ms_ns(r.exposed_comm_ns),
            ]
        })
        .collect();
    page.table(
        &["run", "rank", "comm_op", "kernels", "comm", "exposed_comm"],
        &table,
    );
}
