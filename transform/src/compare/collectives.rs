//! The collective level: per pair, each side's communication kernels per (kind, message
//! size, dtype, group size), with time per call and bandwidths (`collectives::sizes`, shared
//! with `aorta overlap --by collective`), and the skew of the matched ones beside the time.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::collectives::sizes::{self, key_text, Calls, SizeKey};
use crate::rows::str_column;
use crate::summary::spread;

use super::levels::{LevelRow, SIDES};
use super::load::SideData;
use super::pairs::Pair;

/// Each side's calls, per run.
pub(super) type SideCalls = [BTreeMap<String, Calls>; 2];

/// Each side's calls, per run.
pub(super) fn of(sides: &[SideData; 2]) -> SideCalls {
    [0, 1].map(|s| sizes::calls_by_run(&sides[s].acts, &sides[s].jobs))
}

/// The pair's calls of side `s` (none when its run has no communication).
fn pair_calls<'a>(calls: &'a SideCalls, p: &Pair, s: usize) -> &'a Calls {
    static NONE: Calls = Calls::new();
    calls[s].get(&p.runs[s]).unwrap_or(&NONE)
}

/// Per key, the transfer time, then the skew where either side has one: one row per pair
/// that has the key.
pub(super) fn levels(calls: &SideCalls, pairs: &[Pair]) -> Vec<LevelRow> {
    // (key, skew?) -> one row per pair, in pair order.
    let mut rows: BTreeMap<(&SizeKey, u8), Vec<LevelRow>> = BTreeMap::new();
    for p in pairs {
        let mut of_pair: BTreeMap<(&SizeKey, u8), LevelRow> = BTreeMap::new();
        for s in 0..2 {
            for (key, c) in pair_calls(calls, p, s) {
                let row = |suffix: &str| {
                    let key = format!("{}{suffix}", key_text(key));
                    LevelRow::of_pair("collectives", p, &key, "ms", |_| None)
                };
                let time = of_pair.entry((key, 0)).or_insert_with(|| row(""));
                time.sides[s] = spread(c.iter().map(|c| Some(c.time_ns as f64 * 1e-6)));
                let skew = spread(c.iter().map(|c| c.skew_ns.map(|x| x as f64 * 1e-6)));
                if skew.is_some() {
                    of_pair
                        .entry((key, 1))
                        .or_insert_with(|| row(" skew"))
                        .sides[s] = skew;
                }
            }
        }
        for (k, r) in of_pair {
            rows.entry(k).or_default().push(r);
        }
    }
    rows.into_values().flatten().collect()
}

/// `compare_collectives`: one row per pair, side and key (`workload` after `side`).
pub(super) fn frame(calls: &SideCalls, pairs: &[Pair]) -> PolarsResult<DataFrame> {
    let mut out: Option<DataFrame> = None;
    for p in pairs {
        let groups = [0, 1].map(|s| (SIDES[s], pair_calls(calls, p, s)));
        let mut df = sizes::frame("side", &groups)?;
        let n = df.height();
        df.insert_column(
            1,
            str_column("workload", std::iter::repeat_n(&p.workload, n)),
        )?;
        out = Some(match out {
            None => df,
            Some(mut all) => {
                all.vstack_mut(&df)?;
                all
            }
        });
    }
    match out {
        Some(df) => Ok(df),
        None => {
            let mut df = sizes::frame("side", &[])?;
            df.insert_column(1, str_column("workload", std::iter::empty::<&str>()))?;
            Ok(df)
        }
    }
}
