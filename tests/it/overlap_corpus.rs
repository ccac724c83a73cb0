//! `aorta overlap` on every CUDA and ROCm trace of the corpus, against rank totals computed
//! here from the raw JSON: exact decimal timestamps, the reviewed golden categories, the
//! same-stream clipping METRICS.md prescribes, and plain sort-and-merge unions. Intersections
//! come from inclusion–exclusion (|A ∩ B| = |A| + |B| − |A ∪ B|), not from a two-list walk
//! like the production scan.

use std::path::{Path, PathBuf};

use crate::common::cli::{ingest_ok, overlap_json};
use crate::common::reference::{activities, golden, raw_exact, COMPUTE};
use crate::common::*;
use serde_json::Value;

/// |union| of the intervals whose category passes `keep`, by sort and merge.
fn union_ns(acts: &[(i64, i64, String)], keep: impl Fn(&str) -> bool) -> i64 {
    let v: Vec<(i64, i64)> = acts
        .iter()
        .filter(|a| keep(&a.2))
        .map(|a| (a.0, a.1))
        .collect();
    union_len(v)
}

/// The rank totals of METRICS.md, computed independently.
fn expected(acts: &[(i64, i64, String)]) -> Vec<(&'static str, i64)> {
    let u = |cats: &[&str]| union_ns(acts, |c| cats.contains(&c));
    let comm = u(&["comm"]);
    let gemm = u(&["gemm"]);
    let compute = u(&COMPUTE);
    let memcpy = u(&["memcpy"]);
    let busy = union_ns(acts, |_| true);
    let gemm_comm = gemm + comm - u(&["gemm", "comm"]);
    let compute_comm = compute + comm - u(&["gemm", "attention", "other_compute", "comm"]);
    let engine = u(&["gemm", "attention", "other_compute", "comm"]);
    let memcpy_engine =
        memcpy + engine - u(&["gemm", "attention", "other_compute", "comm", "memcpy"]);
    let start = acts.iter().map(|a| a.0).min().unwrap();
    let end = acts.iter().map(|a| a.1).max().unwrap();
    vec![
        ("comm_ns", comm),
        ("gemm_ns", gemm),
        ("compute_ns", compute),
        ("busy_ns", busy),
        ("memcpy_ns", memcpy),
        ("window_ns", end - start),
        ("idle_ns", end - start - busy),
        ("gemm_comm_overlap_ns", gemm_comm),
        ("compute_comm_overlap_ns", compute_comm),
        ("exposed_comm_ns", comm - compute_comm),
        (
            "gemm_memcpy_overlap_ns",
            gemm + memcpy - u(&["gemm", "memcpy"]),
        ),
        ("exposed_memcpy_ns", memcpy - memcpy_engine),
        ("activity_count", acts.len() as i64),
    ]
}

/// Every Kineto trace under kineto/ (CUDA and ROCm), each ingested by the CLI under its own
/// run label, then `aorta overlap --by BY --json`.
fn ingest_each_and_overlap(dir: &Path, files: &[PathBuf], by: &str) -> Value {
    for f in files {
        ingest_ok(&[f.as_path()], dir, &["--label", &label_of(f), "-q"]);
    }
    overlap_json(dir, by)
}

fn kineto_traces(root: &Path) -> Vec<PathBuf> {
    corpus_traces(root)
        .into_iter()
        .filter(|p| p.starts_with(root.join("kineto")))
        .collect()
}

#[test]
fn rank_totals_equal_an_independent_sort_and_merge_on_every_trace() {
    let Some(root) = corpus() else { return };
    let files = kineto_traces(&root);
    assert!(files.len() >= 22, "{} traces", files.len());
    let dir = tempfile::tempdir().unwrap();
    let doc = ingest_each_and_overlap(dir.path(), &files, "rank");
    let golden = golden();
    let runs = doc["runs"].as_array().unwrap();
    for f in &files {
        let label = label_of(f);
        let run = runs.iter().find(|r| r["run"] == label.as_str()).unwrap();
        let rows = run["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{label}: one rank");
        let row = &rows[0];
        assert_eq!(row["source"], "trace");
        for (name, want) in expected(&activities(f, &golden)) {
            assert_eq!(row[name].as_i64(), Some(want), "{label} {name}");
        }
    }
}

fn run_doc<'a>(doc: &'a Value, run: &str) -> &'a Value {
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == run)
        .unwrap_or_else(|| panic!("no run {run}"))
}

#[test]
fn fsdp2_has_three_steps_per_rank_with_all_gather_and_reduce_scatter() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let traces = root.join("kineto/cuda/h200_fsdp2");
    ingest_ok(&[traces.as_path()], dir.path(), &["--label", "fsdp2", "-q"]);
    let by = |by: &str| overlap_json(dir.path(), by);
    let steps = by("step");
    let rows = run_doc(&steps, "fsdp2")["rows"].as_array().unwrap().clone();
    for rank in [0, 1] {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["rank"] == rank).collect();
        let ids: Vec<i64> = mine.iter().map(|r| r["step"].as_i64().unwrap()).collect();
        assert_eq!(ids.len(), 3, "rank {rank}: steps {ids:?}");
        for r in &mine {
            assert!(r["comm_ns"].as_i64().unwrap() > 0 && r["gemm_ns"].as_i64().unwrap() > 0);
            assert!(r["tp_overlap_ratio"].as_f64().is_some());
        }
    }
    let coll = by("collective");
    let rows = run_doc(&coll, "fsdp2")["rows"].as_array().unwrap().clone();
    for rank in [0, 1] {
        for op in ["all_gather", "reduce_scatter"] {
            let per_step: Vec<i64> = rows
                .iter()
                .filter(|r| r["rank"] == rank && r["level"] == "step" && r["comm_op"] == op)
                .map(|r| r["comm_ns"].as_i64().unwrap())
                .collect();
            assert_eq!(per_step.len(), 3, "rank {rank} {op}");
            assert!(
                per_step.iter().all(|&ns| ns > 0),
                "rank {rank} {op}: {per_step:?}"
            );
        }
    }
}

#[test]
fn mi300x_rccl_kernels_count_as_comm() {
    let Some(root) = corpus() else { return };
    let f = root.join("kineto/rocm/mi300x_resnet_ckpt/resnet_act_checkpoint.json.gz");
    let dir = tempfile::tempdir().unwrap();
    let doc = ingest_each_and_overlap(dir.path(), std::slice::from_ref(&f), "rank");
    let row = &run_doc(&doc, &label_of(&f))["rows"][0];
    // Independent of any category table: the union of the RCCL kernels, by name.
    let rccl: Vec<(i64, i64, String)> = activities(&f, &golden())
        .into_iter()
        .filter(|a| a.2 == "comm")
        .collect();
    let raw = raw_exact(&f);
    let by_name = events(&raw)
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "kernel")
        .filter(|e| {
            e["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("ncclDevKernel_Generic")
        })
        .count();
    assert!(by_name > 0);
    assert_eq!(
        rccl.len(),
        by_name,
        "every RCCL kernel is comm in the golden table"
    );
    let comm = row["comm_ns"].as_i64().unwrap();
    assert!(comm > 0);
    assert_eq!(comm, union_ns(&rccl, |_| true));
    let coll = ingest_each_and_overlap(dir.path(), &[], "collective");
    let ops: Vec<&str> = run_doc(&coll, &label_of(&f))["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["level"] == "rank")
        .map(|r| r["comm_op"].as_str().unwrap())
        .collect();
    assert!(ops.contains(&"all_reduce"), "{ops:?}");
}
