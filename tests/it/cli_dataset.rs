//! `aorta ingest` from the outside: atomic commits, unchanged-input skipping, the help text.

use crate::common::cli::*;
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
fn rankless_traces_sharing_a_run_are_warned_about() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("in");
    for (run, files) in [
        (
            "models",
            ["bert-small.json.gz", "qwen1.5-0.5b-chat.json.gz"],
        ),
        ("fsdp", ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]),
    ] {
        let src = if run == "models" {
            "h100_models"
        } else {
            "h200_fsdp2"
        };
        std::fs::create_dir_all(root.join(run)).unwrap();
        for f in files {
            let from = data.join("kineto/cuda").join(src).join(f);
            std::fs::copy(from, root.join(run).join(f)).unwrap();
        }
    }
    let o = ingest(&[&root], &tmp.path().join("D"), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let warnings: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .map(str::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("run `models`: 2 traces name no rank"),
        "{warnings:?}"
    );
}
