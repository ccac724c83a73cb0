//! Performance models: the FLOPs and bytes of one operator from its name and arguments.
//!
//! Each model is a formula of ../shared/docs/METRICS.md ("Performance models"), written out in
//! docs/PERF.md: GEMMs 2·M·N·K (times the batch), attention 4·B·H·Sq·Sk·D forward and 2.5×
//! that backward (causal: half), convolution 2·N·K·(C/groups)·R·S·P·Q per pass, and
//! elementwise and reduction ops bytes only. Bytes are every tensor argument read once plus
//! the outputs written once. A model reads arguments by their position in the operator's
//! signature; an operator whose shapes are missing or do not fit gets an error that says
//! why, which the tables count, and never a guessed number.

mod attention;
mod conv;
mod gemm;
mod memory;

#[cfg(test)]
mod tests;

use super::args::{Dtype, OpArgs};

/// What kind of work a model describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Gemm,
    Attention,
    AttentionBwd,
    Conv,
    ConvBwd,
    Elementwise,
    Reduction,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Gemm => "gemm",
            Kind::Attention => "attention",
            Kind::AttentionBwd => "attention_bwd",
            Kind::Conv => "conv",
            Kind::ConvBwd => "conv_bwd",
            Kind::Elementwise => "elementwise",
            Kind::Reduction => "reduction",
        }
    }
}

/// One operator's work: FLOPs (None for bytes-only kinds), bytes moved, and the dtype its
/// FLOPs run in (the peak they are judged by).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Estimate {
    pub kind: Kind,
    pub flops: Option<i64>,
    pub bytes: Option<i64>,
    pub dtype: Option<Dtype>,
}

/// Why an operator with a model got no numbers (shown in `op_perf.note`).
pub(crate) type Missing = String;

/// The estimate for one operator (named as the trace writes it): `None` when aorta has no
/// model for it, `Some(Err)` when the model cannot read its arguments.
pub(crate) fn estimate(op: &str, args: &OpArgs) -> Option<Result<Estimate, Missing>> {
    gemm::estimate(op, args)
        .or_else(|| attention::estimate(op, args))
        .or_else(|| conv::estimate(op, args))
        .or_else(|| memory::estimate(op, args))
}

/// A GEMM a workload described in its kernel args (`m`, `n`, `k`, `dtype`): A is M×K, B K×N,
/// C M×N, all of the dtype.
pub(crate) fn kernel_gemm(
    m: i64,
    n: i64,
    k: i64,
    dtype: Option<Dtype>,
) -> Result<Estimate, Missing> {
    if m < 0 || n < 0 || k < 0 {
        return Err(format!("negative GEMM shape m={m} n={n} k={k}"));
    }
    let (m, n, k) = (i128::from(m), i128::from(n), i128::from(k));
    let bytes = dtype.map(|d| (m * k + k * n + m * n) * i128::from(d.size()));
    Ok(Estimate {
        kind: Kind::Gemm,
        flops: Some(fit(2 * m * n * k)?),
        bytes: bytes.map(fit).transpose()?,
        dtype,
    })
}

/// An exact count as the tables store it.
fn fit(v: i128) -> Result<i64, Missing> {
    i64::try_from(v).map_err(|_| format!("{v} does not fit in 64 bits"))
}

/// The bytes of every tensor argument, each once.
fn input_bytes(a: &OpArgs) -> i128 {
    (0..a.dims.len()).filter_map(|i| a.bytes(i)).sum()
}

/// Argument `i` as a tensor of rank `rank` (any rank ≥ 1 when `rank` is 0), or why not.
fn tensor(a: &OpArgs, i: usize, what: &str, rank: usize) -> Result<Vec<i64>, Missing> {
    let t = a
        .tensor(i)
        .ok_or_else(|| format!("no shape for {what} (argument {i})"))?;
    if (rank == 0 && t.is_empty()) || (rank > 0 && t.len() != rank) {
        let want = if rank == 0 {
            "≥ 1".into()
        } else {
            rank.to_string()
        };
        return Err(format!("{what} has shape {t:?}, rank {want} expected"));
    }
    Ok(t.to_vec())
}

fn dtype(a: &OpArgs, i: usize, what: &str) -> Result<Dtype, Missing> {
    a.dtype(i)
        .ok_or_else(|| format!("no dtype for {what} (argument {i})"))
}
