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
//! A grouped or whole-table aggregate of one table (the shape `parse` recognises) is answered
//! by polars' streaming engine instead (`pushdown`): SQLite steps through ~1.4 M rows a second
//! and collects the used columns first (20 s and 2 GB for a `GROUP BY` over 31 M rows), polars
//! reads by row group on every core. SQLite still prepares that statement (its errors, its
//! result names) and applies its `ORDER BY … LIMIT` to the aggregated rows; the answer is
//! SQLite's to the value and type (`query_with(…, false)` is the reference).
//!
//! The statement must be one read-only statement: SQLite's `ATTACH` is disabled (the attached
//! limit is 0) and a statement that would write (`VACUUM INTO`, `CREATE TABLE`) is refused
//! before it runs, so a query never writes a file.

mod parse;
mod pushdown;
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

/// Which engine answered a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Polars' streaming engine, from the Parquet files (a grouped or whole-table aggregate
    /// of the recognised shape, `parse`): SQLite's answer without SQLite's row loop.
    Polars,
    /// SQLite over the virtual tables, row by row.
    Sqlite,
}

/// Runs one SQL statement over the dataset at `root`: on polars when it is an aggregate of
/// the recognised shape, else on SQLite.
pub fn query(root: &Path, sql: &str) -> Result<DataFrame, SqlError> {
    query_with(root, sql, true).map(|(df, _)| df)
}

/// The engine a statement goes to, and why, without reading the dataset. A pushed-down sum
/// that could overflow still goes back to SQLite when it runs.
pub fn explain(sql: &str) -> (Engine, &'static str) {
    match parse::aggregate(sql) {
        Some(_) => (
            Engine::Polars,
            "an aggregate over one table of the pushed-down shape",
        ),
        None => (
            Engine::Sqlite,
            "not an aggregate of the pushed-down shape (see `aorta sql --help`)",
        ),
    }
}

/// Runs one SQL statement; with `pushdown` false always on SQLite (the reference the polars
/// path must equal). Returns the result and the engine that answered.
pub fn query_with(root: &Path, sql: &str, pushdown: bool) -> Result<(DataFrame, Engine), SqlError> {
    // The dataset is checked (and a damaged one refused) before SQLite sees the query.
    dataset::check(root)?;
    let failed = |e: rusqlite::Error| SqlError::Query {
        root: root.to_path_buf(),
        msg: one_line(&e.to_string()),
    };
    let conn = vtab::connect(root).map_err(failed)?;
    // SQLite prepares every statement, a pushed-down one too: its errors, its read-only
    // check and its result column names stay the answer's.
    let mut stmt = conn.prepare(sql).map_err(failed)?;
    if !stmt.readonly() {
        return Err(SqlError::NotReadOnly {
            root: root.to_path_buf(),
        });
    }
    let names = unique_names(stmt.column_names().collect());
    let pushed = match parse::aggregate(sql).filter(|_| pushdown) {
        // A polars error may span lines (its context); errors are one line.
        Some(q) => pushdown::rows(root, &q)
            .map_err(|e| SqlError::Query {
                root: root.to_path_buf(),
                msg: one_line(&e.to_string()),
            })?
            .map(|rows| (q, rows)),
        None => None,
    };
    let Some((q, rows)) = pushed else {
        let rows = stmt.query([]).map_err(failed)?;
        return frame(root, names, rows).map(|df| (df, Engine::Sqlite));
    };
    drop(stmt);
    if q.tail.is_empty() {
        let mut cols: Vec<Values> = names.iter().map(|_| Values::default()).collect();
        for row in &rows {
            for (c, v) in cols.iter_mut().zip(row) {
                c.push(ValueRef::from(v));
            }
        }
        return build(root, names, cols).map(|df| (df, Engine::Polars));
    }
    // ORDER BY and LIMIT run on SQLite over the aggregated rows, fed in GROUP BY order.
    let width = names.len();
    let cols: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE aorta_pushed({})",
        cols.join(", ")
    ))
    .map_err(failed)?;
    {
        let marks = vec!["?"; width].join(", ");
        let mut insert = conn
            .prepare(&format!("INSERT INTO aorta_pushed VALUES ({marks})"))
            .map_err(failed)?;
        for row in &rows {
            insert
                .execute(rusqlite::params_from_iter(row))
                .map_err(failed)?;
        }
    }
    let mut tail = conn
        .prepare(&format!("SELECT * FROM aorta_pushed{}", q.tail))
        .map_err(failed)?;
    let rows = tail.query([]).map_err(failed)?;
    frame(root, names, rows).map(|df| (df, Engine::Polars))
}

/// The rows SQLite returns, as a frame with `names` as its column names.
fn frame(
    root: &Path,
    names: Vec<String>,
    mut rows: rusqlite::Rows<'_>,
) -> Result<DataFrame, SqlError> {
    let failed = |e: rusqlite::Error| SqlError::Query {
        root: root.to_path_buf(),
        msg: one_line(&e.to_string()),
    };
    let mut cols: Vec<Values> = names.iter().map(|_| Values::default()).collect();
    while let Some(row) = rows.next().map_err(failed)? {
        for (i, c) in cols.iter_mut().enumerate() {
            c.push(row.get_ref(i).map_err(failed)?);
        }
    }
    build(root, names, cols)
}

fn build(root: &Path, names: Vec<String>, cols: Vec<Values>) -> Result<DataFrame, SqlError> {
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
