//! `aorta compare` from the outside: a hand-built CUDA/ROCm pair whose answers are worked
//! out in the comments, the real H100/MI300X model traces against their raw JSON, the Python
//! aorta report's summary fields and values, and the operator list. The regression gate on
//! the hand-built pair is in `compare_gate`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::cli::{aorta, code, ingest_ok, stderr};
use crate::common::*;
use aorta_transform::compare::{LevelEntry, Summary};
use polars::prelude::*;
use serde_json::{json, Value};

/// One side of the fixture: two `ProfilerStep`s of `step_us` µs back to back, each with
/// - `aten::mm` [[64, 32], [32, 16]] → a GEMM of `mm_us` at +100 (External id on the kernel);
/// - CUDA: `aten::add` → a 10 µs kernel at +150; ROCm: `aten::relu` → an 8 µs kernel at +170
///   whose kernel and launch carry no External id (found by enclosing the launch at +72);
/// - an all_reduce of 1 Mi Float over 8 ranks, `comm_us` at +200, launched outside any op.
pub(crate) fn side(cuda: bool, mm_us: u32, comm_us: u32, step_us: u32) -> String {
    let mut ev = vec![];
    let x = |cat: &str, name: &str, tid: u32, ts: u32, dur: u32, args: Value| {
        json!({"ph": "X", "cat": cat, "name": name, "pid": if cat == "kernel" { 0 } else { 1 },
               "tid": tid, "ts": ts, "dur": dur, "args": args})
    };
    let launch = if cuda {
        "cudaLaunchKernel"
    } else {
        "hipLaunchKernel"
    };
    for k in 0..2u32 {
        let o = step_us * k;
        ev.push(x(
            "user_annotation",
            &format!("ProfilerStep#{}", k + 1),
            1,
            o,
            step_us,
            json!({}),
        ));
        let mm = json!({"External id": 100 + k, "Input Dims": [[64, 32], [32, 16]],
                        "Input type": ["float", "float"]});
        ev.push(x("cpu_op", "aten::mm", 1, o + 10, 50, mm));
        let link = json!({"correlation": 200 + k, "External id": 100 + k});
        ev.push(x("cuda_runtime", launch, 1, o + 20, 5, link));
        let gemm = if cuda {
            "ampere_sgemm_64x32_nn"
        } else {
            "Cijk_Ailk_Bljk_SB_MT64x32"
        };
        let kargs = json!({"stream": 7, "correlation": 200 + k, "External id": 100 + k});
        ev.push(x("kernel", gemm, 7, o + 100, mm_us, kargs));
        let (op, kname, at, dur) = if cuda {
            ("aten::add", "elementwise_add_kernel", 150, 10)
        } else {
            ("aten::relu", "relu_kernel", 170, 8)
        };
        let dims =
            json!({"External id": 300 + k, "Input Dims": [[64, 16]], "Input type": ["float"]});
        ev.push(x("cpu_op", op, 1, o + 70, 10, dims));
        let (largs, kargs) = if cuda {
            let l = json!({"correlation": 400 + k, "External id": 300 + k});
            (
                l.clone(),
                json!({"stream": 7, "correlation": 400 + k, "External id": 300 + k}),
            )
        } else {
            (
                json!({"correlation": 400 + k}),
                json!({"stream": 7, "correlation": 400 + k}),
            )
        };
        ev.push(x("cuda_runtime", launch, 1, o + 72, 2, largs));
        ev.push(x("kernel", kname, 7, o + at, dur, kargs));
        ev.push(x(
            "cuda_runtime",
            launch,
            1,
            o + 90,
            2,
            json!({"correlation": 500 + k}),
        ));
        let nccl = if cuda {
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        } else {
            "ncclDevKernel_Generic_1"
        };
        let cargs = json!({"stream": 13, "correlation": 500 + k, "Collective name": "allreduce",
            "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 8, "dtype": "Float"});
        ev.push(x("kernel", nccl, 13, o + 200, comm_us, cargs));
    }
    let version = if cuda {
        json!({"cuda_runtime_version": 12090})
    } else {
        json!({"hip_runtime_version": 70051831, "roctracer_version": 4.1})
    };
    let mut doc = json!({"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000i64,
                         "distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": ev});
    doc.as_object_mut()
        .unwrap()
        .extend(version.as_object().unwrap().clone());
    doc.to_string()
}

/// The fixture pair ingested as runs `cuda` and `rocm`; returns (tempdir, dataset).
pub(crate) fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("cuda", side(true, 40, 100, 1000)),
        ("rocm", side(false, 60, 150, 1000)),
    ] {
        std::fs::create_dir_all(dir.path().join("in").join(name)).unwrap();
        std::fs::write(dir.path().join("in").join(name).join("rank0.json"), text).unwrap();
    }
    let ds = dir.path().join("ds");
    ingest_ok(&[&dir.path().join("in")], &ds, &["-q"]);
    (dir, ds)
}

