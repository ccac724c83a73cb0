//! `aorta collectives` against a brute-force reference written here: plain loops over the raw
//! JSON events of every rank of a real multi-rank run give the matching (process group and
//! per-group launch order), the clock offsets (median of end differences), each kernel's
//! wait and transfer, and each instance's skew, last rank and caused delay. The production
//! code streams ranks, hashes instances and aligns through anchors; none of that is here.

mod edges;
mod four_gpu;
mod injected;
mod sizes;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::cli::{collectives_json, ingest_ok, overlap_json};
use crate::common::reference::{
    activities, golden, int_of, raw_exact, stream_of, us_text_to_ns, COMPUTE,
};
use crate::common::*;

/// One comm kernel as the raw trace has it.
#[derive(Debug, Clone)]
struct RawComm {
    start: i64,
    end: i64,
    corr: i64,
    kind: &'static str,
    group: String,
    /// The args' `In msg nelems`, `Out msg nelems`, `dtype` and `Group size`.
    in_nelems: Option<i64>,
    out_nelems: Option<i64>,
    dtype: Option<String>,
    group_size: Option<i64>,
}

/// The kind from the kernel name (every kernel of these runs names its kind).
fn kind_of(name: &str) -> &'static str {
    for (pat, kind) in [
        ("AllReduce", "all_reduce"),
        ("AllGather", "all_gather"),
        ("ReduceScatter", "reduce_scatter"),
        ("SendRecv", "send_recv"),
        ("Broadcast", "broadcast"),
        ("AllToAll", "all_to_all"),
    ] {
        if name.contains(pat) {
            return kind;
        }
    }
    "other"
}

/// Comm kernels of one rank file, their ends clipped to the next activity on their stream
/// (METRICS.md), in launch (correlation) order.
fn raw_comms(p: &Path) -> Vec<RawComm> {
    let raw = raw_exact(p);
    let base = raw["baseTimeNanoseconds"].as_i64().unwrap_or(0);
    let mut per_stream: BTreeMap<(i64, i64), Vec<Activity>> = BTreeMap::new();
    for e in events(&raw).iter().filter(|e| is_slice(e)) {
        if !matches!(cat(e), "kernel" | "gpu_memcpy" | "gpu_memset") {
            continue;
        }
        let start = base + us_text_to_ns(e["ts"].as_str().unwrap());
        let end = start + e["dur"].as_str().map_or(0, us_text_to_ns);
        let name = e["name"].as_str().unwrap_or("");
        let comm = (cat(e) == "kernel" && name.to_lowercase().contains("nccl")).then(|| {
            let a = &e["args"];
            let group = a["Process Group Name"]
                .as_str()
                .or(a["Process Group Ranks"].as_str())
                .unwrap_or("default")
                .to_string();
            RawComm {
                start,
                end,
                corr: int_of(&a["correlation"]).unwrap(),
                kind: kind_of(name),
                group,
                in_nelems: int_of(&a["In msg nelems"]),
                out_nelems: int_of(&a["Out msg nelems"]),
                dtype: a["dtype"].as_str().map(str::to_string),
                group_size: int_of(&a["Group size"]),
            }
        });
        let device = int_of(&e["args"]["device"])
            .or_else(|| int_of(&e["pid"]))
            .unwrap_or(0);
        per_stream
            .entry((device, stream_of(e)))
            .or_default()
            .push((start, end, comm));
    }
    let mut out = vec![];
    for (_, mut v) in per_stream {
        v.sort_by_key(|a| (a.0, a.1));
        for i in 0..v.len() {
            let next = v.get(i + 1).map(|n| n.0);
            if let Some(mut c) = v[i].2.clone() {
                c.end = c.end.max(c.start);
                if let Some(n) = next.filter(|&n| n < c.end) {
                    c.end = n.max(c.start);
                }
                out.push(c);
            }
        }
    }
    out.sort_by_key(|c| c.corr);
    out
}

/// The reference's row for one kernel of one rank.
#[derive(Debug, Clone, PartialEq)]
struct Expect {
    group: String,
    seq: i64,
    kind: &'static str,
    status: &'static str,
    start: i64,
    end: i64,
    arrival: Option<i64>,
    wait: Option<i64>,
    transfer: Option<i64>,
}

/// The reference's instance row: (skew, last rank, caused, min transfer).
type InstExpect = (i64, i64, i64, i64);

