//! GEMMs: 2·M·N·K FLOPs per product, times the batch (broadcast batch dims multiply out).
//!
//! `Input Dims` are logical shapes, so a transposed operand (`x.t()`, a stride of `[1, 512]`)
//! has the same M, N and K as a contiguous one: strides decide the kernel, not the FLOPs. A
//! bias (`addmm`'s C) is read, not multiplied: METRICS counts the products only.

use super::{dtype, fit, input_bytes, tensor, Estimate, Kind, Missing};
use crate::perf::args::{Dtype, OpArgs};

pub(super) fn estimate(op: &str, a: &OpArgs) -> Option<Result<Estimate, Missing>> {
    Some(match op {
        "aten::mm" => matrix(a, 0, 1),
        "aten::addmm" => matrix(a, 1, 2),
        "aten::bmm" => batched(a, 0, 1),
        "aten::baddbmm" => batched(a, 1, 2),
        "aten::matmul" => matmul(a),
        "aten::linear" => linear(a),
        "aten::_scaled_mm" => scaled_mm(a),
        "aten::_grouped_mm" => grouped_mm(a),
        _ => return None,
    })
}

/// A product of `batch` M×K by K×N matrices in `dt`, reading `a`'s tensors and writing
/// `batch`·M·N elements of `out`.
fn product(
    a: &OpArgs,
    batch: i128,
    (m, n, k): (i64, i64, i64),
    dt: Dtype,
    out: Dtype,
) -> Result<Estimate, Missing> {
    let (m, n, k) = (i128::from(m), i128::from(n), i128::from(k));
    // fp4 is stored two values a byte: the shapes count bytes, K counts values.
    let k = if dt == Dtype::Fp4x2 { 2 * k } else { k };
    let written = batch * m * n * i128::from(out.size());
    Ok(Estimate {
        kind: Kind::Gemm,
        flops: Some(fit(2 * batch * m * n * k)?),
        bytes: Some(fit(input_bytes(a) + written)?),
        dtype: Some(dt),
    })
}

fn agree(k1: i64, k2: i64) -> Result<(), Missing> {
    if k1 == k2 {
        Ok(())
    } else {
        Err(format!("inner dimensions differ: {k1} and {k2}"))
    }
}

/// `mm(A[M,K], B[K,N])`, `addmm(C, A, B)`.
fn matrix(a: &OpArgs, ia: usize, ib: usize) -> Result<Estimate, Missing> {
    let (x, y) = (tensor(a, ia, "A", 2)?, tensor(a, ib, "B", 2)?);
    agree(x[1], y[0])?;
    let dt = dtype(a, ia, "A")?;
    product(a, 1, (x[0], y[1], x[1]), dt, dt)
}

/// `bmm(A[b,M,K], B[b,K,N])`, `baddbmm(C, A, B)`.
fn batched(a: &OpArgs, ia: usize, ib: usize) -> Result<Estimate, Missing> {
    let (x, y) = (tensor(a, ia, "A", 3)?, tensor(a, ib, "B", 3)?);
    agree(x[2], y[1])?;
    if x[0] != y[0] {
        return Err(format!("batch sizes differ: {} and {}", x[0], y[0]));
    }
    let dt = dtype(a, ia, "A")?;
    product(a, i128::from(x[0]), (x[1], y[2], x[2]), dt, dt)
}

/// The batch of two batch-dim lists broadcast against each other (aligned right).
pub(super) fn broadcast(x: &[i64], y: &[i64]) -> Result<Vec<i64>, Missing> {
    let n = x.len().max(y.len());
    let at = |v: &[i64], i: usize| {
        let pad = n - v.len();
        if i < pad {
            1
        } else {
            v[i - pad]
        }
    };
    (0..n)
        .map(|i| match (at(x, i), at(y, i)) {
            (p, q) if p == q || q == 1 => Ok(p),
            (1, q) => Ok(q),
            (p, q) => Err(format!(
                "batch dims {x:?} and {y:?} do not broadcast ({p} vs {q})"
            )),
        })
        .collect()
}

