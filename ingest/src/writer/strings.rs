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
//! each ended by arrow-rs' limits (its row count, or its estimate of the page's bytes,
//! checked every 1,024 rows of a batch), and an offset index. Once the dictionary reaches the
//! properties' dictionary page size (1 MiB), the rest of the chunk is written in PLAIN pages,
//! as arrow-rs falls back (it checks after each mini-batch of rows, this writer after the
//! value that filled it, and ends a PLAIN page after the value that filled it): a chunk of
//! ever-new long strings holds a bounded dictionary and bounded pages in memory, and no page
//! outgrows Parquet's 2 GiB. With small pages the file is arrow-rs' byte for byte
//! (`writer::tests`); on a real trace a few pages differ in bytes (arrow-rs cuts some pages
//! at other rows, the hybrid encoding's runs, zstd's frames), never in values
//! (docs/PERFORMANCE.md). Columns of any other configuration stay with arrow-rs
//! (`Spec::new`).

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
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
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
    /// The dictionary's PLAIN bytes at which the chunk turns to PLAIN pages.
    dict_bytes: usize,
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
        // What arrow-rs would write otherwise: v2 pages, content-defined page cuts, another
        // fallback encoding than PLAIN, nested levels.
        let ours = **key == DataType::Int32
            && **value == DataType::Utf8
            && descr.max_rep_level() == 0
            && descr.max_def_level() <= 1
            && props.writer_version() == WriterVersion::PARQUET_1_0
            && props.content_defined_chunking().is_none()
            && props.encoding(path).is_none()
            && props.dictionary_enabled(path)
            && props.statistics_enabled(path) == EnabledStatistics::None
            && props.bloom_filter_properties(path).is_none()
            && !props.offset_index_disabled();
        let page_rows = props.column_data_page_row_count_limit(path);
        let page_bytes = props.column_data_page_size_limit(path);
        let dict_bytes = props.column_dictionary_page_size_limit(path);
        ours.then(|| Spec {
            compression,
            level: level.compression_level(),
            page_rows,
            page_bytes,
            dict_bytes,
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
    /// Whether the dictionary is full and the chunk goes on in PLAIN pages.
    plain: bool,
    /// The page being filled: definition levels (nullable columns only), the dictionary
    /// indices of its values (or, once `plain`, the values PLAIN-encoded), its rows and its
    /// values' bytes.
    defs: Vec<u32>,
    keys: Vec<u32>,
    plain_page: Vec<u8>,
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
            plain: false,
            defs: Vec::new(),
            keys: Vec::new(),
            plain_page: Vec::new(),
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
                if !self.plain {
                    self.map.clear();
                    self.map.resize(values.len(), u32::MAX);
                }
                let keys = d.keys().values();
                // A key may be null, or point at a null value: both are a null row.
                let nulls = d.logical_nulls();
                let at = |c: &mut Self, i: usize| {
                    let k = keys[i] as usize;
                    match c.map[k] {
                        u32::MAX => {
                            let at = c.dict.id(values.value(k));
                            c.map[k] = at;
                            at
                        }
                        at => at,
                    }
                };
                self.rows_of(nulls.as_ref(), d.len(), at, |i| {
                    values.value(keys[i] as usize)
                })
            }
            DataType::Utf8 => {
                let s: &StringArray = a.as_string();
                let at = |c: &mut Self, i| c.dict.id(s.value(i));
                self.rows_of(s.nulls(), s.len(), at, |i| s.value(i))
            }
            _ => Err(mismatch(a)),
        }
    }

    /// Adds `len` rows: `at(self, row)` gives a non-null row's dictionary index, `text(row)`
    /// its string (once the chunk is `plain`). Ends the page when it holds the properties'
    /// rows or bytes (checked every `CHECK_ROWS` rows, as arrow-rs checks after each
    /// mini-batch, and after a value that fills a PLAIN page), and turns the chunk to PLAIN
    /// pages after the value that fills the dictionary.
    fn rows_of<'t>(
        &mut self,
        nulls: Option<&NullBuffer>,
        len: usize,
        mut at: impl FnMut(&mut Self, usize) -> u32,
        text: impl Fn(usize) -> &'t str,
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
            // The rows up to `end`, or up to a row that filled the dictionary or (PLAIN) the
            // page: a few long strings must not take either far past its limit.
            let mut r = i;
            while r < end {
                let valid = nulls.is_none_or(|n| n.is_valid(r));
                if self.nullable {
                    self.defs.push(u32::from(valid));
                }
                let row = r;
                r += 1;
                if !valid {
                } else if self.plain {
                    let v = text(row);
                    self.bytes += v.len() as i64;
                    push_plain(&mut self.plain_page, v);
                    if self.plain_page.len() >= self.spec.page_bytes {
                        break;
                    }
                } else {
                    let k = at(self, row);
                    self.bytes += self.dict.byte_len(k) as i64;
                    self.keys.push(k);
                    if k as usize + 1 == self.dict.len() && self.dict_full() {
                        break;
                    }
                }
            }
            self.rows += r - i;
            i = r;
            if self.rows >= self.spec.page_rows || self.page_bytes() >= self.spec.page_bytes {
                self.end_page()?;
            }
            if !self.plain && self.dict_full() {
                self.end_page()?;
                self.plain = true;
                self.map = Vec::new();
            }
        }
        self.total_rows += len as u64;
        Ok(())
    }

    /// Whether the dictionary page, PLAIN (`push_plain`), holds the properties' dictionary
    /// page size.
    fn dict_full(&self) -> bool {
        self.dict.text_len() + 4 * self.dict.len() >= self.spec.dict_bytes
    }

    /// arrow-rs' estimate of the page being filled: its PLAIN values' bytes, or the most its
    /// dictionary indices could take (`RleEncoder::max_buffer_size`: runs of 8 values
    /// bit-packed, each with a header byte) and the index width's byte.
    fn page_bytes(&self) -> usize {
        if self.plain {
            return self.plain_page.len();
        }
        let w = usize::from(width(self.dict.len()));
        let groups = self.keys.len().div_ceil(8);
        1 + (groups * (1 + w)).max(groups * (1 + w.div_ceil(8)))
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
        let encoding = if self.plain {
            buf.extend_from_slice(&self.plain_page);
            Encoding::PLAIN
        } else {
            let w = width(self.dict.len());
            buf.push(w);
            hybrid(&mut buf, &self.keys, w);
            Encoding::RLE_DICTIONARY
        };
        let page = Page::DataPage {
            buf: compress(&mut self.zstd, &buf)?,
            num_values: self.rows as u32,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let page = CompressedPage::new(page, buf.len());
        self.pages.push((page, self.rows, self.bytes));
        self.defs.clear();
        self.keys.clear();
        self.plain_page.clear();
        self.rows = 0;
        self.bytes = 0;
        Ok(())
    }

    /// The chunk's bytes (dictionary page first) and what the row group needs to append
    /// them (`SerializedRowGroupWriter::append_column`).
    pub(crate) fn close(mut self) -> PResult<(Bytes, ColumnCloseResult)> {
        self.end_page()?;
        let mut plain = Vec::with_capacity(self.dict.text_len() + 4 * self.dict.len());
        for v in self.dict.iter() {
            push_plain(&mut plain, v);
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
        // Dictionary-encoded data pages, then (once the dictionary was full) PLAIN ones.
        let mut stats = vec![PageEncodingStats {
            page_type: PageType::DICTIONARY_PAGE,
            encoding: Encoding::PLAIN,
            count: 1,
        }];
        for (page, rows, bytes) in self.pages {
            match stats.last_mut() {
                Some(s) if s.page_type == PageType::DATA_PAGE && s.encoding == page.encoding() => {
                    s.count += 1
                }
                _ => stats.push(PageEncodingStats {
                    page_type: PageType::DATA_PAGE,
                    encoding: page.encoding(),
                    count: 1,
                }),
            }
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

/// Appends `v` PLAIN-encoded: its length (4 bytes, little-endian), then its bytes.
fn push_plain(buf: &mut Vec<u8>, v: &str) {
    buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
    buf.extend_from_slice(v.as_bytes());
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
mod tests;
