//! `aorta sql`: polars SQL over a dataset. Every table of the schema (ingested and derived) is
//! registered under its own name with its partition columns (`run`, `rank`) as columns, read
//! through `dataset::scan`, so a query sees what every other command reads (part checksums
//! verified first; a table no command has written yet is empty, with its documented
//! columns). Queries run on the lazy engine: a filter on `run` prunes partitions.

use std::path::{Path, PathBuf};

use aorta_ingest::schema;
use polars::prelude::*;
use polars::sql::SQLContext;

use crate::dataset::{self, DatasetError};

/// Why a query gave no frame.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The dataset, or one of its tables, could not be opened.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// Polars rejected the statement (a parse error, an unknown table or column) or failed
    /// running it.
    #[error("{root}: query failed: {source}")]
    Query {
        /// The dataset's root.
        root: PathBuf,
        /// Polars' error.
        source: PolarsError,
    },
}

/// The names a query can use: every table of the schema.
pub(crate) fn table_names() -> Vec<&'static str> {
    schema::TABLES
        .iter()
        .chain(schema::DERIVED_TABLES)
        .map(|t| t.name)
        .collect()
}

/// Runs one SQL statement over the dataset at `root`.
pub fn query(root: &Path, sql: &str) -> Result<DataFrame, SqlError> {
    let ctx = SQLContext::new();
    for name in table_names() {
        ctx.register(name, dataset::scan(root, name)?);
    }
    let failed = |source| SqlError::Query {
        root: root.to_path_buf(),
        source,
    };
    let mut ctx = ctx;
    ctx.execute(sql).map_err(failed)?.collect().map_err(failed)
}
