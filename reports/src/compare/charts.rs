//! The compare page's charts: steps side by side, category bars with their spread, the
//! operator ratio chart and the collectives' bandwidths.

use std::collections::BTreeMap;

use aorta_transform::summary::{spread, Spread};
use plotly::common::{ErrorData, ErrorType, Marker};
use plotly::layout::{Axis, BarMode, Margin};
use plotly::{Bar, Plot};

use super::load::{Category, Collective, Operator, Step};
use super::ratio;
use crate::fmt;
use crate::page::Page;

pub(crate) const SIDES: [&str; 2] = ["reference", "candidate"];
const SIDE_COLORS: [&str; 2] = ["#7f7f7f", "#1f77b4"];
/// Operators drawn on the ratio chart.
pub(super) const TOP_OPERATORS: usize = 20;

/// One number of a step row.
type StepValue = fn(&Step) -> Option<f64>;

/// Per workload, its steps in order, each with a value.
type ByWorkload = BTreeMap<String, Vec<(Option<i64>, f64)>>;

/// (workload, step is null, step): null steps last.
type StepOf<'a> = (&'a str, bool, Option<i64>);

/// Per side, each workload's steps in order with the median over ranks of `value`.
fn per_step(steps: &[Step], side: &str, value: fn(&Step) -> Option<f64>) -> ByWorkload {
    let mut by: BTreeMap<StepOf, Vec<Option<f64>>> = BTreeMap::new();
    for s in steps.iter().filter(|s| s.side == side) {
        by.entry((s.workload.as_str(), s.step.is_none(), s.step))
            .or_default()
            .push(value(s));
    }
    let mut out = ByWorkload::new();
    for ((w, _, step), v) in by {
        if let Some(s) = spread(v) {
            out.entry(w.to_string()).or_default().push((step, s.median));
        }
    }
    out
}

/// The slots of a per-step chart: per workload (both sides' steps of one workload side by
/// side), the k-th step of each side; x labels and each side's values.
fn step_slots(sides: &[ByWorkload; 2]) -> StepSlots {
    let mut workloads: Vec<&String> = sides[0].keys().chain(sides[1].keys()).collect();
    workloads.sort();
    workloads.dedup();
    let prefix = workloads.len() > 1;
    let mut out = StepSlots::default();
    for w in workloads {
        let of = |i: usize| sides[i].get(w).map_or(&[][..], Vec::as_slice);
        let n = of(0).len().max(of(1).len());
        for k in 0..n {
            let num = |i: usize| of(i).get(k).and_then(|x| x.0);
            let show = |s: Option<i64>| s.map_or("-".into(), |s| s.to_string());
            let l = if num(0) == num(1) {
                format!("step {}", show(num(0)))
            } else {
                format!("#{} (ref {} / cand {})", k + 1, show(num(0)), show(num(1)))
            };
            out.x.push(if prefix { format!("{w} {l}") } else { l });
            for (i, y) in out.y.iter_mut().enumerate() {
                y.push(of(i).get(k).map(|x| x.1));
            }
        }
    }
    out
}

#[derive(Default)]
struct StepSlots {
    x: Vec<String>,
    y: [Vec<Option<f64>>; 2],
}

/// Step time and exposed comm, reference and candidate bars side by side: per workload, the
/// k-th step of each side (by step number) share a slot, since two runs rarely number steps
/// alike.
pub(crate) fn steps(page: &mut Page, steps: &[Step]) {
    page.section("Per step: reference vs candidate");
    page.note(
        "Per workload, the k-th step of each side, by step number; each bar is the median over \
         ranks. Exposed comm = communication time when no compute kernel runs.",
    );
    let charts: [(&str, StepValue); 2] = [
        ("step time (ms)", |s| s.step_ms),
        ("exposed comm (ms)", |s| s.exposed_comm_ms),
    ];
    let mut plots = Vec::new();
    for (title, value) in charts {
        let mut sides = SIDES.map(|side| per_step(steps, side, value));
        // One run per side pairs whatever the names (as compare pairs them): one workload.
        if sides.iter().all(|s| s.len() == 1) {
            sides = sides.map(|s| s.into_values().map(|v| (String::new(), v)).collect());
        }
        let slots = step_slots(&sides);
        if slots.y.iter().flatten().all(|v| v.unwrap_or(0.0) == 0.0) {
            // An all-zero chart gets plotly's default −1..1 axis: say why instead.
            page.note(&format!(
                "No {title} chart: {} on both sides.",
                if title.starts_with("exposed") {
                    "no exposed communication (no communication kernels, or all hidden)"
                } else {
                    "no step times"
                }
            ));
            continue;
        }
        let mut plot = Plot::new();
        for (i, side) in SIDES.iter().enumerate() {
            plot.add_trace(
                Bar::new(slots.x.clone(), slots.y[i].clone())
                    .name(*side)
                    .marker(Marker::new().color(SIDE_COLORS[i])),
            );
        }
        plot.set_layout(
            crate::page::layout(380)
                .title(title)
                .margin(Margin::new().top(50).bottom(50))
                .bar_mode(BarMode::Group)
                .x_axis(Axis::new().auto_margin(true))
                .y_axis(Axis::new().title("ms")),
        );
        plots.push(plot);
    }
    match plots.len() {
        0 => {}
        1 => page.plot(&mut plots[0]),
        _ => page.plot_row(&mut plots),
    }
}

