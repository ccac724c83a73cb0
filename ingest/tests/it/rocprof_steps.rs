//! Steps from roctx marker ranges and RCCL collectives from RCCL API calls, in all three
//! rocprofv3 containers: one synthetic capture, written by hand below as rocprofv3's CSV,
//! JSON and rocpd writers lay it out, whose every row's step, step source and collective is
//! known by construction (`GPU`, `CPU`). Each container is checked against those values, so
//! the three agree with each other too.
//!
//! The capture: thread 5 runs step 1 = `train_step 1` [1000, 2000] and step 2 =
//! `train_step 2` [2000, 3000] (`forward` is a range but no step), three RCCL calls and the
//! launches inside them; thread 6 has an RCCL call of its own and launches one kernel at
//! 1990, in step 1, that runs at 2050, in step 2. All kernels and copies share one stream,
//! and the first RCCL kernel overlaps the kernel after it: the writer clips it to 1450 in
//! every container (the JSON reader holds that stream's kernels back in their order).

use std::path::{Path, PathBuf};

use aorta_ingest::step_span::StepMarker;
use aorta_ingest::Options;

use crate::common::{batches, ints, rocpd_copy, step_numbers, strs};

const GENERIC: &str = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)";
const PID: i64 = 908;

/// (message, correlation id, thread, start, end) of the roctx ranges.
const MARKERS: &[(&str, i64, i64, i64, i64)] = &[
    ("train_step 1", 60, 5, 1000, 2000),
    ("forward", 61, 5, 1000, 1500),
    ("train_step 2", 62, 5, 2000, 3000),
];
/// (function, correlation id, thread, start, end) of the RCCL calls.
const RCCL: &[(&str, i64, i64, i64, i64)] = &[
    ("ncclAllReduce", 50, 5, 1050, 1150),
    ("ncclAllGather", 51, 5, 2050, 2150),
    ("ncclCommGetAsyncError", 52, 5, 3490, 3520),
    ("ncclReduceScatter", 53, 6, 3490, 3520),
];
/// (function, correlation id, thread, start, end) of the HIP calls.
const HIP: &[(&str, i64, i64, i64, i64)] = &[
    ("hipExtLaunchKernel", 11, 5, 1100, 1110),
    ("hipExtLaunchKernel", 12, 5, 2100, 2110),
    ("hipLaunchKernel", 13, 5, 2500, 2510),
    ("hipExtLaunchKernel", 14, 5, 3500, 3510),
    ("hipMemcpyAsync", 15, 5, 1300, 1310),
    ("hipLaunchKernel", 16, 6, 1990, 1995),
];
/// (kernel, correlation id, start, end); 99 has no launch record.
const KERNELS: &[(&str, i64, i64, i64)] = &[
    (GENERIC, 11, 1200, 1500),
    (GENERIC, 12, 2200, 2400),
    ("Cijk_Alik_Bljk", 13, 3200, 3300),
    (GENERIC, 14, 3600, 3700),
    ("elementwise_kernel", 16, 2050, 2060),
    ("elementwise_kernel", 99, 1450, 1505),
];
/// (correlation id, start, end) of the host-to-device copies; 98 has no launch record.
const COPIES: &[(i64, i64, i64)] = &[(15, 1510, 1540), (98, 2600, 2650)];

type Gpu = (i64, Option<i64>, Option<String>, String, i64);
type Cpu = (i64, String, Option<i64>);

