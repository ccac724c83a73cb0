//! The GPU window of every step (first start, last end, activities, kernels), kept as one
//! sorted vector of 40-byte entries.
//!
//! Why not a `BTreeMap<Option<i64>, StepAgg>`: a trace of very many steps (up to the million
//! step annotations a file may hold, `step_span::MAX_STEP_SPANS`) held about 120 bytes a
//! step in the map's nodes, the largest part of what grew with the trace (docs/PERFORMANCE.md,
//! "Peak RSS at any file size"). Steps arrive mostly in increasing order (a flush's rows are
//! sorted by stream, and each stream's steps follow time), so a flush's windows go on the
//! end of the vector where it has room, and the rest are merged into it from the back, in
//! place: O(what they touch) in the usual case, never quadratic.

/// GPU window of one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StepAgg {
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub activities: u64,
    pub kernels: u64,
}

/// One step's window: rows of a step always have a start and an end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    step: i64,
    start: i64,
    end: i64,
    activities: u64,
    kernels: u64,
}

impl Slot {
    fn add(&mut self, o: &Slot) {
        self.start = self.start.min(o.start);
        self.end = self.end.max(o.end);
        self.activities += o.activities;
        self.kernels += o.kernels;
    }

    fn agg(&self) -> StepAgg {
        StepAgg {
            start: Some(self.start),
            end: Some(self.end),
            activities: self.activities,
            kernels: self.kernels,
        }
    }
}

/// The GPU windows of a file's steps, in step order (the rows of no step first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StepAggs {
    /// The rows of no step.
    none: Option<Slot>,
    /// Sorted by step, one entry a step.
    slots: Vec<Slot>,
}

/// Windows being noted (`note`) into a `StepAggs` (`StepAggs::fresh`): a step past the last
/// one there is added in place while the vector has room (a flush's rows are sorted by
/// stream and then time, so on one stream every step is past the last); any other waits in
/// `late` until `done` merges them in at once, growing the vector once. Why not all at
/// once: a flush of one-kernel steps noted 131,072 windows aside, 5 MB more at the peak of
/// a trace of a million steps. Why only with room: pushed one by one, the Kineto settle's
/// per-group vectors grew by doubling, and the copies cost it ~5 MB of peak RSS.
pub(crate) struct Fresh<'a> {
    into: &'a mut StepAggs,
    late: Vec<Slot>,
}

impl Fresh<'_> {
    /// Notes a run of `activities` rows of `step` from `start` to `end`, `kernels` of them
    /// kernels.
    pub(crate) fn note(
        &mut self,
        step: Option<i64>,
        (start, end): (i64, i64),
        activities: u64,
        kernels: u64,
    ) {
        let slot = Slot {
            step: step.unwrap_or(0),
            start,
            end,
            activities,
            kernels,
        };
        let Some(step) = step else {
            return add_to(&mut self.into.none, &slot);
        };
        let slots = &mut self.into.slots;
        let room = slots.len() < slots.capacity();
        match slots.last_mut() {
            Some(last) if last.step == step => last.add(&slot),
            Some(last) if last.step < step && room => slots.push(slot),
            None if room => slots.push(slot),
            _ => self.late.push(slot),
        }
    }

    /// Merges in the windows noted out of step order.
    pub(crate) fn done(self) {
        let mut slots = self.late;
        // Stable, so that equal steps are added in the order noted (the sums do not care).
        slots.sort_by_key(|s| s.step);
        slots.dedup_by(|b, a| {
            let same = a.step == b.step;
            if same {
                a.add(b);
            }
            same
        });
        self.into.absorb_sorted(slots);
    }
}

/// Adds `s` to the window `to`, if there is one yet.
fn add_to(to: &mut Option<Slot>, s: &Slot) {
    match to {
        Some(n) => n.add(s),
        None => *to = Some(*s),
    }
}

