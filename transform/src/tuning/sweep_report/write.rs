//! The report on disk: `sweep.parquet` (one row per configuration), `tuning_report.json`
//! (`best` per metric with its verdict, `knobs`, the configurations, a sweep's failed runs
//! and searches) and `summary.txt` (what the command prints).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde_json::{json, Map, Value};

use super::{ConfigRow, SweepError, SweepReport, METRICS};
use crate::tuning::verdict::ALPHA;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SweepError + '_ {
    move |source| SweepError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(super) fn all(r: &SweepReport, out: &Path) -> Result<Vec<PathBuf>, SweepError> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    let mut files = Vec::new();
    // The TP scaling check: its YAML files are the tuner's; its `tp_scaling` object and its
    // table go into our tuning_report.json and summary.txt.
    let tp = r.tp_scaling.as_ref();
    for (name, text) in tp.iter().flat_map(|t| &t.yamls) {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(io(&path))?;
        files.push(path);
    }
    let path = out.join("sweep.parquet");
    let mut df = frame(r).map_err(|source| SweepError::Polars {
        path: path.clone(),
        source,
    })?;
    let f = std::fs::File::create(&path).map_err(io(&path))?;
    ParquetWriter::new(f)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(&mut df)
        .map_err(|source| SweepError::Polars {
            path: path.clone(),
            source,
        })?;
    files.push(path);
    let path = out.join("tuning_report.json");
    let mut doc = json_report(r);
    doc["tp_scaling"] = tp.map_or(Value::Null, |t| t.json.clone());
    let text = serde_json::to_vec_pretty(&doc).map_err(|e| SweepError::Io {
        path: path.clone(),
        source: e.into(),
    })?;
    std::fs::write(&path, text).map_err(io(&path))?;
    files.push(path);
    let path = out.join("summary.txt");
    let tp_summary = tp.map_or("", |t| t.summary.as_str());
    std::fs::write(&path, summary(r) + tp_summary).map_err(io(&path))?;
    files.push(path);
    Ok(files)
}

/// The scaling check's input: per (TP size, operator, method) one time. An operator measured
/// in one phase keeps its rows (the YAML names the phase); an operator measured in several
/// phases is their sum, the operator's whole time (the tuner's `operator_e2e_time_us`).
pub(super) fn scaling_times(
    times: &[crate::tuning::tp_scaling::Timing],
) -> Vec<crate::tuning::tp_scaling::Timing> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut phases: BTreeMap<&str, BTreeSet<Option<&str>>> = BTreeMap::new();
    for t in times {
        phases
            .entry(t.operator.as_str())
            .or_default()
            .insert(t.phase.as_deref());
    }
    let mut summed: BTreeMap<(u32, String, Option<String>), f64> = BTreeMap::new();
    let mut out = Vec::new();
    for t in times {
        if phases[t.operator.as_str()].len() <= 1 {
            out.push(t.clone());
        } else {
            *summed
                .entry((t.tp, t.operator.clone(), t.method.clone()))
                .or_default() += t.e2e_us;
        }
    }
    out.extend(summed.into_iter().map(|((tp, operator, method), e2e_us)| {
        crate::tuning::tp_scaling::Timing {
            tp,
            operator,
            e2e_us,
            method,
            phase: None,
        }
    }));
    out
}

/// `sweep.parquet`: config, param_<name> per varying param, runs, steps, and per metric its
/// median, p10 and p90 over the steps.
fn frame(r: &SweepReport) -> PolarsResult<DataFrame> {
    let mut cols: Vec<Column> = Vec::new();
    let names: Vec<&str> = r.rows.iter().map(|c| c.config.name.as_str()).collect();
    cols.push(Column::new("config".into(), names));
    for k in &r.varying {
        let v: Vec<Option<&str>> = r
            .rows
            .iter()
            .map(|c| c.config.params.get(k).map(String::as_str))
            .collect();
        cols.push(Column::new(format!("param_{k}").into(), v));
    }
    let runs: Vec<i64> = r.rows.iter().map(|c| c.config.runs.len() as i64).collect();
    cols.push(Column::new("runs".into(), runs));
    let steps: Vec<i64> = r.rows.iter().map(|c| c.steps as i64).collect();
    cols.push(Column::new("steps".into(), steps));
    for (m, metric) in METRICS.iter().enumerate() {
        type Pick = fn(&crate::summary::Spread) -> f64;
        let picks: [(&str, Pick); 3] = [
            ("median", |s| s.median),
            ("p10", |s| s.p10),
            ("p90", |s| s.p90),
        ];
        for (suffix, pick) in picks {
            let v: Vec<Option<f64>> = r
                .rows
                .iter()
                .map(|c| c.stats[m].as_ref().map(pick))
                .collect();
            cols.push(Column::new(format!("{}_{suffix}", metric.name).into(), v));
        }
    }
    DataFrame::new(r.rows.len(), cols)
}