/// Every GPU row by construction: (correlation, step, comm_op, step_source, end), with
/// `--step-marker 'train_step (\d+)'` (`steps`) or without.
fn gpu_expected(steps: bool) -> Vec<Gpu> {
    let rows = [
        // The RCCL kernels take the collective of the call around their launch...
        (11, Some(1), Some("all_reduce"), "launch", 1450),
        (12, Some(2), Some("all_gather"), "launch", 2400),
        // ...a GEMM launched in step 2 and run after it, the launch's step...
        (13, Some(2), None, "launch", 3300),
        // ...an RCCL kernel launched outside the steps and inside only a non-collective
        // call of its thread (thread 6's reduce-scatter is another thread's): `other`.
        (14, None, Some("other"), "none", 3700),
        (15, Some(1), None, "launch", 1540),
        // Launched at 1990 (step 1), run at 2050 (step 2): the launch decides.
        (16, Some(1), None, "launch", 2060),
        // No launch record: the GPU start decides.
        (98, Some(2), None, "gpu_time", 2650),
        (99, Some(1), None, "gpu_time", 1505),
    ];
    rows.iter()
        .map(|&(c, step, op, source, end)| {
            let (step, source) = if steps {
                (step, source)
            } else {
                (None, "none")
            };
            (c, step, op.map(str::to_string), source.to_string(), end)
        })
        .collect()
}

/// Every host row by construction: (correlation, name, step). Markers are named by their
/// message.
fn cpu_expected(steps: bool) -> Vec<Cpu> {
    let rows = [
        (11, "hipExtLaunchKernel", Some(1)),
        (12, "hipExtLaunchKernel", Some(2)),
        (13, "hipLaunchKernel", Some(2)),
        (14, "hipExtLaunchKernel", None),
        (15, "hipMemcpyAsync", Some(1)),
        (16, "hipLaunchKernel", Some(1)),
        (50, "ncclAllReduce", Some(1)),
        (51, "ncclAllGather", Some(2)),
        (52, "ncclCommGetAsyncError", None),
        (53, "ncclReduceScatter", None),
        (60, "train_step 1", Some(1)),
        (61, "forward", Some(1)),
        (62, "train_step 2", Some(2)),
    ];
    rows.iter()
        .map(|&(c, n, step)| (c, n.to_string(), step.filter(|_| steps)))
        .collect()
}

/// Ingests `input` with or without the step marker; the GPU and host rows, sorted.
fn ingest(input: &Path, out: &Path, steps: bool) -> (Vec<Gpu>, Vec<Cpu>, Vec<i64>) {
    let marker = if steps {
        StepMarker::parse(r"^train_step (\d+)$").unwrap()
    } else {
        StepMarker::default()
    };
    let opts = Options {
        out: out.to_path_buf(),
        step_marker: marker,
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[input.to_path_buf()], &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested.len(), 1, "{input:?}: one job");
    let mut gpu = Vec::new();
    for b in batches(out, "gpu_activities") {
        let (corr, step) = (ints(&b, "correlation"), ints(&b, "step"));
        let (op, source) = (strs(&b, "comm_op"), strs(&b, "step_source"));
        let end = ints(&b, "end_ns");
        for i in 0..b.num_rows() {
            gpu.push((
                corr[i].unwrap(),
                step[i],
                op[i].clone(),
                source[i].clone().unwrap(),
                end[i].unwrap(),
            ));
        }
    }
    let mut cpu = Vec::new();
    for b in batches(out, "cpu_ops") {
        let (corr, step, name) = (ints(&b, "correlation"), ints(&b, "step"), strs(&b, "name"));
        cpu.extend(
            (0..b.num_rows()).map(|i| (corr[i].unwrap(), name[i].clone().unwrap(), step[i])),
        );
    }
    gpu.sort();
    cpu.sort();
    (gpu, cpu, step_numbers(out))
}

/// Checks every container's rows, with and without the marker, against the expected ones.
fn check(input: &Path) {
    for steps in [true, false] {
        let out = tempfile::tempdir().unwrap();
        let (gpu, cpu, got_steps) = ingest(input, out.path(), steps);
        assert_eq!(gpu, gpu_expected(steps), "{input:?}, steps {steps}");
        assert_eq!(cpu, cpu_expected(steps), "{input:?}, steps {steps}");
        let want: &[i64] = if steps { &[1, 2] } else { &[] };
        assert_eq!(got_steps, want, "{input:?}, steps {steps}");
    }
}

