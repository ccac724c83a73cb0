//! A real straggler on 4 GPUs (workloads/traces/four-gpu, 4 × H200): rank 2 of the overlap
//! bench and of FSDP2 was slowed by 5 ms per iteration (`--slow-rank 2 --slow-ms 5`).
//! `aorta collectives` must name rank 2, and at every collective it delayed, the wait of the
//! other ranks must equal the delay rank 2 really took, within 5 %. The truth comes from the
//! raw traces, not from aorta: for the bench, the CUDA events around rank 2's stall
//! (`aorta_straggler.measured_ms`); for FSDP2, rank 2's lateness at the step's first
//! all-gather on the one host clock of the four traces, which its spin kernel
//! (`torch.cuda._sleep`) must account for.
//!
//! The others' wait compared is the smallest over them (that of the last rank but one, the
//! instance's caused delay): the larger ones add how much earlier than the others each rank
//! itself arrived, which is not rank 2's doing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::cli::{collectives_json, ingest_ok};
use crate::common::*;

fn fixture(run: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/four-gpu")
        .join(run)
}

/// Per instance (process group, seq) where rank 2 arrived over 1 ms after every other rank:
/// (its step, the smallest wait of the other ranks, ns). Also checks that rank 2 is the
/// first straggler named.
fn delayed(run: &str) -> BTreeMap<(String, i64), (i64, i64)> {
    let ds = tempfile::tempdir().unwrap();
    ingest_ok(&[&fixture(run)], ds.path(), &["--label", run, "-q"]);
    let doc = collectives_json(ds.path(), "rank");
    let ranks = doc["runs"][0]["stragglers"].as_array().unwrap();
    let first = ranks.iter().find(|r| r["straggler_rank"] == 1).unwrap();
    assert_eq!(first["rank"], 2, "{run}: {first}");
    let t = table(ds.path(), "collectives", run);
    let (group, seq, rank) = (strs(&t, "process_group"), i64s(&t, "seq"), i64s(&t, "rank"));
    let (arrival, wait, step) = (
        i64s(&t, "arrival_ns"),
        i64s(&t, "wait_ns"),
        i64s(&t, "step"),
    );
    // (group, seq) -> (rank 2's arrival and step, the others' latest arrival and least wait)
    let mut inst: BTreeMap<(String, i64), (i64, i64, i64, i64)> = BTreeMap::new();
    for i in 0..t.height() {
        let key = (group[i].clone().unwrap(), seq[i].unwrap());
        let e = inst.entry(key).or_insert((0, -1, i64::MIN, i64::MAX));
        if rank[i] == Some(2) {
            (e.0, e.1) = (arrival[i].unwrap(), step[i].unwrap());
        } else {
            e.2 = e.2.max(arrival[i].unwrap());
            e.3 = e.3.min(wait[i].unwrap());
        }
    }
    inst.into_iter()
        .filter(|(_, (late, _, others, _))| late - others > 1_000_000)
        .map(|(k, (_, step, _, least_wait))| (k, (step, least_wait)))
        .collect()
}

/// Per profiled step of `rank`'s raw trace: (start, end) in ns of the first kernel whose name
/// contains `pattern` among those launched in the step (its launch inside the step's
/// `ProfilerStep#N`, matched by correlation). The four ranks ran on one host: one clock.
fn first_kernel(run: &str, rank: i64, pattern: &str) -> BTreeMap<i64, (i64, i64)> {
    let prefix = format!("rank{rank}_trace");
    let raw = std::fs::read_dir(fixture(run))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .unwrap();
    let v = raw_json(&raw);
    let events = v["traceEvents"].as_array().unwrap();
    let ns = |e: &Value, k: &str| (e[k].as_f64().unwrap() * 1e3).round() as i64;
    let steps: Vec<(i64, i64, i64)> = events
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep#"))
        })
        .map(|e| {
            let n = e["name"].as_str().unwrap()["ProfilerStep#".len()..]
                .parse()
                .unwrap();
            (ns(e, "ts"), ns(e, "ts") + ns(e, "dur"), n)
        })
        .collect();
    let launch: BTreeMap<i64, i64> = events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
        .filter_map(|e| Some((e["args"]["correlation"].as_i64()?, ns(e, "ts"))))
        .collect();
    let mut out: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "kernel") {
        if !e["name"].as_str().unwrap().contains(pattern) {
            continue;
        }
        let Some(at) = e["args"]["correlation"]
            .as_i64()
            .and_then(|c| launch.get(&c))
        else {
            continue;
        };
        let Some(&(_, _, step)) = steps.iter().find(|(a, b, _)| (*a..*b).contains(at)) else {
            continue;
        };
        let (start, end) = (ns(e, "ts"), ns(e, "ts") + ns(e, "dur"));
        let slot = out.entry(step).or_insert((start, end));
        if start < slot.0 {
            *slot = (start, end);
        }
    }
    out
}

fn within_5pct(got: i64, want: i64, what: &str) {
    let err = (got - want).abs() as f64 / want as f64;
    assert!(
        err < 0.05,
        "{what}: waited {got} ns, rank 2 took {want} ns ({:.1} %)",
        err * 100.0
    );
}

#[test]
fn overlap_bench_others_wait_the_stall_rank_2_measured() {
    let run = "overlap-bench_slow2";
    let d = delayed(run);
    // The first all-reduce of each of the 20 timed iterations waits for the stall.
    assert_eq!(d.len(), 20, "{d:?}");
    let steps: Vec<i64> = d.values().map(|v| v.0).collect();
    assert_eq!(steps, (0..20).collect::<Vec<_>>());
    let v = raw_json(&fixture(run).join("rank2.trace.json.gz"));
    let measured = v["aorta_straggler"]["measured_ms"].as_f64().unwrap();
    // The events' mean stall over the iterations, against the mean wait it caused.
    let mean = d.values().map(|v| v.1).sum::<i64>() / d.len() as i64;
    within_5pct(mean, (measured * 1e6).round() as i64, run);
}

#[test]
fn fsdp2_others_wait_at_the_first_all_gather_for_rank_2s_spin() {
    let run = "fsdp_slow2";
    let d = delayed(run);
    let spin = first_kernel(run, 2, "spin_kernel");
    // The spin runs at each profiled step's start; FSDP2's first all-gather of that step is
    // the one collective that waits for it, once per step.
    let steps: Vec<i64> = d.values().map(|v| v.0).collect();
    assert_eq!(
        steps,
        spin.keys().copied().collect::<Vec<_>>(),
        "{d:?} {spin:?}"
    );
    let ag: Vec<BTreeMap<i64, (i64, i64)>> =
        (0..4).map(|r| first_kernel(run, r, "AllGather")).collect();
    for ((group, seq), (step, least_wait)) in &d {
        let what = format!("{run} {group} seq {seq} step {step}");
        // Rank 2's lateness on the host clock, from the raw traces alone.
        let others = [0, 1, 3].iter().map(|&r| ag[r][step].0).max().unwrap();
        let late = ag[2][step].0 - others;
        within_5pct(*least_wait, late, &what);
        // And the spin is what made it late: its all-gather waited for the spin's end, and it
        // came no later than the spin's whole length (the others' own work before their
        // all-gather, which rank 2's spin overlapped, is the difference).
        let (spin_start, spin_end) = spin[step];
        assert!(spin_end <= ag[2][step].0, "{what}");
        assert!(late <= spin_end - spin_start, "{what}: late {late} ns");
        assert!(
            late >= (spin_end - spin_start) * 3 / 4,
            "{what}: late {late} ns"
        );
    }
}
