//! Copy overlap: how much of the memcpy time ran under compute, per run, rank and step.
//!
//! The overlap tables are about communication; a run that moves data with copy engines
//! (host-to-device prefetch, SDMA copies, offloading) asks the same question of its copies:
//! copy time (the union of its memcpy activities, all streams), the part of it when a compute
//! kernel (gemm, attention, other compute) runs, and the exposed rest. Drawn only for runs
//! that copy: copy time at least `MIN_COPY_SHARE` of compute time (an FSDP step's few
//! parameter copies are not worth a chart).

use std::collections::BTreeMap;
use std::path::Path;

use aorta_transform::comm_split::union;
use aorta_transform::dataset;
use aorta_transform::sweep::{intersection, length};
use plotly::common::Marker;
use plotly::{Bar, Plot};
use polars::prelude::*;

use super::charts::{per_run, step_label, with_share, Many};
use super::data::{keep, RunData};
use crate::error::ReportError;
use crate::fmt;
use crate::frames::{i64_col, str_col};
use crate::page::Page;

/// The least copy time, as a share of compute time, that earns the chart.
pub(crate) const MIN_COPY_SHARE: f64 = 0.01;

/// Categories a copy can hide under.
const COMPUTE: [&str; 3] = ["gemm", "attention", "other_compute"];

/// One rank-step's copy time and its overlap with compute.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CopyRow {
    pub run: String,
    pub rank: i64,
    pub step: Option<i64>,
    pub copies: usize,
    pub copy_ns: i64,
    pub hidden_ns: i64,
    /// The time at least one compute kernel runs.
    pub compute_ns: i64,
}

impl CopyRow {
    fn exposed_ns(&self) -> i64 {
        self.copy_ns - self.hidden_ns
    }

    fn hidden_pct(&self) -> Option<f64> {
        (self.copy_ns > 0).then(|| 100.0 * self.hidden_ns as f64 / self.copy_ns as f64)
    }
}

/// One activity: (run, rank, step), category, start, end.
pub(crate) type Act = ((String, i64, Option<i64>), String, i64, i64);

/// Whether these rows copy enough to be charted (see `MIN_COPY_SHARE`).
pub(crate) fn copies_enough(rows: &[CopyRow]) -> bool {
    let sum = |f: fn(&CopyRow) -> i64| rows.iter().map(f).sum::<i64>() as f64;
    let copy = sum(|r| r.copy_ns);
    copy > 0.0 && copy >= MIN_COPY_SHARE * sum(|r| r.compute_ns)
}

/// Copy rows of the activities, in (run, rank, step) order; empty without any memcpy.
pub(crate) fn copy_rows(acts: &[Act]) -> Vec<CopyRow> {
    type Segs = (usize, Vec<(i64, i64)>, Vec<(i64, i64)>);
    let mut by: BTreeMap<&(String, i64, Option<i64>), Segs> = BTreeMap::new();
    for (key, cat, s, e) in acts {
        let entry = by.entry(key).or_default();
        if cat == "memcpy" {
            entry.0 += 1;
            entry.1.push((*s, *e));
        } else if COMPUTE.contains(&cat.as_str()) {
            entry.2.push((*s, *e));
        }
    }
    if by.values().all(|v| v.0 == 0) {
        return Vec::new();
    }
    by.into_iter()
        .map(|(k, (n, copy, compute))| {
            let (copy, compute) = (union(copy), union(compute));
            CopyRow {
                run: k.0.clone(),
                rank: k.1,
                step: k.2,
                copies: n,
                copy_ns: length(&copy),
                hidden_ns: intersection(&copy, &compute),
                compute_ns: length(&compute),
            }
        })
        .collect()
}

/// The activities of the reported runs and rank.
fn load(root: &Path, runs: &[String], rank: Option<i64>) -> Result<Vec<Act>, ReportError> {
    let path = root.join("gpu_activities");
    let df = dataset::scan(root, "gpu_activities")?
        .filter(keep(runs, rank))
        .select([
            col("run"),
            col("rank"),
            col("step"),
            col("category"),
            col("start_ns"),
            col("end_ns"),
        ])
        .collect()
        .map_err(ReportError::polars(&path))?;
    let (run, cat) = (
        str_col(&df, "run", &path)?,
        str_col(&df, "category", &path)?,
    );
    let (rk, step) = (i64_col(&df, "rank", &path)?, i64_col(&df, "step", &path)?);
    let (s, e) = (
        i64_col(&df, "start_ns", &path)?,
        i64_col(&df, "end_ns", &path)?,
    );
    Ok((0..df.height())
        .filter_map(|i| {
            let (s, e) = (s[i]?, e[i]?);
            let key = (run[i].clone(), rk[i].unwrap_or(0), step[i]);
            Some((key, cat[i].clone(), s, e.max(s)))
        })
        .collect())
}

