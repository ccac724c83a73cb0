//! The one error type of the crate: every variant names the file, run, rank or step at fault,
//! so the CLI prints a single line a user can act on.

use std::path::PathBuf;

use aorta_transform::dataset::DatasetError;
use polars::prelude::PolarsError;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    #[error(transparent)]
    Peaks(#[from] aorta_transform::perf::PeaksError),
    #[error("{dataset}: unknown run `{run}` (runs: {known})")]
    UnknownRun {
        dataset: PathBuf,
        run: String,
        known: String,
    },
    #[error("{dataset}: no rank {rank} in run(s) {runs} (ranks: {known})")]
    UnknownRank {
        dataset: PathBuf,
        runs: String,
        rank: i64,
        known: String,
    },
    #[error("{dataset}: run `{run}` rank {rank} has no step {step} (steps: {known})")]
    UnknownStep {
        dataset: PathBuf,
        run: String,
        rank: i64,
        step: i64,
        known: String,
    },
    #[error("{0}: no GPU activities in the reported ranks, so no step to draw")]
    NoActivities(PathBuf),
    #[error("{0}: missing (written by `aorta compare -o DIR`)")]
    MissingTable(PathBuf),
    #[error("{path}: {source}")]
    Polars { path: PathBuf, source: PolarsError },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
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