/// The corpus's two model traces on an H100 and on an MI300X (`h100_models`, `mi300x_models`:
/// a run per model), with the corpus paths `more`, ingested into one dataset; returns
/// (tempdir, dataset, [the H100 directory, the MI300X directory]).
pub(crate) fn models_dataset(
    root: &Path,
    more: &[&str],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    [std::path::PathBuf; 2],
) {
    let dir = tempfile::tempdir().unwrap();
    let models = ["kineto/cuda/h100_models", "kineto/rocm/mi300x_models"].map(|p| root.join(p));
    let more: Vec<std::path::PathBuf> = more.iter().map(|p| root.join(p)).collect();
    let paths: Vec<&Path> = models.iter().chain(&more).map(|p| p.as_path()).collect();
    let ds = dir.path().join("ds");
    ingest_ok(&paths, &ds, &["-q"]);
    (dir, ds, models)
}

pub(crate) fn compare(ds: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["compare".as_ref(), ds.as_os_str()];
    a.extend(["-o".as_ref(), out.as_os_str()]);
    a.extend(extra.iter().map(std::ffi::OsStr::new));
    aorta(&a)
}

/// `aorta compare` of the `cuda` run against the `rocm` run with `--fail-if-regressed SPEC`.
pub(crate) fn gate(ds: &Path, out: &Path, spec: &str) -> std::process::Output {
    let args = ["--reference", "cuda", "--candidate", "rocm"];
    compare(
        ds,
        out,
        &[&args[..], &["--fail-if-regressed", spec]].concat(),
    )
}

