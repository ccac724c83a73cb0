//! The sweep page (`aorta sweep report`'s sweep.html): the winner and its verdict first, the
//! failed runs and the knob check, then one small chart per knob (the metric against the
//! knob's values, the other knobs held at the best point, p10–p90 whiskers) and a heatmap of
//! two knobs.

use std::collections::BTreeMap;
use std::path::Path;

use aorta_transform::tuning::sweep_report::configs::value_order;
use aorta_transform::tuning::sweep_report::{shown as num, ConfigRow, SweepReport, METRICS};
use aorta_transform::tuning::verdict::Verdict;
use serde_json::{json, Value};

use crate::error::ReportError;
use crate::page::Page;

/// The metrics charted per knob.
const CHARTED: [&str; 2] = ["step_ms", "exposed_comm_ms"];

fn metric_index(name: &str) -> usize {
    METRICS
        .iter()
        .position(|m| m.name == name)
        .expect("a metric of METRICS")
}

/// Writes the page; returns the number of charts.
pub fn sweep_report(r: &SweepReport, out: &Path) -> Result<usize, ReportError> {
    let mut page = Page::new(&format!("Sweep: {}", r.root.display()));
    page.note(&format!(
        "{} configurations from {} runs; varying: {}. Each metric is the median over the steps of \
         every rank and repeat (p10–p90 beside it). The verdict compares the best with the \
         runner-up over repeats (each run's median): the exact one-sided Mann–Whitney U test, \
         α = 0.05, which needs 3 repeats of each.",
        r.rows.len(),
        r.rows.iter().map(|c| c.config.runs.len()).sum::<usize>(),
        if r.varying.is_empty() {
            "nothing".into()
        } else {
            r.varying.join(", ")
        }
    ));
    headline(&mut page, r);
    failed(&mut page, r);
    knobs(&mut page, r);
    let best_step = r.best_for("step_ms").map(|b| b.best);
    if let Some(best) = best_step {
        page.section("Each knob, the others at the best point");
        let charts = page.plot_count();
        for k in &r.varying {
            // The two metrics of one knob side by side.
            page.raw("<div class=\"row\">\n");
            for metric in CHARTED {
                knob_chart(&mut page, r, k, best, metric);
            }
            page.raw("</div>\n");
        }
        if page.plot_count() == charts {
            page.note(
                "No knob takes two values with the others at the best point's values (the \
                 knobs changed together here), so there is no chart of one knob alone.",
            );
        }
        if r.varying.len() >= 2 {
            heatmap(&mut page, r, &r.varying[0], &r.varying[1], best);
        }
    }
    tp_windows(&mut page, r);
    configs_table(&mut page, r);
    searches(&mut page, r);
    page.write(out)?;
    Ok(page.plot_count())
}

fn headline(page: &mut Page, r: &SweepReport) {
    page.section("Which configuration wins");
    for b in &r.best {
        let text = b.sentence(r);
        // A winner the repeats separate is the page's answer, in green; a tie or an open
        // question is information, not an alarm, so it is never drawn red.
        match &b.tested {
            Some(t)
                if CHARTED.contains(&b.metric.name) && t.verdict == Verdict::Distinguishable =>
            {
                page.verdict(true, &text)
            }
            _ => page.note(&text),
        }
    }
}

fn failed(page: &mut Page, r: &SweepReport) {
    let Some(rec) = &r.record else { return };
    let latest = rec.latest();
    let bad: Vec<Vec<String>> = latest
        .values()
        .filter(|x| x.status != "ok")
        .map(|x| {
            vec![
                x.label.clone(),
                x.error.clone().unwrap_or_default(),
                format!("{:.1}", x.seconds),
            ]
        })
        .collect();
    if bad.is_empty() {
        return;
    }
    page.section("Failed runs");
    page.verdict(
        false,
        &format!(
            "{} of {} runs failed; the sweep went on without them",
            bad.len(),
            latest.len()
        ),
    );
    page.table(&["run", "error", "seconds"], &bad);
}

/// A p-value as a reader takes it: three decimals, or "p < 0.001".
fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

