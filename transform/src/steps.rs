//! Real steps, and the activity outside every step.
//!
//! Kernels launched before the profiler's first `ProfilerStep` (or after its last) carry a null
//! step. Counted as a step, that leftover bucket entered step medians, every spread's `n`, the
//! per-window normalisation of operator times (which came out halved) and the report's choice
//! of the median step: on the H100 qwen trace, "step time" was the mean of the real 34.9 ms
//! step and a 14.5 ms bucket. So every step statistic reads rows through [`drop_outside`]: a
//! null-step row is *outside steps* when its rank has real steps, and left out; a rank with no
//! step at all (rocprofv3, nsys, a Chrome trace) keeps its one null-step row, which is then the
//! whole capture. Outside-step activity is reported on its own ([`outside`]).

use std::collections::{HashMap, HashSet};

use polars::prelude::*;

use crate::rows::{ints, strs};

/// Per row: whether it is inside a real step, or the whole capture of a stepless rank. Rows
/// are keyed by `run`, `rank` and, where the frame has it, `source` (a rank's JSONL steps do
/// not make its trace rows stepped).
pub(crate) fn in_steps_mask(df: &DataFrame) -> Vec<bool> {
    let (run, rank, step) = (strs(df, "run"), ints(df, "rank"), ints(df, "step"));
    let source = df
        .column("source")
        .ok()
        .map(|_| strs(df, "source"))
        .unwrap_or_else(|| vec![None; df.height()]);
    let stepped: HashSet<_> = (0..df.height())
        .filter(|&i| step[i].is_some())
        .map(|i| (run[i], rank[i], source[i]))
        .collect();
    (0..df.height())
        .map(|i| step[i].is_some() || !stepped.contains(&(run[i], rank[i], source[i])))
        .collect()
}

/// `df` without its outside-step rows.
pub fn drop_outside(df: &DataFrame) -> PolarsResult<DataFrame> {
    let mask = BooleanChunked::from_slice("in_steps".into(), &in_steps_mask(df));
    df.filter(&mask)
}

/// `overlap_collectives` without its outside-step rows: only `level` = `step` rows are steps
/// (the `rank` level's null step is the whole window).
pub(crate) fn drop_outside_steps_level(df: &DataFrame) -> PolarsResult<DataFrame> {
    let level = strs(df, "level");
    let mask = in_steps_mask(df);
    let keep: Vec<bool> = (0..df.height())
        .map(|i| level[i] != Some("step") || mask[i])
        .collect();
    df.filter(&BooleanChunked::from_slice("in_steps".into(), &keep))
}

/// Each (run, rank, step)'s `ProfilerStep` span [start, end] (the `steps` table's CPU span).
pub(crate) type Spans = HashMap<(String, i64, i64), (i64, i64)>;

/// The step spans of the `steps` table rows in `df` (`run`, `rank`, `step`, `cpu_start_ns`,
/// `cpu_end_ns`).
pub(crate) fn spans(df: &DataFrame) -> Spans {
    let (run, rank, step) = (strs(df, "run"), ints(df, "rank"), ints(df, "step"));
    let (a, b) = (ints(df, "cpu_start_ns"), ints(df, "cpu_end_ns"));
    (0..df.height())
        .filter_map(|i| {
            let key = (run[i]?.to_string(), rank[i]?, step[i]?);
            Some((key, (a[i]?, b[i]?)))
        })
        .collect()
}

/// Each (run, rank)'s GPU busy time: the union of all its activities (any step, any stream),
/// sorted, disjoint.
type Busy<'a> = HashMap<(&'a str, i64), Vec<(i64, i64)>>;

/// The busy union of every rank of `acts` (`run`, `rank`, `start_ns`, `end_ns`).
fn busy(acts: &DataFrame) -> Busy<'_> {
    let (run, rank) = (strs(acts, "run"), ints(acts, "rank"));
    let (start, end) = (ints(acts, "start_ns"), ints(acts, "end_ns"));
    let mut by_rank: Busy = HashMap::new();
    for i in 0..acts.height() {
        if let (Some(r), Some(k), Some(s), Some(e)) = (run[i], rank[i], start[i], end[i]) {
            by_rank.entry((r, k)).or_default().push((s, e.max(s)));
        }
    }
    by_rank
        .into_iter()
        .map(|(k, v)| (k, crate::comm_split::union(v)))
        .collect()
}

/// Time in `[lo, hi)` in which the GPU ran nothing: its length less what `busy` covers.
fn idle_within(busy: &[(i64, i64)], lo: i64, hi: i64) -> i64 {
    if hi <= lo {
        return 0;
    }
    let first = busy.partition_point(|&(_, e)| e <= lo);
    let covered: i64 = busy[first..]
        .iter()
        .take_while(|&&(s, _)| s < hi)
        .map(|&(s, e)| e.min(hi) - s.max(lo))
        .sum();
    hi - lo - covered
}

