//! Opening dataset tables as polars `LazyFrame`s, hive partitions (`run`, `rank`) included.

use std::path::{Path, PathBuf};

use aorta_ingest::schema::{self, ColType, Table, PARTITION_COLUMNS, SCHEMA_VERSION};
use polars::prelude::*;

/// Why a dataset could not be read or written; every variant names the path at fault.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The directory has no `manifest.json`: nothing was ingested into it. Holds the directory.
    #[error("{0}: not an aorta dataset (no manifest.json); run `aorta ingest` first")]
    NotADataset(PathBuf),
    /// The manifest's schema version is not the one this build reads.
    #[error("{path}: dataset written with schema v{found}, this aorta reads v{SCHEMA_VERSION} (docs/SCHEMA.md); ingest the traces again into a new directory: `aorta ingest TRACES -o NEW_DIR`")]
    OldSchema {
        /// The manifest.
        path: PathBuf,
        /// The schema version it declares.
        found: u64,
    },
    /// The manifest lists no inputs. Holds the dataset's root.
    #[error("{0}: empty dataset (manifest.json lists no inputs): nothing to analyse; ingest traces into it first: `aorta ingest TRACES -o DIR`")]
    Empty(PathBuf),
    /// An ingest was killed while it committed (`.commit.json` is left): readers refuse the
    /// dataset until a writer finishes that commit. Holds the dataset's root.
    #[error("{0}: an ingest was killed while it committed (.commit.json): `aorta overlap {0}`, or any `aorta ingest` into it, finishes that commit first")]
    Unfinished(PathBuf),
    /// The manifest, a part or the `runs` table does not hold what it should (bad JSON, a part
    /// missing or of the wrong size or checksum, bad recorded rules).
    #[error("{path}: damaged: {msg}")]
    Damaged {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it, and what to run to repair it where that is known.
        msg: String,
    },
    /// A dataset ingested in shards (`aorta ingest --shard`) holds a run label whose files
    /// cannot be one job, which only the whole listing shows.
    #[error("{path}: {msg}")]
    NotOneJob {
        /// The dataset's root.
        path: PathBuf,
        /// Which label, why, and what to do.
        msg: String,
    },
    /// A table name that is not in `aorta_ingest::schema`. Holds the name.
    #[error("unknown table `{0}`")]
    UnknownTable(String),
    /// Polars failed while reading or computing a table.
    #[error("{path}: {source}")]
    Polars {
        /// The table (or file) being read.
        path: PathBuf,
        /// Polars' error.
        source: PolarsError,
    },
    /// Writing a derived table or committing it failed (ingest's writer and commit).
    #[error(transparent)]
    Write(#[from] aorta_ingest::IngestError),
    /// Listing, reading or writing a file of the dataset failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
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
    check(root)?;
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

/// A dataset at `root`, of this aorta's schema version, with inputs, and every part its
/// manifest lists present and intact (size and content hash, where the manifest records
/// them). A dataset of an older version lacks columns the transforms read, and would fail
/// later with a polars error naming one of them; a damaged part would fail with an error
/// naming its table, or not at all (a flipped bit in a value). Checked once per root and
/// process.
pub fn check(root: &Path) -> Result<(), DatasetError> {
    static CHECKED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if checked.iter().any(|p| p == root) {
        return Ok(());
    }
    let path = root.join(aorta_ingest::dataset::MANIFEST);
    let bytes = match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(DatasetError::NotADataset(root.to_path_buf()))
        }
        other => other.map_err(io_err(&path))?,
    };
    let found = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("schema_version")?.as_u64());
    match found {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(found) => return Err(DatasetError::OldSchema { path, found }),
        None => return Err(DatasetError::NotADataset(root.to_path_buf())),
    }
    serde_json::from_slice::<aorta_ingest::dataset::Manifest>(&bytes).map_err(|e| {
        DatasetError::Damaged {
            path: path.clone(),
            msg: format!("not an aorta manifest: {e}"),
        }
    })?;
    if aorta_ingest::commit::pending(root) {
        return Err(DatasetError::Unfinished(root.to_path_buf()));
    }
    // The shards' manifests merged in (`aorta ingest --shard`).
    let manifest = aorta_ingest::dataset::Manifest::load(root)?;
    if let Some(msg) = aorta_ingest::dataset::shard_job_conflict(&manifest) {
        return Err(DatasetError::NotOneJob {
            path: root.to_path_buf(),
            msg,
        });
    }
    if manifest.inputs.is_empty() {
        return Err(DatasetError::Empty(root.to_path_buf()));
    }
    verify_parts(root, &manifest)?;
    checked.push(root.to_path_buf());
    Ok(())
}

