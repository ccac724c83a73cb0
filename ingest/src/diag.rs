//! Data-quality findings: counted per file with the first example, never fixed silently.

use std::collections::BTreeMap;

/// Every code aorta may report, with what it means (docs/SCHEMA.md lists them).
pub const CODES: &[(&str, &str)] = &[
    ("kernel_without_launch", "GPU activity with no runtime call of the same correlation in the trace; its step comes from its own start against the GPU-side step spans (METRICS.md fallback)."),
    ("outside_steps", "GPU activity or CPU op whose time lies in no `ProfilerStep#N` span although the trace has steps; its step is null."),
    ("same_stream_overlap", "An activity starts before the previous one on the same stream ended; the earlier one's `end_ns` is clipped to the later start (`raw_end_ns` keeps the written value)."),
    ("stream_out_of_order", "An activity starts before one already written on the same stream (more than a buffer apart); it is kept unclipped."),
    ("negative_duration", "`dur` < 0 (or an end before its start); `end_ns` is set to `start_ns`, `raw_end_ns` keeps start + dur."),
    ("missing_duration", "A complete (`X`) slice without `dur`; taken as 0."),
    ("missing_timestamp", "A slice without a usable `ts`; not written."),
    ("time_overflow", "A time past 3e18 ns (the year 2065 as Unix time; `json::TIME_LIMIT_NS`), where a base time added to it could overflow int64: Trace-event slices with such an end are not written, nsys rows keep their times saturated."),
    ("unknown_phase", "An event whose `ph` aorta does not know; not written."),
    ("unparsable_value", "A field aorta reads holds a value of the wrong type; the field is null."),
    ("skipped_category", "Slices of a category aorta has no table for (e.g. `cuda_sync`, `overhead`); counted, not written."),
    ("unknown_kernel_id", "A rocprof dispatch whose kernel id has no kernel symbol; named `kernel_<id>`."),
    ("rank_default", "No rank in the trace, the rank map, the file name or `--rank`; rank 0 was used."),
    ("rank_map_ambiguous", "The pids of one Chrome trace map to several ranks in `--rank-map`; the lowest mapped pid's rank was used for the whole file."),
    ("unmatched_begin", "A Chrome `B` event never closed by an `E` on its pid/tid; not written."),
    ("unmatched_end", "A Chrome `E` event with no open `B` on its pid/tid; not written."),
    ("jsonl_non_numeric", "JSONL fields that are not numbers (strings, nulls); not written to `metrics`."),
];

/// Codes that are expected in healthy traces (what aorta leaves out, on purpose): they are
/// noise in a summary, where every other code is something to check.
pub(crate) const NOISE: &[&str] = &[
    "outside_steps",
    "jsonl_non_numeric",
    "skipped_category",
    "rank_default",
];

/// Whether `code` is worth a look (not one of [`NOISE`]).
pub fn is_trouble(code: &str) -> bool {
    !NOISE.contains(&code)
}

#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub count: u64,
    pub example: String,
    pub offset: Option<i64>,
}

/// Findings of one file (or one window of it, merged later).
#[derive(Debug, Default, Clone)]
pub(crate) struct Diagnostics {
    pub findings: BTreeMap<&'static str, Finding>,
}

impl Diagnostics {
    /// Counts one finding; `example` is only built for the first one.
    pub(crate) fn add(
        &mut self,
        code: &'static str,
        offset: Option<i64>,
        example: impl FnOnce() -> String,
    ) {
        debug_assert!(
            CODES.iter().any(|(c, _)| *c == code),
            "undocumented code {code}"
        );
        self.add_n(code, 1, offset, example);
    }

    pub(crate) fn add_n(
        &mut self,
        code: &'static str,
        n: u64,
        offset: Option<i64>,
        example: impl FnOnce() -> String,
    ) {
        if n == 0 {
            return;
        }
        match self.findings.get_mut(code) {
            Some(f) => f.count += n,
            None => {
                let example = example();
                self.findings.insert(
                    code,
                    Finding {
                        count: n,
                        example,
                        offset,
                    },
                );
            }
        }
    }

    /// Counts one finding; the example kept is the one with the smallest offset, whatever
    /// the order of the calls (it is built only when it is kept).
    pub(crate) fn add_min(
        &mut self,
        code: &'static str,
        offset: Option<i64>,
        example: impl FnOnce() -> String,
    ) {
        match self.findings.get_mut(code) {
            Some(f) if offset.is_some() && (f.offset.is_none() || offset < f.offset) => {
                f.count += 1;
                f.example = example();
                f.offset = offset;
            }
            Some(f) => f.count += 1,
            None => self.add(code, offset, example),
        }
    }

    /// Adds `other`'s counts; the example with the smaller offset wins.
    pub(crate) fn merge(&mut self, other: Diagnostics) {
        for (code, f) in other.findings {
            match self.findings.get_mut(code) {
                None => {
                    self.findings.insert(code, f);
                }
                Some(mine) => {
                    mine.count += f.count;
                    if f.offset.is_some() && (mine.offset.is_none() || f.offset < mine.offset) {
                        mine.example = f.example;
                        mine.offset = f.offset;
                    }
                }
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.findings.values().map(|f| f.count).sum()
    }
}
