//! Nsight Systems exports and generic Chrome traces through the `aorta` binary: the corpus
//! export against SQL written here (rusqlite on the same file), `aorta overlap` against
//! interval unions computed here, a two-process export built here with hand-computed rows,
//! `--rank-map`, and the broken inputs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::cli::*;
use crate::common::*;
use rusqlite::Connection;

const CLOVERLEAF: &str = "nsys/cloverleaf-cuda.sqlite";

fn sql_i64(c: &Connection, q: &str) -> i64 {
    c.query_row(q, [], |r| r.get(0)).unwrap()
}

fn ok(o: &std::process::Output) {
    assert_eq!(code(o), 0, "stderr:\n{}", stderr(o));
}

fn intervals(c: &Connection, table: &str) -> Vec<(i64, i64)> {
    let mut st = c
        .prepare(&format!("SELECT start, end FROM {table}"))
        .unwrap();
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn cloverleaf_rows_match_sql() {
    let Some(root) = corpus() else { return };
    let path = root.join(CLOVERLEAF);
    let c = Connection::open(&path).unwrap();
    let base = sql_i64(&c, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
    let kernels = sql_i64(&c, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL");
    let copies = sql_i64(&c, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY");
    let runtime = sql_i64(&c, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME");
    let gpu_min = sql_i64(&c, "SELECT min(s) FROM (SELECT min(start) s FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMCPY)");
    let gpu_max = sql_i64(&c, "SELECT max(e) FROM (SELECT max(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT max(end) FROM CUPTI_ACTIVITY_KIND_MEMCPY)");
    let linked = sql_i64(&c, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId)");
    let mut st = c
        .prepare("SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY 1")
        .unwrap();
    let want_names: BTreeMap<String, i64> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let gpu_name = c
        .query_row(
            "SELECT name FROM TARGET_INFO_GPU WHERE id = (SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY count(*) DESC LIMIT 1)",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    ok(&ingest(&[&path], &out, &["--label", "nsys", "-q"]));
    let gpu = table(&out, "gpu_activities", "nsys");
    assert_eq!(gpu.height() as i64, kernels + copies);
    let kinds = strs(&gpu, "kind");
    let cats = strs(&gpu, "category");
    let names = strs(&gpu, "name");
    let mut got_names: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..gpu.height() {
        let (k, cat) = (kinds[i].as_deref().unwrap(), cats[i].as_deref().unwrap());
        if k == "kernel" {
            *got_names.entry(names[i].clone().unwrap()).or_default() += 1;
            // CloverLeaf's kernels are stencils and reductions: no GEMM, no NCCL name.
            assert_eq!(cat, "other_compute", "{:?}", names[i]);
        } else {
            assert_eq!((k, cat), ("memcpy", "memcpy"));
        }
    }
    assert_eq!(got_names, want_names);
    let starts = i64s(&gpu, "start_ns");
    let ends = i64s(&gpu, "raw_end_ns");
    assert_eq!(starts.iter().flatten().min(), Some(&(base + gpu_min)));
    assert_eq!(ends.iter().flatten().max(), Some(&(base + gpu_max)));
    let launched = strs(&gpu, "step_source")
        .iter()
        .filter(|s| s.as_deref() == Some("launch"))
        .count() as i64;
    assert!(linked > 0);
    assert!(launched >= linked, "{launched} < {linked}");

    let cpu = table(&out, "cpu_ops", "nsys");
    assert_eq!(cpu.height() as i64, runtime);
    assert!(strs(&cpu, "category")
        .iter()
        .all(|c| c.as_deref() == Some("runtime")));
    let runs = table(&out, "runs", "nsys");
    assert_eq!(runs.height(), 1, "one process, one rank");
    assert_eq!(strs(&runs, "format"), [Some("nsys".into())]);
    assert_eq!(strs(&runs, "platform"), [Some("cuda".into())]);
    assert_eq!(strs(&runs, "device_name"), [Some(gpu_name)]);
    assert_eq!(i64s(&runs, "base_time_ns"), [Some(base)]);
    assert_eq!(i64s(&runs, "rank"), [Some(0)]);
    assert_eq!(
        i64s(&runs, "event_count"),
        [Some(kernels + copies + runtime)]
    );
    let version = strs(&runs, "runtime_version")[0].clone().unwrap();
    assert!(version.contains("2024.5.1"), "{version}");
}

#[test]
fn overlap_of_an_nsys_run_is_the_sql_union() {
    let Some(root) = corpus() else { return };
    let path = root.join(CLOVERLEAF);
    let c = Connection::open(&path).unwrap();
    let kernels = intervals(&c, "CUPTI_ACTIVITY_KIND_KERNEL");
    let copies = intervals(&c, "CUPTI_ACTIVITY_KIND_MEMCPY");
    let compute = union_len(kernels.clone());
    let busy = union_len(kernels.iter().chain(&copies).copied().collect());
    let memcpy = union_len(copies.clone());
    assert!(compute > 0 && busy >= compute);

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    ok(&ingest(&[&path], &out, &["--label", "nsys", "-q"]));
    let o = aorta(&[
        "overlap".as_ref(),
        out.as_os_str(),
        "--by".as_ref(),
        "rank".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    ok(&o);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["comm_ns"], 0, "CloverLeaf has no NCCL");
    assert_eq!(r["compute_ns"], compute);
    assert_eq!(r["busy_ns"], busy);
    assert_eq!(r["memcpy_ns"], memcpy);
    assert_eq!(r["activity_count"], (kernels.len() + copies.len()) as i64);
}

#[test]
fn rank_map_moves_the_process_to_its_rank_and_bad_lines_name_the_line() {
    let Some(root) = corpus() else { return };
    let path = root.join(CLOVERLEAF);
    let c = Connection::open(&path).unwrap();
    let pid = sql_i64(
        &c,
        "SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1",
    );
    let tmp = tempfile::tempdir().unwrap();
    let map = tmp.path().join("ranks.txt");
    std::fs::write(&map, format!("# from the launcher\n{pid} 3\n")).unwrap();
    let out = tmp.path().join("ds");
    let m = map.to_str().unwrap();
    // Ingested without the map first (rank 0): the same file under a map is not "unchanged".
    ok(&ingest(&[&path], &out, &["--label", "nsys", "-q"]));
    assert!(out.join("runs/run=nsys/rank=0").is_dir());
    ok(&ingest(
        &[&path],
        &out,
        &["--label", "nsys", "-q", "--rank-map", m],
    ));
    for t in ["gpu_activities", "cpu_ops", "runs"] {
        let files = parquet_files(&out.join(t));
        assert!(!files.is_empty(), "{t}");
        assert!(
            files.iter().all(|f| f.starts_with("run=nsys/rank=3")),
            "{files:?}"
        );
    }
    let runs = table(&out, "runs", "nsys");
    assert_eq!(strs(&runs, "rank_source"), [Some("rank_map".into())]);

    std::fs::write(&map, format!("{pid} 3\n{pid} three\n")).unwrap();
    let out = tmp.path().join("bad");
    let o = ingest(&[&path], &out, &["--rank-map", m]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let msg = one_error_line(&o, &map, "line 2");
    assert!(msg.contains("PID RANK"), "{msg}");
    assert_nothing_written(&out);
}

/// `pid << 24 | tid`, with a high bit as real exports set (hardware/VM id).
fn gtid(pid: i64, tid: i64) -> i64 {
    (1 << 48) | (pid << 24) | tid
}

/// A two-process export in the 2022 schema generation (`EXPORT_META_DATA`), with NVTX steps.
pub(crate) fn two_process_export(path: &Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);
         CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
         CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
           deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL,
           correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
           shortName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER, gridZ INTEGER,
           blockX INTEGER, blockY INTEGER, blockZ INTEGER);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
           eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
           returnValue INTEGER);
         CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
           deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL,
           correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER NOT NULL);
         CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
           rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
           endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
         INSERT INTO StringIds VALUES (1, 'k_a'), (2, 'k_b'), (3, 'k_c'),
           (4, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (5, 'cudaLaunchKernel'),
           (6, 'ProfilerStep#2'), (7, 'k_neg');
         INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2022.2.1.31'),
           ('EXPORT_SCHEMA_VERSION', '2.9.1');
         INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');
         INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA A100-SXM4-40GB'), (1, 'NVIDIA A100-SXM4-40GB');",
    )
    .unwrap();
    let (p1, p2) = (gtid(100, 101), gtid(200, 201));
    let kernel = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?7, 8, 1, 1, 128, 1, 1)";
    for (s, e, dev, stream, corr, g, name) in [
        (2000, 3000, 0, 7, 1, p1, 1),
        (6500, 8000, 0, 7, 2, p1, 2),
        (7000, 7500, 0, 8, 99, p1, 3),
        (2500, 4000, 1, 9, 1, p2, 4),
        (3000, 2990, 1, 10, -1, p2, 7),
    ] {
        // globalPid keeps only the pid part of the id.
        let gpid = g & !0xFF_FFFF;
        c.execute(
            kernel,
            rusqlite::params![s, e, dev, stream, corr, gpid, name],
        )
        .unwrap();
    }
    let runtime = "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 0, ?3, ?4, 5, 0)";
    c.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (3000, 3100, 0, 1, 7, 3, ?1, 0, 4096)",
        [p1 & !0xFF_FFFF],
    )
    .unwrap();
    for (s, e, g, corr) in [
        (1500, 1600, p1, 1),
        (2900, 2950, p1, 3),
        (6000, 6100, p1, 2),
        (100, 200, p2, 1),
    ] {
        c.execute(runtime, rusqlite::params![s, e, g, corr])
            .unwrap();
    }
    c.execute_batch(&format!(
        "INSERT INTO NVTX_EVENTS VALUES (1000, 5000, 59, NULL, NULL, NULL, 'ProfilerStep#1', {p1}, NULL, NULL, 0);
         INSERT INTO NVTX_EVENTS VALUES (5000, 9000, 59, NULL, NULL, NULL, NULL, {p1}, NULL, 6, 0);"
    ))
    .unwrap();
}

pub(crate) type GpuRow = (i64, String, String, i64, Option<i64>, String);

/// (rank, name, category, start - base, step, step_source) of every GPU row, sorted.
pub(crate) fn gpu_rows(out: &Path, run: &str, base: i64) -> Vec<GpuRow> {
    let g = table(out, "gpu_activities", run);
    let mut v: Vec<GpuRow> = (0..g.height())
        .map(|i| {
            (
                i64s(&g, "rank")[i].unwrap(),
                strs(&g, "name")[i].clone().unwrap(),
                strs(&g, "category")[i].clone().unwrap(),
                i64s(&g, "start_ns")[i].unwrap() - base,
                i64s(&g, "step")[i],
                strs(&g, "step_source")[i].clone().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn two_processes_are_two_ranks_with_steps_from_nvtx() {
    let tmp = tempfile::tempdir().unwrap();
    let db: PathBuf = tmp.path().join("job.sqlite");
    two_process_export(&db);
    let base = 1_700_000_000_000_000_000;
    let out = tmp.path().join("ds");
    ok(&ingest(&[&db], &out, &["--label", "two", "-q"]));
    let s = |x: &str| x.to_string();
    // pid 100 → rank 0, pid 200 → rank 1 (pid order). k_a and k_b take their launches'
    // steps (launch at 1500 in step 1 [1000, 5000], at 6000 in step 2 [5000, 9000]); k_c has
    // no launch (correlation 99) and falls back to its own start, 7000: step 2; the memset's
    // launch (correlation 3) is at 2900, step 1. Rank 1's launch (correlation 1 too, but
    // another process) lies in no step. Step 1's GPU window: 2000 (k_a) to 3100 (memset).
    assert_eq!(
        gpu_rows(&out, "two", base),
        vec![
            (0, s("Memset"), s("memset"), 3000, Some(1), s("launch")),
            (0, s("k_a"), s("other_compute"), 2000, Some(1), s("launch")),
            (0, s("k_b"), s("other_compute"), 6500, Some(2), s("launch")),
            (
                0,
                s("k_c"),
                s("other_compute"),
                7000,
                Some(2),
                s("gpu_time")
            ),
            (1, s("k_neg"), s("other_compute"), 3000, None, s("none")),
            (
                1,
                s("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                s("comm"),
                2500,
                None,
                s("launch")
            ),
        ]
    );
    let steps = table(&out, "steps", "two");
    let rank0: Vec<[Option<i64>; 5]> = (0..steps.height())
        .filter(|&i| i64s(&steps, "rank")[i] == Some(0))
        .map(|i| {
            let o = |c: &str| i64s(&steps, c)[i].map(|v| v - base);
            [
                i64s(&steps, "step")[i],
                o("cpu_start_ns"),
                o("cpu_end_ns"),
                o("gpu_start_ns"),
                o("gpu_end_ns"),
            ]
        })
        .collect();
    assert_eq!(
        rank0,
        vec![
            [Some(1), Some(1000), Some(5000), Some(2000), Some(3100)],
            [Some(2), Some(5000), Some(9000), Some(6500), Some(8000)],
        ]
    );
    let cpu = table(&out, "cpu_ops", "two");
    let mut ann: Vec<(String, Option<i64>)> = (0..cpu.height())
        .filter(|&i| strs(&cpu, "category")[i].as_deref() == Some("user_annotation"))
        .map(|i| {
            (
                strs(&cpu, "name")[i].clone().unwrap(),
                i64s(&cpu, "step")[i],
            )
        })
        .collect();
    ann.sort();
    assert_eq!(
        ann,
        vec![
            (s("ProfilerStep#1"), Some(1)),
            (s("ProfilerStep#2"), Some(2))
        ]
    );
    assert_eq!(cpu.height(), 6, "4 runtime calls + 2 NVTX ranges");
    // Findings: rank 0's k_c and rank 1's k_neg (correlation -1) have no launch; k_neg ends
    // before it starts; nothing lies outside rank 0's steps, and rank 1, which has no step
    // ranges at all, has none to miss (so k_neg gets no step and no fallback).
    let diag = table(&out, "diagnostics", "two");
    let mut found: Vec<(i64, String, i64)> = (0..diag.height())
        .map(|i| {
            let (r, c) = (
                i64s(&diag, "rank")[i].unwrap(),
                strs(&diag, "code")[i].clone(),
            );
            (r, c.unwrap(), i64s(&diag, "count")[i].unwrap())
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            (0, s("kernel_without_launch"), 1),
            (1, s("kernel_without_launch"), 1),
            (1, s("negative_duration"), 1),
        ]
    );
    let runs = table(&out, "runs", "two");
    assert_eq!(i64s(&runs, "rank").len(), 2);
    assert!(strs(&runs, "rank_source")
        .iter()
        .all(|r| r.as_deref() == Some("pid_order")));
    let v = strs(&runs, "runtime_version");
    assert!(
        v.iter()
            .all(|v| v.as_deref() == Some("nsys 2022.2.1.31, export schema 2.9.1")),
        "{v:?}"
    );

    // The rank map overrides pid order: swapped.
    let map = tmp.path().join("map.txt");
    std::fs::write(&map, "100=1\n200=0\n").unwrap();
    let out = tmp.path().join("mapped");
    ok(&ingest(
        &[&db],
        &out,
        &["--label", "two", "-q", "--rank-map", map.to_str().unwrap()],
    ));
    let ranks: Vec<(i64, String)> = gpu_rows(&out, "two", base)
        .into_iter()
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(
        ranks,
        vec![
            (0, s("k_neg")),
            (0, s("ncclDevKernel_AllReduce_Sum_f32_RING_LL")),
            (1, s("Memset")),
            (1, s("k_a")),
            (1, s("k_b")),
            (1, s("k_c")),
        ]
    );
}

#[test]
fn truncated_chrome_object_is_one_error_line_at_its_end() {
    // A generic (marker-less) Chrome object cut inside its second event: every byte is a
    // valid prefix, so the first place anything is missing is the end of the file.
    let text = r#"{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}, {"ph": "X", "na"#;
    assert!(serde_json::from_str::<serde_json::Value>(text)
        .unwrap_err()
        .is_eof());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("cut.json");
    std::fs::write(&path, text).unwrap();
    let out = tmp.path().join("ds");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let msg = one_error_line(&o, &path, &format!("byte {}", text.len()));
    assert!(msg.contains("after 1 events"), "{msg}");
    assert_nothing_written(&out);
}

#[test]
fn sqlite_that_is_neither_nsys_nor_rocpd_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("notes.sqlite");
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE notes (id INTEGER, text TEXT); INSERT INTO notes VALUES (1, 'x');",
    )
    .unwrap();
    drop(c);
    let out = tmp.path().join("ds");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    let prefix = format!("aorta: error: {}: ", path.display());
    assert!(err.starts_with(&prefix), "{err}");
    assert!(
        err.contains("neither an Nsight Systems export") && err.contains("rocpd"),
        "{err}"
    );
    assert_nothing_written(&out);
}

#[test]
fn ingest_help_shows_the_rank_map_with_an_example() {
    let o = aorta(&["ingest".as_ref(), "--help".as_ref()]);
    ok(&o);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--rank-map <FILE>"), "{help}");
    assert!(
        help.contains("--rank-map ranks.txt"),
        "no example in:\n{help}"
    );
}

#[test]
fn every_corpus_file_goes_to_its_reader() {
    use aorta_ingest::detect::{detect, Format};
    let Some(root) = corpus() else { return };
    // Every PyTorch profiler trace (Kineto markers) stays with the Kineto reader, whatever
    // its age or vendor, and so does the crashed writer's `.tmp`.
    let kineto = corpus_traces(&root);
    assert!(kineto.len() >= 10, "{kineto:?}");
    for p in kineto.iter().chain([&root.join(BROKEN_TMP)]) {
        assert_eq!(detect(p).unwrap(), Format::Kineto, "{}", p.display());
    }
    assert_eq!(
        detect(&root.join("chrome/flow_simple.json")).unwrap(),
        Format::Chrome
    );
    assert_eq!(detect(&root.join(CLOVERLEAF)).unwrap(), Format::Nsys);
}

#[test]
fn an_nsys_report_asks_for_its_sqlite_export() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("job.nsys-rep");
    std::fs::write(&path, b"\x00\x01 not sqlite").unwrap();
    let out = tmp.path().join("ds");
    let o = ingest(&[&path], &out, &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("aorta: error: {}: ", path.display())),
        "{err}"
    );
    assert!(err.contains("nsys export --type sqlite"), "{err}");
    assert_nothing_written(&out);
}
