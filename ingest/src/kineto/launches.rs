//! The launches of a trace, and the step of each, by correlation id, in memory that grows
//! with the range of correlation ids rather than 24 bytes a launch.
//!
//! Why: a GPU row's step is the step of the runtime call that launched it, and the spans that
//! give that call its step may come anywhere in the file, so every launch (its correlation,
//! time and process: 24 bytes) waits for the end of the walk. Held in memory they were the
//! growth of the walk's peak RSS: ~21 MB per GB of Kineto trace (~810,000 launches a GB), so
//! a trace of ~6.5 GB passed 256 MB. Now the walk appends them, in file order, to a `Spool`
//! (an unnamed temporary file in the staging directory; a small trace writes none), and once
//! the spans are known [`LaunchSteps::build`] reads them back a chunk at a time and keeps
//! only a compact correlation → step lookup.
//!
//! The lookup: CUPTI and roctracer number correlations in launch order, so sorted by
//! correlation the steps form long runs. Ids are grouped in blocks of 4,096; a block keeps
//! which of its ids are launches exactly (a sorted list of offsets while it holds few, else a
//! bitmap: `kernel_without_launch` needs exact membership) and the runs of equal steps over
//! its launches in id order. The fsdp2 benchmark trace (ids ~10 % dense) costs ~1 MB per GB
//! this way, against 19 MB as a vector, the rocm mix (a step every ~140 events) ~2.3 MB per
//! GB. Ids out of order, repeated, sparse or negative stay exact: they only make more
//! blocks, longer lists or more runs. Blocks of at most 4 launches keep them in a plain map
//! instead (~30 bytes a launch; a block costs ~100), so ids far apart cost about what the
//! vector did.
//!
//! Which launch counts when a correlation repeats: the first in file order, as the sorted
//! vector this replaces kept (a stable sort, then `dedup`).

use std::collections::BTreeMap;
use std::io;

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

use super::spool::Spool;

/// log2 of the ids a block covers.
const BLOCK_BITS: u32 = 12;
const WORDS: usize = (1 << BLOCK_BITS) / 64;
const OFFSET_MASK: i64 = (1 << BLOCK_BITS) - 1;

/// Blocks with at most this many launches keep them in `LaunchSteps::lone`.
const MAX_LONE: usize = 4;

/// A block lists its members while that costs less than a bitmap with its counts (640 B).
const MAX_LISTED: usize = (WORDS * 10) / 2;

/// A runtime or driver call: its correlation, start (trace-relative ns) and process key.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(crate) struct Launch {
    corr: i64,
    ts: i64,
    pid: i64,
}

/// The launches noted by the walk, in file order.
pub(crate) type LaunchLog = Spool<Launch>;

/// Appends launches given as (correlation, ts, pid key), in file order.
pub(crate) fn log(to: &mut LaunchLog, launches: &[(i64, i64, i64)]) -> io::Result<()> {
    to.extend(
        launches
            .iter()
            .map(|&(corr, ts, pid)| Launch { corr, ts, pid }),
    )
}

/// Correlation id → step of the launch with that id, for every launch of a trace.
#[derive(Debug, Default)]
pub(crate) struct LaunchSteps {
    /// By block number (`corr >> BLOCK_BITS`).
    blocks: BTreeMap<i64, Block>,
    /// The launches of blocks that hold at most `MAX_LONE`: correlation → step. A block of
    /// its own costs ~100 bytes, an entry here ~30. A block's launches are either here or
    /// in `blocks`, never in both.
    lone: BTreeMap<i64, Option<i64>>,
}

impl LaunchSteps {
    /// The steps of the launches in `log`, `step(pid, ts)` giving each its step; the log's
    /// file is read back a chunk at a time, each chunk's steps found and sorted on the
    /// current rayon pool (serial, ~70 ms a GB was a fifth of one file's settle on 16 cores).
    pub(crate) fn build(
        log: LaunchLog,
        step: impl Fn(i64, i64) -> Option<i64> + Sync,
    ) -> io::Result<LaunchSteps> {
        let mut out = LaunchSteps::default();
        log.drain(
            |chunk| {
                out.add(chunk, &step);
                Ok(())
            },
            |e| e,
        )?;
        Ok(out)
    }

