//! Arguments of `aorta sweep`: which configuration wins. Today `aorta sweep tp`, the TP
//! scaling check of the Megatron TP overlap tuner from measured times.

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
pub(crate) struct SweepArgs {
    #[command(subcommand)]
    pub what: SweepCommand,
}

/// What `aorta sweep` does.
#[derive(Subcommand, Debug)]
pub(crate) enum SweepCommand {
    /// TP scaling from measured times: the largest TP size within the tolerance of linear scaling, per operator and overall.
    #[command(after_help = SWEEP_TP_EXAMPLES)]
    Tp(SweepTpArgs),
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
