//! The overlap tables of some runs: read back from the dataset when `aorta overlap` wrote
//! them and nothing changed since, else computed now.
//!
//! `aorta ingest` rewrites a run's activities but leaves the derived tables alone, so stored
//! overlap rows can describe activities that are gone. A run's stored rows count as fresh
//! when every file of them is newer than every activity file of the run.

use std::path::Path;
use std::time::SystemTime;

use aorta_ingest::schema;
use polars::prelude::*;

use crate::collectives::Job;
use crate::dataset::{self, DatasetError};
use crate::overlap;

/// `overlap_steps`, `overlap_ranks` and `overlap_collectives` of `runs`.
pub struct StepsAndCollectives {
    /// `overlap_steps` rows (the columns of `aorta_ingest::schema::OVERLAP_STEPS`).
    pub steps: DataFrame,
    /// `overlap_ranks` rows: each rank's whole window, as `aorta overlap --by rank` prints
    /// them (the report's headline quotes these).
    pub ranks: DataFrame,
    /// `overlap_collectives` rows (the columns of `aorta_ingest::schema::OVERLAP_COLLECTIVES`).
    pub collectives: DataFrame,
    /// Read from the dataset (`false`: computed, the stored rows missing or stale).
    pub stored: bool,
}

/// The overlap steps and collectives of `runs`, from the dataset when every run's stored rows
/// are fresh, else computed with the jobs' wait/transfer split.
pub fn load_or_compute(
    root: &Path,
    runs: &[String],
    jobs: &[Job],
) -> Result<StepsAndCollectives, DatasetError> {
    let wanted = dataset::of_runs(runs);
    let read = |table: &str| {
        dataset::scan(root, table)?
            .filter(wanted.clone())
            .collect()
            .map_err(|source| DatasetError::Polars {
                path: root.join(table),
                source,
            })
    };
    let steps = read("overlap_steps")?;
    let have: Vec<Option<&str>> = crate::rows::strs(&steps, "run");
    if runs
        .iter()
        .all(|r| have.contains(&Some(r.as_str())) && !stale(root, r))
    {
        return Ok(StepsAndCollectives {
            steps,
            ranks: read("overlap_ranks")?,
            collectives: read("overlap_collectives")?,
            stored: true,
        });
    }
    let t = overlap::from_dataset_with(root, runs, jobs)?;
    Ok(StepsAndCollectives {
        steps: t.steps,
        ranks: t.ranks,
        collectives: t.collectives,
        stored: false,
    })
}

/// Whether `aorta ingest` rewrote a run's activities after `aorta overlap` wrote its tables.
pub(crate) fn stale(root: &Path, run: &str) -> bool {
    let part = |table: &str| root.join(schema::run_dir(table, run));
    let newest_input = ["gpu_activities", "metrics"]
        .iter()
        .filter_map(|t| mtimes(&part(t)).into_iter().max())
        .max();
    let oldest_derived = ["overlap_steps", "overlap_ranks", "overlap_collectives"]
        .iter()
        .filter_map(|t| mtimes(&part(t)).into_iter().min())
        .min();
    match (newest_input, oldest_derived) {
        (Some(i), Some(d)) => i > d,
        (_, None) => true,
        (None, Some(_)) => false,
    }
}

/// Modification times of the Parquet files under `dir`.
fn mtimes(dir: &Path) -> Vec<SystemTime> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(mtimes(&p));
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.extend(e.metadata().and_then(|m| m.modified()).ok());
        }
    }
    out
}
