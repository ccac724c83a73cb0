//! Is the compute itself fast? FLOPs and bytes per operator instance from its shapes,
//! achieved TFLOP/s and TB/s against the GPU's own peaks, the roofline bound, and MFU per
//! step.
//!
//! Overlap says whether communication hides; this says whether what it hides behind runs
//! well, and lets an `aten::mm` of one shape on an MI300X be compared with the same one on an
//! H100 as a share of each GPU's peak. The steps: `load` reads a run's kernels and the
//! operators that launched them, `instances` groups each operator with its kernels and asks
//! `models` for FLOPs and bytes (from `args`, the operator's Kineto argument lists), `rows`
//! divides by GPU time and places each instance under the roof of its device (`peaks`, a
//! versioned data table), sums steps into MFU, and `frames`/`views` lay out what is written
//! and printed. Formulas: ../shared/docs/METRICS.md ("Performance models"), in users' words
//! in docs/PERF.md.

mod args;
mod frames;
mod instances;
mod load;
mod models;
pub mod peaks;
mod precision;
pub mod rows;
pub mod views;

use std::path::Path;

use polars::prelude::*;

use crate::dataset::{self, DatasetError};

pub use peaks::{Peaks, PeaksError};
pub use rows::{OpRow, Over, Roof, StepRow};
pub use views::{Group, Headline};

/// One run's performance: every operator instance and every step.
#[derive(Debug, Clone)]
pub struct PerfRun {
    /// The run label.
    pub run: String,
    /// Every operator instance of the run (the `op_perf` rows).
    pub ops: Vec<OpRow>,
    /// Per rank and step, then per rank (the `perf_steps` rows).
    pub steps: Vec<StepRow>,
    /// The device names the run's traces give, each with its peak-table entry.
    pub devices: Vec<(String, Option<peaks::Device>)>,
    /// One line per rank whose device has no peaks (the same line once for all of them).
    pub notes: Vec<String>,
}

impl PerfRun {
    /// Reads `run` of the dataset at `root` and computes its tables.
    pub(crate) fn compute(root: &Path, run: &str, peaks: &Peaks) -> Result<PerfRun, DatasetError> {
        let mut clock = Clock::start();
        let data = load::RunData::load(root, run)?;
        clock.lap("read");
        let insts = instances::instances(&data);
        clock.lap("instances");
        let ops = rows::op_rows(run, &data, &insts, peaks);
        let steps = rows::step_rows(run, &data, &insts, &ops, peaks);
        clock.lap("rows");
        let mut notes: Vec<String> = Vec::new();
        let mut ranks: Vec<i64> = data.devices.keys().copied().collect();
        ranks.extend(ops.iter().map(|r| r.rank));
        ranks.sort_unstable();
        ranks.dedup();
        for rank in ranks {
            if let (None, Some(why)) = rows::device_of(peaks, &data, rank) {
                if !notes.contains(&why) {
                    notes.push(why);
                }
            }
        }
        let mut names: Vec<&String> = data.devices.values().collect();
        names.sort();
        names.dedup();
        let devices = names
            .into_iter()
            .map(|n| (n.clone(), peaks.find(n).cloned()))
            .collect();
        Ok(PerfRun {
            run: run.to_string(),
            ops,
            steps,
            devices,
            notes,
        })
    }

    pub(crate) fn op_frame(&self) -> PolarsResult<DataFrame> {
        frames::ops(&self.ops)
    }

    /// The `perf_steps` frame of `steps`, with the columns of docs/SCHEMA.md.
    pub fn step_frame(&self) -> PolarsResult<DataFrame> {
        frames::steps(&self.steps)
    }

    /// Instances summed per operator (`shape` false) or per operator and shape.
    pub fn groups(&self, shape: bool) -> Vec<Group> {
        views::groups(&self.ops, shape)
    }

    /// The first `top` groups as a frame.
    pub fn group_frame(&self, shape: bool, top: usize) -> PolarsResult<DataFrame> {
        let g = self.groups(shape);
        let total = self.ops.iter().map(|r| r.gpu_ns).sum();
        views::group_frame(&self.run, &g[..g.len().min(top)], total)
    }

    /// The run's headline numbers, as `aorta perf` prints them first.
    pub fn headline(&self) -> Headline {
        views::headline(&self.ops, &self.steps)
    }
}

/// Phase times on stderr with `AORTA_TIMING` set (docs/PERFORMANCE.md).
struct Clock(Option<std::time::Instant>);

impl Clock {
    fn start() -> Clock {
        Clock(std::env::var_os("AORTA_TIMING").map(|_| std::time::Instant::now()))
    }

    fn lap(&mut self, what: &str) {
        if let Some(t) = self.0.as_mut() {
            eprintln!("perf {what}: {:.2?}", t.elapsed());
            *t = std::time::Instant::now();
        }
    }
}

/// Every run of `runs`.
pub fn compute(root: &Path, runs: &[String], peaks: &Peaks) -> Result<Vec<PerfRun>, DatasetError> {
    runs.iter()
        .map(|r| PerfRun::compute(root, r, peaks))
        .collect()
}

/// Replaces the `op_perf` and `perf_steps` partitions of these runs.
pub fn write(root: &Path, runs: &[PerfRun]) -> Result<(), DatasetError> {
    let polars = |source| DatasetError::Polars {
        path: root.join("op_perf"),
        source,
    };
    let mut clock = Clock::start();
    let names: Vec<String> = runs.iter().map(|r| r.run.clone()).collect();
    let staging = dataset::Staging::new(root)?;
    for r in runs {
        staging.write("op_perf", &names, &r.op_frame().map_err(polars)?)?;
        staging.write("perf_steps", &names, &r.step_frame().map_err(polars)?)?;
    }
    staging.commit(&names, &["op_perf", "perf_steps"])?;
    clock.lap("write");
    Ok(())
}
