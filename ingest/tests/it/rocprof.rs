//! rocprofv3 ingest against the real corpus files, with every expected number computed here
//! from the raw files by other means: serde_json over the gunzipped JSON, raw SQL over the
//! rocpd tables (not the views the reader uses), and the `csv` crate over the CSV files.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::common::{batches, corpus, ingest, ints, rocpd_copy, strs};

/// A GPU activity as compared across formats.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Act {
    device: i64,
    stream: i64,
    start: i64,
    raw_end: i64,
    end: i64,
    name: String,
    category: String,
    comm_op: Option<String>,
    correlation: Option<i64>,
    grid_x: Option<i64>,
    block_x: Option<i64>,
}

fn acts(out: &Path) -> Vec<Act> {
    let mut v = Vec::new();
    for b in batches(out, "gpu_activities") {
        let (dev, st, s, re, e) = (
            ints(&b, "device"),
            ints(&b, "stream"),
            ints(&b, "start_ns"),
            ints(&b, "raw_end_ns"),
            ints(&b, "end_ns"),
        );
        let (n, c, op) = (strs(&b, "name"), strs(&b, "category"), strs(&b, "comm_op"));
        let (corr, gx, bx) = (
            ints(&b, "correlation"),
            ints(&b, "grid_x"),
            ints(&b, "block_x"),
        );
        for i in 0..b.num_rows() {
            v.push(Act {
                device: dev[i].unwrap(),
                stream: st[i].unwrap(),
                start: s[i].unwrap(),
                raw_end: re[i].unwrap(),
                end: e[i].unwrap(),
                name: n[i].clone().unwrap(),
                category: c[i].clone().unwrap(),
                comm_op: op[i].clone(),
                correlation: corr[i],
                grid_x: gx[i],
                block_x: bx[i],
            });
        }
    }
    v.sort();
    v
}

fn gunzip_json(p: &Path) -> Value {
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    serde_json::from_slice(&text).unwrap()
}

#[test]
fn json_dispatches_match_serde_json_of_the_file() {
    let Some(p) = corpus("rocprofv3/json/mi350x_908_results.json.gz") else {
        return;
    };
    let doc = gunzip_json(&p);
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
    let disp = proc0["buffer_records"]["kernel_dispatch"]
        .as_array()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = ingest(std::slice::from_ref(&p), dir.path()).unwrap();
    assert_eq!(s.rows()["gpu_activities"], disp.len() as u64);
    assert_eq!(disp.len(), 43_915, "the README's count");
    let got = acts(dir.path());
    let t = |r: &Value, k: &str| r[k].as_i64().unwrap();
    let first = disp.iter().map(|r| t(r, "start_timestamp")).min().unwrap();
    let last = disp.iter().map(|r| t(r, "end_timestamp")).max().unwrap();
    assert_eq!(got.iter().map(|a| a.start).min(), Some(first));
    assert_eq!(got.iter().map(|a| a.raw_end).max(), Some(last));
    // Every (name, start, end) of the file, as a multiset.
    let mut want: Vec<(String, i64, i64)> = disp
        .iter()
        .map(|r| {
            let id = r["dispatch_info"]["kernel_id"].as_i64().unwrap();
            (
                names[&id].clone(),
                t(r, "start_timestamp"),
                t(r, "end_timestamp"),
            )
        })
        .collect();
    let mut have: Vec<(String, i64, i64)> = got
        .iter()
        .map(|a| (a.name.clone(), a.start, a.raw_end))
        .collect();
    want.sort();
    have.sort();
    assert_eq!(have, want);
    // Work-items and workgroups as written; the one GPU used is agent handle 37946 = GPU 0.
    assert!(got.iter().all(|a| a.device == 0 && a.grid_x.is_some()));
}

