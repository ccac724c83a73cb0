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
    /// Read traces (Kineto and generic Chrome JSON, Nsight Systems SQLite, per-iteration JSONL) into a Parquet dataset.
    #[command(after_help = INGEST_EXAMPLES)]
    Ingest(IngestArgs),
    /// GEMM/communication overlap per rank, step and collective kind; writes the overlap tables.
    #[command(after_help = OVERLAP_EXAMPLES)]
    Overlap(OverlapArgs),
    /// Compare a reference (run or platform) with a candidate: steps, categories, operators, collectives.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Print the dataset schema (tables and columns).
    Schema(SchemaArgs),
}

const COMPARE_EXAMPLES: &str = "\
Examples:
  aorta ingest traces/ && aorta compare --reference cuda --candidate rocm
  aorta compare ds --reference h100_models --candidate mi300x_models -o cmp
  aorta compare --reference baseline --candidate pr --fail-if-regressed 5   # CI gate

A selector is a run label, else a platform (cuda, rocm). Levels: steps (step time = the step's
GPU window, comm, exposed comm, every overlap ratio), categories (GPU time per step = sum of
activity durations), operators (GPU time per step window, grouped by the launching CPU op and
its input shapes and dtypes), collectives (per kind, bytes, dtype, group size: time, algbw,
busbw). Every ratio is candidate / reference; each side's spread over steps and ranks is given
as median and p10-p90. Writes DIR/summary.json, DIR/compare_*.parquet and DIR/report.html.
Exit status: 0 ok, 1 regressed (--fail-if-regressed), 2 error.";

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Reference: a run label, else a platform (`cuda`, `rocm`).
    #[arg(long, value_name = "SEL")]
    pub reference: String,
    /// Candidate: a run label, else a platform.
    #[arg(long, value_name = "SEL")]
    pub candidate: String,
    /// Output directory for summary.json, the comparison tables and report.html.
    #[arg(short, long, value_name = "DIR", default_value = "aorta-compare")]
    pub out: PathBuf,
    /// Exit 1 when the candidate's median step time or exposed comm is worse than the
    /// reference's by more than PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_if_regressed: Option<f64>,
    /// Operators listed in the terminal summary.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

const OVERLAP_EXAMPLES: &str = "\
Examples:
  aorta overlap                          # every run of ./aorta-data: ranks x steps, totals
  aorta overlap ds --run cuda            # one run of the dataset in ds/
  aorta overlap --by rank                # one row per rank (the whole window)
  aorta overlap --by collective          # comm and exposed comm per collective kind
  aorta overlap --json > overlap.json    # for CI: rows and the run summary as JSON
  aorta overlap --by step --format csv   # the overlap_steps rows as CSV

Unions are taken across all streams of a rank. A step's window is [first start, last end] of
the activities attributed to it; the whole window covers every step. Ratios: overlap_ratio =
gemm∩comm / min(gemm, comm); comm_overlap_pct = 100 × compute∩comm / comm; compute_overlap_ratio
= compute∩comm / compute. The run summary gives median and p10–p90 over steps and over ranks.
The tables overlap_steps, overlap_ranks, overlap_collectives, overlap_streams and
overlap_stream_pairs are (re)written into the dataset for the runs shown (docs/OVERLAP.md).";

/// What one row of `aorta overlap` output is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// One row per rank and step, with a total row per rank.
    Step,
    /// One row per rank: the whole window.
    Rank,
    /// One row per rank, step and collective kind, with the rank totals.
    Collective,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned text, milliseconds.
    Table,
    /// One JSON document: the rows (ns) and the run summary.
    Json,
    /// CSV of the rows (ns), one header line.
    Csv,
}

#[derive(Args, Debug)]
pub struct OverlapArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows per step, per rank, or per collective kind.
    #[arg(long, value_enum, default_value_t = By::Step)]
    pub by: By,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

const INGEST_EXAMPLES: &str = "\
Examples:
  aorta ingest traces/                      # every trace under traces/ into ./aorta-data
  aorta ingest traces/cuda traces/rocm -o ds  # run labels: the first directory under each root
  aorta ingest rank0.pt.trace.json.gz --label baseline --rank 0
  aorta ingest traces/ --keep-going          # land the good files, list the broken ones
  aorta ingest job.sqlite --rank-map ranks.txt  # Nsight Systems export; ranks.txt: `12345 0`

Run labels: a file under ROOT/<dir>/... belongs to run <dir>; a file directly in ROOT to run
ROOT. Rank: the trace's own (Kineto distributedInfo.rank), else --rank-map by process id, else
the file name (rank3, rank-3, worker3), else --rank. A rank map has one `PID RANK` (or
`PID=RANK`) pair per line, `#` comments; an Nsight Systems export of several processes
without one numbers them in pid order (docs/INPUTS.md).
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
    /// Process id → rank for traces that carry no rank (Nsight Systems, generic Chrome):
    /// lines `PID RANK`, e.g. `1701896 0`.
    #[arg(long, value_name = "FILE")]
    pub rank_map: Option<PathBuf>,
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
