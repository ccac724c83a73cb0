//! Convolutions: 2·N·K·(C/groups)·R·S·P·Q FLOPs per pass, i.e. 2 × every output element ×
//! the weight's elements per output channel (a grouped weight is [K, C/groups, R, S], so
//! groups need no factor of their own). A transposed convolution runs the product the other
//! way: 2 × every *input* element × the weight's elements per input channel.
//!
//! Backward (`convolution_backward`) is one pass per gradient asked for in its
//! `output_mask`: grad input and grad weight each cost a forward pass, so the usual backward
//! is 2× the forward; the bias gradient is a reduction and counts bytes only. The output
//! shape comes from stride, padding and dilation in `Concrete Inputs` (forward) or is the
//! gradient's own shape (backward).

use super::{dtype, fit, input_bytes, tensor, Estimate, Kind, Missing};
use crate::perf::args::{numel, OpArgs};

/// Where a forward signature keeps what the output shape needs.
struct Spec {
    stride: usize,
    padding: usize,
    dilation: usize,
    /// `transposed` flag position; `Some(None)`: always transposed.
    transposed: Option<Option<usize>>,
    output_padding: Option<usize>,
    groups: usize,
}

const fn fwd(
    (stride, padding, dilation): (usize, usize, usize),
    transposed: Option<Option<usize>>,
    output_padding: Option<usize>,
    groups: usize,
) -> Spec {
    Spec {
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    }
}

fn spec_of(op: &str) -> Option<Spec> {
    Some(match op {
        // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        "aten::convolution" | "aten::_convolution" => fwd((3, 4, 5), Some(Some(6)), Some(7), 8),
        // (input, weight, bias, stride, padding, dilation, groups)
        "aten::conv1d" | "aten::conv2d" | "aten::conv3d" => fwd((3, 4, 5), None, None, 6),
        // (input, weight, bias, stride, padding, output_padding, groups, dilation)
        "aten::conv_transpose1d" | "aten::conv_transpose2d" | "aten::conv_transpose3d" => {
            fwd((3, 4, 7), Some(None), Some(5), 6)
        }
        // (self, weight, padding, stride, dilation, groups, benchmark, deterministic, tf32)
        "aten::cudnn_convolution" => fwd((3, 2, 4), None, None, 5),
        // (self, weight, bias, padding, stride, dilation, groups, benchmark, deterministic)
        "aten::miopen_convolution" => fwd((4, 3, 5), None, None, 6),
        _ => return None,
    })
}

pub(super) fn estimate(op: &str, a: &OpArgs) -> Option<Result<Estimate, Missing>> {
    if op == "aten::convolution_backward" {
        return Some(backward(a));
    }
    spec_of(op).map(|s| forward(&s, a))
}

/// A per-dimension parameter (`[2, 2]`, or one value for every dimension).
fn param(a: &OpArgs, i: usize, n: usize, default: i64, what: &str) -> Result<Vec<i64>, Missing> {
    let v = match a.scalar(i).map(str::trim) {
        None | Some("") => return Ok(vec![default; n]),
        Some(_) => a.ints(i).ok_or_else(|| {
            format!(
                "{what} `{}` is not a list of integers",
                a.scalar(i).unwrap_or("")
            )
        })?,
    };
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v),
        _ => Err(format!("{what} {v:?} for {n} spatial dims")),
    }
}

/// 2 × the output (or, transposed, the input) elements × the weight's elements per channel.
fn pass_flops(x: &[i64], w: &[i64], out: &[i64], transposed: bool) -> i128 {
    let per = numel(&w[1..]);
    2 * per * if transposed { numel(x) } else { numel(out) }
}

/// The input with its batch dim (an unbatched input has one dim less than the weight).
fn batched(x: Vec<i64>, w: &[i64]) -> Vec<i64> {
    if x.len() + 1 == w.len() {
        std::iter::once(1).chain(x).collect()
    } else {
        x
    }
}