// ---- CSV: one file per record kind, the API files as generateCSV.cpp writes them. ----

fn write_csv(dir: &Path) -> PathBuf {
    let api = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n";
    let rows = |domain: &str, calls: &[(&str, i64, i64, i64, i64)]| {
        let mut t = api.to_string();
        for (f, corr, tid, s, e) in calls {
            t += &format!("{domain},{f},{PID},{tid},{corr},{s},{e}\n");
        }
        t
    };
    std::fs::write(
        dir.join("908_marker_api_trace.csv"),
        rows("MARKER_CORE_RANGE_API", MARKERS),
    )
    .unwrap();
    std::fs::write(dir.join("908_rccl_api_trace.csv"), rows("RCCL_API", RCCL)).unwrap();
    std::fs::write(
        dir.join("908_hip_api_trace.csv"),
        rows("HIP_RUNTIME_API_EXT", HIP),
    )
    .unwrap();
    let mut k = "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\n".to_string();
    for (i, (name, corr, s, e)) in KERNELS.iter().enumerate() {
        k += &format!(
            "KERNEL_DISPATCH,Agent 2,1,1,5,{},1,\"{name}\",{corr},{s},{e}\n",
            i + 1
        );
    }
    std::fs::write(dir.join("908_kernel_trace.csv"), k).unwrap();
    let mut c = "Kind,Direction,Stream_Id,Source_Agent_Id,Destination_Agent_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n".to_string();
    for (corr, s, e) in COPIES {
        c += &format!("MEMORY_COPY,MEMORY_COPY_HOST_TO_DEVICE,1,Agent 0,Agent 2,{corr},{s},{e}\n");
    }
    std::fs::write(dir.join("908_memory_copy_trace.csv"), c).unwrap();
    dir.to_path_buf()
}

#[test]
fn csv_capture_gives_the_steps_and_collectives_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    check(&write_csv(&run));
}

// ---- JSON: generateJSON.cpp's document, records serialized as rocprofiler-sdk does. ----

/// The kinds of `strings.buffer_records` this capture uses: (kind, operations).
const KINDS: &[(&str, &[&str])] = &[
    ("NONE", &[]),
    (
        "HIP_RUNTIME_API_EXT",
        &[
            "hipApiName",
            "hipExtLaunchKernel",
            "hipLaunchKernel",
            "hipMemcpyAsync",
        ],
    ),
    (
        "MARKER_CORE_API",
        &[
            "roctxMarkA",
            "roctxRangePushA",
            "roctxRangePop",
            "roctxRangeStartA",
            "roctxRangeStop",
        ],
    ),
    (
        "MEMORY_COPY",
        &[
            "MEMORY_COPY_NONE",
            "MEMORY_COPY_HOST_TO_HOST",
            "MEMORY_COPY_HOST_TO_DEVICE",
        ],
    ),
    (
        "KERNEL_DISPATCH",
        &[
            "KERNEL_DISPATCH_NONE",
            "KERNEL_DISPATCH_ENQUEUE",
            "KERNEL_DISPATCH_COMPLETE",
        ],
    ),
    (
        "RCCL_API",
        &[
            "ncclAllGather",
            "ncclAllReduce",
            "ncclReduceScatter",
            "ncclCommGetAsyncError",
        ],
    ),
    (
        "MARKER_CORE_RANGE_API",
        &[
            "roctxMarkA",
            "roctxThreadRangeA",
            "roctxProcessRangeA",
            "roctxGetThreadId",
        ],
    ),
];

fn kind(name: &str) -> usize {
    KINDS.iter().position(|k| k.0 == name).unwrap()
}

fn op(kind_name: &str, op: &str) -> usize {
    KINDS[kind(kind_name)]
        .1
        .iter()
        .position(|o| *o == op)
        .unwrap()
}