/// `matmul(A, B)` with torch.matmul's rules: a 1-D operand is a vector, leading dims are
/// batch dims that broadcast.
fn matmul(a: &OpArgs) -> Result<Estimate, Missing> {
    let (x, y) = (tensor(a, 0, "A", 0)?, tensor(a, 1, "B", 0)?);
    let (m, kx, bx) = match x.len() {
        1 => (1, x[0], &[][..]),
        r => (x[r - 2], x[r - 1], &x[..r - 2]),
    };
    let (ky, n, by) = match y.len() {
        1 => (y[0], 1, &[][..]),
        r => (y[r - 2], y[r - 1], &y[..r - 2]),
    };
    agree(kx, ky)?;
    let batch: i128 = broadcast(bx, by)?.iter().map(|&d| i128::from(d)).product();
    let dt = dtype(a, 0, "A")?;
    product(a, batch, (m, n, kx), dt, dt)
}

/// `linear(X[..., K], W[N, K], bias?)`: every leading dim of X is a row of the product.
fn linear(a: &OpArgs) -> Result<Estimate, Missing> {
    let (x, w) = (tensor(a, 0, "input", 0)?, tensor(a, 1, "weight", 2)?);
    let k = x[x.len() - 1];
    agree(k, w[1])?;
    let rows: i128 = x[..x.len() - 1].iter().map(|&d| i128::from(d)).product();
    let dt = dtype(a, 0, "input")?;
    let rows = i64::try_from(rows).map_err(|_| "too many rows".to_string())?;
    product(a, 1, (rows, w[0], k), dt, dt)
}

/// `_scaled_mm(A, B, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)`:
/// the output is `out_dtype` (a ScalarType code), else the input's.
fn scaled_mm(a: &OpArgs) -> Result<Estimate, Missing> {
    let (x, y) = (tensor(a, 0, "A", 2)?, tensor(a, 1, "B", 2)?);
    agree(x[1], y[0])?;
    let dt = dtype(a, 0, "A")?;
    let out = match a.scalar(6).map(str::trim) {
        None | Some("") | Some("None") => dt,
        Some(code) => code
            .parse()
            .ok()
            .and_then(Dtype::from_scalar_type)
            .ok_or_else(|| format!("unknown out_dtype `{code}`"))?,
    };
    product(a, 1, (x[0], y[1], x[1]), dt, out)
}

/// `_grouped_mm(A, B, offs?, bias?, out_dtype?)` (MoE experts): A 2-D [ΣM, K] by B 3-D
/// [G, K, N] (each row meets one group's B), 3-D by 3-D (a batch of G), or 2-D [M, ΣK] by
/// 2-D [ΣK, N] (groups along K, G outputs; G from `offs`).
fn grouped_mm(a: &OpArgs) -> Result<Estimate, Missing> {
    let (x, y) = (tensor(a, 0, "A", 0)?, tensor(a, 1, "B", 0)?);
    let dt = dtype(a, 0, "A")?;
    match (x.len(), y.len()) {
        (2, 3) => {
            agree(x[1], y[1])?;
            product(a, 1, (x[0], y[2], x[1]), dt, dt)
        }
        (3, 3) => {
            agree(x[2], y[1])?;
            if x[0] != y[0] {
                return Err(format!("group counts differ: {} and {}", x[0], y[0]));
            }
            product(a, i128::from(x[0]), (x[1], y[2], x[2]), dt, dt)
        }
        (2, 2) => {
            agree(x[1], y[0])?;
            let groups = a
                .tensor(2)
                .and_then(|o| o.first().copied())
                .ok_or("2-D by 2-D without `offs`: the group count is unknown")?;
            // One M×N output per group, the K products spread over the groups.
            let e = product(a, 1, (x[0], y[1], x[1]), dt, dt)?;
            let extra = (i128::from(groups) - 1)
                * i128::from(x[0])
                * i128::from(y[1])
                * i128::from(dt.size());
            let bytes = e.bytes.map(|b| fit(i128::from(b) + extra)).transpose()?;
            Ok(Estimate { bytes, ..e })
        }
        (p, q) => Err(format!(
            "grouped GEMM of a {p}-D by a {q}-D operand is not modelled"
        )),
    }
}
