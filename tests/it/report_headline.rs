//! The report's first screen on a 4-rank job with one slowed rank (`bench/gen_collectives.py`:
//! rank 2's compute runs 5, 3 and 4 ms longer before three collectives, on two hosts with
//! different clocks): the headline comes first, its numbers are those `aorta collectives` and
//! `aorta overlap` print for the same dataset (formatted here from their JSON), the timeline
//! draws every rank as its own lane group on one time axis, and long tables are collapsed. A
//! 10-rank job has 8 of its ranks drawn, sampled evenly, and the page names them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::browser::plots;
use crate::common::cli::{aorta, code, collectives_json, ingest_ok, overlap_json, stderr};
use crate::common::corpus;

/// The 4-rank job's traces under `dir/traces`, ingested into `dir/ds` with the collective
/// and overlap tables written, as a user would before `aorta report`.
fn straggler_dataset(dir: &Path) -> Option<PathBuf> {
    job_dataset(
        dir,
        &[
            "--ranks",
            "4",
            "--instances",
            "144",
            "--hosts-of",
            "2",
            "--delay",
            "2:10:5",
            "--delay",
            "2:40:3",
            "--delay",
            "2:100:4",
        ],
    )
}

/// A job of `gen_collectives.py` with `args` (two kept compute kernels per collective).
fn job_dataset(dir: &Path, args: &[&str]) -> Option<PathBuf> {
    let root = corpus()?;
    let traces = dir.join("traces");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen_collectives.py");
    let o = Command::new("python3")
        .arg(&script)
        .args(args)
        .args(["--compute-per-collective", "2"])
        .arg("--source")
        .arg(root.join("kineto/cuda/h200_fsdp2/rank0.pt.trace.json.gz"))
        .arg("--out")
        .arg(&traces)
        .output()
        .expect("python3 runs bench/gen_collectives.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ds = dir.join("ds");
    ingest_ok(&[&traces], &ds, &["--label", "job", "-q"]);
    for cmd in ["collectives", "overlap"] {
        let o = aorta(&[cmd.as_ref(), ds.as_os_str()]);
        assert_eq!(code(&o), 0, "aorta {cmd}: {}", stderr(&o));
    }
    Some(ds)
}

fn ms(ns: &Value) -> String {
    format!("{:.3}", ns.as_i64().unwrap() as f64 / 1e6)
}

fn pct(v: &Value) -> String {
    format!("{:.1}", v.as_f64().unwrap())
}

/// `aorta report DS -o PAGE`, which must succeed: the page.
fn report_page(ds: &Path, page: &Path) -> String {
    let o = aorta(&[
        "report".as_ref(),
        ds.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::fs::read_to_string(page).unwrap()
}

/// The headline block of the page, as HTML.
fn headline(html: &str) -> &str {
    let start = html
        .find("<div class=\"headline\"")
        .expect("a headline block");
    let end = start + html[start..].find("</div>").unwrap();
    &html[start..end]
}

/// Text with the page's escapes undone (only `'` and `&` occur in the verdicts).
fn text(html: &str) -> String {
    html.replace("&#39;", "'").replace("&amp;", "&")
}

#[test]
fn the_headline_comes_first_with_the_cli_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ds) = straggler_dataset(dir.path()) else {
        return;
    };
    // Into folders that do not exist yet.
    let html_path = dir.path().join("new/sub/report.html");
    let html = report_page(&ds, &html_path);
    let block = headline(&html);
    let at = html.find(block).unwrap();
    let head = &text(block);
    for later in ["<h2", "<table>", "class=\"chart\""] {
        assert!(
            html.find(later).is_some_and(|i| i > at),
            "the headline comes before the first {later}"
        );
    }

    // Who is late: `aorta collectives`' first-placed straggler and the others' wait share.
    let coll = collectives_json(&ds, "rank");
    let rows = coll["runs"][0]["stragglers"].as_array().unwrap();
    let top = rows.iter().find(|r| r["straggler_rank"] == 1).unwrap();
    assert_eq!(top["rank"], 2, "the slowed rank is named");
    let want = format!(
        "Rank 2 is the straggler: last to arrive at {} of {} collectives, it made the others \
         wait {} ms in all (caused)",
        top["times_last"],
        top["instances"],
        ms(&top["caused_ns"])
    );
    assert!(head.contains(&want), "want `{want}` in\n{head}");
    let waits: Vec<f64> = rows
        .iter()
        .filter(|r| r["rank"] != 2)
        .map(|r| r["wait_pct"].as_f64().unwrap())
        .collect();
    let lo = waits.iter().copied().fold(f64::MAX, f64::min);
    let hi = waits.iter().copied().fold(f64::MIN, f64::max);
    let (lo, hi) = (format!("{lo:.1}"), format!("{hi:.1}"));
    let spread = if lo == hi { lo } else { format!("{lo}–{hi}") };
    let want =
        format!("the other 3 ranks spent {spread} % of their collective kernel time waiting");
    assert!(head.contains(&want), "want `{want}` in\n{head}");
    assert!(waits.iter().all(|w| (0.0..=100.0).contains(w)));

    // Exposed comm: `aorta overlap --by rank`'s rank with the most, and its waiting.
    let ov = overlap_json(&ds, "rank");
    let ranks = ov["runs"][0]["rows"].as_array().unwrap();
    let worst = ranks
        .iter()
        .max_by_key(|r| (r["exposed_comm_ns"].as_i64(), -r["rank"].as_i64().unwrap()))
        .unwrap();
    let want = format!(
        "Exposed communication: at most {} ms per rank, on rank {} (of its {} ms of comm in a \
         {} ms window; {} % hidden under compute). Of that rank's comm, {} ms was waiting for \
         the last rank to arrive, and {} ms of transfer ran with no compute",
        ms(&worst["exposed_comm_ns"]),
        worst["rank"],
        ms(&worst["comm_ns"]),
        ms(&worst["window_ns"]),
        pct(&worst["comm_hidden_pct"]),
        ms(&worst["comm_wait_ns"]),
        ms(&worst["exposed_transfer_ns"]),
    );
    assert!(head.contains(&want), "want `{want}` in\n{head}");

    // Every verdict links to a section of the page.
    let link = regex::Regex::new(r##"<a href="#([^"]+)">"##).unwrap();
    let links: Vec<&str> = link
        .captures_iter(block)
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert!(links.len() >= 4, "{links:?}");
    for l in links {
        assert!(html.contains(&format!("id=\"{l}\"")), "no section #{l}");
    }

    // The timeline: the four ranks, one lane group each (lanes `rank R · stream S` in rank
    // order, one band per rank), every bar on a lane of its rank.
    let tl = &plots(&html)[0];
    let lanes: Vec<&str> = tl["layout"]["yaxis"]["categoryarray"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let rank_of = |lane: &str| -> i64 {
        lane.strip_prefix("rank ")
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut groups: Vec<i64> = lanes.iter().map(|l| rank_of(l)).collect();
    groups.dedup();
    assert_eq!(groups, vec![0, 1, 2, 3], "{lanes:?}");
    assert_eq!(tl["layout"]["shapes"].as_array().unwrap().len(), 4);
    for t in tl["data"].as_array().unwrap() {
        for y in t["y"].as_array().unwrap() {
            assert!(lanes.contains(&y.as_str().unwrap()), "{y}");
        }
    }

    // 4 ranks × 6 steps: the step tables are longer than 20 rows, so they are collapsed.
    let details = regex::Regex::new(r"(?s)<details><summary>Table: (\d+) rows").unwrap();
    let n: Vec<usize> = details
        .captures_iter(&html)
        .map(|c| c[1].parse().unwrap())
        .collect();
    assert!(n.contains(&24), "the 24 step rows collapsed: {n:?}");
    let table = regex::Regex::new(r"(?s)<table>(.*?)</table>").unwrap();
    for t in table.captures_iter(&html) {
        let rows = t[1].matches("<tr>").count() - 1;
        let before = &html[..t.get(0).unwrap().start()];
        let open = before.rfind("<details>") > before.rfind("</details>");
        assert_eq!(rows > 20, open, "a table of {rows} rows");
    }
}

/// Ten ranks, more than the timeline draws: eight, sampled evenly with the first and the
/// last, one lane group each, and the page names them. Rank 9, the last, is the slowed one.
#[test]
fn a_larger_job_draws_sampled_ranks_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--ranks",
        "10",
        "--instances",
        "24",
        "--hosts-of",
        "5",
        "--delay",
        "9:5:2",
    ];
    let Some(ds) = job_dataset(dir.path(), &args) else {
        return;
    };
    let html_path = dir.path().join("r.html");
    let html = report_page(&ds, &html_path);
    // i × 9 / 7 for i in 0..8.
    let drawn = [0, 1, 2, 3, 5, 6, 7, 9];
    let note = "8 of the 10 ranks with this step are drawn, sampled evenly (the first and the \
                last included): ranks 0, 1, 2, 3, 5, 6, 7, 9.";
    assert!(html.contains(note), "want `{note}`");
    let tl = &plots(&html)[0];
    let mut groups: Vec<i64> = tl["layout"]["yaxis"]["categoryarray"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let l = l.as_str().unwrap().strip_prefix("rank ").unwrap();
            l.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    groups.dedup();
    assert_eq!(groups, drawn);
    assert_eq!(tl["layout"]["shapes"].as_array().unwrap().len(), 8);
    assert!(text(headline(&html)).contains("Rank 9 is the straggler"));
}

/// `aorta <args> --format json`, which must succeed.
fn json(args: &[&std::ffi::OsStr]) -> Value {
    let mut a = args.to_vec();
    a.extend([
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    let o = aorta(&a);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The corpus's 2-rank FSDP2 job: the idle verdict is `aorta breakdown`'s idlest rank and
/// its largest idle kind, the MFU verdict the range of `aorta perf --by step`'s rank rows.
#[test]
fn idle_and_mfu_verdicts_are_those_of_breakdown_and_perf() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(&[&root.join("kineto/cuda/h200_fsdp2")], &ds, &["-q"]);
    let html_path = dir.path().join("r.html");
    let html = report_page(&ds, &html_path);
    let head = text(headline(&html));

    let b = json(&["breakdown".as_ref(), ds.as_os_str()]);
    let idlest = b["rows"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|x, y| {
            let p = |v: &Value| v["idle_pct"].as_f64().unwrap();
            p(x).total_cmp(&p(y))
        })
        .unwrap();
    let kinds = [
        ("host-wait", "host_wait_ns"),
        ("kernel-wait", "kernel_wait_ns"),
        ("other", "other_idle_ns"),
    ];
    let (kind, col) = kinds
        .iter()
        .max_by_key(|k| idlest[k.1].as_i64().unwrap())
        .unwrap();
    let want = format!(
        "Idle: at most {} % of a rank's window, on rank {} ({} ms of {} ms), mostly {kind} ({} ms",
        pct(&idlest["idle_pct"]),
        idlest["rank"],
        ms(&idlest["idle_ns"]),
        ms(&idlest["window_ns"]),
        ms(&idlest[*col]),
    );
    assert!(head.contains(&want), "want `{want}` in\n{head}");

    let p = json(&[
        "perf".as_ref(),
        ds.as_os_str(),
        "--by".as_ref(),
        "step".as_ref(),
    ]);
    let mfu: Vec<f64> = p["runs"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["level"] == "rank")
        .map(|r| r["mfu_pct"].as_f64().unwrap())
        .collect();
    assert_eq!(mfu.len(), 2);
    let lo = format!("{:.1}", mfu.iter().copied().fold(f64::MAX, f64::min));
    let hi = format!("{:.1}", mfu.iter().copied().fold(f64::MIN, f64::max));
    let spread = if lo == hi { lo } else { format!("{lo}–{hi}") };
    let want = format!("MFU: {spread} % over each rank's steps (ranks 0, 1; bf16 on H200)");
    assert!(head.contains(&want), "want `{want}` in\n{head}");
}
