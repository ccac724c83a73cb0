//! The single-run report (`aorta report`): the headline (each run's verdicts in words, with
//! links), a step's per-stream timeline of every rank, overlap per step, GPU time per
//! category per step and other_compute's subcategories, exposed communication per collective
//! kind, who was late across ranks, device memory over time when the trace recorded it, the
//! roofline and MFU, and the data-quality findings.

mod charts;
mod copies;
mod cross_rank;
mod data;
mod header;
mod headline;
mod idle;
mod memory;
mod multiples;
mod perf;
mod quality;
mod subcats;
mod timeline;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use aorta_transform::rows::ints;

use crate::error::ReportError;
use crate::page::Page;

pub use data::TimelineTarget;

/// What to report on: runs (empty: all), one rank, and the step of the timeline.
#[derive(Debug, Clone, Default)]
pub struct RunReportOptions {
    /// Runs to include (empty: every run of the dataset).
    pub runs: Vec<String>,
    /// Only this rank (default: every rank; the timeline shows the first).
    pub rank: Option<i64>,
    /// The timeline's step (default: the median-duration step of the timeline's rank).
    pub step: Option<i64>,
    /// More GPUs, or other peaks, for the performance charts (`aorta perf --device-peaks`).
    pub device_peaks: Option<PathBuf>,
    /// The timeline's window, ms from the step's (or capture's) first activity: only the
    /// activities overlapping it are drawn (`--from/--to`).
    pub window: Option<(f64, f64)>,
}

/// What `run_report` wrote, for the terminal summary.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The page written: the `out` given to [`run_report`].
    pub out: PathBuf,
    /// The runs reported, in the dataset's order.
    pub runs: Vec<String>,
    /// Distinct ranks reported.
    pub ranks: Vec<i64>,
    /// Step rows (rank × step) reported.
    pub step_rows: usize,
    /// The first run's timeline; `None` when the reported ranks have no GPU activities
    /// (JSONL logs only).
    pub timeline: Option<TimelineTarget>,
    /// Kernels drawn on the first timeline, and in its step.
    pub drawn: usize,
    /// GPU activities in that step (or capture): more than `drawn` when the timeline keeps
    /// only the longest kernels or `--from/--to` narrows it.
    pub total: usize,
    /// Timelines on the page: one per run with GPU activities.
    pub timelines: usize,
    /// Whether the overlap tables came from the dataset (`aorta overlap` ran) or were computed.
    pub overlap_from_dataset: bool,
    /// Plotly charts on the page, timelines included.
    pub charts: usize,
}

/// Reads the dataset at `dataset`, renders the report and writes it to `out`.
pub fn run_report(
    dataset: &Path,
    opts: &RunReportOptions,
    out: &Path,
) -> Result<RunReport, ReportError> {
    let d = data::RunData::load(dataset, opts)?;
    let targets = d.timeline_targets(dataset, opts.step)?;
    let tls = targets
        .iter()
        .map(|t| timeline::Timeline::load(dataset, t, opts.window, &clock_offsets(&d, &t.run)))
        .collect::<Result<Vec<_>, _>>()?;
    if let (Some((from, to)), false) = (opts.window, tls.is_empty()) {
        if tls.iter().all(|t| t.in_window() == 0) {
            return Err(ReportError::EmptyWindow {
                dataset: dataset.to_path_buf(),
                from,
                to,
                lies: tls
                    .iter()
                    .map(|t| t.where_activity_lies())
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
    }
    let idle_rows = idle::rows(dataset, &d)?;
    let peaks = aorta_transform::perf::Peaks::load(opts.device_peaks.as_deref())?;
    let perf = aorta_transform::perf::compute(dataset, &d.runs, &peaks)?;
    let info = aorta_transform::info::summarize(dataset, &d.runs)?;
    let title = if d.runs.len() > 3 {
        format!("aorta report — {} runs", d.runs.len())
    } else {
        format!("aorta report — {}", d.runs.join(", "))
    };
    let mut page = Page::new(&title);
    headline::render(
        &mut page,
        &headline::Inputs {
            data: &d,
            idle: &idle_rows,
            perf: &perf,
            info: &info,
        },
    );
    page.note(&format!(
        "Dataset {}; runs {}; ranks {}; {} step rows. Overlap tables {}.",
        dataset.display(),
        d.runs.join(", "),
        join(&d.ranks),
        d.steps.len(),
        if d.from_dataset {
            "as written by `aorta overlap`"
        } else {
            "computed from gpu_activities (`aorta overlap` has not written them since the last \
             ingest)"
        }
    ));
    header::runs_table(&mut page, dataset, &d.runs)?;
    if !d.outside.is_empty() {
        let each: Vec<String> = d
            .outside
            .iter()
            .map(|(run, rank, ns)| format!("{run} rank {rank}: {} ms", crate::fmt::ms_ns(*ns)))
            .collect();
        page.note(&format!(
            "GPU time outside every step (kernels before the profiler's first step or after \
             its last; sum of durations), left out of the step charts and tables: {}.",
            each.join("; ")
        ));
    }
    for tl in &tls {
        tl.render(&mut page);
    }
    if tls.is_empty() {
        page.note(if d.steps.is_empty() {
            "No GPU activities and no JSONL iterations in the reported ranks (a CPU-only \
             trace?): no timeline and no step charts."
        } else {
            "No GPU activities in the reported ranks (JSONL logs only): no timeline."
        });
    }
    charts::overlap_per_step(&mut page, &d.steps);
    charts::categories_per_step(&mut page, &d.categories);
    subcats::chart(&mut page, dataset, &d)?;
    idle::chart(&mut page, &idle_rows);
    copies::chart(&mut page, dataset, &d)?;
    charts::collectives(&mut page, &d.collectives);
    cross_rank::charts(&mut page, &d.jobs).map_err(ReportError::polars(dataset))?;
    memory::chart(&mut page, dataset, &d.runs, opts.rank)?;
    perf::charts(&mut page, &perf, opts.rank);
    quality::section(&mut page, &info, &d.jobs);
    page.write(out)?;
    Ok(RunReport {
        out: out.to_path_buf(),
        runs: d.runs.clone(),
        ranks: d.ranks.clone(),
        step_rows: d.steps.len(),
        drawn: tls.first().map_or(0, |t| t.drawn()),
        total: tls.first().map_or(0, |t| t.total),
        timelines: tls.len(),
        timeline: targets.into_iter().next(),
        overlap_from_dataset: d.from_dataset,
        charts: page.plot_count(),
    })
}

/// Each rank's clock offset in `run` (ns to subtract to reach the reference rank's clock), as
/// `aorta collectives` found it; empty when the run's collectives could not be matched.
fn clock_offsets(d: &data::RunData, run: &str) -> HashMap<i64, i64> {
    let Some(df) = d
        .jobs
        .iter()
        .find(|j| j.run == run)
        .and_then(|j| j.rank_view().ok())
    else {
        return HashMap::new();
    };
    let (rank, off) = (ints(&df, "rank"), ints(&df, "clock_offset_ns"));
    (0..df.height())
        .filter_map(|i| Some((rank[i]?, off[i]?)))
        .collect()
}

/// A section anchor for one run: `prefix-` and the run label with every character but ASCII
/// letters and digits replaced by `-`.
pub(crate) fn anchor(prefix: &str, run: &str) -> String {
    let slug: String = run
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("{prefix}-{slug}")
}

pub(crate) fn join<T: ToString>(v: &[T]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}
