//! Writes that fail: a file-size limit (RLIMIT_FSIZE, what `ulimit -f` sets) and a full
//! tmpfs. Each is one error line, exit 2, and the dataset byte for byte as it was.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use super::{assert_one_error, run_ok, s, snapshot, two_ranks, Tmpfs, AORTA};

/// `aorta ARGS` with its file-size limit set to `bytes` (in the child, before exec).
fn run_limited(args: &[&str], bytes: u64) -> Output {
    let mut c = Command::new(AORTA);
    c.args(args).env_remove("RUST_BACKTRACE");
    // SAFETY: between fork and exec the closure only calls setrlimit, which is
    // async-signal-safe, on a value on its own stack.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

/// A dataset of run `a`, with its overlap tables.
fn dataset(dir: &Path) -> std::path::PathBuf {
    let a = two_ranks(dir, "a", 100);
    let ds = dir.join("ds");
    run_ok(&["ingest", s(&a), "-o", s(&ds), "-q"]);
    run_ok(&["overlap", s(&ds)]);
    ds
}

#[test]
fn a_file_size_limit_is_one_error_line_and_the_dataset_stays() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path());
    let b = two_ranks(dir.path(), "b", 50_000);
    let before = snapshot(&ds);
    // An ingest whose parts outgrow 256 KiB.
    let o = run_limited(&["ingest", s(&b), "-o", s(&ds)], 256 << 10);
    assert_one_error(&o, "File too large");
    assert_eq!(snapshot(&ds), before, "ingest changed the dataset");
    // overlap, collectives and perf, whose tables' parts outgrow 2 KiB.
    for cmd in ["overlap", "collectives", "perf"] {
        let o = run_limited(&[cmd, s(&ds)], 2 << 10);
        assert_one_error(&o, "File too large");
        assert_eq!(snapshot(&ds), before, "{cmd} changed the dataset");
    }
}

#[test]
fn a_full_file_system_is_one_error_line_and_the_dataset_stays() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&dir.path().join("small"), "4m") else {
        return;
    };
    let ds = dataset(&fs.0);
    let b = two_ranks(dir.path(), "b", 100_000);
    let before = snapshot(&ds);
    let o = super::run(&["ingest", s(&b), "-o", s(&ds)], &[]);
    assert_one_error(&o, "No space left on device");
    assert_eq!(snapshot(&ds), before);
    drop(fs);
}
