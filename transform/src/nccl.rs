//! What NCCL and RCCL collectives move: message bytes from the args Kineto copies onto the
//! kernels, and the bus-bandwidth factors nccl-tests uses. `aorta compare` and
//! `aorta collectives` both report bandwidth, so the arithmetic lives here once.

/// Bytes per element of the dtype names PyTorch writes in `args.dtype`.
pub(crate) fn dtype_bytes(dtype: &str) -> Option<i64> {
    Some(match dtype {
        "Double" | "Long" | "ComplexFloat" => 8,
        "Float" | "Int" | "UInt32" => 4,
        "BFloat16" | "Half" | "Short" | "UInt16" => 2,
        "Byte" | "Char" | "Bool" | "Int8" | "UInt8" => 1,
        d if d.starts_with("Float8") => 1,
        _ => return None,
    })
}

/// The bus-bandwidth factor of a collective kind over `n` ranks.
pub(crate) fn bus_factor(op: &str, n: i64) -> f64 {
    let n = n.max(1) as f64;
    match op {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// Message size in bytes: the larger of input and output (all_gather's output,
/// reduce_scatter's input, all_reduce's either), as nccl-tests counts it.
pub(crate) fn message_bytes(
    inp: Option<i64>,
    out: Option<i64>,
    dtype: Option<&str>,
) -> Option<i64> {
    let elems = inp.max(out)?;
    Some(elems * dtype_bytes(dtype?)?)
}

/// GB/s of `bytes` moved in `ns` (bytes per ns); null without both or for zero time.
pub(crate) fn gbps(bytes: Option<i64>, ns: Option<i64>) -> Option<f64> {
    let (b, t) = (bytes?, ns?);
    (t > 0).then(|| b as f64 / t as f64)
}

/// Members of a process group named by its `Process Group Ranks` text (`[0, 1, 2]`); `None`
/// for a list PyTorch truncated (`[0, 1, …, 29, ...]`, past 30 ranks) or any other text.
pub(crate) fn ranks_in_list(text: &str) -> Option<i64> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(0);
    }
    let items: Vec<&str> = inner.split(',').map(str::trim).collect();
    items
        .iter()
        .all(|i| i.parse::<i64>().is_ok())
        .then_some(items.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_sizes_and_factors() {
        // 67,119,104 BFloat16 in, 134,238,208 out (the H200 FSDP2 all-gather): the output.
        let b = message_bytes(Some(67_119_104), Some(134_238_208), Some("BFloat16"));
        assert_eq!(b, Some(268_476_416));
        assert_eq!(message_bytes(Some(4), None, Some("Unknown")), None);
        assert_eq!(bus_factor("all_reduce", 8), 2.0 * 7.0 / 8.0);
        assert_eq!(bus_factor("all_gather", 2), 0.5);
        assert_eq!(bus_factor("send_recv", 8), 1.0);
        assert_eq!(gbps(Some(1_000), Some(500)), Some(2.0));
        assert_eq!(gbps(Some(1_000), Some(0)), None);
        assert_eq!(ranks_in_list("[0, 1, 2, 3]"), Some(4));
        assert_eq!(ranks_in_list("[]"), Some(0));
        assert_eq!(ranks_in_list("0,1"), None);
        assert_eq!(ranks_in_list("[0, 1, 2, ...]"), None);
    }
}
