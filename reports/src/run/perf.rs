//! The performance section of the run report: a roofline (operators by shape as points,
//! sized by GPU time, under the roofs of the run's GPU) and MFU per step, each with its
//! table of the numbers `aorta perf` prints.

use aorta_transform::perf::{Group, PerfRun, StepRow};
use plotly::common::Mode;
use plotly::layout::{Axis, AxisType, Margin};
use plotly::{Plot, Scatter};
use serde_json::json;

use super::charts::RawTrace;
use crate::fmt;
use crate::page::Page;

/// Points drawn per run: the operators (by shape) with the most GPU time.
const POINTS: usize = 60;

pub(crate) fn charts(page: &mut Page, runs: &[PerfRun], rank: Option<i64>) {
    page.section("Roofline: operators by shape");
    page.note(
        "Each point is one operator and input shapes (summed over its instances and ranks): x = \
         arithmetic intensity, FLOPs per byte moved (inputs read and outputs written once); y = \
         achieved TFLOP/s = FLOPs / GPU time of its kernels; the area grows with GPU time. The \
         lines are the roofs of the run's GPU: min(peak of the dtype, intensity × HBM \
         bandwidth), from the device-peak table. Only operators with a FLOPs model (GEMM, \
         attention, convolution) have a point; `aorta perf` lists the rest.",
    );
    for p in runs {
        let p = only_rank(p, rank);
        roofline(page, &p);
    }
    page.section_id("MFU per step", super::headline::MFU);
    page.note(
        "MFU = model FLOPs of the step (GEMM, attention, convolution) / (step GPU window × the \
         dense peak of the step's dominant GEMM dtype). GEMM TFLOP/s = GEMM FLOPs / the time at \
         least one GEMM runs. Null without a known device (see the note).",
    );
    mfu(page, runs, rank);
}

fn only_rank(p: &PerfRun, rank: Option<i64>) -> PerfRun {
    let mut p = p.clone();
    if let Some(r) = rank {
        p.ops.retain(|o| o.rank == r);
        p.steps.retain(|s| s.rank == r);
    }
    p
}

