//! Pairing and comparability: which run of the reference is compared with which run of the
//! candidate, and whether their step ratios mean anything.
//!
//! Pooling every run a selector names made nonsense: `--reference cuda --candidate rocm` over
//! two models per side took the median of bert's 4 ms and qwen's 35 ms steps. So runs are
//! paired by workload (the last component of the label: `cuda/h100_models/bert-small` and
//! `rocm/mi300x_models/bert-small` are both `bert-small`; one run per side pairs whatever its
//! name), only paired runs enter the comparison, and every level is computed per pair; the
//! overall ratio is the pairs' geometric mean (`overall`). Before any ratio, each pair is
//! checked: the same world size, the same step structure (ProfilerStep steps on both sides or
//! on neither), and an operator mix that overlaps (most of each side's operator time in
//! operators the other side of the pair ran too). A failed check refuses the ratios unless
//! forced, and says why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::levels::{LevelRow, StepRows};
use super::operators::{OpRow, NO_OP};
use super::overall::geomean;
use super::select::Side;
use super::summary_json::SpreadSummary;
use crate::rows::{ints, strs};
use crate::summary::spread;

/// Below this share of a side's operator GPU time in matched operators, the two sides run
/// different programs.
pub const MIN_MATCHED_SHARE: f64 = 0.5;

/// One pair: the workload and the run of each side ([reference, candidate]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pair {
    pub workload: String,
    pub runs: [String; 2],
}

impl Pair {
    fn new(workload: &str, reference: &str, candidate: &str) -> Pair {
        Pair {
            workload: workload.to_string(),
            runs: [reference.to_string(), candidate.to_string()],
        }
    }
}

/// The workload `run` of side `side` stands for in `pairs` (its own last label component
/// when no pair holds it).
pub(super) fn workload_of<'a>(pairs: &'a [Pair], side: usize, run: &'a str) -> &'a str {
    pairs
        .iter()
        .find(|p| p.runs[side] == run)
        .map_or_else(|| workload(run), |p| p.workload.as_str())
}

/// Runs paired across the sides, and the runs left over.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Pairing {
    pub pairs: Vec<Pair>,
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
            pairs: vec![Pair::new(workload(r), r, c)],
            ..Pairing::default()
        };
    }
    let (rm, cm) = (by_name(reference), by_name(candidate));
    let mut out = Pairing::default();
    for (name, rs) in &rm {
        match (rs.as_slice(), cm.get(name).map(Vec::as_slice)) {
            ([r], Some([c])) => out.pairs.push(Pair::new(name, r, c)),
            _ => out
                .unpaired_reference
                .extend(rs.iter().map(|r| r.to_string())),
        }
    }
    let paired: Vec<&String> = out.pairs.iter().map(|p| &p.runs[1]).collect();
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
    /// How its work mix was checked: `operators` (CPU operators by name and shapes),
    /// `kernel names and categories` (no operators, one platform: the GPU time's kernel names
    /// and category mix), `categories` (no operators, two platforms, whose kernel names never
    /// match) or `not checked` (neither side has either), in which case the pair is never
    /// called comparable.
    #[serde(default)]
    pub mix_checked_by: String,
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
    /// Whether the ratios can be trusted; when not, `reasons` says why. A pair whose mix could
    /// not be checked does not refuse the ratios, but is listed in `not_checked`, and the
    /// verdict then never says "comparable".
    pub comparable: bool,
    /// Pairs (by workload) whose work mix could not be checked.
    #[serde(default)]
    pub not_checked: Vec<String>,
    /// Why the sides are not comparable (different world sizes, step structures or operator
    /// mixes); empty when they are.
    pub reasons: Vec<String>,
    /// `--force`: the ratios were computed although the check failed.
    pub forced: bool,
}