fn knobs(page: &mut Page, r: &SweepReport) {
    let warnings = r
        .record
        .as_ref()
        .map(|x| x.warnings.clone())
        .unwrap_or_default();
    if r.knobs.is_empty() && warnings.is_empty() {
        return;
    }
    page.section("Knobs: known, and what they moved");
    for w in &warnings {
        page.verdict(false, &format!("before the sweep: {w}"));
    }
    let rows: Vec<Vec<String>> = r
        .knobs
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                if k.known { "yes" } else { "no" }.into(),
                k.effect.unwrap_or("untested").into(),
                k.moved
                    .iter()
                    .map(|m| format!("{} {:.1} % ({})", m.metric, m.change_pct, p_text(m.p_value)))
                    .collect::<Vec<_>>()
                    .join("; "),
                k.warning.clone().unwrap_or_default(),
            ]
        })
        .collect();
    page.table(
        &["param", "known", "effect", "metrics moved", "warning"],
        &rows,
    );
    page.note(&format!(
        "A param has an effect on a metric when a permutation test of its values within each \
         context (the configurations that share every other knob), Bonferroni-corrected over \
         the metrics, rejects \"no effect\" at α = 0.05 and the metric changes by at least {} % \
         of the larger median inside one context. Untested: no two configurations differ in \
         it alone, or too few repeats for the test to reach its level.",
        r.min_effect_pct
    ));
}

/// Rows equal to `best` in every varying param but `knob`, sorted by the knob's value
/// (numerically where every value is a number).
fn along<'a>(r: &'a SweepReport, knob: &str, best: usize) -> Vec<(&'a str, &'a ConfigRow)> {
    let b = &r.rows[best].config.params;
    let mut rows: Vec<(&str, &ConfigRow)> = r
        .rows
        .iter()
        .filter(|c| {
            r.varying
                .iter()
                .filter(|k| k.as_str() != knob)
                .all(|k| c.config.params.get(k) == b.get(k))
        })
        .filter_map(|c| c.config.params.get(knob).map(|v| (v.as_str(), c)))
        .collect();
    sort_values(&mut rows, |x| x.0);
    rows
}

fn sort_values<T>(v: &mut [T], key: impl Fn(&T) -> &str) {
    v.sort_by(|a, b| value_order(key(a), key(b)));
}

fn knob_chart(page: &mut Page, r: &SweepReport, knob: &str, best: usize, metric: &str) {
    let m = metric_index(metric);
    let rows = along(r, knob, best);
    let pts: Vec<(&str, f64, f64, f64)> = rows
        .iter()
        .filter_map(|(v, c)| {
            c.stats[m]
                .as_ref()
                .map(|s| (*v, s.median, s.p90 - s.median, s.median - s.p10))
        })
        .collect();
    if pts.len() < 2 {
        return;
    }
    let x: Vec<&str> = pts.iter().map(|p| p.0).collect();
    page.plot_json(json!({
        "data": [{
            "type": "scatter", "mode": "lines+markers", "x": x,
            "y": pts.iter().map(|p| p.1).collect::<Vec<_>>(),
            "error_y": {"type": "data", "symmetric": false,
                "array": pts.iter().map(|p| p.2).collect::<Vec<_>>(),
                "arrayminus": pts.iter().map(|p| p.3).collect::<Vec<_>>()},
            "name": metric,
        }],
        "layout": {
            // Left-aligned: centred, a long knob name ran under the chart's mode bar.
            "title": {"text": format!("{metric} against {knob}"), "font": {"size": 13},
                      "x": 0.02, "xanchor": "left"},
            "height": 260,
            "margin": {"t": 40, "b": 50, "l": 70, "r": 20},
            "xaxis": {"title": {"text": knob}, "type": "category", "automargin": true},
            "yaxis": {"title": {"text": metric}, "automargin": true, "rangemode": "tozero"},
        },
    }));
}

