//! The memory section of the run report: allocated and reserved bytes over time per device,
//! from the allocator events (`memory` table), with the step boundaries, and the peaks per
//! step under it. Nothing at all when no reported run has memory events.

use std::collections::BTreeMap;
use std::path::Path;

use aorta_transform::memory::{self, By};
use polars::prelude::DataFrame;
use serde_json::{json, Value};

use crate::error::ReportError;
use crate::fmt;
use crate::page::Page;

/// Devices drawn per run (each is two lines): beyond, the table still lists them all.
const MAX_DEVICES: usize = 8;

/// One device's series: ms since the run's first event, allocated and reserved GiB.
#[derive(Default)]
struct Series {
    x: Vec<f64>,
    allocated: Vec<Option<f64>>,
    reserved: Vec<Option<f64>>,
}

const GIB: f64 = (1u64 << 30) as f64;

pub(crate) fn chart(
    page: &mut Page,
    dataset: &Path,
    runs: &[String],
    rank: Option<i64>,
) -> Result<(), ReportError> {
    let mut timelines = Vec::new();
    for run in runs {
        let tl = memory::timeline(dataset, run)?;
        if tl.height() > 0 {
            timelines.push((run, tl));
        }
    }
    if timelines.is_empty() {
        return Ok(());
    }
    page.section("Device memory over time");
    page.note(
        "From the profiler's allocator events (profile_memory=True): after each allocation or \
         free, the bytes allocated on the device (solid, a step line) and the bytes the caching \
         allocator reserves from it (dotted: allocated plus cached). x = ms from the run's \
         first ProfilerStep start; the grey dashed lines are each step's start and end. Host memory (device \
         cpu) is left out of the chart. The table gives the peaks per step: allocated = the \
         most held at any moment between the step's first and last event (`aorta memory`).",
    );
    for (run, tl) in &timelines {
        let steps = step_bounds(dataset, run, rank)?;
        draw(page, run, tl, rank, &steps);
    }
    let peaks = memory::peaks(dataset, runs, By::Step)?;
    page.table(
        &[
            "run",
            "rank",
            "device",
            "step",
            "events",
            "allocated_peak",
            "reserved_peak",
        ],
        &table_rows(&peaks, rank),
    );
    Ok(())
}

/// A step's boundaries on the chart: start, end, number.
type Bounds = (i64, i64, i64);

/// The `ProfilerStep` spans of a run's ranks (the CPU span, else the GPU window), by start.
fn step_bounds(dataset: &Path, run: &str, rank: Option<i64>) -> Result<Vec<Bounds>, ReportError> {
    let cols = [
        "rank",
        "step",
        "cpu_start_ns",
        "cpu_end_ns",
        "gpu_start_ns",
        "gpu_end_ns",
    ];
    let df = aorta_transform::dataset::read_where(
        dataset,
        "steps",
        aorta_transform::dataset::of_runs(&[run.to_string()]),
        &cols,
    )?;
    let (ranks, step) = (ints(&df, "rank"), ints(&df, "step"));
    let (cpu, cpu_end) = (ints(&df, "cpu_start_ns"), ints(&df, "cpu_end_ns"));
    let (gpu, gpu_end) = (ints(&df, "gpu_start_ns"), ints(&df, "gpu_end_ns"));
    let mut out: Vec<Bounds> = (0..df.height())
        .filter(|&i| rank.is_none_or(|r| ranks[i] == Some(r)))
        .filter_map(|i| {
            let (s, e) = match cpu[i] {
                Some(s) => (s, cpu_end[i]?),
                None => (gpu[i]?, gpu_end[i]?),
            };
            Some((s, e, step[i]?))
        })
        .collect();
    out.sort_unstable();
    // Ranks' spans of one step differ a little: the first rank's stands for the step.
    out.dedup_by_key(|s| s.2);
    Ok(out)
}

fn ints(df: &DataFrame, name: &str) -> Vec<Option<i64>> {
    aorta_transform::rows::ints(df, name)
}

fn strs<'a>(df: &'a DataFrame, name: &str) -> Vec<Option<&'a str>> {
    aorta_transform::rows::strs(df, name)
}