pub(crate) fn parquet(path: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

pub(crate) fn f64s(df: &DataFrame, c: &str) -> Vec<Option<f64>> {
    df.column(c).unwrap().f64().unwrap().iter().collect()
}

pub(crate) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn fixture_operators_levels_and_collectives_match_the_hand_computed_answers() {
    let (dir, ds) = fixture();
    let out = dir.path().join("cmp");
    let o = compare(&ds, &out, &["--reference", "cuda", "--candidate", "rocm"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ops = parquet(&out.join("compare_operators.parquet"));
    let row = |i: usize| {
        (
            strs(&ops, "op")[i].clone().unwrap(),
            strs(&ops, "input_dims")[i].clone().unwrap(),
            f64s(&ops, "reference_ms")[i],
            f64s(&ops, "candidate_ms")[i],
            i64s(&ops, "reference_calls")[i].unwrap(),
            i64s(&ops, "candidate_calls")[i].unwrap(),
            strs(&ops, "status")[i].clone().unwrap(),
        )
    };
    // Per step window (2 per side): comm 100 vs 150 µs (no op: launched outside every op),
    // mm 40 vs 60 µs, add 10 µs (CUDA only), relu 8 µs (ROCm only, by enclosure).
    // Largest |difference| first: 0.05, 0.02, 0.01, 0.008 ms.
    let want = [
        ("(no CPU op)", "", Some(0.1), Some(0.15), 2, 2, "matched"),
        (
            "aten::mm",
            "[[64, 32], [32, 16]]",
            Some(0.04),
            Some(0.06),
            2,
            2,
            "matched",
        ),
        (
            "aten::add",
            "[[64, 16]]",
            Some(0.01),
            None,
            2,
            0,
            "reference_only",
        ),
        (
            "aten::relu",
            "[[64, 16]]",
            None,
            Some(0.008),
            0,
            2,
            "candidate_only",
        ),
    ];
    assert_eq!(ops.height(), want.len());
    for (i, w) in want.iter().enumerate() {
        let got = row(i);
        assert_eq!((got.0.as_str(), got.1.as_str()), (w.0, w.1), "row {i}");
        for (g, e) in [(got.2, w.2), (got.3, w.3)] {
            assert!(g.zip(e).is_none_or(|(g, e)| close(g, e)) && g.is_some() == e.is_some());
        }
        assert_eq!((got.4, got.5, got.6.as_str()), (w.4, w.5, w.6), "row {i}");
    }
    assert!(close(f64s(&ops, "ratio")[1].unwrap(), 1.5));
    // Operator rates (docs/PERF.md): mm [[64, 32], [32, 16]] is 2·64·16·32 FLOPs per call, in
    // 40 µs (CUDA) and 60 µs (ROCm). The fixture names no GPU: no % of peak on either side.
    let flops = 2.0 * 64.0 * 16.0 * 32.0;
    let (rt, ct) = (
        f64s(&ops, "reference_tflops"),
        f64s(&ops, "candidate_tflops"),
    );
    assert!(close(rt[1].unwrap(), flops / 40e3 / 1e3));
    assert!(close(ct[1].unwrap(), flops / 60e3 / 1e3));
    assert_eq!((rt[2], ct[3]), (None, None), "elementwise ops: bytes only");
    for c in ["reference_peak_pct", "candidate_peak_pct"] {
        assert!(f64s(&ops, c).iter().all(Option::is_none), "{c}");
    }

    // Collectives: 1 Mi Float = 4 MiB per call; algbw = 4194304 B / 100 µs = 41.94304 GB/s,
    // busbw × 2·7/8 = 73.40032; ROCm at 150 µs: 27.962026…, 48.933546….
    let coll = parquet(&out.join("compare_collectives.parquet"));
    assert_eq!(coll.height(), 2);
    assert_eq!(i64s(&coll, "bytes"), vec![Some(4194304); 2]);
    let (alg, bus) = (f64s(&coll, "algbw_gbps"), f64s(&coll, "busbw_gbps"));
    let sides = strs(&coll, "side");
    for i in 0..2 {
        let us = if sides[i].as_deref() == Some("reference") {
            100.0
        } else {
            150.0
        };
        assert!(close(alg[i].unwrap(), 4194304.0 / (us * 1000.0)));
        assert!(close(bus[i].unwrap(), 4194304.0 / (us * 1000.0) * 1.75));
    }

    // Steps: step_ms = the ProfilerStep span, 1 ms on both sides; the GPU window = first
    // kernel start (+100) to comm end: 0.2 vs 0.25 ms; comm never meets compute, so exposed
    // comm = comm. Categories per step: gemm 0.04/0.06, comm 0.1/0.15, other 0.01/0.008.
    let doc: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let level = |l: &str, k: &str| -> LevelEntry {
        let rows = match l {
            "steps" => &doc.levels.steps,
            _ => &doc.levels.categories,
        };
        rows.iter().find(|r| r.key == k).unwrap().clone()
    };
    for (l, k, r, c) in [
        ("steps", "step_ms", 1.0, 1.0),
        ("steps", "gpu_window_ms", 0.2, 0.25),
        ("steps", "exposed_comm_ms", 0.1, 0.15),
        ("categories", "gemm", 0.04, 0.06),
        ("categories", "other", 0.01, 0.008),
    ] {
        let v = level(l, k);
        let (rs, cs) = (v.reference.unwrap(), v.candidate.unwrap());
        assert!(close(rs.median, r), "{l} {k}");
        assert!(close(cs.median, c), "{l} {k}");
        assert!(close(v.ratio.unwrap(), c / r), "{l} {k}");
        assert_eq!(rs.n, 2);
    }
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("aten::mm [[64, 32], [32, 16]]"), "{text}");
    // The collective's size in binary units (4194304 B = 4 × 1024²), as the pages show it;
    // summary.json keeps the exact key.
    assert!(text.contains("  all_reduce 4 MiB Float x8 "), "{text}");
    assert!(!text.contains("4194304"), "{text}");
    assert!(doc
        .levels
        .collectives
        .iter()
        .any(|r| r.key == "all_reduce 4194304 B Float x8"));
    one_pair_one_row_per_key(&out);
}

/// One pair: compare_levels has one row per level and key, the pair's, which is the overall
/// row (nothing for a reader to de-duplicate) and has no spread of pair ratios.
fn one_pair_one_row_per_key(out: &Path) {
    let df = parquet(&out.join("compare_levels.parquet"));
    let (level, key, workload) = (strs(&df, "level"), strs(&df, "key"), strs(&df, "workload"));
    let mut keys: Vec<(String, String)> = (0..df.height())
        .map(|i| (level[i].clone().unwrap(), key[i].clone().unwrap()))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), df.height());
    assert!(workload.iter().all(|w| w.as_deref() == Some("cuda")));
    let overall = df.column("overall").unwrap().bool().unwrap();
    assert!(overall.iter().all(|o| o == Some(true)));
    assert!(i64s(&df, "ratio_n").iter().all(Option::is_none));
}

