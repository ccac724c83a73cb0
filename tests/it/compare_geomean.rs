//! `aorta compare` over several pairs of runs: every level per pair, and each key's overall
//! row the geometric mean of the pairs' ratios — on a hand-made two-pair dataset whose every
//! step and category time is known by construction, and on the corpus's two models per side,
//! where each pair must read exactly as that pair compared alone.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::cli::{code, ingest_ok, stderr};
use crate::common::*;
use crate::compare_cli::{close, compare, f64s, gate, models_dataset, parquet, side};
use aorta_transform::compare::{overall, per_pair, LevelEntry, OperatorEntry, Summary};
use polars::prelude::*;

/// One side of the compare fixture: (GEMM µs, all_reduce µs, ProfilerStep µs).
type Side = (u32, u32, u32);

/// Two workloads per side (`in/{cuda,rocm}/{bert,qwen}/rank0.json`, the compare fixture's
/// kernels with these (GEMM µs, all_reduce µs, ProfilerStep µs)):
///
/// | pair | reference (CUDA) | candidate (ROCm) | step | gpu window | gemm | comm |
/// |---|---|---|---|---|---|---|
/// | bert | 40, 100, 1000 | 60, 150, 1500 | 1 → 1.5 ms (1.5) | 0.2 → 0.25 (1.25) | 0.04 → 0.06 (1.5) | 0.1 → 0.15 (1.5) |
/// | qwen | 20, 400, 2000 | 40, 200, 1000 | 2 → 1 ms (0.5) | 0.5 → 0.3 (0.6) | 0.02 → 0.04 (2) | 0.4 → 0.2 (0.5) |
///
/// (the GPU window runs from the GEMM at +100 µs to the all_reduce's end at +200 + comm).
/// `other` is the 10 µs add (CUDA) against the 8 µs relu (ROCm) in both: 0.8.
const PAIRS: [(&str, [Side; 2]); 2] = [
    ("bert", [(40, 100, 1000), (60, 150, 1500)]),
    ("qwen", [(20, 400, 2000), (40, 200, 1000)]),
];

fn two_pairs() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for (workload, sides) in PAIRS {
        for (platform, (mm, comm, step)) in ["cuda", "rocm"].into_iter().zip(sides) {
            let d = dir.path().join("in").join(platform).join(workload);
            std::fs::create_dir_all(&d).unwrap();
            let text = side(platform == "cuda", mm, comm, step);
            std::fs::write(d.join("rank0.json"), text).unwrap();
        }
    }
    let ds = dir.path().join("ds");
    ingest_ok(&[&dir.path().join("in")], &ds, &["-q"]);
    (dir, ds)
}

