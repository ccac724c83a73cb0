//! A row group's column writers: arrow-rs' for most columns, `strings` for the string columns
//! that arrive as dictionaries, and their encoded chunks, appended in schema order.

use std::fs::File;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::{Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};

use super::{strings, PResult};

/// What makes a file's row groups' column writers: arrow-rs' factory, and the spec of each
/// column that `strings` writes instead.
#[derive(Clone)]
pub(crate) struct Columns {
    factory: Arc<ArrowRowGroupWriterFactory>,
    strings: Arc<[Option<strings::Spec>]>,
}

impl Columns {
    pub(super) fn new(
        factory: ArrowRowGroupWriterFactory,
        schema: &Schema,
        file: &SerializedFileWriter<File>,
    ) -> Columns {
        let descr = file.schema_descr();
        let props = file.properties();
        let fields = schema.fields().iter().enumerate();
        let strings =
            fields.map(|(i, f)| strings::Spec::new(f.data_type(), descr.column(i), props));
        Columns {
            factory: Arc::new(factory),
            strings: strings.collect(),
        }
    }

    /// The writers of row group `index`, one a column.
    pub(super) fn writers(&self, index: usize) -> PResult<Vec<Column>> {
        let arrow = self.factory.create_column_writers(index)?;
        let cols = arrow.into_iter().zip(self.strings.iter());
        cols.map(|(w, s)| match s {
            Some(s) => strings::StringChunk::new(s).map(|w| Column::Strings(Box::new(w))),
            None => Ok(Column::Arrow(Box::new(w))),
        })
        .collect()
    }
}

/// A row group's writer of one column.
pub(crate) enum Column {
    Arrow(Box<ArrowColumnWriter>),
    /// A column of dictionary strings (`strings`).
    Strings(Box<strings::StringChunk>),
}

impl Column {
    /// Encodes one column of a batch.
    pub(super) fn write(&mut self, field: &Field, column: &ArrayRef) -> PResult<()> {
        match self {
            Column::Arrow(w) => {
                for leaf in compute_leaves(field, column)? {
                    w.write(&leaf)?;
                }
                Ok(())
            }
            Column::Strings(w) => w.write(column),
        }
    }

    /// The encoded chunk (its last page compressed).
    pub(super) fn close(self) -> PResult<Chunk> {
        match self {
            Column::Arrow(w) => w.close().map(Chunk::Arrow),
            Column::Strings(w) => w.close().map(|(bytes, close)| Chunk::Strings(bytes, close)),
        }
    }
}

/// A column's encoded chunk of a row group, appended to it in schema order.
pub(crate) enum Chunk {
    Arrow(ArrowColumnChunk),
    Strings(Bytes, ColumnCloseResult),
}

impl Chunk {
    pub(super) fn append_to(self, group: &mut SerializedRowGroupWriter<'_, File>) -> PResult<()> {
        match self {
            Chunk::Arrow(c) => c.append_to_row_group(group),
            Chunk::Strings(bytes, close) => group.append_column(&bytes, close),
        }
    }
}
