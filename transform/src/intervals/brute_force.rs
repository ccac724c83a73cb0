//! The scan against the definition itself: on small ranges every nanosecond is marked with
//! the classes and streams running in it, and every metric is a count of marked nanoseconds.

use crate::intervals::{self, Act, Class, COMM_OPS};
use proptest::prelude::*;

const SPAN: i64 = 80;
/// More streams than the scan's stream masks hold (16), so both per-stream paths run.
const STREAMS: usize = 20;

fn act() -> impl Strategy<Value = Act> {
    // Small ranges make overlapping, nested, touching and zero-length intervals common.
    (
        0..SPAN - 16,
        0i64..16,
        0usize..6,
        0u8..COMM_OPS.len() as u8,
        prop_oneof![4 => 0u16..5, 1 => 0u16..STREAMS as u16],
        0u32..3,
    )
        .prop_map(|(start, len, class, op, stream, step)| Act {
            start,
            end: start + len,
            class: Class::ALL[class],
            op,
            stream,
            step,
        })
}

/// Streams as a dataset holds them: each back to back in start order (gaps and zero lengths
/// included) with steps following each other, so the scan's lanes are slices of the input;
/// a stream id drawn twice gives a stream in two pieces, which must be regrouped.
fn timelines() -> impl Strategy<Value = Vec<Act>> {
    let item = (0i64..3, 0i64..4, 0usize..6, 0u8..COMM_OPS.len() as u8);
    let stream = (0u16..6, prop::collection::vec(item, 0..12));
    prop::collection::vec(stream, 1..6).prop_map(|streams| {
        let mut acts = Vec::new();
        for (stream, items) in streams {
            let (mut t, n) = (0, items.len());
            for (i, (gap, len, class, op)) in items.into_iter().enumerate() {
                t += gap;
                acts.push(Act {
                    start: t,
                    end: t + len,
                    class: Class::ALL[class],
                    op,
                    stream,
                    step: (i * 3 / n) as u32,
                });
                t += len;
            }
        }
        acts
    })
}

/// Per nanosecond: which classes, kinds and streams are running.
struct Marks {
    class: Vec<[bool; 6]>,
    op: Vec<[bool; COMM_OPS.len()]>,
    stream: Vec<[bool; STREAMS]>,
}

fn mark(acts: &[Act]) -> Marks {
    let n = SPAN as usize;
    let mut m = Marks {
        class: vec![[false; 6]; n],
        op: vec![[false; COMM_OPS.len()]; n],
        stream: vec![[false; STREAMS]; n],
    };
    for a in acts {
        for t in a.start..a.end {
            let t = t as usize;
            m.class[t][a.class as usize] = true;
            m.stream[t][a.stream as usize] = true;
            if a.class == Class::Comm {
                m.op[t][a.op as usize] = true;
            }
        }
    }
    m
}

fn count(m: &Marks, f: impl Fn(usize) -> bool) -> i64 {
    (0..m.class.len()).filter(|&t| f(t)).count() as i64
}

fn expected(acts: &[Act]) -> intervals::Metrics {
    let m = mark(acts);
    let c = |t: usize, k: Class| m.class[t][k as usize];
    let comm = |t| c(t, Class::Comm);
    let gemm = |t| c(t, Class::Gemm);
    let compute = |t| gemm(t) || c(t, Class::Attention) || c(t, Class::OtherCompute);
    let memcpy = |t| c(t, Class::Memcpy);
    let mut ops = [intervals::OpTime::default(); COMM_OPS.len()];
    for (k, op) in ops.iter_mut().enumerate() {
        op.count = acts
            .iter()
            .filter(|a| a.class == Class::Comm && a.op as usize == k)
            .count() as i64;
        op.comm_ns = count(&m, |t| m.op[t][k]);
        op.exposed_comm_ns = count(&m, |t| m.op[t][k] && !compute(t));
    }
    let memcpy_ns = count(&m, memcpy);
    intervals::Metrics {
        window_start_ns: acts.iter().map(|a| a.start).min().unwrap_or(0),
        window_end_ns: acts.iter().map(|a| a.end).max().unwrap_or(0),
        activity_count: acts.len() as i64,
        comm_ns: count(&m, comm),
        gemm_ns: count(&m, gemm),
        compute_ns: count(&m, compute),
        busy_ns: count(&m, |t| m.class[t].iter().any(|&x| x)),
        memcpy_ns,
        gemm_comm_overlap_ns: count(&m, |t| gemm(t) && comm(t)),
        compute_comm_overlap_ns: count(&m, |t| compute(t) && comm(t)),
        gemm_memcpy_overlap_ns: count(&m, |t| gemm(t) && memcpy(t)),
        exposed_memcpy_ns: count(&m, |t| memcpy(t) && !compute(t) && !comm(t)),
        ops,
    }
}

