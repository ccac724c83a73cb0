//! rocpd SQLite (`<pid>_results.db`, rocprofv3's default output since ROCm 7; FORMATS.md §2.5).
//!
//! The physical tables carry a per-file uuid suffix, so this reads only the unsuffixed data
//! views rocprofv3 creates (`kernels`, `memory_copies`, `regions`), which also resolve names,
//! agents and streams. Rows are streamed from SQLite in id order; nothing is held but the
//! current batch. Unlike CSV/JSON, rocpd keeps the process environment, so torchrun's
//! `RANK`/`WORLD_SIZE` give the rank.
//!
//! Steps and RCCL collectives (`links`): the regions are read first, for what the kernels
//! and copies need, then the kernels, copies, and the regions again as rows. rocprofiler-sdk's
//! `generateRocpd.cpp` writes every API record as a region (or, when start = end, a sample)
//! whose event's `category_id` is the kind name (`MARKER_CORE_RANGE_API`, `RCCL_API`, …), name
//! the operation (`roctxThreadRangeA`, `ncclAllReduce`) and `stack_id` the correlation id the
//! kernels' events carry too; a marker range's message is only in the event's `extdata`
//! (`{"message": …}`, read by its `range_markers` view). So a marker region is named by that
//! message, as the CSV output names it, and a kernel's launch is the region of its `stack_id`.

use crate::format::Format;
use std::path::Path;

use rusqlite::{Connection, Row};
use serde_json::Value;

use super::links::{ApiLinks, Call};
use super::{Api, Dispatch, Emit, MemoryCopy};
use crate::classify::Kind;
use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};

/// Whether an open database is rocpd: it has the `rocpd_metadata` table or view.
pub(crate) fn is_rocpd(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE name = 'rocpd_metadata'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .is_ok_and(|n| n > 0)
}

fn open(path: &Path) -> Result<Connection> {
    crate::sqlite::open_read_only(path).map_err(|e| sql_err(path, e))
}

fn sql_err(path: &Path, e: rusqlite::Error) -> IngestError {
    IngestError::file(path, format!("SQLite: {e}"))
}

fn not_rocpd(path: &Path) -> IngestError {
    IngestError::file(
        path,
        "SQLite database that is not a rocpd database (no rocpd_metadata table)",
    )
}

/// `rocpd_metadata.schema_version`; only major version 3 is known.
fn schema_version(path: &Path, conn: &Connection) -> Result<String> {
    let v: String = conn
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| {
            IngestError::file(path, format!("rocpd_metadata has no schema_version: {e}"))
        })?;
    if v.split('.').next() != Some("3") {
        return Err(IngestError::file(
            path,
            format!("rocpd schema_version {v} is not supported (aorta reads schema 3)"),
        ));
    }
    Ok(v)
}

/// The OS pids of the profiled processes, for the rank map.
fn pids(conn: &Connection) -> Vec<i64> {
    let Ok(mut st) = conn.prepare("SELECT pid FROM rocpd_info_process ORDER BY id") else {
        return vec![];
    };
    let rows = st.query_map([], |r| r.get::<_, Option<i64>>(0));
    rows.into_iter().flatten().flatten().flatten().collect()
}

/// (rank, world size) from the first process environment that has `RANK`.
fn rank_from_env(conn: &Connection) -> (Option<i64>, Option<i64>) {
    let Ok(mut st) = conn.prepare("SELECT environment FROM rocpd_info_process ORDER BY id") else {
        return (None, None);
    };
    let envs = st.query_map([], |r| r.get::<_, Option<String>>(0));
    let int = |v: &Value, k: &str| {
        v.get(k)
            .and_then(|x| x.as_i64().or_else(|| x.as_str()?.trim().parse().ok()))
    };
    for env in envs.into_iter().flatten().flatten().flatten() {
        let Ok(v) = serde_json::from_str::<Value>(&env) else {
            continue;
        };
        if let Some(rank) = int(&v, "RANK") {
            return (Some(rank), int(&v, "WORLD_SIZE"));
        }
    }
    (None, None)
}

