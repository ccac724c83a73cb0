//! The lookup against a map of every launch.
use std::collections::BTreeMap;

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
    new_log: impl Fn() -> LaunchLog,
    probes: &[i64],
) -> Result<(), TestCaseError> {
    let want = reference(launches, step_of);
    // Built on the calling thread, and on threads of its own (past one chunk of the log:
    // chunks added while the next one's steps are worked out, in runs).
    for threads in [1, 2, 4] {
        let mut log = new_log();
        // In runs of a few, as the walk's parts come.
        for part in launches.chunks(7) {
            super::log(&mut log, part).unwrap();
        }
        // The threads that worked out steps.
        let seen = Mutex::new(std::collections::HashSet::new());
        let step = |_: &mut (), pid, ts| {
            seen.lock().unwrap().insert(std::thread::current().id());
            step_of(pid, ts)
        };
        let got = LaunchSteps::build(log, step, threads).unwrap();
        answers_as(&got, &want, probes)?;
        let seen = seen.into_inner().unwrap();
        let here = seen.contains(&std::thread::current().id());
        if threads > 1 && launches.len() > CHUNK {
            prop_assert!(!here && seen.len() >= threads - 1, "{} threads", seen.len());
        } else {
            prop_assert!(launches.is_empty() || (here && seen.len() == 1));
        }
    }
    // Tiny: blocks in the file from the first chunk, chunks of 97 (blocks written again,
    // dead copies compacted), one block cached (evicted at almost every question).
    let mut tiny = LaunchSteps::with_limits(None, TINY);
    let as_logged: Vec<Launch> = launches
        .iter()
        .map(|&(corr, ts, pid)| Launch { corr, ts, pid })
        .collect();
    for chunk in as_logged.chunks(97) {
        tiny.add(chunk, &mut step_of).unwrap();
    }
    let in_file = matches!(tiny.store, Store::File { .. });
    prop_assert!(launches.is_empty() || in_file, "blocks held in memory");
    CACHE.with_borrow_mut(|c| c.blocks.clear());
    answers_as(&tiny, &want, probes)?;
    let cached = CACHE.with_borrow(|c| c.blocks.len());
    prop_assert!(cached <= 1, "{} blocks cached", cached);
    prop_assert!(tiny.take_read_error().is_none());
    Ok(())
}

/// Every block in the file, and one block cached per thread.
const TINY: Limits = Limits {
    held_max: 1,
    cache_blocks: 1,
};

