//! Injected ground truth: `bench/gen_collectives.py` builds a job from a real corpus rank with
//! known per-host clock offsets and known delays before chosen collectives (the late rank's
//! compute runs longer; the others' kernels last longer by the wait). aorta must recover the
//! offsets within 1 µs (plus the spread it reports), name the delayed rank as the straggler
//! exactly at the delayed instances, and give the others' wait there as the injected delay
//! within 1 µs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::cli::{collectives_json, ingest_ok};
use crate::common::*;

const US: i64 = 1_000;

fn generate(out: &Path) -> Value {
    let Some(root) = corpus() else {
        panic!("corpus needed")
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen_collectives.py");
    let source = root.join("kineto/cuda/h200_fsdp2/rank0.pt.trace.json.gz");
    let o = Command::new("python3")
        .arg(&script)
        .args(["--ranks", "16", "--instances", "120", "--hosts-of", "4"])
        .args([
            "--compute-per-collective",
            "2",
            "--delays-random",
            "6",
            "--seed",
            "7",
        ])
        .arg("--source")
        .arg(&source)
        .arg("--out")
        .arg(out)
        .output()
        .expect("python3 runs bench/gen_collectives.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out.join("ground_truth.json")).unwrap()).unwrap()
}

#[test]
fn injected_offsets_and_delays_are_recovered() {
    if corpus().is_none() {
        return;
    }
    let traces = tempfile::tempdir().unwrap();
    let truth = generate(traces.path());
    let ds = tempfile::tempdir().unwrap();
    ingest_ok(&[traces.path()], ds.path(), &["--label", "job", "-q"]);
    let doc = collectives_json(ds.path(), "instance");

    // Offsets, against rank 0, within 1 µs plus the reported spread.
    let runs = table(ds.path(), "runs", "job");
    let (rank, off, spread) = (
        i64s(&runs, "rank"),
        i64s(&runs, "clock_offset_ns"),
        i64s(&runs, "clock_offset_spread_ns"),
    );
    assert_eq!(runs.height(), 16);
    for i in 0..runs.height() {
        let r = rank[i].unwrap();
        let want = truth["offset_ns"][r.to_string()].as_i64().unwrap();
        let (got, s) = (off[i].unwrap(), spread[i].unwrap());
        assert!(
            (got - want).abs() <= US + s,
            "rank {r}: offset {got}, injected {want}, spread {s}"
        );
    }

    // The delayed rank is the straggler exactly at the delayed instances (those whose last
    // arrival is ≥ 100 µs behind the second-to-last; the jitter is 200 ns).
    let delays: BTreeMap<i64, (i64, i64)> = truth["delays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["seq"].as_i64().unwrap(),
                (d["rank"].as_i64().unwrap(), d["delay_ns"].as_i64().unwrap()),
            )
        })
        .collect();
    assert!(!delays.is_empty());
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len() as i64, truth["instances"].as_i64().unwrap());
    let late: BTreeSet<i64> = rows
        .iter()
        .filter(|r| r["caused_ns"].as_i64().unwrap_or(0) >= 100 * US)
        .map(|r| r["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(late, delays.keys().copied().collect::<BTreeSet<_>>());
    for r in rows
        .iter()
        .filter(|r| late.contains(&r["seq"].as_i64().unwrap()))
    {
        let (rank, delay) = delays[&r["seq"].as_i64().unwrap()];
        assert_eq!(r["status"], "paired");
        assert_eq!(r["last_rank"].as_i64(), Some(rank), "seq {}", r["seq"]);
        assert!(
            (r["caused_ns"].as_i64().unwrap() - delay).abs() <= US,
            "{r}"
        );
        assert!(
            r["late_category"].as_str().is_some(),
            "the late rank's window is explained: {r}"
        );
    }

    // Every other rank waits the injected delay there, within 1 µs.
    let c = table(ds.path(), "collectives", "job");
    let (crank, seq, wait) = (i64s(&c, "rank"), i64s(&c, "seq"), i64s(&c, "wait_ns"));
    let mut checked = 0;
    for e in truth["expected"].as_array().unwrap() {
        let s = e["seq"].as_i64().unwrap();
        for (other, want) in e["wait_ns"].as_object().unwrap() {
            let other: i64 = other.parse().unwrap();
            let i = (0..c.height())
                .find(|&i| crank[i] == Some(other) && seq[i] == Some(s))
                .unwrap();
            let (got, want) = (wait[i].unwrap(), want.as_i64().unwrap());
            assert!(
                (got - want).abs() <= US,
                "seq {s} rank {other}: wait {got}, injected {want}"
            );
            assert!(
                (got - delays[&s].1).abs() <= US,
                "seq {s} rank {other}: wait {got} vs delay"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, delays.len() * 15);
}
