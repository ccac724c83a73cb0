//! Job identity: which files of one run label can be one job.
//!
//! A run is one job: its ranks share one timeline, and every step statistic pools them. A
//! directory often holds files that are not one job: one single-GPU trace per model (each says
//! nothing about its rank, so each would be rank 0), or several experiments side by side
//! (`exp1_rank0`, `exp1_rank1`, `exp2_rank0`, …). Merged, their steps pool into nonsense: two
//! models' `ProfilerStep#6` became one step 2.6 hours long. So after the files are read (the
//! rank, world size, device and time span are only known then), each run label's files are
//! checked, and files that cannot be one job become runs of their own, `<label>/<workload>`,
//! named by the file name with its rank token removed (`exp1`), else by the whole file stem.
//!
//! JSONL logs do not take part in the check (they carry no device or trace clock); when a
//! label is split, a log joins the workload its name points to (its name without the rank
//! token, or what comes before the rank token: `<job>_rank<N>_metrics.jsonl`), else it stays
//! under the label.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Two ranks of one job run at the same time; spans this far apart are separate jobs.
pub(crate) const MAX_GAP_NS: i64 = 300 * 1_000_000_000;

/// What one file says about the job it belongs to (kept in the manifest, so that a later
/// ingest can check new files against the ones already there).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Identity {
    pub rank: i64,
    /// The file (or a rank map, `--rank`, its name) named the rank; else it is 0 by default.
    pub rank_named: bool,
    pub world_size: Option<i64>,
    pub device: Option<String>,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// A trace (not a JSONL log): only traces take part in the check.
    pub trace: bool,
}

/// One file of a run label.
#[derive(Debug, Clone)]
pub(crate) struct Member<'a> {
    pub path: &'a Path,
    pub id: &'a Identity,
}

/// The verdict for one run label: why its files cannot be one job, and each file's workload
/// (`None`: the file stays under the label itself).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    pub reason: Option<String>,
    pub workloads: Vec<Option<String>>,
}

/// Decides whether `members` can be one job, and if not, how they split.
pub(crate) fn decide(members: &[Member]) -> Verdict {
    let traces: Vec<usize> = (0..members.len())
        .filter(|&i| members[i].id.trace)
        .collect();
    let Some(reason) = conflict(members, &traces) else {
        return Verdict {
            reason: None,
            workloads: vec![None; members.len()],
        };
    };
    let by_name = |i: usize| workload_name(members[i].path);
    let groups = group(&traces, by_name);
    let names: Vec<Option<String>> = if groups.len() > 1
        && groups.values().all(|g| conflict(members, g).is_none())
        && groups.keys().all(|k| !k.is_empty())
    {
        (0..members.len()).map(|i| Some(by_name(i))).collect()
    } else {
        unique_stems(members)
    };
    let is_workload = |n: &str| traces.iter().any(|&t| names[t].as_deref() == Some(n));
    let workloads = (0..members.len())
        .map(|i| {
            if members[i].id.trace {
                return names[i].clone();
            }
            // A log joins the workload its name points to: its whole name without the rank
            // (`b_rank_00.jsonl` → `b`), or what comes before the rank (the Python tool's
            // `<job>_rank<N>_metrics.jsonl` → `<job>`); else it stays under the label.
            let whole = names[i].clone().filter(|n| is_workload(n));
            whole.or_else(|| job_prefix(members[i].path).filter(|n| is_workload(n)))
        })
        .collect();
    Verdict {
        reason: Some(reason),
        workloads,
    }
}