fn expected_streams(acts: &[Act]) -> intervals::StreamView {
    let m = mark(acts);
    let mut v = intervals::StreamView::default();
    for s in 0..STREAMS as u16 {
        let n = acts.iter().filter(|a| a.stream == s).count() as i64;
        if n > 0 {
            v.busy.push((s, n, count(&m, |t| m.stream[t][s as usize])));
        }
    }
    for a in 0..STREAMS {
        for b in a + 1..STREAMS {
            let ov = count(&m, |t| m.stream[t][a] && m.stream[t][b]);
            if ov > 0 {
                v.pairs.push((a as u16, b as u16, ov));
            }
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn scan_equals_per_nanosecond_marking(mut acts in prop::collection::vec(act(), 0..40)) {
        intervals::sort_by_start(&mut acts);
        let got = intervals::window(&acts);
        let want = expected(&acts);
        prop_assert_eq!(&got, &want);
        // The derived metrics, from the marked counts.
        prop_assert_eq!(got.exposed_comm_ns(), count(&mark(&acts), |t| {
            let c = mark(&acts).class[t];
            c[0] && !(c[1] || c[2] || c[3])
        }));
        prop_assert_eq!(got.idle_ns(), want.window_ns() - want.busy_ns);
        prop_assert_eq!(intervals::streams(&acts), expected_streams(&acts));
    }

    #[test]
    fn each_step_is_its_own_activities(
        mut acts in prop::collection::vec(act(), 1..40),
        chunk in 1usize..6,
    ) {
        // Step indices must be 0..n with none empty: renumber the ones present.
        let mut present: Vec<u32> = acts.iter().map(|a| a.step).collect();
        present.sort();
        present.dedup();
        for a in &mut acts {
            a.step = present.iter().position(|&s| s == a.step).unwrap() as u32;
        }
        let got = intervals::rank_in_chunks(&mut acts.clone(), present.len(), chunk);
        intervals::sort_by_start(&mut acts);
        prop_assert_eq!(&got.whole, &expected(&acts));
        prop_assert_eq!(got.steps.len(), present.len());
        for (i, (m, v)) in got.steps.iter().enumerate() {
            let mine: Vec<Act> = acts.iter().filter(|a| a.step == i as u32).copied().collect();
            prop_assert_eq!(m, &expected(&mine));
            prop_assert_eq!(v, &expected_streams(&mine));
        }
    }

    #[test]
    fn lanes_as_a_dataset_holds_them(acts in timelines(), chunk in 1usize..8) {
        let steps = 3;
        let got = intervals::rank_in_chunks(&mut acts.clone(), steps, chunk);
        prop_assert_eq!(&got.whole, &expected(&acts));
        for (i, (m, v)) in got.steps.iter().enumerate() {
            let mine: Vec<Act> = acts.iter().filter(|a| a.step == i as u32).copied().collect();
            prop_assert_eq!(m, &expected(&mine));
            prop_assert_eq!(v, &expected_streams(&mine));
        }
    }

    #[test]
    fn ratios_follow_their_definitions(mut acts in prop::collection::vec(act(), 0..40)) {
        intervals::sort_by_start(&mut acts);
        let m = expected(&acts);
        let got = intervals::window(&acts);
        let min = m.gemm_ns.min(m.comm_ns);
        let want = (min > 0).then(|| m.gemm_comm_overlap_ns as f64 / min as f64);
        prop_assert_eq!(got.tp_overlap_ratio(), want);
        let want = (m.comm_ns > 0).then(|| 100.0 * m.compute_comm_overlap_ns as f64 / m.comm_ns as f64);
        prop_assert_eq!(got.comm_hidden_pct(), want);
        let want = (m.compute_ns > 0).then(|| m.compute_comm_overlap_ns as f64 / m.compute_ns as f64);
        prop_assert_eq!(got.compute_overlap_ratio(), want);
    }
}

#[test]
fn nested_and_touching_by_hand() {
    // gemm [0,10) holds comm [2,4); comm [10,15) touches it; memcpy [12,20) half under comm.
    let a = |start, end, class, stream| Act {
        start,
        end,
        class,
        op: 0,
        stream,
        step: 0,
    };
    let mut acts = vec![
        a(0, 10, Class::Gemm, 0),
        a(2, 4, Class::Comm, 1),
        a(10, 15, Class::Comm, 1),
        a(12, 20, Class::Memcpy, 2),
    ];
    intervals::sort_by_start(&mut acts);
    let m = intervals::window(&acts);
    assert_eq!(
        (m.comm_ns, m.gemm_ns, m.busy_ns, m.window_ns()),
        (7, 10, 20, 20)
    );
    assert_eq!((m.gemm_comm_overlap_ns, m.exposed_comm_ns()), (2, 5));
    assert_eq!(m.tp_overlap_ratio(), Some(2.0 / 7.0));
    assert_eq!((m.memcpy_ns, m.exposed_memcpy_ns), (8, 5));
}