/// An API record in `save_buffer_tracing_api_record`'s field order.
fn api_record(kind_name: &str, f: &str, corr: i64, tid: i64, s: i64, e: i64) -> String {
    format!(
        r#"{{"size":64,"kind":{},"operation":{},"correlation_id":{{"internal":{corr},"external":0}},"start_timestamp":{s},"end_timestamp":{e},"thread_id":{tid}}}"#,
        kind(kind_name),
        op(kind_name, f)
    )
}

fn kernel_id(name: &str) -> usize {
    ["", GENERIC, "Cijk_Alik_Bljk", "elementwise_kernel"]
        .iter()
        .position(|n| *n == name)
        .unwrap()
}

/// The buffer arrays, each a JSON array of records (marker ranges as ThreadRange records).
fn buffers() -> Vec<(&'static str, String)> {
    let list = |v: Vec<String>| format!("[{}]", v.join(","));
    let kd = KERNELS
        .iter()
        .enumerate()
        .map(|(i, (name, corr, s, e))| {
            // The exact minified layout of rocprofv3 (the reader's literal fast path).
            format!(
                r#"{{"size":184,"kind":{},"operation":2,"thread_id":5,"correlation_id":{{"internal":{corr},"external":0}},"start_timestamp":{s},"end_timestamp":{e},"dispatch_info":{{"size":72,"agent_id":{{"handle":20}},"queue_id":{{"handle":1}},"kernel_id":{},"dispatch_id":{},"private_segment_size":0,"group_segment_size":0,"workgroup_size":{{"x":256,"y":1,"z":1}},"grid_size":{{"x":1024,"y":1,"z":1}}}},"stream_id":{{"handle":1}}}}"#,
                kind("KERNEL_DISPATCH"),
                kernel_id(name),
                i + 1
            )
        })
        .collect();
    let calls = |k: &str, v: &[(&str, i64, i64, i64, i64)]| {
        v.iter()
            .map(|(f, c, t, s, e)| api_record(k, f, *c, *t, *s, *e))
            .collect()
    };
    let markers = MARKERS
        .iter()
        .map(|(_, c, t, s, e)| {
            api_record("MARKER_CORE_RANGE_API", "roctxThreadRangeA", *c, *t, *s, *e)
        })
        .collect();
    let copies = COPIES
        .iter()
        .map(|(c, s, e)| {
            format!(
                r#"{{"size":96,"kind":{},"operation":2,"thread_id":5,"correlation_id":{{"internal":{c},"external":0}},"start_timestamp":{s},"end_timestamp":{e},"dst_agent_id":{{"handle":20}},"src_agent_id":{{"handle":10}},"bytes":4096,"stream_id":{{"handle":1}}}}"#,
                kind("MEMORY_COPY")
            )
        })
        .collect();
    vec![
        ("kernel_dispatch", list(kd)),
        ("hip_api", list(calls("HIP_RUNTIME_API_EXT", HIP))),
        ("hsa_api", "[]".into()),
        ("marker_api", list(markers)),
        ("rccl_api", list(calls("RCCL_API", RCCL))),
        ("memory_copy", list(copies)),
    ]
}

