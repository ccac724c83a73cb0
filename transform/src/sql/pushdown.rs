//! A recognised aggregate (`parse::Aggregate`) answered by polars' streaming engine from the
//! Parquet files, with SQLite's answer: the same values, the same types, the same row order.
//!
//! Why: SQLite steps through a table one virtual-table row at a time (~0.7 µs a row), and the
//! virtual table first collects the columns a statement uses into one frame, so a whole-table
//! `GROUP BY` over 31 M rows took 20 s and 2 GB (docs/PERFORMANCE.md). Polars reads the same
//! columns by row group, in parallel, and keeps only the groups.
//!
//! What makes the answer SQLite's:
//! - `SUM` of integers is an integer, exact, `NULL` over no values; `TOTAL` is its float (0.0
//!   over none); `AVG` is the integer sum divided by the count as doubles (SQLite's
//!   `avgFinalize`); `COUNT` counts non-null values. A sum that could overflow at any point,
//!   in any order (count × largest magnitude > `i64::MAX`), and `col ± col` that could overflow
//!   for some row (from the operands' extremes per group) are not answered here: the statement
//!   runs on SQLite, which then gives its own answer (a float, or its "integer overflow").
//! - Groups come out in SQLite's `GROUP BY` order (keys ascending, `NULL` first, text by
//!   bytes); the `ORDER BY … LIMIT` tail then runs on SQLite over these rows.
//! - Real columns are never pushed down (SQLite reads a NaN as `NULL`), nor are comparisons
//!   that need an affinity conversion (`parse` checks the literal's type).

use std::cmp::Ordering;
use std::path::Path;

use aorta_ingest::schema::ColType;
use polars::prelude::*;
use rusqlite::types::Value;

use super::parse::{Aggregate, Arg, Cond, Func, Item, Lit, Op, Test};
use crate::dataset::{self, DatasetError};

/// The result rows, or `None` when a guard says SQLite must answer (a possible overflow).
pub(super) fn rows(root: &Path, q: &Aggregate) -> Result<Option<Vec<Vec<Value>>>, DatasetError> {
    let mut lf = dataset::scan(root, q.table.name)?;
    if let Some(pred) = q.filter.iter().map(predicate).reduce(Expr::and) {
        lf = lf.filter(pred);
    }
    let mut aggs: Vec<Expr> = Vec::new();
    for (i, item) in q.items.iter().enumerate() {
        if let Item::Agg(func, arg) = item {
            aggs.extend(exprs(i, *func, *arg));
        }
    }
    let lf = if q.keys.is_empty() {
        lf.select(aggs)
    } else {
        let keys: Vec<Expr> = q.keys.iter().map(|k| col(k.name)).collect();
        lf.group_by(keys).agg(aggs)
    };
    let df = lf
        .collect_with_engine(Engine::Streaming)
        .map(|r| r.unwrap_single())
        .map_err(|source| DatasetError::Polars {
            path: root.join(q.table.name),
            source,
        })?;
    let get = |name: &str| {
        df.column(name).map_err(|source| DatasetError::Polars {
            path: root.join(q.table.name),
            source,
        })
    };
    let mut cols: Vec<Vec<Value>> = Vec::with_capacity(q.items.len());
    for (i, item) in q.items.iter().enumerate() {
        let values = match item {
            Item::Key(c) => values(get(c.name)?, c.ty),
            Item::Agg(func, arg) => {
                match finish(&df, i, *func, *arg).map_err(|source| DatasetError::Polars {
                    path: root.join(q.table.name),
                    source,
                })? {
                    Some(v) => v,
                    None => return Ok(None),
                }
            }
        };
        cols.push(values);
    }
    let mut rows: Vec<Vec<Value>> = (0..df.height())
        .map(|r| cols.iter().map(|c| c[r].clone()).collect())
        .collect();
    // SQLite's GROUP BY order: by the keys, as they are written in GROUP BY.
    let key_at: Vec<Vec<Value>> = match q.keys.is_empty() {
        true => Vec::new(),
        false => q
            .keys
            .iter()
            .map(|k| Ok(values(get(k.name)?, k.ty)))
            .collect::<Result<_, DatasetError>>()?,
    };
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        key_at
            .iter()
            .map(|k| compare(&k[a], &k[b]))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let mut sorted = Vec::with_capacity(rows.len());
    for r in order {
        sorted.push(std::mem::take(&mut rows[r]));
    }
    Ok(Some(sorted))
}