    /// `Some(step)` when a launch with this correlation exists.
    pub(crate) fn get(&self, corr: i64) -> Option<Option<i64>> {
        let Some(b) = self.blocks.get(&(corr >> BLOCK_BITS)) else {
            return self.lone.get(&corr).copied();
        };
        let rank = b.members.rank((corr & OFFSET_MASK) as u16)?;
        let run = b.runs.partition_point(|r| r.0 <= rank) - 1;
        Some(b.runs[run].1)
    }

    /// Adds launches that come, in file order, after every launch added before.
    fn add(&mut self, launches: &[Launch], step: &(impl Fn(i64, i64) -> Option<i64> + Sync)) {
        let mut v: Vec<(i64, Option<i64>)> = launches
            .par_iter()
            .map(|l| (l.corr, step(l.pid, l.ts)))
            .collect();
        // Stable: of launches with one correlation, the first in file order stays.
        v.par_sort_by_key(|e| e.0);
        v.dedup_by_key(|e| e.0);
        for group in v.chunk_by(|a, b| a.0 >> BLOCK_BITS == b.0 >> BLOCK_BITS) {
            let mut entries = group
                .iter()
                .map(|&(c, s)| ((c & OFFSET_MASK) as u16, s))
                .collect::<Vec<_>>();
            let key = group[0].0 >> BLOCK_BITS;
            let first = key << BLOCK_BITS;
            // An earlier chunk reached this block: its launches came first.
            let earlier = match self.blocks.remove(&key) {
                Some(b) => b.entries(),
                None => {
                    let lone = self.lone.range(first..=first | OFFSET_MASK);
                    let lone: Vec<i64> = lone.map(|(&c, _)| c).collect();
                    lone.iter()
                        .map(|c| {
                            let step = self.lone.remove(c).expect("listed above");
                            ((c & OFFSET_MASK) as u16, step)
                        })
                        .collect()
                }
            };
            if !earlier.is_empty() {
                entries = merge(&earlier, &entries);
            }
            if entries.len() <= MAX_LONE {
                self.lone
                    .extend(entries.iter().map(|&(off, s)| (first | off as i64, s)));
            } else {
                self.blocks.insert(key, Block::new(&entries));
            }
        }
    }

    /// Heap bytes held (for tests and `AORTA_TIMING`: tree nodes estimated).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.lone.len() * 30
            + self
                .blocks
                .values()
                .map(|b| {
                    64 + std::mem::size_of::<Block>()
                        + b.runs.len() * std::mem::size_of::<(u16, Option<i64>)>()
                        + match &b.members {
                            Members::List(l) => l.len() * 2,
                            Members::Bits(_) => std::mem::size_of::<Bitmap>(),
                        }
                })
                .sum::<usize>()
    }
}

/// The launches of one block of 4,096 ids.
#[derive(Debug)]
struct Block {
    members: Members,
    /// Runs of launches with one step, in id order: (rank of the run's first launch among
    /// the block's, step). The first starts at rank 0.
    runs: Box<[(u16, Option<i64>)]>,
}

/// Which offsets in a block are launches.
#[derive(Debug)]
enum Members {
    /// Sorted.
    List(Box<[u16]>),
    Bits(Box<Bitmap>),
}

#[derive(Debug)]
struct Bitmap {
    words: [u64; WORDS],
    /// Members in the words before each.
    before: [u16; WORDS],
}

