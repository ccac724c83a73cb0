//! The dataset on disk: finding inputs, the manifest, and the atomic commit.
//!
//! Every run writes into `<out>/.staging-<pid>/` and only moves finished parts into place after
//! all files succeeded (or, with `--keep-going`, the ones that did). A failed or interrupted
//! run therefore leaves the previous dataset exactly as it was; the manifest is replaced last,
//! by rename.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IngestError, Result};
use crate::schema::SCHEMA_VERSION;

pub const MANIFEST: &str = "manifest.json";

/// What aorta recognises as an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Kineto,
    /// A Chrome trace without Kineto's markers (see `detect`).
    Chrome,
    /// An Nsight Systems SQLite export.
    Nsys,
    Jsonl,
    #[serde(rename = "rocprofv3-csv")]
    RocprofCsv,
    #[serde(rename = "rocprofv3-json")]
    RocprofJson,
    Rocpd,
    /// JSON that is neither a trace nor JSONL (a summary, a config): skipped in walks.
    NotATrace,
}

/// An input found on disk, with the run label it belongs to.
#[derive(Debug, Clone)]
pub struct Input {
    pub path: PathBuf,
    pub label: String,
    /// Named on the command line (not found by walking a directory).
    pub explicit: bool,
    /// Files read with this one as one job (a rocprofv3 CSV group), in the content hash too.
    pub siblings: Vec<PathBuf>,
    /// Not ingested, and why (a CSV that is not a trace).
    pub skip: Option<String>,
}

const TRACE_SUFFIXES: &[&str] = &[
    ".json",
    ".json.gz",
    ".json.zst",
    ".json.tmp",
    ".jsonl",
    ".jsonl.gz",
    ".jsonl.zst",
    ".sqlite",
    ".csv",
    ".db",
];

fn is_candidate(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    TRACE_SUFFIXES.iter().any(|s| name.ends_with(s)) && name != MANIFEST
}

/// Walks `roots` (files or directories), sorted; the label of a file is the first directory
/// under its root (or the root's own name for files directly in it), unless `label` is given.
pub fn discover(roots: &[PathBuf], label: Option<&str>, skip: &Path) -> Result<Vec<Input>> {
    let mut out = Vec::new();
    for root in roots {
        let meta = std::fs::metadata(root).map_err(|e| IngestError::io(root, e))?;
        if meta.is_file() {
            let l = label
                .map(str::to_string)
                .unwrap_or_else(|| dir_name(root.parent()));
            out.push(Input {
                path: root.clone(),
                label: l,
                explicit: true,
                siblings: vec![],
                skip: None,
            });
            continue;
        }
        let mut files = Vec::new();
        walk(root, skip, &mut files)?;
        files.sort();
        for f in files {
            let rel = f.strip_prefix(root).unwrap_or(&f);
            let l = match label {
                Some(l) => l.to_string(),
                None if rel.components().count() > 1 => rel
                    .iter()
                    .next()
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                None => dir_name(Some(root)),
            };
            out.push(Input {
                path: f,
                label: l,
                explicit: false,
                siblings: vec![],
                skip: None,
            });
        }
    }
    group_csv(out)
}

/// Replaces the rocprofv3 CSV inputs by their jobs (see `rocprof::csv::group`).
fn group_csv(inputs: Vec<Input>) -> Result<Vec<Input>> {
    let is_csv = |i: &Input| {
        i.path
            .to_string_lossy()
            .to_ascii_lowercase()
            .ends_with(".csv")
    };
    let csvs: Vec<PathBuf> = inputs
        .iter()
        .filter(|i| is_csv(i))
        .map(|i| i.path.clone())
        .collect();
    if csvs.is_empty() {
        return Ok(inputs);
    }
    let mut plans: std::collections::HashMap<PathBuf, crate::rocprof::csv::Planned> =
        crate::rocprof::csv::group(&csvs)?
            .into_iter()
            .map(|p| match &p {
                crate::rocprof::csv::Planned::Job(f, _)
                | crate::rocprof::csv::Planned::Skip(f, _) => (f.clone(), p),
            })
            .collect();
    let mut out = Vec::new();
    for mut i in inputs {
        if !is_csv(&i) {
            out.push(i);
            continue;
        }
        match plans.remove(&i.path) {
            Some(crate::rocprof::csv::Planned::Job(_, sib)) => i.siblings = sib,
            Some(crate::rocprof::csv::Planned::Skip(_, why)) => i.skip = Some(why),
            None => continue, // read with its group's kernel trace
        }
        out.push(i);
    }
    Ok(out)
}