/// SQLite's order of two values of one column (BINARY collation): `NULL` first, numbers by
/// value, text by bytes.
fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Integer(x), Value::Integer(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Integer(_), _) => Ordering::Less,
        (_, Value::Integer(_)) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

fn lit_expr(l: &Lit) -> Expr {
    match l {
        Lit::Int(i) => lit(*i),
        Lit::Str(s) => lit(s.clone()),
    }
}

/// A condition as a polars predicate: `NULL` where SQLite's is `NULL` (a null column value
/// compared with anything), which `filter` drops as `WHERE` does.
fn predicate(c: &Cond) -> Expr {
    let x = col(c.col.name);
    match &c.test {
        Test::Cmp(op, l) => {
            let l = lit_expr(l);
            match op {
                Op::Eq => x.eq(l),
                Op::Ne => x.neq(l),
                Op::Lt => x.lt(l),
                Op::Le => x.lt_eq(l),
                Op::Gt => x.gt(l),
                Op::Ge => x.gt_eq(l),
            }
        }
        Test::In(ls, negated) => {
            let any = ls
                .iter()
                .map(|l| x.clone().eq(lit_expr(l)))
                .reduce(Expr::or)
                .unwrap_or(lit(false));
            if *negated {
                any.not()
            } else {
                any
            }
        }
        Test::Null(false) => x.is_null(),
        Test::Null(true) => x.is_not_null(),
    }
}

/// The argument's value per row (`NULL` where an operand is).
fn arg_expr(arg: Arg) -> Expr {
    match arg {
        Arg::Star => lit(1i64),
        Arg::Col(c) => col(c.name),
        Arg::Add(a, b) => col(a.name) + col(b.name),
        Arg::Sub(a, b) => col(a.name) - col(b.name),
    }
}

/// 2^32: a sum is taken as the sums of each value's `floor(x / 2^32)` and its remainder.
const HALF: i64 = 1 << 32;

/// The polars aggregates item `i` needs, named `{i}_{part}`: `v` the value; for a sum its two
/// halves `hi` and `lo` instead, `n` (the values counted), `min` and `max` (their extremes);
/// for `a ± b` the operands' extremes.
fn exprs(i: usize, func: Func, arg: Arg) -> Vec<Expr> {
    let name = |p: &str| format!("{i}_{p}");
    let e = arg_expr(arg);
    let count = |e: Expr| e.count().cast(DataType::Int64);
    let mut out = match func {
        Func::CountAll => vec![len().cast(DataType::Int64).alias(name("v"))],
        Func::Count => vec![count(e).alias(name("v"))],
        Func::CountDistinct => vec![e
            .drop_nulls()
            .n_unique()
            .cast(DataType::Int64)
            .alias(name("v"))],
        // The sum in two halves that cannot overflow (`hi` < 2^31 in magnitude, `lo` in
        // [0, 2^32)) for fewer than 2^31 values: polars' i64 sum wraps (and a debug build
        // panics) where SQLite's would overflow, and the guard runs after the sums.
        Func::Sum | Func::Total | Func::Avg => vec![
            // `%` is floor modulo; `x - lo` is a multiple of 2^32, exact as a double, so the
            // division (a double: integer division needs another polars feature) is exact too.
            ((e.clone() - e.clone() % lit(HALF)) / lit(HALF))
                .cast(DataType::Int64)
                .sum()
                .alias(name("hi")),
            (e.clone() % lit(HALF)).sum().alias(name("lo")),
            count(e.clone()).alias(name("n")),
            e.clone().min().alias(name("min")),
            e.max().alias(name("max")),
        ],
        Func::Min => vec![e.min().alias(name("v"))],
        Func::Max => vec![e.max().alias(name("v"))],
    };
    // The operands' extremes: `a ± b` cannot overflow in a group where they bound it.
    if let Arg::Add(a, b) | Arg::Sub(a, b) = arg {
        for (side, c) in [("a", a), ("b", b)] {
            out.push(col(c.name).min().alias(name(&format!("{side}lo"))));
            out.push(col(c.name).max().alias(name(&format!("{side}hi"))));
        }
    }
    out
}

