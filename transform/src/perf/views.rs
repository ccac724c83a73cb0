//! What `aorta perf` prints: instances summed per operator or per operator and shape, the
//! largest GPU time first, with the rates recomputed from the sums (Σ FLOPs / Σ time, never
//! a mean of per-instance rates), and the run's MFU spread.

use rustc_hash::FxHashMap as HashMap;

use polars::prelude::*;

use super::rows::{OpRow, Roof, StepRow};
use crate::rows::str_column;
use crate::summary::{spread, Spread};

/// Instances summed under one key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// Operator name (`aten::mm`), or `(no CPU op)`.
    pub op: String,
    /// The instances' `Input Dims` when grouped by shape (null when not, or unknown).
    pub input_dims: Option<String>,
    pub(crate) input_types: Option<String>,
    /// Instances summed.
    pub instances: i64,
    /// Their summed GPU time, ns.
    pub gpu_ns: i64,
    pub(crate) flops: Option<i64>,
    pub(crate) bytes: Option<i64>,
    /// The dtype of their FLOPs (null when none, or when the instances differ).
    pub dtype: Option<&'static str>,
    pub(crate) model: Option<&'static str>,
    /// The one peak and bandwidth every instance with FLOPs shares (none when they differ).
    pub(crate) peak: Option<(Option<f64>, Option<f64>)>,
    /// Achieved rates over the summed time, and the roofline where the instances share a peak.
    pub roof: Roof,
    pub(crate) note: Option<String>,
    /// Instances left out of the sums for running above their roof.
    pub over: i64,
}

impl Group {
    fn add(&mut self, r: &OpRow, flops_ns: &mut i64, bytes_ns: &mut i64) {
        self.instances += 1;
        self.gpu_ns += r.gpu_ns;
        self.dtype = self.dtype.or(r.dtype);
        self.model = self.model.or(r.model);
        if r.roof.over.is_some() {
            // Above its roof: its rate is no result, so no sum of rates takes it in.
            self.over += 1;
            self.note = self.note.take().or_else(|| r.note.clone());
            return;
        }
        if let Some(f) = r.flops {
            self.flops = Some(self.flops.unwrap_or(0) + f);
            *flops_ns += r.gpu_ns;
            let p = (r.peak_tflops, r.peak_tbps);
            self.peak = match self.peak {
                None => Some(p),
                Some(q) if q == p => Some(q),
                Some(_) => Some((None, None)),
            };
        }
        if let Some(b) = r.bytes {
            self.bytes = Some(self.bytes.unwrap_or(0) + b);
            *bytes_ns += r.gpu_ns;
            if r.flops.is_none() && self.peak.is_none() {
                self.peak = Some((None, r.peak_tbps));
            }
        }
        if self.note.is_none() {
            self.note.clone_from(&r.note);
        }
    }
}

/// Rows of one run summed per operator (`shape` false) or per operator and shape, largest
/// GPU time first.
pub(crate) fn groups(rows: &[OpRow], shape: bool) -> Vec<Group> {
    let mut at: HashMap<(&str, Option<&str>, Option<&str>), usize> = HashMap::default();
    let mut out: Vec<(Group, i64, i64)> = Vec::new();
    for r in rows {
        let key = if shape {
            (
                r.op.as_str(),
                r.input_dims.as_deref(),
                r.input_types.as_deref(),
            )
        } else {
            (r.op.as_str(), None, None)
        };
        let i = *at.entry(key).or_insert_with(|| {
            let g = Group {
                op: r.op.clone(),
                input_dims: key.1.map(str::to_string),
                input_types: key.2.map(str::to_string),
                ..Group::default()
            };
            out.push((g, 0, 0));
            out.len() - 1
        });
        let (g, f_ns, b_ns) = &mut out[i];
        g.add(r, f_ns, b_ns);
    }
    let mut groups: Vec<Group> = out
        .into_iter()
        .map(|(mut g, f_ns, b_ns)| {
            let (peak, bw) = g.peak.unwrap_or((None, None));
            // Rates over the time of the instances that have the quantity.
            let ns = if g.flops.is_some() { f_ns } else { b_ns };
            let bytes = if g.flops.is_some() && b_ns != f_ns {
                None
            } else {
                g.bytes
            };
            g.roof = Roof::of(g.flops, bytes, ns, peak, bw);
            if g.flops.is_none() {
                g.roof.tbps = g
                    .bytes
                    .and_then(|b| (b_ns > 0).then(|| b as f64 / b_ns as f64 / 1e3));
            }
            if g.roof.over.is_some() {
                g.note = g.roof.flag();
            } else if g.over > 0 && g.over < g.instances {
                g.note = Some(format!(
                    "{} of {} instances above their roof left out (peak assumption wrong)",
                    g.over, g.instances
                ));
            }
            g
        })
        .collect();
    groups.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then_with(|| a.op.cmp(&b.op)));
    groups
}

