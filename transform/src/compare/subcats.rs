//! The subcategories level: `other_compute`'s GPU time per window and subcategory
//! (`crate::subcategory`), per pair each subcategory's spread over each side's windows, as
//! the categories level does for categories. It splits the categories level's `other` (which
//! also holds memset), so a vendor's extra copy or normalization kernels show by name.

use std::collections::{BTreeMap, HashMap};

use aorta_ingest::subcategory::SUBCATEGORIES;

use crate::launch::Links;
use crate::summary::spread;

use super::levels::LevelRow;
use super::load::{ints, strs, SideData};
use super::pairs::Pair;

/// (side, run, rank, step).
type Window = (usize, String, i64, Option<i64>);

/// Per subcategory (shipped ones first, in their order), one row per pair where either side
/// has it.
pub(super) fn levels(sides: &[SideData; 2], pairs: &[Pair]) -> Vec<LevelRow> {
    let mut windows: BTreeMap<Window, HashMap<String, i64>> = BTreeMap::new();
    for (side, d) in sides.iter().enumerate() {
        let df = &d.acts;
        let launchers = Links::new(&d.cpu, df).launchers(df);
        let subs = crate::subcategory::assign(df, &d.cpu, &launchers, &d.rules);
        let (run, rank, step) = (strs(df, "run"), ints(df, "rank"), ints(df, "step"));
        let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
        for i in 0..df.height() {
            let w = (
                side,
                run[i].unwrap_or("").to_string(),
                rank[i].unwrap_or(0),
                step[i],
            );
            let slot = windows.entry(w).or_default();
            if let Some(sub) = subs[i] {
                let ns = (end[i].unwrap_or(0) - start[i].unwrap_or(0)).max(0);
                *slot.entry(sub.to_string()).or_default() += ns;
            }
        }
    }
    let mut names: Vec<&str> = windows
        .values()
        .flat_map(|m| m.keys())
        .map(String::as_str)
        .collect();
    let order = |s: &str| {
        SUBCATEGORIES
            .iter()
            .position(|x| *x == s)
            .unwrap_or(usize::MAX)
    };
    names.sort_by_key(|s| (order(s), *s));
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        for p in pairs {
            let of = |s: usize| {
                windows
                    .iter()
                    .filter(move |(w, _)| w.0 == s && w.1 == p.runs[s])
            };
            if !(0..2).any(|s| of(s).any(|(_, m)| m.contains_key(name))) {
                continue;
            }
            let side = |s: usize| {
                spread(of(s).map(|(_, m)| Some(m.get(name).copied().unwrap_or(0) as f64 * 1e-6)))
            };
            out.push(LevelRow::of_pair("subcategories", p, name, "ms", side));
        }
    }
    out
}
