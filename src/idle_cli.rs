//! Arguments of `aorta breakdown` and `aorta launches`: where the GPU's time goes when it is
//! not computing, and the CPU side of the launches, as Holistic Trace Analysis defines them.

use std::path::PathBuf;

use clap::Args;

use crate::cli::Format;

pub(crate) const BREAKDOWN_EXAMPLES: &str = "\
Examples:
  aorta breakdown                           # every rank of every run of ./aorta-data
  aorta breakdown ds --run cuda --by step   # per step; `-` = outside every step
  aorta breakdown --streams                 # HTA's idle split per stream too
  aorta breakdown --kernel-wait-ns 2000 --format csv

Per rank (or step), as HTA's get_temporal_breakdown: the window (first activity's start to
the last one's end, all streams), compute (the union of gemm, attention and other_compute
activities), non-compute (busy but no compute: comm, or memcpy/memset only) and idle (window
minus the union of every activity), each with its % of the window. Idle is split as HTA's
get_idle_time_breakdown, gap by gap of the merged timeline (so the split sums to idle):
host-wait when the activity ending the gap was launched (its launch call, runtime or driver
API, started) after the gap began: nothing was queued; else kernel-wait when it was queued and
the gap is shorter than --kernel-wait-ns (HTA's consecutive_kernel_delay: 30 µs as HTA applies
it); else other (queued but blocked: an event, another stream; or its launch unknown). --streams adds HTA's own per-stream split. docs/TOOLBOX.md.";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleBy {
    /// Each rank's whole capture.
    Rank,
    /// Each step of each rank (`-`: outside every step).
    Step,
}

#[derive(Args, Debug)]
pub(crate) struct BreakdownArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows per rank or per step.
    #[arg(long, value_enum, default_value_t = IdleBy::Rank)]
    pub by: IdleBy,
    /// Gaps shorter than this (ns), with the next activity already launched, are kernel-wait.
    /// The default, 30 µs, is HTA's `consecutive_kernel_delay` as HTA applies it (its docs say
    /// 30 ns, but it reads µs timestamps); `--kernel-wait-ns 30` takes the literal 30 ns.
    #[arg(long, value_name = "NS", default_value_t = aorta_transform::idle::breakdown::KERNEL_WAIT_NS)]
    pub kernel_wait_ns: i64,
    /// Also HTA's idle split per stream (with --format csv: that table instead of the rows).
    #[arg(long)]
    pub streams: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

pub(crate) const LAUNCHES_EXAMPLES: &str = "\
Examples:
  aorta launches                            # every rank of every run of ./aorta-data
  aorta launches ds --run cuda --by step --top 3
  aorta launches --format json --queue-series > q.json   # with the queue's time series

A launch is a GPU activity and the runtime call with its correlation id. Per rank (or step),
as HTA's get_cuda_kernel_launch_stats: activities and kernels; the calls' CPU duration (p50,
p99); the launch delay, activity start - call end (p50, p99); call start to activity start
(p50); the --top longest launch gaps (CPU time between the latest-ending launch call so far
and the next one's start, any thread), with the calls and the kernel after it. The queue, as
HTA's get_queue_length_time_series: per stream, activities launched (call start) and not
started; its max and time-weighted mean over the group's launch window (first call start to
last activity start), summed over streams. docs/TOOLBOX.md.";

#[derive(Args, Debug)]
pub(crate) struct LaunchesArgs {
    /// Dataset directory (written by `aorta ingest`).
    #[arg(default_value = "aorta-data")]
    pub dataset: PathBuf,
    /// Only this run (default: every run of the dataset).
    #[arg(long, value_name = "L")]
    pub run: Option<String>,
    /// Rows per rank or per step.
    #[arg(long, value_enum, default_value_t = IdleBy::Rank)]
    pub by: IdleBy,
    /// Longest launch gaps listed per rank or step.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// With --format json or csv: the queue's whole time series per rank and stream instead.
    #[arg(long)]
    pub queue_series: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}
