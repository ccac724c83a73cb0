//! The real corpus, file by file, against numbers computed independently in the test
//! (serde_json over the raw trace, hand-checked metadata, the reviewed golden table).

use std::collections::{BTreeMap, HashMap};

use crate::common::reference::{golden, us_text_to_ns};
use crate::common::*;

#[test]
fn counts_match_an_independent_count() {
    let Some(ds) = per_file_dataset() else { return };
    for f in &ds.files {
        let label = label_of(f);
        let raw = raw_json(f);
        let ev = events(&raw);
        let slices = |cats: &[&str]| {
            ev.iter()
                .filter(|e| is_slice(e) && cats.contains(&cat(e)))
                .count() as i64
        };
        let kernels = slices(&["kernel"]);
        let gpu = slices(&["kernel", "gpu_memcpy", "gpu_memset"]);
        let cpu = slices(&[
            "cpu_op",
            "user_annotation",
            "cuda_runtime",
            "cuda_driver",
            "python_function",
        ]);
        let runs = table(ds.dir.path(), "runs", &label);
        assert_eq!(runs.height(), 1, "{label}");
        let one = |c: &str| i64s(&runs, c)[0].unwrap();
        assert_eq!(one("event_count"), ev.len() as i64, "{label} events");
        assert_eq!(one("kernel_count"), kernels, "{label} kernels");
        assert_eq!(one("gpu_activity_count"), gpu, "{label} gpu activities");
        assert_eq!(one("cpu_op_count"), cpu, "{label} cpu ops");
        assert_eq!(
            table(ds.dir.path(), "gpu_activities", &label).height() as i64,
            gpu,
            "{label}"
        );
        assert_eq!(
            table(ds.dir.path(), "cpu_ops", &label).height() as i64,
            cpu,
            "{label}"
        );
        assert!(kernels > 0, "{label} has kernels");
    }
}

#[test]
fn epoch_microsecond_integers_become_exact_nanoseconds() {
    let Some(ds) = per_file_dataset() else { return };
    let f = ds.file("v100_dlrm_8rank/worker0.pt.trace.json.gz");
    let raw = raw_json(f);
    // Integer µs since the epoch (2023 Kineto): serde_json keeps u64 exactly.
    let mut want: Vec<(i64, i64)> = events(&raw)
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "kernel")
        .map(|e| {
            let ts = e["ts"].as_u64().expect("integer ts") as i64;
            (ts * 1000, (ts + e["dur"].as_u64().unwrap() as i64) * 1000)
        })
        .collect();
    let df = table(ds.dir.path(), "gpu_activities", &label_of(f));
    let got = kernel_spans(&df);
    want.sort();
    assert_eq!(got, want);
    assert!(want[0].0 > 1_600_000_000_000_000_000, "absolute epoch ns");
}

