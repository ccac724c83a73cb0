//! Numbers users can trust (issue 31), on real traces made for the purpose on an H200
//! (tests/golden/device/trust/, workloads/torch/trust_traces.py; PyTorch 2.11, CUDA 13):
//!
//! - DDP over fp32 linears with TF32 allowed: cuBLAS runs TF32 kernels, so the GEMMs are
//!   judged by the TF32 peak, the MFU is at most 100 %, and the GEMM FLOPs of a step are the
//!   ones the shapes give (independently: 2·T·H² per product, forward L products, weight
//!   gradients L, input gradients L − 1: the first layer's input needs none).
//! - SDPA forward and backward under every backend the GPU took (flash, memory-efficient,
//!   cuDNN, math): the model FLOPs of every profiled step equal the formula from the shapes
//!   (`sdpa_summary.json`), forward 4·B·H·S²·D and backward 2.5× that for the fused
//!   kernels; the math backend runs six batched GEMMs instead (two forward, four backward,
//!   no recompute), 3× the forward.
//! - A rate above its roof is flagged, kept out of MFU, and named in the headline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::perf;
use crate::common::cli::{code, ingest, stderr};
use crate::common::{i64s, raw_json, strs, table};

fn trust() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/device/trust")
}

/// One dataset with each (trace, label) ingested under its label, and `aorta perf` run on it
/// (which writes `op_perf` and `perf_steps`).
fn dataset(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (file, label) in files {
        let o = ingest(
            &[&trust().join(file)],
            tmp.path(),
            &["-q", "--label", label],
        );
        assert_eq!(code(&o), 0, "{file}: {}", stderr(&o));
    }
    perf(tmp.path(), &[]);
    tmp
}

fn f64s(df: &polars::prelude::DataFrame, c: &str) -> Vec<Option<f64>> {
    df.column(c).unwrap().f64().unwrap().iter().collect()
}

fn summary(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(trust().join(name)).unwrap()).unwrap()
}

const BACKENDS: [(&str, &str); 4] = [
    ("FLASH_ATTENTION", "sdpa_flash_attention.pt.trace.json.gz"),
    (
        "EFFICIENT_ATTENTION",
        "sdpa_efficient_attention.pt.trace.json.gz",
    ),
    ("CUDNN_ATTENTION", "sdpa_cudnn_attention.pt.trace.json.gz"),
    ("MATH", "sdpa_math.pt.trace.json.gz"),
];

/// Kernels that do the attention products of the fused backends (flash, CUTLASS
/// memory-efficient, cuDNN) — each must reach a modelled operator.
fn is_attention_kernel(k: &str) -> bool {
    [
        "flash_fwd",
        "flash_bwd",
        "fmha_cutlass",
        "cudnn_generated_fort_native_sdpa",
    ]
    .iter()
    .any(|p| k.contains(p))
}

#[test]
fn sdpa_model_flops_per_step_equal_the_formula_on_every_backend() {
    let s = summary("sdpa_summary.json");
    let sh = &s["shape"];
    let (b, h, n, d) = (
        sh["batch"].as_i64().unwrap(),
        sh["heads"].as_i64().unwrap(),
        sh["seq"].as_i64().unwrap(),
        sh["head_dim"].as_i64().unwrap(),
    );
    let fwd = 4 * b * h * n * n * d;
    assert_eq!(fwd, s["flops"]["forward"].as_i64().unwrap());
    let labels: Vec<(&str, &str)> = BACKENDS.iter().map(|(l, f)| (*f, *l)).collect();
    let ds = dataset(&labels);
    for (backend, _) in BACKENDS {
        assert!(
            s["backends"][backend].get("error").is_none(),
            "{backend} ran"
        );
        let ops = table(ds.path(), "op_perf", backend);
        let (op, model, kernel, note) = (
            strs(&ops, "op"),
            strs(&ops, "model"),
            strs(&ops, "kernel"),
            strs(&ops, "note"),
        );
        let (step, flops) = (i64s(&ops, "step"), i64s(&ops, "flops"));
        // step → (attention forward, attention backward, GEMM) FLOPs.
        let mut per_step: BTreeMap<i64, [i64; 3]> = BTreeMap::new();
        for i in 0..ops.height() {
            let k = kernel[i].as_deref().unwrap_or("");
            let launched = op[i].as_deref() != Some("(no CPU op)");
            if launched && is_attention_kernel(k) {
                assert!(
                    flops[i].is_some(),
                    "{backend}: `{k}` of {:?} is unmodelled: {:?}",
                    op[i],
                    note[i]
                );
            }
            let (Some(st), Some(f)) = (step[i], flops[i]) else {
                continue;
            };
            let slot = match model[i].as_deref() {
                Some("attention") => 0,
                Some("attention_bwd") => 1,
                Some("gemm") => 2,
                other => panic!("{backend}: FLOPs from a {other:?} model"),
            };
            per_step.entry(st).or_default()[slot] += f;
        }
        assert_eq!(per_step.len(), 2, "{backend}: two profiled steps");
        let want = if backend == "MATH" {
            // QKᵀ and PV, then dV, dP, dS·K, dSᵀ·Q: six products of 2·B·H·S²·D.
            [0, 0, 3 * fwd]
        } else {
            [fwd, fwd * 5 / 2, 0]
        };
        for (st, got) in &per_step {
            assert_eq!(*got, want, "{backend} step {st}");
        }
    }
}

