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
//! says so. Kernels of an operator without a model go to the nearest enclosing operator
//! with one (`reattribute`), so a wrapper's formula covers an inner op aorta has none for.

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
    let mut out = reattribute(d, out);
    drop_nested(d, &mut out);
    out
}

/// The tree of the `cpu_op` rows `keep` selects (given the row, its rank, thread and name),
/// per rank and thread: each one's nearest selected operator around it, by one stack sweep
/// per thread. The columns are read in order, not row by row (a million rows in 1 GiB).
fn parents<'a>(
    d: &'a RunData,
    mut keep: impl FnMut(usize, (Option<i64>, Option<i64>), Option<&'a str>) -> bool,
) -> HashMap<usize, usize> {
    let n = d.cpu.height();
    let col = |c: &str| IntAt::of(&d.cpu, c);
    let (rank, tid, start, end) = (col("rank"), col("tid"), col("start_ns"), col("end_ns"));
    let (cat, name) = (StrAt::of(&d.cpu, "category"), StrAt::of(&d.cpu, "name"));
    type Key = (Option<i64>, Option<i64>, i64, std::cmp::Reverse<i64>, usize);
    let mut ops: Vec<Key> = Vec::new();
    let rows = cat
        .iter(n)
        .zip(name.iter(n))
        .zip(rank.iter(n).zip(tid.iter(n)));
    for (i, ((((c, nm), (r, t)), s), e)) in rows.zip(start.iter(n)).zip(end.iter(n)).enumerate() {
        if let (Some("cpu_op"), Some(s), Some(e)) = (c, s, e) {
            if keep(i, (r, t), nm) {
                ops.push((r, t, s, std::cmp::Reverse(e), i));
            }
        }
    }
    ops.sort_unstable();
    let mut parent = HashMap::default();
    let mut stack: Vec<(Option<i64>, Option<i64>, i64, usize)> = Vec::new();
    for &(r, t, _, std::cmp::Reverse(e), i) in &ops {
        while let Some(&(sr, st, se, _)) = stack.last() {
            if sr == r && st == t && se >= e {
                break;
            }
            stack.pop();
        }
        if let Some(&(.., p)) = stack.last() {
            parent.insert(i, p);
        }
        stack.push((r, t, e, i));
    }
    parent
}

