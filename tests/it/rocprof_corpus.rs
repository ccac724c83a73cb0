//! rocprofv3 end to end through the CLI: the MI350X run's JSON and its rocpd database are
//! ingested by `aorta ingest`, and `aorta overlap --by rank --json` must give the rank totals
//! computed here from the raw JSON with serde_json: RCCL `ncclDevKernel_Generic_*` kernels are
//! comm (METRICS.md), ROCm's blit kernels `__amd_rocclr_copyBuffer*`/`fillBuffer*` are
//! memcpy/memset (docs/CLASSIFICATION.md), every other dispatch is compute, same-stream
//! overlaps clipped as METRICS.md prescribes, unions by sort and merge. Broken rocprof inputs
//! fail with one line and a non-zero exit.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::cli::{aorta, code, gunzip, ingest, ingest_ok, stderr};
use crate::common::{corpus, union_len};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Comm,
    Compute,
    Memcpy,
    Memset,
}

fn class_of(name: &str) -> Class {
    if name.starts_with("ncclDevKernel_Generic") {
        Class::Comm
    } else if name.starts_with("__amd_rocclr_copyBuffer") {
        Class::Memcpy
    } else if name.starts_with("__amd_rocclr_fillBuffer") {
        Class::Memset
    } else {
        Class::Compute
    }
}

/// (start, clipped end, class) of every dispatch in the JSON.
fn dispatches(p: &Path) -> Vec<(i64, i64, Class)> {
    let doc: Value = serde_json::from_slice(&gunzip(&std::fs::read(p).unwrap())).unwrap();
    let proc0 = &doc["rocprofiler-sdk-tool"][0];
    let names: BTreeMap<i64, String> = proc0["kernel_symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let n = k["formatted_kernel_name"].as_str().unwrap().to_string();
            (k["kernel_id"].as_i64().unwrap(), n)
        })
        .collect();
    let mut by_stream: BTreeMap<i64, Vec<(i64, i64, Class)>> = BTreeMap::new();
    for r in proc0["buffer_records"]["kernel_dispatch"]
        .as_array()
        .unwrap()
    {
        let name = &names[&r["dispatch_info"]["kernel_id"].as_i64().unwrap()];
        let (s, e) = (
            r["start_timestamp"].as_i64().unwrap(),
            r["end_timestamp"].as_i64().unwrap(),
        );
        let stream = r["stream_id"]["handle"].as_i64().unwrap();
        by_stream
            .entry(stream)
            .or_default()
            .push((s, e, class_of(name)));
    }
    let mut out = Vec::new();
    for v in by_stream.values_mut() {
        v.sort();
        for i in 0..v.len() {
            let end = match v.get(i + 1) {
                Some(n) if n.0 < v[i].1 => n.0.max(v[i].0),
                _ => v[i].1,
            };
            out.push((v[i].0, end, v[i].2));
        }
    }
    out
}

fn union_ns(acts: &[(i64, i64, Class)], keep: impl Fn(Class) -> bool) -> i64 {
    let v: Vec<(i64, i64)> = acts
        .iter()
        .filter(|a| keep(a.2))
        .map(|a| (a.0, a.1))
        .collect();
    union_len(v)
}

#[test]
fn overlap_of_the_mi350x_run_from_json_and_rocpd_equals_an_independent_scan() {
    let Some(root) = corpus() else { return };
    let json = root.join("rocprofv3/json/mi350x_908_results.json.gz");
    let db = root.join("rocprofv3/rocpd/mi350x_908_results.DERIVED.db");
    let acts = dispatches(&json);
    let comm = union_ns(&acts, |c| c == Class::Comm);
    let compute = union_ns(&acts, |c| c == Class::Compute);
    let memcpy = union_ns(&acts, |c| c == Class::Memcpy);
    let busy = union_ns(&acts, |_| true);
    let overlap = comm + compute - union_ns(&acts, |c| matches!(c, Class::Comm | Class::Compute));
    assert!(comm > 0 && overlap > 0, "comm {comm}, overlap {overlap}");
    let dir = tempfile::tempdir().unwrap();
    for (f, label) in [(&json, "json"), (&db, "rocpd")] {
        ingest_ok(&[f.as_path()], dir.path(), &["--label", label, "-q"]);
    }
    let o = aorta(&[
        "overlap".as_ref(),
        dir.path().as_os_str(),
        "--by".as_ref(),
        "rank".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    for label in ["json", "rocpd"] {
        let run = doc["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run"] == label)
            .unwrap_or_else(|| panic!("no run {label} in {doc}"));
        let row = &run["rows"][0];
        for (k, want) in [
            ("comm_ns", comm),
            ("compute_ns", compute),
            ("busy_ns", busy),
            ("memcpy_ns", memcpy),
            ("compute_comm_overlap_ns", overlap),
            ("exposed_comm_ns", comm - overlap),
            ("activity_count", acts.len() as i64),
        ] {
            assert_eq!(row[k].as_i64(), Some(want), "{label} {k}");
        }
    }
}

#[test]
fn broken_rocprof_inputs_fail_with_one_line_and_nonzero_status() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("5_kernel_trace.csv");
    std::fs::write(
        &csv,
        "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\n\
         KERNEL_DISPATCH,1,1,1,k,1,10,20\nKERNEL_DISPATCH,1,1,1,k,2,30\n",
    )
    .unwrap();
    let json = dir.path().join("3_results.json");
    std::fs::write(&json, br#"{"rocprofiler-sdk-tool":[{"metadata":{"pid":3},"#).unwrap();
    let out = dir.path().join("out");
    for (input, loc) in [
        (&csv, "line 3: row has 7 fields, the header has 8"),
        (&json, "byte 47: unexpected end of file"),
    ] {
        let o = ingest(&[input.as_path()], &out, &[]);
        assert_ne!(code(&o), 0);
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        let want = format!("aorta: error: {}: {loc}", input.display());
        assert!(err.starts_with(&want), "want {want}\ngot {err}");
        assert!(!out.join("manifest.json").exists());
    }
}
