//! `aorta sql`'s fast path: every aggregate polars answers (`Engine::Polars`) gives the frame
//! SQLite gives for the same statement run row by row (`query_with(…, false)`): the same
//! column names, types, values and row order, nulls and empty results included; statements
//! outside the pushed-down shape are still answered by SQLite; and one answer is checked
//! against a count done here by hand.

use std::collections::BTreeMap;

use aorta_transform::sql::{explain, query_with, Engine};
use polars::prelude::*;

use super::{bundled, ok};

/// Runs `sql` both ways; the frames must be equal, and the fast path must have been taken.
fn same_both_ways(sql: &str) -> DataFrame {
    let root = bundled();
    let (fast, engine) = query_with(root, sql, true).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(engine, Engine::Polars, "{sql}");
    assert_eq!(explain(sql).0, Engine::Polars, "{sql}");
    let (slow, engine) = query_with(root, sql, false).unwrap();
    assert_eq!(engine, Engine::Sqlite);
    assert_eq!(fast.schema(), slow.schema(), "{sql}");
    assert!(
        fast.equals_missing(&slow),
        "{sql}\npolars:\n{fast}\nSQLite:\n{slow}"
    );
    fast
}

#[test]
fn pushed_down_aggregates_give_sqlites_answer() {
    let cases = [
        // The README's example and its parts.
        "SELECT run, category, COUNT(*) AS n, SUM(end_ns - start_ns) AS gpu_ns \
         FROM gpu_activities GROUP BY run, category ORDER BY run, category",
        "select category, count(*), sum(end_ns - start_ns), avg(end_ns - start_ns), \
         total(end_ns - start_ns) from gpu_activities group by category",
        // Nullable keys (a NULL group first) and nullable arguments.
        "SELECT step, comm_op, COUNT(correlation), MIN(grid_x), MAX(bytes), SUM(bytes), \
         AVG(bytes) FROM gpu_activities GROUP BY step, comm_op",
        // Text MIN/MAX, distinct counts, an integer key, a sum of a column plus another.
        "SELECT rank, MIN(name), MAX(name), COUNT(DISTINCT name), COUNT(DISTINCT comm_op), \
         MAX(start_ns + end_ns) FROM gpu_activities GROUP BY rank",
        // Whole-table aggregates: one row.
        "SELECT COUNT(*), SUM(end_ns - start_ns), MIN(start_ns), MAX(name) FROM gpu_activities",
        // WHERE: every comparison the fast path takes.
        "SELECT kind, COUNT(*) FROM gpu_activities WHERE category <> 'comm' AND rank >= 0 \
         AND stream IN (7, 13, 20) AND comm_op IS NULL GROUP BY kind",
        "SELECT run, COUNT(*) n FROM gpu_activities WHERE category NOT IN ('gemm', 'memcpy') \
         AND name < 'n' AND step IS NOT NULL AND device != -1 GROUP BY run",
        // ORDER BY an alias, a position, an aggregate; LIMIT and OFFSET.
        "SELECT name, COUNT(*) AS n, SUM(end_ns - start_ns) AS ns FROM gpu_activities \
         GROUP BY name ORDER BY ns DESC LIMIT 5",
        "SELECT category, run, COUNT(*) FROM gpu_activities GROUP BY run, category \
         ORDER BY 1, COUNT(*) DESC LIMIT 7 OFFSET 2",
        // A key named twice, a key that is no result column.
        "SELECT category, category, COUNT(*) FROM gpu_activities GROUP BY category, Category",
        "SELECT COUNT(*), MAX(name) FROM gpu_activities GROUP BY kind, category",
        // Other tables.
        "SELECT run, code, SUM(count) AS n FROM diagnostics WHERE code NOT IN \
         ('outside_steps', 'jsonl_non_numeric') GROUP BY run, code",
        "SELECT run, COUNT(*), MAX(end_ns - start_ns) FROM cpu_ops WHERE category = 'runtime' \
         GROUP BY run;",
    ];
    for sql in cases {
        let df = same_both_ways(sql);
        assert!(df.height() > 0, "{sql}: no rows to compare");
    }
    // Nothing matches: no group at all, and a whole-table row of 0 and NULLs.
    let none = same_both_ways(
        "SELECT category, COUNT(*) FROM gpu_activities WHERE run = 'nope' GROUP BY category",
    );
    assert_eq!(none.height(), 0);
    let none = same_both_ways(
        "SELECT COUNT(*), SUM(bytes), AVG(bytes), TOTAL(bytes), MIN(name) FROM gpu_activities \
         WHERE run = 'nope'",
    );
    assert_eq!(none.height(), 1);
    assert_eq!(
        none.column("COUNT(*)").unwrap().i64().unwrap().get(0),
        Some(0)
    );
}

