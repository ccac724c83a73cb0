//! The corpus's H100 and MI300X model traces (BERT-small, Qwen1.5-0.5B; TraceLens's pairs):
//! the FLOPs `aorta perf` gives every GEMM and attention operator that launched a kernel,
//! against the same formulas written here over serde_json's reading of the raw trace.
//!
//! The TraceLens column (its perf models' definitions, docs/PERF.md: `addmm` also counts the
//! bias add, M·N) is computed too, to hold the documented difference to its size.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::Value;

use super::{perf, sums};
use crate::common::cli::{code, ingest, stderr};
use crate::common::{corpus, events, raw_json};

fn dims(a: &Value, i: usize) -> Vec<f64> {
    a["Input Dims"][i]
        .as_array()
        .map(|d| d.iter().map(|x| x.as_f64().unwrap()).collect())
        .unwrap_or_default()
}

/// (aorta's definition, TraceLens's) of one operator's FLOPs, from its raw args.
fn by_hand(name: &str, a: &Value) -> Option<(f64, f64)> {
    let concrete = |i: usize| a["Concrete Inputs"][i].as_str().unwrap_or("").to_string();
    Some(match name {
        "aten::mm" => {
            let (x, y) = (dims(a, 0), dims(a, 1));
            let f = 2.0 * x[0] * x[1] * y[1];
            (f, f)
        }
        "aten::addmm" => {
            let (x, y) = (dims(a, 1), dims(a, 2));
            let f = 2.0 * x[0] * x[1] * y[1];
            (f, f + x[0] * y[1])
        }
        "aten::bmm" => {
            let (x, y) = (dims(a, 0), dims(a, 1));
            let f = 2.0 * x[0] * x[1] * x[2] * y[2];
            (f, f)
        }
        // [B, S, H, D]; is_causal is the ninth argument.
        "aten::_flash_attention_forward" => {
            let (q, k) = (dims(a, 0), dims(a, 1));
            let half = if concrete(8) == "True" { 0.5 } else { 1.0 };
            let f = 4.0 * q[0] * q[2] * q[1] * k[1] * q[3] * half;
            (f, f)
        }
        _ => return None,
    })
}

/// Σ FLOPs per modelled operator of the operators that launched kernels, by hand: (aorta,
/// TraceLens).
fn expected(trace: &Path) -> BTreeMap<String, (f64, f64)> {
    let raw = raw_json(trace);
    let ev = events(&raw);
    let launched: HashSet<i64> = ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "kernel")
        .filter_map(|e| e["args"]["External id"].as_i64())
        .collect();
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for e in ev.iter().filter(|e| e["ph"] == "X" && e["cat"] == "cpu_op") {
        let name = e["name"].as_str().unwrap();
        let id = e["args"]["External id"].as_i64();
        if !id.is_some_and(|i| launched.contains(&i)) {
            continue;
        }
        if let Some((a, t)) = by_hand(name, &e["args"]) {
            let s = out.entry(name.to_string()).or_default();
            (s.0, s.1) = (s.0 + a, s.1 + t);
        }
    }
    out
}

#[test]
fn model_trace_gemm_and_attention_flops_are_the_formulas() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let files = [
        ("h100_bert", "kineto/cuda/h100_models/bert-small.json.gz"),
        (
            "h100_qwen",
            "kineto/cuda/h100_models/qwen1.5-0.5b-chat.json.gz",
        ),
        (
            "mi300x_bert",
            "kineto/rocm/mi300x_models/bert-small.json.gz",
        ),
        (
            "mi300x_qwen",
            "kineto/rocm/mi300x_models/qwen1.5-0.5b-chat.json.gz",
        ),
    ];
    for (label, f) in files {
        let o = ingest(&[&data.join(f)], tmp.path(), &["--label", label, "-q"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    perf(tmp.path(), &[]);
    for (label, f) in files {
        let want = expected(&data.join(f));
        assert!(
            want.contains_key("aten::addmm") && want.contains_key("aten::_flash_attention_forward"),
            "{label}"
        );
        for (op, (flops, tracelens)) in &want {
            let got: f64 = sums(tmp.path(), label, |o, _| o == op)
                .values()
                .map(|s| s.0)
                .sum();
            assert_eq!(got, *flops, "{label} {op}");
            // TraceLens counts addmm's bias add on top: M·N per call, < 0.2 % here (K ≥ 512).
            let extra = (tracelens - flops) / flops;
            assert!((0.0..0.002).contains(&extra), "{label} {op}: {extra}");
        }
    }
}
