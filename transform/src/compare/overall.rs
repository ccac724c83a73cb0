//! The overall row of each level key: across the pairs, the geometric mean of the pairs'
//! ratios with the spread of those ratios.
//!
//! Every level is computed per pair (one workload against itself on the other side). A key
//! still needs one number a reader, the page and the gate can take: with one pair that is the
//! pair's own row (no second row to de-duplicate); with several it is an added row with no
//! workload whose ratio is the geometric mean of the pairs' ratios — the mean that treats
//! 2× and 0.5× as opposites, and the only one where the ratio of the means equals the mean
//! of the ratios — and whose `ratio_spread` (n, median, p10–p90) is over the pairs' ratios.
//!
//! The overall row carries **no side statistics** (null medians and p10–p90). A median over
//! all of a side's windows mixes workloads — bert's 4 ms steps and qwen's 35 ms — and lands
//! on neither; a geometric mean of the sides' medians would be a time no workload took. The
//! numbers in milliseconds belong to the pairs' rows, where they mean something.
//!
//! A pair whose reference is 0 (or missing) has no ratio and is left out of the mean (`n`
//! says how many entered); a candidate of 0 makes its ratio 0, and the mean 0, as the product
//! of the ratios says.

use crate::summary::spread;

use super::levels::LevelRow;

/// The geometric mean of `ratios`; `None` when empty or when one is negative or NaN.
pub(super) fn geomean(ratios: &[f64]) -> Option<f64> {
    if ratios.is_empty() || ratios.iter().any(|r| r.is_nan() || *r < 0.0) {
        return None;
    }
    Some((ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
}

/// `rows` (each key's pair rows together, in pair order) with each key's overall row in
/// front of its pair rows when there are several pairs; with one pair, each row is marked as
/// its key's overall row.
pub(super) fn with_overall(rows: Vec<LevelRow>, pairs: usize) -> Vec<LevelRow> {
    if pairs <= 1 {
        return rows
            .into_iter()
            .map(|r| LevelRow { overall: true, ..r })
            .collect();
    }
    let mut out: Vec<LevelRow> = Vec::with_capacity(rows.len() + rows.len() / pairs + 1);
    let mut group: Vec<LevelRow> = Vec::new();
    for r in rows {
        if group
            .last()
            .is_some_and(|g| (g.level, &g.key) != (r.level, &r.key))
        {
            flush(&mut out, &mut group);
        }
        group.push(r);
    }
    flush(&mut out, &mut group);
    out
}

/// Moves one key's pair rows into `out`, behind their overall row.
fn flush(out: &mut Vec<LevelRow>, group: &mut Vec<LevelRow>) {
    let Some(first) = group.first() else { return };
    let ratios: Vec<f64> = group.iter().filter_map(LevelRow::pair_ratio).collect();
    let over = geomean(&ratios).zip(spread(ratios.iter().map(|&r| Some(r))));
    out.push(LevelRow {
        level: first.level,
        workload: None,
        key: first.key.clone(),
        unit: first.unit,
        sides: [None, None],
        over_pairs: over,
        overall: true,
        refused: false,
    });
    out.append(group);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Spread;

    fn row(key: &str, workload: &str, r: f64, c: f64) -> LevelRow {
        let s = |m: f64| {
            Some(Spread {
                n: 1,
                median: m,
                p10: m,
                p90: m,
            })
        };
        LevelRow {
            level: "steps",
            workload: Some(workload.into()),
            key: key.into(),
            unit: "ms",
            sides: [s(r), s(c)],
            over_pairs: None,
            overall: false,
            refused: false,
        }
    }

    #[test]
    fn geometric_mean_by_hand() {
        // 2 and 0.5 are opposites: their geometric mean is 1; (1 · 4 · 2)^(1/3) = 2.
        assert!((geomean(&[2.0, 0.5]).unwrap() - 1.0).abs() < 1e-12);
        assert!((geomean(&[1.0, 4.0, 2.0]).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(geomean(&[3.0, 0.0]), Some(0.0));
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[1.0, -1.0]), None);
    }

    #[test]
    fn one_overall_row_per_key_in_front_of_its_pairs() {
        // step_ms: bert 4 -> 6 ms (1.5), qwen 35 -> 17.5 ms (0.5): geometric mean √0.75,
        // p10 = 0.5 + 0.1 · (1.5 − 0.5) = 0.6, p90 = 1.4. comm_ms: bert's reference is 0 (no
        // ratio), qwen 2 -> 3 ms: the mean of the one ratio there is.
        let rows = vec![
            row("step_ms", "bert", 4.0, 6.0),
            row("step_ms", "qwen", 35.0, 17.5),
            row("comm_ms", "bert", 0.0, 1.0),
            row("comm_ms", "qwen", 2.0, 3.0),
        ];
        let out = with_overall(rows, 2);
        let keys: Vec<(&str, Option<&str>, bool)> = out
            .iter()
            .map(|r| (r.key.as_str(), r.workload.as_deref(), r.overall))
            .collect();
        assert_eq!(
            keys,
            [
                ("step_ms", None, true),
                ("step_ms", Some("bert"), false),
                ("step_ms", Some("qwen"), false),
                ("comm_ms", None, true),
                ("comm_ms", Some("bert"), false),
                ("comm_ms", Some("qwen"), false),
            ]
        );
        let step = &out[0];
        assert_eq!(step.sides, [None, None]);
        assert!((step.ratio().unwrap() - 0.75f64.sqrt()).abs() < 1e-12);
        let s = step.ratio_spread().unwrap();
        assert_eq!(s.n, 2);
        assert!((s.p10 - 0.6).abs() < 1e-12 && (s.p90 - 1.4).abs() < 1e-12);
        assert_eq!(out[3].ratio(), Some(1.5));
        assert_eq!(out[3].ratio_spread().unwrap().n, 1);
        // Refused: no ratio, no spread of ratios.
        let refused = LevelRow {
            refused: true,
            ..with_overall(vec![row("step_ms", "bert", 4.0, 6.0)], 2).remove(0)
        };
        assert_eq!((refused.ratio(), refused.ratio_spread()), (None, None));
        // One pair: its rows are the overall rows, nothing added.
        let one = with_overall(vec![row("step_ms", "bert", 4.0, 6.0)], 1);
        assert_eq!(one.len(), 1);
        assert!(one[0].overall && one[0].workload.as_deref() == Some("bert"));
        assert_eq!(one[0].ratio(), Some(1.5));
    }
}
