//! Arguments of the everyday toolbox (`info`, `kernels`, `memory`, `sql`, `dataset rm|relabel`): the
//! questions HTA, TraceLens and Nsight Systems users ask every day, one command each.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cli::Format;

pub(crate) const INFO_EXAMPLES: &str = "\
Examples:
  aorta info                               # every run of ./aorta-data
  aorta info ds --run cuda                 # one run
  aorta info ds --run cuda --diagnostics   # every finding of that run, with its example
  aorta info --format json > info.json

Per run: workload (the label's last component, what `aorta compare` pairs by), platforms (of
its traces: a JSONL log has none), formats, devices, ranks, world size, steps (real
ProfilerStep numbers; GPU activity outside every step is counted on its own, never as a
step), source files, and the time span of its rows: its length and its start as a UTC
date-time (first_ns and last_ns, raw, in --format json and csv). Findings per diagnostic code with a severity: `trouble` (worth a look, e.g.
same_stream_overlap, kernel_without_launch) or `noise` (expected in healthy traces:
outside_steps, jsonl_non_numeric, skipped_category, rank_default), and the first example of
each. docs/TOOLBOX.md.";

#[derive(Args, Debug)]
pub(crate) struct InfoArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// List every finding (the diagnostics rows) instead of the summary.
    #[arg(long)]
    pub diagnostics: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub(crate) const KERNELS_EXAMPLES: &str = "\
Examples:
  aorta kernels                            # top 10 kernels of every run of ./aorta-data
  aorta kernels ds --run cuda --top 20
  aorta kernels --by rank                  # top 10 per rank
  aorta kernels --by category --top 3      # the 3 costliest of each category
  aorta kernels --by subcategory --top 3   # other_compute split: elementwise, normalization, ...
  aorta kernels --by step --format csv     # per step; `-` = outside every step

A kernel is a GPU activity name (memcpys and memsets by their names too). Per group: count,
total, mean, p50 and p99 duration (end - start, ns; percentiles interpolated as numpy's),
% of the group's GPU time (the sum of all its activities' durations: concurrent streams add
up), and the launching CPU operator (by External id, else through the runtime call; the one
with most of the kernel's time). Activity outside every ProfilerStep is included: in the
run, rank and category groups (the header says how much), and as its own step `-` with
--by step. --by subcategory splits other_compute by the [[subcategory]] rows of the rule
table, from the kernel name and its launching operator (docs/CLASSIFICATION.md).
docs/TOOLBOX.md.";

/// What one group of `aorta kernels` is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelsBy {
    /// The whole run.
    Run,
    /// Each rank.
    Rank,
    /// Each category (gemm, comm, attention, other_compute, memcpy, memset).
    Category,
    /// Each subcategory of other_compute (elementwise, normalization, reduction, softmax,
    /// optimizer, embedding, convolution, copy_kernel, fused, other, and any from `--rules`),
    /// every other category whole.
    Subcategory,
    /// Each step (`-`: outside every step).
    Step,
}

#[derive(Args, Debug)]
pub(crate) struct KernelsArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Groups: per run, rank, category, subcategory or step.
    #[arg(long, value_enum, default_value_t = KernelsBy::Run)]
    pub by: KernelsBy,
    /// Kernels listed per group, costliest first.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub(crate) const DATASET_EXAMPLES: &str = "\
Examples:
  aorta dataset rm cuda/old_try                # remove a run of ./aorta-data
  aorta dataset relabel cuda baseline ds       # rename run `cuda` of ds/ to `baseline`
  aorta dataset merge ds                       # fold the shards' manifests into ds/manifest.json

rm and relabel are one journalled commit under the dataset's lock (as an ingest): a process killed half
way leaves a commit the next writer finishes. The run's derived tables (overlap, collectives,
perf) move or go with it. A relabelled run stays relabelled when the same unchanged files are
ingested again.";

