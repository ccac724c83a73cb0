//! `aorta collectives`: match every run's collectives across its ranks, write the three
//! collective tables and the runs' clock columns, and print the straggler summary first,
//! then the rows asked for.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use aorta_reports::fmt;
use aorta_transform::collectives::{self, Job, Status};
use polars::prelude::*;
use serde_json::{json, Value};

use crate::cli::{CollectivesArgs, CollectivesBy, Format};
use crate::frame_out::{frame_json, write_csv};
use crate::overlap_table::{render, Col, Show};

pub(crate) fn run(args: CollectivesArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let access = crate::dataset_lock::for_write(root, "aorta collectives")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    let mut jobs = Vec::with_capacity(runs.len());
    for run in &runs {
        let mut job = Job::analyze(root, run)?;
        job.explain(root)?;
        jobs.push(job);
    }
    if access.writable() {
        collectives::write(root, &jobs)?;
    } else {
        crate::dataset_lock::not_saved(root, "collective tables and clock offsets");
    }
    let format = if args.json { Format::Json } else { args.format };
    let mut out = std::io::stdout().lock();
    let rows = jobs
        .iter()
        .map(|j| view(j, args.by))
        .collect::<PolarsResult<Vec<_>>>()?;
    match format {
        Format::Table => {
            for (job, rows) in jobs.iter().zip(&rows) {
                print_summary(&mut out, job, args.top)?;
                let (keys, cols) = columns(args.by);
                writeln!(out, "by {} (times in ms):", by_name(args.by))?;
                out.write_all(render(rows, None, keys, cols)?.as_bytes())?;
                writeln!(out)?;
            }
        }
        Format::Csv => write_csv(&mut out, &rows.iter().collect::<Vec<_>>())?,
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "by": by_name(args.by),
                "runs": jobs.iter().zip(&rows).map(|(j, r)| run_json(j, r, args.top)).collect::<Vec<_>>(),
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn by_name(by: CollectivesBy) -> &'static str {
    match by {
        CollectivesBy::Instance => "instance",
        CollectivesBy::Step => "step",
        CollectivesBy::Rank => "rank",
        CollectivesBy::Kind => "kind",
    }
}

fn view(job: &Job, by: CollectivesBy) -> PolarsResult<DataFrame> {
    match by {
        CollectivesBy::Instance => job.instance_frame(),
        CollectivesBy::Step => job.step_view(),
        CollectivesBy::Rank => job.rank_view(),
        CollectivesBy::Kind => job.kind_view(),
    }
}

const RANK_COLUMNS: &[Col] = &[
    ("place", "straggler_rank", Show::Plain),
    ("instances", "instances", Show::Plain),
    ("last", "times_last", Show::Plain),
    ("caused", "caused_ns", Show::Ms),
    ("wait", "wait_ns", Show::Ms),
    ("transfer", "transfer_ns", Show::Ms),
    ("wait_%", "wait_pct", Show::Pct),
    ("clock_offset", "clock_offset_ns", Show::Ms),
    ("spread", "clock_offset_spread_ns", Show::Ms),
    ("clock", "clock_source", Show::Plain),
];

const STEP_COLUMNS: &[Col] = &[
    ("place", "straggler_rank", Show::Plain),
    ("last", "times_last", Show::Plain),
    ("caused", "caused_ns", Show::Ms),
    ("wait", "wait_ns", Show::Ms),
    ("transfer", "transfer_ns", Show::Ms),
    ("wait_%", "wait_pct", Show::Pct),
];

const INSTANCE_COLUMNS: &[Col] = &[
    ("kind", "kind", Show::Plain),
    ("status", "status", Show::Plain),
    ("ranks", "ranks", Show::Plain),
    ("step", "step", Show::Plain),
    ("skew", "skew_ns", Show::Ms),
    ("last_rank", "last_rank", Show::Plain),
    ("caused", "caused_ns", Show::Ms),
    ("transfer", "transfer_ns", Show::Ms),
    ("busbw_GB/s", "busbw_gbps", Show::Gbps),
    ("late_before", "late_category", Show::Plain),
];

const KIND_COLUMNS: &[Col] = &[
    ("instances", "instances", Show::Plain),
    ("kernels", "kernels", Show::Plain),
    ("wait", "wait_ns", Show::Ms),
    ("transfer", "transfer_ns", Show::Ms),
    ("wait_%", "wait_pct", Show::Pct),
    ("median_skew", "median_skew_ns", Show::MsFloat),
    ("busbw_GB/s", "median_busbw_gbps", Show::Gbps),
];

fn columns(by: CollectivesBy) -> (&'static [&'static str], &'static [Col]) {
    match by {
        CollectivesBy::Instance => (&["process_group", "seq"], INSTANCE_COLUMNS),
        CollectivesBy::Step => (&["step", "rank"], STEP_COLUMNS),
        CollectivesBy::Rank => (&["rank"], RANK_COLUMNS),
        CollectivesBy::Kind => (&["kind"], KIND_COLUMNS),
    }
}

