//! The rows of `op_perf` (one per operator instance) and `perf_steps` (one per rank and
//! step, and one per rank), with the roofline of each instance and the MFU of each step.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use super::args::Dtype;
use super::instances::{Instance, Outcome};
use super::load::RunData;
use super::models::Kind;
use super::peaks::{Device, Peaks};
use super::precision::fp32_key;
use crate::launch::{compact_json, NO_OP};
use crate::rows::{ints, StrAt};

/// One operator instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRow {
    pub(crate) run: String,
    /// The rank.
    pub rank: i64,
    pub(crate) step: Option<i64>,
    pub(crate) op: String,
    pub(crate) input_dims: Option<String>,
    pub(crate) input_types: Option<String>,
    pub(crate) kernel: String,
    pub(crate) kernel_count: i64,
    pub(crate) start_ns: i64,
    pub(crate) end_ns: i64,
    pub(crate) gpu_ns: i64,
    pub(crate) model: Option<&'static str>,
    pub(crate) dtype: Option<&'static str>,
    pub(crate) flops: Option<i64>,
    pub(crate) bytes: Option<i64>,
    pub(crate) roof: Roof,
    pub(crate) device: Option<String>,
    pub(crate) peak_tflops: Option<f64>,
    pub(crate) peak_tbps: Option<f64>,
    pub(crate) source: Option<&'static str>,
    pub(crate) note: Option<String>,
}

/// Achieved rates and the roofline of some work that took `ns` of GPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Roof {
    /// Achieved TFLOP/s: FLOPs over the GPU time (null without FLOPs).
    pub tflops: Option<f64>,
    pub(crate) tbps: Option<f64>,
    /// FLOPs per byte.
    pub intensity: Option<f64>,
    /// `compute` or `memory`.
    pub bound: Option<&'static str>,
    /// Achieved ÷ the roof at this intensity: min(peak, intensity × bandwidth).
    pub roof_pct: Option<f64>,
    /// Achieved TFLOP/s ÷ the dtype's peak.
    pub peak_pct: Option<f64>,
    /// Set when the achieved rate is above its roof, which no GPU does: the % (then
    /// `roof_pct` and `peak_pct` are null), the roof's unit and value. See [`Roof::flag`].
    pub over: Option<Over>,
}

/// A rate above 100 % of its roof: the peak (or the model) it is judged by is wrong for this
/// run, e.g. an fp32 GEMM that ran as TF32 judged by the FP32 peak, or an elementwise op
/// whose bytes the cache served.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Over {
    /// Achieved ÷ roof, %.
    pub pct: f64,
    /// `TFLOP/s` or `TB/s`.
    pub unit: &'static str,
    /// The roof.
    pub roof: f64,
}

/// Whether a share of a roof or peak can be a result: at most 100 % (the one check every
/// printed % of peak, row, group or step, goes through).
pub(crate) fn plausible(pct: f64) -> bool {
    pct <= 100.0
}

impl Roof {
    /// `flops` and `bytes` in `ns` against a peak (TFLOP/s) and a bandwidth (TB/s).
    pub(crate) fn of(
        flops: Option<i64>,
        bytes: Option<i64>,
        ns: i64,
        peak: Option<f64>,
        bw: Option<f64>,
    ) -> Roof {
        // x per ns is G·x/s; TFLOP/s and TB/s are 1e3 of those.
        let rate = |x: Option<i64>| x.and_then(|x| (ns > 0).then(|| x as f64 / ns as f64 / 1e3));
        let (tflops, tbps) = (rate(flops), rate(bytes));
        let intensity = match (flops, bytes) {
            (Some(f), Some(b)) if b > 0 => Some(f as f64 / b as f64),
            _ => None,
        };
        let pct = |a: Option<f64>, b: Option<f64>| Some(100.0 * a? / b?);
        let bound = match (intensity, peak, bw, flops) {
            (Some(i), Some(p), Some(w), _) => Some(if i >= p / w { "compute" } else { "memory" }),
            (None, _, Some(_), None) if bytes.is_some() => Some("memory"),
            _ => None,
        };
        let roof_pct = match bound {
            Some("compute") => pct(tflops, peak),
            Some(_) => pct(tbps, bw),
            None => None,
        };
        let peak_pct = pct(tflops, peak);
        // The worse of the two shares: compute against the peak, bytes against HBM.
        let over = [
            (peak_pct, "TFLOP/s", peak),
            (roof_pct.filter(|_| bound == Some("memory")), "TB/s", bw),
        ]
        .into_iter()
        .filter_map(|(p, unit, roof)| Some((p?, unit, roof?)))
        .filter(|(p, ..)| !plausible(*p))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(pct, unit, roof)| Over { pct, unit, roof });
        Roof {
            tflops,
            tbps,
            intensity,
            bound,
            roof_pct: roof_pct.filter(|_| over.is_none()),
            peak_pct: peak_pct.filter(|_| over.is_none()),
            over,
        }
    }

    /// The row's note when its rate is above its roof: `peak assumption wrong: …`.
    pub fn flag(&self) -> Option<String> {
        self.over.map(|o| {
            format!(
                "peak assumption wrong: {:.1} % of its {} {} roof; left out of MFU and every % of peak",
                o.pct, o.roof, o.unit
            )
        })
    }
}

