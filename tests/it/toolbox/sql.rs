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

/// `aorta sql … --format csv` as lines without the header.
fn csv_rows(root: &std::path::Path, sql: &str) -> Vec<String> {
    let out = ok(&["sql", sql, root.to_str().unwrap(), "--format", "csv"]);
    out.lines().skip(1).map(str::to_string).collect()
}

#[test]
fn partition_filters_and_joins_give_what_polars_gives() {
    let root = bundled();
    let acts = super::whole(root, "gpu_activities");
    let (run, rank) = (
        acts.column("run").unwrap().str().unwrap(),
        acts.column("rank").unwrap().i64().unwrap(),
    );
    let first = run.get(0).unwrap().to_string();
    let n = (0..acts.height())
        .filter(|&i| run.get(i) == Some(first.as_str()) && rank.get(i) == Some(0))
        .count();
    // `run = '…' AND rank = 0` reaches the scan (partitions pruned); `rank = '0'` (a text)
    // and `rank + 0 = 0` do not: SQLite filters every row. All three count the same rows.
    for filter in ["rank = 0", "rank = '0'", "rank + 0 = 0"] {
        let q = format!("SELECT COUNT(*) FROM gpu_activities WHERE run = '{first}' AND {filter}");
        assert_eq!(csv_rows(root, &q), [n.to_string()], "{filter}");
    }
    // A join across two tables: each run's GPU activities per rank of the `runs` table
    // (which has a row per input file: hence DISTINCT).
    let runs = super::whole(root, "runs");
    let q = "SELECT r.run, r.rank, COUNT(a.start_ns) FROM (SELECT DISTINCT run, rank FROM runs) r \
             LEFT JOIN gpu_activities a ON a.run = r.run AND a.rank = r.rank \
             GROUP BY r.run, r.rank ORDER BY r.run, r.rank";
    let mut expected: Vec<String> = (0..runs.height())
        .map(|i| {
            let r = runs.column("run").unwrap().str().unwrap().get(i).unwrap();
            let k = runs.column("rank").unwrap().i64().unwrap().get(i).unwrap();
            let n = (0..acts.height())
                .filter(|&j| run.get(j) == Some(r) && rank.get(j) == Some(k))
                .count();
            format!("{r},{k},{n}")
        })
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(csv_rows(root, q), expected);
}

#[test]
fn statements_that_would_write_are_refused_and_write_nothing() {
    let root = bundled();
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("x.db");
    let t = target.to_str().unwrap();
    for sql in [
        format!("ATTACH DATABASE '{t}' AS x"),
        format!("VACUUM INTO '{t}'"),
        "CREATE TABLE t(a)".to_string(),
        "SELECT 1; SELECT 2".to_string(),
    ] {
        let args = ["sql", sql.as_str(), root.to_str().unwrap()];
        let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        let o = aorta(&a);
        assert_eq!(code(&o), 2, "{sql}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{sql}: {err}");
        assert!(err.contains("query"), "{sql}: {err}");
        assert!(!target.exists(), "{sql} wrote {t}");
    }
}
