//! A sweep's spec (`aorta sweep SPEC.toml`): the workload, the knobs and their values, and
//! the points they make, in the order they run.
//!
//! Parsed and expanded here, before anything runs, so that a bad spec costs one error line
//! naming its line and no GPU time. The order is part of the spec's meaning: repeats run in
//! rounds (every point once per round), each round in its own seeded random order, so that
//! drift (a GPU warming up, a neighbour's job) does not favour the points that ran first, and
//! the same seed gives the same order again.

use std::collections::BTreeMap;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Deserialize;

/// A spec error: one line naming the spec file and, where it has one, the line.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The spec.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Bad TOML or a bad value, at a line.
    #[error("{path}: line {line}: {what}")]
    At {
        /// The spec.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A spec-wide mistake (no line to name).
    #[error("{path}: {what}")]
    Whole {
        /// The spec.
        path: String,
        /// What is wrong.
        what: String,
    },
}

/// Where a knob goes: a workload flag (`--name value`) or an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KnobKind {
    /// A command-line flag of the workload.
    Flag,
    /// An environment variable of the workload's processes.
    Env,
}

impl KnobKind {
    /// `flag` or `env`, as the sweep record and the report write it.
    pub fn as_str(self) -> &'static str {
        match self {
            KnobKind::Flag => "flag",
            KnobKind::Env => "env",
        }
    }
}

/// One knob set to one value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Setting {
    /// Flag or environment variable.
    pub kind: KnobKind,
    /// The flag's name without `--`, or the variable's name.
    pub name: String,
    /// The value as text; for a flag, `true` is the bare flag and `false` leaves it out.
    pub value: String,
}

/// One configuration to run: its settings, in spec order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Point {
    /// The knobs' values.
    pub settings: Vec<Setting>,
}

impl Point {
    /// The point's key: `name=value` joined by `,` (spec order), the run label's stem.
    pub fn key(&self) -> String {
        if self.settings.is_empty() {
            return "default".into();
        }
        self.settings
            .iter()
            .map(|s| format!("{}={}", s.name, s.value))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The flags to append to the workload's command line.
    pub fn flag_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for s in self.settings.iter().filter(|s| s.kind == KnobKind::Flag) {
            match s.value.as_str() {
                "true" => out.push(format!("--{}", s.name)),
                "false" => {}
                v => {
                    out.push(format!("--{}", s.name));
                    out.push(v.to_string());
                }
            }
        }
        out
    }

    /// The environment variables to set.
    pub fn env(&self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .filter(|s| s.kind == KnobKind::Env)
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect()
    }
}

/// What the sweep runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// One of `aorta run`'s workloads (`overlap-bench`, `copy-overlap`, `fsdp`).
    Named(String),
    /// A shell command that writes traces into `{out}` (and starts its own ranks).
    Command(String),
}

/// A numeric knob searched rather than gridded: the least objective between `min` and `max`,
/// found by bisecting on the slope (`f(m) <= f(m+1)`: the best is at or below `m`), which
/// assumes one valley. About 2·log2(max − min) points instead of every value.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// Flag or environment variable.
    pub kind: KnobKind,
    /// Its name.
    pub name: String,
    /// Smallest value tried.
    pub min: i64,
    /// Largest value tried.
    pub max: i64,
}

/// A parsed spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// What runs.
    pub workload: Workload,
    /// Processes (ranks) per run, for a named workload.
    pub ranks: usize,
    /// Runs per point.
    pub repeats: usize,
    /// Seed of the run order.
    pub seed: u64,
    /// Arguments every run gets, before the knobs' flags.
    pub args: Vec<String>,
    /// The metric a search minimises (or maximises, for a higher-is-better metric).
    pub objective: String,
    /// The grid's points (the explicit `[[point]]` list, or the product of the knobs'
    /// values); with a search, each is one starting combination of the other knobs.
    pub points: Vec<Point>,
    /// The searched knob, if any.
    pub search: Option<Search>,
    /// Every knob's kind and name, in spec order (the search's last).
    pub knobs: Vec<(KnobKind, String)>,
}

/// The spec file as written: the two knob tables hold, per name, a list of values (the grid)
/// or a table (`search = "bisect"`, `min`, `max`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    workload: Option<String>,
    command: Option<String>,
    ranks: Option<usize>,
    repeats: Option<usize>,
    seed: Option<u64>,
    #[serde(default)]
    args: Vec<String>,
    objective: Option<String>,
    #[serde(default)]
    flags: BTreeMap<String, toml::Spanned<toml::Value>>,
    #[serde(default)]
    env: BTreeMap<String, toml::Spanned<toml::Value>>,
    #[serde(default)]
    point: Vec<toml::Spanned<RawPoint>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPoint {
    #[serde(default)]
    flags: BTreeMap<String, toml::Value>,
    #[serde(default)]
    env: BTreeMap<String, toml::Value>,
}

