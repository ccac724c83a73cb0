//! `aorta export perfetto`: one step of one rank as a Chrome/Perfetto trace
//! (`aorta_transform::perfetto`), written atomically to the given file. Only reads the dataset.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use aorta_transform::perfetto::{self, Ranks};

use crate::toolbox_cli::{ExportArgs, ExportCommand, PerfettoArgs};

pub(crate) fn run(args: ExportArgs) -> Result<ExitCode> {
    match args.command {
        ExportCommand::Perfetto(a) => perfetto_trace(a),
    }
}

fn perfetto_trace(args: PerfettoArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta export perfetto")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    let run = match runs.as_slice() {
        [one] => one,
        [] => bail!("{}: no runs", root.display()),
        many => bail!(
            "{}: {} runs, pick one with --run (runs: {})",
            root.display(),
            many.len(),
            many.join(", ")
        ),
    };
    let ranks = match (args.all_ranks, args.rank.as_slice()) {
        (true, _) => Ranks::All,
        (false, []) => Ranks::Lowest,
        (false, listed) => Ranks::Listed(listed.to_vec()),
    };
    let w = perfetto::load(root, run, &ranks, args.step)?;
    let text = perfetto::chrome_trace(&w);
    aorta_ingest::atomic::write_bytes(&args.out, text.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    let step = w
        .step
        .map_or("(no steps: the whole capture)".into(), |s| s.to_string());
    for r in &w.ranks {
        println!(
            "run {} rank {} step {step}: {} GPU activities, {} CPU slices{}",
            w.run,
            r.rank,
            r.gpu.height(),
            r.cpu.height(),
            match (w.ranks.len(), r.aligned) {
                (1, _) => String::new(),
                (_, true) => format!(", clock offset {} ns", r.offset_ns),
                (_, false) => ", clock offset unknown: taken as 0 (run `aorta collectives`)".into(),
            }
        );
    }
    println!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
