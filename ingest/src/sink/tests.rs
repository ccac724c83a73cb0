//! The sink's tests: buffers and flush points against plain references.

use super::*;
use crate::rows::CpuCategory;
use proptest::prelude::*;

/// Settling CPU rows straight into the buffer on a pool (`extend_cpu`) writes the file,
/// findings and counts that adding the same batches one by one (`add_rows`) writes, over
/// several flushes and row groups, with batches of many sizes cut at every flush point.
#[test]
fn cpu_rows_settled_into_the_buffer_write_what_added_batches_write() {
    let mut strings = Interner::default();
    let names: Vec<u32> = ["aten::mm", "aten::add", "cudaLaunchKernel", "[1, 2]"]
        .iter()
        .map(|s| strings.id(s))
        .collect();
    let row = |i: usize| CpuRow {
        category: CpuCategory::ALL[i % CpuCategory::ALL.len()],
        name: names[i * 7 % 3],
        pid: Some(1),
        tid: (i % 5 != 0).then_some(i as i64 % 3),
        start: 1_000 * i as i64 - (i % 11) as i64,
        end: 1_000 * i as i64 + 900,
        correlation: (i % 4 == 0).then_some(i as i64),
        external_id: None,
        step: Some(i as i64 / 50_000),
        input_dims: (i % 3 == 0).then_some(names[3]),
        input_types: None,
        concrete_inputs: None,
        input_strides: None,
    };
    // A finding every 997 rows; the smallest offset is the one kept.
    let find = |i: usize, diag: &mut Diagnostics| {
        if i % 997 == 3 {
            diag.add_min("outside_steps", Some(i as i64), || format!("row {i}"));
        }
    };
    // The first two fill the buffer exactly: a flush falls right after them.
    let sizes = [
        1_000,
        FLUSH_ROWS - 1_000,
        4_999,
        7,
        20_000,
        3_333,
        0,
        60_000,
        1,
    ];
    let mut ends = Vec::new();
    let mut at = 0;
    while at < 300_000 {
        at += sizes[ends.len() % sizes.len()];
        ends.push(at);
    }
    let recs: Vec<usize> = (0..at).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let parts = |tag: &str| Parts {
        root: dir.path().to_path_buf(),
        run: "r".into(),
        rank: 0,
        tag: tag.into(),
    };
    let (want, got) = pool.install(|| {
        let mut one = Sink::with_strings(&parts("one"), strings.clone());
        let mut from = 0;
        for &end in &ends {
            let mut diag = Diagnostics::default();
            (from..end).for_each(|i| find(i, &mut diag));
            one.add_rows(Vec::new(), (from..end).map(row).collect(), diag)
                .unwrap();
            from = end;
        }
        let mut all = Sink::with_strings(&parts("all"), strings.clone());
        // In two calls, the second starting with a part-filled buffer.
        let half = ends.len() / 2;
        let settle = |_: &mut (), &i: &usize, diag: &mut Diagnostics| {
            find(i, diag);
            row(i)
        };
        let (a, b) = ends.split_at(half);
        all.extend_cpu(&recs[..a[half - 1]], a, settle).unwrap();
        let b: Vec<usize> = b.iter().map(|e| e - a[half - 1]).collect();
        all.extend_cpu(&recs[a[half - 1]..], &b, settle).unwrap();
        (one.finish().unwrap(), all.finish().unwrap())
    });
    let text = |o: &SinkOut| format!("{:?} {:?} {:?}", o.diag, o.steps, o.counts);
    assert_eq!(text(&got), text(&want));
    assert_eq!(want.counts.cpu, at as u64);
    let file = |o: &SinkOut| std::fs::read(&o.written[0].0).unwrap();
    assert!(file(&got) == file(&want));
    assert!(want.written[0].1 as usize > crate::writer::ROW_GROUP_ROWS);
}

proptest! {
    #[test]
    fn stream_grouping_sorts_like_a_plain_sort(
        rows in proptest::collection::vec((0i64..2, 0i64..100, 0i64..50, 0i64..3), 0..400),
    ) {
        // Up to 100 streams on two devices when t is even, three otherwise.
        let mut keys: Vec<Key> = rows
            .iter()
            .enumerate()
            .map(|(i, &(d, s, t, e))| (d, if t % 2 == 0 { s } else { s % 3 }, t, t + e, i as u32))
            .collect();
        let mut want = keys.clone();
        want.sort_unstable();
        sort_keys(&mut keys, &mut Vec::new());
        prop_assert_eq!(keys, want);
    }
}
