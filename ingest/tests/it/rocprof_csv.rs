//! rocprofv3 CSV ingest: every corpus CSV is ingested or skipped with a reason, row counts and
//! names checked against the `csv` crate's reading of the same files; malformed inputs of
//! every rocprof container fail with one message naming the file and place, writing nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aorta_ingest::{IngestError, Options};

use crate::common::{batches, corpus, corpus_bytes, ingest, ints, strs};

/// The corpus's rocprofv3 CSV directory.
fn csv_dir() -> Option<PathBuf> {
    corpus("rocprofv3/csv")
}

/// Header (lower-case) and rows of a CSV file, read by the `csv` crate.
fn read(p: &Path) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_path(p).unwrap();
    let h = r.headers().unwrap().iter().map(str::to_lowercase).collect();
    (h, r.records().map(Result::unwrap).collect())
}

#[test]
fn every_corpus_csv_is_ingested_or_skipped_with_a_reason() {
    let Some(dir) = csv_dir() else { return };
    // What the files hold, by their headers.
    let (mut kernels, mut copies, mut api) = (0u64, 0u64, 0u64);
    let mut names = BTreeSet::new();
    let mut not_traces = BTreeSet::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let (h, rows) = read(&e.path());
        let has = |c: &str| h.iter().any(|x| x == c);
        let name = e.file_name().to_string_lossy().to_string();
        if has("kernel_name") && !has("counter_name") {
            kernels += rows.len() as u64;
            let i = h.iter().position(|x| x == "kernel_name").unwrap();
            names.extend(rows.iter().map(|r| r[i].to_string()));
        } else if has("direction") {
            copies += rows.len() as u64;
        } else if has("domain") && has("function") {
            api += rows.len() as u64;
        } else {
            not_traces.insert(name);
        }
    }
    let out = tempfile::tempdir().unwrap();
    let s = ingest(std::slice::from_ref(&dir), out.path()).unwrap();
    let skipped: BTreeSet<String> = s
        .skipped_files
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(skipped, not_traces);
    assert!(s.skipped_files.iter().all(|(_, why)| !why.is_empty()));
    let rows = s.rows();
    assert_eq!(rows["gpu_activities"], kernels + copies);
    assert_eq!(rows["cpu_ops"], api);
    // One job per kernel trace and per standalone trace file; kernel_trace.csv carries its
    // three siblings (memory_copy_trace, hsa_api_trace, marker_api_trace).
    let grouped = s
        .ingested
        .iter()
        .find(|(p, _)| p.ends_with("kernel_trace.csv"))
        .unwrap();
    let total_files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(s.ingested.len() + 3 + not_traces.len(), total_files);
    assert!(grouped.1.rows["cpu_ops"] > 0 && grouped.1.rows["gpu_activities"] > 0);
    let written: BTreeSet<String> = gpu_rows(out.path())
        .into_iter()
        .map(|r| r.0)
        .filter(|n| !n.starts_with("MEMORY_COPY"))
        .collect();
    assert_eq!(written, names);
}

#[test]
fn kernel_trace_generations_keep_names_times_and_streams() {
    let Some(dir) = csv_dir() else { return };
    for (file, stream_col) in [
        ("kernel_trace_gen1.csv", "queue_id"),
        ("kernel_trace_gen2.csv", "queue_id"),
        ("kernel_trace.csv", "stream_id"),
        ("kernel_trace_truncated.csv", "stream_id"),
    ] {
        let p = dir.join(file);
        let (h, rows) = read(&p);
        let col = |n: &str| h.iter().position(|x| x == n).unwrap();
        let mut want: Vec<(String, i64, i64, i64)> = rows
            .iter()
            .map(|r| {
                let int = |n: &str| r[col(n)].parse::<i64>().unwrap();
                let name = r[col("kernel_name")].to_string();
                (
                    name,
                    int(stream_col),
                    int("start_timestamp"),
                    int("end_timestamp"),
                )
            })
            .collect();
        // Ingest the file alone (named explicitly: no siblings).
        let out = tempfile::tempdir().unwrap();
        let s = ingest(std::slice::from_ref(&p), out.path()).unwrap();
        assert_eq!(s.rows()["gpu_activities"], rows.len() as u64, "{file}");
        let mut have = gpu_rows(out.path());
        want.sort();
        have.sort();
        assert_eq!(have, want, "{file}");
    }
}

