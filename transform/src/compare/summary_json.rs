//! summary.json: the Python aorta `overlap_report.py` summary (`datasets.{label}` and
//! `comparison`, same field names and meanings) plus every level of the comparison.
//!
//! The document is a typed struct ([`Summary`]): `aorta compare` serializes it, the compare
//! page and the tests deserialize it, so a renamed or retyped field breaks the build of every
//! reader instead of turning into a silent `null`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::gate::Regression;
use super::levels::{LevelRow, SIDES};
use super::load::{ints, strs, SideData};
use super::operators::OpRow;
use super::PythonSource;
use crate::summary::Spread;

/// The whole summary.json document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Per side, under its label: the Python report's per-iteration means.
    pub datasets: BTreeMap<String, DatasetSummary>,
    /// The Python report's `comparison` block.
    pub comparison: ComparisonSummary,
    /// Every level of the comparison: both sides' spread and the ratio per key.
    pub levels: Levels,
    /// The operator level: how many matched, and the largest differences.
    pub operators: OperatorsSummary,
    /// Which runs were paired, each pair's step ratio, their geometric mean, and whether the
    /// two sides are comparable at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<super::pairs::PairsSummary>,
    /// What each side selected: the selector and, per run, platform, GPUs, world size,
    /// versions and files (empty in documents of an older aorta).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sides: Vec<SideSummary>,
    /// The `--fail-if-regressed` checks, when the gate was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regression: Option<Regression>,
}

/// One side's per-iteration means, as the Python `overlap_report.py` computes them: over
/// every (rank, step) row of the side's step source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    /// (rank, step) rows averaged.
    pub(crate) count: usize,
    pub(crate) mean_loss: Option<f64>,
    pub(crate) mean_overlap_ms: Option<f64>,
    pub(crate) mean_compute_ms: Option<f64>,
    pub(crate) mean_allreduce_overlap_ms: Option<f64>,
    pub(crate) mean_reducescatter_overlap_ms: Option<f64>,
    /// mean overlap / mean compute (the Python report's `overlap_ratio`).
    pub(crate) overlap_ratio: Option<f64>,
    /// The mean step: each row's `ProfilerStep` span, else its GPU window (a JSONL log's
    /// iteration time).
    pub(crate) mean_step_ms: Option<f64>,
    /// The mean GPU window: first start to last end of each step's activities (a JSONL log's
    /// iteration time). Null when no row has one.
    #[serde(default)]
    pub(crate) mean_gpu_window_ms: Option<f64>,
    /// Null when the source holds no comm union (a JSONL log), as the other means.
    pub(crate) mean_comm_ms: Option<f64>,
    pub(crate) mean_exposed_comm_ms: Option<f64>,
    /// The runs of this side.
    pub(crate) runs: Vec<String>,
    /// Where the steps came from: `trace` or `jsonl`.
    pub(crate) source: String,
}

/// One side of the comparison as the user selected it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    /// `reference` or `candidate`.
    pub side: String,
    /// What the user typed (`--reference cuda`).
    pub selector: String,
    /// Every run the selector named, paired or not.
    pub runs: BTreeMap<String, super::select::RunInfo>,
}

/// The Python report's `comparison` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonSummary {
    /// The reference side's label.
    pub reference: String,
    /// The candidate side's label.
    pub candidate: String,
    /// The reference side's mean overlap / mean compute.
    pub reference_overlap_ratio: Option<f64>,
    /// The candidate side's mean overlap / mean compute.
    pub candidate_overlap_ratio: Option<f64>,
    /// candidate − reference.
    pub ratio_delta: Option<f64>,
}

/// The levels of `compare_levels`, as JSON: per key, one entry per pair and, with several
/// pairs, the overall entry first (the geometric mean of the pairs' ratios; `overall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Levels {
    /// The step metrics (`step_ms`, `exposed_comm_ms`, …), one entry per key.
    pub steps: Vec<LevelEntry>,
    /// GPU ms per step of each category.
    pub categories: Vec<LevelEntry>,
    /// `other_compute` per subcategory (absent in summaries written before it existed).
    #[serde(default)]
    pub subcategories: Vec<LevelEntry>,
    /// Per collective kind: bandwidth and time per call.
    pub collectives: Vec<LevelEntry>,
}

