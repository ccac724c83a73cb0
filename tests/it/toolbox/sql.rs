//! `aorta sql`: the README's polars example (GPU activities and their summed duration per
//! run and category) answered with the numbers of the same computation done directly in
//! polars; the result as CSV, JSON and Parquet; a broken query is one line and writes nothing.

use std::collections::BTreeMap;

use polars::prelude::*;
use serde_json::Value;

use super::{bundled, ok};
use crate::common::cli::{aorta, code, stderr};

const README_SQL: &str = "SELECT run, category, COUNT(*) AS n, SUM(end_ns - start_ns) AS gpu_ns \
     FROM gpu_activities GROUP BY run, category ORDER BY run, category";

/// The README's example, in polars, from the Parquet files with hive partitioning.
fn direct(root: &std::path::Path) -> BTreeMap<(String, String), (i64, i64)> {
    let acts = aorta_transform::dataset::scan(root, "gpu_activities")
        .unwrap()
        .group_by([col("run"), col("category")])
        .agg([
            len().alias("n"),
            (col("end_ns") - col("start_ns")).sum().alias("gpu_ns"),
        ])
        .collect()
        .unwrap();
    let n = acts.column("n").unwrap().cast(&DataType::Int64).unwrap();
    let (run, cat) = (
        acts.column("run").unwrap().str().unwrap(),
        acts.column("category").unwrap().str().unwrap(),
    );
    let (n, ns) = (
        n.i64().unwrap(),
        acts.column("gpu_ns").unwrap().i64().unwrap(),
    );
    (0..acts.height())
        .map(|i| {
            (
                (run.get(i).unwrap().into(), cat.get(i).unwrap().into()),
                (n.get(i).unwrap(), ns.get(i).unwrap()),
            )
        })
        .collect()
}

#[test]
fn the_readme_example_gives_the_numbers_polars_gives() {
    let root = bundled();
    let ds = root.to_str().unwrap();
    let expected = direct(root);
    assert!(expected.len() >= 20, "{}", expected.len());
    let doc: Value =
        serde_json::from_str(&ok(&["sql", README_SQL, ds, "--format", "json"])).unwrap();
    let got: BTreeMap<(String, String), (i64, i64)> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (
                (s("run"), s("category")),
                (r["n"].as_i64().unwrap(), r["gpu_ns"].as_i64().unwrap()),
            )
        })
        .collect();
    assert_eq!(got, expected);
    // CSV: one line per group, in the query's order.
    let csv = ok(&["sql", README_SQL, ds, "--format", "csv"]);
    assert_eq!(csv.lines().next(), Some("run,category,n,gpu_ns"));
    let keys: Vec<(String, String)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[0].to_string(), c[1].to_string())
        })
        .collect();
    assert_eq!(keys, expected.keys().cloned().collect::<Vec<_>>());
    // Parquet, read back.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r.parquet");
    ok(&["sql", README_SQL, ds, "-o", out.to_str().unwrap()]);
    let df = ParquetReader::new(std::fs::File::open(&out).unwrap())
        .finish()
        .unwrap();
    assert_eq!(df.height(), expected.len());
    let total: i64 = df
        .column("gpu_ns")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .flatten()
        .sum();
    assert_eq!(total, expected.values().map(|v| v.1).sum::<i64>());
    // Partition columns are columns; a filter on them works.
    let one = ok(&[
        "sql",
        "SELECT COUNT(*) AS n FROM gpu_activities WHERE run = 'cuda' AND rank = 0",
        ds,
        "--format",
        "csv",
    ]);
    let n: i64 = expected
        .iter()
        .filter(|(k, _)| k.0 == "cuda")
        .map(|(_, v)| v.0)
        .sum();
    assert_eq!(one, format!("n\n{n}\n"));
}

#[test]
fn a_broken_query_is_one_line_and_writes_nothing() {
    let root = bundled();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("r.csv");
    let args = [
        "sql",
        "SELECT nope FROM gpu_activities",
        root.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let o = aorta(&a);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("aorta: error: ") && err.contains("query failed"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
