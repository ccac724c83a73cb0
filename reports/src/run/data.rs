//! The report's rows: overlap per step and per collective kind (read from the dataset when
//! `aorta overlap` wrote them, computed with `aorta_transform::overlap` otherwise) and GPU
//! time per category per step (summed from `gpu_activities`).

use std::path::Path;

use aorta_transform::collectives::Job;
use aorta_transform::{dataset, fresh, overlap};
use polars::prelude::*;

use super::{join, RunReportOptions};
use crate::error::ReportError;
use crate::frames::{f64_col, i64_col, str_col};

/// One row of `overlap_steps` (ns and ratios as the table holds them).
#[derive(Debug, Clone)]
pub(crate) struct StepRow {
    pub run: String,
    pub rank: i64,
    pub source: String,
    pub step: Option<i64>,
    pub window_ns: Option<i64>,
    pub comm_ns: Option<i64>,
    pub exposed_comm_ns: Option<i64>,
    pub compute_comm_overlap_ns: Option<i64>,
    pub gemm_comm_overlap_ns: Option<i64>,
    pub tp_overlap_ratio: Option<f64>,
    pub comm_hidden_pct: Option<f64>,
    pub compute_overlap_ratio: Option<f64>,
}

/// GPU time of one category in one step: the sum of its activities' durations.
#[derive(Debug, Clone)]
pub(crate) struct CategoryRow {
    pub run: String,
    pub rank: i64,
    pub step: Option<i64>,
    pub category: String,
    pub gpu_ns: i64,
}

/// One collective kind over a rank's whole window (`overlap_collectives`, level `rank`).
#[derive(Debug, Clone)]
pub(crate) struct CollectiveRow {
    pub run: String,
    pub rank: i64,
    pub comm_op: String,
    pub count: i64,
    pub comm_ns: i64,
    pub exposed_comm_ns: i64,
}

/// One rank's whole window (`overlap_ranks`, as `aorta overlap --by rank` prints it): what
/// the headline quotes for exposed communication.
#[derive(Debug, Clone)]
pub(crate) struct RankTotal {
    pub run: String,
    pub rank: i64,
    pub source: String,
    pub window_ns: Option<i64>,
    pub comm_ns: Option<i64>,
    pub exposed_comm_ns: Option<i64>,
    pub compute_comm_overlap_ns: Option<i64>,
    pub comm_hidden_pct: Option<f64>,
    pub comm_wait_ns: Option<i64>,
    pub exposed_transfer_ns: Option<i64>,
}

/// The most ranks one timeline draws; a larger job's ranks are sampled evenly (the first and
/// the last always), and the page says so.
pub(crate) const TIMELINE_RANKS: usize = 8;

/// The step the timeline shows, and why that one.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineTarget {
    /// The run the timeline is drawn from.
    pub run: String,
    /// The rank the step was chosen on (`--rank`, else the run's first rank).
    pub rank: i64,
    /// The ranks drawn, one lane group each: every reported rank that has the step, sampled
    /// evenly down to 8.
    pub ranks: Vec<i64>,
    /// How many reported ranks have the step (more than `ranks.len()` when sampled).
    pub ranks_with_step: usize,
    /// The step drawn; `None` when `whole_capture`.
    pub step: Option<i64>,
    /// `--step` or `median-duration step`.
    pub chosen_by: &'static str,
    /// The rank has no steps (a capture without ProfilerStep: rocprofv3, nsys, Chrome), so
    /// the timeline is the whole capture.
    pub whole_capture: bool,
}

/// (run, rank, step) of a trace step row: what the per-step charts may show.
pub(crate) type StepKey = (String, i64, Option<i64>);

pub(crate) struct RunData {
    /// The trace steps: activity outside them (kernels before the profiler's first step)
    /// is left out of every per-step chart, as of the step tables.
    pub step_keys: std::collections::HashSet<StepKey>,
    /// Per run and rank with steps, the GPU time (sum of durations) outside every step.
    pub outside: Vec<(String, i64, i64)>,
    pub runs: Vec<String>,
    pub ranks: Vec<i64>,
    pub steps: Vec<StepRow>,
    /// Each reported rank's whole window (`overlap_ranks`).
    pub totals: Vec<RankTotal>,
    pub categories: Vec<CategoryRow>,
    pub collectives: Vec<CollectiveRow>,
    /// Each run's collectives matched across its ranks.
    pub jobs: Vec<Job>,
    pub from_dataset: bool,
}