/// Fills `step_ns` and the GPU idle before the step's first activity and after its last
/// (`idle_before_ns`, `idle_after_ns`) of every trace step row that has a `ProfilerStep` span,
/// and their sums over the rank's steps in the rank rows. Idle there is time in which the GPU
/// ran nothing at all (`acts`: every activity of the rank, any step, any stream): when the GPU
/// runs a step behind the CPU, the previous step's kernels fill the start of this step's span
/// and that time is busy, not idle. The GPU window stays `window_ns`; the idle between
/// activities is `idle_ns`.
pub(crate) fn add_spans(
    steps: &mut DataFrame,
    ranks: &mut DataFrame,
    spans: &Spans,
    acts: &DataFrame,
) -> PolarsResult<()> {
    let (run, rank, step) = (strs(steps, "run"), ints(steps, "rank"), ints(steps, "step"));
    let (ws, we) = (ints(steps, "window_start_ns"), ints(steps, "window_end_ns"));
    let busy = busy(acts);
    let mut cols: [Vec<Option<i64>>; 3] = Default::default();
    let mut sums: HashMap<(String, i64), [i64; 3]> = HashMap::new();
    for i in 0..steps.height() {
        let span = run[i]
            .zip(rank[i])
            .zip(step[i])
            .and_then(|((r, k), s)| spans.get(&(r.to_string(), k, s)));
        let none = Vec::new();
        let b_of = run[i]
            .zip(rank[i])
            .and_then(|(r, k)| busy.get(&(r, k)))
            .unwrap_or(&none);
        let v = span.map(|&(a, b)| {
            let first = ws[i].map_or(b, |w| w.clamp(a, b));
            let before = idle_within(b_of, a, first);
            let after = we[i].map_or(0, |w| idle_within(b_of, w.clamp(a, b), b));
            [b - a, before, after]
        });
        for (c, col) in cols.iter_mut().enumerate() {
            col.push(v.map(|v| v[c]));
        }
        if let (Some(v), Some(r), Some(k)) = (v, run[i], rank[i]) {
            let s = sums.entry((r.to_string(), k)).or_default();
            for c in 0..3 {
                s[c] += v[c];
            }
        }
    }
    let (run, rank) = (strs(ranks, "run"), ints(ranks, "rank"));
    let rank_sums: Vec<Option<[i64; 3]>> = (0..ranks.height())
        .map(|i| Some(*sums.get(&(run[i]?.to_string(), rank[i]?))?))
        .collect();
    let rank_cols: [Vec<Option<i64>>; 3] =
        std::array::from_fn(|c| rank_sums.iter().map(|s| s.map(|s| s[c])).collect());
    for (c, name) in SPAN_COLUMNS.iter().enumerate() {
        steps.with_column(Column::new((*name).into(), std::mem::take(&mut cols[c])))?;
        ranks.with_column(Column::new((*name).into(), rank_cols[c].clone()))?;
    }
    Ok(())
}

/// The columns `add_spans` fills.
const SPAN_COLUMNS: [&str; 3] = ["step_ns", "idle_before_ns", "idle_after_ns"];

/// `df`'s outside-step rows only.
pub fn outside(df: &DataFrame) -> PolarsResult<DataFrame> {
    let keep: Vec<bool> = in_steps_mask(df).into_iter().map(|b| !b).collect();
    df.filter(&BooleanChunked::from_slice("outside".into(), &keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_within_counts_only_time_nothing_ran() {
        let busy = [(50, 150), (160, 180)];
        assert_eq!(idle_within(&busy, 0, 50), 50);
        assert_eq!(idle_within(&busy, 100, 160), 10);
        assert_eq!(idle_within(&busy, 180, 200), 20);
        assert_eq!(idle_within(&busy, 120, 170), 10);
        assert_eq!(idle_within(&busy, 200, 100), 0);
        assert_eq!(idle_within(&[], 3, 10), 7);
    }

    #[test]
    fn the_null_bucket_of_a_stepped_rank_is_outside_and_a_stepless_rank_keeps_its_capture() {
        let df = df!(
            "run" => ["a", "a", "a", "a", "b", "a"],
            "rank" => [0i64, 0, 1, 1, 0, 0],
            "step" => [Some(6i64), None, None, Some(7), None, None],
            "source" => ["trace", "trace", "trace", "trace", "trace", "jsonl"],
        )
        .unwrap();
        // a/0 trace: step 6 stays, its null bucket goes; a/1: same; b/0 has no step: kept;
        // a/0 jsonl has no step of its own source: kept.
        assert_eq!(in_steps_mask(&df), [true, false, false, true, true, true]);
        assert_eq!(drop_outside(&df).unwrap().height(), 4);
        assert_eq!(outside(&df).unwrap().height(), 2);
        let no_source = df.drop("source").unwrap();
        assert_eq!(
            in_steps_mask(&no_source),
            [true, false, false, true, true, false]
        );
    }
}
