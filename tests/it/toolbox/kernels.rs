//! `aorta kernels` against a brute force over the `gpu_activities` and `cpu_ops` rows: per
//! kernel name, count, total, mean, p50, p99 (numpy's interpolation, written in `super`), %
//! of the group's GPU time, and the launching operator found by External id by hand.

use std::collections::HashMap;

use polars::prelude::*;
use serde_json::Value;

use super::{bundled, numpy_quantile, ok, whole};
use crate::common::{i64s, ingest_text, strs};

/// What the brute force finds for one group: each name's durations, the group's GPU time, and
/// per name the time of each launching operator (`?` when none has the kernel's External id).
struct Brute {
    by_name: HashMap<String, Vec<i64>>,
    total: i64,
    op_ns: HashMap<String, HashMap<String, i64>>,
}

/// The brute force over the activities of `run` (and `rank`).
fn brute(root: &std::path::Path, run: &str, rank: Option<i64>) -> Brute {
    let acts = whole(root, "gpu_activities");
    let cpu = whole(root, "cpu_ops");
    let (arun, arank, name) = (strs(&acts, "run"), i64s(&acts, "rank"), strs(&acts, "name"));
    let (s, e, ext) = (
        i64s(&acts, "start_ns"),
        i64s(&acts, "end_ns"),
        i64s(&acts, "external_id"),
    );
    // The innermost (shortest) cpu_op of each (run, rank, External id).
    let mut ops: HashMap<(String, i64, i64), (i64, String)> = HashMap::new();
    let (crun, crank, cname, ccat) = (
        strs(&cpu, "run"),
        i64s(&cpu, "rank"),
        strs(&cpu, "name"),
        strs(&cpu, "category"),
    );
    let (cs, ce, cext) = (
        i64s(&cpu, "start_ns"),
        i64s(&cpu, "end_ns"),
        i64s(&cpu, "external_id"),
    );
    for i in 0..cpu.height() {
        let (Some(x), Some("cpu_op")) = (cext[i], ccat[i].as_deref()) else {
            continue;
        };
        let key = (crun[i].clone().unwrap(), crank[i].unwrap(), x);
        let d = ce[i].unwrap() - cs[i].unwrap();
        let slot = ops.entry(key).or_insert((d, cname[i].clone().unwrap()));
        if d < slot.0 {
            *slot = (d, cname[i].clone().unwrap());
        }
    }
    let (mut by_name, mut total, mut op_ns) = (HashMap::new(), 0, HashMap::new());
    for i in 0..acts.height() {
        if arun[i].as_deref() != Some(run) || rank.is_some_and(|r| arank[i] != Some(r)) {
            continue;
        }
        let d = (e[i].unwrap() - s[i].unwrap()).max(0);
        total += d;
        let n = name[i].clone().unwrap();
        by_name.entry(n.clone()).or_insert_with(Vec::new).push(d);
        let op = ext[i]
            .and_then(|x| ops.get(&(run.to_string(), arank[i].unwrap(), x)))
            .map_or("?".to_string(), |o| o.1.clone());
        *op_ns
            .entry(n)
            .or_insert_with(HashMap::new)
            .entry(op)
            .or_insert(0) += d;
    }
    Brute {
        by_name,
        total,
        op_ns,
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// Every row of `aorta kernels --by run|rank --format json` for two runs equals the brute
/// force: the top N names by total, and each one's statistics and launching operator.
#[test]
fn kernel_statistics_and_launching_operators_match_a_brute_force_over_the_rows() {
    let root = bundled();
    let ds = root.to_str().unwrap();
    let mut checked_ops = 0;
    for (run, by, ranks) in [
        ("cuda", "run", vec![None]),
        ("fsdp/fsdp_default", "rank", vec![Some(0), Some(1)]),
    ] {
        let doc: Value = serde_json::from_str(&ok(&[
            "kernels", ds, "--run", run, "--by", by, "--top", "7", "--format", "json",
        ]))
        .unwrap();
        let rows = doc["rows"].as_array().unwrap();
        for rank in ranks {
            let Brute {
                by_name,
                total,
                op_ns,
            } = brute(root, run, rank);
            let mine: Vec<&Value> = rows
                .iter()
                .filter(|r| rank.is_none() || r["rank"].as_i64() == rank)
                .collect();
            let mut expect: Vec<(&String, i64)> =
                by_name.iter().map(|(n, d)| (n, d.iter().sum())).collect();
            expect.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            assert_eq!(mine.len(), expect.len().min(7), "{run} {rank:?}");
            for (row, (name, sum)) in mine.iter().zip(&expect) {
                let d = &by_name[*name];
                assert_eq!(row["name"].as_str().unwrap(), name.as_str());
                assert_eq!(row["count"].as_i64().unwrap(), d.len() as i64);
                assert_eq!(row["total_ns"].as_i64().unwrap(), *sum);
                assert!((f(&row["mean_ns"]) - *sum as f64 / d.len() as f64).abs() < 1e-6);
                assert!((f(&row["p50_ns"]) - numpy_quantile(d, 0.5)).abs() < 1e-6);
                assert!((f(&row["p99_ns"]) - numpy_quantile(d, 0.99)).abs() < 1e-6);
                assert!((f(&row["gpu_pct"]) - 100.0 * *sum as f64 / total as f64).abs() < 1e-9);
                // The operator with most of the kernel's time, where every instance has one by
                // External id.
                let ops = &op_ns[*name];
                if !ops.contains_key("?") {
                    let best = ops
                        .iter()
                        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                        .unwrap()
                        .0;
                    assert_eq!(row["op"].as_str().unwrap(), best, "{name}");
                    checked_ops += 1;
                }
            }
        }
    }
    assert!(checked_ops >= 10, "only {checked_ops} operators checked");
}

/// A trace with one step and a kernel before it: --by run counts it (and says so), --by step
/// gives it a row of its own, step null; the steps' counts add up to the run's.
#[test]
fn activity_outside_steps_is_included_and_its_own_step_row() {
    let trace = r#"{"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 2, "args": {"correlation": 1}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 2, "args": {"correlation": 2}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 120, "dur": 2, "args": {"correlation": 3}},
      {"ph": "X", "cat": "kernel", "name": "k_a", "pid": 0, "tid": 7, "ts": 60, "dur": 10, "args": {"stream": 7, "correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "k_a", "pid": 0, "tid": 7, "ts": 130, "dur": 30, "args": {"stream": 7, "correlation": 2}},
      {"ph": "X", "cat": "kernel", "name": "k_b", "pid": 0, "tid": 7, "ts": 170, "dur": 20, "args": {"stream": 7, "correlation": 3}}
    ]}"#;
    let dir = ingest_text("rank0.json", trace, |_| {});
    let ds = dir.path().join("ds");
    let ds = ds.to_str().unwrap();
    let run: Value = serde_json::from_str(&ok(&["kernels", ds, "--format", "json"])).unwrap();
    assert_eq!(run["runs"][0]["outside_step_activities"], 1);
    assert_eq!(run["runs"][0]["outside_step_ns"], 10_000);
    let k_a = &run["rows"][0];
    assert_eq!(
        (
            k_a["name"].as_str(),
            k_a["count"].as_i64(),
            k_a["total_ns"].as_i64()
        ),
        (Some("k_a"), Some(2), Some(40_000))
    );
    assert!((f(&k_a["gpu_pct"]) - 100.0 * 40.0 / 60.0).abs() < 1e-9);
    let text = ok(&["kernels", ds]);
    assert!(
        text.contains("1 outside every step (0.010 ms), included"),
        "{text}"
    );
    let step: Value =
        serde_json::from_str(&ok(&["kernels", ds, "--by", "step", "--format", "json"])).unwrap();
    let rows: Vec<(Option<i64>, &str, i64)> = step["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["step"].as_i64(),
                r["name"].as_str().unwrap(),
                r["count"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [(None, "k_a", 1), (Some(3), "k_a", 1), (Some(3), "k_b", 1)]
    );
    let csv = ok(&["kernels", ds, "--by", "step", "--format", "csv"]);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(ok(&["kernels", ds, "--by", "step"]).contains("\n  -     k_a"));
}

/// --by category: each category's rows are its own kernels, their shares of the category's
/// time (which the rows give: sum over the category).
#[test]
fn by_category_shares_are_of_the_category() {
    let root = bundled();
    let doc: Value = serde_json::from_str(&ok(&[
        "kernels",
        root.to_str().unwrap(),
        "--run",
        "cuda",
        "--by",
        "category",
        "--top",
        "1000",
        "--format",
        "json",
    ]))
    .unwrap();
    let acts = whole(root, "gpu_activities")
        .lazy()
        .filter(col("run").eq(lit("cuda")))
        .collect()
        .unwrap();
    let (cat, s, e) = (
        strs(&acts, "category"),
        i64s(&acts, "start_ns"),
        i64s(&acts, "end_ns"),
    );
    let mut per: HashMap<String, i64> = HashMap::new();
    for i in 0..acts.height() {
        *per.entry(cat[i].clone().unwrap()).or_default() += e[i].unwrap() - s[i].unwrap();
    }
    let rows = doc["rows"].as_array().unwrap();
    for (c, total) in &per {
        let mine: Vec<&Value> = rows
            .iter()
            .filter(|r| r["category"] == c.as_str())
            .collect();
        let sum: i64 = mine.iter().map(|r| r["total_ns"].as_i64().unwrap()).sum();
        assert_eq!(sum, *total, "{c}");
        let pct: f64 = mine.iter().map(|r| f(&r["gpu_pct"])).sum();
        assert!((pct - 100.0).abs() < 1e-6, "{c}: {pct}");
    }
}
