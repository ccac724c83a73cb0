//! `aorta report` from the outside: the numbers on the page are `aorta overlap`'s (compared
//! with its JSON output, formatted here independently), the category times are sums of the
//! dataset's durations (summed here row by row), the page loads nothing from the network, and
//! bad input gives one error line and no HTML.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;

use crate::common::cli::{aorta, code, ingest_ok, overlap_json, stderr};
use crate::common::*;
use polars::prelude::*;
use serde_json::Value;

type HtmlTable = (Vec<String>, Vec<Vec<String>>);

/// The page's tables: header cells, then rows of cell texts.
fn html_tables(html: &str) -> Vec<HtmlTable> {
    let table = regex::Regex::new(r"(?s)<table>(.*?)</table>").unwrap();
    let tr = regex::Regex::new(r"(?s)<tr>(.*?)</tr>").unwrap();
    let td = regex::Regex::new(r"(?s)<t[hd][^>]*>(.*?)</t[hd]>").unwrap();
    table
        .captures_iter(html)
        .map(|t| {
            let mut rows = tr.captures_iter(&t[1]).map(|r| {
                td.captures_iter(&r[1])
                    .map(|c| c[1].to_string())
                    .collect::<Vec<_>>()
            });
            let header = rows.next().unwrap_or_default();
            (header, rows.collect())
        })
        .collect()
}

/// The table whose header starts with `first` columns.
fn table_starting<'a>(tables: &'a [HtmlTable], first: &[&str]) -> &'a HtmlTable {
    tables
        .iter()
        .find(|t| t.0.len() >= first.len() && t.0[..first.len()] == *first)
        .unwrap_or_else(|| panic!("no table with columns {first:?}"))
}

fn report(ds: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut a: Vec<&OsStr> = vec!["report".as_ref(), ds.as_os_str(), "-o".as_ref()];
    a.push(out.as_os_str());
    a.extend(extra.iter().map(OsStr::new));
    aorta(&a)
}

fn fsdp2_dataset(dir: &Path) -> Option<std::path::PathBuf> {
    let root = corpus()?;
    let ds = dir.join("ds");
    ingest_ok(&[&root.join("kineto/cuda/h200_fsdp2")], &ds, &["-q"]);
    Some(ds)
}

/// Independent formatting of the JSON's ns and ratios, as `aorta overlap` prints them.
fn ms(v: &Value) -> String {
    v.as_i64()
        .map_or("-".into(), |ns| format!("{:.3}", ns as f64 / 1e6))
}
fn dec(v: &Value, d: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.d$}"))
}

const STEP_HEADER: [&str; 4] = ["run", "rank", "source", "step"];

#[test]
fn overlap_numbers_on_the_page_are_those_of_aorta_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = fsdp2_dataset(dir.path()) else {
        return;
    };
    // Before `aorta overlap`: the report computes the tables itself.
    let first = dir.path().join("first.html");
    let o = report(&ds, &first, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("computed from gpu_activities"), "{out}");
    let html = std::fs::read_to_string(&first).unwrap();
    let tables = html_tables(&html);
    let (header, rows) = table_starting(&tables, &STEP_HEADER);
    let doc = overlap_json(&ds, "step");
    let want = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "one table row per step row");
    assert_eq!(want.len(), 6, "2 ranks × 3 steps");
    let cell =
        |row: &Vec<String>, name: &str| row[header.iter().position(|h| h == name).unwrap()].clone();
    for (row, w) in rows.iter().zip(want) {
        assert_eq!(cell(row, "rank"), w["rank"].to_string());
        assert_eq!(cell(row, "step"), w["step"].to_string());
        assert_eq!(cell(row, "window"), ms(&w["window_ns"]));
        assert_eq!(cell(row, "comm"), ms(&w["comm_ns"]));
        assert_eq!(cell(row, "exposed_comm"), ms(&w["exposed_comm_ns"]));
        assert_eq!(cell(row, "compute∩comm"), ms(&w["compute_comm_overlap_ns"]));
        assert_eq!(
            cell(row, "tp_overlap_ratio"),
            dec(&w["tp_overlap_ratio"], 3)
        );
        assert_eq!(cell(row, "comm_hidden_pct"), dec(&w["comm_hidden_pct"], 1));
    }
    // The same numbers appear in `aorta overlap`'s own text table.
    let text = aorta(&["overlap".as_ref(), ds.as_os_str()]);
    let text = String::from_utf8(text.stdout).unwrap();
    for w in want {
        assert!(text.contains(&ms(&w["exposed_comm_ns"])), "{text}");
    }
    // Collective kinds over the whole window.
    let coll = overlap_json(&ds, "collective");
    let (_, crow) = table_starting(&tables, &["run", "rank", "comm_op", "kernels"]);
    let whole: Vec<&Value> = coll["runs"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["level"] == "rank")
        .collect();
    assert_eq!(crow.len(), whole.len());
    for (row, w) in crow.iter().zip(whole) {
        assert_eq!(row[2], w["comm_op"].as_str().unwrap());
        assert_eq!(row[3], w["activity_count"].to_string());
        assert_eq!(
            (row[4].clone(), row[5].clone()),
            (ms(&w["comm_ns"]), ms(&w["exposed_comm_ns"]))
        );
    }
    // After `aorta overlap` wrote the tables, the report reads them: same table.
    let second = dir.path().join("second.html");
    let o = report(&ds, &second, &[]);
    assert!(String::from_utf8(o.stdout)
        .unwrap()
        .contains("the dataset's overlap tables"));
    let t2 = html_tables(&std::fs::read_to_string(&second).unwrap());
    assert_eq!(
        table_starting(&t2, &STEP_HEADER),
        table_starting(&tables, &STEP_HEADER)
    );
    // Re-ingesting rewrites the activities but not the overlap tables: the report must not
    // trust them any more.
    let root = corpus().unwrap();
    ingest_ok(
        &[&root.join("kineto/cuda/h200_fsdp2")],
        &ds,
        &["-q", "--force"],
    );
    let o = report(&ds, &second, &[]);
    assert!(String::from_utf8(o.stdout)
        .unwrap()
        .contains("computed from gpu_activities"));
}

