//! TP scaling: is tensor parallelism of size n worth it, operator by operator?
//!
//! The Megatron TP overlap tuner's rule, from its sources: TP = n is efficient when
//! T(n) ≤ (1 + tolerance) · T(1) / n, i.e. when the ratio T(n) / (T(1) / n) is at most
//! 1 + tolerance (0.2 by default); the recommendation is the largest efficient size. Its
//! example: 2000, 1100, 600 and 400 µs at TP 1, 2, 4 and 8 give 1.0, 1.1, 1.2 and 1.6, so TP 4.
//! T(n) of an operator is its end-to-end time under the best method at that size (the least
//! of its times there); overall, the sum over the operators that have a time at every size
//! the overall row covers. Written here once, fed by measured times (`aorta sweep tp --times`)
//! or, later, by per-window times from traces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The tuner's default tolerance: 20 % above linear scaling is still efficient.
pub const DEFAULT_TOLERANCE: f64 = 0.2;

/// One measured time: an operator's end-to-end µs at a TP size, under a method (optional),
/// in a phase (optional).
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Tensor-parallel size.
    pub tp: u32,
    /// `qkv`, `proj`, `fc1`, `fc2`, or any name.
    pub operator: String,
    /// End-to-end time, µs.
    pub e2e_us: f64,
    /// The overlap method that gave it (`ring_exchange`, `bulk`, `pipeline`, …), if known.
    pub method: Option<String>,
    /// `fprop`, `dgrad` or `wgrad`, if known.
    pub phase: Option<String>,
}

/// The verdict for one operator (or `overall`), in the tuner's `tp_scaling.results.<op>`
/// shape: maps keyed by the TP size as a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    /// The largest efficient TP size (1 when no larger one is).
    pub optimal_tp_size: u32,
    /// T(n) / (T(1) / n) per size.
    pub scaling_ratios: BTreeMap<String, f64>,
    /// T(n) per size, µs (the best method's).
    pub e2e_times: BTreeMap<String, f64>,
    /// Whether each size is within the tolerance.
    pub scaling_efficient: BTreeMap<String, bool>,
    /// The recommendation in words.
    pub reason: String,
}

/// A TP scaling error: one line saying what is missing.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TpError {
    /// An operator has no time at TP 1, the reference of every ratio.
    #[error("operator `{0}` has no time at TP 1, which every ratio is measured against")]
    NoTp1(String),
    /// No timing at all.
    #[error("no timings")]
    Empty,
    /// A times file that cannot be read.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: String,
        /// What is wrong, with its line.
        what: String,
    },
    /// A time that is no time.
    #[error("operator `{operator}` at TP {tp}: {what}")]
    Bad {
        /// The operator.
        operator: String,
        /// The TP size.
        tp: u32,
        /// What is wrong.
        what: String,
    },
}

/// Reads `tp,operator,e2e_us[,method][,phase]` rows (a header naming the columns, any order)
/// from a CSV file; a bad row is an error naming the file and its line.
pub fn read_times(path: &std::path::Path) -> Result<Vec<Timing>, TpError> {
    let file = |what: String| TpError::File {
        path: path.display().to_string(),
        what,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| file(e.to_string()))?;
    let headers = rdr.headers().map_err(|e| file(e.to_string()))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let (Some(tp), Some(op), Some(us)) = (col("tp"), col("operator"), col("e2e_us")) else {
        return Err(file(format!(
            "line 1: the header must name the columns tp, operator and e2e_us (method, phase optional); it has {}",
            headers.iter().collect::<Vec<_>>().join(", ")
        )));
    };
    let (method, phase) = (col("method"), col("phase"));
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| file(format!("line {line}: {e}")))?;
        let get = |c: usize| rec.get(c).unwrap_or("");
        let opt = |c: Option<usize>| c.map(get).filter(|v| !v.is_empty()).map(str::to_string);
        out.push(Timing {
            tp: get(tp).parse().map_err(|_| {
                file(format!(
                    "line {line}: tp `{}` is not a whole number",
                    get(tp)
                ))
            })?,
            operator: get(op).to_string(),
            e2e_us: get(us)
                .parse()
                .map_err(|_| file(format!("line {line}: e2e_us `{}` is not a number", get(us))))?,
            method: opt(method),
            phase: opt(phase),
        });
    }
    Ok(out)
}

