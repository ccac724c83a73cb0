//! Steps and pairs in `aorta compare`: the step span and the GPU idle around it (by hand on the
//! compare fixture), and runs paired by workload or refused (on the H100/MI300X model traces,
//! against the raw JSON's ProfilerStep durations).

use std::path::Path;

use crate::common::cli::{code, overlap_json, stderr};
use crate::common::*;
use crate::compare_cli::{close, compare, fixture, models_dataset};
use aorta_transform::compare::Summary;
use polars::prelude::{ParquetReader, SerReader};

/// The step span and the GPU idle around and between the kernels (`overlap_steps`), by hand:
/// each 1,000 µs ProfilerStep has its GEMM at +100 (40 µs CUDA), the add at +150 (10 µs) and
/// the all_reduce at +200 (100 µs CUDA, 150 µs ROCm).
#[test]
fn step_span_and_gpu_idle_split() {
    let (_dir, ds) = fixture();
    let doc = overlap_json(&ds, "step");
    for (run, comm_us, busy_us) in [("cuda", 100, 40 + 10 + 100), ("rocm", 150, 60 + 8 + 150)] {
        let r = doc["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run"] == run)
            .unwrap();
        let rows = r["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{run}: two steps, nothing outside them");
        for row in rows {
            let ns = |k: &str| row[k].as_i64().unwrap();
            assert_eq!(ns("step_ns"), 1_000_000, "{run}");
            assert_eq!(ns("idle_before_ns"), 100_000, "{run}");
            let window = (100 + comm_us) * 1000;
            assert_eq!(ns("window_ns"), window, "{run}");
            assert_eq!(ns("idle_after_ns"), 1_000_000 - 100_000 - window, "{run}");
            assert_eq!(ns("idle_ns"), window - busy_us * 1000, "{run}");
        }
        let total = &r["totals"].as_array().unwrap()[0];
        assert_eq!(
            total["step_ns"], 2_000_000,
            "{run}: the rank sums its steps"
        );
        assert_eq!(total["step_count"], 2, "{run}");
    }
}

/// A GPU running a step behind the CPU: step 1's kernel K1 (launched at 10 µs) runs 50–150 µs,
/// into step 2's span [100, 200); step 2's own kernel runs 160–180. Idle around a step is time
/// the GPU ran nothing at all: step 1 idles 0–50 before K1 and nothing after (K1 runs past
/// its span); step 2 only 150–160 before its kernel (K1 fills 100–150), and 180–200 after.
#[test]
fn idle_around_a_step_is_time_the_gpu_ran_nothing() {
    let trace = r#"{"schemaVersion":1,"baseTimeNanoseconds":1700000000000000000,"traceEvents":[
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0.0,"dur":100.0},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":100.0,"dur":100.0},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10.0,"dur":5.0,"args":{"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":110.0,"dur":5.0,"args":{"correlation":2}},
{"ph":"X","cat":"kernel","name":"gemm_a","pid":0,"tid":7,"ts":50.0,"dur":100.0,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"kernel","name":"gemm_b","pid":0,"tid":7,"ts":160.0,"dur":20.0,"args":{"device":0,"stream":7,"correlation":2}}
]}"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rank0.trace.json");
    std::fs::write(&file, trace).unwrap();
    let ds = dir.path().join("ds");
    crate::common::cli::ingest_ok(&[&file], &ds, &["--label", "behind", "-q"]);
    let doc = overlap_json(&ds, "step");
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    let at = |step: i64, k: &str| {
        let r = rows.iter().find(|r| r["step"] == step).unwrap();
        r[k].as_i64().unwrap()
    };
    assert_eq!(
        (at(1, "idle_before_ns"), at(1, "idle_after_ns")),
        (50_000, 0)
    );
    assert_eq!(
        (at(2, "idle_before_ns"), at(2, "idle_after_ns")),
        (10_000, 20_000)
    );
    let total = &doc["runs"][0]["totals"].as_array().unwrap()[0];
    assert_eq!(total["idle_before_ns"], 60_000);
}

/// ProfilerStep#6 of each model trace, as the raw JSON says (CPU `user_annotation`), in ms.
fn profiler_step_ms(path: &Path) -> f64 {
    let raw = raw_json(path);
    let e = events(&raw)
        .iter()
        .find(|e| cat(e) == "user_annotation" && e["name"] == "ProfilerStep#6")
        .unwrap();
    e["dur"].as_f64().unwrap() / 1e3
}