impl Levels {
    /// The overall entry of `key` in the steps level.
    pub fn step(&self, key: &str) -> Option<&LevelEntry> {
        overall(&self.steps, key)
    }
}

/// The entry that stands for `key` in `level`: the overall entry (with one pair, the pair's).
pub fn overall<'a>(level: &'a [LevelEntry], key: &str) -> Option<&'a LevelEntry> {
    level.iter().find(|e| e.overall && e.key == key)
}

/// The entries of `key` in `level` that belong to one pair each, in pair order.
pub fn per_pair<'a>(level: &'a [LevelEntry], key: &'a str) -> impl Iterator<Item = &'a LevelEntry> {
    level
        .iter()
        .filter(move |e| e.key == key && e.workload.is_some())
}

fn yes() -> bool {
    true
}

/// One key of one level, for one pair or (`workload` null) over several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelEntry {
    /// The pair's workload; null on the overall entry of several pairs.
    #[serde(default)]
    pub workload: Option<String>,
    /// The entry that stands for the key (one per key): the overall entry of several pairs,
    /// or the one pair's entry (documents of an older aorta: every entry).
    #[serde(default = "yes")]
    pub overall: bool,
    /// The metric (`step_ms`), category (`gemm`) or collective key.
    pub key: String,
    /// `ms`, `ratio`, `pct`, `GB/s`, …
    pub unit: String,
    /// Each side's spread over the pair's windows; null on the overall entry of several
    /// pairs (a median over several workloads' windows means nothing).
    pub reference: Option<SpreadSummary>,
    /// The candidate side's spread.
    pub candidate: Option<SpreadSummary>,
    /// candidate median / reference median; on the overall entry of several pairs, the
    /// geometric mean of the pairs' ratios.
    pub ratio: Option<f64>,
    /// On the overall entry of several pairs: the spread of the pairs' ratios (`n` pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_spread: Option<SpreadSummary>,
}

/// A spread over steps and ranks (or over pairs, of their ratios).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpreadSummary {
    /// Values it is taken over.
    pub n: usize,
    /// The median.
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
}

impl From<Spread> for SpreadSummary {
    fn from(s: Spread) -> Self {
        SpreadSummary {
            n: s.n,
            median: s.median,
            p10: s.p10,
            p90: s.p90,
        }
    }
}

/// The operator level in short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorsSummary {
    /// Operators (name, shapes, dtypes) both sides ran.
    pub matched: usize,
    /// Operators only the reference ran.
    pub reference_only: usize,
    /// Operators only the candidate ran.
    pub candidate_only: usize,
    /// Per pair (in pair order), the `TOP_OPERATORS` operators with the largest
    /// |candidate − reference|.
    pub top: Vec<OperatorEntry>,
}

/// One operator (name, shapes, dtypes) on both sides of one pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorEntry {
    /// The pair's workload (empty in documents of an older aorta).
    #[serde(default)]
    pub workload: String,
    /// Operator name (`aten::mm`).
    pub op: String,
    /// Its `Input Dims`, compact JSON ("" when the trace gives none).
    pub input_dims: String,
    pub(crate) input_types: String,
    /// The reference side's mean GPU ms of the operator per step window (null: it did not run).
    pub reference_ms: Option<f64>,
    /// As `reference_ms`, for the candidate.
    pub candidate_ms: Option<f64>,
    /// Calls (operator instances) on the reference side.
    pub reference_calls: i64,
    /// Calls on the candidate side.
    pub candidate_calls: i64,
    /// candidate_ms / reference_ms (null when either is).
    pub ratio: Option<f64>,
    pub(crate) diff_ms: f64,
    /// `matched`, `reference_only` or `candidate_only`.
    pub status: String,
    /// The reference side's achieved TFLOP/s (null without a FLOPs model or shapes).
    pub reference_tflops: Option<f64>,
    /// The candidate side's achieved TFLOP/s.
    pub candidate_tflops: Option<f64>,
    /// The reference side's TFLOP/s as a percentage of its device's dense peak.
    pub reference_peak_pct: Option<f64>,
    /// The candidate side's, of its own device's peak.
    pub candidate_peak_pct: Option<f64>,
    /// Kernels each side launched per call of the operator (null on a side without it).
    #[serde(default)]
    pub reference_kernels_per_call: Option<f64>,
    /// As `reference_kernels_per_call`, for the candidate.
    #[serde(default)]
    pub candidate_kernels_per_call: Option<f64>,
    /// Each side's kernel names for the operator, most GPU time first (at most 3).
    #[serde(default)]
    pub reference_top_kernels: Vec<String>,
    /// As `reference_top_kernels`, for the candidate.
    #[serde(default)]
    pub candidate_top_kernels: Vec<String>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().fold(0.0, |a, b| a + b) / v.len() as f64)
}

