//! Every HTML page aorta writes, opened in headless Chromium: no console message, no uncaught
//! exception, and every chart rendered by plotly.js (the single-run report from a corpus
//! dataset through the CLI, the compare page from hand-made tables).

use std::path::Path;

use crate::common::browser::{chromium, count, legend_texts, open_and_check, render, render_all};
use crate::common::cli::{aorta, code, ingest_ok, report_of, stderr};
use crate::common::*;

#[test]
fn the_harness_sees_errors_and_unrendered_charts() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><div class=\"plotly-graph-div\" id=\"p\"></div>\
         <script>console.error('boom'); undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let r = render(&browser, &bad);
    assert_eq!(r.console.len(), 2, "{}", r.stderr);
    assert!(r.console[1].contains("Uncaught ReferenceError"));
    assert_eq!(count(&r.dom, "class=\"plot-container plotly\""), 0);
    // Opened beside a good page, each page gets its own messages and its own DOM.
    let good = dir.path().join("good.html");
    std::fs::write(
        &good,
        "<html><body><p id=\"p\">a &lt; b</p><script>document.getElementById('p')\
         .append(' & drawn');</script></body></html>",
    )
    .unwrap();
    let both = render_all(&browser, &[good.clone(), bad.clone(), good]);
    let (g, b) = (&both[0], &both[1]);
    assert_eq!(b.console.len(), 2, "{}", b.stderr);
    assert!(b.console[1].contains("Uncaught ReferenceError"));
    assert!(b
        .dom
        .contains("<div class=\"plotly-graph-div\" id=\"p\"></div>"));
    assert!(g.console.is_empty(), "{}", g.stderr);
    assert!(
        g.dom.contains("<p id=\"p\">a &lt; b &amp; drawn</p>"),
        "{}",
        g.dom
    );
    assert!(g.dom.ends_with("</html>") && !g.dom.contains("<script"));
    assert_eq!(both[2].dom, g.dom);
}

#[test]
fn run_report_renders_every_chart_without_console_errors() {
    let Some(root) = corpus() else { return };
    let Some(browser) = chromium() else { return };
    let (_dir, html, _) = report_of(&root.join("kineto/cuda/h200_fsdp2"), "report.html");
    // Six per-rank charts (compute / non-compute / idle shares and the idle split among
    // them), then across the two ranks: the caused-delay and wait-share
    // heatmaps and waiting vs transfer per collective kind; then the roofline and MFU per
    // step (docs/PERF.md); the category chart is followed by other_compute's subcategories.
    let r = open_and_check(&browser, &html, 12);
    assert_eq!(count(&r.dom, "class=\"hm\""), 2, "two heatmaps drawn");
    let legend = legend_texts(&r.dom);
    for name in [
        "comm",
        "gemm",
        "exposed comm",
        "compute∩comm",
        "r0 comm_hidden_pct",
        "r1 comm_hidden_pct",
        "waiting",
        "transfer",
        "h200_fsdp2",
        "H200 bf16 roof (989.5 TFLOP/s, 4.8 TB/s)",
        "h200_fsdp2 r0",
        "h200_fsdp2 r1",
        "idle: host-wait",
        "idle: kernel-wait",
        "idle: other",
        "optimizer",
        "copy_kernel",
        "elementwise",
    ] {
        assert!(
            legend.iter().any(|l| l == name),
            "legend {name}: {legend:?}"
        );
    }
    // The timeline's rows are the streams of the step on both ranks; the FSDP2 run uses a
    // compute stream and NCCL streams, so at least two per rank.
    for rank in [0, 1] {
        let lanes = count(&r.dom, &format!(">rank {rank} · stream "));
        assert!(
            lanes >= 2,
            "rank {rank}: {lanes} stream rows on the timeline"
        );
    }
    // No memory events in these traces: no memory section.
    assert!(!r.dom.contains("Device memory over time"));
}

