//! A dictionary string column's chunk of one row group, encoded here rather than by arrow-rs'
//! column writer.
//!
//! Why: string columns reach the writer as Arrow dictionary arrays (`dict.rs`): a batch's
//! distinct strings once, and a key per row. arrow-rs' column writer hashes and compares every
//! row's string again to build the Parquet dictionary, ~5 % of a Kineto ingest's CPU
//! (docs/PERFORMANCE.md, "String columns without a hash per row"). Here each distinct string
//! of a batch is looked up once in the chunk's dictionary, and each row's key is mapped
//! through a table.
//!
//! The chunk is laid out as arrow-rs lays out such a column under `writer::properties` (zstd,
//! no statistics, dictionary on): a PLAIN dictionary page in first-use order, then v1 data
//! pages of RLE_DICTIONARY indices after their RLE definition levels (nullable columns only),
//! each ended where arrow-rs ends one (its row count or byte size, checked every 1,024 rows of
//! a batch), and an offset index. With small pages the file is arrow-rs' byte for byte
//! (`writer::tests`); on a real trace a few pages differ in bytes (the hybrid encoding's runs,
//! zstd's frames), never in values (docs/PERFORMANCE.md). One difference by design: arrow-rs
//! gives up the dictionary for plain pages once it outgrows 1 MiB, and this writer keeps it
//! (larger dictionaries are valid Parquet, and every reader the tests run reads them).
//! Columns of any other configuration stay with arrow-rs (`Spec::new`).

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, StringArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, PageType};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, OffsetIndexBuilder, PageEncodingStats};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

use super::hybrid::{hybrid, width};
use super::PResult;
use crate::rows::Interner;

/// What a column needs to be written here: its Parquet leaf and the properties' choices.
#[derive(Clone)]
pub(crate) struct Spec {
    descr: ColumnDescPtr,
    compression: Compression,
    level: i32,
    page_rows: usize,
    page_bytes: usize,
}

impl Spec {
    /// The spec of a column whose batches are dictionaries of strings (`arrow`), when its
    /// properties are the ones this writer writes; `None` leaves it to arrow-rs.
    pub(crate) fn new(
        arrow: &DataType,
        descr: ColumnDescPtr,
        props: &WriterProperties,
    ) -> Option<Spec> {
        let DataType::Dictionary(key, value) = arrow else {
            return None;
        };
        let path = descr.path();
        let compression = props.compression(path);
        let Compression::ZSTD(level) = compression else {
            return None;
        };
        let ours = **key == DataType::Int32
            && **value == DataType::Utf8
            && descr.max_rep_level() == 0
            && props.dictionary_enabled(path)
            && props.statistics_enabled(path) == EnabledStatistics::None
            && props.bloom_filter_properties(path).is_none()
            && !props.offset_index_disabled();
        ours.then(|| Spec {
            compression,
            level: level.compression_level(),
            page_rows: props.data_page_row_count_limit(),
            page_bytes: props.data_page_size_limit(),
            descr,
        })
    }
}

/// Rows between checks of a page's size, as arrow-rs checks it after each mini-batch.
const CHECK_ROWS: usize = 1024;

/// A string column's chunk being written.
pub(crate) struct StringChunk {
    spec: Spec,
    nullable: bool,
    zstd: zstd::bulk::Compressor<'static>,
    /// The dictionary's values in first-use order, their ids its indices (the interner keeps
    /// each string once: at a million step names, a map keyed by a copy of each would hold
    /// ~50 bytes more a value than arrow-rs' encoder does).
    dict: Interner,
    /// A batch's dictionary key → index in `dict` (`u32::MAX`: not looked up yet).
    map: Vec<u32>,
    /// The page being filled: definition levels (nullable columns only) and the dictionary
    /// indices of its values, its rows and its values' bytes.
    defs: Vec<u32>,
    keys: Vec<u32>,
    rows: usize,
    bytes: i64,
    /// The data pages so far, each with its rows and values' bytes.
    pages: Vec<(CompressedPage, usize, i64)>,
    total_rows: u64,
}

