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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Read traces (Kineto and generic Chrome JSON, Nsight Systems SQLite, per-iteration JSONL) into a Parquet dataset.
    #[command(after_help = INGEST_EXAMPLES)]
    Ingest(IngestArgs),
    /// GEMM/communication overlap per rank, step and collective kind; writes the overlap tables.
    #[command(after_help = OVERLAP_EXAMPLES)]
    Overlap(OverlapArgs),
    /// The job across ranks: collectives matched, clocks aligned, waiting vs transfer, stragglers.
    #[command(after_help = COLLECTIVES_EXAMPLES)]
    Collectives(CollectivesArgs),
    /// Is the compute fast? FLOPs and bytes per operator, TFLOP/s against the GPU's peak, roofline, MFU per step.
    #[command(after_help = PERF_EXAMPLES)]
    Perf(PerfArgs),
    /// Compare a reference (run or platform) with a candidate: steps, categories, operators, collectives.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// One self-contained HTML page: a step's timeline, overlap, categories, collectives.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Run a GPU workload (or take its output), ingest it, print the overlap, write the report.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// What a dataset holds: runs, ranks, devices, steps, files, and its findings by severity.
    #[command(after_help = crate::toolbox_cli::INFO_EXAMPLES)]
    Info(crate::toolbox_cli::InfoArgs),
    /// The costliest kernels per run, rank, category, subcategory or step, with their launching operator.
    #[command(after_help = crate::toolbox_cli::KERNELS_EXAMPLES)]
    Kernels(crate::toolbox_cli::KernelsArgs),
    /// Compute, non-compute and idle time per rank or step, idle split host-wait / kernel-wait / other (HTA).
    #[command(after_help = crate::idle_cli::BREAKDOWN_EXAMPLES)]
    Breakdown(crate::idle_cli::BreakdownArgs),
    /// Launch overhead, launch delay, longest launch gaps and the GPU launch queue per rank or step (HTA).
    #[command(after_help = crate::idle_cli::LAUNCHES_EXAMPLES)]
    Launches(crate::idle_cli::LaunchesArgs),
    /// Device memory per rank and step: allocated and reserved peaks from the allocator events.
    #[command(after_help = crate::toolbox_cli::MEMORY_EXAMPLES)]
    Memory(crate::toolbox_cli::MemoryArgs),
    /// Export a window of the dataset to another tool's format (Perfetto).
    Export(crate::toolbox_cli::ExportArgs),
    /// SQL (SQLite's dialect) over the dataset's tables; the result as a table, CSV, JSON or Parquet.
    #[command(after_help = crate::toolbox_cli::SQL_EXAMPLES)]
    Sql(crate::toolbox_cli::SqlArgs),
    /// Remove or relabel a run of a dataset (atomic).
    #[command(after_help = crate::toolbox_cli::DATASET_EXAMPLES)]
    Dataset(crate::toolbox_cli::DatasetArgs),
    /// Which configuration wins: `aorta sweep tp` checks TP scaling from measured times.
    Sweep(crate::sweep_cli::SweepArgs),
    /// Print the dataset schema (tables and columns).
    Schema(SchemaArgs),
}

const RUN_EXAMPLES: &str = "\
Examples:
  aorta run overlap-bench --ranks 2 -o out -- --collective all-reduce --bytes 67108864
  aorta run overlap-bench -o out -- --serial          # the same, streams forced serial
  aorta run copy-overlap -o out -- --direction both --copy-bytes 268435456
  aorta run fsdp --ranks 2 -o out -- --no-forward-prefetch --batch-size 4
  aorta run workloads/traces/overlap-bench/allreduce_overlap -o out   # existing output
  aorta run overlap-bench -o out --strict=negative_duration   # exit 1 on that finding (CI)

WORKLOAD is a workload name or a path to traces already written. Workloads:
  overlap-bench  aorta-overlap-bench: GEMMs + NCCL collectives on two streams (found next to
                 the aorta binary or on PATH); one process per rank (RANK, WORLD_SIZE, a
                 rendezvous file)
  copy-overlap   aorta-copy-overlap: GEMMs + async host<->device copies on a high-priority
                 stream, measured serial and overlapped; one independent process per rank
  fsdp           PyTorch FSDP2 steps with the Python aorta knobs (the script is built into
                 aorta and written to DIR/workload); started with torchrun, needs PyTorch in
                 python3 or $AORTA_PYTHON
