//! `aorta run` from the outside: existing workload output to a dataset, the overlap and a
//! report; launching a workload where there is no GPU; an unknown workload.

use std::path::Path;

use crate::common::cli::{aorta, code, overlap_json, stderr};
use serde_json::Value;

fn run(args: &[&str]) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["run".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    aorta(&a)
}

#[test]
fn existing_output_becomes_dataset_overlap_and_report() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/overlap-bench/allreduce_overlap");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = run(&[traces.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("plotly-graph-div"));
    // The printed per-rank overlap is the dataset's, as `aorta overlap --json` reads it back.
    let data = out.join("data");
    let doc = overlap_json(&data, "rank");
    assert_eq!(doc["runs"][0]["run"], "allreduce_overlap");
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    let printed = String::from_utf8_lossy(&o.stdout);
    let traced: Vec<&Value> = rows.iter().filter(|r| r["source"] == "trace").collect();
    assert_eq!(traced.len(), 2, "two ranks");
    for r in traced {
        let ratio = r["tp_overlap_ratio"].as_f64().unwrap();
        assert!(ratio > 0.5, "GEMM and NCCL streams overlap: {ratio}");
        assert!(
            printed.contains(&format!("{ratio:.3}")),
            "{ratio:.3} in\n{printed}"
        );
    }
}

/// `aorta run DIR` labels exactly as `aorta ingest DIR` does: the five experiments of the
/// overlap bench stay five runs (it used to merge them into one run `overlap-bench`).
#[test]
fn a_folder_of_experiments_is_labelled_as_ingest_labels_it() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/traces/overlap-bench");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = run(&[traces.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ds = dir.path().join("ds");
    crate::common::cli::ingest_ok(&[&traces], &ds, &["-q"]);
    let labels = |ds: &Path| -> Vec<String> {
        let doc = overlap_json(ds, "rank");
        doc["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"].as_str().unwrap().to_string())
            .collect()
    };
    let mut want: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    want.sort();
    assert_eq!(labels(&out.join("data")), want);
    assert_eq!(labels(&ds), want);
    assert!(
        stderr(&o).contains(&format!("(runs: {})", want.join(", "))),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_workload_without_a_gpu_fails_in_one_line() {
    if Path::new("/dev/nvidia0").exists() {
        eprintln!("skipping: a GPU is present (this test checks the no-GPU message)");
        return;
    }
    for (workload, exe) in [
        ("overlap-bench", "aorta-overlap-bench"),
        ("copy-overlap", "aorta-copy-overlap"),
    ] {
        let bin = Path::new(crate::common::cli::AORTA).with_file_name(exe);
        if !bin.is_file() {
            // `cargo test --workspace` (README's command) builds it next to aorta.
            assert!(
                std::env::var("CI").is_err(),
                "{} missing under CI",
                bin.display()
            );
            eprintln!("skipping: {} not built", bin.display());
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let args = [
            "--ranks",
            "2",
            "-o",
            out.to_str().unwrap(),
            "--",
            "--iters",
            "1",
        ];
        let o = run(&[&[workload][..], &args[..]].concat());
        assert_eq!(code(&o), 2, "{workload}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{exe} rank")) && err.contains("CUDA"),
            "{err}"
        );
        // Nothing left behind: no report, no empty `out/traces/`, no `out/`.
        assert!(
            !out.exists(),
            "{:?}",
            crate::common::cli::snapshot(&out).keys()
        );
    }
}

#[test]
fn an_unknown_workload_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["no-such-workload", "-o", dir.path().to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("`no-such-workload`") && err.contains("overlap-bench") && err.contains("fsdp"),
        "{err}"
    );
}

/// The torch workload with a Python that has no torch: one line that says so and how to point
/// aorta at the right Python; nothing launched.
#[test]
fn the_fsdp_workload_without_torch_fails_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A Python that certainly lacks torch: `-I` ignores site-packages and PYTHONPATH.
    let shim = dir.path().join("python-no-torch");
    std::fs::write(&shim, "#!/bin/sh\nexec python3 -I -S \"$@\"\n").unwrap();
    let mut perms = std::fs::metadata(&shim).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&shim, perms).unwrap();
    let o = std::process::Command::new(crate::common::cli::AORTA)
        .args(["run", "fsdp", "-o", out.to_str().unwrap()])
        .env("AORTA_PYTHON", &shim)
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("PyTorch not found") && err.contains("AORTA_PYTHON"),
        "{err}"
    );
    // Nothing left behind: no script, no empty `out/traces/`, no `out/` at all.
    assert!(
        !out.exists(),
        "{:?}",
        std::fs::read_dir(&out).map(|d| d.count())
    );
}

/// A launch that fails in an output directory the user already had leaves that directory
/// (and what was in it) as it was, and no `traces/` inside.
#[test]
fn a_failed_launch_leaves_an_existing_output_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = std::process::Command::new(crate::common::cli::AORTA)
        .args(["run", "fsdp", "-o", out.to_str().unwrap()])
        .env("AORTA_PYTHON", dir.path().join("no-such-python"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let left: Vec<_> = crate::common::cli::snapshot(&out).into_keys().collect();
    assert_eq!(left, [Path::new("notes.txt")]);
    assert!(!out.join("traces").exists());
}
