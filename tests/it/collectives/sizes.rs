//! `aorta overlap --by size` against the brute-force reference: per (kind, message bytes,
//! dtype, group size) the calls, the mean transfer time (the whole duration where the
//! kernel's collective was not matched) and duration, algbw = bytes / mean transfer and
//! busbw = algbw × nccl-tests' factor. Bytes come from the raw args here: the larger of
//! `In msg nelems` and `Out msg nelems` times the dtype's size.

use std::collections::BTreeMap;

use super::{raw_comms, Checked};
use crate::common::cli::overlap_json;

/// (kind, bytes, dtype, group size).
type Key = (String, Option<i64>, Option<String>, Option<i64>);

fn dtype_size(d: &str) -> Option<i64> {
    match d {
        "Float" | "Int" => Some(4),
        "BFloat16" | "Half" => Some(2),
        "Double" | "Long" => Some(8),
        "Byte" | "Char" | "Bool" => Some(1),
        _ => None,
    }
}

/// nccl-tests' bus factor (METRICS.md) over `n` ranks.
fn factor(kind: &str, n: i64) -> f64 {
    let n = n as f64;
    match kind {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" => (n - 1.0) / n,
        _ => 1.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// Per key: every call's (transfer, duration) in ns, from the reference's rows.
fn reference_calls(checked: &Checked) -> BTreeMap<Key, Vec<(i64, i64)>> {
    let mut out: BTreeMap<Key, Vec<(i64, i64)>> = BTreeMap::new();
    for (rank, path) in &checked.by_rank {
        let rows = &checked.reference.rows[rank];
        for c in raw_comms(path) {
            let e = rows
                .iter()
                .find(|e| e.start == c.start)
                .expect("reference row");
            let elems = c.in_nelems.max(c.out_nelems);
            let bytes = elems.zip(c.dtype.as_deref().and_then(dtype_size));
            let key = (
                c.kind.to_string(),
                bytes.map(|(n, b)| n * b),
                c.dtype.clone(),
                c.group_size,
            );
            let duration = e.end - e.start;
            out.entry(key)
                .or_default()
                .push((e.transfer.unwrap_or(duration), duration));
        }
    }
    out
}

pub(super) fn overlap_by_size_matches(checked: &Checked) {
    let want = reference_calls(checked);
    let doc = overlap_json(checked.dir.path(), "size");
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    for r in rows {
        let key: Key = (
            r["comm_op"].as_str().unwrap().to_string(),
            r["bytes"].as_i64(),
            r["dtype"].as_str().map(str::to_string),
            r["group_size"].as_i64(),
        );
        let calls = &want[&key];
        let n = calls.len() as f64;
        let transfer = calls.iter().map(|c| c.0).sum::<i64>() as f64 / n;
        let duration = calls.iter().map(|c| c.1).sum::<i64>() as f64 / n;
        assert_eq!(r["count"].as_i64(), Some(calls.len() as i64), "{key:?}");
        assert!(
            close(r["mean_ms"].as_f64().unwrap(), transfer * 1e-6),
            "{key:?} {r}"
        );
        let d = r["mean_duration_ms"].as_f64().unwrap();
        assert!(close(d, duration * 1e-6), "{key:?} {r}");
        let algbw = key.1.map(|b| b as f64 / transfer);
        let busbw = algbw.map(|a| a * factor(&key.0, key.3.unwrap()));
        for (col, v) in [("algbw_gbps", algbw), ("busbw_gbps", busbw)] {
            match (r[col].as_f64(), v) {
                (Some(got), Some(v)) => assert!(close(got, v), "{key:?} {col} {got} vs {v}"),
                (got, v) => assert_eq!(got, v, "{key:?} {col}"),
            }
        }
    }
    // The FSDP2 run's collectives carry their sizes: bandwidth is known for every row.
    assert!(
        rows.iter().all(|r| r["busbw_gbps"].as_f64().is_some()),
        "{rows:?}"
    );
}