/// The scaling of every operator and of their sum, by operator name (`overall` last).
pub fn scaling(times: &[Timing], tolerance: f64) -> Result<Vec<(String, Scaling)>, TpError> {
    if times.is_empty() {
        return Err(TpError::Empty);
    }
    // The best (least) time per operator and size.
    let mut best: BTreeMap<&str, BTreeMap<u32, f64>> = BTreeMap::new();
    for t in times {
        if t.tp == 0 || !t.e2e_us.is_finite() || t.e2e_us <= 0.0 {
            return Err(TpError::Bad {
                operator: t.operator.clone(),
                tp: t.tp,
                what: format!("tp {} and e2e_us {} must both be above 0", t.tp, t.e2e_us),
            });
        }
        let slot = best
            .entry(&t.operator)
            .or_default()
            .entry(t.tp)
            .or_insert(t.e2e_us);
        *slot = slot.min(t.e2e_us);
    }
    let mut out = Vec::new();
    for (op, by_tp) in &best {
        out.push((op.to_string(), judge(op, by_tp, tolerance)?));
    }
    // Overall: the sizes every operator has, each the sum of the operators' best times.
    let sizes: Vec<u32> = best
        .values()
        .map(|m| m.keys().copied().collect::<Vec<_>>())
        .reduce(|a, b| a.into_iter().filter(|s| b.contains(s)).collect())
        .unwrap_or_default();
    if best.len() > 1 && sizes.contains(&1) {
        let total: BTreeMap<u32, f64> = sizes
            .iter()
            .map(|&n| (n, best.values().map(|m| m[&n]).sum()))
            .collect();
        out.push(("overall".to_string(), judge("overall", &total, tolerance)?));
    }
    Ok(out)
}

fn judge(op: &str, by_tp: &BTreeMap<u32, f64>, tolerance: f64) -> Result<Scaling, TpError> {
    let t1 = *by_tp
        .get(&1)
        .ok_or_else(|| TpError::NoTp1(op.to_string()))?;
    let mut ratios = BTreeMap::new();
    let mut times = BTreeMap::new();
    let mut efficient = BTreeMap::new();
    let mut optimal = 1;
    for (&n, &t) in by_tp {
        let ratio = t / (t1 / f64::from(n));
        let ok = ratio <= 1.0 + tolerance + 1e-12;
        ratios.insert(n.to_string(), ratio);
        times.insert(n.to_string(), t);
        efficient.insert(n.to_string(), ok);
        if ok {
            optimal = optimal.max(n);
        }
    }
    let listed: Vec<String> = by_tp
        .iter()
        .map(|(n, t)| format!("TP {n} {:.2}", t / (t1 / f64::from(*n))))
        .collect();
    let reason = if optimal == 1 {
        format!(
            "no TP size above 1 scales within {:.0} % of linear (T(n) / (T(1)/n): {}); TP 1 recommended",
            100.0 * tolerance,
            listed.join(", ")
        )
    } else {
        format!(
            "TP {optimal} is the largest size within {:.0} % of linear scaling (T(n) / (T(1)/n): {})",
            100.0 * tolerance,
            listed.join(", ")
        )
    };
    Ok(Scaling {
        optimal_tp_size: optimal,
        scaling_ratios: ratios,
        e2e_times: times,
        scaling_efficient: efficient,
        reason,
    })
}

/// The best method per (operator, phase) at TP `n`: the method of the least time there, for
/// the timings that name one.
pub fn best_methods(times: &[Timing], n: u32) -> BTreeMap<(String, String), String> {
    let mut best: BTreeMap<(String, String), (f64, String)> = BTreeMap::new();
    for t in times.iter().filter(|t| t.tp == n) {
        let Some(method) = &t.method else { continue };
        let phase = t.phase.clone().unwrap_or_else(|| "fprop".into());
        let slot = best
            .entry((t.operator.clone(), phase))
            .or_insert((f64::INFINITY, String::new()));
        if t.e2e_us < slot.0 {
            *slot = (t.e2e_us, method.clone());
        }
    }
    best.into_iter().map(|(k, (_, m))| (k, m)).collect()
}

