//! Is the best configuration really better than the runner-up? The sweep's noise verdict.
//!
//! The unit is the repeat (one run, summarised by the median of its steps), never the step:
//! the steps of one run share its warm-up, its NCCL channels and its neighbours, so 160 steps
//! of two runs are still two samples. The test is the exact one-sided Mann–Whitney U test on
//! the repeats (no normality assumed, exact for small samples, counting every arrangement):
//! the best is *distinguishable* from the runner-up when p ≤ [`ALPHA`]. With n and m repeats
//! the smallest p possible is 1 / C(n + m, n), so it takes 3 repeats of each (1/20 = 0.05):
//! fewer are *inconclusive* whatever the numbers. Not distinguishable, the two are a *tie*
//! when their medians differ by no more than the repeats' own spread (the larger of the two
//! ranges, max − min), and *inconclusive* otherwise (more repeats could tell).

use serde::Serialize;

/// The significance level.
pub const ALPHA: f64 = 0.05;

/// The three answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The best beats the runner-up: p ≤ ALPHA.
    Distinguishable,
    /// Not distinguishable, and the medians differ by less than the noise.
    Tie,
    /// Too few repeats, or a difference larger than the noise that the test cannot confirm.
    Inconclusive,
}

impl Verdict {
    /// `distinguishable`, `tie` or `inconclusive`, as tuning_report.json writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Distinguishable => "distinguishable",
            Verdict::Tie => "tie",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// A verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tested {
    /// The answer.
    pub verdict: Verdict,
    /// The one-sided exact p-value (null when a side has no repeat).
    pub p_value: Option<f64>,
    /// Why, in words.
    pub reason: String,
}

/// Arrangements of n values of one sample and m of the other with U = k, for every k:
/// `count(n, m)[k]` (no ties). The recurrence of Mann and Whitney: the largest value is
/// either from the first sample (it beats all m others: k − m) or from the second.
fn counts(n: usize, m: usize) -> Vec<f64> {
    // table[i][j] = counts for sizes (i, j); built up row by row.
    let mut table: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); m + 1]; n + 1];
    for i in 0..=n {
        for j in 0..=m {
            table[i][j] = if i == 0 || j == 0 {
                vec![1.0]
            } else {
                let mut c = vec![0.0; i * j + 1];
                for (k, x) in table[i - 1][j].iter().enumerate() {
                    c[k + j] += x;
                }
                for (k, x) in table[i][j - 1].iter().enumerate() {
                    c[k] += x;
                }
                c
            };
        }
    }
    std::mem::take(&mut table[n][m])
}

/// P(U ≤ u) under the null hypothesis, from the arrangement counts of [`counts`].
fn cdf(counts: &[f64], u: f64) -> f64 {
    let total: f64 = counts.iter().sum();
    let below: f64 = counts
        .iter()
        .enumerate()
        .take_while(|(k, _)| (*k as f64) <= u + 1e-9)
        .map(|(_, x)| x)
        .sum();
    below / total
}

fn range(v: &[f64]) -> f64 {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(*x), b.max(*x))
        });
    hi - lo
}

