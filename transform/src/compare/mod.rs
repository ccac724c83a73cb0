//! `aorta compare`: one set of runs (the reference) against another (the candidate).
//!
//! Kernel names differ between vendors, so the comparison stands on what does not: steps
//! (time, comm, exposed comm, the overlap ratios of METRICS.md), GPU time per category,
//! GPU time per launching CPU operator and its input shapes, and collectives per (kind,
//! message size, dtype, group size). Runs are compared pair by pair (one workload on each
//! side, `pairs`): every level is computed per pair, and each key gets one overall row, the
//! geometric mean of the pairs' ratios (`overall`). Every ratio is candidate / reference, and
//! every pair's row carries each side's spread over steps and ranks (median, p10–p90) so a
//! reader can tell a real gap from noise. The results are plain DataFrames and one JSON
//! document (a superset of the Python aorta `overlap_report.py` summary); the CLI writes
//! them.

mod collectives;
mod gate;
mod levels;
mod load;
mod operators;
mod output;
mod overall;
mod pairs;
mod select;
mod subcats;
mod summary_json;

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::dataset::DatasetError;

pub use gate::{
    parse as parse_gate, regressions, Check, CollStat, GateError, Metric, Regression, Rule,
    FEW_MATCHED, GATED,
};
pub use operators::KERNEL_SEPARATOR;
pub use pairs::{PairEntry, PairsSummary, MIN_MATCHED_SHARE};
pub use select::{RunInfo, Side};
pub use summary_json::{
    overall, per_pair, ComparisonSummary, DatasetSummary, LevelEntry, Levels, OperatorEntry,
    OperatorsSummary, SideSummary, SpreadSummary, Summary, TOP_OPERATORS,
};

/// What can go wrong comparing two selections of a dataset.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The dataset could not be read.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A selector is neither a run label nor a platform of the dataset.
    #[error("{root}: no run or platform `{selector}` (runs: {runs}; platforms: {platforms})")]
    Unknown {
        /// The dataset's root.
        root: PathBuf,
        /// What the user typed.
        selector: String,
        /// The dataset's runs, comma-separated.
        runs: String,
        /// The dataset's platforms, comma-separated.
        platforms: String,
    },
    /// A selector's runs have nothing to compare: no GPU activities and no JSONL steps.
    #[error("{root}: `{selector}` selects runs with no GPU activities and no JSONL steps: {runs}")]
    Empty {
        /// The dataset's root.
        root: PathBuf,
        /// What the user typed.
        selector: String,
        /// The runs it selected, comma-separated.
        runs: String,
    },
    /// Polars failed while reading or comparing a table.
    #[error("{path}: {source}")]
    Polars {
        /// The table (or file) being read.
        path: PathBuf,
        /// Polars' error.
        source: PolarsError,
    },
    /// No run of one side pairs with a run of the other (runs pair by their last label component).
    #[error("{root}: no run of `{reference}` pairs with a run of `{candidate}` (runs pair by their last label component, e.g. `bert-small`; reference: {reference_runs}; candidate: {candidate_runs})")]
    NoPairs {
        /// The dataset's root.
        root: PathBuf,
        /// The reference selector.
        reference: String,
        /// The candidate selector.
        candidate: String,
        /// The reference side's runs, comma-separated.
        reference_runs: String,
        /// The candidate side's runs, comma-separated.
        candidate_runs: String,
    },
    /// Writing the output directory (summary.json, the tables) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Everything `aorta compare` computes.
pub struct Comparison {
    /// The reference side: its selector and runs.
    pub reference: Side,
    /// The candidate side: its selector and runs.
    pub candidate: Side,
    /// Per level (steps, categories, subcategories, collectives), key and pair: both sides'
    /// spread and the ratio; with several pairs, each key's overall row first.
    pub levels: DataFrame,
    /// One row per side, run, rank and step, with the pair's workload.
    pub steps: DataFrame,
    /// GPU time per side, run, rank, step and category, with the pair's workload.
    pub categories: DataFrame,
    /// GPU time per pair, launching operator, input shapes and dtypes, matched across sides.
    pub operators: DataFrame,
    /// Time and bandwidth per side, pair and (kind, bytes, dtype, group size).
    pub collectives: DataFrame,
    /// The summary.json document.
    pub summary: Summary,
}

