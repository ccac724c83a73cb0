//! The job-level charts of the run report: who was late in which step (a rank × step
//! heatmap of caused delay and of the share of comm time spent waiting), and per collective
//! kind how much of the comm time was waiting against transfer. Drawn for runs with more
//! than one rank whose collectives could be matched; the numbers are `aorta collectives`'.

use aorta_transform::collectives::Job;
use polars::prelude::*;

use super::charts::RawTrace;
use crate::fmt;
use crate::page::Page;
use aorta_transform::rows::{floats, ints, strs};

/// Rows of the caused-delay table.
const TOP: usize = 20;

/// Both charts for every job with matched collectives; a line saying why for the others.
pub(crate) fn charts(page: &mut Page, jobs: &[Job]) -> Result<(), PolarsError> {
    let timed: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.ranks.len() > 1 && j.arrivals.iter().any(Option::is_some))
        .collect();
    if timed.is_empty() {
        return Ok(());
    }
    page.section("Across ranks: who was late, and waiting vs transfer");
    page.note(
        "Collectives matched across ranks (aorta collectives). Caused = the delay a rank alone \
         imposed on the others as the last to arrive (its arrival − the second-to-last); wait \
         share = the part of a rank's collective kernel time spent waiting for the last member \
         to arrive. Clocks aligned per rank from matched collective end times.",
    );
    for job in timed {
        page.subsection_id(
            &format!("Run {}", job.run),
            &super::anchor("across-ranks", &job.run),
        );
        lateness(page, job)?;
        wait_vs_transfer(page, job)?;
    }
    Ok(())
}

/// Rank × step heatmaps: caused delay (ms) and wait share (%).
fn lateness(page: &mut Page, job: &Job) -> Result<(), PolarsError> {
    let df = job.step_view()?;
    let (step, rank) = (ints(&df, "step"), ints(&df, "rank"));
    let (caused, wait) = (ints(&df, "caused_ns"), floats(&df, "wait_pct"));
    let mut steps: Vec<Option<i64>> = step.clone();
    steps.sort();
    steps.dedup();
    let mut ranks: Vec<i64> = rank.iter().flatten().copied().collect();
    ranks.sort();
    ranks.dedup();
    let x: Vec<String> = steps
        .iter()
        .map(|s| s.map_or("outside steps".into(), |s| format!("step {s}")))
        .collect();
    let y: Vec<String> = ranks.iter().map(|r| format!("rank {r}")).collect();
    let at: std::collections::HashMap<(Option<i64>, Option<i64>), usize> =
        (0..df.height()).map(|i| ((rank[i], step[i]), i)).collect();
    let grid = |v: &dyn Fn(usize) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
        ranks
            .iter()
            .map(|r| {
                steps
                    .iter()
                    .map(|s| at.get(&(Some(*r), *s)).and_then(|&i| v(i)))
                    .collect()
            })
            .collect()
    };
    let caused_z = grid(&|i| caused[i].map(|c| c as f64 / 1e6));
    let wait_z = grid(&|i| wait[i]);
    // Both scales run from pale (nothing) to dark (a lot); plotly's "Blues" runs the other way.
    let heat = |z: Vec<Vec<Option<f64>>>, title: &str, scale: &str, max: Option<f64>| {
        let mut plot = plotly::Plot::new();
        plot.add_trace(RawTrace::new(serde_json::json!({
            "type": "heatmap", "x": x, "y": y, "z": z, "colorscale": scale,
            "reversescale": scale == "Blues",
            "zmin": 0, "zmax": max, "colorbar": {"title": {"text": title}},
            "hovertemplate": "%{y}, %{x}: %{z:.3f}<extra></extra>",
        })));
        plot.set_layout(
            crate::page::layout(240 + 24 * ranks.len().min(40))
                .title(super::charts::small_title(&format!("{}: {title}", job.run))),
        );
        plot
    };
    page.plot_row(&mut [
        heat(caused_z, "caused delay (ms)", "Reds", None),
        heat(wait_z, "wait share (%)", "Blues", Some(100.0)),
    ]);
    // The largest caused delays; a 1,000-rank job has a row for every rank and step.
    let mut late: Vec<usize> = (0..df.height())
        .filter(|&i| caused[i].unwrap_or(0) > 0)
        .collect();
    late.sort_by_key(|&i| std::cmp::Reverse(caused[i]));
    let table: Vec<Vec<String>> = late
        .into_iter()
        .take(TOP)
        .map(|i| {
            vec![
                fmt::opt(step[i], |s| s.to_string()),
                fmt::opt(rank[i], |r| r.to_string()),
                fmt::opt(caused[i], fmt::ms_ns),
                fmt::opt(wait[i], fmt::pct),
            ]
        })
        .collect();
    if !table.is_empty() {
        page.note(&format!("The {TOP} largest caused delays (rank, step):"));
        page.table(&["step", "rank (last)", "caused ms", "wait %"], &table);
    }
    Ok(())
}

/// Per collective kind: waiting and transfer summed over every rank's kernels (stacked).
fn wait_vs_transfer(page: &mut Page, job: &Job) -> Result<(), PolarsError> {
    let df = job.kind_view()?;
    let kind = strs(&df, "kind");
    let (wait, transfer) = (ints(&df, "wait_ns"), ints(&df, "transfer_ns"));
    let pct = floats(&df, "wait_pct");
    let ms =
        |v: &[Option<i64>]| -> Vec<f64> { v.iter().map(|x| x.unwrap_or(0) as f64 / 1e6).collect() };
    let mut plot = plotly::Plot::new();
    for (name, v, color) in [
        ("waiting", ms(&wait), "#9467bd"),
        ("transfer", ms(&transfer), "#d62728"),
    ] {
        plot.add_trace(RawTrace::new(serde_json::json!({
            "type": "bar", "name": name, "x": kind, "y": v, "marker": {"color": color},
        })));
    }
    plot.set_layout(
        crate::page::layout(360)
            .bar_mode(plotly::layout::BarMode::Stack)
            .title(format!("{}: collective kernel time, all ranks", job.run))
            .y_axis(plotly::layout::Axis::new().title("ms")),
    );
    page.plot(&mut plot);
    let table: Vec<Vec<String>> = (0..df.height())
        .map(|i| {
            vec![
                kind[i].unwrap_or_default().to_string(),
                fmt::opt(wait[i], fmt::ms_ns),
                fmt::opt(transfer[i], fmt::ms_ns),
                fmt::opt(pct[i], fmt::pct),
            ]
        })
        .collect();
    page.table(&["kind", "wait ms", "transfer ms", "wait %"], &table);
    Ok(())
}
