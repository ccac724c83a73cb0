//! `aorta perf` (issue 18), end to end: the workloads' own CUDA-event GEMM rates (`truth`),
//! GEMM and attention FLOPs of the corpus's model traces recomputed here from the raw JSON
//! (`models`), and the command's notes, overrides and tables (`cli`).
//! Issue 31's trust rules on the H200 traces made for them (`trust`).
//!
//! A module of the `it` test binary (tests/it/main.rs).

mod cli;
mod models;
mod trust;
mod truth;

use std::collections::HashMap;
use std::path::Path;

use super::common::cli::{aorta, code, stderr};
use super::common::table;

/// `aorta perf DATASET ARGS…`, which must succeed; its stdout.
pub(crate) fn perf(ds: &Path, extra: &[&str]) -> String {
    let mut args: Vec<&std::ffi::OsStr> = vec!["perf".as_ref(), ds.as_os_str()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let o = aorta(&args);
    assert_eq!(code(&o), 0, "aorta perf {extra:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// Per rank of `run`: (Σ flops, Σ gpu_ns) of the `op_perf` rows `keep` selects.
pub(crate) fn sums(
    ds: &Path,
    run: &str,
    keep: impl Fn(&str, &str) -> bool,
) -> HashMap<i64, (f64, i64)> {
    let df = table(ds, "op_perf", run);
    let s = |c: &str| df.column(c).unwrap().str().unwrap().clone();
    let i = |c: &str| df.column(c).unwrap().i64().unwrap().clone();
    let (op, model, rank, flops, ns) = (s("op"), s("model"), i("rank"), i("flops"), i("gpu_ns"));
    let mut out: HashMap<i64, (f64, i64)> = HashMap::new();
    for k in 0..df.height() {
        let (Some(o), Some(f)) = (op.get(k), flops.get(k)) else {
            continue;
        };
        if keep(o, model.get(k).unwrap_or("")) {
            let e = out.entry(rank.get(k).unwrap()).or_default();
            e.0 += f as f64;
            e.1 += ns.get(k).unwrap();
        }
    }
    out
}