/// `--reference h100_models --candidate mi300x_models`: each model is a run of its own, the
/// runs pair by model, each pair's step time is its ProfilerStep span (the qwen trace's 509
/// kernels launched before the step stay out: one step, not two), and the overall ratio is the
/// pairs' geometric mean. A deliberately mismatched pair is refused, and --force overrides.
#[test]
fn models_pair_by_name_and_a_mismatched_pair_is_refused() {
    let Some(root) = corpus() else { return };
    let (dir, ds, [cuda, rocm]) = models_dataset(&root, &["kineto/cuda/h200_fsdp2"]);
    let out = dir.path().join("cmp");
    let args = ["--reference", "h100_models", "--candidate", "mi300x_models"];
    let o = compare(&ds, &out, &args);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    // Both sides named for the page: each run's GPU (the traces' deviceProperties), runtime
    // versions and files.
    let sides: Vec<(&str, &str)> = doc
        .sides
        .iter()
        .map(|s| (s.side.as_str(), s.selector.as_str()))
        .collect();
    assert_eq!(
        sides,
        [("reference", "h100_models"), ("candidate", "mi300x_models")]
    );
    let bert = &doc.sides[0].runs["h100_models/bert-small"];
    assert_eq!(bert.platform, "cuda");
    assert_eq!(bert.devices, ["NVIDIA H100 80GB HBM3".to_string()].into());
    assert!(
        bert.versions
            .iter()
            .any(|v| v.contains("cuda_runtime_version=12040")),
        "{:?}",
        bert.versions
    );
    assert_eq!(
        bert.sources,
        [cuda.join("bert-small.json.gz").display().to_string()]
    );
    let mi = &doc.sides[1].runs["mi300x_models/qwen1.5-0.5b-chat"];
    assert_eq!(mi.devices, ["AMD Instinct MI300X VF".to_string()].into());
    let pairs = doc.pairs.unwrap();
    assert!(pairs.comparable, "{:?}", pairs.reasons);
    let names: Vec<&str> = pairs.pairs.iter().map(|p| p.workload.as_str()).collect();
    assert_eq!(names, ["bert-small", "qwen1.5-0.5b-chat"]);
    let mut product = 1.0;
    for p in &pairs.pairs {
        let file = format!("{}.json.gz", p.workload);
        let (r, c) = (
            profiler_step_ms(&cuda.join(&file)),
            profiler_step_ms(&rocm.join(&file)),
        );
        assert!(
            close(p.reference_step_ms.unwrap(), r),
            "{}: {r}",
            p.workload
        );
        assert!(
            close(p.candidate_step_ms.unwrap(), c),
            "{}: {c}",
            p.workload
        );
        assert!(close(p.step_ratio.unwrap(), c / r), "{}", p.workload);
        product *= c / r;
    }
    assert!(close(pairs.step_ratio_geomean.unwrap(), product.sqrt()));
    // One step per model and side: the leftover bucket is not a step. The overall row is
    // the geometric mean, with no side medians (they would mix the two models).
    for p in &pairs.pairs {
        let step = doc
            .levels
            .steps
            .iter()
            .find(|e| e.key == "step_ms" && e.workload.as_ref() == Some(&p.workload))
            .unwrap();
        assert_eq!(
            (step.reference.unwrap().n, step.candidate.unwrap().n),
            (1, 1)
        );
    }
    let step = doc.levels.step("step_ms").unwrap();
    assert_eq!((step.reference, step.candidate), (None, None));
    assert!(close(step.ratio.unwrap(), product.sqrt()));

    // A single-GPU inference trace against a 2-rank FSDP job: refused, the gate exits 2.
    let bad = [
        "--reference",
        "h100_models/bert-small",
        "--candidate",
        "h200_fsdp2",
    ];
    let o = compare(
        &ds,
        &out,
        &[&bad[..], &["--fail-if-regressed", "5"]].concat(),
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("REFUSED"));
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let pairs = doc.pairs.unwrap();
    assert!(!pairs.comparable && !pairs.forced);
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<p class=\"bad\">NOT COMPARABLE: the step ratios are refused"));
    assert!(
        pairs
            .reasons
            .iter()
            .any(|r| r.contains("operator GPU time")),
        "{:?}",
        pairs.reasons
    );
    assert_eq!(pairs.pairs[0].step_ratio, None);
    assert!(doc.levels.steps.iter().all(|l| l.ratio.is_none()));
    let gate = ["--force", "--fail-if-regressed", "step_ms=1e9"];
    let o = compare(&ds, &out, &[&bad[..], &gate[..]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let pairs = doc.pairs.unwrap();
    assert!(pairs.forced && pairs.pairs[0].step_ratio.is_some());
    // The gate warns that the sides barely match: few operator rows are `matched`.
    let ops =
        ParquetReader::new(std::fs::File::open(out.join("compare_operators.parquet")).unwrap())
            .finish()
            .unwrap();
    let status = strs(&ops, "status");
    let matched = status
        .iter()
        .filter(|s| s.as_deref() == Some("matched"))
        .count();
    assert!(matched * 2 < ops.height(), "{matched} of {}", ops.height());
    let warning = format!("only {matched} of {} operators", ops.height());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("warning: {warning}")), "{text}");
    assert!(doc.regression.unwrap().warnings[0].starts_with(&warning));
}

