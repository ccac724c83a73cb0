//! `other_compute` split into its subcategories per step (`aorta_transform::subcategory`):
//! the category chart says other_compute is most of a step, this one says what it is.

use std::collections::BTreeMap;
use std::path::Path;

use super::charts::{stacked_per_step, StepSeries};
use super::data::{RunData, StepKey};
use crate::error::ReportError;
use crate::frames::{i64_col, str_col};
use crate::page::Page;
use aorta_ingest::subcategory::SUBCATEGORIES;

/// Shades for the shipped subcategories, in `SUBCATEGORIES` order (`other` grey); a
/// subcategory from a user's rules takes the next of `EXTRA`.
const COLORS: [&str; 10] = [
    "#2ca02c", "#98df8a", "#17becf", "#9edae5", "#bcbd22", "#dbdb8d", "#8c564b", "#c49c94",
    "#e377c2", "#c7c7c7",
];
const EXTRA: [&str; 4] = ["#393b79", "#637939", "#8c6d31", "#843c39"];

fn color(sub: &str, user: &mut Vec<String>) -> &'static str {
    if let Some(i) = SUBCATEGORIES.iter().position(|s| *s == sub) {
        return COLORS[i];
    }
    let i = user.iter().position(|u| u == sub).unwrap_or_else(|| {
        user.push(sub.to_string());
        user.len() - 1
    });
    EXTRA[i % EXTRA.len()]
}

/// The section: a stacked bar per step, and a table whose row sums are the category
/// chart's other_compute (the same activities, the same sum of durations).
pub(crate) fn chart(page: &mut Page, root: &Path, d: &RunData) -> Result<(), ReportError> {
    page.section("other_compute by subcategory per step");
    page.note(
        "The other_compute kernels of each step by what they do, from the rule table's \
         [[subcategory]] rows: the kernel name, the CPU operator that launched it and the \
         annotations around that (docs/CLASSIFICATION.md). Sum of durations, as above; each \
         row adds up to the step's other_compute.",
    );
    let rank = (d.ranks.len() == 1).then(|| d.ranks[0]);
    let path = root.join("gpu_activities");
    let df = aorta_transform::subcategory::per_step(root, &d.runs, rank)?;
    let (run, sub) = (
        str_col(&df, "run", &path)?,
        str_col(&df, "subcategory", &path)?,
    );
    let (rk, step, ns) = (
        i64_col(&df, "rank", &path)?,
        i64_col(&df, "step", &path)?,
        i64_col(&df, "gpu_ns", &path)?,
    );
    let mut by_sub: BTreeMap<&str, BTreeMap<StepKey, i64>> = BTreeMap::new();
    let mut steps: Vec<StepKey> = Vec::new();
    for k in 0..df.height() {
        let key = (run[k].clone(), rk[k].unwrap_or(0), step[k]);
        if d.step_keys.contains(&key) {
            let slot = by_sub.entry(sub[k].as_str()).or_default();
            slot.insert(key.clone(), ns[k].unwrap_or(0));
            steps.push(key);
        }
    }
    steps.sort();
    steps.dedup();
    if steps.is_empty() {
        page.note("No other_compute kernels in the reported steps: no chart.");
        return Ok(());
    }
    // Shipped subcategories in their order, then the user's by name.
    let mut subs: Vec<(&str, BTreeMap<StepKey, i64>)> = by_sub.into_iter().collect();
    let rank = |s: &str| {
        SUBCATEGORIES
            .iter()
            .position(|x| *x == s)
            .unwrap_or(usize::MAX)
    };
    subs.sort_by_key(|(s, _)| (rank(s), *s));
    let mut user = Vec::new();
    let series: Vec<StepSeries> = subs
        .iter()
        .map(|(sub, vals)| (*sub, color(sub, &mut user), vals))
        .collect();
    let y_title = "other_compute GPU time (ms, sum of durations)";
    stacked_per_step(page, &steps, &series, y_title, Some("other_compute"));
    Ok(())
}
