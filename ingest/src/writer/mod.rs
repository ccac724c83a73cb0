//! Parquet output: one file per (input file, table), built column by column in schema order.
//!
//! `RecordBatch::try_new` checks every column against `schema.rs`, so a builder that drifts
//! from the documented schema fails the first test that writes a row.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_buffer::{BooleanBuffer, NullBuffer};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_writer::{ArrowWriter, ArrowWriterOptions};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use rayon::prelude::*;

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
        self.push(name, i64_array(v));
    }

    /// Appends column `name`, nullable (see `opt_i64_array`).
    pub fn opt_i64(&mut self, name: &str, v: impl IntoIterator<Item = Option<i64>>) {
        self.push(name, opt_i64_array(v));
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

/// An int64 column with no nulls.
pub(crate) fn i64_array(v: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(v))
}

/// Values and validity in one pass, the validity packed 64 rows to a word
/// (`Int64Array::from_iter` appended value and bit one by one, and a pass for each over rows
/// of ~100 bytes read three of them); no validity buffer at all when nothing is null.
pub(crate) fn opt_i64_array(v: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    let v = v.into_iter();
    let mut values: Vec<i64> = Vec::with_capacity(v.size_hint().0);
    let mut words: Vec<u64> = Vec::with_capacity(v.size_hint().0.div_ceil(64));
    let (mut word, mut valid) = (0u64, 0usize);
    for x in v {
        let bit = values.len() % 64;
        word |= u64::from(x.is_some()) << bit;
        valid += usize::from(x.is_some());
        values.push(x.unwrap_or(0));
        if bit == 63 {
            words.push(std::mem::take(&mut word));
        }
    }
    if values.len() % 64 != 0 {
        words.push(word);
    }
    let n = values.len();
    let nulls = (valid < n).then(|| NullBuffer::new(BooleanBuffer::new(words.into(), 0, n)));
    Arc::new(Int64Array::new(values.into(), nulls))
}

/// Set by `fuzzing::Scratch::new`: batches are built and checked, then counted instead of
/// encoded. The fuzzer tests the readers; Parquet encoding was 40 % of each of its runs.
#[cfg(feature = "fuzzing")]
pub(crate) static DISCARD: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether batches are counted instead of encoded (`DISCARD`).
pub(crate) fn discarding() -> bool {
    #[cfg(feature = "fuzzing")]
    if DISCARD.load(std::sync::atomic::Ordering::Relaxed) {
        return true;
    }
    false
}

/// A Parquet file being written for one table.
pub(crate) struct TableWriter {
    pub table: &'static Table,
    pub path: PathBuf,
    writer: Option<Open>,
    pub rows: u64,
}

/// An open file: what `ArrowWriter` does, with the columns of each batch encoded in parallel.
///
/// Why: Parquet encoding (levels, dictionaries, delta packing, zstd) was the largest part of
/// settling a Kineto trace, and `ArrowWriter` encodes a batch's columns one after another, so
/// on many cores the settle of the biggest table ran on one (docs/PERFORMANCE.md, issue 33).
/// Each column of a row group has its own writer (`Column`: arrow-rs' `ArrowColumnWriter`, or
/// `strings` for the dictionary string columns), so the columns of a batch are independent
/// work; they are written on the current rayon pool (the `--jobs` threads) and appended to
/// the row group in schema order. Every column writer sees exactly the values, in the same
/// order, that `ArrowWriter` gave it, so the file holds the same values laid out the same way
/// (byte for byte, in the test below; `strings` says where its pages can differ).
struct Open {
    file: SerializedFileWriter<File>,
    columns: Columns,
    /// The schema of the first batch (every batch of a table has it: `Cols::finish`).
    schema: arrow_schema::SchemaRef,
    /// The row group being written: one writer per column (flat schemas: one leaf a field).
    cols: Vec<Column>,
    /// Rows in `cols`.
    buffered: usize,
}

impl Open {
    fn new(f: File, schema: arrow_schema::SchemaRef, opts: ArrowWriterOptions) -> PResult<Open> {
        // `ArrowWriter` sets the file up (schema conversion, properties, key-value metadata)
        // exactly as before; only the encoding of row groups is done here.
        let (file, factory) =
            ArrowWriter::try_new_with_options(f, schema.clone(), opts)?.into_serialized_writer()?;
        let columns = Columns::new(factory, &schema, &file);
        Ok(Open {
            file,
            columns,
            schema,
            cols: Vec::new(),
            buffered: 0,
        })
    }

