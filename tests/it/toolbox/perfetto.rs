//! `aorta export perfetto` on the 2-rank H200 FSDP2 corpus job. Perfetto's trace_processor
//! cannot be had here (the PyPI `perfetto` package downloads its binary at run time, and
//! nothing outside the registries can be fetched), so the file is held to a strict Chrome
//! trace-format check written here instead: only the keys and phases the format defines,
//! typed as it says, times in exact ns, colours among Chrome's reserved names, every thread
//! and process named, slices properly nested on every track (what Perfetto needs to import
//! them), and every flow bound to a slice at both ends. Then its slices are compared with the
//! dataset's rows of the window, per track (count and total duration), read with polars.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use polars::prelude::*;
use serde_json::Value;

use crate::common::cli::{aorta, code, ingest_ok, stderr};
use crate::common::{corpus, i64s, strs};

/// Chrome's reserved colour names (catapult `color_scheme.js`).
const CHROME_COLOURS: [&str; 23] = [
    "thread_state_uninterruptible",
    "thread_state_iowait",
    "thread_state_running",
    "thread_state_runnable",
    "thread_state_sleeping",
    "thread_state_unknown",
    "background_memory_dump",
    "light_memory_dump",
    "detailed_memory_dump",
    "vsync_highlight_color",
    "generic_work",
    "good",
    "bad",
    "terrible",
    "black",
    "grey",
    "white",
    "yellow",
    "olive",
    "rail_response",
    "rail_animation",
    "rail_idle",
    "rail_load",
];

/// The FSDP2 job ingested into a new dataset.
fn fsdp_copy() -> Option<(tempfile::TempDir, PathBuf)> {
    let root = corpus()?;
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(&[&root.join("kineto/cuda/h200_fsdp2")], &ds, &["-q"]);
    Some((dir, ds))
}

/// The FSDP2 job ingested once (read only).
fn fsdp() -> Option<&'static Path> {
    static DS: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    DS.get_or_init(fsdp_copy).as_ref().map(|d| d.1.as_path())
}

/// `aorta export perfetto DS ARGS -o OUT`: its status, stdout and stderr.
fn export(ds: &Path, args: &[&str], out: &Path) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["export".as_ref(), "perfetto".as_ref(), ds.as_os_str()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.extend(["-o".as_ref(), out.as_os_str()]);
    aorta(&a)
}

/// A track's slices: count and total duration (ns), by (rank, GPU or CPU, device or pid,
/// stream or tid).
type Tracks = BTreeMap<(i64, bool, i64, i64), (usize, i64)>;

/// A µs value as exact ns (the file writes at most three decimals).
fn ns(v: &Value) -> i64 {
    let us = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    let n = us * 1000.0;
    assert!(
        (n - n.round()).abs() < 1e-3,
        "{v} is not a whole number of ns"
    );
    assert!(n >= 0.0, "negative time {v}");
    n.round() as i64
}

fn keys_within(e: &Value, allowed: &[&str]) {
    for k in e.as_object().unwrap().keys() {
        assert!(allowed.contains(&k.as_str()), "key {k} in {e}");
    }
}

fn int(e: &Value, k: &str) -> i64 {
    e[k].as_i64()
        .unwrap_or_else(|| panic!("{k} is not an integer: {e}"))
}

fn text<'a>(e: &'a Value, k: &str) -> &'a str {
    e[k].as_str()
        .unwrap_or_else(|| panic!("{k} is not a string: {e}"))
}

/// A slice as the check keeps it: start, end (ns), cat.
type Span = (i64, i64, String);

/// One end of a flow: pid, tid, ts (ns).
type FlowEnd = (i64, i64, i64);

/// What the check keeps: slices per track, the process names, and the flows by id (start
/// and finish ends).
#[derive(Default)]
struct Checked {
    slices: BTreeMap<(i64, i64), Vec<Span>>,
    process_names: BTreeMap<i64, String>,
    thread_names: BTreeSet<(i64, i64)>,
    flows: BTreeMap<i64, (Option<FlowEnd>, Option<FlowEnd>)>,
}

