//! `aorta sweep`: the runner on a command workload (no GPU: a shell command copying committed
//! traces, one variant failing), and `aorta sweep report` on the two sweeps run on 4 × H200
//! (tests/golden/device/sweeps, made with workloads/scripts/sweep_runs.sh).
//!
//! The grid's ranking is checked against the bench's own CUDA-event timing (the JSONL logs'
//! per-iteration `profile.total_ms`, read here independently of the trace), and the channel
//! sweep against what NCCL is known to do: fewer channels, longer collectives; and a variable
//! no library reads, no effect.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use polars::prelude::{ParquetReader, SerReader};
use serde_json::Value;

use crate::common::browser::{chromium, count, open_and_check};
use crate::common::cli::{aorta, code, ingest_ok, stderr};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/device/sweeps")
        .join(name)
}

/// `aorta sweep report DS -o OUT`, which must succeed; its tuning_report.json.
fn sweep_report(ds: &Path, out: &Path) -> Value {
    let o = aorta(&[
        "sweep".as_ref(),
        "report".as_ref(),
        ds.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(out.join("tuning_report.json")).unwrap()).unwrap()
}

/// Ingests a committed sweep's traces (runs labelled `<point>/r<k>` by their directories, as
/// the sweep labelled them) and writes its report; returns the report directory and its JSON.
fn report_of(name: &str, work: &Path) -> (PathBuf, Value) {
    let ds = work.join("data");
    ingest_ok(&[&golden(name).join("traces")], &ds, &["-q"]);
    let out = work.join("report");
    let doc = sweep_report(&ds, &out);
    (out, doc)
}

/// Per point, the median over ranks, repeats and iterations of the bench's CUDA-event
/// iteration time.
fn cuda_event_ms(name: &str) -> BTreeMap<String, f64> {
    let mut per: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let traces = golden(name).join("traces");
    for point in std::fs::read_dir(&traces).unwrap() {
        let point = point.unwrap().path();
        let key = point.file_name().unwrap().to_string_lossy().to_string();
        for rep in std::fs::read_dir(&point).unwrap() {
            for f in std::fs::read_dir(rep.unwrap().path()).unwrap() {
                let f = f.unwrap().path();
                if !f.to_string_lossy().ends_with("metrics.jsonl.gz") {
                    continue;
                }
                let mut text = String::new();
                flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap())
                    .read_to_string(&mut text)
                    .unwrap();
                for line in text.lines() {
                    let v: Value = serde_json::from_str(line).unwrap();
                    if let Some(ms) = v["profile"]["total_ms"].as_f64() {
                        per.entry(key.clone()).or_default().push(ms);
                    }
                }
            }
        }
    }
    per.into_iter()
        .map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            (k, v[v.len() / 2])
        })
        .collect()
}

/// The configuration named by a point key (`bytes=…,gemms-per-iter=…,serial=…`): the report
/// names it by the same params, sorted.
fn config_name(point: &str) -> String {
    let mut kv: Vec<&str> = point.split(',').collect();
    kv.sort_unstable();
    kv.join(",")
}