/// A rank's device: its entry in the peak table, or why it has none.
pub(crate) fn device_of<'p>(
    peaks: &'p Peaks,
    d: &RunData,
    rank: i64,
) -> (Option<&'p Device>, Option<String>) {
    match d.devices.get(&rank) {
        None => (None, Some("the trace names no device: no peaks, so no % of peak, roofline or MFU".into())),
        Some(name) => match peaks.find(name) {
            Some(dev) => (Some(dev), None),
            None => (None, Some(format!("unknown device `{name}`: no peaks (add it with --device-peaks FILE, docs/PERF.md)"))),
        },
    }
}

/// One row per instance.
pub(crate) fn op_rows<'a>(
    run: &str,
    d: &'a RunData,
    insts: &[Instance],
    peaks: &Peaks,
) -> Vec<OpRow> {
    let (names, dims, types) = (
        StrAt::of(&d.cpu, "name"),
        StrAt::of(&d.cpu, "input_dims"),
        StrAt::of(&d.cpu, "input_types"),
    );
    let (kname, kstep) = (StrAt::of(&d.acts, "name"), ints(&d.acts, "step"));
    let (start, end) = (ints(&d.acts, "start_ns"), ints(&d.acts, "end_ns"));
    // Per rank and per distinct shape text, not per instance (95,000 of them in 1 GiB).
    let mut devs: HashMap<i64, (Option<&Device>, Option<String>)> = HashMap::default();
    let mut compact: HashMap<&'a str, String> = HashMap::default();
    let mut shape = |s: Option<&'a str>| -> Option<String> {
        let s = s?;
        Some(compact.entry(s).or_insert_with(|| compact_json(s)).clone())
    };
    let mut out = Vec::with_capacity(insts.len());
    for x in insts {
        let (mut ns, mut first, mut last) = (0, i64::MAX, i64::MIN);
        let mut longest = (0, x.kernels[0]);
        for &k in &x.kernels {
            let (s, e) = (start[k].unwrap_or(0), end[k].unwrap_or(0));
            ns += (e - s).max(0);
            (first, last) = (first.min(s), last.max(e));
            longest = longest.max(((e - s).max(0), k));
        }
        let (dev, dev_note) = devs
            .entry(x.rank)
            .or_insert_with(|| device_of(peaks, d, x.rank))
            .clone();
        let est = x.estimate();
        let dtype = est.and_then(|e| e.dtype);
        // fp32 work whose kernels ran TF32 (or xf32) is judged by the TF32 peak.
        let key = match dtype {
            Some(Dtype::Fp32) => Some(fp32_key(
                x.kernels.iter().filter_map(|&k| kname.get(k)),
                est.is_some_and(|e| e.kind == Kind::Gemm),
                d.tf32_allowed.contains(&x.rank),
            )),
            d => d.and_then(Dtype::peak_key),
        };
        let peak = dev.zip(key).and_then(|(d, k)| d.tflops(k));
        let bw = dev.map(|d| d.hbm_tbps);
        let (flops, bytes) = (est.and_then(|e| e.flops), est.and_then(|e| e.bytes));
        let roof = Roof::of(flops, bytes, ns, peak, bw);
        let note = match &x.outcome {
            Outcome::Modelled(..) if roof.over.is_some() => roof.flag(),
            Outcome::Modelled(e, _) if e.flops.is_some() && dev.is_some() && peak.is_none() => key
                .map(|k| {
                    format!(
                        "{} has no {k} peak in the table",
                        dev.map_or("", |d| d.name.as_str())
                    )
                }),
            Outcome::Modelled(..) => dev_note,
            Outcome::Missing(why) | Outcome::NoModel(why) => Some(why.clone()),
        };
        out.push(OpRow {
            run: run.to_string(),
            rank: x.rank,
            step: kstep[x.kernels[0]],
            op: x.op.and_then(|o| names.get(o)).unwrap_or(NO_OP).to_string(),
            input_dims: shape(x.op.and_then(|o| dims.get(o))),
            input_types: shape(x.op.and_then(|o| types.get(o))),
            kernel: kname.get(longest.1).unwrap_or("").to_string(),
            kernel_count: x.kernels.len() as i64,
            start_ns: first,
            end_ns: last,
            gpu_ns: ns,
            model: est.map(|e| e.kind.as_str()),
            dtype: key,
            flops,
            bytes,
            roof,
            device: dev.map(|d| d.name.clone()),
            peak_tflops: peak,
            peak_tbps: bw,
            source: match &x.outcome {
                Outcome::Modelled(_, s) => Some(*s),
                _ => None,
            },
            note,
        });
    }
    out
}

