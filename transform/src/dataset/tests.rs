/// A one-kernel Kineto trace.
const TRACE: &str = r#"{"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "nvjet_tst_gemm", "pid": 0, "tid": 7,
         "ts": 10.000, "dur": 5.000, "args": {"stream": 7, "correlation": 1}}
    ]}"#;

/// Labels that are paths, separators or escapes land in one partition of their own, and
/// every reader of the dataset gets the label back as it was given.
#[test]
fn hostile_labels_stay_inside_their_table_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    std::fs::write(&trace, TRACE).unwrap();
    let out = dir.path().join("sub/ds");
    let labels = ["../../x", "a/b=c", "50% done", "..", "tab\tend"];
    for label in labels {
        let opts = aorta_ingest::Options {
            out: out.clone(),
            label: Some(label.to_string()),
            force: true,
            ..Default::default()
        };
        let s =
            aorta_ingest::ingest(std::slice::from_ref(&trace), &opts, &Default::default()).unwrap();
        assert_eq!(s.ingested.len(), 1, "{label:?}");
    }
    // Nothing outside the dataset: the temporary directory holds the trace and `sub/ds`.
    let top: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(top.len(), 2, "{top:?}");
    let tables = std::fs::read_dir(out.join("gpu_activities"))
        .unwrap()
        .count();
    assert_eq!(tables, 1, "one run directory: the last label took the file");
    let opts = aorta_ingest::Options {
        out: out.clone(),
        label: Some(labels[1].into()),
        force: true,
        ..Default::default()
    };
    aorta_ingest::ingest(&[trace], &opts, &Default::default()).unwrap();
    let runs = crate::overlap::dataset_runs(&out).unwrap();
    assert_eq!(runs, [labels[1]]);
    let t = crate::overlap::from_dataset(&out, &runs).unwrap();
    let ranks = crate::rows::strs(&t.ranks, "run");
    assert_eq!(ranks, [Some(labels[1])]);
    let acts = super::read_partition(&out, "gpu_activities", labels[1], 0, &["start_ns"]);
    assert_eq!(acts.unwrap().height(), 1);
}
