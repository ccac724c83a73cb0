//! The step and category levels: one row per side, run, rank and step, and per pair of runs
//! each key's spread over the pair's rows (`overall` adds the rows across pairs).

use aorta_ingest::classify::Category;
use std::collections::BTreeMap;

use polars::prelude::*;

use crate::rows::str_column;
use crate::summary::{spread, Spread};

use super::load::{floats, ints, strs, SideData};
use super::pairs::{workload_of, Pair};

pub(super) const SIDES: [&str; 2] = ["reference", "candidate"];

/// One key of one level: one pair's spreads, or (`over_pairs`) the overall row of several.
pub(super) struct LevelRow {
    pub level: &'static str,
    /// The pair's workload; `None` on the overall row of several pairs.
    pub workload: Option<String>,
    pub key: String,
    pub unit: &'static str,
    /// Each side's spread over the pair's windows; `None` on the overall row of several pairs
    /// (`overall` says why).
    pub sides: [Option<Spread>; 2],
    /// On the overall row of several pairs: the geometric mean of the pairs' ratios and the
    /// spread of those ratios.
    pub over_pairs: Option<(f64, Spread)>,
    /// The row that stands for the key (one per key and level): the overall row, or the pair's
    /// row when there is one pair.
    pub overall: bool,
    /// The comparability check failed: no ratio (`pairs`).
    pub refused: bool,
}

impl LevelRow {
    /// A pair's row of `key`, each side's spread from `side(0)` and `side(1)`.
    pub(super) fn of_pair(
        level: &'static str,
        pair: &Pair,
        key: &str,
        unit: &'static str,
        side: impl Fn(usize) -> Option<Spread>,
    ) -> LevelRow {
        LevelRow {
            level,
            workload: Some(pair.workload.clone()),
            key: key.to_string(),
            unit,
            sides: [side(0), side(1)],
            over_pairs: None,
            overall: false,
            refused: false,
        }
    }

    /// The ratio before the comparability check: candidate median / reference median on a
    /// pair's row (null when either is missing or the reference 0), the geometric mean on
    /// the overall row of several pairs.
    pub(super) fn pair_ratio(&self) -> Option<f64> {
        if let Some((g, _)) = self.over_pairs {
            return Some(g);
        }
        match self.sides {
            [Some(r), Some(c)] if r.median != 0.0 => Some(c.median / r.median),
            _ => None,
        }
    }

    /// `pair_ratio`, null when the comparison is refused.
    pub(super) fn ratio(&self) -> Option<f64> {
        (!self.refused).then(|| self.pair_ratio()).flatten()
    }

    /// The spread of the pairs' ratios (overall row of several pairs), null when refused.
    pub(super) fn ratio_spread(&self) -> Option<Spread> {
        self.over_pairs.filter(|_| !self.refused).map(|o| o.1)
    }
}

/// One statistic of a spread.
type Stat = fn(&Spread) -> f64;

/// `compare_levels`: level, workload, overall, key, unit, both sides' median and p10–p90,
/// the ratio and, on overall rows of several pairs, the pairs' ratios' n and p10–p90.
pub(super) fn frame(rows: &[LevelRow]) -> PolarsResult<DataFrame> {
    let stat = |side: usize, f: Stat| -> Vec<Option<f64>> {
        rows.iter().map(|r| r.sides[side].as_ref().map(f)).collect()
    };
    let workloads: Vec<Option<&str>> = rows.iter().map(|r| r.workload.as_deref()).collect();
    let overall: Vec<bool> = rows.iter().map(|r| r.overall).collect();
    let mut cols = vec![
        str_column("level", rows.iter().map(|r| r.level)),
        Column::new("workload".into(), workloads),
        Column::new("overall".into(), overall),
        str_column("key", rows.iter().map(|r| r.key.as_str())),
        str_column("unit", rows.iter().map(|r| r.unit)),
    ];
    let stats: [(&str, Stat); 3] = [
        ("median", |s| s.median),
        ("p10", |s| s.p10),
        ("p90", |s| s.p90),
    ];
    for (side, name) in SIDES.iter().enumerate() {
        for (stat_name, f) in stats {
            let name = format!("{name}_{stat_name}");
            cols.push(Column::new(name.into(), stat(side, f)));
        }
    }
    let ratios: Vec<Option<f64>> = rows.iter().map(LevelRow::ratio).collect();
    cols.push(Column::new("ratio".into(), ratios));
    let n: Vec<Option<i64>> = rows
        .iter()
        .map(|r| r.ratio_spread().map(|s| s.n as i64))
        .collect();
    cols.push(Column::new("ratio_n".into(), n));
    for (stat_name, f) in &stats[1..] {
        let v: Vec<Option<f64>> = rows
            .iter()
            .map(|r| r.ratio_spread().map(|s| f(&s)))
            .collect();
        cols.push(Column::new(format!("ratio_{stat_name}").into(), v));
    }
    DataFrame::new_infer_height(cols)
}