/// The groups as a frame (`share_pct` = the group's share of the run's instance time).
pub(crate) fn group_frame(run: &str, groups: &[Group], total_ns: i64) -> PolarsResult<DataFrame> {
    let g = groups;
    let f = |v: Vec<Option<f64>>, n: &str| Column::new(n.into(), v);
    let share = |x: &Group| (total_ns > 0).then(|| 100.0 * x.gpu_ns as f64 / total_ns as f64);
    DataFrame::new_infer_height(vec![
        str_column("run", g.iter().map(|_| run)),
        str_column("op", g.iter().map(|x| x.op.as_str())),
        Column::new(
            "input_dims".into(),
            g.iter()
                .map(|x| x.input_dims.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "input_types".into(),
            g.iter()
                .map(|x| x.input_types.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "instances".into(),
            g.iter().map(|x| x.instances).collect::<Vec<_>>(),
        ),
        Column::new(
            "gpu_ns".into(),
            g.iter().map(|x| x.gpu_ns).collect::<Vec<_>>(),
        ),
        f(g.iter().map(share).collect(), "share_pct"),
        Column::new(
            "model".into(),
            g.iter().map(|x| x.model).collect::<Vec<_>>(),
        ),
        Column::new(
            "dtype".into(),
            g.iter().map(|x| x.dtype).collect::<Vec<_>>(),
        ),
        Column::new(
            "flops".into(),
            g.iter().map(|x| x.flops).collect::<Vec<_>>(),
        ),
        Column::new(
            "bytes".into(),
            g.iter().map(|x| x.bytes).collect::<Vec<_>>(),
        ),
        f(g.iter().map(|x| x.roof.tflops).collect(), "tflops"),
        f(g.iter().map(|x| x.roof.tbps).collect(), "tbps"),
        f(g.iter().map(|x| x.roof.intensity).collect(), "intensity"),
        f(g.iter().map(|x| x.roof.peak_pct).collect(), "peak_pct"),
        Column::new(
            "bound".into(),
            g.iter().map(|x| x.roof.bound).collect::<Vec<_>>(),
        ),
        f(g.iter().map(|x| x.roof.roof_pct).collect(), "roof_pct"),
        Column::new(
            "note".into(),
            g.iter().map(|x| x.note.as_deref()).collect::<Vec<_>>(),
        ),
    ])
}

/// A run's headline numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Operator instances of the run.
    pub instances: usize,
    /// Their summed GPU time, ns.
    pub kernel_ns: i64,
    /// GPU time of instances with FLOPs or bytes.
    pub modelled_ns: i64,
    /// FLOPs of the instances with a FLOPs model.
    pub model_flops: i64,
    /// MFU % and GEMM TFLOP/s while GEMMs run, over the step rows.
    pub mfu: Option<Spread>,
    /// Over the step rows, as `mfu`.
    pub gemm_tflops: Option<Spread>,
    /// Instances whose rate is above their roof (count, GPU ns): flagged `peak assumption
    /// wrong`, left out of MFU and every % of peak.
    pub over_roof: (usize, i64),
}

pub(crate) fn headline(ops: &[OpRow], steps: &[StepRow]) -> Headline {
    let per_step =
        |f: fn(&StepRow) -> Option<f64>| spread(steps.iter().filter(|s| s.level == "step").map(f));
    Headline {
        instances: ops.len(),
        kernel_ns: ops.iter().map(|r| r.gpu_ns).sum(),
        modelled_ns: ops
            .iter()
            .filter(|r| r.flops.is_some() || r.bytes.is_some())
            .map(|r| r.gpu_ns)
            .sum(),
        model_flops: steps
            .iter()
            .filter(|s| s.level == "rank")
            .map(|s| s.model_flops)
            .sum(),
        over_roof: ops
            .iter()
            .filter(|r| r.roof.over.is_some())
            .fold((0, 0), |(n, ns), r| (n + 1, ns + r.gpu_ns)),
        mfu: per_step(|s| s.mfu_pct),
        gemm_tflops: per_step(|s| s.gemm_tflops),
    }
}