#[test]
fn the_grid_ranks_as_the_benchs_cuda_events_do() {
    let dir = tempfile::tempdir().unwrap();
    let (out, doc) = report_of("overlap_grid", dir.path());
    let confs = doc["configurations"].as_array().unwrap();
    assert_eq!(confs.len(), 12);
    assert!(confs
        .iter()
        .all(|c| c["runs"].as_array().unwrap().len() == 3));
    let step: BTreeMap<String, f64> = confs
        .iter()
        .map(|c| {
            (
                c["config"].as_str().unwrap().to_string(),
                c["metrics"]["step_ms"]["median"].as_f64().unwrap(),
            )
        })
        .collect();
    let events = cuda_event_ms("overlap_grid");
    assert_eq!(events.len(), 12);
    // Every two points the CUDA events tell apart by more than 2 % are in the same order.
    let pts: Vec<(&String, &f64)> = events.iter().collect();
    let mut checked = 0;
    for (a, ea) in &pts {
        for (b, eb) in &pts {
            if **ea < **eb * 0.98 {
                let (sa, sb) = (step[&config_name(a)], step[&config_name(b)]);
                assert!(
                    sa < sb,
                    "{a}: {ea} ms < {b}: {eb} ms by CUDA events, but {sa} >= {sb}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 60, "{checked} pairs");
    // The winner is the CUDA events' fastest point, and the repeats separate it.
    let fastest = pts.iter().min_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let best = &doc["best"]["step_ms"];
    assert_eq!(best["config"], config_name(fastest).as_str());
    assert_eq!(best["verdict"], "distinguishable", "{best}");
    assert!(best["runner_up"]["config"].is_string());
    // Every knob of the grid moved the step time.
    for k in doc["knobs"].as_array().unwrap() {
        assert_eq!(k["effect"], "measurable", "{k}");
        assert!(k["known"].as_bool().unwrap());
    }
    // sweep.parquet: one row per configuration, the param and metric columns.
    let df = ParquetReader::new(std::fs::File::open(out.join("sweep.parquet")).unwrap())
        .finish()
        .unwrap();
    assert_eq!(df.height(), 12);
    for c in [
        "config",
        "param_bytes",
        "param_gemms-per-iter",
        "param_serial",
        "runs",
        "steps",
        "step_ms_median",
        "step_ms_p10",
        "step_ms_p90",
        "exposed_comm_ms_median",
        "comm_hidden_pct_median",
        "tp_overlap_ratio_median",
        "comm_wait_ms_median",
        "gemm_tflops_median",
    ] {
        assert!(df.column(c).is_ok(), "{c}");
    }
    // The page: one chart per knob and metric, the heatmap; it renders.
    let html = out.join("sweep.html");
    let page = std::fs::read_to_string(&html).unwrap();
    let charts = count(&page, "class=\"plotly-graph-div\"");
    assert_eq!(charts, 3 * 2 + 1, "charts");
    if let Some(browser) = chromium() {
        let r = open_and_check(&browser, &html, charts);
        assert!(r.dom.contains("step_ms against bytes"));
    }
}

#[test]
fn nccl_channels_move_comm_time_and_an_unread_knob_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_, doc) = report_of("nccl_channels", dir.path());
    let knob = |n: &str| {
        doc["knobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == n)
            .unwrap()
            .clone()
    };
    let nccl = knob("NCCL_MAX_NCHANNELS");
    assert_eq!(nccl["effect"], "measurable", "{nccl}");
    assert!(nccl["known"].as_bool().unwrap());
    let moved: Vec<&str> = nccl["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert!(moved.contains(&"comm_ms"), "{moved:?}");
    let rccl = knob("RCCL_NUM_CHANNELS");
    assert_eq!(rccl["effect"], "none", "{rccl}");
    assert_eq!(rccl["known"], false);
    assert!(rccl["warning"]
        .as_str()
        .unwrap()
        .contains("no library reads it"));
    // Comm time per step falls as channels grow, at either RCCL value (medians over the
    // steps of the config's repeats and ranks).
    let comm = |ch: u32, rccl: u32| {
        doc["configurations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["params"]["NCCL_MAX_NCHANNELS"] == ch.to_string().as_str()
                    && c["params"]["RCCL_NUM_CHANNELS"] == rccl.to_string().as_str()
            })
            .unwrap()["metrics"]["comm_ms"]["median"]
            .as_f64()
            .unwrap()
    };
    for r in [1, 16] {
        assert!(comm(1, r) > 2.0 * comm(4, r) && comm(4, r) > comm(16, r));
    }
    // The sweep's own record warned before the first run.
    let rec: Value =
        serde_json::from_slice(&std::fs::read(golden("nccl_channels").join("sweep.json")).unwrap())
            .unwrap();
    assert!(rec["warnings"][0]
        .as_str()
        .unwrap()
        .contains("RCCL_NUM_CHANNELS"));
}

/// A command workload: copies a committed 2-rank trace pair per variant, with as many
/// trailing blanks as the repeat number (so repeats differ by content, as real runs do); the
/// variant `nope` fails.
fn command_spec(dir: &Path, extra: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/traces/overlap-bench");
    let script = dir.join("fake.sh");
    std::fs::write(
        &script,
        format!(
            "set -e\n[ \"$2\" = nope ] && {{ echo \"no such variant: nope\" >&2; exit 3; }}\n\
             for f in {src}/$2/rank*.trace.json.gz; do\n  b=$(basename \"$f\" .gz)\n  \
             gzip -dc \"$f\" > \"$1/$b\"\n  printf \"%${{AORTA_SWEEP_REPEAT}}s\" \"\" >> \"$1/$b\"\ndone\n",
            src = src.display()
        ),
    )
    .unwrap();
    let spec = dir.join("spec.toml");
    std::fs::write(
        &spec,
        format!(
            "command = \"sh {} {{out}} {{variant}}\"\nrepeats = 3\nseed = 3\n{extra}\n[flags]\n\
             variant = [\"allreduce_overlap\", \"allreduce_serial\", \"nope\"]\n",
            script.display()
        ),
    )
    .unwrap();
    spec
}

fn sweep(spec: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "sweep".as_ref(),
        spec.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    aorta(&args)
}

#[test]
fn a_failing_point_is_recorded_and_the_sweep_goes_on_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let spec = command_spec(dir.path(), "");
    let out = dir.path().join("out");
    let o = sweep(&spec, &out, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches(": ok in ").count(), 6, "{err}");
    assert_eq!(err.matches(": failed in ").count(), 3, "{err}");
    assert!(err.contains("no such variant: nope"), "{err}");
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("report/tuning_report.json")).unwrap())
            .unwrap();
    let failed = doc["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 3);
    assert!(failed[0]["error"]
        .as_str()
        .unwrap()
        .contains("no such variant"));
    assert_eq!(doc["configurations"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(out.join("report/sweep.html"))
        .unwrap()
        .contains("3 of 9 runs failed"));
    // The seeded order: round k holds repeat k of every point.
    let rec: Value =
        serde_json::from_slice(&std::fs::read(out.join("data/sweep.json")).unwrap()).unwrap();
    let repeats: Vec<u64> = rec["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["repeat"].as_u64().unwrap())
        .collect();
    assert_eq!(repeats, [1, 1, 1, 2, 2, 2, 3, 3, 3]);
    // Again: the six runs in the dataset are skipped, the failed ones are tried again.
    let o = sweep(&spec, &out, &[]);
    let err = stderr(&o);
    assert_eq!(err.matches(": ok in ").count(), 0, "{err}");
    assert_eq!(err.matches(": failed in ").count(), 3, "{err}");
}

#[test]
fn the_knob_check_names_unknown_knobs_and_strict_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spec = command_spec(
        dir.path(),
        "[env]\nNCCL_MAX_NCHANELS = [\"4\"]\nRCCL_NUM_CHANNELS = [\"8\"]\nNCCL_BUFFSIZE = [\"4194304\"]",
    );
    let out = dir.path().join("out");
    let o = sweep(&spec, &out, &["--strict"]);
    assert_ne!(code(&o), 0);
    let err = stderr(&o);
    assert!(
        err.contains("knob NCCL_MAX_NCHANELS: not in aorta's table"),
        "{err}"
    );
    assert!(
        err.contains("knob RCCL_NUM_CHANNELS: no library reads it (set NCCL_MIN_NCHANNELS"),
        "{err}"
    );
    assert!(!err.contains("knob NCCL_BUFFSIZE"), "{err}");
    assert!(!out.join("data").exists(), "--strict ran something");
    // A dry run lists the points in their order and runs nothing either.
    let o = sweep(&spec, &out, &["--dry-run"]);
    assert_eq!(code(&o), 0);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.starts_with("3 points x 3 repeats = 9 runs (seed 3):"),
        "{text}"
    );
    assert!(!out.join("data").exists());
}

#[test]
fn a_bad_spec_is_one_line_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(
        &spec,
        "workload = \"overlap-bench\"\nrepeats = 3\n[flags]\nbytes = [1, [2]]\n",
    )
    .unwrap();
    let o = sweep(&spec, &dir.path().join("out"), &[]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bad.toml: line 4: "), "{err}");
    assert!(!dir.path().join("out").exists());
}

/// A searched knob: a command writes a trace whose three `ProfilerStep`s last
/// 1 + (v − 5)² / 10 ms for the knob's value v, so the least step time is at v = 5. The
/// bisection finds it over 1..=16 measuring at most 8 values, not 16.
#[test]
fn a_searched_knob_finds_the_valley_with_few_points() {
    let dir = tempfile::tempdir().unwrap();
    let gen = dir.path().join("gen.py");
    std::fs::write(
        &gen,
        r#"import json, sys
out, v = sys.argv[1], int(sys.argv[2])
dur = int(1000 + 100 * (v - 5) ** 2)
ev = []
for k in range(3):
    o = k * (dur + 50)
    ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % k,
               "pid": 1, "tid": 1, "ts": o, "dur": dur, "args": {}})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
               "tid": 1, "ts": o + 5, "dur": 2, "args": {"correlation": 10 + k}})
    ev.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7,
               "ts": o + 10, "dur": dur - 20, "args": {"stream": 7, "correlation": 10 + k}})