/// One chart per run: two lines per (rank, device), the step starts as vertical lines.
fn draw(page: &mut Page, run: &str, tl: &DataFrame, rank: Option<i64>, steps: &[Bounds]) {
    let (ranks, dtype, device) = (
        ints(tl, "rank"),
        strs(tl, "device_type"),
        ints(tl, "device"),
    );
    let ts = ints(tl, "ts_ns");
    let (alloc, reserved) = (ints(tl, "total_allocated"), ints(tl, "total_reserved"));
    // x = 0 at the first step's start (else the first event): events before it are negative.
    let first = ts.iter().flatten().min().copied().unwrap_or(0);
    let t0 = steps.first().map_or(first, |s| s.0);
    let ms = |t: i64| (t - t0) as f64 / 1e6;
    let mut series: BTreeMap<(i64, String), Series> = BTreeMap::new();
    for i in 0..tl.height() {
        let r = ranks[i].unwrap_or(0);
        if dtype[i] == Some("cpu") || rank.is_some_and(|want| want != r) {
            continue;
        }
        let name = format!("{}:{}", dtype[i].unwrap_or("?"), device[i].unwrap_or(-1));
        let s = series.entry((r, name)).or_default();
        s.x.push(ms(ts[i].unwrap_or(t0)));
        s.allocated.push(alloc[i].map(|b| b as f64 / GIB));
        s.reserved.push(reserved[i].map(|b| b as f64 / GIB));
    }
    if series.is_empty() {
        page.note(&format!("{run}: host memory events only."));
        return;
    }
    let mut data = Vec::new();
    for ((r, dev), s) in series.iter().take(MAX_DEVICES) {
        let label = format!("{run} rank {r} {dev}");
        data.push(line(
            &format!("{label} allocated"),
            &s.x,
            &s.allocated,
            "solid",
        ));
        data.push(line(&format!("{label} reserved"), &s.x, &s.reserved, "dot"));
    }
    if series.len() > MAX_DEVICES {
        page.note(&format!(
            "{run}: the first {MAX_DEVICES} of {} devices drawn (`--rank` picks one rank).",
            series.len()
        ));
    }
    let rule = |t: i64| {
        json!({"type": "line", "xref": "x", "yref": "paper", "x0": ms(t), "x1": ms(t),
            "y0": 0, "y1": 1, "line": {"color": "#999", "width": 1, "dash": "dash"}})
    };
    let shapes: Vec<Value> = steps.iter().flat_map(|s| [rule(s.0), rule(s.1)]).collect();
    let notes: Vec<Value> = steps
        .iter()
        .map(|(t, _, n)| {
            json!({"x": ms(*t), "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
            "xanchor": "left", "text": format!("step {n}"), "showarrow": false,
            "font": {"size": 10, "color": "#666"}})
        })
        .collect();
    page.plot_json(json!({
        "data": data,
        "layout": {
            "height": 380,
            "margin": {"t": 40, "b": 60, "l": 70, "r": 30},
            "xaxis": {"title": {"text": "ms from the first step's start"}, "zeroline": false},
            "yaxis": {"title": {"text": "GiB"}, "rangemode": "tozero"},
            "shapes": shapes,
            "annotations": notes,
            "legend": {"orientation": "h", "y": -0.25},
        },
    }));
}

fn line(name: &str, x: &[f64], y: &[Option<f64>], dash: &str) -> Value {
    json!({
        "type": "scatter", "mode": "lines", "name": name, "x": x, "y": y,
        "line": {"shape": "hv", "dash": dash},
        "hovertemplate": "%{y:.3f} GiB at %{x:.3f} ms",
    })
}

fn table_rows(peaks: &DataFrame, rank: Option<i64>) -> Vec<Vec<String>> {
    let (run, dtype) = (strs(peaks, "run"), strs(peaks, "device_type"));
    let (ranks, device, step) = (
        ints(peaks, "rank"),
        ints(peaks, "device"),
        ints(peaks, "step"),
    );
    let events = ints(peaks, "events");
    let (alloc, reserved) = (ints(peaks, "allocated_peak"), ints(peaks, "reserved_peak"));
    let show = |v: Option<i64>| fmt::opt(v, |b| b.to_string());
    (0..peaks.height())
        .filter(|&i| rank.is_none_or(|r| ranks[i] == Some(r)))
        .map(|i| {
            vec![
                run[i].unwrap_or("").to_string(),
                show(ranks[i]),
                format!("{}:{}", dtype[i].unwrap_or("?"), show(device[i])),
                show(step[i]),
                show(events[i]),
                fmt::opt(alloc[i], fmt::bytes),
                fmt::opt(reserved[i], fmt::bytes),
            ]
        })
        .collect()
}