/// The dataset's gpu_activities, read with polars directly.
fn activities(ds: &Path) -> DataFrame {
    LazyFrame::scan_parquet(
        PlRefPath::new(format!("{}/gpu_activities/**/*.parquet", ds.display()).as_str()),
        ScanArgsParquet::default(),
    )
    .unwrap()
    .collect()
    .unwrap()
}

/// Each rank's clock offset (ns to subtract) as `aorta collectives` prints it.
fn offsets(ds: &Path) -> BTreeMap<i64, i64> {
    let doc = crate::common::cli::collectives_json(ds, "rank");
    doc["runs"][0]["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_i64().unwrap(),
                r["clock_offset_ns"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

/// The activities of `step` on every rank, as (rank, start, end) on rank 0's clock.
fn step_activities(ds: &Path, step: i64) -> Vec<(i64, i64, i64)> {
    let off = offsets(ds);
    let acts = activities(ds);
    let rank = acts.column("rank").unwrap().cast(&DataType::Int64).unwrap();
    let (rank, st) = (
        rank.i64().unwrap(),
        acts.column("step").unwrap().i64().unwrap(),
    );
    let (s, e) = (
        acts.column("start_ns").unwrap().i64().unwrap(),
        acts.column("end_ns").unwrap().i64().unwrap(),
    );
    (0..acts.height())
        .filter(|&i| st.get(i) == Some(step))
        .map(|i| {
            let r = rank.get(i).unwrap();
            let o = off.get(&r).copied().unwrap_or(0);
            (r, s.get(i).unwrap() - o, e.get(i).unwrap() - o)
        })
        .collect()
}

/// `--from/--to`: only the activities overlapping the window (ms from the step's first
/// activity on any rank, clocks aligned) are drawn; the count is checked against the
/// dataset's rows, filtered here. A window with nothing in it is an error that says where
/// the activity lies.
#[test]
fn a_time_window_draws_the_activities_overlapping_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = fsdp2_dataset(dir.path()) else {
        return;
    };
    let out = dir.path().join("w.html");
    let o = report(&ds, &out, &["--step", "4", "--from", "10", "--to", "12.5"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mine = step_activities(&ds, 4);
    assert_eq!(
        mine.iter()
            .map(|k| k.0)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        2,
        "both ranks"
    );
    let origin = mine.iter().map(|k| k.1).min().unwrap();
    let within = mine
        .iter()
        .filter(|(_, a, b)| *b >= origin + 10_000_000 && *a <= origin + 12_500_000)
        .count();
    assert!(
        within > 0 && within < mine.len(),
        "{within} of {}",
        mine.len()
    );
    let html = std::fs::read_to_string(&out).unwrap();
    let note = format!(
        "Window --from 10 --to 12.5 (ms from the first activity): {within} of {} activities",
        mine.len()
    );
    assert!(html.contains(&note), "want `{note}`");
    // The timeline's bars are exactly those activities.
    let timeline = &crate::common::browser::plots(&html)[0];
    let bars: usize = timeline["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["x"].as_array().unwrap().len())
        .sum();
    assert_eq!(bars, within);
    // --from without --to is a usage error.
    let o = report(&ds, &out, &["--from", "10"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    // A window past the step's end: one error line with where the activity lies, in ms from
    // the step's first activity, and no page.
    let span = mine.iter().map(|k| k.2).max().unwrap() - origin;
    let empty = dir.path().join("empty.html");
    let o = report(
        &ds,
        &empty,
        &["--step", "4", "--from", "5000", "--to", "6000"],
    );
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    let want = format!(
        "no GPU activity between --from 5000 and --to 6000 ms; run `h200_fsdp2` step 4 has \
         activity from 0.000 to {:.3} ms",
        span as f64 / 1e6
    );
    assert!(err.contains(&want), "want `{want}` in {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!empty.exists());
}

#[test]
fn category_time_is_the_sum_of_durations_and_the_timeline_step_is_the_median() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = fsdp2_dataset(dir.path()) else {
        return;
    };
    let out = dir.path().join("r.html");
    let o = report(&ds, &out, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout).unwrap();
    // Sum end_ns − start_ns per (rank, step, category), row by row.
    let acts = activities(&ds);
    let rank = acts.column("rank").unwrap().cast(&DataType::Int64).unwrap();
    let rank = rank.i64().unwrap();
    let step = acts.column("step").unwrap().i64().unwrap();
    let cat = acts.column("category").unwrap().str().unwrap();
    let (s, e) = (
        acts.column("start_ns").unwrap().i64().unwrap(),
        acts.column("end_ns").unwrap().i64().unwrap(),
    );
    let mut sums: BTreeMap<(i64, Option<i64>, String), i64> = BTreeMap::new();
    for i in 0..acts.height() {
        let k = (
            rank.get(i).unwrap(),
            step.get(i),
            cat.get(i).unwrap().to_string(),
        );
        *sums.entry(k).or_default() += e.get(i).unwrap() - s.get(i).unwrap();
    }
    let html = std::fs::read_to_string(&out).unwrap();
    let tables = html_tables(&html);
    let (header, rows) = table_starting(&tables, &["run", "rank", "step"]);
    let mut seen = 0;
    for ((rk, st, c), ns) in &sums {
        let row = rows
            .iter()
            .find(|r| r[1] == rk.to_string() && r[2] == st.map_or("-".into(), |s| s.to_string()))
            .unwrap_or_else(|| panic!("no category row for rank {rk} step {st:?}"));
        let col = header.iter().position(|h| h == c).unwrap();
        assert_eq!(
            row[col],
            format!("{:.3}", *ns as f64 / 1e6),
            "{c} rank {rk} step {st:?}"
        );
        seen += 1;
    }
    assert!(seen >= 12, "several categories per step");
    // The timeline: rank 0's step whose window is the median of its three, every kernel drawn.
    let doc = overlap_json(&ds, "step");
    let mut r0: Vec<(i64, i64)> = doc["runs"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rank"] == 0)
        .map(|r| {
            (
                r["window_ns"].as_i64().unwrap(),
                r["step"].as_i64().unwrap(),
            )
        })
        .collect();
    r0.sort();
    let median = r0[1].1;
    let n = sums
        .iter()
        .filter(|((rk, st, _), _)| *rk == 0 && *st == Some(median))
        .count();
    assert!(n > 0);
    // Every rank's activities of that step, both ranks drawn.
    let kernels = (0..acts.height())
        .filter(|&i| step.get(i) == Some(median))
        .count();
    let line = format!(
        "ranks 0, 1 step {median} (median-duration step), {kernels} of {kernels} kernels drawn"
    );
    assert!(stdout.contains(&line), "want `{line}` in\n{stdout}");
}

#[test]
fn the_page_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = fsdp2_dataset(dir.path()) else {
        return;
    };
    let out = dir.path().join("r.html");
    assert_eq!(code(&report(&ds, &out, &["--rank", "1", "--step", "4"])), 0);
    let html = std::fs::read_to_string(&out).unwrap();
    let external = regex::Regex::new(
        r#"(?i)<(script|link|img|iframe)[^>]*(src|href)\s*=\s*["']?(https?:)?//"#,
    )
    .unwrap();
    assert!(
        external.find(&html).is_none(),
        "external resource: {:?}",
        external.find(&html)
    );
    assert!(html.contains("Plotly.newPlot"));
    let tables = html_tables(&html);
    let (_, rows) = table_starting(&tables, &STEP_HEADER);
    assert!(rows.iter().all(|r| r[1] == "1"), "--rank 1 only");
    assert!(html.contains("rank 1 step 4 (--step)"));
}

#[test]
fn bad_input_is_one_error_line_and_no_html() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = fsdp2_dataset(dir.path()) else {
        return;
    };
    let out = dir.path().join("out/r.html");
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let cases: [(&Path, &[&str], &str); 5] = [
        (&dir.path().join("nope"), &[], "nope: not an aorta dataset"),
        (&ds, &["--run", "rocm"], "unknown run `rocm`"),
        (
            &ds,
            &["--rank", "7"],
            "no rank 7 in run(s) h200_fsdp2 (ranks: 0, 1)",
        ),
        (&ds, &["--step", "99"], "has no step 99 (steps: "),
        (
            &ds,
            &["--rank", "1", "--step", "42"],
            "rank 1 has no step 42",
        ),
    ];
    for (path, extra, msg) in cases {
        let o = report(path, &out, extra);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("aorta: error: ") && err.contains(msg),
            "{extra:?}: {err}"
        );
        assert!(
            std::fs::read_dir(dir.path().join("out"))
                .unwrap()
                .next()
                .is_none(),
            "no file left"
        );
    }
    // Bad input into folders that do not exist: nothing is created.
    let o = report(&ds, &dir.path().join("new/sub/r.html"), &["--rank", "7"]);
    assert_eq!(code(&o), 2);
    assert!(!dir.path().join("new").exists(), "no folder left");
    // Good input: the folders are created.
    let o = report(&ds, &dir.path().join("new/sub/r.html"), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(dir.path().join("new/sub/r.html").is_file());
    // A parent that is a file: one error line naming it.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let o = report(&ds, &dir.path().join("file/r.html"), &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("file"), "{}", stderr(&o));
}

/// 5000 kernels in one (null) step, more than the timeline draws: 4000 of 1 µs and 1000 of
/// 0.5 µs (every fifth). The 4000 longest are exactly the 1 µs ones.
#[test]
fn a_step_over_the_kernel_cap_draws_the_longest_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let events: Vec<String> = (0..5000)
        .map(|i| {
            let dur = if i % 5 == 0 { "0.5" } else { "1" };
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {}, "dur": {dur}, "args": {{"stream": 7}}}}"#,
                2 * i
            )
        })
        .collect();
    let trace = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
    std::fs::write(input.join("cap.json"), trace).unwrap();
    let opts = aorta_ingest::Options {
        out: dir.path().join("ds"),
        ..Default::default()
    };
    aorta_ingest::ingest(&[input], &opts, &Default::default()).unwrap();
    let out = dir.path().join("cap.html");
    let r = aorta_reports::run_report(&opts.out, &Default::default(), &out).unwrap();
    assert_eq!((r.drawn, r.total), (4000, 5000));
    assert_eq!(r.timeline.map(|t| t.step), Some(None), "the null step");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("Capped: showing the 4000 longest of 5000 activities."));
    // The timeline's bars: durations in ms, all 0.001.
    let re =
        regex::Regex::new(r#"(?s)Plotly\.newPlot\("plot-1", (\{.*?\})\);\s*</script>"#).unwrap();
    let plot: Value = serde_json::from_str(&re.captures(&html).unwrap()[1]).unwrap();
    let x: Vec<f64> = plot["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["x"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
        })
        .collect();
    assert_eq!(x.len(), 4000);
    assert!(
        x.iter().all(|&d| (d - 0.001).abs() < 1e-12),
        "only the 1 µs kernels"
    );
}

#[test]
fn help_shows_examples() {
    let o = aorta(&["report".as_ref(), "--help".as_ref()]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("aorta report ds --rank 1 --step 7"));
    assert!(text.contains("docs/REPORTS.md"));
}

/// The Python aorta tool's JSONL log alone: no GPU activities, so no timeline, but the
/// overlap rows of its two iterations (window 147.500 ms each, as `aorta overlap` prints).
#[test]
fn jsonl_logs_alone_give_a_page_without_timeline() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(
        &[&root.join(crate::common::cli::METRICS_JSONL)],
        &ds,
        &["-q", "--label", "py"],
    );
    let out = dir.path().join("py.html");
    let o = report(&ds, &out, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(String::from_utf8(o.stdout)
        .unwrap()
        .contains("timeline: none"));
    let html = std::fs::read_to_string(&out).unwrap();
    let tables = html_tables(&html);
    let (_, rows) = table_starting(&tables, &STEP_HEADER);
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().all(|r| r[2] == "jsonl" && r[4] == "147.500"),
        "{rows:?}"
    );
    let o = report(&ds, &dir.path().join("step.html"), &["--step", "0"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no GPU activities in the reported ranks"));
    assert!(!dir.path().join("step.html").exists());
}
