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
