//! Which reader a file needs: by name where the name is certain (`.jsonl`, `.csv`), else by
//! its first 64 KiB (decompressed), else, for SQLite, by its tables.
//!
//! Detection is its own stage, before any reader runs: the readers never look at each
//! other's formats, and `dataset` (discovery, manifest, commit) never opens a file's content.

use std::io::Read;
use std::path::Path;

use crate::error::{IngestError, Result};
pub use crate::format::Format;

/// Why a file aorta finds by name cannot be read as it is, with what to do instead: an
/// Nsight Systems report (`.nsys-rep`, `.qdrep`) needs its SQLite export. Named on the command
/// line it is an error; found in a walk it is skipped with this reason.
pub(crate) fn unreadable(path: &Path) -> Option<&'static str> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    (name.ends_with(".nsys-rep") || name.ends_with(".qdrep")).then_some(
        "an Nsight Systems report: aorta reads its SQLite export (nsys export --type sqlite)",
    )
}

/// Decides the reader: `.jsonl` by name, otherwise by content: SQLite databases by what
/// their tables are, one JSON object per line is JSONL, a trace with Kineto's markers is
/// Kineto, any other Chrome trace is generic Chrome.
pub fn detect(path: &Path) -> Result<Format> {
    // Before any reader: an empty input is said to be one, whatever its name or format,
    // not reported as a trace cut off at byte 0.
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(IngestError::file(path, EMPTY));
    }
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.contains(".jsonl") {
        return Ok(Format::Jsonl);
    }
    if name.ends_with(".csv") {
        return Ok(Format::RocprofCsv);
    }
    if let Some(why) = unreadable(path) {
        return Err(IngestError::file(path, why));
    }
    let (r, _) =
        crate::source::open(path, Default::default()).map_err(|e| IngestError::io(path, e))?;
    let mut head = Vec::new();
    if r.take(1 << 16).read_to_end(&mut head).is_err() {
        // Corrupt compressed data: the trace reader reports it, with the offset where it broke.
        return Ok(Format::Kineto);
    }
    if head.len() < 1 << 16 && head.iter().all(u8::is_ascii_whitespace) {
        // The whole file is nothing but blanks (or a compressed file of nothing). A longer
        // run of blanks is a trace's business: its reader says where it stops being one.
        return Err(IngestError::file(path, EMPTY));
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
    let whole = head.len() < 1 << 16;
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

/// What an input with no content (no bytes, only blanks, or compressed nothing) is called.
const EMPTY: &str = "empty file";

/// The first 16 bytes of every SQLite 3 database.
pub(crate) const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

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
pub(crate) fn is_generic_chrome(head: &[u8]) -> bool {
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => true,
        Some(b'{') => !KINETO_MARKERS
            .iter()
            .any(|m| memchr::memmem::find(head, m).is_some()),
        _ => false,
    }
}
