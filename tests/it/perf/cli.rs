//! `aorta perf` from the outside: an unknown GPU (null ratios and one note), a user's peak
//! file (the note gone, every % of peak = TFLOP/s ÷ the file's figure), a broken peak file
//! (one line naming it), and the views agreeing with the tables written.

use serde_json::Value;

use super::perf;
use crate::common::cli::{aorta, code, ingest, stderr};
use crate::common::{corpus, table};

fn floats(df: &polars::prelude::DataFrame, c: &str) -> Vec<Option<f64>> {
    df.column(c).unwrap().f64().unwrap().iter().collect()
}

#[test]
fn an_unknown_gpu_gives_null_ratios_and_a_note_until_a_peak_file_names_it() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    // MI250 through ROCm 6.2 calls itself "AMD Radeon Graphics": no datasheet entry.
    let o = ingest(&[&data.join("kineto/rocm/mi250_minitoy")], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value = serde_json::from_str(&perf(&ds, &["--json"])).unwrap();
    let run = &doc["runs"][0];
    let notes: Vec<&str> = run["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("unknown device `AMD Radeon Graphics`"),
        "{notes:?}"
    );
    let ops = table(&ds, "op_perf", "mi250_minitoy");
    assert!(
        floats(&ops, "tflops").iter().any(Option::is_some),
        "FLOPs and rates still computed"
    );
    assert!(floats(&ops, "peak_pct").iter().all(Option::is_none));
    assert!(floats(&ops, "roof_pct").iter().all(Option::is_none));

    let peaks = tmp.path().join("peaks.toml");
    std::fs::write(
        &peaks,
        "[[device]]\nname = \"MI250 GCD\"\nmatch = [\"Radeon Graphics\"]\nhbm_tbps = 1.6\n\
         tflops = { fp32 = 45.3, bf16 = 181 }\nsource = \"MI250 data sheet, per GCD\"\n",
    )
    .unwrap();
    let doc: Value = serde_json::from_str(&perf(
        &ds,
        &["--json", "--device-peaks", peaks.to_str().unwrap()],
    ))
    .unwrap();
    assert_eq!(doc["runs"][0]["notes"], serde_json::json!([]));
    let ops = table(&ds, "op_perf", "mi250_minitoy");
    let dtype = ops.column("dtype").unwrap().str().unwrap().clone();
    let (tflops, pct) = (floats(&ops, "tflops"), floats(&ops, "peak_pct"));
    let mut checked = 0;
    for i in 0..ops.height() {
        if let (Some(t), Some("fp32")) = (tflops[i], dtype.get(i)) {
            assert!((pct[i].unwrap() - 100.0 * t / 45.3).abs() < 1e-9);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn a_broken_peak_file_is_one_line_naming_it() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let o = ingest(&[&data.join("kineto/rocm/mi250_minitoy")], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[device]]\nname = \"x\"\nmatch = [\"x\"]\nhbm_tbps = -1\ntflops = {}\nsource = \"\"\n",
    )
    .unwrap();
    let o = aorta(&[
        "perf".as_ref(),
        ds.as_os_str(),
        "--device-peaks".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&bad.display().to_string()) && err.contains("hbm_tbps"),
        "{err}"
    );
}

#[test]
fn views_are_sums_of_the_tables_written() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let f = data.join("kineto/cuda/h200_fsdp2");
    let o = ingest(&[&f], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let doc: Value =
        serde_json::from_str(&perf(&ds, &["--json", "--by", "shape", "--top", "3"])).unwrap();
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    // The largest row by GPU time is the sum of its instances in op_perf.
    let ops = table(&ds, "op_perf", "h200_fsdp2");
    let op = ops.column("op").unwrap().str().unwrap().clone();
    let dims = ops.column("input_dims").unwrap().str().unwrap().clone();
    let gpu = ops.column("gpu_ns").unwrap().i64().unwrap().clone();
    let flops = ops.column("flops").unwrap().i64().unwrap().clone();
    let top = &rows[0];
    let (mut ns, mut f, mut n) = (0i64, 0i64, 0i64);
    for i in 0..ops.height() {
        if op.get(i) == top["op"].as_str() && dims.get(i) == top["input_dims"].as_str() {
            ns += gpu.get(i).unwrap();
            f += flops.get(i).unwrap_or(0);
            n += 1;
        }
    }
    assert_eq!(
        (top["gpu_ns"].as_i64(), top["instances"].as_i64()),
        (Some(ns), Some(n))
    );
    assert!(rows
        .windows(2)
        .all(|w| w[0]["gpu_ns"].as_i64() >= w[1]["gpu_ns"].as_i64()));
    if f > 0 {
        let t = top["tflops"].as_f64().unwrap();
        assert!((t - f as f64 / ns as f64 / 1e3).abs() < 1e-9 * t);
    }
    // --by step prints the perf_steps rows; their rank rows sum their steps.
    let doc: Value = serde_json::from_str(&perf(&ds, &["--json", "--by", "step"])).unwrap();
    let rows = doc["runs"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), table(&ds, "perf_steps", "h200_fsdp2").height());
    for rank in [0, 1] {
        let of = |level: &'static str| {
            rows.iter()
                .filter(move |r| r["rank"] == rank && r["level"] == level)
        };
        let steps: i64 = of("step").map(|r| r["model_flops"].as_i64().unwrap()).sum();
        let total: Vec<i64> = of("rank")
            .map(|r| r["model_flops"].as_i64().unwrap())
            .collect();
        assert_eq!(total, vec![steps]);
        assert!(
            of("step").all(|r| r["mfu_pct"].as_f64().is_some()),
            "H200: a known device"
        );
    }
}

/// `--by shape` in the terminal: every line within 160 characters (they reached 330), each
/// column where its header is, long shapes cut with `…`; `--format json` keeps them whole,
/// row for row.
#[test]
fn shapes_fit_the_terminal_and_stay_whole_in_json() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let o = ingest(&[&data.join("kineto/cuda/h100_models")], &ds, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let args = ["--by", "shape", "--top", "15"];
    let text = perf(&ds, &args);
    let doc: Value = serde_json::from_str(&perf(&ds, &[&args[..], &["--json"]].concat())).unwrap();
    let mut cut = 0;
    let mut blocks = 0;
    for run in doc["runs"].as_array().unwrap() {
        let name = run["run"].as_str().unwrap();
        let lines: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with(&format!("run {name}: ")))
            .skip_while(|l| !l.starts_with("top "))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .collect();
        let (header, rows) = lines.split_first().expect("a table");
        let left: Vec<bool> = (0..13).map(|c| c < 3).collect();
        let cells = crate::common::text_table::aligned_cells(header, rows, &left, 160);
        let json = run["rows"].as_array().unwrap();
        assert_eq!(cells.len(), json.len(), "{name}");
        for (c, j) in cells.iter().zip(json) {
            for (k, key) in ["op", "input_dims", "input_types"].iter().enumerate() {
                let full = j[key].as_str().unwrap_or("-");
                assert!(
                    crate::common::text_table::shows(&c[k], full),
                    "{name}: `{}` is not {key} `{full}`",
                    c[k]
                );
                cut += usize::from(c[k].ends_with('…'));
            }
        }
        blocks += 1;
    }
    assert!(blocks >= 2, "one table per model");
    assert!(cut > 0, "no shape long enough to cut:\n{text}");
}
