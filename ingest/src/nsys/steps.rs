//! Steps of an export: NVTX ranges named `ProfilerStep#N` (what the PyTorch profiler's
//! `record_function` emits under `nsys --trace nvtx`), per process, and the runtime calls
//! whose correlation ids give each kernel the step it was launched in.
//!
//! Why the runtime calls go through `kineto::launches`: held as a sorted vector they cost 24
//! bytes a call (~1,450 calls per MB of export), so an export of a few GB passed 256 MB of
//! peak RSS. They are read once, in the table's order, into a spool in the staging
//! directory, and kept as the Kineto reader keeps its launches: a compact (process,
//! correlation) → step lookup, exact about which calls exist. Of calls that repeat a
//! (process, correlation) pair, which CUPTI never writes, the first in the table counts.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use rustc_hash::FxHashMap;

use super::has_table;
use super::ranks::{pid_of, pid_sql};
use crate::kineto::launches::{self, LaunchLog, LaunchSteps};
use crate::step_span::{self, Span, StepMarker, MAX_STEP_SPANS};

/// NVTX event types aorta reads: marks (34), push/pop ranges (59), start/end ranges (60),
/// as the export's own `ENUM_NSYS_EVENT_TYPE` numbers them (2024.5 sample).
pub(super) const NVTX_TYPES: &str = "(34, 59, 60)";

#[derive(Default)]
pub(super) struct Steps {
    /// pid → step spans (session-relative ns), sorted by start.
    spans: FxHashMap<i64, Vec<Span>>,
    /// The step of every runtime call (`None` without step ranges), by `launch_key`.
    launches: LaunchSteps,
    /// Runtime calls whose process or correlation `launch_key` cannot hold (none in a real
    /// export): (pid, correlation) → start, the earliest kept.
    odd: BTreeMap<(i64, i64), i64>,
}

/// Why the runtime calls could not be read or kept.
#[derive(Debug)]
pub(super) enum LoadError {
    Sql(rusqlite::Error),
    Spool(std::io::Error),
    /// More step ranges than `MAX_STEP_SPANS`: which range passed the limit.
    TooManySteps(String),
}

impl From<rusqlite::Error> for LoadError {
    fn from(e: rusqlite::Error) -> Self {
        LoadError::Sql(e)
    }
}

/// One key for a (process, correlation) pair: CUPTI's correlation ids are 32-bit and
/// `ranks::pid_of` gives 24-bit processes, so each process's calls fill a range of keys of
/// its own, as dense as its correlation ids.
fn launch_key(pid: i64, corr: i64) -> Option<i64> {
    ((0..1 << 31).contains(&pid) && (0..1 << 32).contains(&corr)).then_some(pid << 32 | corr)
}

impl Steps {
    /// Reads the step ranges and the runtime calls; the calls wait in a spool in `dir`.
    pub(super) fn load(
        conn: &Connection,
        marker: &StepMarker,
        dir: &Path,
    ) -> Result<Steps, LoadError> {
        let mut s = Steps::default();
        if has_table(conn, "NVTX_EVENTS") {
            s.load_spans(conn, marker)?;
        }
        if has_table(conn, "CUPTI_ACTIVITY_KIND_RUNTIME") {
            s.load_launches(conn, dir)?;
        }
        Ok(s)
    }

    /// The step ranges, per process; an error past `MAX_STEP_SPANS` of them, naming the range
    /// that passes it.
    fn load_spans(&mut self, conn: &Connection, marker: &StepMarker) -> Result<(), LoadError> {
        // SQLite picks `ProfilerStep#` ranges by prefix; a `--step-marker` regex sees them all.
        let prefix = if marker.is_profiler_step() {
            " AND COALESCE(n.text, s.value) LIKE 'ProfilerStep#%'"
        } else {
            ""
        };
        let q = format!(
            "SELECT n.start, n.end, n.globalTid, COALESCE(n.text, s.value) FROM NVTX_EVENTS n \
             LEFT JOIN StringIds s ON s.id = n.textId \
             WHERE n.eventType IN {NVTX_TYPES}{prefix}"
        );
        let mut st = conn.prepare(&q)?;
        let mut rows = st.query([])?;
        let mut count = 0;
        while let Some(r) = rows.next()? {
            let name: Option<String> = r.get(3)?;
            let Some(step) = name.as_deref().and_then(|n| marker.step(n.as_bytes())) else {
                continue;
            };
            let start: i64 = r.get(0)?;
            count += 1;
            if count > MAX_STEP_SPANS {
                let name = name.unwrap_or_default();
                return Err(LoadError::TooManySteps(format!(
                    "NVTX_EVENTS: {}: the range `{name}` that starts at {start} ns passes it",
                    step_span::too_many_steps()
                )));
            }
            let end = r.get::<_, Option<i64>>(1)?.unwrap_or(start).max(start);
            let pid = pid_of(r.get(2)?);
            self.spans
                .entry(pid)
                .or_default()
                .push(Span { start, end, step });
        }
        for v in self.spans.values_mut() {
            v.sort_by_key(|s| (s.start, s.end));
        }
        Ok(())
    }

