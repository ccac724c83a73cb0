//! Which CPU operator launched each GPU activity, shared by `aorta compare`'s operator level
//! and `aorta perf`'s operator instances.
//!
//! A GPU activity's operator is the `cpu_op` with its `External id` (Kineto gives a kernel
//! the id of the innermost operator running when it was launched; several operators with
//! one id in older traces: the innermost, i.e. shortest). Without one (the ROCm
//! rocprofiler-sdk backend writes none on kernels), the runtime call with its correlation
//! id, then that call's `External id`, else the innermost `cpu_op` enclosing the call on the
//! same thread.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use polars::prelude::*;

use crate::rows::{ints, strs, IntAt, StrAt};

/// Activities no operator launched are grouped under this name.
pub(crate) const NO_OP: &str = "(no CPU op)";

/// What "a launch call" is, for every command that pairs a GPU activity with the host call
/// that enqueued it (`launches`, `breakdown`, the report's idle split, `kernels`, `perf`,
/// `compare`, `collectives`): a `cpu_ops` row of category `runtime` or `driver` whose
/// correlation id an activity carries. Why both: on CUDA 12+ PyTorch launches its GEMMs
/// (cuBLASLt) and NCCL kernels through the driver (`cuLaunchKernelEx`), and Triton through
/// `cuLaunchKernel`, so counting runtime calls alone (`cudaLaunchKernel`, `hipLaunchKernel`,
/// `cudaMemcpyAsync`, graph launches) misses most of a modern trace's kernels. Where a runtime
/// and a driver call share one correlation id (a runtime call recorded with the driver call it
/// made), the runtime call, the one the program made, is the launch.
pub(crate) const LAUNCH_CATEGORIES: [&str; 2] = ["runtime", "driver"];

/// The `cpu_ops` filter for launch calls ([`LAUNCH_CATEGORIES`]).
pub(crate) fn launch_calls() -> Expr {
    col("category")
        .eq(lit(LAUNCH_CATEGORIES[0]))
        .or(col("category").eq(lit(LAUNCH_CATEGORIES[1])))
}

/// Whether a `cpu_ops` category is a launch call's ([`LAUNCH_CATEGORIES`]).
pub(crate) fn is_launch_category(category: Option<&str>) -> bool {
    category.is_some_and(|c| LAUNCH_CATEGORIES.contains(&c))
}

/// JSON text in one canonical layout, `[[8192, 4096], ["float"]]`: traces pretty-print
/// shapes or not, and the same shape must match across vendors.
pub(crate) fn compact_json(s: &str) -> String {
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

pub(crate) type RankKey<'a> = (&'a str, i64);

/// The `cpu_ops` columns `Links` reads: a caller reads at least these (of the `cpu_op` and
/// `runtime` rows).
pub(crate) const LINK_COLUMNS: [&str; 9] = [
    "run",
    "rank",
    "category",
    "name",
    "tid",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
];

/// The `cpu_ops` columns the links read, row by row (no copy of two million rows; a frame in
/// one chunk finds a row directly). Frames of one run may leave `run` out: every key then
/// has the same empty run.
struct Cols<'a> {
    n: usize,
    run: StrAt<'a>,
    cat: StrAt<'a>,
    rank: IntAt<'a>,
    tid: IntAt<'a>,
    ext: IntAt<'a>,
    corr: IntAt<'a>,
    start: IntAt<'a>,
    end: IntAt<'a>,
}

