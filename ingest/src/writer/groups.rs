//! Row groups encoded apart from their file, on the pool, and appended to it in order.

use std::sync::Arc;

use arrow_array::RecordBatch;
use rayon::prelude::*;

use super::{Chunk, Column, Columns, PResult, TableWriter, ROW_GROUP_ROWS};
use crate::error::{IngestError, Result};

/// One row group encoded on its own, apart from the file, to be appended to it in order
/// (`TableWriter::append`).
///
/// Why: a file's row groups are independent, so several can be encoded at once on the pool
/// (`kineto::pending::groups`), where `Open` encodes one row group at a time. Its column
/// writers get the same slices of the same batches, in the same order, that `Open::write`
/// gives them, so the file is byte for byte the same.
pub(crate) struct Group {
    cols: Vec<Column>,
    fields: arrow_schema::Fields,
    /// The file's, for errors.
    path: Arc<str>,
    /// Rows encoded so far.
    pub rows: usize,
}

impl Group {
    /// Encodes `batches`, in order, one task per column: each column runs through all the
    /// batches, so no column waits for the slowest one of each batch.
    pub(crate) fn encode(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let fields = &self.fields;
        let cols = self.cols.par_iter_mut().enumerate();
        let res = cols.try_for_each(|(i, w)| {
            let f = &fields[i];
            batches.iter().try_for_each(|b| w.write(f, b.column(i)))
        });
        res.map_err(|source| self.err(source))?;
        self.rows += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
        Ok(())
    }

    /// The encoded column chunks (their last pages compressed in parallel).
    pub(crate) fn close(self) -> Result<Vec<Chunk>> {
        let chunks = self.cols.into_par_iter().map(Column::close);
        let chunks = chunks.collect::<PResult<_>>();
        chunks.map_err(|source| IngestError::Parquet {
            path: self.path.to_string(),
            source,
        })
    }

    fn err(&self, source: parquet::errors::ParquetError) -> IngestError {
        IngestError::Parquet {
            path: self.path.to_string(),
            source,
        }
    }
}

/// Makes row groups of one file to encode apart (`Group`), on any thread.
pub(crate) struct Groups {
    pub(super) columns: Columns,
    pub(super) fields: arrow_schema::Fields,
    pub(super) path: Arc<str>,
}

impl Groups {
    /// An empty row group, the file's `index`th.
    pub(crate) fn group(&self, index: usize) -> Result<Group> {
        let cols = self.columns.writers(index);
        let cols = cols.map_err(|source| IngestError::Parquet {
            path: self.path.to_string(),
            source,
        })?;
        Ok(Group {
            cols,
            fields: self.fields.clone(),
            path: self.path.clone(),
            rows: 0,
        })
    }
}

/// Row groups encoded one after another, each from batches handed in runs (`write`), cut at
/// `ROW_GROUP_ROWS` as `Open::write` cuts them.
#[derive(Default)]
pub(crate) struct Chain {
    group: Option<Group>,
}

impl Chain {
    /// Encodes `batches` into the row group being filled, appending it to `w` once full.
    pub(crate) fn write(&mut self, w: &mut TableWriter, batches: &[RecordBatch]) -> Result<()> {
        let mut run: Vec<RecordBatch> = Vec::new();
        let mut room = ROW_GROUP_ROWS - self.group.as_ref().map_or(0, |g| g.rows);
        for b in batches.iter().filter(|b| b.num_rows() > 0) {
            let mut rest = b.clone();
            while rest.num_rows() > 0 {
                let take = rest.num_rows().min(room);
                run.push(rest.slice(0, take));
                rest = rest.slice(take, rest.num_rows() - take);
                room -= take;
                if room == 0 {
                    self.encode(w, &run)?;
                    run.clear();
                    let full = self.group.take().expect("encoded above");
                    w.append(full)?;
                    room = ROW_GROUP_ROWS;
                }
            }
        }
        if !run.is_empty() {
            self.encode(w, &run)?;
        }
        Ok(())
    }

    fn encode(&mut self, w: &TableWriter, run: &[RecordBatch]) -> Result<()> {
        if self.group.is_none() {
            self.group = Some(w.group()?);
        }
        self.group.as_mut().expect("set above").encode(run)
    }

    /// Appends the last row group, if any rows are left in it.
    pub(crate) fn finish(mut self, w: &mut TableWriter) -> Result<()> {
        match self.group.take() {
            Some(g) => w.append(g),
            None => Ok(()),
        }
    }
}
