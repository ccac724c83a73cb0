//! The tables `aorta compare -o DIR` writes, read into typed rows. Each file is required; a
//! missing one is an error naming it, so a half-written comparison never renders.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::ReportError;
use crate::frames::{f64_col, i64_col, opt_str_col, str_col};

/// `compare_levels`: one summary line (median, p10–p90 per side, ratio) of one pair, or the
/// overall line of several (`workload` null: the geometric mean of the pairs' ratios).
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub level: String,
    /// The pair's workload; `None` on the overall line of several pairs (and in tables of an
    /// older aorta, whose every line was pooled).
    pub workload: Option<String>,
    pub key: String,
    pub unit: String,
    pub reference: [Option<f64>; 3],
    pub candidate: [Option<f64>; 3],
    pub ratio: Option<f64>,
    /// On the overall line of several pairs: the pairs with a ratio, and their ratios' p10
    /// and p90.
    pub ratio_n: Option<i64>,
    pub ratio_range: [Option<f64>; 2],
}

/// `compare_steps`: one rank-step of one side.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub side: String,
    /// The pair's workload (tables of an older aorta: the run's last label component).
    pub workload: String,
    pub step: Option<i64>,
    pub step_ms: Option<f64>,
    pub exposed_comm_ms: Option<f64>,
}

/// `compare_categories`: GPU time of one category in one rank-step of one side.
#[derive(Debug, Clone)]
pub(crate) struct Category {
    pub side: String,
    /// The pair's workload (empty in tables of an older aorta).
    pub workload: String,
    pub category: String,
    pub gpu_ms: Option<f64>,
}

/// `compare_operators`: one (operator, shapes, types) of one pair with both sides' time.
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    /// The pair's workload (empty in tables of an older aorta).
    pub workload: String,
    pub op: String,
    pub input_dims: String,
    pub input_types: String,
    pub reference_ms: Option<f64>,
    pub candidate_ms: Option<f64>,
    pub reference_calls: Option<i64>,
    pub candidate_calls: Option<i64>,
    pub ratio: Option<f64>,
    pub diff_ms: f64,
    pub status: String,
    /// Achieved TFLOP/s and % of the side's own peak, [reference, candidate] (null without a
    /// model, shapes or a known GPU; absent in tables of an older aorta).
    pub tflops: [Option<f64>; 2],
    pub peak_pct: [Option<f64>; 2],
}

/// `compare_collectives`: one (kind, size, dtype, group size) of one side of one pair.
#[derive(Debug, Clone)]
pub(crate) struct Collective {
    pub side: String,
    /// The pair's workload (empty in tables of an older aorta).
    pub workload: String,
    pub comm_op: String,
    pub bytes: Option<i64>,
    pub dtype: Option<String>,
    pub group_size: Option<i64>,
    pub count: Option<i64>,
    pub mean_ms: Option<f64>,
    /// Median skew across ranks (absent in compare outputs of older versions).
    pub skew_ms: Option<f64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
}

/// Everything the page draws.
pub(crate) struct Tables {
    pub levels: Vec<Level>,
    pub steps: Vec<Step>,
    pub categories: Vec<Category>,
    pub operators: Vec<Operator>,
    pub collectives: Vec<Collective>,
    /// `summary.json`, when the file is there.
    pub summary: Option<aorta_transform::compare::Summary>,
}

/// A string column that tables of an older aorta lack: empty strings there.
fn str_or_empty(df: &DataFrame, name: &str, path: &Path) -> Result<Vec<String>, ReportError> {
    match df.schema().contains(name) {
        true => str_col(df, name, path),
        false => Ok(vec![String::new(); df.height()]),
    }
}

/// A float column that tables of an older aorta lack: nulls there.
fn f64_or_null(df: &DataFrame, name: &str, path: &Path) -> Result<Vec<Option<f64>>, ReportError> {
    match df.schema().contains(name) {
        true => f64_col(df, name, path),
        false => Ok(vec![None; df.height()]),
    }
}

fn read(dir: &Path, name: &str) -> Result<(DataFrame, PathBuf), ReportError> {
    let path = dir.join(format!("{name}.parquet"));
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReportError::MissingTable(path.clone()),
        _ => ReportError::Io {
            path: path.clone(),
            source: e,
        },
    })?;
    let df = ParquetReader::new(file)
        .finish()
        .map_err(ReportError::polars(&path))?;
    Ok((df, path))
}

impl Tables {
    pub(super) fn load(dir: &Path) -> Result<Tables, ReportError> {
        if !dir.is_dir() {
            return Err(ReportError::MissingTable(dir.to_path_buf()));
        }
        Ok(Tables {
            levels: levels(dir)?,
            steps: steps(dir)?,
            categories: categories(dir)?,
            operators: operators(dir)?,
            collectives: collectives(dir)?,
            summary: summary(dir)?,
        })
    }
}

