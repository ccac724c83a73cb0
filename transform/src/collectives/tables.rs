//! The three tables of `aorta collectives`, laid out as `aorta_ingest::schema` declares them,
//! and their commit into the dataset together with the `runs` clock columns.
//!
//! `collectives` has a row per comm kernel of every rank: millions for a 1,000-rank job. Each
//! rank's part is built and written on its own, so the table never sits in memory whole.

use std::collections::HashMap;
use std::path::Path;

use aorta_ingest::classify::COMM_OPS;
use aorta_ingest::schema::{COLLECTIVES, COLLECTIVE_INSTANCES, COLLECTIVE_RANKS};
use aorta_ingest::writer::{write_all, Cols};
use polars::prelude::*;

use crate::dataset::{self, DatasetError, Staging};
use crate::nccl::gbps;
use crate::rows::{frame, str_column};

use super::arrive::{ranking, RankStats};
use super::{Job, Kernel, NO_STEP};

/// The small tables of one run (the per-kernel table is staged as it is built).
pub struct CollectiveTables {
    pub(crate) instances: DataFrame,
}

impl Job {
    fn step_of(step: i64) -> Option<i64> {
        (step != NO_STEP).then_some(step)
    }

    /// One rank's `collectives` part, through ingest's Parquet writer (dictionary strings,
    /// delta-encoded integers, level-1 zstd): a 1,000-rank job writes 10 M of these rows,
    /// the bulk of the command's time with polars' writer.
    fn write_kernels(&self, r: usize, path: &Path) -> Result<(), DatasetError> {
        let ks = &self.ranks[r].kernels;
        let inst = |k: &Kernel| &self.instances[k.inst as usize];
        let timing: Vec<Option<(i64, i64)>> = ks.iter().map(|k| self.timing(r, k)).collect();
        let mut b = Cols::new(&COLLECTIVES);
        let group = |k: &Kernel| self.groups[inst(k).group as usize].key.as_str();
        b.str("process_group", ks.iter().map(group));
        b.i64("seq", ks.iter().map(|k| inst(k).seq));
        b.str("kind", ks.iter().map(|k| COMM_OPS[k.kind as usize]));
        b.str(
            "status",
            ks.iter().map(|k| self.status[k.inst as usize].as_str()),
        );
        b.opt_i64("step", ks.iter().map(|k| Job::step_of(k.step)));
        b.opt_i64("bytes", ks.iter().map(|k| inst(k).bytes));
        b.i64("start_ns", ks.iter().map(|k| k.start));
        b.i64("end_ns", ks.iter().map(|k| k.end));
        b.opt_i64("arrival_ns", timing.iter().map(|t| t.map(|t| t.1)));
        b.opt_i64("wait_ns", timing.iter().map(|t| t.map(|t| t.0)));
        let transfer = ks.iter().zip(&timing);
        b.opt_i64(
            "transfer_ns",
            transfer.map(|(k, t)| t.map(|t| k.end - k.start - t.0)),
        );
        write_all(&COLLECTIVES, path, b.finish())?;
        Ok(())
    }

    /// `collective_instances`, under the reference rank's partition.
    pub fn instance_frame(&self) -> PolarsResult<DataFrame> {
        let n = self.instances.len();
        let reference = self.reference().unwrap_or(0);
        let a = |f: fn(&super::Arrivals) -> i64| -> Vec<Option<i64>> {
            self.arrivals.iter().map(|x| x.as_ref().map(f)).collect()
        };
        let size: Vec<Option<i64>> = self
            .instances
            .iter()
            .map(|i| self.groups[i.group as usize].size)
            .collect();
        let transfer = a(|x| x.transfer);
        let bytes: Vec<Option<i64>> = self.instances.iter().map(|i| i.bytes).collect();
        let algbw: Vec<Option<f64>> = (0..n).map(|i| gbps(bytes[i], transfer[i])).collect();
        let busbw: Vec<Option<f64>> = (0..n).map(|i| self.busbw(i)).collect();
        let late = |f: fn(&super::Late) -> String| -> Vec<Option<String>> {
            (0..n)
                .map(|i| self.late.get(i).and_then(|l| l.as_ref()).map(f))
                .collect()
        };
        frame(
            &COLLECTIVE_INSTANCES,
            vec![
                str_column("run", vec![self.run.as_str(); n]),
                Column::new("rank".into(), vec![reference; n]),
                str_column(
                    "process_group",
                    self.instances
                        .iter()
                        .map(|i| self.groups[i.group as usize].key.as_str()),
                ),
                Column::new(
                    "seq".into(),
                    self.instances.iter().map(|i| i.seq).collect::<Vec<_>>(),
                ),
                str_column(
                    "kind",
                    self.instances.iter().map(|i| COMM_OPS[i.kind as usize]),
                ),
                str_column("status", self.status.iter().map(|s| s.as_str())),
                Column::new(
                    "ranks".into(),
                    self.instances
                        .iter()
                        .map(|i| i.members as i64)
                        .collect::<Vec<_>>(),
                ),
                Column::new("group_size".into(), size),
                Column::new(
                    "step".into(),
                    self.arrivals
                        .iter()
                        .map(|x| x.as_ref().and_then(|a| Job::step_of(a.step)))
                        .collect::<Vec<_>>(),
                ),
                Column::new("bytes".into(), bytes),
                Column::new("first_arrival_ns".into(), a(|x| x.first)),
                Column::new("last_arrival_ns".into(), a(|x| x.last)),
                Column::new("skew_ns".into(), a(|x| x.last - x.first)),
                Column::new("last_rank".into(), a(|x| x.last_rank)),
                Column::new("caused_ns".into(), a(|x| x.last - x.second)),
                Column::new("transfer_ns".into(), transfer),
                Column::new("algbw_gbps".into(), algbw),
                Column::new("busbw_gbps".into(), busbw),
                Column::new("late_category".into(), late(|l| l.category.clone())),
                Column::new(
                    "late_busy_ns".into(),
                    (0..n)
                        .map(|i| self.late.get(i).and_then(|l| l.as_ref()).map(|l| l.busy_ns))
                        .collect::<Vec<_>>(),
                ),
                Column::new("late_ops".into(), late(|l| l.ops.clone())),
            ],
        )
    }

