use super::*;

proptest::proptest! {
    /// The one owner of label paths: whatever the label, `partition_dir` is exactly
    /// `<table>/run=<one segment>/rank=<r>` (no `..`, no root, no separator inside), and
    /// the segment decodes back to the label.
    #[test]
    fn any_label_is_one_segment_under_its_table(label in proptest::prelude::any::<String>()) {
        let p = partition_dir("gpu_activities", &label, 3);
        let parts: Vec<std::path::Component> = p.components().collect();
        proptest::prop_assert_eq!(parts.len(), 3);
        proptest::prop_assert!(parts.iter().all(|c| matches!(c, std::path::Component::Normal(_))));
        let seg = parts[1].as_os_str().to_str().unwrap().strip_prefix("run=").unwrap();
        let back = percent_encoding::percent_decode_str(seg).decode_utf8().unwrap();
        proptest::prop_assert_eq!(back, label);
    }
}

#[test]
fn a_hostile_label_is_one_segment_and_decodes_back() {
    let labels = [
        "../../../x",
        "a/b",
        "run=2",
        "50%",
        "tab\there",
        "new\nline",
        "..",
        "/abs",
        "h100 × mi300x",
        "plain_label-1.2~",
    ];
    for label in labels {
        let dir = partition_dir("gpu_activities", label, 3);
        let parts: Vec<_> = dir.components().collect();
        assert_eq!(parts.len(), 3, "{label:?} -> {dir:?}");
        let seg = parts[1].as_os_str().to_str().unwrap();
        let value = seg.strip_prefix("run=").unwrap();
        assert!(
            !value.contains(['/', '=', '\\', '\n', '\t', ' ']),
            "{value}"
        );
        let back = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .unwrap();
        assert_eq!(back, label);
    }
    assert_eq!(encode_value("plain_label-1.2~"), "plain_label-1.2~");
    assert_eq!(encode_value("../x"), "..%2Fx");
    assert_eq!(encode_value("a=b%"), "a%3Db%25");
    assert_eq!(encode_value("日本 語/x"), "日本%20語%2Fx");
}
