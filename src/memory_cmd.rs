//! `aorta memory`: allocated and reserved peaks per rank, device and step
//! (`aorta_transform::memory`), as text, JSON or CSV. Only reads the dataset.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_transform::memory::{self, By};
use polars::prelude::*;
use serde_json::json;

use crate::cli::Format;
use crate::frame_out::{frame_json, write_csv};
use crate::overlap_table::{render, Col, Show};
use crate::toolbox_cli::{MemoryArgs, MemoryBy};

pub(crate) fn run(args: MemoryArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta memory")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    crate::notes::print_job_notes(root, &runs)?;
    let by = match args.by {
        MemoryBy::Step => By::Step,
        MemoryBy::Rank => By::Rank,
    };
    let peaks = memory::peaks(root, &runs, by)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Table => print(&mut out, &peaks, &runs, by)?,
        Format::Csv => write_csv(&mut out, &[&peaks]).context("writing CSV")?,
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "by": format!("{:?}", args.by).to_lowercase(),
                "runs": runs,
                "rows": frame_json(&peaks),
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

const COLUMNS: &[Col] = &[
    ("events", "events", Show::Plain),
    ("allocs", "allocs", Show::Plain),
    ("frees", "frees", Show::Plain),
    ("allocated", "allocated_bytes", Show::Bytes),
    ("freed", "freed_bytes", Show::Bytes),
    ("allocated_peak", "allocated_peak", Show::Bytes),
    ("reserved_peak", "reserved_peak", Show::Bytes),
];

fn print(out: &mut impl Write, peaks: &DataFrame, runs: &[String], by: By) -> Result<()> {
    for run in runs {
        let rows = peaks
            .clone()
            .lazy()
            .filter(col("run").eq(lit(run.as_str())))
            .collect()?;
        if rows.height() == 0 {
            writeln!(
                out,
                "run {run}: no memory events (record with torch.profiler's profile_memory=True)\n"
            )?;
            continue;
        }
        let rows = match by {
            By::Step => rows
                .lazy()
                .with_column(col("step").cast(DataType::String).fill_null(lit("-")))
                .collect()?,
            By::Rank => rows,
        };
        let mut keys = vec!["rank", "device_type", "device"];
        if by == By::Step {
            keys.push("step");
        }
        writeln!(out, "run {run}: device memory from the allocator events")?;
        out.write_all(render(&rows, None, &keys, COLUMNS)?.as_bytes())?;
        writeln!(out)?;
    }
    Ok(())
}
