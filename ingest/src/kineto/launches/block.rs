//! One block's launches as bytes: which of its 4,096 ids are launches, and the runs of equal
//! steps over them in id order, in a layout that is answered where it lies (in memory, or a
//! copy read from the lookup's file) without decoding it.
//!
//! Layout, little-endian: members `n` (u16), kind (u8: 0 a sorted list of offsets, 1 a
//! bitmap), runs `r` (u16); then the members: `n` offsets (u16), or 64 words (u64) and, for
//! each word, the members in the words before it (u16); then the runs: `r` first ranks
//! (u16), `r` tags (u8, 1 when the run has a step) and `r` steps (i64, 0 without one).
//! A block lists its members while that costs less than the bitmap (640 bytes).

use rustc_hash::FxHashMap;

/// log2 of the ids a block covers.
pub(super) const BLOCK_BITS: u32 = 12;
/// An id's offset in its block.
pub(super) const OFFSET_MASK: i64 = (1 << BLOCK_BITS) - 1;
const WORDS: usize = (1 << BLOCK_BITS) / 64;
const MAX_LISTED: usize = (WORDS * 10) / 2;
const HEAD: usize = 5;

/// A launch in a block: its offset and its step.
pub(super) type Entry = (u16, Option<i64>);

/// Appends the block of `entries` (sorted by offset, without repeats, at least one).
pub(super) fn encode(entries: &[Entry], out: &mut Vec<u8>) {
    let (mut ranks, mut steps): (Vec<u16>, Vec<Option<i64>>) = (Vec::new(), Vec::new());
    for (rank, &(_, step)) in entries.iter().enumerate() {
        if steps.last() != Some(&step) {
            ranks.push(rank as u16);
            steps.push(step);
        }
    }
    let bitmap = entries.len() > MAX_LISTED;
    out.extend((entries.len() as u16).to_le_bytes());
    out.push(bitmap as u8);
    out.extend((ranks.len() as u16).to_le_bytes());
    if bitmap {
        let mut words = [0u64; WORDS];
        for &(off, _) in entries {
            words[off as usize / 64] |= 1 << (off % 64);
        }
        words.iter().for_each(|w| out.extend(w.to_le_bytes()));
        let mut before = 0u16;
        for w in words {
            out.extend(before.to_le_bytes());
            before += w.count_ones() as u16;
        }
    } else {
        entries.iter().for_each(|e| out.extend(e.0.to_le_bytes()));
    }
    ranks.iter().for_each(|r| out.extend(r.to_le_bytes()));
    steps.iter().for_each(|s| out.push(s.is_some() as u8));
    steps
        .iter()
        .for_each(|s| out.extend(s.unwrap_or(0).to_le_bytes()));
}

/// The parts of an encoded block.
struct View<'a> {
    n: usize,
    bitmap: bool,
    runs: usize,
    members: &'a [u8],
    ranks: &'a [u8],
    tags: &'a [u8],
    steps: &'a [u8],
}

fn view(b: &[u8]) -> View<'_> {
    let n = u16_at(b, 0) as usize;
    let bitmap = b[2] != 0;
    let runs = u16::from_le_bytes([b[3], b[4]]) as usize;
    let members_len = if bitmap { WORDS * 10 } else { 2 * n };
    let (members, rest) = b[HEAD..].split_at(members_len);
    let (ranks, rest) = rest.split_at(2 * runs);
    let (tags, steps) = rest.split_at(runs);
    View {
        n,
        bitmap,
        runs,
        members,
        ranks,
        tags,
        steps,
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[2 * i], b[2 * i + 1]])
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