/// Kernels whose launching operator has no model go to the nearest enclosing operator that
/// has one: PyTorch 2.11's `aten::_scaled_dot_product_cudnn_attention` →
/// `aten::_cudnn_attention_forward` → cuDNN kernels, or any wrapper whose inner op aorta has
/// no formula for. An enclosing operator that already contains a modelled operator with
/// FLOPs does not take them (its FLOPs are counted inside); those kernels stay unmodelled.
fn reattribute(d: &RunData, mut out: Vec<Instance>) -> Vec<Instance> {
    if !out
        .iter()
        .any(|x| x.op.is_some() && matches!(x.outcome, Outcome::NoModel(_)))
    {
        return out;
    }
    let (names, dims) = (StrAt::of(&d.cpu, "name"), StrAt::of(&d.cpu, "input_dims"));
    let (types, conc) = (
        StrAt::of(&d.cpu, "input_types"),
        StrAt::of(&d.cpu, "concrete_inputs"),
    );
    // The tree of the operators that matter: those whose name has a model (whatever their
    // arguments), and the launchers to place; on the launchers' threads only.
    let (rank, tid) = (IntAt::of(&d.cpu, "rank"), IntAt::of(&d.cpu, "tid"));
    let launchers: rustc_hash::FxHashSet<usize> = out
        .iter()
        .filter(|x| matches!(x.outcome, Outcome::NoModel(_)))
        .filter_map(|x| x.op)
        .collect();
    let threads: rustc_hash::FxHashSet<(Option<i64>, Option<i64>)> = launchers
        .iter()
        .map(|&o| (rank.get(o), tid.get(o)))
        .collect();
    let mut named: HashMap<&str, bool> = HashMap::default();
    let parent = parents(d, |i, thread, name| {
        threads.contains(&thread)
            && (launchers.contains(&i)
                || name.is_some_and(|n| {
                    // Every modelled name is an `aten::` op: the others need no look-up.
                    n.starts_with("aten::")
                        && *named
                            .entry(n)
                            .or_insert_with(|| models::estimate(n, &OpArgs::default()).is_some())
                }))
    });
    let model = |o: usize| {
        let name = names.get(o)?;
        models::estimate(name, &OpArgs::parse(dims.get(o), types.get(o), conc.get(o)))
    };
    let ancestors =
        |o: usize| std::iter::successors(parent.get(&o).copied(), |p| parent.get(p).copied());
    // Operators that contain a modelled operator with FLOPs.
    let mut covers: rustc_hash::FxHashSet<usize> = Default::default();
    for x in &out {
        if let (Some(o), Some(Some(_))) = (x.op, x.estimate().map(|e| e.flops)) {
            covers.extend(ancestors(o));
        }
    }
    let mut of_op: HashMap<usize, usize> = out
        .iter()
        .enumerate()
        .filter_map(|(i, x)| Some((x.op?, i)))
        .collect();
    // Launcher → its nearest enclosing operator with a model, and that model's answer.
    type Target = Option<(usize, Result<Estimate, Missing>)>;
    let mut found: HashMap<usize, Target> = HashMap::default();
    for i in 0..out.len() {
        let (Some(o), Outcome::NoModel(_)) = (out[i].op, &out[i].outcome) else {
            continue;
        };
        let target = found
            .entry(o)
            .or_insert_with(|| ancestors(o).find_map(|p| Some((p, model(p)?))))
            .clone();
        let Some((p, estimate)) = target else {
            continue;
        };
        if covers.contains(&p) {
            continue;
        }
        let kernels = std::mem::take(&mut out[i].kernels);
        let at = *of_op.entry(p).or_insert_with(|| {
            out.push(Instance {
                rank: out[i].rank,
                op: Some(p),
                kernels: vec![],
                outcome: match estimate {
                    Ok(e) => Outcome::Modelled(e, "cpu_op"),
                    Err(why) => Outcome::Missing(why),
                },
            });
            out.len() - 1
        });
        out[at].kernels.extend(kernels);
        out[at].kernels.sort_unstable();
    }
    out.retain(|x| !x.kernels.is_empty());
    out.sort_by_key(|x| x.kernels[0]);
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

#[cfg(test)]
mod tests {
    use polars::prelude::*;

    use super::*;

    const Q: &str = "[4, 16, 2048, 128]";

    /// (name, start, end, external id, input dims, input types, concrete inputs).
    type Op<'a> = (&'a str, i64, i64, i64, String, &'a str, &'a str);

    /// Operators on one thread of rank 0, and kernels as (external id, start, end).
    fn data(ops: &[Op], kernels: &[(i64, i64, i64)]) -> RunData {
        let n = ops.len();
        let cpu = df!(
            "rank" => vec![0i64; n],
            "category" => vec!["cpu_op"; n],
            "name" => ops.iter().map(|o| o.0).collect::<Vec<_>>(),
            "tid" => vec![1i64; n],
            "start_ns" => ops.iter().map(|o| o.1).collect::<Vec<_>>(),
            "end_ns" => ops.iter().map(|o| o.2).collect::<Vec<_>>(),
            "correlation" => vec![None::<i64>; n],
            "external_id" => ops.iter().map(|o| o.3).collect::<Vec<_>>(),
            "input_dims" => ops.iter().map(|o| o.4.clone()).collect::<Vec<_>>(),
            "input_types" => ops.iter().map(|o| o.5).collect::<Vec<_>>(),
            "concrete_inputs" => ops.iter().map(|o| o.6).collect::<Vec<_>>(),
        )
        .unwrap();
        let k = kernels.len();
        let acts = df!(
            "rank" => vec![0i64; k],
            "name" => vec!["a_kernel"; k],
            "step" => vec![Some(1i64); k],
            "start_ns" => kernels.iter().map(|x| x.1).collect::<Vec<_>>(),
            "end_ns" => kernels.iter().map(|x| x.2).collect::<Vec<_>>(),
            "correlation" => (0..k as i64).collect::<Vec<_>>(),
            "external_id" => kernels.iter().map(|x| x.0).collect::<Vec<_>>(),
            "dtype" => vec![None::<&str>; k],
            "gemm_m" => vec![None::<i64>; k],
            "gemm_n" => vec![None::<i64>; k],
            "gemm_k" => vec![None::<i64>; k],
        )
        .unwrap();
        RunData {
            acts,
            cpu,
            windows: Default::default(),
            devices: Default::default(),
            tf32_allowed: Default::default(),
        }
    }

    /// The public cuDNN SDPA op as the PyTorch 2.11 trace records it (non-causal).
    fn cudnn_sdpa(name: &str) -> Op<'_> {
        (
            name,
            0,
            100,
            1,
            format!("[{Q}, {Q}, {Q}, [], [], [], [], [], []]"),
            r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar", "Scalar", "Scalar", ""]"#,
            r#"["", "", "", "", "True", "0.", "False", "False", ""]"#,
        )
    }

    fn unmodelled(name: &str, start: i64, end: i64, ext: i64) -> Op<'_> {
        (
            name,
            start,
            end,
            ext,
            format!("[{Q}]"),
            r#"["c10::BFloat16"]"#,
            r#"[""]"#,
        )
    }

    #[test]
    fn kernels_of_an_op_without_a_model_go_to_the_nearest_enclosing_modelled_op() {
        let d = data(
            &[
                cudnn_sdpa("aten::_scaled_dot_product_cudnn_attention"),
                unmodelled("aten::an_op_without_a_model", 10, 90, 2),
            ],
            &[(2, 20, 80)],
        );
        let x = instances(&d);
        assert_eq!(x.len(), 1);
        assert_eq!((x[0].op, x[0].kernels.clone()), (Some(0), vec![0]));
        // 4·B·H·S²·D, non-causal (`is_causal` False at 6).
        let e = x[0].estimate().expect("modelled by the enclosing op");
        assert_eq!(e.flops, Some(4 * 4 * 16 * 2048 * 2048 * 128));
        // Without a modelled op around it, the kernel stays with its launcher, unmodelled.
        let d = data(
            &[
                cudnn_sdpa("aten::no_model_either"),
                unmodelled("aten::an_op_without_a_model", 10, 90, 2),
            ],
            &[(2, 20, 80)],
        );
        let x = instances(&d);
        assert_eq!((x.len(), x[0].op), (1, Some(1)));
        assert!(matches!(&x[0].outcome, Outcome::NoModel(w) if w.contains("an_op_without")));
    }

    #[test]
    fn an_enclosing_op_whose_flops_are_counted_inside_takes_nothing() {
        // The math backend: a modelled bmm inside the public op, and an op without a model
        // beside it; its kernel must not make the public op count the attention again.
        let bmm = (
            "aten::bmm",
            10,
            50,
            2,
            "[[64, 2048, 128], [64, 128, 2048]]".to_string(),
            r#"["float", "float"]"#,
            r#"["", ""]"#,
        );
        let d = data(
            &[
                cudnn_sdpa("aten::scaled_dot_product_attention"),
                bmm,
                unmodelled("aten::an_op_without_a_model", 60, 90, 3),
            ],
            &[(2, 20, 40), (3, 70, 80)],
        );
        let x = instances(&d);
        let ops: Vec<Option<usize>> = x.iter().map(|i| i.op).collect();
        assert_eq!(
            ops,
            vec![Some(1), Some(2)],
            "each kernel keeps its launcher"
        );
        assert_eq!(
            x[0].estimate().unwrap().flops,
            Some(2 * 64 * 2048 * 2048 * 128)
        );
        assert!(matches!(&x[1].outcome, Outcome::NoModel(_)));
    }
}
