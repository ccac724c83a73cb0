//! Shared helpers for the end-to-end tests: the corpus, one dataset per corpus file (built
//! once for the whole binary), small in-memory traces ingested, a table read back, and an
//! independent (serde_json) view of the raw traces. `cli` drives the `aorta` binary,
//! `reference` is the exact raw-trace reference of the overlap tests, `browser` is headless
//! Chromium and `compare_fixture` the hand-made compare tables.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use polars::prelude::*;

/// `../shared/data`, or `None` (skip) when absent outside CI; under `CI=true` a missing corpus
/// is a failure.
pub(crate) fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    if p.join("kineto").exists() {
        return Some(p);
    }
    missing(&format!("the trace corpus is missing at {}", p.display()))
}

/// What a test needs is missing: `None` (skip, saying `why`) outside CI, a failure under
/// `CI=true`.
pub(crate) fn missing<T>(why: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why} (CI=true)");
    }
    eprintln!("skipping: {why}");
    None
}

/// The first of `names` on PATH, a program `.ci/run` installs with apt-get as `package`;
/// `missing` when there is none.
pub(crate) fn tool(names: &[&str], package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        if let Some(p) = std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
        {
            return Some(p);
        }
    }
    missing(&format!(
        "no {} on PATH (.ci/run installs it: apt-get install {package})",
        names[0]
    ))
}

/// Every Kineto trace file in the corpus (kineto/ and aorta_py/), sorted.
pub(crate) fn corpus_traces(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["kineto", "aorta_py"] {
        walk(&root.join(dir), &mut out);
    }
    out.retain(|p| {
        let n = p.to_string_lossy();
        (n.ends_with(".json") || n.ends_with(".json.gz")) && !n.ends_with("summary.json")
    });
    out.sort();
    out
}

fn walk(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out)
        } else {
            out.push(p)
        }
    }
}

/// A label unique to one corpus file: `<dir>__<file stem>`.
pub(crate) fn label_of(p: &Path) -> String {
    let dir = p.parent().unwrap().file_name().unwrap().to_string_lossy();
    let stem = p.file_name().unwrap().to_string_lossy();
    let stem = stem.split('.').next().unwrap();
    format!("{dir}__{stem}")
}

pub(crate) struct PerFile {
    pub dir: tempfile::TempDir,
    pub files: Vec<PathBuf>,
}

impl PerFile {
    /// The corpus file whose path ends with `suffix`.
    pub(crate) fn file(&self, suffix: &str) -> &PathBuf {
        self.files
            .iter()
            .find(|f| f.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no corpus file {suffix}"))
    }
}

/// (start_ns, raw_end_ns) of the kernels of a `gpu_activities` frame, sorted.
pub(crate) fn kernel_spans(df: &DataFrame) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = i64s(df, "start_ns")
        .into_iter()
        .zip(i64s(df, "raw_end_ns"))
        .zip(strs(df, "kind"))
        .filter(|(_, k)| k.as_deref() == Some("kernel"))
        .map(|((s, e), _)| (s.unwrap(), e.unwrap()))
        .collect();
    v.sort();
    v
}

/// Every corpus trace ingested once, each under its own run label (see `label_of`).
pub(crate) fn per_file_dataset() -> Option<&'static PerFile> {
    static DS: OnceLock<Option<PerFile>> = OnceLock::new();
    DS.get_or_init(|| {
        let root = corpus()?;
        let dir = tempfile::tempdir().unwrap();
        let files = corpus_traces(&root);
        for f in &files {
            let opts = aorta_ingest::Options {
                out: dir.path().to_path_buf(),
                label: Some(label_of(f)),
                ..Default::default()
            };
            aorta_ingest::ingest(std::slice::from_ref(f), &opts, &Default::default())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        Some(PerFile { dir, files })
    })
    .as_ref()
}