#[test]
fn ddp_tf32_gemms_are_judged_by_the_tf32_peak_and_mfu_is_at_most_100() {
    let files = [
        ("ddp_tf32_rank0.pt.trace.json.gz", "ddp_tf32"),
        ("ddp_tf32_rank1.pt.trace.json.gz", "ddp_tf32"),
    ];
    let ds = dataset(&files);
    let params = &raw_json(&trust().join(files[0].0))["aorta_params"];
    let params: Value = match params {
        Value::String(s) => {
            serde_json::from_str(&s.replace('\'', "\"").replace("True", "true")).unwrap()
        }
        v => v.clone(),
    };
    let (t, hd, l) = (
        params["tokens"].as_i64().unwrap(),
        params["hidden"].as_i64().unwrap(),
        params["layers"].as_i64().unwrap(),
    );
    let per_step_gemm = 2 * t * hd * hd * (3 * l - 1);

    let ops = table(ds.path(), "op_perf", "ddp_tf32");
    let (op, dtype) = (strs(&ops, "op"), strs(&ops, "dtype"));
    let (pct, kernel) = (f64s(&ops, "peak_pct"), strs(&ops, "kernel"));
    let mut mm = 0;
    for i in 0..ops.height() {
        if op[i].as_deref() == Some("aten::mm") {
            mm += 1;
            assert!(kernel[i].as_deref().unwrap().contains("tf32"));
            assert_eq!(dtype[i].as_deref(), Some("tf32"), "row {i}");
            let p = pct[i].expect("a % of the TF32 peak");
            assert!(p > 20.0 && p <= 100.0, "{p}");
        }
    }
    assert_eq!(mm, 2 * 2 * (3 * l - 1), "two ranks, two steps");

    let steps = table(ds.path(), "perf_steps", "ddp_tf32");
    let (rank, level) = (i64s(&steps, "rank"), strs(&steps, "level"));
    let (gemm, window) = (i64s(&steps, "gemm_flops"), i64s(&steps, "window_ns"));
    let (mfu, dtype) = (f64s(&steps, "mfu_pct"), strs(&steps, "dtype"));
    let step = i64s(&steps, "step");
    let mut n = 0;
    for i in 0..steps.height() {
        if level[i].as_deref() != Some("step") {
            continue;
        }
        if step[i].is_none() {
            // The kernels the previous (warm-up) step left running as the profiler started:
            // no CPU operator in the trace launched them.
            assert_eq!(gemm[i], Some(0));
            continue;
        }
        n += 1;
        let r = rank[i].unwrap();
        assert_eq!(dtype[i].as_deref(), Some("tf32"));
        assert_eq!(gemm[i], Some(per_step_gemm), "rank {r}");
        let m = mfu[i].expect("an MFU");
        // Independently: the step's GEMM FLOPs over its window at the H200's TF32 peak.
        let want = 100.0 * per_step_gemm as f64 / (window[i].unwrap() as f64 * 494.5e3);
        assert!(
            (m - want).abs() < 1e-9 && m <= 100.0,
            "rank {r}: {m} vs {want}"
        );
        // The script's CUDA events time whole (unprofiled) steps and print GEMM FLOPs over
        // that time; its FLOPs count 3·L products, one more input gradient than autograd
        // computes. The same rate over the same FLOPs: aorta's step rate (GEMM FLOPs over
        // the traced window) within 10 % of the events' (a step's time varies by ~4 %).
        let ev = summary(&format!("ddp_tf32_summary_rank{r}.json"));
        let printed = ev["gemm_flops_per_step"].as_i64().unwrap();
        assert_eq!(printed, 2 * t * hd * hd * 3 * l);
        let ev_rate = ev["tflops"].as_f64().unwrap() * per_step_gemm as f64 / printed as f64;
        let rate = per_step_gemm as f64 / window[i].unwrap() as f64 / 1e3;
        assert!(
            (rate - ev_rate).abs() / ev_rate < 0.10,
            "rank {r}: {rate:.1} TFLOP/s over the window, {ev_rate:.1} by CUDA events"
        );
    }
    assert_eq!(n, 4, "two ranks, two steps");
    // Every row is a result: DDP's gradient scaling (`mul.out`) once read 136 % of the HBM
    // roof, counting its output as read too.
    let doc: Value = serde_json::from_str(&perf(ds.path(), &["--json"])).unwrap();
    assert_eq!(
        doc["runs"][0]["over_roof"]["instances"], 0,
        "{}",
        doc["runs"][0]["over_roof"]
    );
}

