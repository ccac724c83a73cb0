//! Re-ingest follows the rules file (finding 9) and shapes are stored in one layout
//! (finding 10): a small Kineto trace, values written by hand.

use std::path::{Path, PathBuf};

use crate::common::{batches, strs};

/// A Kineto trace with one `aten::mm` (its shapes in `dims` and `types`, as raw JSON text)
/// launching one kernel named `my_fused_op`.
fn trace(dims: &str, types: &str) -> String {
    format!(
        r#"{{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [
  {{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
    "args": {{"External id": 5, "Input Dims": {dims}, "Input type": {types}}}}},
  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 5,
    "args": {{"External id": 5, "correlation": 9}}}},
  {{"ph": "X", "cat": "kernel", "name": "my_fused_op", "pid": 0, "tid": 7, "ts": 120, "dur": 20,
    "args": {{"device": 0, "stream": 7, "correlation": 9, "External id": 5}}}}
]}}"#
    )
}

fn ingest(paths: &[PathBuf], out: &Path, rules: Option<&Path>) -> aorta_ingest::Summary {
    let opts = aorta_ingest::Options {
        out: out.to_path_buf(),
        rules: rules.map(Path::to_path_buf),
        ..Default::default()
    };
    aorta_ingest::ingest(paths, &opts, &Default::default()).unwrap()
}

fn column(out: &Path, table: &str, col: &str) -> Vec<Option<String>> {
    batches(out, table)
        .iter()
        .flat_map(|b| strs(b, col))
        .collect()
}

#[test]
fn editing_the_rules_file_re_reads_the_inputs_on_re_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&t, trace("[[2, 3]]", r#"["float"]"#)).unwrap();
    let rules = dir.path().join("rules.toml");
    let rule = |cat: &str| {
        format!("[[rule]]\nkind = \"kernel\"\npattern = '^my_fused_op'\ncategory = \"{cat}\"\n")
    };
    let out = dir.path().join("out");
    std::fs::write(&rules, rule("comm")).unwrap();
    let first = ingest(std::slice::from_ref(&t), &out, Some(&rules));
    assert_eq!(first.ingested.len(), 1);
    assert_eq!(
        column(&out, "gpu_activities", "category"),
        [Some("comm".into())]
    );
    // The same rules: nothing to do.
    let same = ingest(std::slice::from_ref(&t), &out, Some(&rules));
    assert_eq!((same.ingested.len(), same.skipped.len()), (0, 1));
    // Edited rules (same length, so nothing about the file but its text changed): read again.
    std::fs::write(&rules, rule("gemm")).unwrap();
    let again = ingest(std::slice::from_ref(&t), &out, Some(&rules));
    assert_eq!((again.ingested.len(), again.skipped.len()), (1, 0));
    assert_eq!(
        column(&out, "gpu_activities", "category"),
        [Some("gemm".into())]
    );
    let versions = column(&out, "runs", "rules_version");
    let v = versions[0].as_deref().unwrap();
    let table: toml::Table = aorta_ingest::classify::DEFAULT_RULES.parse().unwrap();
    let shipped = table["version"].as_str().unwrap();
    assert!(
        v.starts_with(&format!("{shipped}+user.")) && v.len() == shipped.len() + 22,
        "{v}"
    );
}

#[test]
fn shapes_are_stored_in_one_layout_whatever_the_traces_whitespace() {
    let dir = tempfile::tempdir().unwrap();
    let compact = dir.path().join("compact/rank0.pt.trace.json");
    let pretty = dir.path().join("pretty/rank0.pt.trace.json");
    std::fs::create_dir_all(compact.parent().unwrap()).unwrap();
    std::fs::create_dir_all(pretty.parent().unwrap()).unwrap();
    std::fs::write(
        &compact,
        trace(
            "[[8944,1024],[1024,2816]]",
            r#"["c10::BFloat16","c10::BFloat16"]"#,
        ),
    )
    .unwrap();
    let pretty_dims = "[\n      [\n        8944,\n        1024\n      ],\n      [\n        1024,\n        2816\n      ]\n    ]";
    let pretty_types = "[\n      \"c10::BFloat16\",\n      \"c10::BFloat16\"\n    ]";
    std::fs::write(&pretty, trace(pretty_dims, pretty_types)).unwrap();
    let out = dir.path().join("out");
    ingest(&[compact, pretty], &out, None);
    let dims = column(&out, "cpu_ops", "input_dims");
    let types = column(&out, "cpu_ops", "input_types");
    let mm: Vec<_> = dims
        .iter()
        .zip(&types)
        .filter(|(d, _)| d.is_some())
        .collect();
    assert_eq!(mm.len(), 2, "{dims:?}");
    for (d, t) in mm {
        assert_eq!(d.as_deref(), Some("[[8944, 1024], [1024, 2816]]"));
        assert_eq!(t.as_deref(), Some(r#"["c10::BFloat16", "c10::BFloat16"]"#));
    }
}
