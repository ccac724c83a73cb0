//! Opening dataset tables as polars `LazyFrame`s, hive partitions (`run`, `rank`) included.

use std::path::{Path, PathBuf};

use aorta_ingest::schema::{self, ColType, Table, PARTITION_COLUMNS};
use polars::prelude::*;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{0}: not an aorta dataset (no manifest.json); run `aorta ingest` first")]
    NotADataset(PathBuf),
    #[error("unknown table `{0}`")]
    UnknownTable(String),
    #[error("{path}: {source}")]
    Polars { path: PathBuf, source: PolarsError },
}

/// The polars type of a schema column.
pub fn dtype(t: ColType) -> DataType {
    match t {
        ColType::Int64 => DataType::Int64,
        ColType::Float64 => DataType::Float64,
        ColType::Utf8 => DataType::String,
    }
}

/// The schema a table reads back with: partition columns, then the file columns.
pub fn polars_schema(table: &Table) -> Schema {
    PARTITION_COLUMNS
        .iter()
        .chain(table.columns)
        .map(|c| Field::new(c.name.into(), dtype(c.ty)))
        .collect()
}

/// Lazily scans one table of the dataset at `root`; an empty frame with the documented
/// schema when no input produced rows for it.
pub fn scan(root: &Path, table: &str) -> Result<LazyFrame, DatasetError> {
    let t = schema::table(table).ok_or_else(|| DatasetError::UnknownTable(table.into()))?;
    if !root.join(aorta_ingest::dataset::MANIFEST).exists() {
        return Err(DatasetError::NotADataset(root.to_path_buf()));
    }
    let dir = root.join(t.name);
    let has_parts = dir.exists() && has_parquet(&dir);
    if !has_parts {
        return Ok(DataFrame::empty_with_schema(&polars_schema(t)).lazy());
    }
    let hive_schema: Schema = PARTITION_COLUMNS
        .iter()
        .map(|c| Field::new(c.name.into(), dtype(c.ty)))
        .collect();
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            enabled: Some(true),
            hive_start_idx: 0,
            schema: Some(Arc::new(hive_schema)),
            try_parse_dates: false,
        },
        ..ScanArgsParquet::default()
    };
    let glob = format!("{}/**/*.parquet", dir.display());
    let lf = LazyFrame::scan_parquet(PlRefPath::new(glob.as_str()), args).map_err(|source| {
        DatasetError::Polars {
            path: dir.clone(),
            source,
        }
    })?;
    let cols: Vec<Expr> = polars_schema(t)
        .iter_names()
        .map(|n| col(n.clone()))
        .collect();
    Ok(lf.select(cols))
}

fn has_parquet(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            if p.is_dir() {
                has_parquet(&p)
            } else {
                p.extension().is_some_and(|x| x == "parquet")
            }
        })
}

/// Collects a whole table.
pub fn read(root: &Path, table: &str) -> Result<DataFrame, DatasetError> {
    scan(root, table)?
        .collect()
        .map_err(|source| DatasetError::Polars {
            path: root.join(table),
            source,
        })
}
