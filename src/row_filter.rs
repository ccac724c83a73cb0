//! `--rank` and `--step`: which rows of a per-rank (and per-step) table a command shows. A
//! 64-rank job prints 64 × steps rows; these pick the few a question is about. They select
//! rows and nothing else: every number is computed over the whole run first, and the
//! tables written into the dataset stay whole.

use anyhow::{bail, Result};
use aorta_transform::rows::ints;
use polars::prelude::*;

/// The ranks and steps asked for; empty means every one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RowFilter {
    /// Only rows of these ranks.
    pub ranks: Vec<i64>,
    /// Only rows of these steps (rows outside every step, with a null step, go too).
    pub steps: Vec<i64>,
}

impl RowFilter {
    /// Whether nothing is filtered.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranks.is_empty() && self.steps.is_empty()
    }

    /// The rows of `df` whose `rank` and `step` are among those asked for. A frame without
    /// a `step` column (one row per rank) is filtered by rank only.
    pub(crate) fn apply(&self, df: &DataFrame) -> PolarsResult<DataFrame> {
        if self.is_empty() || df.height() == 0 {
            return Ok(df.clone());
        }
        let keep = |col: &str, wanted: &[i64]| -> Option<Vec<bool>> {
            if wanted.is_empty() || df.column(col).is_err() {
                return None;
            }
            Some(
                ints(df, col)
                    .iter()
                    .map(|v| v.is_some_and(|v| wanted.contains(&v)))
                    .collect(),
            )
        };
        let mut mask = vec![true; df.height()];
        for m in [keep("rank", &self.ranks), keep("step", &self.steps)]
            .into_iter()
            .flatten()
        {
            mask.iter_mut().zip(m).for_each(|(a, b)| *a &= b);
        }
        df.filter(&BooleanChunked::from_slice("keep".into(), &mask))
    }

    /// Fails, in one line, on a rank or step asked for that none of `frames` has (`what`
    /// names them: `run cuda`): a filter that matches nothing is a typo, not an empty answer.
    pub(crate) fn check(&self, frames: &[&DataFrame], what: &str) -> Result<()> {
        for (col, wanted, name) in [("rank", &self.ranks, "rank"), ("step", &self.steps, "step")] {
            let mut have: Vec<i64> = frames
                .iter()
                .filter(|df| df.column(col).is_ok())
                .flat_map(|df| ints(df, col).into_iter().flatten())
                .collect();
            have.sort_unstable();
            have.dedup();
            let missing: Vec<String> = wanted
                .iter()
                .filter(|w| !have.contains(w))
                .map(i64::to_string)
                .collect();
            if !missing.is_empty() {
                let list: Vec<String> = have.iter().map(i64::to_string).collect();
                bail!(
                    "{what}: no {name} {} ({name}s: {})",
                    missing.join(", "),
                    if list.is_empty() {
                        "none".into()
                    } else {
                        list.join(", ")
                    }
                );
            }
        }
        Ok(())
    }
}
