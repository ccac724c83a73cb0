//! The views `aorta collectives --by` prints, as frames: per rank (stragglers and clocks),
//! per rank and step, per instance, and per collective kind (waiting against transfer).

use aorta_ingest::classify::COMM_OPS;
use polars::prelude::*;

use crate::rows::str_column;
use crate::summary::quantile;

use super::arrive::{ranking, RankStats};
use super::{Job, Status};

/// Waiting as a share of comm time, in percent (null without comm).
fn wait_pct(wait: i64, transfer: i64) -> Option<f64> {
    let total = wait + transfer;
    (total > 0).then(|| 100.0 * wait as f64 / total as f64)
}

impl Job {
    /// The run-level straggler rows, best first: (place, rank, stats).
    pub fn straggler_order(&self) -> Vec<(i64, i64, RankStats)> {
        let rows: Vec<(i64, RankStats)> = self
            .stragglers
            .iter()
            .filter(|((level, _, _), _)| *level == 0)
            .map(|((_, _, rank), s)| (*rank, *s))
            .collect();
        let mut out: Vec<(i64, i64, RankStats)> = rows
            .iter()
            .zip(ranking(&rows))
            .map(|((rank, s), place)| (place, *rank, *s))
            .collect();
        out.sort_by_key(|r| r.0);
        out
    }

    /// One row per rank: its straggler numbers over the run and its clock.
    pub fn rank_view(&self) -> PolarsResult<DataFrame> {
        let order = self.straggler_order();
        let stats = |rank: i64| order.iter().find(|o| o.1 == rank).map(|o| (o.0, o.2));
        let mut df = Rows::default();
        for (rk, c) in self.ranks.iter().zip(&self.clocks) {
            let (place, s) =
                stats(rk.rank).map_or((None, RankStats::default()), |x| (Some(x.0), x.1));
            df.int("rank", Some(rk.rank));
            df.int("straggler_rank", place);
            df.int("instances", Some(s.instances));
            df.int("times_last", Some(s.times_last));
            df.int("caused_ns", Some(s.caused_ns));
            df.int("wait_ns", Some(s.wait_ns));
            df.int("transfer_ns", Some(s.transfer_ns));
            df.float("wait_pct", wait_pct(s.wait_ns, s.transfer_ns));
            let known = c.source != super::ClockSource::None;
            df.int("clock_offset_ns", known.then_some(c.offset_ns));
            df.int("clock_offset_spread_ns", c.spread_ns);
            df.text("clock_source", c.source.as_str());
        }
        df.finish(&self.run)
    }

    /// One row per rank and step.
    pub fn step_view(&self) -> PolarsResult<DataFrame> {
        let mut df = Rows::default();
        let mut block: Vec<(i64, RankStats)> = vec![];
        let flush = |df: &mut Rows, step: Option<i64>, block: &mut Vec<(i64, RankStats)>| {
            for ((rank, s), place) in block.iter().zip(ranking(block)) {
                df.int("step", step);
                df.int("rank", Some(*rank));
                df.int("straggler_rank", Some(place));
                df.int("times_last", Some(s.times_last));
                df.int("caused_ns", Some(s.caused_ns));
                df.int("wait_ns", Some(s.wait_ns));
                df.int("transfer_ns", Some(s.transfer_ns));
                df.float("wait_pct", wait_pct(s.wait_ns, s.transfer_ns));
            }
            block.clear();
        };
        let mut cur: Option<Option<i64>> = None;
        for ((level, step, rank), s) in &self.stragglers {
            if *level != 1 {
                continue;
            }
            if cur.is_some_and(|c| c != *step) {
                flush(&mut df, cur.flatten(), &mut block);
            }
            cur = Some(*step);
            block.push((*rank, *s));
        }
        flush(&mut df, cur.flatten(), &mut block);
        df.finish(&self.run)
    }