/// Every part the manifest lists exists, with the size and content hash it records.
fn verify_parts(root: &Path, m: &aorta_ingest::dataset::Manifest) -> Result<(), DatasetError> {
    let parts: Vec<(&PathBuf, Option<&String>, &str)> = m
        .inputs
        .iter()
        .flat_map(|e| {
            e.parts.iter().map(|p| {
                let sum = e.checksums.get(&p.display().to_string());
                (p, sum, e.source.as_str())
            })
        })
        .collect();
    crate::par::map(&parts, |&(rel, sum, source)| {
        let path = root.join(rel);
        let damaged = |msg: String| DatasetError::Damaged {
            path: path.clone(),
            msg: format!(
                "{msg}; ingest its source again: aorta ingest {source} -o {} --force",
                root.display()
            ),
        };
        let meta = std::fs::metadata(&path)
            .map_err(|e| damaged(format!("listed in manifest.json but unreadable ({e})")))?;
        let Some(sum) = sum else { return Ok(()) };
        let size = sum.split(':').next().and_then(|n| n.parse::<u64>().ok());
        if size.is_some_and(|n| n != meta.len()) {
            return Err(damaged(format!(
                "{} bytes, manifest.json says {} (truncated or rewritten)",
                meta.len(),
                size.unwrap_or(0)
            )));
        }
        let now = aorta_ingest::dataset::checksum(&path).map_err(|e| damaged(e.to_string()))?;
        if &now != sum {
            return Err(damaged(
                "content differs from its checksum in manifest.json (a changed or flipped byte)"
                    .into(),
            ));
        }
        Ok(())
    })?;
    Ok(())
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

/// Collects `cols` of the rows of one table that `filter` keeps.
pub fn read_where(
    root: &Path,
    table: &str,
    filter: Expr,
    cols: &[&str],
) -> Result<DataFrame, DatasetError> {
    let cols: Vec<Expr> = cols.iter().map(|c| col(*c)).collect();
    scan(root, table)?
        .filter(filter)
        .select(cols)
        .collect()
        .map_err(|source| DatasetError::Polars {
            path: root.join(table),
            source,
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
pub(crate) fn replace_runs(
    root: &Path,
    runs: &[String],
    tables: &[(&str, &DataFrame)],
) -> Result<(), DatasetError> {
    let staging = Staging::new(root)?;
    for &(name, df) in tables {
        staging.write(name, runs, df)?;
    }
    let names: Vec<&str> = tables.iter().map(|t| t.0).collect();
    staging.commit(runs, &names)
}

/// Derived tables being written: every part goes under `<root>/.overlap-tmp-<pid>/` first;
/// only `commit` moves the old `run=<label>` directories aside and the new ones into place,
/// so a failure (or a dropped `Staging`) leaves the previous tables as they were. Parts can
/// be written a few ranks at a time, so a 1,000-rank table never sits in memory whole.
pub(crate) struct Staging {
    root: PathBuf,
    tmp: PathBuf,
}

impl Staging {
    pub(crate) fn new(root: &Path) -> Result<Staging, DatasetError> {
        check(root)?;
        let tmp = root.join(format!(".overlap-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(Staging {
            root: root.to_path_buf(),
            tmp,
        })
    }

    /// Stages the rows of `df` whose run is one of `runs`, one part per (run, rank).
    pub(crate) fn write(
        &self,
        table: &str,
        runs: &[String],
        df: &DataFrame,
    ) -> Result<(), DatasetError> {
        stage(&self.tmp, runs, &[(table, df)])
    }

    /// Where the part of one (table, run, rank) is staged, for writers of their own.
    pub(crate) fn part_path(&self, table: &str, run: &str, rank: i64) -> PathBuf {
        self.tmp
            .join("new")
            .join(schema::partition_dir(table, run, rank))
            .join("part-overlap.parquet")
    }

    /// Swaps the staged partitions of `runs` into place, for each of `tables`.
    pub(crate) fn commit(self, runs: &[String], tables: &[&str]) -> Result<(), DatasetError> {
        swap(&self.root, &self.tmp, runs, tables)
    }
}

impl Drop for Staging {
    /// Removes what was staged and the partitions swapped out: for a 1,000-rank job, thousands
    /// of directories, removed a share per core.
    fn drop(&mut self) {
        let mut dirs = vec![self.tmp.clone()];
        for _ in 0..4 {
            dirs = dirs.iter().flat_map(|d| subdirs(d)).collect();
        }
        let _ = crate::par::map(&dirs, |d| std::fs::remove_dir_all(d));
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// The directories directly inside `dir` (none when it cannot be read).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Rows of the runs `runs` (none when empty). `is_in` needs a polars feature this crate does
/// not otherwise use: an OR of equalities, one per run.
pub fn of_runs(runs: &[String]) -> Expr {
    runs.iter()
        .map(|r| col("run").eq(lit(r.as_str())))
        .reduce(Expr::or)
        .unwrap_or(lit(false))
}

/// What ingest said about the identity of `runs` (all runs when empty): one line per run
/// label that was split because its files could not be one job, naming the runs it became
/// and why. Commands that read the dataset repeat these, so the warning is not lost with the
/// ingest's terminal.
pub fn job_notes(root: &Path, runs: &[String]) -> Result<Vec<String>, DatasetError> {
    let manifest = aorta_ingest::dataset::Manifest::load(root)?;
    let mut split: std::collections::BTreeMap<&str, (Vec<&str>, &str)> = Default::default();
    for e in &manifest.inputs {
        let (Some(why), false) = (e.job_note.as_deref(), e.base_label.is_empty()) else {
            continue;
        };
        if !runs.is_empty() && !runs.contains(&e.label) {
            continue;
        }
        let entry = split.entry(e.base_label.as_str()).or_insert((vec![], why));
        if !entry.0.contains(&e.label.as_str()) {
            entry.0.push(&e.label);
        }
    }
    let runs_now: std::collections::BTreeSet<&str> =
        manifest.inputs.iter().map(|e| e.label.as_str()).collect();
    Ok(split
        .into_iter()
        .map(|(base, (labels, why))| {
            if runs_now.contains(base) {
                // The run kept its name; files added later that could not join it did not.
                format!(
                    "files that could not join run `{base}` became runs {} (they cannot be one job with it: {why})",
                    labels.join(", ")
                )
            } else {
                format!(
                    "`{base}` was split into runs {} (its files cannot be one job: {why})",
                    labels.join(", ")
                )
            }
        })
        .collect())
}

/// The partition directory of one run and rank of a table.
pub(crate) fn partition_dir(root: &Path, table: &str, run: &str, rank: i64) -> PathBuf {
    root.join(schema::partition_dir(table, run, rank))
}

/// Reads `columns` of every part of one (run, rank) partition, without hive columns; an
/// empty frame when the partition has no parts. One small read per rank keeps a 1,000-rank
/// job's scans from listing every file of the table each time.
pub(crate) fn read_partition(
    root: &Path,
    table: &str,
    run: &str,
    rank: i64,
    columns: &[&str],
) -> Result<DataFrame, DatasetError> {
    let t = schema::table(table).ok_or_else(|| DatasetError::UnknownTable(table.into()))?;
    let dir = partition_dir(root, table, run, rank);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => vec![],
        Err(e) => return Err(io_err(&dir)(e)),
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect(),
    };
    files.sort();
    let empty: Schema = columns
        .iter()
        .filter_map(|&n| t.column(n))
        .map(|c| Field::new(c.name.into(), dtype(c.ty)))
        .collect();
    let mut out = DataFrame::empty_with_schema(&empty);
    let cols: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    for f in files {
        let file = std::fs::File::open(&f).map_err(io_err(&f))?;
        let df = ParquetReader::new(file)
            .with_columns(Some(cols.clone()))
            .finish()
            .map_err(|source| DatasetError::Polars {
                path: f.clone(),
                source,
            })?;
        out.vstack_mut(&df).map_err(|source| DatasetError::Polars {
            path: f.clone(),
            source,
        })?;
    }
    Ok(out)
}

/// Sets `columns` of every `runs` part of one (run, rank) to the given values (one value for
/// every row), each file rewritten to a temporary name and renamed over the old one. The
/// files rewritten (for `record_checksums`).
pub(crate) fn update_runs_partition(
    root: &Path,
    run: &str,
    rank: i64,
    columns: Vec<Column>,
) -> Result<Vec<PathBuf>, DatasetError> {
    let dir = partition_dir(root, "runs", run, rank);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Ok(vec![]);
    };
    let mut rewritten = vec![];
    for f in rd.flatten().map(|e| e.path()) {
        if f.extension().is_none_or(|x| x != "parquet") {
            continue;
        }
        let polars = |source| DatasetError::Polars {
            path: f.clone(),
            source,
        };
        let file = std::fs::File::open(&f).map_err(io_err(&f))?;
        let mut df = ParquetReader::new(file).finish().map_err(polars)?;
        let mut changed = false;
        for c in &columns {
            let v = c.new_from_index(0, df.height());
            changed |= df
                .column(v.name())
                .map_or(true, |old| !old.equals_missing(&v));
            df.with_column(v).map_err(polars)?;
        }
        // A rerun that finds the same values leaves the file alone (a 1,000-rank job has a
        // thousand of them).
        if !changed {
            continue;
        }
        aorta_ingest::atomic::write_file(&f, |w| write_parquet(w, &mut df)).map_err(io_err(&f))?;
        rewritten.push(f);
    }
    Ok(rewritten)
}

/// Records the new checksums of ingested parts a command rewrote in place (the `runs`
/// parts' clock columns) in the manifest, so `check` does not take them for damaged ones.
/// The caller holds the dataset's lock.
pub(crate) fn record_checksums(root: &Path, files: &[PathBuf]) -> Result<(), DatasetError> {
    if files.is_empty() {
        return Ok(());
    }
    let mut m = aorta_ingest::dataset::Manifest::load(root)?;
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(f).display().to_string();
        for e in &mut m.inputs {
            if let Some(sum) = e.checksums.get_mut(&rel) {
                *sum = aorta_ingest::dataset::checksum(f)?;
            }
        }
    }
    Ok(m.save(root)?)
}

/// One derived-table file, zstd-compressed, through a buffer: polars writes page headers
/// field by field, and unbuffered a 1,000-rank `collectives` table made millions of tiny
/// `write` calls.
fn write_parquet(out: &mut impl std::io::Write, df: &mut DataFrame) -> std::io::Result<()> {
    ParquetWriter::new(&mut *out)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(df)
        .map_err(std::io::Error::other)?;
    out.flush()
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
        let polars = |source| DatasetError::Polars {
            path: tmp.join(name),
            source,
        };
        let parts = df
            .partition_by_stable(["run", "rank"], true)
            .map_err(polars)?;
        // Each part is its own file: written in parallel.
        crate::par::map(&parts, |part| stage_part(tmp, runs, name, part))?;
    }
    Ok(())
}

/// Writes one (run, rank) part of table `name` under `tmp/new/`, unless its run is not one of
/// `runs`.
fn stage_part(
    tmp: &Path,
    runs: &[String],
    name: &str,
    part: &DataFrame,
) -> Result<(), DatasetError> {
    let t = schema::table(name).ok_or_else(|| DatasetError::UnknownTable(name.into()))?;
    let polars = |source| DatasetError::Polars {
        path: tmp.join(name),
        source,
    };
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
        return Ok(());
    };
    if !runs.iter().any(|r| r == run) {
        return Ok(());
    }
    let dir = tmp.join("new").join(schema::partition_dir(name, run, rank));
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let path = dir.join("part-overlap.parquet");
    let file_cols = t.columns.iter().map(|c| c.name);
    let mut out = part.select(file_cols).map_err(polars)?;
    let file = std::fs::File::create(&path).map_err(io_err(&path))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    write_parquet(&mut w, &mut out).map_err(io_err(&path))
}

/// Moves the old partitions of `runs` aside and the staged ones into place.
fn swap(root: &Path, tmp: &Path, runs: &[String], tables: &[&str]) -> Result<(), DatasetError> {
    for &name in tables {
        for run in runs {
            let rel = schema::run_dir(name, run);
            let (live, old, new) = (
                root.join(&rel),
                tmp.join("old").join(&rel),
                tmp.join("new").join(&rel),
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

#[cfg(test)]
mod tests;
