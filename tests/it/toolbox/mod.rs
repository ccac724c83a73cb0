//! The everyday toolbox (`aorta info`, `kernels`, `memory`, `export perfetto`, `sql`, `dataset rm|relabel`, and the kernels
//! per call of `aorta compare`'s operators), driven from the outside. Every expected number is
//! computed here from the dataset's rows read with polars (or a hand-made trace whose numbers
//! are known by construction), never taken from the command's own output.

mod compare_kernels;
mod dataset_edit;
mod driver_launches;
mod idle;
mod idle_corpus;
mod info;
mod kernels;
mod memory;
mod perfetto;
mod sql;
mod sql_pushdown;
mod subcategories;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use polars::prelude::*;

use crate::common::cli::{aorta, code, stderr};

/// The bundled traces (workloads/traces and workloads/samples) ingested once, in-process.
pub(super) fn bundled() -> &'static Path {
    static DS: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &DS.get_or_init(|| fresh_copy(&["workloads/traces", "workloads/samples"]))
        .1
}

/// The bundled traces ingested into a fresh dataset of its own (for the tests that change it).
pub(super) fn fresh_copy(paths: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let paths: Vec<PathBuf> = paths.iter().map(|p| repo.join(p)).collect();
    let ds = dir.path().join("ds");
    let opts = aorta_ingest::Options {
        out: ds.clone(),
        ..Default::default()
    };
    aorta_ingest::ingest(&paths, &opts, &Default::default()).unwrap();
    (dir, ds)
}

/// `aorta ARGS`, which must succeed: its stdout.
pub(super) fn ok(args: &[&str]) -> String {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let o = aorta(&a);
    assert_eq!(code(&o), 0, "aorta {args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// A whole table (every run) read with polars.
pub(super) fn whole(root: &Path, table: &str) -> DataFrame {
    aorta_transform::dataset::read(root, table).unwrap()
}

/// numpy's default percentile (linear between the two nearest ranks), written out here.
pub(super) fn numpy_quantile(v: &[i64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    let h = (v.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] as f64 + (h - lo as f64) * (v[hi] - v[lo]) as f64
}
