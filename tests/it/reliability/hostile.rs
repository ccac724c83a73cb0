//! Every command that writes, driven with hostile run labels (`../../x`, `a/b=c` and others):
//! each writes only inside the dataset or the output it was given, and every label reads back
//! as written. Labels reach paths only through `ingest::schema`'s `run_dir`/`partition_dir`
//! (one percent-encoded segment), so no command can build a path out of one.

use std::path::{Path, PathBuf};

use super::{run_ok, s, two_ranks};

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out
}

#[test]
fn every_writer_keeps_hostile_labels_inside_its_output() {
    let top = tempfile::tempdir().unwrap();
    // The work happens two levels down, so a `../../` escape would land inside `top`.
    let root = top.path().join("a/b");
    let traces = root.join("traces");
    // Both end in `/m`: compare pairs them by that last component.
    let labels = ["../../x/m", "a/b=c/m", "..%2F..", "tab\tnew\nline"];
    let ds = root.join("ds");
    for (i, label) in labels.iter().enumerate() {
        let dir = two_ranks(&traces, &format!("job{i}"), 6);
        run_ok(&["ingest", s(&dir), "-o", s(&ds), "--label", label, "-q"]);
    }
    let d = s(&ds);
    for cmd in [
        vec!["overlap", d],
        vec!["collectives", d],
        vec!["perf", d],
        vec!["kernels", d],
        vec!["breakdown", d, "--run", labels[0]],
        vec!["info", d],
    ] {
        run_ok(&cmd);
    }
    let (page, cmp) = (root.join("report.html"), root.join("cmp"));
    run_ok(&["report", d, "-o", s(&page)]);
    run_ok(&[
        "compare",
        d,
        "--reference",
        labels[0],
        "--candidate",
        labels[1],
        "-o",
        s(&cmp),
    ]);
    let trace = root.join("step.json");
    run_ok(&[
        "export",
        "perfetto",
        d,
        "--run",
        labels[1],
        "--rank",
        "0",
        "-o",
        s(&trace),
    ]);
    run_ok(&["dataset", "relabel", labels[2], "../../../y", d]);
    // Outside `root`: nothing. Inside it: the traces, the dataset and the named outputs.
    let outside: Vec<PathBuf> = files(top.path())
        .into_iter()
        .filter(|p| !p.starts_with("a/b"))
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
    for f in files(&root) {
        let first = f.iter().next().unwrap().to_str().unwrap().to_string();
        assert!(
            ["traces", "ds", "cmp", "report.html", "step.json"].contains(&first.as_str()),
            "{f:?}"
        );
    }
    // Every label reads back as written (the relabelled one under its new name).
    let info: serde_json::Value =
        serde_json::from_slice(&run_ok(&["info", d, "--format", "json"]).stdout).unwrap();
    let mut runs: Vec<String> = info["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_string())
        .collect();
    runs.sort();
    let mut want = vec![labels[0], labels[1], labels[3], "../../../y"];
    want.sort();
    assert_eq!(runs, want);
}
