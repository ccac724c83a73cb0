//! `aorta overlap` as functions of tables: `gpu_activities` (and, for the Python tool's logs,
//! `metrics`) in, the overlap tables out.
//!
//! polars loads and lays out the tables; the interval work is `sweep`, per rank, because a
//! union across streams is a sequential merge that no column expression expresses exactly.

use std::collections::{BTreeMap, HashMap};

use aorta_ingest::schema::{OVERLAP_COLLECTIVES, OVERLAP_RANKS, OVERLAP_STEPS};
use polars::prelude::*;

use crate::collectives::Job;
use crate::comm_split::{self as split, Part, Split};
use crate::dataset::{self, DatasetError};
use crate::overlap_tables::sort_rows;
pub use crate::overlap_tables::OverlapTables;
use crate::rows::{frame, metric_columns, pairs_frame, str_column, streams_frame, MetricRow};
use crate::sweep::{self, Act, Class, RankResult, COMM_OPS};

/// One rank's activities, as the sweep wants them, with the step and stream keys.
#[derive(Debug, Default)]
pub(crate) struct RankActs {
    pub acts: Vec<Act>,
    pub steps: Vec<Option<i64>>,
    /// (device, stream): stream ids are per device.
    pub streams: Vec<(i64, i64)>,
    step_idx: HashMap<Option<i64>, u32>,
    stream_idx: HashMap<(i64, i64), u16>,
}

impl RankActs {
    fn push(
        &mut self,
        start: i64,
        end: i64,
        class: Class,
        op: u8,
        stream: (i64, i64),
        step: Option<i64>,
    ) {
        let n = self.streams.len();
        let stream = *self.stream_idx.entry(stream).or_insert_with(|| {
            self.streams.push(stream);
            n as u16
        });
        let n = self.steps.len();
        let step = *self.step_idx.entry(step).or_insert_with(|| {
            self.steps.push(step);
            n as u32
        });
        self.acts.push(Act {
            start,
            end,
            class,
            op,
            stream,
            step,
        });
    }
}

impl RankActs {
    /// A stream as the tables name it: its id, prefixed `device:` when the rank used more
    /// than one device.
    pub(crate) fn stream_label(&self, i: u16) -> String {
        let (device, stream) = self.streams[i as usize];
        if self.streams.iter().all(|s| s.0 == device) {
            stream.to_string()
        } else {
            format!("{device}:{stream}")
        }
    }
}

/// Groups `gpu_activities` rows (`ACT_COLUMNS`) by rank.
pub(crate) fn group_ranks(acts: &DataFrame) -> PolarsResult<BTreeMap<(String, i64), RankActs>> {
    let (run, rank) = (acts.column("run")?.str()?, acts.column("rank")?.i64()?);
    let (step, stream) = (acts.column("step")?.i64()?, acts.column("stream")?.i64()?);
    let device = acts.column("device")?.i64()?;
    let (cat, op) = (
        acts.column("category")?.str()?,
        acts.column("comm_op")?.str()?,
    );
    let (start, end) = (
        acts.column("start_ns")?.i64()?,
        acts.column("end_ns")?.i64()?,
    );
    let mut out: BTreeMap<(String, i64), RankActs> = BTreeMap::new();
    let mut key: Option<(String, i64)> = None;
    let mut cur = RankActs::default();
    for i in 0..acts.height() {
        let k = (
            run.get(i).unwrap_or("").to_string(),
            rank.get(i).unwrap_or(0),
        );
        if key.as_ref() != Some(&k) {
            if let Some(old) = key.replace(k.clone()) {
                out.insert(old, std::mem::take(&mut cur));
            }
            cur = out.remove(&k).unwrap_or_default();
        }
        let class = Class::from_category(cat.get(i).unwrap_or(""));
        let op = sweep::comm_op_index(op.get(i));
        let (s, e) = (start.get(i).unwrap_or(0), end.get(i).unwrap_or(0));
        let st = (device.get(i).unwrap_or(0), stream.get(i).unwrap_or(0));
        cur.push(s, e.max(s), class, op, st, step.get(i));
    }
    if let Some(k) = key {
        out.insert(k, cur);
    }
    Ok(out)
}

/// Each (run, rank)'s comm kernels split into wait and transfer (`collectives`), for the
/// overlap split columns; ranks missing here get null split columns.
pub(crate) type Waits = HashMap<(String, i64), Vec<Part>>;

/// The overlap tables of GPU activities (the `gpu_activities` table, or any frame with its
/// `ACT_COLUMNS`), with the wait/transfer split of the ranks in `waits`.
pub(crate) fn overlap_with_waits(acts: &DataFrame, waits: &Waits) -> PolarsResult<OverlapTables> {
    let mut out = Builder::default();
    for ((run, rank), mut r) in group_ranks(acts)? {
        let res = sweep::rank(&mut r.acts, r.steps.len());
        let parts = waits.get(&(run.clone(), rank)).map(Vec::as_slice);
        let splits = parts.map(|p| splits(&r, p));
        out.add_rank(&run, rank, &r, &res, splits.as_ref());
    }
    out.finish()
}

