//! The collective level: each side's communication kernels per (kind, message size, dtype,
//! group size), with time per call and bandwidths (`collectives::sizes`, shared with `aorta
//! overlap --by collective`), and the skew of the matched ones beside the time.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::collectives::sizes::{self, key_text, Calls, SizeKey};
use crate::summary::spread;

use super::levels::{LevelRow, SIDES};
use super::load::SideData;

/// Each side's calls.
pub(super) fn of(sides: &[SideData; 2]) -> [Calls; 2] {
    [0, 1].map(|s| sizes::calls(&sides[s].acts, &sides[s].jobs))
}

/// A levels row for `key`, `suffix` after its text.
fn level_row(key: &SizeKey, suffix: &str) -> LevelRow {
    LevelRow {
        level: "collectives",
        key: format!("{}{suffix}", key_text(key)),
        unit: "ms",
        sides: [None, None],
        refused: false,
    }
}

/// Per key: the transfer time, then the skew where either side has one.
pub(super) fn levels(calls: &[Calls; 2]) -> Vec<LevelRow> {
    let mut rows: BTreeMap<(&SizeKey, u8), LevelRow> = BTreeMap::new();
    for (s, side) in calls.iter().enumerate() {
        for (key, c) in side {
            let row = rows.entry((key, 0)).or_insert_with(|| level_row(key, ""));
            row.sides[s] = spread(c.iter().map(|c| Some(c.time_ns as f64 * 1e-6)));
            let skew = spread(c.iter().map(|c| c.skew_ns.map(|x| x as f64 * 1e-6)));
            if skew.is_some() {
                let row = rows
                    .entry((key, 1))
                    .or_insert_with(|| level_row(key, " skew"));
                row.sides[s] = skew;
            }
        }
    }
    rows.into_values().collect()
}

/// `compare_collectives`: one row per side and key.
pub(super) fn frame(calls: &[Calls; 2]) -> PolarsResult<DataFrame> {
    sizes::frame("side", &[(SIDES[0], &calls[0]), (SIDES[1], &calls[1])])
}