/// Per pair's workload and category, each side's spread over rank-steps of the category's
/// GPU time (never pooled over workloads).
fn category_spreads(rows: &[Category]) -> BTreeMap<(String, String), [Option<Spread>; 2]> {
    let mut vals: BTreeMap<(String, String), [Vec<Option<f64>>; 2]> = BTreeMap::new();
    for r in rows {
        if let Some(i) = SIDES.iter().position(|s| *s == r.side) {
            let key = (r.workload.clone(), r.category.clone());
            vals.entry(key).or_default()[i].push(r.gpu_ms);
        }
    }
    vals.into_iter()
        .map(|(k, [a, b])| (k, [spread(a), spread(b)]))
        .collect()
}

/// `label` prefixed with the pair's workload when there are several pairs.
fn with_workload(several: bool, workload: &str, label: &str) -> String {
    if several {
        format!("{workload} · {label}")
    } else {
        label.to_string()
    }
}

/// GPU time per category (sum of kernel durations in a step): median per side, with a
/// p10–p90 whisker; one chart per pair (each on its own scale) when there are several.
pub(crate) fn categories(page: &mut Page, rows: &[Category]) {
    page.section("GPU time per category");
    page.note(
        "Per step, the sum of kernel durations of each category (all streams); bars are the \
         median over steps and ranks, whiskers p10–p90; with several pairs, one chart per pair.",
    );
    let s = category_spreads(rows);
    if s.is_empty() {
        page.note("No GPU activities on either side: no chart.");
        return;
    }
    let mut workloads: Vec<&str> = s.keys().map(|k| k.0.as_str()).collect();
    workloads.dedup();
    let title = |w: &str| (workloads.len() > 1).then(|| w.to_string());
    let mut plots: Vec<Plot> = workloads
        .iter()
        .map(|w| category_plot(&s, w, title(w)))
        .collect();
    match plots.as_mut_slice() {
        [one] => page.plot(one),
        all => page.plot_row(all),
    }
}

/// One pair's category bars.
fn category_plot(
    s: &BTreeMap<(String, String), [Option<Spread>; 2]>,
    workload: &str,
    title: Option<String>,
) -> Plot {
    let of: Vec<(&String, &[Option<Spread>; 2])> = s
        .iter()
        .filter(|(k, _)| k.0 == workload)
        .map(|(k, v)| (&k.1, v))
        .collect();
    let x: Vec<String> = of.iter().map(|(c, _)| c.to_string()).collect();
    let mut plot = Plot::new();
    for (i, side) in SIDES.iter().enumerate() {
        let get = |f: fn(&Spread) -> f64| -> Vec<f64> {
            of.iter()
                .map(|(_, v)| v[i].as_ref().map_or(0.0, f))
                .collect()
        };
        let (med, p10, p90) = (get(|s| s.median), get(|s| s.p10), get(|s| s.p90));
        let up: Vec<f64> = p90.iter().zip(&med).map(|(a, b)| a - b).collect();
        let down: Vec<f64> = med.iter().zip(&p10).map(|(a, b)| a - b).collect();
        plot.add_trace(
            Bar::new(x.clone(), med)
                .name(*side)
                .marker(Marker::new().color(SIDE_COLORS[i]))
                .error_y(ErrorData::new(ErrorType::Data).array(up).array_minus(down)),
        );
    }
    let mut layout = crate::page::layout(380)
        .bar_mode(BarMode::Group)
        .y_axis(Axis::new().title("ms per step"));
    if let Some(t) = title {
        layout = layout.title(t.as_str()).margin(Margin::new().top(50));
    }
    plot.set_layout(layout);
    plot
}