/// A rule the user wrote that judges nothing fails as an unknown key does: the model traces
/// run no collective, so `comm_ms` is 0 on both sides of both pairs and has no change.
#[test]
fn a_gate_rule_that_cannot_be_evaluated_is_exit_2_with_the_reason() {
    let Some(root) = corpus() else { return };
    let (dir, ds, _) = models_dataset(&root, &[]);
    let out = dir.path().join("cmp");
    let sel = ["--reference", "h100_models", "--candidate", "mi300x_models"];
    let o = compare(
        &ds,
        &out,
        &[&sel[..], &["--fail-if-regressed", "comm_ms=5"]].concat(),
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "`comm_ms` cannot be evaluated: its reference value is 0 in every pair (2 pair(s))"
        ),
        "{err}"
    );
    // A rule with something to judge still runs.
    let o = compare(
        &ds,
        &out,
        &[&sel[..], &["--fail-if-regressed", "step_ms=50", "--force"]].concat(),
    );
    assert!(matches!(code(&o), 0 | 1), "{}", stderr(&o));
}

/// Without CPU operators (GPU-only traces) the work mix is checked by the GPU time's category
/// mix, and on one platform by its kernel names too: 90 % GEMM against 10 % GEMM shares only
/// 20 % of the category mix; the same mix under other kernel names shares no kernel; the same
/// kernels and mix are comparable, checked by kernel names and categories.
#[test]
fn without_cpu_operators_the_kernel_and_category_mix_decide() {
    let trace = |gemm: &str, gemm_us: u32, other_us: u32| {
        format!(
            r#"{{"schemaVersion":1,"baseTimeNanoseconds":1700000000000000000,"deviceProperties":[{{"id":0,"name":"NVIDIA H100 80GB HBM3"}}],"traceEvents":[
{{"ph":"X","cat":"kernel","name":"{gemm}","pid":0,"tid":7,"ts":0.0,"dur":{gemm_us}.0,"args":{{"device":0,"stream":7,"correlation":1}}}},
{{"ph":"X","cat":"kernel","name":"void at::native::vectorized_elementwise_kernel<4>","pid":0,"tid":7,"ts":200.0,"dur":{other_us}.0,"args":{{"device":0,"stream":7,"correlation":2}}}}
]}}"#
        )
    };
    let (g1, g2) = (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n",
        "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN",
    );
    let dir = tempfile::tempdir().unwrap();
    for (name, g, gu, ou) in [
        ("a", g1, 90, 10),
        ("b", g1, 10, 90),
        ("c", g1, 90, 10),
        ("d", g2, 90, 10),
    ] {
        let d = dir.path().join("in").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("rank0.json"), trace(g, gu, ou)).unwrap();
    }
    let ds = dir.path().join("ds");
    crate::common::cli::ingest_ok(&[&dir.path().join("in")], &ds, &["-q"]);
    let verdict = |cand: &str| -> serde_json::Value {
        let out = dir.path().join(format!("cmp-{cand}"));
        let o = compare(
            &ds,
            &out,
            &["--reference", "a", "--candidate", cand, "--force"],
        );
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
        s["pairs"].clone()
    };
    let checked = "kernel names and categories";
    let b = verdict("b");
    assert_eq!(b["comparable"], false, "{b}");
    assert_eq!(b["pairs"][0]["mix_checked_by"], checked);
    let why = b["reasons"][0].as_str().unwrap();
    assert!(
        why.contains("only 20% of the GPU time's category mix is common"),
        "{why}"
    );
    let d = verdict("d");
    assert_eq!(d["comparable"], false, "{d}");
    let why = d["reasons"][0].as_str().unwrap();
    assert!(
        why.contains(
            "only 10% of the reference's GPU time is in kernels (by name) the other side ran too"
        ),
        "{why}"
    );
    let c = verdict("c");
    assert_eq!(c["comparable"], true, "{c}");
    assert_eq!(c["pairs"][0]["mix_checked_by"], checked);
    assert_eq!(c["not_checked"], serde_json::json!([]));
}

/// Two JSONL logs have neither CPU operators nor GPU categories: the pair's mix is "not
/// checked", which the terminal and summary.json say, instead of "comparable".
#[test]
fn a_pair_with_nothing_to_check_says_not_checked() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    for side in ["p", "q"] {
        let d = dir.path().join("in").join(side);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            root.join("jsonl/rank_00_metrics.jsonl"),
            d.join("rank_00_metrics.jsonl"),
        )
        .unwrap();
    }
    let ds = dir.path().join("ds");
    crate::common::cli::ingest_ok(&[&dir.path().join("in")], &ds, &["-q"]);
    let out = dir.path().join("cmp");
    let o = compare(&ds, &out, &["--reference", "p", "--candidate", "q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("mix NOT CHECKED"), "{text}");
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["pairs"]["pairs"][0]["mix_checked_by"], "not checked");
    assert_eq!(s["pairs"]["not_checked"], serde_json::json!(["p"]));
}