/// Any GPU activity of a stream (start, end), with its comm kernel when it is one.
type Activity = (i64, i64, Option<RawComm>);

/// The reference: rows per rank, instances by (group, seq), offsets per rank.
struct Reference {
    rows: BTreeMap<i64, Vec<Expect>>,
    insts: BTreeMap<(String, i64), InstExpect>,
    offsets: BTreeMap<i64, i64>,
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]).div_euclid(2)
    }
}

/// Brute force over every rank of a run: (rank → rows, (group, seq) → instance, offsets).
fn reference(files: &BTreeMap<i64, PathBuf>) -> Reference {
    let comms: BTreeMap<i64, Vec<RawComm>> =
        files.iter().map(|(r, p)| (*r, raw_comms(p))).collect();
    // seq per group in launch order.
    let mut seqd: BTreeMap<i64, Vec<(RawComm, i64)>> = BTreeMap::new();
    for (rank, cs) in &comms {
        let mut count: HashMap<String, i64> = HashMap::new();
        for c in cs {
            let n = count.entry(c.group.clone()).or_default();
            seqd.entry(*rank).or_default().push((c.clone(), *n));
            *n += 1;
        }
    }
    // Members of each instance and the traced members of each group.
    let mut members: BTreeMap<(String, i64), Vec<(i64, RawComm)>> = BTreeMap::new();
    let mut present: HashMap<String, std::collections::BTreeSet<i64>> = HashMap::new();
    for (rank, v) in &seqd {
        for (c, s) in v {
            members
                .entry((c.group.clone(), *s))
                .or_default()
                .push((*rank, c.clone()));
            present.entry(c.group.clone()).or_default().insert(*rank);
        }
    }
    let status = |key: &(String, i64)| -> &'static str {
        let m = &members[key];
        if m.iter().any(|x| x.1.kind != m[0].1.kind) {
            "kind_mismatch"
        } else if m.len() < present[&key.0].len() {
            "missing_ranks"
        } else if m.len() == 1 {
            "unpaired"
        } else {
            "paired"
        }
    };
    let reference_rank = *files.keys().next().unwrap();
    let mut offsets = BTreeMap::new();
    for rank in files.keys() {
        let diffs: Vec<i64> = members
            .iter()
            .filter(|(k, _)| status(k) == "paired")
            .filter_map(|(_, m)| {
                let mine = m.iter().find(|x| x.0 == *rank)?;
                let refc = m.iter().find(|x| x.0 == reference_rank)?;
                Some(mine.1.end - refc.1.end)
            })
            .collect();
        offsets.insert(*rank, if diffs.is_empty() { 0 } else { median(diffs) });
    }
    let mut insts = BTreeMap::new();
    let mut last_of: HashMap<(String, i64), i64> = HashMap::new();
    for (key, m) in &members {
        if status(key) != "paired" {
            continue;
        }
        let arr: Vec<(i64, i64)> = m.iter().map(|(r, c)| (*r, c.start - offsets[r])).collect();
        let first = arr.iter().map(|a| a.1).min().unwrap();
        let mut last = (i64::MIN, -1);
        for &(r, a) in &arr {
            if a > last.0 || (a == last.0 && r < last.1) {
                last = (a, r);
            }
        }
        let second = arr
            .iter()
            .filter(|x| x.0 != last.1)
            .map(|x| x.1)
            .max()
            .unwrap_or(last.0);
        let min_transfer = m
            .iter()
            .map(|(r, c)| {
                let wait = (last.0 - (c.start - offsets[r])).clamp(0, c.end - c.start);
                c.end - c.start - wait
            })
            .min()
            .unwrap();
        last_of.insert(key.clone(), last.0);
        insts.insert(
            key.clone(),
            (last.0 - first, last.1, last.0 - second, min_transfer),
        );
    }
    let mut rows = BTreeMap::new();
    for (rank, v) in &seqd {
        let mine: Vec<Expect> = v
            .iter()
            .map(|(c, s)| {
                let key = (c.group.clone(), *s);
                let arrival = c.start - offsets[rank];
                let wait = last_of
                    .get(&key)
                    .map(|l| (l - arrival).clamp(0, c.end - c.start));
                Expect {
                    group: c.group.clone(),
                    seq: *s,
                    kind: c.kind,
                    status: status(&key),
                    start: c.start,
                    end: c.end,
                    arrival: wait.map(|_| arrival),
                    wait,
                    transfer: wait.map(|w| c.end - c.start - w),
                }
            })
            .collect();
        rows.insert(*rank, mine);
    }
    Reference {
        rows,
        insts,
        offsets,
    }
}

