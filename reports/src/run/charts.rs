//! The per-step and per-collective charts of the run report, each with its table of the same
//! numbers formatted as `aorta overlap` prints them.

use std::collections::BTreeMap;

use plotly::common::{AxisSide, Marker, Mode};
use plotly::layout::{Axis, BarMode, Margin};
use plotly::{Bar, Plot, Scatter};
use serde::Serialize;

use super::data::{CategoryRow, CollectiveRow, StepKey, StepRow};
pub(crate) use super::multiples::{per_run, small_title, SMALL_MULTIPLES_OVER};
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
pub(crate) struct Many {
    runs: bool,
    ranks: bool,
}

impl Many {
    pub(crate) fn of<'a>(keys: impl Iterator<Item = (&'a str, i64)> + Clone) -> Many {
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
    pub(crate) fn label(self, run: &str, rank: i64, rest: &str) -> String {
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

/// Colors of per-rank marker series, distinct from the bars' category colors.
pub(crate) const SERIES_COLORS: [&str; 8] = [
    "#111111", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4",
];

/// x label of a step row: `step N`, prefixed by run and rank when the page shows several.
/// Activity outside every step never reaches the step tables, so a null step is a capture
/// without steps: the whole capture.
pub(crate) fn step_label(run: &str, rank: i64, step: Option<i64>, many: Many) -> String {
    let s = step.map_or("whole capture".into(), |s| format!("step {s}"));
    many.label(run, rank, &s)
}

fn ms(ns: Option<i64>) -> Option<f64> {
    ns.map(|n| n as f64 / 1e6)
}

/// Exposed comm and compute∩comm per step (stacked: together the comm time) and
/// comm_hidden_pct (markers, one series per run and rank, right axis); trace steps and JSONL
/// iterations get a chart each, since a log's "step" is not a trace's. The table gives the
/// same numbers as `aorta overlap`.
pub(crate) fn overlap_per_step(page: &mut Page, rows: &[StepRow]) {
    page.section_id("Overlap per step", super::headline::OVERLAP);
    page.note(
        "exposed comm = communication time when no compute kernel runs (what overlap failed to \
         hide); compute∩comm = communication time hidden under compute; stacked, they make the \
         comm time (the union over all streams). comm_hidden_pct = 100 × compute∩comm / comm, \
         right axis, one marker per rank and step. tp_overlap_ratio (gemm∩comm / min(gemm, \
         comm)) saturates at 1 while most of a step can be exposed, so it is only in the table.",
    );
    if rows.is_empty() {
        page.note("No step rows: nothing ran on a GPU and no JSONL log was read.");
        return;
    }
    for (source, what) in [("trace", "trace steps"), ("jsonl", "JSONL iterations")] {
        let of: Vec<&StepRow> = rows.iter().filter(|r| r.source == source).collect();
        if of.is_empty() {
            continue;
        }
        if of.iter().all(|r| r.comm_ns.unwrap_or(0) == 0) {
            if of
                .iter()
                .any(|r| r.compute_comm_overlap_ns.unwrap_or(0) > 0)
            {
                // The Python tool's logs: compute∩comm per iteration, no comm union.
                page.note(&format!(
                    "The {what}: compute∩comm only. These logs give the communication time \
                     hidden under compute but not the communication time itself (no union of \
                     comm), so exposed comm and comm_hidden_pct are missing; the table's \
                     `-` cells are those."
                ));
                per_run(
                    page,
                    &of,
                    |r| &r.run,
                    |r| r.compute_comm_overlap_ns.unwrap_or(0) > 0,
                    hidden_only_chart,
                );
            } else {
                page.note(&format!(
                    "No overlap chart for the {what}: no communication time in any of them."
                ));
            }
            continue;
        }
        page.note(&format!("The {what}: comm time, exposed and hidden."));
        per_run(
            page,
            &of,
            |r| &r.run,
            |r| r.comm_ns.unwrap_or(0) > 0,
            overlap_chart,
        );
    }
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

/// compute∩comm per step, for logs without a comm union.
fn hidden_only_chart(rows: &[&StepRow], title: Option<&str>) -> Plot {
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let x: Vec<String> = rows
        .iter()
        .map(|r| step_label(&r.run, r.rank, r.step, many))
        .collect();
    let mut plot = Plot::new();
    plot.add_trace(
        Bar::new(
            x.clone(),
            rows.iter().map(|r| ms(r.compute_comm_overlap_ns)).collect(),
        )
        .name("compute∩comm")
        .marker(Marker::new().color("#2ca02c")),
    );
    let mut layout = crate::page::layout(360)
        .x_axis(category_axis(x.len()))
        .y_axis(Axis::new().title("ms"));
    if let Some(t) = title {
        layout = layout
            .height(320)
            .margin(Margin::new().top(40).bottom(60).left(60).right(20))
            .title(small_title(t));
    }
    plot.set_layout(layout);
    plot
}

fn overlap_chart(rows: &[&StepRow], title: Option<&str>) -> Plot {
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let x: Vec<String> = rows
        .iter()
        .map(|r| step_label(&r.run, r.rank, r.step, many))
        .collect();
    let bar = |name: &str, v: Vec<Option<f64>>, color: &str| {
        Bar::new(x.clone(), v)
            .name(name)
            .marker(Marker::new().color(color.to_string()))
    };
    let mut plot = Plot::new();
    plot.add_trace(bar(
        "exposed comm",
        rows.iter().map(|r| ms(r.exposed_comm_ns)).collect(),
        "#d62728",
    ));
    plot.add_trace(bar(
        "compute∩comm",
        rows.iter().map(|r| ms(r.compute_comm_overlap_ns)).collect(),
        "#2ca02c",
    ));
    let points = rows
        .iter()
        .zip(&x)
        .map(|(r, l)| (r.run.as_str(), r.rank, l.clone(), r.comm_hidden_pct))
        .collect();
    with_share(
        &mut plot,
        points,
        many,
        "comm_hidden_pct",
        400,
        x.len(),
        title,
    );
    plot
}

/// Stacked bars (already in `plot`) with a share in percent on a right axis (0–105 %), drawn as
/// one marker series per run and rank (a line would join unrelated ranks and runs): the layout
/// of the comm and copy overlap charts. `points`: (run, rank, x label, percent), in x order.
pub(crate) fn with_share(
    plot: &mut Plot,
    points: Vec<(&str, i64, String, Option<f64>)>,
    many: Many,
    share: &str,
    height: usize,
    x_len: usize,
    title: Option<&str>,
) {
    let mut series: Vec<(&str, i64)> = points.iter().map(|p| (p.0, p.1)).collect();
    series.sort_unstable();
    series.dedup();
    let (legend, top) = crate::page::legend_on_top(series.len() + 2);
    // A small multiple: shorter, its title above the legend.
    let (height, top) = match title {
        Some(_) => (height * 3 / 4, top + 24),
        None => (height, top),
    };
    for (i, (run, rank)) in series.into_iter().enumerate() {
        let (sx, sy): (Vec<String>, Vec<Option<f64>>) = points
            .iter()
            .filter(|p| p.0 == run && p.1 == rank)
            .map(|p| (p.2.clone(), p.3))
            .unzip();
        plot.add_trace(
            Scatter::new(sx, sy)
                .name(many.label(run, rank, share).trim_end())
                .mode(Mode::Markers)
                .marker(
                    Marker::new()
                        .size(9)
                        .color(SERIES_COLORS[i % SERIES_COLORS.len()]),
                )
                .y_axis("y2"),
        );
    }
    let mut layout = crate::page::layout(height + top);
    if let Some(t) = title {
        layout = layout.title(small_title(t));
    }
    plot.set_layout(
        layout
            .legend(legend)
            .margin(Margin::new().top(top).bottom(60).left(70).right(70))
            .bar_mode(BarMode::Stack)
            .x_axis(category_axis(x_len))
            .y_axis(Axis::new().title("ms"))
            .y_axis2(
                Axis::new()
                    .title(format!("{share} (%)"))
                    .overlaying("y")
                    .side(AxisSide::Right)
                    .range(vec![0.0, 105.0]),
            ),
    );
}

/// An x axis of `n` step labels: slanted, with the margin they need, when there are many.
pub(crate) fn category_axis(n: usize) -> Axis {
    let a = Axis::new().auto_margin(true);
    if n > 12 {
        a.tick_angle(-45.0)
    } else {
        a
    }
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

/// GPU time per category per step, stacked: the sum of the activities' durations, so
/// overlapping kernels count twice and a stack can exceed the step's window.
pub(crate) fn categories_per_step(page: &mut Page, rows: &[CategoryRow]) {
    page.section("GPU time per category per step");
    page.note(
        "Sum of kernel (and memcpy/memset) durations per category in each step, all streams \
         together: kernels running at the same time both count, so a bar can be taller than \
         the step.",
    );
    if rows.is_empty() {
        page.note("No GPU activities in the reported ranks: no chart.");
        return;
    }
    let mut steps: Vec<StepKey> = rows
        .iter()
        .map(|r| (r.run.clone(), r.rank, r.step))
        .collect();
    steps.dedup();
    let mut by_cat: BTreeMap<&str, BTreeMap<StepKey, i64>> = BTreeMap::new();
    for r in rows {
        by_cat
            .entry(r.category.as_str())
            .or_default()
            .insert((r.run.clone(), r.rank, r.step), r.gpu_ns);
    }
    let series: Vec<StepSeries> = by_cat
        .iter()
        .map(|(cat, vals)| (*cat, category_color(cat), vals))
        .collect();
    stacked_per_step(
        page,
        &steps,
        &series,
        "GPU time (ms, sum of durations)",
        None,
    );
}

/// The stacked bars of `steps`: one chart, titled `title` (one run of small multiples), its
/// legend above the plot when `legend`.
fn stacked_bars(
    steps: &[StepKey],
    series: &[StepSeries],
    y_title: &str,
    title: Option<&str>,
    legend: bool,
) -> Plot {
    let many = Many::of(steps.iter().map(|k| (k.0.as_str(), k.1)));
    let x: Vec<String> = steps
        .iter()
        .map(|(run, rank, step)| step_label(run, *rank, *step, many))
        .collect();
    let mut plot = Plot::new();
    for (name, color, vals) in series {
        let y: Vec<f64> = steps
            .iter()
            .map(|k| vals.get(k).copied().unwrap_or(0) as f64 / 1e6)
            .collect();
        plot.add_trace(
            Bar::new(x.clone(), y)
                .name(*name)
                .show_legend(legend)
                .marker(Marker::new().color(color.to_string())),
        );
    }
    let mut layout = match title {
        None => crate::page::layout(420),
        Some(t) => {
            let (l, top) = crate::page::legend_on_top(series.len());
            let top = if legend { top + 24 } else { 54 };
            crate::page::layout(300 + top)
                .legend(l)
                .margin(Margin::new().top(top).bottom(60).left(60).right(20))
                .title(small_title(t))
        }
    };
    layout = layout
        .bar_mode(BarMode::Stack)
        .x_axis(category_axis(x.len()))
        .y_axis(Axis::new().title(y_title));
    plot.set_layout(layout);
    plot
}

/// One stack of a per-step chart: its name, color, and ns per step.
pub(crate) type StepSeries<'a> = (&'a str, &'a str, &'a BTreeMap<StepKey, i64>);

/// A bar per step stacked by series (ms), then the table of the same numbers; `total` names
/// a last column with each row's sum.
pub(crate) fn stacked_per_step(
    page: &mut Page,
    steps: &[StepKey],
    series: &[StepSeries],
    y_title: &str,
    total: Option<&str>,
) {
    let mut runs: Vec<&str> = steps.iter().map(|k| k.0.as_str()).collect();
    runs.dedup();
    if runs.len() > 1 && steps.len() > SMALL_MULTIPLES_OVER {
        page.note(&format!(
            "One chart per run: {} bars of {} runs do not read on one axis. Each chart has its \
             own scale; the colors are the same in all, the legend is on the first.",
            steps.len(),
            runs.len()
        ));
        let mut plots: Vec<Plot> = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let mine: Vec<StepKey> = steps.iter().filter(|k| k.0 == *run).cloned().collect();
                stacked_bars(&mine, series, y_title, Some(run), i == 0)
            })
            .collect();
        page.plot_row(&mut plots);
    } else {
        page.plot(&mut stacked_bars(steps, series, y_title, None, true));
    }
    let mut header = vec!["run", "rank", "step"];
    header.extend(series.iter().map(|s| s.0));
    header.extend(total);
    let table: Vec<Vec<String>> = steps
        .iter()
        .map(|k| {
            let mut r = vec![
                k.0.clone(),
                k.1.to_string(),
                fmt::opt(k.2, |s| s.to_string()),
            ];
            r.extend(
                series
                    .iter()
                    .map(|s| fmt::opt(s.2.get(k).copied(), fmt::ms_ns)),
            );
            if total.is_some() {
                r.push(fmt::ms_ns(series.iter().filter_map(|s| s.2.get(k)).sum()));
            }
            r
        })
        .collect();
    page.table(&header, &table);
}

/// Comm and exposed comm side by side per rank and collective kind.
fn collectives_plot(rows: &[&CollectiveRow], title: Option<&str>) -> Plot {
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
    let mut layout = crate::page::layout(380);
    if let Some(t) = title {
        layout = layout
            .height(320)
            .margin(Margin::new().top(40).bottom(60).left(60).right(20))
            .title(small_title(t));
    }
    plot.set_layout(
        layout
            .bar_mode(BarMode::Group)
            .x_axis(category_axis(rows.len()))
            .y_axis(Axis::new().title("ms")),
    );
    plot
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
    let refs: Vec<&CollectiveRow> = rows.iter().collect();
    per_run(page, &refs, |r| &r.run, |r| r.comm_ns > 0, collectives_plot);
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
