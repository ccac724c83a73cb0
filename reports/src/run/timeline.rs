//! The per-stream timeline of one step, every rank of the run on one time axis: one lane
//! group per rank, one lane per stream, one bar per kernel, colored by category, time
//! relative to the step's first activity on any rank.
//!
//! A straggler is a question about ranks side by side, so the ranks are drawn together, each
//! on the reference rank's clock (the offsets `aorta collectives` finds from matched
//! collective ends). A browser draws a few thousand bars comfortably; a step can hold far
//! more kernels, so the longest `MAX_KERNELS` are drawn (shared evenly among the ranks) and
//! the page says how many were left out.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use aorta_transform::dataset;
use polars::prelude::*;
use serde_json::json;

use super::data::{keep, TimelineTarget};
use crate::error::ReportError;
use crate::fmt;
use crate::frames::{i64_col, str_col};
use crate::page::{category_color, Page};

/// The most kernels drawn on one timeline.
pub(super) const MAX_KERNELS: usize = 4000;

/// One activity of the step.
#[derive(Debug, Clone)]
struct Kernel {
    rank: i64,
    stream: String,
    name: String,
    category: String,
    start_ns: i64,
    end_ns: i64,
}

pub(crate) struct Timeline {
    target: TimelineTarget,
    /// The drawn kernels (the longest, when capped).
    kernels: Vec<Kernel>,
    /// Activities in the step.
    pub total: usize,
    /// Activities in the time window (`total` without one).
    in_window: usize,
    /// `--from/--to`, ms from the step's first activity.
    window: Option<(f64, f64)>,
    /// The step's window start (first activity start, any rank, aligned) and length.
    origin_ns: i64,
    span_ns: i64,
    /// Whether clock offsets were applied (a rank other than the reference had one).
    aligned: bool,
}

impl Timeline {
    /// The activities of `t`'s step on each of its ranks, on the reference clock (`offsets`:
    /// rank → ns to subtract, from `aorta collectives`); with `window` (ms from the step's
    /// first activity) only those overlapping it.
    pub(super) fn load(
        root: &Path,
        t: &TimelineTarget,
        window: Option<(f64, f64)>,
        offsets: &HashMap<i64, i64>,
    ) -> Result<Timeline, ReportError> {
        let path = root.join("gpu_activities");
        let step = match t.step {
            Some(s) => col("step").eq(lit(s)),
            None => col("step").is_null(),
        };
        let ranks = t
            .ranks
            .iter()
            .map(|r| col("rank").eq(lit(*r)))
            .reduce(|a, b| a.or(b))
            .unwrap_or_else(|| col("rank").eq(lit(t.rank)));
        let df = dataset::scan(root, "gpu_activities")?
            .filter(
                keep(std::slice::from_ref(&t.run), None)
                    .and(ranks)
                    .and(step),
            )
            .select([
                col("rank"),
                col("device"),
                col("stream"),
                col("name"),
                col("category"),
                col("start_ns"),
                col("end_ns"),
            ])
            .collect()
            .map_err(ReportError::polars(&path))?;
        let (rank, device, stream) = (
            i64_col(&df, "rank", &path)?,
            i64_col(&df, "device", &path)?,
            i64_col(&df, "stream", &path)?,
        );
        let (start, end) = (
            i64_col(&df, "start_ns", &path)?,
            i64_col(&df, "end_ns", &path)?,
        );
        let (name, cat) = (
            str_col(&df, "name", &path)?,
            str_col(&df, "category", &path)?,
        );
        // Stream ids are labelled `device:id` where a rank used several devices.
        let mut devices: HashMap<i64, Option<i64>> = HashMap::new();
        let mut several: std::collections::HashSet<i64> = Default::default();
        for k in 0..df.height() {
            let r = rank[k].unwrap_or(0);
            match devices.get(&r) {
                Some(d) if *d != device[k] => {
                    several.insert(r);
                }
                Some(_) => {}
                None => {
                    devices.insert(r, device[k]);
                }
            }
        }
        let mut kernels: Vec<Kernel> = (0..df.height())
            .map(|k| {
                let r = rank[k].unwrap_or(0);
                let off = offsets.get(&r).copied().unwrap_or(0);
                let s = start[k].unwrap_or(0);
                Kernel {
                    rank: r,
                    stream: stream_label(device[k], stream[k], !several.contains(&r)),
                    name: name[k].clone(),
                    category: cat[k].clone(),
                    start_ns: s - off,
                    end_ns: end[k].unwrap_or(0).max(s) - off,
                }
            })
            .collect();
        let total = kernels.len();
        let origin_ns = kernels.iter().map(|k| k.start_ns).min().unwrap_or(0);
        let span_ns = kernels.iter().map(|k| k.end_ns).max().unwrap_or(0) - origin_ns;
        if let Some((from, to)) = window {
            let ms = |ns: i64| (ns - origin_ns) as f64 / 1e6;
            kernels.retain(|k| ms(k.end_ns) >= from && ms(k.start_ns) <= to);
        }
        let in_window = kernels.len();
        let per_rank = MAX_KERNELS / t.ranks.len().max(1);
        if kernels.len() > MAX_KERNELS {
            kernels.sort_by_key(|k| (k.rank, std::cmp::Reverse(k.end_ns - k.start_ns)));
            let mut kept: HashMap<i64, usize> = HashMap::new();
            kernels.retain(|k| {
                let n = kept.entry(k.rank).or_default();
                *n += 1;
                *n <= per_rank
            });
        }
        let aligned = t
            .ranks
            .iter()
            .any(|r| offsets.get(r).is_some_and(|o| *o != 0));
        Ok(Timeline {
            target: t.clone(),
            kernels,
            total,
            in_window,
            window,
            origin_ns,
            span_ns,
            aligned,
        })
    }

