//! `aorta kernels`: which kernels cost the most, per run, rank, category or step.
//!
//! A kernel here is a GPU activity name (kernels, and memcpys and memsets by their names, so
//! nothing the GPU ran is left out of the shares). Per group and name: how many ran, their
//! total, mean, p50 and p99 duration (`end_ns − start_ns`, the clipped end, as every other
//! GPU time in aorta), the share of the group's GPU time (the sum of every activity's
//! duration in the group: concurrent streams add up, as in `aorta compare`'s categories), and
//! the operator that launched it (`crate::launch`), the one with the most of its time when
//! several did.
//!
//! By subcategory, the group of an `other_compute` activity is its subcategory
//! (`crate::subcategory`) and that of any other activity its category, so the groups still
//! cover all GPU time.
//!
//! Activity outside every `ProfilerStep` is included in every grouping: it is counted in the
//! run's, rank's and category's rows (and the header says how much of it there is); grouped
//! by step it is its own group, step null (shown `-`), as is the whole capture of a trace
//! without steps.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::launch::{Links, LINK_COLUMNS, NO_OP};
use crate::rows::{ints, str_column, strs};
use crate::subcategory::{self, Rules};
use crate::summary::quantile;

/// What one group of kernels is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The whole run.
    Run,
    /// Each rank.
    Rank,
    /// Each category (`comm`, `gemm`, …).
    Category,
    /// `other_compute` split into its subcategories (`crate::subcategory`), every other
    /// category whole.
    Subcategory,
    /// Each step (null: outside every step).
    Step,
}

impl By {
    /// The group's key column (none for `Run`: the run is every row's key).
    pub fn key(self) -> Option<&'static str> {
        match self {
            By::Run => None,
            By::Rank => Some("rank"),
            By::Category => Some("category"),
            By::Subcategory => Some("subcategory"),
            By::Step => Some("step"),
        }
    }
}

/// One run's GPU time in short: what its shares are of.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTotals {
    /// The run label.
    pub run: String,
    /// GPU activities of the run.
    pub activities: i64,
    /// Their summed durations, ns (not a union: concurrent kernels count twice).
    pub gpu_ns: i64,
    /// Activities in a rank that has steps, outside all of them (included in the rows).
    pub outside_activities: i64,
    /// Summed durations of those outside activities, ns.
    pub outside_ns: i64,
}

/// The kernels of some runs: one row per (run, group, name) among the top N of its group.
pub struct Kernels {
    /// One per run, in the order of the runs asked for.
    pub totals: Vec<RunTotals>,
    /// Columns: `run`, the group key (`rank`, `category` or `step`, unless by run), `name`,
    /// `kind`, `category`, `count`, `total_ns`, `mean_ns`, `p50_ns`, `p99_ns`, `gpu_pct`,
    /// `op`; each group's rows largest `total_ns` first.
    pub rows: DataFrame,
}

/// `gpu_activities` columns read.
const ACTS: [&str; 10] = [
    "run",
    "rank",
    "step",
    "kind",
    "name",
    "category",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
];

/// The top `top` kernels of every group of `runs`.
pub fn compute(root: &Path, runs: &[String], by: By, top: usize) -> Result<Kernels, DatasetError> {
    let read =
        |table: &str, filter: Expr, cols: &[&str]| dataset::read_where(root, table, filter, cols);
    let wanted = dataset::of_runs(runs);
    let acts = read("gpu_activities", wanted.clone(), &ACTS)?;
    let rules = match by {
        By::Subcategory => Rules::load(root, runs)?,
        _ => Rules::shipped(),
    };
    let cpu = if by == By::Subcategory {
        subcategory::read_cpu(root, runs, &rules, &[])?
    } else {
        let launching = col("category")
            .eq(lit("cpu_op"))
            .or(crate::launch::launch_calls());
        read("cpu_ops", wanted.and(launching), &LINK_COLUMNS)?
    };
    let launchers = Links::new(&cpu, &acts).launchers(&acts);
    let names = strs(&cpu, "name");
    let ops: Vec<&str> = launchers
        .iter()
        .map(|op| op.and_then(|o| names[o]).unwrap_or(NO_OP))
        .collect();
    let subs = match by {
        By::Subcategory => subcategory::assign(&acts, &cpu, &launchers, &rules),
        _ => Vec::new(),
    };
    let rows = table(&acts, &ops, &subs, by, top).map_err(|source| DatasetError::Polars {
        path: root.join("gpu_activities"),
        source,
    })?;
    Ok(Kernels {
        totals: totals(&acts, runs),
        rows,
    })
}

/// Each activity's duration, never negative.
fn durations(acts: &DataFrame) -> Vec<i64> {
    let (s, e) = (ints(acts, "start_ns"), ints(acts, "end_ns"));
    s.iter()
        .zip(&e)
        .map(|(s, e)| (e.unwrap_or(0) - s.unwrap_or(0)).max(0))
        .collect()
}

fn totals(acts: &DataFrame, runs: &[String]) -> Vec<RunTotals> {
    let run = strs(acts, "run");
    let dur = durations(acts);
    let inside = crate::steps::in_steps_mask(acts);
    runs.iter()
        .map(|r| {
            let mut t = RunTotals {
                run: r.clone(),
                activities: 0,
                gpu_ns: 0,
                outside_activities: 0,
                outside_ns: 0,
            };
            for i in (0..acts.height()).filter(|&i| run[i] == Some(r.as_str())) {
                t.activities += 1;
                t.gpu_ns += dur[i];
                if !inside[i] {
                    t.outside_activities += 1;
                    t.outside_ns += dur[i];
                }
            }
            t
        })
        .collect()
}