/// The step-level keys: (key, unit, overlap_steps column, scale). `step_ms` is the step's
/// `ProfilerStep` span, else (no span: JSONL, stepless captures) its GPU window.
pub(super) const STEP_KEYS: [(&str, &str, &str, f64); 9] = [
    ("step_ms", "ms", "step_ns", 1e-6),
    ("gpu_window_ms", "ms", "window_ns", 1e-6),
    ("comm_ms", "ms", "comm_ns", 1e-6),
    ("exposed_comm_ms", "ms", "exposed_comm_ns", 1e-6),
    ("compute_ms", "ms", "compute_ns", 1e-6),
    (
        "compute_comm_overlap_ms",
        "ms",
        "compute_comm_overlap_ns",
        1e-6,
    ),
    ("tp_overlap_ratio", "ratio", "tp_overlap_ratio", 1.0),
    ("comm_hidden_pct", "pct", "comm_hidden_pct", 1.0),
    (
        "compute_overlap_ratio",
        "ratio",
        "compute_overlap_ratio",
        1.0,
    ),
];

/// A window of one side: (side, run, rank, step).
pub(super) type Window = (usize, String, i64, Option<i64>);

/// The step rows of both sides, each with the `STEP_KEYS` values.
pub(super) struct StepRows {
    pub rows: Vec<(Window, Vec<Option<f64>>)>,
}

/// Which `overlap_steps` rows a side is compared on: its trace rows, or its JSONL rows when
/// it has no trace (a side mixing both would count every iteration twice).
pub(super) fn step_source(d: &SideData) -> &'static str {
    let src = strs(&d.overlap.steps, "source");
    if src.contains(&Some("trace")) {
        "trace"
    } else {
        "jsonl"
    }
}

impl StepRows {
    pub(super) fn of(sides: &[SideData; 2]) -> StepRows {
        let mut rows = Vec::new();
        for (side, d) in sides.iter().enumerate() {
            let df = &d.overlap.steps;
            let source = step_source(d);
            let (src, run) = (strs(df, "source"), strs(df, "run"));
            let (rank, step) = (ints(df, "rank"), ints(df, "step"));
            let mut values: Vec<Vec<Option<f64>>> = STEP_KEYS
                .iter()
                .map(|&(_, _, c, scale)| column_f64(df, c, scale))
                .collect();
            let window = values[1].clone();
            for (step, w) in values[0].iter_mut().zip(window) {
                *step = step.or(w);
            }
            for i in (0..df.height()).filter(|&i| src[i] == Some(source)) {
                let w = (
                    side,
                    run[i].unwrap_or("").to_string(),
                    rank[i].unwrap_or(0),
                    step[i],
                );
                rows.push((w, values.iter().map(|v| v[i]).collect()));
            }
        }
        StepRows { rows }
    }

    /// Per key, one row per pair: each side's spread over the pair's run's windows.
    pub(super) fn levels(&self, pairs: &[Pair]) -> Vec<LevelRow> {
        let mut out = Vec::new();
        for (k, &(key, unit, _, _)) in STEP_KEYS.iter().enumerate() {
            for p in pairs {
                let side = |s: usize| {
                    let of = self
                        .rows
                        .iter()
                        .filter(|r| r.0 .0 == s && r.0 .1 == p.runs[s]);
                    spread(of.map(|r| r.1[k]))
                };
                out.push(LevelRow::of_pair("steps", p, key, unit, side));
            }
        }
        out
    }