#[test]
fn rccl_generic_kernels_are_comm_on_the_mi350x_run() {
    let Some(p) = corpus("rocprofv3/json/mi350x_908_results.json.gz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    ingest(std::slice::from_ref(&p), dir.path()).unwrap();
    let got = acts(dir.path());
    let rccl: Vec<&Act> = got
        .iter()
        .filter(|a| a.name.starts_with("ncclDevKernel_Generic"))
        .collect();
    assert_eq!(rccl.len(), 1_310, "the README's RCCL kernel count");
    assert!(rccl.iter().all(|a| a.category == "comm"), "{:?}", rccl[0]);
    // rocprof carries no `Collective name`: the kind is `other` (METRICS.md: from the name).
    assert!(rccl.iter().all(|a| a.comm_op.as_deref() == Some("other")));
    let comm = got.iter().filter(|a| a.category == "comm").count();
    assert_eq!(comm, 1_310);
    // ROCm's blit kernels are copies (docs/CLASSIFICATION.md rule 6), still one row each.
    let copies: Vec<&Act> = got
        .iter()
        .filter(|a| a.name == "__amd_rocclr_copyBuffer")
        .collect();
    assert_eq!(copies.len(), 3_153);
    assert!(copies.iter().all(|a| a.category == "memcpy"));
}

/// (count, min start, max end) of the rocpd dispatch table, by raw SQL on the table behind
/// the `kernels` view.
fn rocpd_truth(db: &Path) -> (i64, i64, i64, i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT count(*), min(start), max(\"end\"), \
         (SELECT count(*) FROM rocpd_kernel_dispatch k JOIN rocpd_info_kernel_symbol s \
          ON s.id = k.kernel_id WHERE s.display_name LIKE 'ncclDevKernel_Generic%') \
         FROM rocpd_kernel_dispatch",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

#[test]
fn rocpd_matches_its_tables_and_the_json_of_the_same_run() {
    let (Some(db), Some(json)) = (
        corpus("rocprofv3/rocpd/mi350x_908_results.DERIVED.db"),
        corpus("rocprofv3/json/mi350x_908_results.json.gz"),
    ) else {
        return;
    };
    let (n, first, last, rccl) = rocpd_truth(&db);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = ingest(std::slice::from_ref(&db), a.path()).unwrap();
    assert_eq!(s.rows()["gpu_activities"], n as u64);
    let from_db = acts(a.path());
    assert_eq!(from_db.iter().map(|x| x.start).min(), Some(first));
    assert_eq!(from_db.iter().map(|x| x.raw_end).max(), Some(last));
    let comm = from_db.iter().filter(|x| x.category == "comm").count();
    assert_eq!(comm as i64, rccl);
    ingest(std::slice::from_ref(&json), b.path()).unwrap();
    let from_json = acts(b.path());
    assert_eq!(from_db.len(), from_json.len());
    // Field by field, so a failure shows the first differing activity.
    for (x, y) in from_db.iter().zip(&from_json) {
        assert_eq!(x, y);
    }
}

/// A small rocprofv3 JSON with API calls, a copy and a dispatch, whose `buffer_records` come
/// *before* its lookup tables (the order the reader must also handle), checked row by row
/// against values written by hand here.
#[test]
fn json_api_copy_and_dispatch_records_resolve_even_before_their_tables() {
    let doc = r#"{"rocprofiler-sdk-tool": [{
      "metadata": {"pid": 4242},
      "buffer_records": {
        "kernel_dispatch": [{"kind": 11, "operation": 2, "thread_id": 7,
          "correlation_id": {"internal": 5, "external": 9}, "start_timestamp": 1000, "end_timestamp": 1500,
          "dispatch_info": {"agent_id": {"handle": 20}, "queue_id": {"handle": 1}, "kernel_id": 3,
            "workgroup_size": {"x": 256, "y": 1, "z": 1}, "grid_size": {"x": 1024, "y": 1, "z": 1}},
          "stream_id": {"handle": 4}}],
        "hip_api": [{"kind": 1, "operation": 1, "thread_id": 7,
          "correlation_id": {"internal": 5, "external": 9}, "start_timestamp": 900, "end_timestamp": 950}],
        "memory_copy": [{"kind": 2, "operation": 1, "thread_id": 7, "correlation_id": {"internal": 6, "external": 0},
          "start_timestamp": 2000, "end_timestamp": 2600, "dst_agent_id": {"handle": 20},
          "src_agent_id": {"handle": 10}, "bytes": 4096}],
        "memory_allocation": [{"kind": 3}, {"kind": 3}]
      },
      "strings": {"buffer_records": [
        {"kind": "NONE", "operations": []},
        {"kind": "HIP_RUNTIME_API_EXT", "operations": ["hipNone", "hipLaunchKernel"]},
        {"kind": "MEMORY_COPY", "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE"]}]},
      "agents": [{"id": {"handle": 10}, "type": 1, "logical_node_type_id": 0, "name": "cpu"},
                 {"id": {"handle": 20}, "type": 2, "logical_node_type_id": 1, "name": "gfx942",
                  "product_name": "AMD Instinct MI300X"}],
      "kernel_symbols": [{"kernel_id": 3, "formatted_kernel_name": "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"}]
    }]}"#;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("4242_results.json");
    std::fs::write(&p, doc).unwrap();
    let out = dir.path().join("out");
    let s = ingest(std::slice::from_ref(&p), &out).unwrap();
    assert_eq!(s.rows()["gpu_activities"], 2);
    assert_eq!(s.rows()["cpu_ops"], 1);
    let acts = acts(&out);
    let k = acts
        .iter()
        .find(|a| a.name.starts_with("ncclDevKernel"))
        .unwrap();
    assert_eq!((k.device, k.stream, k.start, k.raw_end), (1, 4, 1000, 1500));
    assert_eq!(
        (k.category.as_str(), k.comm_op.as_deref()),
        ("comm", Some("other"))
    );
    assert_eq!(
        (k.correlation, k.grid_x, k.block_x),
        (Some(5), Some(1024), Some(256))
    );
    let c = acts
        .iter()
        .find(|a| a.name == "MEMORY_COPY_HOST_TO_DEVICE")
        .unwrap();
    assert_eq!(
        (c.device, c.start, c.raw_end, c.category.as_str()),
        (1, 2000, 2600, "memcpy")
    );
    let cpu = batches(&out, "cpu_ops");
    let b = &cpu[0];
    assert_eq!(strs(b, "name"), [Some("hipLaunchKernel".to_string())]);
    assert_eq!(strs(b, "category"), [Some("runtime".to_string())]);
    assert_eq!(ints(b, "pid"), [Some(4242)]);
    assert_eq!(ints(b, "tid"), [Some(7)]);
    assert_eq!(ints(b, "correlation"), [Some(5)]);
    assert_eq!(ints(b, "external_id"), [Some(9)]);
    let runs = batches(&out, "runs");
    assert_eq!(
        strs(&runs[0], "format"),
        [Some("rocprofv3-json".to_string())]
    );
    assert_eq!(strs(&runs[0], "platform"), [Some("rocm".to_string())]);
    assert_eq!(
        strs(&runs[0], "device_name"),
        [Some("AMD Instinct MI300X".to_string())]
    );
    // Two memory_allocation records are counted, not written.
    let d = batches(&out, "diagnostics");
    let codes = strs(&d[0], "code");
    let i = codes
        .iter()
        .position(|c| c.as_deref() == Some("skipped_category"))
        .unwrap();
    assert_eq!(ints(&d[0], "count")[i], Some(2));
}

