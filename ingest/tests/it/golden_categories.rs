//! The shipped rule table against the hand-reviewed golden table of every distinct GPU
//! activity name in the corpus (tests/golden/kernel_categories.csv; see its README for how
//! each row was decided).

use aorta_ingest::classify::{Classifier, Kind};

#[test]
fn every_corpus_kernel_name_gets_its_reviewed_category() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/golden/kernel_categories.csv"
    );
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
    assert!(rows > 500, "golden table has {rows} rows");
    assert!(
        wrong.is_empty(),
        "{} of {rows} names misclassified:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn classification_md_lists_every_rule_of_the_shipped_table() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/CLASSIFICATION.md"
    ))
    .unwrap()
    .replace("\\|", "|");
    let table: toml::Table = aorta_ingest::classify::DEFAULT_RULES.parse().unwrap();
    let rules = table["rule"].as_array().unwrap();
    for r in rules {
        let pattern = r["pattern"].as_str().unwrap();
        assert!(
            doc.contains(&format!("`{pattern}`")),
            "docs/CLASSIFICATION.md lacks rule `{pattern}`"
        );
    }
    let version = table["version"].as_str().unwrap();
    assert!(doc.contains(&format!("version **{version}**")));
}
