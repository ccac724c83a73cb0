//! The compare page: a reference run against a candidate run, from the Parquet tables
//! `aorta compare -o DIR` writes (`compare_levels`, `compare_steps`, `compare_categories`,
//! `compare_operators`, `compare_collectives`) and its `summary.json`.
//!
//! The page draws what the tables hold; the only arithmetic here is the spread of per-step
//! category times for the bars (the same numpy percentiles as `aorta overlap`) and the
//! selection of the top 20 operators by |diff|.

mod charts;
mod load;
mod ratio;
mod sides;

use std::path::Path;

use aorta_transform::compare::ComparisonSummary;

use crate::error::ReportError;
use crate::fmt;
use crate::page::Page;
use load::{Level, Tables};

/// Renders the tables `aorta compare -o DIR` wrote in `dir` into one page at `out`; returns
/// the number of charts drawn.
pub fn compare_report(dir: &Path, out: &Path) -> Result<usize, ReportError> {
    let t = Tables::load(dir)?;
    let summary = t.summary.as_ref();
    let mut page = Page::new(&sides::title(summary));
    page.note(&format!(
        "Tables from {}. Every ratio is candidate / reference; medians with p10–p90 over steps \
         and ranks, so a real gap stands out from noise.",
        dir.display()
    ));
    sides::sides_table(&mut page, summary.map_or(&[], |s| s.sides.as_slice()));
    sides::verdict_and_pairs(&mut page, summary.and_then(|s| s.pairs.as_ref()));
    levels_table(&mut page, &t.levels, "steps", "Steps: summary");
    charts::steps(&mut page, &t.steps);
    charts::categories(&mut page, &t.categories);
    levels_table(&mut page, &t.levels, "categories", "Categories: summary");
    levels_table(
        &mut page,
        &t.levels,
        "subcategories",
        "other_compute by subcategory: summary",
    );
    charts::operators(&mut page, &t.operators);
    charts::collectives(&mut page, &t.collectives);
    levels_table(&mut page, &t.levels, "collectives", "Collectives: summary");
    python_block(&mut page, summary.map(|s| &s.comparison));
    page.write(out)?;
    Ok(page.plot_count())
}

/// The Python aorta tool's `overlap_ratio` (summary.json `comparison`), last: it is the
/// Python tool's own definition, kept so its numbers can be checked, not the page's lead.
fn python_block(page: &mut Page, comparison: Option<&ComparisonSummary>) {
    let Some(c) = comparison else {
        return;
    };
    page.section("Python aorta keys");
    page.note(
        "summary.json keeps the Python aorta tool's `overlap_ratio` with its meaning (mean \
         overlap / mean compute), for checking against that tool.",
    );
    let num = |x: Option<f64>| fmt::opt(x, fmt::ratio);
    page.table(
        &[
            "reference overlap_ratio (Python aorta)",
            "candidate overlap_ratio (Python aorta)",
            "delta",
        ],
        &[vec![
            num(c.reference_overlap_ratio),
            num(c.candidate_overlap_ratio),
            num(c.ratio_delta),
        ]],
    );
}

/// Keys the summary tables lead with: what was not hidden, and the hidden share.
const LEAD_KEYS: [&str; 2] = ["exposed_comm_ms", "comm_hidden_pct"];

/// One `compare_levels` level as a table: median (p10–p90) per side and the ratio.
fn levels_table(page: &mut Page, levels: &[Level], level: &str, heading: &str) {
    let mut of: Vec<&Level> = levels.iter().filter(|l| l.level == level).collect();
    // Stable: the lead keys first, the rest in the table's order.
    of.sort_by_key(|l| !LEAD_KEYS.contains(&l.key.as_str()));
    let rows: Vec<Vec<String>> = of
        .into_iter()
        .map(|l| {
            let v = |x: Option<f64>| fmt::opt(x, |x| fmt::unit(x, &l.unit));
            let range = |s: &[Option<f64>; 3]| match (s[1], s[2]) {
                (None, None) => "-".to_string(),
                (a, b) => format!("{} – {}", v(a), v(b)),
            };
            vec![
                l.key.clone(),
                l.unit.clone(),
                v(l.reference[0]),
                range(&l.reference),
                v(l.candidate[0]),
                range(&l.candidate),
                fmt::opt(l.ratio, fmt::ratio),
            ]
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    page.section(heading);
    page.table(
        &[
            "key",
            "unit",
            "reference median",
            "reference p10 – p90",
            "candidate median",
            "candidate p10 – p90",
            "ratio",
        ],
        &rows,
    );
}
