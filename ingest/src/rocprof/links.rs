//! What a rocprofv3 row needs before it is written, taken from the host API records: the
//! step spans (marker ranges that `--step-marker` names, or `ProfilerStep#N`), the RCCL API
//! calls (`ncclAllReduce`…) around the launches of RCCL's kernels, and each launch's thread
//! and time.
//!
//! rocprof has no profiler steps, and RCCL's kernels do not say their collective
//! (`ncclDevKernel_Generic_1`): without these a capture is one step whose communication is
//! all `other`. A kernel's step is the span holding its launch (the API call of its
//! correlation id), else the one holding its GPU start; its collective is that of the RCCL
//! call which, on the launching thread, encloses the launch. All three readers fill these
//! before the rows that need them are written: the CSV reader reads the API files first,
//! the rocpd reader queries the regions first, and the JSON reader, whose file puts the
//! dispatches before the API records, learns the spans and the launches' steps in a
//! pre-pass (`prescan`, kept as a `LaunchSteps`) and holds back the RCCL kernels whose
//! collective an RCCL call must name (with the later dispatches of their streams, `held`).
//!
//! The launches do not stay in memory: they wait in a spool (`kineto::spool`) and `seal`
//! reads them back into two correlation lookups (`kineto::launches`: an index in memory, the
//! blocks in a file once large), so a long capture's launches do not grow the reader's
//! memory (a map of them cost ~48 bytes a launch: ~200 MB for 4.2 M).

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;

use rustc_hash::FxHashMap;

use crate::kineto::launches::{self, Keep, LaunchLog, LaunchSteps};
use crate::step_span::{self, Span, StepMarker, MAX_STEP_SPANS};

/// The collective of each RCCL API function that launches one (data, as the rule table).
const RCCL_KINDS: &[(&str, &str)] = &[
    ("ncclAllReduce", "all_reduce"),
    ("ncclAllGather", "all_gather"),
    ("ncclReduceScatter", "reduce_scatter"),
    ("ncclAllToAll", "all_to_all"),
    ("ncclAllToAllv", "all_to_all"),
    ("ncclBroadcast", "broadcast"),
    ("ncclBcast", "broadcast"),
    ("ncclReduce", "reduce"),
    ("ncclSend", "send_recv"),
    ("ncclRecv", "send_recv"),
];

/// The collective an RCCL API function launches.
pub(crate) fn rccl_kind(function: &str) -> Option<&'static str> {
    RCCL_KINDS
        .iter()
        .find(|(f, _)| *f == function)
        .map(|(_, k)| *k)
}

/// The error for the marker range `name` at `start` that passes `MAX_STEP_SPANS`.
pub(crate) fn too_many_steps(name: &str, start: i64) -> String {
    format!(
        "{}: the marker range `{name}` that starts at {start} ns passes it",
        step_span::too_many_steps()
    )
}

/// Spans, RCCL calls and launches noted from the API records.
#[derive(Debug, Default)]
pub(crate) struct ApiLinks {
    marker: StepMarker,
    /// Sorted by start. A deque: a span noted before every other (ranges in falling time
    /// order) goes in front at no cost, where a vector moved every later span (100,000 such
    /// ranges took 1.85 s, against 0.31 s in rising order); one noted in the middle still
    /// moves the nearer end.
    spans: VecDeque<Span>,
    /// Some span ends before one that starts earlier (nested or overlapping spans): `step_at`
    /// then scans back through every earlier span, not only the last.
    nested: bool,
    /// Thread → its RCCL calls (start, end, collective), sorted by start once sealed.
    rccl: FxHashMap<i64, Vec<(i64, i64, &'static str)>>,
    /// The host calls noted (correlation, start, thread as `pid`), in the order noted: in
    /// memory up to a chunk, the rest in an unnamed file (`kineto::spool`).
    launches: LaunchLog,
    /// Correlation id → the step of the span holding its host call, and → the RCCL call
    /// around it (an index into `RCCL_KINDS`), as of the last `seal`; a repeated id answers
    /// for its last call.
    launch_at: LaunchSteps,
    launch_rccl: LaunchSteps,
    /// Something the lookups depend on was noted since they were made.
    dirty: bool,
    /// Why a launch could not be written to the spool (`seal` reports it).
    spill_error: Option<io::Error>,
    /// The lookups keep every block in their file (tests).
    #[cfg(test)]
    in_file: bool,
    /// The step of each launch by correlation id, when a pre-pass worked it out instead of
    /// keeping the launches (the JSON reader); answers before `launches`.
    launch_steps: Option<LaunchSteps>,
}

/// What `note` needs of an API record.
pub(crate) struct Call<'a> {
    pub domain: &'a str,
    pub name: &'a str,
    pub tid: Option<i64>,
    pub start: i64,
    pub end: i64,
    pub correlation: Option<i64>,
}

impl ApiLinks {
    pub(crate) fn new(marker: StepMarker) -> ApiLinks {
        ApiLinks {
            marker,
            ..ApiLinks::default()
        }
    }

