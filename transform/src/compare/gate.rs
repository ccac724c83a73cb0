//! The regression gate of `aorta compare --fail-if-regressed SPEC`: chosen metrics of the
//! candidate against the reference's.
//!
//! SPEC is a bare percentage (`5`: the median step time and exposed communication may not
//! grow by more than 5 %), or rules `KEY=PCT` separated by commas: a key of the steps level
//! (`step_ms=5`), a category (`category.gemm=3`), a subcategory of other_compute
//! (`subcategory.normalization=5`), a collective kind's bandwidth or time
//! (`collective.all_reduce.busbw=-10`) or an operator (`op.aten::mm=5`). A positive PCT
//! fails on growth past it, a negative one on a drop past it (for bandwidth, where more is
//! better).
//!
//! With several pairs of runs (`pairs`), a rule judges the overall change: the geometric mean
//! of the pairs' ratios (the overall row of the levels), each pair's ratio being its
//! candidate / reference for the metric. A pair whose reference is 0 has no ratio; with a
//! threshold ≥ 0 it fails the rule when its candidate is above 0 (growth from nothing), as
//! a single pair does.
//!
//! It lives here, not in the CLI, so that the verdict written into summary.json and the exit
//! status come from one function that tests can call.

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::overall::geomean;
use super::summary_json::{per_pair, LevelEntry, Summary};
use super::Comparison;
use crate::rows::{floats, ints, strs};

/// The keys a bare percentage gates, in the steps level.
pub const GATED: [&str; 2] = ["step_ms", "exposed_comm_ms"];

/// Below this share of operators found on both sides, the verdict warns that the sides
/// barely match.
pub const FEW_MATCHED: f64 = 0.5;

/// What one rule measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A key of the steps level (`step_ms`, `exposed_comm_ms`, `comm_hidden_pct`, …).
    Step(String),
    /// `category.NAME`: the category's GPU ms per step.
    Category(String),
    /// `subcategory.NAME`: an other_compute subcategory's GPU ms per step.
    Subcategory(String),
    /// `collective.KIND.STAT`: the kind's bandwidth or time per call, over all its sizes.
    Collective(String, CollStat),
    /// `op.NAME`: the operator's GPU ms per step window, summed over its input shapes.
    Operator(String),
}

/// A collective kind's aggregate: bus or algorithm bandwidth (bytes over transfer time,
/// summed over every call of known size), or the mean transfer time per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollStat {
    /// Bus bandwidth, GB/s (algorithm bandwidth × the NCCL bus factor): a drop regresses.
    Busbw,
    /// Algorithm bandwidth, GB/s (bytes over transfer time): a drop regresses.
    Algbw,
    /// Mean transfer time per call, ms: growth regresses.
    Ms,
}

/// One rule of SPEC.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The key as written.
    pub(crate) key: String,
    pub(crate) metric: Metric,
    pub(crate) threshold_pct: f64,
    /// Written by the user (an absent metric is an error), not implied by a bare percentage
    /// (an absent metric is skipped).
    pub(crate) explicit: bool,
}

/// A SPEC or a key that cannot be gated.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GateError {
    /// SPEC is neither a percentage nor KEY=PCT rules. Holds SPEC.
    #[error("--fail-if-regressed `{0}`: expected a percentage (`5`) or KEY=PCT rules separated by commas (`step_ms=5,category.gemm=3,subcategory.normalization=5,collective.all_reduce.busbw=-10,op.aten::mm=5`)")]
    Syntax(String),
    /// An explicit rule names a key that one side or both lack.
    #[error("--fail-if-regressed: `{key}` is not in this comparison ({known})")]
    Absent {
        /// The rule's key.
        key: String,
        /// The keys of the rule's kind that both sides have, as the message lists them.
        known: String,
    },
    /// An explicit rule's metric is there but no change can be computed from it.
    #[error("--fail-if-regressed: `{key}` cannot be evaluated: {why}")]
    Unevaluable {
        /// The rule's key.
        key: String,
        /// Why no change can be computed.
        why: String,
    },
}

/// Parses SPEC (see the module docs).
pub fn parse(spec: &str) -> Result<Vec<Rule>, GateError> {
    let bad = || GateError::Syntax(spec.to_string());
    if let Ok(pct) = spec.trim().parse::<f64>() {
        let rules = GATED.iter().map(|k| Rule {
            key: k.to_string(),
            metric: Metric::Step(k.to_string()),
            threshold_pct: pct,
            explicit: false,
        });
        return pct.is_finite().then(|| rules.collect()).ok_or_else(bad);
    }
    let rule = |item: &str| -> Option<Rule> {
        let (key, pct) = item.trim().rsplit_once('=')?;
        let threshold_pct = pct.trim().parse::<f64>().ok().filter(|p| p.is_finite())?;
        let key = key.trim().to_string();
        Some(Rule {
            metric: metric(&key)?,
            key,
            threshold_pct,
            explicit: true,
        })
    };
    spec.split(',').map(|i| rule(i).ok_or_else(bad)).collect()
}

