//! Helpers for the tests that drive the `aorta` binary from the outside.
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) const AORTA: &str = env!("CARGO_BIN_EXE_aorta");
pub(crate) const BROKEN_TMP: &str = "broken/truncated_tmp_style.pt.trace.json.tmp";
pub(crate) const SDMA: &str = "kineto/cuda/h200_sdma/sdma_overlap.pt.trace.json.gz";
pub(crate) const METRICS_JSONL: &str = "jsonl/rank_00_metrics.jsonl";
pub(crate) const FSDP2_RANK0: &str = "kineto/cuda/h200_fsdp2/rank0.pt.trace.json.gz";

pub(crate) use super::corpus;

pub(crate) fn aorta(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(AORTA)
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("aorta runs")
}

pub(crate) fn ingest(paths: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["ingest".as_ref()];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    args.push("-o".as_ref());
    args.push(out.as_os_str());
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    aorta(&args)
}

/// `aorta ingest`, which must succeed (else the test fails with its stderr).
pub(crate) fn ingest_ok(paths: &[&Path], out: &Path, extra: &[&str]) {
    let o = ingest(paths, out, extra);
    assert_eq!(code(&o), 0, "aorta ingest {paths:?}: {}", stderr(&o));
}

/// `aorta overlap DATASET --by BY --json`, which must succeed: the document it prints.
/// Ingests `traces` into a fresh dataset and runs `aorta report` into `page` beside it;
/// returns the tempdir, the page and the command's output (status 0).
pub(crate) fn report_of(traces: &Path, page: &str) -> (tempfile::TempDir, PathBuf, Output) {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(&[traces], &ds, &["-q"]);
    let html = dir.path().join(page);
    let o = aorta(&[
        "report".as_ref(),
        ds.as_os_str(),
        "-o".as_ref(),
        html.as_os_str(),
    ]);
    assert_eq!(code(&o), 0, "{}: {}", traces.display(), stderr(&o));
    (dir, html, o)
}

pub(crate) fn overlap_json(ds: &Path, by: &str) -> serde_json::Value {
    json_by("overlap", ds, by)
}

/// `aorta collectives DATASET --by BY --json`, which must succeed: the document it prints.
pub(crate) fn collectives_json(ds: &Path, by: &str) -> serde_json::Value {
    json_by("collectives", ds, by)
}

fn json_by(command: &str, ds: &Path, by: &str) -> serde_json::Value {
    let o = aorta(&[
        command.as_ref(),
        ds.as_os_str(),
        "--by".as_ref(),
        by.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "aorta {command} --by {by}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn code(o: &Output) -> i32 {
    o.status
        .code()
        .expect("aorta exited normally (not killed by a signal)")
}

/// Asserts stderr is exactly one line starting with `aorta: error: <path>: <loc>: ` and
/// holds no panic; returns the message after the location.
pub(crate) fn one_error_line(o: &Output, path: &Path, loc: &str) -> String {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "aorta panicked:\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one error line, got:\n{err}");
    let prefix = format!("aorta: error: {}: {loc}: ", path.display());
    assert!(
        lines[0].starts_with(&prefix),
        "expected the error to start with\n  {prefix}\ngot\n  {}",
        lines[0]
    );
    let msg = &lines[0][prefix.len()..];
    // No cause printed twice ("corrupt deflate stream: corrupt deflate stream").
    let parts: Vec<&str> = msg.split(": ").collect();
    assert!(
        parts.windows(2).all(|w| w[0] != w[1]),
        "a cause is repeated in: {}",
        lines[0]
    );
    msg.to_string()
}

/// The `N` of `aorta: error: <path>: byte N: ...`.
pub(crate) fn byte_offset(o: &Output, path: &Path) -> u64 {
    let err = stderr(o);
    let prefix = format!("aorta: error: {}: byte ", path.display());
    let rest = err
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}N:` line in stderr:\n{err}"));
    let n = rest.split(':').next().unwrap();
    n.parse()
        .unwrap_or_else(|_| panic!("`{n}` is not a byte offset in:\n{err}"))
}

/// Every file under `dir` (hidden ones included), relative path → bytes.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Every file under `dir`: relative path → (bytes, mtime, inode). A file rewritten by
/// temp-file-and-rename gets a new inode even when bytes and (coarse) mtime match.
pub(crate) fn snapshot_meta(
    dir: &Path,
) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime, u64)> {
    snapshot(dir)
        .into_iter()
        .map(|(rel, bytes)| {
            let m = std::fs::metadata(dir.join(&rel)).unwrap();
            #[cfg(unix)]
            let ino = std::os::unix::fs::MetadataExt::ino(&m);
            #[cfg(not(unix))]
            let ino = 0;
            (rel, (bytes, m.modified().unwrap(), ino))
        })
        .collect()
}

/// Entries directly in `dir` whose names start with `prefix`.
pub(crate) fn entries_starting(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A failed run on a fresh output directory must leave no file at all behind.
pub(crate) fn assert_nothing_written(out: &Path) {
    let files = snapshot(out);
    assert!(
        files.is_empty(),
        "a failed ingest wrote into {}: {:?}",
        out.display(),
        files.keys().collect::<Vec<_>>()
    );
}

pub(crate) fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut v)
        .unwrap();
    v
}

pub(crate) fn gzip(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

pub(crate) fn manifest_sources(out: &Path) -> Vec<String> {
    let text = std::fs::read(out.join("manifest.json")).expect("manifest.json written");
    let m: serde_json::Value = serde_json::from_slice(&text).unwrap();
    m["inputs"]
        .as_array()
        .expect("manifest has an inputs array")
        .iter()
        .map(|e| e["source"].as_str().unwrap().to_string())
        .collect()
}

pub(crate) fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect()
}

/// The complete events of a trace cut off after an event's `},`: counted by closing the
/// array and object by hand and parsing with serde_json.
pub(crate) fn complete_events(truncated: &[u8]) -> usize {
    let text = String::from_utf8_lossy(truncated);
    let body = text
        .trim_end()
        .strip_suffix(',')
        .expect("ends after an event's comma");
    let v: serde_json::Value =
        serde_json::from_str(&format!("{body}]}}")).expect("closes into JSON");
    v["traceEvents"]
        .as_array()
        .expect("traceEvents array")
        .len()
}

/// The run labels of a command's `--json` document (`runs[].run`), in its order.
pub(crate) fn run_names(doc: &serde_json::Value) -> Vec<String> {
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_string())
        .collect()
}
