//! `aorta overlap` from the outside: the tables it writes, the Python tool's logs, the
//! formats, and one-line errors.

use std::path::Path;

use crate::common::cli::{aorta, code, ingest_ok, stderr};
use crate::common::*;
use serde_json::Value;

fn overlap(args: &[&str]) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["overlap".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    aorta(&a)
}

fn json(o: &std::process::Output) -> Value {
    assert_eq!(code(o), 0, "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn python_aorta_logs_give_the_python_reports_overlap_ratio() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = root.join("aorta_py/h200_fsdp2_profile_overlap_2gpu");
    ingest_ok(&[run.as_path()], dir.path(), &["--label", "py", "-q"]);
    let doc = json(&overlap(&[
        dir.path().to_str().unwrap(),
        "--by",
        "rank",
        "--json",
    ]));
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    let jsonl: Vec<&Value> = rows.iter().filter(|r| r["source"] == "jsonl").collect();
    assert_eq!(jsonl.len(), 2, "both ranks' JSONL");
    let sum = |k: &str| jsonl.iter().map(|r| r[k].as_i64().unwrap()).sum::<i64>() as f64;
    let steps: i64 = jsonl
        .iter()
        .map(|r| r["step_count"].as_i64().unwrap())
        .sum();
    // analysis/overlap_report.py on the same logs (python_overlap_report_summary.json):
    // overlap_ratio = mean compute_comm / mean compute over the 24 iterations.
    let want: Value = serde_json::from_slice(
        &std::fs::read(run.join("python_overlap_report_summary.json")).unwrap(),
    )
    .unwrap();
    let py = &want["datasets"]["h200"];
    assert_eq!(steps, py["count"].as_i64().unwrap());
    let ratio = sum("compute_comm_overlap_ns") / sum("compute_ns");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs();
    assert!(
        close(ratio, py["overlap_ratio"].as_f64().unwrap()),
        "{ratio}"
    );
    let mean_compute_ms = sum("compute_ns") / steps as f64 / 1e6;
    assert!(close(
        mean_compute_ms,
        py["mean_compute_ms"].as_f64().unwrap()
    ));
    // The traces of the same run sit beside them as `trace` rows.
    assert_eq!(rows.iter().filter(|r| r["source"] == "trace").count(), 2);
}

/// Every part file of `table` under `dir`.
fn parts(dir: &Path, table: &str) -> Vec<std::path::PathBuf> {
    crate::common::cli::parquet_files(&dir.join(table))
}

#[test]
fn tables_are_written_per_run_and_rank_and_replaced_run_by_run() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fsdp = root.join("kineto/cuda/h200_fsdp2");
    let sdma = root.join(crate::common::cli::SDMA);
    for (p, label) in [(fsdp.as_path(), "fsdp2"), (sdma.as_path(), "sdma")] {
        ingest_ok(&[p], dir.path(), &["--label", label, "-q"]);
    }
    let o = overlap(&[dir.path().to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("run fsdp2") && text.contains("run sdma") && text.contains("total"));
    for t in aorta_ingest::schema::DERIVED_TABLES {
        let df = aorta_transform::dataset::read(dir.path(), t.name).unwrap();
        let want = aorta_transform::dataset::polars_schema(t);
        assert_eq!(df.schema().as_ref(), &want, "{}", t.name);
    }
    assert_eq!(
        parts(dir.path(), "overlap_steps").len(),
        3,
        "fsdp2 × 2 ranks + sdma"
    );
    let steps = table(dir.path(), "overlap_steps", "fsdp2");
    assert_eq!(steps.height(), 6);
    let streams = table(dir.path(), "overlap_streams", "fsdp2");
    assert!(streams.height() >= 6, "at least two streams per step");
    // --run rewrites that run only; nothing is left staged.
    let before = crate::common::cli::snapshot(&dir.path().join("overlap_steps/run=fsdp2"));
    let o = overlap(&[
        dir.path().to_str().unwrap(),
        "--run",
        "sdma",
        "--format",
        "csv",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let csv = String::from_utf8(o.stdout).unwrap();
    assert!(
        csv.starts_with("run,rank,step,source,window_start_ns,"),
        "{csv}"
    );
    assert!(csv.lines().skip(1).all(|l| l.starts_with("sdma,")));
    assert_eq!(
        before,
        crate::common::cli::snapshot(&dir.path().join("overlap_steps/run=fsdp2"))
    );
    assert!(crate::common::cli::entries_starting(dir.path(), ".overlap-tmp").is_empty());
}

#[test]
fn missing_dataset_and_unknown_run_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = overlap(&[missing.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "aorta: error: {}: not an aorta dataset",
            missing.display()
        )),
        "{err}"
    );
    let Some(root) = corpus() else { return };
    ingest_ok(
        &[root.join(crate::common::cli::SDMA).as_path()],
        dir.path(),
        &["--label", "sdma", "-q"],
    );
    let o = overlap(&[dir.path().to_str().unwrap(), "--run", "nosuch"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(
        err,
        format!(
            "aorta: error: {}: unknown run `nosuch` (runs: sdma)\n",
            dir.path().display()
        )
    );
}

/// `--run` repeated, `--rank` and `--step`: the rows printed are exactly the unfiltered
/// rows of those runs whose rank and step are among those asked for, picked out here by
/// hand; the rank totals are those of the ranks asked for; a rank no run has is an error.
#[test]
fn run_rank_and_step_filters_pick_rows_of_the_whole_output() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path();
    for (p, label) in [
        ("kineto/cuda/h200_fsdp2", "fsdp2"),
        ("kineto/cuda/a100_sampled_2rank", "a100"),
        (crate::common::cli::SDMA, "sdma"),
    ] {
        ingest_ok(&[root.join(p).as_path()], ds, &["--label", label, "-q"]);
    }
    let d = ds.to_str().unwrap();
    for by in ["step", "collective"] {
        let all = json(&overlap(&[d, "--by", by, "--json"]));
        let runs_of = |doc: &Value| -> Vec<String> {
            doc["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["run"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(runs_of(&all), ["a100", "fsdp2", "sdma"]);
        let of = |doc: &Value, run: &str, key: &str| -> Vec<Value> {
            doc["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["run"] == run)
                .map_or(vec![], |r| r[key].as_array().cloned().unwrap_or_default())
        };
        // A step of fsdp2's, the middle one of those it has.
        let mut steps: Vec<i64> = of(&all, "fsdp2", "rows")
            .iter()
            .filter_map(|r| r["step"].as_i64())
            .collect();
        steps.sort();
        steps.dedup();
        assert!(steps.len() >= 2, "{steps:?}");
        let step = steps[steps.len() / 2];
        let s = step.to_string();
        let got = json(&overlap(&[
            d, "--by", by, "--run", "fsdp2", "--run", "a100", "--rank", "0", "--rank", "1",
            "--step", &s, "--json",
        ]));
        assert_eq!(
            runs_of(&got),
            ["a100", "fsdp2"],
            "--run twice, dataset order"
        );
        let mut shown = 0;
        for run in ["a100", "fsdp2"] {
            let want: Vec<Value> = of(&all, run, "rows")
                .into_iter()
                .filter(|r| {
                    [0, 1].contains(&r["rank"].as_i64().unwrap())
                        && r["step"].as_i64() == Some(step)
                })
                .collect();
            shown += want.len();
            assert_eq!(of(&got, run, "rows"), want, "--by {by}, run {run}");
            let totals: Vec<Value> = of(&all, run, "totals")
                .into_iter()
                .filter(|r| [0, 1].contains(&r["rank"].as_i64().unwrap()))
                .collect();
            assert_eq!(of(&got, run, "totals"), totals, "--by {by}, run {run}");
        }
        assert!(shown >= 2, "fsdp2 has both ranks in step {step}");
        // The comma form is the same filter.
        let comma = json(&overlap(&[
            d, "--by", by, "--run", "fsdp2", "--run", "a100", "--rank", "0,1", "--step", &s,
            "--json",
        ]));
        assert_eq!(comma["runs"], got["runs"]);
    }
    // --rank on --by rank: the rank rows of those ranks only.
    let all = json(&overlap(&[d, "--by", "rank", "--run", "fsdp2", "--json"]));
    let got = json(&overlap(&[
        d, "--by", "rank", "--run", "fsdp2", "--rank", "1", "--json",
    ]));
    let want: Vec<&Value> = all["runs"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rank"] == 1)
        .collect();
    assert!(!want.is_empty());
    let got: Vec<&Value> = got["runs"][0]["rows"].as_array().unwrap().iter().collect();
    assert_eq!(got, want);
    // A rank no selected run has, and filters --by size cannot apply: one line each.
    for (args, says) in [
        (
            vec!["--run", "fsdp2", "--rank", "9"],
            "no rank 9 (ranks: 0, 1)",
        ),
        (
            vec!["--by", "size", "--rank", "0"],
            "--by size sums every rank",
        ),
        (
            vec!["--by", "rank", "--step", "1"],
            "--step picks step rows",
        ),
    ] {
        let o = overlap(&[&[d][..], &args[..]].concat());
        assert_eq!(code(&o), 2, "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Message sizes in the terminal read in binary units (`--by size`, and under
/// `--by collective`), as the pages show them; JSON keeps the byte count. The expected text
/// is worked out here from the count: the largest unit of 1024 that keeps it at least 1,
/// two decimals at most.
#[test]
fn message_sizes_print_in_binary_units() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fsdp = root.join("kineto/cuda/h200_fsdp2");
    ingest_ok(&[fsdp.as_path()], dir.path(), &["--label", "fsdp2", "-q"]);
    let d = dir.path().to_str().unwrap();
    let doc = json(&overlap(&[d, "--by", "size", "--json"]));
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    let human = |b: i64| {
        let (mut x, mut unit) = (b as f64, 0);
        while x >= 1023.995 && unit < 4 {
            x /= 1024.0;
            unit += 1;
        }
        let s = format!("{x:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s} {}", ["B", "KiB", "MiB", "GiB", "TiB"][unit])
    };
    let big: Vec<i64> = rows
        .iter()
        .filter_map(|r| r["bytes"].as_i64())
        .filter(|b| *b >= 1 << 20)
        .collect();
    assert!(!big.is_empty(), "FSDP2 moves MiB-sized messages");
    for by in ["size", "collective"] {
        let o = overlap(&[d, "--by", by]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        for r in rows {
            let Some(b) = r["bytes"].as_i64() else {
                continue;
            };
            let kind = r["comm_op"].as_str().unwrap();
            assert!(
                text.lines()
                    .any(|l| l.contains(kind) && l.contains(&format!(" {} ", human(b)))),
                "--by {by}: no `{kind} {}` line in\n{text}",
                human(b)
            );
            if b >= 1024 {
                assert!(
                    !text.contains(&format!(" {b} ")),
                    "--by {by}: raw {b} in\n{text}"
                );
            }
        }
    }
}