/// Exposed copy and copy∩compute stacked per step, the hidden share as markers.
fn copy_plot(rows: &[&CopyRow], title: Option<&str>) -> Plot {
    let many = Many::of(rows.iter().map(|r| (r.run.as_str(), r.rank)));
    let x: Vec<String> = rows
        .iter()
        .map(|r| step_label(&r.run, r.rank, r.step, many))
        .collect();
    let ms = |v: i64| v as f64 / 1e6;
    let mut plot = Plot::new();
    for (name, y, color) in [
        (
            "exposed copy",
            rows.iter().map(|r| ms(r.exposed_ns())).collect::<Vec<_>>(),
            "#ff7f0e",
        ),
        (
            "copy∩compute",
            rows.iter().map(|r| ms(r.hidden_ns)).collect(),
            "#2ca02c",
        ),
    ] {
        plot.add_trace(
            Bar::new(x.clone(), y)
                .name(name)
                .marker(Marker::new().color(color)),
        );
    }
    let points = rows
        .iter()
        .zip(&x)
        .map(|(r, l)| (r.run.as_str(), r.rank, l.clone(), r.hidden_pct()))
        .collect();
    with_share(&mut plot, points, many, "copy hidden", 380, x.len(), title);
    plot
}

/// The copy-overlap chart and table, when the reported ranks copy at all.
pub(crate) fn chart(page: &mut Page, root: &Path, d: &RunData) -> Result<(), ReportError> {
    let rank = (d.ranks.len() == 1).then(|| d.ranks[0]);
    let mut acts = load(root, &d.runs, rank)?;
    acts.retain(|a| d.step_keys.contains(&a.0));
    let rows = copy_rows(&acts);
    if !copies_enough(&rows) {
        return Ok(());
    }
    page.section("Copy overlap per step");
    page.note(
        "For runs that copy (memcpy: host↔device, device↔device, SDMA): copy = the time at \
         least one copy runs (union over all streams); hidden = the part of it when a compute \
         kernel (gemm, attention, other compute) runs; exposed = the rest. Markers: the hidden \
         share, right axis, one series per run and rank.",
    );
    let refs: Vec<&CopyRow> = rows.iter().collect();
    per_run(page, &refs, |r| &r.run, |r| r.copy_ns > 0, copy_plot);
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.run.clone(),
                r.rank.to_string(),
                fmt::opt(r.step, |s| s.to_string()),
                r.copies.to_string(),
                fmt::ms_ns(r.copy_ns),
                fmt::ms_ns(r.exposed_ns()),
                fmt::ms_ns(r.hidden_ns),
                fmt::opt(r.hidden_pct(), fmt::pct),
            ]
        })
        .collect();
    page.table(
        &[
            "run",
            "rank",
            "step",
            "copies",
            "copy",
            "exposed_copy",
            "copy∩compute",
            "copy_hidden_pct",
        ],
        &table,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(step: Option<i64>, cat: &str, s: i64, e: i64) -> Act {
        (("r".into(), 0, step), cat.into(), s, e)
    }

    /// Worked by hand: copies [0,10) and [5,20) on two streams make 20 ns of copy time;
    /// compute [8,12) (gemm) and [15,30) (other_compute) cover 8..12 and 15..20 of it: 9 ns
    /// hidden, 11 exposed. A comm kernel hides nothing. Step 2 has no copy.
    #[test]
    fn copy_time_is_a_union_and_hidden_is_its_intersection_with_compute() {
        let acts = vec![
            act(Some(1), "memcpy", 0, 10),
            act(Some(1), "memcpy", 5, 20),
            act(Some(1), "gemm", 8, 12),
            act(Some(1), "other_compute", 15, 30),
            act(Some(1), "comm", 0, 20),
            act(Some(2), "gemm", 40, 50),
        ];
        let rows = copy_rows(&acts);
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.copies, r.copy_ns, r.hidden_ns), (2, 20, 9));
        assert_eq!(r.compute_ns, 4 + 15);
        assert_eq!(r.exposed_ns(), 11);
        assert_eq!(r.hidden_pct(), Some(45.0));
        assert_eq!((rows[1].copy_ns, rows[1].hidden_pct()), (0, None));
    }

    #[test]
    fn no_copies_no_rows_and_a_few_copies_no_chart() {
        assert!(copy_rows(&[act(None, "gemm", 0, 5)]).is_empty());
        // 1 ns of copy against 100 of compute is 1 %: charted; 1 against 101 is not.
        let few = |end| copy_rows(&[act(None, "memcpy", 0, 1), act(None, "gemm", 0, end)]);
        assert!(copies_enough(&few(100)));
        assert!(!copies_enough(&few(101)));
    }
}
