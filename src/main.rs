//! The `aorta` command: parse arguments, dispatch to a stage crate, map errors to exit codes.

mod cli;
mod collectives_cmd;
mod compare_cmd;
mod dataset_cmd;
mod dataset_lock;
mod export_cmd;
mod frame_out;
mod idle_cli;
mod idle_cmd;
mod info_cmd;
mod ingest_cmd;
mod kernels_cmd;
mod memory_cmd;
mod notes;
mod overlap_cmd;
mod overlap_table;
mod perf_cmd;
mod report_cmd;
mod row_filter;
mod run_cmd;
mod sql_cmd;
mod sweep_cli;
mod sweep_cmd;
mod sweep_run;
mod text_table;
mod toolbox_cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The processor check has run (a constructor); this keeps it linked.
    assert!(aorta_ingest::cpu::linked());
    aorta_ingest::tune_allocator();
    aorta_ingest::atomic::file_size_limit_is_an_error();
    let args = cli::Cli::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            // Broken pipe (e.g. `aorta schema | head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            // The chain, minus causes the message above already ends with (library errors
            // print their own source: `{e:#}` would say "No such file…: No such file…").
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.ends_with(&c) {
                    msg = format!("{msg}: {c}");
                }
            }
            eprintln!("aorta: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: cli::Cli) -> anyhow::Result<ExitCode> {
    match args.command {
        cli::Command::Ingest(a) => ingest_cmd::run(a),
        cli::Command::Overlap(a) => overlap_cmd::run(a),
        cli::Command::Collectives(a) => collectives_cmd::run(a),
        cli::Command::Perf(a) => perf_cmd::run(a),
        cli::Command::Compare(a) => compare_cmd::run(a),
        cli::Command::Report(a) => report_cmd::run(a),
        cli::Command::Run(a) => run_cmd::run(a),
        cli::Command::Info(a) => info_cmd::run(a),
        cli::Command::Kernels(a) => kernels_cmd::run(a),
        cli::Command::Breakdown(a) => idle_cmd::run_breakdown(a),
        cli::Command::Launches(a) => idle_cmd::run_launches(a),
        cli::Command::Memory(a) => memory_cmd::run(a),
        cli::Command::Export(a) => export_cmd::run(a),
        cli::Command::Dataset(a) => dataset_cmd::run(a),
        cli::Command::Sql(a) => sql_cmd::run(a),
        cli::Command::Sweep(a) => sweep_cmd::run(a),
        cli::Command::Schema(a) => {
            use std::io::Write;
            let text = if a.markdown {
                aorta_ingest::schema::markdown()
            } else {
                cli::schema_summary()
            };
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
