//! `aorta info`: what a dataset holds, per run, read from its own tables (`runs`, `steps`,
//! `gpu_activities`, `diagnostics`) so that it says what every other command will see.
//!
//! Steps are real `ProfilerStep`s only: GPU activity outside every step is counted on its own
//! (`crate::steps`), never as a step. Findings are summed per diagnostic code with their
//! severity: `noise` for the codes a healthy trace has on purpose (`aorta_ingest::diag::NOISE`),
//! `trouble` for the rest, the ones worth a look.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aorta_ingest::diag;
use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, str_column, strs};

/// One run of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The run label.
    pub run: String,
    /// The last component of the label: what `aorta compare` pairs runs by.
    pub workload: String,
    /// Platforms of its trace files (`cuda`, `rocm`; JSONL logs have none), sorted.
    pub platforms: Vec<String>,
    /// Formats of its files (`kineto`, `rocprofv3_csv`, …), sorted.
    pub formats: Vec<String>,
    /// Device names the files declare, sorted.
    pub devices: Vec<String>,
    /// Its ranks, ascending.
    pub ranks: Vec<i64>,
    /// World sizes the files declare (one for a healthy job; none when no file says).
    pub world_sizes: Vec<i64>,
    /// The distinct `ProfilerStep` numbers of any rank.
    pub steps: Vec<i64>,
    /// (rank, step) rows of real steps.
    pub step_rows: i64,
    /// GPU activities of ranks with steps that lie in none of them.
    pub outside_activities: i64,
    /// Rows of `gpu_activities` (kernels, copies, sets).
    pub gpu_activities: i64,
    /// Rows of `cpu_ops`.
    pub cpu_ops: i64,
    /// Input files, sorted.
    pub files: Vec<String>,
    /// Earliest start and latest end of any row (the files' own clock, ns).
    pub first_ns: Option<i64>,
    /// See `first_ns`.
    pub last_ns: Option<i64>,
    /// Per diagnostic code: trouble first, then noise; within each, the most frequent first.
    pub findings: Vec<CodeSummary>,
}

/// The findings of one diagnostic code in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeSummary {
    /// The diagnostic code (`aorta_ingest::diag::CODES`).
    pub code: String,
    /// `trouble` or `noise`.
    pub severity: &'static str,
    /// Occurrences, summed over the run's files.
    pub count: i64,
    /// Files (diagnostics rows) that reported it.
    pub files: i64,
    /// The example of the lowest rank, then the lowest offset.
    pub example: String,
    /// The example's rank.
    pub rank: Option<i64>,
    /// The example's byte offset (decompressed) in its file, or its line for the line-based
    /// formats.
    pub offset: Option<i64>,
}

/// `trouble` or `noise` (`diag::NOISE`).
pub(crate) fn severity(code: &str) -> &'static str {
    if diag::is_trouble(code) {
        "trouble"
    } else {
        "noise"
    }
}

/// The platform a `runs` row stands for: none for a JSONL log, which records metrics and no
/// GPU (ingest writes `unknown` there), so that a run of traces and their logs reads `cuda`,
/// not `cuda, unknown`.
pub fn platform_of<'a>(format: Option<&str>, platform: Option<&'a str>) -> Option<&'a str> {
    platform.filter(|_| format != Some("jsonl"))
}

/// What `code` means (`diag::CODES`), empty for a code this aorta does not know.
pub fn meaning(code: &str) -> &'static str {
    diag::CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("", |(_, m)| m)
}

fn read(
    root: &Path,
    table: &str,
    runs: &[String],
    cols: &[&str],
) -> Result<DataFrame, DatasetError> {
    dataset::read_where(root, table, dataset::of_runs(runs), cols)
}

/// Distinct non-null values, sorted.
fn distinct<T: Ord + Clone>(rows: &[usize], v: &[Option<T>]) -> Vec<T> {
    let set: BTreeSet<T> = rows.iter().filter_map(|&i| v[i].clone()).collect();
    set.into_iter().collect()
}

/// The rows of `df` whose run is `run`.
fn rows_of(df: &DataFrame, run: &str) -> Vec<usize> {
    strs(df, "run")
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == Some(run))
        .map(|(i, _)| i)
        .collect()
}

