//! Selectors: a run label first, then a label prefix (`h100_models` selects the runs
//! `h100_models/<model>` that job identity split it into), then a platform, so that
//! `aorta ingest traces/` over `traces/cuda/…` and `traces/rocm/…` followed by
//! `--reference cuda --candidate rocm` works whichever way the runs were labelled.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::dataset;
use crate::rows::{ints, strs};

use super::CompareError;

/// One side of a comparison: what the user typed and the runs it selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// What the user typed: a run label, else a platform (`cuda`, `rocm`).
    pub selector: String,
    /// The runs it selected.
    pub runs: Vec<String>,
    /// Per run: its platform, device names and world size (from `runs`), for the page and
    /// the comparability check.
    pub(crate) info: BTreeMap<String, RunInfo>,
}

/// What the `runs` table says about one run (summary.json `sides`, so that the page can
/// name what it compares).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// `cuda` or `rocm`.
    pub platform: String,
    /// The GPU names its files declare.
    pub devices: BTreeSet<String>,
    /// The largest world size its files declare.
    pub world_size: Option<i64>,
    /// Input files of the run (rows of `runs`).
    pub files: usize,
    /// The runtime version keys as the traces wrote them (`cuda_runtime_version=13000`).
    #[serde(default)]
    pub versions: BTreeSet<String>,
    /// The input files, as given on the command line.
    #[serde(default)]
    pub sources: Vec<String>,
}

impl Side {
    /// The name the summary files this side under: the selector.
    pub(crate) fn label(&self) -> &str {
        &self.selector
    }
}

/// A `runs` row's run label and platform (none for a JSONL log).
type RunPlatform<'a> = (&'a str, Option<&'a str>);

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
    let format = strs(&runs, "format");
    // A JSONL log has no platform: it neither selects its run nor names the run's platform.
    let pairs: Vec<RunPlatform> = run
        .iter()
        .zip(platform.iter())
        .zip(format)
        .map(|((r, p), f)| {
            let p = crate::info::platform_of(f, Some(p.unwrap_or("unknown")));
            (r.unwrap_or(""), p)
        })
        .collect();
    let by = |f: &dyn Fn(&RunPlatform) -> bool| -> BTreeSet<String> {
        pairs
            .iter()
            .filter(|p| f(p))
            .map(|p| p.0.to_string())
            .collect()
    };
    let prefix = format!("{selector}/");
    let mut chosen = by(&|p| p.0 == selector);
    if chosen.is_empty() {
        chosen = by(&|p| p.0.starts_with(&prefix));
    }
    if chosen.is_empty() {
        chosen = by(&|p| p.1 == Some(selector));
    }
    if chosen.is_empty() {
        let all: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
        let platforms: BTreeSet<&str> = pairs.iter().filter_map(|p| p.1).collect();
        let list = |s: BTreeSet<&str>| s.into_iter().collect::<Vec<_>>().join(", ");
        return Err(CompareError::Unknown {
            root: root.to_path_buf(),
            selector: selector.to_string(),
            runs: list(all),
            platforms: list(platforms),
        });
    }
    let mut info: BTreeMap<String, RunInfo> = BTreeMap::new();
    let (device, world) = (strs(&runs, "device_name"), ints(&runs, "world_size"));
    let (version, source) = (strs(&runs, "runtime_version"), strs(&runs, "source_path"));
    for (i, p) in pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| chosen.contains(p.0))
    {
        let e = info.entry(p.0.to_string()).or_default();
        if let Some(platform) = p.1 {
            e.platform = platform.to_string();
        }
        e.devices.extend(device[i].map(str::to_string));
        e.world_size = e.world_size.max(world[i]);
        e.versions.extend(version[i].map(str::to_string));
        e.sources.extend(source[i].map(str::to_string));
        e.files += 1;
    }
    for e in info.values_mut().filter(|e| e.platform.is_empty()) {
        e.platform = "unknown".into();
    }
    Ok(Side {
        selector: selector.to_string(),
        runs: chosen.into_iter().collect(),
        info,
    })
}
