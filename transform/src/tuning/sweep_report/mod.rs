//! `aorta sweep report`: which configuration of a dataset wins, by how much, and whether the
//! difference is more than noise; and which knobs moved anything at all.
//!
//! It works on any dataset, not only on sweeps aorta ran: configurations come from
//! `runs.params` ([`configs`]), the numbers from the step tables ([`metrics`]), the noise
//! verdict from the repeats ([`super::verdict`]). Each configuration's metric is summarised
//! over the steps of every rank and repeat (median, p10, p90); the verdict's unit is the
//! repeat (a run's median), because steps of one run are not independent.

pub mod configs;
pub mod metrics;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::dataset::DatasetError;
use crate::summary::{median, spread, Spread};

pub use configs::Config;
pub use metrics::{Metric, StepValues, METRICS};

use super::knob_table::{self, Knob};
use super::record::SweepRecord;
use super::tp_report::TpScaling;
use super::tp_windows::{self, TpConfigRow, WindowNames};
use super::verdict::{self, Tested};

/// A sweep report error: one line.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Reading the dataset failed.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing `sweep.parquet` failed.
    #[error("{path}: {source}")]
    Polars {
        /// The file.
        path: PathBuf,
        /// Why.
        source: polars::prelude::PolarsError,
    },
    /// The TP scaling check failed (an operator without TP 1).
    #[error(transparent)]
    Tp(#[from] super::tp_scaling::TpError),
    /// Nothing to rank.
    #[error("{0}: no run with steps to compare")]
    Empty(PathBuf),
}

/// What the report covers.
#[derive(Debug, Clone)]
pub struct Options {
    /// Runs to include (every run when empty).
    pub runs: Vec<String>,
    /// The least change (% of the larger median) that counts as a knob's effect.
    pub min_effect_pct: f64,
    /// The TP scaling check's tolerance (runs with a `tp` param and TP windows).
    pub tolerance: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            runs: Vec::new(),
            min_effect_pct: DEFAULT_MIN_EFFECT_PCT,
            tolerance: super::tp_scaling::DEFAULT_TOLERANCE,
        }
    }
}

/// A knob's change must move a metric by at least this much (% of the larger median), beyond
/// the test, to count: a difference the repeats can tell apart may still be too small to
/// matter.
pub const DEFAULT_MIN_EFFECT_PCT: f64 = 1.0;

/// One configuration's numbers.
#[derive(Debug, Clone)]
pub struct ConfigRow {
    /// The configuration.
    pub config: Config,
    /// Steps over every rank and repeat.
    pub steps: usize,
    /// Per metric: median, p10, p90 over those steps (None: no value).
    pub stats: Vec<Option<Spread>>,
    /// Per metric: each repeat's median, in run order.
    pub repeats: Vec<Vec<f64>>,
}

/// The best configuration for one metric.
#[derive(Debug, Clone)]
pub struct Best {
    /// The metric.
    pub metric: Metric,
    /// Index of the best row.
    pub best: usize,
    /// Index of the runner-up row.
    pub runner_up: Option<usize>,
    /// The noise verdict (None without a runner-up).
    pub tested: Option<Tested>,
}

/// One metric a knob moved.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// The metric.
    pub metric: &'static str,
    /// The two configurations compared (the better first).
    pub configs: (String, String),
    /// Their medians over repeats.
    pub medians: (f64, f64),
    /// The change, % of the larger median.
    pub change_pct: f64,
    /// The test's p-value.
    pub p_value: f64,
}