    /// `ArrowWriter::write` with a row limit only: fills row groups of `ROW_GROUP_ROWS`.
    fn write(&mut self, batch: &RecordBatch) -> PResult<()> {
        let mut rest = batch.clone();
        while rest.num_rows() > 0 {
            if self.cols.is_empty() {
                let index = self.file.flushed_row_groups().len();
                self.cols = self.columns.writers(index)?;
                assert_eq!(
                    self.cols.len(),
                    self.schema.fields().len(),
                    "flat schemas: one Parquet column per field"
                );
            }
            let take = rest.num_rows().min(ROW_GROUP_ROWS - self.buffered);
            let now = rest.slice(0, take);
            rest = rest.slice(take, rest.num_rows() - take);
            let fields = self.schema.fields();
            if on_pool() {
                let columns = fields.par_iter().zip(now.columns().par_iter());
                let cols = self.cols.par_iter_mut().zip(columns);
                cols.try_for_each(|(w, (f, c))| w.write(f, c))?;
            } else {
                let mut cols = self.cols.iter_mut().zip(fields.iter().zip(now.columns()));
                cols.try_for_each(|(w, (f, c))| w.write(f, c))?;
            }
            self.buffered += take;
            if self.buffered >= ROW_GROUP_ROWS {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Closes the row group being written (its columns' last pages compressed in parallel).
    fn flush(&mut self) -> PResult<()> {
        if self.cols.is_empty() {
            return Ok(());
        }
        let cols = std::mem::take(&mut self.cols);
        let chunks: Vec<_> = if on_pool() {
            let chunks = cols.into_par_iter().map(Column::close);
            chunks.collect::<PResult<_>>()?
        } else {
            let chunks = cols.into_iter().map(Column::close);
            chunks.collect::<PResult<_>>()?
        };
        self.buffered = 0;
        self.append(chunks)
    }

    fn close(mut self) -> PResult<()> {
        self.flush()?;
        self.file.close()?;
        Ok(())
    }

    /// Appends a row group encoded apart (`Group`), after the ones before it.
    fn append(&mut self, chunks: Vec<Chunk>) -> PResult<()> {
        let mut group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to(&mut group)?;
        }
        group.close()?;
        Ok(())
    }
}

type PResult<T> = std::result::Result<T, parquet::errors::ParquetError>;

mod column;
mod groups;
mod hybrid;
mod strings;
pub(crate) use column::{Chunk, Column, Columns};
pub(crate) use groups::{Chain, Group, Groups};

/// Whether this thread is a rayon worker, whose pool may take the columns. A sink fed by a
/// thread of its own (`writer_thread`) encodes on that thread alone, as before: the pool's
/// workers may all be waiting to hand it rows, and a sink waiting for them would never
/// drain its queue (a deadlock the tests of the rocprof and Chrome readers found).
pub(crate) fn on_pool() -> bool {
    rayon::current_thread_index().is_some()
}

/// Rows per Parquet row group. The writer holds one encoded row group per table in memory,
/// so this bounds ingest memory (and readers still get large, fast row groups). (1,024 in
/// the unit tests: see `sink::SINK_ROWS`.)
pub(crate) const ROW_GROUP_ROWS: usize = if cfg!(test) { 1 << 10 } else { 1 << 18 };

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
    if cfg!(test) {
        // Pages of a few rows: where the batches a column writer gets are cut shows in
        // the file (a page ends after a write that fills it), so tests comparing files
        // see it.
        b = b.set_data_page_size_limit(1 << 8);
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
        self.open(batch.schema())?;
        let res = self.writer.as_mut().expect("opened above").write(batch);
        res.map_err(|e| self.err(e))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Creates the file, unless it is open: `schema` is the first batch's, the table's with
    /// the same dictionary columns as every later batch of this table (see `Cols::finish`).
    pub(crate) fn open(&mut self, schema: arrow_schema::SchemaRef) -> Result<()> {
        if self.writer.is_some() {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| IngestError::io(dir, e))?;
        }
        let f = File::create(&self.path).map_err(|e| IngestError::io(&self.path, e))?;
        // No embedded Arrow schema: readers see plain Parquet types, so every library
        // reads the string columns as strings.
        let opts = ArrowWriterOptions::new()
            .with_properties(properties(self.table))
            .with_skip_arrow_metadata(true);
        let w = Open::new(f, schema, opts).map_err(|e| self.err(e))?;
        self.writer = Some(w);
        Ok(())
    }

    /// What makes this file's row groups (the file is open: `open`).
    pub(crate) fn groups(&self) -> Groups {
        let w = self.writer.as_ref().expect("the file is open");
        Groups {
            columns: w.columns.clone(),
            fields: w.schema.fields().clone(),
            path: self.path.display().to_string().into(),
        }
    }

    /// The next row group to encode apart (the file is open: `open`).
    pub(crate) fn group(&self) -> Result<Group> {
        let w = self.writer.as_ref().expect("the file is open");
        self.groups().group(w.file.flushed_row_groups().len())
    }

    /// Appends a row group encoded apart, after the ones before it.
    pub(crate) fn append(&mut self, g: Group) -> Result<()> {
        let rows = g.rows;
        self.append_chunks(g.close()?, rows)
    }

    /// Appends the column chunks of a row group of `rows` rows, encoded apart.
    pub(crate) fn append_chunks(&mut self, chunks: Vec<Chunk>, rows: usize) -> Result<()> {
        let w = self.writer.as_mut().expect("the file is open");
        let res = w.append(chunks);
        res.map_err(|e| self.err(e))?;
        self.rows += rows as u64;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::labels;
    use crate::schema::CPU_OPS;

    /// A `cpu_ops` batch of rows `from..from + n`: labels, nullable dictionaries and
    /// nullable numbers, each with its own pattern of values and nulls.
    fn batch(from: usize, n: usize) -> RecordBatch {
        const NAMES: [&str; 5] = [
            "aten::mm",
            "aten::add",
            "cudaLaunchKernel",
            "a",
            "ProfilerStep#7",
        ];
        let rows = from..from + n;
        let name = |i: usize| Some(NAMES[(i * 7 + i / 3) % NAMES.len()]);
        let shape = |i: usize| (i % 5 != 0).then_some(NAMES[i % 3]);
        let opt = |i: usize, k: usize| (i % k != 0).then_some((i * i % 1_000_003) as i64);
        let mut b = Cols::new(&CPU_OPS);
        b.push("category", labels(rows.clone().map(|i| Some(NAMES[i % 2]))));
        b.push("name", labels(rows.clone().map(name)));
        b.opt_i64("pid", rows.clone().map(|i| opt(i, 3)));
        b.opt_i64("tid", rows.clone().map(|i| Some(i as i64 % 17)));
        b.i64(
            "start_ns",
            rows.clone().map(|i| 1_000 * i as i64 + (i % 13) as i64),
        );
        b.i64("end_ns", rows.clone().map(|i| 1_000 * i as i64 + 900));
        b.opt_i64("correlation", rows.clone().map(|i| opt(i, 4)));
        b.opt_i64("external_id", rows.clone().map(|i| opt(i, 5)));
        b.opt_i64("step", rows.clone().map(|i| Some((i / 10_000) as i64)));
        b.push("input_dims", labels(rows.clone().map(shape)));
        b.push("input_types", labels(rows.clone().map(|i| shape(i + 1))));
        b.push("concrete_inputs", labels(rows.clone().map(|_| None)));
        b.push("input_strides", labels(rows.clone().map(|i| shape(i + 2))));
        b.finish()
    }

    /// The parallel column writer makes the very file `ArrowWriter` makes from the same
    /// batches, over several row groups and a batch split across their boundary: the
    /// dictionary string columns (`strings`) too, at these pages of 256 bytes.
    #[test]
    fn parallel_columns_write_the_file_arrow_writer_writes() {
        let dir = tempfile::tempdir().unwrap();
        let r = ROW_GROUP_ROWS;
        let sizes = [r / 32, 1, r * 3 / 8, r / 32, r * 5 / 8, 3, r + r / 32];
        let batches: Vec<RecordBatch> = sizes
            .iter()
            .scan(0, |at, &n| {
                *at += n;
                Some(batch(*at - n, n))
            })
            .collect();
        let total: usize = sizes.iter().sum();
        assert!(total > 2 * ROW_GROUP_ROWS);
        let ours = dir.path().join("ours.parquet");
        let mut w = TableWriter::new(&CPU_OPS, ours.clone());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| batches.iter().try_for_each(|b| w.write(b)))
            .unwrap();
        assert_eq!(w.close().unwrap(), Some((ours.clone(), total as u64)));

        let theirs = dir.path().join("theirs.parquet");
        let opts = ArrowWriterOptions::new()
            .with_properties(properties(&CPU_OPS))
            .with_skip_arrow_metadata(true);
        let f = File::create(&theirs).unwrap();
        let mut w = ArrowWriter::try_new_with_options(f, batches[0].schema(), opts).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        let meta = w.close().unwrap();
        assert_eq!(meta.num_row_groups(), 3, "{sizes:?}");
        assert!(std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap());
    }
}
