//! Bad input never crashes: a real trace cut at any byte or with any bytes overwritten either
//! ingests or fails with an error that names the file and an offset inside it — never a
//! panic, never output left behind by a failed run. And the collective args of newer
//! Kineto (`Seq`, `Comms Id`) in any of their accepted forms land in their columns.

use arrow_array::{Array, Int64Array, StringArray};
use proptest::prelude::*;

use crate::common::{batches, check, corpus_bytes};

/// A real MI350X Kineto trace (uncompressed).
fn corpus_trace() -> Option<Vec<u8>> {
    corpus_bytes("kineto/rocm/mi350x_aorta/smci350_200691.pt.trace.json")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cut_anywhere(frac in 0.0f64..1.0) {
        let Some(t) = corpus_trace() else { return Ok(()) };
        let at = (t.len() as f64 * frac) as usize;
        check("t.pt.trace.json", &t[..at])?;
    }

    #[test]
    fn bytes_overwritten_anywhere(frac in 0.0f64..1.0, len in 1usize..64, byte in any::<u8>()) {
        let Some(mut t) = corpus_trace() else { return Ok(()) };
        let at = ((t.len() as f64 * frac) as usize).min(t.len() - 1);
        let end = (at + len).min(t.len());
        t[at..end].iter_mut().for_each(|b| *b = byte);
        check("t.pt.trace.json", &t)?;
    }
}

/// Pass 1 skips flows at their `ph`; a malformed flow must still be the error reported, at
/// its offset, even when the file has a later error that the fast pass 1 meets first.
#[test]
fn a_malformed_flow_is_reported_before_a_later_error() {
    let Some(t) = corpus_trace() else { return };
    let flow = b"\"ph\": \"f\", \"id\":";
    let at = t.windows(flow.len()).position(|w| w == flow).unwrap() + flow.len() - 1;
    let mut bad = t.clone();
    bad[at] = b';';
    let dir = tempfile::tempdir().unwrap();
    for cut in [bad.len(), bad.len() - 100] {
        let path = dir.path().join("t.pt.trace.json");
        std::fs::write(&path, &bad[..cut]).unwrap();
        let opts = aorta_ingest::Options {
            out: dir.path().join("out"),
            ..Default::default()
        };
        let e = aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("byte {at}: expected ':' after key")),
            "{e}"
        );
    }
}

/// A kernel event of the synthetic trace below, at `ts` µs, with `args` (a JSON object body).
fn kernel(name: &str, ts: u32, args: &str) -> String {
    format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 2, "args": {{"device": 0, "stream": 7, "correlation": {ts}{args}}}}}"#
    )
}

/// `args["Seq"]` (an int or a string holding one) and `args["Comms Id"]` (as written, an
/// integer as its digits, even one past i64) go to `collective_seq` and `comms_id`, right
/// after `process_group_ranks`; a kernel without them, or without any collective args,
/// gets nulls. Through the spill file and back, so every presence bit is exercised.
#[test]
fn kineto_collective_seq_and_comms_id_are_kept() {
    const COLL: &str = r#", "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 2, "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]""#;
    let nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
    let events = [
        kernel(
            &format!("{nccl} a"),
            100,
            &format!(r#"{COLL}, "Seq": 7, "Comms Id": 140217373212688"#),
        ),
        kernel(
            &format!("{nccl} b"),
            110,
            &format!(r#"{COLL}, "Seq": "8", "Comms Id": "c-8""#),
        ),
        kernel(&format!("{nccl} c"), 120, COLL),
        kernel(
            &format!("{nccl} d"),
            130,
            &format!(r#"{COLL}, "Comms Id": 18446744073709551615, "Seq": 7"#),
        ),
        kernel(&format!("{nccl} e"), 140, r#", "Seq": 9"#),
        kernel("gemm_kernel", 150, r#", "grid": [1, 1, 1]"#),
    ];
    let trace = format!(
        r#"{{"schemaVersion": 1, "distributedInfo": {{"rank": 0, "world_size": 2}}, "traceEvents": [{}]}}"#,
        events.join(",\n")
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rank0.pt.trace.json");
    std::fs::write(&path, trace).unwrap();
    let opts = aorta_ingest::Options {
        out: dir.path().join("out"),
        ..Default::default()
    };
    aorta_ingest::ingest(std::slice::from_ref(&path), &opts, &Default::default()).unwrap();

    let mut got = Vec::new();
    for b in batches(&opts.out, "gpu_activities") {
        let schema = b.schema();
        let at = |c: &str| schema.index_of(c).unwrap();
        assert_eq!(at("collective_seq"), at("process_group_ranks") + 1);
        assert_eq!(at("comms_id"), at("process_group_ranks") + 2);
        let col = |c: &str| b.column(at(c)).clone();
        let (name, seq, id) = (col("name"), col("collective_seq"), col("comms_id"));
        let name = name.as_any().downcast_ref::<StringArray>().unwrap();
        let seq = seq.as_any().downcast_ref::<Int64Array>().unwrap();
        let id = id.as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            got.push((
                name.value(i).replace(nccl, "nccl"),
                seq.is_valid(i).then(|| seq.value(i)),
                id.is_valid(i).then(|| id.value(i).to_string()),
            ));
        }
    }
    got.sort();
    let row = |n: &str, s: Option<i64>, c: Option<&str>| (n.to_string(), s, c.map(String::from));
    assert_eq!(
        got,
        [
            row("gemm_kernel", None, None),
            row("nccl a", Some(7), Some("140217373212688")),
            row("nccl b", Some(8), Some("c-8")),
            row("nccl c", None, None),
            row("nccl d", Some(7), Some("18446744073709551615")),
            row("nccl e", Some(9), None),
        ]
    );
}