Arguments after `--` go to the workload, which writes into DIR/traces. Then DIR/data is the
dataset (run label: --label, else the workload or directory name), the overlap per rank is
printed and written into it, and DIR/report.html is the report (as `aorta report`).";

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// A workload name (overlap-bench, copy-overlap, fsdp) or a directory / file of traces already written.
    pub workload: String,
    /// Output directory: traces/, data/ (the dataset) and report.html.
    #[arg(short, long, value_name = "DIR", default_value = "aorta-run")]
    pub out: PathBuf,
    /// Processes (ranks, one GPU each) to launch.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// Run label in the dataset (default: the workload or directory name).
    #[arg(long)]
    pub label: Option<String>,
    /// Exit 1 on data-quality findings of the ingest, as `aorta ingest --strict[=SPEC]`
    /// (the overlap and the report are still written).
    #[arg(long, value_name = "SPEC", num_args = 0..=1, require_equals = true,
          default_missing_value = "all")]
    pub strict: Option<aorta_ingest::strict::Strict>,
    /// Arguments for the workload (after `--`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

const COMPARE_EXAMPLES: &str = "\
Examples:
  aorta ingest traces/ && aorta compare --reference cuda --candidate rocm
  aorta compare ds --reference h100_models --candidate mi300x_models -o cmp
  aorta compare --reference baseline --candidate pr --fail-if-regressed 5   # CI gate
  aorta compare --reference baseline --candidate pr \
      --fail-if-regressed 'step_ms=5,category.gemm=3,collective.all_reduce.busbw=-10,op.aten::mm=5'

A selector is a run label, else a label prefix (h100_models selects h100_models/<model>), else
a platform (cuda, rocm). Runs pair across the sides by their last label component (bert-small
with bert-small; one run a side pairs as is); only pairs are compared, and the unpaired are
listed. Every level is computed per pair (each key: one row per pair, with its own ratio);
with several pairs each key leads with an overall row, the geometric mean of the pairs' ratios
with their p10-p90 (no side medians: they would mix workloads), which is also what
--fail-if-regressed judges. Before any ratio the pairs are
checked: same world size, ProfilerStep steps on both sides or neither, and most operator time
in operators both sides ran; a failed check refuses the ratios (--force computes them, and
--fail-if-regressed exits 2). Levels: steps (step_ms = the step's
ProfilerStep span, else its GPU window; gpu_window_ms; comm, exposed comm, every overlap ratio), categories (GPU time per step = sum of
activity durations), operators (GPU time per step window, grouped by the launching CPU op and
its input shapes and dtypes), collectives (per kind, bytes, dtype, group size: time, algbw,
busbw). Operators also carry each side's achieved TFLOP/s and % of its own GPU's peak (the
models of `aorta perf`). Every ratio is candidate / reference; each side's spread over a pair's
steps and ranks is given as median and p10-p90. The terminal summary fits in 160 columns
(an operator's shapes end in … where cut; collective sizes in KiB/MiB/GiB); summary.json keeps
every value whole. Writes DIR/summary.json, DIR/compare_*.parquet and DIR/report.html.
Exit status: 0 ok, 1 regressed (--fail-if-regressed), 2 error.";

/// `--fail-if-regressed`'s rules (one newtype: clap reads a `Vec` field as repeated values).
#[derive(Clone, Debug)]
pub(crate) struct GateSpec(pub Vec<aorta_transform::compare::Rule>);

/// `--fail-if-regressed`'s SPEC, parsed when the arguments are.
fn parse_gate(spec: &str) -> Result<GateSpec, String> {
    aorta_transform::compare::parse_gate(spec)
        .map(GateSpec)
        .map_err(|e| e.to_string())
}

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
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
    /// Exit 1 when the candidate regressed: PCT alone gates the median step time and exposed
    /// comm (growth past PCT percent); KEY=PCT rules, comma-separated, gate any steps-level key
    /// (step_ms, comm_hidden_pct, …), category.NAME, subcategory.NAME,
    /// collective.KIND.busbw|algbw|ms or op.NAME. With several pairs the change judged is the
    /// geometric mean of the pairs' ratios.
    /// A negative PCT fails on a drop past it (bandwidth). docs/COMPARE.md.
    #[arg(long, value_name = "PCT|KEY=PCT,…", value_parser = parse_gate)]
    pub fail_if_regressed: Option<GateSpec>,
    /// Operators listed in the terminal summary, per pair.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// More GPUs, or other peaks for known ones, for the operators' % of peak (as `aorta perf`).
    #[arg(long, value_name = "FILE")]
    pub device_peaks: Option<PathBuf>,
    /// What summary.json's Python aorta keys (`datasets`) are computed from: the JSONL log's
    /// iterations (the default when a side has one: the tool's own numbers) or the trace's steps.
    #[arg(long, value_enum)]
    pub source: Option<StepSource>,
    /// Compute the ratios even when the sides fail the comparability check (different world
    /// sizes, step structures or operator mixes); the verdict stays in summary.json.
    #[arg(long)]
    pub force: bool,
}