impl StepAggs {
    /// Every window, in step order: the rows of no step first (`None` sorts first).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Option<i64>, StepAgg)> + '_ {
        let none = self.none.iter().map(|s| (None, s.agg()));
        none.chain(self.slots.iter().map(|s| (Some(s.step), s.agg())))
    }

    /// Adds the windows of other rows of the same file.
    pub(crate) fn merge(&mut self, o: StepAggs) {
        if let Some(n) = o.none {
            add_to(&mut self.none, &n);
        }
        self.absorb_sorted(o.slots);
    }

    /// Windows to note into these (`Fresh::note`), merged in by `Fresh::done`.
    pub(crate) fn fresh(&mut self) -> Fresh<'_> {
        Fresh {
            into: self,
            late: Vec::new(),
        }
    }

    /// Adds `fresh` (sorted by step, one entry a step), merging from the back in place.
    fn absorb_sorted(&mut self, fresh: Vec<Slot>) {
        let Some(first) = fresh.first() else {
            return;
        };
        // Only the entries from the first fresh step on take part.
        let lo = self.slots.partition_point(|s| s.step < first.step);
        let old = self.slots.len();
        // Steps not there yet (both sides are sorted).
        let (mut i, mut new) = (lo, 0);
        for f in &fresh {
            while i < old && self.slots[i].step < f.step {
                i += 1;
            }
            if i < old && self.slots[i].step == f.step {
                i += 1;
            } else {
                new += 1;
            }
        }
        self.slots.resize(old + new, Slot::default());
        // Largest first, each entry moved once: `w` is where the next largest goes.
        let (mut i, mut w) = (old, old + new);
        for f in fresh.iter().rev() {
            while i > lo && self.slots[i - 1].step > f.step {
                i -= 1;
                w -= 1;
                self.slots[w] = self.slots[i];
            }
            w -= 1;
            if i > lo && self.slots[i - 1].step == f.step {
                i -= 1;
                let mut s = self.slots[i];
                s.add(f);
                self.slots[w] = s;
            } else {
                self.slots[w] = *f;
            }
        }
        debug_assert_eq!(w, i, "what is left below is in place");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use proptest::prelude::*;

    /// A run of rows: step, start, end, activities, kernels.
    type Run = (Option<i64>, i64, i64, u64, u64);

    /// The map these windows replaced: the reference.
    fn by_map(runs: &[Vec<Run>]) -> Vec<(Option<i64>, StepAgg)> {
        let mut m: BTreeMap<Option<i64>, StepAgg> = BTreeMap::new();
        for &(step, start, end, acts, kernels) in runs.iter().flatten() {
            let a = m.entry(step).or_default();
            a.start = Some(a.start.map_or(start, |s| s.min(start)));
            a.end = Some(a.end.map_or(end, |e| e.max(end)));
            a.activities += acts;
            a.kernels += kernels;
        }
        m.into_iter().collect()
    }

    /// Notes `runs` into `s`, as a flush does.
    fn absorb(s: &mut StepAggs, runs: &[Run]) {
        let mut f = s.fresh();
        for &(step, start, end, acts, kernels) in runs {
            f.note(step, (start, end), acts, kernels);
        }
        f.done();
    }

    fn run() -> impl Strategy<Value = Run> {
        let step = prop_oneof![1 => Just(None), 8 => (-3i64..60).prop_map(Some)];
        (step, 0i64..1000, 0i64..1000, 1u64..5, 0u64..5)
            .prop_map(|(s, a, d, n, k)| (s, a, a + d, n, k.min(n)))
    }

    proptest! {
        /// Flushes in any order of steps (mostly increasing, as in a trace, or not) give what
        /// the map gave, whether each is absorbed or merged as a `StepAggs` of its own.
        #[test]
        fn windows_equal_a_map(
            flushes in proptest::collection::vec(proptest::collection::vec(run(), 0..40), 0..12),
            merged in any::<bool>(),
        ) {
            let mut got = StepAggs::default();
            for f in &flushes {
                if merged {
                    let mut piece = StepAggs::default();
                    absorb(&mut piece, f);
                    got.merge(piece);
                } else {
                    absorb(&mut got, f);
                }
            }
            let want = by_map(&flushes);
            prop_assert_eq!(got.iter().collect::<Vec<_>>(), want);
        }
    }

    #[test]
    fn steps_after_the_last_are_appended_and_earlier_ones_merged_in() {
        let mut s = StepAggs::default();
        absorb(&mut s, &[(Some(5), 10, 20, 1, 1), (Some(7), 30, 40, 2, 0)]);
        absorb(&mut s, &[(Some(9), 50, 60, 1, 0), (Some(6), 22, 25, 1, 1)]);
        absorb(&mut s, &[(Some(5), 5, 12, 3, 3), (None, 1, 2, 1, 0)]);
        let steps: Vec<_> = s
            .iter()
            .map(|(k, a)| (k, a.start, a.end, a.activities))
            .collect();
        assert_eq!(
            steps,
            [
                (None, Some(1), Some(2), 1),
                (Some(5), Some(5), Some(20), 4),
                (Some(6), Some(22), Some(25), 1),
                (Some(7), Some(30), Some(40), 2),
                (Some(9), Some(50), Some(60), 1),
            ]
        );
    }
}