impl StringChunk {
    pub(crate) fn new(spec: &Spec) -> PResult<StringChunk> {
        Ok(StringChunk {
            nullable: spec.descr.max_def_level() > 0,
            zstd: zstd::bulk::Compressor::new(spec.level).map_err(external)?,
            spec: spec.clone(),
            dict: Interner::default(),
            map: Vec::new(),
            defs: Vec::new(),
            keys: Vec::new(),
            rows: 0,
            bytes: 0,
            pages: Vec::new(),
            total_rows: 0,
        })
    }

    /// Appends a batch's column: a dictionary array of strings (`Spec::new`), or plain
    /// strings (each looked up).
    pub(crate) fn write(&mut self, a: &ArrayRef) -> PResult<()> {
        match a.data_type() {
            DataType::Dictionary(..) => {
                let d = a
                    .as_dictionary_opt::<Int32Type>()
                    .ok_or_else(|| mismatch(a))?;
                let values = d
                    .values()
                    .as_string_opt::<i32>()
                    .ok_or_else(|| mismatch(a))?;
                self.map.clear();
                self.map.resize(values.len(), u32::MAX);
                let keys = d.keys().values();
                // A key may be null, or point at a null value: both are a null row.
                let nulls = d.logical_nulls();
                self.rows_of(nulls.as_ref(), d.len(), |c, i| {
                    let k = keys[i] as usize;
                    match c.map[k] {
                        u32::MAX => {
                            let at = c.dict.id(values.value(k));
                            c.map[k] = at;
                            at
                        }
                        at => at,
                    }
                })
            }
            DataType::Utf8 => {
                let s: &StringArray = a.as_string();
                self.rows_of(s.nulls(), s.len(), |c, i| c.dict.id(s.value(i)))
            }
            _ => Err(mismatch(a)),
        }
    }

    /// Adds `len` rows, `at(self, row)` giving each non-null one's dictionary index, and ends
    /// the page when it holds the properties' rows or bytes.
    fn rows_of(
        &mut self,
        nulls: Option<&NullBuffer>,
        len: usize,
        mut at: impl FnMut(&mut Self, usize) -> u32,
    ) -> PResult<()> {
        if !self.nullable && nulls.is_some_and(|n| n.null_count() > 0) {
            let name = self.spec.descr.name();
            return Err(ParquetError::General(format!(
                "nulls in column {name}, which has none"
            )));
        }
        let mut i = 0;
        while i < len {
            let end = len.min(i + CHECK_ROWS);
            for r in i..end {
                let valid = nulls.is_none_or(|n| n.is_valid(r));
                if self.nullable {
                    self.defs.push(u32::from(valid));
                }
                if valid {
                    let k = at(self, r);
                    self.bytes += self.dict.get(k).len() as i64;
                    self.keys.push(k);
                }
            }
            self.rows += end - i;
            i = end;
            let bytes =
                (self.keys.len() * usize::from(width(self.dict.len())) + self.defs.len()) / 8;
            if self.rows >= self.spec.page_rows || bytes >= self.spec.page_bytes {
                self.end_page()?;
            }
        }
        self.total_rows += len as u64;
        Ok(())
    }

    /// Encodes and compresses the page being filled, if it has rows.
    fn end_page(&mut self) -> PResult<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(self.keys.len() * 2 + self.defs.len() / 8 + 16);
        if self.nullable {
            buf.extend_from_slice(&[0; 4]);
            hybrid(&mut buf, &self.defs, 1);
            let len = (buf.len() - 4) as u32;
            buf[..4].copy_from_slice(&len.to_le_bytes());
        }
        let w = width(self.dict.len());
        buf.push(w);
        hybrid(&mut buf, &self.keys, w);
        let page = Page::DataPage {
            buf: compress(&mut self.zstd, &buf)?,
            num_values: self.rows as u32,
            encoding: Encoding::RLE_DICTIONARY,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let page = CompressedPage::new(page, buf.len());
        self.pages.push((page, self.rows, self.bytes));
        self.defs.clear();
        self.keys.clear();
        self.rows = 0;
        self.bytes = 0;
        Ok(())
    }

