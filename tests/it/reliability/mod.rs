//! Hostile conditions, each promise of docs/RELIABILITY.md held by a test here: two processes
//! at one dataset (`locks`), a read-only, missing or empty dataset (`read_only`), a damaged
//! one (`damaged`), writes that fail (`write_failures`), inputs built to exhaust time or
//! memory (`bombs`), and what a directory walk and `--strict` report (`walk_strict`).
//!
//! Inputs are generated here (small Kineto traces with a known number of kernels), so none of
//! these tests needs the corpus; every command runs as a child process, as a user runs it.

mod bombs;
mod damaged;
mod hostile;
mod locks;
mod read_only;
mod walk_strict;
mod write_failures;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) use crate::common::cli::{code, snapshot, stderr, AORTA};

/// Writes a Kineto trace of `rank` (of 2) with one `ProfilerStep#1` over `kernels` kernels,
/// each launched by a runtime call of its own correlation: even ones GEMMs on stream 7, odd
/// ones NCCL all-reduces on stream 8, 10 µs apart, 8 µs long. `tag` changes the bytes (and
/// so the content hash) without changing the rows.
pub(crate) fn write_trace(path: &Path, rank: i64, kernels: usize, tag: &str) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(
        w,
        r#"{{"schemaVersion": 1, "traceName": "{tag}", "distributedInfo": {{"rank": {rank}, "world_size": 2}}, "traceEvents": ["#
    )
    .unwrap();
    write!(
        w,
        r#"{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":{}}}"#,
        kernels * 10 + 10
    )
    .unwrap();
    for i in 0..kernels {
        let (ts, corr, stream) = (i * 10, i + 1, 7 + i % 2);
        let name = if i % 2 == 0 {
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT"
        } else {
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        };
        write!(
            w,
            r#",{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{ts},"dur":1,"args":{{"correlation":{corr}}}}}"#
        )
        .unwrap();
        write!(
            w,
            r#",{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":{stream},"ts":{},"dur":8,"args":{{"stream":{stream},"correlation":{corr},"device":0}}}}"#,
            ts + 1
        )
        .unwrap();
    }
    w.write_all(b"]}").unwrap();
    w.flush().unwrap();
}

/// Two ranks of `kernels` kernels each in `dir/<label>/`, the directory returned.
pub(crate) fn two_ranks(dir: &Path, label: &str, kernels: usize) -> PathBuf {
    let d = dir.join(label);
    std::fs::create_dir_all(&d).unwrap();
    for r in 0..2 {
        write_trace(&d.join(format!("rank{r}.pt.trace.json")), r, kernels, label);
    }
    d
}

/// `aorta ARGS` with extra environment.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(AORTA)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap()
}

/// `aorta ARGS`, which must exit 0.
pub(crate) fn run_ok(args: &[&str]) -> Output {
    let o = run(args, &[]);
    assert_eq!(code(&o), 0, "aorta {args:?}: {}", stderr(&o));
    o
}

/// stderr is exactly one `aorta: error: ` line holding `want`, and no panic.
pub(crate) fn assert_one_error(o: &Output, want: &str) -> String {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "panic:\n{err}");
    assert_eq!(code(o), 2, "exit status 2 expected:\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one error line expected:\n{err}");
    assert!(lines[0].starts_with("aorta: error: "), "{err}");
    assert!(lines[0].contains(want), "`{want}` expected in:\n{err}");
    lines[0].to_string()
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small tmpfs mounted at a directory, unmounted on drop; `None` (with the reason printed)
/// where this process may not mount (not root, or a container without CAP_SYS_ADMIN).
pub(crate) struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub(crate) fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                s(dir),
            ])
            .output();
        match o {
            Ok(o) if o.status.success() => Some(Tmpfs(dir.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "skipping the tmpfs case: mount failed: {}",
                    stderr(&o).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipping the tmpfs case: no mount command: {e}");
                None
            }
        }
    }

    /// Remounts it read-only.
    pub(crate) fn read_only(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,ro", s(&self.0)])
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").args(["-l", s(&self.0)]).status();
    }
}

/// The manifest's inputs.
pub(crate) fn manifest_inputs(ds: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read(ds.join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_slice(&text).unwrap();
    m["inputs"].as_array().unwrap().clone()
}
