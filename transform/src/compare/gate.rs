//! The regression gate of `aorta compare --fail-if-regressed PCT`: the candidate's median
//! step time and exposed communication against the reference's.
//!
//! It lives here, not in the CLI, so that the verdict written into summary.json and the exit
//! status come from one function that tests can call.

use serde::{Deserialize, Serialize};

use super::summary_json::Summary;

/// The gated keys of the steps level.
pub const GATED: [&str; 2] = ["step_ms", "exposed_comm_ms"];

/// The gate's verdict, as summary.json's `regression` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// The allowed growth, in percent of the reference.
    pub threshold_pct: f64,
    /// One check per gated key present on both sides.
    pub checks: Vec<Check>,
}

impl Regression {
    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.regressed)
    }
}

/// One gated key: both medians, the change, and whether it exceeds the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub key: String,
    pub reference: f64,
    pub candidate: f64,
    /// 100 · (candidate − reference) / reference; `None` when the reference is 0.
    pub change_pct: Option<f64>,
    /// The change exceeds the threshold (with a zero reference: the candidate is above 0).
    pub regressed: bool,
}

/// Checks every gated key of `summary`'s steps level against `threshold_pct`.
pub fn regressions(summary: &Summary, threshold_pct: f64) -> Regression {
    let checks = GATED
        .iter()
        .filter_map(|key| {
            let row = summary.levels.step(key)?;
            let (r, c) = (row.reference?.median, row.candidate?.median);
            let change_pct = (r != 0.0).then(|| 100.0 * (c - r) / r);
            let regressed = match change_pct {
                Some(ch) => ch > threshold_pct,
                None => c > 0.0,
            };
            Some(Check {
                key: key.to_string(),
                reference: r,
                candidate: c,
                change_pct,
                regressed,
            })
        })
        .collect();
    Regression {
        threshold_pct,
        checks,
    }
}