    fn load_launches(&mut self, conn: &Connection, dir: &Path) -> Result<(), LoadError> {
        let q = format!(
            "SELECT {}, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME \
             WHERE correlationId IS NOT NULL",
            pid_sql("globalTid")
        );
        let mut st = conn.prepare(&q)?;
        let mut rows = st.query([])?;
        let mut log = LaunchLog::in_dir(dir.to_path_buf());
        let mut chunk = Vec::with_capacity(4096);
        while let Some(r) = rows.next()? {
            let (pid, corr, start): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
            match launch_key(pid, corr) {
                Some(key) => chunk.push((key, start, pid)),
                None => {
                    let t = self.odd.entry((pid, corr)).or_insert(start);
                    *t = (*t).min(start);
                }
            }
            if chunk.len() == chunk.capacity() {
                launches::log(&mut log, &chunk).map_err(LoadError::Spool)?;
                chunk.clear();
            }
        }
        launches::log(&mut log, &chunk).map_err(LoadError::Spool)?;
        // A process without step ranges gives its calls no step (`at`).
        let steps = LaunchSteps::build(log, |_: &mut (), pid, ts| self.at(pid, ts), 1);
        self.launches = steps.map_err(LoadError::Spool)?;
        Ok(())
    }

    /// Whether process `pid` has step ranges.
    pub(super) fn has_steps_in(&self, pid: i64) -> bool {
        self.spans.contains_key(&pid)
    }

    /// Every step span of these processes, sorted by start.
    pub(super) fn spans_of(&self, pids: &[i64]) -> Vec<Span> {
        let mut v: Vec<Span> = pids
            .iter()
            .filter_map(|p| self.spans.get(p))
            .flatten()
            .copied()
            .collect();
        v.sort_by_key(|s| (s.start, s.end));
        v
    }

    /// The step of a CPU time in process `pid`.
    pub(super) fn at(&self, pid: i64, ts: i64) -> Option<i64> {
        let spans = self.spans.get(&pid)?;
        let n = spans.partition_point(|s| s.start <= ts);
        spans[..n]
            .iter()
            .rev()
            .take(4)
            .find(|s| ts <= s.end)
            .map(|s| s.step)
    }

    /// The error a read of the launch lookup's file met, if one did.
    pub(super) fn take_read_error(&self) -> Option<std::io::Error> {
        self.launches.take_read_error()
    }