/// The rank of a corpus file, by the same rules ingest documents (distributedInfo first).
fn rank_of(p: &Path) -> i64 {
    raw_json(p)["distributedInfo"]["rank"].as_i64().unwrap()
}

/// Ingests one run, runs `aorta collectives`, and checks every row against the reference.
/// A run checked by `check_run`: its dataset, the `aorta collectives --json` document, the
/// reference and the files by rank, for further checks without ingesting again.
struct Checked {
    dir: tempfile::TempDir,
    doc: Value,
    reference: Reference,
    by_rank: BTreeMap<i64, PathBuf>,
}

fn check_run(files: &[PathBuf], label: &str) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    ingest_ok(&paths, dir.path(), &["--label", label, "-q"]);
    let doc = collectives_json(dir.path(), "rank");
    let by_rank: BTreeMap<i64, PathBuf> = files.iter().map(|f| (rank_of(f), f.clone())).collect();
    let r = reference(&by_rank);
    let (insts, offsets) = (&r.insts, &r.offsets);
    let got = table(dir.path(), "collectives", label);
    let (rank, seq, start, end) = (
        i64s(&got, "rank"),
        i64s(&got, "seq"),
        i64s(&got, "start_ns"),
        i64s(&got, "end_ns"),
    );
    let (arrival, wait, transfer) = (
        i64s(&got, "arrival_ns"),
        i64s(&got, "wait_ns"),
        i64s(&got, "transfer_ns"),
    );
    let (group, kind, status) = (
        strs(&got, "process_group"),
        strs(&got, "kind"),
        strs(&got, "status"),
    );
    let mut rows: BTreeMap<i64, Vec<Expect>> = BTreeMap::new();
    for i in 0..got.height() {
        rows.entry(rank[i].unwrap()).or_default().push(Expect {
            group: group[i].clone().unwrap(),
            seq: seq[i].unwrap(),
            kind: kind_of_text(kind[i].as_deref().unwrap()),
            status: status_text(status[i].as_deref().unwrap()),
            start: start[i].unwrap(),
            end: end[i].unwrap(),
            arrival: arrival[i],
            wait: wait[i],
            transfer: transfer[i],
        });
    }
    for v in rows.values_mut() {
        v.sort_by_key(|e| (e.group.clone(), e.seq));
    }
    let mut want = r.rows.clone();
    for v in want.values_mut() {
        v.sort_by_key(|e| (e.group.clone(), e.seq));
    }
    assert_eq!(rows, want, "{label}: collectives rows");
    let got = table(dir.path(), "collective_instances", label);
    let (g, s) = (strs(&got, "process_group"), i64s(&got, "seq"));
    let cols = ["skew_ns", "last_rank", "caused_ns", "transfer_ns"].map(|c| i64s(&got, c));
    let mut seen = 0;
    for i in 0..got.height() {
        let key = (g[i].clone().unwrap(), s[i].unwrap());
        if let Some(w) = insts.get(&key) {
            let row = (
                cols[0][i].unwrap(),
                cols[1][i].unwrap(),
                cols[2][i].unwrap(),
                cols[3][i].unwrap(),
            );
            assert_eq!(row, *w, "{label}: instance {key:?}");
            seen += 1;
        }
    }
    assert_eq!(seen, insts.len(), "{label}: paired instances");
    let runs = table(dir.path(), "runs", label);
    for (r, off) in i64s(&runs, "rank")
        .iter()
        .zip(i64s(&runs, "clock_offset_ns"))
    {
        assert_eq!(
            off,
            Some(offsets[&r.unwrap()]),
            "{label}: rank {r:?} offset"
        );
    }
    Checked {
        dir,
        doc,
        reference: r,
        by_rank,
    }
}

fn kind_of_text(s: &str) -> &'static str {
    [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "send_recv",
        "broadcast",
        "all_to_all",
        "other",
    ]
    .into_iter()
    .find(|k| *k == s)
    .unwrap_or("other")
}

