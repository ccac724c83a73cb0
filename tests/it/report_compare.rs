//! The compare page from hand-made `aorta compare` tables (tests/it/common/compare_fixture.rs):
//! the values drawn and tabulated are the ones computed by hand there, the top 20 operators
//! are chosen by |diff|, and a missing table is one error naming it, with no page written.

use crate::common::browser::{nums, plots, trace};
use crate::common::compare_fixture::{self, TABLES};

fn render() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    compare_fixture::write_all(dir.path());
    let out = dir.path().join("compare.html");
    assert_eq!(aorta_reports::compare_report(dir.path(), &out).unwrap(), 5);
    let html = std::fs::read_to_string(&out).unwrap();
    (dir, html)
}

#[test]
fn steps_are_paired_by_position_with_the_median_over_ranks() {
    let (_d, html) = render();
    let p = plots(&html);
    let x: Vec<&str> = p[0]["data"][0]["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        x,
        [
            "#1 (ref 1 / cand 11)",
            "#2 (ref 2 / cand 12)",
            "#3 (ref 3 / cand 13)"
        ]
    );
    assert_eq!(nums(&trace(&p[0], "reference")["y"]), [101.0, 111.0, 121.0]);
    assert_eq!(nums(&trace(&p[0], "candidate")["y"]), [130.0, 140.0, 150.0]);
    assert_eq!(nums(&trace(&p[1], "reference")["y"]), [10.0; 3]);
    assert_eq!(nums(&trace(&p[1], "candidate")["y"]), [20.0; 3]);
}

#[test]
fn category_bars_are_medians_with_p10_p90_whiskers() {
    let (_d, html) = render();
    let p = plots(&html);
    let r = trace(&p[2], "reference");
    assert_eq!(r["x"], serde_json::json!(["comm", "gemm"]));
    assert_eq!(nums(&r["y"]), [5.0, 30.0]);
    let up = nums(&r["error_y"]["array"]);
    let down = nums(&r["error_y"]["arrayminus"]);
    assert!(
        (up[1] - 16.0).abs() < 1e-9 && (down[1] - 16.0).abs() < 1e-9,
        "{up:?} {down:?}"
    );
    assert_eq!(nums(&trace(&p[2], "candidate")["y"]), [5.0, 35.0]);
}

