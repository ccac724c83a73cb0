//! Elementwise and reduction operators: bytes only (their FLOPs are a few per element, far
//! from any matrix peak; the roof that matters is memory bandwidth).
//!
//! Elementwise: every tensor argument read once, plus the output written once, with the
//! broadcast shape of the inputs in the first input's dtype (booleans for comparisons, the
//! target dtype for `_to_copy`). In-place ops (`add_`) read and write their first argument,
//! which counts it twice, as the memory sees it. An `out=` variant of `add`, `sub`, `mul`,
//! `div` (one tensor argument more than the functional op) writes that tensor without
//! reading it. Ops that only write their first argument
//! (`copy_`, `fill_`, `zero_`) count it once. Norms and softmax write an output of their
//! input's shape, so they are elementwise here too. Reductions read their input and write
//! the reduced shape (`dim` from `Concrete Inputs`; none given: everything, one element).

use super::{fit, gemm::broadcast, input_bytes, Estimate, Kind, Missing};
use crate::perf::args::{numel, Dtype, OpArgs};

const ELEMENTWISE: &[&str] = &[
    "abs",
    "add",
    "add_",
    "addcdiv_",
    "addcmul_",
    "bernoulli_",
    "clamp",
    "clamp_",
    "clamp_max",
    "clamp_max_",
    "clamp_min",
    "clamp_min_",
    "clone",
    "copy_",
    "cos",
    "div",
    "div_",
    "dropout",
    "erf",
    "exp",
    "exp_",
    "fill_",
    "gelu",
    "gelu_",
    "gelu_backward",
    "hardtanh",
    "layer_norm",
    "lerp_",
    "log",
    "log_",
    "masked_fill",
    "masked_fill_",
    "maximum",
    "minimum",
    "mul",
    "mul_",
    "nan_to_num",
    "native_dropout",
    "native_dropout_backward",
    "native_layer_norm",
    "native_layer_norm_backward",
    "neg",
    "neg_",
    "normal_",
    "pow",
    "pow_",
    "reciprocal",
    "relu",
    "relu_",
    "rms_norm",
    "_fused_rms_norm",
    "rsqrt",
    "rsqrt_",
    "rsub",
    "sigmoid",
    "sigmoid_",
    "sigmoid_backward",
    "silu",
    "silu_",
    "silu_backward",
    "sin",
    "softmax",
    "_softmax",
    "_softmax_backward_data",
    "log_softmax",
    "_log_softmax",
    "_log_softmax_backward_data",
    "sqrt",
    "sub",
    "sub_",
    "tanh",
    "tanh_",
    "tanh_backward",
    "threshold_backward",
    "_to_copy",
    "uniform_",
    "where",
    "zero_",
];

const COMPARISONS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge", "logical_not"];

/// Ops that write their first argument without reading it.
const WRITE_ONLY: &[&str] = &[
    "copy_",
    "fill_",
    "zero_",
    "normal_",
    "uniform_",
    "bernoulli_",
];

const REDUCTIONS: &[&str] = &[
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "linalg_vector_norm",
    "logsumexp",
    "max",
    "mean",
    "min",
    "norm",
    "prod",
    "std",
    "sum",
    "var",
];

pub(super) fn estimate(op: &str, a: &OpArgs) -> Option<Result<Estimate, Missing>> {
    let name = op.strip_prefix("aten::")?;
    if ELEMENTWISE.contains(&name) || COMPARISONS.contains(&name) {
        Some(elementwise(name, a))
    } else if REDUCTIONS.contains(&name) {
        Some(reduction(name, a))
    } else {
        None
    }
}

fn first_tensor(a: &OpArgs) -> Result<(Vec<i64>, Dtype), Missing> {
    (0..a.dims.len())
        .find_map(|i| Some((a.tensor(i)?.to_vec(), a.dtype(i)?)))
        .ok_or_else(|| "no tensor argument with a shape".to_string())
}

fn bytes_only(kind: Kind, bytes: i128, dt: Dtype) -> Result<Estimate, Missing> {
    Ok(Estimate {
        kind,
        flops: None,
        bytes: Some(fit(bytes)?),
        dtype: Some(dt),
    })
}

/// The functional arity of binary arithmetic ops whose `out=` variant Kineto records under
/// the same name with one more argument, the output tensor (`mul.out(self, other, *, out)`:
/// DDP's gradient scaling, `reducer::mul_out`).
const OUT_VARIANTS: &[(&str, usize)] = &[("add", 3), ("sub", 3), ("mul", 2), ("div", 2)];

/// The position of an `out=` tensor: written, not read.
fn out_arg(name: &str, a: &OpArgs) -> Option<usize> {
    let &(_, n) = OUT_VARIANTS.iter().find(|(op, _)| *op == name)?;
    (a.dims.len() == n + 1 && a.is_tensor(n)).then_some(n)
}

fn elementwise(name: &str, a: &OpArgs) -> Result<Estimate, Missing> {
    let (_, dt) = first_tensor(a)?;
    if WRITE_ONLY.contains(&name) {
        return bytes_only(Kind::Elementwise, input_bytes(a), dt);
    }
    let out = out_arg(name, a);
    let mut shape: Vec<i64> = vec![];
    for i in (0..a.dims.len()).filter(|&i| Some(i) != out) {
        if let Some(t) = a.tensor(i) {
            shape = broadcast(&shape, t)?;
        }
    }
    let out_dt = if COMPARISONS.contains(&name) {
        Dtype::Int(1)
    } else if name == "_to_copy" {
        // `_to_copy(self, dtype, ...)`: the target dtype as a ScalarType code, else unchanged.
        a.int(1).and_then(Dtype::from_scalar_type).unwrap_or(dt)
    } else {
        dt
    };
    let written = numel(&shape) * i128::from(out_dt.size());
    let read = input_bytes(a) - out.and_then(|i| a.bytes(i)).unwrap_or(0);
    bytes_only(Kind::Elementwise, read + written, dt)
}

fn reduction(name: &str, a: &OpArgs) -> Result<Estimate, Missing> {
    let (x, dt) = first_tensor(a)?;
    let rank = x.len() as i64;
    // `dim` is the second argument of every reduction that takes one: a `ScalarList`
    // (`sum(x, [-1])`) or one int (`max(x, 1)`); `sum` and `mean`'s second `Scalar` is a
    // dtype instead. No dim: everything.
    let dims = match a.types.get(1).map(String::as_str) {
        Some("ScalarList") => a.ints(1),
        Some("Scalar") if !matches!(name, "sum" | "mean") => a.ints(1),
        _ => None,
    };
    let dims = dims
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| (0..rank).collect());
    let mut kept = x.clone();
    for d in dims {
        let d = if d < 0 { d + rank } else { d };
        let slot = usize::try_from(d)
            .ok()
            .and_then(|d| kept.get_mut(d))
            .ok_or_else(|| format!("dim {d} out of range for {x:?}"))?;
        *slot = 1;
    }
    let out = match name {
        "all" | "any" => 1,
        "argmax" | "argmin" => 8,
        _ => i128::from(dt.size()),
    };
    bytes_only(Kind::Reduction, input_bytes(a) + numel(&kept) * out, dt)
}