    /// One row per collective kind: instances, waiting and transfer summed over kernels,
    /// the median skew and bus bandwidth over instances.
    pub fn kind_view(&self) -> PolarsResult<DataFrame> {
        let mut df = Rows::default();
        for (kind, name) in COMM_OPS.iter().enumerate() {
            let insts: Vec<usize> = (0..self.instances.len())
                .filter(|&i| self.instances[i].kind as usize == kind)
                .collect();
            if insts.is_empty() {
                continue;
            }
            let (mut wait, mut transfer, mut kernels) = (0, 0, 0);
            for (r, rk) in self.ranks.iter().enumerate() {
                for k in rk.kernels.iter().filter(|k| k.kind as usize == kind) {
                    kernels += 1;
                    if let Some((w, _)) = self.timing(r, k) {
                        wait += w;
                        transfer += k.end - k.start - w;
                    }
                }
            }
            let paired = insts.iter().filter(|&&i| self.status[i] == Status::Paired);
            let mut skew: Vec<f64> = paired
                .clone()
                .filter_map(|&i| self.arrivals[i].map(|a| (a.last - a.first) as f64))
                .collect();
            skew.sort_by(f64::total_cmp);
            let mut bus: Vec<f64> = paired.filter_map(|&i| self.busbw(i)).collect();
            bus.sort_by(f64::total_cmp);
            let med = |v: &[f64]| (!v.is_empty()).then(|| quantile(v, 0.5));
            df.text("kind", name);
            df.int("instances", Some(insts.len() as i64));
            df.int("kernels", Some(kernels));
            df.int("wait_ns", Some(wait));
            df.int("transfer_ns", Some(transfer));
            df.float("wait_pct", wait_pct(wait, transfer));
            df.float("median_skew_ns", med(&skew));
            df.float("median_busbw_gbps", med(&bus));
        }
        df.finish(&self.run)
    }

    /// Bus bandwidth of instance `i` on its transfer time.
    pub(crate) fn busbw(&self, i: usize) -> Option<f64> {
        let inst = &self.instances[i];
        let a = self.arrivals[i]?;
        let alg = crate::nccl::gbps(inst.bytes, Some(a.transfer))?;
        let n = self.groups[inst.group as usize].size?;
        Some(alg * crate::nccl::bus_factor(COMM_OPS[inst.kind as usize], n))
    }
}

/// Columns filled row by row, in first-use order.
#[derive(Default)]
struct Rows {
    cols: Vec<(&'static str, Cells)>,
}

enum Cells {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Text(Vec<String>),
}

impl Rows {
    fn slot(&mut self, name: &'static str, empty: fn() -> Cells) -> &mut Cells {
        let i = match self.cols.iter().position(|c| c.0 == name) {
            Some(i) => i,
            None => {
                self.cols.push((name, empty()));
                self.cols.len() - 1
            }
        };
        &mut self.cols[i].1
    }

    fn int(&mut self, name: &'static str, v: Option<i64>) {
        if let Cells::Int(c) = self.slot(name, || Cells::Int(vec![])) {
            c.push(v);
        }
    }

    fn float(&mut self, name: &'static str, v: Option<f64>) {
        if let Cells::Float(c) = self.slot(name, || Cells::Float(vec![])) {
            c.push(v);
        }
    }

    fn text(&mut self, name: &'static str, v: &str) {
        if let Cells::Text(c) = self.slot(name, || Cells::Text(vec![])) {
            c.push(v.to_string());
        }
    }

    fn finish(self, run: &str) -> PolarsResult<DataFrame> {
        let n = self.cols.first().map_or(0, |c| match &c.1 {
            Cells::Int(v) => v.len(),
            Cells::Float(v) => v.len(),
            Cells::Text(v) => v.len(),
        });
        let mut cols = vec![str_column("run", vec![run; n])];
        for (name, cells) in self.cols {
            cols.push(match cells {
                Cells::Int(v) => Column::new(name.into(), v),
                Cells::Float(v) => Column::new(name.into(), v),
                Cells::Text(v) => str_column(name, v),
            });
        }
        DataFrame::new_infer_height(cols)
    }
}
