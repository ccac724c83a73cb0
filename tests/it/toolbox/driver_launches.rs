//! Driver-API launches are launches: on a real CUDA 13 trace (tests/golden/device/trust,
//! DDP with TF32 on 2 × H200, PyTorch 2.11) cuBLASLt launches GEMMs through
//! `cuLaunchKernelEx` (`cuda_driver`). `aorta launches` must count every activity whose
//! correlation id a runtime or a driver call carries, and `aorta breakdown`'s host-wait must
//! follow those launches, both against a brute force over the raw events written here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ok;
use crate::common::raw_json;

fn trace(rank: i64) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/golden/device/trust/ddp_tf32_rank{rank}.pt.trace.json.gz"
    ))
}

/// The raw trace's GPU activities: (start, end, launch call's start if any), ns.
fn raw(rank: i64) -> Vec<(i64, i64, Option<i64>)> {
    let v: Value = raw_json(&trace(rank));
    let events = v["traceEvents"].as_array().unwrap();
    let ns = |e: &Value, k: &str| (e[k].as_f64().unwrap() * 1e3).round() as i64;
    let calls: HashMap<i64, i64> = events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
        .filter_map(|e| Some((e["args"]["correlation"].as_i64()?, ns(e, "ts"))))
        .collect();
    events
        .iter()
        .filter(|e| {
            matches!(
                e["cat"].as_str(),
                Some("kernel" | "gpu_memcpy" | "gpu_memset")
            )
        })
        .map(|e| {
            let call = e["args"]["correlation"]
                .as_i64()
                .and_then(|c| calls.get(&c).copied());
            (ns(e, "ts"), ns(e, "ts") + ns(e, "dur"), call)
        })
        .collect()
}

/// Host-wait of the merged timeline, by HTA's rule: each idle gap between the union of the
/// activities is host-wait when the activity ending it (the first to start after it; of
/// several at once, the earliest launched) had its launch call start after the gap began.
fn brute_host_wait(acts: &[(i64, i64, Option<i64>)]) -> i64 {
    let mut sorted = acts.to_vec();
    sorted.sort_by_key(|&(s, _, call)| (s, call.unwrap_or(i64::MAX)));
    let (mut end, mut host_wait) = (sorted[0].1, 0);
    for &(s, e, call) in &sorted[1..] {
        if s > end && call.is_some_and(|c| c > end) {
            host_wait += s - end;
        }
        end = end.max(e);
    }
    host_wait
}

#[test]
fn driver_api_launches_count_in_launches_and_host_wait() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let files: Vec<String> = (0..2).map(|r| trace(r).display().to_string()).collect();
    ok(&[
        "ingest",
        &files[0],
        &files[1],
        "-o",
        ds.to_str().unwrap(),
        "--label",
        "ddp",
        "-q",
    ]);
    let ds = ds.to_str().unwrap();
    let launches: Value = serde_json::from_str(&ok(&["launches", ds, "--format", "json"])).unwrap();
    let breakdown: Value =
        serde_json::from_str(&ok(&["breakdown", ds, "--format", "json"])).unwrap();
    for rank in 0..2 {
        let acts = raw(rank);
        let row = |doc: &Value| {
            doc["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["rank"] == rank)
                .cloned()
                .unwrap()
        };
        let launched = acts.iter().filter(|a| a.2.is_some()).count() as i64;
        assert_eq!(
            row(&launches)["launched"].as_i64(),
            Some(launched),
            "rank {rank}"
        );
        assert_eq!(
            row(&breakdown)["host_wait_ns"].as_i64(),
            Some(brute_host_wait(&acts)),
            "rank {rank}"
        );
    }
    // The trace does launch through the driver: 8 cuLaunchKernelEx GEMMs per rank.
    let v = raw_json(&trace(0));
    let driver = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_driver" && e["name"] == "cuLaunchKernelEx")
        .count();
    assert!(driver >= 8, "{driver}");
}