/// The document with the buffer arrays in `order` (indices into `buffers()`), and the
/// tables before the records or (`tables_last`) after them.
fn write_json(path: &Path, order: &[usize], tables_last: bool) {
    let kinds: Vec<String> = KINDS
        .iter()
        .map(|(k, ops)| {
            format!(
                r#"{{"kind":"{k}","operations":{}}}"#,
                serde_json::to_string(ops).unwrap()
            )
        })
        .collect();
    let messages: Vec<String> = MARKERS
        .iter()
        .map(|(m, c, ..)| format!(r#"{{"key":{c},"value":"{m}"}}"#))
        .collect();
    let symbols: Vec<String> = [GENERIC, "Cijk_Alik_Bljk", "elementwise_kernel"]
        .iter()
        .map(|n| {
            format!(
                r#"{{"kernel_id":{},"formatted_kernel_name":"{n}"}}"#,
                kernel_id(n)
            )
        })
        .collect();
    let tables = format!(
        r#""agents":[{{"id":{{"handle":10}},"type":1,"logical_node_type_id":0,"name":"cpu"}},{{"id":{{"handle":20}},"type":2,"logical_node_type_id":2,"name":"gfx950"}}],"strings":{{"callback_records":[],"buffer_records":[{}],"marker_api":[{}]}},"kernel_symbols":[{}]"#,
        kinds.join(","),
        messages.join(","),
        symbols.join(",")
    );
    let b = buffers();
    let arrays: Vec<String> = order
        .iter()
        .map(|&i| format!(r#""{}":{}"#, b[i].0, b[i].1))
        .collect();
    let records = format!(r#""buffer_records":{{{}}}"#, arrays.join(","));
    let (first, second) = if tables_last {
        (&records, &tables)
    } else {
        (&tables, &records)
    };
    let doc =
        format!(r#"{{"rocprofiler-sdk-tool":[{{"metadata":{{"pid":{PID}}},{first},{second}}}]}}"#);
    std::fs::write(path, doc).unwrap();
}

/// rocprofv3's own order (dispatches before the API records), the API records first, and
/// the tables after the records: the same rows each time.
#[test]
fn json_capture_gives_the_steps_and_collectives_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[usize], bool)] = &[
        ("rocprofv3 order", &[0, 1, 2, 3, 4, 5], false),
        ("API records first", &[5, 4, 3, 1, 2, 0], false),
        ("tables last", &[0, 1, 2, 3, 4, 5], true),
    ];
    for (what, order, tables_last) in cases {
        let p = dir.path().join(format!("{}_results.json", what.len()));
        write_json(&p, order, *tables_last);
        eprintln!("{what}");
        check(&p);
    }
}

// ---- rocpd: the corpus database's schema (its tables, views and info rows), its records
// replaced by this capture's, as generateRocpd.cpp writes them. ----

fn write_rocpd(dir: &Path) -> Option<PathBuf> {
    let (p, c, u, g) = rocpd_copy(dir)?;
    let mut sql = format!(
        "DELETE FROM rocpd_kernel_dispatch{u}; DELETE FROM rocpd_event{u}; DELETE FROM rocpd_region{u};
         DELETE FROM rocpd_memory_copy{u};
         INSERT OR IGNORE INTO rocpd_info_thread{u}(id, guid, nid, pid, tid)
           SELECT t, '{g}', nid, {PID}, t FROM rocpd_info_process{u}, (SELECT 5 AS t UNION SELECT 6);"
    );
    let strings = [
        "KERNEL_DISPATCH",
        "MEMORY_COPY",
        "MEMORY_COPY_HOST_TO_DEVICE",
        "HIP_RUNTIME_API_EXT",
        "RCCL_API",
        "MARKER_CORE_RANGE_API",
        "roctxThreadRangeA",
        "Cijk_Alik_Bljk",
        "elementwise_kernel",
    ];
    for s in strings.iter().chain(HIP.iter().chain(RCCL).map(|h| &h.0)) {
        sql += &format!("INSERT OR IGNORE INTO rocpd_string{u}(guid, string) SELECT '{g}', '{s}' WHERE NOT EXISTS (SELECT 1 FROM rocpd_string{u} WHERE string = '{s}');\n");
    }
    let sid = |s: &str| format!("(SELECT min(id) FROM rocpd_string{u} WHERE string = '{s}')");
    let mut event = 0;
    let mut region = |cat: &str, name: &str, corr: i64, tid: i64, s: i64, e: i64, ext: &str| {
        event += 1;
        format!(
            "INSERT INTO rocpd_event{u}(id, guid, category_id, stack_id, parent_stack_id, correlation_id, extdata)
               VALUES ({event}, '{g}', {}, {corr}, 0, 0, '{ext}');
             INSERT INTO rocpd_region{u}(id, guid, nid, pid, tid, start, \"end\", name_id, event_id)
               SELECT {corr}, '{g}', nid, {PID}, {tid}, {s}, {e}, {}, {event} FROM rocpd_info_process{u};\n",
            sid(cat),
            sid(name)
        )
    };
    for (m, corr, tid, s, e) in MARKERS {
        sql += &region(
            "MARKER_CORE_RANGE_API",
            "roctxThreadRangeA",
            *corr,
            *tid,
            *s,
            *e,
            &format!(r#"{{"message":"{m}"}}"#),
        );
    }
    for (f, corr, tid, s, e) in RCCL {
        sql += &region("RCCL_API", f, *corr, *tid, *s, *e, "{}");
    }
    for (f, corr, tid, s, e) in HIP {
        sql += &region("HIP_RUNTIME_API_EXT", f, *corr, *tid, *s, *e, "{}");
    }
    for (i, (name, corr, s, e)) in KERNELS.iter().enumerate() {
        let (ev, id) = (1000 + i, i + 1);
        let sym = if *name == GENERIC {
            "251".to_string()
        } else {
            format!("{}", 90001 + i)
        };
        if *name != GENERIC {
            // A symbol of this name, copied from the corpus's row for the layout.
            sql += &format!(
                "INSERT INTO rocpd_info_kernel_symbol{u}(id, guid, nid, pid, code_object_id, kernel_name, display_name, kernel_object, kernarg_segment_size, kernarg_segment_alignment, group_segment_size, private_segment_size, sgpr_count, arch_vgpr_count, accum_vgpr_count, extdata)
                   SELECT {sym}, guid, nid, pid, code_object_id, '{name}', '{name}', kernel_object, kernarg_segment_size, kernarg_segment_alignment, group_segment_size, private_segment_size, sgpr_count, arch_vgpr_count, accum_vgpr_count, extdata FROM rocpd_info_kernel_symbol{u} WHERE id = 251;\n"
            );
        }
        sql += &format!(
            "INSERT INTO rocpd_event{u}(id, guid, category_id, stack_id, parent_stack_id, correlation_id)
               VALUES ({ev}, '{g}', {}, {corr}, {corr}, 0);
             INSERT INTO rocpd_kernel_dispatch{u}(id, guid, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, \"end\", private_segment_size, group_segment_size, workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id)
               SELECT {id}, '{g}', nid, {PID}, 5, 2, {sym}, {id}, 16, 2, {s}, {e}, 0, 0, 256, 1, 1, 1024, 1, 1, {}, {ev} FROM rocpd_info_process{u};\n",
            sid("KERNEL_DISPATCH"),
            sid("")
        );
    }
    for (i, (corr, s, e)) in COPIES.iter().enumerate() {
        let ev = 2000 + i;
        sql += &format!(
            "INSERT INTO rocpd_event{u}(id, guid, category_id, stack_id, parent_stack_id, correlation_id)
               VALUES ({ev}, '{g}', {}, {corr}, {corr}, 0);
             INSERT INTO rocpd_memory_copy{u}(id, guid, nid, pid, tid, start, \"end\", name_id, dst_agent_id, dst_address, src_agent_id, src_address, size, queue_id, stream_id, event_id)
               SELECT {}, '{g}', nid, {PID}, 5, {s}, {e}, {}, 2, 0, 0, 0, 4096, 16, 2, {ev} FROM rocpd_info_process{u};\n",
            sid("MEMORY_COPY"),
            i + 1,
            sid("MEMORY_COPY_HOST_TO_DEVICE")
        );
    }
    c.execute_batch(&sql).unwrap();
    Some(p)
}

#[test]
fn rocpd_capture_gives_the_steps_and_collectives_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = write_rocpd(dir.path()) else {
        return;
    };
    check(&db);
}
