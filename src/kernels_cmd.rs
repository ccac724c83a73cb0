//! `aorta kernels`: the costliest kernels per run, rank, category or step
//! (`aorta_transform::kernels`), as text, JSON or CSV. Only reads the dataset.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_reports::fmt;
use aorta_transform::kernels::{self, By, Kernels, RunTotals};
use polars::prelude::*;
use serde_json::json;

use crate::cli::Format;
use crate::frame_out::{frame_json, write_csv};
use crate::overlap_table::{render, Col, Show};
use crate::toolbox_cli::{KernelsArgs, KernelsBy};

pub(crate) fn run(args: KernelsArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta kernels")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    crate::notes::print_job_notes(root, &runs)?;
    let by = by(args.by);
    let k = kernels::compute(root, &runs, by, args.top)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Table => print(&mut out, &k, by, args.top)?,
        Format::Csv => write_csv(&mut out, &[&k.rows]).context("writing CSV")?,
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "by": format!("{:?}", args.by).to_lowercase(),
                "top": args.top,
                "runs": k.totals.iter().map(|t| json!({
                    "run": t.run, "activities": t.activities, "gpu_ns": t.gpu_ns,
                    "outside_step_activities": t.outside_activities,
                    "outside_step_ns": t.outside_ns,
                })).collect::<Vec<_>>(),
                "rows": frame_json(&k.rows),
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn by(b: KernelsBy) -> By {
    match b {
        KernelsBy::Run => By::Run,
        KernelsBy::Rank => By::Rank,
        KernelsBy::Category => By::Category,
        KernelsBy::Subcategory => By::Subcategory,
        KernelsBy::Step => By::Step,
    }
}

const COLUMNS: &[Col] = &[
    ("kind", "kind", Show::Plain),
    ("count", "count", Show::Plain),
    ("total", "total_ns", Show::Ms),
    ("mean", "mean_ns", Show::MsFloat),
    ("p50", "p50_ns", Show::MsFloat),
    ("p99", "p99_ns", Show::MsFloat),
    ("gpu_%", "gpu_pct", Show::Pct),
    ("op", "op", Show::Plain),
];

/// Kernel names are C++ templates: the table shows their start.
const NAME_WIDTH: usize = 60;

fn header(t: &RunTotals, by: By) -> String {
    let outside = match (t.outside_activities, by) {
        (0, _) => "none outside every step".to_string(),
        (n, By::Step) => format!(
            "{n} outside every step ({} ms): step -",
            fmt::ms_ns(t.outside_ns)
        ),
        (n, _) => format!(
            "{n} outside every step ({} ms), included",
            fmt::ms_ns(t.outside_ns)
        ),
    };
    format!(
        "run {}: {} GPU activities, {} ms of GPU time (sum of durations); {outside}",
        t.run,
        t.activities,
        fmt::ms_ns(t.gpu_ns)
    )
}

fn print(out: &mut impl Write, k: &Kernels, by: By, top: usize) -> Result<()> {
    for t in &k.totals {
        writeln!(out, "{}", header(t, by))?;
        let rows = k
            .rows
            .clone()
            .lazy()
            .filter(col("run").eq(lit(t.run.as_str())))
            .collect()?;
        let rows = short_names(rows)?;
        let rows = match by.key() {
            Some("step") => rows
                .lazy()
                .with_column(col("step").cast(DataType::String).fill_null(lit("-")))
                .collect()?,
            _ => rows,
        };
        let mut cols = COLUMNS.to_vec();
        if by != By::Category {
            cols.insert(1, ("category", "category", Show::Plain));
        }
        let keys: Vec<&str> = by.key().into_iter().chain(["name"]).collect();
        writeln!(out, "  top {top} by total GPU time (times in ms):")?;
        out.write_all(render(&rows, None, &keys, &cols)?.as_bytes())?;
        writeln!(out)?;
    }
    Ok(())
}

/// `df` with `name` cut to `NAME_WIDTH` characters (JSON and CSV keep it whole).
fn short_names(df: DataFrame) -> PolarsResult<DataFrame> {
    let cut: Vec<Option<String>> = df
        .column("name")?
        .str()?
        .iter()
        .map(|n| {
            n.map(|n| match n.char_indices().nth(NAME_WIDTH - 1) {
                Some((at, _)) => format!("{}…", &n[..at]),
                None => n.to_string(),
            })
        })
        .collect();
    let mut df = df;
    df.with_column(Column::new("name".into(), cut))?;
    Ok(df)
}
