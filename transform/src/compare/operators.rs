//! The operator level: GPU time grouped by the CPU operator that launched it and that
//! operator's input shapes and dtypes, matched across the two runs of each pair (kernel names
//! differ between vendors; `aten::mm` on `[[8192, 4096], [4096, 4096]]` does not). Per pair,
//! because a time per step window pooled over workloads divides one model's operator time
//! by every model's windows.
//!
//! A GPU activity's operator is the one `crate::launch` finds: the `cpu_op` with its
//! `External id`, else through the runtime call that launched it. Each side also says which
//! kernels the operator launched and how many per call: one vendor's library may run two
//! kernels (a GEMM and a fix-up) where the other runs one, which the times alone hide.

use std::collections::{BTreeMap, HashMap, HashSet};

use polars::prelude::*;

use crate::rows::str_column;

use super::load::{ints, strs, SideData};
use super::pairs::Pair;
use crate::launch::Links;
pub(super) use crate::launch::{compact_json, NO_OP};

/// (operator name, input dims, input types).
pub(super) type OpKey = (String, String, String);

/// One operator key across the sides of one pair: mean GPU ms per step window of the pair's
/// run, calls (operator instances), and each side's achieved TFLOP/s and share of its own
/// GPU's peak (`aorta perf`'s models; null without shapes, a model or a known device).
pub(super) struct OpRow {
    /// The pair's workload.
    pub workload: String,
    pub key: OpKey,
    pub ms: [Option<f64>; 2],
    pub calls: [i64; 2],
    pub tflops: [Option<f64>; 2],
    pub peak_pct: [Option<f64>; 2],
    /// Kernels (activities of kind `kernel`) per call, each side.
    pub kernels_per_call: [Option<f64>; 2],
    /// Each side's kernel names for the operator, most GPU time first (at most `TOP_KERNELS`).
    pub top_kernels: [Vec<String>; 2],
}

/// Kernel names kept per operator and side.
pub(super) const TOP_KERNELS: usize = 3;

/// One operator key on one side: GPU ns, calls, kernels, and GPU ns per kernel name.
#[derive(Default)]
struct SideOp {
    ns: i64,
    calls: i64,
    kernels: i64,
    names: HashMap<String, i64>,
}

impl SideOp {
    fn top_kernels(&self) -> Vec<String> {
        let mut v: Vec<(&String, &i64)> = self.names.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        v.into_iter()
            .take(TOP_KERNELS)
            .map(|(n, _)| n.clone())
            .collect()
    }
}

impl OpRow {
    pub(super) fn status(&self) -> &'static str {
        match self.ms {
            [Some(_), Some(_)] => "matched",
            [Some(_), None] => "reference_only",
            _ => "candidate_only",
        }
    }
    pub(super) fn ratio(&self) -> Option<f64> {
        match self.ms {
            [Some(r), Some(c)] if r != 0.0 => Some(c / r),
            _ => None,
        }
    }
    pub(super) fn diff(&self) -> f64 {
        self.ms[1].unwrap_or(0.0) - self.ms[0].unwrap_or(0.0)
    }
}

/// Per pair (in pair order), both sides' operators, largest |candidate − reference| first.
pub(super) fn compare(sides: &[SideData; 2], pairs: &[Pair]) -> Vec<OpRow> {
    let mut by_run = [side_ops(&sides[0]), side_ops(&sides[1])];
    let mut out = Vec::new();
    for p in pairs {
        let mut all: BTreeMap<OpKey, OpRow> = BTreeMap::new();
        for (s, runs) in by_run.iter_mut().enumerate() {
            let (times, windows) = runs.remove(&p.runs[s]).unwrap_or_default();
            for (key, op) in times {
                let row = all
                    .entry(key.clone())
                    .or_insert_with(|| OpRow::new(&p.workload, key));
                row.ms[s] = Some(op.ns as f64 * 1e-6 / windows.max(1) as f64);
                row.calls[s] = op.calls;
                row.kernels_per_call[s] =
                    (op.calls > 0).then(|| op.kernels as f64 / op.calls as f64);
                row.top_kernels[s] = op.top_kernels();
            }
        }
        let mut rows: Vec<OpRow> = all.into_values().collect();
        rows.sort_by(|a, b| b.diff().abs().total_cmp(&a.diff().abs()));
        out.extend(rows);
    }
    out
}

impl OpRow {
    fn new(workload: &str, key: OpKey) -> OpRow {
        OpRow {
            workload: workload.to_string(),
            key,
            ms: [None, None],
            calls: [0, 0],
            tflops: [None, None],
            peak_pct: [None, None],
            kernels_per_call: [None, None],
            top_kernels: Default::default(),
        }
    }
}

/// One run's operators: GPU ns, instances and kernels per key, and its step windows.
type RunOps = (HashMap<OpKey, SideOp>, usize);