fn metric(key: &str) -> Option<Metric> {
    if let Some(name) = key.strip_prefix("category.") {
        return (!name.is_empty()).then(|| Metric::Category(name.into()));
    }
    if let Some(name) = key.strip_prefix("subcategory.") {
        return (!name.is_empty()).then(|| Metric::Subcategory(name.into()));
    }
    if let Some(name) = key.strip_prefix("op.") {
        return (!name.is_empty()).then(|| Metric::Operator(name.into()));
    }
    if let Some(rest) = key.strip_prefix("collective.") {
        let (kind, stat) = rest.rsplit_once('.')?;
        let stat = match stat {
            "busbw" => CollStat::Busbw,
            "algbw" => CollStat::Algbw,
            "ms" => CollStat::Ms,
            _ => return None,
        };
        return (!kind.is_empty()).then(|| Metric::Collective(kind.into(), stat));
    }
    (!key.is_empty() && !key.contains('.')).then(|| Metric::Step(key.into()))
}

/// The gate's verdict, as summary.json's `regression` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// One check per rule whose metric both sides have.
    pub checks: Vec<Check>,
    /// Why the verdict may mean little (few operators matched between the sides).
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Regression {
    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.regressed)
    }
}

fn one() -> usize {
    1
}

/// One gated key: both values (one pair), the change, and whether it passes the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The rule's key as written (`step_ms`, `category.gemm`, …).
    pub key: String,
    /// `ms`, `GB/s`, `pct`, `ratio`.
    pub unit: String,
    /// The reference's and the candidate's value with one pair; null with several (each pair
    /// has its own, in the levels).
    pub reference: Option<f64>,
    /// The candidate's value, as `reference`.
    pub candidate: Option<f64>,
    /// The pairs whose both sides have the metric.
    #[serde(default = "one")]
    pub pairs: usize,
    /// 100 · (ratio − 1), the ratio being candidate / reference with one pair, the geometric
    /// mean of the pairs' ratios with several; `None` when no pair has a ratio (reference 0).
    pub change_pct: Option<f64>,
    /// Growth past it fails when ≥ 0; a drop past it when < 0.
    pub threshold_pct: f64,
    /// The change passes the threshold (or, with a threshold ≥ 0, a pair grew from 0).
    pub regressed: bool,
}

/// Checks every rule against the comparison; an explicit rule whose metric is absent on
/// either side of every pair is an error naming what could be gated, and one whose metric
/// gives no change (its reference is 0 in every pair and its candidate too) is an error
/// saying so.
pub fn regressions(c: &Comparison, rules: &[Rule]) -> Result<Regression, GateError> {
    let mut checks = Vec::new();
    for rule in rules {
        match values(c, &rule.metric) {
            Some((unit, pairs)) => {
                let ch = check(rule, unit, &pairs);
                // A rule the user wrote that judges nothing must not pass in silence.
                if rule.explicit && ch.change_pct.is_none() && !ch.regressed {
                    return Err(GateError::Unevaluable {
                        key: rule.key.clone(),
                        why: format!(
                            "its reference value is 0 in every pair ({} pair(s)), so it has no change to judge",
                            pairs.len()
                        ),
                    });
                }
                checks.push(ch)
            }
            None if rule.explicit => {
                return Err(GateError::Absent {
                    key: rule.key.clone(),
                    known: known(c, &rule.metric),
                })
            }
            None => {}
        }
    }
    Ok(Regression {
        checks,
        warnings: warnings(&c.summary),
    })
}

/// The check of one rule over the pairs' (reference, candidate) values.
fn check(rule: &Rule, unit: String, pairs: &[(f64, f64)]) -> Check {
    let ratios: Vec<f64> = pairs
        .iter()
        .filter(|p| p.0 != 0.0)
        .map(|(r, c)| c / r)
        .collect();
    let change_pct = geomean(&ratios).map(|g| 100.0 * (g - 1.0));
    let t = rule.threshold_pct;
    let from_zero = pairs.iter().any(|&(r, c)| r == 0.0 && c > 0.0);
    let regressed = match change_pct {
        Some(ch) if t >= 0.0 => ch > t,
        Some(ch) => ch < t,
        None => false,
    } || (t >= 0.0 && from_zero);
    let single = |f: fn(&(f64, f64)) -> f64| (pairs.len() == 1).then(|| f(&pairs[0]));
    Check {
        key: rule.key.clone(),
        unit,
        reference: single(|p| p.0),
        candidate: single(|p| p.1),
        pairs: pairs.len(),
        change_pct,
        threshold_pct: t,
        regressed,
    }
}