/// One rank's totals over a step (or over every step).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepRow {
    /// The run label.
    pub run: String,
    /// The rank.
    pub rank: i64,
    /// `step` (one step) or `rank` (the sums over the rank's steps).
    pub level: &'static str,
    /// The step, for level `step` (null for a trace without steps).
    pub step: Option<i64>,
    /// The step's GPU window, ns; for level `rank`, the sum over its steps.
    pub window_ns: Option<i64>,
    pub(crate) kernel_ns: i64,
    pub(crate) instances: i64,
    /// FLOPs of the instances with a FLOPs model (GEMM, attention, convolution).
    pub model_flops: i64,
    pub(crate) gemm_flops: i64,
    pub(crate) attention_flops: i64,
    pub(crate) conv_flops: i64,
    /// The dominant dtype: the one with the most GEMM FLOPs (all model FLOPs without GEMMs).
    pub dtype: Option<&'static str>,
    /// The device-peak table's entry for the rank's GPU (null: unknown device).
    pub device: Option<String>,
    pub(crate) peak_tflops: Option<f64>,
    /// Model FLOPs utilization: 100 × `model_flops` / (`window_ns` × the dtype's peak).
    pub mfu_pct: Option<f64>,
    pub(crate) gemm_busy_ns: i64,
    /// GEMM TFLOP/s while GEMMs run: GEMM FLOPs over the union of their kernels' time.
    pub gemm_tflops: Option<f64>,
    pub(crate) unmodelled_count: i64,
    /// GPU time of the instances with neither FLOPs nor bytes (no model, or shapes missing).
    pub unmodelled_ns: i64,
    /// Instances above their roof (`Roof::over`), left out of `model_flops` and MFU: count
    /// and GPU ns.
    pub over_roof: (i64, i64),
    pub(crate) note: Option<String>,
}

/// Sums of one (rank, step): FLOPs per dtype of the GEMMs and of all models, and the GEMM
/// kernels' intervals.
#[derive(Default)]
struct Acc {
    kernel_ns: i64,
    instances: i64,
    by_kind: [i64; 3],
    gemm_by_dtype: BTreeMap<&'static str, i64>,
    all_by_dtype: BTreeMap<&'static str, i64>,
    gemm_spans: Vec<(i64, i64)>,
    unmodelled: (i64, i64),
    /// Instances above their roof (count, GPU ns): their FLOPs are left out.
    over: (i64, i64),
}