/// `got` answers every launch of `want`, the ids near each, and `probes`, as `want` does.
fn answers_as(
    got: &LaunchSteps,
    want: &BTreeMap<i64, Option<i64>>,
    probes: &[i64],
) -> Result<(), TestCaseError> {
    for (&corr, &step) in want {
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
    proptest::collection::vec((0u8..20, 1i64..5000, 0i64..3, -70_000i64..70_000), 0..3000).prop_map(
        |moves| {
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
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The lookup answers as a map of every launch does, held in memory or not.
    #[test]
    fn lookup_matches_a_map(
        launches in launches(),
        probes in proptest::collection::vec(-80_000i64..400_000, 0..50),
    ) {
        check(&launches, LaunchLog::default, &probes)?;
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
        || LaunchLog::in_dir(dir.path().into()),
        &[-1, 0, 1, 7, 1 << 40],
    )
    .unwrap();
    // A discarding log keeps nothing.
    let mut log = LaunchLog::discarding();
    super::log(&mut log, &launches).unwrap();
    let none = LaunchSteps::build(log, |_: &mut (), pid, ts| step_of(pid, ts), 1).unwrap();
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
    let steps = LaunchSteps::build(log, |_: &mut (), _, ts| Some(ts / 1000), 3).unwrap();
    for &(corr, ts, _) in &launches {
        assert_eq!(steps.get(corr), Some(Some(ts / 1000)), "{corr}");
        assert_eq!(steps.get(corr + 100), None);
    }
    // The index: 16 bytes a block; the blocks are in the file.
    let bytes = steps.heap_bytes();
    assert!(bytes < 17 * n as usize, "{bytes}");
}

/// Past `HELD_MAX` only the index stays in memory: 16 bytes a block of 4,096 ids, however
/// many launches there are; answers come from the file through a cache of at most
/// `CACHE_BLOCKS` blocks a thread, and most questions in id order hit it.
#[test]
fn many_blocks_keep_only_the_index_in_memory() {
    // 2,000,000 launches, one id in ten (as in the fsdp2 trace): 4,883 bitmap blocks,
    // ~3.2 MB encoded.
    let n = 2_000_000i64;
    let dir = tempfile::tempdir().unwrap();
    let mut log = LaunchLog::in_dir(dir.path().into());
    let launches: Vec<_> = (0..n).map(|i| (10 * i, i, 0)).collect();
    super::log(&mut log, &launches).unwrap();
    let steps = LaunchSteps::build(log, |_: &mut (), _, ts| Some(ts / 1000), 3).unwrap();
    let (blocks, file, _, _) = steps.stats();
    assert_eq!(blocks, (10 * n as usize).div_ceil(4096));
    assert!(file > 3_000_000, "{file} bytes in the file");
    let bytes = steps.heap_bytes();
    // The index, nothing else: under 50 bytes per 1,000 launches.
    assert_eq!(bytes, 16 * blocks);
    assert!(bytes < 50 * n as usize / 1000, "{bytes}");
    for &(corr, ts, _) in launches.iter().step_by(7) {
        assert_eq!(steps.get(corr), Some(Some(ts / 1000)), "{corr}");
        assert_eq!(steps.get(corr + 1), None);
    }
    let (_, _, _, reads) = steps.stats();
    assert_eq!(reads as usize, blocks, "one read a block in id order");
    CACHE.with_borrow(|c| assert!(c.blocks.len() <= CACHE_BLOCKS));
}

/// Dense ids with steps in long runs take a few bytes per 1,000 launches.
#[test]
fn dense_ids_cost_little() {
    let n = 1_000_000i64;
    let mut log = LaunchLog::default();
    let launches: Vec<_> = (0..n).map(|i| (i + 17, i, 0)).collect();
    super::log(&mut log, &launches).unwrap();
    let steps = LaunchSteps::build(log, |_: &mut (), _, ts| Some(ts / 50_000), 4).unwrap();
    assert_eq!(steps.get(17 + 123_456), Some(Some(2)));
    assert_eq!(steps.get(16), None);
    assert_eq!(steps.get(n + 17), None);
    // 245 bitmaps of 645 B and 20 step changes: ~160 kB, against 24 MB as a vector.
    let bytes = steps.heap_bytes();
    assert!(bytes < 200_000, "{bytes}");
}

/// A block that cannot be read back answers "no launch", and the error is kept for the
/// settle to report (once).
#[test]
fn a_failed_read_of_the_file_is_kept() {
    let launches: Vec<Launch> = (0..10_000)
        .map(|i| Launch {
            corr: 3 * i,
            ts: i,
            pid: 0,
        })
        .collect();
    let mut steps = LaunchSteps::with_limits(None, TINY);
    steps.add(&launches, &mut step_of).unwrap();
    assert_eq!(steps.get(3), Some(step_of(0, 1)));
    // The same length, but a file opened for writing only: every read fails.
    let dir = tempfile::tempdir().unwrap();
    let len = steps.store.len();
    let file = File::create(dir.path().join("w")).unwrap();
    steps.store = Store::File { file, len };
    CACHE.with_borrow_mut(|c| c.blocks.clear());
    assert_eq!(steps.get(3), None);
    assert_eq!(steps.get(30_000), None);
    let e = steps.take_read_error().expect("kept");
    assert_eq!(e.raw_os_error(), Some(9), "{e}");
    assert!(steps.take_read_error().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Pairs added in chunks, the last of a correlation kept, answer as a map whose inserts
    /// overwrite does; with every block in the file and one block cached.
    #[test]
    fn the_last_of_repeated_pairs_answers(launches in launches()) {
        let mut want = BTreeMap::new();
        let mut got = LaunchSteps::with_limits(None, TINY);
        for chunk in launches.chunks(97) {
            let pairs: Vec<_> = chunk.iter().map(|&(c, ts, pid)| (c, step_of(pid, ts))).collect();
            want.extend(pairs.iter().copied());
            got.add_pairs(pairs, Keep::Last).unwrap();
        }
        CACHE.with_borrow_mut(|c| c.blocks.clear());
        answers_as(&got, &want, &[])?;
    }
}