/// Whether `best`'s repeats beat `other`'s (lower is better when `lower_is_better`).
pub fn test(best: &[f64], other: &[f64], lower_is_better: bool) -> Tested {
    let (n, m) = (best.len(), other.len());
    if n == 0 || m == 0 {
        return Tested {
            verdict: Verdict::Inconclusive,
            p_value: None,
            reason: "a configuration has no repeat with this metric".into(),
        };
    }
    // U: pairs in which the best's repeat is the worse one (a tie counts half); small U is
    // evidence for the best. The one-sided p is P(U' ≤ U) over every arrangement.
    let worse = |a: f64, b: f64| if lower_is_better { a > b } else { a < b };
    let mut u: f64 = 0.0;
    for a in best {
        for b in other {
            if worse(*a, *b) {
                u += 1.0;
            } else if a == b {
                u += 0.5;
            }
        }
    }
    let c = counts(n, m);
    let p = cdf(&c, u.ceil());
    let least = cdf(&c, 0.0);
    let med = |v: &[f64]| crate::summary::median(v).unwrap_or(f64::NAN);
    let (mb, mo) = (med(best), med(other));
    let noise = range(best).max(range(other));
    let (verdict, reason) = if least > ALPHA {
        (
            Verdict::Inconclusive,
            format!(
                "{n} and {m} repeats cannot reach p <= {ALPHA} (the least p is {least:.3}); \
                 3 repeats of each are needed"
            ),
        )
    } else if p <= ALPHA {
        (
            Verdict::Distinguishable,
            format!("one-sided exact Mann-Whitney U = {u} over {n}x{m} repeats, p = {p:.3}"),
        )
    } else if (mb - mo).abs() <= noise {
        (
            Verdict::Tie,
            format!(
                "p = {p:.3} > {ALPHA}, and the medians differ by {:.4} (the repeats' spread: {noise:.4})",
                (mb - mo).abs()
            ),
        )
    } else {
        (
            Verdict::Inconclusive,
            format!(
                "p = {p:.3} > {ALPHA}, but the medians differ by {:.4}, more than the repeats' \
                 spread ({noise:.4}): more repeats could tell",
                (mb - mo).abs()
            ),
        )
    };
    Tested {
        verdict,
        p_value: Some(p),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact distribution against brute force: every way to choose which n of n + m
    /// ranked values belong to the first sample.
    #[test]
    fn the_exact_distribution_counts_every_arrangement() {
        for (n, m) in [(1, 1), (2, 3), (3, 3), (4, 2), (5, 4)] {
            let total = n + m;
            let mut brute = vec![0.0; n * m + 1];
            for mask in 0u32..(1 << total) {
                if mask.count_ones() as usize != n {
                    continue;
                }
                // U = pairs (first-sample value above a second-sample value), values = ranks.
                let mut u = 0;
                for i in 0..total {
                    for j in 0..total {
                        if mask & (1 << i) != 0 && mask & (1 << j) == 0 && i > j {
                            u += 1;
                        }
                    }
                }
                brute[u] += 1.0;
            }
            assert_eq!(counts(n, m), brute, "n={n} m={m}");
        }
    }

    #[test]
    fn three_against_three_separated_is_distinguishable() {
        let t = test(&[10.0, 10.1, 10.2], &[10.5, 10.6, 10.4], true);
        assert_eq!(t.verdict, Verdict::Distinguishable);
        assert!((t.p_value.unwrap() - 0.05).abs() < 1e-12);
        // Higher is better: the same numbers the other way round.
        let t = test(&[10.5, 10.6, 10.4], &[10.0, 10.1, 10.2], false);
        assert_eq!(t.verdict, Verdict::Distinguishable);
    }

    #[test]
    fn two_repeats_are_never_enough() {
        let t = test(&[1.0, 1.0], &[9.0, 9.0], true);
        assert_eq!(t.verdict, Verdict::Inconclusive);
        assert!(t.reason.contains("3 repeats"), "{}", t.reason);
    }

    #[test]
    fn overlapping_repeats_tie_or_stay_open() {
        // Interleaved, close medians: a tie.
        let t = test(&[10.0, 10.3, 10.1], &[10.2, 10.05, 10.35], true);
        assert_eq!(t.verdict, Verdict::Tie, "{}", t.reason);
        // One wild repeat spoils the separation, and its spread is the noise: a tie within it.
        let t = test(&[10.0, 10.1, 13.0], &[11.0, 11.1, 11.2], true);
        assert!(t.p_value.unwrap() > ALPHA);
        assert_eq!(t.verdict, Verdict::Tie, "{}", t.reason);
        // Medians further apart than either side's spread, yet one pair crosses (U = 1,
        // p = 2/20): more repeats could tell.
        let t = test(&[0.0, 1.0, 1.9], &[1.5, 3.5, 3.6], true);
        assert!((t.p_value.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(t.verdict, Verdict::Inconclusive, "{}", t.reason);
    }
}

/// Ranks of `values` within their stratum, from 1, ties given their mean rank. Relabelling
/// the knob's values moves no value, so these are computed once per stratum.
fn ranks(values: &[f64]) -> Vec<f64> {
    let n = values.len();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut rank = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && values[idx[j + 1]] == values[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &t in &idx[i..=j] {
            rank[t] = r;
        }
        i = j + 1;
    }
    rank
}

/// Kruskal–Wallis H of one stratum: `groups[i]` is the value of the knob sample i ran with,
/// `rank[i]` its rank within the stratum.
fn kruskal_h(groups: &[usize], rank: &[f64], k: usize) -> f64 {
    let mut sum = vec![0.0; k];
    let mut cnt = vec![0usize; k];
    for (g, r) in groups.iter().zip(rank) {
        sum[*g] += r;
        cnt[*g] += 1;
    }
    let nf = rank.len() as f64;
    let s: f64 = (0..k)
        .filter(|&g| cnt[g] > 0)
        .map(|g| sum[g] * sum[g] / cnt[g] as f64)
        .sum();
    12.0 / (nf * (nf + 1.0)) * s - 3.0 * (nf + 1.0)
}

/// Does a knob move a metric at all? `strata` holds, per context (the configurations that
/// share every other knob's value), each repeat as (the knob's value index, the metric); the
/// statistic is the sum over strata of Kruskal–Wallis H, and its p-value comes from `perms`
/// random relabellings within each stratum (seeded, so the answer repeats): under the null
/// hypothesis the knob's value is an arbitrary label of each repeat. Strata with fewer than
/// two values say nothing and are left out. Returns None when no stratum is left.
pub fn effect_p(strata: &[Vec<(usize, f64)>], perms: usize, seed: u64) -> Option<f64> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let strata: Vec<(Vec<usize>, Vec<f64>)> = strata
        .iter()
        .filter(|s| {
            let mut v: Vec<usize> = s.iter().map(|x| x.0).collect();
            v.sort_unstable();
            v.dedup();
            v.len() >= 2
        })
        .map(|s| {
            let values: Vec<f64> = s.iter().map(|x| x.1).collect();
            (s.iter().map(|x| x.0).collect(), ranks(&values))
        })
        .collect();
    if strata.is_empty() {
        return None;
    }
    let k = strata
        .iter()
        .flat_map(|s| s.0.iter())
        .max()
        .map_or(0, |m| m + 1);
    let stat = |labels: &[Vec<usize>]| -> f64 {
        strata
            .iter()
            .zip(labels)
            .map(|((_, rank), g)| kruskal_h(g, rank, k))
            .sum()
    };
    let mut labels: Vec<Vec<usize>> = strata.iter().map(|s| s.0.clone()).collect();
    let observed = stat(&labels);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut as_extreme = 0usize;
    for _ in 0..perms {
        for l in labels.iter_mut() {
            l.shuffle(&mut rng);
        }
        if stat(&labels) >= observed - 1e-9 {
            as_extreme += 1;
        }
    }
    Some((1 + as_extreme) as f64 / (1 + perms) as f64)
}

#[cfg(test)]
mod effect_tests {
    use super::*;

    #[test]
    fn a_real_effect_is_found_and_a_null_knob_is_not() {
        // Three channel counts in two contexts, three repeats each: comm time falls with
        // channels in both contexts.
        let strata: Vec<Vec<(usize, f64)>> = (0..2)
            .map(|c| {
                let base = 1.0 + c as f64 * 0.01;
                (0..3)
                    .flat_map(|v| {
                        (0..3).map(move |r| (v, base * [8.0, 2.0, 1.0][v] + r as f64 * 0.01))
                    })
                    .collect()
            })
            .collect();
        let p = effect_p(&strata, 5000, 1).unwrap();
        assert!(p < 0.001, "{p}");
        // The same numbers with the labels unrelated to them: no effect.
        let mixed: Vec<Vec<(usize, f64)>> = strata
            .iter()
            .map(|s| s.iter().enumerate().map(|(i, x)| (i % 3, x.1)).collect())
            .collect();
        let p = effect_p(&mixed, 5000, 1).unwrap();
        assert!(p > 0.5, "{p}");
        // One value per stratum: nothing to compare.
        assert_eq!(effect_p(&[vec![(0, 1.0), (0, 2.0)]], 100, 1), None);
    }

    /// Under the null hypothesis the p-value is uniform: it falls below 0.05 about 5 % of
    /// the time (brute force over many random null data sets).
    #[test]
    fn the_effect_test_holds_its_level() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let trials = 200;
        let mut below = 0;
        for t in 0..trials {
            let strata: Vec<Vec<(usize, f64)>> = (0..2)
                .map(|_| (0..6).map(|i| (i % 2, rng.random::<f64>())).collect())
                .collect();
            if effect_p(&strata, 400, t).unwrap() <= 0.05 {
                below += 1;
            }
        }
        assert!(below <= 20, "{below} of {trials} below 0.05");
    }
}
