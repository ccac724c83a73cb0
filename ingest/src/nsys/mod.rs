//! Nsight Systems SQLite exports (`nsys export --type sqlite`, FORMATS.md §4), both schema
//! generations (2022 `EXPORT_META_DATA`, 2024 `META_DATA_EXPORT`).
//!
//! Why SQL and not a file walk: the export is a relational database whose names are ids into
//! `StringIds` and whose tables exist only when they have rows; SQLite itself (bundled through
//! `rusqlite`, no system library) streams each table in start order, so memory stays bounded
//! by the sink's buffers plus one (pid, correlation, start) triple per runtime call, the
//! launches that give kernels their steps.
//!
//! One export may hold several processes (an MPI job under one `nsys`): each process is a
//! rank (see `ranks`), and each rank gets its own partitions and `runs` row. Timestamps are
//! ns from the session start; `TARGET_INFO_SESSION_START_TIME.utcEpochNs` makes them absolute.

mod ranks;
mod rows;
mod steps;

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;

use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome};

/// Opens a database read-only, writing nothing beside it (`crate::sqlite`).
pub(crate) fn open(path: &Path) -> Result<Connection> {
    crate::sqlite::open_read_only(path)
        .map_err(|e| IngestError::file(path, format!("opening SQLite database: {e}")))
}

/// Whether the database has a table (or view) of this name.
pub(crate) fn has_table(conn: &Connection, name: &str) -> bool {
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1",
        [name],
        |_| Ok(()),
    )
    .is_ok()
}

/// An Nsight Systems export: `StringIds` and either export metadata table or CUPTI activity
/// (tables are created lazily, so no single activity table is guaranteed).
pub(crate) fn is_nsys(conn: &Connection) -> bool {
    has_table(conn, "StringIds")
        && [
            "META_DATA_EXPORT",
            "EXPORT_META_DATA",
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
        ]
        .iter()
        .any(|t| has_table(conn, t))
}

/// What the export says about itself and its machine.
#[derive(Debug, Default, Clone)]
pub(crate) struct Meta {
    /// `TARGET_INFO_SESSION_START_TIME.utcEpochNs`: added to every timestamp.
    pub base_ns: Option<i64>,
    /// e.g. `nsys 2024.5.1.113, export schema 3.13.2`.
    pub version: Option<String>,
    /// Device id → name (`TARGET_INFO_GPU`).
    pub gpus: BTreeMap<i64, String>,
}

fn meta(conn: &Connection) -> rusqlite::Result<Meta> {
    let mut m = Meta::default();
    if has_table(conn, "TARGET_INFO_SESSION_START_TIME") {
        m.base_ns = conn
            .query_row(
                "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1",
                [],
                |r| r.get(0),
            )
            .ok()
            // A session start past `TIME_LIMIT_NS` is no time: the times stay relative.
            .filter(|&b| crate::json::usable_time(b));
    }
    for table in ["META_DATA_EXPORT", "EXPORT_META_DATA"] {
        if has_table(conn, table) {
            // (name, value) in both generations; read by position, as raw values: a typed
            // `get` that fails names the column in its error, and rusqlite panics on a
            // column name that is not UTF-8 (a damaged schema; found by the fuzzer).
            let mut st = conn.prepare(&format!("SELECT * FROM {table}"))?;
            let kv: BTreeMap<String, String> = st
                .query_map([], |r| Ok((text(r.get_ref(0)?), text(r.get_ref(1)?))))?
                .filter_map(|r| r.ok())
                .filter_map(|(k, v)| Some((k?, v?)))
                .collect();
            let product = kv.get("EXPORT_PRODUCT_VERSION");
            let schema = kv.get("EXPORT_SCHEMA_VERSION");
            m.version = match (product, schema) {
                (Some(p), Some(s)) => Some(format!("nsys {p}, export schema {s}")),
                (Some(p), None) => Some(format!("nsys {p}")),
                (None, Some(s)) => Some(format!("export schema {s}")),
                (None, None) => None,
            };
        }
    }
    if has_table(conn, "TARGET_INFO_GPU") {
        let mut st = conn.prepare("SELECT id, name FROM TARGET_INFO_GPU")?;
        m.gpus = st
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<String>>(1)?)))?
            .filter_map(|r| r.ok())
            .filter_map(|(id, n)| Some((id, n?)))
            .collect();
    }
    Ok(m)
}

/// A TEXT value that is UTF-8, else `None` (what `get::<String>` accepts).
fn text(v: rusqlite::types::ValueRef<'_>) -> Option<String> {
    match v {
        rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t).ok().map(str::to_string),
        _ => None,
    }
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let sql = |e: rusqlite::Error| {
        IngestError::file(&job.path, format!("reading the Nsight Systems export: {e}"))
    };
    let content_hash = job.hash()?;
    let conn = open(&job.path)?;
    if !is_nsys(&conn) {
        return Err(IngestError::file(&job.path, "not an Nsight Systems export"));
    }
    let meta = meta(&conn).map_err(sql)?;
    let pids = ranks::pids(&conn).map_err(sql)?;
    let groups = ranks::assign(job, &pids, content_hash);
    let steps = steps::Steps::load(&conn, &job.step_marker, &job.staging).map_err(|e| match e {
        steps::LoadError::Sql(e) => sql(e),
        steps::LoadError::Spool(e) => IngestError::io(&job.staging, e),
        steps::LoadError::TooManySteps(msg) => IngestError::file(&job.path, msg),
    })?;
    let mut router = rows::Router::new(job, groups, &meta, steps);
    router.read_all(&conn).map_err(|e| match e {
        rows::Error::Sql(e) => sql(e),
        rows::Error::Ingest(e) => e,
    })?;
    router.finish(&meta)
}
