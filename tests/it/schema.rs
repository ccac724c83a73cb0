//! The documented schema is the written schema: docs/SCHEMA.md is generated from
//! `aorta_ingest::schema`, and polars, reading the Parquet files on its own, finds exactly
//! the documented columns and types.

use aorta_ingest::schema::TABLES;
use aorta_transform::dataset::dtype;
use polars::prelude::*;

#[test]
fn schema_md_is_generated_from_the_code() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/SCHEMA.md")).unwrap();
    assert!(
        doc == aorta_ingest::schema::markdown(),
        "docs/SCHEMA.md is stale: run `cargo run -- schema --markdown > docs/SCHEMA.md`"
    );
}

#[test]
fn every_part_file_reads_back_in_polars_with_the_documented_schema() {
    let Some(ds) = crate::common::per_file_dataset() else {
        return;
    };
    let mut checked = 0;
    for t in TABLES {
        let dir = ds.dir.path().join(t.name);
        let mut files = Vec::new();
        collect(&dir, &mut files);
        for f in files {
            let file = std::fs::File::open(&f).unwrap();
            let df = ParquetReader::new(file).finish().unwrap();
            let got: Vec<(String, DataType)> = df
                .schema()
                .iter()
                .map(|(n, d)| (n.to_string(), d.clone()))
                .collect();
            let want: Vec<(String, DataType)> = t
                .columns
                .iter()
                .map(|c| (c.name.to_string(), dtype(c.ty)))
                .collect();
            assert_eq!(got, want, "{}", f.display());
            for c in t.columns.iter().filter(|c| !c.nullable) {
                assert_eq!(
                    df.column(c.name).unwrap().null_count(),
                    0,
                    "{} {}",
                    f.display(),
                    c.name
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 4 * 19, "checked {checked} files");
    // Through the dataset reader, hive partitions come first, typed as documented.
    let runs = aorta_transform::dataset::read(ds.dir.path(), "runs").unwrap();
    assert_eq!(runs.column("rank").unwrap().dtype(), &DataType::Int64);
    assert_eq!(runs.column("run").unwrap().dtype(), &DataType::String);
    assert_eq!(runs.height(), ds.files.len());
}

fn collect(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out)
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p)
        }
    }
}