fn summary(out: &Path) -> Summary {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// numpy's p10 and p90 of two values (linear interpolation): lo + 0.1·(hi − lo), lo + 0.9·(hi − lo).
fn p10_p90(a: f64, b: f64) -> (f64, f64) {
    let (lo, hi) = (a.min(b), a.max(b));
    (lo + 0.1 * (hi - lo), lo + 0.9 * (hi - lo))
}

/// The per-pair and overall rows of the steps and categories levels against the table above.
#[test]
fn two_pairs_ratios_and_their_geometric_mean_by_hand() {
    let (dir, ds) = two_pairs();
    let out = dir.path().join("cmp");
    let o = compare(&ds, &out, &["--reference", "cuda", "--candidate", "rocm"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc = summary(&out);
    let pairs = doc.pairs.as_ref().unwrap();
    assert!(pairs.comparable, "{:?}", pairs.reasons);
    let runs: Vec<(&str, &str, &str)> = pairs
        .pairs
        .iter()
        .map(|p| {
            (
                p.workload.as_str(),
                p.reference.as_str(),
                p.candidate.as_str(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("bert", "cuda/bert", "rocm/bert"),
            ("qwen", "cuda/qwen", "rocm/qwen")
        ]
    );
    // (level, key, bert (reference, candidate), qwen (reference, candidate)), in ms.
    type Want<'a> = (&'a str, &'a str, (f64, f64), (f64, f64));
    let want: [Want; 6] = [
        ("steps", "step_ms", (1.0, 1.5), (2.0, 1.0)),
        ("steps", "gpu_window_ms", (0.2, 0.25), (0.5, 0.3)),
        ("steps", "exposed_comm_ms", (0.1, 0.15), (0.4, 0.2)),
        ("categories", "gemm", (0.04, 0.06), (0.02, 0.04)),
        ("categories", "comm", (0.1, 0.15), (0.4, 0.2)),
        ("categories", "other", (0.01, 0.008), (0.01, 0.008)),
    ];
    for (level, key, bert, qwen) in want {
        let entries = match level {
            "steps" => &doc.levels.steps,
            _ => &doc.levels.categories,
        };
        let rows: Vec<&LevelEntry> = per_pair(entries, key).collect();
        assert_eq!(rows.len(), 2, "{level} {key}: one row per pair");
        let mut ratios = vec![];
        for (row, (name, (r, c))) in rows.iter().zip([("bert", bert), ("qwen", qwen)]) {
            assert_eq!(row.workload.as_deref(), Some(name));
            assert!(!row.overall);
            let (rs, cs) = (row.reference.unwrap(), row.candidate.unwrap());
            assert!(
                close(rs.median, r) && close(cs.median, c),
                "{level} {key} {name}"
            );
            assert_eq!((rs.n, cs.n), (2, 2), "{level} {key} {name}: its two steps");
            assert!(close(row.ratio.unwrap(), c / r), "{level} {key} {name}");
            ratios.push(c / r);
        }
        // The overall row: √(bert · qwen), the pairs' p10–p90, and no side statistics.
        let all = overall(entries, key).unwrap();
        assert_eq!(all.workload, None);
        assert_eq!(
            (all.reference, all.candidate),
            (None, None),
            "{level} {key}"
        );
        let g = (ratios[0] * ratios[1]).sqrt();
        assert!(
            close(all.ratio.unwrap(), g),
            "{level} {key}: {:?} vs {g}",
            all.ratio
        );
        let s = all.ratio_spread.unwrap();
        let (p10, p90) = p10_p90(ratios[0], ratios[1]);
        assert_eq!(s.n, 2);
        assert!(close(s.p10, p10) && close(s.p90, p90), "{level} {key}");
    }
    // √(1.5 · 0.5): not the pooled medians' 1.25 / 1.5 = 0.833 of the windows {1, 1, 2, 2}
    // against {1.5, 1.5, 1, 1}.
    let step = doc.levels.step("step_ms").unwrap().ratio.unwrap();
    assert!(close(step, 0.75f64.sqrt()));
    assert!(close(pairs.step_ratio_geomean.unwrap(), step));
    levels_table_has_pairs_and_overall_rows(&out);
    operators_and_collectives_per_pair(&out);
    page_shows_each_key_overall_first(&out);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("geometric mean of 2 pairs [p10 0.600 - p90 1.400]"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("    bert ")), "{text}");
    gate_judges_the_geometric_mean(&ds, &out);
}

/// compare_levels.parquet: every key's overall row first (no workload, null side medians,
/// the pairs' ratio n and p10–p90), then one row per pair; compare_steps names the pair.
fn levels_table_has_pairs_and_overall_rows(out: &Path) {
    let df = parquet(&out.join("compare_levels.parquet"));
    let (level, key, workload) = (strs(&df, "level"), strs(&df, "key"), strs(&df, "workload"));
    let flag: Vec<Option<bool>> = df
        .column("overall")
        .unwrap()
        .bool()
        .unwrap()
        .iter()
        .collect();
    let (median, ratio) = (f64s(&df, "reference_median"), f64s(&df, "ratio"));
    let n = i64s(&df, "ratio_n");
    let mut seen = 0;
    for i in 0..df.height() {
        if workload[i].is_some() {
            assert_eq!(flag[i], Some(false));
            continue;
        }
        seen += 1;
        assert_eq!(flag[i], Some(true));
        // Keys that are 0 on both sides (attention, the overlaps) have no ratio in any pair.
        let want_n = ratio[i].map(|_| 2);
        assert_eq!((median[i], n[i]), (None, want_n), "{:?}", key[i]);
        let next: Vec<Option<&str>> = (i + 1..i + 3).map(|j| workload[j].as_deref()).collect();
        assert_eq!(next, [Some("bert"), Some("qwen")], "{:?}", key[i]);
        assert!((i + 1..i + 3).all(|j| key[j] == key[i] && level[j] == level[i]));
    }
    let overall_keys: Vec<String> = (0..df.height())
        .filter(|&i| {
            workload[i].is_none()
                && !["steps", "categories"].contains(&level[i].as_deref().unwrap())
        })
        .map(|i| {
            format!(
                "{} {}",
                level[i].as_deref().unwrap(),
                key[i].as_deref().unwrap()
            )
        })
        .collect();
    // The add is `elementwise` by its kernel's name, the ROCm relu_kernel `other`; the
    // all_reduce's transfer time (no skew with one rank).
    assert_eq!(
        overall_keys,
        [
            "subcategories elementwise",
            "subcategories other",
            "collectives all_reduce 4194304 B Float x8"
        ]
    );
    assert_eq!(seen, 9 + 5 + overall_keys.len());
    // elementwise: 0.01 ms against none in both pairs, ratios 0 and 0, their mean 0; other:
    // none against 0.008 ms, no ratio in either pair.
    let at = |k: &str| {
        let sub = |i: usize| level[i].as_deref() == Some("subcategories");
        (0..df.height())
            .find(|&i| sub(i) && workload[i].is_none() && key[i].as_deref() == Some(k))
            .unwrap()
    };
    assert_eq!(
        (ratio[at("elementwise")], n[at("elementwise")]),
        (Some(0.0), Some(2))
    );
    assert_eq!((ratio[at("other")], n[at("other")]), (None, None));
    assert_eq!(df.height(), seen * 3);
    let steps = parquet(&out.join("compare_steps.parquet"));
    let w: Vec<Option<String>> = strs(&steps, "workload");
    let r = strs(&steps, "run");
    for (w, r) in w.iter().zip(&r) {
        assert_eq!(
            w.as_deref(),
            r.as_deref().and_then(|r| r.rsplit('/').next())
        );
    }
}

/// The compare page's steps table: per key the overall line (the geometric mean and the
/// pairs' p10–p90, no side medians), then bert's and qwen's own lines.
fn page_shows_each_key_overall_first(out: &Path) {
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let n = |v: &str| format!("<td class=\"n\">{v}</td>");
    let rows = [
        format!(
            "<tr><td>step_ms</td><td>all: geometric mean of 2</td><td>ms</td>{}{}{}{}{}<td>0.600 – 1.400</td></tr>",
            n("-"),
            n("-"),
            n("-"),
            n("-"),
            n("0.866")
        ),
        format!(
            "<tr><td>step_ms</td><td>bert</td><td>ms</td>{}<td>1.000 – 1.000</td>{}<td>1.500 – 1.500</td>{}{}</tr>",
            n("1.000"),
            n("1.500"),
            n("1.500"),
            n("-")
        ),
        format!(
            "<tr><td>step_ms</td><td>qwen</td><td>ms</td>{}<td>2.000 – 2.000</td>{}<td>1.000 – 1.000</td>{}{}</tr>",
            n("2.000"),
            n("1.000"),
            n("0.500"),
            n("-")
        ),
    ];
    let joined = rows.join("\n");
    assert!(html.contains(&joined), "{joined}");
    let plots = crate::common::browser::plots(&html);
    // The overall chart: each steps and categories key's geometric mean, whisker p10–p90.
    let over = plots
        .iter()
        .map(|p| crate::common::browser::trace_opt(p, "geometric mean over pairs"))
        .find_map(|t| t)
        .expect("an overall chart");
    let at = |label: &str| {
        let y = over["y"].as_array().unwrap();
        y.iter().position(|v| v == label).unwrap()
    };
    let step = at("step_ms");
    assert!(close(over["x"][step].as_f64().unwrap(), 0.75f64.sqrt()));
    let up = over["error_x"]["array"][step].as_f64().unwrap();
    assert!(close(up, 1.4 - 0.75f64.sqrt()), "whisker to p90 1.4");
    assert!(close(
        over["x"][at("category gemm")].as_f64().unwrap(),
        3f64.sqrt()
    ));
    // Categories per pair, never pooled: a chart per pair, each with its own GEMM time.
    for (workload, gemm) in [("bert", 0.04), ("qwen", 0.02)] {
        let chart = plots
            .iter()
            .find(|p| p["layout"]["title"]["text"] == workload)
            .unwrap_or_else(|| panic!("no category chart for {workload}"));
        let r = crate::common::browser::trace(chart, "reference");
        let x = r["x"].as_array().unwrap();
        let i = x.iter().position(|c| c == "gemm").unwrap();
        assert!(close(r["y"][i].as_f64().unwrap(), gemm), "{workload}");
    }
}

/// aten::mm per window in each pair (0.04 → 0.06, 0.02 → 0.04: not the pooled 0.03 → 0.05),
/// and the all_reduce's transfer time per pair and side.
fn operators_and_collectives_per_pair(out: &Path) {
    let doc = summary(out);
    let mm: Vec<&OperatorEntry> = doc
        .operators
        .top
        .iter()
        .filter(|o| o.op == "aten::mm")
        .collect();
    let got: Vec<(&str, f64, f64)> = mm
        .iter()
        .map(|o| {
            (
                o.workload.as_str(),
                o.reference_ms.unwrap(),
                o.candidate_ms.unwrap(),
            )
        })
        .collect();
    assert_eq!(got.len(), 2);
    for ((w, r, c), (want_w, want_r, want_c)) in
        got.iter().zip([("bert", 0.04, 0.06), ("qwen", 0.02, 0.04)])
    {
        assert_eq!(*w, want_w);
        assert!(close(*r, want_r) && close(*c, want_c), "{w}: {r} {c}");
    }
    let coll = parquet(&out.join("compare_collectives.parquet"));
    let (side, w) = (strs(&coll, "side"), strs(&coll, "workload"));
    let ms = f64s(&coll, "mean_ms");
    let mut got = BTreeMap::new();
    for i in 0..coll.height() {
        got.insert(
            (w[i].clone().unwrap(), side[i].clone().unwrap()),
            ms[i].unwrap(),
        );
    }
    let want = [
        (("bert", "reference"), 0.1),
        (("bert", "candidate"), 0.15),
        (("qwen", "reference"), 0.4),
        (("qwen", "candidate"), 0.2),
    ];
    assert_eq!(got.len(), want.len());
    for ((w, s), v) in want {
        assert!(close(got[&(w.to_string(), s.to_string())], v), "{w} {s}");
    }
}

/// The gate judges the geometric mean: step time √0.75 − 1 = −13.4 % (bert alone is +50 %),
/// gemm and aten::mm √3 − 1 = +73.2 % (pooled medians would say +66.7 %), the all_reduce's
/// time −13.4 %.
fn gate_judges_the_geometric_mean(ds: &Path, out: &Path) {
    let gate = |spec: &str| {
        let o = gate(ds, out, spec);
        (code(&o), String::from_utf8_lossy(&o.stdout).to_string())
    };
    let step = 100.0 * (0.75f64.sqrt() - 1.0);
    for (spec, want) in [
        ("step_ms=5", 0),
        ("step_ms=-15", 0),
        ("step_ms=-13", 1),
        ("category.gemm=70", 1),
        ("category.gemm=74", 0),
        ("op.aten::mm=70", 1),
        ("collective.all_reduce.ms=-13", 1),
        ("collective.all_reduce.ms=-14", 0),
    ] {
        let (c, text) = gate(spec);
        assert_eq!(c, want, "{spec}: {text}");
    }
    let (_, text) = gate("step_ms=-13,category.gemm=70");
    assert!(
        text.contains(
            "REGRESSED: step_ms geometric mean of 2 pair ratios 0.866 (-13.4%, threshold -13%)"
        ),
        "{text}"
    );
    let checks = summary(out).regression.unwrap().checks;
    let s = checks.iter().find(|c| c.key == "step_ms").unwrap();
    assert_eq!((s.reference, s.candidate, s.pairs), (None, None, 2));
    assert!(close(s.change_pct.unwrap(), step));
    let g = checks.iter().find(|c| c.key == "category.gemm").unwrap();
    assert!(close(g.change_pct.unwrap(), 100.0 * (3f64.sqrt() - 1.0)));
}

/// Rows of one pair in a levels table, by (level, key).
type PairRows<'a> = BTreeMap<(&'static str, &'a str), &'a LevelEntry>;

fn pair_rows<'a>(doc: &'a Summary, workload: &str) -> PairRows<'a> {
    let l = &doc.levels;
    let mut out = PairRows::new();
    for (name, level) in [
        ("steps", &l.steps),
        ("categories", &l.categories),
        ("subcategories", &l.subcategories),
        ("collectives", &l.collectives),
    ] {
        for e in level
            .iter()
            .filter(|e| e.workload.as_deref() == Some(workload))
        {
            assert!(
                out.insert((name, e.key.as_str()), e).is_none(),
                "{name} {}",
                e.key
            );
        }
    }
    out
}

/// `--reference h100_models --candidate mi300x_models` (two models a side) against each model
/// compared alone: every level row and operator of a pair equals the single comparison's,
/// and each key's overall ratio is the geometric mean of the single comparisons' ratios.
#[test]
fn corpus_pairs_equal_each_pair_compared_alone() {
    let Some(root) = corpus() else { return };
    let (dir, ds, _) = models_dataset(&root, &[]);
    let both = dir.path().join("both");
    let o = compare(
        &ds,
        &both,
        &["--reference", "h100_models", "--candidate", "mi300x_models"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc = summary(&both);
    let models = ["bert-small", "qwen1.5-0.5b-chat"];
    let mut alone = Vec::new();
    for m in models {
        let out = dir.path().join(m);
        let (r, c) = (format!("h100_models/{m}"), format!("mi300x_models/{m}"));
        let o = compare(&ds, &out, &["--reference", &r, "--candidate", &c]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        alone.push(summary(&out));
        let single = parquet(&out.join("compare_operators.parquet"));
        same_operators(
            &parquet(&both.join("compare_operators.parquet")),
            &single,
            m,
        );
    }
    let mut overall_checked = 0;
    for (m, single) in models.iter().zip(&alone) {
        let (mine, theirs) = (pair_rows(&doc, m), pair_rows(single, m));
        assert_eq!(mine.len(), theirs.len(), "{m}: the same keys");
        assert!(mine.len() > 9 + 5, "{m}: {} rows", mine.len());
        for (k, e) in &mine {
            let t = theirs[k];
            assert!(t.overall, "{m} {k:?}: one pair, its row is the overall row");
            assert_eq!(
                (e.reference, e.candidate),
                (t.reference, t.candidate),
                "{m} {k:?}"
            );
            assert_eq!(e.ratio, t.ratio, "{m} {k:?}");
        }
    }
    let levels = |s: &Summary| [s.levels.steps.clone(), s.levels.categories.clone()];
    let singles: Vec<[Vec<LevelEntry>; 2]> = alone.iter().map(levels).collect();
    for (i, entries) in levels(&doc).iter().enumerate() {
        for e in entries.iter().filter(|e| e.workload.is_none()) {
            let ratios: Vec<f64> = singles
                .iter()
                .filter_map(|s| overall(&s[i], &e.key)?.ratio)
                .collect();
            match ratios.as_slice() {
                [a, b] => {
                    assert!(close(e.ratio.unwrap(), (a * b).sqrt()), "{}", e.key);
                    overall_checked += 1;
                }
                [a] => assert!(close(e.ratio.unwrap(), *a) && e.ratio_spread.unwrap().n == 1),
                _ => assert_eq!((e.ratio, e.ratio_spread), (None, None), "{}", e.key),
            }
        }
    }
    // step_ms, gpu_window_ms, compute_ms and the categories both models run.
    assert!(
        overall_checked >= 5,
        "{overall_checked} keys with both ratios"
    );
    let steps: Vec<Option<f64>> = doc
        .pairs
        .unwrap()
        .pairs
        .iter()
        .map(|p| p.step_ratio)
        .collect();
    let alone_steps: Vec<Option<f64>> = alone
        .iter()
        .map(|s| s.pairs.as_ref().unwrap().pairs[0].step_ratio)
        .collect();
    assert_eq!(steps, alone_steps);
}

/// The rows of `workload` in the two-model compare_operators equal the single pair's.
fn same_operators(both: &DataFrame, single: &DataFrame, workload: &str) {
    let keep = both
        .column("workload")
        .unwrap()
        .str()
        .unwrap()
        .equal(workload);
    let mine = both.filter(&keep).unwrap();
    assert_eq!(mine.height(), single.height(), "{workload}");
    assert!(
        mine.height() > 10,
        "{workload}: {} operators",
        mine.height()
    );
    assert!(mine.equals_missing(single), "{workload}:\n{mine}\n{single}");
}
