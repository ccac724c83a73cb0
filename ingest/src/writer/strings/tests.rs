//! `writer::strings`' chunks read back through arrow-rs' reader.

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
            let n = [0, 1, 5, 700, ROW_GROUP_ROWS, 3 * ROW_GROUP_ROWS / 2][k % 6].min(rows - at);
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

/// The pages of `column` in the first row group of `path`: type, encoding, values (a
/// dictionary page's: its entries), and the dictionary page's uncompressed bytes.
fn pages(path: &std::path::Path, column: &str) -> (Vec<(PageType, Encoding, u32)>, usize) {
    let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let group = r.get_row_group(0).unwrap();
    let at = CPU_OPS.columns.iter().position(|c| c.name == column);
    let pages: Vec<_> = group
        .get_column_page_reader(at.unwrap())
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kinds = pages
        .iter()
        .map(|p| (p.page_type(), p.encoding(), p.num_values()))
        .collect();
    (kinds, pages[0].buffer().len())
}

/// A dictionary that reaches the dictionary page size (1 MiB) turns the rest of the chunk to
/// PLAIN pages: every value reads back, the dictionary ends within one value of the limit
/// (arrow-rs' writer checks after each mini-batch of rows, so its own can run a whole batch
/// past it), and each PLAIN page within one value of the page size (256 bytes in tests).
#[test]
fn a_full_dictionary_turns_the_rest_of_the_chunk_to_plain_pages() {
    let rows = ROW_GROUP_ROWS;
    let mut cols = vec![vec![Some("a".to_string()); rows]; STRINGS.len()];
    // 2,000-byte values, some repeated; and 3,000-byte ones between nulls.
    cols[2] = (0..rows)
        .map(|i| Some(format!("{}{}", i % 900, "y".repeat(2_000))))
        .collect();
    cols[3] = (0..rows)
        .map(|i| (i % 3 > 0).then(|| format!("{i}{}", "z".repeat(3_000))))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let mut w = TableWriter::new(&CPU_OPS, path.clone());
    w.write(&batch(&cols, 0, rows, false)).unwrap();
    w.close().unwrap();
    assert!(read(&path, false) == cols);
    assert!(read(&path, true) == cols);
    pages_are_where_the_offset_index_says(&path);
    for (column, longest) in [(STRINGS[2], 2_003), (STRINGS[3], 3_004)] {
        let (kinds, dict) = pages(&path, column);
        assert_eq!(kinds[0].0, PageType::DICTIONARY_PAGE);
        assert!(
            (1 << 20..(1 << 20) + 4 + longest).contains(&dict),
            "{column}: {dict}"
        );
        let data = &kinds[1..];
        let flips = data.windows(2).filter(|w| w[0].1 != w[1].1).count();
        assert_eq!(data[0].1, Encoding::RLE_DICTIONARY, "{column}");
        assert_eq!(flips, 1, "{column}: dictionary pages, then PLAIN ones");
        let plain = data.iter().filter(|k| k.1 == Encoding::PLAIN);
        assert!(plain.clone().count() > 300, "{column}");
        // One value a page, behind at most one null.
        assert!(plain.clone().all(|k| k.2 <= 2), "{column}");
        let entries = kinds[0].2 as usize;
        assert!((1 << 20) / (4 + longest) <= entries, "{column}: {entries}");
    }
}

/// Properties under which arrow-rs would lay the column out otherwise (v2 pages, another
/// fallback encoding, statistics, another codec) leave it to arrow-rs; per-column limits are
/// the column's own.
#[test]
fn other_properties_leave_the_column_to_arrow_rs() {
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowSchemaConverter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
    use parquet::schema::types::ColumnPath;

    use super::Spec;

    let ty = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let schema = Schema::new(vec![Field::new("s", ty.clone(), true)]);
    let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
    let path = ColumnPath::from("s");
    let base = || {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
            .set_statistics_enabled(EnabledStatistics::None)
    };
    let spec = |p: WriterProperties| Spec::new(&ty, descr.column(0), &p);
    let ours = spec(
        base()
            .set_column_dictionary_page_size_limit(path.clone(), 1000)
            .set_column_data_page_size_limit(path.clone(), 2000)
            .build(),
    )
    .expect("the usual properties");
    assert_eq!((ours.dict_bytes, ours.page_bytes), (1000, 2000));
    for other in [
        base().set_writer_version(WriterVersion::PARQUET_2_0),
        base().set_column_encoding(path.clone(), Encoding::DELTA_LENGTH_BYTE_ARRAY),
        base().set_column_statistics_enabled(path.clone(), EnabledStatistics::Page),
        base().set_compression(Compression::SNAPPY),
        base().set_column_dictionary_enabled(path.clone(), false),
    ] {
        assert!(spec(other.build()).is_none());
    }
    let plain = Field::new("s", DataType::Utf8, true);
    let descr = ArrowSchemaConverter::new()
        .convert(&Schema::new(vec![plain]))
        .unwrap();
    assert!(Spec::new(&DataType::Utf8, descr.column(0), &base().build()).is_none());
}