/// Input dims without whitespace: the layout both sides are compared in.
fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Kernel ns per (op, dims).
type OpNs = BTreeMap<(String, String), i64>;

/// Kernel ns per (op, dims) through `External id` only, from the raw JSON of a trace file:
/// a second implementation of the operator attribution for linked kernels.
fn raw_op_ns(file: &Path) -> OpNs {
    let mut out = BTreeMap::new();
    let doc = raw_json(file);
    let ev = doc["traceEvents"].as_array().unwrap();
    let mut ops = BTreeMap::new();
    for e in ev.iter().filter(|e| e["cat"] == "cpu_op") {
        if let Some(id) = e["args"]["External id"].as_i64() {
            let dims = squeeze(&e["args"]["Input Dims"].to_string());
            let dur = e["dur"].as_f64().unwrap_or(f64::MAX);
            let keep = ops
                .get(&id)
                .is_none_or(|o: &(String, String, f64)| dur < o.2);
            if keep {
                ops.insert(id, (e["name"].as_str().unwrap().to_string(), dims, dur));
            }
        }
    }
    let gpu = ["kernel", "gpu_memcpy", "gpu_memset"];
    for e in ev.iter().filter(|e| gpu.iter().any(|c| e["cat"] == *c)) {
        let Some(op) = e["args"]["External id"].as_i64().and_then(|i| ops.get(&i)) else {
            continue;
        };
        let ns = (e["dur"].as_f64().unwrap() * 1000.0).round() as i64;
        *out.entry((op.0.clone(), op.1.clone())).or_insert(0) += ns;
    }
    out
}

