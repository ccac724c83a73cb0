//! The step numbers a metrics log names, held as runs of consecutive numbers.
//!
//! Why: a JSONL record without a step key is the step of its line, so a log of two million
//! lines has two million steps. Held one map entry each and turned into one `steps` batch at
//! the end, a 60 MB log took 826 MB of peak RSS. Steps named by lines, or by a counter that
//! goes up by one, are one run however many there are; the `steps` table is then written from
//! the runs a chunk at a time (`file::RunInfo::finish`).

use std::collections::BTreeMap;

/// Distinct step numbers, as runs `first..=last` keyed by `first`, none touching another.
#[derive(Debug, Default, Clone)]
pub(crate) struct StepSet {
    runs: BTreeMap<i64, i64>,
}

impl StepSet {
    /// Adds `step` (again is fine).
    pub(crate) fn insert(&mut self, step: i64) {
        // The run starting at or before `step`, and whether it holds `step` or ends just below.
        let below = self.runs.range(..=step).next_back().map(|(&a, &b)| (a, b));
        if let Some((_, b)) = below {
            if step <= b {
                return;
            }
        }
        let joins_below = below.filter(|&(_, b)| b.checked_add(1) == Some(step));
        let above = step
            .checked_add(1)
            .and_then(|n| self.runs.get(&n).map(|&b| (n, b)));
        match (joins_below, above) {
            (Some((a, _)), Some((n, b))) => {
                self.runs.remove(&n);
                self.runs.insert(a, b);
            }
            (Some((a, _)), None) => {
                self.runs.insert(a, step);
            }
            (None, Some((n, b))) => {
                self.runs.remove(&n);
                self.runs.insert(step, b);
            }
            (None, None) => {
                self.runs.insert(step, step);
            }
        }
    }

    /// The steps, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs.iter().flat_map(|(&a, &b)| a..=b)
    }

    /// Runs held (for tests: the memory is this, not `len`).
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any order, repeats and the ends of `i64`: the same steps as a `BTreeSet`.
        #[test]
        fn holds_what_a_set_holds(v in proptest::collection::vec(
            prop_oneof![-20i64..20, Just(i64::MIN), Just(i64::MAX), Just(i64::MAX - 1), Just(i64::MIN + 1)],
            0..200,
        )) {
            let mut s = StepSet::default();
            for &x in &v {
                s.insert(x);
            }
            let want: std::collections::BTreeSet<i64> = v.iter().copied().collect();
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
            // No two runs touch: the runs are as few as the numbers allow.
            let gaps = want.iter().zip(want.iter().skip(1)).filter(|(a, b)| **b != **a + 1).count();
            prop_assert_eq!(s.runs(), if want.is_empty() { 0 } else { gaps + 1 });
        }
    }

    /// Two million line-numbered steps are one run.
    #[test]
    fn consecutive_steps_are_one_run() {
        let mut s = StepSet::default();
        (0..2_000_000).for_each(|i| s.insert(i));
        assert_eq!((s.iter().count(), s.runs()), (2_000_000, 1));
    }
}