#[test]
fn a_rate_above_its_roof_is_flagged_and_left_out_of_mfu() {
    let ds = dataset(&[("sdpa_cudnn_attention.pt.trace.json.gz", "cudnn")]);
    let tmp = tempfile::tempdir().unwrap();
    let peaks = tmp.path().join("low.toml");
    // A wrong peak: 100 TFLOP/s bf16, where cuDNN's attention runs at ~500.
    std::fs::write(
        &peaks,
        "[[device]]\nname = \"H200 (wrong)\"\nmatch = [\"H200\"]\nhbm_tbps = 4.8\n\
         tflops = { bf16 = 100 }\nsource = \"a wrong figure\"\n",
    )
    .unwrap();
    let p = peaks.to_str().unwrap();
    let doc: Value =
        serde_json::from_str(&perf(ds.path(), &["--json", "--device-peaks", p])).unwrap();
    let run = &doc["runs"][0];
    let ops = table(ds.path(), "op_perf", "cudnn");
    let (note, tflops) = (strs(&ops, "note"), f64s(&ops, "tflops"));
    let (roof, peak) = (f64s(&ops, "roof_pct"), f64s(&ops, "peak_pct"));
    let mut flagged = (0, 0);
    let ns = i64s(&ops, "gpu_ns");
    for i in 0..ops.height() {
        if let Some(t) = tflops[i].filter(|t| *t > 100.0) {
            let n = note[i].as_deref().unwrap_or("");
            assert!(n.starts_with("peak assumption wrong: "), "{t}: {n}");
            assert_eq!((roof[i], peak[i]), (None, None), "no % printed");
            flagged = (flagged.0 + 1, flagged.1 + ns[i].unwrap());
        }
        for p in [roof[i], peak[i]].into_iter().flatten() {
            assert!(p <= 100.0, "{p}");
        }
    }
    assert!(flagged.0 >= 4, "every attention instance: {flagged:?}");
    assert_eq!(run["over_roof"]["instances"], flagged.0);
    assert_eq!(run["over_roof"]["gpu_ns"], flagged.1);
    // Left out of MFU: no model FLOPs remain, so no step's MFU is above 100 %.
    let steps = table(ds.path(), "perf_steps", "cudnn");
    for (f, m) in i64s(&steps, "model_flops")
        .iter()
        .zip(f64s(&steps, "mfu_pct"))
    {
        assert_eq!(*f, Some(0));
        assert!(m.is_none_or(|m| m <= 100.0), "{m:?}");
    }
    let text = perf(ds.path(), &["--device-peaks", p]);
    let head: Vec<&str> = text.lines().take(6).collect();
    assert!(
        head.iter()
            .any(|l| l.contains(&format!("peak assumption wrong: {} instances", flagged.0))),
        "{text}"
    );
    // `aorta compare` judges by the same check: TFLOP/s kept, no % of the wrong peak.
    let out = tmp.path().join("cmp");
    let o = crate::common::cli::aorta(&[
        "compare".as_ref(),
        ds.path().as_os_str(),
        "--reference".as_ref(),
        "cudnn".as_ref(),
        "--candidate".as_ref(),
        "cudnn".as_ref(),
        "--device-peaks".as_ref(),
        peaks.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let sum: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let top = sum["operators"]["top"].as_array().unwrap();
    let fwd = top
        .iter()
        .find(|r| r["op"] == "aten::_cudnn_attention_forward")
        .unwrap();
    assert!(fwd["candidate_tflops"].as_f64().unwrap() > 100.0, "{fwd}");
    assert_eq!(fwd["candidate_peak_pct"], Value::Null, "{fwd}");
    // Every row's note is printed under the text table, whole; a flagged group keeps its
    // dtype in the table.
    assert!(
        text.lines()
            .any(|l| l.contains("aten::_cudnn_attention_forward") && l.contains(" bf16 ")),
        "{text}"
    );
    let notes: Vec<&str> = text.lines().skip_while(|l| *l != "notes:").collect();
    assert!(
        notes.iter().any(|l| l
            .starts_with("  aten::_cudnn_attention_forward: peak assumption wrong: ")
            && l.ends_with("left out of MFU and every % of peak")),
        "{text}"
    );
}
