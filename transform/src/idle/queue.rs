//! The GPU's launch queue over time (HTA's `get_queue_length_time_series`): per stream, the
//! activities launched but not started. A launch call's start adds one, the activity's start
//! takes it away (at one instant the start goes first: a queue is never counted longer than
//! it was). The series is a step function: each point holds until the next.

use std::collections::BTreeMap;

use super::Act;

/// One stream's queue: (time, length from then on), in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Series {
    pub points: Vec<(i64, i64)>,
}

impl Series {
    /// The queue of the activities of one stream (only those with a launch call count).
    pub(crate) fn of(acts: &[&Act]) -> Series {
        let mut events: Vec<(i64, i64)> = Vec::with_capacity(2 * acts.len());
        for a in acts {
            if let Some(c) = a.call {
                events.push((c.start, 1));
                events.push((a.start, -1));
            }
        }
        events.sort_unstable();
        let mut points: Vec<(i64, i64)> = Vec::with_capacity(events.len());
        let mut level = 0;
        for (t, d) in events {
            level += d;
            match points.last_mut() {
                Some(p) if p.0 == t => p.1 = level,
                _ => points.push((t, level)),
            }
        }
        Series { points }
    }

    /// The length at `t` (0 before the first point).
    pub(crate) fn at(&self, t: i64) -> i64 {
        match self.points.partition_point(|p| p.0 <= t) {
            0 => 0,
            n => self.points[n - 1].1,
        }
    }

    /// The largest length and the integral of the length (length × ns) over `[from, to)`.
    pub(crate) fn over(&self, from: i64, to: i64) -> (i64, i128) {
        let (mut level, mut at) = (self.at(from), from);
        let (mut max, mut area) = (level, 0i128);
        let first = self.points.partition_point(|p| p.0 <= from);
        for &(t, l) in self.points[first..].iter().take_while(|p| p.0 < to) {
            area += i128::from(level) * i128::from(t - at);
            (level, at) = (l, t);
            max = max.max(level);
        }
        area += i128::from(level) * i128::from((to - at).max(0));
        (max, area)
    }
}

/// The queue of every stream of one rank's activities.
pub(crate) fn of_rank(acts: &[Act]) -> BTreeMap<i64, Series> {
    let mut by_stream: BTreeMap<i64, Vec<&Act>> = BTreeMap::new();
    for a in acts {
        by_stream.entry(a.stream).or_default().push(a);
    }
    by_stream
        .into_iter()
        .map(|(s, v)| (s, Series::of(&v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_time_weighted_area_by_hand() {
        // Launches at 0, 10, 20; starts at 30, 40, 50: lengths 1 [0,10), 2 [10,20), 3 [20,30),
        // 2 [30,40), 1 [40,50), 0 after.
        let s = Series {
            points: vec![(0, 1), (10, 2), (20, 3), (30, 2), (40, 1), (50, 0)],
        };
        assert_eq!(s.at(-1), 0);
        assert_eq!(s.at(25), 3);
        assert_eq!(s.over(0, 60), (3, (10 + 20 + 30 + 20 + 10) as i128));
        // [15, 35): 2 × 5 + 3 × 10 + 2 × 5.
        assert_eq!(s.over(15, 35), (3, 50));
        assert_eq!(s.over(45, 60), (1, 5));
    }
}
