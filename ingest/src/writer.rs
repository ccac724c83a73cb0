//! Parquet output: one file per (input file, table), built column by column in schema order.
//!
//! `RecordBatch::try_new` checks every column against `schema.rs`, so a builder that drifts
//! from the documented schema fails the first test that writes a row.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_writer::{ArrowWriter, ArrowWriterOptions};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::{IngestError, Result};
use crate::schema::{ColType, Table, SCHEMA_VERSION};

/// Columns of one batch, pushed in schema order.
pub struct Cols {
    table: &'static Table,
    arrays: Vec<ArrayRef>,
}

impl Cols {
    /// An empty batch of `table`: push its columns in schema order.
    pub fn new(table: &'static Table) -> Cols {
        Cols {
            table,
            arrays: Vec::with_capacity(table.columns.len()),
        }
    }

    /// Appends the next column: `a` is of the schema's type, or a dictionary of it.
    pub(crate) fn push(&mut self, name: &str, a: ArrayRef) {
        let expected = self.table.columns.get(self.arrays.len()).map(|c| c.name);
        assert_eq!(
            expected,
            Some(name),
            "{}: column order drifted from schema.rs",
            self.table.name
        );
        self.arrays.push(a);
    }

    /// Appends column `name`, with no nulls (panics when it is not the next column of the schema).
    pub fn i64(&mut self, name: &str, v: impl IntoIterator<Item = i64>) {
        self.push(name, Arc::new(Int64Array::from_iter_values(v)));
    }

    /// Values and validity in two plain passes (`Int64Array::from_iter` appended value and
    /// bit one by one); no validity buffer at all when nothing is null.
    pub fn opt_i64<I>(&mut self, name: &str, v: I)
    where
        I: IntoIterator<Item = Option<i64>>,
        I::IntoIter: Clone,
    {
        let v = v.into_iter();
        let values: Vec<i64> = v.clone().map(|x| x.unwrap_or(0)).collect();
        let nulls = v
            .clone()
            .any(|x| x.is_none())
            .then(|| NullBuffer::from_iter(v.map(|x| x.is_some())));
        self.push(name, Arc::new(Int64Array::new(values.into(), nulls)));
    }

    pub(crate) fn f64(&mut self, name: &str, v: impl IntoIterator<Item = f64>) {
        self.push(name, Arc::new(Float64Array::from_iter_values(v)));
    }

    /// Appends column `name` as UTF-8, with no nulls.
    pub fn str<'a>(&mut self, name: &str, v: impl IntoIterator<Item = &'a str>) {
        self.opt_str(name, v.into_iter().map(Some));
    }

    /// Sized once: growing the string buffer by doubling cost a tenth of single-core
    /// ingest time in reallocation and fresh pages (docs/PERFORMANCE.md, rocprofv3).
    pub(crate) fn opt_str<'a>(&mut self, name: &str, v: impl IntoIterator<Item = Option<&'a str>>) {
        let v: Vec<Option<&str>> = v.into_iter().collect();
        let bytes = v.iter().map(|s| s.map_or(0, str::len)).sum();
        let mut b = StringBuilder::with_capacity(v.len(), bytes);
        for s in v {
            b.append_option(s);
        }
        self.push(name, Arc::new(b.finish()));
    }

    /// The batch; its schema is the table's, with dictionary types where columns were
    /// pushed as dictionaries (the Parquet column is the same string column either way).
    pub fn finish(self) -> RecordBatch {
        assert_eq!(
            self.arrays.len(),
            self.table.columns.len(),
            "{}: a column is missing (schema.rs)",
            self.table.name
        );
        let fields = self.table.columns.iter().zip(&self.arrays);
        let fields: Vec<Field> = fields
            .map(|(c, a)| {
                let ty = match a.data_type() {
                    DataType::Dictionary(_, v) if **v == c.ty.arrow() => a.data_type().clone(),
                    _ => c.ty.arrow(),
                };
                Field::new(c.name, ty, c.nullable)
            })
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), self.arrays)
            .unwrap_or_else(|e| panic!("{}: batch does not match schema.rs: {e}", self.table.name))
    }
}

