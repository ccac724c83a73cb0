//! `aorta sweep`: prints what the library wrote.

use std::process::ExitCode;

use anyhow::{bail, Result};
use aorta_transform::tuning::{tp_report, tp_scaling};

use crate::sweep_cli::{SweepArgs, SweepCommand};

pub(crate) fn run(args: SweepArgs) -> Result<ExitCode> {
    match args.what {
        SweepCommand::Tp(a) => {
            if !(a.tolerance.is_finite() && a.tolerance >= 0.0) {
                bail!(
                    "--tolerance {}: expected a number >= 0 (0.2: 20 % above linear)",
                    a.tolerance
                );
            }
            let times = tp_scaling::read_times(&a.times)?;
            let report = tp_report::write(&times, a.tolerance, &a.out)?;
            print!("{}", report.summary);
            let names: Vec<String> = report
                .files
                .iter()
                .map(|p| {
                    p.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            eprintln!("wrote {} in {}", names.join(", "), a.out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
