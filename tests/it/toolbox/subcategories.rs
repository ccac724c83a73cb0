//! `aorta kernels --by subcategory` on the corpus's H100/MI300X qwen pair, against the raw
//! traces read here: the subcategories add up to other_compute's GPU time, nothing is left in
//! `other`, and `normalization` is exactly the kernels launched inside a `Qwen2RMSNorm`
//! module (the model's RMSNorm is Python: pow, mean, add, rsqrt, mul and casts).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use super::ok;
use crate::common::cli::ingest_ok;
use crate::common::reference::{activities, golden, int_of, raw_exact, us_text_to_ns};
use crate::common::{cat, corpus, events, is_slice};

const QWEN: [&str; 2] = [
    "kineto/cuda/h100_models/qwen1.5-0.5b-chat.json.gz",
    "kineto/rocm/mi300x_models/qwen1.5-0.5b-chat.json.gz",
];

/// GPU time per subcategory of `aorta kernels --by subcategory` (every kernel listed).
fn subcategory_ns(ds: &Path) -> HashMap<String, i64> {
    let csv = ok(&[
        "kernels",
        ds.to_str().unwrap(),
        "--by",
        "subcategory",
        "--top",
        "1000000",
        "--format",
        "csv",
    ]);
    let mut out = HashMap::new();
    for rec in csv::Reader::from_reader(csv.as_bytes()).deserialize() {
        let r: HashMap<String, String> = rec.unwrap();
        if r["category"] == "other_compute" {
            *out.entry(r["subcategory"].clone()).or_default() +=
                r["total_ns"].parse::<i64>().unwrap();
        }
    }
    out
}

/// The kernels launched inside an `nn.Module: Qwen2RMSNorm_*` span: their operator (by
/// `External id`) starts and ends within the module's span on the same thread. Total ns.
fn rmsnorm_kernel_ns(raw: &Value) -> i64 {
    let ev = events(raw);
    let span = |e: &Value| {
        let ts = us_text_to_ns(e["ts"].as_str().unwrap());
        (
            int_of(&e["tid"]),
            ts,
            ts + us_text_to_ns(e["dur"].as_str().unwrap()),
        )
    };
    let modules: Vec<_> = ev
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "python_function")
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("nn.Module: Qwen2RMSNorm_"))
        })
        .map(span)
        .collect();
    let inside: HashSet<i64> = ev
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "cpu_op")
        .filter(|e| {
            let (tid, s, end) = span(e);
            modules.iter().any(|m| m.0 == tid && m.1 <= s && end <= m.2)
        })
        .filter_map(|e| int_of(&e["args"]["External id"]))
        .collect();
    ev.iter()
        .filter(|e| is_slice(e) && cat(e) == "kernel")
        .filter(|e| int_of(&e["args"]["External id"]).is_some_and(|x| inside.contains(&x)))
        .map(|e| us_text_to_ns(e["dur"].as_str().unwrap()))
        .sum()
}

#[test]
fn qwen_subcategories_add_up_to_other_compute_with_rmsnorm_as_normalization() {
    let Some(root) = corpus() else { return };
    let golden = golden();
    for trace in QWEN {
        let path = root.join(trace);
        let dir = tempfile::tempdir().unwrap();
        let ds = dir.path().join("ds");
        ingest_ok(&[&path], &ds, &["-q"]);
        let subs = subcategory_ns(&ds);
        // other_compute from the raw events: golden category, end clipped on its stream.
        let other_compute: i64 = activities(&path, &golden)
            .iter()
            .filter(|a| a.2 == "other_compute")
            .map(|a| a.1 - a.0)
            .sum();
        assert_eq!(
            subs.values().sum::<i64>(),
            other_compute,
            "{trace}: {subs:?}"
        );
        assert_eq!(
            subs.get("other"),
            None,
            "{trace}: docs/CLASSIFICATION.md says 0 %"
        );
        let rms = rmsnorm_kernel_ns(&raw_exact(&path));
        assert!(rms > 0, "{trace}");
        assert_eq!(subs["normalization"], rms, "{trace}");
        // The report's per-step table (`subcategory::per_step`): the same totals.
        let runs: Vec<String> = strs_of(&super::whole(&ds, "runs"), "run");
        let per = aorta_transform::subcategory::per_step(&ds, &runs, None).unwrap();
        let (sub, ns) = (strs_of(&per, "subcategory"), per.column("gpu_ns").unwrap());
        let ns: Vec<i64> = ns.i64().unwrap().iter().map(|v| v.unwrap()).collect();
        assert_eq!(ns.iter().sum::<i64>(), other_compute, "{trace}");
        let norm: i64 = (0..ns.len())
            .filter(|&i| sub[i] == "normalization")
            .map(|i| ns[i])
            .sum();
        assert_eq!(norm, rms, "{trace}");
        for s in ["elementwise", "copy_kernel", "reduction", "embedding"] {
            assert!(
                subs.get(s).is_some_and(|ns| *ns > 0),
                "{trace}: no {s}: {subs:?}"
            );
        }
    }
}