fn status_text(s: &str) -> &'static str {
    [
        "paired",
        "single",
        "unpaired",
        "kind_mismatch",
        "missing_ranks",
    ]
    .into_iter()
    .find(|k| *k == s)
    .unwrap_or("?")
}

fn files_in(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn dlrm_8_ranks_equal_the_brute_force_reference_and_name_the_rank_waited_for() {
    let Some(root) = corpus() else { return };
    let files = files_in(&root.join("kineto/cuda/v100_dlrm_8rank"), ".json.gz");
    assert_eq!(files.len(), 8);
    let checked = check_run(&files, "dlrm");
    let run = &checked.doc["runs"][0];
    assert_eq!(run["ranks"], 8);
    // The straggler named first is the rank with the most caused delay, by the reference.
    let insts = &checked.reference.insts;
    let mut caused: BTreeMap<i64, i64> = BTreeMap::new();
    for (_, last, c, _) in insts.values() {
        *caused.entry(*last).or_default() += c;
    }
    let worst = caused.iter().max_by_key(|(r, c)| (**c, -**r)).unwrap();
    let first = &run["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["straggler_rank"] == 1)
        .unwrap();
    assert_eq!(first["rank"].as_i64(), Some(*worst.0), "{:?}", caused);
    assert_eq!(first["caused_ns"].as_i64(), Some(*worst.1));
    for r in run["stragglers"].as_array().unwrap() {
        assert!(r["wait_pct"].as_f64().is_some(), "{r}");
    }
    overlap_split_matches(&checked);
}

/// `aorta overlap`'s rank rows: comm_wait_ns = |U(wait parts)|, comm_transfer_ns =
/// |U(transfer parts)| and exposed_transfer_ns = |U(transfer) − U(compute)|, from the
/// reference's waits and the raw compute kernels (|A − B| = |A ∪ B| − |B|).
fn overlap_split_matches(checked: &Checked) {
    let (by_rank, want) = (&checked.by_rank, &checked.reference.rows);
    let doc = overlap_json(checked.dir.path(), "rank");
    let golden = golden();
    for row in doc["runs"][0]["rows"].as_array().unwrap() {
        let rank = row["rank"].as_i64().unwrap();
        let rows = &want[&rank];
        let wait: Vec<(i64, i64)> = rows
            .iter()
            .map(|e| (e.start, e.start + e.wait.unwrap()))
            .collect();
        let transfer: Vec<(i64, i64)> = rows
            .iter()
            .map(|e| (e.start + e.wait.unwrap(), e.end))
            .collect();
        let compute: Vec<(i64, i64)> = activities(&by_rank[&rank], &golden)
            .into_iter()
            .filter(|a| COMPUTE.contains(&a.2.as_str()))
            .map(|a| (a.0, a.1))
            .collect();
        let both: Vec<(i64, i64)> = transfer.iter().chain(&compute).copied().collect();
        let exposed = union_len(both) - union_len(compute.clone());
        assert_eq!(
            row["comm_wait_ns"].as_i64(),
            Some(union_len(wait)),
            "rank {rank}"
        );
        assert_eq!(
            row["comm_transfer_ns"].as_i64(),
            Some(union_len(transfer)),
            "rank {rank}"
        );
        assert_eq!(
            row["exposed_transfer_ns"].as_i64(),
            Some(exposed),
            "rank {rank}"
        );
    }
}

#[test]
fn h200_fsdp2_python_aorta_and_sampled_runs_equal_the_reference() {
    let Some(root) = corpus() else { return };
    let fsdp2 = check_run(
        &files_in(&root.join("kineto/cuda/h200_fsdp2"), ".json.gz"),
        "fsdp2",
    );
    sizes::overlap_by_size_matches(&fsdp2);
    let py = files_in(
        &root.join("aorta_py/h200_fsdp2_profile_overlap_2gpu"),
        ".json.gz",
    );
    check_run(&py, "aorta_py");
    let sampled = files_in(&root.join("kineto/cuda/a100_sampled_2rank"), ".json.gz");
    let doc = check_run(&sampled, "sampled").doc;
    // 2 of 128 ranks: said, never invented.
    let run = &doc["runs"][0];
    assert_eq!(run["ranks"], 2);
    assert_eq!(run["world_size"], 128);
    let notes = run["findings"].to_string();
    assert!(
        notes.contains("collective_partial_group") && notes.contains("2 of 128"),
        "{notes}"
    );
}