/// Size (all files) and latest modification time of an input and its siblings.
pub fn stat_input(input: &Input) -> Result<(u64, i64)> {
    let (mut bytes, mut mtime) = stat(&input.path)?;
    for s in &input.siblings {
        let (b, m) = stat(s)?;
        bytes += b;
        mtime = mtime.max(m);
    }
    Ok((bytes, mtime))
}

/// The content hash of an input, its siblings included.
pub fn hash_input(input: &Input) -> Result<String> {
    if input.siblings.is_empty() {
        return content_hash(&input.path).map(|h| h.0);
    }
    let mut files = vec![input.path.as_path()];
    files.extend(input.siblings.iter().map(PathBuf::as_path));
    crate::rocprof::csv::group_hash(&files)
}

fn dir_name(p: Option<&Path>) -> String {
    let p = p
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(p)
        .ok()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "run".into())
}

fn walk(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| IngestError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| IngestError::io(dir, e))?;
        let p = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        let ft = entry.file_type().map_err(|e| IngestError::io(&p, e))?;
        if hidden || same_path(&p, skip) {
            continue;
        }
        if ft.is_dir() {
            walk(&p, skip, out)?;
        } else if is_candidate(&p) {
            out.push(p);
        }
    }
    Ok(())
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Decides the reader: `.jsonl` by name, otherwise by content: SQLite databases by what
/// their tables are, one JSON object per line is JSONL, a trace with Kineto's markers is
/// Kineto, any other Chrome trace is generic Chrome.
pub fn detect(path: &Path) -> Result<Format> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.contains(".jsonl") {
        return Ok(Format::Jsonl);
    }
    if name.ends_with(".csv") {
        return Ok(Format::RocprofCsv);
    }
    if name.ends_with(".nsys-rep") || name.ends_with(".qdrep") {
        return Err(IngestError::file(
            path,
            "an Nsight Systems report: aorta reads its SQLite export (nsys export --type sqlite)",
        ));
    }
    let (r, _) =
        crate::source::open(path, Default::default()).map_err(|e| IngestError::io(path, e))?;
    let mut head = Vec::new();
    if r.take(1 << 16).read_to_end(&mut head).is_err() {
        // Corrupt compressed data: the trace reader reports it, with the offset where it broke.
        return Ok(Format::Kineto);
    }
    if head.starts_with(SQLITE_MAGIC) {
        return detect_sqlite(path);
    }
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let one_object =
        serde_json::from_slice::<serde_json::Value>(first_line).is_ok_and(|v| v.is_object());
    let more = head.len() > first_line.len() + 1;
    if one_object && more {
        return Ok(Format::Jsonl);
    }
    if memchr::memmem::find(&head, b"\"rocprofiler-sdk-tool\"").is_some() {
        return Ok(Format::RocprofJson);
    }
    // A whole small JSON document without events is not a trace (summary.json, configs).
    // An empty (or blank) file is a trace cut off at byte 0: the reader reports it so.
    let whole = head.len() < 1 << 16 && !head.iter().all(u8::is_ascii_whitespace);
    let trace = memchr::memmem::find(&head, b"\"traceEvents\"").is_some()
        || memchr::memmem::find(&head, b"\"ph\"").is_some();
    Ok(if whole && !trace {
        Format::NotATrace
    } else if is_generic_chrome(&head) {
        Format::Chrome
    } else {
        Format::Kineto
    })
}

/// The first 16 bytes of every SQLite 3 database.
pub const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Which reader a SQLite database needs, by its tables.
fn detect_sqlite(path: &Path) -> Result<Format> {
    let conn = crate::nsys::open(path)?;
    if crate::nsys::is_nsys(&conn) {
        return Ok(Format::Nsys);
    }
    if crate::rocprof::rocpd::is_rocpd(&conn) {
        return Ok(Format::Rocpd);
    }
    Err(IngestError::file(
        path,
        "SQLite database that is neither an Nsight Systems export (no StringIds and CUPTI_ACTIVITY_KIND_* / export metadata tables) nor a rocpd database",
    ))
}

/// Top-level keys and event text only Kineto (the PyTorch profiler) writes (FORMATS.md §1).
const KINETO_MARKERS: &[&[u8]] = &[
    b"\"schemaVersion\"",
    b"\"deviceProperties\"",
    b"\"distributedInfo\"",
    b"\"baseTimeNanoseconds\"",
    b"\"traceName\"",
    b"\"External id\"",
    b"\"cpu_op\"",
    b"\"user_annotation\"",
    b"\"cuda_runtime\"",
    b"\"cuda_driver\"",
    b"\"python_function\"",
    b"\"ac2g\"",
    b"\"ProfilerStep#",
];

