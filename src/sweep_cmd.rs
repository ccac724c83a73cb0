//! `aorta sweep`: dispatches to the runner ([`crate::sweep_run`]), the report, or the TP
//! scaling check, and prints what the library wrote.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use aorta_transform::tuning::sweep_report::{self, Options};
use aorta_transform::tuning::{tp_report, tp_scaling};

use crate::sweep_cli::{SweepArgs, SweepCommand, SweepReportArgs};

pub(crate) fn run(args: SweepArgs) -> Result<ExitCode> {
    match args.what {
        Some(SweepCommand::Tp(a)) => {
            if !(a.tolerance.is_finite() && a.tolerance >= 0.0) {
                bail!(
                    "--tolerance {}: expected a number >= 0 (0.2: 20 % above linear)",
                    a.tolerance
                );
            }
            let times = tp_scaling::read_times(&a.times)?;
            let report = tp_report::write(&times, a.tolerance, &a.out)?;
            print!("{}", report.summary);
            eprintln!("wrote {} in {}", names(&report.files), a.out.display());
            Ok(ExitCode::SUCCESS)
        }
        Some(SweepCommand::Report(a)) => {
            report(&a)?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let (Some(spec), Some(out)) = (args.spec, args.out) else {
                bail!("aorta sweep needs SPEC.toml and -o DIR (or `aorta sweep report|tp`; see --help)");
            };
            crate::sweep_run::run(&spec, &out, args.strict, args.dry_run)
        }
    }
}

fn names(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `aorta sweep report`: the report's files and page, and its summary on stdout.
pub(crate) fn report(a: &SweepReportArgs) -> Result<()> {
    if !(a.min_effect_pct.is_finite() && a.min_effect_pct >= 0.0) {
        bail!(
            "--min-effect-pct {}: expected a number >= 0",
            a.min_effect_pct
        );
    }
    if !(a.tolerance.is_finite() && a.tolerance >= 0.0) {
        bail!(
            "--tolerance {}: expected a number >= 0 (0.2: 20 % above linear)",
            a.tolerance
        );
    }
    write_report(
        &a.dataset,
        &a.out,
        Options {
            runs: a.runs.clone(),
            min_effect_pct: a.min_effect_pct,
            tolerance: a.tolerance,
        },
    )
}

/// Builds and writes the report of `dataset` into `out`.
pub(crate) fn write_report(dataset: &Path, out: &Path, opts: Options) -> Result<()> {
    aorta_transform::dataset::check(dataset)?;
    let r = sweep_report::build(dataset, &opts)?;
    let mut files = r.write(out)?;
    let page = out.join("sweep.html");
    aorta_reports::sweep_report(&r, &page)?;
    files.push(page);
    print!("{}", r.summary());
    eprintln!("wrote {} in {}", names(&files), out.display());
    Ok(())
}
