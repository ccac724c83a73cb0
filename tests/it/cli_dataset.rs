//! `aorta ingest` from the outside: atomic commits, unchanged-input skipping, the help text.

use crate::common::cli::*;
use crate::common::{i64s, strs};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// 3. Atomicity: a failed run leaves the previous dataset byte for byte.

/// `DIR/NAME/` holding the SDMA trace and the aorta JSONL from the corpus.
fn trace_and_jsonl(data: &Path, dir: &Path, name: &str) -> PathBuf {
    let input = dir.join(name);
    std::fs::create_dir(&input).unwrap();
    std::fs::copy(data.join(SDMA), input.join("sdma_overlap.pt.trace.json.gz")).unwrap();
    std::fs::copy(
        data.join(METRICS_JSONL),
        input.join("rank_00_metrics.jsonl"),
    )
    .unwrap();
    input
}

#[test]
fn failed_run_leaves_previous_dataset_identical() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let input = trace_and_jsonl(&data, tmp.path(), "runA");
    let trace = input.join("sdma_overlap.pt.trace.json.gz");
    let out = tmp.path().join("D");

    let o = ingest(&[&input], &out, &[]);
    assert_eq!(code(&o), 0, "stderr:\n{}", stderr(&o));
    let before = snapshot(&out);
    assert!(before.contains_key(Path::new("manifest.json")));
    assert!(before.len() > 5, "{:?}", before.keys().collect::<Vec<_>>());

    // The trace changes (still valid: one more event first) and a broken file appears.
    let mut text = gunzip(&std::fs::read(&trace).unwrap());
    let key = text
        .windows(13)
        .position(|w| w == b"\"traceEvents\"")
        .expect("traceEvents");
    let open = key + text[key..].iter().position(|&b| b == b'[').unwrap() + 1;
    let extra = br#"{"ph": "X", "cat": "cpu_op", "name": "aorta::added", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}, "#;
    text.splice(open..open, extra.iter().copied());
    assert!(serde_json::from_slice::<serde_json::Value>(&text).is_ok());
    std::fs::write(&trace, gzip(&text, flate2::Compression::default())).unwrap();
    let broken = input.join("truncated_tmp_style.pt.trace.json.tmp");
    std::fs::copy(data.join(BROKEN_TMP), &broken).unwrap();

    let o = ingest(&[&input], &out, &[]);
    assert_eq!(code(&o), 2, "stderr:\n{}", stderr(&o));
    let len = std::fs::metadata(&broken).unwrap().len();
    one_error_line(&o, &broken, &format!("byte {len}"));

    let after = snapshot(&out);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the failed run changed the set of files (leftover staging or temp files included)"
    );
    for (rel, bytes) in &before {
        assert!(
            after[rel] == *bytes,
            "{} changed after a failed run",
            rel.display()
        );
    }
    assert!(entries_starting(&out, ".staging-").is_empty());

    // Sanity: the change alone would have been ingested (the run above failed for the
    // broken file, not because nothing was to do).
    std::fs::remove_file(&broken).unwrap();
    let o = ingest(&[&input], &out, &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "stderr:\n{err}");
    assert!(err.contains("ingested 1 of 2 files"), "{err}");
    assert!(err.contains("(1 unchanged, 0 failed)"), "{err}");
    assert_ne!(
        std::fs::read(out.join("manifest.json")).unwrap(),
        before[Path::new("manifest.json")]
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Re-runs skip unchanged inputs and write nothing; --force re-reads them.

#[test]
fn rerun_writes_nothing_and_force_reingests() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let input = trace_and_jsonl(&data, tmp.path(), "in");
    let out = tmp.path().join("D");

    let o = ingest(&[&input], &out, &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "stderr:\n{err}");
    assert!(err.contains("ingested 2 of 2 files"), "{err}");
    assert!(err.contains("(0 unchanged, 0 failed)"), "{err}");
    let first = snapshot_meta(&out);
    // Coarse file-system clocks: make a rewrite visible in mtime as well as inode.
    std::thread::sleep(std::time::Duration::from_millis(50));

    let o = ingest(&[&input], &out, &[]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "stderr:\n{err}");
    assert!(err.contains("ingested 0 of 2 files"), "{err}");
    assert!(err.contains("(2 unchanged, 0 failed)"), "{err}");
    let second = snapshot_meta(&out);
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        second.keys().collect::<Vec<_>>(),
        "a no-op run changed the set of files"
    );
    for (rel, (bytes, mtime, ino)) in &first {
        let (b2, m2, i2) = &second[rel];
        assert!(
            b2 == bytes,
            "{} changed bytes on a no-op run",
            rel.display()
        );
        assert_eq!(
            (m2, i2),
            (mtime, ino),
            "{} was rewritten on a no-op run",
            rel.display()
        );
    }

    let o = ingest(&[&input], &out, &["--force"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "stderr:\n{err}");
    assert!(err.contains("ingested 2 of 2 files"), "{err}");
    assert!(err.contains("(0 unchanged, 0 failed)"), "{err}");
    // Same inputs, same parts: no duplicates, no orphans, still two manifest entries.
    let third = snapshot(&out);
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        third.keys().collect::<Vec<_>>()
    );
    assert_eq!(manifest_sources(&out).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// 5. Help and usage.

#[test]
fn ingest_help_shows_examples() {
    let o = aorta(&["ingest".as_ref(), "--help".as_ref()]);
    assert_eq!(code(&o), 0);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Usage: aorta ingest"), "{out}");
    assert!(out.contains("\nExamples:\n"), "{out}");
    assert!(out.contains("aorta ingest traces/ --keep-going"), "{out}");
    assert!(
        out.contains("aorta ingest traces/ --strict=all:100"),
        "{out}"
    );
    assert!(
        out.contains(
            "Exit status: 0 ok, 1 some files failed (--keep-going) or --strict findings, 2 error."
        ),
        "{out}"
    );
}

#[test]
fn no_arguments_is_usage_and_exit_2() {
    let o = aorta(&[]);
    assert_eq!(code(&o), 2);
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.contains("Usage: aorta <COMMAND>"), "{err}");
    assert!(err.contains("ingest"), "{err}");

    let o = aorta(&["ingest".as_ref()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("Usage: aorta ingest"), "{err}");
    assert!(err.contains("<PATHS>"), "{err}");
}

/// Two model traces with no rank anywhere land in one run as rank 0: the summary warns, once,
/// naming that run; the FSDP2 traces (rank from `distributedInfo`) raise nothing.
#[test]
fn files_that_cannot_be_one_job_become_runs_of_their_own() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("in");
    let copy = |from: &str, to: &str| {
        let to = root.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(data.join("kineto/cuda").join(from), to).unwrap();
    };
    // Two rankless single-model traces; one 2-rank job; two experiments side by side.
    copy(
        "h100_models/bert-small.json.gz",
        "models/bert-small.json.gz",
    );
    copy(
        "h200_fsdp2/rank0.pt.trace.json.gz",
        "fsdp/rank0.pt.trace.json.gz",
    );
    copy(
        "h200_fsdp2/rank1.pt.trace.json.gz",
        "fsdp/rank1.pt.trace.json.gz",
    );
    for exp in ["a", "b"] {
        for r in ["0", "1"] {
            let from = format!("h200_fsdp2/rank{r}.pt.trace.json.gz");
            copy(&from, &format!("exps/{exp}_rank{r}.pt.trace.json.gz"));
        }
    }
    let ds = tmp.path().join("D");
    let o = ingest(&[&root], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("note: run `exps`: its files cannot be one job: 2 traces are rank 0. Each became a run of its own: exps/a, exps/b"), "{}", stderr(&o));
    let runs = |ds: &Path| -> Vec<(String, i64)> {
        let df = aorta_transform::dataset::read(ds, "runs").unwrap();
        let mut v: Vec<(String, i64)> = strs(&df, "run")
            .into_iter()
            .zip(i64s(&df, "rank"))
            .map(|(r, k)| (r.unwrap(), k.unwrap()))
            .collect();
        v.sort();
        v
    };
    let pairs = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
        v.iter().map(|(r, k)| (r.to_string(), *k)).collect()
    };
    // One model alone is one job; the experiments keep their two ranks each.
    assert_eq!(
        runs(&ds),
        pairs(&[
            ("exps/a", 0),
            ("exps/a", 1),
            ("exps/b", 0),
            ("exps/b", 1),
            ("fsdp", 0),
            ("fsdp", 1),
            ("models", 0)
        ])
    );
    // A second rankless model arrives later. A run's identity is fixed at its first ingest:
    // `models` keeps its name and its file (not moved, not read again), the newcomer that
    // cannot join it becomes `models/qwen`, and ingest says so.
    copy(
        "h100_models/qwen1.5-0.5b-chat.json.gz",
        "models/qwen.json.gz",
    );
    let o = ingest(&[&root], &ds, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("ingested 1 of 8 files") && err.contains("7 unchanged"),
        "{err}"
    );
    assert!(
        err.contains("note: run `models`: the new files cannot join the run(s) already there (models): 2 traces name no rank"),
        "{err}"
    );
    assert!(
        err.contains("They became run(s) of their own: models/qwen"),
        "{err}"
    );
    assert!(!err.contains("moved"), "nothing already there moves: {err}");
    let got = runs(&ds);
    assert!(
        got.contains(&("models".into(), 0)) && got.contains(&("models/qwen".into(), 0)),
        "{got:?}"
    );
    // `--run models` still names the first model.
    let o = aorta(&[
        "overlap".as_ref(),
        ds.as_os_str(),
        "--run".as_ref(),
        "models".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Commands that read the dataset repeat the note (the ingest's terminal may be long gone).
    let note = "note: files that could not join run `models` became runs models/qwen (they cannot be one job with it: 2 traces name no rank";
    let html = tmp.path().join("r.html");
    for args in [
        vec!["overlap".as_ref(), ds.as_os_str()],
        vec![
            "report".as_ref(),
            ds.as_os_str(),
            "--run".as_ref(),
            "models/qwen".as_ref(),
            "-o".as_ref(),
            html.as_os_str(),
        ],
    ] {
        let o = aorta(&args);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(stderr(&o).contains(note), "{:?}: {}", args, stderr(&o));
    }
    // Not for a run that was not split.
    let o = aorta(&[
        "overlap".as_ref(),
        ds.as_os_str(),
        "--run".as_ref(),
        "fsdp".as_ref(),
    ]);
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
    // Re-ingesting nothing new reads nothing and keeps the split.
    let o = ingest(&[&root], &ds, &[]);
    assert!(
        stderr(&o).contains("ingested 0 of 8 files"),
        "{}",
        stderr(&o)
    );
    assert_eq!(runs(&ds), got);
}

/// The issue's sequence: a 2-rank job ingested from a folder is run `traces`; a second 2-rank
/// job copied into the same folder later cannot join it (two rank 0s), so it becomes one new
/// run (both its ranks, named after its files: `traces/ddp`) and `traces` stays as it was.
#[test]
fn a_second_job_in_the_folder_becomes_one_new_run() {
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/traces/overlap-bench");
    let tmp = tempfile::tempdir().unwrap();
    let traces = tmp.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for r in 0..2 {
        let name = format!("rank{r}.trace.json.gz");
        std::fs::copy(
            bench.join("allreduce_overlap").join(&name),
            traces.join(&name),
        )
        .unwrap();
    }
    let ds = tmp.path().join("D");
    ingest_ok(&[&traces], &ds, &["-q"]);
    for r in 0..2 {
        let from = bench.join(format!("allgather_overlap/rank{r}.trace.json.gz"));
        std::fs::copy(from, traces.join(format!("ddp_rank{r}.trace.json.gz"))).unwrap();
    }
    let o = ingest(&[&traces], &ds, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("They became run(s) of their own: traces/ddp;"),
        "{}",
        stderr(&o)
    );
    let df = aorta_transform::dataset::read(&ds, "runs").unwrap();
    let mut runs: Vec<(String, i64)> = strs(&df, "run")
        .into_iter()
        .zip(i64s(&df, "rank"))
        .map(|(r, k)| (r.unwrap(), k.unwrap()))
        .collect();
    runs.sort();
    let want = [
        ("traces", 0),
        ("traces", 1),
        ("traces/ddp", 0),
        ("traces/ddp", 1),
    ];
    assert_eq!(runs, want.map(|(r, k)| (r.to_string(), k)));
    let o = aorta(&[
        "overlap".as_ref(),
        ds.as_os_str(),
        "--run".as_ref(),
        "traces".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// Every relabel says `moved … from run A to run B`, and the derived tables of a run that no
/// longer exists go with it in the same commit: neither `aorta sql` nor a glob of the table
/// directories finds a row of the gone run.
#[test]
fn a_relabelled_run_takes_its_derived_tables_with_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/overlap-bench/allreduce_overlap");
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("D");
    ingest_ok(&[&dir], &ds, &["--label", "first", "-q"]);
    let o = aorta(&["overlap".as_ref(), ds.as_os_str()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(ds.join("overlap_steps").join("run=first").exists());
    let o = ingest(&[&dir], &ds, &["--label", "second", "--force"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("from run `first` to run `second`") && stderr(&o).contains("moved"),
        "{}",
        stderr(&o)
    );
    for t in ["overlap_steps", "overlap_ranks"] {
        assert!(
            !ds.join(t).join("run=first").exists(),
            "{t} of the gone run"
        );
    }
    let o = aorta(&[
        "sql".as_ref(),
        "SELECT count(*) AS n FROM overlap_steps WHERE run = 'first'".as_ref(),
        ds.as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "n\n0");
}

/// `--param KEY=VALUE` lands in `runs.params` of every file, beside what the trace says
/// (`aorta_params`), and other params re-read unchanged files; a malformed one is a usage
/// error.
#[test]
fn params_from_the_command_line_land_in_runs_params() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/overlap-bench/allreduce_overlap");
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("D");
    ingest_ok(
        &[&dir],
        &ds,
        &["-q", "--param", "lr=3e-4", "--param", "tp=2"],
    );
    let params = |ds: &Path| -> Vec<serde_json::Value> {
        let df = aorta_transform::dataset::read(ds, "runs").unwrap();
        strs(&df, "params")
            .into_iter()
            .map(|p| serde_json::from_str(&p.unwrap()).unwrap())
            .collect()
    };
    let got = params(&ds);
    assert_eq!(got.len(), 4, "two traces and two logs");
    for p in &got {
        assert_eq!(
            (p["lr"].as_str(), p["tp"].as_str()),
            (Some("3e-4"), Some("2")),
            "{p}"
        );
    }
    // The traces keep their own knobs beside them.
    assert_eq!(
        got.iter()
            .filter(|p| p["aorta_params"]["bytes"] == 67108864)
            .count(),
        2
    );
    // Other params: the unchanged files are read again.
    let o = ingest(&[&dir], &ds, &["--param", "lr=1e-3"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ingested 4 of 4 files"),
        "{}",
        stderr(&o)
    );
    assert!(params(&ds)
        .iter()
        .all(|p| p["lr"] == "1e-3" && p.get("tp").is_none()));
    let o = ingest(&[&dir], &ds, &["--param", "=1"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("the key must be letters"),
        "{}",
        stderr(&o)
    );
}

/// The closing line sorts findings by severity: what to check (a kernel with an unreadable
/// `ts`) before what is expected (no rank named anywhere).
/// A file reached twice (`DIR DIR/file`, one path twice) is read once: the dataset has the
/// same files and rows as from `DIR` alone (it failed naming a `.staging-…` part before).
#[test]
fn overlapping_inputs_are_read_once() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/overlap-bench/allreduce_overlap");
    let file = dir.join("rank0.trace.json.gz");
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("alone");
    ingest_ok(&[&dir], &alone, &["-q"]);
    let rows = |ds: &Path| {
        let acts = aorta_transform::dataset::read(ds, "gpu_activities").unwrap();
        (manifest_sources(ds), acts.height())
    };
    for (name, inputs) in [
        ("dir_and_file", vec![&dir, &file]),
        ("twice", vec![&dir, &dir]),
    ] {
        let ds = tmp.path().join(name);
        let o = ingest(
            &inputs.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
            &ds,
            &["-q"],
        );
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        assert_eq!(rows(&ds), rows(&alone), "{name}");
    }
}

#[test]
fn findings_are_summed_by_severity() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.json");
    std::fs::write(
        &trace,
        r#"{"traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "abc", "dur": 1, "args": {"stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 10, "dur": 1, "args": {"stream": 7}}
]}"#,
    )
    .unwrap();
    let o = ingest(&[&trace], &tmp.path().join("D"), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "data-quality findings: 1 to check (missing_timestamp 1); 1 expected (rank_default 1)"
        ),
        "{}",
        stderr(&o)
    );
}

/// README's first command runs on data inside the repository, and prints what README shows:
/// the command is read from README.md, run against a fresh directory, and its overlap table
/// must appear in README verbatim. No run of the bundled data spans an absurd window.
#[test]
fn readme_first_command_runs_on_bundled_data_and_prints_what_readme_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo build && target/debug/aorta ingest"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("aorta-data");
    let mut outputs = vec![];
    for cmd in line.split(" && ").skip(1) {
        let words: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        assert!(
            !words.iter().any(|w| w.contains("shared")),
            "{cmd}: data outside the repository"
        );
        let args: Vec<std::ffi::OsString> = words
            .iter()
            .map(|w| match *w {
                "aorta-data" => data.clone().into_os_string(),
                w if w.starts_with("workloads/") => root.join(w).into_os_string(),
                w => w.into(),
            })
            .collect();
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let o = aorta(&refs);
        assert_eq!(code(&o), 0, "{cmd}: {}", stderr(&o));
        outputs.push(String::from_utf8(o.stdout).unwrap());
    }
    let table = outputs.last().unwrap();
    assert!(table.starts_with("run fsdp/fsdp_default"), "{table}");
    assert!(
        readme.contains(table.trim_end()),
        "README shows another output:\n{table}"
    );
    let doc = overlap_json(&data, "rank");
    for run in doc["runs"].as_array().unwrap() {
        for r in run["rows"].as_array().unwrap() {
            let w = r["window_ns"].as_i64().unwrap_or(0);
            assert!(w < 60_000_000_000, "{}: window {w} ns", run["run"]);
        }
    }
}
