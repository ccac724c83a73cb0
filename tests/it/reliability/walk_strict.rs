//! What a directory walk passes over is counted, and with `--verbose` listed with its reason;
//! a file relabelled into another run is said to move; `--strict` turns data-quality findings
//! into exit status 1, by code and count.

use std::path::Path;

use super::{code, run, run_ok, s, stderr, write_trace};

/// Files a walk must pass over, each with the reason the summary gives.
fn plant(job: &Path) -> Vec<(std::path::PathBuf, &'static str)> {
    std::fs::create_dir_all(job.join(".git")).unwrap();
    std::fs::write(job.join(".git/config"), "x").unwrap();
    std::fs::write(job.join("notes.txt"), "x").unwrap();
    std::fs::write(job.join(".DS_Store"), "x").unwrap();
    std::fs::write(job.join("profile.nsys-rep"), "x").unwrap();
    std::fs::write(job.join("summary.json"), r#"{"runs": 1}"#).unwrap();
    let elsewhere = job.parent().unwrap().parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, job.join("linked")).unwrap();
    vec![
        (job.join(".git"), "hidden directory, not walked"),
        (job.join("notes.txt"), "not a trace file name"),
        (job.join(".DS_Store"), "hidden file"),
        (job.join("profile.nsys-rep"), "nsys export --type sqlite"),
        (
            job.join("summary.json"),
            "JSON without traceEvents, not a trace",
        ),
        (
            job.join("linked"),
            "symbolic link to a directory, not followed",
        ),
    ]
}

#[test]
fn a_walk_counts_what_it_passes_over_and_verbose_lists_each() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("traces/job");
    std::fs::create_dir_all(&job).unwrap();
    write_trace(&job.join("rank0.pt.trace.json"), 0, 10, "t");
    let planted = plant(&job);
    let ds = dir.path().join("ds");
    let o = run_ok(&["ingest", s(&dir.path().join("traces")), "-o", s(&ds)]);
    let err = stderr(&o);
    assert!(err.contains("ingested 1 of 1 files"), "{err}");
    assert!(
        err.contains(&format!(
            "skipped {} files (--verbose lists them):",
            planted.len()
        )),
        "{err}"
    );
    for (path, why) in &planted {
        assert!(
            err.lines()
                .any(|l| l.starts_with("  1 × ") && l.contains(why)),
            "{why}: {err}"
        );
        assert!(
            !err.contains(&path.display().to_string()),
            "listed without --verbose: {err}"
        );
    }
    let o = run_ok(&[
        "ingest",
        s(&dir.path().join("traces")),
        "-o",
        s(&ds),
        "--verbose",
    ]);
    let err = stderr(&o);
    for (path, why) in &planted {
        let line = format!("skipped {}: ", path.display());
        assert!(
            err.lines().any(|l| l.starts_with(&line) && l.contains(why)),
            "{line}{why}: {err}"
        );
    }
}

#[test]
fn relabelling_a_file_says_it_moved() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("rank0.pt.trace.json");
    write_trace(&t, 0, 10, "t");
    let ds = dir.path().join("ds");
    let o = run_ok(&["ingest", s(&t), "-o", s(&ds), "--label", "old"]);
    assert!(!stderr(&o).contains("moved"), "{}", stderr(&o));
    let o = run_ok(&["ingest", s(&t), "-o", s(&ds), "--label", "new"]);
    let want = format!("moved {} from run `old` to run `new`", t.display());
    assert!(stderr(&o).lines().any(|l| l == want), "{}", stderr(&o));
    let inputs = super::manifest_inputs(&ds);
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0]["label"], "new");
    assert!(!ds.join("runs/run=old").exists());
}

/// A trace with exactly two negative durations and one kernel whose `ts` is a string
/// (`missing_timestamp`), and nothing else to find (rank, steps and launches all given).
fn findings_trace(p: &Path) {
    let ev = |ts: &str, dur: i64, corr: i64| {
        format!(
            r#"{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{corr},"dur":1,"args":{{"correlation":{corr}}}}},
               {{"ph":"X","cat":"kernel","name":"nvjet_tst","pid":0,"tid":7,"ts":{ts},"dur":{dur},"args":{{"stream":7,"correlation":{corr}}}}}"#
        )
    };
    let text = format!(
        r#"{{"schemaVersion":1,"distributedInfo":{{"rank":0}},"traceEvents":[
            {{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000}},
            {}, {}, {}, {}]}}"#,
        ev("100", 10, 1),
        ev("200", -5, 2),
        ev("300", -7, 3),
        ev("\"abc\"", 10, 4)
    );
    std::fs::write(p, text).unwrap();
}

#[test]
fn strict_fails_on_the_findings_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("rank0.pt.trace.json");
    findings_trace(&t);
    let ds = dir.path().join("ds");
    let ing = |extra: &[&str]| {
        let mut args = vec!["ingest", s(&t), "-o", s(&ds), "--force"];
        args.extend(extra);
        run(&args, &[])
    };
    let o = ing(&[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let cases: [(&str, Option<&str>); 7] = [
        (
            "--strict",
            Some("--strict: 3 findings in total, at most 0 allowed"),
        ),
        (
            "--strict=all:2",
            Some("--strict: 3 findings in total, at most 2 allowed"),
        ),
        ("--strict=all:3", None),
        (
            "--strict=negative_duration:1",
            Some("--strict: 2 negative_duration findings, at most 1 allowed"),
        ),
        ("--strict=negative_duration:2", None),
        (
            "--strict=missing_timestamp",
            Some("--strict: 1 missing_timestamp findings, at most 0 allowed"),
        ),
        ("--strict=unknown_phase,same_stream_overlap", None),
    ];
    for (flag, fails) in cases {
        let o = ing(&[flag]);
        let err = stderr(&o);
        match fails {
            Some(line) => {
                assert_eq!(code(&o), 1, "{flag}: {err}");
                assert!(
                    err.lines()
                        .any(|l| l.starts_with(&format!("aorta: {line}"))),
                    "{flag}: {err}"
                );
            }
            None => assert_eq!(code(&o), 0, "{flag}: {err}"),
        }
        // The rows land either way.
        assert_eq!(super::manifest_inputs(&ds).len(), 1, "{flag}");
    }
    // Unchanged on a re-run: the findings come from the manifest.
    let o = run(
        &["ingest", s(&t), "-o", s(&ds), "--strict=negative_duration"],
        &[],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("(1 unchanged"), "{}", stderr(&o));
    let o = ing(&["--strict=negative_durations"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("unknown diagnostic code `negative_durations`"),
        "{}",
        stderr(&o)
    );
}

/// `aorta run --strict` on traces already written: the report is still drawn, exit 1.
#[test]
fn run_strict_writes_the_report_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    findings_trace(&traces.join("rank0.pt.trace.json"));
    let out = dir.path().join("out");
    let o = run(
        &[
            "run",
            s(&traces),
            "-o",
            s(&out),
            "--strict=negative_duration",
        ],
        &[],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--strict: 2 negative_duration findings"),
        "{}",
        stderr(&o)
    );
    assert!(out.join("report.html").exists());
    let o = run(
        &[
            "run",
            s(&traces),
            "-o",
            s(&out),
            "--strict=missing_duration",
        ],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn an_empty_label_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("rank0.pt.trace.json");
    write_trace(&t, 0, 10, "t");
    let ds = dir.path().join("ds");
    for label in ["", "  "] {
        let o = run(&["ingest", s(&t), "-o", s(&ds), "--label", label], &[]);
        super::assert_one_error(&o, "--label: a run label cannot be empty");
        assert!(!ds.exists());
    }
}
