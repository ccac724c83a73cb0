//! `aorta sql`: one SQL statement over a dataset, run by SQLite over virtual tables that read
//! the dataset's Parquet.
//!
//! Every table of the schema (ingested and derived) is a virtual table under its own name,
//! with its partition columns (`run`, `rank`) as columns, read through `dataset::scan`, so a
//! query sees what every other command reads (part checksums verified first; a table no
//! command has written yet is empty, with its documented columns). A table is read only when
//! the query reads it, and then only the columns the query uses (SQLite's `colUsed`); an
//! equality on `run` or `rank` reaches the lazy scan, which reads only those partitions.
//!
//! Why SQLite and not polars SQL: SQLite is linked already (bundled, for the Nsight Systems
//! and rocpd readers), while polars' `sql` feature turns on 25 more polars features that
//! rebuild the whole polars stack (~1,375 CPU s measured, docs/PERFORMANCE.md) on every cold
//! build, CI's included. The dialect is therefore SQLite's.
//!
//! The statement must be one read-only statement: SQLite's `ATTACH` is disabled (the attached
//! limit is 0) and a statement that would write (`VACUUM INTO`, `CREATE TABLE`) is refused
//! before it runs, so a query never writes a file.

mod vtab;

use std::path::{Path, PathBuf};

use polars::prelude::*;
use rusqlite::types::ValueRef;

use crate::dataset::{self, DatasetError};

/// What can go wrong running a query.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The dataset cannot be read.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// SQLite refused or failed the statement (syntax, unknown column, a table that could
    /// not be read).
    #[error("{root}: query failed: {msg}")]
    Query {
        /// The dataset.
        root: PathBuf,
        /// SQLite's message, on one line.
        msg: String,
    },
    /// The statement would change something (only reading statements run).
    #[error("{root}: query refused: only one read-only statement (SELECT, WITH …) runs here")]
    NotReadOnly {
        /// The dataset.
        root: PathBuf,
    },
}

/// Runs one SQL statement over the dataset at `root`.
pub fn query(root: &Path, sql: &str) -> Result<DataFrame, SqlError> {
    // The dataset is checked (and a damaged one refused) before SQLite sees the query.
    dataset::check(root)?;
    let failed = |e: rusqlite::Error| SqlError::Query {
        root: root.to_path_buf(),
        msg: one_line(&e.to_string()),
    };
    let conn = vtab::connect(root).map_err(failed)?;
    let mut stmt = conn.prepare(sql).map_err(failed)?;
    if !stmt.readonly() {
        return Err(SqlError::NotReadOnly {
            root: root.to_path_buf(),
        });
    }
    let names = unique_names(stmt.column_names().collect());
    let mut cols: Vec<Values> = names.iter().map(|_| Values::default()).collect();
    let mut rows = stmt.query([]).map_err(failed)?;
    while let Some(row) = rows.next().map_err(failed)? {
        for (i, c) in cols.iter_mut().enumerate() {
            c.push(row.get_ref(i).map_err(failed)?);
        }
    }
    let columns: Vec<Column> = names
        .into_iter()
        .zip(cols)
        .map(|(n, v)| v.into_column(n))
        .collect();
    DataFrame::new_infer_height(columns).map_err(|e| SqlError::Query {
        root: root.to_path_buf(),
        msg: e.to_string(),
    })
}

/// SQLite's messages may span lines (a query echoed back); errors are one line.
fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Result column names, a repeated one suffixed (`run`, `run_2`): a frame's names are unique.
fn unique_names(names: Vec<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        let mut name = n.to_string();
        let mut k = 2;
        while out.contains(&name) {
            name = format!("{n}_{k}");
            k += 1;
        }
        out.push(name);
    }
    out
}

/// One result column as SQLite returned it: integers until a real or a text appears.
#[derive(Default)]
struct Values {
    ints: Vec<Option<i64>>,
    floats: Option<Vec<Option<f64>>>,
    texts: Option<Vec<Option<String>>>,
}

impl Values {
    fn push(&mut self, v: ValueRef<'_>) {
        if let Some(t) = &mut self.texts {
            t.push(text(v));
            return;
        }
        match v {
            ValueRef::Null => self.push_number(None, None),
            ValueRef::Integer(i) => self.push_number(Some(i), Some(i as f64)),
            ValueRef::Real(f) if self.floats.is_some() => self.push_number(None, Some(f)),
            ValueRef::Real(f) => {
                let floats = self.ints.iter().map(|i| i.map(|i| i as f64)).collect();
                self.floats = Some(floats);
                self.push_number(None, Some(f));
            }
            ValueRef::Text(_) | ValueRef::Blob(_) => {
                let mut texts: Vec<Option<String>> = match &self.floats {
                    Some(f) => f.iter().map(|f| f.map(|f| f.to_string())).collect(),
                    None => self.ints.iter().map(|i| i.map(|i| i.to_string())).collect(),
                };
                texts.push(text(v));
                self.texts = Some(texts);
            }
        }
    }

    fn push_number(&mut self, int: Option<i64>, float: Option<f64>) {
        match &mut self.floats {
            Some(f) => f.push(float),
            None => self.ints.push(int),
        }
    }

    fn into_column(self, name: String) -> Column {
        match (self.texts, self.floats) {
            (Some(t), _) => Column::new(name.into(), t),
            (None, Some(f)) => Column::new(name.into(), f),
            (None, None) => Column::new(name.into(), self.ints),
        }
    }
}

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_columns_take_the_widest_type_seen() {
        let mut v = Values::default();
        for x in [ValueRef::Integer(3), ValueRef::Null, ValueRef::Real(0.5)] {
            v.push(x);
        }
        let c = v.into_column("x".into());
        let f: Vec<Option<f64>> = c.f64().unwrap().iter().collect();
        assert_eq!(f, [Some(3.0), None, Some(0.5)]);
        let mut v = Values::default();
        for x in [ValueRef::Integer(3), ValueRef::Text(b"a")] {
            v.push(x);
        }
        let c = v.into_column("x".into());
        let s: Vec<Option<&str>> = c.str().unwrap().iter().collect();
        assert_eq!(s, [Some("3"), Some("a")]);
        assert_eq!(unique_names(vec!["run", "run", "n"]), ["run", "run_2", "n"]);
    }
}