/// A host API region added to a copy of the real rocpd database (its physical tables, the
/// way rocprofv3 writes them) comes out of the `regions` view as one `cpu_ops` row.
#[test]
fn rocpd_regions_become_cpu_ops() {
    let dir = tempfile::tempdir().unwrap();
    let Some((p, c, u, g)) = rocpd_copy(dir.path()) else {
        return;
    };
    let string_id = |s: &str| format!("(SELECT id FROM rocpd_string{u} WHERE string = '{s}')");
    c.execute_batch(&format!(
        "INSERT OR IGNORE INTO rocpd_string{u}(guid, string) VALUES ('{g}', 'HIP_RUNTIME_API_EXT'), ('{g}', 'hipLaunchKernel');
         INSERT INTO rocpd_event{u}(id, guid, category_id, stack_id, parent_stack_id, correlation_id)
           VALUES (900001, '{g}', {}, 77, 77, 5);
         INSERT INTO rocpd_region{u}(guid, nid, pid, tid, start, \"end\", name_id, event_id)
           VALUES ('{g}', (SELECT id FROM rocpd_info_node{u}), 908, 908, 100, 250, {}, 900001);",
        string_id("HIP_RUNTIME_API_EXT"),
        string_id("hipLaunchKernel"),
    ))
    .unwrap();
    drop(c);
    let out = dir.path().join("out");
    let s = ingest(std::slice::from_ref(&p), &out).unwrap();
    assert_eq!(s.rows()["cpu_ops"], 1);
    let b = &batches(&out, "cpu_ops")[0];
    assert_eq!(strs(b, "name"), [Some("hipLaunchKernel".to_string())]);
    assert_eq!(strs(b, "category"), [Some("runtime".to_string())]);
    assert_eq!(
        (ints(b, "pid"), ints(b, "tid")),
        (vec![Some(908)], vec![Some(908)])
    );
    assert_eq!(
        (ints(b, "start_ns"), ints(b, "end_ns")),
        (vec![Some(100)], vec![Some(250)])
    );
    assert_eq!(ints(b, "correlation"), [Some(77)]);
    assert_eq!(ints(b, "external_id"), [Some(5)]);
}