/// A group's key value: a rank or step number, or a category.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    None,
    Int(Option<i64>),
    Str(String),
}

/// The instances of one kernel name in one group.
#[derive(Default)]
struct Acc<'a> {
    kind: &'a str,
    category: &'a str,
    durations: Vec<i64>,
    /// Launching operator → its kernels' time.
    ops: HashMap<&'a str, i64>,
}

/// One output row, before it becomes columns.
struct Row<'a> {
    run: &'a str,
    key: Key,
    name: &'a str,
    acc: Acc<'a>,
    group_ns: i64,
}

/// `subs`: each activity's subcategory (by subcategory only).
fn table(
    acts: &DataFrame,
    ops: &[&str],
    subs: &[Option<&str>],
    by: By,
    top: usize,
) -> PolarsResult<DataFrame> {
    let (run, name) = (strs(acts, "run"), strs(acts, "name"));
    let (kind, cat) = (strs(acts, "kind"), strs(acts, "category"));
    let (rank, step) = (ints(acts, "rank"), ints(acts, "step"));
    let dur = durations(acts);
    let key = |i: usize| match by {
        By::Run => Key::None,
        By::Rank => Key::Int(rank[i]),
        By::Step => Key::Int(step[i]),
        By::Category => Key::Str(cat[i].unwrap_or("").to_string()),
        By::Subcategory => Key::Str(subs[i].or(cat[i]).unwrap_or("").to_string()),
    };
    type Group<'a> = (i64, HashMap<&'a str, Acc<'a>>);
    let mut groups: BTreeMap<(&str, Key), Group> = BTreeMap::new();
    for i in 0..acts.height() {
        let g = groups.entry((run[i].unwrap_or(""), key(i))).or_default();
        g.0 += dur[i];
        let a = g.1.entry(name[i].unwrap_or("")).or_default();
        (a.kind, a.category) = (kind[i].unwrap_or(""), cat[i].unwrap_or(""));
        a.durations.push(dur[i]);
        *a.ops.entry(ops[i]).or_default() += dur[i];
    }
    let mut rows = Vec::new();
    for ((run, key), (group_ns, accs)) in groups {
        let mut named: Vec<(&str, Acc)> = accs.into_iter().collect();
        let total = |a: &Acc| a.durations.iter().sum::<i64>();
        named.sort_by(|a, b| total(&b.1).cmp(&total(&a.1)).then(a.0.cmp(b.0)));
        rows.extend(named.into_iter().take(top).map(|(name, acc)| Row {
            run,
            key: key.clone(),
            name,
            acc,
            group_ns,
        }));
    }
    frame(&mut rows, by)
}

/// Count, total, mean, p50, p99 of one kernel's durations (sorted here).
fn stats(d: &mut [i64]) -> (i64, i64, f64, f64, f64) {
    d.sort_unstable();
    let total: i64 = d.iter().sum();
    let f: Vec<f64> = d.iter().map(|&x| x as f64).collect();
    let n = d.len();
    (
        n as i64,
        total,
        total as f64 / n.max(1) as f64,
        quantile(&f, 0.5),
        quantile(&f, 0.99),
    )
}

/// The operator with the most of a kernel's time (ties: the first by name).
fn top_op<'a>(ops: &HashMap<&'a str, i64>) -> &'a str {
    ops.iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map_or(NO_OP, |(n, _)| n)
}

fn frame(rows: &mut [Row], by: By) -> PolarsResult<DataFrame> {
    let mut stat = Vec::with_capacity(rows.len());
    for r in rows.iter_mut() {
        stat.push(stats(&mut r.acc.durations));
    }
    let pct =
        |r: &Row, total: i64| (r.group_ns > 0).then(|| 100.0 * total as f64 / r.group_ns as f64);
    let mut cols = vec![str_column("run", rows.iter().map(|r| r.run))];
    match by.key() {
        Some(k @ ("category" | "subcategory")) => cols.push(str_column(
            k,
            rows.iter().map(|r| match &r.key {
                Key::Str(s) => s.as_str(),
                _ => "",
            }),
        )),
        Some(k) => cols.push(Column::new(
            k.into(),
            rows.iter()
                .map(|r| match r.key {
                    Key::Int(v) => v,
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )),
        None => {}
    }
    cols.push(str_column("name", rows.iter().map(|r| r.name)));
    cols.push(str_column("kind", rows.iter().map(|r| r.acc.kind)));
    if by != By::Category {
        cols.push(str_column("category", rows.iter().map(|r| r.acc.category)));
    }
    let pick = |f: fn(&(i64, i64, f64, f64, f64)) -> f64| stat.iter().map(f).collect::<Vec<_>>();
    cols.extend([
        Column::new("count".into(), stat.iter().map(|s| s.0).collect::<Vec<_>>()),
        Column::new(
            "total_ns".into(),
            stat.iter().map(|s| s.1).collect::<Vec<_>>(),
        ),
        Column::new("mean_ns".into(), pick(|s| s.2)),
        Column::new("p50_ns".into(), pick(|s| s.3)),
        Column::new("p99_ns".into(), pick(|s| s.4)),
        Column::new(
            "gpu_pct".into(),
            rows.iter()
                .zip(&stat)
                .map(|(r, s)| pct(r, s.1))
                .collect::<Vec<_>>(),
        ),
        str_column("op", rows.iter().map(|r| top_op(&r.acc.ops))),
    ]);
    DataFrame::new_infer_height(cols)
}