/// (unit, per pair (reference, candidate)) of a metric, over the pairs whose both sides have
/// it; `None` when no pair does.
fn values(c: &Comparison, m: &Metric) -> Option<(String, Vec<(f64, f64)>)> {
    let levels = &c.summary.levels;
    let medians = |level: &[LevelEntry], key: &str| {
        let mut unit = String::new();
        let v: Vec<(f64, f64)> = per_pair(level, key)
            .filter_map(|e| {
                unit.clone_from(&e.unit);
                Some((e.reference?.median, e.candidate?.median))
            })
            .collect();
        (unit, v)
    };
    let workloads: Vec<&str> = c
        .summary
        .pairs
        .iter()
        .flat_map(|p| p.pairs.iter().map(|e| e.workload.as_str()))
        .collect();
    let (unit, pairs) = match m {
        Metric::Step(k) => medians(&levels.steps, k),
        Metric::Category(k) => medians(&levels.categories, k),
        Metric::Subcategory(k) => medians(&levels.subcategories, k),
        Metric::Collective(kind, stat) => {
            let side = |w, s| collective(&c.collectives, s, w, kind, *stat);
            let v = workloads
                .iter()
                .filter_map(|w| Some((side(w, "reference")?, side(w, "candidate")?)));
            let unit = if *stat == CollStat::Ms { "ms" } else { "GB/s" };
            (unit.into(), v.collect())
        }
        Metric::Operator(op) => {
            let v = workloads
                .iter()
                .filter_map(|w| operator(&c.operators, w, op));
            ("ms".into(), v.collect())
        }
    };
    (!pairs.is_empty()).then_some((unit, pairs))
}

/// A kind's aggregate on one side of one pair in `compare_collectives`: Σ count·bytes(·factor)
/// over Σ count·time for bandwidth (the calls of known size), Σ count·time / Σ count for ms.
fn collective(
    df: &DataFrame,
    side: &str,
    workload: &str,
    kind: &str,
    stat: CollStat,
) -> Option<f64> {
    let (sides, ops, count) = (strs(df, "side"), strs(df, "comm_op"), ints(df, "count"));
    let pair = strs(df, "workload");
    let (ms, alg, bus) = (
        floats(df, "mean_ms"),
        floats(df, "algbw_gbps"),
        floats(df, "busbw_gbps"),
    );
    let rows = (0..df.height())
        .filter(|&i| sides[i] == Some(side) && pair[i] == Some(workload) && ops[i] == Some(kind));
    let (mut num, mut den) = (0.0, 0.0);
    for i in rows {
        let (n, t) = (count[i].unwrap_or(0) as f64, ms[i].unwrap_or(0.0));
        let rate = match stat {
            CollStat::Ms => Some(1.0),
            CollStat::Algbw => alg[i],
            CollStat::Busbw => bus[i],
        };
        let Some(rate) = rate else { continue };
        match stat {
            CollStat::Ms => (num, den) = (num + n * t, den + n),
            _ => (num, den) = (num + n * t * rate, den + n * t),
        }
    }
    (den > 0.0).then(|| num / den)
}

/// An operator's ms per step window on each side of one pair, summed over its input shapes;
/// `None` unless both sides ran it.
fn operator(df: &DataFrame, workload: &str, op: &str) -> Option<(f64, f64)> {
    let (ops, pair) = (strs(df, "op"), strs(df, "workload"));
    let (r, c) = (floats(df, "reference_ms"), floats(df, "candidate_ms"));
    let rows: Vec<usize> = (0..df.height())
        .filter(|&i| ops[i] == Some(op) && pair[i] == Some(workload))
        .collect();
    let sum = |v: &[Option<f64>]| {
        let vals: Vec<f64> = rows.iter().filter_map(|&i| v[i]).collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>())
    };
    Some((sum(&r)?, sum(&c)?))
}

/// What the comparison could gate for a metric of this kind, for the error.
fn known(c: &Comparison, m: &Metric) -> String {
    let both = |e: &LevelEntry| e.reference.is_some() && e.candidate.is_some();
    let keys = |prefix: &str, es: &[LevelEntry]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for e in es.iter().filter(|e| both(e)) {
            let k = format!("{prefix}{}", e.key);
            if !v.contains(&k) {
                v.push(k);
            }
        }
        v
    };
    let levels = &c.summary.levels;
    let list = match m {
        Metric::Step(_) => keys("", &levels.steps),
        Metric::Category(_) => keys("category.", &levels.categories),
        Metric::Subcategory(_) => keys("subcategory.", &levels.subcategories),
        Metric::Collective(..) => {
            let mut kinds: Vec<String> = strs(&c.collectives, "comm_op")
                .into_iter()
                .flatten()
                .map(|k| format!("collective.{k}.busbw|algbw|ms"))
                .collect();
            kinds.sort();
            kinds.dedup();
            kinds
        }
        Metric::Operator(_) => {
            let n = c.summary.operators.matched;
            vec![format!(
                "op.NAME for the {n} operators both sides ran: compare_operators.parquet"
            )]
        }
    };
    if list.is_empty() {
        "none of this kind".into()
    } else {
        format!("gateable: {}", list.join(", "))
    }
}

/// A warning when the sides barely match: few operators (by name, shapes and dtypes) ran on
/// both, so the gated numbers may come from different work.
fn warnings(s: &Summary) -> Vec<String> {
    let o = &s.operators;
    let total = o.matched + o.reference_only + o.candidate_only;
    let share = o.matched as f64 / total.max(1) as f64;
    if total == 0 || share >= FEW_MATCHED {
        return vec![];
    }
    vec![format!(
        "only {} of {total} operators (name, shapes, dtypes) ran on both sides ({:.0} %): the gated numbers may come from different work",
        o.matched,
        100.0 * share
    )]
}