/// Checks the pairs and computes their ratios; refuses them (nulls) when a check fails and
/// `force` is off. Each pair's step times and ratio are its `step_ms` row of the steps level.
pub(super) fn summarize(
    sides: [&Side; 2],
    pairing: &Pairing,
    steps: &StepRows,
    levels: &[LevelRow],
    ops: &[OpRow],
    kernels: &KernelTimes<'_>,
    force: bool,
) -> PairsSummary {
    let mut entries: Vec<PairEntry> = pairing
        .pairs
        .iter()
        .map(|p| pair_entry(sides, p, steps, levels, ops, kernels))
        .collect();
    let reasons: Vec<String> = entries
        .iter()
        .flat_map(|e| e.problems.iter().map(|p| format!("{}: {p}", e.workload)))
        .collect();
    let comparable = reasons.is_empty();
    if !comparable && !force {
        entries.iter_mut().for_each(|e| e.step_ratio = None);
    }
    let ratios: Vec<f64> = entries.iter().filter_map(|e| e.step_ratio).collect();
    let not_checked = entries
        .iter()
        .filter(|e| e.mix_checked_by == "not checked")
        .map(|e| e.workload.clone())
        .collect();
    PairsSummary {
        not_checked,
        pairs: entries,
        unpaired_reference: pairing.unpaired_reference.clone(),
        unpaired_candidate: pairing.unpaired_candidate.clone(),
        step_ratio_geomean: geomean(&ratios),
        step_ratio_spread: spread(ratios.iter().map(|&r| Some(r))).map(SpreadSummary::from),
        comparable,
        reasons,
        forced: force && !comparable,
    }
}

fn pair_entry(
    sides: [&Side; 2],
    p: &Pair,
    steps: &StepRows,
    levels: &[LevelRow],
    ops: &[OpRow],
    kernels: &KernelTimes<'_>,
) -> PairEntry {
    let step = levels.iter().find(|r| {
        r.level == "steps" && r.key == "step_ms" && r.workload.as_ref() == Some(&p.workload)
    });
    let median = |s: usize| step.and_then(|r| r.sides[s]).map(|x| x.median);
    let of = |s: usize| {
        steps
            .rows
            .iter()
            .filter(move |x| x.0 .0 == s && x.0 .1 == p.runs[s])
    };
    let stepped = |s: usize| of(s).any(|x| x.0 .3.is_some());
    let pair_ops = ops.iter().filter(|o| o.workload == p.workload);
    let has_ops = |s: usize| {
        pair_ops
            .clone()
            .any(|o| o.key.0 != NO_OP && o.ms[s].is_some())
    };
    // The mix check: by CPU operators where both sides have them; else by the GPU time's
    // category mix (kernels without operators, as in a GPU-only trace); else not checked.
    let categories: Vec<&LevelRow> = levels
        .iter()
        .filter(|r| r.level == "categories" && r.workload.as_ref() == Some(&p.workload))
        .collect();
    // Kernel names mean the same thing on one platform only (cuBLAS and hipBLASLt never share
    // one), so they are checked, beside the categories, where both runs are of one platform.
    let platform = |s: usize| sides[s].info.get(&p.runs[s]).map(|i| i.platform.as_str());
    let same_platform = platform(0).is_some() && platform(0) == platform(1);
    let (mut problems, checked) = if has_ops(0) && has_ops(1) {
        (operator_mix(pair_ops), "operators")
    } else if let Some(mut problems) = category_mix(&categories) {
        match same_platform.then(|| kernels.mix(&p.runs)).flatten() {
            Some(by_name) => {
                problems.extend(by_name);
                (problems, "kernel names and categories")
            }
            None => (problems, "categories"),
        }
    } else {
        (Vec::new(), "not checked")
    };
    let world = |s: usize| sides[s].info.get(&p.runs[s]).and_then(|i| i.world_size);
    if let (Some(a), Some(b)) = (world(0), world(1)) {
        if a != b {
            problems.push(format!("world sizes differ ({a} vs {b})"));
        }
    }
    if stepped(0) != stepped(1) {
        problems.push("one side has ProfilerStep steps and the other none".to_string());
    }
    let [reference, candidate] = p.runs.clone();
    PairEntry {
        workload: p.workload.clone(),
        reference,
        candidate,
        reference_step_ms: median(0),
        candidate_step_ms: median(1),
        step_ratio: step.and_then(LevelRow::pair_ratio),
        problems,
        mix_checked_by: checked.to_string(),
    }
}

/// Each side's activities, for the kernel-name mix check: read only for pairs that have no
/// CPU operators (GPU-only traces), where the check needs them.
pub(super) struct KernelTimes<'a> {
    acts: [&'a polars::prelude::DataFrame; 2],
}

