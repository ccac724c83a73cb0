//! Selectors: a run label first, then a platform, so that `aorta ingest traces/` over
//! `traces/cuda/…` and `traces/rocm/…` followed by `--reference cuda --candidate rocm` works
//! whichever way the runs were labelled.

use std::collections::BTreeSet;
use std::path::Path;

use crate::dataset;

use super::CompareError;

/// One side of a comparison: what the user typed and the runs it selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    pub selector: String,
    pub runs: Vec<String>,
}

impl Side {
    /// The name the summary files this side under: the selector.
    pub fn label(&self) -> &str {
        &self.selector
    }
}

pub(super) fn select(root: &Path, selector: &str) -> Result<Side, CompareError> {
    let runs = dataset::read(root, "runs")?;
    let polars = |source| CompareError::Polars {
        path: root.join("runs"),
        source,
    };
    let run = runs
        .column("run")
        .and_then(|c| c.str().cloned())
        .map_err(polars)?;
    let platform = runs
        .column("platform")
        .and_then(|c| c.str().cloned())
        .map_err(polars)?;
    let pairs: Vec<(&str, &str)> = run
        .iter()
        .zip(platform.iter())
        .map(|(r, p)| (r.unwrap_or(""), p.unwrap_or("unknown")))
        .collect();
    let by = |f: &dyn Fn(&(&str, &str)) -> bool| -> BTreeSet<String> {
        pairs
            .iter()
            .filter(|p| f(p))
            .map(|p| p.0.to_string())
            .collect()
    };
    let mut chosen = by(&|p| p.0 == selector);
    if chosen.is_empty() {
        chosen = by(&|p| p.1 == selector);
    }
    if chosen.is_empty() {
        let all: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
        let platforms: BTreeSet<&str> = pairs.iter().map(|p| p.1).collect();
        let list = |s: BTreeSet<&str>| s.into_iter().collect::<Vec<_>>().join(", ");
        return Err(CompareError::Unknown {
            root: root.to_path_buf(),
            selector: selector.to_string(),
            runs: list(all),
            platforms: list(platforms),
        });
    }
    Ok(Side {
        selector: selector.to_string(),
        runs: chosen.into_iter().collect(),
    })
}