#[derive(Subcommand, Debug)]
pub(crate) enum DatasetCommand {
    /// Remove a run: its parts, manifest entries and derived tables.
    Rm {
        /// The run label.
        run: String,
        /// Dataset directory.
        #[arg(default_value = "aorta-data")]
        dataset: PathBuf,
    },
    /// Rename a run (its parts move to the new label's partition).
    Relabel {
        /// The run's label now.
        old: String,
        /// Its new label.
        new: String,
        /// Dataset directory.
        #[arg(default_value = "aorta-data")]
        dataset: PathBuf,
    },
    /// Fold the manifests of `aorta ingest --shard` into the dataset's own (readers merge them
    /// anyway; this leaves one file, and checks every run label is one job).
    Merge {
        /// Dataset directory.
        #[arg(default_value = "aorta-data")]
        dataset: PathBuf,
    },
}

#[derive(Args, Debug)]
pub(crate) struct DatasetArgs {
    #[command(subcommand)]
    pub command: DatasetCommand,
}

pub(crate) const MEMORY_EXAMPLES: &str = "\
Examples:
  aorta memory                             # peaks per rank, device and step, ./aorta-data
  aorta memory ds --run cuda --by rank     # one run, over the whole capture
  aorta memory --format csv > peaks.csv

From the profiler's allocator events (`profile_memory=True`; the `memory` table). Per
(run, rank, device[, step]): allocator events, allocations and frees with their bytes, the
allocated peak (the most the device held at any moment between the group's first and last
event: each event gives the total after it, and before it = after - bytes) and the reserved
peak (the caching allocator's hold: allocated plus cached). Step `-`: events outside every
ProfilerStep. Runs without memory events print a line saying so. docs/TOOLBOX.md.";

/// What one row of `aorta memory` is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemoryBy {
    /// Each rank, device and step.
    Step,
    /// Each rank and device, over the whole capture.
    Rank,
}

#[derive(Args, Debug)]
pub(crate) struct MemoryArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows: per step or per rank.
    #[arg(long, value_enum, default_value_t = MemoryBy::Step)]
    pub by: MemoryBy,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub(crate) const EXPORT_EXAMPLES: &str = "\
Examples:
  aorta export perfetto --run cuda --rank 0 --step 5 -o step5.json   # from ./aorta-data
  aorta export perfetto ds --run fsdp/fsdp_default                   # its lowest rank, first step
  aorta export perfetto ds --run job --all-ranks --step 3 -o all.json # every rank, one timeline
  # then open the file in ui.perfetto.dev (or chrome://tracing)

A Chrome trace-format JSON file of one step of one rank: the GPU activities of the step (by
their launch, as every aorta step table counts them) on one track per stream (`GPU <device>`
/ `stream <n>`), the CPU operators, annotations and runtime/driver calls of the step on their
threads (Python function rows left out), each slice's category as its `cat` and a colour
(`cname`), and a flow arrow from each launch to its kernel. Times are µs from the step's first
slice (otherData.t0_ns). Several ranks go on one timeline in aligned time: raw time minus
the rank's clock offset, which `aorta collectives` estimates (run it first for ranks on
different hosts; without it the offsets are taken as 0 and the command says so). Written
atomically to FILE and nowhere else. docs/TOOLBOX.md.";

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    #[command(subcommand)]
    pub command: ExportCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ExportCommand {
    /// One step of one or several ranks as a Chrome/Perfetto JSON trace.
    #[command(after_help = EXPORT_EXAMPLES)]
    Perfetto(PerfettoArgs),
}