/// What one param did.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobEffect {
    /// The param.
    pub name: String,
    /// In aorta's table of read environment knobs, or a workload flag (lower-case).
    pub known: bool,
    /// `none`, `measurable`, or None when it cannot be tested (`note` says why).
    pub effect: Option<&'static str>,
    /// The metrics it moved (largest change per metric).
    pub moved: Vec<Moved>,
    /// The knob check's warning, for an environment knob no library reads.
    pub warning: Option<String>,
    /// Why `effect` is null.
    pub note: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// The dataset.
    pub root: PathBuf,
    /// One row per configuration.
    pub rows: Vec<ConfigRow>,
    /// The params that vary between configurations.
    pub varying: Vec<String>,
    /// The best per metric (metrics without values in two configurations are left out).
    pub best: Vec<Best>,
    /// Per varying param.
    pub knobs: Vec<KnobEffect>,
    /// The sweep's own record, for a dataset `aorta sweep` wrote.
    pub record: Option<SweepRecord>,
    /// The least change counted as an effect.
    pub min_effect_pct: f64,
    /// TP overlap per (configuration, operator, phase): medians over the windows' instances.
    pub tp: Vec<TpConfigRow>,
    /// The TP scaling check on those rows (configurations with a `tp` param), if any.
    pub tp_scaling: Option<TpScaling>,
}

/// Builds the report of the dataset at `root`.
pub fn build(root: &Path, opts: &Options) -> Result<SweepReport, SweepError> {
    let (configs, varying) = configs::group(root, &opts.runs)?;
    let runs: Vec<String> = configs.iter().flat_map(|c| c.runs.clone()).collect();
    let steps = metrics::step_values(root, &runs)?;
    let mut by_run: BTreeMap<&str, Vec<&StepValues>> = BTreeMap::new();
    for s in &steps {
        by_run.entry(s.run.as_str()).or_default().push(s);
    }
    let rows: Vec<ConfigRow> = configs
        .into_iter()
        .filter(|c| c.runs.iter().any(|r| by_run.contains_key(r.as_str())))
        .map(|config| {
            let of: Vec<&StepValues> = config
                .runs
                .iter()
                .flat_map(|r| by_run.get(r.as_str()).into_iter().flatten().copied())
                .collect();
            let stats = (0..METRICS.len())
                .map(|m| spread(of.iter().map(|s| s.values[m])))
                .collect();
            let repeats = (0..METRICS.len())
                .map(|m| {
                    config
                        .runs
                        .iter()
                        .filter_map(|r| {
                            let v: Vec<f64> = by_run
                                .get(r.as_str())?
                                .iter()
                                .filter_map(|s| s.values[m])
                                .filter(|x| !x.is_nan())
                                .collect();
                            median(&v)
                        })
                        .collect()
                })
                .collect();
            ConfigRow {
                steps: of.len(),
                config,
                stats,
                repeats,
            }
        })
        .collect();
    if rows.is_empty() {
        return Err(SweepError::Empty(root.to_path_buf()));
    }
    let best = METRICS
        .iter()
        .enumerate()
        .filter_map(|(m, metric)| best_of(&rows, m, *metric))
        .collect();
    let knobs = varying
        .iter()
        .map(|k| knob_effect(&rows, &varying, k, opts.min_effect_pct))
        .collect();
    // TP windows (`qkv`, `proj`, `fc1`, `fc2` ranges), per configuration.
    let config_of: BTreeMap<&str, &str> = rows
        .iter()
        .flat_map(|c| {
            c.config
                .runs
                .iter()
                .map(move |r| (r.as_str(), c.config.name.as_str()))
        })
        .collect();
    let windows = tp_windows::instances(root, &runs, &WindowNames::default())?;
    let tp = tp_windows::by_config(&windows, &|run: &str| {
        config_of.get(run).map(|c| c.to_string())
    });
    let tp_times = tp_windows::timings(&tp, &|name: &str| {
        rows.iter().find(|c| c.config.name == name).map(|c| {
            c.config
                .params
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        })
    });
    let record = SweepRecord::load(root).map_err(|source| SweepError::Io {
        path: root.join(super::record::FILE),
        source,
    })?;
    Ok(SweepReport {
        root: root.to_path_buf(),
        rows,
        varying,
        best,
        knobs,
        record,
        min_effect_pct: opts.min_effect_pct,
        tp_scaling: {
            let times = write::scaling_times(&tp_times);
            if times.is_empty() {
                None
            } else {
                Some(super::tp_report::compute(&times, opts.tolerance)?)
            }
        },
        tp,
    })
}

