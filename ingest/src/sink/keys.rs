//! The sort keys of buffered GPU rows, and their sort.
//!
//! Why a module of its own: both settles sort a flush's rows by stream and start, the
//! sink's (`Sink::flush_gpu`) and the one in row groups (`kineto::pending::groups`), with
//! this one order; it is kept apart from the sink's buffering.

use rustc_hash::FxHashMap;

/// (device, stream, start, raw end, index in the buffer) of a buffered GPU row. Sorting
/// these 40-byte keys instead of the ~230-byte rows moves a sixth of the bytes; each row is
/// then copied once, in order. The index breaks ties, so the order is the stable one.
pub(crate) type Key = (i64, i64, i64, i64, u32);

/// The key of `r`, row `at` of its buffer.
pub(crate) fn key(r: &crate::rows::GpuRow, at: usize) -> Key {
    (r.device, r.stream, r.start, r.raw_end, at as u32)
}

/// Sorts `keys`. Rows arrive in time order, interleaving streams (hundreds of them in a
/// rocprof trace), so keys are first grouped by stream (a stable counting sort into
/// `scratch`) and each stream's run is then only checked, and sorted if it is not in order.
pub(crate) fn sort_keys(keys: &mut Vec<Key>, scratch: &mut Vec<Key>) {
    if keys.is_sorted() {
        return;
    }
    let (streams, bucket) = group_streams(keys);
    let mut order: Vec<usize> = (0..streams.len()).collect();
    order.sort_unstable_by_key(|&b| streams[b].0);
    let mut next = vec![0; streams.len()];
    let mut at = 0;
    for &b in &order {
        (next[b], at) = (at, at + streams[b].1);
    }
    scratch.clear();
    scratch.resize(keys.len(), (0, 0, 0, 0, 0));
    for (k, &b) in keys.iter().zip(&bucket) {
        scratch[next[b as usize]] = *k;
        next[b as usize] += 1;
    }
    std::mem::swap(keys, scratch);
    for b in order {
        let run = &mut keys[next[b] - streams[b].1..next[b]];
        if !run.is_sorted() {
            run.sort_unstable();
        }
    }
}

/// A (device, stream) pair and its number of rows.
type StreamRows = ((i64, i64), usize);

/// The distinct (device, stream) pairs with their row counts, and each key's pair.
fn group_streams(keys: &[Key]) -> (Vec<StreamRows>, Vec<u32>) {
    let mut index: FxHashMap<(i64, i64), u32> = FxHashMap::default();
    let mut streams: Vec<StreamRows> = Vec::new();
    let mut last: Option<((i64, i64), u32)> = None;
    let bucket = keys
        .iter()
        .map(|k| {
            let s = (k.0, k.1);
            let b = match last {
                Some((l, b)) if l == s => b,
                _ => *index.entry(s).or_insert_with(|| {
                    streams.push((s, 0));
                    streams.len() as u32 - 1
                }),
            };
            last = Some((s, b));
            streams[b as usize].1 += 1;
            b
        })
        .collect();
    (streams, bucket)
}