impl Block {
    /// From (offset, step) pairs sorted by offset, without repeats (at least one).
    fn new(entries: &[(u16, Option<i64>)]) -> Block {
        let mut runs: Vec<(u16, Option<i64>)> = Vec::new();
        for (rank, &(_, step)) in entries.iter().enumerate() {
            if runs.last().is_none_or(|r| r.1 != step) {
                runs.push((rank as u16, step));
            }
        }
        let members = if entries.len() <= MAX_LISTED {
            Members::List(entries.iter().map(|e| e.0).collect())
        } else {
            let mut bits = Box::new(Bitmap {
                words: [0; WORDS],
                before: [0; WORDS],
            });
            for &(off, _) in entries {
                bits.words[off as usize / 64] |= 1 << (off % 64);
            }
            let mut n = 0;
            for w in 0..WORDS {
                bits.before[w] = n;
                n += bits.words[w].count_ones() as u16;
            }
            Members::Bits(bits)
        };
        Block {
            members,
            runs: runs.into_boxed_slice(),
        }
    }

    /// The (offset, step) pairs, sorted by offset.
    fn entries(&self) -> Vec<(u16, Option<i64>)> {
        let offsets: Vec<u16> = match &self.members {
            Members::List(l) => l.to_vec(),
            Members::Bits(b) => (0..1u16 << BLOCK_BITS)
                .filter(|&o| b.words[o as usize / 64] & (1 << (o % 64)) != 0)
                .collect(),
        };
        let mut run = 0;
        offsets
            .into_iter()
            .enumerate()
            .map(|(rank, off)| {
                while self.runs.get(run + 1).is_some_and(|r| r.0 as usize <= rank) {
                    run += 1;
                }
                (off, self.runs[run].1)
            })
            .collect()
    }
}

impl Members {
    /// The rank of `off` among the members, if it is one.
    fn rank(&self, off: u16) -> Option<u16> {
        match self {
            Members::List(l) => l.binary_search(&off).ok().map(|i| i as u16),
            Members::Bits(b) => {
                let (w, bit) = (off as usize / 64, off % 64);
                let word = b.words[w];
                (word & (1 << bit) != 0)
                    .then(|| b.before[w] + (word & ((1 << bit) - 1)).count_ones() as u16)
            }
        }
    }
}

