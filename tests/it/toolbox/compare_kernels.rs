//! `aorta compare`'s operator level says how many kernels each side launched per call and
//! which: a hand-made reference whose `aten::mm` runs a GEMM and a fix-up kernel per call,
//! against a candidate that runs one, on the same shapes.

use std::fmt::Write;

use aorta_transform::compare::{Summary, KERNEL_SEPARATOR};
use polars::prelude::*;

use super::ok;
use crate::common::cli::{code, ingest, stderr};

/// A one-step trace: `calls` calls of `aten::mm`, each launching `kernels` (names, µs).
fn trace(calls: usize, kernels: &[(&str, u32)]) -> String {
    let mut ev = String::from(
        r#"{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 100000}"#,
    );
    let (mut t, mut gpu, mut corr) = (1010u32, 2000u32, 0u32);
    for call in 0..calls {
        let ext = 100 + call;
        write!(ev, r#", {{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": {t}, "dur": 50,
            "args": {{"External id": {ext}, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}}}}"#).unwrap();
        for (name, us) in kernels {
            corr += 1;
            write!(ev, r#", {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {}, "dur": 5, "args": {{"correlation": {corr}, "External id": {ext}}}}}"#, t + 10).unwrap();
            write!(ev, r#", {{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {gpu}, "dur": {us}, "args": {{"stream": 7, "correlation": {corr}, "External id": {ext}}}}}"#).unwrap();
            gpu += us + 10;
        }
        t += 100;
    }
    format!(r#"{{"schemaVersion": 1, "traceEvents": [{ev}]}}"#)
}

#[test]
fn operators_carry_kernels_per_call_and_their_names_on_each_side() {
    let tmp = tempfile::tempdir().unwrap();
    for (side, kernels) in [
        ("ref", vec![("gemm_main", 40), ("gemm_fixup", 5)]),
        ("cand", vec![("gemm_one", 30)]),
    ] {
        let dir = tmp.path().join("traces").join(side).join("mm");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rank0.json"), trace(48, &kernels)).unwrap();
    }
    let ds = tmp.path().join("ds");
    let o = ingest(&[&tmp.path().join("traces")], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = tmp.path().join("cmp");
    ok(&[
        "compare",
        ds.to_str().unwrap(),
        "--reference",
        "ref",
        "--candidate",
        "cand",
        "-o",
        out.to_str().unwrap(),
        "--force",
    ]);
    let s: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let mm = s
        .operators
        .top
        .iter()
        .find(|o| o.op == "aten::mm")
        .expect("aten::mm compared");
    assert_eq!((mm.reference_calls, mm.candidate_calls), (48, 48));
    assert_eq!(mm.reference_kernels_per_call, Some(96.0 / 48.0));
    assert_eq!(mm.candidate_kernels_per_call, Some(1.0));
    assert_eq!(
        mm.reference_top_kernels,
        ["gemm_main", "gemm_fixup"],
        "most GPU time first"
    );
    assert_eq!(mm.candidate_top_kernels, ["gemm_one"]);
    let file = std::fs::File::open(out.join("compare_operators.parquet")).unwrap();
    let ops = ParquetReader::new(file).finish().unwrap();
    let row = ops
        .column("op")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .position(|o| o == Some("aten::mm"))
        .unwrap();
    let f = |c: &str| ops.column(c).unwrap().f64().unwrap().get(row);
    assert_eq!(
        (
            f("reference_kernels_per_call"),
            f("candidate_kernels_per_call")
        ),
        (Some(2.0), Some(1.0))
    );
    let names = ops
        .column("reference_top_kernels")
        .unwrap()
        .str()
        .unwrap()
        .get(row)
        .unwrap();
    assert_eq!(names, ["gemm_main", "gemm_fixup"].join(KERNEL_SEPARATOR));
}
