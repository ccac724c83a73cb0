//! Where a rank's GPU time goes when it is not computing, as Holistic Trace Analysis (HTA)
//! defines it: the temporal breakdown (compute, non-compute, idle) and the idle split
//! (host-wait, kernel-wait, other) in [`breakdown`], the CPU side of every launch and the
//! GPU's launch queue in [`launches`]. docs/TOOLBOX.md writes every definition down.
//!
//! Both read the same rows: `gpu_activities`, and the launch calls of `cpu_ops` (runtime or
//! driver API, `crate::launch::LAUNCH_CATEGORIES`) that launched them (by correlation id, as
//! `crate::launch` links them). Grouped per rank or per step:
//! activity outside every `ProfilerStep` is its own group, step null (`-`), as in `aorta
//! kernels --by step`, never a step.

pub mod breakdown;
pub mod launches;
mod queue;

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::launch::{launch_calls, Links, LINK_COLUMNS};
use crate::rows::{ints, strs, StrAt};
use crate::sweep::Class;

/// What one row of the output covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// A rank's whole capture.
    Rank,
    /// One step of a rank (null: outside every step, or the capture of a stepless trace).
    Step,
}

/// The key of one group: run, rank and (by step) the step.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The run label.
    pub run: String,
    /// The rank.
    pub rank: i64,
    pub(crate) step: Option<i64>,
}

/// One GPU activity with what the analyses read of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Act {
    /// Row in `Input::acts`.
    pub row: usize,
    pub stream: i64,
    pub class: Class,
    pub kernel: bool,
    pub start: i64,
    pub end: i64,
    /// The launch call (runtime or driver API) that launched it (a row of `Input::calls`), with
    /// its start and end.
    pub call: Option<Call>,
}

/// A launch call (runtime or driver API).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub row: usize,
    pub start: i64,
    pub end: i64,
}

/// The rows of some runs, grouped per rank (each rank's activities sorted by start).
pub struct Input {
    pub(crate) acts: DataFrame,
    pub(crate) calls: DataFrame,
    /// (run, rank) → its activities, by start (ties: the earliest launch call first; an
    /// activity without a call before one with).
    pub(crate) ranks: BTreeMap<(String, i64), Vec<Act>>,
    /// Activities' steps, by `Act::row`.
    steps: Vec<Option<i64>>,
}

/// `gpu_activities` columns read.
const ACTS: [&str; 11] = [
    "run",
    "rank",
    "step",
    "stream",
    "kind",
    "name",
    "category",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
];

impl Input {
    /// The activities of `runs` and their launch calls.
    pub fn load(root: &Path, runs: &[String]) -> Result<Input, DatasetError> {
        let wanted = dataset::of_runs(runs);
        let acts = dataset::read_where(root, "gpu_activities", wanted.clone(), &ACTS)?;
        let calls =
            dataset::read_where(root, "cpu_ops", wanted.and(launch_calls()), &LINK_COLUMNS)?;
        let links = Links::new(&calls, &acts).calls(&acts);
        let ranks = group_ranks(&acts, &calls, &links);
        let steps = ints(&acts, "step");
        Ok(Input {
            acts,
            calls,
            ranks,
            steps,
        })
    }

    /// The activities of every group, each group's in start order.
    pub(crate) fn groups(&self, by: By) -> BTreeMap<Key, Vec<Act>> {
        let mut out: BTreeMap<Key, Vec<Act>> = BTreeMap::new();
        for ((run, rank), acts) in &self.ranks {
            for a in acts {
                out.entry(self.key(run, *rank, a, by)).or_default().push(*a);
            }
        }
        out
    }

    /// The key of the group `a` (an activity of rank `rank` of `run`) belongs to.
    pub(crate) fn key(&self, run: &str, rank: i64, a: &Act, by: By) -> Key {
        Key {
            run: run.to_string(),
            rank,
            step: match by {
                By::Rank => None,
                By::Step => self.steps[a.row],
            },
        }
    }

    /// An activity's name.
    pub(crate) fn name(&self, a: &Act) -> &str {
        StrAt::of(&self.acts, "name").get(a.row).unwrap_or("")
    }

    /// A call's name.
    pub(crate) fn call_name(&self, c: &Call) -> &str {
        StrAt::of(&self.calls, "name").get(c.row).unwrap_or("")
    }
}

fn group_ranks(
    acts: &DataFrame,
    calls: &DataFrame,
    links: &[Option<usize>],
) -> BTreeMap<(String, i64), Vec<Act>> {
    let (run, rank, stream) = (strs(acts, "run"), ints(acts, "rank"), ints(acts, "stream"));
    let (kind, cat) = (strs(acts, "kind"), strs(acts, "category"));
    let (start, end) = (ints(acts, "start_ns"), ints(acts, "end_ns"));
    let (cs, ce) = (ints(calls, "start_ns"), ints(calls, "end_ns"));
    let mut out: BTreeMap<(String, i64), Vec<Act>> = BTreeMap::new();
    for i in 0..acts.height() {
        let s = start[i].unwrap_or(0);
        let call = links[i].map(|c| Call {
            row: c,
            start: cs[c].unwrap_or(0),
            end: ce[c].unwrap_or(0),
        });
        let act = Act {
            row: i,
            stream: stream[i].unwrap_or(0),
            class: Class::from_category(cat[i].unwrap_or("")),
            kernel: kind[i] == Some("kernel"),
            start: s,
            end: end[i].unwrap_or(s).max(s),
            call,
        };
        let key = (run[i].unwrap_or("").to_string(), rank[i].unwrap_or(0));
        out.entry(key).or_default().push(act);
    }
    for v in out.values_mut() {
        v.sort_by_key(|a| (a.start, a.call.map_or(i64::MIN, |c| c.start), a.row));
    }
    out
}

/// The key columns of `keys`: `run`, `rank` and, by step, `step`.
pub(crate) fn key_columns<'a>(keys: impl Iterator<Item = &'a Key> + Clone, by: By) -> Vec<Column> {
    let mut cols = vec![
        crate::rows::str_column("run", keys.clone().map(|k| k.run.as_str())),
        Column::new(
            "rank".into(),
            keys.clone().map(|k| k.rank).collect::<Vec<_>>(),
        ),
    ];
    if by == By::Step {
        cols.push(Column::new(
            "step".into(),
            keys.map(|k| k.step).collect::<Vec<_>>(),
        ));
    }
    cols
}

/// `100 × part / whole`, null for an empty whole.
pub(crate) fn pct(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| 100.0 * part as f64 / whole as f64)
}