/// Two sorted lists of (offset, step) as one; where both have an offset, `first`'s stays.
fn merge(first: &[(u16, Option<i64>)], then: &[(u16, Option<i64>)]) -> Vec<(u16, Option<i64>)> {
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

    /// The reference: every launch's step into a map, the first launch of a correlation kept.
    fn reference(
        launches: &[(i64, i64, i64)],
        step: impl Fn(i64, i64) -> Option<i64>,
    ) -> BTreeMap<i64, Option<i64>> {
        let mut m = BTreeMap::new();
        for &(corr, ts, pid) in launches {
            m.entry(corr).or_insert_with(|| step(pid, ts));
        }
        m
    }

    /// A step that depends on both the time and the process, with gaps (None).
    fn step_of(pid: i64, ts: i64) -> Option<i64> {
        let s = ts.div_euclid(50) + pid;
        (s % 7 != 3).then_some(s)
    }

    fn check(
        launches: &[(i64, i64, i64)],
        log: LaunchLog,
        probes: &[i64],
    ) -> Result<(), TestCaseError> {
        let want = reference(launches, step_of);
        let mut log = log;
        // In runs of a few, as the walk's parts come.
        for part in launches.chunks(7) {
            super::log(&mut log, part).unwrap();
        }
        let got = LaunchSteps::build(log, step_of).unwrap();
        for (&corr, &step) in &want {
            prop_assert_eq!(got.get(corr), Some(step), "correlation {}", corr);
            for near in [-1, 1, 4096, -4096]
                .into_iter()
                .filter_map(|d| corr.checked_add(d))
            {
                prop_assert_eq!(got.get(near), want.get(&near).copied(), "near {}", near);
            }
        }
        for &p in probes {
            prop_assert_eq!(got.get(p), want.get(&p).copied(), "probe {}", p);
        }
        Ok(())
    }

    /// Ids as a profiler numbers them: mostly rising by 1 with time, some out of order,
    /// repeated, skipped far ahead or negative.
    fn launches() -> impl Strategy<Value = Vec<(i64, i64, i64)>> {
        proptest::collection::vec((0u8..20, 1i64..5000, 0i64..3, -70_000i64..70_000), 0..3000)
            .prop_map(|moves| {
                let (mut corr, mut ts) = (0i64, 0i64);
                let mut out = Vec::with_capacity(moves.len());
                for (kind, jump, pid, other) in moves {
                    ts += jump % 40;
                    let c = match kind {
                        0 => other,       // anywhere, negative too
                        1 => corr - jump, // back (a repeat or an earlier id)
                        2 => {
                            corr += jump * 97; // far ahead: sparse blocks
                            corr
                        }
                        3 => i64::MIN + jump, // the extremes
                        4 => i64::MAX - jump,
                        _ => {
                            corr += 1 + jump % 3;
                            corr
                        }
                    };
                    out.push((c, ts, pid));
                }
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The lookup answers as a map of every launch does, held in memory or not.
        #[test]
        fn lookup_matches_a_map(
            launches in launches(),
            probes in proptest::collection::vec(-80_000i64..400_000, 0..50),
        ) {
            check(&launches, LaunchLog::default(), &probes)?;
        }
    }

    /// Enough launches to go through the file (several chunks, blocks that chunks share,
    /// repeats across chunks: the first in file order wins), dense runs in bitmaps.
    #[test]
    fn spilled_launches_match_a_map() {
        let mut launches = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..(3 * super::super::spool::CHUNK as i64 + 123) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let corr = match x % 100 {
                0 => (x >> 8) as i64 % 1_000_000 - 500_000,
                1 => i - (x >> 40) as i64 % 200_000,
                _ => 2 * i,
            };
            launches.push((corr, i, (x >> 60) as i64 % 2));
        }
        let dir = tempfile::tempdir().unwrap();
        check(
            &launches,
            LaunchLog::in_dir(dir.path().into()),
            &[-1, 0, 1, 7, 1 << 40],
        )
        .unwrap();
        // A discarding log keeps nothing.
        let mut log = LaunchLog::discarding();
        super::log(&mut log, &launches).unwrap();
        let none = LaunchSteps::build(log, step_of).unwrap();
        assert_eq!(none.get(launches[0].0), None);
    }

    /// Ids far apart (a block each) cost about what a vector of them did, and answer
    /// exactly, including ids that join a block of few later and make it a block.
    #[test]
    fn sparse_ids_cost_about_a_vector() {
        let n = 100_000i64;
        let mut log = LaunchLog::default();
        let mut launches: Vec<_> = (0..n).map(|i| (i * 10_000 - 7, i, 0)).collect();
        // Past the first chunk (65,536), a block that held one launch gets nine more.
        let late = 1_000;
        launches.extend((1..10).map(|k| (late * 10_000 - 7 + k, n + k, 0)));
        super::log(&mut log, &launches).unwrap();
        let steps = LaunchSteps::build(log, |_, ts| Some(ts / 1000)).unwrap();
        for &(corr, ts, _) in &launches {
            assert_eq!(steps.get(corr), Some(Some(ts / 1000)), "{corr}");
            assert_eq!(steps.get(corr + 100), None);
        }
        let bytes = steps.heap_bytes();
        assert!(bytes < 40 * n as usize, "{bytes}");
    }

    /// Dense ids with steps in long runs take a few bytes per 1,000 launches.
    #[test]
    fn dense_ids_cost_little() {
        let n = 1_000_000i64;
        let mut log = LaunchLog::default();
        let launches: Vec<_> = (0..n).map(|i| (i + 17, i, 0)).collect();
        super::log(&mut log, &launches).unwrap();
        let steps = LaunchSteps::build(log, |_, ts| Some(ts / 50_000)).unwrap();
        assert_eq!(steps.get(17 + 123_456), Some(Some(2)));
        assert_eq!(steps.get(16), None);
        assert_eq!(steps.get(n + 17), None);
        // 245 bitmaps of 640 B and 20 step changes: ~180 kB, against 24 MB as a vector.
        let bytes = steps.heap_bytes();
        assert!(bytes < 200_000, "{bytes}");
    }
}
