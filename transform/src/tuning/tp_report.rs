//! The TP scaling report on disk, in the Megatron TP overlap tuner's shapes, so that what a
//! user already reads (and Megatron already loads) comes from aorta: `tuning_report.json`
//! with `tp_scaling`, one `optimal_tp_comm_overlap_cfg_tp{N}.yaml` per TP size whose methods
//! are known, `optimal_tp_comm_overlap_cfg.yaml` for the recommended size, and `summary.txt`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::tp_scaling::{best_methods, overlap_cfg_yaml, scaling, Scaling, Timing, TpError};

/// What was written, for the command to print.
#[derive(Debug, Clone, PartialEq)]
pub struct TpReport {
    /// Per operator (`overall` last), its scaling.
    pub results: Vec<(String, Scaling)>,
    /// The files written, in `out`.
    pub files: Vec<PathBuf>,
    /// The human-readable summary (also `summary.txt`).
    pub summary: String,
}

/// The report before it is written: `tuning_report.json`'s `tp_scaling` object, the tuner's
/// YAML files (name, text) and the summary. `aorta sweep report` folds these into its own
/// files; `aorta sweep tp` writes them as they are ([`write`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TpScaling {
    /// Per operator (`overall` last), its scaling.
    pub results: Vec<(String, Scaling)>,
    /// `{"tolerance": …, "results": {…}}`.
    pub json: serde_json::Value,
    /// `optimal_tp_comm_overlap_cfg_tp{N}.yaml` per TP size with methods, then
    /// `optimal_tp_comm_overlap_cfg.yaml` for the recommended size.
    pub yamls: Vec<(String, String)>,
    /// The table in words.
    pub summary: String,
}

/// Computes the scaling of `times` and what the tuner's files would hold.
pub fn compute(times: &[Timing], tolerance: f64) -> Result<TpScaling, TpError> {
    let results = scaling(times, tolerance)?;
    let by_op: BTreeMap<&str, &Scaling> = results.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let json = json!({"tolerance": tolerance, "results": by_op});
    let mut sizes: Vec<u32> = times.iter().map(|t| t.tp).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut yamls = Vec::new();
    for &n in &sizes {
        let methods = best_methods(times, n);
        if !methods.is_empty() {
            yamls.push((
                format!("optimal_tp_comm_overlap_cfg_tp{n}.yaml"),
                overlap_cfg_yaml(&methods),
            ));
        }
    }
    // The recommended size: overall's where there is one, else the single operator's.
    let recommended = results.last().map(|(_, s)| s.optimal_tp_size).unwrap_or(1);
    let methods = best_methods(times, recommended);
    if !methods.is_empty() {
        yamls.push((
            "optimal_tp_comm_overlap_cfg.yaml".into(),
            overlap_cfg_yaml(&methods),
        ));
    }
    let summary = summary_text(&results, tolerance, recommended);
    Ok(TpScaling {
        results,
        json,
        yamls,
        summary,
    })
}

/// Computes the scaling of `times` and writes the report into `out` (created if missing).
pub fn write(times: &[Timing], tolerance: f64, out: &Path) -> Result<TpReport, TpError> {
    let r = compute(times, tolerance)?;
    let io = |p: &Path, e: std::io::Error| TpError::File {
        path: p.display().to_string(),
        what: e.to_string(),
    };
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let doc = json!({ "tp_scaling": r.json });
    let mut texts = vec![(
        "tuning_report.json".to_string(),
        serde_json::to_string_pretty(&doc).expect("serializes"),
    )];
    texts.extend(r.yamls);
    texts.push(("summary.txt".into(), r.summary.clone()));
    let mut files = Vec::new();
    for (name, text) in texts {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| io(&p, e))?;
        files.push(p);
    }
    Ok(TpReport {
        results: r.results,
        files,
        summary: r.summary,
    })
}

fn summary_text(results: &[(String, Scaling)], tolerance: f64, recommended: u32) -> String {
    let mut s = format!(
        "TP scaling: T(n) / (T(1)/n), efficient (*) within {:.0} % of linear; T(n) the best method's e2e\n",
        100.0 * tolerance
    );
    for (op, r) in results {
        let cells: Vec<String> = r
            .scaling_ratios
            .iter()
            .map(|(n, ratio)| {
                let star = if r.scaling_efficient[n] { "*" } else { "" };
                format!("TP {n}: {:.1} us, {ratio:.2}{star}", r.e2e_times[n])
            })
            .collect();
        s.push_str(&format!(
            "  {op:<10} {}  -> TP {}\n",
            cells.join("; "),
            r.optimal_tp_size
        ));
    }
    if let Some((_, r)) = results.last() {
        s.push_str(&format!("recommended: TP {recommended}: {}\n", r.reason));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_tuners_files() {
        let dir = tempfile::tempdir().unwrap();
        let t = |tp: u32, op: &str, us: f64, method: &str| Timing {
            tp,
            operator: op.into(),
            e2e_us: us,
            method: Some(method.into()),
            phase: None,
        };
        let times = [
            t(1, "fc1", 2000.0, "none"),
            t(2, "fc1", 1100.0, "bulk"),
            t(2, "fc1", 1150.0, "ring_exchange"),
            t(4, "fc1", 600.0, "ring_exchange"),
            t(8, "fc1", 400.0, "pipeline"),
        ];
        let r = write(&times, 0.2, dir.path()).unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("tuning_report.json")).unwrap())
                .unwrap();
        let fc1 = &doc["tp_scaling"]["results"]["fc1"];
        assert_eq!(fc1["optimal_tp_size"], 4);
        assert_eq!(fc1["scaling_efficient"]["8"], false);
        assert_eq!(fc1["e2e_times"]["2"], 1100.0);
        let yaml = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(
            yaml("optimal_tp_comm_overlap_cfg_tp2.yaml"),
            "fc1_fprop:\n  method: bulk\n"
        );
        assert_eq!(
            yaml("optimal_tp_comm_overlap_cfg.yaml"),
            "fc1_fprop:\n  method: ring_exchange\n"
        );
        assert!(r.summary.contains("recommended: TP 4"), "{}", r.summary);
        assert_eq!(r.files.len(), 1 + 4 + 1 + 1);
    }
}
