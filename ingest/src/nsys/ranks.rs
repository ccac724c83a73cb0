//! Which rank each process of an export is.
//!
//! Rules (docs/INPUTS.md): a pid named by `--rank-map` gets that rank; an export of one
//! process takes its rank like any file (file name, then `--rank`, then 0); in an export of
//! several processes, unmapped ones are numbered in ascending pid order. Processes that land
//! on the same rank share its partitions.

use crate::file::RankSource;
use crate::format::Format;
use std::collections::BTreeMap;

use rusqlite::Connection;

use super::has_table;
use crate::file::{FileJob, RunInfo};

/// The tables whose rows belong to a process, and the column that names it.
pub(super) const PROCESS_COLUMNS: [(&str, &str); 5] = [
    ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid"),
    ("CUPTI_ACTIVITY_KIND_MEMSET", "globalPid"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
    ("NVTX_EVENTS", "globalTid"),
];

/// The OS pid inside a serialized `globalPid`/`globalTid` (FORMATS.md §4), as SQL.
pub(super) fn pid_sql(column: &str) -> String {
    format!("(({column} >> 24) & 16777215)")
}

/// The OS pid inside a serialized global id.
pub(super) fn pid_of(global: Option<i64>) -> i64 {
    global.map_or(0, |g| (g >> 24) & 0xFF_FFFF)
}

/// Every process with a row in a table aorta reads, ascending.
pub(super) fn pids(conn: &Connection) -> rusqlite::Result<Vec<i64>> {
    let selects: Vec<String> = PROCESS_COLUMNS
        .iter()
        .filter(|(t, _)| has_table(conn, t))
        .map(|(t, c)| format!("SELECT DISTINCT {} FROM {t}", pid_sql(c)))
        .collect();
    if selects.is_empty() {
        return Ok(Vec::new());
    }
    let q = format!("SELECT * FROM ({}) ORDER BY 1", selects.join(" UNION "));
    let mut st = conn.prepare(&q)?;
    let pids = st.query_map([], |r| r.get::<_, Option<i64>>(0))?;
    let mut out: Vec<i64> = pids
        .filter_map(|p| p.ok())
        .map(|p| p.unwrap_or(0))
        .collect();
    out.dedup();
    Ok(out)
}

/// One rank's share of the export.
pub(super) struct Group {
    pub rank: i64,
    pub pids: Vec<i64>,
    pub info: RunInfo,
}

/// Assigns every pid a rank and groups the pids by rank (at least one group).
pub(super) fn assign(job: &FileJob, pids: &[i64], content_hash: String) -> Vec<Group> {
    let new_info = || RunInfo::new(Format::Nsys, content_hash.clone());
    if pids.len() <= 1 {
        let mut info = new_info();
        let rank = info.resolve_rank_of(job, None, pids);
        return vec![Group {
            rank,
            pids: pids.to_vec(),
            info,
        }];
    }
    let mut by_rank: BTreeMap<i64, Group> = BTreeMap::new();
    for (i, &pid) in pids.iter().enumerate() {
        let (rank, source) = match job.rank_map.get(pid) {
            Some(r) => (r, RankSource::RankMap),
            None => (i as i64, RankSource::PidOrder),
        };
        let g = by_rank.entry(rank).or_insert_with(|| {
            let mut info = new_info();
            info.rank = rank;
            info.rank_source = source;
            Group {
                rank,
                pids: Vec::new(),
                info,
            }
        });
        g.pids.push(pid);
    }
    by_rank.into_values().collect()
}