/// The strict Chrome trace-format check; panics on the first violation.
fn check_format(doc: &Value) -> Checked {
    keys_within(doc, &["traceEvents", "displayTimeUnit", "otherData"]);
    assert!(matches!(doc["displayTimeUnit"].as_str(), Some("ns" | "ms")));
    let mut c = Checked::default();
    for e in doc["traceEvents"].as_array().unwrap() {
        let (pid, ph) = (int(e, "pid"), text(e, "ph"));
        match ph {
            "X" => {
                keys_within(
                    e,
                    &[
                        "ph", "name", "cat", "pid", "tid", "ts", "dur", "cname", "args",
                    ],
                );
                let (ts, dur) = (ns(&e["ts"]), ns(&e["dur"]));
                text(e, "name");
                assert!(e["args"].is_object(), "{e}");
                if let Some(cn) = e.get("cname") {
                    assert!(CHROME_COLOURS.contains(&cn.as_str().unwrap()), "{e}");
                }
                let track = c.slices.entry((pid, int(e, "tid"))).or_default();
                track.push((ts, ts + dur, text(e, "cat").to_string()));
            }
            "M" => {
                keys_within(e, &["ph", "name", "pid", "tid", "args"]);
                match text(e, "name") {
                    "process_name" => {
                        c.process_names.insert(pid, text(&e["args"], "name").into());
                    }
                    "thread_name" => {
                        text(&e["args"], "name");
                        c.thread_names.insert((pid, int(e, "tid")));
                    }
                    "process_sort_index" | "thread_sort_index" => {
                        int(&e["args"], "sort_index");
                    }
                    other => panic!("metadata {other}"),
                }
            }
            "s" | "f" => {
                keys_within(e, &["ph", "bp", "id", "name", "cat", "pid", "tid", "ts"]);
                text(e, "name");
                text(e, "cat");
                let end = (pid, int(e, "tid"), ns(&e["ts"]));
                let slot = c.flows.entry(int(e, "id")).or_default();
                if ph == "s" {
                    assert!(slot.0.replace(end).is_none(), "two starts: {e}");
                } else {
                    assert_eq!(text(e, "bp"), "e", "{e}");
                    assert!(slot.1.replace(end).is_none(), "two finishes: {e}");
                }
            }
            other => panic!("phase {other}"),
        }
    }
    for (track, slices) in &mut c.slices {
        assert!(
            c.process_names.contains_key(&track.0),
            "process {track:?} named"
        );
        assert!(c.thread_names.contains(track), "thread {track:?} named");
        nested(track, slices);
    }
    for (id, ends) in &c.flows {
        let (Some(s), Some(f)) = ends else {
            panic!("flow {id} has one end")
        };
        for (pid, tid, ts) in [s, f] {
            let on = c.slices.get(&(*pid, *tid)).map_or(&[][..], Vec::as_slice);
            assert!(
                on.iter().any(|x| x.0 <= *ts && *ts <= x.1),
                "flow {id} unbound"
            );
        }
    }
    c
}

/// What a process name says: (rank, GPU or CPU, device or pid); `rank` when it names none.
fn process(name: &str, rank: i64) -> (i64, bool, i64) {
    let (rank, rest) = match name.strip_prefix("rank ") {
        Some(r) => {
            let (n, rest) = r.split_once(' ').unwrap();
            (n.parse().unwrap(), rest)
        }
        None => (rank, name),
    };
    match rest.strip_prefix("GPU ") {
        Some(d) => (rank, true, d.parse().unwrap()),
        None => (
            rank,
            false,
            rest.strip_prefix("CPU process ").unwrap().parse().unwrap(),
        ),
    }
}