    /// Links whose launches, past a chunk, wait in a temporary file in `dir` (the staging
    /// directory), as do their lookups' blocks past 1 MiB.
    pub(crate) fn spooling_to(mut self, dir: PathBuf) -> ApiLinks {
        self.launches = LaunchLog::in_dir(dir);
        self
    }

    /// The links a pre-pass found: the step spans and the step of every launch.
    pub(crate) fn with_steps(
        marker: StepMarker,
        mut spans: Vec<Span>,
        launch_steps: LaunchSteps,
    ) -> ApiLinks {
        spans.sort_by_key(|s| (s.start, s.end));
        // Kept to the end of the file: not with the room `note_span`'s growth left.
        spans.shrink_to_fit();
        ApiLinks {
            marker,
            nested: !spans.is_sorted_by_key(|s| s.end),
            spans: spans.into(),
            launch_steps: Some(launch_steps),
            ..ApiLinks::default()
        }
    }

    /// Notes what an API record is: a step span (a marker range the marker names), an RCCL
    /// collective call, and, for every other call with a thread and correlation id, a launch.
    /// An error (`note_span`'s) past `MAX_STEP_SPANS` step spans.
    pub(crate) fn note(&mut self, c: &Call) -> Result<(), String> {
        if super::is_marker(c.domain) {
            self.note_span(c)?;
        }
        if !self.note_rccl(c) {
            if let (Some(tid), Some(corr)) = (c.tid, c.correlation) {
                self.note_launch(corr, tid, c.start);
            }
        }
        Ok(())
    }

    /// The step span a marker range is, if the marker names it; whether it is one. Past
    /// `MAX_STEP_SPANS` spans, an error naming the range (the caller adds where it is).
    pub(crate) fn note_span(&mut self, c: &Call) -> Result<bool, String> {
        let Some(step) = self.marker.step(c.name.as_bytes()) else {
            return Ok(false);
        };
        if self.spans.len() >= MAX_STEP_SPANS {
            return Err(too_many_steps(c.name, c.start));
        }
        let span = Span {
            start: c.start,
            end: c.end.max(c.start),
            step,
        };
        // Kept sorted as they come (markers are few), so the API records read after them
        // find their steps before `seal`.
        let at = self
            .spans
            .partition_point(|s| (s.start, s.end) <= (span.start, span.end));
        let before = at.checked_sub(1).map(|i| self.spans[i]);
        self.nested |= before.is_some_and(|b| b.end > span.end)
            || self.spans.get(at).is_some_and(|a| span.end > a.end);
        self.spans.insert(at, span);
        self.dirty = true;
        Ok(true)
    }

    /// Notes an RCCL collective call; whether the record is of the RCCL domain (an RCCL
    /// record is never a launch).
    pub(crate) fn note_rccl(&mut self, c: &Call) -> bool {
        if !super::has_prefix(c.domain, "RCCL") {
            return false;
        }
        if let (Some(tid), Some(kind)) = (c.tid, rccl_kind(c.name)) {
            self.rccl
                .entry(tid)
                .or_default()
                .push((c.start, c.end, kind));
            self.dirty = true;
        }
        true
    }

    /// The host call with correlation id `corr`, on thread `tid` at `start`.
    pub(crate) fn note_launch(&mut self, corr: i64, tid: i64, start: i64) {
        if let Err(e) = launches::log(&mut self.launches, &[(corr, start, tid)]) {
            self.spill_error.get_or_insert(e);
        }
        self.dirty = true;
    }

    /// Sorts the RCCL calls and gives every launch noted its step and collective; call once
    /// every API record is in, before the dispatches (again after more API records). An
    /// error when the launches' file cannot be written or read back.
    ///
    /// Why at `seal`: the answers are those of the spans and RCCL calls noted by then, for
    /// every launch noted by then (the spool is read again each time something changed), as
    /// the map of launches this replaced gave when asked after `seal`; no row asks before.
    pub(crate) fn seal(&mut self) -> io::Result<()> {
        for calls in self.rccl.values_mut() {
            if !calls.is_sorted_by_key(|c| (c.0, c.1)) {
                calls.sort_by_key(|c| (c.0, c.1));
                self.dirty = true;
            }
        }
        if let Some(e) = self.spill_error.take() {
            return Err(e);
        }
        if !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        let dir = self.launches.dir().map(Into::into);
        let lookup = |dir| {
            #[cfg(test)]
            if self.in_file {
                return LaunchSteps::in_file(dir);
            }
            LaunchSteps::in_dir(dir)
        };
        let (mut at, mut rccl) = (lookup(dir.clone()), lookup(dir));
        // Per thread, the latest end among its calls up to each (sorted by start): where
        // `rccl_at`'s backward scan can stop. Without it a launch outside every call scanned
        // all of its thread's earlier calls (it was asked only of RCCL kernels' launches,
        // now of every launch).
        let reach: FxHashMap<i64, Vec<i64>> = self
            .rccl
            .iter()
            .map(|(&tid, calls)| {
                let mut max = i64::MIN;
                (
                    tid,
                    calls
                        .iter()
                        .map(|c| {
                            max = max.max(c.1);
                            max
                        })
                        .collect(),
                )
            })
            .collect();
        let mut log = std::mem::take(&mut self.launches);
        let res = log.replay(
            |chunk| {
                let steps = chunk.iter().map(|l| (l.corr, self.step_at(l.ts))).collect();
                at.add_pairs(steps, Keep::Last)?;
                let kinds = chunk
                    .iter()
                    .map(|l| (l.corr, self.rccl_index(&reach, l.pid, l.ts)))
                    .collect();
                rccl.add_pairs(kinds, Keep::Last)
            },
            |e| e,
        );
        self.launches = log;
        res?;
        at.shrink();
        rccl.shrink();
        (self.launch_at, self.launch_rccl) = (at, rccl);
        Ok(())
    }