/// The step rows a Python-compatible summary is computed from.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum StepSource {
    Jsonl,
    Trace,
}

const REPORT_EXAMPLES: &str = "\
Examples:
  aorta report                           # every run of ./aorta-data into report.html
  aorta report ds --run cuda -o cuda.html
  aorta report ds --rank 1 --step 7      # rank 1 only; the timeline shows step 7
  aorta report ds --run cuda --run rocm  # two runs on one page, a timeline each
  aorta report ds --from 120 --to 180    # the timeline's 120-180 ms, every kernel in it

The page embeds plotly.js and opens offline. It opens with each run's headline: who is late
and by how much, exposed comm and its waiting, idle share and cause, MFU, data-quality findings,
each linked to its section. It names each run's platform, GPU, world size and versions. Charts:
per run, the per-stream timeline of one step on every rank (up to 8, sampled evenly; by default
the median-duration step of its first rank, or the whole capture when it has no steps; at most
4000 kernels, the longest; --from/--to narrow it, and an empty window is an error saying where
the activity lies), exposed comm and compute∩comm per step with comm_hidden_pct
per rank, GPU time per category per step (sum
of kernel durations), exposed comm per collective kind, a roofline of the operators (by shape,
sized by GPU time) and MFU per step. Numbers are those of `aorta overlap` and `aorta perf`
(the overlap tables are read from the dataset, or computed when `aorta overlap` has not run).
See docs/REPORTS.md.";

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only these runs (repeat the flag; default: every run).
    #[arg(long, value_name = "L")]
    pub run: Vec<String>,
    /// Only this rank (default: every rank; the timeline shows the first).
    #[arg(long, value_name = "R")]
    pub rank: Option<i64>,
    /// The timeline's step (default: the median-duration step).
    #[arg(long, value_name = "N")]
    pub step: Option<i64>,
    /// Draw the timeline from MS milliseconds after the step's (or a stepless capture's)
    /// first activity; with --to, every activity of the window up to the cap.
    #[arg(long, value_name = "MS", requires = "to")]
    pub from: Option<f64>,
    /// Draw the timeline up to MS milliseconds after the first activity.
    #[arg(long, value_name = "MS", requires = "from")]
    pub to: Option<f64>,
    /// The HTML file to write (missing parent folders are created).
    #[arg(short, long, default_value = "report.html")]
    pub out: PathBuf,
    /// More GPUs, or other peaks for known ones, for the roofline and MFU (as `aorta perf`).
    #[arg(long, value_name = "FILE")]
    pub device_peaks: Option<PathBuf>,
}

const OVERLAP_EXAMPLES: &str = "\
Examples:
  aorta overlap                          # every run of ./aorta-data: ranks x steps, totals
  aorta overlap ds --run cuda            # one run of the dataset in ds/
  aorta overlap ds --run a --run b       # two runs
  aorta overlap --rank 0,7 --step 12     # a 64-rank job: two ranks, one step
  aorta overlap --by rank                # one row per rank (the whole window)
  aorta overlap --by collective          # comm and exposed comm per collective kind
  aorta overlap --by size                # calls, algbw, busbw per collective kind and size
  aorta overlap --json > overlap.json    # for CI: rows and the run summary as JSON
  aorta overlap --by step --format csv   # the overlap_steps rows as CSV