/// (name, stream, start, raw end) of every gpu_activities row under `out`.
fn gpu_rows(out: &Path) -> Vec<(String, i64, i64, i64)> {
    let mut v = Vec::new();
    for b in batches(out, "gpu_activities") {
        let (n, st, s, e) = (
            strs(&b, "name"),
            ints(&b, "stream"),
            ints(&b, "start_ns"),
            ints(&b, "raw_end_ns"),
        );
        for k in 0..b.num_rows() {
            let name = n[k].clone().expect("no null name");
            v.push((name, st[k].unwrap(), s[k].unwrap(), e[k].unwrap()));
        }
    }
    v
}

const API_HEADER: &str =
    "\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n";

/// Ingests `files` (name, text) written to a fresh directory; returns the error and checks
/// nothing was written.
fn failing(files: &[(&str, &[u8])]) -> (IngestError, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for (n, t) in files {
        std::fs::write(dir.path().join(n), t).unwrap();
    }
    let first = dir.path().join(files[0].0);
    let all: Vec<PathBuf> = files.iter().map(|(n, _)| dir.path().join(n)).collect();
    let out = dir.path().join("out");
    let e = ingest(&all, &out).unwrap_err();
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "failed run left {left:?}");
    assert!(!e.to_string().contains('\n'), "{e}");
    (e, first, dir)
}

#[test]
fn malformed_csv_rows_name_the_file_and_line() {
    let short = format!("{API_HEADER}\"HIP_RUNTIME_API\",\"hipMalloc\",1,1,1,10,20\n\"HIP_RUNTIME_API\",\"hipFree\",1,1\n");
    let (e, p, _d) = failing(&[("1_hip_api_trace.csv", short.as_bytes())]);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: line 3: row has 4 fields, the header has 7",
            p.display()
        )
    );
    let text = format!("{API_HEADER}\"HIP_RUNTIME_API\",\"hipMalloc\",1,1,1,12x4,20\n");
    let (e, p, _d) = failing(&[("1_hip_api_trace.csv", text.as_bytes())]);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: line 2: start_timestamp is not an integer: \"12x4\"",
            p.display()
        )
    );
}

#[test]
fn a_broken_sibling_fails_its_group_naming_the_sibling() {
    let kt = "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,1,1,k,1,10,20\n";
    let bad = format!("{API_HEADER}HIP,hipMalloc,1,1,1,10,oops\n");
    let (e, p, _d) = failing(&[
        ("7_kernel_trace.csv", kt.as_bytes()),
        ("7_hip_api_trace.csv", bad.as_bytes()),
    ]);
    let sib = p.with_file_name("7_hip_api_trace.csv");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{}: line 2: end_timestamp", sib.display())),
        "{msg}"
    );
}

#[test]
fn a_changed_sibling_reingests_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let kt = "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,1,1,k,1,10,20\n";
    let api = |n: usize| {
        let rows: String = (0..n)
            .map(|i| format!("HIP,hipLaunchKernel,1,1,{i},{i},{}\n", i + 1))
            .collect();
        format!("{API_HEADER}{rows}")
    };
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("7_kernel_trace.csv"), kt).unwrap();
    std::fs::write(run.join("7_hip_api_trace.csv"), api(2)).unwrap();
    let out = dir.path().join("out");
    let s = ingest(std::slice::from_ref(&run), &out).unwrap();
    assert_eq!((s.ingested.len(), s.rows()["cpu_ops"]), (1, 2));
    let s = ingest(std::slice::from_ref(&run), &out).unwrap();
    assert_eq!((s.ingested.len(), s.skipped.len()), (0, 1));
    std::fs::write(run.join("7_hip_api_trace.csv"), api(3)).unwrap();
    let s = ingest(std::slice::from_ref(&run), &out).unwrap();
    assert_eq!((s.ingested.len(), s.rows()["cpu_ops"]), (1, 3));
}

#[test]
fn truncated_json_fails_at_its_end_offset() {
    let Some(gz) = corpus_bytes("rocprofv3/json/mi350x_908_results.json.gz") else {
        return;
    };
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    for cut in [40, 5_000, 25_000_123, text.len() - 3] {
        let (e, p, _d) = failing(&[("908_results.json", &text[..cut])]);
        let prefix = format!("{}: byte {cut}: unexpected end of file in ", p.display());
        assert!(e.to_string().starts_with(&prefix), "{e}");
    }
}

#[test]
fn sqlite_that_is_not_rocpd_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("other.db");
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    drop(c);
    let out = dir.path().join("out");
    let e = ingest(std::slice::from_ref(&p), &out).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{}: SQLite database that is neither", p.display()))
            && msg.contains("nor a rocpd database")
            && !msg.contains('\n'),
        "{msg}"
    );
    assert!(!out.join("manifest.json").exists());
}