fn forward(s: &Spec, a: &OpArgs) -> Result<Estimate, Missing> {
    let w = tensor(a, 1, "weight", 0)?;
    let x = batched(tensor(a, 0, "input", 0)?, &w);
    if w.len() < 3 || x.len() != w.len() {
        return Err(format!(
            "input {x:?} and weight {w:?} are not a convolution"
        ));
    }
    let n = w.len() - 2;
    let transposed = match s.transposed {
        None => false,
        Some(None) => true,
        Some(Some(i)) => a
            .flag(i)
            .ok_or_else(|| format!("transposed (concrete input {i}) is not True/False"))?,
    };
    let padding = match a.scalar(s.padding).map(str::trim) {
        // conv2d(padding="same") keeps the spatial size (stride 1 only); "valid" is 0.
        Some("same") => None,
        Some("valid") => Some(vec![0; n]),
        _ => Some(param(a, s.padding, n, 0, "padding")?),
    };
    let stride = param(a, s.stride, n, 1, "stride")?;
    let dilation = param(a, s.dilation, n, 1, "dilation")?;
    let out_pad = match s.output_padding {
        Some(i) if transposed => param(a, i, n, 0, "output_padding")?,
        _ => vec![0; n],
    };
    let groups = a.int(s.groups).unwrap_or(1).max(1);
    let channels = if transposed { w[1] * groups } else { w[0] };
    let mut out = vec![x[0], channels];
    for d in 0..n {
        let (i, k) = (x[2 + d], w[2 + d]);
        let (st, dl, op) = (stride[d].max(1), dilation[d], out_pad[d]);
        out.push(match &padding {
            None => i,
            Some(p) if transposed => (i - 1) * st - 2 * p[d] + dl * (k - 1) + op + 1,
            Some(p) => (i + 2 * p[d] - dl * (k - 1) - 1).div_euclid(st) + 1,
        });
    }
    if out.iter().any(|&d| d < 0) {
        return Err(format!("negative output shape {out:?}"));
    }
    let dt = dtype(a, 0, "input")?;
    let flops = pass_flops(&x, &w, &out, transposed);
    Ok(Estimate {
        kind: Kind::Conv,
        flops: Some(fit(flops)?),
        bytes: Some(fit(input_bytes(a) + numel(&out) * i128::from(dt.size()))?),
        dtype: Some(dt),
    })
}

/// `convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
/// transposed, output_padding, groups, output_mask)`.
fn backward(a: &OpArgs) -> Result<Estimate, Missing> {
    let (g, x, w) = (
        tensor(a, 0, "grad_output", 0)?,
        tensor(a, 1, "input", 0)?,
        tensor(a, 2, "weight", 0)?,
    );
    let x = batched(x, &w);
    let g = batched(g, &w);
    if w.len() < 3 || x.len() != w.len() || g.len() != w.len() {
        return Err(format!(
            "grad {g:?}, input {x:?} and weight {w:?} are not a convolution"
        ));
    }
    let transposed = a.flag(7).unwrap_or(false);
    // output_mask `[True, True, False]`: grad input, grad weight, grad bias.
    let mask: Vec<bool> = match a.scalar(10).map(str::trim) {
        Some(m) if m.starts_with('[') => m
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|f| f.trim() == "True" || f.trim() == "true")
            .collect(),
        _ => vec![true, true, false],
    };
    let want = |i: usize| mask.get(i).copied().unwrap_or(false);
    let passes = i128::from(u8::from(want(0)) + u8::from(want(1)));
    let dt = dtype(a, 1, "input")?;
    let size = i128::from(dt.size());
    let written = [(0, numel(&x)), (1, numel(&w)), (2, i128::from(g[1]))]
        .iter()
        .filter(|(i, _)| want(*i))
        .map(|(_, n)| n * size)
        .sum::<i128>();
    Ok(Estimate {
        kind: Kind::ConvBwd,
        flops: Some(fit(passes * pass_flops(&x, &w, &g, transposed))?),
        bytes: Some(fit(input_bytes(a) + written)?),
        dtype: Some(dt),
    })
}
