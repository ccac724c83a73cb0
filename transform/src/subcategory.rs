//! The subcategory of every `other_compute` activity (`aorta_ingest::subcategory` holds the
//! rows and says what they are).
//!
//! Computed here, when a command asks, rather than stored by ingest: a row may look at the
//! operator that launched the kernel and at the annotations around it, and only the whole
//! dataset links a kernel to its operator (`crate::launch`, for every format), while each of
//! ingest's readers sees a kernel before its launch. The cost is one pass over the
//! launching `cpu_ops` rows, which `aorta kernels` and `aorta compare` read anyway, and one
//! rule lookup per distinct (kernel name, operator, enclosing annotations). A run's rules are
//! the shipped rows plus the `[[subcategory]]` rows of the `--rules` file it was ingested
//! with (`runs.user_rules`), so a user's own subcategory lasts as long as the data.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use aorta_ingest::subcategory::Subclassifier;
use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::launch::{Links, LINK_COLUMNS};
use crate::rows::{ints, strs, IntAt, StrAt};

/// The category whose activities have a subcategory.
pub(crate) const OTHER_COMPUTE: &str = "other_compute";

/// The subcategory rules of some runs: each run's own (shipped + its `--rules` file).
pub(crate) struct Rules {
    shipped: Subclassifier,
    per_run: HashMap<String, Subclassifier>,
}

impl Rules {
    /// The rules of `runs`, from their `runs.user_rules` (the first file's text when a run's
    /// files were ingested with different ones).
    /// A text that no longer compiles (rules this aorta rejects) makes the dataset damaged.
    pub(crate) fn load(root: &Path, runs: &[String]) -> Result<Rules, DatasetError> {
        let df = dataset::read_where(
            root,
            "runs",
            dataset::of_runs(runs).and(col("user_rules").is_not_null()),
            &["run", "user_rules"],
        )?;
        let mut texts: BTreeMap<&str, &str> = BTreeMap::new();
        for (run, text) in strs(&df, "run").into_iter().zip(strs(&df, "user_rules")) {
            if let (Some(r), Some(t)) = (run, text) {
                texts.entry(r).or_insert(t);
            }
        }
        let mut per_run = HashMap::new();
        for (run, text) in texts {
            let c =
                Subclassifier::new(Some((text, "--rules"))).map_err(|e| DatasetError::Damaged {
                    path: root.join("runs"),
                    msg: format!("run `{run}`: runs.user_rules: {e}"),
                })?;
            per_run.insert(run.to_string(), c);
        }
        Ok(Rules {
            shipped: Subclassifier::builtin(),
            per_run,
        })
    }

    /// The shipped rules alone (runs ingested without `--rules`).
    pub(crate) fn shipped() -> Rules {
        Rules {
            shipped: Subclassifier::builtin(),
            per_run: HashMap::new(),
        }
    }

    fn of(&self, run: &str) -> &Subclassifier {
        self.per_run.get(run).unwrap_or(&self.shipped)
    }

    fn any_within(&self) -> bool {
        std::iter::once(&self.shipped)
            .chain(self.per_run.values())
            .any(|c| !c.within_set().is_empty())
    }
}

/// The `gpu_activities` columns `assign` reads.
pub(crate) const ACT_COLUMNS: [&str; 6] = [
    "run",
    "rank",
    "name",
    "category",
    "correlation",
    "external_id",
];

