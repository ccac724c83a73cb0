//! Two processes at one dataset: the second waits (saying for whom) or, past
//! `AORTA_LOCK_WAIT`, fails naming the holder; concurrent ingests never lose an input from
//! the manifest; a lock left by a killed process is taken over and reported.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aorta_ingest::lock::{self, Acquired, DatasetLock, Mode};

use super::{assert_one_error, code, manifest_inputs, run, run_ok, s, snapshot, stderr, two_ranks};

/// This test process holds the lock: to the `aorta` children it is another process.
fn hold(ds: &Path) -> DatasetLock {
    match lock::acquire(ds, Mode::Exclusive, "aorta test", &mut |_, _| {}).unwrap() {
        Acquired::Locked(l) => l,
        Acquired::ReadOnly(e) => panic!("{e}"),
    }
}

#[test]
fn a_second_writer_fails_after_its_wait_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        two_ranks(dir.path(), "a", 20),
        two_ranks(dir.path(), "b", 20),
    );
    let ds = dir.path().join("ds");
    run_ok(&["ingest", s(&a), "-o", s(&ds), "-q"]);
    let before = snapshot(&ds);
    let held = hold(&ds);
    let me = format!("locked by pid {} (aorta test)", std::process::id());
    let writers: [&[&str]; 4] = [
        &["ingest", s(&b), "-o", s(&ds)],
        &["overlap", s(&ds)],
        &["collectives", s(&ds)],
        &["perf", s(&ds)],
    ];
    for args in writers {
        let t0 = Instant::now();
        let o = run(args, &[("AORTA_LOCK_WAIT", "1")]);
        let waited = t0.elapsed();
        // The one line saying it waits, then the error.
        let err = stderr(&o);
        let last = err.lines().last().unwrap_or_default();
        assert_eq!(code(&o), 2, "{args:?}: {err}");
        assert!(last.contains(&me) && last.contains("waited 1 s"), "{err}");
        assert!(
            err.lines().next().unwrap().contains("waiting up to 1 s"),
            "{err}"
        );
        assert!(
            waited >= Duration::from_secs(1),
            "{args:?} gave up after {waited:?}"
        );
    }
    // A reader waits for a writer too.
    let o = run(
        &["report", s(&ds), "-o", s(&dir.path().join("r.html"))],
        &[("AORTA_LOCK_WAIT", "0")],
    );
    assert_one_error(&o, &me);
    assert!(!dir.path().join("r.html").exists());
    drop(held);
    assert_eq!(snapshot(&ds), before, "nothing changed while locked");
}

#[test]
fn a_second_writer_waits_and_goes_on_when_the_lock_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        two_ranks(dir.path(), "a", 20),
        two_ranks(dir.path(), "b", 20),
    );
    let ds = dir.path().join("ds");
    run_ok(&["ingest", s(&a), "-o", s(&ds), "-q"]);
    let held = hold(&ds);
    let child = Command::new(super::AORTA)
        .args(["ingest", s(&b), "-o", s(&ds)])
        .env("AORTA_LOCK_WAIT", "60")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut child = child;
    assert!(
        child.try_wait().unwrap().is_none(),
        "it waits while the lock is held"
    );
    drop(held);
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    let waiting = format!(
        "waiting up to 60 s for {}: locked by pid {}",
        ds.display(),
        std::process::id()
    );
    assert!(err.contains(&waiting), "{err}");
    assert_eq!(manifest_inputs(&ds).len(), 4, "both runs' inputs");
    assert!(!ds.join(lock::LOCK_FILE).exists(), "released");
}

/// Four ingests of four runs started at once, three times over: every run's inputs end up in
/// the manifest, and every Parquet file of the ingested tables is one the manifest lists.
/// Without the lock each process loaded the manifest before the others saved theirs (and
/// removed the others' staging directories).
#[test]
fn concurrent_ingests_keep_every_input() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..4)
        .map(|i| two_ranks(dir.path(), &format!("r{i}"), 200))
        .collect();
    for round in 0..3 {
        let ds = dir.path().join(format!("ds{round}"));
        let children: Vec<_> = runs
            .iter()
            .map(|r| {
                Command::new(super::AORTA)
                    .args(["ingest", s(r), "-o", s(&ds), "-q"])
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert_eq!(code(&o), 0, "{}", stderr(&o));
        }
        let inputs = manifest_inputs(&ds);
        assert_eq!(inputs.len(), 8, "round {round}: {inputs:?}");
        let mut listed: Vec<String> = inputs
            .iter()
            .flat_map(|e| e["parts"].as_array().unwrap().iter())
            .map(|p| p.as_str().unwrap().to_string())
            .collect();
        listed.sort();
        let on_disk: Vec<String> = crate::common::cli::parquet_files(&ds)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(on_disk, listed, "round {round}");
        let rows = crate::common::table(&ds, "runs", "r3");
        assert_eq!(rows.height(), 2);
    }
}

/// `aorta overlap` and an ingest that rewrites the run (new content, new part names, the
/// old parts removed) started together: both succeed, however they interleave.
#[test]
fn overlap_during_an_ingest_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let a = two_ranks(dir.path(), "a", 2000);
    let ds = dir.path().join("ds");
    run_ok(&["ingest", s(&a), "-o", s(&ds), "-q"]);
    for i in 0..4 {
        for r in 0..2 {
            let f = a.join(format!("rank{r}.pt.trace.json"));
            super::write_trace(&f, r, 2000, &format!("v{i}"));
        }
        let ing = Command::new(super::AORTA)
            .args(["ingest", s(&a), "-o", s(&ds), "-q"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let ov = run(&["overlap", s(&ds), "--json"], &[]);
        let ing = ing.wait_with_output().unwrap();
        assert_eq!(code(&ing), 0, "{}", stderr(&ing));
        assert_eq!(code(&ov), 0, "{}", stderr(&ov));
        let doc: serde_json::Value = serde_json::from_slice(&ov.stdout).unwrap();
        assert_eq!(doc["runs"][0]["run"], "a");
    }
}

/// An ingest killed (SIGKILL) while it holds the lock leaves the lock file naming it; the
/// next ingest takes it over, says the holder is gone, and leaves no staging behind.
#[test]
fn a_lock_left_by_a_killed_ingest_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let a = two_ranks(dir.path(), "a", 20_000);
    let ds = dir.path().join("ds");
    let lockfile = ds.join(lock::LOCK_FILE);
    let mut killed = None;
    for _ in 0..5 {
        let mut c = Command::new(super::AORTA)
            .args(["ingest", s(&a), "-o", s(&ds), "-q", "--force"])
            .spawn()
            .unwrap();
        // Wait until it holds the lock (the file names it), then kill it.
        while c.try_wait().unwrap().is_none() {
            let text = std::fs::read_to_string(&lockfile).unwrap_or_default();
            if text.contains(&format!("\"pid\":{}", c.id())) {
                c.kill().unwrap();
                c.wait().unwrap();
                killed = Some(c.id());
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if killed.is_some() {
            break;
        }
    }
    let pid = killed.expect("an ingest was caught holding the lock");
    assert!(
        lockfile.exists(),
        "a killed holder cannot remove its lock file"
    );
    let o = run(
        &["ingest", s(&a), "-o", s(&ds)],
        &[("AORTA_LOCK_WAIT", "0")],
    );
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        err.contains(&format!(
            "took over the dataset lock left by pid {pid} (aorta ingest)"
        )) && err.contains("a process that is gone"),
        "{err}"
    );
    assert!(crate::common::cli::entries_starting(&ds, ".staging-").is_empty());
    assert!(!lockfile.exists());
}