Unions are taken across all streams of a rank. A step's window is [first start, last end] of
the activities attributed to it; the whole window covers every step. Ratios: tp_overlap_ratio =
gemm∩comm / min(gemm, comm); comm_hidden_pct = 100 × compute∩comm / comm; compute_overlap_ratio
= compute∩comm / compute. The run summary gives median and p10–p90 over steps and over ranks.
--rank and --step only pick the rows shown (and the summary's spreads over them); the tables
overlap_steps, overlap_ranks, overlap_collectives, overlap_streams and overlap_stream_pairs are
(re)written whole into the dataset for the runs shown (docs/OVERLAP.md).";

/// What one row of `aorta overlap` output is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum By {
    /// One row per rank and step, with a total row per rank.
    Step,
    /// One row per rank: the whole window.
    Rank,
    /// One row per rank, step and collective kind, with the rank totals; then the run's
    /// calls per collective kind and message size (as `--by size`).
    Collective,
    /// One row per collective kind, message size, dtype and group size: calls, transfer time
    /// per call, algbw and busbw (aorta compare's collective level, for one run).
    Size,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Aligned text, milliseconds.
    Table,
    /// One JSON document: the rows (ns) and the run summary.
    Json,
    /// CSV of the rows (ns), one header line.
    Csv,
}

#[derive(Args, Debug)]
pub(crate) struct OverlapArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only these runs (repeat the flag; default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Vec<String>,
    /// Show only these ranks' rows (repeat the flag or `--rank 0,1`; default: every rank).
    /// The numbers are those of the whole run either way.
    #[arg(long, value_name = "R", value_delimiter = ',')]
    pub rank: Vec<i64>,
    /// Show only these steps' rows, `--by step` and `--by collective` (repeat the flag or
    /// `--step 3,4`; default: every step). The rank totals stay those of the whole window.
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub step: Vec<i64>,
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

const COLLECTIVES_EXAMPLES: &str = "\
Examples:
  aorta collectives                       # every run of ./aorta-data: stragglers, then ranks
  aorta collectives ds --run dlrm --by instance   # one row per collective instance
  aorta collectives --by step             # who was late in which step
  aorta collectives --by kind --format csv
  aorta collectives --json > coll.json    # summary, findings and rows for CI

A collective instance is one collective call seen on every member rank: its process group
(`Process Group Name`/`Ranks`, else the run's default group) and its number in that group
(`seq`, in launch order, or the trace's own `Seq`). Clocks: each rank's offset against the
lowest rank is the median of matched end-time differences. Per kernel, wait = time from its
arrival to the last member's arrival (clipped to the kernel), transfer = the rest. A rank's
caused delay = its arrival - the second-to-last arrival where it came last. Writes the
collectives, collective_instances and collective_ranks tables and the runs clock columns
(docs/COLLECTIVES.md).";

/// What one row of `aorta collectives` output is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CollectivesBy {
    /// One row per collective instance (group, seq).
    Instance,
    /// One row per rank and step: who was late in which step.
    Step,
    /// One row per rank over the whole run, with its clock offset.
    Rank,
    /// One row per collective kind: waiting vs transfer.
    Kind,
}

#[derive(Args, Debug)]
pub(crate) struct CollectivesArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows per instance, step, rank or collective kind.
    #[arg(long, value_enum, default_value_t = CollectivesBy::Rank)]
    pub by: CollectivesBy,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Late arrivals listed in the summary.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
}

const PERF_EXAMPLES: &str = "\
Examples:
  aorta perf                              # every run of ./aorta-data: top 10 operators by GPU time
  aorta perf ds --run h100_models --top 20
  aorta perf --by shape                   # per operator and input shapes (what compare matches)
  aorta perf --by step                    # MFU and GEMM TFLOP/s per rank and step
  aorta perf --device-peaks my_gpus.toml  # a GPU the table lacks, or your own clocks
  aorta perf --json > perf.json

An operator instance is the CPU operator that launched kernels together with its kernels
(an operator without a model hands them to the nearest enclosing one with a model).
FLOPs come from its shapes (Input Dims, Concrete Inputs; a workload's m/n/k kernel args):
GEMM 2*M*N*K x batch; attention 4*B*H*Sq*Sk*D forward, 2.5x backward, half when causal;
convolution 2*N*K*(C/groups)*R*S*P*Q per pass; elementwise and reductions bytes only.
TFLOP/s = FLOPs / GPU time of its kernels; % of peak against the dense peak of its dtype on
the rank's GPU (a versioned table of datasheet figures; --device-peaks adds to it); fp32
work whose kernels ran TF32/xf32 is judged by the tf32 peak. bound = compute when
FLOPs/byte >= peak / bandwidth, else memory. A rate above 100 % of its roof is no result: its
% is null, its note says `peak assumption wrong`, and it is left out of MFU (the headline
counts them). MFU of a step = model FLOPs / (step GPU window x peak of the step's dominant
GEMM dtype). Missing shapes or an unknown GPU give null, with a note; never a guess. Every
row's note is printed under the table. The table fits in 160 columns (long names, shapes and
dtypes end in …; --json and --format csv keep them whole). Writes the op_perf and perf_steps
tables (docs/PERF.md).";

/// What one row of `aorta perf` output is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PerfBy {
    /// One row per operator name, largest GPU time first.
    Op,
    /// One row per operator and input shapes and dtypes.
    Shape,
    /// One row per rank and step (MFU), then per rank.
    Step,
}