#[test]
fn operator_chart_shows_the_top_20_by_absolute_diff_and_marks_unmatched() {
    let (_d, html) = render();
    let p = plots(&html);
    let m = trace(&p[3], "matched");
    let labels: Vec<String> = m["y"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let ops: Vec<&str> = labels
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    // op_24 (candidate only) and op_23 (reference only) lead; then op_22 … op_5.
    let want: Vec<String> = (5..=22).rev().map(|k| format!("op_{k}")).collect();
    assert_eq!(ops, want);
    assert!(
        labels[0].starts_with("3. op_22 [[8192,4096]"),
        "{}",
        labels[0]
    );
    // ratio = (100 + diff) / 100: op_22 → 1.22, op_21 → 0.79.
    let x = nums(&m["x"]);
    assert!(
        (x[0] - 1.22).abs() < 1e-12 && (x[1] - 0.79).abs() < 1e-12,
        "{x:?}"
    );
    assert_eq!(
        trace(&p[3], "candidate only")["y"][0]
            .as_str()
            .unwrap()
            .split(' ')
            .nth(1),
        Some("op_24")
    );
    assert_eq!(
        trace(&p[3], "reference only")["y"][0]
            .as_str()
            .unwrap()
            .split(' ')
            .nth(1),
        Some("op_23")
    );
    assert!(
        !html.contains("op_4 ") && !html.contains(">op_4<"),
        "op_4 is 21st"
    );
    assert!(html.contains("<td>op_24</td>"));
    // Each side's rate and share of its own peak where the operator has FLOPs, else `-`.
    assert!(html.contains("<th>TFLOP/s</th><th>% of own peak</th>"));
    assert!(
        html.contains("<td>612.5 / 800.3</td><td>61.9 / 61.2</td>"),
        "op_22"
    );
    assert!(
        html.contains("<td class=\"n\">-</td><td class=\"n\">-</td><td>candidate_only</td>"),
        "op_24"
    );
    // A log axis centred at 1; the one-sided operators at its edges, not at a fake 0.
    let x = &p[3]["layout"]["xaxis"];
    assert_eq!(x["type"], "log");
    let r = nums(&x["range"]);
    assert!((r[0] + r[1]).abs() < 1e-12 && r[1] > 0.0, "{r:?}");
    let edge = |name: &str| trace(&p[3], name)["x"][0].as_f64().unwrap().log10();
    assert!(edge("candidate only") > 0.9 * r[1] && edge("candidate only") < r[1]);
    assert!(edge("reference only") < 0.9 * r[0] && edge("reference only") > r[0]);
    // Long labels get the margin they need.
    assert_eq!(p[3]["layout"]["yaxis"]["automargin"], true);
}

#[test]
fn tables_show_summary_levels_and_collective_bandwidths() {
    let (_d, html) = render();
    // summary.json's comparison block.
    assert!(html.contains(
        "<td class=\"n\">0.800</td><td class=\"n\">0.600</td><td class=\"n\">-0.200</td>"
    ));
    // compare_levels: median, p10 – p90 per side and the ratio, in the row's unit.
    assert!(html.contains("<td>step_ms</td><td>ms</td><td class=\"n\">100.000</td><td>95.000 – 110.000</td><td class=\"n\">120.000</td><td>118.000 – 130.000</td><td class=\"n\">1.200</td>"));
    assert!(html.contains("<td>gemm</td><td>ms</td><td class=\"n\">60.000</td>"));
    assert!(html.contains("<td class=\"n\">1.167</td>"), "70/60");
    assert!(html.contains("<td>memset</td><td>ms</td><td class=\"n\">0.000</td><td>0.000 – 0.000</td><td class=\"n\">0.500</td><td>0.400 – 0.600</td><td class=\"n\">-</td>"), "null ratio");
    assert!(
        html.contains("<td class=\"n\">146.80</td>"),
        "GB/s with 2 decimals"
    );
    // Collectives: both sides side by side (transfer ms, skew ms, algbw, busbw), time ratio
    // 0.125 / 0.1.
    assert!(html.contains(
        "<td>all_reduce 8 MiB BFloat16 x8</td><td class=\"n\">10</td><td class=\"n\">0.100</td><td class=\"n\">0.020</td><td class=\"n\">83.89</td><td class=\"n\">146.80</td><td class=\"n\">10</td><td class=\"n\">0.125</td><td class=\"n\">-</td><td class=\"n\">67.11</td><td class=\"n\">117.44</td><td class=\"n\">1.250</td>"
    ));
    assert!(html.contains("<td>all_gather 4 MiB - x8</td><td class=\"n\">3</td><td class=\"n\">0.050</td><td class=\"n\">0.010</td><td class=\"n\">-</td><td class=\"n\">-</td><td class=\"n\">-</td>"));
    let p = plots(&html);
    // Bus bandwidth bars: all_gather (no bandwidth on the reference, absent on the candidate)
    // then all_reduce.
    let (r, c) = (
        &trace(&p[4], "reference")["y"],
        &trace(&p[4], "candidate")["y"],
    );
    assert!(r[0].is_null() && c[0].is_null());
    assert!((r[1].as_f64().unwrap() - 146.800_640).abs() < 1e-6, "{r}");
    assert!((c[1].as_f64().unwrap() - 117.440_512).abs() < 1e-6, "{c}");
}

#[test]
fn a_missing_table_is_an_error_naming_it_and_no_page() {
    for missing in TABLES {
        let dir = tempfile::tempdir().unwrap();
        compare_fixture::write_all(dir.path());
        std::fs::remove_file(dir.path().join(format!("{missing}.parquet"))).unwrap();
        let out = dir.path().join("compare.html");
        let err = aorta_reports::compare_report(dir.path(), &out)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{missing}.parquet: missing")),
            "{err}"
        );
        assert!(!out.exists());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("html"))
            .collect();
        assert!(left.is_empty(), "no temporary page left");
    }
    // Without summary.json the page still renders, without the Python block, the sides and
    // the verdict.
    let dir = tempfile::tempdir().unwrap();
    compare_fixture::write_all(dir.path());
    std::fs::remove_file(dir.path().join("summary.json")).unwrap();
    let out = dir.path().join("compare.html");
    aorta_reports::compare_report(dir.path(), &out).unwrap();
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("Python aorta keys") && !html.contains("COMPARABLE"));
    assert!(html.contains("summary.json does not name the runs"));
}