    /// The span of the step's activity, ms from its first activity: where a `--from/--to`
    /// window can find something.
    pub(super) fn span_ms(&self) -> f64 {
        self.span_ns as f64 / 1e6
    }

    /// Where the step's activity lies, in `--from/--to`'s units: `run X step 4 has activity
    /// from 0.000 to 53.210 ms`.
    pub(super) fn where_activity_lies(&self) -> String {
        let t = &self.target;
        let what = match (t.whole_capture, t.step) {
            (false, Some(s)) => format!("step {s}"),
            _ => "the capture".into(),
        };
        format!(
            "run `{}` {what} has activity from 0.000 to {} ms (ms from its first activity)",
            t.run,
            fmt::ms(self.span_ms())
        )
    }

    /// Activities overlapping the `--from/--to` window (all of the step's without one).
    pub(super) fn in_window(&self) -> usize {
        self.in_window
    }

    pub(super) fn drawn(&self) -> usize {
        self.kernels.len()
    }

    /// Whether the lanes are named by rank too (more than one rank drawn).
    fn many_ranks(&self) -> bool {
        self.target.ranks.len() > 1
    }

    fn lane(&self, k: &Kernel) -> String {
        if self.many_ranks() {
            format!("rank {} · stream {}", k.rank, k.stream)
        } else {
            format!("stream {}", k.stream)
        }
    }

    pub(super) fn render(&self, page: &mut Page) {
        let t = &self.target;
        let (div, unit) = fmt::time_axis(self.span_ns as f64 / 1e6);
        let who = if self.many_ranks() {
            format!("ranks {}", super::join(&t.ranks))
        } else {
            format!("rank {}", t.rank)
        };
        let id = super::anchor("timeline", &t.run);
        if t.whole_capture {
            page.section_id(
                &format!(
                    "Timeline: run {} {who}, the whole capture (no steps)",
                    t.run
                ),
                &id,
            );
            page.note(&format!(
                "This capture has no steps (no ProfilerStep markers, as rocprofv3, nsys and \
                 Chrome traces often have none), so it is one window: {} {unit} with {} GPU \
                 activities. Time in {unit} from its first activity.",
                fmt::ms(self.span_ns as f64 / 1e6 / div),
                self.total
            ));
        } else {
            let step = t.step.map_or("null".into(), |s| s.to_string());
            page.section_id(
                &format!(
                    "Timeline: run {} {who} step {step} ({})",
                    t.run, t.chosen_by
                ),
                &id,
            );
            page.note(&format!(
                "One row per GPU stream{}, one bar per kernel, memcpy or memset, colored by \
                 category; time in {unit} from the step's first activity{}. Hover a bar for \
                 the kernel name.",
                if self.many_ranks() {
                    ", one band of rows per rank"
                } else {
                    ""
                },
                if self.many_ranks() {
                    " on any rank"
                } else {
                    ""
                },
            ));
        }
        if self.many_ranks() {
            page.note(if self.aligned {
                "Every rank on the reference rank's clock: each rank's times minus its clock \
                 offset (aorta collectives, from matched collective end times)."
            } else {
                "The ranks' clocks as recorded (no clock offset found or needed)."
            });
        }
        if t.ranks_with_step > t.ranks.len() {
            page.note(&format!(
                "{} of the {} ranks with this step are drawn, sampled evenly (the first and \
                 the last included): ranks {}.",
                t.ranks.len(),
                t.ranks_with_step,
                super::join(&t.ranks)
            ));
        }
        if let Some((from, to)) = self.window {
            page.note(&format!(
                "Window --from {from} --to {to} (ms from the first activity): {} of {} \
                 activities overlap it.",
                self.in_window, self.total
            ));
        }
        if self.drawn() < self.in_window {
            page.note(&format!(
                "Capped: showing the {} longest of {} activities{}{}. `aorta report --from MS \
                 --to MS` draws every activity of a shorter window.",
                self.drawn(),
                self.in_window,
                if self.window.is_some() {
                    " in the window"
                } else {
                    ""
                },
                if self.many_ranks() {
                    " (an equal share per rank)"
                } else {
                    ""
                },
            ));
        }
        if self.kernels.is_empty() {
            page.note(&format!(
                "No activity in this window: no timeline. The step's activity lies from 0.000 \
                 to {} ms.",
                fmt::ms(self.span_ms())
            ));
            return;
        }
        let mut lanes: Vec<(i64, &str)> = self
            .kernels
            .iter()
            .map(|k| (k.rank, k.stream.as_str()))
            .collect();
        lanes.sort_by_key(|(r, s)| (*r, s.len(), *s));
        lanes.dedup();
        let y: Vec<String> = lanes
            .iter()
            .map(|(r, s)| {
                if self.many_ranks() {
                    format!("rank {r} · stream {s}")
                } else {
                    format!("stream {s}")
                }
            })
            .collect();
        let data: Vec<serde_json::Value> = self
            .by_category()
            .iter()
            .map(|(cat, ks)| self.trace(cat, ks, div))
            .collect();
        let lane_px = if lanes.len() > 12 { 24 } else { 40 };
        let height = 160 + lane_px * lanes.len().max(2);
        let from = if t.whole_capture { "capture" } else { "step" };
        page.plot_json(json!({
            "data": data,
            "layout": {
                "height": height,
                "margin": {"t": 30, "b": 60, "l": 70, "r": 30},
                "barmode": "overlay",
                "xaxis": {"title": {"text": format!("{unit} from {from} start")}},
                "yaxis": {
                    "title": {"text": if self.many_ranks() { "rank · stream" } else { "stream" }},
                    "categoryorder": "array",
                    "categoryarray": y,
                    "autorange": "reversed",
                    "automargin": true,
                },
                "shapes": if self.many_ranks() { rank_bands(&lanes) } else { vec![] },
            },
        }));
    }