    /// The chunk's bytes (dictionary page first) and what the row group needs to append
    /// them (`SerializedRowGroupWriter::append_column`).
    pub(crate) fn close(mut self) -> PResult<(Bytes, ColumnCloseResult)> {
        self.end_page()?;
        // PLAIN: each value's length (4 bytes, little-endian), then its bytes.
        let mut plain = Vec::new();
        for v in self.dict.iter() {
            plain.extend_from_slice(&(v.len() as u32).to_le_bytes());
            plain.extend_from_slice(v.as_bytes());
        }
        let dict = Page::DictionaryPage {
            buf: compress(&mut self.zstd, &plain)?,
            num_values: self.dict.len() as u32,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        };
        let mut out = TrackedWrite::new(Vec::new());
        let mut w = SerializedPageWriter::new(&mut out);
        let spec = w.write_page(CompressedPage::new(dict, plain.len()))?;
        let mut compressed = spec.compressed_size as i64;
        let mut uncompressed = spec.uncompressed_size as i64;
        let mut written = spec.bytes_written;
        let mut offsets = OffsetIndexBuilder::new();
        let mut first = None;
        let data_pages = self.pages.len() as i32;
        for (page, rows, bytes) in self.pages {
            let spec = w.write_page(page)?;
            first.get_or_insert(spec.offset as i64);
            offsets.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            offsets.append_row_count(rows as i64);
            offsets.append_unencoded_byte_array_data_bytes(Some(bytes));
            compressed += spec.compressed_size as i64;
            uncompressed += spec.uncompressed_size as i64;
            written += spec.bytes_written;
        }
        w.close()?;
        let buf = Bytes::from(out.into_inner()?);
        let mut stats = vec![PageEncodingStats {
            page_type: PageType::DICTIONARY_PAGE,
            encoding: Encoding::PLAIN,
            count: 1,
        }];
        if data_pages > 0 {
            stats.push(PageEncodingStats {
                page_type: PageType::DATA_PAGE,
                encoding: Encoding::RLE_DICTIONARY,
                count: data_pages,
            });
        }
        let encodings = [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY];
        let metadata = ColumnChunkMetaData::builder(self.spec.descr.clone())
            .set_compression(self.spec.compression)
            .set_encodings_mask(EncodingMask::new_from_encodings(encodings.iter()))
            .set_page_encoding_stats(stats)
            .set_total_compressed_size(compressed)
            .set_total_uncompressed_size(uncompressed)
            .set_num_values(self.total_rows as i64)
            .set_data_page_offset(first.unwrap_or(buf.len() as i64))
            .set_dictionary_page_offset(Some(0))
            .build()?;
        let close = ColumnCloseResult {
            bytes_written: written,
            rows_written: self.total_rows,
            metadata,
            bloom_filter: None,
            column_index: None,
            offset_index: Some(offsets.build()),
        };
        Ok((buf, close))
    }
}

/// Compresses a page's bytes at the column's zstd level.
fn compress(zstd: &mut zstd::bulk::Compressor<'static>, data: &[u8]) -> PResult<Bytes> {
    zstd.compress(data).map(Bytes::from).map_err(external)
}

