//! The record a sweep keeps beside its dataset (`DATA/sweep.json`): the order it ran in,
//! every run's outcome (a failed point's error line included) and each search's path.
//!
//! It lives inside the dataset directory so that the dataset carries its failures wherever
//! it goes: `aorta sweep report` lists them, and a resumed sweep reads which runs are done.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name inside the dataset directory.
pub const FILE: &str = "sweep.json";

/// One run of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run label in the dataset (`<point key>/r<repeat>`).
    pub label: String,
    /// The point's key (`name=value,…`).
    pub point: String,
    /// Repeat number, from 1.
    pub repeat: usize,
    /// The knobs' values.
    pub settings: BTreeMap<String, String>,
    /// `ok` or `failed`.
    pub status: String,
    /// A failed run's error line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall seconds the workload took.
    pub seconds: f64,
}

/// One bisection: the other knobs' values, the searched knob, each value measured with its
/// objective (median over repeats), and the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// The other knobs (a point key; `default` without any).
    pub fixed: String,
    /// The searched knob.
    pub knob: String,
    /// The objective metric.
    pub objective: String,
    /// (value, objective) in the order measured.
    pub measured: Vec<(i64, Option<f64>)>,
    /// The value it settled on.
    pub best: Option<i64>,
}

/// The whole record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepRecord {
    /// The spec file as given.
    pub spec: String,
    /// The workload or command.
    pub workload: String,
    /// The order's seed.
    pub seed: u64,
    /// Runs, in the order they ran (a resumed sweep appends).
    pub runs: Vec<RunRecord>,
    /// Searches.
    #[serde(default)]
    pub searches: Vec<SearchRecord>,
    /// The knob check's warnings, given before the first run.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl SweepRecord {
    /// The record of the dataset at `root`, if it has one.
    pub fn load(root: &Path) -> Result<Option<SweepRecord>, std::io::Error> {
        let path = root.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes it into `root` (a temporary file renamed over the old one: a killed sweep
    /// leaves the previous record whole).
    pub fn save(&self, root: &Path) -> Result<PathBuf, std::io::Error> {
        std::fs::create_dir_all(root)?;
        let path = root.join(FILE);
        let tmp = root.join(format!(".{FILE}.tmp-{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The latest outcome of each label.
    pub fn latest(&self) -> BTreeMap<&str, &RunRecord> {
        self.runs.iter().map(|r| (r.label.as_str(), r)).collect()
    }
}
