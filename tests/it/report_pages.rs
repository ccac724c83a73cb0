//! A page for every kind of input: every Kineto job of the corpus, the Python aorta run,
//! rocprofv3 JSON and rocpd, Nsight Systems, a CPU-only Chrome trace, a JSONL log alone, and
//! the repository's own multi-run copy and overlap benchmarks. Each is ingested and
//! reported, and all the pages are opened in one headless Chromium; the charts' JSON is
//! checked for what the pages used to get wrong: empty charts (plotly's −1..1 axis), lines
//! joining ranks and runs, one timeline for many runs, stepless captures drawn as one
//! anonymous step.

use std::path::{Path, PathBuf};

use crate::common::browser::{chromium, count, open_and_check_all, plots};
use crate::common::cli::report_of;
use crate::common::corpus;

/// `(name, input, runs with GPU activities, whole captures without steps)`.
const PAGES: &[(&str, &str, usize, bool)] = &[
    ("a100_nccl", "kineto/cuda/a100_nccl", 1, false),
    ("a100_sampled", "kineto/cuda/a100_sampled_2rank", 1, false),
    ("h100_models", "kineto/cuda/h100_models", 2, false),
    ("h200_fsdp2", "kineto/cuda/h200_fsdp2", 1, false),
    ("h200_sdma", "kineto/cuda/h200_sdma", 1, true),
    ("v100_dlrm", "kineto/cuda/v100_dlrm_8rank", 1, false),
    ("mi210", "kineto/rocm/mi210_gpu_only", 1, true),
    ("mi250", "kineto/rocm/mi250_minitoy", 1, false),
    ("mi300x_models", "kineto/rocm/mi300x_models", 2, false),
    ("mi300x_resnet", "kineto/rocm/mi300x_resnet_ckpt", 1, false),
    ("mi350x_aorta", "kineto/rocm/mi350x_aorta", 1, false),
    ("aorta_py", "aorta_py", 1, false),
    ("rocprof_json", "rocprofv3/json", 1, true),
    ("rocpd", "rocprofv3/rocpd", 1, true),
    ("nsys", "nsys", 1, true),
    ("chrome", "chrome", 0, false),
    ("jsonl", "jsonl", 0, false),
    // aorta's own benches write a `ProfilerStep#N` per iteration: stepped, like Kineto's.
    ("copy", "@workloads/traces/copy-overlap", 3, false),
    ("bench", "@workloads/traces/overlap-bench", 5, false),
];

/// Every page is checked as it is written, then all are opened in one Chromium
/// (`open_and_check_all`: one browser start for the 19 pages, not one each).
#[test]
fn every_kind_of_input_gets_a_page_that_renders() {
    let Some(root) = corpus() else { return };
    let browser = chromium();
    // The directories live until the browser has opened their pages.
    let (_dirs, pages): (Vec<_>, Vec<_>) = PAGES
        .iter()
        .map(|&(name, path, timelines, whole)| {
            let (dir, html, charts) = page_for(&root, name, path, timelines, whole);
            (dir, (html, charts))
        })
        .unzip();
    if let Some(b) = &browser {
        open_and_check_all(b, &pages);
    }
}

/// `@` inputs are in the repository, the rest in the corpus.
fn input(root: &Path, path: &str) -> PathBuf {
    match path.strip_prefix('@') {
        Some(p) => Path::new(env!("CARGO_MANIFEST_DIR")).join(p),
        None => root.join(path),
    }
}

fn has_data(plot: &serde_json::Value) -> bool {
    fn any_nonzero(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
            serde_json::Value::Array(a) => a.iter().any(any_nonzero),
            _ => false,
        }
    }
    plot["data"].as_array().unwrap().iter().any(|t| {
        ["x", "y", "z"]
            .iter()
            .any(|k| t[k].as_array().is_some_and(|a| a.iter().any(any_nonzero)))
    })
}