impl<'a> KernelTimes<'a> {
    /// The activities (`run`, `name`, `start_ns`, `end_ns`) of each side.
    pub(super) fn of(acts: [&'a polars::prelude::DataFrame; 2]) -> KernelTimes<'a> {
        KernelTimes { acts }
    }

    /// GPU time (ns) per kernel name of run `run` of side `s`.
    fn of_run(&self, s: usize, run: &str) -> BTreeMap<&'a str, i64> {
        let df = self.acts[s];
        let (runs, name) = (strs(df, "run"), strs(df, "name"));
        let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
        let mut m = BTreeMap::new();
        for i in 0..df.height() {
            if let (Some(true), Some(n), Some(a), Some(b)) =
                (runs[i].map(|r| r == run), name[i], start[i], end[i])
            {
                *m.entry(n).or_default() += (b - a).max(0);
            }
        }
        m
    }

    /// The kernel-name mix check of one pair of runs: each side's share of GPU time in
    /// kernel names the other side ran too, at least [`MIN_MATCHED_SHARE`]; `None` when a
    /// side has no kernel time.
    fn mix(&self, runs: &[String; 2]) -> Option<Vec<String>> {
        let (a, b) = (self.of_run(0, &runs[0]), self.of_run(1, &runs[1]));
        let (a, b) = (&a, &b);
        let mut out = Vec::new();
        for (name, mine, other) in [("reference", a, b), ("candidate", b, a)] {
            let total: i64 = mine.values().sum();
            if total <= 0 {
                return None;
            }
            let matched: i64 = mine
                .iter()
                .filter(|(k, _)| other.contains_key(*k))
                .map(|(_, v)| v)
                .sum();
            let share = matched as f64 / total as f64;
            if share < MIN_MATCHED_SHARE {
                out.push(format!(
                    "no CPU operators to match, and only {:.0}% of the {name}'s GPU time is in kernels (by name) the other side ran too",
                    100.0 * share
                ));
            }
        }
        Some(out)
    }
}

/// The category-mix check of one pair, where neither side's kernels have CPU operators: the
/// share of GPU time per category (gemm, attention, comm, memcpy, other…) on each side, and the
/// share both have in common (Σ min over the categories) at least [`MIN_MATCHED_SHARE`].
/// `None` when a side has no category time at all (nothing to check).
fn category_mix(rows: &[&LevelRow]) -> Option<Vec<String>> {
    let total = |s: usize| -> f64 {
        rows.iter()
            .filter_map(|r| r.sides[s].as_ref().map(|x| x.median))
            .sum()
    };
    let (a, b) = (total(0), total(1));
    if a <= 0.0 || b <= 0.0 {
        return None;
    }
    let share = |r: &LevelRow, s: usize, t: f64| r.sides[s].as_ref().map_or(0.0, |x| x.median / t);
    let common: f64 = rows
        .iter()
        .map(|r| share(r, 0, a).min(share(r, 1, b)))
        .sum();
    Some(if common < MIN_MATCHED_SHARE {
        vec![format!(
            "no CPU operators to match, and only {:.0}% of the GPU time's category mix is common to both sides",
            100.0 * common
        )]
    } else {
        Vec::new()
    })
}

/// The operator-mix check of one pair: each side's share of operator GPU time in matched
/// operators.
fn operator_mix<'a>(ops: impl Iterator<Item = &'a OpRow> + Clone) -> Vec<String> {
    let mut out = Vec::new();
    for (s, name) in ["reference", "candidate"].iter().enumerate() {
        let total: f64 = ops.clone().filter_map(|o| o.ms[s]).sum();
        let matched: f64 = ops
            .clone()
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
        let names: Vec<&str> = p.pairs.iter().map(|p| p.workload.as_str()).collect();
        assert_eq!(names, ["bert-small", "qwen"]);
        assert_eq!(p.pairs[0].runs[1], "rocm/mi300x_models/bert-small");
        assert_eq!(p.unpaired_reference, ["cuda/x/resnet"]);
        assert_eq!(p.unpaired_candidate, ["rocm/y"]);
        // One run a side pairs whatever the names.
        let one = pair(&side(&["baseline"]), &side(&["pr-123"]));
        assert_eq!(one.pairs, [Pair::new("baseline", "baseline", "pr-123")]);
    }
}
