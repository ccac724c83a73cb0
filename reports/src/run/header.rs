//! The top of the run report: what each run is (platform, GPU model, world size, runtime
//! versions, files), from the dataset's `runs` table, so a page read alone says what was
//! measured.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aorta_transform::dataset;
use aorta_transform::rows::{ints, strs};

use crate::error::ReportError;
use crate::page::Page;

/// What the `runs` rows of one run say (one row per input file).
#[derive(Default)]
struct RunInfo {
    platforms: BTreeSet<String>,
    devices: BTreeSet<String>,
    world: BTreeSet<i64>,
    versions: BTreeSet<String>,
    files: usize,
}

/// The table of the reported runs.
pub(crate) fn runs_table(page: &mut Page, root: &Path, runs: &[String]) -> Result<(), ReportError> {
    let df = dataset::read(root, "runs")?;
    let (run, platform, format) = (strs(&df, "run"), strs(&df, "platform"), strs(&df, "format"));
    let (device, version) = (strs(&df, "device_name"), strs(&df, "runtime_version"));
    let world = ints(&df, "world_size");
    let mut by: BTreeMap<&str, RunInfo> = BTreeMap::new();
    for i in 0..df.height() {
        let Some(r) = run[i].filter(|r| runs.iter().any(|x| x == r)) else {
            continue;
        };
        let e = by.entry(r).or_default();
        // A JSONL log's row has no platform (`unknown`): the run's is its traces'.
        let p = aorta_transform::info::platform_of(format[i], platform[i]);
        e.platforms.extend(p.map(str::to_string));
        e.devices.extend(device[i].map(str::to_string));
        e.world.extend(world[i]);
        e.versions.extend(version[i].map(str::to_string));
        e.files += 1;
    }
    let join = |s: &BTreeSet<String>| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let e = by.remove(r.as_str()).unwrap_or_default();
            let world: BTreeSet<String> = e.world.iter().map(i64::to_string).collect();
            vec![
                r.clone(),
                join(&e.platforms),
                join(&e.devices),
                join(&world),
                join(&e.versions),
                e.files.to_string(),
            ]
        })
        .collect();
    page.table(
        &["run", "platform", "GPU", "world size", "versions", "files"],
        &rows,
    );
    Ok(())
}
