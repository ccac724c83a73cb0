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
use crate::intervals::Union;
use crate::rows::{ints, strs};

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

/// A late arrival's window on its rank's clock: (instance, from, to).
type Window = (usize, i64, i64);

/// Explains every late arrival (`None` elsewhere). `offset` maps a rank to its clock offset.
pub(super) fn explain(
    root: &Path,
    run: &str,
    offset: &HashMap<i64, i64>,
    arr: &[Option<Arrivals>],
) -> Result<Vec<Option<Late>>, DatasetError> {
    let mut out = vec![None; arr.len()];
    let mut by_rank: HashMap<i64, Vec<Window>> = HashMap::new();
    for (i, a) in arr.iter().enumerate() {
        let Some(a) = a.filter(|a| a.last - a.second >= LATE_NS) else {
            continue;
        };
        let hi = a.last + offset.get(&a.last_rank).copied().unwrap_or(0);
        let lo = hi - (a.last - a.second);
        by_rank.entry(a.last_rank).or_default().push((i, lo, hi));
    }
    // Each late rank's partition is read and its windows explained on a worker thread.
    let mut by_rank: Vec<(i64, Vec<Window>)> = by_rank.into_iter().collect();
    by_rank.sort_unstable_by_key(|r| r.0);
    let explained = crate::par::map(&by_rank, |(rank, windows)| {
        let acts = Activities::read(root, run, *rank)?;
        Ok::<_, DatasetError>(
            windows
                .iter()
                .map(|&(i, lo, hi)| (i, acts.window(lo, hi)))
                .collect::<Vec<_>>(),
        )
    })?;
    for (i, late) in explained.into_iter().flatten() {
        out[i] = Some(late);
    }
    Ok(out)
}

/// One GPU activity, its category and label as indices into `Activities::names`.
#[derive(Debug, Clone, Copy)]
struct Row {
    start: i64,
    end: i64,
    category: u32,
    label: u32,
}

/// One rank's GPU activities sorted by start, each with its launching operator's name.
struct Activities {
    rows: Vec<Row>,
    /// Categories and labels, each once (a rank has millions of rows but few names).
    names: Vec<String>,
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
        let mut names = Names::default();
        let mut rows: Vec<Row> = (0..gpu.height())
            .filter_map(|i| {
                let label = ext[i]
                    .and_then(|e| ops.get(&e).copied())
                    .or(name[i])
                    .unwrap_or("?");
                Some(Row {
                    start: start[i]?,
                    end: end[i]?,
                    category: names.index(cat[i].unwrap_or("?")),
                    label: names.index(clip(label)),
                })
            })
            .collect();
        rows.sort_unstable_by_key(|r| (r.start, r.end));
        let max_dur = rows.iter().map(|r| r.end - r.start).max().unwrap_or(0);
        Ok(Activities {
            rows,
            names: names.list,
            max_dur,
        })
    }

    fn window(&self, lo: i64, hi: i64) -> Late {
        let from = self.rows.partition_point(|r| r.start < lo - self.max_dur);
        let mut cats: HashMap<u32, i64> = HashMap::new();
        let mut ops: HashMap<u32, i64> = HashMap::new();
        let mut union = Union::default();
        for r in self.rows[from..].iter().take_while(|r| r.start < hi) {
            let (s, e) = (r.start.max(lo), r.end.min(hi));
            if e <= s {
                continue;
            }
            *cats.entry(r.category).or_default() += e - s;
            *ops.entry(r.label).or_default() += e - s;
            union.push(s, e);
        }
        let busy_ns = crate::intervals::length(union.segments());
        let top = |m: &HashMap<u32, i64>| -> Vec<(&str, i64)> {
            let mut v: Vec<(&str, i64)> = m
                .iter()
                .map(|(&k, &t)| (self.names[k as usize].as_str(), t))
                .collect();
            v.sort_by_key(|&(k, t)| (std::cmp::Reverse(t), k));
            v
        };
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

/// A label cut to 60 characters (kernel names run to kilobytes); labels alike in those are
/// one.
fn clip(s: &str) -> &str {
    s.char_indices().nth(60).map_or(s, |(i, _)| &s[..i])
}

/// Strings, each stored once, by first appearance.
#[derive(Default)]
struct Names {
    list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    fn index(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.list.push(s.to_string());
        let i = self.list.len() as u32 - 1;
        self.index.insert(s.to_string(), i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_clipped_by_hand() {
        let mut names = Names::default();
        let mut row = |start, end, c: &str, l: &str| Row {
            start,
            end,
            category: names.index(c),
            label: names.index(l),
        };
        let rows = vec![
            row(0, 100, "gemm", "aten::mm"),
            row(50, 300, "other_compute", "aten::add_"),
            row(400, 500, "gemm", "aten::mm"),
        ];
        let acts = Activities {
            rows,
            names: names.list,
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