/// The first index in `0..n` whose value is not below `x` (values sorted).
fn first_not_below(n: usize, x: u16, at: impl Fn(usize) -> u16) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if at(mid) < x {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `Some(step)` when offset `off` of the block `b` is a launch.
pub(super) fn get(b: &[u8], off: u16) -> Option<Option<i64>> {
    let v = view(b);
    let rank = if v.bitmap {
        let (w, bit) = (off as usize / 64, off % 64);
        let word = u64_at(v.members, w);
        if word & (1 << bit) == 0 {
            return None;
        }
        let before = u16_at(&v.members[WORDS * 8..], w);
        before + (word & ((1 << bit) - 1)).count_ones() as u16
    } else {
        let i = first_not_below(v.n, off, |i| u16_at(v.members, i));
        if i == v.n || u16_at(v.members, i) != off {
            return None;
        }
        i as u16
    };
    // The last run starting at or before `rank` (the first starts at 0).
    let run = first_not_below(v.runs, rank + 1, |i| u16_at(v.ranks, i)) - 1;
    Some((v.tags[run] != 0).then(|| u64_at(v.steps, run) as i64))
}

/// The (offset, step) pairs of the block `b`, sorted by offset.
pub(super) fn entries(b: &[u8]) -> Vec<Entry> {
    let v = view(b);
    let offsets: Vec<u16> = if v.bitmap {
        (0..1u16 << BLOCK_BITS)
            .filter(|&o| u64_at(v.members, o as usize / 64) & (1 << (o % 64)) != 0)
            .collect()
    } else {
        (0..v.n).map(|i| u16_at(v.members, i)).collect()
    };
    let mut run = 0;
    offsets
        .into_iter()
        .enumerate()
        .map(|(rank, off)| {
            while run + 1 < v.runs && u16_at(v.ranks, run + 1) as usize <= rank {
                run += 1;
            }
            let step = (v.tags[run] != 0).then(|| u64_at(v.steps, run) as i64);
            (off, step)
        })
        .collect()
}

/// Blocks of more pairs than this are sorted through a bitmap of their offsets; fewer, by a
/// sort (a bitmap costs a pass over its 64 words, a block each of sparse ids).
const SORTED_UP_TO: usize = 32;

/// The pairs (correlation, step) of one chunk, given in file order, as the entries of their
/// blocks: blocks by number, each block's entries by offset; of pairs with one correlation
/// the first stays.
///
/// Why not a sort of the chunk: the launches of a Kineto trace come in file order, their
/// correlations rising within each thread's run of a few thousand, the runs of two threads
/// interleaved over the same ids. A stable sort of such a chunk cost ~15 ns a pair (14 ms of
/// the 31 ms the 1 GiB fsdp2 file's lookup took on one core), while consecutive pairs mostly
/// fall in one block: so each pair goes to its block's list (a look-up only when the block
/// changes), and each list is put in order by setting its offsets in a bitmap, first pair
/// first, and reading them back: a few ns a pair.
pub(super) fn group(pairs: &[(i64, Option<i64>)]) -> Vec<(i64, Vec<Entry>)> {
    let mut blocks: Vec<(i64, Vec<Entry>)> = Vec::new();
    let mut slot: FxHashMap<i64, usize> = FxHashMap::default();
    let mut last: Option<(i64, usize)> = None;
    for &(corr, step) in pairs {
        let key = corr >> BLOCK_BITS;
        let i = match last {
            Some((k, i)) if k == key => i,
            _ => {
                let i = *slot.entry(key).or_insert_with(|| {
                    blocks.push((key, Vec::new()));
                    blocks.len() - 1
                });
                last = Some((key, i));
                i
            }
        };
        blocks[i].1.push(((corr & OFFSET_MASK) as u16, step));
    }
    blocks.sort_unstable_by_key(|b| b.0);
    let mut seen = [0u64; WORDS];
    let mut first: Vec<Option<i64>> = Vec::new();
    for (_, entries) in &mut blocks {
        if entries.len() <= SORTED_UP_TO {
            // Stable: the first of an offset stays.
            entries.sort_by_key(|e| e.0);
            entries.dedup_by_key(|e| e.0);
            continue;
        }
        first.resize(1 << BLOCK_BITS, None);
        for &(off, step) in entries.iter() {
            let (w, bit) = (off as usize / 64, 1u64 << (off % 64));
            if seen[w] & bit == 0 {
                seen[w] |= bit;
                first[off as usize] = step;
            }
        }
        entries.clear();
        for (w, word) in seen.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let off = w * 64 + bits.trailing_zeros() as usize;
                entries.push((off as u16, first[off]));
                bits &= bits - 1;
            }
        }
    }
    blocks
}

/// Two sorted lists of (offset, step) as one; where both have an offset, `first`'s stays.
pub(super) fn merge(first: &[Entry], then: &[Entry]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(first.len() + then.len());
    let (mut i, mut j) = (0, 0);
    while i < first.len() && j < then.len() {
        match first[i].0.cmp(&then[j].0) {
            std::cmp::Ordering::Less => {
                out.push(first[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(then[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(first[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&first[i..]);
    out.extend_from_slice(&then[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A block answers, for every offset, what its entries say, and gives them back.
        #[test]
        fn a_block_answers_as_its_entries(
            offs in proptest::collection::btree_set(0u16..4096, 1..1500),
            steps in proptest::collection::vec(proptest::option::of(-3i64..3), 1..40),
        ) {
            let es: Vec<Entry> = offs
                .iter()
                .enumerate()
                .map(|(i, &o)| (o, steps[(i / 37) % steps.len()].map(|s| s * (1 << 40))))
                .collect();
            let mut b = Vec::new();
            encode(&es, &mut b);
            let want: std::collections::BTreeMap<u16, Option<i64>> = es.iter().copied().collect();
            for off in 0..4096u16 {
                prop_assert_eq!(get(&b, off), want.get(&off).copied(), "offset {}", off);
            }
            prop_assert_eq!(entries(&b), es);
        }

        /// `group` gives what a stable sort by correlation, keeping the first of each, cut
        /// into blocks gives: for blocks sorted through the bitmap (dense runs, repeats) and
        /// by a sort (ids far apart, negative), runs of two "threads" interleaved.
        #[test]
        fn group_is_a_stable_sort_cut_into_blocks(
            moves in proptest::collection::vec((0u8..12, 0i64..200, proptest::option::of(0i64..4)), 0..2500),
        ) {
            let (mut a, mut b) = (0i64, 1_000i64);
            let pairs: Vec<(i64, Option<i64>)> = moves
                .iter()
                .map(|&(kind, x, step)| {
                    let corr = match kind {
                        0 => x * 10_007 - 900_000,
                        1 => a - x,
                        2 => i64::MIN + x,
                        3..=6 => {
                            b += x % 3;
                            b
                        }
                        _ => {
                            a += 1 + x % 2;
                            a
                        }
                    };
                    (corr, step)
                })
                .collect();
            let mut want = pairs.clone();
            want.sort_by_key(|e| e.0);
            want.dedup_by_key(|e| e.0);
            let mut blocks: Vec<(i64, Vec<Entry>)> = Vec::new();
            for &(c, s) in &want {
                let e = ((c & OFFSET_MASK) as u16, s);
                match blocks.last_mut() {
                    Some(l) if l.0 == c >> BLOCK_BITS => l.1.push(e),
                    _ => blocks.push((c >> BLOCK_BITS, vec![e])),
                }
            }
            prop_assert!(moves.len() < 500 || blocks.iter().any(|b| b.1.len() > SORTED_UP_TO));
            prop_assert_eq!(group(&pairs), blocks);
        }
    }
}
