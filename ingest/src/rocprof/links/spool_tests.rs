use std::collections::HashMap;

use super::*;

/// Enough launches that the spool writes its file and the lookups theirs, some ids
/// repeated (the last call answers, as the map this replaced did), RCCL calls on two
/// threads, and more API records after a first `seal`: every launch answers as a map
/// of (thread, start) asked after the last `seal` does.
#[test]
fn spooled_launches_answer_as_a_map() {
    let marker = StepMarker::parse(r"^step (\d+)$").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut l = ApiLinks::new(marker).spooling_to(dir.path().into());
    l.in_file = true;
    let mut map: HashMap<i64, (i64, i64)> = HashMap::new();
    let call = |domain: &'static str, name: &'static str, tid, start: i64, corr| Call {
        domain,
        name,
        tid: Some(tid),
        start,
        end: start + 40,
        correlation: Some(corr),
    };
    let n = 3 * crate::kineto::spool::CHUNK as i64;
    for round in 0..2 {
        for i in 0..n {
            // Ids rise with time; one in 50 repeats an earlier one.
            let corr = if i % 50 == 7 { i / 2 } else { i + round * n };
            let (tid, start) = (i % 2, 10 * i + round);
            l.note(&call(
                "HIP_RUNTIME_API",
                "hipLaunchKernel",
                tid,
                start,
                corr,
            ))
            .unwrap();
            map.insert(corr, (tid, start));
            if i % 1000 == 0 {
                l.note(&call("MARKER_CORE_API", "step 0", 0, start, -1))
                    .unwrap();
                l.note(&call("RCCL_API", "ncclAllGather", i % 3, start + 5, -1))
                    .unwrap();
            }
        }
        // A step span per 10,000 ns, noted late (the lookups are made again).
        for k in 0..(n / 1000) {
            let name: &'static str = Box::leak(format!("step {k}").into_boxed_str());
            let mut c = call("MARKER_CORE_API", name, 0, k * 10_000, -1);
            c.end = k * 10_000 + 9_000;
            l.note(&c).unwrap();
        }
        l.seal().unwrap();
    }
    let mut asked = 0;
    for (&corr, &(tid, ts)) in &map {
        assert_eq!(l.launch_step(Some(corr)), l.step_at(ts), "{corr}");
        assert_eq!(l.launch_rccl(Some(corr)), l.rccl_at(tid, ts), "{corr}");
        asked += 1;
    }
    assert!(asked > n as usize, "{asked}");
    assert!(l.launch_rccl(Some(10 * n)).is_none());
    assert!(l.launch_step(Some(-5)).is_none());
    // The launches went through the spool's file, the lookups through theirs.
    assert!(l.launches.len() > crate::kineto::spool::CHUNK as u64);
    assert!(l.launch_at.stats().1 > 0, "{:?}", l.launch_at.stats());
    // A lookup's file that can no longer be read answers "no step", and says so: the
    // readers fail the file on it.
    assert!(l.take_read_error().is_none());
    l.launch_rccl.break_file();
    let unread = map.keys().filter(|&&c| l.launch_rccl(Some(c)).is_none());
    assert!(unread.count() > 0);
    assert!(l.take_read_error().is_some(), "the collectives' lookup");
    l.launch_at.break_file();
    let unread = map.keys().filter(|&&c| l.launch_step(Some(c)).is_none());
    assert!(unread.count() > 0);
    assert!(l.take_read_error().is_some(), "the steps' lookup");
    assert!(l.take_read_error().is_none(), "each error told once");
}
