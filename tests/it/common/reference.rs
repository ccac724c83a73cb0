//! The independent reference the overlap and collectives tests share: a Kineto trace read
//! through serde_json with its decimal `ts`/`dur` text kept exact, the reviewed golden
//! categories, and every GPU activity clipped on its stream as METRICS.md prescribes.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::{cat, events, is_slice};

/// (kind, name) → (category, comm op or "") of the golden table.
pub(crate) type Golden = HashMap<(String, String), (String, String)>;

/// The compute categories (METRICS.md: compute = gemm ∪ attention ∪ other_compute).
pub(crate) const COMPUTE: [&str; 3] = ["gemm", "attention", "other_compute"];

/// `"1234.567"` µs as text → ns, by string surgery (no float anywhere).
pub(crate) fn us_text_to_ns(t: &str) -> i64 {
    let neg = t.starts_with('-');
    let t = t.trim_start_matches('-');
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let frac = format!("{frac:0<3}");
    let v = int.parse::<i64>().unwrap() * 1000 + frac[..3].parse::<i64>().unwrap();
    if neg {
        -v
    } else {
        v
    }
}

/// The raw trace through serde_json, with `ts`/`dur` numbers quoted first so their decimal
/// text survives (f64 would round epoch-scale values).
pub(crate) fn raw_exact(p: &Path) -> Value {
    let bytes = std::fs::read(p).unwrap();
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        super::cli::gunzip(&bytes)
    } else {
        bytes
    };
    let text = String::from_utf8_lossy(&bytes);
    let re = regex::Regex::new(r#"("(?:ts|dur)"\s*:\s*)(-?[0-9][0-9.]*)"#).unwrap();
    serde_json::from_str(&re.replace_all(&text, r#"$1"$2""#)).unwrap()
}

/// An integer, or a string holding one.
pub(crate) fn int_of(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// Stream of a GPU event: `args.stream`, else `tid` (`7`, `"7"` or `"stream 7"`).
pub(crate) fn stream_of(e: &Value) -> i64 {
    int_of(&e["args"]["stream"])
        .or_else(|| int_of(&e["tid"]))
        .or_else(|| {
            e["tid"]
                .as_str()?
                .trim()
                .strip_prefix("stream")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The reviewed golden table, tests/golden/kernel_categories.csv: (kind, name) →
/// (category, comm op or "").
pub(crate) fn golden() -> Golden {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/kernel_categories.csv");
    csv::Reader::from_path(path)
        .unwrap()
        .records()
        .map(|r| {
            let r = r.unwrap();
            (
                (r[0].to_string(), r[1].to_string()),
                (r[2].to_string(), r[3].to_string()),
            )
        })
        .collect()
}

/// (start, end, category).
pub(crate) type Span = (i64, i64, String);

/// GPU activities of one trace: (start, clipped end, category).
pub(crate) fn activities(p: &Path, golden: &Golden) -> Vec<Span> {
    let raw = raw_exact(p);
    let base = raw["baseTimeNanoseconds"].as_i64().unwrap_or(0);
    let mut per_stream: HashMap<(i64, i64), Vec<Span>> = HashMap::new();
    for e in events(&raw).iter().filter(|e| is_slice(e)) {
        let kind = match cat(e) {
            "kernel" => "kernel",
            "gpu_memcpy" => "memcpy",
            "gpu_memset" => "memset",
            _ => continue,
        };
        let Some(ts) = e["ts"].as_str() else { continue };
        let start = base + us_text_to_ns(ts);
        let raw_end = start + e["dur"].as_str().map_or(0, us_text_to_ns);
        let name = e["name"].as_str().unwrap_or("").to_string();
        let category = golden
            .get(&(kind.to_string(), name.clone()))
            .unwrap_or_else(|| panic!("{}: {kind} {name} not in the golden table", p.display()))
            .0
            .clone();
        let device = int_of(&e["args"]["device"])
            .or_else(|| int_of(&e["pid"]))
            .unwrap_or(0);
        per_stream
            .entry((device, stream_of(e)))
            .or_default()
            .push((start, raw_end, category));
    }
    let mut out = Vec::new();
    for (_, mut v) in per_stream {
        // METRICS.md data quality: an activity that runs into the next one on its stream ends
        // where the next one starts (never before its own start).
        v.sort_by_key(|a| (a.0, a.1));
        for i in 0..v.len() {
            let mut end = v[i].1.max(v[i].0);
            if let Some(next) = v.get(i + 1) {
                if next.0 < end {
                    end = next.0.max(v[i].0);
                }
            }
            out.push((v[i].0, end, v[i].2.clone()));
        }
    }
    out
}