/// Zstd's errors, as the Parquet errors of the rest of the writer.
fn external(e: std::io::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

/// A batch's column of a type this writer was not set up for (`Spec::new`).
fn mismatch(a: &ArrayRef) -> ParquetError {
    ParquetError::General(format!(
        "a string column's chunk got a column of {}",
        a.data_type()
    ))
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    use parquet::basic::{Encoding, PageType};
    use parquet::file::metadata::PageIndexPolicy;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use crate::dict::{labels, DictBuilder};
    use crate::rows::Interner;
    use crate::schema::CPU_OPS;
    use crate::writer::{Cols, TableWriter, ROW_GROUP_ROWS};

    /// The string columns of `cpu_ops` (the first two cannot be null).
    const STRINGS: [&str; 6] = [
        "category",
        "name",
        "input_dims",
        "input_types",
        "concrete_inputs",
        "input_strides",
    ];

    /// A small xorshift: the cases are the same on every run.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// One string column's rows: runs of equal values (long and short), drawn from
    /// `distinct` strings of varied lengths, with nulls at `null_pct` % where allowed.
    fn column(rng: &mut Rng, rows: usize, distinct: u64, null_pct: u64) -> Vec<Option<String>> {
        let mut out = Vec::with_capacity(rows);
        while out.len() < rows {
            let run = [1, 1, 2, 3, 7, 8, 9, 15, 16, 40, 300][rng.below(11) as usize];
            let v = (rng.below(100) >= null_pct).then(|| {
                let k = rng.below(distinct);
                format!("{k}:{}", "x".repeat((k % 23) as usize))
            });
            out.extend(std::iter::repeat_n(v, run.min(rows - out.len())));
        }
        out
    }

    /// A `cpu_ops` batch whose string columns hold `cols`, as dictionaries built the way the
    /// sinks build them (`DictBuilder`), or as plain strings where `plain`.
    fn batch(cols: &[Vec<Option<String>>], at: usize, n: usize, plain: bool) -> RecordBatch {
        let mut strings = Interner::default();
        let mut b = Cols::new(&CPU_OPS);
        for name in CPU_OPS.columns.iter().map(|c| c.name) {
            let Some(i) = STRINGS.iter().position(|&s| s == name) else {
                b.i64(name, (at..at + n).map(|r| r as i64));
                continue;
            };
            let rows = &cols[i][at..at + n];
            if plain {
                b.opt_str(name, rows.iter().map(|s| s.as_deref()));
            } else if i == 0 {
                let leaked = rows.iter().map(|s| s.clone().map(|s| &*s.leak()));
                b.push(name, labels(leaked.collect::<Vec<_>>().into_iter()));
            } else {
                let ids: Vec<Option<u32>> = rows
                    .iter()
                    .map(|s| s.as_deref().map(|s| strings.id(s)))
                    .collect();
                let a = DictBuilder::default().build(&strings, ids.into_iter());
                b.push(name, a);
            }
        }
        b.finish()
    }

    /// Each string column read back from `path`, through arrow-rs' reader (with the offset
    /// index when `page_index`: it then finds the pages by their locations).
    fn read(path: &std::path::Path, page_index: bool) -> Vec<Vec<Option<String>>> {
        let policy = match page_index {
            true => PageIndexPolicy::Required,
            false => PageIndexPolicy::Skip,
        };
        let opts = ArrowReaderOptions::new().with_offset_index_policy(policy);
        let f = File::open(path).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new_with_options(f, opts).unwrap();
        let mut cols = vec![Vec::new(); STRINGS.len()];
        for b in r.build().unwrap() {
            let b = b.unwrap();
            for (i, name) in STRINGS.iter().enumerate() {
                let a: ArrayRef = b.column_by_name(name).unwrap().clone();
                let a = a
                    .as_any()
                    .downcast_ref::<arrow_array::StringArray>()
                    .unwrap();
                cols[i].extend(a.iter().map(|s| s.map(str::to_string)));
            }
        }
        cols
    }

    /// Rows written in batches of every size (empty, one row, across row groups), as
    /// dictionaries and as plain strings, with dictionaries from one value (indices of no
    /// bits) to 70,000 values (17 bits), runs from 1 to 300 rows and every share of nulls,
    /// read back the same by arrow-rs' reader, with and without the offset index.
    #[test]
    fn every_row_reads_back_as_written() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for (case, (distinct, null_pct)) in
            [(1, 0), (2, 30), (255, 10), (257, 0), (70_000, 50), (3, 100)]
                .into_iter()
                .enumerate()
        {
            let rows = 7 * ROW_GROUP_ROWS + 123;
            let cols: Vec<_> = (0..STRINGS.len())
                .map(|i| {
                    let nulls = if i < 2 { 0 } else { null_pct };
                    let distinct = if STRINGS[i] == "category" {
                        distinct.min(9)
                    } else {
                        distinct
                    };
                    column(&mut rng, rows, distinct, nulls)
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.parquet");
            let mut w = TableWriter::new(&CPU_OPS, path.clone());
            let (mut at, mut k) = (0, 0);
            while at < rows {
                let n =
                    [0, 1, 5, 700, ROW_GROUP_ROWS, 3 * ROW_GROUP_ROWS / 2][k % 6].min(rows - at);
                w.write(&batch(&cols, at, n, case % 2 == 1 && k % 3 == 0))
                    .unwrap();
                at += n;
                k += 1;
            }
            w.close().unwrap();
            assert!(read(&path, false) == cols, "case {case}");
            assert!(
                read(&path, true) == cols,
                "case {case}, with the offset index"
            );
            pages_are_where_the_offset_index_says(&path);
        }
    }

    /// Each string chunk's offset index: its first page where the chunk's metadata puts the
    /// first data page, the pages back to back to the chunk's end, rows adding up.
    fn pages_are_where_the_offset_index_says(path: &std::path::Path) {
        let opts = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Required);
        let f = File::open(path).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new_with_options(f, opts).unwrap();
        let meta = r.metadata();
        for (g, group) in meta.row_groups().iter().enumerate() {
            let index = meta.page_index_for_row_group(g);
            for (c, chunk) in group.columns().iter().enumerate() {
                if !STRINGS.contains(&chunk.column_descr().name()) {
                    continue;
                }
                let pages = &index
                    .offset_index(c)
                    .expect("an offset index")
                    .page_locations;
                let start = chunk.dictionary_page_offset().unwrap();
                assert_eq!(pages[0].offset, chunk.data_page_offset());
                assert_eq!(pages[0].first_row_index, 0);
                let ends = pages
                    .iter()
                    .map(|p| p.offset + i64::from(p.compressed_page_size));
                let next = pages[1..].iter().map(|p| p.offset);
                assert!(ends.clone().zip(next).all(|(e, n)| e == n));
                assert_eq!(
                    ends.clone().next_back().unwrap(),
                    start + chunk.compressed_size()
                );
                let firsts = pages.iter().map(|p| p.first_row_index);
                assert!(firsts.clone().zip(firsts.skip(1)).all(|(a, b)| a < b));
                assert!(pages.last().unwrap().first_row_index < group.num_rows());
            }
        }
    }

    /// A key that points at a null value is a null row, as arrow-rs writes it.
    #[test]
    fn a_key_to_a_null_value_is_a_null_row() {
        let rows = 10;
        let mut cols = vec![vec![Some("a".to_string()); rows]; STRINGS.len()];
        let b = batch(&cols, 0, rows, false);
        let keys = Int32Array::from_iter_values((0..rows as i32).map(|i| i % 2));
        let values = StringArray::from(vec![Some("x"), None]);
        let dims = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).unwrap();
        let at = b.schema().index_of(STRINGS[2]).unwrap();
        let mut columns = b.columns().to_vec();
        columns[at] = Arc::new(dims);
        let b = RecordBatch::try_new(b.schema(), columns).unwrap();
        cols[2] = (0..rows)
            .map(|i| (i % 2 == 0).then(|| "x".to_string()))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut w = TableWriter::new(&CPU_OPS, path.clone());
        w.write(&b).unwrap();
        w.close().unwrap();
        assert!(read(&path, false) == cols);
    }

    /// A dictionary past arrow-rs' 1 MiB, where its writer turns to plain pages, stays one
    /// dictionary here; every data page is dictionary-encoded, and reads back.
    #[test]
    fn a_dictionary_past_a_mebibyte_is_kept() {
        let rows = ROW_GROUP_ROWS;
        let long = |i: usize| Some(format!("{i}{}", "y".repeat(2_000)));
        let mut cols = vec![vec![Some("a".to_string()); rows]; STRINGS.len()];
        cols[2] = (0..rows).map(long).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut w = TableWriter::new(&CPU_OPS, path.clone());
        w.write(&batch(&cols, 0, rows, false)).unwrap();
        w.close().unwrap();
        assert!(read(&path, true) == cols);
        let r = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let group = r.get_row_group(0).unwrap();
        let dims = CPU_OPS.columns.iter().position(|c| c.name == STRINGS[2]);
        let pages: Vec<_> = group
            .get_column_page_reader(dims.unwrap())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pages[0].page_type(), PageType::DICTIONARY_PAGE);
        assert!(
            pages[0].buffer().len() > 1 << 20,
            "{}",
            pages[0].buffer().len()
        );
        assert!(pages.len() >= 2);
        assert!(pages[1..]
            .iter()
            .all(|p| p.encoding() == Encoding::RLE_DICTIONARY));
    }
}