/// The `cpu_ops` rows of `runs` the subcategories need: operators and runtime calls (the
/// links, and what `within` matches among operators), and the user annotations and Python
/// frames that some `within` condition matches (`Optimizer.step#…`, `nn.Module: …`; the
/// rest are dropped here, row by row, as polars is built without its regex feature).
/// `extra`: columns read besides `LINK_COLUMNS`.
pub(crate) fn read_cpu(
    root: &Path,
    runs: &[String],
    rules: &Rules,
    extra: &[&str],
) -> Result<DataFrame, DatasetError> {
    let is = |c: &str| col("category").eq(lit(c.to_string()));
    let mut wanted = is("cpu_op").or(crate::launch::launch_calls());
    if rules.any_within() {
        wanted = wanted.or(is("user_annotation")).or(is("python_function"));
    }
    let mut cols = LINK_COLUMNS.to_vec();
    cols.extend(extra);
    let df = dataset::read_where(root, "cpu_ops", dataset::of_runs(runs).and(wanted), &cols)?;
    if !rules.any_within() {
        return Ok(df);
    }
    let (run, cat, name) = (strs(&df, "run"), strs(&df, "category"), strs(&df, "name"));
    let keep: Vec<bool> = (0..df.height())
        .map(|i| {
            !matches!(cat[i], Some("user_annotation" | "python_function"))
                || rules
                    .of(run[i].unwrap_or(""))
                    .within_set()
                    .is_match(name[i].unwrap_or(""))
        })
        .collect();
    df.filter(&BooleanChunked::from_slice("keep".into(), &keep))
        .map_err(|source| DatasetError::Polars {
            path: root.join("cpu_ops"),
            source,
        })
}

/// The subcategory of every activity of `acts` (null unless `other_compute`), with `cpu`
/// read by `read_cpu` and `launchers` from `Links::launchers` over the two.
pub(crate) fn assign<'r>(
    acts: &DataFrame,
    cpu: &DataFrame,
    launchers: &[Option<usize>],
    rules: &'r Rules,
) -> Vec<Option<&'r str>> {
    let (run, name, cat) = (
        strs(acts, "run"),
        strs(acts, "name"),
        strs(acts, "category"),
    );
    let ops = strs(cpu, "name");
    let within = Within::of(cpu, acts, launchers, rules);
    let mut seen: HashMap<(&str, &str, Option<&str>, u64), &'r str> = HashMap::new();
    (0..acts.height())
        .map(|i| {
            if cat[i] != Some(OTHER_COMPUTE) {
                return None;
            }
            let r = run[i].unwrap_or("");
            let op = launchers[i].and_then(|o| ops[o]);
            let mask = launchers[i].map_or(0, |o| within.mask(o));
            let key = (r, name[i].unwrap_or(""), op, mask);
            Some(
                *seen
                    .entry(key)
                    .or_insert_with(|| rules.of(r).classify(key.1, op, mask)),
            )
        })
        .collect()
}

/// The subcategory of every activity of `acts` (columns `ACT_COLUMNS`) of `runs`, reading
/// their launching operators from the dataset.
pub(crate) fn of_activities<'r>(
    root: &Path,
    runs: &[String],
    acts: &DataFrame,
    rules: &'r Rules,
) -> Result<Vec<Option<&'r str>>, DatasetError> {
    let cpu = read_cpu(root, runs, rules, &[])?;
    let launchers = Links::new(&cpu, acts).launchers(acts);
    Ok(assign(acts, &cpu, &launchers, rules))
}

/// Which `within` patterns enclose each launching operator: per thread, one sweep of the
/// operators asked about against the (few) rows matching a pattern.
struct Within {
    masks: HashMap<usize, u64>,
}

