//! Pairing and comparability: which run of the reference is compared with which run of the
//! candidate, and whether their step ratios mean anything.
//!
//! Pooling every run a selector names made nonsense: `--reference cuda --candidate rocm` over
//! two models per side took the median of bert's 4 ms and qwen's 35 ms steps. So runs are
//! paired by workload (the last component of the label: `cuda/h100_models/bert-small` and
//! `rocm/mi300x_models/bert-small` are both `bert-small`; one run per side pairs whatever its
//! name), only paired runs enter the comparison, and each pair gets its own ratio; the overall
//! ratio is their geometric mean. Before any ratio, the pairs are checked: the same world size,
//! the same step structure (ProfilerStep steps on both sides or on neither), and an operator
//! mix that overlaps (most of each side's operator time in operators the other side ran too).
//! A failed check refuses the ratios unless forced, and says why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::levels::{StepRows, STEP_KEYS};
use super::operators::OpRow;
use super::select::Side;
use super::summary_json::SpreadSummary;
use crate::summary::spread;

/// Below this share of a side's operator GPU time in matched operators, the two sides run
/// different programs.
pub const MIN_MATCHED_SHARE: f64 = 0.5;

/// Runs paired across the sides, and the runs left over.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Pairing {
    /// (workload, reference run, candidate run).
    pub pairs: Vec<(String, String, String)>,
    pub unpaired_reference: Vec<String>,
    pub unpaired_candidate: Vec<String>,
}

/// The workload a run label names: its last component.
pub(super) fn workload(run: &str) -> &str {
    run.rsplit('/').next().unwrap_or(run)
}

/// Pairs the runs of two sides by workload; one run per side pairs whatever its name. A name
/// that several runs of one side share pairs nothing (which of them would it be?).
pub(super) fn pair(reference: &Side, candidate: &Side) -> Pairing {
    if let ([r], [c]) = (reference.runs.as_slice(), candidate.runs.as_slice()) {
        return Pairing {
            pairs: vec![(workload(r).to_string(), r.clone(), c.clone())],
            ..Pairing::default()
        };
    }
    let (rm, cm) = (by_name(reference), by_name(candidate));
    let mut out = Pairing::default();
    for (name, rs) in &rm {
        match (rs.as_slice(), cm.get(name).map(Vec::as_slice)) {
            ([r], Some([c])) => out
                .pairs
                .push((name.to_string(), r.to_string(), c.to_string())),
            _ => out
                .unpaired_reference
                .extend(rs.iter().map(|r| r.to_string())),
        }
    }
    let paired: Vec<&String> = out.pairs.iter().map(|p| &p.2).collect();
    out.unpaired_candidate = candidate
        .runs
        .iter()
        .filter(|r| !paired.contains(r))
        .cloned()
        .collect();
    out
}

/// A side's runs by workload name.
fn by_name(s: &Side) -> BTreeMap<&str, Vec<&String>> {
    let mut m: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for r in &s.runs {
        m.entry(workload(r)).or_default().push(r);
    }
    m
}

/// One pair's step times and their ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairEntry {
    /// The runs' shared last label component (`bert-small`), what pairs them.
    pub workload: String,
    /// The reference side's run.
    pub reference: String,
    /// The candidate side's run.
    pub candidate: String,
    /// Median step_ms of each side (over its ranks and steps).
    pub reference_step_ms: Option<f64>,
    /// As `reference_step_ms`, for the candidate.
    pub candidate_step_ms: Option<f64>,
    /// candidate / reference; null when refused or a side has no steps.
    pub step_ratio: Option<f64>,
    /// Why this pair is not comparable (empty: it is).
    pub problems: Vec<String>,
}

/// The pairs, the overall ratio, and the comparability verdict (summary.json `pairs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairsSummary {
    /// One entry per pair, by workload.
    pub pairs: Vec<PairEntry>,
    /// Reference runs with no candidate run to pair with.
    pub unpaired_reference: Vec<String>,
    /// Candidate runs with no reference run to pair with.
    pub unpaired_candidate: Vec<String>,
    /// Geometric mean of the pairs' step ratios.
    pub step_ratio_geomean: Option<f64>,
    /// Spread of the pairs' step ratios.
    pub step_ratio_spread: Option<SpreadSummary>,
    /// Whether the ratios can be trusted; when not, `reasons` says why.
    pub comparable: bool,
    /// Why the sides are not comparable (different world sizes, step structures or operator
    /// mixes); empty when they are.
    pub reasons: Vec<String>,
    /// `--force`: the ratios were computed although the check failed.
    pub forced: bool,
}

