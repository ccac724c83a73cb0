//! The sink's tests: the stream grouping against a plain sort.

use super::*;
use proptest::prelude::*;

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
