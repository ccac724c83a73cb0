//! The one error type of the crate: every variant names the file, run, rank or step at fault,
//! so the CLI prints a single line a user can act on.

use std::path::PathBuf;

use aorta_transform::dataset::DatasetError;
use polars::prelude::PolarsError;

/// Why a report could not be written; nothing was written when it is returned.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The dataset could not be read (missing, locked, or a part failed its checksum).
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The `--device-peaks` file could not be read.
    #[error(transparent)]
    Peaks(#[from] aorta_transform::perf::PeaksError),
    /// A requested run is not in the dataset.
    #[error("{dataset}: unknown run `{run}` (runs: {known})")]
    UnknownRun {
        /// The dataset's root directory.
        dataset: PathBuf,
        /// The run asked for.
        run: String,
        /// The dataset's runs, comma-separated.
        known: String,
    },
    /// The requested rank is in none of the reported runs.
    #[error("{dataset}: no rank {rank} in run(s) {runs} (ranks: {known})")]
    UnknownRank {
        /// The dataset's root directory.
        dataset: PathBuf,
        /// The reported runs, comma-separated.
        runs: String,
        /// The rank asked for.
        rank: i64,
        /// The ranks those runs have, comma-separated.
        known: String,
    },
    /// The requested timeline step is not among the rank's trace steps.
    #[error("{dataset}: run `{run}` rank {rank} has no step {step} (steps: {known})")]
    UnknownStep {
        /// The dataset's root directory.
        dataset: PathBuf,
        /// The timeline's run.
        run: String,
        /// The timeline's rank.
        rank: i64,
        /// The step asked for.
        step: i64,
        /// The rank's trace steps, comma-separated.
        known: String,
    },
    /// A step was asked for, but the reported ranks have no GPU activities (JSONL logs only),
    /// so there is no timeline to draw it on. Holds the dataset's root.
    #[error("{0}: no GPU activities in the reported ranks, so no step to draw")]
    NoActivities(PathBuf),
    /// `--from/--to` covers no activity of any timeline; says where the activity lies, in
    /// the flags' units (ms from the step's first activity).
    #[error("{dataset}: no GPU activity between --from {from} and --to {to} ms; {lies}")]
    EmptyWindow {
        /// The dataset's root directory.
        dataset: PathBuf,
        /// `--from`, ms.
        from: f64,
        /// `--to`, ms.
        to: f64,
        /// Per timeline, where its activity lies.
        lies: String,
    },
    /// A comparison directory, or one of its tables, does not exist: the compare page reads
    /// what `aorta compare -o DIR` wrote. Holds the missing path.
    #[error("{0}: missing (written by `aorta compare -o DIR`)")]
    MissingTable(PathBuf),
    /// Polars failed on a table or while building a chart's frame.
    #[error("{path}: {source}")]
    Polars {
        /// The table (or dataset) being read.
        path: PathBuf,
        /// Polars' error.
        source: PolarsError,
    },
    /// Reading a comparison table or writing the page failed.
    #[error("{path}: {source}")]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A comparison's JSON (`summary.json`) could not be parsed.
    #[error("{path}: {source}")]
    Json {
        /// The JSON file.
        path: PathBuf,
        /// serde_json's error, with line and column.
        source: serde_json::Error,
    },
}

impl ReportError {
    /// A closure mapping a polars error to one that names `path`.
    pub(crate) fn polars(path: impl Into<PathBuf>) -> impl FnOnce(PolarsError) -> ReportError {
        let path = path.into();
        move |source| ReportError::Polars { path, source }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ReportError {
        let path = path.into();
        move |source| ReportError::Io { path, source }
    }
}
