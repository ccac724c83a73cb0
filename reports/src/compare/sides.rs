//! The top of the compare page: what is compared (both sides' runs, platforms, GPUs, world
//! sizes, versions and files), whether it can be compared (the verdict and its reasons), and
//! the pairs with their step ratios and geometric mean, from summary.json.
//!
//! A ratio without its two sides named is a number nobody can check, and a refused
//! comparison must say so before any chart does.

use aorta_transform::compare::{PairsSummary, SideSummary, Summary};

use super::ratio;
use crate::fmt;
use crate::page::Page;

/// Files listed per run before "and N more".
const FILES_SHOWN: usize = 3;

/// The page's title: `reference vs candidate` by the users' selectors.
pub(crate) fn title(summary: Option<&Summary>) -> String {
    match summary {
        Some(s) => format!(
            "aorta compare — {} (reference) vs {} (candidate)",
            s.comparison.reference, s.comparison.candidate
        ),
        None => "aorta compare — reference vs candidate".into(),
    }
}

/// One row per side and run: platform, GPU, world size, versions, files.
pub(crate) fn sides_table(page: &mut Page, sides: &[SideSummary]) {
    page.section("What is compared");
    if sides.is_empty() {
        page.note("summary.json does not name the runs (written by an older aorta).");
        return;
    }
    let rows: Vec<Vec<String>> = sides
        .iter()
        .flat_map(|s| {
            s.runs.iter().map(move |(run, i)| {
                let join = |v: Vec<&str>| {
                    if v.is_empty() {
                        "-".into()
                    } else {
                        v.join(", ")
                    }
                };
                vec![
                    format!("{} ({})", s.side, s.selector),
                    run.clone(),
                    i.platform.clone(),
                    join(i.devices.iter().map(String::as_str).collect()),
                    fmt::opt(i.world_size, |w| w.to_string()),
                    join(i.versions.iter().map(String::as_str).collect()),
                    files(&i.sources, i.files),
                ]
            })
        })
        .collect();
    page.table(
        &[
            "side (selector)",
            "run",
            "platform",
            "GPU",
            "world size",
            "versions",
            "files",
        ],
        &rows,
    );
}

/// The first `FILES_SHOWN` files by name, then how many more.
fn files(sources: &[String], n: usize) -> String {
    let name = |p: &String| {
        std::path::Path::new(p)
            .file_name()
            .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
    };
    let mut v: Vec<String> = sources.iter().take(FILES_SHOWN).map(name).collect();
    let n = n.max(sources.len());
    if n > v.len() {
        v.push(format!("and {} more", n - v.len()));
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

/// The comparability verdict, the pairs with their ratios and geometric mean, and the runs
/// left unpaired.
pub(crate) fn verdict_and_pairs(page: &mut Page, p: Option<&PairsSummary>) {
    let Some(p) = p else { return };
    page.section("Pairs and verdict");
    if p.comparable && !p.not_checked.is_empty() {
        page.verdict(
            false,
            &format!(
                "Not checked: the work mix of {} could not be checked (no CPU operators and no GPU category time on a side); same world size and step structure.",
                p.not_checked.join(", ")
            ),
        );
    } else if p.comparable {
        page.verdict(
            true,
            "Comparable: same world size, step structure and work mix (CPU operators; without them, kernel names on one platform and the GPU time's category mix).",
        );
    } else if p.forced {
        page.verdict(
            false,
            "NOT COMPARABLE, ratios computed anyway (--force). The reasons:",
        );
    } else {
        page.verdict(
            false,
            "NOT COMPARABLE: the step ratios are refused (--force computes them). The reasons:",
        );
    }
    for r in &p.reasons {
        page.note(&format!("• {r}"));
    }
    let rows: Vec<Vec<String>> = p
        .pairs
        .iter()
        .map(|e| {
            vec![
                e.workload.clone(),
                e.reference.clone(),
                e.candidate.clone(),
                fmt::opt(e.reference_step_ms, fmt::ms),
                fmt::opt(e.candidate_step_ms, fmt::ms),
                fmt::opt(e.step_ratio, fmt::ratio),
                if e.problems.is_empty() {
                    "-".into()
                } else {
                    e.problems.join("; ")
                },
            ]
        })
        .collect();
    page.table(
        &[
            "workload",
            "reference run",
            "candidate run",
            "reference step_ms (median)",
            "candidate step_ms (median)",
            "ratio",
            "problems",
        ],
        &rows,
    );
    match (p.step_ratio_geomean, p.step_ratio_spread.as_ref()) {
        (Some(g), Some(s)) if s.n > 1 => page.note(&format!(
            "Geometric mean of the pair step ratios: {} (p10–p90 {} – {}, {} pairs).",
            fmt::ratio(g),
            fmt::ratio(s.p10),
            fmt::ratio(s.p90),
            s.n,
        )),
        (Some(g), _) => page.note(&format!("One pair: step ratio {}.", fmt::ratio(g))),
        (None, _) => {}
    }
    for (side, runs) in [
        ("reference", &p.unpaired_reference),
        ("candidate", &p.unpaired_candidate),
    ] {
        if !runs.is_empty() {
            page.note(&format!(
                "Unpaired {side} runs (no run of the same workload on the other side): {}.",
                runs.join(", ")
            ));
        }
    }
    pair_chart(page, p);
}

/// The pairs' step ratios on a log axis centred at 1, and their geometric mean with the
/// p10–p90 whisker; a line saying why when there is no ratio to draw.
fn pair_chart(page: &mut Page, p: &PairsSummary) {
    let mut points: Vec<ratio::Point> = p
        .pairs
        .iter()
        .filter_map(|e| {
            let r = e.step_ratio.filter(|r| *r > 0.0)?;
            Some(ratio::Point {
                label: ratio::short(&e.workload),
                hover: format!("{}: {} / {}", e.workload, e.candidate, e.reference),
                ratio: r,
                whisker: None,
            })
        })
        .collect();
    if points.is_empty() {
        page.note("No step ratio to chart (refused, or a side has no steps).");
        return;
    }
    if let Some(g) = p.step_ratio_geomean.filter(|_| points.len() > 1) {
        points.push(ratio::Point {
            label: "geometric mean".into(),
            hover: "geometric mean of the pairs' step ratios; whisker p10–p90".into(),
            ratio: g,
            whisker: p.step_ratio_spread.as_ref().map(|s| (s.p10, s.p90)),
        });
    }
    page.plot_json(ratio::chart("step_ms ratio", "#1f77b4", &points, &[]));
}