    fn rank_cols(&self) -> RankCols {
        let mut c = RankCols::default();
        let mut rows = self.stragglers.iter().peekable();
        while let Some((&(level, step, _), _)) = rows.peek() {
            let mut block: Vec<(i64, RankStats)> = vec![];
            while let Some((&(l, s, rank), stats)) = rows.peek() {
                if (l, s) != (level, step) {
                    break;
                }
                block.push((rank, **stats));
                rows.next();
            }
            for ((rank, s), place) in block.iter().zip(ranking(&block)) {
                c.push(level, step, *rank, s, place);
            }
        }
        c
    }
}

#[derive(Default)]
struct RankCols {
    rank: Vec<i64>,
    level: Vec<&'static str>,
    step: Vec<Option<i64>>,
    instances: Vec<i64>,
    times_last: Vec<i64>,
    caused: Vec<i64>,
    wait: Vec<i64>,
    transfer: Vec<i64>,
    place: Vec<i64>,
}

impl RankCols {
    /// The rows `rows` (one rank's) as one `collective_ranks` part, through ingest's writer
    /// like the per-kernel table: a 1,000-rank job has a part per rank.
    fn write_part(&self, rows: &[usize], path: &Path) -> Result<(), DatasetError> {
        let mut b = Cols::new(&COLLECTIVE_RANKS);
        let pick = |v: &[i64]| rows.iter().map(|&i| v[i]).collect::<Vec<_>>();
        b.str("level", rows.iter().map(|&i| self.level[i]));
        b.opt_i64("step", rows.iter().map(|&i| self.step[i]));
        b.i64("instances", pick(&self.instances));
        b.i64("times_last", pick(&self.times_last));
        b.i64("caused_ns", pick(&self.caused));
        b.i64("wait_ns", pick(&self.wait));
        b.i64("transfer_ns", pick(&self.transfer));
        b.i64("straggler_rank", pick(&self.place));
        write_all(&COLLECTIVE_RANKS, path, b.finish())?;
        Ok(())
    }

    fn push(&mut self, level: u8, step: Option<i64>, rank: i64, s: &RankStats, place: i64) {
        self.rank.push(rank);
        self.level.push(if level == 0 { "run" } else { "step" });
        self.step.push(step);
        self.instances.push(s.instances);
        self.times_last.push(s.times_last);
        self.caused.push(s.caused_ns);
        self.wait.push(s.wait_ns);
        self.transfer.push(s.transfer_ns);
        self.place.push(place);
    }
}

/// Writes the three tables of `jobs` into the dataset (replacing those runs' partitions)
/// and sets the `runs` clock columns; returns the small tables.
pub fn write(root: &Path, jobs: &[Job]) -> Result<Vec<CollectiveTables>, DatasetError> {
    let polars = |source| DatasetError::Polars {
        path: root.join(COLLECTIVES.name),
        source,
    };
    let runs: Vec<String> = jobs.iter().map(|j| j.run.clone()).collect();
    let staging = Staging::new(root)?;
    let mut out = vec![];
    for job in jobs {
        let ranks = job.rank_cols();
        let mut rows_of: HashMap<i64, Vec<usize>> = HashMap::new();
        for (i, &rank) in ranks.rank.iter().enumerate() {
            rows_of.entry(rank).or_default().push(i);
        }
        // Both per-rank tables, one part per rank each, written in parallel.
        let idx: Vec<usize> = (0..job.ranks.len()).collect();
        crate::par::map(&idx, |&r| {
            let rank = job.ranks[r].rank;
            job.write_kernels(r, &staging.part_path(COLLECTIVES.name, &job.run, rank))?;
            match rows_of.get(&rank) {
                Some(rows) => {
                    let path = staging.part_path(COLLECTIVE_RANKS.name, &job.run, rank);
                    ranks.write_part(rows, &path)
                }
                None => Ok(()),
            }
        })?;
        let t = CollectiveTables {
            instances: job.instance_frame().map_err(polars)?,
        };
        staging.write(COLLECTIVE_INSTANCES.name, &runs, &t.instances)?;
        out.push(t);
    }
    let names = [
        COLLECTIVES.name,
        COLLECTIVE_INSTANCES.name,
        COLLECTIVE_RANKS.name,
    ];
    staging.commit(&runs, &names)?;
    let mut rewritten = vec![];
    for job in jobs {
        let ranks: Vec<(i64, &super::Clock)> =
            job.ranks.iter().map(|r| r.rank).zip(&job.clocks).collect();
        crate::par::map(&ranks, |&(rank, c)| {
            let known = c.source != super::ClockSource::None;
            let cols = vec![
                Column::new("clock_offset_ns".into(), [known.then_some(c.offset_ns)]),
                Column::new("clock_offset_spread_ns".into(), [c.spread_ns]),
                Column::new("clock_source".into(), [Some(c.source.as_str())]),
            ];
            dataset::update_runs_partition(root, &job.run, rank, cols)
        })?
        .into_iter()
        .for_each(|files| rewritten.extend(files));
    }
    dataset::record_checksums(root, &rewritten)?;
    Ok(out)
}
