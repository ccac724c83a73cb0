//! `aorta compare --fail-if-regressed` on the hand-built CUDA/ROCm pair of `compare_cli`: the
//! overall and keyed gates against the pair's hand-computed numbers, and the exit codes and
//! one-line errors of what cannot be gated.

use std::path::Path;

use crate::common::cli::{code, stderr};
use crate::compare_cli::{self, close, compare, fixture};
use aorta_transform::compare::Summary;

#[test]
fn regression_gate_and_errors() {
    let (dir, ds) = fixture();
    let out = dir.path().join("cmp");
    // Step time unchanged (the 1 ms ProfilerStep spans), exposed comm +50 %.
    let gate = |pct: &str| compare_cli::gate(&ds, &out, pct);
    let o = gate("30");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("REGRESSED: exposed_comm_ms") && !text.contains("REGRESSED: step_ms"),
        "{text}"
    );
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let gate_doc = doc.regression.unwrap();
    assert!(gate_doc.checks.iter().all(|c| c.threshold_pct == 30.0));
    assert!(gate_doc.warnings.is_empty(), "2 of 4 operators matched");
    // Exposed comm 0.1 -> 0.15 ms is +50 %, the 1 ms ProfilerStep span unchanged.
    let change = |k: &str| {
        let c = gate_doc.checks.iter().find(|c| c.key == k).unwrap();
        (c.change_pct.unwrap(), c.regressed)
    };
    let (ch, bad) = change("exposed_comm_ms");
    assert!((ch - 50.0).abs() < 1e-6 && bad, "{ch}");
    let (ch, bad) = change("step_ms");
    assert!(ch.abs() < 1e-6 && !bad, "{ch}");
    let o = gate("60");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    keyed_gates(&gate, &out);

    // An unknown selector: one line naming the runs and platforms; the earlier output stays.
    let before = std::fs::read(out.join("summary.json")).unwrap();
    let o = compare(&ds, &out, &["--reference", "cuda", "--candidate", "tpu"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("`tpu`")
            && err.contains("runs: cuda, rocm")
            && err.contains("platforms: cuda, rocm"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("summary.json")).unwrap(), before);
    let o = compare(
        &dir.path().join("nope"),
        &out,
        &["--reference", "a", "--candidate", "b"],
    );
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("not an aorta dataset"),
        "{}",
        stderr(&o)
    );
}

/// `--fail-if-regressed KEY=PCT,…` on the fixture, against its hand-computed numbers: step
/// time unchanged, gemm and aten::mm 0.04 -> 0.06 ms (+50 %), the all_reduce 100 -> 150 µs
/// per call, so its busbw 73.40032 -> 48.933546… GB/s (−33.3 %) and its ms +50 %.
fn keyed_gates(gate: &dyn Fn(&str) -> std::process::Output, out: &Path) {
    let o = gate("step_ms=5,category.gemm=49,collective.all_reduce.busbw=-30,op.aten::mm=60");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let failed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("REGRESSED: "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["category.gemm", "collective.all_reduce.busbw"],
        "{text}"
    );
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let checks = doc.regression.unwrap().checks;
    let get = |k: &str| checks.iter().find(|c| c.key == k).unwrap().clone();
    let bus = get("collective.all_reduce.busbw");
    let want = |us: f64| 4194304.0 / (us * 1000.0) * 1.75;
    let (r, c) = (bus.reference.unwrap(), bus.candidate.unwrap());
    assert!(close(r, want(100.0)) && close(c, want(150.0)) && bus.pairs == 1);
    assert!(close(bus.change_pct.unwrap(), -100.0 / 3.0) && bus.unit == "GB/s");
    let mm = get("op.aten::mm");
    let (r, c) = (mm.reference.unwrap(), mm.candidate.unwrap());
    assert!(close(r, 0.04) && close(c, 0.06) && !mm.regressed);
    // A drop does not fail a growth threshold, and growth does not fail a drop threshold.
    assert_eq!(code(&gate("collective.all_reduce.busbw=5")), 0);
    assert_eq!(code(&gate("collective.all_reduce.ms=49")), 1);
    assert_eq!(code(&gate("collective.all_reduce.ms=-1")), 0);
    // A key the comparison does not have: exit 2, one line naming what can be gated.
    for (spec, known) in [
        ("op.aten::conv2d=5", "op.NAME"),
        ("category.tensor_cores=5", "category.gemm"),
        (
            "collective.all_gather.busbw=-5",
            "collective.all_reduce.busbw",
        ),
        ("nope_ms=5", "step_ms"),
    ] {
        let o = gate(spec);
        assert_eq!(code(&o), 2, "{spec}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        let key = spec.split('=').next().unwrap();
        assert!(
            err.contains(&format!("`{key}` is not in this comparison")),
            "{err}"
        );
        assert!(err.contains(known), "{err}");
    }
    for spec in ["step_ms=abc", "collective.all_reduce.speed=5", "=5", "inf"] {
        let o = gate(spec);
        assert_eq!(code(&o), 2, "{spec}");
        assert!(
            stderr(&o).contains("expected a percentage"),
            "{}",
            stderr(&o)
        );
    }
}