#[derive(Args, Debug)]
pub(crate) struct PerfettoArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// The run (default: the dataset's only run).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// The rank (default: the run's lowest); several (`--rank 0,1` or repeated) go on one
    /// timeline, clock-aligned.
    #[arg(long, value_name = "R", value_delimiter = ',')]
    pub rank: Vec<i64>,
    /// Every rank of the run on one timeline, clock-aligned.
    #[arg(long, conflicts_with = "rank")]
    pub all_ranks: bool,
    /// The step (default: the rank's first; a trace without steps exports its whole capture).
    #[arg(long, value_name = "N")]
    pub step: Option<i64>,
    /// The trace file to write.
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = "aorta-perfetto.json"
    )]
    pub out: PathBuf,
}

pub(crate) const SQL_EXAMPLES: &str = "\
Examples:
  # GPU activities and GPU time per run and category (the README's polars example)
  aorta sql \"SELECT run, category, COUNT(*) AS n, SUM(end_ns - start_ns) AS gpu_ns
             FROM gpu_activities GROUP BY run, category ORDER BY run, category\"
  # the 5 longest kernels of one run, with their rank and step
  aorta sql \"SELECT rank, step, name, end_ns - start_ns AS ns FROM gpu_activities
             WHERE run = 'cuda' AND kind = 'kernel' ORDER BY ns DESC LIMIT 5\" ds
  # findings to check, per run and code, written as Parquet
  aorta sql \"SELECT run, code, SUM(count) AS n FROM diagnostics
             WHERE code NOT IN ('outside_steps', 'jsonl_non_numeric') GROUP BY run, code\" -o f.parquet
  # which engine answers a statement: polars for an aggregate like the first one
  aorta sql --explain \"SELECT category, COUNT(*) FROM gpu_activities GROUP BY category\"

Tables (each with its partition columns `run` and `rank`): runs, gpu_activities, cpu_ops,
steps, metrics, diagnostics, memory, and the derived ones (overlap_steps, overlap_ranks,
overlap_collectives, overlap_streams, overlap_stream_pairs, collectives,
collective_instances, collective_ranks, op_perf, perf_steps: empty until the command that
writes them has run). Columns: `aorta schema`, docs/SCHEMA.md. The SQL dialect is SQLite's
(sqlite.org/lang.html): one read-only statement; a table is read only if the query uses it,
only the columns it uses, and `run = '…'` / `rank = N` read only those partitions. -o writes
the result as .parquet, .csv or .json (by its extension, else --format), atomically.

Fast path: an aggregate over one table (every select item a GROUP BY column or COUNT(*),
COUNT(col), COUNT(DISTINCT col), SUM, TOTAL, AVG, MIN or MAX of an integer column, of
`col + col` or `col - col`, or COUNT/MIN/MAX of a text column), with WHERE a conjunction
(AND) of `column op literal` (=, <>, <, <=, >, >=, [NOT] IN (…), IS [NOT] NULL; the literal of
the column's type), and then ORDER BY result columns and LIMIT, is answered by polars from the
Parquet files instead of SQLite's row-by-row loop: the same rows, values and types, in the same
order. Anything else, and a sum that could overflow, runs on SQLite. --explain says which one a
statement takes; --sqlite forces SQLite.";

#[derive(Args, Debug)]
pub(crate) struct SqlArgs {
    /// One SQL statement (SELECT …).
    pub query: String,
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Output format (for -o: when the file's extension does not say).
    #[arg(long, value_enum, default_value_t = SqlFormat::Table)]
    pub format: SqlFormat,
    /// Write the result to FILE instead of printing it.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Run the statement on SQLite alone, row by row, even an aggregate that polars would
    /// answer (the same answer, slower: the reference the fast path is checked against).
    #[arg(long)]
    pub sqlite: bool,
    /// Print which engine would answer the statement (polars or SQLite), and why, without
    /// running it.
    #[arg(long, conflicts_with_all = ["out", "sqlite"])]
    pub explain: bool,
}

/// How `aorta sql` writes its result.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SqlFormat {
    /// Aligned text.
    Table,
    /// A JSON array of row objects.
    Json,
    /// CSV, one header line.
    Csv,
    /// Parquet (with -o only).
    Parquet,
}