#[derive(Args, Debug)]
pub(crate) struct PerfArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows per operator, per operator and shape, or per step.
    #[arg(long, value_enum, default_value_t = PerfBy::Op)]
    pub by: PerfBy,
    /// Operators listed per run (`--by op` and `--by shape`).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Same as `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// More GPUs, or other peaks for known ones (TOML, the format of transform/peaks/devices.toml), tried first.
    #[arg(long, value_name = "FILE")]
    pub device_peaks: Option<PathBuf>,
}

const INGEST_EXAMPLES: &str = "\
Examples:
  aorta ingest traces/                      # every trace under traces/ into ./aorta-data
  aorta ingest traces/ -o ds                # traces/cuda/<job>/rank*.json: runs cuda/<job>
  aorta ingest rank0.pt.trace.json.gz --label baseline --rank 0
  aorta ingest traces/ --keep-going          # land the good files, list the broken ones
  aorta ingest job.sqlite --rank-map ranks.txt  # Nsight Systems export; ranks.txt: `12345 0`
  aorta ingest job.sqlite --step-marker 'train_step (\\d+)'  # steps from NVTX ranges
  aorta ingest rocprof/ --step-marker 'train_step (\\d+)'   # from roctx ranges (CSV, JSON, rocpd)
  aorta ingest trace.json --step-marker '^iter (\\d+)$'     # from a generic Chrome trace's ranges
  aorta ingest runs/lr3e-4/ --label lr3e-4 --param lr=3e-4 --param tp=2   # the run's config
  aorta ingest /shared/job42 -o /shared/ds --shard 3/16   # shard 3 of 16, all 16 at once

Run labels: a run is a job. A file in ROOT/a/b/ belongs to run a/b (the directory that holds
it); a file directly in ROOT to run ROOT. Files of one directory that cannot be one job (traces
that name no rank, different world sizes or devices, time ranges apart, or two traces of one
rank) become runs of their own, <dir>/<name>, with a note (kept with -q). Rank: the trace's own (Kineto distributedInfo.rank), else --rank-map by process id, else
the file name (rank3, rank-3, worker3), else --rank. A rank map has one `PID RANK` (or
`PID=RANK`) pair per line, `#` comments; an Nsight Systems export of several processes
without one numbers them in pid order (docs/INPUTS.md).
Unchanged inputs (same content hash, same --param pairs) are skipped; --force re-reads them. A failed run leaves
the previous dataset untouched. Files a directory walk passes over (other names, hidden
files, Nsight reports, JSON without traceEvents) are counted; --verbose lists each with why.

Data-quality findings (the diagnostics table) warn; --strict makes them fail the run:
  aorta ingest traces/ --strict                       # any finding fails
  aorta ingest traces/ --strict=negative_duration,missing_timestamp   # these codes only
  aorta ingest traces/ --strict=all:100               # more than 100 findings in total
  aorta ingest traces/ --strict=same_stream_overlap:50,rank_default   # per code
