//! `aorta report`: one HTML page of a dataset (aorta-reports does the work), and a short
//! summary on the terminal saying what went into it.

use std::process::ExitCode;

use anyhow::Result;
use aorta_reports::{run_report, RunReportOptions};

use crate::cli::ReportArgs;

pub(crate) fn run(args: ReportArgs) -> Result<ExitCode> {
    let opts = RunReportOptions {
        runs: args.run,
        rank: args.rank,
        step: args.step,
        device_peaks: args.device_peaks,
        window: args.from.zip(args.to),
    };
    let _lock = crate::dataset_lock::for_read(&args.dataset, "aorta report")?;
    let r = run_report(&args.dataset, &opts, &args.out)?;
    crate::notes::print_job_notes(&args.dataset, &r.runs)?;
    let ranks: Vec<String> = r.ranks.iter().map(i64::to_string).collect();
    println!("runs:     {}", r.runs.join(", "));
    println!("ranks:    {}", ranks.join(", "));
    println!("steps:    {} (rank × step rows)", r.step_rows);
    match &r.timeline {
        Some(t) => println!(
            "timeline: run {} {} {}, {} of {} kernels drawn",
            t.run,
            if t.ranks.len() > 1 {
                let r: Vec<String> = t.ranks.iter().map(i64::to_string).collect();
                format!("ranks {}", r.join(", "))
            } else {
                format!("rank {}", t.rank)
            },
            match (t.whole_capture, t.step) {
                (true, _) => "the whole capture (no steps)".to_string(),
                (false, s) => format!(
                    "step {} ({})",
                    s.map_or("null".into(), |s| s.to_string()),
                    t.chosen_by
                ),
            },
            r.drawn,
            r.total
        ),
        None => println!("timeline: none (no GPU activities in the reported ranks)"),
    }
    if r.timelines > 1 {
        println!(
            "          and one timeline for each of the other {} runs",
            r.timelines - 1
        );
    }
    println!("overlap:  {}", overlap_origin(r.overlap_from_dataset));
    println!("wrote {} ({} charts)", r.out.display(), r.charts);
    Ok(ExitCode::SUCCESS)
}

fn overlap_origin(from_dataset: bool) -> &'static str {
    if from_dataset {
        "the dataset's overlap tables (aorta overlap)"
    } else {
        "computed from gpu_activities (aorta overlap has not written them since the last ingest)"
    }
}
