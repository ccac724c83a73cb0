//! `aorta dataset rm|relabel`: hostile labels land inside their tables and read back, the
//! rows of every run are the rows they were, every part's checksum in the manifest is its
//! content's (a fresh process's `aorta info` verifies them), the derived tables move with
//! the run, and a refused edit changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use super::{fresh_copy, ok, whole};
use crate::common::cli::{aorta, code, snapshot, stderr};
use crate::common::strs;

/// Rows per (table, run) of the ingested tables.
fn counts(root: &Path) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for t in [
        "runs",
        "gpu_activities",
        "cpu_ops",
        "steps",
        "diagnostics",
        "overlap_steps",
    ] {
        for r in strs(&whole(root, t), "run").into_iter().flatten() {
            *out.entry((t.to_string(), r)).or_default() += 1;
        }
    }
    out
}

/// Every part the manifest lists is there, with the checksum the manifest records (the
/// relabel moved the checksums with their parts).
fn checksums_hold(root: &Path) {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("manifest.json")).unwrap()).unwrap();
    let mut n = 0;
    for e in m["inputs"].as_array().unwrap() {
        for p in e["parts"].as_array().unwrap() {
            let p = p.as_str().unwrap();
            let sum = e["checksums"][p]
                .as_str()
                .unwrap_or_else(|| panic!("no checksum for {p}"));
            assert_eq!(
                sum,
                aorta_ingest::dataset::checksum(&root.join(p)).unwrap(),
                "{p}"
            );
            let len = std::fs::metadata(root.join(p)).unwrap().len();
            assert!(sum.starts_with(&format!("{len}:")), "{p}");
            n += 1;
        }
    }
    assert!(n > 0);
}

fn fails(args: &[&str]) -> String {
    let a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let o = aorta(&a);
    assert_eq!(code(&o), 2, "aorta {args:?} should fail");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn relabel_to_hostile_labels_and_remove_keep_every_other_row_and_checksum() {
    let (tmp, root) = fresh_copy(&["workloads/samples"]);
    let ds = root.to_str().unwrap();
    ok(&["overlap", ds, "--format", "csv"]);
    let before = counts(&root);
    assert!(before.contains_key(&("overlap_steps".into(), "cuda".into())));
    let outside = |tmp: &Path| {
        let mut top: Vec<String> = std::fs::read_dir(tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        top
    };
    let mut old = "cuda".to_string();
    for new in [
        "../../escape",
        "a/b=c",
        "50% done",
        "tab\tend",
        "ü/..",
        "cuda",
    ] {
        ok(&["dataset", "relabel", &old, new, ds]);
        let after = counts(&root);
        let renamed: BTreeMap<_, _> = before
            .iter()
            .map(|((t, r), n)| {
                (
                    (
                        t.clone(),
                        if r == "cuda" {
                            new.to_string()
                        } else {
                            r.clone()
                        },
                    ),
                    *n,
                )
            })
            .collect();
        assert_eq!(after, renamed, "{new:?}");
        checksums_hold(&root);
        ok(&["info", ds, "--run", new]);
        assert_eq!(
            outside(tmp.path()),
            ["ds"],
            "nothing written outside the dataset"
        );
        old = new.to_string();
    }
    // Refused: onto an existing run, or an unknown one; the dataset is unchanged.
    let snap = snapshot(&root);
    let err = fails(&["dataset", "relabel", "cuda", "rocm", ds]);
    assert!(err.contains("a run `rocm` exists already"), "{err}");
    let err = fails(&["dataset", "rm", "nope", ds]);
    assert!(err.contains("no run `nope` (runs: cuda, rocm)"), "{err}");
    assert!(snapshot(&root) == snap);
    // Unchanged files ingested again stay under their new label.
    ok(&["dataset", "relabel", "cuda", "base/line", ds]);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = crate::common::cli::ingest(&[&repo.join("workloads/samples")], &root, &["-q"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let runs: Vec<String> = strs(&whole(&root, "runs"), "run")
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(runs, ["base/line", "rocm"]);
    // Removed: its rows gone, the other run's intact, derived tables included.
    ok(&["dataset", "rm", "base/line", ds]);
    let after = counts(&root);
    let kept: BTreeMap<_, _> = before
        .into_iter()
        .filter(|((_, r), _)| r != "cuda")
        .collect();
    assert_eq!(after, kept);
    checksums_hold(&root);
    ok(&["info", ds]);
}
