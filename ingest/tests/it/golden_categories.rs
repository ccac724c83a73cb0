//! The shipped rule table against the hand-reviewed golden table of every distinct GPU
//! activity name in the corpus (tests/golden/kernel_categories.csv; see its README for how
//! each row was decided).

use aorta_ingest::classify::{Classifier, Kind};

#[test]
fn every_corpus_kernel_name_gets_its_reviewed_category() {
    let rows = misclassified("kernel_categories.csv");
    assert!(rows.0 > 500, "golden table has {} rows", rows.0);
    assert_eq!(rows.1, "", "of {} names, these are misclassified", rows.0);
}

/// Communication libraries the corpus has no trace of (PyTorch symmetric memory, DeepEP,
/// NVSHMEM, MSCCL++): names written from each library's kernel source as the profiler
/// prints them (tests/golden/README.md), each with the source file and the reason for its
/// category and kind.
#[test]
fn library_comm_kernels_get_their_reviewed_category_and_kind() {
    let rows = misclassified("library_comm_kernels.csv");
    assert!(rows.0 >= 29, "golden table has {} rows", rows.0);
    assert_eq!(rows.1, "", "of {} names, these are misclassified", rows.0);
}

/// (rows, one line per name whose category or kind differs from the golden table's).
fn misclassified(file: &str) -> (usize, String) {
    let path = format!("{}/../tests/golden/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut rdr = csv::Reader::from_path(path).expect("golden table present");
    let c = Classifier::builtin();
    let (mut rows, mut wrong) = (0, Vec::new());
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let kind = match &rec[0] {
            "kernel" => Kind::Kernel,
            "memcpy" => Kind::Memcpy,
            "memset" => Kind::Memset,
            k => panic!("unknown kind {k}"),
        };
        let (name, want_cat, want_op) = (&rec[1], &rec[2], &rec[3]);
        let (cat, op) = c.classify(kind, name);
        rows += 1;
        if cat.as_str() != want_cat || op.unwrap_or("") != want_op {
            wrong.push(format!(
                "{}: got {}/{} want {want_cat}/{want_op}: {name}",
                &rec[0],
                cat.as_str(),
                op.unwrap_or("")
            ));
        }
    }
    (rows, wrong.join("\n"))
}

/// docs/CLASSIFICATION.md (table cells' `\|` as `|`) and the shipped rule table.
pub(crate) fn doc_and_table() -> (String, toml::Table) {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/CLASSIFICATION.md"
    ))
    .unwrap()
    .replace("\\|", "|");
    (doc, aorta_ingest::classify::DEFAULT_RULES.parse().unwrap())
}

#[test]
fn classification_md_lists_every_rule_of_the_shipped_table() {
    let (doc, table) = doc_and_table();
    let rules = table["rule"].as_array().unwrap();
    for r in rules {
        let pattern = r.get("pattern").or(r.get("function"));
        let pattern = pattern.and_then(|p| p.as_str()).unwrap();
        assert!(
            doc.contains(&format!("`{pattern}`")),
            "docs/CLASSIFICATION.md lacks rule `{pattern}`"
        );
    }
    let version = table["version"].as_str().unwrap();
    assert!(doc.contains(&format!("version **{version}**")));
}
