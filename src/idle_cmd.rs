//! `aorta breakdown` and `aorta launches` (`aorta_transform::idle`), as text, JSON or CSV.
//! Only read the dataset.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_transform::idle::{breakdown, launches, By};
use polars::prelude::*;
use serde_json::{json, Value};

use crate::cli::Format;
use crate::frame_out::{frame_json, write_csv};
use crate::idle_cli::{BreakdownArgs, IdleBy, LaunchesArgs};
use crate::overlap_table::{render, Col, Show};

const BREAKDOWN: &[Col] = &[
    ("activities", "activities", Show::Plain),
    ("window", "window_ns", Show::Ms),
    ("compute", "compute_ns", Show::Ms),
    ("non_compute", "non_compute_ns", Show::Ms),
    ("idle", "idle_ns", Show::Ms),
    ("compute_%", "compute_pct", Show::Pct),
    ("non_compute_%", "non_compute_pct", Show::Pct),
    ("idle_%", "idle_pct", Show::Pct),
    ("host_wait", "host_wait_ns", Show::Ms),
    ("kernel_wait", "kernel_wait_ns", Show::Ms),
    ("other_idle", "other_idle_ns", Show::Ms),
    ("gaps", "gaps", Show::Plain),
];

const STREAMS: &[Col] = &[
    ("idle", "idle_ns", Show::Ms),
    ("host_wait", "host_wait_ns", Show::Ms),
    ("kernel_wait", "kernel_wait_ns", Show::Ms),
    ("other_idle", "other_idle_ns", Show::Ms),
    ("gaps", "gaps", Show::Plain),
];

const LAUNCHES: &[Col] = &[
    ("activities", "activities", Show::Plain),
    ("kernels", "kernels", Show::Plain),
    ("launched", "launched", Show::Plain),
    ("cpu_p50", "cpu_p50_ns", Show::MsFloat),
    ("cpu_p99", "cpu_p99_ns", Show::MsFloat),
    ("delay_p50", "delay_p50_ns", Show::MsFloat),
    ("delay_p99", "delay_p99_ns", Show::MsFloat),
    ("to_start_p50", "to_start_p50_ns", Show::MsFloat),
    ("longest_gap", "longest_gap_ns", Show::Ms),
    ("queue_max", "queue_max", Show::Plain),
    ("queue_mean", "queue_mean", Show::Ratio),
];

const GAPS: &[Col] = &[
    ("gap", "gap_ns", Show::Ms),
    ("before", "before", Show::Plain),
    ("after", "after", Show::Plain),
    ("kernel", "kernel", Show::Plain),
];

fn by(b: IdleBy) -> By {
    match b {
        IdleBy::Rank => By::Rank,
        IdleBy::Step => By::Step,
    }
}

pub(crate) fn run_breakdown(args: BreakdownArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta breakdown")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    crate::notes::print_job_notes(root, &runs)?;
    let b = breakdown::compute(root, &runs, by(args.by), args.kernel_wait_ns)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Csv if args.streams => write_csv(&mut out, &[&b.streams])?,
        Format::Csv => write_csv(&mut out, &[&b.rows]).context("writing CSV")?,
        Format::Json => {
            let mut doc = json!({
                "dataset": root.display().to_string(),
                "by": format!("{:?}", args.by).to_lowercase(),
                "kernel_wait_ns": args.kernel_wait_ns,
                "rows": frame_json(&b.rows),
            });
            if args.streams {
                doc["streams"] = frame_json(&b.streams);
            }
            print_json(&mut out, &doc)?;
        }
        Format::Table => {
            for run in &runs {
                writeln!(
                    out,
                    "run {run} (times in ms; % of the window; kernel-wait: gaps under {})",
                    aorta_transform::idle::breakdown::threshold_text(args.kernel_wait_ns)
                )?;
                table(&mut out, &b.rows, run, args.by, &[], BREAKDOWN)?;
                if args.streams {
                    writeln!(out, "  idle per stream (HTA's split):")?;
                    table(&mut out, &b.streams, run, args.by, &["stream"], STREAMS)?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run_launches(args: LaunchesArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta launches")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    crate::notes::print_job_notes(root, &runs)?;
    let l = launches::compute(root, &runs, by(args.by), args.top)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Csv if args.queue_series => write_csv(&mut out, &[&l.series])?,
        Format::Csv => write_csv(&mut out, &[&l.rows]).context("writing CSV")?,
        Format::Json => {
            let mut doc = json!({
                "dataset": root.display().to_string(),
                "by": format!("{:?}", args.by).to_lowercase(),
                "top": args.top,
                "rows": frame_json(&l.rows),
                "gaps": frame_json(&l.gaps),
                "queues": frame_json(&l.queues),
            });
            if args.queue_series {
                doc["queue_series"] = frame_json(&l.series);
            }
            print_json(&mut out, &doc)?;
        }
        Format::Table => {
            for run in &runs {
                writeln!(out, "run {run} (times in ms)")?;
                table(&mut out, &l.rows, run, args.by, &[], LAUNCHES)?;
                writeln!(out, "  the {} longest launch gaps of each:", args.top)?;
                table(&mut out, &l.gaps, run, args.by, &[], GAPS)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_json(out: &mut impl Write, doc: &Value) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, doc)?;
    writeln!(out)?;
    Ok(())
}

/// The rows of `run` as aligned text, keyed by rank (and step, `-` outside every step).
fn table(
    out: &mut impl Write,
    df: &DataFrame,
    run: &str,
    by: IdleBy,
    extra_keys: &[&str],
    cols: &[Col],
) -> Result<()> {
    let mut rows = df
        .clone()
        .lazy()
        .filter(col("run").eq(lit(run)))
        .collect()?;
    let mut keys = vec!["rank"];
    if by == IdleBy::Step {
        rows = rows
            .lazy()
            .with_column(col("step").cast(DataType::String).fill_null(lit("-")))
            .collect()?;
        keys.push("step");
    }
    keys.extend(extra_keys);
    out.write_all(render(&rows, None, &keys, cols)?.as_bytes())?;
    Ok(())
}