/// The split per step (in `r.steps` order), then the whole rank's.
fn splits(r: &RankActs, parts: &[Part]) -> (Vec<Split>, Split) {
    let mut compute: Vec<Vec<(i64, i64)>> = vec![vec![]; r.steps.len()];
    for a in r.acts.iter().filter(|a| a.class.is_compute()) {
        compute[a.step as usize].push((a.start, a.end));
    }
    let compute: Vec<Vec<(i64, i64)>> = compute.into_iter().map(split::union).collect();
    let steps = r
        .steps
        .iter()
        .zip(&compute)
        .map(|(step, c)| split::split(parts.iter().filter(|p| p.step == *step), c))
        .collect();
    let all = split::union(compute.concat());
    (steps, split::split(parts, &all))
}

/// Column vectors of the five tables, filled rank by rank.
#[derive(Default)]
struct Builder {
    steps: Keyed,
    step_rows: Vec<MetricRow>,
    ranks: Keyed,
    rank_rows: Vec<MetricRow>,
    step_counts: Vec<i64>,
    coll: Keyed,
    coll_level: Vec<&'static str>,
    coll_op: Vec<&'static str>,
    coll_vals: [Vec<i64>; 3],
    streams: Keyed,
    stream_vals: (Vec<String>, Vec<i64>, Vec<i64>),
    pairs: Keyed,
    pair_vals: (Vec<String>, Vec<String>, Vec<i64>),
}

/// The key columns every table starts with.
#[derive(Default)]
struct Keyed {
    run: Vec<String>,
    rank: Vec<i64>,
    step: Vec<Option<i64>>,
}

impl Keyed {
    fn push(&mut self, run: &str, rank: i64, step: Option<i64>) {
        self.run.push(run.to_string());
        self.rank.push(rank);
        self.step.push(step);
    }

    fn columns(self, with_step: bool) -> Vec<Column> {
        let mut c = vec![
            str_column("run", self.run),
            Column::new("rank".into(), self.rank),
        ];
        if with_step {
            c.push(Column::new("step".into(), self.step));
        }
        c
    }
}

impl Builder {
    fn add_rank(
        &mut self,
        run: &str,
        rank: i64,
        r: &RankActs,
        res: &RankResult,
        splits: Option<&(Vec<Split>, Split)>,
    ) {
        self.ranks.push(run, rank, None);
        let whole = MetricRow::from(&res.whole).with_split(splits.map(|s| s.1));
        self.rank_rows.push(whole);
        // Real steps only: the activity outside every step is not one.
        self.step_counts
            .push(r.steps.iter().filter(|s| s.is_some()).count() as i64);
        self.add_ops(run, rank, "rank", None, &res.whole);
        for (i, (m, view)) in res.steps.iter().enumerate() {
            let step = r.steps[i];
            self.steps.push(run, rank, step);
            let split = splits.map(|s| s.0[i]);
            self.step_rows.push(MetricRow::from(m).with_split(split));
            self.add_ops(run, rank, "step", step, m);
            for &(s, n, busy) in &view.busy {
                self.streams.push(run, rank, step);
                self.stream_vals.0.push(r.stream_label(s));
                self.stream_vals.1.push(n);
                self.stream_vals.2.push(busy);
            }
            for &(a, b, ov) in &view.pairs {
                let (a, b) = if r.streams[a as usize] <= r.streams[b as usize] {
                    (a, b)
                } else {
                    (b, a)
                };
                self.pairs.push(run, rank, step);
                self.pair_vals.0.push(r.stream_label(a));
                self.pair_vals.1.push(r.stream_label(b));
                self.pair_vals.2.push(ov);
            }
        }
    }

    /// One row per collective kind that ran in the window.
    fn add_ops(
        &mut self,
        run: &str,
        rank: i64,
        level: &'static str,
        step: Option<i64>,
        m: &sweep::Metrics,
    ) {
        for (k, op) in m.ops.iter().enumerate().filter(|(_, o)| o.count > 0) {
            self.coll.push(run, rank, step);
            self.coll_level.push(level);
            self.coll_op.push(COMM_OPS[k]);
            self.coll_vals[0].push(op.count);
            self.coll_vals[1].push(op.comm_ns);
            self.coll_vals[2].push(op.exposed_comm_ns);
        }
    }

