//! Steps of an export: NVTX ranges named `ProfilerStep#N` (what the PyTorch profiler's
//! `record_function` emits under `nsys --trace nvtx`), per process, and the runtime calls
//! whose correlation ids give each kernel the step it was launched in.

use rusqlite::Connection;
use rustc_hash::FxHashMap;

use super::has_table;
use super::ranks::{pid_of, pid_sql};
use crate::step_span::{Span, StepMarker};

/// NVTX event types aorta reads: marks (34), push/pop ranges (59), start/end ranges (60),
/// as the export's own `ENUM_NSYS_EVENT_TYPE` numbers them (2024.5 sample).
pub(super) const NVTX_TYPES: &str = "(34, 59, 60)";

#[derive(Default)]
pub(super) struct Steps {
    /// pid → step spans (session-relative ns), sorted by start.
    spans: FxHashMap<i64, Vec<Span>>,
    /// (pid, correlation, start) of every runtime call, sorted; loaded only with steps.
    launches: Vec<(i64, i64, i64)>,
    /// (pid, correlation) of every runtime call, sorted: whether a kernel has a launch.
    known: Vec<(i64, i64)>,
}

impl Steps {
    pub(super) fn load(conn: &Connection, marker: &StepMarker) -> rusqlite::Result<Steps> {
        let mut s = Steps::default();
        if has_table(conn, "NVTX_EVENTS") {
            s.load_spans(conn, marker)?;
        }
        if has_table(conn, "CUPTI_ACTIVITY_KIND_RUNTIME") {
            s.load_launches(conn)?;
        }
        Ok(s)
    }

    fn load_spans(&mut self, conn: &Connection, marker: &StepMarker) -> rusqlite::Result<()> {
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
        while let Some(r) = rows.next()? {
            let name: Option<String> = r.get(3)?;
            let Some(step) = name.and_then(|n| marker.step(n.as_bytes())) else {
                continue;
            };
            let start: i64 = r.get(0)?;
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

    fn load_launches(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let q = format!(
            "SELECT {}, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME \
             WHERE correlationId IS NOT NULL",
            pid_sql("globalTid")
        );
        let mut st = conn.prepare(&q)?;
        let mut rows = st.query([])?;
        let with_steps = !self.spans.is_empty();
        while let Some(r) = rows.next()? {
            let (pid, corr, start) = (r.get(0)?, r.get(1)?, r.get(2)?);
            if with_steps {
                self.launches.push((pid, corr, start));
            } else {
                self.known.push((pid, corr));
            }
        }
        self.launches.sort_unstable();
        self.known.sort_unstable();
        Ok(())
    }

    pub(super) fn has_steps(&self) -> bool {
        !self.spans.is_empty()
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

    /// `Some(step of the launch)` when process `pid` made a runtime call with `corr`.
    pub(super) fn launch(&self, pid: i64, corr: i64) -> Option<Option<i64>> {
        if !self.has_steps() {
            return self.known.binary_search(&(pid, corr)).ok().map(|_| None);
        }
        let i = self.launches.partition_point(|l| (l.0, l.1) < (pid, corr));
        let l = self.launches.get(i).filter(|l| (l.0, l.1) == (pid, corr))?;
        Some(self.at(pid, l.2))
    }
}