/// Rows ranked by the metric's median over steps (best first), those with a value.
pub fn ranked(rows: &[ConfigRow], m: usize) -> Vec<usize> {
    let lower = METRICS[m].lower_is_better;
    let mut idx: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].stats[m].is_some())
        .collect();
    idx.sort_by(|&a, &b| {
        let (x, y) = (
            rows[a].stats[m].as_ref().map_or(0.0, |s| s.median),
            rows[b].stats[m].as_ref().map_or(0.0, |s| s.median),
        );
        let o = x.total_cmp(&y);
        let o = if lower { o } else { o.reverse() };
        o.then_with(|| rows[a].config.name.cmp(&rows[b].config.name))
    });
    idx
}

fn best_of(rows: &[ConfigRow], m: usize, metric: Metric) -> Option<Best> {
    let order = ranked(rows, m);
    let best = *order.first()?;
    let runner_up = order.get(1).copied();
    let tested = runner_up.map(|r| {
        verdict::test(
            &rows[best].repeats[m],
            &rows[r].repeats[m],
            metric.lower_is_better,
        )
    });
    Some(Best {
        metric,
        best,
        runner_up,
        tested,
    })
}

/// Relabellings of the effect test (its p-value's resolution is 1 / (PERMS + 1)).
const PERMS: usize = 10_000;

/// Relabellings possible of `strata` (each stratum's multinomial), as a float.
fn arrangements(strata: &[Vec<(usize, f64)>]) -> f64 {
    strata
        .iter()
        .map(|s| {
            let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
            for (v, _) in s {
                *counts.entry(*v).or_default() += 1;
            }
            // n! / Π c!, one factor at a time.
            let mut out = 1.0;
            let mut k = 0usize;
            for c in counts.values() {
                for j in 1..=*c {
                    k += 1;
                    out *= k as f64 / j as f64;
                }
            }
            out
        })
        .product()
}

