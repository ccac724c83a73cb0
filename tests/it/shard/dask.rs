//! `scale/dask_ingest.py` on a Dask `LocalCluster`: the shards as tasks, then the cross-rank
//! step once, give the dataset (derived tables included) that one unsharded ingest followed
//! by `aorta collectives` and `aorta overlap` gives; a shard that cannot run fails the script.

use std::path::Path;
use std::process::Command;

use super::{assert_same_dataset, repo, venv_python};
use crate::common::cli::{aorta, code, ingest_ok, stderr, AORTA};

fn dask_ingest(py: &Path, traces: &Path, out: &Path, aorta_bin: &str) -> (i32, serde_json::Value) {
    let o = Command::new(py)
        .arg(repo().join("scale/dask_ingest.py"))
        .arg(traces)
        .arg("-o")
        .arg(out)
        .args(["--shards", "3", "--local-workers", "2", "--retries", "0"])
        .args(["--aorta", aorta_bin])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("AORTA_DASK "))
        .unwrap_or_else(|| {
            panic!(
                "no AORTA_DASK line:\n{text}{}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
    (
        o.status.code().unwrap_or(-1),
        serde_json::from_str(line).unwrap(),
    )
}

#[test]
fn dask_runs_the_shards_then_the_cross_rank_step() {
    let Some(py) = venv_python("dask, distributed, pyarrow") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let traces = repo().join("workloads/traces/four-gpu");
    let base = tmp.path().join("base");
    ingest_ok(&[&traces], &base, &["-q"]);
    for cmd in ["collectives", "overlap"] {
        let o = aorta(&[cmd.as_ref(), base.as_os_str()]);
        assert_eq!(code(&o), 0, "{cmd}: {}", stderr(&o));
    }
    let ds = tmp.path().join("ds");
    let (rc, report) = dask_ingest(&py, &traces, &ds, AORTA);
    assert_eq!(rc, 0, "{report}");
    let mut shards: Vec<u64> = report["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shard"].as_u64().unwrap())
        .collect();
    shards.sort();
    assert_eq!(shards, [0, 1, 2]);
    assert_eq!(
        report["cross_rank"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    assert_same_dataset(&py, &base, &ds);

    let (rc, report) = dask_ingest(&py, &traces, &tmp.path().join("none"), "/nonexistent/aorta");
    assert_eq!(rc, 1, "{report}");
    assert_eq!(report["errors"].as_array().unwrap().len(), 3, "{report}");
    assert!(report["cross_rank"].as_array().unwrap().is_empty());
}
