//! A missing or empty dataset is one error line (exit 2) for every command that reads one,
//! and writes nothing; a read-only dataset is still analysed, in memory, with a note that
//! nothing was saved, and stays byte-identical.

use std::path::Path;

use super::{assert_one_error, code, run, run_ok, s, snapshot, stderr, two_ranks, Tmpfs};

/// Every command that reads a dataset, its outputs under `out`.
fn readers<'a>(ds: &'a str, out: &'a Path) -> Vec<Vec<String>> {
    let o = |n: &str| out.join(n).display().to_string();
    vec![
        vec!["overlap".into(), ds.into()],
        vec!["collectives".into(), ds.into()],
        vec!["perf".into(), ds.into()],
        vec!["report".into(), ds.into(), "-o".into(), o("r.html")],
        vec![
            "compare".into(),
            ds.into(),
            "--reference".into(),
            "a".into(),
            "--candidate".into(),
            "b".into(),
            "-o".into(),
            o("cmp"),
        ],
    ]
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_missing_or_empty_dataset_is_one_error_line_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let missing = dir.path().join("nothere");
    for args in readers(s(&missing), &out) {
        let o = run(&argv(&args), &[]);
        assert_one_error(&o, "not an aorta dataset");
        assert!(!missing.exists(), "{args:?} created the dataset directory");
    }
    // An ingest whose every file failed (--keep-going) leaves a dataset with no inputs.
    let broken = dir.path().join("broken.pt.trace.json");
    std::fs::write(&broken, r#"{"traceEvents": [{"ph": "X""#).unwrap();
    let empty = dir.path().join("empty");
    let o = run(
        &["ingest", s(&broken), "-o", s(&empty), "--keep-going", "-q"],
        &[],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(super::manifest_inputs(&empty).is_empty());
    let before = snapshot(&empty);
    for args in readers(s(&empty), &out) {
        let o = run(&argv(&args), &[]);
        let line = assert_one_error(&o, "empty dataset");
        assert!(line.contains(s(&empty)), "{line}");
    }
    assert_eq!(snapshot(&empty), before);
    assert!(snapshot(&out).is_empty(), "no report, no comparison");
}

/// The output of `aorta CMD DS --json` without the dataset's path (which differs between a
/// dataset and its twin).
fn json_without_path(cmd: &str, ds: &Path) -> (serde_json::Value, String) {
    let o = run(&[cmd, s(ds), "--json"], &[]);
    assert_eq!(code(&o), 0, "{cmd}: {}", stderr(&o));
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_object_mut().unwrap().remove("dataset");
    (v, stderr(&o))
}

/// The dataset on a file system remounted read-only (as root), or with its write permission
/// removed (as anyone else): `overlap`, `collectives` and `perf` print what they print on a
/// writable twin of it, say they saved nothing, and leave every byte as it was; `report` and
/// `compare` write their outputs elsewhere as usual.
#[test]
fn a_read_only_dataset_is_analysed_in_memory_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    two_ranks(&traces, "a", 300);
    two_ranks(&traces, "b", 300);
    let twin = dir.path().join("twin");
    run_ok(&["ingest", s(&traces), "-o", s(&twin), "-q"]);
    let root = euid_is_root();
    let _mount;
    let ds = if root {
        let Some(m) = Tmpfs::mount(&dir.path().join("ro"), "64m") else {
            return;
        };
        let ds = m.0.join("ds");
        run_ok(&["ingest", s(&traces), "-o", s(&ds), "-q"]);
        assert!(m.read_only(), "remount read-only");
        _mount = m;
        ds
    } else {
        let ds = dir.path().join("ds");
        run_ok(&["ingest", s(&traces), "-o", s(&ds), "-q"]);
        chmod_recursive(&ds, 0o555, 0o444);
        ds
    };
    let before = snapshot(&ds);
    for cmd in ["overlap", "collectives", "perf"] {
        let (got, err) = json_without_path(cmd, &ds);
        let (want, _) = json_without_path(cmd, &twin);
        assert_eq!(got, want, "{cmd}");
        assert!(
            err.contains(&format!("note: {} is read-only", ds.display()))
                && err.contains("computed in memory and not saved"),
            "{cmd}: {err}"
        );
    }
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    for args in readers(s(&ds), &out).into_iter().skip(3) {
        run_ok(&argv(&args));
    }
    assert!(out.join("r.html").exists() && out.join("cmp/summary.json").exists());
    assert_eq!(snapshot(&ds), before, "a read-only dataset was changed");
    if !root {
        chmod_recursive(&ds, 0o755, 0o644);
    }
}

fn euid_is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn chmod_recursive(p: &Path, dir_mode: u32, file_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let q = e.path();
        if q.is_dir() {
            chmod_recursive(&q, dir_mode, file_mode);
        } else {
            std::fs::set_permissions(&q, std::fs::Permissions::from_mode(file_mode)).unwrap();
        }
    }
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(dir_mode)).unwrap();
}