/// The source of one side's Python keys: the asked one when the side has it, else the other.
fn python_source(d: &SideData, want: PythonSource) -> &'static str {
    let src = strs(&d.overlap.steps, "source");
    let has = |s: &str| src.contains(&Some(s));
    match want {
        PythonSource::Trace if has("trace") => "trace",
        PythonSource::Trace => "jsonl",
        _ if has("jsonl") => "jsonl",
        _ => "trace",
    }
}

/// Per-iteration means as the Python report computes them: over every (rank, step) row of
/// the chosen source (by default the JSONL log, whose numbers are the Python tool's own).
fn dataset(d: &SideData, want: PythonSource) -> DatasetSummary {
    let source = python_source(d, want);
    let steps = &d.overlap.steps;
    let src = strs(steps, "source");
    let rows: Vec<usize> = (0..steps.height())
        .filter(|&i| src[i] == Some(source))
        .collect();
    // The values the rows hold, in ms: a value the source does not hold (a JSONL log has no
    // comm union) is left out, so a mean over none is null, never 0.
    let col = |name: &str| -> Vec<f64> {
        let v = ints(steps, name);
        rows.iter()
            .filter_map(|&i| v[i])
            .map(|x| x as f64 * 1e-6)
            .collect()
    };
    // A step is its ProfilerStep span, else its GPU window (the steps level's `step_ms`).
    let (span, window) = (ints(steps, "step_ns"), ints(steps, "window_ns"));
    let step_ms: Vec<f64> = rows
        .iter()
        .filter_map(|&i| span[i].or(window[i]))
        .map(|x| x as f64 * 1e-6)
        .collect();
    let n = rows.len();
    let per_iter = |total: f64| (n > 0).then(|| total / n as f64);
    let overlap = mean(&col("compute_comm_overlap_ns"));
    let compute = mean(&col("compute_ns"));
    let kind_overlap = |kind: &str| per_iter(kind_overlap_ms(d, source, kind));
    DatasetSummary {
        count: n,
        mean_loss: mean(&d.losses),
        mean_overlap_ms: overlap,
        mean_compute_ms: compute,
        mean_allreduce_overlap_ms: kind_overlap("all_reduce"),
        mean_reducescatter_overlap_ms: kind_overlap("reduce_scatter"),
        overlap_ratio: overlap
            .zip(compute)
            .filter(|c| c.1 != 0.0)
            .map(|(o, c)| o / c),
        mean_step_ms: mean(&step_ms),
        mean_gpu_window_ms: mean(&col("window_ns")),
        mean_comm_ms: mean(&col("comm_ns")),
        mean_exposed_comm_ms: mean(&col("exposed_comm_ns")),
        runs: d.side.runs.clone(),
        source: source.to_string(),
    }
}

/// Total compute∩comm of one collective kind over the side's step rows, in ms (trace rows
/// have activities, JSONL rows none: that tells the two sources apart).
fn kind_overlap_ms(d: &SideData, source: &str, kind: &str) -> f64 {
    let c = &d.overlap.collectives;
    let (level, op) = (strs(c, "level"), strs(c, "comm_op"));
    let (count, comm, exposed) = (
        ints(c, "activity_count"),
        ints(c, "comm_ns"),
        ints(c, "exposed_comm_ns"),
    );
    let wanted = |i: usize| {
        level[i] == Some("step")
            && op[i] == Some(kind)
            && (count[i].unwrap_or(0) > 0) == (source == "trace")
    };
    (0..c.height())
        .filter(|&i| wanted(i))
        .map(|i| (comm[i].unwrap_or(0) - exposed[i].unwrap_or(0)) as f64 * 1e-6)
        .fold(0.0, |a, b| a + b)
}

