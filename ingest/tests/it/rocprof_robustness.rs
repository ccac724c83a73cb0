//! Bad rocprofv3 JSON never crashes: a real (shortened) results file cut at any byte or with
//! any bytes overwritten either ingests or fails with an error naming the file and an offset
//! inside it — never a panic, never output left behind. The same for the file with launches
//! and a `ProfilerStep#1` roctx range added, in rocprofv3's key order, which the reader reads
//! with its step pre-passes (`rocprof::prescan`).

use std::io::Read;
use std::sync::OnceLock;

use proptest::prelude::*;

use crate::common::{check, corpus};

/// The MI350X results file with its first 300 dispatches and 400 kernel symbols.
fn shortened() -> Option<serde_json::Value> {
    let p = corpus("rocprofv3/json/mi350x_908_results.json.gz")?;
    let f = std::fs::File::open(&p).unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut text)
        .unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let proc0 = &mut doc["rocprofiler-sdk-tool"][0];
    proc0["buffer_records"]["kernel_dispatch"]
        .as_array_mut()
        .unwrap()
        .truncate(300);
    proc0["kernel_symbols"]
        .as_array_mut()
        .unwrap()
        .truncate(400);
    Some(doc)
}

/// `shortened()`, minified.
fn sample() -> Option<&'static [u8]> {
    static S: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| Some(serde_json::to_vec(&shortened()?).unwrap()))
        .as_deref()
}

/// `shortened()` with a `hipLaunchKernel` record per dispatch and one `ProfilerStep#1` range
/// around them all, its keys in rocprofv3's order (tables, then dispatches, then API records).
fn sample_with_steps() -> Option<&'static [u8]> {
    static S: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let doc = shortened()?;
        let p = &doc["rocprofiler-sdk-tool"][0];
        let kinds: Vec<&str> = p["strings"]["buffer_records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kind"].as_str().unwrap())
            .collect();
        let index = |kind: &str, op: &str| {
            let k = kinds.iter().position(|x| *x == kind).unwrap();
            let ops = p["strings"]["buffer_records"][k]["operations"].as_array().unwrap();
            (k, ops.iter().position(|o| o == op).unwrap())
        };
        let record = |(kind, op): (usize, usize), corr: i64, start: i64, end: i64| {
            serde_json::json!({"size": 64, "kind": kind, "operation": op,
                "correlation_id": {"internal": corr, "external": 0},
                "start_timestamp": start, "end_timestamp": end, "thread_id": 908})
        };
        let disp = p["buffer_records"]["kernel_dispatch"].as_array().unwrap();
        let launch = index("HIP_RUNTIME_API_EXT", "hipLaunchKernel");
        let hip: Vec<serde_json::Value> = disp
            .iter()
            .map(|r| {
                let s = r["start_timestamp"].as_i64().unwrap() - 5000;
                record(launch, r["correlation_id"]["internal"].as_i64().unwrap(), s, s + 800)
            })
            .collect();
        let first = disp.iter().map(|r| r["start_timestamp"].as_i64().unwrap()).min()?;
        let last = disp.iter().map(|r| r["end_timestamp"].as_i64().unwrap()).max()?;
        let range = index("MARKER_CORE_RANGE_API", "roctxThreadRangeA");
        let marker = record(range, 1_000_000, first - 10_000, last);
        let mut strings = p["strings"].clone();
        strings["marker_api"] = serde_json::json!([{"key": 1_000_000, "value": "ProfilerStep#1"}]);
        let j = |v: &serde_json::Value| serde_json::to_string(v).unwrap();
        let text = format!(
            r#"{{"rocprofiler-sdk-tool":[{{"metadata":{},"agents":{},"strings":{},"kernel_symbols":{},"buffer_records":{{"kernel_dispatch":{},"hip_api":{},"marker_api":[{}]}}}}]}}"#,
            j(&p["metadata"]),
            j(&p["agents"]),
            j(&strings),
            j(&p["kernel_symbols"]),
            j(&p["buffer_records"]["kernel_dispatch"]),
            j(&serde_json::Value::Array(hip)),
            j(&marker)
        );
        Some(text.into_bytes())
    })
    .as_deref()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn cut_anywhere(frac in 0.0f64..1.0) {
        let Some(s) = sample() else { return Ok(()) };
        let cut = ((s.len() as f64) * frac) as usize;
        check("908_results.json", &s[..cut])?;
    }

    #[test]
    fn bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(s) = sample() else { return Ok(()) };
        let mut b = s.to_vec();
        let at = ((b.len() as f64) * frac) as usize;
        for x in b.iter_mut().skip(at).take(len) {
            *x = byte;
        }
        check("908_results.json", &b)?;
    }

    #[test]
    fn with_steps_cut_or_overwritten_anywhere(frac in 0.0f64..1.0, len in 0usize..64, byte in any::<u8>()) {
        let Some(s) = sample_with_steps() else { return Ok(()) };
        let at = ((s.len() as f64) * frac) as usize;
        check("908_results.json", &s[..at])?;
        let mut b = s.to_vec();
        for x in b.iter_mut().skip(at).take(len) {
            *x = byte;
        }
        check("908_results.json", &b)?;
    }
}

/// The sample with steps is read through the pre-passes: every dispatch lies in step 1, by
/// its launch.
#[test]
fn the_sample_with_steps_has_its_step() {
    let Some(s) = sample_with_steps() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("908_results.json");
    std::fs::write(&p, s).unwrap();
    let out = dir.path().join("out");
    crate::common::ingest(std::slice::from_ref(&p), &out).unwrap();
    let mut n = 0;
    for b in crate::common::batches(&out, "gpu_activities") {
        let (step, source) = (
            crate::common::ints(&b, "step"),
            crate::common::strs(&b, "step_source"),
        );
        assert!(step.iter().all(|s| *s == Some(1)), "{step:?}");
        assert!(source.iter().all(|s| s.as_deref() == Some("launch")));
        n += b.num_rows();
    }
    assert_eq!(n, 300);
}