fn heatmap(page: &mut Page, r: &SweepReport, a: &str, b: &str, best: usize) {
    let m = metric_index("step_ms");
    let bp = &r.rows[best].config.params;
    let held: Vec<&ConfigRow> = r
        .rows
        .iter()
        .filter(|c| {
            r.varying
                .iter()
                .filter(|k| k.as_str() != a && k.as_str() != b)
                .all(|k| c.config.params.get(k) == bp.get(k))
        })
        .collect();
    let mut cells: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for c in &held {
        if let (Some(x), Some(y), Some(s)) = (
            c.config.params.get(a),
            c.config.params.get(b),
            c.stats[m].as_ref(),
        ) {
            cells.insert((x.as_str(), y.as_str()), s.median);
        }
    }
    let mut xs: Vec<&str> = cells.keys().map(|k| k.0).collect();
    let mut ys: Vec<&str> = cells.keys().map(|k| k.1).collect();
    sort_values(&mut xs, |x| x);
    xs.dedup();
    sort_values(&mut ys, |y| y);
    ys.dedup();
    if xs.len() < 2 || ys.len() < 2 {
        return;
    }
    let z: Vec<Vec<Value>> = ys
        .iter()
        .map(|y| {
            xs.iter()
                .map(|x| cells.get(&(*x, *y)).map_or(Value::Null, |v| json!(v)))
                .collect()
        })
        .collect();
    let text: Vec<Vec<String>> = ys
        .iter()
        .map(|y| {
            xs.iter()
                .map(|x| cells.get(&(*x, *y)).map_or(String::new(), |v| num(*v)))
                .collect()
        })
        .collect();
    page.section(&format!("step_ms over {a} × {b}"));
    if r.varying.len() > 2 {
        page.note("The other knobs held at the best point's values.");
    }
    page.plot_json(json!({
        "data": [{"type": "heatmap", "x": xs, "y": ys, "z": z, "text": text,
                  "texttemplate": "%{text}", "colorscale": "Viridis", "reversescale": true,
                  "colorbar": {"title": {"text": "step_ms"}}}],
        "layout": {
            "height": 120 + 60 * ys.len().min(12),
            "margin": {"t": 30, "b": 60, "l": 90, "r": 30},
            "xaxis": {"title": {"text": a}, "type": "category", "automargin": true},
            "yaxis": {"title": {"text": b}, "type": "category", "automargin": true},
        },
    }));
}

/// TP overlap per operator window and the scaling check, where the traces have windows.
fn tp_windows(page: &mut Page, r: &SweepReport) {
    if r.tp.is_empty() {
        return;
    }
    page.section("TP overlap per operator window");
    if let Some(t) = &r.tp_scaling {
        for line in t.summary.lines() {
            page.note(line);
        }
    }
    let mut rows: Vec<&aorta_transform::tuning::tp_windows::TpConfigRow> = r.tp.iter().collect();
    rows.sort_by(|a, b| {
        (&a.operator, &a.phase)
            .cmp(&(&b.operator, &b.phase))
            .then(a.e2e_us.total_cmp(&b.e2e_us))
    });
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|t| {
            vec![
                t.operator.clone(),
                t.phase.clone(),
                t.config.clone(),
                num(t.e2e_us),
                num(t.gemm_us),
                num(t.comm_us),
                num(t.overlap_us),
                num(t.overlap_ratio),
                t.instances.to_string(),
            ]
        })
        .collect();
    page.table(
        &[
            "operator",
            "phase",
            "config",
            "e2e µs",
            "GEMM µs",
            "comm µs",
            "overlap µs",
            "overlap ratio",
            "instances",
        ],
        &table,
    );
    page.note(
        "Medians over every instance of the window (all steps of all ranks of the \
         configuration's runs), fastest e2e first per operator and phase: the winner is the \
         fastest, not the most overlapped.",
    );
}

fn configs_table(page: &mut Page, r: &SweepReport) {
    page.section("Configurations");
    let mut header: Vec<String> = vec!["config".into(), "runs".into(), "steps".into()];
    header.extend(
        METRICS
            .iter()
            .map(|m| format!("{} median [p10–p90]", m.name)),
    );
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|c| {
            let mut row = vec![
                c.config.name.clone(),
                c.config.runs.len().to_string(),
                c.steps.to_string(),
            ];
            row.extend(c.stats.iter().map(|s| match s {
                Some(s) => format!("{} [{}–{}]", num(s.median), num(s.p10), num(s.p90)),
                None => "-".into(),
            }));
            row
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    page.table(&h, &rows);
}

fn searches(page: &mut Page, r: &SweepReport) {
    let Some(rec) = &r.record else { return };
    if rec.searches.is_empty() {
        return;
    }
    page.section("Searches");
    let rows: Vec<Vec<String>> = rec
        .searches
        .iter()
        .map(|s| {
            vec![
                s.fixed.clone(),
                s.knob.clone(),
                s.objective.clone(),
                s.measured
                    .iter()
                    .map(|(v, o)| format!("{v}: {}", o.map_or("-".into(), num)))
                    .collect::<Vec<_>>()
                    .join(", "),
                s.best.map_or("-".into(), |b| b.to_string()),
            ]
        })
        .collect();
    page.table(
        &["other knobs", "knob", "objective", "measured", "best"],
        &rows,
    );
}