/// A Chrome trace that is not Kineto's: a JSON array (Kineto always writes an object), or an
/// object whose first 64 KiB hold none of Kineto's markers. Kineto files go to the Kineto
/// reader, which links launches to kernels and steps; the generic reader adds `B`/`E` pairs
/// and instants, which Kineto never writes.
pub fn is_generic_chrome(head: &[u8]) -> bool {
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => true,
        Some(b'{') => !KINETO_MARKERS
            .iter()
            .any(|m| memchr::memmem::find(head, m).is_some()),
        _ => false,
    }
}

/// Size and modification time (ns since the epoch) of a file.
pub fn stat(path: &Path) -> Result<(u64, i64)> {
    let m = std::fs::metadata(path).map_err(|e| IngestError::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    Ok((m.len(), mtime))
}

/// xxh3-128 of the file's bytes, as 32 hex digits.
pub fn content_hash(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).map_err(|e| IngestError::io(path, e))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(|e| IngestError::io(path, e))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((format!("{:032x}", h.digest128()), n))
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub source: String,
    pub content_hash: String,
    /// Size and modification time when ingested: a file whose both match is hashed again
    /// to confirm it is unchanged; any other file is hashed while it is read.
    #[serde(default)]
    pub file_bytes: u64,
    #[serde(default)]
    pub mtime_ns: i64,
    pub label: String,
    pub rank: i64,
    pub format: Format,
    pub rules_version: String,
    /// `RankMap::fingerprint` of the `--rank-map` used ("" without one): a file ingested
    /// under another map is read again, its ranks may differ.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rank_map: String,
    pub parts: Vec<PathBuf>,
    pub rows: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema_version: u32,
    pub aorta_version: String,
    pub inputs: Vec<Entry>,
}

impl Manifest {
    pub fn load(out: &Path) -> Result<Manifest> {
        let p = out.join(MANIFEST);
        let empty = Manifest {
            schema_version: SCHEMA_VERSION,
            aorta_version: env!("CARGO_PKG_VERSION").into(),
            inputs: vec![],
        };
        match std::fs::read(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(empty),
            Err(e) => Err(IngestError::io(&p, e)),
            Ok(b) => {
                let m: Manifest = serde_json::from_slice(&b)
                    .map_err(|e| IngestError::file(&p, format!("not an aorta manifest: {e}")))?;
                if m.schema_version != SCHEMA_VERSION {
                    return Err(IngestError::file(&p, format!(
                        "dataset has schema v{} but this aorta writes v{SCHEMA_VERSION}: ingest into a new directory or delete it",
                        m.schema_version
                    )));
                }
                Ok(m)
            }
        }
    }

    pub fn get(&self, source: &str) -> Option<&Entry> {
        self.inputs.iter().find(|e| e.source == source)
    }

    /// Writes the manifest by temp file and rename.
    pub fn save(&mut self, out: &Path) -> Result<()> {
        self.inputs.sort_by(|a, b| a.source.cmp(&b.source));
        self.aorta_version = env!("CARGO_PKG_VERSION").into();
        let p = out.join(MANIFEST);
        let tmp = out.join(format!(".{MANIFEST}.tmp-{}", std::process::id()));
        let text = serde_json::to_vec_pretty(self).expect("manifest serializes");
        // A run that changed nothing leaves the file (and its mtime) alone.
        if std::fs::read(&p).is_ok_and(|old| old == text) {
            return Ok(());
        }
        std::fs::write(&tmp, text).map_err(|e| IngestError::io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| IngestError::io(&p, e))
    }
}

/// The staging directory of this process; stale ones of dead runs are removed first.
pub fn staging_dir(out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).map_err(|e| IngestError::io(out, e))?;
    if let Ok(rd) = std::fs::read_dir(out) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".staging-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let s = out.join(format!(".staging-{}", std::process::id()));
    std::fs::create_dir_all(&s).map_err(|e| IngestError::io(&s, e))?;
    Ok(s)
}

/// Moves one input's parts from staging into the dataset and removes its previous parts.
pub fn commit(out: &Path, staging: &Path, new: &Entry, old: Option<&Entry>) -> Result<()> {
    for rel in &new.parts {
        let (from, to) = (staging.join(rel), out.join(rel));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| IngestError::io(dir, e))?;
        }
        std::fs::rename(&from, &to).map_err(|e| IngestError::io(&to, e))?;
    }
    for rel in old.map(|o| o.parts.as_slice()).unwrap_or_default() {
        if !new.parts.contains(rel) {
            let p = out.join(rel);
            let _ = std::fs::remove_file(&p);
            prune_empty(out, p.parent());
        }
    }
    Ok(())
}

fn prune_empty(out: &Path, mut dir: Option<&Path>) {
    while let Some(d) = dir {
        if d == out || std::fs::remove_dir(d).is_err() {
            return;
        }
        dir = d.parent();
    }
}
