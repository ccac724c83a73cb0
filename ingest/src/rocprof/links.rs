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
//! pre-pass (`prescan`, kept as `CorrRuns`) and holds back the RCCL kernels whose
//! collective an RCCL call must name (with the later dispatches of their streams, `held`).

use rustc_hash::FxHashMap;

use super::runs::CorrRuns;
use crate::step_span::{Span, StepMarker};

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

/// Spans, RCCL calls and launches noted from the API records.
#[derive(Debug, Default)]
pub(crate) struct ApiLinks {
    marker: StepMarker,
    /// Sorted by start.
    spans: Vec<Span>,
    /// Thread → its RCCL calls (start, end, collective), sorted by start once sealed.
    rccl: FxHashMap<i64, Vec<(i64, i64, &'static str)>>,
    /// Correlation id → (thread, start) of the host call.
    launches: FxHashMap<i64, (i64, i64)>,
    /// The step of each launch by correlation id, when a pre-pass worked it out instead of
    /// keeping the launches (the JSON reader); answers before `launches`.
    launch_steps: Option<CorrRuns>,
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

    /// The links a pre-pass found: the step spans and the step of every launch.
    pub(crate) fn with_steps(
        marker: StepMarker,
        mut spans: Vec<Span>,
        launch_steps: CorrRuns,
    ) -> ApiLinks {
        spans.sort_by_key(|s| (s.start, s.end));
        ApiLinks {
            marker,
            spans,
            launch_steps: Some(launch_steps),
            ..ApiLinks::default()
        }
    }

    /// Notes what an API record is: a step span (a marker range the marker names), an RCCL
    /// collective call, and, for every other call with a thread and correlation id, a launch.
    pub(crate) fn note(&mut self, c: &Call) {
        if super::is_marker(c.domain) {
            self.note_span(c);
        }
        if !self.note_rccl(c) {
            if let (Some(tid), Some(corr)) = (c.tid, c.correlation) {
                self.note_launch(corr, tid, c.start);
            }
        }
    }

    /// The step span a marker range is, if the marker names it.
    pub(crate) fn note_span(&mut self, c: &Call) {
        let Some(step) = self.marker.step(c.name.as_bytes()) else {
            return;
        };
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
        self.spans.insert(at, span);
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
        }
        true
    }

    /// The host call with correlation id `corr`, on thread `tid` at `start`.
    pub(crate) fn note_launch(&mut self, corr: i64, tid: i64, start: i64) {
        self.launches.insert(corr, (tid, start));
    }

    /// Sorts the RCCL calls; call once every API record is in, before the dispatches.
    pub(crate) fn seal(&mut self) {
        for calls in self.rccl.values_mut() {
            calls.sort_by_key(|c| (c.0, c.1));
        }
    }

    pub(crate) fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The step whose span holds `ts` (the latest starting one).
    pub(crate) fn step_at(&self, ts: i64) -> Option<i64> {
        let n = self.spans.partition_point(|s| s.start <= ts);
        self.spans[..n]
            .iter()
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
            Some(runs) => runs.get(corr?).flatten(),
            None => self.step_at(self.launches.get(&corr?)?.1),
        }
    }

    /// The collective of the RCCL call around the launch of correlation id `corr`.
    pub(crate) fn launch_rccl(&self, corr: Option<i64>) -> Option<&'static str> {
        if self.rccl.is_empty() {
            return None;
        }
        let &(tid, ts) = self.launches.get(&corr?)?;
        self.rccl_at(tid, ts)
    }

    /// The collective of the RCCL call that, on thread `tid`, encloses time `ts`.
    pub(crate) fn rccl_at(&self, tid: i64, ts: i64) -> Option<&'static str> {
        let calls = self.rccl.get(&tid)?;
        let n = calls.partition_point(|c| c.0 <= ts);
        calls[..n].iter().rev().find(|c| ts <= c.1).map(|c| c.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(domain: &'a str, name: &'a str, start: i64, end: i64, corr: i64) -> Call<'a> {
        Call {
            domain,
            name,
            tid: Some(7),
            start,
            end,
            correlation: Some(corr),
        }
    }

    #[test]
    fn spans_collectives_and_launches_from_api_records() {
        let marker = StepMarker::parse(r"^step (\d+)$").unwrap();
        let mut l = ApiLinks::new(marker);
        l.note(&call("MARKER_CORE_API", "step 1", 100, 200, 1));
        l.note(&call("MARKER_CORE_API", "step 2", 200, 300, 2));
        l.note(&call("MARKER_CORE_API", "forward", 110, 150, 3));
        l.note(&call("RCCL_API", "ncclAllReduce", 120, 140, 4));
        l.note(&call("RCCL_API", "ncclCommGetAsyncError", 125, 126, 5));
        l.note(&call(
            "HIP_RUNTIME_API_EXT",
            "hipExtLaunchKernel",
            130,
            131,
            6,
        ));
        l.note(&call("HIP_RUNTIME_API_EXT", "hipLaunchKernel", 250, 251, 8));
        l.seal();
        assert_eq!(l.spans().len(), 2, "only the marker's ranges");
        assert_eq!(
            (
                l.step_at(99),
                l.step_at(150),
                l.step_at(250),
                l.step_at(301)
            ),
            (None, Some(1), Some(2), None)
        );
        assert_eq!(
            l.launch_step(Some(6)),
            Some(1),
            "launched at 130, in step 1"
        );
        assert_eq!(l.launch_step(Some(8)), Some(2));
        assert_eq!(l.launch_step(Some(99)), None, "no such launch");
        assert_eq!(l.launch_rccl(Some(6)), Some("all_reduce"));
        assert_eq!(l.launch_rccl(Some(8)), None);
        assert_eq!(l.rccl_at(7, 130), Some("all_reduce"));
        assert_eq!(l.rccl_at(7, 250), None, "outside every RCCL call");
        assert_eq!(l.rccl_at(8, 130), None, "another thread");
        assert_eq!(rccl_kind("ncclGroupEnd"), None);
    }
}
