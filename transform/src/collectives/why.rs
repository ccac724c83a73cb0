//! Why a straggler was late: what its GPU did in the time it made the others wait.
//!
//! Naming the last rank is half an answer; the user's next question is what held it up. The
//! window is the `caused_ns` just before its arrival (from the second-to-last arrival to its
//! own), on its own clock. Its GPU activities in that window, clipped to it, give the
//! dominant category (or `idle`: nothing ran for most of it, so the host was late) and the
//! operators that launched the kernels. Only the late ranks' partitions are read.

use std::collections::HashMap;
use std::path::Path;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, strs};
use crate::sweep::Union;

use super::arrive::Arrivals;

/// An arrival at least this much behind the second-to-last is explained: shorter ones are
/// launch jitter, and nothing in a few microseconds of a timeline says why.
pub const LATE_NS: i64 = 50_000;

/// What the last rank did before a late arrival.
#[derive(Debug, Clone, PartialEq)]
pub struct Late {
    /// The category with the most time in the window, or `idle`.
    pub category: String,
    /// |U(its GPU activities) ∩ window|.
    pub busy_ns: i64,
    /// The top operators (else kernel names) with their time in the window.
    pub ops: String,
}

/// Explains every late arrival (`None` elsewhere). `offset` maps a rank to its clock offset.
pub fn explain(
    root: &Path,
    run: &str,
    offset: &HashMap<i64, i64>,
    arr: &[Option<Arrivals>],
) -> Result<Vec<Option<Late>>, DatasetError> {
    let mut out = vec![None; arr.len()];
    let mut by_rank: HashMap<i64, Vec<(usize, i64, i64)>> = HashMap::new();
    for (i, a) in arr.iter().enumerate() {
        let Some(a) = a.filter(|a| a.last - a.second >= LATE_NS) else {
            continue;
        };
        let hi = a.last + offset.get(&a.last_rank).copied().unwrap_or(0);
        let lo = hi - (a.last - a.second);
        by_rank.entry(a.last_rank).or_default().push((i, lo, hi));
    }
    for (rank, windows) in by_rank {
        let acts = Activities::read(root, run, rank)?;
        for (i, lo, hi) in windows {
            out[i] = Some(acts.window(lo, hi));
        }
    }
    Ok(out)
}

/// One rank's GPU activities sorted by start, each with its launching operator's name.
struct Activities {
    /// (start, end, category, label)
    rows: Vec<(i64, i64, String, String)>,
    max_dur: i64,
}

impl Activities {
    fn read(root: &Path, run: &str, rank: i64) -> Result<Activities, DatasetError> {
        let cols = ["start_ns", "end_ns", "category", "name", "external_id"];
        let gpu = dataset::read_partition(root, "gpu_activities", run, rank, &cols)?;
        let cols = ["category", "name", "external_id"];
        let cpu = dataset::read_partition(root, "cpu_ops", run, rank, &cols)?;
        let (cat, name, ext) = (
            strs(&cpu, "category"),
            strs(&cpu, "name"),
            ints(&cpu, "external_id"),
        );
        let ops: HashMap<i64, &str> = (0..cpu.height())
            .filter(|&i| cat[i] == Some("cpu_op"))
            .filter_map(|i| Some((ext[i]?, name[i]?)))
            .collect();
        let (start, end) = (ints(&gpu, "start_ns"), ints(&gpu, "end_ns"));
        let (cat, name, ext) = (
            strs(&gpu, "category"),
            strs(&gpu, "name"),
            ints(&gpu, "external_id"),
        );
        let mut rows: Vec<(i64, i64, String, String)> = (0..gpu.height())
            .filter_map(|i| {
                let label = ext[i]
                    .and_then(|e| ops.get(&e).copied())
                    .or(name[i])
                    .unwrap_or("?");
                let label: String = label.chars().take(60).collect();
                Some((start[i]?, end[i]?, cat[i].unwrap_or("?").to_string(), label))
            })
            .collect();
        rows.sort_unstable_by_key(|r| (r.0, r.1));
        let max_dur = rows.iter().map(|r| r.1 - r.0).max().unwrap_or(0);
        Ok(Activities { rows, max_dur })
    }

    fn window(&self, lo: i64, hi: i64) -> Late {
        let from = self.rows.partition_point(|r| r.0 < lo - self.max_dur);
        let mut cats: HashMap<&str, i64> = HashMap::new();
        let mut ops: HashMap<&str, i64> = HashMap::new();
        let mut union = Union::default();
        for (s, e, cat, label) in self.rows[from..].iter().take_while(|r| r.0 < hi) {
            let (s, e) = ((*s).max(lo), (*e).min(hi));
            if e <= s {
                continue;
            }
            *cats.entry(cat).or_default() += e - s;
            *ops.entry(label).or_default() += e - s;
            union.push(s, e);
        }
        let busy_ns = crate::sweep::length(union.segments());
        fn top<'a>(m: &HashMap<&'a str, i64>) -> Vec<(&'a str, i64)> {
            let mut v: Vec<(&str, i64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
            v.sort_by_key(|&(k, t)| (std::cmp::Reverse(t), k));
            v
        }
        let category = if 2 * busy_ns < hi - lo {
            "idle".to_string()
        } else {
            top(&cats).first().map_or("idle", |c| c.0).to_string()
        };
        let ops = top(&ops)
            .iter()
            .take(3)
            .map(|(k, t)| format!("{k} {:.3} ms", *t as f64 * 1e-6))
            .collect::<Vec<_>>()
            .join("; ");
        Late {
            category,
            busy_ns,
            ops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_clipped_by_hand() {
        let row = |s, e, c: &str, l: &str| (s, e, c.to_string(), l.to_string());
        let acts = Activities {
            rows: vec![
                row(0, 100, "gemm", "aten::mm"),
                row(50, 300, "other_compute", "aten::add_"),
                row(400, 500, "gemm", "aten::mm"),
            ],
            max_dur: 250,
        };
        // Window [60, 460): mm 40 + 60, add_ 240; union [60, 300) + [400, 460) = 300.
        let late = acts.window(60, 460);
        assert_eq!(late.busy_ns, 300);
        assert_eq!(late.category, "other_compute");
        assert_eq!(late.ops, "aten::add_ 0.000 ms; aten::mm 0.000 ms");
        // Window [500, 1500): nothing ran.
        assert_eq!(acts.window(500, 1_500).category, "idle");
    }
}
