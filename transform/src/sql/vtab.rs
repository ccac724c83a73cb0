//! The dataset's tables as SQLite virtual tables (`rusqlite::vtab`).
//!
//! SQLite plans a statement by asking each table which columns it uses (`colUsed`) and which
//! equalities it has (`best_index`); the cursor's `filter` then collects exactly that
//! projection, restricted to the partitions an equality on `run` or `rank` names, through
//! `dataset::scan`, and serves its rows. The equalities are not marked as consumed: SQLite
//! still checks every row, so a value the scan could not use (`rank = '0'`, a text) costs
//! speed, never a wrong answer.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{c_int, CStr, CString};
use std::path::{Path, PathBuf};

use aorta_ingest::schema::{self, ColType, Column as SchemaColumn, Table, PARTITION_COLUMNS};
use polars::prelude::*;
use rusqlite::limits::Limit;
use rusqlite::types::{Null, ValueRef};
use rusqlite::vtab::{
    Context, CreateVTab, Filters, IndexConstraintOp, IndexInfo, Module, VTab, VTabConnection,
    VTabCursor, VTabKind,
};
use rusqlite::{ffi, Connection, Error};

use crate::dataset;

const MODULE: Module<DatasetTab> = Module::read_only_module();

/// `idx_num` bits: which partition equalities reach the scan (as arguments, in this order).
const RUN: c_int = 1;
const RANK: c_int = 2;

/// An in-memory connection where every table of the schema is a virtual table over the
/// dataset at `root`, and `ATTACH` is impossible (a statement cannot reach a file).
pub(super) fn connect(root: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_in_memory()?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.create_module(c"aorta", &MODULE, Some(root.to_path_buf()))?;
    for t in schema::TABLES.iter().chain(schema::DERIVED_TABLES) {
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE temp.\"{}\" USING aorta",
            t.name
        ))?;
    }
    Ok(conn)
}

/// A table's columns as a query sees them: the partition columns, then the file's.
pub(super) fn columns(t: &'static Table) -> impl Iterator<Item = &'static SchemaColumn> {
    PARTITION_COLUMNS.iter().chain(t.columns)
}

/// The `CREATE TABLE` SQLite declares the virtual table with.
fn declaration(t: &'static Table) -> String {
    let cols: Vec<String> = columns(t)
        .map(|c| {
            let ty = match c.ty {
                ColType::Int64 => "INTEGER",
                ColType::Float64 => "REAL",
                ColType::Utf8 => "TEXT",
            };
            format!("\"{}\" {ty}", c.name)
        })
        .collect();
    format!("CREATE TABLE x({})", cols.join(", "))
}

/// One table of the dataset.
#[repr(C)]
struct DatasetTab {
    /// SQLite's part of the table; must come first.
    base: ffi::sqlite3_vtab,
    root: PathBuf,
    table: &'static Table,
    /// The last frame collected, and what it was collected for (`ScanKey`).
    last: RefCell<Option<(ScanKey, DataFrame)>>,
}

// SAFETY: `DatasetTab` is `#[repr(C)]` with `sqlite3_vtab` as its first field, the layout
// rusqlite's module glue casts to and from.
unsafe impl<'vtab> VTab<'vtab> for DatasetTab {
    type Aux = PathBuf;
    type Cursor = DatasetCursor<'vtab>;

    fn connect(
        _db: &mut VTabConnection,
        aux: Option<&PathBuf>,
        _module_name: &[u8],
        _database_name: &[u8],
        table_name: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, Self)> {
        let name = String::from_utf8_lossy(table_name);
        let table = schema::table(&name)
            .ok_or_else(|| Error::ModuleError(format!("no table `{name}` in the schema")))?;
        let root = aux
            .cloned()
            .ok_or_else(|| Error::ModuleError("no dataset".into()))?;
        let decl = CString::new(declaration(table))
            .map_err(|e| Error::ModuleError(format!("table `{name}`: {e}")))?;
        let tab = DatasetTab {
            base: ffi::sqlite3_vtab::default(),
            root,
            table,
            last: RefCell::new(None),
        };
        Ok((Cow::Owned(decl), tab))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        let eq: Vec<(usize, c_int)> = info
            .constraints()
            .enumerate()
            .filter(|(_, c)| {
                c.is_usable() && c.operator() == IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ
            })
            .map(|(i, c)| (i, c.column()))
            .collect();
        let (mut plan, mut argv) = (0, 0);
        for (bit, column) in [(RUN, 0), (RANK, 1)] {
            if let Some(&(i, _)) = eq.iter().find(|c| c.1 == column) {
                plan |= bit;
                argv += 1;
                let mut usage = info.constraint_usage(i);
                usage.set_argv_index(argv);
                usage.set_omit(false);
            }
        }
        info.set_idx_num(plan);
        info.set_idx_str(&info.col_used().to_string());
        info.set_estimated_cost(1e6 / f64::from(1 + 10 * argv));
        Ok(true)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<DatasetCursor<'vtab>> {
        Ok(DatasetCursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            tab: self,
            cols: Vec::new(),
            row: 0,
            rows: 0,
        })
    }
}

impl CreateVTab<'_> for DatasetTab {
    const KIND: VTabKind = VTabKind::Default;
}