/// Checks the pairs and computes their ratios; refuses them (nulls) when a check fails and
/// `force` is off.
pub(super) fn summarize(
    sides: [&Side; 2],
    pairing: &Pairing,
    steps: &StepRows,
    ops: &[OpRow],
    force: bool,
) -> PairsSummary {
    let mut reasons = operator_mix(ops);
    let mut entries: Vec<PairEntry> = pairing
        .pairs
        .iter()
        .map(|(w, r, c)| pair_entry(sides, (w, r, c), steps))
        .collect();
    for e in &entries {
        reasons.extend(e.problems.iter().map(|p| format!("{}: {p}", e.workload)));
    }
    let comparable = reasons.is_empty();
    if !comparable && !force {
        entries.iter_mut().for_each(|e| e.step_ratio = None);
    }
    let ratios: Vec<f64> = entries.iter().filter_map(|e| e.step_ratio).collect();
    let geomean = (!ratios.is_empty())
        .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp());
    PairsSummary {
        pairs: entries,
        unpaired_reference: pairing.unpaired_reference.clone(),
        unpaired_candidate: pairing.unpaired_candidate.clone(),
        step_ratio_geomean: geomean,
        step_ratio_spread: spread(ratios.iter().map(|&r| Some(r))).map(|s| SpreadSummary {
            n: s.n,
            median: s.median,
            p10: s.p10,
            p90: s.p90,
        }),
        comparable,
        reasons,
        forced: force && !comparable,
    }
}

fn pair_entry(sides: [&Side; 2], (w, r, c): (&str, &str, &str), steps: &StepRows) -> PairEntry {
    let step_key = STEP_KEYS.iter().position(|k| k.0 == "step_ms").unwrap_or(0);
    let of = |side: usize, run: &str| -> Vec<&(super::levels::Window, Vec<Option<f64>>)> {
        steps
            .rows
            .iter()
            .filter(|x| x.0 .0 == side && x.0 .1 == run)
            .collect()
    };
    let median = |side: usize, run: &str| {
        spread(of(side, run).iter().map(|x| x.1[step_key])).map(|s| s.median)
    };
    let stepped = |side: usize, run: &str| of(side, run).iter().any(|x| x.0 .3.is_some());
    let (rm, cm) = (median(0, r), median(1, c));
    let mut problems = Vec::new();
    let world = |s: usize, run: &str| sides[s].info.get(run).and_then(|i| i.world_size);
    if let (Some(a), Some(b)) = (world(0, r), world(1, c)) {
        if a != b {
            problems.push(format!("world sizes differ ({a} vs {b})"));
        }
    }
    if stepped(0, r) != stepped(1, c) {
        problems.push("one side has ProfilerStep steps and the other none".to_string());
    }
    PairEntry {
        workload: w.to_string(),
        reference: r.to_string(),
        candidate: c.to_string(),
        reference_step_ms: rm,
        candidate_step_ms: cm,
        step_ratio: rm.zip(cm).filter(|p| p.0 != 0.0).map(|(a, b)| b / a),
        problems,
    }
}

/// The operator-mix check: each side's share of operator GPU time in matched operators.
fn operator_mix(ops: &[OpRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (s, name) in ["reference", "candidate"].iter().enumerate() {
        let total: f64 = ops.iter().filter_map(|o| o.ms[s]).sum();
        let matched: f64 = ops
            .iter()
            .filter(|o| o.ms[0].is_some() && o.ms[1].is_some())
            .filter_map(|o| o.ms[s])
            .sum();
        if total > 0.0 && matched / total < MIN_MATCHED_SHARE {
            out.push(format!(
                "only {:.0}% of the {name}'s operator GPU time is in operators (name and shapes) the other side ran too",
                (100.0 * matched / total).max(0.0)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(runs: &[&str]) -> Side {
        Side {
            selector: "s".into(),
            runs: runs.iter().map(|r| r.to_string()).collect(),
            info: Default::default(),
        }
    }

    #[test]
    fn pairs_by_workload_and_lists_the_rest() {
        let p = pair(
            &side(&[
                "cuda/h100_models/bert-small",
                "cuda/h100_models/qwen",
                "cuda/x/resnet",
            ]),
            &side(&[
                "rocm/mi300x_models/bert-small",
                "rocm/mi300x_models/qwen",
                "rocm/y",
            ]),
        );
        let names: Vec<&str> = p.pairs.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["bert-small", "qwen"]);
        assert_eq!(p.pairs[0].2, "rocm/mi300x_models/bert-small");
        assert_eq!(p.unpaired_reference, ["cuda/x/resnet"]);
        assert_eq!(p.unpaired_candidate, ["rocm/y"]);
        // One run a side pairs whatever the names.
        let one = pair(&side(&["baseline"]), &side(&["pr-123"]));
        assert_eq!(
            one.pairs,
            [("baseline".into(), "baseline".into(), "pr-123".into())]
        );
    }
}