/// The `TOP_OPERATORS` operators with the largest |candidate − reference|.
pub(crate) fn top_operators<'a>(ops: &[&'a Operator]) -> Vec<&'a Operator> {
    let mut v: Vec<&Operator> = ops.to_vec();
    v.sort_by(|a, b| b.diff_ms.abs().total_cmp(&a.diff_ms.abs()));
    v.truncate(TOP_OPERATORS);
    v
}

fn op_label(rank: usize, o: &Operator) -> String {
    ratio::short(&format!("{}. {} {}", rank + 1, o.op, o.input_dims))
}

fn op_hover(o: &Operator) -> String {
    format!(
        "{} {} {}<br>reference {} ms, candidate {} ms, ratio {}",
        o.op,
        o.input_dims,
        o.input_types,
        fmt::opt(o.reference_ms, fmt::ms),
        fmt::opt(o.candidate_ms, fmt::ms),
        fmt::opt(o.ratio, fmt::ratio),
    )
}

/// Ratio candidate/reference of the top operators on a log axis centred at 1; operators
/// only one side ran sit at the axis edge under their side's name. With several pairs, a
/// chart and table per pair: an operator's time belongs to its pair's runs, and one large
/// model's operators would crowd out a small one's.
pub(crate) fn operators(page: &mut Page, ops: &[Operator]) {
    page.section("Operators: candidate / reference");
    page.note(&format!(
        "GPU time per CPU operator and input shapes (kernel names differ between vendors, \
         operators and shapes do not). The {TOP_OPERATORS} operators with the largest \
         |candidate − reference|, as candidate / reference on a log axis centred at 1 (right of \
         1: the candidate is slower). Operators seen on one side only sit at the edge of the \
         axis. Hover a point for the whole operator and shapes. With several pairs, each pair \
         has its own chart and table."
    ));
    if ops.is_empty() {
        page.note("No operators in compare_operators: no chart.");
        return;
    }
    let mut workloads: Vec<&str> = ops.iter().map(|o| o.workload.as_str()).collect();
    workloads.dedup();
    for w in &workloads {
        if workloads.len() > 1 {
            page.section(&format!("Operators of {w}: candidate / reference"));
        }
        let of: Vec<&Operator> = ops.iter().filter(|o| o.workload == *w).collect();
        operators_of_pair(page, &top_operators(&of));
    }
}

/// One pair's operator chart and table.
fn operators_of_pair(page: &mut Page, top: &[&Operator]) {
    let mut points = Vec::new();
    let mut one_sided = Vec::new();
    for (i, o) in top.iter().enumerate() {
        let (label, hover) = (op_label(i, o), op_hover(o));
        match (o.status.as_str(), o.ratio) {
            ("matched", Some(r)) if r > 0.0 => points.push(ratio::Point {
                label,
                hover,
                ratio: r,
                whisker: None,
            }),
            (st, _) => one_sided.push(ratio::OneSided {
                label,
                hover,
                side: if st == "candidate_only" {
                    "candidate only"
                } else {
                    "reference only"
                },
            }),
        }
    }
    page.plot_json(ratio::chart("matched", SIDE_COLORS[1], &points, &one_sided));
    page.table(
        &[
            "#",
            "op",
            "input_dims",
            "input_types",
            "reference ms",
            "candidate ms",
            "calls",
            "ratio",
            "diff ms",
            "TFLOP/s",
            "% of own peak",
            "status",
        ],
        &top.iter()
            .enumerate()
            .map(|(i, o)| operator_cells(i, o))
            .collect::<Vec<_>>(),
    );
}

fn operator_cells(i: usize, o: &Operator) -> Vec<String> {
    let calls = |c: Option<i64>| c.map_or("-".into(), |c| c.to_string());
    vec![
        (i + 1).to_string(),
        o.op.clone(),
        o.input_dims.clone(),
        o.input_types.clone(),
        fmt::opt(o.reference_ms, fmt::ms),
        fmt::opt(o.candidate_ms, fmt::ms),
        format!(
            "{} / {}",
            calls(o.reference_calls),
            calls(o.candidate_calls)
        ),
        fmt::opt(o.ratio, fmt::ratio),
        fmt::ms(o.diff_ms),
        pair(o.tflops, fmt::tflops),
        pair(o.peak_pct, fmt::pct),
        o.status.clone(),
    ]
}

