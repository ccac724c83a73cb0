//! scale/queries.duckdb.sql on DuckDB and scale/spark_queries.py on Spark (local mode), from
//! the Parquet alone, equal aorta's numbers to the nanosecond on a four-rank job with a late
//! rank: per-rank comm and compute time (`aorta overlap --by rank`, the trace rows), per
//! instance arrivals, skew, last rank and caused delay (`aorta collectives --by instance`),
//! and per rank the clock offset, times last, caused delay and straggler rank (`--by rank`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{repo, venv_python};
use crate::common::cli::{aorta, code, ingest_ok, stderr};
use crate::common::PYSPARK_SUBMIT_ARGS;

/// `aorta CMD DS --by BY --json`: the rows of every run.
fn aorta_rows(cmd: &str, ds: &Path, by: &str) -> Vec<Value> {
    let o = aorta(&[
        cmd.as_ref(),
        ds.as_os_str(),
        "--by".as_ref(),
        by.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{cmd}: {}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["rows"].as_array().unwrap().clone())
        .collect()
}

/// `rows` keyed by the `key` fields, each with the `fields` kept.
fn keyed(rows: &[Value], key: &[&str], fields: &[&str]) -> BTreeMap<String, Vec<Value>> {
    rows.iter()
        .map(|r| {
            let k: Vec<String> = key.iter().map(|f| r[*f].to_string()).collect();
            (k.join("/"), fields.iter().map(|f| r[*f].clone()).collect())
        })
        .collect()
}

/// The engine's views as aorta's numbers are keyed.
fn check(engine: &str, views: &Value, ds: &Path) {
    let totals: Vec<Value> = aorta_rows("overlap", ds, "rank")
        .into_iter()
        .filter(|r| r["source"] == "trace")
        .collect();
    let (rk, tf) = (["run", "rank"], ["comm_ns", "compute_ns"]);
    assert_eq!(
        keyed(views["rank_totals"].as_array().unwrap(), &rk, &tf),
        keyed(&totals, &rk, &tf),
        "{engine}: rank totals"
    );
    let inst = aorta_rows("collectives", ds, "instance");
    let (ik, ifs) = (
        ["run", "process_group", "seq"],
        [
            "first_arrival_ns",
            "last_arrival_ns",
            "skew_ns",
            "last_rank",
            "caused_ns",
        ],
    );
    let want = keyed(&inst, &ik, &ifs);
    assert_eq!(want.len(), 40, "40 all-reduces");
    assert_eq!(
        keyed(views["instance_skew"].as_array().unwrap(), &ik, &ifs),
        want,
        "{engine}: instances"
    );
    let ranks = aorta_rows("collectives", ds, "rank");
    let sf = ["times_last", "caused_ns", "straggler_rank"];
    assert_eq!(
        keyed(views["stragglers"].as_array().unwrap(), &rk, &sf),
        keyed(&ranks, &rk, &sf),
        "{engine}: stragglers"
    );
    let of = ["clock_offset_ns"];
    assert_eq!(
        keyed(views["clock_offsets"].as_array().unwrap(), &rk, &of),
        keyed(&ranks, &rk, &of),
        "{engine}: clock offsets"
    );
    // Not a vacuous match: rank 2 is the straggler, the clocks differ.
    let first = &views["stragglers"].as_array().unwrap()[0];
    assert_eq!(
        (first["rank"].as_i64(), first["straggler_rank"].as_i64()),
        (Some(2), Some(1)),
        "{engine}"
    );
}

fn run_py(py: &Path, args: &[&str]) -> Value {
    let o = Command::new(py)
        .args(args)
        .current_dir(repo())
        .env("PYSPARK_SUBMIT_ARGS", PYSPARK_SUBMIT_ARGS)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "python {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap()
}

const DUCKDB: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute("SET VARIABLE dataset = $1", [sys.argv[1]])
con.execute(open("scale/queries.duckdb.sql").read())
out = {}
for view in ["rank_totals", "instance_skew", "clock_offsets", "stragglers"]:
    cur = con.execute(f"SELECT * FROM {view} ORDER BY ALL")
    cols = [d[0] for d in cur.description]
    out[view] = [dict(zip(cols, r)) for r in cur.fetchall()]
out["stragglers"].sort(key=lambda r: (r["run"], r["straggler_rank"]))
print(json.dumps(out))
"#;

#[test]
fn duckdb_and_spark_give_aortas_numbers_to_the_ns() {
    let Some(py) = venv_python("duckdb, pyspark") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let traces = repo().join("workloads/traces/four-gpu/overlap-bench_slow2");
    ingest_ok(&[&traces], &ds, &["-q"]);
    let ds_s = ds.to_str().unwrap();
    let duck = run_py(&py, &["-c", DUCKDB, ds_s]);
    check("duckdb", &duck, &ds);
    let spark = run_py(
        &py,
        &[
            "scale/spark_queries.py",
            ds_s,
            "--json",
            "--master",
            "local[1]",
        ],
    );
    check("spark", &spark, &ds);
}
