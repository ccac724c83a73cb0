//! The columns `aorta perf` reads for one run: compute kernels, the operators and runtime
//! calls that launched them, the steps' GPU windows, each rank's device name and whether its
//! run parameters record the TF32 setting on.

use std::collections::HashMap;
use std::path::Path;

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, strs};

/// One run's inputs (frames without the `run` column: it is one run).
pub(crate) struct RunData {
    /// Kernels that are not communication, sorted by rank and start.
    pub acts: DataFrame,
    /// `cpu_op` and `runtime` rows.
    pub cpu: DataFrame,
    /// (rank, step) → the step's GPU window [start, end].
    pub windows: HashMap<(i64, Option<i64>), (i64, i64)>,
    /// rank → device name (the first the rank's files name).
    pub devices: HashMap<i64, String>,
    /// Ranks whose run parameters record the TF32 matmul setting on (`allow_tf32`).
    pub tf32_allowed: std::collections::HashSet<i64>,
}

const ACTS: [&str; 11] = [
    "rank",
    "name",
    "step",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
    "dtype",
    "gemm_m",
    "gemm_n",
    "gemm_k",
];

const CPU: [&str; 11] = [
    "rank",
    "category",
    "name",
    "tid",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
    "input_dims",
    "input_types",
    "concrete_inputs",
];

fn collect(root: &Path, table: &str, lf: LazyFrame) -> Result<DataFrame, DatasetError> {
    lf.collect().map_err(|source| DatasetError::Polars {
        path: root.join(table),
        source,
    })
}

fn select(cols: &[&str]) -> Vec<Expr> {
    cols.iter().map(|c| col(*c)).collect()
}

impl RunData {
    pub(crate) fn load(root: &Path, run: &str) -> Result<RunData, DatasetError> {
        let this = col("run").eq(lit(run));
        let kernels = col("kind")
            .eq(lit("kernel"))
            .and(col("category").neq(lit("comm")));
        let acts = dataset::scan(root, "gpu_activities")?
            .filter(this.clone().and(kernels))
            .select(select(&ACTS))
            .sort(["rank", "start_ns"], SortMultipleOptions::default());
        // Operators with their names and shapes; runtime calls (two fifths of the rows, for the
        // launches without an operator id) without their strings, which nothing reads.
        let ops = dataset::scan(root, "cpu_ops")?
            .filter(this.clone().and(col("category").eq(lit("cpu_op"))))
            .select(select(&CPU));
        let calls = dataset::scan(root, "cpu_ops")?
            .filter(
                this.clone()
                    .and(crate::launch::launch_calls())
                    .and(col("correlation").is_not_null()),
            )
            .select(CPU.map(|c| match c {
                "name" | "input_dims" | "input_types" | "concrete_inputs" => {
                    lit(NULL).cast(DataType::String).alias(c)
                }
                c => col(c),
            }));
        let polars = |source| DatasetError::Polars {
            path: root.join("cpu_ops"),
            source,
        };
        let cpu = concat([ops, calls], UnionArgs::default()).map_err(polars)?;
        let steps = dataset::scan(root, "steps")?
            .filter(this.clone())
            .select(select(&["rank", "step", "gpu_start_ns", "gpu_end_ns"]));
        let runs = dataset::scan(root, "runs")?
            .filter(this)
            .select(select(&["rank", "device_name", "params", "source_path"]))
            .sort(["source_path"], SortMultipleOptions::default());
        let runs = collect(root, "runs", runs)?;
        Ok(RunData {
            acts: collect(root, "gpu_activities", acts)?,
            cpu: collect(root, "cpu_ops", cpu)?,
            windows: windows(&collect(root, "steps", steps)?),
            devices: devices(&runs),
            tf32_allowed: tf32_allowed(&runs),
        })
    }
}

fn windows(df: &DataFrame) -> HashMap<(i64, Option<i64>), (i64, i64)> {
    let (rank, step) = (ints(df, "rank"), ints(df, "step"));
    let (start, end) = (ints(df, "gpu_start_ns"), ints(df, "gpu_end_ns"));
    let mut out: HashMap<(i64, Option<i64>), (i64, i64)> = HashMap::new();
    for i in 0..df.height() {
        let (Some(s), Some(e)) = (start[i], end[i]) else {
            continue;
        };
        // Several files of one rank (a JSONL beside the trace) may each have the step.
        let w = out.entry((rank[i].unwrap_or(0), step[i])).or_insert((s, e));
        *w = (w.0.min(s), w.1.max(e));
    }
    out
}

fn devices(df: &DataFrame) -> HashMap<i64, String> {
    let (rank, name) = (ints(df, "rank"), strs(df, "device_name"));
    let mut out = HashMap::new();
    for i in 0..df.height() {
        if let (Some(r), Some(n)) = (rank[i], name[i]) {
            out.entry(r).or_insert_with(|| n.to_string());
        }
    }
    out
}

fn tf32_allowed(df: &DataFrame) -> std::collections::HashSet<i64> {
    let (rank, params) = (ints(df, "rank"), strs(df, "params"));
    (0..df.height())
        .filter(|&i| params[i].is_some_and(super::precision::allows_tf32))
        .filter_map(|i| rank[i])
        .collect()
}
