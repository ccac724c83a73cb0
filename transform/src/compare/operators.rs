//! The operator level: GPU time grouped by the CPU operator that launched it and that
//! operator's input shapes and dtypes, matched across sides (kernel names differ between
//! vendors; `aten::mm` on `[[8192, 4096], [4096, 4096]]` does not).
//!
//! A GPU activity's operator is the `cpu_op` with its `External id`; without one (the ROCm
//! rocprofiler-sdk backend writes none on kernels), the runtime call with its correlation
//! id, then that call's `External id`, else the innermost `cpu_op` enclosing the call on the
//! same thread.

use std::collections::{BTreeMap, HashMap, HashSet};

use polars::prelude::*;

use crate::rows::str_column;

use super::load::{ints, strs, SideData};

/// Activities no operator launched are grouped under this name.
pub const NO_OP: &str = "(no CPU op)";

/// (operator name, input dims, input types).
pub type OpKey = (String, String, String);

/// One operator key across sides: mean GPU ms per step window, calls (operator instances).
pub struct OpRow {
    pub key: OpKey,
    pub ms: [Option<f64>; 2],
    pub calls: [i64; 2],
}

impl OpRow {
    pub fn status(&self) -> &'static str {
        match self.ms {
            [Some(_), Some(_)] => "matched",
            [Some(_), None] => "reference_only",
            _ => "candidate_only",
        }
    }
    pub fn ratio(&self) -> Option<f64> {
        match self.ms {
            [Some(r), Some(c)] if r != 0.0 => Some(c / r),
            _ => None,
        }
    }
    pub fn diff(&self) -> f64 {
        self.ms[1].unwrap_or(0.0) - self.ms[0].unwrap_or(0.0)
    }
}

/// Both sides' operators, largest |candidate − reference| first.
pub fn compare(sides: &[SideData; 2]) -> Vec<OpRow> {
    let mut all: BTreeMap<OpKey, OpRow> = BTreeMap::new();
    for (s, d) in sides.iter().enumerate() {
        let (times, windows) = side_ops(d);
        for (key, (ns, calls)) in times {
            let row = all.entry(key.clone()).or_insert_with(|| OpRow {
                key,
                ms: [None, None],
                calls: [0, 0],
            });
            row.ms[s] = Some(ns as f64 * 1e-6 / windows.max(1) as f64);
            row.calls[s] = calls;
        }
    }
    let mut rows: Vec<OpRow> = all.into_values().collect();
    rows.sort_by(|a, b| b.diff().abs().total_cmp(&a.diff().abs()));
    rows
}

/// GPU ns and operator instances per key for one side, and its number of step windows.
fn side_ops(d: &SideData) -> (HashMap<OpKey, (i64, i64)>, usize) {
    let links = Links::new(&d.cpu);
    let df = &d.acts;
    let (run, ext, corr) = (
        strs(df, "run"),
        ints(df, "external_id"),
        ints(df, "correlation"),
    );
    let (rank, step) = (ints(df, "rank"), ints(df, "step"));
    let (start, end) = (ints(df, "start_ns"), ints(df, "end_ns"));
    let fallback: Vec<Option<usize>> = links.enclosing(&run, &rank, &ext, &corr);
    let (names, dims, types) = (
        strs(&d.cpu, "name"),
        strs(&d.cpu, "input_dims"),
        strs(&d.cpu, "input_types"),
    );
    let mut out: HashMap<OpKey, (i64, i64)> = HashMap::new();
    let mut seen = HashSet::new();
    let mut windows = HashSet::new();
    for i in 0..df.height() {
        windows.insert((run[i], rank[i], step[i]));
        let key = (run[i].unwrap_or(""), rank[i].unwrap_or(0));
        let op = ext[i]
            .and_then(|e| links.by_ext.get(&(key, e)).copied())
            .or(fallback[i]);
        let k = match op {
            Some(o) => (
                names[o].unwrap_or("").to_string(),
                compact_json(dims[o].unwrap_or("")),
                compact_json(types[o].unwrap_or("")),
            ),
            None => (NO_OP.to_string(), String::new(), String::new()),
        };
        let e = out.entry(k).or_default();
        e.0 += (end[i].unwrap_or(0) - start[i].unwrap_or(0)).max(0);
        if op.is_none_or(|o| seen.insert(o)) {
            e.1 += 1;
        }
    }
    (out, windows.len())
}

/// JSON text in one canonical layout, `[[8192, 4096], ["float"]]`: traces pretty-print
/// shapes or not, and the same shape must match across vendors.
pub fn compact_json(s: &str) -> String {
    let (mut out, mut in_str, mut escaped) = (String::with_capacity(s.len()), false, false);
    for ch in s.chars() {
        if in_str {
            out.push(ch);
            (in_str, escaped) = (escaped || ch != '"', !escaped && ch == '\\');
        } else if ch == '"' {
            out.push(ch);
            in_str = true;
        } else if !ch.is_whitespace() {
            out.push(ch);
            if ch == ',' {
                out.push(' ');
            }
        }
    }
    out
}

type RankKey<'a> = (&'a str, i64);