    /// `Some(step of the launch)` when process `pid` made a runtime call with `corr`.
    pub(super) fn launch(&self, pid: i64, corr: i64) -> Option<Option<i64>> {
        match launch_key(pid, corr) {
            Some(key) => self.launches.get(key),
            None => {
                let &start = self.odd.get(&(pid, corr))?;
                Some(self.at(pid, start))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A serialized global id of process `pid` (`ranks::pid_of` reads it back).
    fn gtid(pid: i64) -> i64 {
        pid << 24 | 7
    }

    /// Every runtime call's answer, against a brute-force reading of the same rows: more calls
    /// than the spool holds in memory, correlations repeated (the first row counts), shared by
    /// processes, and out of the key's range (negative, past 32 bits).
    #[test]
    fn launches_match_a_brute_force_reading() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, globalTid INTEGER,
               correlationId INTEGER);
             CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
               text TEXT, globalTid INTEGER, textId INTEGER);
             CREATE TABLE StringIds (id INTEGER, value TEXT);",
        )
        .unwrap();
        // Steps 0..=9 of 1,000 ns each in processes 1 and 2; process 3 has none.
        for pid in [1, 2] {
            for k in 0..10 {
                c.execute(
                    "INSERT INTO NVTX_EVENTS VALUES (?1, ?2, 59, ?3, ?4, NULL)",
                    rusqlite::params![
                        k * 1000,
                        k * 1000 + 999,
                        format!("ProfilerStep#{k}"),
                        gtid(pid)
                    ],
                )
                .unwrap();
            }
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rows = Vec::new();
        for i in 0..150_000i64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pid = 1 + (x % 3) as i64;
            let corr = match x % 97 {
                0 => -((x >> 8) as i64 % 50) - 1,
                1 => (1 << 32) + (x >> 8) as i64 % 50,
                _ => i / 2 + (x >> 40) as i64 % 7,
            };
            let start = ((x >> 20) % 12_000) as i64 - 500;
            rows.push((pid, corr, start));
        }
        let tx = c.unchecked_transaction().unwrap();
        for &(pid, corr, start) in &rows {
            tx.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, ?3)",
                rusqlite::params![start, gtid(pid), corr],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let steps = Steps::load(&c, &StepMarker::default(), dir.path()).unwrap();
        // The brute force: the first row of each (process, correlation), its start's step.
        let mut first: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        for &(pid, corr, start) in &rows {
            first.entry((pid, corr)).or_insert(start);
        }
        let step_of =
            |pid: i64, ts: i64| (pid != 3 && (0..10_000).contains(&ts)).then_some(ts / 1000);
        for (&(pid, corr), &start) in &first {
            let (key_ok, odd_first) =
                (launch_key(pid, corr).is_some(), steps.odd.get(&(pid, corr)));
            // Out-of-range pairs keep the earliest start, as the sorted vector did.
            let want = if key_ok {
                step_of(pid, start)
            } else {
                step_of(pid, *odd_first.unwrap())
            };
            assert_eq!(steps.launch(pid, corr), Some(want), "{pid} {corr}");
            if !first.contains_key(&(pid, corr + 1)) {
                assert_eq!(steps.launch(pid, corr + 1), None, "{pid} {}", corr + 1);
            }
        }
        let earliest = rows.iter().filter(|r| launch_key(r.0, r.1).is_none()).fold(
            BTreeMap::new(),
            |mut m, &(p, c, s)| {
                let t = m.entry((p, c)).or_insert(s);
                *t = (*t).min(s);
                m
            },
        );
        assert_eq!(steps.odd, earliest);
        assert!(!steps.odd.is_empty());
        assert_eq!(steps.launch(3, 1 << 31), None);
    }

    /// Past `MAX_STEP_SPANS` step ranges an export is refused, naming the range that passes
    /// the limit; exactly as many are read. One table of `MAX_STEP_SPANS` `ProfilerStep#k`
    /// ranges and one `train_step` range: the default marker picks the former, a marker that
    /// names both one range too many.
    #[test]
    fn step_ranges_past_the_limit_are_refused() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
               text TEXT, globalTid INTEGER, textId INTEGER);
             CREATE TABLE StringIds (id INTEGER, value TEXT);
             WITH RECURSIVE k(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM k WHERE x + 1 < {MAX_STEP_SPANS})
             INSERT INTO NVTX_EVENTS SELECT 10 * x, 10 * x + 9, 59, 'ProfilerStep#' || x, {}, NULL FROM k;
             INSERT INTO NVTX_EVENTS VALUES (77, 78, 59, 'train_step 3', {}, NULL);",
            gtid(1),
            gtid(2),
        ))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let steps = Steps::load(&c, &StepMarker::default(), dir.path()).unwrap();
        let spans = steps.spans_of(&[1]);
        assert_eq!(spans.len(), MAX_STEP_SPANS);
        let last = MAX_STEP_SPANS as i64 - 1;
        assert_eq!(
            spans.last(),
            Some(&Span {
                start: 10 * last,
                end: 10 * last + 9,
                step: last
            })
        );
        let both = StepMarker::parse(r"^(?:ProfilerStep#|train_step )(\d+)$").unwrap();
        let Err(LoadError::TooManySteps(msg)) = Steps::load(&c, &both, dir.path()) else {
            panic!("one range past the limit is refused");
        };
        assert_eq!(
            msg,
            "NVTX_EVENTS: more than 1000000 step ranges (ProfilerStep#N, or --step-marker's) in \
             one trace: aorta's limit (a real profile holds thousands): the range `train_step 3` \
             that starts at 77 ns passes it"
        );
    }
}