impl Comparison {
    /// The tables as `aorta compare` writes them (`<name>.parquet`).
    pub(crate) fn tables(&self) -> [(&'static str, &DataFrame); 5] {
        [
            ("compare_levels", &self.levels),
            ("compare_steps", &self.steps),
            ("compare_categories", &self.categories),
            ("compare_operators", &self.operators),
            ("compare_collectives", &self.collectives),
        ]
    }
}

/// Which step rows summary.json's Python aorta keys (`datasets`) are computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PythonSource {
    /// The JSONL log's iterations when the side has one (the Python tool's own numbers), else
    /// the trace's steps.
    #[default]
    Auto,
    /// The JSONL log's iterations (the trace's steps when there is no log).
    Jsonl,
    /// The trace's steps (the log's iterations when there is no trace).
    Trace,
}

/// How to compare, beyond the two selectors.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Device peaks for the operators' % of each side's own peak.
    pub peaks: crate::perf::Peaks,
    /// The source of summary.json's Python aorta keys.
    pub python_source: PythonSource,
    /// Compute the ratios even when the comparability check fails (`--force`).
    pub force: bool,
}

/// Compares the runs `reference` selects with the runs `candidate` selects (a selector is a
/// run label, else a platform: `cuda`, `rocm`), with these options.
pub fn compare_with(
    root: &Path,
    reference: &str,
    candidate: &str,
    opts: &Options,
) -> Result<Comparison, CompareError> {
    let peaks = &opts.peaks;
    let mut reference = select::select(root, reference)?;
    let mut candidate = select::select(root, candidate)?;
    let pairing = pairs::pair(&reference, &candidate);
    if pairing.pairs.is_empty() {
        return Err(CompareError::NoPairs {
            root: root.to_path_buf(),
            reference: reference.selector,
            candidate: candidate.selector,
            reference_runs: reference.runs.join(", "),
            candidate_runs: candidate.runs.join(", "),
        });
    }
    // Only paired runs are compared; the rest are listed in `pairs`.
    let paired = &pairing.pairs;
    reference.runs = paired.iter().map(|p| p.runs[0].clone()).collect();
    candidate.runs = paired.iter().map(|p| p.runs[1].clone()).collect();
    reference.runs.sort();
    candidate.runs.sort();
    let sides = [
        load::SideData::load(root, &reference)?,
        load::SideData::load(root, &candidate)?,
    ];
    let polars = |table: &str| {
        let path = root.join(table);
        move |source| CompareError::Polars { path, source }
    };
    let step_rows = levels::StepRows::of(&sides);
    let category_rows = levels::CategoryRows::of(&sides);
    let mut ops = operators::compare(&sides, paired);
    let perf = [
        crate::perf::compute(root, &reference.runs, peaks)?,
        crate::perf::compute(root, &candidate.runs, peaks)?,
    ];
    operators::add_rates(&mut ops, &perf, paired);
    let colls = collectives::of(&sides);
    let mut level_rows = step_rows.levels(paired);
    level_rows.extend(category_rows.levels(paired));
    level_rows.extend(subcats::levels(&sides, paired));
    level_rows.extend(collectives::levels(&colls, paired));
    let mut level_rows = overall::with_overall(level_rows, paired.len());
    let kernels = pairs::KernelTimes::of([&sides[0].acts, &sides[1].acts]);
    let verdict = pairs::summarize(
        [&reference, &candidate],
        &pairing,
        &step_rows,
        &level_rows,
        &ops,
        &kernels,
        opts.force,
    );
    let refused = !verdict.comparable && !opts.force;
    level_rows.iter_mut().for_each(|r| r.refused = refused);
    let mut summary = summary_json::build(&sides, &level_rows, &ops, opts.python_source);
    summary.pairs = Some(verdict);
    Ok(Comparison {
        levels: levels::frame(&level_rows).map_err(polars("compare_levels"))?,
        steps: step_rows.frame(paired).map_err(polars("compare_steps"))?,
        categories: category_rows
            .frame(paired)
            .map_err(polars("compare_categories"))?,
        operators: operators::frame(&ops).map_err(polars("compare_operators"))?,
        collectives: collectives::frame(&colls, paired).map_err(polars("compare_collectives"))?,
        summary,
        reference,
        candidate,
    })
}