impl Acc {
    fn add(&mut self, r: &OpRow, spans: impl Iterator<Item = (i64, i64)>) {
        self.kernel_ns += r.gpu_ns;
        self.instances += 1;
        let Some(kind) = r.model else {
            self.unmodelled = (self.unmodelled.0 + 1, self.unmodelled.1 + r.gpu_ns);
            return;
        };
        if r.roof.over.is_some() {
            self.over = (self.over.0 + 1, self.over.1 + r.gpu_ns);
            return;
        }
        let Some(f) = r.flops else {
            if r.bytes.is_none() {
                self.unmodelled = (self.unmodelled.0 + 1, self.unmodelled.1 + r.gpu_ns);
            }
            return;
        };
        let slot = match kind {
            k if k == Kind::Gemm.as_str() => 0,
            k if k.starts_with("attention") => 1,
            _ => 2,
        };
        self.by_kind[slot] += f;
        let dt = r.dtype.unwrap_or("unknown");
        *self.all_by_dtype.entry(dt).or_default() += f;
        if slot == 0 {
            *self.gemm_by_dtype.entry(dt).or_default() += f;
            self.gemm_spans.extend(spans);
        }
    }

    /// The dtype with the most GEMM FLOPs (all model FLOPs when there are no GEMMs).
    fn dominant(&self) -> Option<&'static str> {
        let pick =
            |m: &BTreeMap<&'static str, i64>| m.iter().max_by_key(|(_, f)| **f).map(|(d, _)| *d);
        pick(&self.gemm_by_dtype)
            .or_else(|| pick(&self.all_by_dtype))
            .filter(|d| *d != "unknown")
    }

    fn merge(&mut self, o: &Acc) {
        self.kernel_ns += o.kernel_ns;
        self.instances += o.instances;
        for i in 0..3 {
            self.by_kind[i] += o.by_kind[i];
        }
        for (d, f) in &o.gemm_by_dtype {
            *self.gemm_by_dtype.entry(d).or_default() += f;
        }
        for (d, f) in &o.all_by_dtype {
            *self.all_by_dtype.entry(d).or_default() += f;
        }
        self.unmodelled = (
            self.unmodelled.0 + o.unmodelled.0,
            self.unmodelled.1 + o.unmodelled.1,
        );
        self.over = (self.over.0 + o.over.0, self.over.1 + o.over.1);
    }
}

