//! Operator instances: each launching CPU operator together with its kernels, and what the
//! models say about it.
//!
//! An instance is the operator Kineto names as the kernel's launcher (`crate::launch`: the
//! innermost operator running at the launch), so `aten::linear` → `aten::addmm` is one
//! `aten::addmm` instance, the same unit `aorta compare` matches across vendors. A kernel no
//! operator launched is an instance of its own: FLOPs from a workload's kernel args
//! (`gemm_m`/`gemm_n`/`gemm_k`), else none, counted. An operator that launches kernels
//! itself *and* contains another modelled operator that does (rare: a wrapper with a copy
//! kernel of its own) would count the inner operator's FLOPs twice; it keeps no FLOPs and
//! says so.

use rustc_hash::FxHashMap as HashMap;

use super::args::{Dtype, OpArgs};
use super::load::RunData;
use super::models::{self, Estimate, Missing};
use crate::launch::Links;
use crate::rows::{ints, strs, IntAt, StrAt};

/// What is known of one instance's work.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A model's estimate, and where its shapes came from (`cpu_op`, `kernel_args`).
    Modelled(Estimate, &'static str),
    /// The model could not read the shapes (why).
    Missing(Missing),
    /// No model applies (why).
    NoModel(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub rank: i64,
    /// The launching operator (a row of `RunData::cpu`).
    pub op: Option<usize>,
    /// Rows of `RunData::acts`, in start order.
    pub kernels: Vec<usize>,
    pub outcome: Outcome,
}

impl Instance {
    pub(crate) fn estimate(&self) -> Option<&Estimate> {
        match &self.outcome {
            Outcome::Modelled(e, _) => Some(e),
            _ => None,
        }
    }
}

/// The instances of one run, grouped and estimated.
pub(super) fn instances(d: &RunData) -> Vec<Instance> {
    let launchers = Links::new(&d.cpu, &d.acts).launchers(&d.acts);
    let rank = ints(&d.acts, "rank");
    let mut of_op: HashMap<usize, usize> = HashMap::default();
    let mut out: Vec<Instance> = Vec::new();
    for (i, op) in launchers.iter().enumerate() {
        let new = |op| Instance {
            rank: rank[i].unwrap_or(0),
            op,
            kernels: vec![],
            outcome: Outcome::NoModel(String::new()),
        };
        let at = match op {
            Some(o) => *of_op.entry(*o).or_insert_with(|| {
                out.push(new(Some(*o)));
                out.len() - 1
            }),
            None => {
                out.push(new(None));
                out.len() - 1
            }
        };
        out[at].kernels.push(i);
    }
    estimate_all(d, &mut out);
    drop_nested(d, &mut out);
    out
}

fn estimate_all(d: &RunData, out: &mut [Instance]) {
    let (names, dims) = (StrAt::of(&d.cpu, "name"), StrAt::of(&d.cpu, "input_dims"));
    let (types, conc) = (
        StrAt::of(&d.cpu, "input_types"),
        StrAt::of(&d.cpu, "concrete_inputs"),
    );
    let (m, n, k) = (
        ints(&d.acts, "gemm_m"),
        ints(&d.acts, "gemm_n"),
        ints(&d.acts, "gemm_k"),
    );
    let dtype = strs(&d.acts, "dtype");
    // Shapes repeat every step: one model call per distinct (name, shapes).
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str);
    let mut cache: HashMap<Key, Option<Result<Estimate, Missing>>> = HashMap::default();
    for inst in out.iter_mut() {
        let by_op = inst.op.map(|o| {
            let (name, dim, typ, con) = (names.get(o), dims.get(o), types.get(o), conc.get(o));
            let key = (
                name.unwrap_or(""),
                dim.unwrap_or(""),
                typ.unwrap_or(""),
                con.unwrap_or(""),
            );
            let e = cache
                .entry(key)
                .or_insert_with(|| models::estimate(key.0, &OpArgs::parse(dim, typ, con)));
            (key.0, e.clone())
        });
        let first = inst.kernels[0];
        let by_args = match (m[first], n[first], k[first]) {
            (Some(m), Some(n), Some(k)) => Some(models::kernel_gemm(
                m,
                n,
                k,
                dtype[first].and_then(Dtype::parse),
            )),
            _ => None,
        };
        inst.outcome = match (by_op, by_args) {
            (Some((_, Some(Ok(e)))), _) => Outcome::Modelled(e, "cpu_op"),
            (_, Some(Ok(e))) => Outcome::Modelled(e, "kernel_args"),
            (_, Some(Err(why))) => Outcome::Missing(why),
            (Some((_, Some(Err(why)))), None) => Outcome::Missing(why),
            (Some((name, None)), None) => Outcome::NoModel(format!("no model for `{name}`")),
            (None, None) => {
                Outcome::NoModel("no CPU operator launched it: no shapes in the trace".into())
            }
        };
    }
}

/// Instances whose operator contains another instance's operator on the same thread: the
/// outer one's FLOPs would count the inner one's again.
fn drop_nested(d: &RunData, out: &mut [Instance]) {
    let (tid, start, end) = (
        IntAt::of(&d.cpu, "tid"),
        IntAt::of(&d.cpu, "start_ns"),
        IntAt::of(&d.cpu, "end_ns"),
    );
    let names = StrAt::of(&d.cpu, "name");
    // (rank, thread, start, longest first, instance): enclosing spans sort before their insides.
    type Span = (i64, Option<i64>, i64, std::cmp::Reverse<i64>, usize);
    let mut spans: Vec<Span> = out
        .iter()
        .enumerate()
        .filter(|(_, x)| x.estimate().is_some_and(|e| e.flops.is_some()))
        .filter_map(|(i, x)| {
            let o = x.op?;
            Some((
                x.rank,
                tid.get(o),
                start.get(o)?,
                std::cmp::Reverse(end.get(o)?),
                i,
            ))
        })
        .collect();
    spans.sort_unstable();
    let mut outer: Vec<(usize, usize)> = Vec::new();
    let mut stack: Vec<(i64, Option<i64>, i64, usize)> = Vec::new();
    for &(rank, t, s, std::cmp::Reverse(e), i) in &spans {
        stack.retain(|&(r, tt, end, _)| r == rank && tt == t && end >= s);
        for &(_, _, end, j) in &stack {
            if end >= e {
                outer.push((j, i));
            }
        }
        stack.push((rank, t, e, i));
    }
    for (j, i) in outer {
        let inner = out[i].op.and_then(|o| names.get(o)).unwrap_or("");
        out[j].outcome = Outcome::Missing(format!(
            "contains the modelled `{inner}`, whose FLOPs are counted there"
        ));
    }
}
