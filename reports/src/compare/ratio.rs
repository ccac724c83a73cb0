//! Ratio charts (candidate / reference) on a log axis centred at 1.
//!
//! On a linear axis one operator at 520× squeezes every other bar against zero, and 0.5×
//! looks half as far from parity as 2×. On a log axis both are one step from 1, so the axis
//! is symmetric around 1 (`[1/L, L]`), each ratio is a stem from 1 to its marker, a spread
//! (p10–p90) is a whisker, and what has no ratio (an operator one side never ran) sits at
//! the edge of the axis under its own legend entry instead of at a fake 0.

use serde_json::{json, Value};

/// One row of a ratio chart.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    /// The y-axis label (kept short; the hover has `hover`).
    pub label: String,
    pub hover: String,
    pub ratio: f64,
    /// p10 and p90 of the ratio, when there is a spread.
    pub whisker: Option<(f64, f64)>,
}

/// A row without a ratio: `side` is `reference only` (drawn at the left edge: nothing on the
/// candidate) or `candidate only` (at the right edge).
#[derive(Debug, Clone)]
pub(crate) struct OneSided {
    pub label: String,
    pub hover: String,
    pub side: &'static str,
}

/// The longest y label; longer ones are cut in the middle, the whole text is in the hover.
const LABEL_CHARS: usize = 60;

/// `s` shortened to `LABEL_CHARS` characters by cutting out its middle.
pub(crate) fn short(s: &str) -> String {
    let n = s.chars().count();
    if n <= LABEL_CHARS {
        return s.to_string();
    }
    let keep = (LABEL_CHARS - 1) / 2;
    let head: String = s.chars().take(keep).collect();
    let tail: String = s.chars().skip(n - keep).collect();
    format!("{head}…{tail}")
}

/// The half-width of the axis in decades: the largest distance from 1 of any ratio or
/// whisker end, plus a margin, at least ±12 %.
pub(crate) fn half_range(points: &[Point]) -> f64 {
    let far = points
        .iter()
        .flat_map(|p| {
            let (lo, hi) = p.whisker.unwrap_or((p.ratio, p.ratio));
            [p.ratio, lo, hi]
        })
        .filter(|r| *r > 0.0)
        .map(|r| r.log10().abs())
        .fold(0.0, f64::max);
    (far * 1.15).max(0.05)
}

/// Round ratios to label on an axis of `l` decades each side of 1: plotly's own log ticks
/// label 0.5 as a bare "5" between decades.
pub(crate) fn ticks(l: f64) -> Vec<f64> {
    const NICE: [f64; 12] = [
        1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 5.0, 10.0, 100.0, 1e3, 1e4,
    ];
    let max = 10f64.powf(l);
    let mut up: Vec<f64> = NICE.iter().copied().filter(|t| *t <= max).collect();
    // At most four ticks per side, the outer ones.
    if up.len() > 4 {
        up = up.split_off(up.len() - 4);
    }
    let mut v: Vec<f64> = up
        .iter()
        .rev()
        .map(|t| (1.0 / t * 1000.0).round() / 1000.0)
        .collect();
    v.push(1.0);
    v.extend(up);
    v
}

/// The chart as plotly.js takes it (`{data, layout}`, for [`Page::plot_json`]): one row per
/// point (top to bottom in the given order), `name` in the legend.
///
/// [`Page::plot_json`]: crate::page::Page::plot_json
pub(crate) fn chart(name: &str, color: &str, points: &[Point], one_sided: &[OneSided]) -> Value {
    let l = half_range(points);
    let edge = 10f64.powf(l * 0.97);
    let mut data = Vec::new();
    // Stems from 1 to each ratio, one polyline broken by nulls.
    let (mut sx, mut sy) = (Vec::new(), Vec::new());
    for p in points {
        sx.extend([Some(1.0), Some(p.ratio), None]);
        sy.extend([Some(p.label.as_str()), Some(p.label.as_str()), None]);
    }
    data.push(json!({
        "type": "scatter", "mode": "lines", "x": sx, "y": sy, "showlegend": false,
        "hoverinfo": "skip", "line": {"color": color, "width": 2},
    }));
    let mut marker = json!({
        "type": "scatter", "mode": "markers", "name": name,
        "x": points.iter().map(|p| p.ratio).collect::<Vec<_>>(),
        "y": points.iter().map(|p| &p.label).collect::<Vec<_>>(),
        "hovertext": points.iter().map(|p| &p.hover).collect::<Vec<_>>(),
        "hoverinfo": "text",
        "marker": {"color": color, "size": 10},
    });
    if points.iter().any(|p| p.whisker.is_some()) {
        let w = |f: fn(&Point, (f64, f64)) -> f64| -> Vec<f64> {
            points
                .iter()
                .map(|p| p.whisker.map_or(0.0, |x| f(p, x)))
                .collect()
        };
        marker["error_x"] = json!({
            "type": "data", "symmetric": false, "width": 6, "color": color,
            "array": w(|p, (_, hi)| hi - p.ratio),
            "arrayminus": w(|p, (lo, _)| p.ratio - lo),
        });
    }
    data.push(marker);
    for (side, x, color, symbol) in [
        ("reference only", 1.0 / edge, "#7f7f7f", "triangle-left"),
        ("candidate only", edge, "#d62728", "triangle-right"),
    ] {
        let of: Vec<&OneSided> = one_sided.iter().filter(|o| o.side == side).collect();
        if of.is_empty() {
            continue;
        }
        data.push(json!({
            "type": "scatter", "mode": "markers", "name": side,
            "x": vec![x; of.len()],
            "y": of.iter().map(|o| &o.label).collect::<Vec<_>>(),
            "hovertext": of.iter().map(|o| &o.hover).collect::<Vec<_>>(),
            "hoverinfo": "text",
            "marker": {"color": color, "size": 12, "symbol": symbol},
        }));
    }
    let order: Vec<&String> = points
        .iter()
        .map(|p| &p.label)
        .chain(one_sided.iter().map(|o| &o.label))
        .collect();
    let layout = json!({
        "height": 150 + 26 * order.len().max(2),
        "margin": {"t": 30, "b": 60, "r": 30},
        "xaxis": {
            "type": "log", "range": [-l, l], "zeroline": false,
            "tickvals": ticks(l), "ticktext": ticks(l).iter().map(|t| format!("{t}×")).collect::<Vec<_>>(),
            "title": {"text": "candidate / reference (log scale; right of 1: candidate slower)"},
        },
        // Typed plotly has no automargin: long labels get the room they need.
        "yaxis": {
            "type": "category", "automargin": true, "categoryorder": "array",
            // Top row first: a category axis runs bottom-up.
            "categoryarray": order.iter().rev().collect::<Vec<_>>(),
        },
        "shapes": [{
            "type": "line", "x0": 1, "x1": 1, "yref": "paper", "y0": 0, "y1": 1,
            "line": {"color": "#444", "dash": "dash"},
        }],
    });
    json!({"data": data, "layout": layout})
}