    pub(super) fn frame(&self, pairs: &[Pair]) -> PolarsResult<DataFrame> {
        let mut cols = window_columns(self.rows.iter().map(|r| &r.0), pairs);
        for (k, &(key, ..)) in STEP_KEYS.iter().enumerate() {
            let v: Vec<Option<f64>> = self.rows.iter().map(|r| r.1[k]).collect();
            cols.push(Column::new(key.into(), v));
        }
        DataFrame::new_infer_height(cols)
    }
}

/// An int or float column as f64 times `scale`.
fn column_f64(df: &DataFrame, name: &str, scale: f64) -> Vec<Option<f64>> {
    let ints = ints(df, name);
    if ints.iter().any(Option::is_some) {
        return ints.iter().map(|v| v.map(|x| x as f64 * scale)).collect();
    }
    floats(df, name)
        .iter()
        .map(|v| v.map(|x| x * scale))
        .collect()
}

/// side, workload (the pair's), run, rank, step.
fn window_columns<'a>(w: impl Iterator<Item = &'a Window> + Clone, pairs: &[Pair]) -> Vec<Column> {
    vec![
        str_column("side", w.clone().map(|w| SIDES[w.0])),
        str_column("workload", w.clone().map(|w| workload_of(pairs, w.0, &w.1))),
        str_column("run", w.clone().map(|w| w.1.as_str())),
        Column::new("rank".into(), w.clone().map(|w| w.2).collect::<Vec<_>>()),
        Column::new("step".into(), w.map(|w| w.3).collect::<Vec<_>>()),
    ]
}

/// The category groups compared (METRICS.md categories; memset joins `other`).
pub(super) const CATEGORIES: [&str; 5] = [
    Category::Gemm.as_str(),
    Category::Comm.as_str(),
    Category::Attention.as_str(),
    Category::Memcpy.as_str(),
    "other",
];

fn category_index(c: &str) -> usize {
    CATEGORIES.iter().position(|&k| k == c).unwrap_or(4)
}

/// GPU time (sum of activity durations) per window and category group.
pub(super) struct CategoryRows {
    pub rows: BTreeMap<Window, [i64; 5]>,
}

impl CategoryRows {
    pub(super) fn of(sides: &[SideData; 2]) -> CategoryRows {
        let mut rows: BTreeMap<Window, [i64; 5]> = BTreeMap::new();
        for (side, d) in sides.iter().enumerate() {
            let df = &d.acts;
            let (run, cat) = (strs(df, "run"), strs(df, "category"));
            let (rank, step) = (ints(df, "rank"), ints(df, "step"));
            let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
            for i in 0..df.height() {
                let w = (
                    side,
                    run[i].unwrap_or("").to_string(),
                    rank[i].unwrap_or(0),
                    step[i],
                );
                let dur = end[i].unwrap_or(0) - start[i].unwrap_or(0);
                rows.entry(w).or_default()[category_index(cat[i].unwrap_or(""))] += dur.max(0);
            }
        }
        CategoryRows { rows }
    }

    /// Per category, one row per pair: each side's spread over the pair's run's windows.
    pub(super) fn levels(&self, pairs: &[Pair]) -> Vec<LevelRow> {
        let mut out = Vec::new();
        for (c, key) in CATEGORIES.iter().enumerate() {
            for p in pairs {
                let side = |s: usize| {
                    let of = self
                        .rows
                        .iter()
                        .filter(|(w, _)| w.0 == s && w.1 == p.runs[s]);
                    spread(of.map(|(_, v)| Some(v[c] as f64 * 1e-6)))
                };
                out.push(LevelRow::of_pair("categories", p, key, "ms", side));
            }
        }
        out
    }

    pub(super) fn frame(&self, pairs: &[Pair]) -> PolarsResult<DataFrame> {
        let long: Vec<(&Window, usize, i64)> = self
            .rows
            .iter()
            .flat_map(|(w, v)| (0..CATEGORIES.len()).map(move |c| (w, c, v[c])))
            .collect();
        let mut cols = window_columns(long.iter().map(|r| r.0), pairs);
        cols.push(str_column("category", long.iter().map(|r| CATEGORIES[r.1])));
        let ms: Vec<f64> = long.iter().map(|r| r.2 as f64 * 1e-6).collect();
        cols.push(Column::new("gpu_ms".into(), ms));
        DataFrame::new_infer_height(cols)
    }
}