/// Why these traces cannot be one job, if they cannot.
fn conflict(members: &[Member], traces: &[usize]) -> Option<String> {
    let ids: Vec<&Identity> = traces.iter().map(|&i| members[i].id).collect();
    let mut ranks: BTreeMap<i64, usize> = BTreeMap::new();
    for id in &ids {
        *ranks.entry(id.rank).or_default() += 1;
    }
    if let Some((&rank, &n)) = ranks.iter().find(|(_, &n)| n > 1) {
        let unnamed = ids.iter().filter(|i| !i.rank_named).count();
        return Some(if unnamed > 1 {
            format!("{unnamed} traces name no rank (no distributedInfo, rank in the file name, rank map or --rank), so each would be rank 0")
        } else {
            format!("{n} traces are rank {rank}")
        });
    }
    let distinct = |f: &dyn Fn(&Identity) -> Option<String>| -> BTreeSet<String> {
        ids.iter().filter_map(|i| f(i)).collect()
    };
    let sizes = distinct(&|i| i.world_size.map(|w| w.to_string()));
    if sizes.len() > 1 {
        return Some(format!("world sizes differ ({})", join(&sizes)));
    }
    let devices = distinct(&|i| i.device.clone());
    if devices.len() > 1 {
        return Some(format!("devices differ ({})", join(&devices)));
    }
    time_gap(&ids).map(|gap| {
        format!(
            "their time ranges are {} apart (ranks of one job run together)",
            human_gap(gap)
        )
    })
}

/// The largest gap between the files' time spans, when one exceeds [`MAX_GAP_NS`].
fn time_gap(ids: &[&Identity]) -> Option<i64> {
    let mut spans: Vec<(i64, i64)> = ids
        .iter()
        .filter_map(|i| Some((i.first_ns?, i.last_ns?)))
        .collect();
    spans.sort_unstable();
    let mut end = spans.first()?.1;
    let mut widest = 0;
    for &(a, b) in &spans[1..] {
        widest = widest.max(a - end);
        end = end.max(b);
    }
    (widest > MAX_GAP_NS).then_some(widest)
}

