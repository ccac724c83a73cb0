//! `aorta info`: what a dataset holds (`aorta_transform::info`), as text, JSON or CSV; with
//! `--diagnostics`, every finding row instead. Only reads: the dataset is locked shared, and
//! every part is verified against its checksum first (`dataset::check`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_reports::fmt;
use aorta_transform::info::{self, CodeSummary, RunSummary};
use serde_json::{json, Value};

use crate::cli::Format;
use crate::frame_out::{csv_cell, frame_json, render_frame, write_csv};
use crate::toolbox_cli::InfoArgs;

pub(crate) fn run(args: InfoArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta info")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    crate::notes::print_job_notes(root, &runs)?;
    let mut out = std::io::stdout().lock();
    if args.diagnostics {
        let rows = info::findings(root, &runs)?;
        match args.format {
            Format::Table => {
                writeln!(out, "{} findings in {} runs", rows.height(), runs.len())?;
                out.write_all(render_frame(&rows, 120).as_bytes())?;
            }
            Format::Csv => write_csv(&mut out, &[&rows]).context("writing CSV")?,
            Format::Json => json_out(&mut out, &json!({"findings": frame_json(&rows)}))?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let summary = info::summarize(root, &runs)?;
    match args.format {
        Format::Table => {
            for r in &summary {
                print_run(&mut out, r)?;
            }
        }
        Format::Csv => write_runs_csv(&mut out, &summary)?,
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "runs": summary.iter().map(run_json).collect::<Vec<_>>(),
            });
            json_out(&mut out, &doc)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn json_out(out: &mut impl Write, doc: &Value) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, doc)?;
    writeln!(out)?;
    Ok(())
}

fn list<T: ToString>(v: &[T]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// Ranks as a reader scans them: runs of three or more consecutive ranks as `a–b`
/// (`0–999`, not a thousand numbers), the rest listed (`0, 1, 4–7`); `-` for none.
fn ranges(v: &[i64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            parts.push(format!("{}–{}", v[i], v[j]));
        } else {
            parts.extend(v[i..=j].iter().map(i64::to_string));
        }
        i = j + 1;
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The rows' time span as people read it: its length, and its start as a UTC date-time (or,
/// for a trace clock that starts at its own zero, as a time on that clock). The raw
/// nanoseconds are in `--format json` and `csv`.
fn span_text(r: &RunSummary) -> String {
    match (r.first_ns, r.last_ns) {
        (Some(a), Some(b)) => {
            let from = fmt::utc_ns(a)
                .unwrap_or_else(|| format!("{} on the trace's own clock", fmt::duration_ns(a)));
            format!("{} from {from}", fmt::duration_ns(b - a))
        }
        _ => "-".into(),
    }
}

fn print_run(out: &mut impl Write, r: &RunSummary) -> Result<()> {
    writeln!(out, "run {}", r.run)?;
    writeln!(
        out,
        "  workload {}; platform {}; format {}; devices {}",
        r.workload,
        list(&r.platforms),
        list(&r.formats),
        list(&r.devices)
    )?;
    writeln!(
        out,
        "  ranks {} ({}); world size {}",
        ranges(&r.ranks),
        r.ranks.len(),
        list(&r.world_sizes)
    )?;
    writeln!(
        out,
        "  steps {} ({}; {} rank-step rows); {} GPU activities outside every step",
        r.steps.len(),
        list(&r.steps),
        r.step_rows,
        r.outside_activities
    )?;
    writeln!(
        out,
        "  {} GPU activities, {} CPU ops; span {}",
        r.gpu_activities,
        r.cpu_ops,
        span_text(r)
    )?;
    writeln!(out, "  files ({}): {}", r.files.len(), list(&r.files))?;
    print_findings(out, &r.findings)?;
    writeln!(out)?;
    Ok(())
}

fn print_findings(out: &mut impl Write, f: &[CodeSummary]) -> Result<()> {
    let sum = |sev: &str| -> i64 {
        f.iter()
            .filter(|c| c.severity == sev)
            .map(|c| c.count)
            .sum()
    };
    writeln!(
        out,
        "  findings: {} trouble, {} noise{}",
        sum("trouble"),
        sum("noise"),
        if f.is_empty() {
            ""
        } else {
            " (first example of each; --diagnostics lists them)"
        }
    )?;
    for c in f {
        let at = match (c.rank, c.offset) {
            (Some(r), Some(o)) => format!("rank {r} @{o}"),
            (Some(r), None) => format!("rank {r}"),
            _ => String::new(),
        };
        writeln!(
            out,
            "    {:<7} {:<22} {:>8} in {} files  {}: {}",
            c.severity, c.code, c.count, c.files, at, c.example
        )?;
    }
    Ok(())
}

fn code_json(c: &CodeSummary) -> Value {
    json!({
        "code": c.code, "severity": c.severity, "count": c.count, "files": c.files,
        "example": c.example, "rank": c.rank, "offset": c.offset,
        "meaning": info::meaning(&c.code),
    })
}

fn run_json(r: &RunSummary) -> Value {
    json!({
        "run": r.run, "workload": r.workload, "platforms": r.platforms, "formats": r.formats,
        "devices": r.devices, "ranks": r.ranks, "world_sizes": r.world_sizes,
        "steps": r.steps, "step_rows": r.step_rows,
        "outside_step_activities": r.outside_activities,
        "gpu_activities": r.gpu_activities, "cpu_ops": r.cpu_ops, "files": r.files,
        "first_ns": r.first_ns, "last_ns": r.last_ns,
        "findings": r.findings.iter().map(code_json).collect::<Vec<_>>(),
    })
}

/// One line per run; lists joined by `;`, findings as `code=count`.
fn write_runs_csv(out: &mut impl Write, runs: &[RunSummary]) -> Result<()> {
    writeln!(out, "run,workload,platforms,formats,devices,ranks,world_sizes,steps,step_rows,outside_step_activities,gpu_activities,cpu_ops,files,first_ns,last_ns,trouble,noise")?;
    let join = |v: Vec<String>| csv_cell(polars::prelude::AnyValue::String(&v.join(";")));
    let s = |v: &[String]| join(v.to_vec());
    let n = |v: &[i64]| join(v.iter().map(i64::to_string).collect());
    let opt = |v: Option<i64>| v.map_or(String::new(), |x| x.to_string());
    for r in runs {
        let sev = |sev: &str| {
            join(
                r.findings
                    .iter()
                    .filter(|c| c.severity == sev)
                    .map(|c| format!("{}={}", c.code, c.count))
                    .collect(),
            )
        };
        let cells = [
            s(std::slice::from_ref(&r.run)),
            s(std::slice::from_ref(&r.workload)),
            s(&r.platforms),
            s(&r.formats),
            s(&r.devices),
            n(&r.ranks),
            n(&r.world_sizes),
            n(&r.steps),
            r.step_rows.to_string(),
            r.outside_activities.to_string(),
            r.gpu_activities.to_string(),
            r.cpu_ops.to_string(),
            s(&r.files),
            opt(r.first_ns),
            opt(r.last_ns),
            sev("trouble"),
            sev("noise"),
        ];
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}