fn gpu_names(conn: &Connection) -> Vec<(i64, String)> {
    let sql = "SELECT type_index, coalesce(nullif(product_name, ''), name) FROM rocpd_info_agent WHERE type = 'GPU'";
    let Ok(mut st) = conn.prepare(sql) else {
        return vec![];
    };
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<String>>(1)?)));
    rows.into_iter()
        .flatten()
        .flatten()
        .map(|(i, n)| (i, n.unwrap_or_default()))
        .collect()
}

/// Runs `sql` and calls `f` on each row; errors name the view.
fn each(
    path: &Path,
    conn: &Connection,
    view: &str,
    sql: &str,
    mut f: impl FnMut(&Row) -> Result<()>,
) -> Result<()> {
    let err = |e: rusqlite::Error| IngestError::file(path, format!("reading view {view}: {e}"));
    let mut st = conn.prepare(sql).map_err(err)?;
    let mut rows = st.query([]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        f(r)?;
    }
    Ok(())
}

const KERNELS: &str =
    "SELECT agent_type_index, stream_id, name, start, \"end\", stack_id, corr_id, \
    grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z FROM kernels ORDER BY id";
const COPIES: &str = "SELECT CASE WHEN dst_agent_type = 'GPU' OR src_agent_type IS NOT 'GPU' \
    THEN dst_agent_type_index ELSE src_agent_type_index END, stream_id, name, start, \"end\", \
    stack_id, size FROM memory_copies ORDER BY id";
const REGIONS: &str = "SELECT category, name, pid, tid, start, \"end\", stack_id, corr_id, \
    extdata FROM regions ORDER BY id";

/// Columns 2–4 of a kernel or copy row: its name and start/end; a row without both times is
/// counted (`missing_timestamp`) and skipped.
fn timed_name(
    path: &Path,
    r: &rusqlite::Row,
    emit: &mut Emit,
    what: &str,
) -> Result<Option<(String, i64, i64)>> {
    let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
    let name: String = r
        .get::<_, Option<String>>(2)
        .map_err(|e| sql_err(path, e))?
        .unwrap_or_default();
    let (Some(start), Some(end)) = (get(3)?, get(4)?) else {
        emit.diag("missing_timestamp", || {
            format!("{name}: {what} without start/end")
        });
        return Ok(None);
    };
    Ok(Some((name, start, end)))
}

fn kernels(path: &Path, conn: &Connection, emit: &mut Emit) -> Result<()> {
    each(path, conn, "kernels", KERNELS, |r| {
        let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
        let Some((name, start, end)) = timed_name(path, r, emit, "kernel")? else {
            return Ok(());
        };
        let class = emit.classify(Kind::Kernel, &name);
        let d = Dispatch {
            device: get(0)?.unwrap_or(-1),
            stream: get(1)?.unwrap_or(0),
            name: &name,
            start,
            end,
            correlation: get(5)?,
            external: get(6)?,
            grid: [get(7)?, get(8)?, get(9)?],
            workgroup: [get(10)?, get(11)?, get(12)?],
        };
        emit.kernel(&d, class)
    })
}

fn copies(path: &Path, conn: &Connection, emit: &mut Emit) -> Result<()> {
    each(path, conn, "memory_copies", COPIES, |r| {
        let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
        let Some((name, start, end)) = timed_name(path, r, emit, "copy")? else {
            return Ok(());
        };
        let c = MemoryCopy {
            device: get(0)?.unwrap_or(-1),
            stream: get(1)?.unwrap_or(0),
            name: if name.is_empty() {
                "MEMORY_COPY"
            } else {
                &name
            },
            start,
            end,
            correlation: get(5)?,
            bytes: get(6)?,
        };
        emit.copy(&c)
    })
}

