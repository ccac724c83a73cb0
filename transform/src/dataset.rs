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
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
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

/// Replaces, in each named derived table, the partitions of `runs` with the rows of its frame
/// (hive layout, one `part-overlap.parquet` per run and rank).
///
/// Every part is written under `<root>/.overlap-tmp-<pid>/` first; only when all are written
/// are the old `run=<label>` directories moved aside and the new ones renamed into place, so a
/// failure leaves the previous tables as they were.
pub fn replace_runs(
    root: &Path,
    runs: &[String],
    tables: &[(&str, &DataFrame)],
) -> Result<(), DatasetError> {
    if !root.join(aorta_ingest::dataset::MANIFEST).exists() {
        return Err(DatasetError::NotADataset(root.to_path_buf()));
    }
    let tmp = root.join(format!(".overlap-tmp-{}", std::process::id()));
    let res = stage(&tmp, runs, tables).and_then(|()| swap(root, &tmp, runs, tables));
    let _ = std::fs::remove_dir_all(&tmp);
    res
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DatasetError + '_ {
    move |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes every (table, run, rank) part under `tmp/new/`.
fn stage(tmp: &Path, runs: &[String], tables: &[(&str, &DataFrame)]) -> Result<(), DatasetError> {
    for &(name, df) in tables {
        let t = schema::table(name).ok_or_else(|| DatasetError::UnknownTable(name.into()))?;
        let file_cols: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
        let polars = |source| DatasetError::Polars {
            path: tmp.join(name),
            source,
        };
        for part in df
            .partition_by_stable(["run", "rank"], true)
            .map_err(polars)?
        {
            let run = part
                .column("run")
                .map_err(polars)?
                .str()
                .map_err(polars)?
                .get(0);
            let rank = part
                .column("rank")
                .map_err(polars)?
                .i64()
                .map_err(polars)?
                .get(0);
            let (Some(run), Some(rank)) = (run, rank) else {
                continue;
            };
            if !runs.iter().any(|r| r == run) {
                continue;
            }
            let dir = tmp.join(format!("new/{name}/run={run}/rank={rank}"));
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            let path = dir.join("part-overlap.parquet");
            let mut out = part.select(file_cols.iter().copied()).map_err(polars)?;
            let file = std::fs::File::create(&path).map_err(io_err(&path))?;
            ParquetWriter::new(file)
                .with_compression(ParquetCompression::Zstd(None))
                .finish(&mut out)
                .map_err(polars)?;
        }
    }
    Ok(())
}

/// Moves the old partitions of `runs` aside and the staged ones into place.
fn swap(
    root: &Path,
    tmp: &Path,
    runs: &[String],
    tables: &[(&str, &DataFrame)],
) -> Result<(), DatasetError> {
    for &(name, _) in tables {
        for run in runs {
            let rel = format!("{name}/run={run}");
            let (live, old, new) = (
                root.join(&rel),
                tmp.join(format!("old/{rel}")),
                tmp.join(format!("new/{rel}")),
            );
            if live.exists() {
                std::fs::create_dir_all(old.parent().unwrap()).map_err(io_err(&old))?;
                std::fs::rename(&live, &old).map_err(io_err(&live))?;
            }
            if new.exists() {
                std::fs::create_dir_all(live.parent().unwrap()).map_err(io_err(&live))?;
                std::fs::rename(&new, &live).map_err(io_err(&live))?;
            }
        }
    }
    Ok(())
}