impl<'a> Cols<'a> {
    fn of(cpu: &'a DataFrame) -> Cols<'a> {
        Cols {
            n: cpu.height(),
            run: StrAt::of(cpu, "run"),
            cat: StrAt::of(cpu, "category"),
            rank: IntAt::of(cpu, "rank"),
            tid: IntAt::of(cpu, "tid"),
            ext: IntAt::of(cpu, "external_id"),
            corr: IntAt::of(cpu, "correlation"),
            start: IntAt::of(cpu, "start_ns"),
            end: IntAt::of(cpu, "end_ns"),
        }
    }

    fn rows(&self, category: &'static str) -> impl Iterator<Item = usize> + '_ {
        self.cat
            .iter(self.n)
            .enumerate()
            .filter(move |(_, c)| *c == Some(category))
            .map(|(i, _)| i)
    }

    /// (row, key, id) of every row of `category` with an id in `ids` (`ext` or `corr`), read
    /// in order.
    fn ids(
        &self,
        category: &'static str,
        ids: &IntAt<'a>,
    ) -> impl Iterator<Item = (usize, RankKey<'a>, i64)> + 'a {
        let n = self.n;
        let rows = self
            .cat
            .iter(n)
            .zip(self.run.iter(n))
            .zip(self.rank.iter(n));
        rows.zip(ids.iter(n))
            .enumerate()
            .filter_map(move |(i, (((cat, run), rank), id))| {
                (cat == Some(category)).then_some((i, (run.unwrap_or(""), rank.unwrap_or(0)), id?))
            })
    }
}

/// Indexes of `cpu_ops` rows (columns `run`, `rank`, `category`, `tid`, `start_ns`,
/// `end_ns`, `correlation`, `external_id`) that some activity can reach: operators by
/// external id, runtime calls by correlation. Only those rows are indexed: a 1 GiB trace has
/// two million CPU rows and a tenth of them launch anything.
pub(crate) struct Links<'a> {
    by_ext: HashMap<(RankKey<'a>, i64), usize>,
    by_corr: HashMap<(RankKey<'a>, i64), usize>,
    cpu: Cols<'a>,
}

/// The activities' columns (`run`, `rank`, `external_id`, `correlation`).
struct Acts<'a> {
    run: Vec<Option<&'a str>>,
    rank: Vec<Option<i64>>,
    ext: Vec<Option<i64>>,
    corr: Vec<Option<i64>>,
}

impl<'a> Acts<'a> {
    fn of(acts: &'a DataFrame) -> Acts<'a> {
        Acts {
            run: strs(acts, "run"),
            rank: ints(acts, "rank"),
            ext: ints(acts, "external_id"),
            corr: ints(acts, "correlation"),
        }
    }

    fn key(&self, i: usize) -> RankKey<'a> {
        (self.run[i].unwrap_or(""), self.rank[i].unwrap_or(0))
    }
}

impl<'a> Links<'a> {
    /// The links of `cpu` that the activities of `acts` can follow.
    pub(crate) fn new(cpu: &'a DataFrame, acts: &DataFrame) -> Links<'a> {
        let a = Acts::of(acts);
        let c = Cols::of(cpu);
        let n = a.run.len();
        let wanted_corr: HashSet<(RankKey, i64)> = (0..n)
            .filter_map(|i| Some((a.key(i), a.corr[i]?)))
            .collect();
        let mut wanted_ext: HashSet<(RankKey, i64)> =
            (0..n).filter_map(|i| Some((a.key(i), a.ext[i]?))).collect();
        let mut by_corr = HashMap::default();
        // Driver calls first, so that a runtime call with the same correlation replaces one.
        for category in ["driver", "runtime"] {
            for (i, key, corr) in c.ids(category, &c.corr) {
                let k = (key, corr);
                if wanted_corr.contains(&k) {
                    by_corr.insert(k, i);
                }
            }
        }
        for (&(key, _), &i) in &by_corr {
            if let Some(e) = c.ext.get(i) {
                wanted_ext.insert((key, e));
            }
        }
        let dur = |i: usize| c.end.get(i).unwrap_or(0) - c.start.get(i).unwrap_or(0);
        let mut by_ext = HashMap::default();
        for (i, key, ext) in c.ids("cpu_op", &c.ext) {
            let k = (key, ext);
            if wanted_ext.contains(&k) {
                // Several operators with one id: the innermost (shortest) launched.
                let slot = by_ext.entry(k).or_insert(i);
                if *slot != i && dur(i) < dur(*slot) {
                    *slot = i;
                }
            }
        }
        Links {
            by_ext,
            by_corr,
            cpu: c,
        }
    }

    /// The runtime call (a row of `cpu`) that launched each activity of `acts`: the one with
    /// its correlation id, same run and rank.
    pub(crate) fn calls(&self, acts: &DataFrame) -> Vec<Option<usize>> {
        let a = Acts::of(acts);
        (0..a.run.len())
            .map(|i| a.corr[i].and_then(|c| self.by_corr.get(&(a.key(i), c)).copied()))
            .collect()
    }

    /// The launching operator (a row of `cpu`) of every activity of `acts`: by its external
    /// id, else through its runtime call (the call's external id, else the innermost
    /// `cpu_op` enclosing the call on its thread).
    pub(crate) fn launchers(&self, acts: &DataFrame) -> Vec<Option<usize>> {
        let a = Acts::of(acts);
        let mut out = vec![None; a.run.len()];
        let mut queries: Vec<(usize, usize)> = Vec::new();
        for (i, slot) in out.iter_mut().enumerate() {
            let key = a.key(i);
            *slot = a.ext[i].and_then(|e| self.by_ext.get(&(key, e)).copied());
            if slot.is_some() {
                continue;
            }
            let Some(&call) = a.corr[i].and_then(|c| self.by_corr.get(&(key, c))) else {
                continue;
            };
            *slot = self
                .cpu
                .ext
                .get(call)
                .and_then(|e| self.by_ext.get(&(key, e)).copied());
            if slot.is_none() {
                queries.push((i, call));
            }
        }
        for (i, op) in self.innermost(&queries) {
            out[i] = op;
        }
        out
    }

    /// For each (activity, runtime call) query: the innermost `cpu_op` on the call's thread
    /// whose span contains the call's start. One stack sweep per thread asked about.
    fn innermost(&self, queries: &[(usize, usize)]) -> Vec<(usize, Option<usize>)> {
        let c = &self.cpu;
        let thread = |i: usize| (c.run.get(i), c.rank.get(i), c.tid.get(i));
        let mut asks: HashMap<_, Vec<(i64, usize)>> = HashMap::default();
        for &(act, call) in queries {
            asks.entry(thread(call))
                .or_default()
                .push((c.start.get(call).unwrap_or(0), act));
        }
        let mut ops: HashMap<_, Vec<usize>> = HashMap::default();
        if !asks.is_empty() {
            for i in c.rows("cpu_op") {
                if asks.contains_key(&thread(i)) {
                    ops.entry(thread(i)).or_default().push(i);
                }
            }
        }
        let mut out = Vec::new();
        for (t, mut asks) in asks {
            let mut list = ops.remove(&t).unwrap_or_default();
            list.sort_by_key(|&i| (c.start.get(i), std::cmp::Reverse(c.end.get(i))));
            asks.sort_unstable();
            let (mut stack, mut next) = (Vec::<usize>::new(), 0);
            for (at, act) in asks {
                while next < list.len() && c.start.get(list[next]).unwrap_or(0) <= at {
                    stack.push(list[next]);
                    next += 1;
                }
                stack.retain(|&o| c.end.get(o).unwrap_or(0) >= at);
                out.push((act, stack.last().copied()));
            }
        }
        out
    }
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