doc = {"schemaVersion": 1, "traceEvents": ev, "cuda_runtime_version": 12090,
       "distributedInfo": {"rank": 0, "world_size": 1}}
json.dump(doc, open(out + "/rank0.trace.json", "w"))
"#,
    )
    .unwrap();
    let spec = dir.path().join("search.toml");
    std::fs::write(
        &spec,
        format!(
            "command = \"python3 {} {{out}} {{v}}\"\nrepeats = 1\n[flags]\nv = {{ search = \"bisect\", min = 1, max = 16 }}\n",
            gen.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = sweep(&spec, &out, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("search v at default: best 5 by step_ms"),
        "{}",
        stderr(&o)
    );
    let rec: Value =
        serde_json::from_slice(&std::fs::read(out.join("data/sweep.json")).unwrap()).unwrap();
    let s = &rec["searches"][0];
    assert_eq!(s["best"], 5);
    let measured = s["measured"].as_array().unwrap();
    assert!(measured.len() <= 8, "{measured:?}");
    for m in measured {
        let v = m[0].as_f64().unwrap();
        let want = 1.0 + (v - 5.0).powi(2) / 10.0;
        assert!((m[1].as_f64().unwrap() - want).abs() < 1e-9, "{m}");
    }
    // The report's winner is the search's answer.
    let doc: Value =
        serde_json::from_slice(&std::fs::read(out.join("report/tuning_report.json")).unwrap())
            .unwrap();
    assert_eq!(doc["best"]["step_ms"]["config"], "v=5");
}

/// Any dataset, not only a sweep: the TP layer's runs (one per TP size and method) give the
/// per-window `configs`, the TP scaling check and the tuner's YAML.
#[test]
fn the_report_on_tp_runs_writes_the_tuners_files() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("tp");
    let runs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/device/tp");
    ingest_ok(&[&runs], &ds, &["-q"]);
    let out = dir.path().join("report");
    let doc = sweep_report(&ds, &out);
    let configs = doc["configs"].as_array().unwrap();
    // 6 configurations (TP 1, 2, 4 × serial, overlap) × 4 operators, fprop.
    assert_eq!(configs.len(), 24);
    for c in configs {
        assert_eq!(c["phase"], "fprop");
        assert!(c["forward_e2e_time_us"].as_f64().unwrap() > 0.0);
        assert!(c["backward_e2e_time_us"].is_null());
        // e2e rank 1 is the fastest method of its operator and TP size.
        let same: Vec<&Value> = configs
            .iter()
            .filter(|d| d["operator"] == c["operator"] && d["tp_size"] == c["tp_size"])
            .collect();
        let fastest = same
            .iter()
            .min_by(|a, b| {
                a["operator_e2e_time_us"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["operator_e2e_time_us"].as_f64().unwrap())
            })
            .unwrap();
        assert_eq!(c["e2e_rank"] == 1, std::ptr::eq(*fastest, c), "{c}");
    }
    let overall = &doc["tp_scaling"]["results"]["overall"];
    assert_eq!(overall["optimal_tp_size"], 1, "{overall}");
    // The page says it too, with the windows' table.
    let page = std::fs::read_to_string(out.join("sweep.html")).unwrap();
    assert!(page.contains("TP overlap per operator window"));
    assert!(page.contains("recommended: TP 1"));
    for f in [
        "optimal_tp_comm_overlap_cfg.yaml",
        "optimal_tp_comm_overlap_cfg_tp2.yaml",
        "optimal_tp_comm_overlap_cfg_tp4.yaml",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
}

/// A run whose trace has no steps but which has the workloads' per-iteration log: its
/// iterations are the steps (the log's `profile.total_ms` each), configurations from
/// `ingest --param`.
#[test]
fn a_per_iteration_log_gives_the_steps_of_a_run_without_trace_steps() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/traces/overlap-bench");
    let mut want: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for (variant, dir_name) in [("a", "allreduce_overlap"), ("b", "allreduce_serial")] {
        let log = src.join(dir_name).join("rank_00_metrics.jsonl.gz");
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&log).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let mut ms: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["profile"]["total_ms"].as_f64()
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median = if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        want.insert(variant, (n, median));
        let param = format!("variant={variant}");
        ingest_ok(
            &[&log],
            &ds,
            &["-q", "--label", dir_name, "--param", &param],
        );
    }
    let out = dir.path().join("report");
    let doc = sweep_report(&ds, &out);
    for c in doc["configurations"].as_array().unwrap() {
        let v = c["params"]["variant"].as_str().unwrap();
        let (n, median) = want[v];
        assert_eq!(c["steps"], n, "{c}");
        let got = c["metrics"]["step_ms"]["median"].as_f64().unwrap();
        assert!((got - median).abs() < 1e-6, "{v}: {got} vs {median}");
    }
}
