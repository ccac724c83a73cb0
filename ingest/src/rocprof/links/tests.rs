use super::*;

fn call<'a>(domain: &'a str, name: &'a str, start: i64, end: i64, corr: i64) -> Call<'a> {
    Call {
        domain,
        name,
        tid: Some(7),
        start,
        end,
        correlation: Some(corr),
    }
}

#[test]
fn spans_collectives_and_launches_from_api_records() {
    let marker = StepMarker::parse(r"^step (\d+)$").unwrap();
    let mut l = ApiLinks::new(marker);
    l.note(&call("MARKER_CORE_API", "step 1", 100, 200, 1))
        .unwrap();
    l.note(&call("MARKER_CORE_API", "step 2", 200, 300, 2))
        .unwrap();
    l.note(&call("MARKER_CORE_API", "forward", 110, 150, 3))
        .unwrap();
    l.note(&call("RCCL_API", "ncclAllReduce", 120, 140, 4))
        .unwrap();
    l.note(&call("RCCL_API", "ncclCommGetAsyncError", 125, 126, 5))
        .unwrap();
    l.note(&call(
        "HIP_RUNTIME_API_EXT",
        "hipExtLaunchKernel",
        130,
        131,
        6,
    ))
    .unwrap();
    l.note(&call("HIP_RUNTIME_API_EXT", "hipLaunchKernel", 250, 251, 8))
        .unwrap();
    l.seal().unwrap();
    assert_eq!(l.spans().len(), 2, "only the marker's ranges");
    assert_eq!(
        (
            l.step_at(99),
            l.step_at(150),
            l.step_at(250),
            l.step_at(301)
        ),
        (None, Some(1), Some(2), None)
    );
    assert_eq!(
        l.launch_step(Some(6)),
        Some(1),
        "launched at 130, in step 1"
    );
    assert_eq!(l.launch_step(Some(8)), Some(2));
    assert_eq!(l.launch_step(Some(99)), None, "no such launch");
    assert_eq!(l.launch_rccl(Some(6)), Some("all_reduce"));
    assert_eq!(l.launch_rccl(Some(8)), None);
    assert_eq!(l.rccl_at(7, 130), Some("all_reduce"));
    assert_eq!(l.rccl_at(7, 250), None, "outside every RCCL call");
    assert_eq!(l.rccl_at(8, 130), None, "another thread");
    assert_eq!(rccl_kind("ncclGroupEnd"), None);
}

/// `step_at` answers as a scan of every span does, with spans one after another (the
/// shortcut), touching, nested and overlapping, noted in any order, at every time around
/// them.
#[test]
fn step_at_answers_as_a_scan_of_every_span() {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m) as i64
    };
    let mut seen = [false; 2];
    for layout in 0..40 {
        let mut l = ApiLinks::new(StepMarker::default());
        let n = 1 + next(30);
        let mut order: Vec<i64> = (0..n).collect();
        if layout % 2 == 1 {
            order.reverse();
        }
        let names: Vec<String> = (0..n).map(|k| format!("ProfilerStep#{k}")).collect();
        for &k in &order {
            // Even layouts: steps one after another (touching when the gap is 0); odd:
            // some start inside an earlier one, some end past the next.
            let (start, len) = if layout % 4 < 2 {
                (10 * k, 10 - next(2))
            } else {
                (10 * k + next(5), 1 + next(40))
            };
            let c = call(
                "MARKER_CORE_API",
                &names[k as usize],
                start,
                start + len,
                -1,
            );
            l.note_span(&c).unwrap();
        }
        let spans = Vec::from(l.spans.clone());
        let want_nested = spans.windows(2).any(|w| w[0].end > w[1].end);
        assert_eq!(l.nested, want_nested, "layout {layout}");
        seen[usize::from(l.nested)] = true;
        for ts in -2..(10 * n + 50) {
            assert_eq!(
                l.step_at(ts),
                l.step_at_scanning(ts),
                "layout {layout} at {ts}"
            );
        }
    }
    assert_eq!(seen, [true, true], "both kinds of layout");
}

/// Exactly `MAX_STEP_SPANS` step spans are kept; the marker range past them is an error
/// naming it (the readers add its line or offset), and is not kept.
#[test]
fn marker_ranges_past_the_step_limit_are_refused() {
    let mut l = ApiLinks::new(StepMarker::default());
    let names: Vec<String> = (0..=MAX_STEP_SPANS)
        .map(|k| format!("ProfilerStep#{k}"))
        .collect();
    for (k, name) in names.iter().enumerate().take(MAX_STEP_SPANS) {
        let c = call(
            "MARKER_CORE_API",
            name,
            10 * k as i64,
            10 * k as i64 + 9,
            -1,
        );
        assert_eq!(l.note_span(&c), Ok(true));
    }
    let other = call("MARKER_CORE_API", "forward", 5, 6, -1);
    assert_eq!(
        l.note(&other),
        Ok(()),
        "a range that is no step is no step too many"
    );
    let past = call("MARKER_CORE_API", &names[MAX_STEP_SPANS], 7, 8, -1);
    assert_eq!(
        l.note(&past).unwrap_err(),
        "more than 1000000 step ranges (ProfilerStep#N, or --step-marker's) in one trace: \
             aorta's limit (a real profile holds thousands): the marker range \
             `ProfilerStep#1000000` that starts at 7 ns passes it"
    );
    assert_eq!(
        l.spans().len(),
        MAX_STEP_SPANS,
        "the refused range is not kept"
    );
}