/// What `name` did: per metric, the stratified permutation test of
/// [`verdict::effect_p`] over the contexts (configurations that share every other varying
/// param), Bonferroni-corrected over the metrics tested, and a change of at least `min_pct`.
fn knob_effect(rows: &[ConfigRow], varying: &[String], name: &str, min_pct: f64) -> KnobEffect {
    let others: Vec<&String> = varying.iter().filter(|k| *k != name).collect();
    // Contexts: the other params' values → the rows there.
    let mut contexts: BTreeMap<Vec<Option<&String>>, Vec<&ConfigRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.config.params.contains_key(name)) {
        let key = others.iter().map(|k| r.config.params.get(*k)).collect();
        contexts.entry(key).or_default().push(r);
    }
    let mut values: Vec<&String> = rows
        .iter()
        .filter_map(|r| r.config.params.get(name))
        .collect();
    values.sort();
    values.dedup();
    let seed = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut tested: Vec<(usize, f64, Option<Moved>)> = Vec::new();
    let mut underpowered = false;
    for (m, metric) in METRICS.iter().enumerate() {
        let strata: Vec<Vec<(usize, f64)>> = contexts
            .values()
            .map(|rs| {
                rs.iter()
                    .flat_map(|r| {
                        let v = values
                            .iter()
                            .position(|x| Some(*x) == r.config.params.get(name))
                            .unwrap_or(0);
                        r.repeats[m].iter().map(move |x| (v, *x))
                    })
                    .collect()
            })
            .collect();
        // One arrangement: no context holds two of the param's values, nothing to test.
        // Too few to reach the corrected level: not worth 10,000 relabellings either.
        let arranged = arrangements(&strata);
        if arranged <= 1.0 {
            continue;
        }
        if 1.0 / arranged > verdict::ALPHA / METRICS.len() as f64 {
            underpowered = true;
            continue;
        }
        let Some(p) = verdict::effect_p(&strata, PERMS, seed ^ m as u64) else {
            continue;
        };
        // The largest change inside one context, between its best and worst value.
        let mut change: Option<Moved> = None;
        for rs in contexts.values() {
            let meds: Vec<(&ConfigRow, f64)> = rs
                .iter()
                .filter_map(|r| median(&r.repeats[m]).map(|x| (*r, x)))
                .collect();
            // Best first: ascending when lower is better.
            let order = |a: &&(&ConfigRow, f64), b: &&(&ConfigRow, f64)| {
                let o = a.1.total_cmp(&b.1);
                if metric.lower_is_better {
                    o
                } else {
                    o.reverse()
                }
            };
            let (best, worst) = (meds.iter().min_by(order), meds.iter().max_by(order));
            let (Some(b), Some(w)) = (best, worst) else {
                continue;
            };
            let larger = b.1.abs().max(w.1.abs());
            let pct = if larger > 0.0 {
                100.0 * (b.1 - w.1).abs() / larger
            } else {
                0.0
            };
            if change.as_ref().is_none_or(|c| pct > c.change_pct) {
                change = Some(Moved {
                    metric: metric.name,
                    configs: (b.0.config.name.clone(), w.0.config.name.clone()),
                    medians: (b.1, w.1),
                    change_pct: pct,
                    p_value: p,
                });
            }
        }
        tested.push((m, p, change));
    }
    let alpha = verdict::ALPHA / tested.len().max(1) as f64;
    let moved: Vec<Moved> = tested
        .iter()
        .filter(|(_, p, _)| *p <= alpha)
        .filter_map(|(_, _, c)| c.clone())
        .filter(|c| c.change_pct >= min_pct)
        .collect();
    let env = name.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    let (known, warning) = if env {
        (
            matches!(knob_table::lookup(name), Knob::Read { .. }),
            knob_table::warning(name),
        )
    } else {
        (true, None)
    };
    let (effect, note) = if tested.is_empty() {
        (
            None,
            Some(if underpowered {
                "too few repeats to tell: the test cannot reach its level (more repeats, or more \
                 values of the other knobs)"
                    .to_string()
            } else {
                "no two configurations differ in it alone".to_string()
            }),
        )
    } else if moved.is_empty() {
        (Some("none"), None)
    } else {
        (Some("measurable"), None)
    };
    KnobEffect {
        name: name.to_string(),
        known,
        effect,
        moved,
        warning,
        note,
    }
}

/// A metric's value for reading: four significant digits at most (ms, %, ratios and
/// TFLOP/s alike), as the summary and the page print it.
pub fn shown(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

impl Best {
    /// The verdict in words: `step_ms (lower is better): A at 0.266; runner-up B at 0.277:
    /// distinguishable (…)`, as the summary and the page say it.
    pub fn sentence(&self, r: &SweepReport) -> String {
        let m = metrics::index(self.metric.name).expect("a metric of METRICS");
        let med = |i: usize| r.rows[i].stats[m].as_ref().map_or(f64::NAN, |s| s.median);
        let mut text = format!(
            "{} ({}): {} at {}",
            self.metric.name,
            if self.metric.lower_is_better {
                "lower is better"
            } else {
                "higher is better"
            },
            r.rows[self.best].config.name,
            shown(med(self.best))
        );
        match (self.runner_up, &self.tested) {
            (Some(u), Some(t)) => text.push_str(&format!(
                "; runner-up {} at {}: {} ({})",
                r.rows[u].config.name,
                shown(med(u)),
                t.verdict.as_str(),
                t.reason
            )),
            _ => text.push_str("; no runner-up"),
        }
        text
    }
}

impl SweepReport {
    /// Writes `sweep.parquet`, `tuning_report.json` and `summary.txt` into `out` (created);
    /// returns the files written.
    pub fn write(&self, out: &Path) -> Result<Vec<PathBuf>, SweepError> {
        write::all(self, out)
    }

    /// The report in words, as `aorta sweep report` prints it.
    pub fn summary(&self) -> String {
        write::summary(self)
    }

    /// The best configuration's index for `metric`, if ranked.
    pub fn best_for(&self, metric: &str) -> Option<&Best> {
        self.best.iter().find(|b| b.metric.name == metric)
    }
}
