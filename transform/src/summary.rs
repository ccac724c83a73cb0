//! Spread of a ratio across steps or ranks: median and p10–p90, so a reader can tell a real
//! gap from noise (docs/METRICS.md, "Comparing two runs").

use polars::prelude::*;

/// Median and 10th/90th percentiles of the non-null values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Number of values it is taken over: the non-null, non-NaN ones (at least 1).
    pub n: usize,
    /// The median (p50).
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
}

/// Percentile `q` (0..=1) of sorted values, interpolating linearly between the two nearest
/// ranks (numpy's default, `(n - 1) * q`).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The median of `values` (the mean of the two middle ones of an even count; NaNs left
/// out); `None` when nothing is left.
pub fn median(values: &[f64]) -> Option<f64> {
    spread(values.iter().map(|x| Some(*x))).map(|s| s.median)
}

/// The spread of `values` (nulls and NaNs left out); `None` when nothing is left.
pub fn spread(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
    let mut v: Vec<f64> = values
        .into_iter()
        .flatten()
        .filter(|x| !x.is_nan())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(Spread {
        n: v.len(),
        median: quantile(&v, 0.5),
        p10: quantile(&v, 0.1),
        p90: quantile(&v, 0.9),
    })
}

/// The ratios `aorta overlap` summarizes, as named in the tables.
pub const RATIOS: [&str; 3] = [
    "tp_overlap_ratio",
    "comm_hidden_pct",
    "compute_overlap_ratio",
];

/// The spread of one float column of a frame.
pub fn column_spread(df: &DataFrame, column: &str) -> PolarsResult<Option<Spread>> {
    Ok(spread(df.column(column)?.f64()?.iter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        // numpy.percentile([1, 2, 3, 4, 10], [10, 50, 90]) = [1.4, 3.0, 7.6]
        let s = spread([4.0, 1.0, 10.0, 3.0, 2.0].map(Some)).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 3.0);
        assert!((s.p10 - 1.4).abs() < 1e-12 && (s.p90 - 7.6).abs() < 1e-12);
        assert_eq!(spread([None, Some(f64::NAN)]), None);
        let one = spread([Some(0.5), None]).unwrap();
        assert_eq!((one.n, one.median, one.p10, one.p90), (1, 0.5, 0.5, 0.5));
    }
}
