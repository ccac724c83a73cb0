//! summary.json: the Python aorta `overlap_report.py` summary (`datasets.{label}` and
//! `comparison`, same field names and meanings) plus every level of the comparison.

use serde_json::{json, Map, Value};

use super::levels::{step_source, LevelRow, SIDES};
use super::load::{ints, strs, SideData};
use super::operators::OpRow;

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().fold(0.0, |a, b| a + b) / v.len() as f64)
}

/// Per-iteration means as the Python report computes them: over every (rank, step) row.
fn dataset(d: &SideData) -> Value {
    let source = step_source(d);
    let steps = &d.overlap.steps;
    let src = strs(steps, "source");
    let rows: Vec<usize> = (0..steps.height())
        .filter(|&i| src[i] == Some(source))
        .collect();
    let col = |name: &str| -> Vec<f64> {
        let v = ints(steps, name);
        rows.iter()
            .map(|&i| v[i].unwrap_or(0) as f64 * 1e-6)
            .collect()
    };
    let n = rows.len();
    let per_iter = |total: f64| (n > 0).then(|| total / n as f64);
    let overlap = mean(&col("compute_comm_overlap_ns"));
    let compute = mean(&col("compute_ns"));
    let kind_overlap = |kind: &str| per_iter(kind_overlap_ms(d, source, kind));
    json!({
        "count": n,
        "mean_loss": mean(&d.losses),
        "mean_overlap_ms": overlap,
        "mean_compute_ms": compute,
        "mean_allreduce_overlap_ms": kind_overlap("all_reduce"),
        "mean_reducescatter_overlap_ms": kind_overlap("reduce_scatter"),
        "overlap_ratio": overlap.zip(compute).filter(|c| c.1 != 0.0).map(|(o, c)| o / c),
        "mean_step_ms": mean(&col("window_ns")),
        "mean_comm_ms": mean(&col("comm_ns")),
        "mean_exposed_comm_ms": mean(&col("exposed_comm_ns")),
        "runs": d.side.runs,
        "source": source,
    })
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

fn level_json(r: &LevelRow) -> Value {
    let side = |s: usize| {
        r.sides[s].map(|x| json!({"n": x.n, "median": x.median, "p10": x.p10, "p90": x.p90}))
    };
    json!({
        "key": r.key,
        "unit": r.unit,
        "reference": side(0),
        "candidate": side(1),
        "ratio": r.ratio(),
    })
}

fn op_json(r: &OpRow) -> Value {
    json!({
        "op": r.key.0, "input_dims": r.key.1, "input_types": r.key.2,
        "reference_ms": r.ms[0], "candidate_ms": r.ms[1],
        "reference_calls": r.calls[0], "candidate_calls": r.calls[1],
        "ratio": r.ratio(), "diff_ms": r.diff(), "status": r.status(),
        "reference_tflops": r.tflops[0], "candidate_tflops": r.tflops[1],
        "reference_peak_pct": r.peak_pct[0], "candidate_peak_pct": r.peak_pct[1],
    })
}

pub(super) fn build(sides: &[SideData; 2], levels: &[LevelRow], ops: &[OpRow]) -> Value {
    let mut datasets = Map::new();
    let mut ratios = [None, None];
    for (s, d) in sides.iter().enumerate() {
        let v = dataset(d);
        ratios[s] = v["overlap_ratio"].as_f64();
        let label = d.side.label().to_string();
        // Both sides under one label (a run compared with itself) keep both entries.
        let key = if datasets.contains_key(&label) {
            format!("{label} ({})", SIDES[s])
        } else {
            label
        };
        datasets.insert(key, v);
    }
    let mut by_level = Map::new();
    for level in ["steps", "categories", "collectives"] {
        let rows: Vec<Value> = levels
            .iter()
            .filter(|r| r.level == level)
            .map(level_json)
            .collect();
        by_level.insert(level.to_string(), Value::Array(rows));
    }
    let count = |st: &str| ops.iter().filter(|r| r.status() == st).count();
    json!({
        "datasets": datasets,
        "comparison": {
            "reference": sides[0].side.label(),
            "candidate": sides[1].side.label(),
            "reference_overlap_ratio": ratios[0],
            "candidate_overlap_ratio": ratios[1],
            "ratio_delta": ratios[0].zip(ratios[1]).map(|(r, c)| c - r),
        },
        "levels": by_level,
        "operators": {
            "matched": count("matched"),
            "reference_only": count("reference_only"),
            "candidate_only": count("candidate_only"),
            "top": ops.iter().take(20).map(op_json).collect::<Vec<_>>(),
        },
    })
}
