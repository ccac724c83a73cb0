//! Without a GPU (or its libraries) the workload says so in one line and exits non-zero,
//! rather than panicking inside cudarc. (Building this test also puts the binary next to
//! `aorta`, where `aorta run` looks for it.)

use std::process::Command;

#[test]
fn no_gpu_is_one_line_and_a_failure() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        eprintln!("skipping: a GPU is present");
        return;
    }
    let o = Command::new(env!("CARGO_BIN_EXE_aorta-overlap-bench"))
        .args(["--iters", "1"])
        .env("RANK", "0")
        .env("WORLD_SIZE", "1")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("aorta-overlap-bench: error:") && lines[0].contains("CUDA"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
