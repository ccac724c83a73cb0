//! Per-iteration overlap, as the Python aorta `_compute_overlap` reports it in
//! `rank_*_metrics.jsonl` (`profile.overlap`).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The stream whose overlap with every other stream is reported.
pub(crate) const COMPUTE: &str = "compute";

/// One timed operation, ms relative to the iteration's start event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Range {
    pub stream: String,
    pub tag: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub duration_ms: f64,
    pub metadata: serde_json::Value,
}

impl Range {
    pub(crate) fn new(stream: &str, tag: &str, start_ms: f64, end_ms: f64) -> Self {
        Range {
            stream: stream.into(),
            tag: tag.into(),
            start_ms,
            end_ms,
            duration_ms: end_ms - start_ms,
            metadata: serde_json::Value::Object(Default::default()),
        }
    }
}

/// A maximal interval during which the same set of streams is busy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Segment {
    pub start_ms: f64,
    pub end_ms: f64,
    pub active_streams: Vec<String>,
}

/// `profile.overlap` of one iteration.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Overlap {
    /// Busy time per stream (only streams with ranges).
    pub per_stream_ms: BTreeMap<String, f64>,
    /// `compute_comm` (compute busy while any other stream is), `compute_<stream>` for the
    /// Python stream names `allreduce`/`reducescatter`, and `idle`; keys only when non-zero,
    /// as in the Python tool.
    pub overlap_ms: BTreeMap<String, f64>,
    pub active_segments: Vec<Segment>,
    /// Busy fraction of `total_ms` per stream.
    pub utilization: BTreeMap<String, f64>,
}

/// Sweep the ranges: elementary intervals between all boundaries, each with its busy set.
///
/// `idle` counts gaps between ranges (no stream busy, after the first range started and
/// before the last ended); when there is no such gap it is the tail from the last range's end
/// to `total_ms` — the Python tool's rule.
pub(crate) fn compute(ranges: &[Range], total_ms: f64) -> Overlap {
    let mut out = Overlap::default();
    if ranges.is_empty() {
        return out;
    }
    let mut bounds: Vec<f64> = ranges.iter().flat_map(|r| [r.start_ms, r.end_ms]).collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    let mut gap_seen = false;
    let mut idle = 0.0;
    for w in bounds.windows(2) {
        let (t0, t1) = (w[0], w[1]);
        let len = t1 - t0;
        if len <= 0.0 {
            continue;
        }
        let active: BTreeSet<&str> = ranges
            .iter()
            .filter(|r| r.start_ms <= t0 && r.end_ms >= t1)
            .map(|r| r.stream.as_str())
            .collect();
        if active.is_empty() {
            gap_seen = true;
            idle += len;
            continue;
        }
        for s in &active {
            *out.per_stream_ms.entry((*s).to_string()).or_default() += len;
        }
        if active.contains(COMPUTE) {
            if active.len() > 1 {
                *out.overlap_ms.entry("compute_comm".into()).or_default() += len;
            }
            for s in ["allreduce", "reducescatter"] {
                if active.contains(s) {
                    *out.overlap_ms.entry(format!("compute_{s}")).or_default() += len;
                }
            }
        }
        let names: Vec<String> = active.iter().map(|s| s.to_string()).collect();
        match out.active_segments.last_mut() {
            Some(last) if last.end_ms == t0 && last.active_streams == names => last.end_ms = t1,
            _ => out.active_segments.push(Segment {
                start_ms: t0,
                end_ms: t1,
                active_streams: names,
            }),
        }
    }
    if !gap_seen {
        idle = (total_ms - bounds[bounds.len() - 1]).max(0.0);
    }
    if idle > 0.0 {
        out.overlap_ms.insert("idle".into(), idle);
    }
    if total_ms > 0.0 {
        out.utilization = out
            .per_stream_ms
            .iter()
            .map(|(k, v)| (k.clone(), v / total_ms))
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str, a: f64, b: f64) -> Range {
        Range::new(s, "x", a, b)
    }

    #[test]
    fn overlapping_streams() {
        // compute 0-4, allreduce 2-6: overlap 2, no gap, tail 6..8 idle.
        let o = compute(&[r("compute", 0.0, 4.0), r("allreduce", 2.0, 6.0)], 8.0);
        assert_eq!(o.per_stream_ms["compute"], 4.0);
        assert_eq!(o.per_stream_ms["allreduce"], 4.0);
        assert_eq!(o.overlap_ms["compute_comm"], 2.0);
        assert_eq!(o.overlap_ms["compute_allreduce"], 2.0);
        assert_eq!(o.overlap_ms["idle"], 2.0);
        let sets: Vec<_> = o
            .active_segments
            .iter()
            .map(|s| (s.start_ms, s.end_ms, s.active_streams.join("+")))
            .collect();
        assert_eq!(
            sets,
            vec![
                (0.0, 2.0, "compute".into()),
                (2.0, 4.0, "allreduce+compute".into()),
                (4.0, 6.0, "allreduce".into()),
            ]
        );
        assert_eq!(o.utilization["compute"], 0.5);
    }

    #[test]
    fn serial_has_no_overlap_and_gaps_are_idle() {
        // compute 0-1, 1-2 (merged segment), gap 2-3, aux 3-5; tail ignored since a gap was seen.
        let o = compute(
            &[
                r("compute", 0.0, 1.0),
                r("compute", 1.0, 2.0),
                r("aux", 3.0, 5.0),
            ],
            9.0,
        );
        assert!(!o.overlap_ms.contains_key("compute_comm"));
        assert_eq!(o.overlap_ms["idle"], 1.0);
        assert_eq!(o.active_segments.len(), 2);
        assert_eq!(o.active_segments[0].end_ms, 2.0);
        assert_eq!(o.per_stream_ms["compute"], 2.0);
    }

    #[test]
    fn empty() {
        assert_eq!(compute(&[], 1.0), Overlap::default());
    }
}
