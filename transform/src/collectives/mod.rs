//! The job, not the rank: collectives matched across the ranks of a run, clocks aligned,
//! each kernel split into waiting and transfer, and the ranks that made the others wait.
//!
//! Per-rank overlap cannot tell a rank that waits inside a collective for a late peer from
//! one whose transfer is slow: both show long comm kernels. Matching the same collective on
//! every member (its process group and its number in that group, `seq`) makes the
//! difference measurable. The steps: `load` numbers each rank's comm kernels into
//! instances (`prepare` does each rank's share on a worker thread), `clock` finds each
//! rank's offset from matched end times, `arrive` computes arrivals, waits and stragglers,
//! `why` reads what a late rank was doing, and `tables` lays out the three tables
//! `aorta collectives` writes; `crate::comm_split` carries the split into the overlap tables. The definitions are METRICS.md's, in users' words in
//! docs/COLLECTIVES.md.

mod arrive;
mod clock;
mod load;
mod prepare;
pub mod sizes;
mod tables;
mod views;
mod why;

use std::collections::HashMap;
use std::path::Path;

use polars::prelude::*;

use crate::comm_split::Part;
use crate::dataset::{self, DatasetError};
use crate::rows::ints;

pub use arrive::{Arrivals, RankStats, Status, Stragglers};
pub(crate) use clock::{Clock, ClockSource};
pub use load::{Group, InstanceKey, Kernel, RankKernels, NO_STEP};
pub use tables::{write, CollectiveTables};
pub use why::{Late, LATE_NS};

/// Everything known about one run's collectives.
#[derive(Debug)]
pub struct Job {
    /// The run label.
    pub run: String,
    /// The largest `world_size` the run's traces declare.
    pub world_size: Option<i64>,
    /// Ranks (ascending, the first is the reference), groups and instances.
    pub ranks: Vec<RankKernels>,
    /// The process groups the kernels name, indexed by [`InstanceKey::group`].
    pub groups: Vec<Group>,
    /// One per collective instance (group, seq), in the order of `status`, `arrivals`, `late`.
    pub instances: Vec<InstanceKey>,
    /// Per rank (as `ranks`).
    pub clocks: Vec<Clock>,
    /// Per instance.
    pub status: Vec<Status>,
    /// Per instance; `None` unless it is timed (`paired` or `single`).
    pub arrivals: Vec<Option<Arrivals>>,
    /// Filled by `explain` (empty until then).
    pub late: Vec<Option<Late>>,
    pub(crate) stragglers: Stragglers,
    /// Comm kernels whose kind came from the launching `c10d::` operator.
    pub(crate) kinds_from_ops: u64,
}

/// One data-quality finding of the matching.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What was found, e.g. `collective_unpaired` (`aorta collectives` prints it as
    /// `note: CODE xCOUNT`).
    pub code: &'static str,
    /// How many instances (or groups, or ranks) it was found for.
    pub count: u64,
    /// The first of them, naming its group and seq or its rank.
    pub example: String,
}

impl Job {
    /// Matches, aligns and splits the collectives of `run` (without `explain`).
    pub fn analyze(root: &Path, run: &str) -> Result<Job, DatasetError> {
        let (ranks, world_size) = run_ranks(root, run)?;
        let loaded = load::load(root, run, &ranks, world_size)?;
        let status: Vec<Status> = loaded
            .instances
            .iter()
            .map(|i| Status::of(i, &loaded.groups[i.group as usize]))
            .collect();
        let paired: Vec<bool> = status.iter().map(|s| *s == Status::Paired).collect();
        let clocks = clock::align(&loaded.ranks, &paired);
        let arrivals = arrive::arrivals(&loaded.ranks, &clocks, &status);
        let stragglers = arrive::stragglers(&loaded.ranks, &clocks, &arrivals, &status);
        Ok(Job {
            run: run.to_string(),
            world_size,
            ranks: loaded.ranks,
            groups: loaded.groups,
            instances: loaded.instances,
            clocks,
            status,
            arrivals,
            late: vec![],
            stragglers,
            kinds_from_ops: loaded.kinds_from_ops,
        })
    }

    /// Reads what each late rank was doing before its late arrivals (`late`).
    pub fn explain(&mut self, root: &Path) -> Result<(), DatasetError> {
        let offsets: HashMap<i64, i64> = self
            .ranks
            .iter()
            .zip(&self.clocks)
            .map(|(r, c)| (r.rank, c.offset_ns))
            .collect();
        self.late = why::explain(root, &self.run, &offsets, &self.arrivals)?;
        Ok(())
    }