/// The length of the union of intervals.
pub(crate) fn union_ns(mut v: Vec<(i64, i64)>) -> i64 {
    v.sort_unstable();
    let (mut total, mut cur) = (0, None::<(i64, i64)>);
    for (s, e) in v {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// One row per (rank, step) with instances, then one per rank (`level` = `rank`).
pub(crate) fn step_rows(
    run: &str,
    d: &RunData,
    insts: &[Instance],
    rows: &[OpRow],
    peaks: &Peaks,
) -> Vec<StepRow> {
    let (start, end) = (ints(&d.acts, "start_ns"), ints(&d.acts, "end_ns"));
    let mut accs: BTreeMap<(i64, Option<i64>), Acc> = BTreeMap::new();
    for (x, r) in insts.iter().zip(rows) {
        let spans = x
            .kernels
            .iter()
            .map(|&k| (start[k].unwrap_or(0), end[k].unwrap_or(0)));
        accs.entry((r.rank, r.step)).or_default().add(r, spans);
    }
    let mut out = Vec::new();
    let mut rank_acc: BTreeMap<i64, (Acc, i64, i64)> = BTreeMap::new();
    for ((rank, step), acc) in &accs {
        let window = d.windows.get(&(*rank, *step)).map(|(s, e)| e - s);
        let busy = union_ns(acc.gemm_spans.clone());
        out.push(step_row(
            run,
            peaks,
            d,
            (*rank, "step", *step),
            acc,
            window,
            busy,
        ));
        let t = rank_acc.entry(*rank).or_default();
        t.0.merge(acc);
        t.1 += window.unwrap_or(0);
        t.2 += busy;
    }
    for (rank, (acc, window, busy)) in &rank_acc {
        out.push(step_row(
            run,
            peaks,
            d,
            (*rank, "rank", None),
            acc,
            Some(*window),
            *busy,
        ));
    }
    out
}

fn step_row(
    run: &str,
    peaks: &Peaks,
    d: &RunData,
    (rank, level, step): (i64, &'static str, Option<i64>),
    acc: &Acc,
    window_ns: Option<i64>,
    gemm_busy_ns: i64,
) -> StepRow {
    let (dev, mut note) = device_of(peaks, d, rank);
    let dtype = acc.dominant();
    let peak = dev.zip(dtype).and_then(|(d, k)| d.tflops(k));
    if let (Some(dv), Some(k), None) = (dev, dtype, peak) {
        note = Some(format!("{} has no {k} peak in the table", dv.name));
    }
    let model_flops: i64 = acc.by_kind.iter().sum();
    let mut mfu_pct = match (peak, window_ns) {
        (Some(p), Some(w)) if w > 0 => Some(100.0 * model_flops as f64 / (w as f64 * p * 1e3)),
        _ => None,
    };
    if let Some(m) = mfu_pct.filter(|m| !plausible(*m)) {
        mfu_pct = None;
        note = Some(format!(
            "peak assumption wrong: MFU would be {m:.1} % of the {} peak",
            dtype.unwrap_or("")
        ));
    } else if acc.over.0 > 0 {
        let why = format!(
            "{} instances above their roof ({:.3} ms) left out of MFU",
            acc.over.0,
            acc.over.1 as f64 / 1e6
        );
        note = Some(match note {
            Some(n) => format!("{n}; {why}"),
            None => why,
        });
    }
    StepRow {
        run: run.to_string(),
        rank,
        level,
        step,
        window_ns,
        kernel_ns: acc.kernel_ns,
        instances: acc.instances,
        model_flops,
        gemm_flops: acc.by_kind[0],
        attention_flops: acc.by_kind[1],
        conv_flops: acc.by_kind[2],
        dtype,
        device: dev.map(|d| d.name.clone()),
        peak_tflops: peak,
        mfu_pct,
        gemm_busy_ns,
        gemm_tflops: (gemm_busy_ns > 0).then(|| acc.by_kind[0] as f64 / gemm_busy_ns as f64 / 1e3),
        unmodelled_count: acc.unmodelled.0,
        unmodelled_ns: acc.unmodelled.1,
        over_roof: acc.over,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_above_its_roof_is_flagged_and_no_percent_is_given() {
        // 1 ms of a GEMM: 1e12 FLOPs is 1,000 TFLOP/s; the 67 TFLOP/s FP32 peak is wrong.
        let (f, b) = (Some(1_000_000_000_000i64), Some(1_000_000_000i64));
        let r = Roof::of(f, b, 1_000_000, Some(67.0), Some(4.8));
        assert_eq!(r.bound, Some("compute"));
        assert_eq!((r.peak_pct, r.roof_pct), (None, None));
        assert_eq!(r.tflops, Some(1000.0), "the measured rate stays");
        let o = r.over.unwrap();
        assert!((o.pct - 100_000.0 / 67.0).abs() < 1e-9);
        assert_eq!((o.unit, o.roof), ("TFLOP/s", 67.0));
        let flag = r.flag().unwrap();
        assert!(
            flag.starts_with("peak assumption wrong: 1492.5 % of its 67 TFLOP/s roof"),
            "{flag}"
        );
        // The same work judged by the TF32 peak: 1,000 of 494.5 is still over; at 2 ms not.
        assert!(Roof::of(f, b, 2_000_000, Some(494.5), Some(4.8))
            .over
            .is_some());
        let ok = Roof::of(f, b, 4_000_000, Some(494.5), Some(4.8));
        assert_eq!(ok.over, None);
        assert!((ok.peak_pct.unwrap() - 25_000.0 / 494.5).abs() < 1e-9);
        // Bytes only: 6.24 GB in 1 ms is 6.24 TB/s, 130 % of a 4.8 TB/s HBM roof.
        let m = Roof::of(None, Some(6_240_000_000), 1_000_000, None, Some(4.8));
        assert_eq!((m.bound, m.roof_pct), (Some("memory"), None));
        let o = m.over.unwrap();
        assert!((o.pct - 130.0).abs() < 1e-9 && o.unit == "TB/s", "{o:?}");
        // Exactly at the roof is a result.
        let at = Roof::of(None, Some(4_800_000_000), 1_000_000, None, Some(4.8));
        assert_eq!(
            (at.over, at.roof_pct.map(|p| p.round())),
            (None, Some(100.0))
        );
    }
}