#[test]
fn the_fast_paths_counts_match_a_count_by_hand() {
    let root = bundled();
    let acts = super::whole(root, "gpu_activities");
    let (cat, start, end, name) = (
        acts.column("category").unwrap().str().unwrap(),
        acts.column("start_ns").unwrap().i64().unwrap(),
        acts.column("end_ns").unwrap().i64().unwrap(),
        acts.column("name").unwrap().str().unwrap(),
    );
    let mut by_hand: BTreeMap<String, (i64, i64, std::collections::BTreeSet<String>)> =
        BTreeMap::new();
    for i in 0..acts.height() {
        let e = by_hand.entry(cat.get(i).unwrap().to_string()).or_default();
        e.0 += 1;
        e.1 += end.get(i).unwrap() - start.get(i).unwrap();
        e.2.insert(name.get(i).unwrap().to_string());
    }
    let sql = "SELECT category, COUNT(*) AS n, SUM(end_ns - start_ns) AS ns, \
               COUNT(DISTINCT name) AS names, AVG(end_ns - start_ns) AS mean \
               FROM gpu_activities GROUP BY category";
    let (df, engine) = query_with(root, sql, true).unwrap();
    assert_eq!(engine, Engine::Polars);
    let got: Vec<(String, i64, i64, i64, f64)> = (0..df.height())
        .map(|i| {
            let int = |c: &str| df.column(c).unwrap().i64().unwrap().get(i).unwrap();
            (
                df.column("category")
                    .unwrap()
                    .str()
                    .unwrap()
                    .get(i)
                    .unwrap()
                    .into(),
                int("n"),
                int("ns"),
                int("names"),
                df.column("mean").unwrap().f64().unwrap().get(i).unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, i64, i64, i64, f64)> = by_hand
        .into_iter()
        .map(|(c, (n, ns, names))| (c, n, ns, names.len() as i64, ns as f64 / n as f64))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn other_statements_run_on_sqlite() {
    let root = bundled();
    for sql in [
        // HAVING, a join, a subquery, DISTINCT, a bare column beside an aggregate.
        "SELECT category, COUNT(*) FROM gpu_activities GROUP BY category HAVING COUNT(*) > 1",
        "SELECT a.run, COUNT(*) FROM gpu_activities a JOIN runs r ON a.run = r.run GROUP BY a.run",
        "SELECT COUNT(*) FROM (SELECT DISTINCT name FROM gpu_activities)",
        "SELECT name, COUNT(*) FROM gpu_activities",
        // Arithmetic on an aggregate, a real column, a text compared with an integer column
        // (SQLite's affinity), an alias that is also a column name, an ORDER BY on a key
        // that is not a result column.
        "SELECT category, SUM(end_ns - start_ns) / 1000 FROM gpu_activities GROUP BY category",
        "SELECT run, SUM(value) FROM metrics GROUP BY run",
        "SELECT category, COUNT(*) FROM gpu_activities WHERE rank = '0' GROUP BY category",
        "SELECT category, COUNT(*) AS name FROM gpu_activities GROUP BY category",
        "SELECT COUNT(*) FROM gpu_activities GROUP BY category ORDER BY category",
        // A WHERE on an expression; no aggregate at all.
        "SELECT COUNT(*) FROM gpu_activities WHERE end_ns - start_ns > 1000",
        "SELECT name FROM gpu_activities LIMIT 3",
    ] {
        assert_eq!(explain(sql).0, Engine::Sqlite, "{sql}");
        let (_, engine) = query_with(root, sql, true).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(engine, Engine::Sqlite, "{sql}");
    }
}

#[test]
fn a_sum_that_could_overflow_goes_back_to_sqlite() {
    // Epoch-ns start times: their sum over a run leaves i64, and SQLite says so.
    let root = bundled();
    let sql = "SELECT run, SUM(start_ns) FROM gpu_activities GROUP BY run";
    assert_eq!(explain(sql).0, Engine::Polars);
    let fast = query_with(root, sql, true).unwrap_err().to_string();
    let slow = query_with(root, sql, false).unwrap_err().to_string();
    assert!(fast.contains("integer overflow"), "{fast}");
    assert_eq!(fast, slow);
    // Its float cousin, TOTAL, stays on SQLite too and gives a number.
    let (df, engine) = query_with(
        root,
        "SELECT TOTAL(start_ns) AS t FROM gpu_activities",
        true,
    )
    .unwrap();
    assert_eq!(engine, Engine::Sqlite);
    assert!(df.column("t").unwrap().f64().unwrap().get(0).unwrap() > 1e18);
}

#[test]
fn the_cli_explains_and_forces_sqlite() {
    let ds = bundled().to_str().unwrap();
    let q = "SELECT category, COUNT(*) AS n FROM gpu_activities GROUP BY category";
    assert!(ok(&["sql", q, ds, "--explain"]).starts_with("polars (pushed down): "));
    let join = "SELECT COUNT(*) FROM gpu_activities a JOIN runs USING (run)";
    assert!(ok(&["sql", join, ds, "--explain"]).starts_with("SQLite: "));
    let fast = ok(&["sql", q, ds, "--format", "csv"]);
    assert!(fast.lines().count() > 2, "{fast}");
    assert_eq!(fast, ok(&["sql", q, ds, "--format", "csv", "--sqlite"]));
}
