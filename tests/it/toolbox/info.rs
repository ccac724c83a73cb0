//! `aorta info` against the dataset's rows read with polars: ranks, files, formats, devices,
//! world sizes, real steps, outside-step activity and the findings per code and severity.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::Value;

use super::{bundled, ok, whole};
use crate::common::{i64s, strs};

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn every_run_is_described_as_its_rows_say() {
    let root = bundled();
    let doc: Value =
        serde_json::from_str(&ok(&["info", root.to_str().unwrap(), "--format", "json"])).unwrap();
    let runs_t = whole(root, "runs");
    let steps_t = whole(root, "steps");
    let acts = whole(root, "gpu_activities");
    let diags = whole(root, "diagnostics");
    let runs = doc["runs"].as_array().unwrap();
    let labels: BTreeSet<String> = strs(&runs_t, "run").into_iter().flatten().collect();
    assert_eq!(runs.len(), labels.len());
    assert!(runs.len() >= 10, "{}", runs.len());
    let mut logs_beside_traces = 0;
    for r in runs {
        let run = r["run"].as_str().unwrap();
        let rows = |df: &polars::prelude::DataFrame| -> Vec<usize> {
            strs(df, "run")
                .iter()
                .enumerate()
                .filter(|(_, x)| x.as_deref() == Some(run))
                .map(|(i, _)| i)
                .collect()
        };
        let f = rows(&runs_t);
        let set_s = |c: &str| -> Vec<String> {
            let v = strs(&runs_t, c);
            f.iter()
                .filter_map(|&i| v[i].clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let set_i = |c: &str| -> Vec<i64> {
            let v = i64s(&runs_t, c);
            f.iter()
                .filter_map(|&i| v[i])
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        assert_eq!(strings(&r["files"]), set_s("source_path"), "{run}");
        // A JSONL log records no GPU: its row's `unknown` is no platform of the run.
        let (fmt, plat) = (strs(&runs_t, "format"), strs(&runs_t, "platform"));
        let platforms: BTreeSet<String> = f
            .iter()
            .filter(|&&i| fmt[i].as_deref() != Some("jsonl"))
            .filter_map(|&i| plat[i].clone())
            .collect();
        let with_logs = f.iter().any(|&i| fmt[i].as_deref() == Some("jsonl"))
            && f.iter().any(|&i| fmt[i].as_deref() != Some("jsonl"));
        logs_beside_traces += usize::from(with_logs);
        assert_eq!(
            strings(&r["platforms"]),
            platforms.into_iter().collect::<Vec<_>>(),
            "{run}"
        );
        assert_eq!(strings(&r["formats"]), set_s("format"), "{run}");
        assert_eq!(strings(&r["devices"]), set_s("device_name"), "{run}");
        assert_eq!(ints(&r["ranks"]), set_i("rank"), "{run}");
        assert_eq!(ints(&r["world_sizes"]), set_i("world_size"), "{run}");
        assert_eq!(r["first_ns"].as_i64(), set_i("first_ns").first().copied());
        assert_eq!(r["last_ns"].as_i64(), set_i("last_ns").last().copied());
        assert_eq!(
            r["workload"].as_str().unwrap(),
            run.rsplit('/').next().unwrap()
        );
        // Real steps only: the steps rows with a number.
        let st = i64s(&steps_t, "step");
        let s: Vec<i64> = rows(&steps_t).iter().filter_map(|&i| st[i]).collect();
        assert_eq!(r["step_rows"].as_i64().unwrap(), s.len() as i64, "{run}");
        assert_eq!(
            ints(&r["steps"]),
            s.iter()
                .copied()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        // Outside steps: null-step activities of ranks that have stepped activities.
        let (ar, astep) = (i64s(&acts, "rank"), i64s(&acts, "step"));
        let a = rows(&acts);
        let stepped: HashSet<i64> = a
            .iter()
            .filter(|&&i| astep[i].is_some())
            .map(|&i| ar[i].unwrap())
            .collect();
        let outside = a
            .iter()
            .filter(|&&i| astep[i].is_none() && stepped.contains(&ar[i].unwrap()))
            .count();
        assert_eq!(
            r["outside_step_activities"].as_i64().unwrap(),
            outside as i64,
            "{run}"
        );
        // Findings: counts summed per code from the diagnostics rows.
        let (code, count) = (strs(&diags, "code"), i64s(&diags, "count"));
        let mut per: BTreeMap<String, i64> = BTreeMap::new();
        for i in rows(&diags) {
            *per.entry(code[i].clone().unwrap()).or_default() += count[i].unwrap();
        }
        let mine: BTreeMap<String, i64> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["code"].as_str().unwrap().to_string(),
                    c["count"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(mine, per, "{run}");
    }
    assert!(
        logs_beside_traces > 0,
        "no run has JSONL logs beside its traces"
    );
}

/// A civil UTC date and time of Unix seconds, counted out year by year and month by month.
fn civil(secs: i64) -> String {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let (mut days, rest) = (secs / 86_400, secs % 86_400);
    let mut y = 1970;
    while days >= if leap(y) { 366 } else { 365 } {
        days -= if leap(y) { 366 } else { 365 };
        y += 1;
    }
    let months = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut m = 0;
    while days >= months[m] {
        days -= months[m];
        m += 1;
    }
    format!(
        "{y:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        m + 1,
        days + 1,
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The terminal's span is a length in a human unit and a UTC start, not raw epoch
/// nanoseconds: the length read back is last_ns - first_ns to the printed decimals, in the
/// largest unit that keeps it at least 1; the start is first_ns as a date counted out here.
#[test]
fn span_reads_as_a_length_and_a_utc_start() {
    let root = bundled();
    let ds = root.to_str().unwrap();
    let doc: Value = serde_json::from_str(&ok(&["info", ds, "--format", "json"])).unwrap();
    let text = ok(&["info", ds]);
    let blocks: Vec<&str> = text.split("\nrun ").collect();
    let mut dated = 0;
    for r in doc["runs"].as_array().unwrap() {
        let run = r["run"].as_str().unwrap();
        let (a, b) = (
            r["first_ns"].as_i64().unwrap(),
            r["last_ns"].as_i64().unwrap(),
        );
        let block = blocks
            .iter()
            .find(|b| {
                b.trim_start_matches("run ")
                    .starts_with(&format!("{run}\n"))
            })
            .unwrap_or_else(|| panic!("no block for {run} in\n{text}"));
        assert!(
            !block.contains(&a.to_string()),
            "raw first_ns printed:\n{block}"
        );
        let span = block
            .split("; span ")
            .nth(1)
            .unwrap()
            .lines()
            .next()
            .unwrap();
        let (len, from) = span.split_once(" from ").unwrap();
        // `V UNIT`, or `M min S s` past a minute: back to ns, with the printed precision.
        let words: Vec<&str> = len.split(' ').collect();
        let (ns, tolerance) = match words[..] {
            [m, "min", s, "s"] => {
                let s: f64 = s.parse().unwrap();
                assert!(s < 60.0, "{run}: {len}");
                (m.parse::<f64>().unwrap() * 60e9 + s * 1e9, 0.1e9)
            }
            [v, unit] => {
                let v: f64 = v.parse().unwrap();
                let scale = match unit {
                    "ns" => 1.0,
                    "µs" => 1e3,
                    "ms" => 1e6,
                    "s" => 1e9,
                    other => panic!("{run}: unit {other} for a span of {} ns", b - a),
                };
                // The largest unit that keeps the value at least 1.
                assert!(v >= 1.0 || unit == "ns", "{run}: {len}");
                assert!(v < 1000.0 || unit == "s", "{run}: {len}");
                (v * scale, 0.0005 * scale + 0.5)
            }
            _ => panic!("{run}: span `{len}`"),
        };
        assert!(
            (ns - (b - a) as f64).abs() <= tolerance,
            "{run}: {len} for {} ns",
            b - a
        );
        if a >= 946_684_800_000_000_000 {
            let us = a.rem_euclid(1_000_000_000) / 1000;
            let want = format!("{}.{us:06} UTC", civil(a.div_euclid(1_000_000_000)));
            assert_eq!(from, want, "{run}");
            dated += 1;
        } else {
            assert!(from.ends_with("on the trace's own clock"), "{run}: {from}");
        }
    }
    assert!(dated > 0, "no run on a wall clock");
}

/// Severities: what a healthy trace has on purpose is noise, the rest trouble; trouble comes
/// first; --diagnostics lists every row of the run.
#[test]
fn findings_carry_their_severity_and_are_listed_with_diagnostics() {
    let root = bundled();
    let ds = root.to_str().unwrap();
    let doc: Value = serde_json::from_str(&ok(&["info", ds, "--format", "json"])).unwrap();
    let mut seen = BTreeMap::new();
    for r in doc["runs"].as_array().unwrap() {
        let sev: Vec<&str> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["severity"].as_str().unwrap())
            .collect();
        assert!(
            sev.windows(2)
                .all(|w| !(w[0] == "noise" && w[1] == "trouble")),
            "trouble first: {sev:?}"
        );
        for c in r["findings"].as_array().unwrap() {
            seen.insert(
                c["code"].as_str().unwrap().to_string(),
                c["severity"].as_str().unwrap().to_string(),
            );
            assert!(!c["example"].as_str().unwrap().is_empty());
        }
    }
    let expected = [
        ("outside_steps", "noise"),
        ("jsonl_non_numeric", "noise"),
        ("kernel_without_launch", "trouble"),
        ("same_stream_overlap", "trouble"),
    ];
    let mut hits = 0;
    for (code, sev) in expected {
        if let Some(s) = seen.get(code) {
            assert_eq!(s, sev, "{code}");
            hits += 1;
        }
    }
    assert!(hits >= 2, "{seen:?}");
    let run = "fsdp/fsdp_default";
    let list: Value = serde_json::from_str(&ok(&[
        "info",
        ds,
        "--run",
        run,
        "--diagnostics",
        "--format",
        "json",
    ]))
    .unwrap();
    let diags = whole(root, "diagnostics");
    let n = strs(&diags, "run")
        .iter()
        .filter(|r| r.as_deref() == Some(run))
        .count();
    assert_eq!(list["findings"].as_array().unwrap().len(), n);
    let text = ok(&["info", ds, "--run", run]);
    assert!(text.starts_with(&format!("run {run}\n")), "{text}");
    assert!(text.contains("findings: "), "{text}");
}

/// The run report's header names a run's platform as `aorta info` does: the traces', not the
/// `unknown` of the JSONL logs beside them (h200_fsdp2: two CUDA traces, two step logs).
#[test]
fn the_report_header_names_the_traces_platform_not_the_logs() {
    let Some(root) = crate::common::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    crate::common::cli::ingest_ok(&[&root.join("kineto/cuda/h200_fsdp2")], &ds, &["-q"]);
    let d = ds.to_str().unwrap();
    let formats: BTreeSet<String> = strs(&whole(&ds, "runs"), "format")
        .into_iter()
        .flatten()
        .collect();
    assert!(
        formats.contains("jsonl") && formats.contains("kineto"),
        "{formats:?}"
    );
    let doc: Value = serde_json::from_str(&ok(&["info", d, "--format", "json"])).unwrap();
    assert_eq!(strings(&doc["runs"][0]["platforms"]), ["cuda"]);
    let page = dir.path().join("r.html");
    ok(&["report", d, "-o", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<tr><td>h200_fsdp2</td><td>cuda</td>"),
        "{}",
        &html[html.find("<table>").unwrap_or(0)..][..400.min(html.len())]
    );
}

/// Ranks print as ranges where three or more are consecutive (a 1,000-rank job is `0–999`,
/// not a thousand numbers): the 4-rank fixture gives `0–3 (4)`, and the JSON keeps the list.
#[test]
fn consecutive_ranks_print_as_a_range() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let traces = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads/traces/four-gpu/overlap-bench_clean");
    crate::common::cli::ingest_ok(&[&traces], &ds, &["-q"]);
    let o = crate::common::cli::aorta(&["info".as_ref(), ds.as_os_str()]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("  ranks 0–3 (4); world size 4"), "{text}");
    let o = crate::common::cli::aorta(&[
        "info".as_ref(),
        ds.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ints(&doc["runs"][0]["ranks"]), [0, 1, 2, 3]);
}