fn roofline(page: &mut Page, p: &PerfRun) {
    let groups: Vec<Group> = p
        .groups(true)
        .into_iter()
        .filter(|g| g.roof.intensity.is_some() && g.roof.tflops.is_some_and(|t| t > 0.0))
        .take(POINTS)
        .collect();
    if groups.is_empty() {
        page.note(&format!(
            "{}: no operator with FLOPs and bytes to place.",
            p.run
        ));
        return;
    }
    let mut plot = Plot::new();
    let max_ns = groups.iter().map(|g| g.gpu_ns).max().unwrap_or(1).max(1) as f64;
    let label = |g: &Group| {
        format!(
            "{} {} {}<br>{} ms, {} TFLOP/s, {} FLOP/B",
            g.op,
            g.input_dims.as_deref().unwrap_or(""),
            g.dtype.unwrap_or(""),
            fmt::ms_ns(g.gpu_ns),
            fmt::opt(g.roof.tflops, fmt::tflops),
            fmt::opt(g.roof.intensity, fmt::tflops),
        )
    };
    plot.add_trace(RawTrace::new(json!({
        "type": "scatter", "mode": "markers", "name": p.run,
        "x": groups.iter().map(|g| g.roof.intensity).collect::<Vec<_>>(),
        "y": groups.iter().map(|g| g.roof.tflops).collect::<Vec<_>>(),
        "text": groups.iter().map(label).collect::<Vec<_>>(),
        "hoverinfo": "text",
        "marker": {
            "size": groups.iter().map(|g| 6.0 + 34.0 * (g.gpu_ns as f64 / max_ns).sqrt()).collect::<Vec<_>>(),
            "opacity": 0.7,
        },
    })));
    let (lo, hi) = groups
        .iter()
        .filter_map(|g| g.roof.intensity)
        .fold((f64::MAX, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    let xs: Vec<f64> = (0..=40)
        .map(|i| (lo / 4.0) * ((hi * 4.0) / (lo / 4.0)).powf(i as f64 / 40.0))
        .collect();
    let mut dtypes: Vec<&str> = groups.iter().filter_map(|g| g.dtype).collect();
    dtypes.sort_unstable();
    dtypes.dedup();
    for (_, dev) in &p.devices {
        let Some(dev) = dev else { continue };
        for dt in &dtypes {
            let Some(peak) = dev.tflops(dt) else { continue };
            let ys: Vec<f64> = xs.iter().map(|x| (x * dev.hbm_tbps).min(peak)).collect();
            plot.add_trace(
                Scatter::new(xs.clone(), ys)
                    .name(format!(
                        "{} {dt} roof ({peak} TFLOP/s, {} TB/s)",
                        dev.name, dev.hbm_tbps
                    ))
                    .mode(Mode::Lines),
            );
        }
    }
    plot.set_layout(
        crate::page::layout(460)
            .margin(Margin::new().top(30).bottom(60).left(70).right(30))
            .x_axis(Axis::new().title("FLOP per byte").type_(AxisType::Log))
            .y_axis(Axis::new().title("TFLOP/s").type_(AxisType::Log)),
    );
    page.plot(&mut plot);
    page.table(
        &[
            "run",
            "op",
            "input_dims",
            "dtype",
            "instances",
            "gpu_ms",
            "TFLOP/s",
            "peak_%",
            "FLOP/B",
            "bound",
            "roof_%",
        ],
        &groups
            .iter()
            .take(15)
            .map(|g| group_cells(&p.run, g))
            .collect::<Vec<_>>(),
    );
    for n in &p.notes {
        page.note(&format!("{}: {n}", p.run));
    }
}

fn group_cells(run: &str, g: &Group) -> Vec<String> {
    vec![
        run.to_string(),
        g.op.clone(),
        g.input_dims.clone().unwrap_or_default(),
        g.dtype.unwrap_or("-").to_string(),
        g.instances.to_string(),
        fmt::ms_ns(g.gpu_ns),
        fmt::opt(g.roof.tflops, fmt::tflops),
        fmt::opt(g.roof.peak_pct, fmt::pct),
        fmt::opt(g.roof.intensity, fmt::tflops),
        g.roof.bound.unwrap_or("-").to_string(),
        fmt::opt(g.roof.roof_pct, fmt::pct),
    ]
}

fn mfu(page: &mut Page, runs: &[PerfRun], rank: Option<i64>) {
    let rows: Vec<&StepRow> = runs
        .iter()
        .flat_map(|p| &p.steps)
        .filter(|s| s.level == "step" && rank.is_none_or(|r| s.rank == r))
        .collect();
    if rows.iter().all(|s| s.mfu_pct.is_none()) {
        page.note(
            "No MFU chart: no step has both model FLOPs and a known GPU peak (see the notes \
             above; `--device-peaks FILE` adds GPUs).",
        );
    }
    let mut series: Vec<(&str, i64)> = rows.iter().map(|s| (s.run.as_str(), s.rank)).collect();
    series.dedup();
    let many = series.len() > 1;
    let mut plot = Plot::new();
    for (run, r) in &series {
        let of: Vec<&&StepRow> = rows
            .iter()
            .filter(|s| s.run == *run && s.rank == *r)
            .collect();
        let x: Vec<String> = of
            .iter()
            .map(|s| fmt::opt(s.step, |n| format!("step {n}")))
            .collect();
        let name = if many {
            format!("{run} r{r}")
        } else {
            "MFU %".to_string()
        };
        plot.add_trace(
            Scatter::new(x, of.iter().map(|s| s.mfu_pct).collect())
                .name(name)
                .mode(Mode::LinesMarkers),
        );
    }
    plot.set_layout(
        crate::page::layout(360)
            .margin(Margin::new().top(30).bottom(60).left(70).right(30))
            .y_axis(
                Axis::new()
                    .title("MFU %")
                    .range_mode(plotly::layout::RangeMode::ToZero),
            ),
    );
    if rows.iter().any(|s| s.mfu_pct.is_some()) {
        page.plot(&mut plot);
    }
    page.table(
        &[
            "run",
            "rank",
            "step",
            "window",
            "TFLOP",
            "dtype",
            "device",
            "MFU_%",
            "GEMM_TFLOP/s",
            "unmodelled_ms",
        ],
        &rows
            .iter()
            .map(|s| {
                vec![
                    s.run.clone(),
                    s.rank.to_string(),
                    fmt::opt(s.step, |n| n.to_string()),
                    fmt::opt(s.window_ns, fmt::ms_ns),
                    format!("{:.3}", s.model_flops as f64 * 1e-12),
                    s.dtype.unwrap_or("-").to_string(),
                    s.device.clone().unwrap_or_else(|| "-".into()),
                    fmt::opt(s.mfu_pct, fmt::pct),
                    fmt::opt(s.gemm_tflops, fmt::tflops),
                    fmt::ms_ns(s.unmodelled_ns),
                ]
            })
            .collect::<Vec<_>>(),
    );
}