/// The file's slices per track, keyed as the dataset's rows (`rank` for names without one).
fn file_tracks(c: &Checked, rank: i64) -> Tracks {
    c.slices
        .iter()
        .map(|((pid, tid), s)| {
            let (r, gpu, own) = process(&c.process_names[pid], rank);
            let n = (s.len(), s.iter().map(|x| x.1 - x.0).sum());
            ((r, gpu, own, *tid), n)
        })
        .collect()
}

/// Slices of one track either nest or follow each other (sorts `slices`).
fn nested(track: &(i64, i64), slices: &mut [Span]) {
    slices.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    let mut open: Vec<i64> = Vec::new();
    for s in slices.iter() {
        while open.last().is_some_and(|&end| end <= s.0) {
            open.pop();
        }
        if let Some(&end) = open.last() {
            assert!(
                s.1 <= end,
                "{track:?}: {s:?} crosses a slice ending at {end}"
            );
        }
        open.push(s.1);
    }
}

/// The dataset's rows of the window per track, by a polars query written here.
fn dataset_tracks(ds: &Path, table: &str, keys: [&str; 2], rank: i64, step: i64) -> Tracks {
    let mut filter = col("rank").eq(lit(rank)).and(col("step").eq(lit(step)));
    if table == "cpu_ops" {
        filter = filter.and(col("category").neq(lit("python_function")));
    }
    let df = aorta_transform::dataset::scan(ds, table)
        .unwrap()
        .filter(filter)
        .group_by([col(keys[0]), col(keys[1])])
        .agg([
            len().alias("n"),
            (col("end_ns") - col("start_ns")).sum().alias("total"),
        ])
        .collect()
        .unwrap();
    let (a, b, total) = (i64s(&df, keys[0]), i64s(&df, keys[1]), i64s(&df, "total"));
    let n = df.column("n").unwrap().cast(&DataType::Int64).unwrap();
    let n = n.i64().unwrap();
    let gpu = table == "gpu_activities";
    (0..df.height())
        .map(|i| {
            let key = (rank, gpu, a[i].unwrap_or(-1), b[i].unwrap_or(0));
            (key, (n.get(i).unwrap() as usize, total[i].unwrap()))
        })
        .collect()
}

#[test]
fn a_step_exports_as_a_strict_chrome_trace_holding_the_steps_rows() {
    let Some(ds) = fsdp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("step4.json");
    let (rank, step) = (1, 4);
    let o = export(ds, &["--rank", "1", "--step", "4"], &out);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let c = check_format(&doc);
    let is_gpu = |pid: &i64| c.process_names[pid].starts_with("GPU ");
    let mut want = dataset_tracks(ds, "gpu_activities", ["device", "stream"], rank, step);
    assert!(want.len() >= 2, "{want:?}");
    let cpu = dataset_tracks(ds, "cpu_ops", ["pid", "tid"], rank, step);
    assert!(cpu.len() >= 2, "{cpu:?}");
    want.extend(cpu);
    assert_eq!(file_tracks(&c, rank), want);
    // Time zero is the window's first slice; the first kernel is where the dataset has it.
    let t0 = doc["otherData"]["t0_ns"].as_i64().unwrap();
    let acts = aorta_transform::dataset::scan(ds, "gpu_activities")
        .unwrap()
        .filter(col("rank").eq(lit(rank)).and(col("step").eq(lit(step))))
        .collect()
        .unwrap();
    let first = i64s(&acts, "start_ns").into_iter().flatten().min().unwrap();
    let first_written = c.slices.iter().filter(|(t, _)| is_gpu(&t.0));
    let first_written = first_written.flat_map(|(_, s)| s.iter().map(|x| x.0)).min();
    assert_eq!(first_written.map(|f| f + t0), Some(first));
    // Colours by category: communication red, GEMMs as running threads.
    for e in doc["traceEvents"].as_array().unwrap() {
        match e["cat"].as_str() {
            Some("comm") => assert_eq!(e["cname"], "terrible"),
            Some("gemm") => assert_eq!(e["cname"], "thread_state_running"),
            _ => {}
        }
    }
    // One arrow per activity whose launch (same correlation) is a runtime call of the window.
    let cpu = aorta_transform::dataset::scan(ds, "cpu_ops")
        .unwrap()
        .filter(col("rank").eq(lit(rank)).and(col("step").eq(lit(step))))
        .collect()
        .unwrap();
    let cats = strs(&cpu, "category");
    let launches: BTreeSet<i64> = i64s(&cpu, "correlation")
        .into_iter()
        .zip(&cats)
        .filter(|(_, c)| matches!(c.as_deref(), Some("runtime" | "driver")))
        .filter_map(|(k, _)| k)
        .collect();
    let linked = i64s(&acts, "correlation")
        .into_iter()
        .flatten()
        .filter(|k| launches.contains(k))
        .count();
    assert!(linked > 100, "{linked}");
    assert_eq!(c.flows.len(), linked);
}