/// Megatron's `tp_comm_overlap_cfg` YAML for one TP size: one `<operator>_<phase>:` block per
/// (operator, phase) with its best `method`. Written by hand: two levels of plain keys and
/// words, which a YAML library would write the same way.
pub fn overlap_cfg_yaml(methods: &BTreeMap<(String, String), String>) -> String {
    let mut out = String::new();
    for ((op, phase), method) in methods {
        out.push_str(&format!("{op}_{phase}:\n  method: {method}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tp: u32, op: &str, us: f64) -> Timing {
        Timing {
            tp,
            operator: op.into(),
            e2e_us: us,
            method: None,
            phase: None,
        }
    }

    /// The tuner's own example: 2000, 1100, 600, 400 µs at TP 1, 2, 4, 8.
    #[test]
    fn the_tuners_example_recommends_tp_4() {
        let times = [
            t(1, "fc1", 2000.0),
            t(2, "fc1", 1100.0),
            t(4, "fc1", 600.0),
            t(8, "fc1", 400.0),
        ];
        let s = &scaling(&times, DEFAULT_TOLERANCE).unwrap()[0].1;
        let r: Vec<f64> = s.scaling_ratios.values().copied().collect();
        // BTreeMap of strings: "1", "2", "4", "8".
        assert_eq!(
            s.scaling_ratios.keys().collect::<Vec<_>>(),
            ["1", "2", "4", "8"]
        );
        for (got, want) in r.iter().zip([1.0, 1.1, 1.2, 1.6]) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        assert_eq!(s.optimal_tp_size, 4);
        assert!(!s.scaling_efficient["8"]);
        assert!(s
            .reason
            .starts_with("TP 4 is the largest size within 20 % of linear"));
    }

    #[test]
    fn no_efficient_size_recommends_tp_1_and_overall_sums_the_best_methods() {
        let mut times = vec![t(1, "qkv", 500.0), t(2, "qkv", 360.0), t(4, "qkv", 262.0)];
        times.extend([
            t(1, "proj", 170.0),
            t(2, "proj", 190.0),
            t(2, "proj", 250.0),
            t(4, "proj", 160.0),
        ]);
        let all = scaling(&times, DEFAULT_TOLERANCE).unwrap();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["proj", "qkv", "overall"]);
        for (_, s) in &all {
            assert_eq!(s.optimal_tp_size, 1, "{s:?}");
            assert!(s.reason.starts_with("no TP size above 1"));
        }
        // proj at TP 2: the better of 190 and 250.
        assert_eq!(all[0].1.e2e_times["2"], 190.0);
        let overall = &all[2].1;
        assert_eq!(overall.e2e_times["2"], 550.0);
        assert!((overall.scaling_ratios["2"] - 550.0 / (670.0 / 2.0)).abs() < 1e-12);
    }

    #[test]
    fn errors_name_what_is_missing() {
        assert_eq!(scaling(&[], 0.2), Err(TpError::Empty));
        assert_eq!(
            scaling(&[t(2, "fc2", 10.0)], 0.2),
            Err(TpError::NoTp1("fc2".into()))
        );
        assert!(matches!(
            scaling(&[t(1, "fc2", -1.0)], 0.2),
            Err(TpError::Bad { .. })
        ));
    }

    #[test]
    fn the_yaml_names_each_operator_and_phase_with_its_best_method() {
        let mut a = t(2, "qkv", 300.0);
        a.method = Some("ring_exchange".into());
        let mut b = t(2, "qkv", 250.0);
        b.method = Some("bulk".into());
        let mut c = t(2, "fc2", 200.0);
        c.method = Some("pipeline".into());
        c.phase = Some("dgrad".into());
        let y = overlap_cfg_yaml(&best_methods(&[a, b, c], 2));
        assert_eq!(
            y,
            "fc2_dgrad:\n  method: pipeline\nqkv_fprop:\n  method: bulk\n"
        );
    }
}