/// Per run of one side, GPU ns, operator instances and kernels per key, and the run's number
/// of step windows.
fn side_ops(d: &SideData) -> HashMap<String, RunOps> {
    let df = &d.acts;
    let launchers = Links::new(&d.cpu, df).launchers(df);
    let (run, rank, step) = (strs(df, "run"), ints(df, "rank"), ints(df, "step"));
    let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
    let (kind, kernel) = (strs(df, "kind"), strs(df, "name"));
    let (names, dims, types) = (
        strs(&d.cpu, "name"),
        strs(&d.cpu, "input_dims"),
        strs(&d.cpu, "input_types"),
    );
    let mut out: HashMap<&str, RunOps> = HashMap::new();
    let mut seen = HashSet::new();
    let mut windows = HashSet::new();
    for i in 0..df.height() {
        let r = run[i].unwrap_or("");
        windows.insert((r, rank[i], step[i]));
        let op = launchers[i];
        let k = match op {
            Some(o) => (
                names[o].unwrap_or("").to_string(),
                compact_json(dims[o].unwrap_or("")),
                compact_json(types[o].unwrap_or("")),
            ),
            None => (NO_OP.to_string(), String::new(), String::new()),
        };
        let e = out.entry(r).or_default().0.entry(k).or_default();
        let ns = (end[i].unwrap_or(0) - start[i].unwrap_or(0)).max(0);
        e.ns += ns;
        if op.is_none_or(|o| seen.insert(o)) {
            e.calls += 1;
        }
        if kind[i] == Some("kernel") {
            e.kernels += 1;
            *e.names
                .entry(kernel[i].unwrap_or("").to_string())
                .or_default() += ns;
        }
    }
    for (r, _, _) in windows {
        out.entry(r).or_default().1 += 1;
    }
    out.into_iter().map(|(r, v)| (r.to_string(), v)).collect()
}

/// Fills each row's TFLOP/s and % of peak from the operator instances of its pair's run on
/// each side (`perf`): Σ FLOPs ÷ Σ GPU time of the instances of that operator and shape, and
/// Σ FLOPs ÷ Σ (time × the instance's peak), so each side is judged against its own GPU;
/// a key with an instance above its roof, or a % above 100, has none (`perf::rows::plausible`).
pub(super) fn add_rates(rows: &mut [OpRow], perf: &[Vec<crate::perf::PerfRun>; 2], pairs: &[Pair]) {
    for (s, runs) in perf.iter().enumerate() {
        for p in pairs {
            let Some(run) = runs.iter().find(|r| r.run == p.runs[s]) else {
                continue;
            };
            let sums = rate_sums(run);
            let of_pair = rows.iter_mut().filter(|r| r.workload == p.workload);
            for row in of_pair.filter(|r| r.key.0 != NO_OP) {
                let Some(&(f, ns, ns_peak, ns_with)) = sums.get(&row.key) else {
                    continue;
                };
                row.tflops[s] = (ns > 0.0).then(|| f / ns / 1e3);
                row.peak_pct[s] = (ns_with == ns && ns_peak > 0.0)
                    .then(|| 100.0 * f / (ns_peak * 1e3))
                    .filter(|p| crate::perf::rows::plausible(*p));
            }
        }
    }
}

/// Per operator key of one run: (Σ flops, Σ ns, Σ ns × peak, ns with a peak).
fn rate_sums(run: &crate::perf::PerfRun) -> HashMap<OpKey, (f64, f64, f64, f64)> {
    let mut sums: HashMap<OpKey, (f64, f64, f64, f64)> = HashMap::new();
    for r in &run.ops {
        let Some(f) = r.flops else { continue };
        let key = (
            r.op.clone(),
            r.input_dims.clone().unwrap_or_default(),
            r.input_types.clone().unwrap_or_default(),
        );
        let e = sums.entry(key).or_default();
        let ns = r.gpu_ns as f64;
        e.0 += f as f64;
        e.1 += ns;
        // An instance above its roof (`Roof::over`) has no % of peak, so neither has its key.
        if let (Some(p), None) = (r.peak_tflops, r.roof.over) {
            (e.2, e.3) = (e.2 + ns * p, e.3 + ns);
        }
    }
    sums
}

/// How `compare_operators` joins an operator's kernel names into one cell.
pub const KERNEL_SEPARATOR: &str = "; ";

pub(super) fn frame(rows: &[OpRow]) -> PolarsResult<DataFrame> {
    let side_ms = |s: usize| rows.iter().map(|r| r.ms[s]).collect::<Vec<_>>();
    let calls = |s: usize| rows.iter().map(|r| r.calls[s]).collect::<Vec<_>>();
    let tflops = |s: usize| rows.iter().map(|r| r.tflops[s]).collect::<Vec<_>>();
    let pct = |s: usize| rows.iter().map(|r| r.peak_pct[s]).collect::<Vec<_>>();
    let per_call = |s: usize| {
        rows.iter()
            .map(|r| r.kernels_per_call[s])
            .collect::<Vec<_>>()
    };
    let names = |s: usize| {
        rows.iter()
            .map(move |r| r.top_kernels[s].join(KERNEL_SEPARATOR))
    };
    DataFrame::new_infer_height(vec![
        str_column("workload", rows.iter().map(|r| r.workload.as_str())),
        str_column("op", rows.iter().map(|r| r.key.0.as_str())),
        str_column("input_dims", rows.iter().map(|r| r.key.1.as_str())),
        str_column("input_types", rows.iter().map(|r| r.key.2.as_str())),
        Column::new("reference_ms".into(), side_ms(0)),
        Column::new("candidate_ms".into(), side_ms(1)),
        Column::new("reference_calls".into(), calls(0)),
        Column::new("candidate_calls".into(), calls(1)),
        Column::new(
            "ratio".into(),
            rows.iter().map(OpRow::ratio).collect::<Vec<_>>(),
        ),
        Column::new(
            "diff_ms".into(),
            rows.iter().map(OpRow::diff).collect::<Vec<_>>(),
        ),
        str_column("status", rows.iter().map(OpRow::status)),
        Column::new("reference_tflops".into(), tflops(0)),
        Column::new("candidate_tflops".into(), tflops(1)),
        Column::new("reference_peak_pct".into(), pct(0)),
        Column::new("candidate_peak_pct".into(), pct(1)),
        Column::new("reference_kernels_per_call".into(), per_call(0)),
        Column::new("candidate_kernels_per_call".into(), per_call(1)),
        str_column("reference_top_kernels", names(0)),
        str_column("candidate_top_kernels", names(1)),
    ])
}