/// A region row as read: its domain, its name (a marker's message), and its times when it
/// has both.
struct Region {
    domain: String,
    name: String,
    times: Option<(i64, i64)>,
}

fn region(path: &Path, r: &Row) -> Result<Region> {
    let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
    let text = |i| r.get::<_, Option<String>>(i).map_err(|e| sql_err(path, e));
    let (domain, mut name) = (text(0)?.unwrap_or_default(), text(1)?.unwrap_or_default());
    if super::is_marker(&domain) {
        if let Some(m) = text(8)?.as_deref().and_then(message) {
            name = m;
        }
    }
    let times = get(4)?.zip(get(5)?);
    Ok(Region {
        domain,
        name,
        times,
    })
}

/// The roctx message in a marker event's `extdata`.
fn message(extdata: &str) -> Option<String> {
    let v: Value = serde_json::from_str(extdata).ok()?;
    Some(v.get("message")?.as_str()?.to_string())
}

/// The step spans, RCCL calls and launches of the regions, before any kernel is read.
fn links(path: &Path, conn: &Connection, job: &FileJob) -> Result<ApiLinks> {
    let marker = &job.step_marker;
    let mut links = ApiLinks::new((**marker).clone()).spooling_to(job.staging.clone());
    each(path, conn, "regions", REGIONS, |r| {
        let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
        let g = region(path, r)?;
        if let Some((start, end)) = g.times {
            let call = Call {
                domain: &g.domain,
                name: &g.name,
                tid: get(3)?,
                start,
                end,
                correlation: get(6)?,
            };
            links
                .note(&call)
                .map_err(|msg| IngestError::file(path, format!("reading view regions: {msg}")))?;
        }
        Ok(())
    })?;
    links.seal().map_err(|e| IngestError::io(&job.staging, e))?;
    Ok(links)
}

fn regions(path: &Path, conn: &Connection, emit: &mut Emit) -> Result<()> {
    each(path, conn, "regions", REGIONS, |r| {
        let get = |i| r.get::<_, Option<i64>>(i).map_err(|e| sql_err(path, e));
        let g = region(path, r)?;
        let Some((start, end)) = g.times else {
            emit.diag("missing_timestamp", || {
                format!("{}: region without start/end", g.name)
            });
            return Ok(());
        };
        let a = Api {
            domain: &g.domain,
            name: &g.name,
            pid: get(2)?,
            tid: get(3)?,
            start,
            end,
            correlation: get(6)?,
            external: get(7)?,
        };
        emit.api(&a)
    })
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let path = job.path.as_path();
    let conn = open(path)?;
    if !is_rocpd(&conn) {
        return Err(not_rocpd(path));
    }
    let version = schema_version(path, &conn)?;
    let hash = job.hash()?;
    let mut info = RunInfo::new(Format::Rocpd, hash);
    let (rank, world) = rank_from_env(&conn);
    info.world_size = world;
    info.runtime_version = Some(format!("rocpd_schema_version={version}"));
    let parts = super::parts_for(job, &mut info, rank, &pids(&conn));
    let mut emit = Emit::new(&job.classifier, &parts, super::QUEUE);
    emit.links = links(path, &conn, job)?;
    let res = kernels(path, &conn, &mut emit)
        .and_then(|()| copies(path, &conn, &mut emit))
        .and_then(|()| regions(path, &conn, &mut emit));
    let unread = emit.links.take_read_error();
    // Every row has its step: the spans leave the links (no copy of a span per step), and
    // the launches' lookups go before the sinks' last flush.
    let spans = std::mem::take(&mut emit.links).into_spans();
    let events = emit.events;
    let out = emit.finish();
    res?;
    if let Some(e) = unread {
        return Err(IngestError::io(&job.staging, e));
    }
    let names = gpu_names(&conn);
    let name_of = |d: i64| names.iter().find(|(i, _)| *i == d).map(|(_, n)| n.clone());
    super::finish(job, info, &parts, (out?, &spans), events, &name_of)
}