/// Every run of `runs`, as its tables describe it.
pub fn summarize(root: &Path, runs: &[String]) -> Result<Vec<RunSummary>, DatasetError> {
    let files = read(
        root,
        "runs",
        runs,
        &[
            "run",
            "rank",
            "source_path",
            "format",
            "platform",
            "device_name",
            "world_size",
            "first_ns",
            "last_ns",
            "gpu_activity_count",
            "cpu_op_count",
        ],
    )?;
    let steps = read(root, "steps", runs, &["run", "rank", "step"])?;
    let acts = read(root, "gpu_activities", runs, &["run", "rank", "step"])?;
    let inside = crate::steps::in_steps_mask(&acts);
    let diags = findings(root, runs)?;
    let step_no = ints(&steps, "step");
    Ok(runs
        .iter()
        .map(|run| {
            let f = rows_of(&files, run);
            let s: Vec<usize> = rows_of(&steps, run)
                .into_iter()
                .filter(|&i| step_no[i].is_some())
                .collect();
            let text = |c: &str| -> Vec<String> {
                let v: Vec<Option<String>> = strs(&files, c)
                    .iter()
                    .map(|s| s.map(str::to_string))
                    .collect();
                distinct(&f, &v)
            };
            let int = |c: &str| distinct(&f, &ints(&files, c));
            let sum = |c: &str| {
                let v = ints(&files, c);
                f.iter().map(|&i| v[i].unwrap_or(0)).sum()
            };
            let outside = rows_of(&acts, run).iter().filter(|&&i| !inside[i]).count();
            RunSummary {
                run: run.clone(),
                workload: run.rsplit('/').next().unwrap_or(run).to_string(),
                platforms: {
                    let (format, platform) = (strs(&files, "format"), strs(&files, "platform"));
                    let v: Vec<Option<String>> = (0..files.height())
                        .map(|i| platform_of(format[i], platform[i]).map(str::to_string))
                        .collect();
                    distinct(&f, &v)
                },
                formats: text("format"),
                devices: text("device_name"),
                ranks: int("rank"),
                world_sizes: int("world_size"),
                steps: distinct(&s, &step_no),
                step_rows: s.len() as i64,
                outside_activities: outside as i64,
                gpu_activities: sum("gpu_activity_count"),
                cpu_ops: sum("cpu_op_count"),
                files: text("source_path"),
                first_ns: int("first_ns").first().copied(),
                last_ns: int("last_ns").last().copied(),
                findings: by_code(&diags, run),
            }
        })
        .collect())
}

/// Every diagnostics row of `runs`: `run`, `rank`, `code`, `severity`, `count`, `offset`,
/// `example`, by run, severity (trouble first), code and rank.
pub fn findings(root: &Path, runs: &[String]) -> Result<DataFrame, DatasetError> {
    let d = read(
        root,
        "diagnostics",
        runs,
        &["run", "rank", "code", "count", "offset", "example"],
    )?;
    let code = strs(&d, "code");
    let sev = str_column("severity", code.iter().map(|c| severity(c.unwrap_or(""))));
    let polars = |source| DatasetError::Polars {
        path: root.join("diagnostics"),
        source,
    };
    let mut d = d.hstack(&[sev]).map_err(polars)?;
    d = d
        .select([
            "run", "rank", "code", "severity", "count", "offset", "example",
        ])
        .map_err(polars)?;
    d.sort(
        ["run", "severity", "code", "rank", "offset"],
        SortMultipleOptions::default()
            .with_order_descending_multi([false, true, false, false, false])
            .with_nulls_last(true),
    )
    .map_err(polars)
}

/// The findings of one run summed per code: trouble first, then by count.
fn by_code(d: &DataFrame, run: &str) -> Vec<CodeSummary> {
    let (code, ex) = (strs(d, "code"), strs(d, "example"));
    let (rank, count, offset) = (ints(d, "rank"), ints(d, "count"), ints(d, "offset"));
    let mut out: BTreeMap<&str, CodeSummary> = BTreeMap::new();
    // Rows come sorted by code, rank and offset: the first row of a code is its first example.
    for i in rows_of(d, run) {
        let c = code[i].unwrap_or("");
        let e = out.entry(c).or_insert_with(|| CodeSummary {
            code: c.to_string(),
            severity: severity(c),
            count: 0,
            files: 0,
            example: ex[i].unwrap_or("").to_string(),
            rank: rank[i],
            offset: offset[i],
        });
        e.count += count[i].unwrap_or(0);
        e.files += 1;
    }
    let mut v: Vec<CodeSummary> = out.into_values().collect();
    v.sort_by(|a, b| {
        (b.severity == "trouble")
            .cmp(&(a.severity == "trouble"))
            .then(b.count.cmp(&a.count))
            .then(a.code.cmp(&b.code))
    });
    v
}
