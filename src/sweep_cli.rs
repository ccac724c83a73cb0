//! Arguments of `aorta sweep`: which configuration wins. `aorta sweep SPEC.toml` runs a grid
//! of configurations, `aorta sweep report` ranks the configurations of any dataset with a
//! noise verdict, and `aorta sweep tp` is the TP scaling check of the Megatron TP overlap
//! tuner from measured times.

use std::path::PathBuf;

use clap::{Args, Subcommand};

pub(crate) const SWEEP_EXAMPLES: &str = "\
Examples:
  aorta sweep sweep.toml -o sweep-out            # run it; resumes where it stopped
  aorta sweep sweep.toml -o sweep-out --dry-run  # the points, the order, the knob check
  aorta sweep report sweep-out/data -o report    # rank any dataset's configurations
  aorta sweep tp --times tp_times.csv -o tp-report

A spec (TOML) names a workload (overlap-bench, copy-overlap, fsdp; ranks = N) or a command
writing traces into {out} (env AORTA_SWEEP_RUN and AORTA_SWEEP_REPEAT name the run), repeats (3), seed, args, and the knobs: [flags] and [env] tables of
name = [values] (the grid: every combination) or a [[point]] list; one numeric knob may be
searched instead: NAME = { search = \"bisect\", min = 1, max = 32 } (objective = \"step_ms\").
Repeats run in rounds, each round's order drawn from the seed. Every run is ingested into
DIR/data (label <point>/r<repeat>); a run already there is skipped, a failing run is recorded
with its error line and the sweep goes on. Environment knobs are checked first against the
table of variables NCCL, RCCL, HIP, HSA, CUDA and PyTorch read: an unknown one is a warning
(--strict: an error). At the end DIR/report holds the sweep report. docs/SWEEPS.md.";

pub(crate) const SWEEP_REPORT_EXAMPLES: &str = "\
Examples:
  aorta sweep report sweep-out/data -o report
  aorta sweep report ds -o report --run a/r1 --run a/r2 --run b/r1 --run b/r2

Runs with equal params (runs.params: the trace's own and `aorta ingest --param`) are repeats
of one configuration; a run without params is its own, named by its label. Per configuration,
each metric (step_ms, exposed_comm_ms, comm_ms, comm_hidden_pct, tp_overlap_ratio,
comm_wait_ms, gemm_tflops) over the steps of every rank and repeat: median, p10, p90. The
best per metric against the runner-up: the exact one-sided Mann-Whitney U test on the repeats
(each run's median), alpha 0.05: distinguishable, tie (within the repeats' spread) or
inconclusive (3 repeats of each are needed). A varying param that moved no metric by
--min-effect-pct and a stratified permutation test has no effect. TP windows (record_function
or NVTX ranges qkv, proj, fc1, fc2) give `configs` (the tuner's fields per configuration,
operator and phase) and, with a `tp` param, the TP scaling check (--tolerance) and the
tuner's optimal_tp_comm_overlap_cfg*.yaml. Writes sweep.parquet, tuning_report.json,
summary.txt and sweep.html. docs/SWEEPS.md.";

pub(crate) const SWEEP_TP_EXAMPLES: &str = "\
Examples:
  aorta sweep tp --times tp_times.csv -o tp-report
  aorta sweep tp --times tp_times.csv -o tp-report --tolerance 0.1

FILE.csv has a header naming its columns: tp, operator, e2e_us (the operator's end-to-end
time at that TP size, µs), and optionally method and phase (fprop, dgrad, wgrad). For each
operator T(n) is its least time at size n (the best method's); TP n is efficient when
T(n) / (T(1) / n) <= 1 + tolerance, and the largest efficient size is recommended, per
operator and overall (the sum over the operators). Writes, in the Megatron TP overlap tuner's
shapes: tuning_report.json (tp_scaling.results.<op>: optimal_tp_size, scaling_ratios,
e2e_times, scaling_efficient, reason), optimal_tp_comm_overlap_cfg_tp{N}.yaml per TP size
with methods, optimal_tp_comm_overlap_cfg.yaml for the recommended size, and summary.txt.
docs/SWEEPS.md.";

/// `aorta sweep`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, after_help = SWEEP_EXAMPLES)]
pub(crate) struct SweepArgs {
    #[command(subcommand)]
    pub what: Option<SweepCommand>,
    /// The sweep's spec (TOML).
    #[arg(value_name = "SPEC.toml")]
    pub spec: Option<PathBuf>,
    /// Output directory: traces/, data/ (the dataset), logs/, report/.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// An environment knob no library is known to read is an error, not a warning.
    #[arg(long)]
    pub strict: bool,
    /// Print the points, the run order and the knob check; run nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What `aorta sweep` does besides running a spec.
#[derive(Subcommand, Debug)]
pub(crate) enum SweepCommand {
    /// Rank the configurations of a dataset, with a noise verdict and each knob's effect.
    #[command(after_help = SWEEP_REPORT_EXAMPLES)]
    Report(SweepReportArgs),
    /// TP scaling from measured times: the largest TP size within the tolerance of linear scaling, per operator and overall.
    #[command(after_help = SWEEP_TP_EXAMPLES)]
    Tp(SweepTpArgs),
}

/// `aorta sweep report`.
#[derive(Args, Debug)]
pub(crate) struct SweepReportArgs {
    /// The dataset (an `aorta ingest` output, or a sweep's DIR/data).
    pub dataset: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only these runs (repeatable; default: every run).
    #[arg(long = "run", value_name = "LABEL")]
    pub runs: Vec<String>,
    /// The least change of a metric (% of the larger median) that counts as a knob's effect.
    #[arg(long, default_value_t = aorta_transform::tuning::sweep_report::DEFAULT_MIN_EFFECT_PCT)]
    pub min_effect_pct: f64,
    /// TP scaling: how far above linear a TP size is still efficient (runs with a `tp` param
    /// and qkv/proj/fc1/fc2 windows).
    #[arg(long, default_value_t = aorta_transform::tuning::tp_scaling::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
}

/// `aorta sweep tp`.
#[derive(Args, Debug)]
pub(crate) struct SweepTpArgs {
    /// CSV of measured times: tp, operator, e2e_us[, method][, phase].
    #[arg(long, value_name = "FILE.csv")]
    pub times: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// How far above linear scaling a TP size is still efficient (the tuner's default 0.2).
    #[arg(long, default_value_t = aorta_transform::tuning::tp_scaling::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
}
