//! `aorta breakdown` and `aorta launches` on real traces of the corpus (the H100 models and
//! the 2-rank H200 FSDP2 capture): the invariants every row must keep, and the rank's compute
//! and busy time against unions computed here from the `gpu_activities` rows.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{fresh_copy, ok, whole};
use crate::common::{corpus, i64s, strs, union_len};

const TRACES: [&str; 2] = [
    "../shared/data/kineto/cuda/h100_models",
    "../shared/data/aorta_py/h200_fsdp2_profile_overlap_2gpu",
];

fn i(r: &Value, c: &str) -> i64 {
    r[c].as_i64().unwrap_or_else(|| panic!("{c} in {r}"))
}

fn key(r: &Value) -> (String, i64) {
    (r["run"].as_str().unwrap().to_string(), i(r, "rank"))
}

/// Per (run, rank): the union of every activity, of the compute ones, the activity count and
/// the activities with a runtime or driver call of their correlation id.
type Truth = HashMap<(String, i64), (i64, i64, i64, i64)>;

fn truth(root: &std::path::Path) -> Truth {
    let acts = whole(root, "gpu_activities");
    let cpu = whole(root, "cpu_ops");
    let (run, rank, cat) = (
        strs(&acts, "run"),
        i64s(&acts, "rank"),
        strs(&acts, "category"),
    );
    let (s, e, corr) = (
        i64s(&acts, "start_ns"),
        i64s(&acts, "end_ns"),
        i64s(&acts, "correlation"),
    );
    let (crun, crank, ccat) = (
        strs(&cpu, "run"),
        i64s(&cpu, "rank"),
        strs(&cpu, "category"),
    );
    let ccorr = i64s(&cpu, "correlation");
    let calls: HashSet<(String, i64, i64)> = (0..cpu.height())
        .filter(|&j| matches!(ccat[j].as_deref(), Some("runtime" | "driver")))
        .filter_map(|j| Some((crun[j].clone()?, crank[j]?, ccorr[j]?)))
        .collect();
    type Spans = (Vec<(i64, i64)>, Vec<(i64, i64)>, i64, i64);
    let mut spans: HashMap<(String, i64), Spans> = HashMap::new();
    for j in 0..acts.height() {
        let k = (run[j].clone().unwrap(), rank[j].unwrap());
        let span = (s[j].unwrap(), e[j].unwrap().max(s[j].unwrap()));
        let launched = corr[j].is_some_and(|c| calls.contains(&(k.0.clone(), k.1, c)));
        let slot = spans.entry(k).or_default();
        slot.0.push(span);
        let compute = matches!(
            cat[j].as_deref(),
            Some("gemm" | "attention" | "other_compute")
        );
        if compute {
            slot.1.push(span);
        }
        slot.2 += 1;
        slot.3 += i64::from(launched);
    }
    spans
        .into_iter()
        .map(|(k, (all, comp, n, l))| (k, (union_len(all), union_len(comp), n, l)))
        .collect()
}

/// The parts of every row add up: compute + non-compute + idle = window, the idle split sums
/// to idle, comm + memory = non-compute, the shares to 100 %; per rank, busy and compute are
/// the unions of the rows; the steps' activities add up to the rank's.
#[test]
fn breakdown_parts_add_up_on_real_traces() {
    if corpus().is_none() {
        return;
    }
    let (_dir, root) = fresh_copy(&TRACES);
    let ds = root.to_str().unwrap();
    let truth = truth(&root);
    assert!(truth.len() >= 4, "{:?}", truth.keys());
    let mut activities: HashMap<(String, i64), i64> = HashMap::new();
    for by in ["rank", "step"] {
        let doc: Value =
            serde_json::from_str(&ok(&["breakdown", ds, "--by", by, "--format", "json"])).unwrap();
        for r in doc["rows"].as_array().unwrap() {
            let w = i(r, "window_ns");
            assert_eq!(
                i(r, "compute_ns") + i(r, "non_compute_ns") + i(r, "idle_ns"),
                w,
                "{r}"
            );
            let split = i(r, "host_wait_ns") + i(r, "kernel_wait_ns") + i(r, "other_idle_ns");
            assert_eq!(split, i(r, "idle_ns"), "{r}");
            assert_eq!(
                i(r, "comm_only_ns") + i(r, "memory_only_ns"),
                i(r, "non_compute_ns"),
                "{r}"
            );
            assert!(i(r, "gaps") < i(r, "activities").max(1), "{r}");
            let pcts: f64 = ["compute_pct", "non_compute_pct", "idle_pct"]
                .iter()
                .map(|c| r[*c].as_f64().unwrap_or(0.0))
                .sum();
            assert!(w == 0 || (pcts - 100.0).abs() < 1e-9, "{r}");
            let (busy, compute, n, _) = truth[&key(r)];
            if by == "rank" {
                assert_eq!(w - i(r, "idle_ns"), busy, "{r}");
                assert_eq!(i(r, "compute_ns"), compute, "{r}");
                assert_eq!(i(r, "activities"), n, "{r}");
            } else {
                *activities.entry(key(r)).or_default() += i(r, "activities");
            }
        }
    }
    for (k, n) in activities {
        assert_eq!(n, truth[&k].2, "{k:?}");
    }
}

/// Launches: as many launched as activities with a runtime or driver API call of their
/// correlation id (the H100 traces launch through `cuLaunchKernel` too);
/// a launch's call start comes before its end, so call start → activity start is at least the
/// delay; the gaps are positive, longest first, the longest in the row; a launched rank has a
/// queue.
#[test]
fn launch_statistics_keep_their_invariants_on_real_traces() {
    if corpus().is_none() {
        return;
    }
    let (_dir, root) = fresh_copy(&TRACES);
    let ds = root.to_str().unwrap();
    let truth = truth(&root);
    let doc: Value =
        serde_json::from_str(&ok(&["launches", ds, "--top", "4", "--format", "json"])).unwrap();
    for r in doc["rows"].as_array().unwrap() {
        let (_, _, n, launched) = truth[&key(r)];
        assert_eq!((i(r, "activities"), i(r, "launched")), (n, launched), "{r}");
        assert!(launched > 0 && i(r, "queue_max") >= 1, "{r}");
        let f = |c: &str| r[c].as_f64().unwrap();
        assert!(f("to_start_p50_ns") >= f("delay_p50_ns"), "{r}");
        assert!(
            f("cpu_p99_ns") >= f("cpu_p50_ns") && f("cpu_p50_ns") >= 0.0,
            "{r}"
        );
        assert!(f("queue_mean") > 0.0, "{r}");
        let gaps: Vec<i64> = doc["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| key(g) == key(r))
            .map(|g| i(g, "gap_ns"))
            .collect();
        assert!(!gaps.is_empty() && gaps.len() <= 4, "{r}");
        assert!(gaps.windows(2).all(|w| w[0] >= w[1]) && gaps[gaps.len() - 1] > 0);
        assert_eq!(gaps[0], i(r, "longest_gap_ns"));
    }
}