/// Both sides named (run, platform, GPU, world size, versions, files) and the refused pair
/// with its reason, before any chart, from the fixture's summary.json.
#[test]
fn the_page_names_both_sides_and_says_not_comparable() {
    let (_d, html) = render();
    assert!(html.contains("<title>aorta compare — ref (reference) vs cand (candidate)</title>"));
    assert!(html.contains(
        "<td>reference (cuda)</td><td>cuda/llama</td><td>cuda</td><td>NVIDIA H100 80GB HBM3</td>\
         <td class=\"n\">8</td><td>cuda_runtime_version=1</td>\
         <td>rank0.json, rank1.json, rank2.json, and 6 more</td>"
    ));
    assert!(html.contains("<td>candidate (rocm)</td><td>rocm/llama</td><td>rocm</td><td>AMD Instinct MI300X</td><td class=\"n\">4</td>"));
    let verdict = html
        .find("<p class=\"bad\">NOT COMPARABLE")
        .expect("verdict");
    assert!(
        verdict < html.find("plotly-graph-div").unwrap(),
        "before any chart"
    );
    assert!(html.contains("• llama: world sizes differ (8 vs 4)"));
    assert!(html.contains("<td>llama</td><td>cuda/llama</td><td>rocm/llama</td><td class=\"n\">100.000</td><td class=\"n\">120.000</td><td class=\"n\">-</td><td>world sizes differ (8 vs 4)</td>"));
    assert!(html.contains(
        "Unpaired reference runs (no run of the same workload on the other side): cuda/bert."
    ));
    assert!(html.contains("No step ratio to chart"));
}

/// Comparable pairs: each pair's ratio and the geometric mean with its p10–p90 whisker on a
/// log axis symmetric around 1 (ratios 2 and 0.5: geometric mean 1).
#[test]
fn pair_ratios_are_drawn_on_a_log_axis_centred_at_one() {
    let dir = tempfile::tempdir().unwrap();
    compare_fixture::write_all(dir.path());
    let mut s = compare_fixture::summary();
    let p = s.pairs.as_mut().unwrap();
    let mut second = p.pairs[0].clone();
    second.workload = "bert".into();
    p.pairs.push(second);
    (p.pairs[0].step_ratio, p.pairs[1].step_ratio) = (Some(2.0), Some(0.5));
    p.pairs.iter_mut().for_each(|e| e.problems.clear());
    p.step_ratio_geomean = Some(1.0);
    p.step_ratio_spread = Some(aorta_transform::compare::SpreadSummary {
        n: 2,
        median: 1.25,
        p10: 0.65,
        p90: 1.85,
    });
    (p.comparable, p.reasons) = (true, vec![]);
    std::fs::write(
        dir.path().join("summary.json"),
        serde_json::to_vec(&s).unwrap(),
    )
    .unwrap();
    let out = dir.path().join("compare.html");
    assert_eq!(aorta_reports::compare_report(dir.path(), &out).unwrap(), 6);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("<p class=\"good\">Comparable"));
    assert!(html.contains(
        "Geometric mean of the pair step ratios: 1.000 (p10–p90 0.650 – 1.850, 2 pairs)."
    ));
    let p = plots(&html);
    let chart = &p[0];
    let m = trace(chart, "step_ms ratio");
    assert_eq!(
        m["y"],
        serde_json::json!(["llama", "bert", "geometric mean"])
    );
    assert_eq!(nums(&m["x"]), [2.0, 0.5, 1.0]);
    // Whiskers only on the geometric mean: up to p90, down to p10.
    let (up, down) = (
        nums(&m["error_x"]["array"]),
        nums(&m["error_x"]["arrayminus"]),
    );
    assert_eq!((up[0], up[1], down[0], down[1]), (0.0, 0.0, 0.0, 0.0));
    assert!((up[2] - 0.85).abs() < 1e-12 && (down[2] - 0.35).abs() < 1e-12);
    let x = &chart["layout"]["xaxis"];
    assert_eq!(x["type"], "log");
    let r = nums(&x["range"]);
    assert!((r[0] + r[1]).abs() < 1e-12, "centred at 1: {r:?}");
    // 2× is log10(2) = 0.301 decades from 1, plus 15 %.
    assert!((r[1] - 2f64.log10() * 1.15).abs() < 1e-12, "{r:?}");
    assert!(nums(&x["tickvals"]).contains(&1.0));
}