/// One column's values, read by row.
enum Values {
    Int(Int64Chunked),
    Float(Float64Chunked),
    Str(StringChunked),
}

/// A scan of one table: the columns the statement uses, collected by `filter`.
#[repr(C)]
struct DatasetCursor<'vtab> {
    /// SQLite's part of the cursor; must come first.
    base: ffi::sqlite3_vtab_cursor,
    tab: &'vtab DatasetTab,
    /// By column index; `None` for the columns the statement does not use.
    cols: Vec<Option<Values>>,
    row: usize,
    rows: usize,
}

/// What one `filter` collects: the columns used and the partition equalities the scan can
/// take. A nested-loop join calls `filter` on its inner table once per outer row, mostly
/// with the same key: the table keeps its last frame (`DatasetTab::last`) and reuses it.
#[derive(Clone, PartialEq)]
struct ScanKey {
    mask: u64,
    run: Option<String>,
    rank: Option<i64>,
}

impl ScanKey {
    fn of(plan: c_int, mask: u64, args: &Filters<'_>) -> ScanKey {
        let mut key = ScanKey {
            mask,
            run: None,
            rank: None,
        };
        let mut values = args.iter();
        for bit in [RUN, RANK] {
            if plan & bit == 0 {
                continue;
            }
            match values.next() {
                Some(ValueRef::Text(v)) if bit == RUN => {
                    key.run = Some(String::from_utf8_lossy(v).into_owned());
                }
                Some(ValueRef::Integer(v)) if bit == RANK => key.rank = Some(v),
                _ => {}
            }
        }
        key
    }
}

impl DatasetTab {
    /// The frame `key` names: the used columns (or `rank` alone, for `COUNT(*)`, which uses
    /// none) of the partitions its equalities name, one chunk per column.
    fn collect(&self, key: &ScanKey) -> rusqlite::Result<DataFrame> {
        if let Some((k, df)) = &*self.last.borrow() {
            if k == key {
                return Ok(df.clone());
            }
        }
        let t = self.table;
        let mut lf = dataset::scan(&self.root, t.name).map_err(module_error)?;
        if let Some(run) = &key.run {
            lf = lf.filter(col("run").eq(lit(run.clone())));
        }
        if let Some(rank) = key.rank {
            lf = lf.filter(col("rank").eq(lit(rank)));
        }
        let mut read: Vec<Expr> = columns(t)
            .enumerate()
            .filter(|&(i, _)| used(key.mask, i))
            .map(|(_, c)| col(c.name))
            .collect();
        if read.is_empty() {
            read.push(col("rank"));
        }
        let mut df = lf
            .select(read)
            .collect()
            .map_err(|e| module_error(format!("{}: {e}", self.root.join(t.name).display())))?;
        df.rechunk_mut();
        *self.last.borrow_mut() = Some((key.clone(), df.clone()));
        Ok(df)
    }
}

fn module_error(e: impl std::fmt::Display) -> Error {
    Error::ModuleError(e.to_string())
}

/// Whether column `i` is in SQLite's `colUsed` mask (bit 63 stands for 63 and beyond).
fn used(mask: u64, i: usize) -> bool {
    mask >> i.min(63) & 1 == 1
}

// SAFETY: `DatasetCursor` is `#[repr(C)]` with `sqlite3_vtab_cursor` as its first field, the
// layout rusqlite's module glue casts to and from.
unsafe impl VTabCursor for DatasetCursor<'_> {
    fn filter(
        &mut self,
        plan: c_int,
        mask: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        let mask: u64 = mask.and_then(|m| m.parse().ok()).unwrap_or(u64::MAX);
        let t = self.tab.table;
        let df = self.tab.collect(&ScanKey::of(plan, mask, args))?;
        self.cols = columns(t)
            .enumerate()
            .map(|(i, c)| used(mask, i).then(|| values(&df, c)).flatten())
            .collect();
        (self.row, self.rows) = (0, df.height());
        Ok(())
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.row += 1;
        Ok(())
    }

    fn eof(&self) -> bool {
        self.row >= self.rows
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let r = self.row;
        match usize::try_from(i)
            .ok()
            .and_then(|i| self.cols.get(i)?.as_ref())
        {
            Some(Values::Int(c)) => ctx.set_result(c.get(r)),
            Some(Values::Float(c)) => ctx.set_result(c.get(r)),
            Some(Values::Str(c)) => ctx.set_result(c.get(r)),
            None => ctx.set_result(Null),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.row as i64)
    }
}

/// A collected column as the values `column` serves.
fn values(df: &DataFrame, c: &SchemaColumn) -> Option<Values> {
    let col = df.column(c.name).ok()?;
    Some(match c.ty {
        ColType::Int64 => Values::Int(col.i64().ok()?.clone()),
        ColType::Float64 => Values::Float(col.f64().ok()?.clone()),
        ColType::Utf8 => Values::Str(col.str().ok()?.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_used_mask_reads_bit_63_as_every_later_column() {
        assert!(used(0b101, 0) && !used(0b101, 1) && used(0b101, 2));
        assert!(used(1 << 63, 63) && used(1 << 63, 70) && !used(1 << 63, 62));
        assert_eq!(
            declaration(schema::table("steps").unwrap())
                .split(", ")
                .next(),
            Some("CREATE TABLE x(\"run\" TEXT")
        );
    }
}