/// `reference / candidate`, `-` for a null side, one `-` when both are.
fn pair(v: [Option<f64>; 2], f: fn(f64) -> String) -> String {
    match v {
        [None, None] => "-".into(),
        [a, b] => format!("{} / {}", fmt::opt(a, f), fmt::opt(b, f)),
    }
}

/// (workload, kind, bytes, dtype, group size).
type CollKey = (String, String, Option<i64>, Option<String>, Option<i64>);

fn coll_label(k: &CollKey, several: bool) -> String {
    let opt = |v: &Option<i64>| v.map_or("-".into(), |v| v.to_string());
    let label = format!(
        "{} {} {} x{}",
        k.1,
        k.2.map_or("-".into(), fmt::bytes),
        k.3.as_deref().unwrap_or("-"),
        opt(&k.4)
    );
    with_workload(several, &k.0, &label)
}

/// Bus bandwidth per (kind, size, dtype, group size), both sides, and the table of time and
/// bandwidths.
pub(crate) fn collectives(page: &mut Page, rows: &[Collective]) {
    page.section("Collectives");
    page.note(
        "Per collective kind, message size, dtype and group size: mean transfer time (the \
         kernel time after the last rank arrived, where the collective was matched across \
         ranks: waiting for a late rank is not the library's doing), algorithm bandwidth = bytes \
         / time, bus bandwidth = algbw × the NCCL factor (all_reduce 2(n−1)/n, all_gather and \
         reduce_scatter (n−1)/n), and the median skew (last − first arrival) across ranks. \
         With several pairs, each row is one pair's.",
    );
    let mut by: BTreeMap<CollKey, [Option<&Collective>; 2]> = BTreeMap::new();
    for r in rows {
        if let Some(i) = SIDES.iter().position(|s| *s == r.side) {
            let k = (
                r.workload.clone(),
                r.comm_op.clone(),
                r.bytes,
                r.dtype.clone(),
                r.group_size,
            );
            by.entry(k).or_default()[i] = Some(r);
        }
    }
    if by.is_empty() {
        page.note("No collectives in compare_collectives.");
        return;
    }
    let several = rows.iter().any(|r| r.workload != rows[0].workload);
    let x: Vec<String> = by.keys().map(|k| coll_label(k, several)).collect();
    let mut plot = Plot::new();
    for (i, side) in SIDES.iter().enumerate() {
        let y: Vec<Option<f64>> = by
            .values()
            .map(|v| v[i].and_then(|c| c.busbw_gbps))
            .collect();
        plot.add_trace(
            Bar::new(x.clone(), y)
                .name(*side)
                .marker(Marker::new().color(SIDE_COLORS[i])),
        );
    }
    plot.set_layout(
        crate::page::layout(380)
            .bar_mode(BarMode::Group)
            .y_axis(Axis::new().title("bus bandwidth (GB/s)")),
    );
    page.plot(&mut plot);
    let table: Vec<Vec<String>> = by
        .iter()
        .map(|(k, v)| {
            let mut r = vec![coll_label(k, several)];
            for c in v {
                r.push(
                    c.and_then(|c| c.count)
                        .map_or("-".into(), |n| n.to_string()),
                );
                r.push(fmt::opt(c.and_then(|c| c.mean_ms), fmt::ms));
                r.push(fmt::opt(c.and_then(|c| c.skew_ms), fmt::ms));
                r.push(fmt::opt(c.and_then(|c| c.algbw_gbps), fmt::gbps));
                r.push(fmt::opt(c.and_then(|c| c.busbw_gbps), fmt::gbps));
            }
            let mean = |i: usize| v[i].and_then(|c| c.mean_ms);
            let ratio = match (mean(0), mean(1)) {
                (Some(a), Some(b)) if a != 0.0 => Some(b / a),
                _ => None,
            };
            r.push(fmt::opt(ratio, fmt::ratio));
            r
        })
        .collect();
    page.table(
        &[
            "collective",
            "ref count",
            "ref transfer ms",
            "ref skew ms",
            "ref algbw GB/s",
            "ref busbw GB/s",
            "cand count",
            "cand transfer ms",
            "cand skew ms",
            "cand algbw GB/s",
            "cand busbw GB/s",
            "time ratio",
        ],
        &table,
    );
}