fn params_json(c: &ConfigRow) -> Value {
    Value::Object(
        c.config
            .params
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn varying_json(r: &SweepReport, c: &ConfigRow) -> Value {
    Value::Object(
        r.varying
            .iter()
            .filter_map(|k| {
                c.config
                    .params
                    .get(k)
                    .map(|v| (k.clone(), Value::String(v.clone())))
            })
            .collect(),
    )
}

fn json_report(r: &SweepReport) -> Value {
    let mut best = Map::new();
    for b in &r.best {
        let m = super::metrics::index(b.metric.name).expect("a metric of METRICS");
        let side = |i: usize| {
            let c = &r.rows[i];
            json!({
                "config": c.config.name,
                "params": varying_json(r, c),
                "median": c.stats[m].as_ref().map(|s| s.median),
                "repeats": c.repeats[m],
            })
        };
        let mut e = side(b.best);
        let o = e.as_object_mut().expect("an object");
        o.insert(
            "lower_is_better".into(),
            Value::Bool(b.metric.lower_is_better),
        );
        o.insert(
            "runner_up".into(),
            b.runner_up.map(side).unwrap_or(Value::Null),
        );
        match &b.tested {
            Some(t) => {
                o.insert("verdict".into(), json!(t.verdict.as_str()));
                o.insert("p_value".into(), json!(t.p_value));
                o.insert("reason".into(), json!(t.reason));
            }
            None => {
                o.insert("verdict".into(), json!("inconclusive"));
                o.insert("p_value".into(), Value::Null);
                o.insert(
                    "reason".into(),
                    json!("only one configuration has this metric"),
                );
            }
        }
        best.insert(b.metric.name.into(), e);
    }
    let knobs: Vec<Value> = r
        .knobs
        .iter()
        .map(|k| {
            json!({
                "name": k.name,
                "known": k.known,
                "effect": k.effect,
                "metrics": k.moved.iter().map(|m| json!({
                    "metric": m.metric,
                    "better": m.configs.0,
                    "worse": m.configs.1,
                    "medians": [m.medians.0, m.medians.1],
                    "change_pct": m.change_pct,
                    "p_value": m.p_value,
                })).collect::<Vec<_>>(),
                "warning": k.warning,
                "note": k.note,
            })
        })
        .collect();
    let configurations: Vec<Value> = r
        .rows
        .iter()
        .map(|c| {
            let metrics: Map<String, Value> = METRICS
                .iter()
                .enumerate()
                .map(|(m, metric)| {
                    let v = match &c.stats[m] {
                        Some(s) => json!({
                            "median": s.median, "p10": s.p10, "p90": s.p90,
                            "repeats": c.repeats[m],
                        }),
                        None => Value::Null,
                    };
                    (metric.name.to_string(), v)
                })
                .collect();
            json!({
                "config": c.config.name,
                "params": params_json(c),
                "runs": c.config.runs,
                "steps": c.steps,
                "metrics": metrics,
            })
        })
        .collect();
    let failed: Vec<Value> = r
        .record
        .as_ref()
        .map(|rec| {
            rec.latest()
                .into_values()
                .filter(|x| x.status != "ok")
                .map(|x| json!({"label": x.label, "point": x.point, "repeat": x.repeat, "error": x.error}))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "dataset": r.root.display().to_string(),
        "test": format!(
            "exact one-sided Mann-Whitney U on the repeats (each run's median over its steps), \
             alpha {ALPHA}; 3 repeats of each configuration are needed to reach it"
        ),
        "min_effect_pct": r.min_effect_pct,
        "metrics": METRICS.iter().map(|m| json!({
            "name": m.name, "lower_is_better": m.lower_is_better, "what": m.what,
        })).collect::<Vec<_>>(),
        "best": best,
        "knobs": knobs,
        "configurations": configurations,
        "configs": tp_configs(r),
        "failed": failed,
        "searches": r.record.as_ref().map(|x| x.searches.clone()).unwrap_or_default(),
        "warnings": r.record.as_ref().map(|x| x.warnings.clone()).unwrap_or_default(),
    })
}

/// The TP windows per (configuration, operator, phase), in the tuner's fields, ranked by
/// e2e within each (operator, phase, TP size) with the overlap ratio beside it.
fn tp_configs(r: &SweepReport) -> Vec<Value> {
    let params = |name: &str| r.rows.iter().find(|c| c.config.name == name);
    let mut rows: Vec<(
        &crate::tuning::tp_windows::TpConfigRow,
        Option<String>,
        Option<String>,
    )> =
        r.tp.iter()
            .map(|t| {
                let p = params(&t.config);
                let get = |k: &str| p.and_then(|c| c.config.params.get(k).cloned());
                (t, get("tp"), get("method"))
            })
            .collect();
    rows.sort_by(|a, b| {
        (&a.0.operator, &a.0.phase, &a.1)
            .cmp(&(&b.0.operator, &b.0.phase, &b.1))
            .then(a.0.e2e_us.total_cmp(&b.0.e2e_us))
    });
    let mut out = Vec::new();
    let mut rank = 0;
    let mut last: Option<(&str, &str, Option<&String>)> = None;
    for (t, tp, method) in &rows {
        let key = (t.operator.as_str(), t.phase.as_str(), tp.as_ref());
        rank = if last == Some(key) { rank + 1 } else { 1 };
        last = Some(key);
        let mut e = Map::new();
        e.insert("config".into(), json!(t.config));
        e.insert(
            "params".into(),
            params(&t.config).map_or(Value::Null, |c| varying_json(r, c)),
        );
        e.insert("operator".into(), json!(t.operator));
        e.insert("phase".into(), json!(t.phase));
        e.insert(
            "tp_size".into(),
            json!(tp.as_ref().and_then(|x| x.parse::<u32>().ok())),
        );
        e.insert("overlap_method".into(), json!(method));
        e.insert("instances".into(), json!(t.instances));
        e.insert("e2e_rank".into(), json!(rank));
        e.extend(t.tuner_fields());
        out.push(Value::Object(e));
    }
    out
}

/// The report in words.
pub(super) fn summary(r: &SweepReport) -> String {
    let mut s = String::new();
    let failed = r
        .record
        .as_ref()
        .map(|x| x.latest().values().filter(|x| x.status != "ok").count())
        .unwrap_or(0);
    let _ = writeln!(
        s,
        "{} configurations, {} runs{}; varying: {}",
        r.rows.len(),
        r.rows.iter().map(|c| c.config.runs.len()).sum::<usize>(),
        if failed > 0 {
            format!(" ({failed} failed runs, listed in tuning_report.json)")
        } else {
            String::new()
        },
        if r.varying.is_empty() {
            "nothing".into()
        } else {
            r.varying.join(", ")
        }
    );
    for b in &r.best {
        let _ = writeln!(s, "best {}", b.sentence(r));
    }
    for k in &r.knobs {
        let effect = match k.effect {
            Some("measurable") => {
                let moved: Vec<String> = k
                    .moved
                    .iter()
                    .map(|m| format!("{} {:.1} %", m.metric, m.change_pct))
                    .collect();
                format!("measurable ({})", moved.join(", "))
            }
            Some(e) => format!(
                "{e}: no metric moved (stratified permutation test, alpha 0.05 over the metrics, \
                 and at least {} %)",
                r.min_effect_pct
            ),
            None => format!("untested: {}", k.note.clone().unwrap_or_default()),
        };
        let _ = writeln!(
            s,
            "knob {}: {}{}",
            k.name,
            effect,
            k.warning
                .as_ref()
                .map(|w| format!(" [{w}]"))
                .unwrap_or_default()
        );
    }
    s
}
