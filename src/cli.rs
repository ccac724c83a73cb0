//! Command-line arguments (clap derive), turned into typed options once.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "aorta",
    version,
    about = "GPU profiler traces (CUDA and ROCm) to one Parquet dataset, and the overlap questions answered",
    after_help = "Start with: aorta ingest traces/ -o aorta-data"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read traces (Kineto .json/.json.gz/.json.zst, per-iteration JSONL) into a Parquet dataset.
    #[command(after_help = INGEST_EXAMPLES)]
    Ingest(IngestArgs),
    /// Print the dataset schema (tables and columns).
    Schema(SchemaArgs),
}

const INGEST_EXAMPLES: &str = "\
Examples:
  aorta ingest traces/                      # every trace under traces/ into ./aorta-data
  aorta ingest traces/cuda traces/rocm -o ds  # run labels: the first directory under each root
  aorta ingest rank0.pt.trace.json.gz --label baseline --rank 0
  aorta ingest traces/ --keep-going          # land the good files, list the broken ones

Run labels: a file under ROOT/<dir>/... belongs to run <dir>; a file directly in ROOT to run
ROOT. Rank: distributedInfo.rank, else the file name (rank3, rank-3, worker3), else --rank.
Unchanged inputs (same content hash) are skipped; --force re-reads them. A failed run leaves
the previous dataset untouched. Exit status: 0 ok, 1 some files failed (--keep-going), 2 error.";

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Trace files or directories to walk.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Dataset directory to write (created if missing).
    #[arg(short, long, default_value = "aorta-data")]
    pub out: PathBuf,
    /// Run label for every input (default: first directory under each root).
    #[arg(long)]
    pub label: Option<String>,
    /// Rank for files whose trace and name carry none.
    #[arg(long)]
    pub rank: Option<i64>,
    /// Worker threads (default: one per core).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Keep ingesting the other files when one is broken; list failures at the end.
    #[arg(long)]
    pub keep_going: bool,
    /// Re-ingest inputs even when their content hash is unchanged.
    #[arg(long)]
    pub force: bool,
    /// Extra classification rules (TOML, same format as docs/CLASSIFICATION.md), tried first.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// No progress bar and no summary.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Print the full column reference (docs/SCHEMA.md) as Markdown.
    #[arg(long)]
    pub markdown: bool,
}

/// One line per table: its columns.
pub fn schema_summary() -> String {
    use aorta_ingest::schema::{SCHEMA_VERSION, TABLES};
    let mut s = format!("aorta dataset schema v{SCHEMA_VERSION} (partitioned by run, rank)\n");
    for t in TABLES {
        let cols: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
        s.push_str(&format!("{:<15} {}\n", t.name, cols.join(", ")));
    }
    s
}