/// The workloads a spec may name (as `aorta run` knows them).
pub const WORKLOADS: [&str; 3] = ["overlap-bench", "copy-overlap", "fsdp"];

/// The metrics a search may optimise (the sweep report's).
pub fn is_metric(name: &str) -> bool {
    super::sweep_report::METRICS.iter().any(|m| m.name == name)
}

/// Reads and checks `path`.
pub fn load(path: &Path) -> Result<Spec, SpecError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Io {
        path: shown.clone(),
        source,
    })?;
    parse(&text, &shown)
}

/// Parses spec text; `shown` names the file in errors.
pub fn parse(text: &str, shown: &str) -> Result<Spec, SpecError> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let at = |offset: usize, what: String| SpecError::At {
        path: shown.to_string(),
        line: line_of(offset),
        what,
    };
    let whole = |what: String| SpecError::Whole {
        path: shown.to_string(),
        what,
    };
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let what = e.message().trim().to_string();
        match e.span() {
            Some(s) => at(s.start, what),
            None => whole(what),
        }
    })?;
    let workload = match (raw.workload, raw.command) {
        (Some(w), None) if WORKLOADS.contains(&w.as_str()) => Workload::Named(w),
        (Some(w), None) => {
            return Err(whole(format!(
                "workload `{w}` is not one of {} (or give `command`)",
                WORKLOADS.join(", ")
            )))
        }
        (None, Some(c)) if c.contains("{out}") => Workload::Command(c),
        (None, Some(_)) => {
            return Err(whole(
                "`command` must name `{out}`, the directory its traces go to".into(),
            ))
        }
        (Some(_), Some(_)) => return Err(whole("give `workload` or `command`, not both".into())),
        (None, None) => {
            return Err(whole(format!(
                "no `workload` ({}) and no `command`",
                WORKLOADS.join(", ")
            )))
        }
    };
    let objective = raw.objective.unwrap_or_else(|| "step_ms".into());
    if !is_metric(&objective) {
        let names: Vec<&str> = super::sweep_report::METRICS
            .iter()
            .map(|m| m.name)
            .collect();
        return Err(whole(format!(
            "objective `{objective}` is not a sweep metric ({})",
            names.join(", ")
        )));
    }
    let repeats = raw.repeats.unwrap_or(3);
    if repeats == 0 {
        return Err(whole("repeats must be at least 1".into()));
    }
    let ranks = raw.ranks.unwrap_or(1);
    if ranks == 0 {
        return Err(whole("ranks must be at least 1".into()));
    }

    // The grid's knobs (name → values) and the searched one, from the two tables.
    let mut grid: Vec<(KnobKind, String, Vec<String>)> = Vec::new();
    let mut search: Option<Search> = None;
    for (kind, table) in [(KnobKind::Flag, &raw.flags), (KnobKind::Env, &raw.env)] {
        for (name, v) in table {
            let span = v.span().start;
            check_name(kind, name).map_err(|w| at(span, w))?;
            match v.get_ref() {
                toml::Value::Array(values) => {
                    if values.is_empty() {
                        return Err(at(span, format!("`{name}` has no values")));
                    }
                    let values = values
                        .iter()
                        .map(|x| scalar(x).ok_or_else(|| at(span, not_scalar(name))))
                        .collect::<Result<Vec<_>, _>>()?;
                    grid.push((kind, name.clone(), values));
                }
                toml::Value::Table(t) => {
                    if search.is_some() {
                        return Err(at(span, "only one knob can be searched".into()));
                    }
                    search = Some(parse_search(kind, name, t).map_err(|w| at(span, w))?);
                }
                other => {
                    let one = scalar(other).ok_or_else(|| at(span, not_scalar(name)))?;
                    grid.push((kind, name.clone(), vec![one]));
                }
            }
        }
    }
    let points = if raw.point.is_empty() {
        product(&grid)
    } else {
        if !grid.is_empty() {
            return Err(whole(
                "give either knob values under [flags]/[env] or a [[point]] list, not both".into(),
            ));
        }
        raw.point
            .iter()
            .map(|p| {
                let span = p.span().start;
                let p = p.get_ref();
                let mut settings = Vec::new();
                for (kind, table) in [(KnobKind::Flag, &p.flags), (KnobKind::Env, &p.env)] {
                    for (name, v) in table {
                        check_name(kind, name).map_err(|w| at(span, w))?;
                        let value = scalar(v).ok_or_else(|| at(span, not_scalar(name)))?;
                        settings.push(Setting {
                            kind,
                            name: name.clone(),
                            value,
                        });
                    }
                }
                Ok(Point { settings })
            })
            .collect::<Result<Vec<_>, SpecError>>()?
    };
    let mut knobs: Vec<(KnobKind, String)> = Vec::new();
    for p in &points {
        for s in &p.settings {
            if !knobs.iter().any(|(k, n)| *k == s.kind && *n == s.name) {
                knobs.push((s.kind, s.name.clone()));
            }
        }
    }
    if let Some(s) = &search {
        knobs.push((s.kind, s.name.clone()));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = points.iter().find(|p| !seen.insert(p.key())) {
        return Err(whole(format!("point `{}` is listed twice", dup.key())));
    }
    Ok(Spec {
        workload,
        ranks,
        repeats,
        seed: raw.seed.unwrap_or(0),
        args: raw.args,
        objective,
        points,
        search,
        knobs,
    })
}

