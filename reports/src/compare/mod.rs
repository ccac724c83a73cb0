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
    overall_chart(&mut page, &t.levels);
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

/// With several pairs: each steps and categories key's overall ratio (the geometric mean of
/// the pairs' ratios) with its p10–p90 whisker, on a log axis centred at 1.
fn overall_chart(page: &mut Page, levels: &[Level]) {
    if !several_pairs(levels) {
        return;
    }
    let points: Vec<ratio::Point> = levels
        .iter()
        .filter(|l| l.workload.is_none() && ["steps", "categories"].contains(&l.level.as_str()))
        .filter_map(|l| {
            let r = l.ratio.filter(|r| *r > 0.0)?;
            let label = match l.level.as_str() {
                "categories" => format!("category {}", l.key),
                _ => l.key.clone(),
            };
            Some(ratio::Point {
                hover: format!(
                    "{label}: geometric mean of {} pairs' ratios; whisker p10–p90",
                    l.ratio_n.unwrap_or(0)
                ),
                label,
                ratio: r,
                whisker: l.ratio_range[0].zip(l.ratio_range[1]),
            })
        })
        .collect();
    page.section("Overall: geometric mean over the pairs");
    if points.is_empty() {
        page.note("No overall ratio to chart (refused, or no key has a ratio in any pair).");
        return;
    }
    page.note(
        "Each steps and categories key: the geometric mean of the pairs' ratios (candidate / \
         reference), whiskers p10–p90 of the pairs' ratios. Each pair's own numbers are in the \
         tables below.",
    );
    page.plot_json(ratio::chart(
        "geometric mean over pairs",
        "#1f77b4",
        &points,
        &[],
    ));
}

/// Keys the summary tables lead with: what was not hidden, and the hidden share.
const LEAD_KEYS: [&str; 2] = ["exposed_comm_ms", "comm_hidden_pct"];

/// Whether the levels come from several pairs (they then hold overall lines, with no
/// workload, beside each pair's).
fn several_pairs(levels: &[Level]) -> bool {
    levels.iter().any(|l| l.workload.is_some()) && levels.iter().any(|l| l.workload.is_none())
}

/// One `compare_levels` level as a table: median (p10–p90) per side and the ratio. With
/// several pairs, per key the overall line first (the geometric mean of the pairs' ratios,
/// with their p10–p90; no side medians, which would mix workloads), then one line per pair.
fn levels_table(page: &mut Page, levels: &[Level], level: &str, heading: &str) {
    let several = several_pairs(levels);
    let mut of: Vec<&Level> = levels.iter().filter(|l| l.level == level).collect();
    // Stable: the lead keys first, the rest in the table's order (each key's lines together).
    of.sort_by_key(|l| !LEAD_KEYS.contains(&l.key.as_str()));
    let rows: Vec<Vec<String>> = of.into_iter().map(|l| level_cells(l, several)).collect();
    if rows.is_empty() {
        return;
    }
    page.section(heading);
    let mut header = vec!["key"];
    if several {
        header.push("pair");
    }
    header.extend([
        "unit",
        "reference median",
        "reference p10 – p90",
        "candidate median",
        "candidate p10 – p90",
        "ratio",
    ]);
    if several {
        header.push("ratio p10 – p90 over pairs");
        page.note(
            "Per key, first the overall line: the geometric mean of the pairs' ratios, with the \
             p10–p90 of those ratios (no side medians: a median over several workloads' steps \
             would mix them). Then one line per pair, each side's median over its steps and \
             ranks.",
        );
    }
    page.table(&header, &rows);
}

fn level_cells(l: &Level, several: bool) -> Vec<String> {
    let v = |x: Option<f64>| fmt::opt(x, |x| fmt::unit(x, &l.unit));
    let range = |a: Option<f64>, b: Option<f64>, f: &dyn Fn(Option<f64>) -> String| match (a, b) {
        (None, None) => "-".to_string(),
        (a, b) => format!("{} – {}", f(a), f(b)),
    };
    let ratio = |x: Option<f64>| fmt::opt(x, fmt::ratio);
    let mut cells = vec![l.key.clone()];
    if several {
        cells.push(match (&l.workload, l.ratio_n) {
            (Some(w), _) => w.clone(),
            (None, Some(n)) => format!("all: geometric mean of {n}"),
            (None, None) => "all".into(),
        });
    }
    cells.extend([
        l.unit.clone(),
        v(l.reference[0]),
        range(l.reference[1], l.reference[2], &v),
        v(l.candidate[0]),
        range(l.candidate[1], l.candidate[2], &v),
        ratio(l.ratio),
    ]);
    if several {
        cells.push(range(l.ratio_range[0], l.ratio_range[1], &ratio));
    }
    cells
}