/// The CUDA half: the memory chart of an H100 `profile_memory` trace, with its step's
/// boundaries and the peaks table (its numbers are checked against the raw events in
/// `toolbox::memory`).
#[test]
fn a_cuda_run_with_memory_events_draws_them() {
    let Some(root) = corpus() else { return };
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest_ok(
        &[&root.join("kineto/cuda/h100_models/bert-small.json.gz")],
        &ds,
        &["-q"],
    );
    let html = dir.path().join("cuda.html");
    let o = aorta(&[
        "report".as_ref(),
        ds.as_os_str(),
        "-o".as_ref(),
        html.as_os_str(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Timeline, categories and other_compute's subcategories per step (no overlap chart
    // without communication), compute / non-compute / idle (two charts), memory, roofline
    // and MFU.
    let r = open_and_check(&browser, &html, 8);
    let legend = legend_texts(&r.dom);
    for line in ["allocated", "reserved"] {
        let name = format!(" rank 0 cuda:0 {line}");
        assert!(
            legend.iter().any(|l| l.ends_with(&name)),
            "{name}: {legend:?}"
        );
    }
    assert!(
        r.dom.contains(">step 6<"),
        "the step's label on the memory chart"
    );
    assert!(r.dom.contains("<td>cuda:0</td>"), "the peaks table");
}

#[test]
fn compare_page_renders_every_chart_without_console_errors() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    compare_fixture::write_all(dir.path());
    let html = dir.path().join("compare.html");
    let charts = aorta_reports::compare_report(dir.path(), &html).unwrap();
    assert_eq!(charts, 5);
    let r = open_and_check(&browser, &html, 5);
    let legend = legend_texts(&r.dom);
    for name in [
        "reference",
        "candidate",
        "matched",
        "reference only",
        "candidate only",
    ] {
        assert!(
            legend.iter().any(|l| l == name),
            "legend {name}: {legend:?}"
        );
    }
    // The operator chart's category axis lists the top 20; op_4 (|diff| 4) is not among them.
    assert!(r.dom.contains("op_24") && r.dom.contains("op_5 "));
    assert!(!r.dom.contains("op_4 "));
}

/// The page `aorta compare` itself writes, on the real H100/MI300X model pair (no
/// communication there, so the collective chart gives way to a note).
#[test]
fn aorta_compare_writes_a_page_that_renders() {
    let Some(browser) = chromium() else { return };
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = compare_models(&root, dir.path());
    let html = out.join("report.html");
    let page = std::fs::read_to_string(&html).unwrap();
    let charts = count(&page, "class=\"plotly-graph-div\"");
    assert!(charts >= 4, "{charts} charts");
    let r = open_and_check(&browser, &html, charts);
    assert!(
        r.dom.contains("aten::mm"),
        "the operator chart names aten::mm"
    );
}

/// Ingests the CUDA and ROCm model traces under `work` (the two directories as runs) and
/// compares them into `work/cmp`.
fn compare_models(root: &Path, work: &Path) -> std::path::PathBuf {
    let ds = work.join("models");
    let (cuda, rocm) = (
        root.join("kineto/cuda/h100_models"),
        root.join("kineto/rocm/mi300x_models"),
    );
    ingest_ok(&[&cuda, &rocm], &ds, &["-q"]);
    let out = work.join("cmp");
    let args = [
        "compare",
        "--reference",
        "cuda",
        "--candidate",
        "rocm",
        "-o",
    ];
    let mut a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    a.extend([out.as_os_str(), ds.as_os_str()]);
    let o = aorta(&a);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    out
}

/// The ROCm half of the CUDA/ROCm pair: two single-model inference traces (one run each, not
/// one merged timeline) with no communication, so the collective chart gives way to a note.
#[test]
fn a_run_without_steps_or_communication_renders() {
    let Some(root) = corpus() else { return };
    let Some(browser) = chromium() else { return };
    let (_dir, html, o) = report_of(&root.join("kineto/rocm/mi300x_models"), "rocm.html");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("runs:     mi300x_models/bert-small, mi300x_models/qwen1.5-0.5b-chat")
            && text.contains(
                "timeline: run mi300x_models/bert-small rank 0 step 6 (median-duration step)"
            ),
        "{text}"
    );
    // Two timelines (step 6 of each model), overlap, categories and other_compute's
    // subcategories per step, compute / non-compute / idle per rank (two charts), exposed
    // comm's note instead of a chart, device memory (profile_memory traces), roofline, MFU.
    let r = open_and_check(&browser, &html, 11);
    let legend = legend_texts(&r.dom);
    for model in ["bert-small", "qwen1.5-0.5b-chat"] {
        for line in ["allocated", "reserved"] {
            let name = format!("mi300x_models/{model} rank 0 hip:0 {line}");
            assert!(legend.contains(&name), "{name}: {legend:?}");
        }
    }
    assert_eq!(count(&r.dom, "<h2>Device memory over time"), 1);
    assert!(r
        .dom
        .contains("No communication kernels in the reported ranks."));
    assert!(r
        .dom
        .contains("No overlap chart for the trace steps: no communication time"));
    assert_eq!(
        count(&r.dom, "\">Timeline: run mi300x_models/"),
        2,
        "one per model"
    );
    let legend = legend_texts(&r.dom);
    for name in ["gemm", "normalization", "elementwise", "copy_kernel"] {
        assert!(
            legend.iter().any(|l| l == name),
            "legend {name}: {legend:?}"
        );
    }
    assert!(r
        .dom
        .contains("<h2>other_compute by subcategory per step</h2>"));
}
