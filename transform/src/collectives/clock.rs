//! Clock offsets between ranks, from the moments their collectives end.
//!
//! Ranks on different hosts read different clocks, so a start on rank 3 and a start on rank
//! 9 cannot be compared as written. A collective, though, ends at nearly the same moment on
//! every member (the last byte arrives everywhere together), so the median over matched
//! instances of `end_r − end_ref` is rank r's offset against the reference rank, robust to
//! the odd instance where one member's kernel lingers. Ranks that share no instance with the
//! reference are aligned through a rank that is already aligned (a TP group that does not hold
//! rank 0, reached through its DP group).

use super::load::{Kernel, RankKernels};

/// How a rank's offset was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockSource {
    /// The job's reference rank (the lowest present): offset 0 by definition.
    Reference,
    /// The median of matched collective end-time differences.
    CollectiveEnds,
    /// No matched collective links this rank to an aligned one: taken as 0.
    None,
}

impl ClockSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ClockSource::Reference => "reference",
            ClockSource::CollectiveEnds => "collective_ends",
            ClockSource::None => "none",
        }
    }
}

/// One rank's clock against the reference: aligned time = raw time − `offset_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub offset_ns: i64,
    /// p90 − p10 of the differences behind the median (0 for the reference).
    pub spread_ns: Option<i64>,
    pub(crate) source: ClockSource,
    /// Instances the estimate stands on.
    pub(crate) samples: usize,
}

/// The median of integers: the mean of the two middle values for an even count, rounded
/// down (exact in integers, so a brute-force reference can reproduce it).
pub(super) fn median(sorted: &[i64]) -> i64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        let (a, b) = (sorted[n / 2 - 1] as i128, sorted[n / 2] as i128);
        (a + b).div_euclid(2) as i64
    }
}

/// p90 − p10 of sorted integers, with linear interpolation between ranks, rounded.
pub(super) fn spread(sorted: &[i64]) -> i64 {
    let v: Vec<f64> = sorted.iter().map(|&x| x as f64).collect();
    let q = |p| crate::summary::quantile(&v, p);
    (q(0.9) - q(0.1)).round() as i64
}

/// Offsets of every rank (same order as `ranks`), the first being the reference.
/// `paired[i]` says whether instance i may be used.
pub(super) fn align(ranks: &[RankKernels], paired: &[bool]) -> Vec<Clock> {
    let unaligned = Clock {
        offset_ns: 0,
        spread_ns: None,
        source: ClockSource::None,
        samples: 0,
    };
    let mut clocks = vec![unaligned; ranks.len()];
    // The aligned end of each instance, from the first aligned member that had it.
    let mut anchor: Vec<Option<i64>> = vec![None; paired.len()];
    let Some(first) = ranks.first() else {
        return clocks;
    };
    clocks[0] = Clock {
        offset_ns: 0,
        spread_ns: Some(0),
        source: ClockSource::Reference,
        samples: 0,
    };
    set_anchors(&first.kernels, 0, paired, &mut anchor);
    let mut progress = true;
    while progress {
        progress = false;
        for (r, rk) in ranks.iter().enumerate().skip(1) {
            if clocks[r].source != ClockSource::None {
                continue;
            }
            let mut diffs: Vec<i64> = rk
                .kernels
                .iter()
                .filter(|k| paired[k.inst as usize])
                .filter_map(|k| Some(k.end - anchor[k.inst as usize]?))
                .collect();
            if diffs.is_empty() {
                continue;
            }
            diffs.sort_unstable();
            let offset_ns = median(&diffs);
            clocks[r] = Clock {
                offset_ns,
                spread_ns: Some(spread(&diffs)),
                source: ClockSource::CollectiveEnds,
                samples: diffs.len(),
            };
            set_anchors(&rk.kernels, offset_ns, paired, &mut anchor);
            progress = true;
        }
    }
    clocks
}

fn set_anchors(kernels: &[Kernel], offset: i64, paired: &[bool], anchor: &mut [Option<i64>]) {
    for k in kernels.iter().filter(|k| paired[k.inst as usize]) {
        anchor[k.inst as usize].get_or_insert(k.end - offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads_by_hand() {
        assert_eq!(median(&[1, 5, 9]), 5);
        assert_eq!(median(&[1, 4]), 2);
        assert_eq!(median(&[-3, 0]), -2);
        // p10 of 0..=10 is 1, p90 is 9.
        let v: Vec<i64> = (0..=10).collect();
        assert_eq!(spread(&v), 8);
    }

    fn k(inst: u32, end: i64) -> Kernel {
        Kernel {
            start: end - 10,
            end,
            step: 0,
            inst,
            kind: 0,
        }
    }

    #[test]
    fn offsets_through_a_chain_of_groups() {
        // Rank 0 and 1 share instance 0; rank 1 and 2 share instance 1 (rank 2 never meets 0).
        let ranks = vec![
            RankKernels {
                rank: 0,
                kernels: vec![k(0, 1_000)],
            },
            RankKernels {
                rank: 1,
                kernels: vec![k(0, 1_500), k(1, 3_500)],
            },
            RankKernels {
                rank: 2,
                kernels: vec![k(1, 2_900)],
            },
        ];
        let c = align(&ranks, &[true, true]);
        assert_eq!(c[1].offset_ns, 500);
        // Instance 1 ends at 3,500 − 500 = 3,000 on the reference clock; rank 2 writes 2,900.
        assert_eq!(c[2].offset_ns, -100);
        assert_eq!(c[2].source, ClockSource::CollectiveEnds);
        let unpaired = align(&ranks, &[false, false]);
        assert_eq!(unpaired[1].source, ClockSource::None);
    }
}
