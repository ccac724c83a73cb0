//! The Python side: both notebooks run headless (nbclient) through the repository's `.venv`
//! on datasets the CLI builds from the corpus, and the numbers they recompute from
//! `gpu_activities` must equal `aorta overlap --json` and `aorta compare`'s summary.json; the
//! dataset must read the same, with no options, in pandas (pyarrow), DuckDB and polars.
//!
//! `.ci/run` creates `.venv` from notebooks/requirements.txt. Without it the tests skip with
//! a notice, except under `CI=true`, where a missing venv is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::cli::{aorta, code, ingest_ok, stderr};
use crate::common::{corpus, venv_python, PYSPARK_SUBMIT_ARGS};
use polars::prelude::{AnyValue, ParquetReader, SerReader};
use serde_json::Value;

const FSDP2: &str = "kineto/cuda/h200_fsdp2";
const H100_MODELS: &str = "kineto/cuda/h100_models";
const MI300X_MODELS: &str = "kineto/rocm/mi300x_models";
const MI300X_RESNET: &str = "kineto/rocm/mi300x_resnet_ckpt";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `.venv/bin/python` when it can import what the notebooks need.
fn python() -> Option<PathBuf> {
    venv_python("nbclient, polars, pandas, duckdb, matplotlib, pyspark")
}