Each item is CODE[:MAX] or all[:MAX]: at most MAX (default 0) of those findings, summed over
the inputs named (unchanged ones too). Codes: docs/SCHEMA.md (diagnostics).

One process writes a dataset at a time: another ingest (or overlap, collectives, perf) waits
for its lock up to AORTA_LOCK_WAIT seconds (default 300; 0: fail at once), saying who holds it.
Exit status: 0 ok, 1 some files failed (--keep-going) or --strict findings, 2 error.";

#[derive(Args, Debug)]
pub(crate) struct IngestArgs {
    /// Trace files or directories to walk.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Dataset directory to write (created if missing).
    #[arg(short, long, default_value = "aorta-data")]
    pub out: PathBuf,
    /// Run label for every input (default: the directory that holds each file, under its root).
    #[arg(long)]
    pub label: Option<String>,
    /// Rank for files whose trace and name carry none (0 or more).
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
    pub rank: Option<i64>,
    /// Process id → rank for traces that carry no rank (Nsight Systems, generic Chrome):
    /// lines `PID RANK`, e.g. `1701896 0`.
    #[arg(long, value_name = "FILE")]
    pub rank_map: Option<PathBuf>,
    /// Steps from annotation ranges whose name matches REGEX, the first capture group being
    /// the step number, instead of `ProfilerStep#N`: NVTX ranges, Kineto user annotations,
    /// rocprofv3 roctx marker ranges (by their message, in CSV, JSON and rocpd output), and
    /// the CPU-thread ranges (`X`, `B`/`E`) of generic Chrome traces, which take steps only
    /// from this flag (read twice then):
    /// `--step-marker 'train_step (\d+)'`.
    #[arg(long, value_name = "REGEX", value_parser = aorta_ingest::step_span::StepMarker::parse)]
    pub step_marker: Option<aorta_ingest::step_span::StepMarker>,
    /// A run parameter, stored in `runs.params` of every file read (repeatable): the
    /// configuration a sweep compares runs by, for traces that do not record it themselves
    /// (aorta's own workloads do, in `aorta_params`). `--param lr=3e-4 --param tp=2`.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// Worker threads (default: one per core).
    #[arg(short, long)]
    pub jobs: Option<usize>,
    /// Ingest only shard I of N (0 <= I < N) of the inputs found, so N processes (a Slurm
    /// array, an indexed Job, Dask workers) ingest one listing into one dataset at once;
    /// each input falls to one shard by its run label and its path under the root.
    /// Readers merge the shards; docs/SCALE.md.
    #[arg(long, value_name = "I/N", value_parser = aorta_ingest::Shard::parse)]
    pub shard: Option<aorta_ingest::Shard>,
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
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// List every file skipped, with its reason (the summary counts them).
    #[arg(short, long)]
    pub verbose: bool,
    /// Make data-quality findings fatal (exit 1): all of them, or `CODE[:MAX]` / `all[:MAX]`
    /// items, comma-separated (see the examples). The rows are written either way.
    #[arg(long, value_name = "SPEC", num_args = 0..=1, require_equals = true,
          default_missing_value = "all")]
    pub strict: Option<aorta_ingest::strict::Strict>,
}

#[derive(Args, Debug)]
pub(crate) struct SchemaArgs {
    /// Print the full column reference (docs/SCHEMA.md) as Markdown.
    #[arg(long)]
    pub markdown: bool,
}

/// One line per table: its columns.
pub(crate) fn schema_summary() -> String {
    use aorta_ingest::schema::{SCHEMA_VERSION, TABLES};
    let mut s = format!("aorta dataset schema v{SCHEMA_VERSION} (partitioned by run, rank)\n");
    for t in TABLES {
        let cols: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
        s.push_str(&format!("{:<15} {}\n", t.name, cols.join(", ")));
    }
    s
}

/// `KEY=VALUE` of `--param`: a key of letters, digits, `_`, `-` and `.`, and any value.
fn parse_param(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected KEY=VALUE"))?;
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(format!(
            "`{s}`: the key must be letters, digits, `_`, `-` or `.`"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}
