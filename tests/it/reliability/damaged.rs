//! A damaged dataset: a truncated part, a part with one flipped bit, a table gone, a manifest
//! of another schema version. `overlap`, `collectives`, `compare` and `report` each fail with
//! one line naming the damaged file, exit 2, no panic, and leave every earlier output (the
//! overlap tables, the comparison directory, the report) as it was.

use std::path::{Path, PathBuf};

use super::{assert_one_error, run, run_ok, s, snapshot, two_ranks};

/// A damage done to a copy of the dataset, and the file the error must name.
struct Case {
    name: &'static str,
    damage: fn(&Path) -> PathBuf,
    says: &'static str,
}

/// The first `gpu_activities` part of run `a`, rank 0.
fn part(ds: &Path) -> PathBuf {
    let dir = ds.join("gpu_activities/run=a/rank=0");
    let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    parts.sort();
    parts.remove(0)
}

fn truncate(ds: &Path) -> PathBuf {
    let p = part(ds);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    p
}

/// One bit in the middle of the data pages: polars reads such a file without complaint
/// (the value changes, the structure does not), so only the manifest's checksum tells.
fn flip(ds: &Path) -> PathBuf {
    let p = part(ds);
    let mut b = std::fs::read(&p).unwrap();
    let at = b.len() / 3;
    b[at] ^= 0x08;
    std::fs::write(&p, b).unwrap();
    p
}

fn drop_table(ds: &Path) -> PathBuf {
    std::fs::remove_dir_all(ds.join("steps")).unwrap();
    let m = super::manifest_inputs(ds);
    let steps = m
        .iter()
        .flat_map(|e| e["parts"].as_array().unwrap())
        .map(|p| p.as_str().unwrap())
        .filter(|p| p.starts_with("steps/"))
        .min()
        .unwrap()
        .to_string();
    ds.join(steps)
}

fn other_schema(ds: &Path) -> PathBuf {
    let p = ds.join("manifest.json");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["schema_version"] = 3.into();
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    p
}

const CASES: [Case; 4] = [
    Case {
        name: "truncated",
        damage: truncate,
        says: "truncated or rewritten",
    },
    Case {
        name: "bit flip",
        damage: flip,
        says: "content differs from its checksum",
    },
    Case {
        name: "missing table",
        damage: drop_table,
        says: "listed in manifest.json but unreadable",
    },
    Case {
        name: "schema v3",
        damage: other_schema,
        says: "dataset written with schema v3",
    },
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (a, b) = (e.path(), to.join(e.file_name()));
        if a.is_dir() {
            copy_dir(&a, &b);
        } else {
            std::fs::copy(&a, &b).unwrap();
        }
    }
}

#[test]
fn a_damaged_dataset_names_the_file_and_keeps_earlier_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    two_ranks(&traces, "a", 3000);
    two_ranks(&traces, "b", 3000);
    let good = dir.path().join("good");
    run_ok(&["ingest", s(&traces), "-o", s(&good), "-q"]);
    run_ok(&["collectives", s(&good)]);
    run_ok(&["overlap", s(&good)]);
    for case in CASES {
        let ds = dir.path().join(case.name.replace(' ', "_"));
        copy_dir(&good, &ds);
        let out = dir.path().join(format!("{}-out", case.name));
        std::fs::create_dir_all(&out).unwrap();
        let (html, cmp) = (out.join("r.html"), out.join("cmp"));
        // The earlier outputs, from the dataset before the damage.
        run_ok(&["report", s(&ds), "-o", s(&html)]);
        run_ok(&[
            "compare",
            s(&ds),
            "--reference",
            "a",
            "--candidate",
            "b",
            "-o",
            s(&cmp),
        ]);
        let bad = (case.damage)(&ds);
        let (outputs, dataset) = (snapshot(&out), snapshot(&ds));
        let commands: [&[&str]; 4] = [
            &["overlap", s(&ds)],
            &["collectives", s(&ds)],
            &[
                "compare",
                s(&ds),
                "--reference",
                "a",
                "--candidate",
                "b",
                "-o",
                s(&cmp),
            ],
            &["report", s(&ds), "-o", s(&html)],
        ];
        for args in commands {
            let o = run(args, &[]);
            let line = assert_one_error(&o, case.says);
            let named = format!("aorta: error: {}: ", bad.display());
            assert!(line.starts_with(&named), "{}: {args:?}: {line}", case.name);
            assert!(o.stdout.is_empty(), "{}: {args:?} printed rows", case.name);
        }
        assert_eq!(
            snapshot(&out),
            outputs,
            "{}: earlier outputs changed",
            case.name
        );
        assert_eq!(snapshot(&ds), dataset, "{}: the dataset changed", case.name);
    }
}

/// A commit left unfinished (its journal there, as after a kill among its renames): the
/// readers stop with one line saying so; `aorta overlap`, a writer, finishes it and goes on.
#[test]
fn an_unfinished_commit_stops_readers_and_a_writer_finishes_it() {
    use aorta_ingest::commit::{Journal, JOURNAL};
    let dir = tempfile::tempdir().unwrap();
    let a = two_ranks(dir.path(), "a", 50);
    let ds = dir.path().join("ds");
    run_ok(&["ingest", s(&a), "-o", s(&ds), "-q"]);
    // The second rank's parts still in staging, its entry only in the journal.
    let mut m = aorta_ingest::dataset::Manifest::load(&ds).unwrap();
    let moved = m.inputs.pop().unwrap();
    m.save(&ds).unwrap();
    let staging = ds.join(".staging-99");
    for p in &moved.parts {
        std::fs::create_dir_all(staging.join(p).parent().unwrap()).unwrap();
        std::fs::rename(ds.join(p), staging.join(p)).unwrap();
    }
    let j = Journal::new(&staging, &m, &[(moved.clone(), None)]);
    std::fs::write(ds.join(JOURNAL), serde_json::to_vec(&j).unwrap()).unwrap();
    let html = dir.path().join("r.html");
    let o = run(&["report", s(&ds), "-o", s(&html)], &[]);
    assert_one_error(&o, "an ingest was killed while it committed");
    run_ok(&["overlap", s(&ds)]);
    assert!(!ds.join(JOURNAL).exists() && !staging.exists());
    assert_eq!(super::manifest_inputs(&ds).len(), 2);
    for p in &moved.parts {
        assert!(ds.join(p).exists(), "{}", p.display());
    }
    run_ok(&["report", s(&ds), "-o", s(&html)]);
}