/// Runs a script of notebooks/ with the venv's python; returns its stdout, failing the test
/// with its stderr when it exits non-zero.
fn run_py(py: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(py);
    cmd.args(args)
        .current_dir(repo())
        .env("PYSPARK_SUBMIT_ARGS", PYSPARK_SUBMIT_ARGS);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("python runs");
    assert!(
        o.status.success(),
        "python {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Executes a notebook headless; returns the JSON of its `AORTA_CHECK {json}` line.
fn execute(py: &Path, notebook: &str, env: &[(&str, &Path)]) -> Value {
    let nb = format!("notebooks/{notebook}");
    let out = run_py(py, &["notebooks/execute.py", &nb], env);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("AORTA_CHECK "))
        .unwrap_or_else(|| panic!("{notebook} printed no AORTA_CHECK line:\n{out}"));
    serde_json::from_str(line).unwrap()
}

/// `aorta <args>` must succeed; returns its stdout as JSON when `json`.
fn cli(args: &[&str]) -> String {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let o = aorta(&a);
    assert_eq!(code(&o), 0, "aorta {args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Two JSON numbers (or two nulls) agree to 1e-9 relative.
fn assert_close(got: &Value, want: &Value, what: &str) {
    match (got.as_f64(), want.as_f64()) {
        (Some(g), Some(w)) => assert!(close(g, w), "{what}: notebook {g}, aorta {w}"),
        _ => assert!(
            got.is_null() && want.is_null(),
            "{what}: notebook {got}, aorta {want}"
        ),
    }
}

/// The `trace` rows of `aorta overlap --json` output, across runs.
fn trace_rows(doc: &Value) -> Vec<&Value> {
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["rows"].as_array().unwrap())
        .filter(|r| r["source"] == "trace")
        .collect()
}

#[test]
fn overlap_notebook_recomputes_aorta_overlap_per_step() {
    let (Some(root), Some(py)) = (corpus(), python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(&[&root.join(FSDP2)], &ds, &["--label", "fsdp2", "-q"]);
    let doc: Value =
        serde_json::from_str(&cli(&["overlap", ds.to_str().unwrap(), "--json"])).unwrap();
    let want = trace_rows(&doc);
    assert_eq!(want.len(), 6, "2 ranks × 3 steps");

    let check = execute(
        &py,
        "overlap_analysis.ipynb",
        &[("AORTA_DATASET", &ds), ("AORTA_RUN", Path::new("fsdp2"))],
    );
    assert_eq!(check["run"], "fsdp2");
    let got = check["steps"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "one check row per step row");
    for w in want {
        let g = got
            .iter()
            .find(|g| g["rank"] == w["rank"] && g["step"] == w["step"])
            .unwrap_or_else(|| panic!("no notebook row for rank {} step {}", w["rank"], w["step"]));
        for k in [
            "window_ns",
            "comm_ns",
            "compute_ns",
            "compute_comm_overlap_ns",
            "exposed_comm_ns",
        ] {
            assert_eq!(g[k], w[k], "rank {} step {}: {k}", w["rank"], w["step"]);
        }
        assert_close(
            &g["comm_hidden_pct"],
            &w["comm_hidden_pct"],
            "comm_hidden_pct",
        );
    }
    // Real overlap to explain: every step hides most of its communication, not all.
    assert!(got
        .iter()
        .all(|g| g["exposed_comm_ns"].as_i64().unwrap() > 0
            && g["compute_comm_overlap_ns"].as_i64().unwrap() > 0));
}

/// Ingests `pairs` (corpus paths), runs `aorta compare --reference cuda --candidate rocm
/// --source trace --force -o` (the notebook recomputes from the traces, also where a side has a
/// log),
/// executes the compare notebook on both; returns (tempdir, compare dir, summary, check).
fn compare_run(
    py: &Path,
    root: &Path,
    pairs: &[&str],
) -> (tempfile::TempDir, PathBuf, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (ds, out) = (dir.path().join("ds"), dir.path().join("cmp"));
    let paths: Vec<PathBuf> = pairs.iter().map(|p| root.join(p)).collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    ingest_ok(&refs, &ds, &["-q"]);
    let (d, o) = (ds.to_str().unwrap(), out.to_str().unwrap());
    cli(&[
        "compare",
        d,
        "--reference",
        "cuda",
        "--candidate",
        "rocm",
        "--source",
        "trace",
        // The collectives check pairs two unrelated jobs on purpose (their collectives are
        // the point); --force keeps the ratios the notebook recomputes.
        "--force",
        "-o",
        o,
    ]);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let env = [
        ("AORTA_DATASET", ds.as_path()),
        ("AORTA_COMPARE", out.as_path()),
    ];
    let check = execute(py, "compare_vendors.ipynb", &env);
    assert_eq!(check["reference"], "cuda");
    assert_eq!(check["candidate"], "rocm");
    (dir, out, summary, check)
}

/// The notebook's steps and categories levels (per pair, and each key's geometric mean over
/// the pairs), per-side means and operator counts against summary.json.
fn assert_levels_match(check: &Value, summary: &Value) {
    for sel in ["cuda", "rocm"] {
        let want = &summary["datasets"][sel];
        assert_eq!(check["count"][sel], want["count"], "{sel} windows");
        for k in ["mean_step_ms", "mean_gpu_window_ms", "mean_compute_ms"] {
            assert_close(&check[k][sel], &want[k], &format!("{sel} {k}"));
        }
    }
    let (mut compared, mut overall) = (0, 0);
    for level in ["steps", "categories"] {
        for row in summary["levels"][level].as_array().unwrap() {
            let key = row["key"].as_str().unwrap();
            let Some(w) = row["workload"].as_str() else {
                // The overall row of several pairs: the geometric mean of the pairs' ratios.
                if let Some(got) = check["overall"][level].get(key) {
                    assert_close(got, &row["ratio"], &format!("{level} {key} overall"));
                    overall += 1;
                }
                continue;
            };
            let Some(got) = check[level].get(key).and_then(|k| k.get(w)) else {
                continue;
            };
            let what = format!("{level} {key} {w}");
            assert_close(&got["ratio"], &row["ratio"], &format!("{what} ratio"));
            for side in ["reference", "candidate"] {
                for stat in ["median", "p10", "p90", "n"] {
                    let what = format!("{what} {side} {stat}");
                    assert_close(&got[side][stat], &row[side][stat], &what);
                }
            }
            compared += 1;
        }
    }
    let pairs = summary["pairs"]["pairs"].as_array().unwrap().len();
    assert_eq!(
        compared,
        (5 + 5) * pairs,
        "5 step keys and 5 categories per pair"
    );
    let keys = if pairs > 1 { 5 + 5 } else { 0 };
    assert_eq!(overall, keys, "an overall row per key with several pairs");
    for status in ["matched", "reference_only", "candidate_only"] {
        let got = check["operators"].get(status).cloned().unwrap_or(0.into());
        assert_eq!(got, summary["operators"][status], "operators {status}");
    }
}

/// The notebook's collectives against `compare_collectives.parquet`, row for row.
fn assert_collectives_match(check: &Value, out: &Path) -> usize {
    let file = std::fs::File::open(out.join("compare_collectives.parquet")).unwrap();
    let df = ParquetReader::new(file).finish().unwrap();
    let got = check["collectives"].as_array().unwrap();
    assert_eq!(
        got.len(),
        df.height(),
        "one row per (side, pair, kind, bytes, dtype, group size)"
    );
    for i in 0..df.height() {
        let cell = |c: &str| -> Value {
            let v = df.column(c).unwrap().get(i).unwrap();
            match v {
                AnyValue::Null => Value::Null,
                AnyValue::String(s) => s.into(),
                AnyValue::Int64(n) => n.into(),
                AnyValue::Float64(f) => f.into(),
                other => panic!("{c}: unexpected {other:?}"),
            }
        };
        let key = [
            "side",
            "workload",
            "comm_op",
            "bytes",
            "dtype",
            "group_size",
        ];
        let row = got
            .iter()
            .find(|g| key.iter().all(|k| g[*k] == cell(k)))
            .unwrap_or_else(|| panic!("no notebook row for {:?}", key.map(cell)));
        assert_eq!(row["count"], cell("count"), "{:?}", key.map(cell));
        for k in ["mean_ms", "algbw_gbps", "busbw_gbps"] {
            assert_close(&row[k], &cell(k), &format!("{:?} {k}", key.map(cell)));
        }
    }
    df.height()
}

#[test]
fn compare_notebook_recomputes_the_summary_levels() {
    let (Some(root), Some(py)) = (corpus(), python()) else {
        return;
    };
    // The same two models on an H100 and an MI300X: no communication.
    let (_dir, out, summary, check) = compare_run(&py, &root, &[H100_MODELS, MI300X_MODELS]);
    assert_levels_match(&check, &summary);
    // Categories differ between the vendors: the check is not comparing zeros.
    let gemm = &check["overall"]["categories"]["gemm"];
    assert!(gemm.as_f64().is_some_and(|r| r > 0.0 && r != 1.0), "{gemm}");
    // 50 (operator, shapes) rows matched within their pair: qwen's operators that ran only
    // before its ProfilerStep (outside every step) are not compared, and each pair matches its
    // own operators (one that both models run is a row of each pair).
    assert_eq!(check["operators"]["matched"], 50);
    assert_eq!(assert_collectives_match(&check, &out), 0);
}

#[test]
fn compare_notebook_recomputes_collectives_and_exposed_comm() {
    let (Some(root), Some(py)) = (corpus(), python()) else {
        return;
    };
    // Two traces with collectives: FSDP2 on 2×H200 (NCCL all_gather, reduce_scatter) and a
    // ResNet rank on MI300X (RCCL all_reduce, broadcast, and kernels without arguments).
    let (_dir, out, summary, check) = compare_run(&py, &root, &[FSDP2, MI300X_RESNET]);
    assert_levels_match(&check, &summary);
    // One run a side: one pair.
    let exposed = check["steps"]["exposed_comm_ms"].as_object().unwrap();
    assert_eq!(exposed.len(), 1);
    let exposed = exposed.values().next().unwrap();
    assert!(exposed["reference"]["median"].as_f64().unwrap() > 0.0);
    assert!(exposed["candidate"]["median"].as_f64().unwrap() > 0.0);
    // 6 (kind, bytes, dtype, group) keys: a seventh ran only outside every step.
    assert_eq!(assert_collectives_match(&check, &out), 6);
}

/// (run, rank, activity count, first start, last end) of one per-rank row.
type Window = (String, i64, i64, i64, i64);

fn window(r: &Value) -> Window {
    let i = |k: &str| r[k].as_i64().unwrap();
    let run = r["run"].as_str().unwrap().to_string();
    let (n, start, end) = (
        i("activity_count"),
        i("window_start_ns"),
        i("window_end_ns"),
    );
    (run, i("rank"), n, start, end)
}

#[test]
fn dataset_reads_with_no_options_in_pandas_duckdb_and_polars() {
    let (Some(root), Some(py)) = (corpus(), python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // Runs `h200_fsdp2` (2 ranks), and one run per model of `h100_models` and `mi300x_models`.
    let paths = [FSDP2, H100_MODELS, MI300X_MODELS].map(|p| root.join(p));
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    ingest_ok(&refs, &ds, &["-q"]);
    let d = ds.to_str().unwrap();
    let doc: Value = serde_json::from_str(&cli(&["overlap", d, "--by", "rank", "--json"])).unwrap();
    let mut want: Vec<Window> = trace_rows(&doc).into_iter().map(window).collect();
    want.sort();
    assert_eq!(want.len(), 6, "{want:?}");

    let got: Value =
        serde_json::from_str(&run_py(&py, &["notebooks/check_readers.py", d], &[])).unwrap();
    for lib in ["pandas", "duckdb", "polars"] {
        let rows: Vec<Window> = got[lib].as_array().unwrap().iter().map(window).collect();
        assert_eq!(rows, want, "{lib} vs aorta overlap --by rank --json");
    }
}

/// Run labels are data, not paths (RELIABILITY.md): each hostile label, percent-encoded into
/// its partition directory, reads back as written through pyarrow, DuckDB, polars and Spark
/// (its JVM: `java` on the PATH, which .ci/run installs), each decoding the directories its
/// own way.
#[test]
fn hostile_labels_read_back_in_pyarrow_duckdb_polars_and_spark() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let labels = [
        "../../x",
        "a/b=c",
        "50% done",
        "..",
        "tab\tend",
        "日本語 ü",
        "q?#*:[]{}^'\"\\|<>",
        "007",
    ];
    // One trace per label (a file ingested under a new label moves to it).
    for (i, label) in labels.iter().enumerate() {
        let trace = dir.path().join(format!("t{i}.json"));
        let text = format!(
            r#"{{"traceEvents":[{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{i},"dur":2,"args":{{"stream":7}}}}]}}"#
        );
        std::fs::write(&trace, text).unwrap();
        ingest_ok(&[&trace], &ds, &["--label", label, "-q"]);
    }
    let got: Value = serde_json::from_str(&run_py(
        &py,
        &["notebooks/check_labels.py", ds.to_str().unwrap()],
        &[],
    ))
    .unwrap();
    let mut want: Vec<&str> = labels.to_vec();
    want.sort();
    for reader in ["pyarrow", "duckdb", "polars", "spark"] {
        let runs: Vec<&str> = got[reader]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(runs, want, "{reader}");
    }
}

/// The overlap notebook analyses the run it names or stops: asked for a run that has no
/// `overlap_*` rows while another run has them (README's commands before `aorta overlap`
/// joined them), it fails with the run's name and the command that writes the rows, instead
/// of silently plotting the other run.
#[test]
fn overlap_notebook_fails_loudly_for_a_run_without_overlap_rows() {
    let (Some(root), Some(py)) = (corpus(), python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let (a, b) = (
        root.join("kineto/cuda/h200_sdma"),
        root.join("kineto/rocm/mi250_minitoy"),
    );
    ingest_ok(&[&a, &b], &ds, &["-q"]);
    cli(&["overlap", ds.to_str().unwrap(), "--run", "h200_sdma"]);
    let o = Command::new(&py)
        .args(["notebooks/execute.py", "notebooks/overlap_analysis.ipynb"])
        .current_dir(repo())
        .env("AORTA_DATASET", &ds)
        .env("AORTA_RUN", "mi250_minitoy")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "the notebook ran on another run:\n{err}"
    );
    assert!(
        err.contains("run 'mi250_minitoy' has no rows")
            && err.contains("runs with rows: h200_sdma")
            && err.contains(&format!(
                "aorta overlap {} --run mi250_minitoy",
                ds.display()
            )),
        "{err}"
    );
}
