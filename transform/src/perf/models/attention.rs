//! Scaled dot-product attention, forward and backward, every PyTorch entry point.
//!
//! Forward: QKᵀ and PV, 2·B·Hq·Sq·Sk·Dqk + 2·B·Hq·Sq·Sk·Dv (= 4·B·H·Sq·Sk·D when the head
//! dims agree); softmax is left out, an order of D smaller. Backward: 2.5× the forward (the
//! flash kernels recompute QKᵀ, then four more products). A causal mask halves both. Grouped
//! -query attention counts the query heads: every query head does the whole product.
//!
//! The public op, the `_scaled_dot_product_*` ops and the cuDNN kernels' own ops
//! (`_cudnn_attention_forward`/`_backward`, which launch the cuDNN kernels under
//! `_scaled_dot_product_cudnn_attention` in PyTorch 2.11) take [B, H, S, D]; the flash and efficient kernels' own ops take [B, S, H, D].
//! ROCm runs the same ops (aotriton or CK kernels under `_flash_attention_*` and
//! `_efficient_attention_*`), so one table serves both vendors. `is_causal` is read from `Concrete Inputs`
//! at its position in each signature (the efficient kernels say `custom_mask_type`, where
//! any nonzero value is a causal mask). Variable-length batches (`cum_seq_q` given) have
//! sequence lengths the trace does not record: no estimate.

use super::{dtype, fit, input_bytes, tensor, Estimate, Kind, Missing};
use crate::perf::args::OpArgs;

#[derive(Clone, Copy)]
enum Layout {
    /// [B, H, S, D] (and any leading dims before H).
    Bhsd,
    /// [B, S, H, D].
    Bshd,
}

#[derive(Clone, Copy)]
enum Causal {
    Flag(usize),
    MaskType(usize),
}

struct Spec {
    /// Position of Q (K and V follow).
    q: usize,
    layout: Layout,
    causal: Causal,
    /// Position of the cumulative sequence lengths of a variable-length batch.
    varlen: Option<usize>,
    backward: bool,
}

const fn spec(q: usize, layout: Layout, causal: Causal, varlen: Option<usize>) -> Spec {
    Spec {
        q,
        layout,
        causal,
        varlen,
        backward: q > 0,
    }
}

use Causal::{Flag, MaskType};
use Layout::{Bhsd, Bshd};

fn spec_of(op: &str) -> Option<Spec> {
    Some(match op {
        "aten::scaled_dot_product_attention" => spec(0, Bhsd, Flag(5), None),
        "aten::_scaled_dot_product_flash_attention" => spec(0, Bhsd, Flag(4), None),
        "aten::_scaled_dot_product_efficient_attention" => spec(0, Bhsd, Flag(6), None),
        "aten::_scaled_dot_product_cudnn_attention" => spec(0, Bhsd, Flag(6), None),
        "aten::_flash_attention_forward" => spec(0, Bshd, Flag(8), Some(3)),
        "aten::_efficient_attention_forward" => spec(0, Bshd, MaskType(9), Some(4)),
        "aten::_cudnn_attention_forward" => spec(0, Bhsd, Flag(10), Some(4)),
        "aten::_scaled_dot_product_flash_attention_backward" => spec(1, Bhsd, Flag(11), None),
        "aten::_scaled_dot_product_efficient_attention_backward" => spec(1, Bhsd, Flag(11), None),
        "aten::_scaled_dot_product_cudnn_attention_backward" => spec(1, Bhsd, Flag(14), None),
        "aten::_flash_attention_backward" => spec(1, Bshd, Flag(11), Some(6)),
        "aten::_efficient_attention_backward" => spec(1, Bshd, MaskType(14), Some(6)),
        "aten::_cudnn_attention_backward" => spec(1, Bhsd, Flag(14), Some(9)),
        _ => return None,
    })
}

pub(super) fn estimate(op: &str, a: &OpArgs) -> Option<Result<Estimate, Missing>> {
    spec_of(op).map(|s| of(&s, a))
}

/// (batch × heads, heads, sequence, head dim) of one operand.
fn dims(t: &[i64], layout: Layout, what: &str) -> Result<(i128, i64, i64), Missing> {
    match (layout, t.len()) {
        (Layout::Bhsd, r) if r >= 2 => {
            let bh: i128 = t[..r - 2].iter().map(|&d| i128::from(d)).product();
            Ok((bh, t[r - 2], t[r - 1]))
        }
        (Layout::Bshd, 4) => Ok((i128::from(t[0]) * i128::from(t[2]), t[1], t[3])),
        _ => Err(format!(
            "{what} has shape {t:?}, which this op's layout does not take"
        )),
    }
}

fn causal(a: &OpArgs, c: Causal) -> Result<bool, Missing> {
    match c {
        Causal::Flag(i) => a.flag(i).ok_or_else(|| {
            format!(
                "is_causal (concrete input {i}) is `{}`",
                a.scalar(i).unwrap_or("missing")
            )
        }),
        Causal::MaskType(i) => a.int(i).map(|t| t != 0).ok_or_else(|| {
            format!(
                "custom_mask_type (concrete input {i}) is `{}`",
                a.scalar(i).unwrap_or("missing")
            )
        }),
    }
}

fn of(s: &Spec, a: &OpArgs) -> Result<Estimate, Missing> {
    if let Some(cum) = s.varlen.and_then(|i| a.tensor(i)) {
        if !cum.is_empty() {
            return Err("variable-length batch: the sequence lengths are not in the trace".into());
        }
    }
    let (q, k, v) = (
        tensor(a, s.q, "query", 0)?,
        tensor(a, s.q + 1, "key", 0)?,
        tensor(a, s.q + 2, "value", 0)?,
    );
    let (bh, sq, dqk) = dims(&q, s.layout, "query")?;
    let (_, sk, dk) = dims(&k, s.layout, "key")?;
    let (_, sv, dv) = dims(&v, s.layout, "value")?;
    if dk != dqk || sv != sk {
        return Err(format!(
            "query {q:?}, key {k:?} and value {v:?} do not agree"
        ));
    }
    let causal = causal(a, s.causal)?;
    let (sq, sk, dqk, dv) = (
        i128::from(sq),
        i128::from(sk),
        i128::from(dqk),
        i128::from(dv),
    );
    // Forward 2·BH·Sq·Sk·(Dqk + Dv); backward 2.5× that; causal ½: one fraction, exact.
    let (num, den) = match (s.backward, causal) {
        (false, false) => (2, 1),
        (false, true) => (1, 1),
        (true, false) => (5, 1),
        (true, true) => (5, 2),
    };
    let flops = num * bh * sq * sk * (dqk + dv) / den;
    let dt = dtype(a, s.q, "query")?;
    let size = i128::from(dt.size());
    // Forward writes O (Sq × Dv per head); backward writes dQ, dK and dV.
    let written = if s.backward {
        [s.q, s.q + 1, s.q + 2]
            .iter()
            .filter_map(|&i| a.bytes(i))
            .sum()
    } else {
        bh * sq * dv * size
    };
    Ok(Estimate {
        kind: if s.backward {
            Kind::AttentionBwd
        } else {
            Kind::Attention
        },
        flops: Some(fit(flops)?),
        bytes: Some(fit(input_bytes(a) + written)?),
        dtype: Some(dt),
    })
}