    fn by_category(&self) -> BTreeMap<String, Vec<&Kernel>> {
        let mut m: BTreeMap<String, Vec<&Kernel>> = BTreeMap::new();
        for k in &self.kernels {
            m.entry(k.category.clone()).or_default().push(k);
        }
        m
    }

    /// Horizontal bars from each kernel's start (`base`) over its duration: plotly.js bars
    /// with a base, which the typed `Bar` of the plotly crate does not expose.
    fn trace(&self, cat: &str, ks: &[&Kernel], div: f64) -> serde_json::Value {
        let ms = |ns: i64| ns as f64 / 1e6 / div;
        let x: Vec<f64> = ks.iter().map(|k| ms(k.end_ns - k.start_ns)).collect();
        let base: Vec<f64> = ks.iter().map(|k| ms(k.start_ns - self.origin_ns)).collect();
        let y: Vec<String> = ks.iter().map(|k| self.lane(k)).collect();
        let text: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
        json!({
            "type": "bar",
            "orientation": "h",
            "name": cat,
            "x": x,
            "base": base.clone(),
            "customdata": base,
            "y": y,
            "hovertext": text,
            "hovertemplate": format!("%{{hovertext}}<br>%{{y}}, start %{{customdata:.3f}} {u}, %{{x:.3f}} {u}<extra>%{{fullData.name}}</extra>", u = if div == 1.0 { "ms" } else { "s" }),
            "marker": {"color": category_color(cat)},
            "width": 0.8,
        })
    }
}

/// One shaded band per rank behind its lanes (alternating shades), so the lane groups read
/// apart; `lanes` are sorted by rank. Category positions are the lanes' indices.
fn rank_bands(lanes: &[(i64, &str)]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lanes.len() {
        let r = lanes[i].0;
        let n = lanes[i..].iter().take_while(|l| l.0 == r).count();
        let shade = if out.len() % 2 == 0 {
            "rgba(0,0,0,0.05)"
        } else {
            "rgba(0,0,0,0)"
        };
        out.push(json!({
            "type": "rect", "xref": "paper", "yref": "y", "layer": "below",
            "x0": 0, "x1": 1, "y0": i as f64 - 0.5, "y1": (i + n) as f64 - 0.5,
            "fillcolor": shade, "line": {"width": 0.5, "color": "rgba(0,0,0,0.25)"},
            "name": format!("rank {r}"),
        }));
        i += n;
    }
    out
}

/// A stream as the overlap tables name it: its id, `device:id` when the rank used several
/// devices.
fn stream_label(device: Option<i64>, stream: Option<i64>, one_device: bool) -> String {
    let s = stream.map_or("?".into(), |s| s.to_string());
    if one_device {
        s
    } else {
        format!("{}:{s}", device.map_or("?".into(), |d| d.to_string()))
    }
}
