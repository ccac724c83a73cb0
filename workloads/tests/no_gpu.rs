//! Without a GPU (or its libraries) each workload says so in one line and exits non-zero,
//! rather than panicking inside cudarc; a bad argument is one line too, before any GPU call.
//! (Building this test also puts the binaries next to `aorta`, where `aorta run` looks.)

use std::process::{Command, Output};

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .env("RANK", "0")
        .env("WORLD_SIZE", "1")
        .env_remove("LOCAL_RANK")
        .output()
        .unwrap()
}

/// The one non-empty stderr line of a failed run.
fn one_error_line(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    lines[0].to_string()
}

/// Both workload binaries: (path, name).
const BINS: [(&str, &str); 2] = [
    (
        env!("CARGO_BIN_EXE_aorta-overlap-bench"),
        "aorta-overlap-bench",
    ),
    (
        env!("CARGO_BIN_EXE_aorta-copy-overlap"),
        "aorta-copy-overlap",
    ),
];

fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidia0").exists() || std::path::Path::new("/dev/kfd").exists()
}

#[test]
fn no_gpu_is_one_line_and_a_failure() {
    if gpu_present() {
        eprintln!("skipping: a GPU is present");
        return;
    }
    for (exe, name) in BINS {
        let line = one_error_line(&run(exe, &["--iters", "1"]));
        assert!(
            line.starts_with(&format!("{name}: error: no ")) && line.contains("CUDA"),
            "{line}"
        );
    }
}

#[test]
fn bad_arguments_are_one_line_before_any_gpu_call() {
    let exe = env!("CARGO_BIN_EXE_aorta-copy-overlap");
    let line = one_error_line(&run(exe, &["--copy-bytes", "0"]));
    assert_eq!(line, "aorta-copy-overlap: error: --copy-bytes must be > 0");
    let line = one_error_line(&run(exe, &["--copies-per-iter", "0"]));
    assert_eq!(
        line,
        "aorta-copy-overlap: error: nothing to overlap: --gemms-per-iter and --copies-per-iter \
         must both be > 0"
    );
    let exe = env!("CARGO_BIN_EXE_aorta-overlap-bench");
    let line = one_error_line(&run(exe, &["--iters", "0"]));
    assert_eq!(line, "aorta-overlap-bench: error: --iters must be > 0");
}

/// `--backend rocm`: with the feature, HIP's own answer in one line; without, how to get it.
#[test]
fn rocm_backend_line() {
    if std::path::Path::new("/dev/kfd").exists() {
        eprintln!("skipping: an AMD GPU is present");
        return;
    }
    for (exe, name) in BINS {
        let line = one_error_line(&run(exe, &["--backend", "rocm", "--iters", "1"]));
        let expected = if cfg!(feature = "rocm") {
            "no ROCm GPU: hipGetDeviceCount returned "
        } else {
            "built without the `rocm` feature: rebuild with `cargo build --features rocm`"
        };
        assert!(
            line.starts_with(&format!("{name}: error: {expected}")),
            "{line}"
        );
    }
}