/// `run` is one of `runs` (an OR of equalities: `is_in` needs a polars feature the workspace
/// does not enable), and `rank` is `rank` when given.
pub(crate) fn keep(runs: &[String], rank: Option<i64>) -> Expr {
    let r = dataset::of_runs(runs);
    match rank {
        Some(k) => r.and(col("rank").eq(lit(k))),
        None => r,
    }
}

impl RunData {
    pub(super) fn load(root: &Path, opts: &RunReportOptions) -> Result<RunData, ReportError> {
        let runs = select_runs(root, &opts.runs)?;
        // Matched once: the cross-rank charts draw them, and computed overlap tables split
        // their comm time with them.
        let jobs = runs
            .iter()
            .map(|r| Job::analyze(root, r))
            .collect::<Result<Vec<_>, _>>()?;
        let fresh::StepsAndCollectives {
            steps,
            ranks: rank_frame,
            collectives: colls,
            stored: from_dataset,
        } = fresh::load_or_compute(root, &runs, &jobs)?;
        let all_steps = step_rows(&steps, &root.join("overlap_steps"))?;
        let mut ranks: Vec<i64> = all_steps.iter().map(|s| s.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        if let Some(k) = opts.rank.filter(|k| !ranks.contains(k)) {
            return Err(ReportError::UnknownRank {
                dataset: root.to_path_buf(),
                runs: runs.join(", "),
                rank: k,
                known: join(&ranks),
            });
        }
        if let Some(k) = opts.rank {
            ranks = vec![k];
        }
        let in_rank = |r: i64| opts.rank.is_none_or(|k| k == r);
        // A null step is the whole capture of a rank without steps, and outside the steps of
        // a rank with some: those rows stay out of every step chart and table.
        let stepped: std::collections::HashSet<(String, i64)> = all_steps
            .iter()
            .filter(|s| s.source == "trace" && s.step.is_some())
            .map(|s| (s.run.clone(), s.rank))
            .collect();
        let is_outside = |run: &str, rank: i64, step: Option<i64>| {
            step.is_none() && stepped.contains(&(run.to_string(), rank))
        };
        let steps: Vec<StepRow> = all_steps
            .into_iter()
            .filter(|s| {
                in_rank(s.rank) && !(s.source == "trace" && is_outside(&s.run, s.rank, s.step))
            })
            .collect();
        let totals = total_rows(&rank_frame, &root.join("overlap_ranks"))?
            .into_iter()
            .filter(|t| in_rank(t.rank))
            .collect();
        let collectives = collective_rows(&colls, &root.join("overlap_collectives"))?
            .into_iter()
            .filter(|c| in_rank(c.rank))
            .collect();
        let step_keys: std::collections::HashSet<StepKey> = steps
            .iter()
            .filter(|s| s.source == "trace")
            .map(|s| (s.run.clone(), s.rank, s.step))
            .collect();
        let mut categories = category_rows(root, &runs, opts.rank)?;
        let mut outside: Vec<(String, i64, i64)> = Vec::new();
        for c in categories
            .iter()
            .filter(|c| is_outside(&c.run, c.rank, c.step))
        {
            match outside.last_mut() {
                Some(o) if o.0 == c.run && o.1 == c.rank => o.2 += c.gpu_ns,
                _ => outside.push((c.run.clone(), c.rank, c.gpu_ns)),
            }
        }
        categories.retain(|c| step_keys.contains(&(c.run.clone(), c.rank, c.step)));
        Ok(RunData {
            step_keys,
            outside,
            runs,
            ranks,
            steps,
            totals,
            categories,
            collectives,
            jobs,
            from_dataset,
        })
    }

    /// Each run's timeline: its first rank with GPU activities, at `step` or else the step
    /// whose window is the median of that rank's step windows. `step` must exist in the first
    /// such run; the others fall back to their median step without it. Empty when the
    /// reported ranks have no GPU activities (JSONL logs only) and no step was asked.
    pub(super) fn timeline_targets(
        &self,
        root: &Path,
        step: Option<i64>,
    ) -> Result<Vec<TimelineTarget>, ReportError> {
        let trace: Vec<&StepRow> = self.steps.iter().filter(|s| s.source == "trace").collect();
        if trace.is_empty() && step.is_some() {
            return Err(ReportError::NoActivities(root.to_path_buf()));
        }
        let mut out = Vec::new();
        for run in &self.runs {
            let Some(first) = trace.iter().find(|s| &s.run == run) else {
                continue;
            };
            let rank = first.rank;
            let mine: Vec<&StepRow> = trace
                .iter()
                .filter(|s| &s.run == run && s.rank == rank)
                .copied()
                .collect();
            let asked = step.filter(|n| mine.iter().any(|s| s.step == Some(*n)));
            let chosen = asked.or_else(|| median_step(&mine));
            let mut with_step: Vec<i64> = trace
                .iter()
                .filter(|s| &s.run == run && s.step == chosen)
                .map(|s| s.rank)
                .collect();
            with_step.sort_unstable();
            with_step.dedup();
            if let (Some(n), None, true) = (step, asked, out.is_empty()) {
                return Err(ReportError::UnknownStep {
                    dataset: root.to_path_buf(),
                    run: run.clone(),
                    rank,
                    step: n,
                    known: join(&mine.iter().filter_map(|s| s.step).collect::<Vec<_>>()),
                });
            }
            out.push(TimelineTarget {
                run: run.clone(),
                rank,
                ranks: sample_evenly(&with_step, TIMELINE_RANKS),
                ranks_with_step: with_step.len(),
                step: chosen,
                chosen_by: if asked.is_some() {
                    "--step"
                } else {
                    "median-duration step"
                },
                whole_capture: mine.iter().all(|s| s.step.is_none()),
            });
        }
        Ok(out)
    }
}

/// At most `k` of `v`, evenly spaced, the first and the last included.
pub(crate) fn sample_evenly(v: &[i64], k: usize) -> Vec<i64> {
    if v.len() <= k || k < 2 {
        return v.iter().take(k).copied().collect();
    }
    (0..k).map(|i| v[i * (v.len() - 1) / (k - 1)]).collect()
}

/// The step whose window is the median (the lower one of an even count; ties by step).
fn median_step(rows: &[&StepRow]) -> Option<i64> {
    let mut v: Vec<(i64, Option<i64>)> = rows
        .iter()
        .map(|s| (s.window_ns.unwrap_or(0), s.step))
        .collect();
    v.sort();
    v.get(v.len().saturating_sub(1) / 2).and_then(|x| x.1)
}

/// The requested runs, checked against the dataset's `runs` table (all when none asked).
fn select_runs(root: &Path, asked: &[String]) -> Result<Vec<String>, ReportError> {
    let all = overlap::dataset_runs(root)?;
    if let Some(bad) = asked.iter().find(|r| !all.contains(r)) {
        return Err(ReportError::UnknownRun {
            dataset: root.to_path_buf(),
            run: bad.clone(),
            known: join(&all),
        });
    }
    let mut runs = if asked.is_empty() {
        all
    } else {
        asked.to_vec()
    };
    runs.dedup();
    Ok(runs)
}

fn step_rows(df: &DataFrame, path: &Path) -> Result<Vec<StepRow>, ReportError> {
    let s = |c| str_col(df, c, path);
    let i = |c| i64_col(df, c, path);
    let f = |c| f64_col(df, c, path);
    let (run, source) = (s("run")?, s("source")?);
    let (rank, step, window) = (i("rank")?, i("step")?, i("window_ns")?);
    let (comm, exposed) = (i("comm_ns")?, i("exposed_comm_ns")?);
    let (cc, gc) = (i("compute_comm_overlap_ns")?, i("gemm_comm_overlap_ns")?);
    let (or, pct, cor) = (
        f("tp_overlap_ratio")?,
        f("comm_hidden_pct")?,
        f("compute_overlap_ratio")?,
    );
    Ok((0..df.height())
        .map(|k| StepRow {
            run: run[k].clone(),
            rank: rank[k].unwrap_or(0),
            source: source[k].clone(),
            step: step[k],
            window_ns: window[k],
            comm_ns: comm[k],
            exposed_comm_ns: exposed[k],
            compute_comm_overlap_ns: cc[k],
            gemm_comm_overlap_ns: gc[k],
            tp_overlap_ratio: or[k],
            comm_hidden_pct: pct[k],
            compute_overlap_ratio: cor[k],
        })
        .collect())
}

fn total_rows(df: &DataFrame, path: &Path) -> Result<Vec<RankTotal>, ReportError> {
    let s = |c| str_col(df, c, path);
    let i = |c| i64_col(df, c, path);
    let (run, source, rank, window) = (s("run")?, s("source")?, i("rank")?, i("window_ns")?);
    let (comm, exposed, cc) = (
        i("comm_ns")?,
        i("exposed_comm_ns")?,
        i("compute_comm_overlap_ns")?,
    );
    let (wait, et) = (i("comm_wait_ns")?, i("exposed_transfer_ns")?);
    let pct = f64_col(df, "comm_hidden_pct", path)?;
    Ok((0..df.height())
        .map(|k| RankTotal {
            run: run[k].clone(),
            rank: rank[k].unwrap_or(0),
            source: source[k].clone(),
            window_ns: window[k],
            comm_ns: comm[k],
            exposed_comm_ns: exposed[k],
            compute_comm_overlap_ns: cc[k],
            comm_hidden_pct: pct[k],
            comm_wait_ns: wait[k],
            exposed_transfer_ns: et[k],
        })
        .collect())
}

fn collective_rows(df: &DataFrame, path: &Path) -> Result<Vec<CollectiveRow>, ReportError> {
    let (run, level, op) = (
        str_col(df, "run", path)?,
        str_col(df, "level", path)?,
        str_col(df, "comm_op", path)?,
    );
    let i = |c| i64_col(df, c, path);
    let (rank, count) = (i("rank")?, i("activity_count")?);
    let (comm, exposed) = (i("comm_ns")?, i("exposed_comm_ns")?);
    Ok((0..df.height())
        .filter(|&k| level[k] == "rank")
        .map(|k| CollectiveRow {
            run: run[k].clone(),
            rank: rank[k].unwrap_or(0),
            comm_op: op[k].clone(),
            count: count[k].unwrap_or(0),
            comm_ns: comm[k].unwrap_or(0),
            exposed_comm_ns: exposed[k].unwrap_or(0),
        })
        .collect())
}

/// Sum of `end_ns − start_ns` per run, rank, step and category.
fn category_rows(
    root: &Path,
    runs: &[String],
    rank: Option<i64>,
) -> Result<Vec<CategoryRow>, ReportError> {
    let path = root.join("gpu_activities");
    let keys = [col("run"), col("rank"), col("step"), col("category")];
    let df = dataset::scan(root, "gpu_activities")?
        .filter(keep(runs, rank))
        .group_by(keys)
        .agg([(col("end_ns") - col("start_ns")).sum().alias("gpu_ns")])
        .sort(
            ["run", "rank", "step", "category"],
            SortMultipleOptions::default().with_nulls_last(true),
        )
        .collect()
        .map_err(ReportError::polars(&path))?;
    let (run, cat) = (
        str_col(&df, "run", &path)?,
        str_col(&df, "category", &path)?,
    );
    let (rk, step, ns) = (
        i64_col(&df, "rank", &path)?,
        i64_col(&df, "step", &path)?,
        i64_col(&df, "gpu_ns", &path)?,
    );
    Ok((0..df.height())
        .map(|k| CategoryRow {
            run: run[k].clone(),
            rank: rk[k].unwrap_or(0),
            step: step[k],
            category: cat[k].clone(),
            gpu_ns: ns[k].unwrap_or(0),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::sample_evenly;

    #[test]
    fn ranks_are_sampled_evenly_with_both_ends() {
        let all: Vec<i64> = (0..16).collect();
        // i × 15 / 7 for i in 0..8: 0, 2, 4, 6, 8, 10, 12, 15.
        assert_eq!(sample_evenly(&all, 8), vec![0, 2, 4, 6, 8, 10, 12, 15]);
        assert_eq!(sample_evenly(&all[..5], 8), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_evenly(&[3, 9, 27], 2), vec![3, 27]);
    }
}
