//! Small multiples: a chart of many runs drawn as one small chart per run, two per row, so
//! that 105 bars of 14 runs do not share one axis whose labels overlap. The overlap, copy and
//! per-kind communication charts go through [`per_run`]; the category charts split the same
//! way (`charts::stacked_per_step`).

use plotly::Plot;

use crate::page::Page;

/// Above this many bars, a per-step chart of several runs is drawn as one small chart per
/// run (small multiples): 105 bars on one axis leave no room for their labels.
pub(crate) const SMALL_MULTIPLES_OVER: usize = 30;

/// Rows drawn by `chart`: as one chart, or, on a page of several runs with more than
/// [`SMALL_MULTIPLES_OVER`] bars, as one small chart per run with something to draw (`has`
/// true for one of its rows), two per row; the note names the runs left out.
pub(crate) fn per_run<T>(
    page: &mut Page,
    rows: &[&T],
    run: impl Fn(&T) -> &str,
    has: impl Fn(&T) -> bool,
    chart: impl Fn(&[&T], Option<&str>) -> Plot,
) {
    let mut runs: Vec<&str> = Vec::new();
    for r in rows {
        if !runs.contains(&run(r)) {
            runs.push(run(r));
        }
    }
    if runs.len() < 2 || rows.len() <= SMALL_MULTIPLES_OVER {
        page.plot(&mut chart(rows, None));
        return;
    }
    let (with, without): (Vec<&str>, Vec<&str>) = runs
        .iter()
        .partition(|name| rows.iter().any(|r| run(r) == **name && has(r)));
    page.note(&format!(
        "One chart per run: {} bars of {} runs do not read on one axis. Each has its own \
         scale.{}",
        rows.len(),
        runs.len(),
        if without.is_empty() {
            String::new()
        } else {
            format!(" Nothing to draw for {}.", without.join(", "))
        }
    ));
    let mut plots: Vec<Plot> = with
        .iter()
        .map(|name| {
            let mine: Vec<&T> = rows.iter().filter(|r| run(r) == *name).copied().collect();
            chart(&mine, Some(name))
        })
        .collect();
    page.plot_row(&mut plots);
}

/// A chart title at the top left, clear of plotly's tool bar on the right (a small
/// multiple's run, a heatmap's name).
pub(crate) fn small_title(run: &str) -> plotly::common::Title {
    plotly::common::Title::with_text(run)
        .x(0.0)
        .x_anchor(plotly::common::Anchor::Left)
        .y(0.99)
        .y_anchor(plotly::common::Anchor::Top)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(run, value)` rows; a chart per call, its title recorded.
    fn draw(rows: &[(&str, i64)]) -> (String, usize) {
        let mut page = Page::new("t");
        let refs: Vec<&(&str, i64)> = rows.iter().collect();
        per_run(&mut page, &refs, |r| r.0, |r| r.1 > 0, |_, _| Plot::new());
        (page.render(), page.plot_count())
    }

    #[test]
    fn many_bars_of_several_runs_split_by_run() {
        // 31 bars of 3 runs, run c with nothing to draw: a and b get a chart each.
        let mut rows: Vec<(&str, i64)> = (0..15).map(|_| ("a", 1)).collect();
        rows.extend((0..15).map(|_| ("b", 2)));
        rows.push(("c", 0));
        let (html, plots) = draw(&rows);
        assert_eq!(plots, 2);
        assert!(html.contains("One chart per run: 31 bars of 3 runs"));
        assert!(html.contains("Nothing to draw for c."));
        // At the limit, or of one run, a single chart.
        assert_eq!(draw(&rows[..SMALL_MULTIPLES_OVER]).1, 1);
        assert_eq!(draw(&[("a", 1); 40]).1, 1);
    }
}