    pub(crate) fn spans(&self) -> &VecDeque<Span> {
        &self.spans
    }

    /// The first read error of a lookup's file: a launch it could not read back was answered
    /// "no step" or "no collective", so the rows are wrong (the reader fails the file).
    pub(crate) fn take_read_error(&self) -> Option<io::Error> {
        let pre = || self.launch_steps.as_ref()?.take_read_error();
        self.launch_at
            .take_read_error()
            .or_else(|| self.launch_rccl.take_read_error())
            .or_else(pre)
    }

    /// The step spans, sorted by start, once no row needs the links any more.
    pub(crate) fn into_spans(self) -> Vec<Span> {
        self.spans.into()
    }

    /// The step whose span holds `ts` (the latest starting one).
    ///
    /// When no span ends before an earlier-starting one (steps one after another, the usual
    /// capture), the last span starting by `ts` is the only one that can hold it: a time
    /// between two steps then costs one comparison, not a scan of every earlier step (a
    /// capture of 100,000 steps whose launches all fell between them took 6.5 s instead of
    /// 0.3, growing with the square of the steps).
    pub(crate) fn step_at(&self, ts: i64) -> Option<i64> {
        let n = self.spans.partition_point(|s| s.start <= ts);
        let earlier = if self.nested { n } else { n.min(1) };
        self.spans
            .range(..n)
            .rev()
            .take(earlier)
            .find(|s| ts <= s.end)
            .map(|s| s.step)
    }

    /// `step_at` as a scan of every span (the tests' reference).
    #[cfg(test)]
    fn step_at_scanning(&self, ts: i64) -> Option<i64> {
        let n = self.spans.partition_point(|s| s.start <= ts);
        self.spans
            .range(..n)
            .rev()
            .find(|s| ts <= s.end)
            .map(|s| s.step)
    }

    /// The step whose span holds the launch of correlation id `corr`.
    pub(crate) fn launch_step(&self, corr: Option<i64>) -> Option<i64> {
        // No spans, no step: no lookup per dispatch for captures without markers.
        if self.spans.is_empty() {
            return None;
        }
        match &self.launch_steps {
            Some(steps) => steps.get(corr?).flatten(),
            None => self.launch_at.get(corr?).flatten(),
        }
    }

    /// The collective of the RCCL call around the launch of correlation id `corr`.
    pub(crate) fn launch_rccl(&self, corr: Option<i64>) -> Option<&'static str> {
        if self.rccl.is_empty() {
            return None;
        }
        let i = self.launch_rccl.get(corr?).flatten()?;
        Some(RCCL_KINDS[i as usize].1)
    }

    /// `rccl_at` (sealed, with its threads' `reach`), as an index into `RCCL_KINDS` (the
    /// first row of its collective).
    fn rccl_index(&self, reach: &FxHashMap<i64, Vec<i64>>, tid: i64, ts: i64) -> Option<i64> {
        let (calls, reach) = (self.rccl.get(&tid)?, reach.get(&tid)?);
        let n = calls.partition_point(|c| c.0 <= ts);
        let kind = (0..n)
            .rev()
            .take_while(|&i| reach[i] >= ts)
            .find(|&i| ts <= calls[i].1)
            .map(|i| calls[i].2)?;
        RCCL_KINDS
            .iter()
            .position(|(_, k)| *k == kind)
            .map(|i| i as i64)
    }

    /// The collective of the RCCL call that, on thread `tid`, encloses time `ts` (the latest
    /// starting): the plain scan `rccl_index` stops early in (the tests' reference).
    #[cfg(test)]
    pub(crate) fn rccl_at(&self, tid: i64, ts: i64) -> Option<&'static str> {
        let calls = self.rccl.get(&tid)?;
        let n = calls.partition_point(|c| c.0 <= ts);
        calls[..n].iter().rev().find(|c| ts <= c.1).map(|c| c.2)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod spool_tests;