/// `text` written as `in/<name>` in a fresh temp dir and ingested in-process into `ds/`
/// beside it (run label `in`); `options` may change the ingest options first.
pub(crate) fn ingest_text(
    name: &str,
    text: &str,
    options: impl FnOnce(&mut aorta_ingest::Options),
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join(name), text).unwrap();
    let mut opts = aorta_ingest::Options {
        out: dir.path().join("ds"),
        ..Default::default()
    };
    options(&mut opts);
    aorta_ingest::ingest(&[input], &opts, &Default::default()).unwrap();
    dir
}

/// One table of a dataset, restricted to one run label.
pub(crate) fn table(root: &Path, table: &str, run: &str) -> DataFrame {
    aorta_transform::dataset::scan(root, table)
        .unwrap()
        .filter(col("run").eq(lit(run)))
        .collect()
        .unwrap()
}

pub(crate) fn i64s(df: &DataFrame, c: &str) -> Vec<Option<i64>> {
    df.column(c).unwrap().i64().unwrap().iter().collect()
}

pub(crate) fn strs(df: &DataFrame, c: &str) -> Vec<Option<String>> {
    df.column(c)
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|s| s.map(str::to_string))
        .collect()
}

/// The raw trace through serde_json, a parser aorta does not use for events.
pub(crate) fn raw_json(p: &Path) -> serde_json::Value {
    let bytes = std::fs::read(p).unwrap();
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut s = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut s)
            .unwrap();
        s
    } else {
        bytes
    };
    serde_json::from_slice(&text).unwrap()
}

pub(crate) fn events(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["traceEvents"].as_array().unwrap()
}

pub(crate) fn cat(e: &serde_json::Value) -> &str {
    e["cat"].as_str().unwrap_or("")
}

pub(crate) fn is_slice(e: &serde_json::Value) -> bool {
    e["ph"] == "X"
}

/// The project's `.venv/bin/python` when it imports `modules` (comma-separated); `None`
/// (skip, with a notice) otherwise, a failure under `CI=true`. Each list is checked once for
/// the whole test binary: a check starts Python and imports them (~1.6 CPU s for the
/// notebooks' list).
pub(crate) fn venv_python(modules: &str) -> Option<PathBuf> {
    static CHECKED: Mutex<BTreeMap<String, bool>> = Mutex::new(BTreeMap::new());
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let ok = *CHECKED
        .lock()
        .unwrap()
        .entry(modules.to_string())
        .or_insert_with(|| {
            py.exists()
                && Command::new(&py)
                    .args(["-c", &format!("import {modules}")])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
        });
    if ok {
        return Some(py);
    }
    let why = format!(
        "no Python venv at {} that imports {modules} (.ci/run creates it: python3 -m venv .venv \
         && .venv/bin/pip install -r notebooks/requirements.txt)",
        py.display()
    );
    missing(&why)
}

/// `PYSPARK_SUBMIT_ARGS` for the tests' Spark sessions, which read kilobytes in local mode:
/// the JIT's first tier only, the serial collector, no adaptive re-planning and no
/// whole-stage code generation. Spark's defaults suit long jobs; on these inputs they spent
/// ~55 CPU s of the 2-core CI machine per session, against ~25 s (docs/PERFORMANCE.md, "Cold
/// CI"). The answers do not depend on them: the tests compare them with aorta's.
pub(crate) const PYSPARK_SUBMIT_ARGS: &str = "--driver-java-options \
    \"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC\" \
    --conf spark.sql.adaptive.enabled=false --conf spark.sql.codegen.wholeStage=false \
    pyspark-shell";

pub(crate) mod browser;
pub(crate) mod cli;
pub(crate) mod compare_fixture;
pub(crate) mod reference;
pub(crate) mod text_table;

/// Total length of the union of `[start, end)` intervals, by sort-and-merge: the tests'
/// independent check of the overlap scan.
pub(crate) fn union_len(mut v: Vec<(i64, i64)>) -> i64 {
    v.sort();
    let (mut total, mut cur) = (0, None::<(i64, i64)>);
    for (s, e) in v {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + cur.map_or(0, |(s, e)| e - s)
}