fn level_entry(r: &LevelRow) -> LevelEntry {
    LevelEntry {
        workload: r.workload.clone(),
        overall: r.overall,
        key: r.key.clone(),
        unit: r.unit.to_string(),
        reference: r.sides[0].map(SpreadSummary::from),
        candidate: r.sides[1].map(SpreadSummary::from),
        ratio: r.ratio(),
        ratio_spread: r.ratio_spread().map(SpreadSummary::from),
    }
}

/// Operators kept in `operators.top` per pair.
pub const TOP_OPERATORS: usize = 20;

/// The first `TOP_OPERATORS` rows of each pair (`ops` is in pair order, largest difference
/// first within a pair).
fn top_per_pair(ops: &[OpRow]) -> Vec<OperatorEntry> {
    ops.chunk_by(|a, b| a.workload == b.workload)
        .flat_map(|pair| pair.iter().take(TOP_OPERATORS))
        .map(op_entry)
        .collect()
}

fn op_entry(r: &OpRow) -> OperatorEntry {
    OperatorEntry {
        workload: r.workload.clone(),
        op: r.key.0.clone(),
        input_dims: r.key.1.clone(),
        input_types: r.key.2.clone(),
        reference_ms: r.ms[0],
        candidate_ms: r.ms[1],
        reference_calls: r.calls[0],
        candidate_calls: r.calls[1],
        ratio: r.ratio(),
        diff_ms: r.diff(),
        status: r.status().to_string(),
        reference_tflops: r.tflops[0],
        candidate_tflops: r.tflops[1],
        reference_peak_pct: r.peak_pct[0],
        candidate_peak_pct: r.peak_pct[1],
        reference_kernels_per_call: r.kernels_per_call[0],
        candidate_kernels_per_call: r.kernels_per_call[1],
        reference_top_kernels: r.top_kernels[0].clone(),
        candidate_top_kernels: r.top_kernels[1].clone(),
    }
}

pub(super) fn build(
    sides: &[SideData; 2],
    levels: &[LevelRow],
    ops: &[OpRow],
    want: PythonSource,
) -> Summary {
    let mut datasets = BTreeMap::new();
    let mut ratios = [None, None];
    for (s, d) in sides.iter().enumerate() {
        let v = dataset(d, want);
        ratios[s] = v.overlap_ratio;
        let label = d.side.label().to_string();
        // Both sides under one label (a run compared with itself) keep both entries.
        let key = if datasets.contains_key(&label) {
            format!("{label} ({})", SIDES[s])
        } else {
            label
        };
        datasets.insert(key, v);
    }
    let level = |name: &str| -> Vec<LevelEntry> {
        levels
            .iter()
            .filter(|r| r.level == name)
            .map(level_entry)
            .collect()
    };
    let count = |st: &str| ops.iter().filter(|r| r.status() == st).count();
    Summary {
        datasets,
        comparison: ComparisonSummary {
            reference: sides[0].side.label().to_string(),
            candidate: sides[1].side.label().to_string(),
            reference_overlap_ratio: ratios[0],
            candidate_overlap_ratio: ratios[1],
            ratio_delta: ratios[0].zip(ratios[1]).map(|(r, c)| c - r),
        },
        levels: Levels {
            steps: level("steps"),
            categories: level("categories"),
            subcategories: level("subcategories"),
            collectives: level("collectives"),
        },
        operators: OperatorsSummary {
            matched: count("matched"),
            reference_only: count("reference_only"),
            candidate_only: count("candidate_only"),
            top: top_per_pair(ops),
        },
        pairs: None,
        sides: sides
            .iter()
            .enumerate()
            .map(|(s, d)| SideSummary {
                side: SIDES[s].to_string(),
                selector: d.side.selector.clone(),
                runs: d.side.info.clone(),
            })
            .collect(),
        regression: None,
    }
}