/// Ingests `path`, reports it and checks the page and its charts' JSON: the page (in its
/// directory) and its chart count.
fn page_for(
    root: &Path,
    name: &str,
    path: &str,
    timelines: usize,
    whole: bool,
) -> (tempfile::TempDir, PathBuf, usize) {
    let (dir, html, _) = report_of(&input(root, path), &format!("{name}.html"));
    let page = std::fs::read_to_string(&html).unwrap();
    let charts = plots(&page);
    for (i, p) in charts.iter().enumerate() {
        assert!(has_data(p), "{name}: chart {i} is empty");
        assert_ne!(
            p["layout"]["yaxis"]["range"],
            serde_json::json!([-1, 1]),
            "{name}: chart {i}"
        );
        for t in p["data"].as_array().unwrap() {
            let n = t["name"].as_str().unwrap_or("");
            if n.contains("comm_hidden_pct") || n.contains("copy hidden") {
                assert_eq!(t["mode"], "markers", "{name}: {n} joins points with lines");
            }
        }
    }
    assert_eq!(count(&page, "\">Timeline: run "), timelines, "{name}");
    assert_eq!(
        count(&page, "the whole capture (no steps)</h2>"),
        if whole { timelines } else { 0 },
        "{name}"
    );
    // Activity outside the steps of a stepped run is not a step (nor a "whole capture").
    if !whole {
        assert!(!page.contains("whole capture"), "{name}");
    }
    // Every page says what ran: the runs table's header.
    assert!(
        page.contains("<th>GPU</th><th>world size</th><th>versions</th>"),
        "{name}"
    );
    inspect(name, &page, &charts);
    (dir, html, charts.len())
}

/// What each kind of input needs beyond the common checks.
fn inspect(name: &str, page: &str, charts: &[serde_json::Value]) {
    match name {
        // 43,915 kernels over 15 s: drawn in seconds, capped, and the page says how to zoom.
        "rocprof_json" | "rocpd" => {
            assert_eq!(
                charts[0]["layout"]["xaxis"]["title"]["text"],
                "s from capture start"
            );
            assert!(page.contains("Capped: showing the 4000 longest of 43915 activities."));
            assert!(page.contains("`aorta report --from MS --to MS`"));
        }
        "chrome" => {
            assert!(page.contains("(a CPU-only trace?)"));
            assert!(page.contains("No step rows: nothing ran on a GPU"));
            assert!(
                !page.contains("<th>exposed_comm</th>"),
                "no empty step table"
            );
        }
        // The qwen trace's kernels before its ProfilerStep are reported apart, not charted.
        "h100_models" => assert!(page.contains(
            "left out of the step charts and tables: h100_models/qwen1.5-0.5b-chat rank 0:"
        )),
        // The logs give compute∩comm but no comm union: that is charted, and the page says
        // what is missing instead of "no communication time".
        "jsonl" => {
            assert!(page.contains("JSONL logs only"));
            assert!(page.contains("The JSONL iterations: compute∩comm only."));
            assert!(!page.contains("No overlap chart for the JSONL iterations"));
            let c = charts
                .iter()
                .find(|p| p["data"][0]["name"] == "compute∩comm")
                .expect("a compute∩comm chart");
            assert_eq!(c["data"].as_array().unwrap().len(), 1);
        }
        // The copies hide under the GEMMs when both run (copy_both), not when serialised.
        // Three runs of 20 steps each are too many bars for one chart: one small chart per
        // run, titled with it, its x the rank and step.
        "copy" => {
            let hidden = |run: &str| -> Vec<f64> {
                let c = charts
                    .iter()
                    .find(|p| {
                        p["layout"]["title"]["text"] == run
                            && p["data"][1]["name"] == "copy∩compute"
                    })
                    .unwrap_or_else(|| panic!("a copy-overlap chart for {run}"));
                let x = c["data"][1]["x"].as_array().unwrap();
                let y = c["data"][1]["y"].as_array().unwrap();
                (0..10)
                    .map(|step| {
                        let i = x
                            .iter()
                            .position(|v| v == &format!("r0 step {step}"))
                            .unwrap();
                        y[i].as_f64().unwrap()
                    })
                    .collect()
            };
            // Every iteration is a step: each overlapped step hides far more than any serial one.
            let (both, serial) = (hidden("copy_both"), hidden("copy_both_serial"));
            for step in 0..10 {
                assert!(both[step] > 10.0 * serial[step].max(0.01), "step {step}");
            }
        }
        "bench" => {
            // Five runs of two ranks' 20 steps: one small overlap chart per run, titled with
            // it, the exposed and hidden bars and one marker series per rank.
            let titles: Vec<&str> = charts
                .iter()
                .filter(|p| p["data"][0]["name"] == "exposed comm")
                .map(|o| {
                    assert_eq!(o["data"].as_array().unwrap().len(), 2 + 2);
                    o["layout"]["title"]["text"].as_str().unwrap()
                })
                .collect();
            assert_eq!(
                titles,
                [
                    "allgather_overlap",
                    "allreduce_overlap",
                    "allreduce_serial",
                    "fsdp_shapes",
                    "reducescatter_overlap"
                ]
            );
        }
        _ => {}
    }
}