    /// (wait, arrival) of a kernel of `self.ranks[r]`, when its instance was timed.
    pub(crate) fn timing(&self, r: usize, k: &Kernel) -> Option<(i64, i64)> {
        let a = self.arrivals[k.inst as usize].as_ref()?;
        Some(arrive::split(k, &self.clocks[r], a))
    }

    /// The reference rank (the lowest present).
    pub fn reference(&self) -> Option<i64> {
        self.ranks.first().map(|r| r.rank)
    }

    /// Each rank's comm kernels as (start, end, wait, step) for the overlap split; `None`
    /// for a rank none of whose kernels could be timed against its peers.
    pub(crate) fn wait_parts(&self) -> HashMap<i64, Vec<Part>> {
        let mut out = HashMap::new();
        for (r, rk) in self.ranks.iter().enumerate() {
            let timed = rk
                .kernels
                .iter()
                .any(|k| self.status[k.inst as usize].timed());
            if !timed {
                continue;
            }
            let parts = rk
                .kernels
                .iter()
                .map(|k| {
                    let wait = self.timing(r, k).map_or(0, |t| t.0);
                    Part {
                        start: k.start,
                        end: k.end,
                        wait,
                        step: (k.step != NO_STEP).then_some(k.step),
                    }
                })
                .collect();
            out.insert(rk.rank, parts);
        }
        out
    }

    /// What the matching found wrong or incomplete, one line per kind of finding.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out: Vec<Finding> = Vec::new();
        let mut add = |code, example: String| match out.iter_mut().find(|f| f.code == code) {
            Some(f) => f.count += 1,
            None => out.push(Finding {
                code,
                count: 1,
                example,
            }),
        };
        for (i, s) in self.status.iter().enumerate() {
            let inst = &self.instances[i];
            let g = &self.groups[inst.group as usize];
            let at = format!("group `{}` seq {}", g.label(), inst.seq);
            match s {
                Status::KindMismatch => add(
                    "collective_kind_mismatch",
                    format!("{at}: members disagree on the kind"),
                ),
                Status::MissingRanks => add(
                    "collective_missing_ranks",
                    format!(
                        "{at}: {} of the {} traced members have it",
                        inst.members, g.present
                    ),
                ),
                Status::Unpaired => add(
                    "collective_unpaired",
                    format!("{at}: only one member traced"),
                ),
                _ => {}
            }
        }
        for g in &self.groups {
            if g.size.is_some_and(|n| n > g.present as i64) && g.present > 1 {
                let n = g.size.unwrap_or(0);
                add(
                    "collective_partial_group",
                    format!("group `{}`: {} of {n} ranks traced; arrivals and waits are among those only", g.label(), g.present),
                );
            }
        }
        for (rk, c) in self.ranks.iter().zip(&self.clocks) {
            if c.source == ClockSource::None && self.ranks.len() > 1 {
                add(
                    "collective_clock_unaligned",
                    format!(
                        "rank {}: no matched collective links it to rank {}",
                        rk.rank,
                        self.reference().unwrap_or(0)
                    ),
                );
            }
        }
        if self.kinds_from_ops > 0 {
            out.push(Finding {
                code: "collective_kind_from_op",
                count: self.kinds_from_ops,
                example: "RCCL generic kernels: kind taken from the launching c10d operator".into(),
            });
        }
        out
    }
}

/// The ranks of `run` that have GPU activities (ascending) and its largest world size.
fn run_ranks(root: &Path, run: &str) -> Result<(Vec<i64>, Option<i64>), DatasetError> {
    let runs = dataset::scan(root, "runs")?
        .filter(col("run").eq(lit(run)))
        .select([col("rank"), col("world_size"), col("gpu_activity_count")])
        .collect()
        .map_err(|source| DatasetError::Polars {
            path: root.join("runs"),
            source,
        })?;
    let (rank, world, n) = (
        ints(&runs, "rank"),
        ints(&runs, "world_size"),
        ints(&runs, "gpu_activity_count"),
    );
    let mut ranks: Vec<i64> = (0..runs.height())
        .filter(|&i| n[i].unwrap_or(0) > 0)
        .filter_map(|i| rank[i])
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    Ok((ranks, world.into_iter().flatten().max()))
}