/// How many instances have each status.
fn status_counts(job: &Job) -> Vec<(&'static str, usize)> {
    let all = [
        Status::Paired,
        Status::Single,
        Status::Unpaired,
        Status::KindMismatch,
        Status::MissingRanks,
    ];
    all.iter()
        .map(|s| (s.as_str(), job.status.iter().filter(|x| *x == s).count()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The late arrivals with the most caused delay, as lines.
fn late_lines(job: &Job, top: usize) -> Vec<String> {
    let mut late: Vec<usize> = (0..job.instances.len())
        .filter(|&i| job.late.get(i).is_some_and(Option::is_some))
        .collect();
    late.sort_by_key(|&i| job.arrivals[i].map(|a| std::cmp::Reverse(a.last - a.second)));
    late.iter()
        .take(top)
        .filter_map(|&i| {
            let (a, l) = (job.arrivals[i]?, job.late[i].as_ref()?);
            let inst = &job.instances[i];
            let kind = aorta_ingest::classify::COMM_OPS[inst.kind as usize];
            let step = collectives::NO_STEP;
            let step = if a.step == step { "-".into() } else { a.step.to_string() };
            Some(format!(
                "  process group {}, seq {} ({kind}, step {step}): rank {} arrived {} ms after the others; before it its GPU was {} ({} ms busy): {}",
                job.groups[inst.group as usize].label(),
                inst.seq,
                a.last_rank,
                fmt::ms_ns(a.last - a.second),
                l.category,
                fmt::ms_ns(l.busy_ns),
                if l.ops.is_empty() { "nothing ran" } else { &l.ops },
            ))
        })
        .collect()
}

fn print_summary(out: &mut impl Write, job: &Job, top: usize) -> Result<()> {
    let counts: Vec<String> = status_counts(job)
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    let world = job.world_size.map_or("?".into(), |w| w.to_string());
    writeln!(
        out,
        "run {}: {} of {world} ranks traced, {} process group(s), {} collective instances ({})",
        job.run,
        job.ranks.len(),
        job.groups.len(),
        job.instances.len(),
        if counts.is_empty() {
            "none".into()
        } else {
            counts.join(", ")
        }
    )?;
    if job.instances.is_empty() {
        writeln!(out, "  no communication kernels: nothing to match\n")?;
        return Ok(());
    }
    let offsets: Vec<i64> = job.clocks.iter().skip(1).map(|c| c.offset_ns).collect();
    if let (Some(lo), Some(hi)) = (offsets.iter().min(), offsets.iter().max()) {
        let spread = job
            .clocks
            .iter()
            .filter_map(|c| c.spread_ns)
            .max()
            .unwrap_or(0);
        writeln!(
            out,
            "clocks: against rank {}, offsets {} .. {} ms (largest p10-p90 spread {} ms)",
            job.reference().unwrap_or(0),
            fmt::ms_ns(*lo),
            fmt::ms_ns(*hi),
            fmt::ms_ns(spread)
        )?;
    }
    writeln!(
        out,
        "stragglers (caused = the delay a rank alone imposed, as the last to arrive):"
    )?;
    for (place, rank, s) in job.straggler_order().iter().take(top) {
        let comm = s.wait_ns + s.transfer_ns;
        let share = if comm > 0 {
            100.0 * s.wait_ns as f64 / comm as f64
        } else {
            0.0
        };
        writeln!(
            out,
            "  {place}. rank {rank}: last in {} of {} instances, caused {} ms; waited {} ms ({share:.1} % of its comm time)",
            s.times_last,
            s.instances,
            fmt::ms_ns(s.caused_ns),
            fmt::ms_ns(s.wait_ns),
        )?;
    }
    let late = late_lines(job, top);
    if !late.is_empty() {
        let min = fmt::ms_ns(collectives::LATE_NS);
        writeln!(
            out,
            "late arrivals (the largest; an arrival at least {min} ms after the second-to-last):"
        )?;
        for l in late {
            writeln!(out, "{l}")?;
        }
    }
    for f in job.findings() {
        writeln!(out, "note: {} x{}: {}", f.code, f.count, f.example)?;
    }
    Ok(())
}

fn run_json(job: &Job, rows: &DataFrame, top: usize) -> Value {
    let status: serde_json::Map<String, Value> = status_counts(job)
        .into_iter()
        .map(|(s, n)| (s.to_string(), n.into()))
        .collect();
    let findings: Vec<Value> = job
        .findings()
        .iter()
        .map(|f| json!({"code": f.code, "count": f.count, "example": f.example}))
        .collect();
    json!({
        "run": job.run,
        "ranks": job.ranks.len(),
        "world_size": job.world_size,
        "reference_rank": job.reference(),
        "instances": status,
        "stragglers": frame_json(&job.rank_view().unwrap_or_default()),
        "late": late_lines(job, top).iter().map(|l| l.trim()).collect::<Vec<_>>(),
        "findings": findings,
        "rows": frame_json(rows),
    })
}
