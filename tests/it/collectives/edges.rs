//! Edge cases on hand-written traces whose answers are worked out in the comments: a rank
//! with fewer instances, TP groups inside a DP job on two hosts, a one-rank group, and a
//! run with no collectives at all.

use std::path::Path;

use crate::common::cli::{aorta, code, collectives_json, ingest_ok, stderr};
use crate::common::*;

/// One NCCL kernel: (kind in the name, start µs, duration µs, process group, ranks list).
type K<'a> = (&'a str, i64, i64, Option<(&'a str, &'a str)>);

/// A minimal Kineto trace of rank `rank` of `world` with these comm kernels and one GEMM.
fn trace(dir: &Path, rank: i64, world: i64, kernels: &[K]) {
    trace_seq(dir, rank, world, kernels, &[]);
}

/// `trace`, the kernels carrying Kineto's `Seq` args `seqs` (in order) where given.
fn trace_seq(dir: &Path, rank: i64, world: i64, kernels: &[K], seqs: &[i64]) {
    let mut ev = vec![format!(
        r#"{{"ph":"X","cat":"kernel","name":"nvjet_gemm","pid":0,"tid":7,"ts":1.000,"dur":0.500,"args":{{"device":0,"stream":7,"correlation":1}}}}"#
    )];
    for (i, (kind, ts, dur, pg)) in kernels.iter().enumerate() {
        let mut pg = pg.map_or(String::new(), |(name, ranks)| {
            format!(r#","Process Group Name":"{name}","Process Group Ranks":"{ranks}""#)
        });
        if let Some(seq) = seqs.get(i) {
            pg.push_str(&format!(r#","Seq":{seq}"#));
        }
        ev.push(format!(
            r#"{{"ph":"X","cat":"kernel","name":"ncclDevKernel_{kind}_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":9,"ts":{ts}.000,"dur":{dur}.000,"args":{{"device":0,"stream":9,"correlation":{}{pg}}}}}"#,
            i + 10
        ));
    }
    let text = format!(
        r#"{{"schemaVersion":1,"distributedInfo":{{"backend":"nccl","rank":{rank},"world_size":{world}}},"traceEvents":[{}]}}"#,
        ev.join(",")
    );
    std::fs::write(dir.join(format!("rank{rank}.pt.trace.json")), text).unwrap();
}

fn run(traces: &Path, label: &str) -> (tempfile::TempDir, serde_json::Value) {
    let out = tempfile::tempdir().unwrap();
    ingest_ok(&[traces], out.path(), &["--label", label, "-q"]);
    let doc = collectives_json(out.path(), "instance");
    (out, doc)
}

#[test]
fn a_rank_with_fewer_instances_is_counted_not_paired() {
    let t = tempfile::tempdir().unwrap();
    // Rank 1's trace ends before the third all-reduce.
    trace(
        t.path(),
        0,
        2,
        &[
            ("AllReduce", 100, 10, None),
            ("AllReduce", 200, 10, None),
            ("AllReduce", 300, 10, None),
        ],
    );
    trace(
        t.path(),
        1,
        2,
        &[("AllReduce", 104, 6, None), ("AllReduce", 200, 10, None)],
    );
    let (out, doc) = run(t.path(), "short");
    let rows = doc["runs"][0]["rows"].as_array().unwrap().clone();
    let status: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["paired", "paired", "missing_ranks"]);
    // seq 0: rank 1 arrives at 104 µs, rank 0 at 100 µs (ends agree: offset 0, the median of
    // the two end differences 0 and 0). Rank 0 waits 4 µs, then both transfer 6 µs.
    assert_eq!(rows[0]["last_rank"], 1);
    assert_eq!(rows[0]["skew_ns"], 4_000);
    assert_eq!(rows[0]["transfer_ns"], 6_000);
    assert!(rows[2]["skew_ns"].is_null());
    let notes = doc["runs"][0]["findings"].to_string();
    assert!(notes.contains("collective_missing_ranks"), "{notes}");
    let c = table(out.path(), "collectives", "short");
    let mut waits: Vec<(Option<i64>, Option<i64>, Option<i64>)> = i64s(&c, "rank")
        .into_iter()
        .zip(i64s(&c, "seq"))
        .zip(i64s(&c, "wait_ns"))
        .map(|((r, s), w)| (r, s, w))
        .collect();
    waits.sort();
    let w: Vec<Option<i64>> = waits.iter().map(|x| x.2).collect();
    assert_eq!(w, [Some(4_000), Some(0), None, Some(0), Some(0)]);
}

#[test]
fn tp_groups_inside_a_dp_job_on_two_hosts() {
    let t = tempfile::tempdir().unwrap();
    // 4 ranks; host 1 (ranks 2, 3) runs its clock 1,000 µs ahead. TP groups {0,1} and {2,3}
    // all-gather; DP groups {0,2} and {1,3} all-reduce. Rank 3 never meets rank 0: its
    // offset comes through rank 1 or 2. True times: TP ends at 150, DP ends at 400.
    let tp = |r: i64| {
        if r < 2 {
            ("1", "[0, 1]")
        } else {
            ("2", "[2, 3]")
        }
    };
    let dp = |r: i64| {
        if r % 2 == 0 {
            ("3", "[0, 2]")
        } else {
            ("4", "[1, 3]")
        }
    };
    let host = |r: i64| if r < 2 { 0 } else { 1_000 };
    // True arrivals: TP at 100 + 10 r; DP at 300, except rank 3 at 350.
    for r in 0..4 {
        let tp_start = 100 + 10 * r;
        let dp_start = if r == 3 { 350 } else { 300 };
        trace(
            t.path(),
            r,
            4,
            &[
                ("AllGather", tp_start + host(r), 150 - tp_start, Some(tp(r))),
                ("AllReduce", dp_start + host(r), 400 - dp_start, Some(dp(r))),
            ],
        );
    }
    let (out, doc) = run(t.path(), "tpdp");
    let rows = doc["runs"][0]["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 4, "two TP and two DP instances");
    assert!(rows
        .iter()
        .all(|r| r["status"] == "paired" && r["ranks"] == 2));
    let runs = table(out.path(), "runs", "tpdp");
    let mut offsets: Vec<(i64, i64)> = i64s(&runs, "rank")
        .iter()
        .zip(i64s(&runs, "clock_offset_ns"))
        .map(|(r, o)| (r.unwrap(), o.unwrap()))
        .collect();
    offsets.sort();
    assert_eq!(offsets, [(0, 0), (1, 0), (2, 1_000_000), (3, 1_000_000)]);
    // DP {1,3}: rank 3 arrives 50 µs after rank 1, which waits 50 µs of its 100.
    let dp13 = rows.iter().find(|r| r["process_group"] == "4").unwrap();
    assert_eq!(dp13["last_rank"], 3);
    assert_eq!(dp13["caused_ns"], 50_000);
    assert_eq!(dp13["transfer_ns"], 50_000);
    // TP {2,3}: rank 3 arrives at 130, rank 2 at 120: 10 µs late, below the "late" bar.
    let tp23 = rows.iter().find(|r| r["process_group"] == "2").unwrap();
    assert_eq!(tp23["skew_ns"], 10_000);
    assert!(tp23["late_category"].is_null());
    // Rank 3 was last twice and caused 10 + 50 µs.
    let coll = collectives_json(out.path(), "rank");
    let r3 = coll["runs"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 3)
        .unwrap()
        .clone();
    assert_eq!(r3["times_last"], 2);
    assert_eq!(r3["caused_ns"], 60_000);
    assert_eq!(r3["straggler_rank"], 1);
    // The one late arrival (DP {1,3}, its group's first collective: seq 0), as the summary
    // lists it: the group labelled as one, not a bare number leading the line.
    let late = coll["runs"][0]["late"].as_array().unwrap();
    assert_eq!(late.len(), 1, "{late:?}");
    let want =
        "process group 4, seq 0 (all_reduce, step -): rank 3 arrived 0.050 ms after the others";
    assert!(late[0].as_str().unwrap().starts_with(want), "{late:?}");
    let o = aorta(&["collectives".as_ref(), out.path().as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let listed: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("late arrivals"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(listed.len(), 1, "{text}");
    assert!(listed[0].starts_with(&format!("  {want}")), "{text}");
}

#[test]
fn a_one_rank_group_waits_for_nobody_and_no_collectives_is_not_an_error() {
    let t = tempfile::tempdir().unwrap();
    trace(
        t.path(),
        0,
        2,
        &[("AllReduce", 100, 10, Some(("5", "[0]")))],
    );
    trace(t.path(), 1, 2, &[]);
    let (out, doc) = run(t.path(), "solo");
    let rows = doc["runs"][0]["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "single");
    assert_eq!(rows[0]["skew_ns"], 0);
    assert_eq!(rows[0]["transfer_ns"], 10_000);
    let c = table(out.path(), "collectives", "solo");
    assert_eq!(i64s(&c, "wait_ns"), [Some(0)]);

    let none = tempfile::tempdir().unwrap();
    trace(none.path(), 0, 1, &[]);
    let (_out, doc) = run(none.path(), "quiet");
    assert_eq!(doc["runs"][0]["rows"].as_array().unwrap().len(), 0);
    let o = aorta(&["collectives".as_ref(), _out.path().as_os_str()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("no communication kernels"), "{text}");
}

#[test]
fn kineto_seq_pairs_what_counting_would_shift() {
    let t = tempfile::tempdir().unwrap();
    // Rank 1 lost the middle all-reduce. Counting would pair its second kernel (Seq 7, at
    // 300 µs) with rank 0's second (Seq 6, at 200 µs); the trace's Seq pairs 7 with 7.
    let k = |ts| ("AllReduce", ts, 10, None);
    trace_seq(t.path(), 0, 2, &[k(100), k(200), k(300)], &[5, 6, 7]);
    trace_seq(t.path(), 1, 2, &[k(100), k(303)], &[5, 7]);
    let (_out, doc) = run(t.path(), "seq");
    let rows = doc["runs"][0]["rows"].as_array().unwrap().clone();
    let got: Vec<(i64, &str)> = rows
        .iter()
        .map(|r| (r["seq"].as_i64().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [(5, "paired"), (6, "missing_ranks"), (7, "paired")]);
    // Seq 7: rank 1 arrives 3 µs late (ends 313 vs 310 µs: the clock offset is the median
    // of the end differences 0 and 3 µs, 1.5 µs).
    let s7 = &rows[2];
    assert_eq!(s7["last_rank"], 1);
    assert_eq!(s7["skew_ns"], 1_500);
}

#[test]
fn rccl_generic_kernels_take_their_kind_from_the_c10d_op() {
    let Some(root) = corpus() else { return };
    let f = root.join("kineto/rocm/mi300x_resnet_ckpt/resnet_act_checkpoint.json.gz");
    // By hand from the raw events: each Generic kernel's runtime call (same correlation),
    // then the innermost `c10d::` op on that thread around the call.
    let raw = raw_json(&f);
    let ev = events(&raw);
    let mut want: Vec<(f64, &str)> = vec![];
    for k in ev.iter().filter(|e| cat(e) == "kernel") {
        if !k["name"]
            .as_str()
            .unwrap_or("")
            .starts_with("ncclDevKernel_Generic")
        {
            continue;
        }
        let corr = &k["args"]["correlation"];
        let launch = ev
            .iter()
            .find(|e| cat(e) == "cuda_runtime" && &e["args"]["correlation"] == corr);
        let kind = launch.and_then(|l| {
            let t = l["ts"].as_f64().unwrap();
            ev.iter()
                .filter(|e| cat(e) == "cpu_op" && e["tid"] == l["tid"])
                .filter(|e| e["name"].as_str().unwrap_or("").starts_with("c10d::"))
                .filter(|e| {
                    let s = e["ts"].as_f64().unwrap();
                    s <= t && t <= s + e["dur"].as_f64().unwrap()
                })
                .map(|e| match e["name"].as_str().unwrap() {
                    "c10d::allreduce_" => "all_reduce",
                    "c10d::broadcast_" => "broadcast",
                    other => panic!("unexpected {other}"),
                })
                .next()
        });
        want.push((k["ts"].as_f64().unwrap(), kind.unwrap_or("other")));
    }
    want.sort_by(|a, b| a.0.total_cmp(&b.0));
    let want: Vec<&str> = want.iter().map(|w| w.1).collect();
    assert!(
        want.contains(&"all_reduce") && want.contains(&"broadcast"),
        "{want:?}"
    );
    let out = tempfile::tempdir().unwrap();
    ingest_ok(&[f.as_path()], out.path(), &["--label", "rccl", "-q"]);
    collectives_json(out.path(), "kind");
    let c = table(out.path(), "collectives", "rccl");
    let mut got: Vec<(i64, String)> = i64s(&c, "start_ns")
        .into_iter()
        .zip(strs(&c, "kind"))
        .map(|(s, k)| (s.unwrap(), k.unwrap()))
        .collect();
    got.sort();
    let got: Vec<&str> = got.iter().map(|g| g.1.as_str()).collect();
    assert_eq!(got, want);
    // One rank of eight traced: nothing is paired, and the summary says why.
    assert!(strs(&c, "status")
        .iter()
        .all(|s| s.as_deref() == Some("unpaired")));
}
