//! Correlation id → the step of the launch that has it, kept as runs of consecutive ids.
//!
//! Why: rocprofv3's JSON writes a process's kernel dispatches before its API records, so the
//! JSON reader learns each launch's step in a pre-pass (`prescan`) instead of keeping every
//! launch until the dispatches come. rocprofiler-sdk numbers correlation ids from one counter
//! as API calls enter, so consecutive ids are calls made one after another and mostly share a
//! step: a run breaks where a step span begins or ends and at ids no API record has (a
//! `roctxRangePop`, an RCCL call). Memory is one entry per run — about two per step span
//! plus one per marker — instead of one per API call; ids seen out of order or twice only
//! cost more runs, never a wrong answer.

use std::collections::BTreeMap;

/// Runs of correlation ids with the same launch step (`None`: the launch lies in no span).
#[derive(Debug, Default, Clone)]
pub(crate) struct CorrRuns {
    /// First id of a run → (last id, step).
    runs: BTreeMap<i64, (i64, Option<i64>)>,
}

impl CorrRuns {
    /// Records that the API call with id `corr` lies in step `step`; a later record of the
    /// same id replaces it (as a map's insert would).
    pub(crate) fn insert(&mut self, corr: i64, step: Option<i64>) {
        if let Some((&first, &(last, old))) = self.runs.range(..=corr).next_back() {
            if corr <= last {
                if old == step {
                    return;
                }
                self.runs.remove(&first);
                if first < corr {
                    self.runs.insert(first, (corr - 1, old));
                }
                if corr < last {
                    self.runs.insert(corr + 1, (last, old));
                }
            }
        }
        let (mut first, mut last) = (corr, corr);
        if let Some(prev) = corr.checked_sub(1) {
            if let Some((&f, &(l, v))) = self.runs.range(..corr).next_back() {
                if l == prev && v == step {
                    first = f;
                }
            }
        }
        if let Some(next) = corr.checked_add(1) {
            if let Some(&(l, v)) = self.runs.get(&next) {
                if v == step {
                    self.runs.remove(&next);
                    last = l;
                }
            }
        }
        self.runs.insert(first, (last, step));
    }

    /// `Some(step)` when an API call with id `corr` was recorded.
    pub(crate) fn get(&self, corr: i64) -> Option<Option<i64>> {
        let (_, &(last, step)) = self.runs.range(..=corr).next_back()?;
        (corr <= last).then_some(step)
    }

    /// How many runs are kept (what memory grows with; the tests check it).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Whatever the order, gaps and repeats of the ids, the runs answer as a map of every
        /// insert would, and no two adjacent runs could have been one.
        #[test]
        fn runs_answer_as_a_map(
            inserts in proptest::collection::vec((0i64..60, proptest::option::of(0i64..3)), 0..200),
        ) {
            let mut runs = CorrRuns::default();
            let mut map = HashMap::new();
            for &(corr, step) in &inserts {
                runs.insert(corr, step);
                map.insert(corr, step);
            }
            for corr in -2..63 {
                prop_assert_eq!(runs.get(corr), map.get(&corr).copied(), "id {}", corr);
            }
            let v: Vec<(i64, i64, Option<i64>)> =
                runs.runs.iter().map(|(&f, &(l, s))| (f, l, s)).collect();
            for w in v.windows(2) {
                prop_assert!(w[0].1 < w[1].0, "overlapping runs {:?}", w);
                prop_assert!(w[0].1 + 1 < w[1].0 || w[0].2 != w[1].2, "mergeable runs {:?}", w);
            }
        }
    }

    #[test]
    fn consecutive_calls_of_a_step_are_one_run() {
        let mut runs = CorrRuns::default();
        // Step 1 holds ids 1..=100, id 101 is a roctxRangePop (no record), step 2 holds
        // 102..=200, arriving in two interleaved buffers.
        for c in (1..=100).rev().chain(102..=200) {
            runs.insert(c, Some(if c <= 100 { 1 } else { 2 }));
        }
        assert_eq!(runs.len(), 2);
        assert_eq!(
            (runs.get(50), runs.get(101), runs.get(150), runs.get(201)),
            (Some(Some(1)), None, Some(Some(2)), None)
        );
        runs.insert(i64::MAX, None);
        runs.insert(i64::MIN, None);
        assert_eq!(
            (runs.get(i64::MAX), runs.get(i64::MIN)),
            (Some(None), Some(None))
        );
    }
}