/// Both ranks of a step on one timeline: each rank's tracks hold its rows, and its times are
/// its raw times minus the clock offset `aorta collectives` estimated (0 until it ran).
#[test]
fn several_ranks_share_one_aligned_timeline() {
    let Some((_keep, ds)) = fsdp_copy() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("both.json");
    let o = export(&ds, &["--all-ranks", "--step", "5"], &out);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("clock offset unknown: taken as 0"), "{text}");
    let o = aorta(&[
        "collectives".as_ref(),
        ds.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = export(&ds, &["--rank", "0,1", "--step", "5"], &out);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let c = check_format(&doc);
    let mut want = Tracks::new();
    for rank in [0, 1] {
        want.extend(dataset_tracks(
            &ds,
            "gpu_activities",
            ["device", "stream"],
            rank,
            5,
        ));
        want.extend(dataset_tracks(&ds, "cpu_ops", ["pid", "tid"], rank, 5));
    }
    assert_eq!(file_tracks(&c, -1), want);
    // Each rank's first kernel sits at its raw start minus the rank's offset.
    let runs = aorta_transform::dataset::read(&ds, "runs").unwrap();
    let (rank, off) = (i64s(&runs, "rank"), i64s(&runs, "clock_offset_ns"));
    let t0 = doc["otherData"]["t0_ns"].as_i64().unwrap();
    for r in [0i64, 1] {
        let offset = (0..runs.height())
            .find_map(|i| (rank[i] == Some(r)).then_some(off[i]).flatten())
            .unwrap_or_else(|| panic!("rank {r} has a clock offset after `aorta collectives`"));
        let acts = aorta_transform::dataset::scan(&ds, "gpu_activities")
            .unwrap()
            .filter(col("rank").eq(lit(r)).and(col("step").eq(lit(5))))
            .collect()
            .unwrap();
        let raw = i64s(&acts, "start_ns").into_iter().flatten().min().unwrap();
        let written = c
            .slices
            .iter()
            .filter(|((pid, _), _)| {
                let (pr, gpu, _) = process(&c.process_names[pid], -1);
                pr == r && gpu
            })
            .flat_map(|(_, s)| s.iter().map(|x| x.0))
            .min()
            .unwrap();
        assert_eq!(written + t0, raw - offset, "rank {r}");
    }
}

#[test]
fn a_bad_window_or_output_fails_with_one_line_and_writes_nothing() {
    let Some(ds) = fsdp() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    let o = export(ds, &["--rank", "1", "--step", "99"], &out);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("rank 1 has no step 99 (steps: 0, 1, 2"),
        "{}",
        stderr(&o)
    );
    let o = export(ds, &["--rank", "7"], &out);
    assert!(
        stderr(&o).contains("has no rank 7 (ranks: 0, 1)"),
        "{}",
        stderr(&o)
    );
    let missing = dir.path().join("no/such/dir/x.json");
    let o = export(ds, &["--rank", "0"], &missing);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
    // Written twice over the same file: replaced, nothing left beside it.
    for step in ["3", "4"] {
        let o = export(ds, &["--rank", "0", "--step", step], &out);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1);
    let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["otherData"]["step"], 4);
}