    fn finish(self) -> PolarsResult<OverlapTables> {
        let source = |n: usize| str_column("source", vec!["trace"; n]);
        let mut c = self.steps.columns(true);
        c.push(source(self.step_rows.len()));
        c.extend(metric_columns(&self.step_rows));
        let steps = frame(&OVERLAP_STEPS, c)?;
        let mut c = self.ranks.columns(false);
        c.push(source(self.rank_rows.len()));
        c.push(Column::new("step_count".into(), self.step_counts));
        c.extend(metric_columns(&self.rank_rows));
        let ranks = frame(&OVERLAP_RANKS, c)?;
        let mut c = self.coll.columns(true);
        let [count, comm, exposed] = self.coll_vals;
        c.extend([
            str_column("level", self.coll_level),
            str_column("comm_op", self.coll_op),
            Column::new("activity_count".into(), count),
            Column::new("comm_ns".into(), comm),
            Column::new("exposed_comm_ns".into(), exposed),
        ]);
        let collectives = frame(&OVERLAP_COLLECTIVES, c)?;
        let streams = streams_frame(self.streams.columns(true), self.stream_vals)?;
        let stream_pairs = pairs_frame(self.pairs.columns(true), self.pair_vals)?;
        Ok(OverlapTables {
            steps: sort_rows(steps)?,
            ranks: sort_rows(ranks)?,
            collectives: sort_rows(collectives)?,
            streams: sort_rows(streams)?,
            stream_pairs: sort_rows(stream_pairs)?,
        })
    }
}

/// The runs of a dataset (from the `runs` table), sorted.
pub fn dataset_runs(root: &std::path::Path) -> Result<Vec<String>, DatasetError> {
    let runs = dataset::read(root, "runs")?;
    let col = runs.column("run").and_then(|c| c.str().cloned());
    let mut v: Vec<String> = col
        .map_err(|source| DatasetError::Polars {
            path: root.join("runs"),
            source,
        })?
        .iter()
        .flatten()
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// `aorta overlap` as one call: computes the overlap tables of `runs` and writes them into
/// the dataset (those runs' partitions replaced atomically), returning them.
pub fn compute_and_store(
    root: &std::path::Path,
    runs: &[String],
) -> Result<OverlapTables, DatasetError> {
    compute_and_store_with(root, runs, &analyze(root, runs)?)
}

/// `compute_and_store` with the runs' collectives already matched, for a caller that uses
/// them too (`aorta overlap --by size`), so the matching runs once.
pub fn compute_and_store_with(
    root: &std::path::Path,
    runs: &[String],
    jobs: &[Job],
) -> Result<OverlapTables, DatasetError> {
    let tables = from_dataset_with(root, runs, jobs)?;
    dataset::replace_runs(root, runs, &tables.tables())?;
    Ok(tables)
}

/// The collectives of `runs` matched across ranks, one `Job` per run.
pub fn analyze(root: &std::path::Path, runs: &[String]) -> Result<Vec<Job>, DatasetError> {
    runs.iter().map(|r| Job::analyze(root, r)).collect()
}

/// Reads `gpu_activities` and `metrics` of `runs` and computes their overlap tables, trace
/// ranks and JSONL ranks together (the tests' shorthand for `from_dataset_with`).
#[cfg(test)]
pub(crate) fn from_dataset(
    root: &std::path::Path,
    runs: &[String],
) -> Result<OverlapTables, DatasetError> {
    from_dataset_with(root, runs, &analyze(root, runs)?)
}

/// `from_dataset` with the runs' collectives already matched (`Job::analyze`), for the
/// wait/transfer split.
pub fn from_dataset_with(
    root: &std::path::Path,
    runs: &[String],
    jobs: &[Job],
) -> Result<OverlapTables, DatasetError> {
    let wanted = dataset::of_runs(runs);
    let polars = |table: &str| {
        let path = root.join(table);
        move |source| DatasetError::Polars { path, source }
    };
    let acts = dataset::scan(root, "gpu_activities")?
        .filter(wanted.clone())
        .select(ACT_COLUMNS.map(col))
        .collect()
        .map_err(polars("gpu_activities"))?;
    let metrics = dataset::scan(root, "metrics")?
        .filter(wanted)
        .collect()
        .map_err(polars("metrics"))?;
    let mut waits = Waits::new();
    for job in jobs {
        for (rank, parts) in job.wait_parts() {
            waits.insert((job.run.clone(), rank), parts);
        }
    }
    let mut trace = overlap_with_waits(&acts, &waits).map_err(polars("gpu_activities"))?;
    let spans = dataset::scan(root, "steps")?
        .filter(dataset::of_runs(runs))
        .select(["run", "rank", "step", "cpu_start_ns", "cpu_end_ns"].map(col))
        .collect()
        .map_err(polars("steps"))?;
    crate::steps::add_spans(
        &mut trace.steps,
        &mut trace.ranks,
        &crate::steps::spans(&spans),
        &acts,
    )
    .map_err(polars("overlap_steps"))?;
    let jsonl = crate::jsonl::overlap(&metrics).map_err(polars("metrics"))?;
    trace.concat(jsonl).map_err(polars("overlap_steps"))
}

/// The `gpu_activities` columns the overlap needs.
pub(crate) const ACT_COLUMNS: [&str; 9] = [
    "run", "rank", "step", "device", "stream", "category", "comm_op", "start_ns", "end_ns",
];