/// A subcategory declared in the `--rules` file given to ingest: kept with the run
/// (`runs.user_rules`) and applied by `aorta kernels`; its time is that of the kernels whose
/// operator (by `External id`) is `aten::cos` or `aten::sin`, counted here from the raw trace.
#[test]
fn a_subcategory_declared_in_ingest_rules_reaches_kernels() {
    let Some(root) = corpus() else { return };
    let path = root.join(QWEN[0]);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[subcategory]]\nname = \"rope\"\nop = '^aten::(cos|sin)$'\nwhy = \"rotary tables\"\n",
    )
    .unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(&[&path], &ds, &["-q", "--rules", rules.to_str().unwrap()]);
    let raw = raw_exact(&path);
    let op_of: HashMap<i64, &str> = events(&raw)
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "cpu_op")
        .filter_map(|e| Some((int_of(&e["args"]["External id"])?, e["name"].as_str()?)))
        .collect();
    let rope: i64 = events(&raw)
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "kernel")
        .filter(|e| {
            int_of(&e["args"]["External id"])
                .and_then(|x| op_of.get(&x))
                .is_some_and(|op| matches!(*op, "aten::cos" | "aten::sin"))
        })
        .map(|e| us_text_to_ns(e["dur"].as_str().unwrap()))
        .sum();
    assert!(rope > 0);
    assert_eq!(subcategory_ns(&ds).get("rope"), Some(&rope));
    // A bad row fails the ingest that names the file, before anything is written.
    std::fs::write(&rules, "[[subcategory]]\nname = \"x\"\nop = 'a('\n").unwrap();
    let o = crate::common::cli::ingest(
        &[&path],
        &dir.path().join("ds2"),
        &["--rules", rules.to_str().unwrap()],
    );
    let err = crate::common::cli::stderr(&o);
    assert_ne!(crate::common::cli::code(&o), 0);
    assert!(
        err.contains(&format!("{}: pattern `a(`", rules.display())),
        "{err}"
    );
    assert!(!dir.path().join("ds2").exists(), "{err}");
}

/// `aorta compare`'s subcategories level on the qwen pair (one step window per side): the
/// subcategories add up to the categories level's `other` less the step's memsets (counted
/// here from the dataset's rows), and `normalization` is the RMSNorm kernels of the raw trace.
#[test]
fn compare_splits_other_into_subcategories() {
    use polars::prelude::*;
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    for (trace, label) in QWEN.iter().zip(["h100", "mi300x"]) {
        ingest_ok(&[&root.join(trace)], &ds, &["-q", "--label", label]);
    }
    let out = dir.path().join("cmp");
    let (d, o) = (ds.to_str().unwrap(), out.to_str().unwrap());
    ok(&[
        "compare",
        d,
        "--reference",
        "h100",
        "--candidate",
        "mi300x",
        "-o",
        o,
        "--fail-if-regressed",
        "subcategory.normalization=1000",
    ]);
    let levels =
        ParquetReader::new(std::fs::File::open(out.join("compare_levels.parquet")).unwrap())
            .finish()
            .unwrap();
    let acts = super::whole(&ds, "gpu_activities");
    let (level, key) = (strs_of(&levels, "level"), strs_of(&levels, "key"));
    for (side, (trace, run)) in QWEN.iter().zip(["h100", "mi300x"]).enumerate() {
        let col = ["reference_median", "candidate_median"][side];
        let v = levels.column(col).unwrap().f64().unwrap().clone();
        let at = |l: &str, k: &str| {
            (0..levels.height())
                .find(|&i| level[i] == l && key[i] == k)
                .and_then(|i| v.get(i))
        };
        let subs: f64 = (0..levels.height())
            .filter(|&i| level[i] == "subcategories")
            .filter_map(|i| v.get(i))
            .sum();
        let (r, c, s, e) = (
            strs_of(&acts, "run"),
            strs_of(&acts, "category"),
            acts.column("step").unwrap().i64().unwrap().clone(),
            (
                acts.column("start_ns").unwrap().i64().unwrap().clone(),
                acts.column("end_ns").unwrap().i64().unwrap().clone(),
            ),
        );
        let memset_ns: i64 = (0..acts.height())
            .filter(|&i| r[i] == run && c[i] == "memset" && s.get(i).is_some())
            .map(|i| e.1.get(i).unwrap() - e.0.get(i).unwrap())
            .sum();
        let other = at("categories", "other").unwrap();
        assert!(
            (subs - (other - memset_ns as f64 * 1e-6)).abs() < 1e-9,
            "{run}: {subs} vs {other}"
        );
        let rms = rmsnorm_kernel_ns(&raw_exact(&root.join(trace)));
        assert!(
            (at("subcategories", "normalization").unwrap() - rms as f64 * 1e-6).abs() < 1e-9,
            "{run}"
        );
    }
    // The gate on a subcategory compares the same medians: each side's RMSNorm kernels.
    let summary: aorta_transform::compare::Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let check = &summary.regression.unwrap().checks[0];
    assert_eq!(check.key, "subcategory.normalization");
    let rms = QWEN.map(|t| rmsnorm_kernel_ns(&raw_exact(&root.join(t))) as f64 * 1e-6);
    let (r, c) = (check.reference.unwrap(), check.candidate.unwrap());
    assert!((r - rms[0]).abs() < 1e-9 && (c - rms[1]).abs() < 1e-9);
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("other_compute by subcategory: summary"));
}

fn strs_of(df: &polars::prelude::DataFrame, c: &str) -> Vec<String> {
    df.column(c)
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect()
}
