//! The sweep's metrics, per rank and step of every run: what configurations are ranked by.
//!
//! Every value comes from a table other commands already define and test: the step rows of
//! `aorta overlap` (`overlap_steps`, with the collectives' wait/transfer split where ranks
//! match) and the GEMM rate of `aorta perf` (`perf_steps`). A run's steps are its trace's
//! steps; a trace without steps whose run has a per-iteration log (the workloads' JSONL)
//! takes the log's iterations; a run with neither is one step, its whole capture.

use std::collections::HashMap;
use std::path::Path;

use crate::collectives::Job;
use crate::dataset::DatasetError;
use crate::perf::{self, Peaks};
use crate::rows::{floats, ints, strs};

/// One metric of the sweep.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name, the prefix of its `sweep.parquet` columns.
    pub name: &'static str,
    /// Whether less is better.
    pub lower_is_better: bool,
    /// What it is, for the docs and the page.
    pub what: &'static str,
}

/// The metrics, in `sweep.parquet`'s column order.
pub const METRICS: [Metric; 7] = [
    Metric {
        name: "step_ms",
        lower_is_better: true,
        what: "the step: its ProfilerStep span, else its GPU window (ms)",
    },
    Metric {
        name: "exposed_comm_ms",
        lower_is_better: true,
        what: "communication with no compute kernel running (ms per step)",
    },
    Metric {
        name: "comm_ms",
        lower_is_better: true,
        what: "time at least one communication kernel runs (ms per step)",
    },
    Metric {
        name: "comm_hidden_pct",
        lower_is_better: false,
        what: "share of communication under compute (%)",
    },
    Metric {
        name: "tp_overlap_ratio",
        lower_is_better: false,
        what: "GEMM-comm overlap / min(GEMM, comm) (the TP overlap tuner's ratio)",
    },
    Metric {
        name: "comm_wait_ms",
        lower_is_better: true,
        what: "time collectives wait for the last rank (ms per step; ranks matched)",
    },
    Metric {
        name: "gemm_tflops",
        lower_is_better: false,
        what: "modelled GEMM TFLOP/s while GEMMs run",
    },
];

/// Index of `name` in [`METRICS`].
pub fn index(name: &str) -> Option<usize> {
    METRICS.iter().position(|m| m.name == name)
}

/// One step of one rank of one run, with each metric (null where the run has no such value).
#[derive(Debug, Clone, PartialEq)]
pub struct StepValues {
    /// The run.
    pub run: String,
    /// The rank.
    pub rank: i64,
    /// The step (null: the whole capture of a run without steps).
    pub step: Option<i64>,
    /// [`METRICS`]' values, in order.
    pub values: [Option<f64>; METRICS.len()],
}

/// The step values of `runs`.
pub fn step_values(root: &Path, runs: &[String]) -> Result<Vec<StepValues>, DatasetError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let jobs = runs
        .iter()
        .map(|r| Job::analyze(root, r))
        .collect::<Result<Vec<_>, _>>()?;
    let steps = crate::fresh::load_or_compute(root, runs, &jobs)?.steps;
    let tflops: HashMap<(String, i64, Option<i64>), f64> =
        perf::compute(root, runs, &Peaks::default())?
            .into_iter()
            .flat_map(|p| p.steps)
            .filter(|s| s.level == "step")
            .filter_map(|s| Some(((s.run, s.rank, s.step), s.gemm_tflops?)))
            .collect();
    let run = strs(&steps, "run");
    let source = strs(&steps, "source");
    let rank = ints(&steps, "rank");
    let step = ints(&steps, "step");
    let step_ns = ints(&steps, "step_ns");
    let window_ns = ints(&steps, "window_ns");
    let exposed = ints(&steps, "exposed_comm_ns");
    let comm = ints(&steps, "comm_ns");
    let hidden = floats(&steps, "comm_hidden_pct");
    let tp = floats(&steps, "tp_overlap_ratio");
    let wait = ints(&steps, "comm_wait_ns");
    // Which rows are a run's steps: its trace's steps, else its log's, else its whole capture.
    let kind = |i: usize| match (source[i], step[i]) {
        (Some("trace"), Some(_)) => 0,
        (Some("jsonl"), Some(_)) => 1,
        (Some("trace"), None) => 2,
        _ => 3,
    };
    let mut best: HashMap<&str, u8> = HashMap::new();
    for (i, r) in run.iter().enumerate() {
        if let Some(r) = *r {
            let k = kind(i);
            let e = best.entry(r).or_insert(k);
            *e = (*e).min(k);
        }
    }
    let ms = |v: Option<i64>| v.map(|ns| ns as f64 / 1e6);
    let mut out = Vec::new();
    for i in 0..steps.height() {
        let (Some(r), Some(k)) = (run[i], rank[i]) else {
            continue;
        };
        let chosen = best.get(r).copied().unwrap_or(3);
        if chosen == 3 || kind(i) != chosen {
            continue;
        }
        let s = step[i];
        out.push(StepValues {
            run: r.to_string(),
            rank: k,
            step: s,
            values: [
                ms(step_ns[i].or(window_ns[i])),
                ms(exposed[i]),
                ms(comm[i]),
                hidden[i],
                tp[i],
                ms(wait[i]),
                tflops.get(&(r.to_string(), k, s)).copied(),
            ],
        });
    }
    Ok(out)
}