impl Within {
    fn of(cpu: &DataFrame, acts: &DataFrame, launchers: &[Option<usize>], rules: &Rules) -> Within {
        let n = cpu.height();
        let (run, name) = (StrAt::of(cpu, "run"), StrAt::of(cpu, "name"));
        let (rank, tid) = (IntAt::of(cpu, "rank"), IntAt::of(cpu, "tid"));
        let (start, end) = (IntAt::of(cpu, "start_ns"), IntAt::of(cpu, "end_ns"));
        let thread = |i: usize| (run.get(i), rank.get(i), tid.get(i));
        let act_run = strs(acts, "run");
        let mut asked: HashMap<_, Vec<usize>> = HashMap::new();
        for (i, o) in launchers.iter().enumerate() {
            if let (Some(o), Some(r)) = (o, act_run[i]) {
                if !rules.of(r).within_set().is_empty() {
                    asked.entry(thread(*o)).or_default().push(*o);
                }
            }
        }
        let mut spans: HashMap<_, Vec<(i64, i64, u64)>> = HashMap::new();
        if !asked.is_empty() {
            for i in 0..n {
                let set = rules.of(run.get(i).unwrap_or("")).within_set();
                let mask = set
                    .matches(name.get(i).unwrap_or(""))
                    .into_iter()
                    .fold(0u64, |m, b| m | (1 << b));
                if mask != 0 && asked.contains_key(&thread(i)) {
                    let (s, e) = (start.get(i).unwrap_or(0), end.get(i).unwrap_or(0));
                    spans.entry(thread(i)).or_default().push((s, e, mask));
                }
            }
        }
        let mut masks = HashMap::new();
        for (t, mut ops) in asked {
            let mut list = spans.remove(&t).unwrap_or_default();
            list.sort_unstable();
            let at = |o: usize| (start.get(o).unwrap_or(0), end.get(o).unwrap_or(0));
            ops.sort_unstable_by_key(|&o| at(o));
            ops.dedup();
            let (mut open, mut next) = (Vec::<(i64, i64, u64)>::new(), 0);
            for o in ops {
                let (s, e) = at(o);
                while next < list.len() && list[next].0 <= s {
                    open.push(list[next]);
                    next += 1;
                }
                open.retain(|span| span.1 >= s);
                let m = open
                    .iter()
                    .filter(|span| span.1 >= e)
                    .fold(0, |m, span| m | span.2);
                masks.insert(o, m);
            }
        }
        Within { masks }
    }

    fn mask(&self, op: usize) -> u64 {
        self.masks.get(&op).copied().unwrap_or(0)
    }
}

/// GPU time of every `other_compute` subcategory per (run, rank, step): columns `run`,
/// `rank`, `step`, `subcategory`, `gpu_ns` (the sum of `end_ns − start_ns`), sorted by the
/// first four; `rank` restricts it to one rank.
pub fn per_step(
    root: &Path,
    runs: &[String],
    rank: Option<i64>,
) -> Result<DataFrame, DatasetError> {
    let rules = Rules::load(root, runs)?;
    let mut filter = dataset::of_runs(runs).and(col("category").eq(lit(OTHER_COMPUTE)));
    if let Some(r) = rank {
        filter = filter.and(col("rank").eq(lit(r)));
    }
    let mut cols = ACT_COLUMNS.to_vec();
    cols.extend(["step", "start_ns", "end_ns"]);
    let acts = dataset::read_where(root, "gpu_activities", filter, &cols)?;
    let subs = of_activities(root, runs, &acts, &rules)?;
    let (run, rk, step) = (strs(&acts, "run"), ints(&acts, "rank"), ints(&acts, "step"));
    let (s, e) = (ints(&acts, "start_ns"), ints(&acts, "end_ns"));
    let mut sums: BTreeMap<(&str, i64, Option<i64>, &str), i64> = BTreeMap::new();
    for i in 0..acts.height() {
        let key = (
            run[i].unwrap_or(""),
            rk[i].unwrap_or(0),
            step[i],
            subs[i].unwrap_or(""),
        );
        *sums.entry(key).or_default() += e[i].unwrap_or(0) - s[i].unwrap_or(0);
    }
    let keys: Vec<_> = sums.keys().collect();
    DataFrame::new_infer_height(vec![
        crate::rows::str_column("run", keys.iter().map(|k| k.0)),
        Column::new("rank".into(), keys.iter().map(|k| k.1).collect::<Vec<_>>()),
        Column::new("step".into(), keys.iter().map(|k| k.2).collect::<Vec<_>>()),
        crate::rows::str_column("subcategory", keys.iter().map(|k| k.3)),
        Column::new("gpu_ns".into(), sums.values().copied().collect::<Vec<_>>()),
    ])
    .map_err(|source| DatasetError::Polars {
        path: root.join("gpu_activities"),
        source,
    })
}