fn levels(dir: &Path) -> Result<Vec<Level>, ReportError> {
    let (df, p) = read(dir, "compare_levels")?;
    let s = |c| str_col(&df, c, &p);
    let f = |c| f64_col(&df, c, &p);
    let (level, key, unit) = (s("level")?, s("key")?, s("unit")?);
    let r = [
        f("reference_median")?,
        f("reference_p10")?,
        f("reference_p90")?,
    ];
    let c = [
        f("candidate_median")?,
        f("candidate_p10")?,
        f("candidate_p90")?,
    ];
    let ratio = f("ratio")?;
    let workload = match df.schema().contains("workload") {
        true => opt_str_col(&df, "workload", &p)?,
        false => vec![None; df.height()],
    };
    let n = match df.schema().contains("ratio_n") {
        true => i64_col(&df, "ratio_n", &p)?,
        false => vec![None; df.height()],
    };
    let (lo, hi) = (
        f64_or_null(&df, "ratio_p10", &p)?,
        f64_or_null(&df, "ratio_p90", &p)?,
    );
    Ok((0..df.height())
        .map(|i| Level {
            level: level[i].clone(),
            workload: workload[i].clone(),
            key: key[i].clone(),
            unit: unit[i].clone(),
            reference: [r[0][i], r[1][i], r[2][i]],
            candidate: [c[0][i], c[1][i], c[2][i]],
            ratio: ratio[i],
            ratio_n: n[i],
            ratio_range: [lo[i], hi[i]],
        })
        .collect())
}

fn steps(dir: &Path) -> Result<Vec<Step>, ReportError> {
    let (df, p) = read(dir, "compare_steps")?;
    let (side, run) = (str_col(&df, "side", &p)?, str_col(&df, "run", &p)?);
    let workload = str_or_empty(&df, "workload", &p)?;
    let step = i64_col(&df, "step", &p)?;
    let (ms, exposed) = (
        f64_col(&df, "step_ms", &p)?,
        f64_col(&df, "exposed_comm_ms", &p)?,
    );
    Ok((0..df.height())
        .map(|i| Step {
            side: side[i].clone(),
            workload: match workload[i].as_str() {
                "" => run[i].rsplit('/').next().unwrap_or("").to_string(),
                w => w.to_string(),
            },
            step: step[i],
            step_ms: ms[i],
            exposed_comm_ms: exposed[i],
        })
        .collect())
}

fn categories(dir: &Path) -> Result<Vec<Category>, ReportError> {
    let (df, p) = read(dir, "compare_categories")?;
    let (side, cat) = (str_col(&df, "side", &p)?, str_col(&df, "category", &p)?);
    let workload = str_or_empty(&df, "workload", &p)?;
    let ms = f64_col(&df, "gpu_ms", &p)?;
    Ok((0..df.height())
        .map(|i| Category {
            side: side[i].clone(),
            workload: workload[i].clone(),
            category: cat[i].clone(),
            gpu_ms: ms[i],
        })
        .collect())
}

fn operators(dir: &Path) -> Result<Vec<Operator>, ReportError> {
    let (df, p) = read(dir, "compare_operators")?;
    let s = |c| str_col(&df, c, &p);
    let f = |c| f64_col(&df, c, &p);
    let i = |c| i64_col(&df, c, &p);
    let (op, dims, types, status) = (s("op")?, s("input_dims")?, s("input_types")?, s("status")?);
    let (rms, cms, ratio, diff) = (
        f("reference_ms")?,
        f("candidate_ms")?,
        f("ratio")?,
        f("diff_ms")?,
    );
    let (rc, cc) = (i("reference_calls")?, i("candidate_calls")?);
    let workload = str_or_empty(&df, "workload", &p)?;
    // Columns added with `aorta perf`: optional, so a comparison written before still opens.
    let opt = |c: &str| f64_col(&df, c, &p).unwrap_or_else(|_| vec![None; df.height()]);
    let (rt, ct) = (opt("reference_tflops"), opt("candidate_tflops"));
    let (rp, cp) = (opt("reference_peak_pct"), opt("candidate_peak_pct"));
    Ok((0..df.height())
        .map(|k| Operator {
            workload: workload[k].clone(),
            op: op[k].clone(),
            input_dims: dims[k].clone(),
            input_types: types[k].clone(),
            reference_ms: rms[k],
            candidate_ms: cms[k],
            reference_calls: rc[k],
            candidate_calls: cc[k],
            ratio: ratio[k],
            diff_ms: diff[k].unwrap_or(0.0),
            status: status[k].clone(),
            tflops: [rt[k], ct[k]],
            peak_pct: [rp[k], cp[k]],
        })
        .collect())
}

fn collectives(dir: &Path) -> Result<Vec<Collective>, ReportError> {
    let (df, p) = read(dir, "compare_collectives")?;
    let (side, op) = (str_col(&df, "side", &p)?, str_col(&df, "comm_op", &p)?);
    let workload = str_or_empty(&df, "workload", &p)?;
    let dtype = opt_str_col(&df, "dtype", &p)?;
    let i = |c| i64_col(&df, c, &p);
    let f = |c| f64_col(&df, c, &p);
    let (bytes, group, count) = (i("bytes")?, i("group_size")?, i("count")?);
    let (mean, alg, bus) = (f("mean_ms")?, f("algbw_gbps")?, f("busbw_gbps")?);
    let skew = f64_or_null(&df, "median_skew_ms", &p)?;
    Ok((0..df.height())
        .map(|k| Collective {
            side: side[k].clone(),
            workload: workload[k].clone(),
            comm_op: op[k].clone(),
            bytes: bytes[k],
            dtype: dtype[k].clone(),
            group_size: group[k],
            count: count[k],
            mean_ms: mean[k],
            skew_ms: skew[k],
            algbw_gbps: alg[k],
            busbw_gbps: bus[k],
        })
        .collect())
}

/// `summary.json`; `None` when the file is absent.
fn summary(dir: &Path) -> Result<Option<aorta_transform::compare::Summary>, ReportError> {
    let path = dir.join("summary.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ReportError::Io { path, source }),
    };
    let doc: aorta_transform::compare::Summary =
        serde_json::from_slice(&bytes).map_err(|source| ReportError::Json {
            path: path.clone(),
            source,
        })?;
    Ok(Some(doc))
}