/// Set by `fuzzing::Scratch::new`: batches are built and checked, then counted instead of
/// encoded. The fuzzer tests the readers; Parquet encoding was 40 % of each of its runs.
#[cfg(feature = "fuzzing")]
pub(crate) static DISCARD: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A Parquet file being written for one table.
pub(crate) struct TableWriter {
    pub table: &'static Table,
    pub path: PathBuf,
    writer: Option<ArrowWriter<File>>,
    pub rows: u64,
}

/// Rows per Parquet row group. The writer holds one encoded row group per table in memory,
/// so this bounds ingest memory (and readers still get large, fast row groups).
pub(crate) const ROW_GROUP_ROWS: usize = 1 << 18;

/// Strings (names, categories) are dictionary-encoded: few distinct values, many rows.
/// Numbers are not: timestamps and ids are nearly all distinct, so a dictionary would hash
/// every value only to be abandoned; delta encoding suits them (sorted-ish) and is cheap.
///
/// Strings carry no min/max statistics: a row group's names, shapes or categories span
/// nearly the whole range, so they would prune nothing, and computing them compared every
/// value (about a tenth of the writer's instructions on Kineto). Readers filter strings
/// through the dictionary pages; numbers (times, steps, ids) keep their statistics.
fn properties(table: &Table) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL).expect("valid level"),
        ))
        .set_dictionary_enabled(true);
    for c in table.columns {
        let path = ColumnPath::from(c.name);
        b = match c.ty {
            ColType::Int64 => b
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED),
            ColType::Utf8 => b.set_column_statistics_enabled(path, EnabledStatistics::None),
            ColType::Float64 => b,
        };
    }
    b.set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(format!("aorta {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            KeyValue::new("aorta.schema_version".into(), SCHEMA_VERSION.to_string()),
            KeyValue::new("aorta.table".into(), table.name.to_string()),
        ]))
        .build()
}

/// zstd level of every page. Level 1: against level 3 it saved ~5 % of single-core CPU on
/// the rocprof benchmark for 1-2 % larger files (docs/PERFORMANCE.md).
const ZSTD_LEVEL: i32 = 1;

impl TableWriter {
    pub(crate) fn new(table: &'static Table, path: PathBuf) -> TableWriter {
        TableWriter {
            table,
            path,
            writer: None,
            rows: 0,
        }
    }

    fn err(&self, source: parquet::errors::ParquetError) -> IngestError {
        IngestError::Parquet {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Appends a batch; the file is created on the first non-empty one.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        #[cfg(feature = "fuzzing")]
        if DISCARD.load(std::sync::atomic::Ordering::Relaxed) {
            self.rows += batch.num_rows() as u64;
            return Ok(());
        }
        if self.writer.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| IngestError::io(dir, e))?;
            }
            let f = File::create(&self.path).map_err(|e| IngestError::io(&self.path, e))?;
            // No embedded Arrow schema: readers see plain Parquet types, so every library
            // reads the string columns as strings.
            let opts = ArrowWriterOptions::new()
                .with_properties(properties(self.table))
                .with_skip_arrow_metadata(true);
            // The first batch's schema: the table's, with the same dictionary columns as
            // every later batch of this table (see `Cols::finish`).
            let w = ArrowWriter::try_new_with_options(f, batch.schema(), opts)
                .map_err(|e| self.err(e))?;
            self.writer = Some(w);
        }
        let res = self.writer.as_mut().expect("created above").write(batch);
        res.map_err(|e| self.err(e))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Closes the file; `None` when nothing was written.
    pub(crate) fn close(mut self) -> Result<Option<(PathBuf, u64)>> {
        match self.writer.take() {
            // Rows without a writer: discarded (`DISCARD`).
            None => Ok((self.rows > 0).then_some((self.path, self.rows))),
            Some(w) => {
                w.close().map_err(|e| self.err(e))?;
                Ok(Some((self.path, self.rows)))
            }
        }
    }
}

/// Writes a whole small table in one go.
pub fn write_all(
    table: &'static Table,
    path: &Path,
    batch: RecordBatch,
) -> Result<Option<(PathBuf, u64)>> {
    let mut w = TableWriter::new(table, path.to_path_buf());
    w.write(&batch)?;
    w.close()
}