/// The result column of one aggregate, from its parts; `None` if a guard fails.
fn finish(df: &DataFrame, i: usize, func: Func, arg: Arg) -> PolarsResult<Option<Vec<Value>>> {
    let part = |p: &str| df.column(&format!("{i}_{p}"));
    let ints = |p: &str| -> PolarsResult<Vec<Option<i64>>> { Ok(int_values(part(p)?)) };
    if let Arg::Add(..) | Arg::Sub(..) = arg {
        let (alo, ahi, blo, bhi) = (ints("alo")?, ints("ahi")?, ints("blo")?, ints("bhi")?);
        for g in 0..alo.len() {
            if let (Some(alo), Some(ahi), Some(blo), Some(bhi)) = (alo[g], ahi[g], blo[g], bhi[g]) {
                let fits = match arg {
                    Arg::Add(..) => alo.checked_add(blo).and(ahi.checked_add(bhi)).is_some(),
                    _ => alo.checked_sub(bhi).and(ahi.checked_sub(blo)).is_some(),
                };
                if !fits {
                    return Ok(None);
                }
            }
        }
    }
    let ty = match arg {
        Arg::Col(c) => c.ty,
        _ => ColType::Int64,
    };
    Ok(Some(match func {
        Func::CountAll | Func::Count | Func::CountDistinct => values(part("v")?, ColType::Int64),
        Func::Min | Func::Max => values(part("v")?, ty),
        Func::Sum | Func::Total | Func::Avg => {
            let (hi, lo, n) = (ints("hi")?, ints("lo")?, ints("n")?);
            let (min, max) = (ints("min")?, ints("max")?);
            let mut out = Vec::with_capacity(n.len());
            for g in 0..n.len() {
                let n = n[g].unwrap_or(0);
                if n >= 1 << 31 || !sum_fits(n, min[g], max[g]) {
                    return Ok(None);
                }
                let sum = i128::from(hi[g].unwrap_or(0)) * i128::from(HALF)
                    + i128::from(lo[g].unwrap_or(0));
                let Ok(sum) = i64::try_from(sum) else {
                    return Ok(None);
                };
                out.push(match func {
                    _ if n == 0 && func != Func::Total => Value::Null,
                    Func::Sum => Value::Integer(sum),
                    Func::Total => Value::Real(sum as f64),
                    _ => Value::Real(sum as f64 / n as f64),
                });
            }
            out
        }
    }))
}

/// Whether `n` values in [`lo`, `hi`] can be added in any order without leaving i64: then
/// SQLite's sum is exact and polars' equals it.
fn sum_fits(n: i64, lo: Option<i64>, hi: Option<i64>) -> bool {
    let m = i128::from(lo.unwrap_or(0))
        .abs()
        .max(i128::from(hi.unwrap_or(0)).abs());
    i128::from(n) * m <= i128::from(i64::MAX)
}

fn int_values(c: &Column) -> Vec<Option<i64>> {
    match c.cast(&DataType::Int64) {
        Ok(c) => match c.i64() {
            Ok(ca) => ca.iter().collect(),
            Err(_) => vec![None; c.len()],
        },
        Err(_) => vec![None; c.len()],
    }
}

/// A result column as SQLite values of the column type `ty`.
fn values(c: &Column, ty: ColType) -> Vec<Value> {
    match ty {
        ColType::Utf8 => match c.str() {
            Ok(ca) => ca
                .iter()
                .map(|v| v.map_or(Value::Null, |s| Value::Text(s.to_string())))
                .collect(),
            Err(_) => vec![Value::Null; c.len()],
        },
        _ => int_values(c)
            .into_iter()
            .map(|v| v.map_or(Value::Null, Value::Integer))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_is_pushed_down_only_when_no_order_can_overflow() {
        assert!(sum_fits(0, None, None));
        assert!(sum_fits(2, Some(-4), Some(i64::MAX / 2)));
        assert!(!sum_fits(3, Some(0), Some(i64::MAX / 2)));
        // |i64::MIN| is one more than i64::MAX.
        assert!(!sum_fits(1, Some(i64::MIN), Some(0)));
        assert!(sum_fits(1, Some(i64::MIN + 1), Some(0)));
    }

    #[test]
    fn groups_sort_as_sqlite_sorts_them() {
        let mut v = vec![
            Value::Text("b".into()),
            Value::Null,
            Value::Text("B".into()),
            Value::Text("a".into()),
        ];
        v.sort_by(compare);
        assert_eq!(
            v,
            [
                Value::Null,
                Value::Text("B".into()),
                Value::Text("a".into()),
                Value::Text("b".into())
            ]
        );
    }
}