#[test]
fn h100_and_mi300x_models_match_operators_across_vendors() {
    let Some(root) = corpus() else { return };
    let (dir, ds, [cuda, rocm]) = models_dataset(&root, &[]);
    let out = dir.path().join("cmp");
    let o = compare(&ds, &out, &["--reference", "cuda", "--candidate", "rocm"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ops = parquet(&out.join("compare_operators.parquet"));
    let steps = parquet(&out.join("compare_steps.parquet"));
    // Each model is a pair: its operators' time per window of its own run.
    let windows = |side: &str, workload: &str| {
        let (s, w) = (strs(&steps, "side"), strs(&steps, "workload"));
        (0..steps.height())
            .filter(|&i| s[i].as_deref() == Some(side) && w[i].as_deref() == Some(workload))
            .count() as f64
    };
    let workload = strs(&ops, "workload");
    let (names, dims, status) = (
        strs(&ops, "op"),
        strs(&ops, "input_dims"),
        strs(&ops, "status"),
    );
    let (r_ms, c_ms, ratio) = (
        f64s(&ops, "reference_ms"),
        f64s(&ops, "candidate_ms"),
        f64s(&ops, "ratio"),
    );
    for op in ["aten::addmm", "aten::mm", "aten::_flash_attention_forward"] {
        let matched = (0..ops.height())
            .filter(|&i| names[i].as_deref() == Some(op) && status[i].as_deref() == Some("matched"))
            .count();
        assert!(matched > 0, "{op} matched across vendors");
    }
    // Every matched operator has both sides and a ratio; GEMM operators' GPU time agrees
    // with the raw JSON (H100: every kernel carries its External id; MI300X: at least that,
    // launches without one are attributed by enclosure on top).
    let mut raw: BTreeMap<(&str, String), OpNs> = BTreeMap::new();
    for w in workload.iter().flatten() {
        for (side, dir) in [("reference", &cuda), ("candidate", &rocm)] {
            let file = dir.join(format!("{w}.json.gz"));
            raw.entry((side, w.clone()))
                .or_insert_with(|| raw_op_ns(&file));
        }
    }
    assert_eq!(raw.len(), 4, "two models a side, each its own pair");
    for i in (0..ops.height()).filter(|&i| status[i].as_deref() == Some("matched")) {
        assert!(ratio[i].is_some_and(f64::is_finite));
        let key = (
            names[i].clone().unwrap(),
            squeeze(dims[i].as_deref().unwrap()),
        );
        if !key.0.ends_with("mm") {
            continue;
        }
        let w = workload[i].clone().unwrap();
        let want =
            |side: &'static str| raw[&(side, w.clone())][&key] as f64 * 1e-6 / windows(side, &w);
        let want_c = want("reference");
        assert!(
            close(r_ms[i].unwrap(), want_c),
            "{w} {key:?}: {} vs {want_c}",
            r_ms[i].unwrap()
        );
        assert!(c_ms[i].unwrap() >= want("candidate") - 1e-9, "{w} {key:?}");
        // Each side's share of its own GPU's dense bf16 peak: the H100 SXM datasheet's
        // 1,979 TFLOP/s with sparsity halved, the MI300X's 1,307.4.
        if !strs(&ops, "input_types")[i]
            .as_deref()
            .is_some_and(|t| t.contains("BFloat16"))
        {
            continue;
        }
        for (side, peak) in [("reference", 989.5), ("candidate", 1307.4)] {
            let t = f64s(&ops, &format!("{side}_tflops"))[i].unwrap();
            let pct = f64s(&ops, &format!("{side}_peak_pct"))[i].unwrap();
            assert!(close(pct, 100.0 * t / peak), "{key:?} {side}: {pct} vs {t}");
        }
    }
}

#[test]
fn summary_json_is_a_superset_of_the_python_report() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = root.join("aorta_py/h200_fsdp2_profile_overlap_2gpu");
    let logs = [
        run.join("rank_00_metrics.jsonl"),
        run.join("rank_01_metrics.jsonl"),
    ];
    let ds = dir.path().join("ds");
    ingest_ok(&[&logs[0], &logs[1]], &ds, &["--label", "h200", "-q"]);
    let out = dir.path().join("cmp");
    let o = compare(&ds, &out, &["--reference", "h200", "--candidate", "h200"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let ours: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let py: Value = serde_json::from_slice(
        &std::fs::read(run.join("python_overlap_report_summary.json")).unwrap(),
    )
    .unwrap();
    // Every field of the Python summary, with the Python tool's value (to 1 ns per
    // iteration: aorta keeps the logs' milliseconds as integer ns).
    for (k, v) in py["datasets"]["h200"].as_object().unwrap() {
        let (got, want) = (
            ours["datasets"]["h200"][k].as_f64().unwrap(),
            v.as_f64().unwrap(),
        );
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{k}: {got} vs {want}"
        );
    }
    for k in [
        "reference_overlap_ratio",
        "candidate_overlap_ratio",
        "ratio_delta",
    ] {
        assert!(ours["comparison"][k].is_number(), "{k}");
    }
    assert_eq!(ours["comparison"]["ratio_delta"], 0.0);
}

/// The terminal's operator list: a header, every line within `text_table::WIDTH` (160)
/// characters, each column where its header is; an operator's shapes cut with `…` where
/// they do not fit, and summary.json keeping them whole.
#[test]
fn operator_list_has_a_header_aligned_columns_and_whole_shapes_in_json() {
    let Some(root) = corpus() else { return };
    let (dir, ds, _) = models_dataset(&root, &[]);
    let out = dir.path().join("cmp");
    let o = compare(
        &ds,
        &out,
        &["--reference", "cuda", "--candidate", "rocm", "--top", "25"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("operators:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let (header, rows) = lines.split_first().expect("an operator list");
    // Two models a side: two pairs, so the rows lead with their pair.
    let names = [
        "pair",
        "operator",
        "ref_ms",
        "cand_ms",
        "ratio",
        "ref_rate",
        "cand_rate",
        "ref_k/call",
        "cand_k/call",
        "status",
    ];
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        names,
        "{header}"
    );
    let mut left = [false; 10];
    for c in [0, 1, 9] {
        left[c] = true;
    }
    let cells = crate::common::text_table::aligned_cells(header, rows, &left, 160);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let top = doc["operators"]["top"].as_array().unwrap();
    let full = |e: &Value| -> String {
        let (op, dims) = (e["op"].as_str().unwrap(), e["input_dims"].as_str().unwrap());
        if dims.is_empty() {
            op.to_string()
        } else {
            format!("{op} {dims}")
        }
    };
    let mut cut = 0;
    for c in &cells {
        let shown = top.iter().any(|e| {
            e["workload"].as_str() == Some(c[0].as_str())
                && crate::common::text_table::shows(&c[1], &full(e))
                && e["status"].as_str() == Some(c[9].as_str())
        });
        assert!(shown, "{c:?} is no operator of summary.json");
        cut += usize::from(c[1].ends_with('…'));
    }
    assert!(rows.len() >= 20, "{}", rows.len());
    assert!(cut > 0, "no shape long enough to cut:\n{text}");
}
