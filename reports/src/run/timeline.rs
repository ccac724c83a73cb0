//! The per-stream timeline of one step: one row per stream, one bar per kernel, colored by
//! category, time relative to the step's first activity.
//!
//! A browser draws a few thousand bars comfortably; a step can hold far more kernels, so the
//! longest `MAX_KERNELS` are drawn and the page says how many were left out.

use std::collections::BTreeMap;
use std::path::Path;

use aorta_transform::dataset;
use plotly::layout::{Axis, BarMode};
use plotly::Plot;
use polars::prelude::*;
use serde_json::json;

use super::data::{keep, TimelineTarget};
use crate::error::ReportError;
use crate::fmt;
use crate::frames::{i64_col, str_col};
use crate::page::{category_color, Page};
use crate::run::charts::RawTrace;

/// The most kernels drawn on one timeline.
pub(super) const MAX_KERNELS: usize = 4000;

/// One activity of the step.
#[derive(Debug, Clone)]
struct Kernel {
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
    /// The step's window start (first activity start) and length.
    origin_ns: i64,
    span_ns: i64,
}

impl Timeline {
    /// The activities of `t`'s step; with `window` (ms from the step's first activity) only
    /// those overlapping it.
    pub(super) fn load(
        root: &Path,
        t: &TimelineTarget,
        window: Option<(f64, f64)>,
    ) -> Result<Timeline, ReportError> {
        let path = root.join("gpu_activities");
        let step = match t.step {
            Some(s) => col("step").eq(lit(s)),
            None => col("step").is_null(),
        };
        let df = dataset::scan(root, "gpu_activities")?
            .filter(keep(std::slice::from_ref(&t.run), Some(t.rank)).and(step))
            .select([
                col("device"),
                col("stream"),
                col("name"),
                col("category"),
                col("start_ns"),
                col("end_ns"),
            ])
            .collect()
            .map_err(ReportError::polars(&path))?;
        let (device, stream) = (
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
        let one_device = device
            .iter()
            .all(|d| *d == device.first().copied().flatten());
        let mut kernels: Vec<Kernel> = (0..df.height())
            .map(|k| Kernel {
                stream: stream_label(device[k], stream[k], one_device),
                name: name[k].clone(),
                category: cat[k].clone(),
                start_ns: start[k].unwrap_or(0),
                end_ns: end[k].unwrap_or(0).max(start[k].unwrap_or(0)),
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
        if kernels.len() > MAX_KERNELS {
            kernels.sort_by_key(|k| std::cmp::Reverse(k.end_ns - k.start_ns));
            kernels.truncate(MAX_KERNELS);
        }
        Ok(Timeline {
            target: t.clone(),
            kernels,
            total,
            in_window,
            window,
            origin_ns,
            span_ns,
        })
    }

    pub(super) fn drawn(&self) -> usize {
        self.kernels.len()
    }

    pub(super) fn render(&self, page: &mut Page) {
        let t = &self.target;
        let (div, unit) = fmt::time_axis(self.span_ns as f64 / 1e6);
        if t.whole_capture {
            page.section(&format!(
                "Timeline: run {} rank {}, the whole capture (no steps)",
                t.run, t.rank
            ));
            page.note(&format!(
                "This capture has no steps (no ProfilerStep markers, as rocprofv3, nsys and \
                 Chrome traces often have none), so it is one window: {} {unit} with {} GPU \
                 activities. Time in {unit} from its first activity.",
                fmt::ms(self.span_ns as f64 / 1e6 / div),
                self.total
            ));
        } else {
            let step = t.step.map_or("null".into(), |s| s.to_string());
            page.section(&format!(
                "Timeline: run {} rank {} step {step} ({})",
                t.run, t.rank, t.chosen_by
            ));
            page.note(&format!(
                "One row per GPU stream, one bar per kernel, memcpy or memset, colored by \
                 category; time in {unit} from the step's first activity. Hover a bar for the \
                 kernel name."
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
                "Capped: showing the {} longest of {} activities{}. `aorta report --from MS --to \
                 MS` draws every activity of a shorter window.",
                self.drawn(),
                self.in_window,
                if self.window.is_some() {
                    " in the window"
                } else {
                    ""
                },
            ));
        }
        if self.kernels.is_empty() {
            page.note("No activity in this window: no timeline.");
            return;
        }
        let mut plot = Plot::new();
        let mut streams: Vec<&str> = self.kernels.iter().map(|k| k.stream.as_str()).collect();
        streams.sort_by_key(|s| (s.len(), *s));
        streams.dedup();
        for (cat, ks) in self.by_category() {
            plot.add_trace(self.trace(&cat, &ks, div));
        }
        let height = 160 + 40 * streams.len().max(2);
        let y: Vec<String> = streams.iter().map(|s| format!("stream {s}")).collect();
        let from = if t.whole_capture { "capture" } else { "step" };
        plot.set_layout(
            crate::page::layout(height)
                .bar_mode(BarMode::Overlay)
                .x_axis(Axis::new().title(format!("{unit} from {from} start")))
                .y_axis(
                    Axis::new()
                        .title("stream")
                        .category_order(plotly::layout::CategoryOrder::Array)
                        .category_array(y),
                ),
        );
        page.plot(&mut plot);
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
    fn trace(&self, cat: &str, ks: &[&Kernel], div: f64) -> Box<RawTrace> {
        let ms = |ns: i64| ns as f64 / 1e6 / div;
        let x: Vec<f64> = ks.iter().map(|k| ms(k.end_ns - k.start_ns)).collect();
        let base: Vec<f64> = ks.iter().map(|k| ms(k.start_ns - self.origin_ns)).collect();
        let y: Vec<String> = ks.iter().map(|k| format!("stream {}", k.stream)).collect();
        let text: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
        RawTrace::new(json!({
            "type": "bar",
            "orientation": "h",
            "name": cat,
            "x": x,
            "base": base.clone(),
            "customdata": base,
            "y": y,
            "hovertext": text,
            "hovertemplate": format!("%{{hovertext}}<br>start %{{customdata:.3f}} {u}, %{{x:.3f}} {u}<extra>%{{fullData.name}}</extra>", u = if div == 1.0 { "ms" } else { "s" }),
            "marker": {"color": category_color(cat)},
            "width": 0.8,
        }))
    }
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