fn not_scalar(name: &str) -> String {
    format!("`{name}`: a value must be a string, a number or a boolean")
}

/// A flag is lower-case (`gemms-per-iter`), an environment variable upper-case
/// (`NCCL_MAX_NCHANNELS`): the workloads' `aorta_params` keep the two apart by case.
fn check_name(kind: KnobKind, name: &str) -> Result<(), String> {
    let ok = match kind {
        KnobKind::Flag => name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'),
        KnobKind::Env => name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
    };
    if ok && !name.is_empty() {
        Ok(())
    } else {
        Err(match kind {
            KnobKind::Flag => format!("flag `{name}`: expected a lower-case flag name without --"),
            KnobKind::Env => format!("env `{name}`: expected an upper-case variable name"),
        })
    }
}

fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parse_search(
    kind: KnobKind,
    name: &str,
    t: &toml::map::Map<String, toml::Value>,
) -> Result<Search, String> {
    for k in t.keys() {
        if !["search", "min", "max"].contains(&k.as_str()) {
            return Err(format!(
                "`{name}`: unknown key `{k}` (a searched knob has search, min, max)"
            ));
        }
    }
    match t.get("search").and_then(toml::Value::as_str) {
        Some("bisect") => {}
        Some(other) => return Err(format!("`{name}`: search `{other}`: only \"bisect\"")),
        None => {
            return Err(format!(
                "`{name}`: a table needs search = \"bisect\" with min and max (or give a list)"
            ))
        }
    }
    let int = |k: &str| {
        t.get(k)
            .and_then(toml::Value::as_integer)
            .ok_or_else(|| format!("`{name}`: `{k}` must be a whole number"))
    };
    let (min, max) = (int("min")?, int("max")?);
    if min >= max {
        return Err(format!("`{name}`: min {min} must be below max {max}"));
    }
    Ok(Search {
        kind,
        name: name.to_string(),
        min,
        max,
    })
}

/// The cartesian product of the knobs' values, the first knob varying slowest.
fn product(grid: &[(KnobKind, String, Vec<String>)]) -> Vec<Point> {
    let mut points = vec![Point { settings: vec![] }];
    for (kind, name, values) in grid {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.settings.push(Setting {
                        kind: *kind,
                        name: name.clone(),
                        value: v.clone(),
                    });
                    q
                })
            })
            .collect();
    }
    points
}

/// One run of a point: which point (index into the list given) and which repeat (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index of the point.
    pub point: usize,
    /// Repeat number, from 1.
    pub repeat: usize,
}

/// The run order of `points` × `repeats`: round k holds repeat k of every point, in an order
/// drawn from `seed` and the round (ChaCha8, so one seed gives one order on every machine).
pub fn order(points: usize, repeats: usize, seed: u64) -> Vec<Slot> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(points * repeats);
    for repeat in 1..=repeats {
        let mut round: Vec<usize> = (0..points).collect();
        round.shuffle(&mut rng);
        out.extend(round.into_iter().map(|point| Slot { point, repeat }));
    }
    out
}

/// The state of a bisection over whole numbers in `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bisect {
    /// Lowest value still in the running.
    pub lo: i64,
    /// Highest value still in the running.
    pub hi: i64,
}

impl Bisect {
    /// Starts over `[min, max]`.
    pub fn new(min: i64, max: i64) -> Bisect {
        Bisect { lo: min, hi: max }
    }

    /// The two neighbours to measure next, `(m, m + 1)` at the middle; `None` once one value
    /// is left (the answer, `lo`).
    pub fn next(&self) -> Option<(i64, i64)> {
        (self.lo < self.hi).then(|| {
            let m = self.lo + (self.hi - self.lo) / 2;
            (m, m + 1)
        })
    }

    /// Narrows with the objective at `m` and `m + 1` (lower is better): not worse at `m`
    /// means the best is at or below `m`.
    pub fn narrow(&mut self, at_m: f64, at_next: f64) {
        if let Some((m, _)) = self.next() {
            if at_m <= at_next {
                self.hi = m;
            } else {
                self.lo = m + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