#[test]
fn relative_decimal_timestamps_add_the_base_time_exactly() {
    let Some(ds) = per_file_dataset() else { return };
    let f = ds.file("h200_fsdp2/rank0.pt.trace.json.gz");
    let text = String::from_utf8(
        std::process::Command::new("gzip")
            .arg("-dc")
            .arg(f)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let base: i64 = regex::Regex::new(r#""baseTimeNanoseconds": (\d+)"#)
        .unwrap()
        .captures(&text)
        .unwrap()[1]
        .parse()
        .unwrap();
    let re =
        regex::Regex::new(r#""cat": "kernel", .*\n\s*"ts": ([0-9.]+), "dur": ([0-9.]+)"#).unwrap();
    let mut want: Vec<(i64, i64)> = re
        .captures_iter(&text)
        .map(|c| {
            let ts = us_text_to_ns(&c[1]);
            (base + ts, base + ts + us_text_to_ns(&c[2]))
        })
        .collect();
    let df = table(ds.dir.path(), "gpu_activities", &label_of(f));
    let got = kernel_spans(&df);
    want.sort();
    assert_eq!(want.len(), 1416);
    assert_eq!(got, want);
}

/// (file suffix, rank, rank source, platform, device name, device index, world size),
/// read by hand off each file's distributedInfo / deviceProperties / version keys.
type Expected = (
    &'static str,
    i64,
    &'static str,
    &'static str,
    Option<&'static str>,
    i64,
    Option<i64>,
);

const EXPECTED: &[Expected] = &[
    (
        "rank0_trace_step12.json.gz",
        0,
        "distributed_info",
        "cuda",
        Some("NVIDIA H200"),
        0,
        Some(2),
    ),
    (
        "rank1_trace_step12.json.gz",
        1,
        "distributed_info",
        "cuda",
        Some("NVIDIA H200"),
        1,
        Some(2),
    ),
    (
        "a100_nccl/nccl_data.json.gz",
        0,
        "distributed_info",
        "cuda",
        Some("NVIDIA A100-PG509-200"),
        0,
        Some(2),
    ),
    (
        "a100_sampled_2rank/rank-0.json.gz",
        0,
        "distributed_info",
        "cuda",
        None,
        0,
        Some(128),
    ),
    (
        "a100_sampled_2rank/rank-1.json.gz",
        1,
        "distributed_info",
        "cuda",
        None,
        1,
        Some(128),
    ),
    (
        "h100_models/bert-small.json.gz",
        0,
        "default",
        "cuda",
        Some("NVIDIA H100 80GB HBM3"),
        0,
        None,
    ),
    (
        "h100_models/qwen1.5-0.5b-chat.json.gz",
        0,
        "default",
        "cuda",
        Some("NVIDIA H100 80GB HBM3"),
        0,
        None,
    ),
    (
        "h200_fsdp2/rank0.pt.trace.json.gz",
        0,
        "distributed_info",
        "cuda",
        Some("NVIDIA H200"),
        0,
        Some(2),
    ),
    (
        "h200_fsdp2/rank1.pt.trace.json.gz",
        1,
        "distributed_info",
        "cuda",
        Some("NVIDIA H200"),
        1,
        Some(2),
    ),
    (
        "h200_sdma/sdma_overlap.pt.trace.json.gz",
        0,
        "default",
        "cuda",
        Some("NVIDIA H200"),
        0,
        None,
    ),
    (
        "v100_dlrm_8rank/worker0.pt.trace.json.gz",
        0,
        "distributed_info",
        "cuda",
        Some("Tesla V100-SXM2-32GB"),
        0,
        Some(8),
    ),
    (
        "v100_dlrm_8rank/worker3.pt.trace.json.gz",
        3,
        "distributed_info",
        "cuda",
        Some("Tesla V100-SXM2-32GB"),
        3,
        Some(8),
    ),
    (
        "v100_dlrm_8rank/worker7.pt.trace.json.gz",
        7,
        "distributed_info",
        "cuda",
        Some("Tesla V100-SXM2-32GB"),
        7,
        Some(8),
    ),
    (
        "mi210_gpu_only/gpu_only_trace.json.gz",
        0,
        "default",
        "rocm",
        Some("AMD Instinct MI210"),
        1,
        None,
    ),
    (
        "mi250_minitoy/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        0,
        "default",
        "rocm",
        Some("AMD Radeon Graphics"),
        2,
        None,
    ),
    (
        "mi300x_models/bert-small.json.gz",
        0,
        "default",
        "rocm",
        Some("AMD Instinct MI300X VF"),
        2,
        None,
    ),
    (
        "mi300x_models/qwen1.5-0.5b-chat.json.gz",
        0,
        "default",
        "rocm",
        Some("AMD Instinct MI300X VF"),
        2,
        None,
    ),
    (
        "mi300x_resnet_ckpt/resnet_act_checkpoint.json.gz",
        0,
        "distributed_info",
        "rocm",
        Some("AMD Instinct MI300X"),
        2,
        Some(8),
    ),
    (
        "mi350x_aorta/smci350_200691.pt.trace.json",
        0,
        "default",
        "rocm",
        Some("AMD Instinct MI350X"),
        0,
        None,
    ),
];

#[test]
fn rank_platform_and_device_are_detected() {
    let Some(ds) = per_file_dataset() else { return };
    for (suffix, rank, source, platform, device, index, world) in EXPECTED {
        let f = ds.file(suffix);
        let runs = table(ds.dir.path(), "runs", &label_of(f));
        let s = |c: &str| strs(&runs, c)[0].clone();
        let i = |c: &str| i64s(&runs, c)[0];
        assert_eq!(i("rank"), Some(*rank), "{suffix}");
        assert_eq!(s("rank_source").as_deref(), Some(*source), "{suffix}");
        assert_eq!(s("platform").as_deref(), Some(*platform), "{suffix}");
        assert_eq!(s("device_name").as_deref(), *device, "{suffix}");
        assert_eq!(i("device_index"), Some(*index), "{suffix}");
        assert_eq!(i("world_size"), *world, "{suffix}");
    }
}

/// `runs.params` keeps the top-level keys a user added (the models' `metadata` object, as
/// serde_json reads it from the raw file), and nothing for traces with only Kineto's own keys
/// (the A100 trace's `INFO` log lines included).
#[test]
fn user_metadata_becomes_run_params() {
    let Some(ds) = per_file_dataset() else { return };
    for suffix in [
        "h100_models/bert-small.json.gz",
        "mi300x_models/qwen1.5-0.5b-chat.json.gz",
    ] {
        let f = ds.file(suffix);
        let runs = table(ds.dir.path(), "runs", &label_of(f));
        let params: serde_json::Value =
            serde_json::from_str(strs(&runs, "params")[0].as_deref().unwrap()).unwrap();
        let raw = raw_json(f);
        assert_eq!(
            params,
            serde_json::json!({ "metadata": raw["metadata"] }),
            "{suffix}"
        );
    }
    for suffix in [
        "a100_nccl/nccl_data.json.gz",
        "h200_fsdp2/rank0.pt.trace.json.gz",
    ] {
        let runs = table(ds.dir.path(), "runs", &label_of(ds.file(suffix)));
        assert_eq!(strs(&runs, "params")[0], None, "{suffix}");
    }
}

#[test]
fn every_ingested_activity_has_its_reviewed_category() {
    let Some(ds) = per_file_dataset() else { return };
    let golden = golden();
    let df = aorta_transform::dataset::read(ds.dir.path(), "gpu_activities").unwrap();
    let (kind, name, cat, op, coll) = (
        strs(&df, "kind"),
        strs(&df, "name"),
        strs(&df, "category"),
        strs(&df, "comm_op"),
        strs(&df, "collective_name"),
    );
    let mut seen = 0;
    for i in 0..df.height() {
        let key = (kind[i].clone().unwrap(), name[i].clone().unwrap());
        let (want_cat, want_op) = golden
            .get(&key)
            .unwrap_or_else(|| panic!("{key:?} not in the golden table"));
        assert_eq!(cat[i].as_deref(), Some(want_cat.as_str()), "{key:?}");
        if coll[i].is_none() {
            let want = (!want_op.is_empty()).then_some(want_op.as_str());
            assert_eq!(op[i].as_deref(), want, "{key:?}");
        }
        seen += 1;
    }
    assert!(seen > 20_000);
}

#[test]
fn rccl_generic_kernels_take_their_kind_from_the_collective_arg() {
    let Some(ds) = per_file_dataset() else { return };
    let f = ds.file("resnet_act_checkpoint.json.gz");
    let raw = raw_json(f);
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for e in events(&raw)
        .iter()
        .filter(|e| is_slice(e) && cat(e) == "kernel")
    {
        if e["name"]
            .as_str()
            .unwrap()
            .starts_with("ncclDevKernel_Generic")
        {
            let kind = match e["args"]["Collective name"].as_str() {
                Some("allreduce") => "all_reduce",
                Some("broadcast") => "broadcast",
                Some(other) => panic!("unexpected collective {other}"),
                None => "other",
            };
            *want.entry(kind.into()).or_default() += 1;
        }
    }
    let df = table(ds.dir.path(), "gpu_activities", &label_of(f));
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for (c, op) in strs(&df, "category").into_iter().zip(strs(&df, "comm_op")) {
        if c.as_deref() == Some("comm") {
            *got.entry(op.unwrap()).or_default() += 1;
        }
    }
    assert!(want.values().sum::<i64>() > 0);
    assert_eq!(got, want);
}

/// Steps of the H200 FSDP2 kernels, computed here from the raw JSON: kernel → runtime call
/// with the same correlation → the `ProfilerStep#N` user_annotation containing its start.
#[test]
fn fsdp2_kernels_get_the_step_of_their_launch() {
    let Some(ds) = per_file_dataset() else { return };
    for r in ["rank0", "rank1"] {
        let f = ds.file(&format!("h200_fsdp2/{r}.pt.trace.json.gz"));
        let raw = raw_json(f);
        let ev = events(&raw);
        let spans: Vec<(f64, f64, i64)> = ev
            .iter()
            .filter(|e| is_slice(e) && cat(e) == "user_annotation")
            .filter_map(|e| {
                let n = e["name"]
                    .as_str()?
                    .strip_prefix("ProfilerStep#")?
                    .parse()
                    .ok()?;
                let ts = e["ts"].as_f64()?;
                Some((ts, ts + e["dur"].as_f64()?, n))
            })
            .collect();
        assert_eq!(spans.len(), 3);
        let launch: HashMap<i64, f64> = ev
            .iter()
            .filter(|e| is_slice(e) && matches!(cat(e), "cuda_runtime" | "cuda_driver"))
            .filter_map(|e| Some((e["args"]["correlation"].as_i64()?, e["ts"].as_f64()?)))
            .collect();
        let step_of = |t: f64| spans.iter().find(|s| s.0 <= t && t <= s.1).map(|s| s.2);
        let mut want: BTreeMap<i64, Option<i64>> = BTreeMap::new();
        for e in ev.iter().filter(|e| is_slice(e) && cat(e) == "kernel") {
            let corr = e["args"]["correlation"].as_i64().unwrap();
            want.insert(corr, step_of(launch[&corr]));
        }
        let df = table(ds.dir.path(), "gpu_activities", &label_of(f));
        let got: BTreeMap<i64, Option<i64>> = i64s(&df, "correlation")
            .into_iter()
            .zip(i64s(&df, "step"))
            .zip(strs(&df, "kind"))
            .filter(|(_, k)| k.as_deref() == Some("kernel"))
            .map(|((c, s), _)| (c.unwrap(), s))
            .collect();
        assert_eq!(got, want, "{r}");
        let per_step: BTreeMap<Option<i64>, usize> =
            want.values().fold(BTreeMap::new(), |mut m, s| {
                *m.entry(*s).or_default() += 1;
                m
            });
        assert_eq!(
            per_step.keys().copied().collect::<Vec<_>>(),
            vec![Some(3), Some(4), Some(5)],
            "{r}"
        );
        let steps = table(ds.dir.path(), "steps", &label_of(f));
        assert_eq!(i64s(&steps, "step"), vec![Some(3), Some(4), Some(5)]);
        let counts: Vec<i64> = i64s(&steps, "kernel_count")
            .into_iter()
            .map(Option::unwrap)
            .collect();
        let want_counts: Vec<i64> = per_step.values().map(|n| *n as i64).collect();
        assert_eq!(counts, want_counts, "{r}");
    }
}

/// The whole Kineto corpus from one directory too high (`kineto/`, holding `cuda/<job>` and
/// `rocm/<job>`): every file lands, each job is its own run named by its path under the root,
/// and the two directories of single-model traces split into one run per model. Before job
/// identity, all 18 CUDA files became one run `cuda` whose rank 0 spanned 3.5 years.
#[test]
fn cli_ingests_the_whole_kineto_corpus_one_run_per_job() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aorta"))
        .args(["ingest", "-q", "-o"])
        .arg(dir.path())
        .arg(root.join("kineto"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The expected label of every file, from the directory listing: its directory under
    // `kineto/`, plus the file stem in the two model directories (rankless traces).
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    for vendor in ["cuda", "rocm"] {
        for job in std::fs::read_dir(root.join("kineto").join(vendor)).unwrap() {
            let job = job.unwrap().path();
            let jname = job.file_name().unwrap().to_string_lossy().to_string();
            for f in std::fs::read_dir(&job).unwrap() {
                let name = f.unwrap().file_name().to_string_lossy().to_string();
                let label = if jname.ends_with("_models") {
                    format!("{vendor}/{jname}/{}", name.trim_end_matches(".json.gz"))
                } else {
                    format!("{vendor}/{jname}")
                };
                *want.entry(label).or_default() += 1;
            }
        }
    }
    let runs = aorta_transform::dataset::read(dir.path(), "runs").unwrap();
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    let mut span: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let (first, last) = (i64s(&runs, "first_ns"), i64s(&runs, "last_ns"));
    for (i, run) in strs(&runs, "run").into_iter().enumerate() {
        let run = run.unwrap();
        *got.entry(run.clone()).or_default() += 1;
        if let (Some(a), Some(b)) = (first[i], last[i]) {
            let e = span.entry(run).or_insert((a, b));
            *e = (e.0.min(a), e.1.max(b));
        }
    }
    assert_eq!(got, want);
    assert_eq!(want.len(), 13, "{want:?}");
    // No run's timeline spans more than a few minutes (the jobs are seconds long).
    for (run, (a, b)) in span {
        assert!(
            b - a < 600_000_000_000,
            "{run}: {} s",
            (b - a) / 1_000_000_000
        );
    }
    // The split is said, even with -q, naming the reason and the new runs.
    assert!(
        stderr.contains(
            "note: run `cuda/h100_models`: its files cannot be one job: 2 traces name no rank"
        ) && stderr.contains("cuda/h100_models/bert-small, cuda/h100_models/qwen1.5-0.5b-chat"),
        "{stderr}"
    );
}

/// `cpu_ops` keeps `Concrete Inputs` and `Input Strides` (schema v4) as the JSON the trace
/// wrote: every operator's pair, parsed back, equals serde_json's reading of the raw event
/// (compared as multisets of pairs).
#[test]
fn concrete_inputs_and_strides_are_kept_as_written() {
    let Some(ds) = per_file_dataset() else { return };
    for suffix in [
        "h100_models/qwen1.5-0.5b-chat.json.gz",
        "mi300x_models/bert-small.json.gz",
    ] {
        let f = ds.file(suffix);
        let raw = raw_json(f);
        let key = |e: &serde_json::Value, k: &str| e["args"].get(k).cloned();
        let mut want: Vec<String> = events(&raw)
            .iter()
            .filter(|e| is_slice(e) && cat(e) == "cpu_op")
            .map(|e| format!("{:?}", (key(e, "Concrete Inputs"), key(e, "Input Strides"))))
            .collect();
        let ops = table(ds.dir.path(), "cpu_ops", &label_of(f));
        let category = strs(&ops, "category");
        let (conc, strides) = (strs(&ops, "concrete_inputs"), strs(&ops, "input_strides"));
        let parse = |s: &Option<String>| {
            s.as_deref()
                .map(|t| serde_json::from_str::<serde_json::Value>(t).unwrap())
        };
        let mut got: Vec<String> = (0..ops.height())
            .filter(|&i| category[i].as_deref() == Some("cpu_op"))
            .map(|i| format!("{:?}", (parse(&conc[i]), parse(&strides[i]))))
            .collect();
        want.sort();
        got.sort();
        // SDPA's `is_causal` is among them (qwen is causal), and strides are non-trivial.
        assert!(want.iter().any(|w| w.contains("True")), "{suffix}");
        assert_eq!(got, want, "{suffix}");
    }
}
