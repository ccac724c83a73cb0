//! Shared by the modules of this binary: the trace corpus (skipped when absent, a failure
//! under `CI=true`), ingest into a directory, the record batches of a written table, and what
//! every damaged-input proptest checks (`check`).

use std::path::{Path, PathBuf};

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

/// `rel` under the trace corpus (`../shared/data` beside the checkout), or `None` (skip, with
/// a notice) when it is absent outside CI; under `CI=true` a missing corpus is a failure.
pub(crate) fn corpus(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data")
        .join(rel);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("corpus missing: {} (CI=true)", p.display());
    }
    eprintln!("skipping: no corpus at {}", p.display());
    None
}

/// The bytes of corpus file `rel` (see `corpus`).
pub(crate) fn corpus_bytes(rel: &str) -> Option<Vec<u8>> {
    corpus(rel).map(|p| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Ingests `paths` into `out` with default options.
pub(crate) fn ingest(paths: &[PathBuf], out: &Path) -> aorta_ingest::Result<aorta_ingest::Summary> {
    let opts = aorta_ingest::Options {
        out: out.to_path_buf(),
        ..Default::default()
    };
    aorta_ingest::ingest(paths, &opts, &Default::default())
}

/// Every record batch of `table` under the dataset `out`, part files in path order.
pub(crate) fn batches(out: &Path, table: &str) -> Vec<RecordBatch> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                walk(&e.path(), out);
            } else if e.path().extension().is_some_and(|x| x == "parquet") {
                out.push(e.path());
            }
        }
    }
    let mut files = Vec::new();
    walk(&out.join(table), &mut files);
    files.sort();
    let mut batches = Vec::new();
    for f in files {
        let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(f).unwrap())
            .unwrap()
            .build()
            .unwrap();
        batches.extend(r.map(Result::unwrap));
    }
    batches
}

/// The step numbers of the `steps` table of the dataset `out`, sorted (its null-step row
/// left out).
pub(crate) fn step_numbers(out: &Path) -> Vec<i64> {
    let mut steps: Vec<i64> = batches(out, "steps")
        .iter()
        .flat_map(|b| ints(b, "step"))
        .flatten()
        .collect();
    steps.sort();
    steps
}

/// A copy of the corpus rocpd database as `dir/908_results.db`, open, with its table suffix
/// (`rocpd_metadata.uuid`) and guid: tests add rows to its physical tables, the way
/// rocprofv3 writes them, and read them back through its views. `None` without the corpus.
pub(crate) fn rocpd_copy(dir: &Path) -> Option<(PathBuf, rusqlite::Connection, String, String)> {
    let db = corpus("rocprofv3/rocpd/mi350x_908_results.DERIVED.db")?;
    let p = dir.join("908_results.db");
    std::fs::copy(&db, &p).unwrap();
    let c = rusqlite::Connection::open(&p).unwrap();
    let meta = |tag: &str| -> String {
        c.query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = ?1",
            [tag],
            |r| r.get(0),
        )
        .unwrap()
    };
    let (u, g) = (meta("uuid"), meta("guid"));
    Some((p, c, u, g))
}

/// An Int64 column of a batch, nulls as `None`.
pub(crate) fn ints(b: &RecordBatch, col: &str) -> Vec<Option<i64>> {
    let a = b.column_by_name(col).unwrap();
    let a = a.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i)))
        .collect()
}

/// A Utf8 column of a batch, nulls as `None`.
pub(crate) fn strs(b: &RecordBatch, col: &str) -> Vec<Option<String>> {
    let a = b.column_by_name(col).unwrap();
    let a = a.as_any().downcast_ref::<StringArray>().unwrap();
    (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
        .collect()
}

/// Ingests `bytes` as the file `name`; on failure checks the message names the file and,
/// for parse errors, an offset within the input, and that nothing was left behind.
pub(crate) fn check(name: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    check_with(name, bytes, Default::default())
}

/// `check`, with `--step-marker`.
pub(crate) fn check_with(
    name: &str,
    bytes: &[u8],
    step_marker: aorta_ingest::step_span::StepMarker,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = dir.path().join("out");
    let opts = aorta_ingest::Options {
        out: out.clone(),
        step_marker,
        ..Default::default()
    };
    match aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default()) {
        Ok(_) => Ok(()),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(msg.starts_with(&path.display().to_string()), "{msg}");
            prop_assert!(!msg.contains('\n'), "{msg}");
            if let aorta_ingest::IngestError::Parse { offset, .. } = e {
                prop_assert!(offset <= bytes.len() as u64, "{msg}");
            }
            let leftovers: Vec<_> = std::fs::read_dir(&out)
                .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            prop_assert!(leftovers.is_empty(), "failed run left {leftovers:?}");
            Ok(())
        }
    }
}