#[test]
fn rocpd_rank_comes_from_the_process_environment() {
    let Some(db) = corpus("rocprofv3/rocpd/mi350x_908_results.DERIVED.db") else {
        return;
    };
    // A copy of the real database whose process environment is torchrun's.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("908_results.db");
    std::fs::copy(&db, &p).unwrap();
    let c = rusqlite::Connection::open(&p).unwrap();
    let n = c
        .execute(
            "UPDATE rocpd_info_process SET environment = '{\"RANK\": \"3\", \"WORLD_SIZE\": \"8\", \"LOCAL_RANK\": \"3\"}'",
            [],
        )
        .unwrap_or_else(|_| {
            // The view is not updatable: write the table behind it.
            let t: String = c
                .query_row(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_info_process_%'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            c.execute(
                &format!("UPDATE {t} SET environment = '{{\"RANK\": \"3\", \"WORLD_SIZE\": \"8\"}}'"),
                [],
            )
            .unwrap()
        });
    assert_eq!(n, 1);
    drop(c);
    let out = dir.path().join("out");
    let s = ingest(std::slice::from_ref(&p), &out).unwrap();
    assert_eq!(s.ingested[0].1.rank, 3);
    let run = std::fs::read_dir(out.join("gpu_activities"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(run.path().join("rank=3").is_dir());
}

#[test]
fn agent_info_of_the_group_maps_agents_to_gpu_indices_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    // Agents 0 and 1 are CPUs, 2 and 3 GPUs: "Agent 3" is the second GPU, device 1.
    std::fs::write(
        run.join("9_agent_info.csv"),
        "\"Node_Id\",\"Logical_Node_Id\",\"Agent_Type\",\"Name\",\"Product_Name\"\n\
         0,0,\"CPU\",\"cpu\",\"EPYC\"\n1,1,\"CPU\",\"cpu\",\"EPYC\"\n\
         2,2,\"GPU\",\"gfx942\",\"AMD Instinct MI300X\"\n3,3,\"GPU\",\"gfx942\",\"AMD Instinct MI300X\"\n",
    )
    .unwrap();
    std::fs::write(
        run.join("9_kernel_trace.csv"),
        "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Kernel_Name\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n\
         \"KERNEL_DISPATCH\",\"Agent 3\",1,2,\"Cijk_Alik_Bljk\",1,100,200\n",
    )
    .unwrap();
    std::fs::write(
        run.join("9_memory_copy_trace.csv"),
        "\"Kind\",\"Direction\",\"Stream_Id\",\"Source_Agent_Id\",\"Destination_Agent_Id\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n\
         \"MEMORY_COPY\",\"MEMORY_COPY_DEVICE_TO_HOST\",0,\"Agent 3\",\"Agent 0\",2,300,400\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let s = ingest(std::slice::from_ref(&run), &out).unwrap();
    assert_eq!(s.ingested.len(), 1, "one job for the process's three files");
    assert_eq!(s.rows()["gpu_activities"], 2);
    let mut devices = Vec::new();
    for b in batches(&out, "gpu_activities") {
        let (cat, dev) = (strs(&b, "category"), ints(&b, "device"));
        for (c, d) in cat.into_iter().zip(dev) {
            devices.push((c.unwrap(), d.expect("no null device")));
        }
    }
    devices.sort();
    assert_eq!(
        devices,
        [("gemm".to_string(), 1), ("memcpy".to_string(), 1)],
        "the GEMM on Agent 3 and the copy from it both on GPU 1"
    );
}

#[test]
fn rank_map_gives_the_rank_of_a_rocprof_process_by_the_pid_in_its_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let kt = dir.path().join("1234_kernel_trace.csv");
    std::fs::write(
        &kt,
        "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,1,1,k,1,10,20\n",
    )
    .unwrap();
    let map = dir.path().join("ranks.txt");
    std::fs::write(&map, "1233 0\n1234 5\n").unwrap();
    let opts = Options {
        out: dir.path().join("out"),
        rank_map: Some(map),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(std::slice::from_ref(&kt), &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested[0].1.rank, 5);
}

/// Steps from marker ranges (`--step-marker`) and RCCL kernels' collectives from the RCCL
/// API calls around their launches, in a capture written by hand: each kernel's step and
/// collective below is known by construction.
#[test]
fn marker_ranges_give_steps_and_rccl_calls_give_collectives() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let api = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n";
    // Steps 1 [1000, 2000] and 2 [2000, 3000]; `forward` is not a step.
    std::fs::write(
        run.join("9_marker_api_trace.csv"),
        format!("{api}MARKER_CORE_API,train_step 1,9,5,60,1000,2000\nMARKER_CORE_API,forward,9,5,61,1000,1500\nMARKER_CORE_API,train_step 2,9,5,62,2000,3000\n"),
    )
    .unwrap();
    std::fs::write(
        run.join("9_rccl_api_trace.csv"),
        format!("{api}RCCL_API,ncclAllReduce,9,5,50,1050,1150\nRCCL_API,ncclAllGather,9,5,51,2050,2150\nRCCL_API,ncclCommGetAsyncError,9,5,52,3490,3520\nRCCL_API,ncclReduceScatter,9,6,53,3490,3520\n"),
    )
    .unwrap();
    // The launches: in the all-reduce, in the all-gather, a GEMM's in step 2, and an RCCL
    // kernel's outside every step and every collective call of its thread (thread 6's
    // reduce-scatter is another thread's).
    std::fs::write(
        run.join("9_hip_api_trace.csv"),
        format!("{api}HIP_RUNTIME_API_EXT,hipExtLaunchKernel,9,5,11,1100,1110\nHIP_RUNTIME_API_EXT,hipExtLaunchKernel,9,5,12,2100,2110\nHIP_RUNTIME_API_EXT,hipLaunchKernel,9,5,13,2500,2510\nHIP_RUNTIME_API_EXT,hipExtLaunchKernel,9,5,14,3500,3510\n"),
    )
    .unwrap();
    let rccl = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)";
    std::fs::write(
        run.join("9_kernel_trace.csv"),
        format!("Kind,Agent_Id,Queue_Id,Stream_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp\n\
         KERNEL_DISPATCH,1,1,1,\"{rccl}\",11,1200,1500\n\
         KERNEL_DISPATCH,1,1,1,\"{rccl}\",12,2200,2400\n\
         KERNEL_DISPATCH,1,1,2,Cijk_Alik_Bljk,13,3200,3300\n\
         KERNEL_DISPATCH,1,1,2,elementwise_kernel,99,1600,1700\n\
         KERNEL_DISPATCH,1,1,1,\"{rccl}\",14,3600,3700\n"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let opts = Options {
        out: out.clone(),
        step_marker: aorta_ingest::step_span::StepMarker::parse(r"^train_step (\d+)$").unwrap(),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(std::slice::from_ref(&run), &opts, &Default::default()).unwrap();
    assert_eq!(s.ingested.len(), 1, "one job for the process's four files");
    let mut got = Vec::new();
    for b in batches(&out, "gpu_activities") {
        let (corr, step) = (ints(&b, "correlation"), ints(&b, "step"));
        let (op, source) = (strs(&b, "comm_op"), strs(&b, "step_source"));
        for i in 0..b.num_rows() {
            got.push((
                corr[i].unwrap(),
                step[i],
                op[i].clone(),
                source[i].clone().unwrap(),
            ));
        }
    }
    got.sort();
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        got,
        [
            (11, Some(1), s("all_reduce"), "launch".into()),
            (12, Some(2), s("all_gather"), "launch".into()),
            // Launched in step 2, run after it: the launch decides.
            (13, Some(2), None, "launch".into()),
            (14, None, s("other"), "none".into()),
            // No launch record: its GPU start.
            (99, Some(1), None, "gpu_time".into()),
        ]
    );
    let mut steps: Vec<i64> = batches(&out, "steps")
        .iter()
        .flat_map(|b| ints(b, "step"))
        .flatten()
        .collect();
    steps.sort();
    assert_eq!(steps, [1, 2]);
    // Host calls take the step their start falls in.
    let mut cpu = Vec::new();
    for b in batches(&out, "cpu_ops") {
        let (corr, step) = (ints(&b, "correlation"), ints(&b, "step"));
        cpu.extend((0..b.num_rows()).map(|i| (corr[i].unwrap(), step[i])));
    }
    cpu.sort();
    assert_eq!(
        cpu,
        [
            (11, Some(1)),
            (12, Some(2)),
            (13, Some(2)),
            (14, None),
            (50, Some(1)),
            (51, Some(2)),
            (52, None),
            (53, None),
            (60, Some(1)),
            (61, Some(1)),
            (62, Some(2)),
        ]
    );
}