fn human_gap(ns: i64) -> String {
    let s = ns as f64 * 1e-9;
    match s {
        s if s >= 86_400.0 => format!("{:.1} days", s / 86_400.0),
        s if s >= 3_600.0 => format!("{:.1} h", s / 3_600.0),
        s => format!("{:.0} min", s / 60.0),
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

fn group(idx: &[usize], key: impl Fn(usize) -> String) -> BTreeMap<String, Vec<usize>> {
    let mut g: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in idx {
        g.entry(key(i)).or_default().push(i);
    }
    g
}

/// Every member's file stem, made unique (`name`, `name-2`, …).
fn unique_stems(members: &[Member]) -> Vec<Option<String>> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    members
        .iter()
        .map(|m| {
            let stem = stem(m.path);
            let n = seen.entry(stem.clone()).or_default();
            *n += 1;
            Some(if *n == 1 { stem } else { format!("{stem}-{n}") })
        })
        .collect()
}

/// Suffixes a trace file name ends with, outermost first.
const SUFFIXES: [&str; 11] = [
    ".gz",
    ".zst",
    ".xz",
    ".bz2",
    ".tmp",
    ".json",
    ".jsonl",
    ".pt.trace",
    ".trace",
    ".sqlite",
    ".db",
];

/// The file name without its trace suffixes: `bert-small` for `bert-small.json.gz`.
pub(crate) fn stem(path: &Path) -> String {
    let mut name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    loop {
        let lower = name.to_ascii_lowercase();
        match SUFFIXES.iter().find(|s| lower.ends_with(*s)) {
            Some(s) if name.len() > s.len() => name.truncate(name.len() - s.len()),
            _ => return name,
        }
    }
}

/// What comes before the stem's rank token, without the separators: `fsdp2_bf16` for
/// `fsdp2_bf16_rank0_metrics.jsonl`; `None` without a rank token or with nothing before it
/// (`rank_00_metrics.jsonl`).
pub(crate) fn job_prefix(path: &Path) -> Option<String> {
    let stem = stem(path);
    let (i, _) = rank_token(&stem)?;
    let parts: Vec<&str> = stem[..i]
        .split(['_', '-', '.'])
        .filter(|p| !p.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("_"))
}

/// Where the stem's rank token (`rank0`, `rank_01`, `worker3`) starts and ends.
fn rank_token(stem: &str) -> Option<(usize, usize)> {
    let lower = stem.to_ascii_lowercase();
    for key in ["rank", "worker"] {
        let Some(i) = lower.find(key) else { continue };
        let rest = &lower[i + key.len()..];
        let sep = rest.len() - rest.trim_start_matches(['-', '_']).len();
        let digits = rest[sep..].chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        return Some((i, i + key.len() + sep + digits));
    }
    None
}

/// The stem without its rank token (`rank0`, `rank_01`, `worker3`) and the separators left
/// around it: `exp1` for `exp1_rank0.json`; empty for `rank0.json`.
pub(crate) fn workload_name(path: &Path) -> String {
    let stem = stem(path);
    let Some((i, end)) = rank_token(&stem) else {
        return stem;
    };
    let joined = format!("{}_{}", &stem[..i], &stem[end..]);
    let parts: Vec<&str> = joined
        .split(['_', '-', '.'])
        .filter(|p| !p.is_empty())
        .collect();
    parts.join("_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn id(rank: i64, named: bool, world: Option<i64>, span: (i64, i64)) -> Identity {
        Identity {
            rank,
            rank_named: named,
            world_size: world,
            device: Some("NVIDIA H100".into()),
            first_ns: Some(span.0),
            last_ns: Some(span.1),
            trace: true,
        }
    }

    fn verdict(files: &[(&str, Identity)]) -> Verdict {
        let paths: Vec<PathBuf> = files.iter().map(|f| PathBuf::from(f.0)).collect();
        let members: Vec<Member> = files
            .iter()
            .zip(&paths)
            .map(|(f, p)| Member { path: p, id: &f.1 })
            .collect();
        decide(&members)
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn names_and_stems() {
        assert_eq!(stem(Path::new("d/bert-small.json.gz")), "bert-small");
        assert_eq!(stem(Path::new("rank0.pt.trace.json.gz")), "rank0");
        assert_eq!(workload_name(Path::new("exp1_rank0.pt.trace.json")), "exp1");
        assert_eq!(workload_name(Path::new("rank_01_metrics.jsonl")), "metrics");
        assert_eq!(
            workload_name(Path::new("rank1_trace_step6.json.gz")),
            "trace_step6"
        );
        assert_eq!(workload_name(Path::new("worker3.json")), "");
        assert_eq!(
            workload_name(Path::new("qwen1.5-0.5b-chat.json.gz")),
            "qwen1.5-0.5b-chat"
        );
    }

    #[test]
    fn ranks_of_one_job_stay_together() {
        let v = verdict(&[
            ("rank0.json", id(0, true, Some(2), (0, 10 * S))),
            ("rank1.json", id(1, true, Some(2), (S, 11 * S))),
            ("rank_00_metrics.jsonl", Identity::default()),
        ]);
        assert_eq!(v.reason, None);
        assert_eq!(v.workloads, vec![None, None, None]);
    }

    #[test]
    fn rankless_single_gpu_traces_split_by_file() {
        let v = verdict(&[
            ("bert-small.json.gz", id(0, false, None, (0, S))),
            ("qwen1.5-0.5b-chat.json.gz", id(0, false, None, (0, S))),
        ]);
        assert!(v.reason.unwrap().contains("2 traces name no rank"));
        assert_eq!(
            v.workloads,
            vec![Some("bert-small".into()), Some("qwen1.5-0.5b-chat".into())]
        );
    }

    #[test]
    fn experiments_side_by_side_split_by_name_and_keep_their_ranks() {
        let v = verdict(&[
            ("a_rank0.json", id(0, true, Some(2), (0, S))),
            ("a_rank1.json", id(1, true, Some(2), (0, S))),
            ("b_rank0.json", id(0, true, Some(2), (0, S))),
            ("b_rank1.json", id(1, true, Some(2), (0, S))),
            ("b_rank_00.jsonl", Identity::default()),
            ("notes_rank0.jsonl", Identity::default()),
        ]);
        assert_eq!(v.reason.as_deref(), Some("2 traces are rank 0"));
        let w: Vec<Option<&str>> = v.workloads.iter().map(Option::as_deref).collect();
        assert_eq!(
            w,
            [Some("a"), Some("a"), Some("b"), Some("b"), Some("b"), None]
        );
    }

    #[test]
    fn a_log_joins_the_job_before_its_rank_token() {
        // Two jobs side by side, each with the Python tool's per-rank logs named after it.
        let v = verdict(&[
            (
                "fsdp2_bf16_rank0.pt.trace.json.gz",
                id(0, true, Some(2), (0, S)),
            ),
            (
                "fsdp2_bf16_rank1.pt.trace.json.gz",
                id(1, true, Some(2), (0, S)),
            ),
            ("fsdp2_bf16_rank0_metrics.jsonl", Identity::default()),
            ("fsdp2_bf16_rank1_metrics.jsonl", Identity::default()),
            ("tp_rank0.pt.trace.json.gz", id(0, true, Some(2), (0, S))),
            ("tp_rank1.pt.trace.json.gz", id(1, true, Some(2), (0, S))),
            ("rank_00_metrics.jsonl", Identity::default()),
        ]);
        assert_eq!(v.reason.as_deref(), Some("2 traces are rank 0"));
        let w: Vec<Option<&str>> = v.workloads.iter().map(Option::as_deref).collect();
        let f = Some("fsdp2_bf16");
        assert_eq!(w, [f, f, f, f, Some("tp"), Some("tp"), None]);
        assert_eq!(job_prefix(Path::new("rank_00_metrics.jsonl")), None);
        assert_eq!(
            job_prefix(Path::new("a-b_worker3.json")).as_deref(),
            Some("a_b")
        );
    }

    #[test]
    fn world_size_device_and_time_gaps_split() {
        let v = verdict(&[
            ("x_rank0.json", id(0, true, Some(2), (0, S))),
            ("y_rank1.json", id(1, true, Some(8), (0, S))),
        ]);
        assert_eq!(v.reason.as_deref(), Some("world sizes differ (2, 8)"));
        let mut other = id(1, true, Some(2), (0, S));
        other.device = Some("AMD Instinct MI300X".into());
        let v = verdict(&[
            ("x_rank0.json", id(0, true, Some(2), (0, S))),
            ("y_rank1.json", other),
        ]);
        assert!(v.reason.unwrap().starts_with("devices differ"));
        // 2.6 h apart (the h100_models window): separate; 299 s apart: one job.
        let v = verdict(&[
            ("x_rank0.json", id(0, true, None, (0, S))),
            ("y_rank1.json", id(1, true, None, (9_360 * S, 9_361 * S))),
        ]);
        assert_eq!(
            v.reason.as_deref(),
            Some("their time ranges are 2.6 h apart (ranks of one job run together)")
        );
        assert_eq!(v.workloads, vec![Some("x".into()), Some("y".into())]);
        let v = verdict(&[
            ("x_rank0.json", id(0, true, None, (0, S))),
            ("y_rank1.json", id(1, true, None, (300 * S, 301 * S))),
        ]);
        assert_eq!(v.reason, None);
    }

    #[test]
    fn same_names_fall_back_to_unique_stems() {
        // Both name no rank and strip to the same workload: whole stems, made unique.
        let v = verdict(&[
            ("rank0.json", id(0, false, None, (0, S))),
            ("rank0.json.gz", id(0, false, None, (0, S))),
        ]);
        assert_eq!(
            v.workloads,
            vec![Some("rank0".into()), Some("rank0-2".into())]
        );
    }
}
