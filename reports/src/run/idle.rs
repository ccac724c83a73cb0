//! Where each rank's GPU time goes (`aorta breakdown`): compute, non-compute and idle as
//! shares of the rank's window, idle split into host-wait, kernel-wait and other, stacked per
//! rank, with the numbers in ms beneath.

use std::path::Path;

use aorta_transform::idle::breakdown::{self, Row, KERNEL_WAIT_NS};
use aorta_transform::idle::{By, Input, Key};
use plotly::common::Marker;
use plotly::layout::{Axis, BarMode, Margin};
use plotly::{Bar, Plot};

use super::charts::category_axis;
use super::data::RunData;
use crate::error::ReportError;
use crate::fmt;
use crate::page::Page;

/// Up to this many bars, the two charts share the page's width.
const SIDE_BY_SIDE: usize = 12;

/// The stacked parts: name, color, value of a row.
type Part = (&'static str, &'static str, fn(&Row) -> i64);

const PARTS: [Part; 5] = [
    ("compute", "#2ca02c", |r| r.compute_ns),
    ("non-compute (comm, memcpy/memset only)", "#ff7f0e", |r| {
        r.non_compute_ns
    }),
    ("idle: host-wait", "#d62728", |r| r.idle.host_wait_ns),
    ("idle: kernel-wait", "#9467bd", |r| r.idle.kernel_wait_ns),
    ("idle: other", "#7f7f7f", |r| r.idle.other_ns),
];

/// The breakdown of every reported rank with a window (`aorta breakdown`'s rows), read once
/// for the chart and the headline.
pub(crate) fn rows(root: &Path, d: &RunData) -> Result<Vec<(Key, Row)>, ReportError> {
    let input = Input::load(root, &d.runs)?;
    Ok(breakdown::rows(&input, By::Rank, KERNEL_WAIT_NS)
        .into_iter()
        .filter(|(k, r)| d.ranks.contains(&k.rank) && r.window_ns > 0)
        .collect())
}

/// Idle as a share of the window, in percent (the table's `idle_%`).
pub(crate) fn idle_pct(r: &Row) -> f64 {
    100.0 * r.idle_ns as f64 / r.window_ns as f64
}

/// The chart and its table, one bar per reported rank.
pub(crate) fn chart(page: &mut Page, rows: &[(Key, Row)]) {
    if rows.is_empty() {
        return;
    }
    page.section_id(
        "Compute, non-compute and idle per rank",
        super::headline::IDLE,
    );
    page.note(&format!(
        "As Holistic Trace Analysis's temporal breakdown, over each rank's window (first GPU \
         activity's start to the last one's end, all streams): compute = the time a gemm, \
         attention or other compute kernel runs; non-compute = busy without compute (comm, \
         memcpy, memset); idle = nothing runs. Idle is split gap by gap: host-wait when the \
         activity ending the gap was launched after the gap began (the CPU had queued \
         nothing), kernel-wait when it was queued and the gap is under {} (HTA's default \
         as it applies it), other when it was queued but waited longer (an event, another \
         stream) or its launch is unknown. Per step and per stream: `aorta breakdown --by step --streams`.",
        breakdown::threshold_text(KERNEL_WAIT_NS)
    ));
    let runs = rows.iter().any(|(k, _)| k.run != rows[0].0.run);
    let x: Vec<String> = rows
        .iter()
        .map(|(k, _)| match runs {
            true => format!("{} rank {}", k.run, k.rank),
            false => format!("rank {}", k.rank),
        })
        .collect();
    let share = |r: &Row, v: i64| 100.0 * v as f64 / r.window_ns as f64;
    let shares = stacked(&x, rows, &PARTS, share, "% of the window");
    let ms = |_: &Row, v: i64| v as f64 / 1e6;
    let mut plots = vec![shares];
    if rows.iter().any(|(_, r)| r.idle_ns > 0) {
        plots.push(stacked(&x, rows, &PARTS[2..], ms, "idle (ms)"));
    }
    if rows.len() > SIDE_BY_SIDE {
        // Many ranks or runs: each chart the page's width, so the labels have room.
        for p in &mut plots {
            page.plot(p);
        }
    } else {
        page.plot_row(&mut plots);
    }
    page.table(&HEADER, &rows.iter().map(cells).collect::<Vec<_>>());
}

/// One stacked bar per row of `parts`, each value through `y`.
fn stacked(
    x: &[String],
    rows: &[(Key, Row)],
    parts: &[Part],
    y: impl Fn(&Row, i64) -> f64,
    title: &str,
) -> Plot {
    let mut plot = Plot::new();
    for (name, color, value) in parts {
        let v: Vec<f64> = rows.iter().map(|(_, r)| y(r, value(r))).collect();
        plot.add_trace(
            Bar::new(x.to_vec(), v)
                .name(*name)
                .marker(Marker::new().color(*color)),
        );
    }
    let (legend, top) = crate::page::legend_on_top(parts.len());
    plot.set_layout(
        crate::page::layout(360 + top)
            .legend(legend)
            .margin(Margin::new().top(top).bottom(60).left(70).right(30))
            .bar_mode(BarMode::Stack)
            .x_axis(category_axis(x.len()))
            .y_axis(Axis::new().title(title)),
    );
    plot
}

const HEADER: [&str; 11] = [
    "run",
    "rank",
    "window",
    "compute",
    "non_compute",
    "idle",
    "idle_%",
    "host_wait",
    "kernel_wait",
    "other_idle",
    "gaps",
];

fn cells((k, r): &(Key, Row)) -> Vec<String> {
    vec![
        k.run.clone(),
        k.rank.to_string(),
        fmt::ms_ns(r.window_ns),
        fmt::ms_ns(r.compute_ns),
        fmt::ms_ns(r.non_compute_ns),
        fmt::ms_ns(r.idle_ns),
        fmt::pct(idle_pct(r)),
        fmt::ms_ns(r.idle.host_wait_ns),
        fmt::ms_ns(r.idle.kernel_wait_ns),
        fmt::ms_ns(r.idle.other_ns),
        r.idle.gaps.to_string(),
    ]
}
