//! `aorta overlap` on every CUDA and ROCm trace of the corpus, against rank totals computed
//! here from the raw JSON: exact decimal timestamps, the reviewed golden categories, the
//! same-stream clipping METRICS.md prescribes, and plain sort-and-merge unions. Intersections
//! come from inclusion–exclusion (|A ∩ B| = |A| + |B| − |A ∪ B|), not from a two-list walk
//! like the production sweep.

mod collectives;
mod common;
// `aorta perf` (issue 18); moves with the others into tests/it/.
mod perf;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::cli::{aorta, code, ingest, stderr};
use common::*;
use serde_json::Value;

/// `"1234.567"` µs as text → ns, by string surgery (no float anywhere).
fn us_text_to_ns(t: &str) -> i64 {
    let neg = t.starts_with('-');
    let t = t.trim_start_matches('-');
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let frac = format!("{frac:0<3}");
    let v = int.parse::<i64>().unwrap() * 1000 + frac[..3].parse::<i64>().unwrap();
    if neg {
        -v
    } else {
        v
    }
}

/// The raw trace through serde_json, with `ts`/`dur` numbers quoted first so their decimal
/// text survives (f64 would round epoch-scale values).
fn raw_exact(p: &Path) -> Value {
    let bytes = std::fs::read(p).unwrap();
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        common::cli::gunzip(&bytes)
    } else {
        bytes
    };
    let text = String::from_utf8_lossy(&bytes);
    let re = regex::Regex::new(r#"("(?:ts|dur)"\s*:\s*)(-?[0-9][0-9.]*)"#).unwrap();
    serde_json::from_str(&re.replace_all(&text, r#"$1"$2""#)).unwrap()
}

fn int_of(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// Stream of a GPU event: `args.stream`, else `tid` (`7`, `"7"` or `"stream 7"`).
fn stream_of(e: &Value) -> i64 {
    int_of(&e["args"]["stream"])
        .or_else(|| int_of(&e["tid"]))
        .or_else(|| {
            e["tid"]
                .as_str()?
                .trim()
                .strip_prefix("stream")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn golden() -> HashMap<(String, String), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/kernel_categories.csv");
    let mut r = csv::Reader::from_path(path).unwrap();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            ((rec[0].to_string(), rec[1].to_string()), rec[2].to_string())
        })
        .collect()
}

/// (start, end, category).
type Span = (i64, i64, String);

/// GPU activities of one trace: (start, clipped end, category).
fn activities(p: &Path, golden: &HashMap<(String, String), String>) -> Vec<(i64, i64, String)> {
    let raw = raw_exact(p);
    let base = raw["baseTimeNanoseconds"].as_i64().unwrap_or(0);
    let mut per_stream: HashMap<(i64, i64), Vec<Span>> = HashMap::new();
    for e in events(&raw).iter().filter(|e| is_slice(e)) {
        let kind = match cat(e) {
            "kernel" => "kernel",
            "gpu_memcpy" => "memcpy",
            "gpu_memset" => "memset",
            _ => continue,
        };
        let Some(ts) = e["ts"].as_str() else { continue };
        let start = base + us_text_to_ns(ts);
        let raw_end = start + e["dur"].as_str().map_or(0, us_text_to_ns);
        let name = e["name"].as_str().unwrap_or("").to_string();
        let category = golden
            .get(&(kind.to_string(), name.clone()))
            .unwrap_or_else(|| panic!("{}: {kind} {name} not in the golden table", p.display()))
            .clone();
        let device = int_of(&e["args"]["device"])
            .or_else(|| int_of(&e["pid"]))
            .unwrap_or(0);
        per_stream
            .entry((device, stream_of(e)))
            .or_default()
            .push((start, raw_end, category));
    }
    let mut out = Vec::new();
    for (_, mut v) in per_stream {
        // METRICS.md data quality: an activity that runs into the next one on its stream ends
        // where the next one starts (never before its own start).
        v.sort_by_key(|a| (a.0, a.1));
        for i in 0..v.len() {
            let mut end = v[i].1.max(v[i].0);
            if let Some(next) = v.get(i + 1) {
                if next.0 < end {
                    end = next.0.max(v[i].0);
                }
            }
            out.push((v[i].0, end, v[i].2.clone()));
        }
    }
    out
}

/// |union| of the intervals whose category passes `keep`, by sort and merge.
fn union_ns(acts: &[(i64, i64, String)], keep: impl Fn(&str) -> bool) -> i64 {
    let v: Vec<(i64, i64)> = acts
        .iter()
        .filter(|a| keep(&a.2))
        .map(|a| (a.0, a.1))
        .collect();
    union_len(v)
}

const COMPUTE: [&str; 3] = ["gemm", "attention", "other_compute"];

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
/// run label, then `aorta overlap --by rank --json`.
fn overlap_json(dir: &Path, files: &[PathBuf], by: &str) -> Value {
    for f in files {
        let o = ingest(&[f.as_path()], dir, &["--label", &label_of(f), "-q"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let o = aorta(&[
        "overlap".as_ref(),
        dir.as_os_str(),
        "--by".as_ref(),
        by.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
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
    let doc = overlap_json(dir.path(), &files, "rank");
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
    let o = ingest(&[traces.as_path()], dir.path(), &["--label", "fsdp2", "-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let by = |by: &str| {
        let o = aorta(&[
            "overlap".as_ref(),
            dir.path().as_os_str(),
            "--by".as_ref(),
            by.as_ref(),
            "--json".as_ref(),
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let steps = by("step");
    let rows = run_doc(&steps, "fsdp2")["rows"].as_array().unwrap().clone();
    for rank in [0, 1] {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["rank"] == rank).collect();
        let ids: Vec<i64> = mine.iter().map(|r| r["step"].as_i64().unwrap()).collect();
        assert_eq!(ids.len(), 3, "rank {rank}: steps {ids:?}");
        for r in &mine {
            assert!(r["comm_ns"].as_i64().unwrap() > 0 && r["gemm_ns"].as_i64().unwrap() > 0);
            assert!(r["overlap_ratio"].as_f64().is_some());
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
    let doc = overlap_json(dir.path(), std::slice::from_ref(&f), "rank");
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
    let coll = overlap_json(dir.path(), &[], "collective");
    let ops: Vec<&str> = run_doc(&coll, &label_of(&f))["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["level"] == "rank")
        .map(|r| r["comm_op"].as_str().unwrap())
        .collect();
    assert!(ops.contains(&"all_reduce"), "{ops:?}");
}
