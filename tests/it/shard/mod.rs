//! `aorta ingest --shard I/N` (docs/SCALE.md): N processes started at once into one dataset
//! directory give exactly the dataset one unsharded ingest gives, table by table
//! (`bench/same_dataset.py`, pyarrow: independent of aorta's reader) and manifest entry by
//! entry; a shard killed mid-way and run again gives it too; a label whose files are not one
//! job is refused by the readers, naming the way out.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

mod dask;
mod engines;

use crate::common::cli::{aorta, code, ingest_ok, stderr, AORTA};
use crate::common::{corpus, venv_python};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The inputs: the committed four-rank traces (three jobs of four ranks, each rank with its
/// metrics log) and two small corpus files named on the command line (a rocprofv3 JSON and a
/// generic Chrome trace: other readers, labels from their directories).
/// What the shard tests compare against: the Python with pyarrow, a scratch directory, the
/// inputs and their unsharded dataset (`tmp/base`).
struct Baseline {
    py: PathBuf,
    tmp: tempfile::TempDir,
    inputs: Vec<PathBuf>,
    base: PathBuf,
}

/// None where the corpus or the venv is missing (a failure under `CI=true`, as they say).
fn baseline() -> Option<Baseline> {
    let data = corpus()?;
    let py = venv_python("pyarrow")?;
    let tmp = tempfile::tempdir().unwrap();
    let inputs = inputs(&data);
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let base = tmp.path().join("base");
    ingest_ok(&refs, &base, &["-q"]);
    Some(Baseline {
        py,
        tmp,
        inputs,
        base,
    })
}

fn inputs(data: &Path) -> Vec<PathBuf> {
    vec![
        repo().join("workloads/traces/four-gpu"),
        data.join("rocprofv3/json/mi350x_908_results.json.gz"),
        data.join("chrome/flow_simple.json"),
    ]
}

fn spawn_shard(inputs: &[PathBuf], out: &Path, shard: &str, extra: &[&str]) -> Child {
    Command::new(AORTA)
        .arg("ingest")
        .args(inputs)
        .arg("-o")
        .arg(out)
        .args(["-q", "--shard", shard])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aorta runs")
}

fn wait_ok(child: Child, what: &str) {
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `bench/same_dataset.py BASE NEW`: every table equal as a sorted multiset of rows, and the
/// same Parquet schema file by file.
fn assert_same_dataset(py: &Path, base: &Path, new: &Path) {
    let o = Command::new(py)
        .arg(repo().join("bench/same_dataset.py"))
        .args([base, new])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("ALL EQUAL"),
        "{} vs {}:\n{text}{}",
        base.display(),
        new.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The manifest entries readers see (root and shards merged), as JSON, without the flag that
/// says a shard wrote them.
fn entries(ds: &Path) -> Vec<serde_json::Value> {
    let m = aorta_ingest::dataset::Manifest::load(ds).unwrap();
    m.inputs
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            v.as_object_mut().unwrap().remove("job_unchecked");
            v
        })
        .collect()
}

/// The sources each shard's own manifest lists.
fn shard_sources(ds: &Path, n: u32) -> Vec<Vec<String>> {
    (0..n)
        .map(|i| {
            let p = ds.join(format!("shards/{i}-of-{n}/manifest.json"));
            let Ok(bytes) = std::fs::read(&p) else {
                return vec![];
            };
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            v["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["source"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn shards_run_at_once_give_the_unsharded_dataset_for_1_2_and_7() {
    let Some(Baseline {
        py,
        tmp,
        inputs,
        base,
    }) = baseline()
    else {
        return;
    };
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let want = entries(&base);
    assert_eq!(want.len(), 26, "24 four-gpu files and 2 corpus files");
    let info = |ds: &Path| {
        let o = aorta(&["info".as_ref(), ds.as_os_str()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let base_info = info(&base);
    for n in [1u32, 2, 7] {
        let ds = tmp.path().join(format!("shards{n}"));
        let children: Vec<Child> = (0..n)
            .map(|i| spawn_shard(&inputs, &ds, &format!("{i}/{n}"), &[]))
            .collect();
        for (i, c) in children.into_iter().enumerate() {
            wait_ok(c, &format!("shard {i}/{n}"));
        }
        // Each input in exactly one shard's manifest, and every shard of 2 has some.
        let per = shard_sources(&ds, n);
        let mut all: Vec<&String> = per.iter().flatten().collect();
        all.sort();
        let before = all.len();
        all.dedup();
        assert_eq!((before, all.len()), (26, 26), "{n} shards: {per:?}");
        if n == 2 {
            assert!(per.iter().all(|s| !s.is_empty()), "{per:?}");
        }
        assert_same_dataset(&py, &base, &ds);
        assert_eq!(entries(&ds), want, "{n} shards: the merged manifest");
        assert_eq!(info(&ds), base_info, "{n} shards: aorta info");
        // Run again, every shard finds its files unchanged: nothing is rewritten.
        let again: Vec<Child> = (0..n)
            .map(|i| spawn_shard(&inputs, &ds, &format!("{i}/{n}"), &[]))
            .collect();
        for c in again {
            wait_ok(c, "re-run");
        }
        assert_eq!(shard_sources(&ds, n), per);
        if n == 2 {
            // An unsharded ingest finds every shard's file unchanged (one job per label): it
            // reads none again.
            let o = crate::common::cli::ingest(&refs, &ds, &[]);
            assert_eq!(code(&o), 0, "{}", stderr(&o));
            assert!(
                stderr(&o).contains("ingested 0 of 26 files") && !ds.join("shards").exists(),
                "{}",
                stderr(&o)
            );
            assert_eq!(entries(&ds), want);
        }
        // Folded into one manifest: the same dataset, no shards left.
        let o = aorta(&["dataset".as_ref(), "merge".as_ref(), ds.as_os_str()]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert!(!ds.join("shards").exists());
        assert_eq!(entries(&ds), want, "{n} shards, folded");
        assert_same_dataset(&py, &base, &ds);
    }
}

/// Shard 0 of 2 is SIGKILLed while it reads (its staging directory exists), shard 1 runs to
/// the end beside it; run again, shard 0 takes over its own lock, clears its staging
/// directory, and the dataset is the unsharded one.
#[test]
fn a_killed_shard_run_again_completes_the_dataset() {
    let Some(Baseline {
        py,
        tmp,
        inputs,
        base,
    }) = baseline()
    else {
        return;
    };
    let ds = tmp.path().join("ds");
    let home = ds.join("shards/0-of-2");
    let mut killed = false;
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&ds);
        let mut victim = spawn_shard(&inputs, &ds, "0/2", &["-j", "1"]);
        let other = spawn_shard(&inputs, &ds, "1/2", &[]);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(20) {
            let staging = std::fs::read_dir(&home)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(".staging-"));
            if staging || victim.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if victim.try_wait().unwrap().is_none() {
            victim.kill().unwrap();
            killed = !victim.wait().unwrap().success();
        }
        wait_ok(other, "shard 1/2");
        if killed {
            break;
        }
    }
    assert!(killed, "shard 0/2 was never caught mid-way in 5 tries");
    // What shard 0 left is its own: shard 1's files are all there.
    let per = shard_sources(&ds, 2);
    assert!(!per[1].is_empty());
    wait_ok(spawn_shard(&inputs, &ds, "0/2", &[]), "shard 0/2 again");
    let left: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_same_dataset(&py, &base, &ds);
    assert_eq!(entries(&ds), entries(&base));
}

/// Two single-GPU traces that name no rank in one directory are two jobs; no shard can tell
/// (each may read one). The readers refuse the label in one line naming the way out; an
/// ingest without `--shard` reads them again and splits the label, as it does unsharded.
#[test]
fn a_label_that_is_not_one_job_is_refused_until_ingested_unsharded() {
    let Some(data) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("traces/models");
    std::fs::create_dir_all(&models).unwrap();
    for f in ["bert-small.json.gz", "qwen1.5-0.5b-chat.json.gz"] {
        std::fs::copy(data.join("kineto/cuda/h100_models").join(f), models.join(f)).unwrap();
    }
    let traces = tmp.path().join("traces");
    let ds = tmp.path().join("ds");
    for i in 0..2 {
        wait_ok(
            spawn_shard(std::slice::from_ref(&traces), &ds, &format!("{i}/2"), &[]),
            "shard",
        );
    }
    for cmd in [&["info"][..], &["dataset", "merge"]] {
        let mut args: Vec<&std::ffi::OsStr> = cmd.iter().map(|s| s.as_ref()).collect();
        args.push(ds.as_os_str());
        let o = aorta(&args);
        let err = stderr(&o);
        assert_eq!(code(&o), 2, "{cmd:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("run `models`")
                && err.contains("cannot be one job")
                && err.contains("without --shard"),
            "{err}"
        );
    }
    ingest_ok(&[&traces], &ds, &["-q"]);
    let o = aorta(&["info".as_ref(), ds.as_os_str()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("run models/bert-small") && text.contains("run models/qwen1.5-0.5b-chat"),
        "{text}"
    );
}

/// `--shard` errors are one line naming the flag: a bad value, and shards of another count.
#[test]
fn shard_errors_name_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let traces = repo().join("workloads/traces/four-gpu/overlap-bench_clean");
    let ds = tmp.path().join("ds");
    for (bad, says) in [
        ("3/2", "below the count"),
        ("1/0", "1 or more"),
        ("x", "I/N"),
    ] {
        let o = crate::common::cli::ingest(&[&traces], &ds, &["--shard", bad]);
        assert_eq!(code(&o), 2);
        let err = stderr(&o);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains("--shard") && first.contains(says), "{err}");
    }
    wait_ok(
        spawn_shard(std::slice::from_ref(&traces), &ds, "0/2", &[]),
        "0/2",
    );
    let o = crate::common::cli::ingest(&[&traces], &ds, &["--shard", "1/3"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--shard 1/3") && err.contains("another count (0-of-2)"),
        "{err}"
    );
}
