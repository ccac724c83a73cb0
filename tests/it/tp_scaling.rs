//! `aorta sweep tp` on the TP layer measured on 4 × H200 (tests/golden/device/tp): the
//! bench's CUDA-event times per window, as `workloads/torch/tp_report.py --csv` writes them,
//! give the scaling computed here independently from the per-rank summaries (T(n): the best
//! method's slowest-rank median; ratio T(n) / (T(1) / n)), and the recommendation TP 1 for every
//! operator: at 4,096 tokens no TP size above 1 is within 20 % of linear (docs/WORKLOADS.md).
//! And the tuner's own example through the CLI, with a bad file's one-line error.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::cli::{aorta, code, stderr};

fn sweep_tp(times: &Path, out: &Path) -> std::process::Output {
    aorta(&[
        "sweep".as_ref(),
        "tp".as_ref(),
        "--times".as_ref(),
        times.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
}

#[test]
fn the_measured_tp_layer_recommends_tp_1_with_the_benchs_ratios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let runs = root.join("tests/golden/device/tp");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("times.csv");
    let o = std::process::Command::new("python3")
        .arg(root.join("workloads/torch/tp_report.py"))
        .arg(&runs)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("report");
    let o = sweep_tp(&csv, &out);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Independently: (tp, op) -> best over methods of the slowest rank's median, ms.
    let mut t: BTreeMap<(u64, String), f64> = BTreeMap::new();
    for run in std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()) {
        if !run.is_dir() {
            continue; // tp_runs.log
        }
        let mut slowest: BTreeMap<String, f64> = BTreeMap::new();
        let mut tp = 0;
        for f in std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().path()) {
            if !f
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tp_summary_rank")
            {
                continue;
            }
            let s: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
            tp = s["tp"].as_u64().unwrap();
            for (op, v) in s["ops"].as_object().unwrap() {
                let ms = v["median_ms"].as_f64().unwrap();
                let e = slowest.entry(op.clone()).or_insert(ms);
                *e = e.max(ms);
            }
        }
        for (op, ms) in slowest {
            let e = t.entry((tp, op)).or_insert(ms);
            *e = e.min(ms);
        }
    }
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("tuning_report.json")).unwrap()).unwrap();
    let results = &doc["tp_scaling"]["results"];
    for op in ["qkv", "proj", "fc1", "fc2"] {
        let r = &results[op];
        assert_eq!(r["optimal_tp_size"], 1, "{op}: {r}");
        let t1 = t[&(1, op.to_string())];
        for n in [2u64, 4] {
            let want = t[&(n, op.to_string())] / (t1 / n as f64);
            let got = r["scaling_ratios"][n.to_string()].as_f64().unwrap();
            assert!(
                (got - want).abs() < 1e-5 * want,
                "{op} TP {n}: {got} vs {want}"
            );
            assert!(want > 1.2, "{op} TP {n} is not efficient at this size");
        }
    }
    assert_eq!(results["overall"]["optimal_tp_size"], 1);
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("recommended: TP 1"), "{summary}");
    // Serial won at every size: the recommended config names it for each operator.
    let cfg = std::fs::read_to_string(out.join("optimal_tp_comm_overlap_cfg.yaml")).unwrap();
    assert_eq!(cfg.matches("method: serial").count(), 4, "{cfg}");
}

#[test]
fn the_tuners_example_and_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(
        &csv,
        "tp,operator,e2e_us\n1,fc1,2000\n2,fc1,1100\n4,fc1,600\n8,fc1,400\n",
    )
    .unwrap();
    let out = dir.path().join("r");
    let o = sweep_tp(&csv, &out);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("tuning_report.json")).unwrap()).unwrap();
    let fc1 = &doc["tp_scaling"]["results"]["fc1"];
    assert_eq!(fc1["optimal_tp_size"], 4);
    let eff: Vec<bool> = ["1", "2", "4", "8"]
        .iter()
        .map(|n| fc1["scaling_efficient"][*n].as_bool().unwrap())
        .collect();
    assert_eq!(eff, [true, true, true, false]);
    std::fs::write(&csv, "tp,operator,e2e_us\n1,fc1,2000\ntwo,fc1,1100\n").unwrap();
    let o = sweep_tp(&csv, &dir.path().join("bad"));
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("t.csv: line 3: tp `two` is not a whole number"),
        "{err}"
    );
}