/// Indexes of `cpu_ops` rows: operators by external id, runtime calls by correlation.
struct Links<'a> {
    by_ext: HashMap<(RankKey<'a>, i64), usize>,
    by_corr: HashMap<(RankKey<'a>, i64), usize>,
    cpu: &'a DataFrame,
}

impl<'a> Links<'a> {
    fn new(cpu: &'a DataFrame) -> Links<'a> {
        let (run, cat) = (strs(cpu, "run"), strs(cpu, "category"));
        let (rank, ext, corr) = (
            ints(cpu, "rank"),
            ints(cpu, "external_id"),
            ints(cpu, "correlation"),
        );
        let (start, end) = (ints(cpu, "start_ns"), ints(cpu, "end_ns"));
        let dur = |i: usize| end[i].unwrap_or(0) - start[i].unwrap_or(0);
        let (mut by_ext, mut by_corr) = (HashMap::new(), HashMap::new());
        for i in 0..cpu.height() {
            let key = (run[i].unwrap_or(""), rank[i].unwrap_or(0));
            match (cat[i], ext[i], corr[i]) {
                (Some("cpu_op"), Some(e), _) => {
                    // Several operators with one id: the innermost (shortest) launched.
                    let slot = by_ext.entry((key, e)).or_insert(i);
                    if dur(i) < dur(*slot) {
                        *slot = i;
                    }
                }
                (Some("runtime"), _, Some(c)) => {
                    by_corr.insert((key, c), i);
                }
                _ => {}
            }
        }
        Links {
            by_ext,
            by_corr,
            cpu,
        }
    }

    /// For each activity without an operator by external id: the operator through its
    /// runtime call (the call's external id, else the innermost enclosing `cpu_op`).
    fn enclosing(
        &self,
        run: &[Option<&'a str>],
        rank: &[Option<i64>],
        ext: &[Option<i64>],
        corr: &[Option<i64>],
    ) -> Vec<Option<usize>> {
        let cpu_ext = ints(self.cpu, "external_id");
        let mut out = vec![None; run.len()];
        let mut queries: Vec<(usize, usize)> = Vec::new();
        for i in 0..run.len() {
            let key = (run[i].unwrap_or(""), rank[i].unwrap_or(0));
            if ext[i].is_some_and(|e| self.by_ext.contains_key(&(key, e))) {
                continue;
            }
            let Some(&call) = corr[i].and_then(|c| self.by_corr.get(&(key, c))) else {
                continue;
            };
            out[i] = cpu_ext[call].and_then(|e| self.by_ext.get(&(key, e)).copied());
            if out[i].is_none() {
                queries.push((i, call));
            }
        }
        for (i, op) in innermost(self.cpu, &queries) {
            out[i] = op;
        }
        out
    }
}

/// For each (activity, runtime call) query: the innermost `cpu_op` on the call's thread
/// whose span contains the call's start. One stack sweep per thread.
fn innermost(cpu: &DataFrame, queries: &[(usize, usize)]) -> Vec<(usize, Option<usize>)> {
    let (run, cat) = (strs(cpu, "run"), strs(cpu, "category"));
    let (rank, tid) = (ints(cpu, "rank"), ints(cpu, "tid"));
    let (start, end) = (ints(cpu, "start_ns"), ints(cpu, "end_ns"));
    let thread = |i: usize| (run[i], rank[i], tid[i]);
    let mut ops: HashMap<_, Vec<usize>> = HashMap::new();
    for i in (0..cpu.height()).filter(|&i| cat[i] == Some("cpu_op")) {
        ops.entry(thread(i)).or_default().push(i);
    }
    let mut asks: HashMap<_, Vec<(i64, usize)>> = HashMap::new();
    for &(act, call) in queries {
        asks.entry(thread(call))
            .or_default()
            .push((start[call].unwrap_or(0), act));
    }
    let mut out = Vec::new();
    for (t, mut asks) in asks {
        let mut list = ops.remove(&t).unwrap_or_default();
        list.sort_by_key(|&i| (start[i], std::cmp::Reverse(end[i])));
        asks.sort_unstable();
        let (mut stack, mut next) = (Vec::<usize>::new(), 0);
        for (at, act) in asks {
            while next < list.len() && start[list[next]].unwrap_or(0) <= at {
                stack.push(list[next]);
                next += 1;
            }
            stack.retain(|&o| end[o].unwrap_or(0) >= at);
            out.push((act, stack.last().copied()));
        }
    }
    out
}

pub fn frame(rows: &[OpRow]) -> PolarsResult<DataFrame> {
    let side_ms = |s: usize| rows.iter().map(|r| r.ms[s]).collect::<Vec<_>>();
    let calls = |s: usize| rows.iter().map(|r| r.calls[s]).collect::<Vec<_>>();
    DataFrame::new_infer_height(vec![
        str_column("op", rows.iter().map(|r| r.key.0.as_str())),
        str_column("input_dims", rows.iter().map(|r| r.key.1.as_str())),
        str_column("input_types", rows.iter().map(|r| r.key.2.as_str())),
        Column::new("reference_ms".into(), side_ms(0)),
        Column::new("candidate_ms".into(), side_ms(1)),
        Column::new("reference_calls".into(), calls(0)),
        Column::new("candidate_calls".into(), calls(1)),
        Column::new(
            "ratio".into(),
            rows.iter().map(OpRow::ratio).collect::<Vec<_>>(),
        ),
        Column::new(
            "diff_ms".into(),
            rows.iter().map(OpRow::diff).collect::<Vec<_>>(),
        ),
        str_column("status", rows.iter().map(OpRow::status)),
    ])
}

#[cfg(test)]
mod tests {
    use super::compact_json;

    #[test]
    fn shapes_compare_in_one_layout() {
        assert_eq!(
            compact_json("[\n  [\n    16,\n 1024\n  ],\n  []\n]"),
            "[[16, 1024], []]"
        );
        assert_eq!(compact_json("[[16,1024],[]]"), "[[16, 1024], []]");
        // Inside strings nothing changes, escaped quotes included.
        let s = r#"["c10::BFloat16", "a \" b,  c"]"#;
        assert_eq!(compact_json(s), s);
    }
}
