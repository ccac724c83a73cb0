//! Configurations: runs with equal params are repeats of one configuration.
//!
//! A run's params are its files' `runs.params` merged (aorta's own `aorta_params` lifted to
//! the top): a key whose value differs between the
//! run's own files (a rank number, a per-process name) describes a process, not the run, and
//! is left out. A run without params is a configuration of its own, named by its label. A
//! configuration is named by the params that vary across the dataset (`bytes=4194304,serial=true`):
//! the ones every run shares say nothing about which one wins.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::dataset::{self, DatasetError};
use crate::rows::strs;

/// One configuration and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Its name: the varying params as `key=value,…` (sorted by key), or the run label of a
    /// run without params.
    pub name: String,
    /// Every param of its runs (empty for a run without params).
    pub params: BTreeMap<String, String>,
    /// Its runs (the repeats), sorted.
    pub runs: Vec<String>,
}

/// A param's value as text: a string as is, anything else as JSON.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A run's params with aorta's own `aorta_params` object (the workloads' flags and knobs)
/// lifted to the top level; a top-level key (`aorta ingest --param`) wins over it.
pub fn flatten(map: serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let mut top = serde_json::Map::new();
    for (k, v) in map {
        match (k.as_str(), v) {
            ("aorta_params", Value::Object(inner)) => out.extend(inner),
            (_, v) => {
                top.insert(k, v);
            }
        }
    }
    out.extend(top);
    out
}

/// The configurations of `runs` (every run of the dataset when empty), and the params that
/// vary between them (sorted).
pub fn group(root: &Path, runs: &[String]) -> Result<(Vec<Config>, Vec<String>), DatasetError> {
    let filter = if runs.is_empty() {
        polars::prelude::lit(true)
    } else {
        dataset::of_runs(runs)
    };
    let df = dataset::read_where(root, "runs", filter, &["run", "params"])?;
    let run = strs(&df, "run");
    let params = strs(&df, "params");
    // Per run, each key's values over its files.
    let mut per_run: BTreeMap<&str, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for i in 0..df.height() {
        let Some(r) = run[i] else { continue };
        let entry = per_run.entry(r).or_default();
        let Some(Ok(Value::Object(map))) = params[i].map(serde_json::from_str::<Value>) else {
            continue;
        };
        for (k, v) in flatten(map) {
            entry.entry(k).or_default().insert(text(&v));
        }
    }
    let mut by_params: BTreeMap<BTreeMap<String, String>, Vec<String>> = BTreeMap::new();
    let mut bare: Vec<String> = Vec::new();
    for (r, keys) in per_run {
        let p: BTreeMap<String, String> = keys
            .into_iter()
            .filter(|(_, vals)| vals.len() == 1)
            .filter_map(|(k, vals)| vals.into_iter().next().map(|v| (k, v)))
            .collect();
        if p.is_empty() {
            bare.push(r.to_string());
        } else {
            by_params.entry(p).or_default().push(r.to_string());
        }
    }
    // Varying: a key missing from some configuration, or with two values among them.
    let mut varying: Vec<String> = Vec::new();
    let all_keys: BTreeSet<&String> = by_params.keys().flat_map(|p| p.keys()).collect();
    for k in all_keys {
        let vals: BTreeSet<Option<&String>> = by_params.keys().map(|p| p.get(k)).collect();
        if vals.len() > 1 {
            varying.push(k.clone());
        }
    }
    // Named by the varying params with plain values; a structured value (an object or a
    // list, such as the shapes a TP size implies) only where the plain ones tie.
    let scalar = |v: &String| !(v.starts_with('{') || v.starts_with('['));
    let name_of = |params: &BTreeMap<String, String>, all: bool| {
        let name = varying
            .iter()
            .filter_map(|k| {
                params
                    .get(k)
                    .filter(|v| all || scalar(v))
                    .map(|v| format!("{k}={v}"))
            })
            .collect::<Vec<_>>()
            .join(",");
        if name.is_empty() {
            "default".to_string()
        } else {
            name
        }
    };
    let short: Vec<String> = by_params.keys().map(|p| name_of(p, false)).collect();
    let unique = short.iter().collect::<BTreeSet<_>>().len() == short.len();
    let mut configs: Vec<Config> = by_params
        .into_iter()
        .map(|(params, mut runs)| {
            runs.sort();
            Config {
                name: name_of(&params, !unique),
                params,
                runs,
            }
        })
        .collect();
    configs.extend(bare.into_iter().map(|r| Config {
        name: r.clone(),
        params: BTreeMap::new(),
        runs: vec![r],
    }));
    configs.sort_by(param_order);
    Ok((configs, varying))
}

/// Two param values in order: numbers by value (`2` before `16`), before any other text,
/// which goes by its bytes. A total order, so the sorts that use it cannot panic.
pub fn value_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y).then_with(|| a.cmp(b)),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// Configurations param by param (keys in order, values by `value_order`), then by name: a
/// sweep of `tp` 1, 2, 4, 16 lists them so, not as 1, 16, 2, 4.
fn param_order(a: &Config, b: &Config) -> Ordering {
    let (mut x, mut y) = (a.params.iter(), b.params.iter());
    loop {
        let o = match (x.next(), y.next()) {
            (None, None) => return a.name.cmp(&b.name),
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => ka.cmp(kb).then_with(|| value_order(va, vb)),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(params: &[(&str, &str)]) -> Config {
        let params: BTreeMap<String, String> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let name = params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>();
        Config {
            name: name.join(","),
            params,
            runs: Vec::new(),
        }
    }

    /// Numbers by value, before other text; the first param that differs decides.
    #[test]
    fn configurations_sort_numbers_by_value() {
        let mut c = [
            config(&[("chunks", "4"), ("tp", "16")]),
            config(&[("chunks", "4"), ("tp", "2")]),
            config(&[("chunks", "16"), ("tp", "1")]),
            config(&[("chunks", "auto"), ("tp", "1")]),
            config(&[("chunks", "4"), ("tp", "1.5")]),
        ];
        c.sort_by(param_order);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "chunks=4,tp=1.5",
                "chunks=4,tp=2",
                "chunks=4,tp=16",
                "chunks=16,tp=1",
                "chunks=auto,tp=1",
            ]
        );
        // A total order over mixed values (a plain numeric-else-text rule has cycles).
        let v = ["10", "9", "1a", "a", "-1", "1e3"];
        for a in v {
            for b in v {
                assert_eq!(value_order(a, b), value_order(b, a).reverse(), "{a} {b}");
                for c in v {
                    if value_order(a, b).is_lt() && value_order(b, c).is_lt() {
                        assert!(value_order(a, c).is_lt(), "{a} {b} {c}");
                    }
                }
            }
        }
    }
}
