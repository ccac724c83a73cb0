//! The launches of a trace, and the step of each, by correlation id: in memory, a small
//! index that grows with the range of correlation ids (16 bytes a block of 4,096 ids); the
//! blocks themselves in a temporary file once they pass `HELD_MAX`.
//!
//! Why: a GPU row's step is the step of the runtime call that launched it, and the spans that
//! give that call its step may come anywhere in the file, so every launch (its correlation,
//! time and process: 24 bytes) waits for the end of the walk. Held in memory they were the
//! growth of the walk's peak RSS: ~21 MB per GB of Kineto trace (~810,000 launches a GB).
//! So the walk appends them, in file order, to a `Spool` (an unnamed temporary file in the
//! staging directory; a small trace writes none), and once the spans are known
//! [`LaunchSteps::build`] reads them back a chunk at a time into a compact correlation → step
//! lookup, on threads of its own (~15 ms a GB on one; the GPU table of the settle waits for
//! it). Held in
//! memory, that lookup still grew by ~1 MB per GB of the fsdp2 trace and ~2.3 MB per GB of
//! the rocm mix (an fsdp2-like trace would pass 256 MB of peak RSS at ~65 GB); now its
//! blocks go to a second unnamed file in the staging directory once they pass `HELD_MAX`
//! (1 MiB), and only the index (block → offset and size in the file) stays.
//!
//! The lookup: CUPTI and roctracer number correlations in launch order, so sorted by
//! correlation the steps form long runs. Ids are grouped in blocks of 4,096; a block keeps
//! which of its ids are launches exactly (`kernel_without_launch` needs exact membership) and
//! the runs of equal steps over its launches in id order, as bytes (`block`). Ids out of
//! order, repeated, sparse or negative stay exact: they only make more blocks, longer lists
//! or more runs. A chunk that reaches a block an earlier chunk made writes the block again,
//! merged, at the end of the file; once more than half of the file is such dead copies (and
//! more than a quarter of `HELD_MAX`), the live blocks are copied to a new one.
//!
//! Answering from the file: GPU rows are settled in file order and their correlations rise
//! nearly with it, so each thread keeps the last `CACHE_BLOCKS` blocks it read (a thread-local
//! cache: the settle's workers share one lookup, and ask it ~300,000 times a GB). On the
//! fsdp2 trace that is a block read per ~240 questions, each block read about once
//! (docs/PERFORMANCE.md gives the counts).
//! A failed read answers "no launch" and is kept: `take_read_error` reports it after the
//! settle, as the file's I/O error.
//!
//! Which launch counts when a correlation repeats: the first in file order, as the sorted
//! vector this replaced kept (a stable sort, then `dedup`). The rocprof readers use the same
//! lookup for values they work out themselves (`add_pairs`: a launch's step and RCCL call,
//! the last call of a correlation answering, as their map did; `Keep`), and the nsys reader
//! for its runtime calls, keyed by process and correlation (`nsys::steps`).

mod block;

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

use bytemuck::{Pod, Zeroable};

use super::spool::{Spool, CHUNK};
use block::{BLOCK_BITS, OFFSET_MASK};

/// Encoded blocks held in memory before they move to the lookup's file.
const HELD_MAX: usize = 1 << 20;

/// Blocks each thread keeps of a lookup that is in its file.
const CACHE_BLOCKS: usize = 8;

/// Bits of an index location that give the block's size (a block is at most ~46 kB).
const LEN_BITS: u32 = 24;

/// A runtime or driver call: its correlation, start (trace-relative ns) and process key.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(crate) struct Launch {
    pub corr: i64,
    pub ts: i64,
    /// The process key (rocprof: the thread).
    pub pid: i64,
}

/// The launches noted by the walk, in file order.
pub(crate) type LaunchLog = Spool<Launch>;

/// Each launch's correlation and step, the chunk cut into `runs` runs worked out at once
/// (the first on this thread, each other on one of its own), each with a cache of its own.
fn pairs<C: Default>(
    chunk: &[Launch],
    step: &(impl Fn(&mut C, i64, i64) -> Option<i64> + Sync),
    runs: usize,
) -> Vec<(i64, Option<i64>)> {
    let work = |out: &mut [(i64, Option<i64>)], run: &[Launch]| {
        let mut cache = C::default();
        for (o, l) in out.iter_mut().zip(run) {
            *o = (l.corr, step(&mut cache, l.pid, l.ts));
        }
    };
    let mut v = vec![(0, None); chunk.len()];
    let per = chunk.len().div_ceil(runs.max(1)).max(1);
    let mut runs = v.chunks_mut(per).zip(chunk.chunks(per));
    let first = runs.next();
    std::thread::scope(|s| {
        for (out, run) in runs {
            s.spawn(move || work(out, run));
        }
        if let Some((out, run)) = first {
            work(out, run);
        }
    });
    v
}

/// Appends launches given as (correlation, ts, pid key), in file order.
pub(crate) fn log(to: &mut LaunchLog, launches: &[(i64, i64, i64)]) -> io::Result<()> {
    to.extend(
        launches
            .iter()
            .map(|&(corr, ts, pid)| Launch { corr, ts, pid }),
    )
}

/// Where the encoded blocks are.
enum Store {
    Mem(Vec<u8>),
    /// An unnamed temporary file, `len` bytes long.
    File {
        file: File,
        len: u64,
    },
}

/// How much a lookup holds in memory (tests make both tiny).
#[derive(Debug, Clone, Copy)]
struct Limits {
    held_max: usize,
    cache_blocks: usize,
}

/// Which of the pairs with one correlation a lookup answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The first in file order (a Kineto launch: as the sorted vector it replaced).
    First,
    /// The last (rocprof's launches: as the map they replaced, whose inserts overwrote).
    Last,
}

/// Numbers lookups apart in the thread-local caches.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Correlation id → step of the launch with that id, for every launch of a trace.
pub(crate) struct LaunchSteps {
    /// (block number `corr >> BLOCK_BITS`, location: offset << LEN_BITS | size), by block.
    index: Vec<(i64, u64)>,
    store: Store,
    /// Where the file goes (the system's temporary directory if none).
    dir: Option<PathBuf>,
    /// Bytes of the store that no block of the index is any more (blocks written again).
    dead: u64,
    limits: Limits,
    id: u64,
    /// Questions answered from the file (counted by each thread, added here now and then)
    /// and blocks read for them.
    asked: AtomicU64,
    reads: AtomicU64,
    read_error: Mutex<Option<io::Error>>,
}

impl Default for LaunchSteps {
    fn default() -> Self {
        LaunchSteps::with_limits(
            None,
            Limits {
                held_max: HELD_MAX,
                cache_blocks: CACHE_BLOCKS,
            },
        )
    }
}

/// What the lookup says (its index and blocks), not which lookup it is or how often it was
/// asked: two lookups of the same launches print alike.
impl std::fmt::Debug for LaunchSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("LaunchSteps");
        d.field("index", &self.index);
        match &self.store {
            Store::Mem(held) => d.field("held", held),
            Store::File { len, .. } => d.field("file_len", len),
        };
        d.finish()
    }
}

impl LaunchSteps {
    fn with_limits(dir: Option<PathBuf>, limits: Limits) -> LaunchSteps {
        LaunchSteps {
            index: Vec::new(),
            store: Store::Mem(Vec::new()),
            dir,
            dead: 0,
            limits,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            asked: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_error: Mutex::new(None),
        }
    }

    /// The steps of the launches in `log`, `step(cache, pid, ts)` giving each its step
    /// (asked in file order within each run of launches, each run with a `cache` of its own
    /// that the caller may keep its last answer in); the log's file is read back a chunk at
    /// a time. The blocks' file, if they need one, goes where the log's does.
    ///
    /// `threads` above one: on threads of its own (`fill_alongside`), not the pool's. On 16
    /// cores the Kineto settle builds it beside the CPU table, whose row groups fill the
    /// pool, and a build on the pool (each chunk's steps and sort split into tasks) waited
    /// for them: 100–165 ms for a 1 GiB file, against ~31 ms alone. On the calling thread
    /// alone, with the steps cached and the sort replaced by bucketing into blocks
    /// (`block::group`), it took ~15 ms of one core for that file (docs/PERFORMANCE.md), but
    /// 30–55 ms beside the CPU table on 16 busy cores, all of it before the GPU table's
    /// first row.
    pub(crate) fn build<C: Default>(
        log: LaunchLog,
        step: impl Fn(&mut C, i64, i64) -> Option<i64> + Sync,
        threads: usize,
    ) -> io::Result<LaunchSteps> {
        let mut out =
            LaunchSteps::with_limits(log.dir().map(Into::into), LaunchSteps::default().limits);
        if threads > 1 && log.len() > CHUNK as u64 {
            out.fill_alongside(log, &step, threads)?;
        } else {
            let mut cache = C::default();
            let mut step = |pid, ts| step(&mut cache, pid, ts);
            log.drain(|chunk| out.add(chunk, &mut step), |e| e)?;
        }
        out.shrink();
        Ok(out)
    }

    /// `build` on threads of its own: one reads the log back and works out each chunk's
    /// steps (with `threads - 1` more, each a run of the chunk), while this one adds the
    /// chunk before to the blocks, in file order as `add` would.
    fn fill_alongside<C: Default>(
        &mut self,
        log: LaunchLog,
        step: &(impl Fn(&mut C, i64, i64) -> Option<i64> + Sync),
        threads: usize,
    ) -> io::Result<()> {
        let (tx, rx) = sync_channel::<Vec<(i64, Option<i64>)>>(2);
        std::thread::scope(|s| {
            let reader = s.spawn(move || {
                let stopped = || io::Error::other("the launches' lookup stopped");
                let send = |chunk: &[Launch]| tx.send(pairs(chunk, step, threads - 1));
                log.drain(|chunk| send(chunk).map_err(|_| stopped()), |e| e)
            });
            let mut added = Ok(());
            for v in &rx {
                added = self.add_pairs(v, Keep::First);
                if added.is_err() {
                    break;
                }
            }
            // The reader stops at its next chunk (its send fails) if this one stopped.
            drop(rx);
            let read = reader
                .join()
                .expect("working out the launches' steps does not panic");
            added.and(read)
        })
    }

    /// Gives back what the index and blocks held in memory do not use, once every pair is in.
    pub(crate) fn shrink(&mut self) {
        self.index.shrink_to_fit();
        if let Store::Mem(held) = &mut self.store {
            held.shrink_to_fit();
        }
    }

    /// `Some(step)` when a launch with this correlation exists.
    pub(crate) fn get(&self, corr: i64) -> Option<Option<i64>> {
        let (key, off) = (corr >> BLOCK_BITS, (corr & OFFSET_MASK) as u16);
        match &self.store {
            Store::Mem(bytes) => {
                let (at, len) = self.find(key)?;
                block::get(&bytes[at as usize..at as usize + len], off)
            }
            Store::File { file, .. } => CACHE.with_borrow_mut(|c| c.get(self, file, key, off)),
        }
    }

    /// The block's location in the store.
    fn find(&self, key: i64) -> Option<(u64, usize)> {
        let i = self.index.binary_search_by_key(&key, |e| e.0).ok()?;
        Some(unpack(self.index[i].1))
    }

    /// Whether `f` holds for the value of any correlation, asked block by block. A failed
    /// read of the file answers `false` and is kept, as `get`'s are (`take_read_error`).
    pub(crate) fn any_value(&self, mut f: impl FnMut(Option<i64>) -> bool) -> bool {
        let mut b = Vec::new();
        for &(_, loc) in &self.index {
            let (at, len) = unpack(loc);
            if let Err(e) = self.store.read(at, len, &mut b) {
                if let Ok(mut slot) = self.read_error.lock() {
                    slot.get_or_insert(e);
                }
                return false;
            }
            if block::entries(&b).into_iter().any(|(_, v)| f(v)) {
                return true;
            }
        }
        false
    }

    /// Makes every later read of the lookup's file fail (tests of callers that must report
    /// it): the file is swapped for one open for writing only.
    #[cfg(test)]
    pub(crate) fn break_file(&mut self) {
        if let Store::File { file, .. } = &mut self.store {
            *file = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .unwrap();
        }
    }

    /// The error a read of the lookup's file met (that question was answered "no launch").
    pub(crate) fn take_read_error(&self) -> Option<io::Error> {
        self.read_error.lock().map_or(None, |mut e| e.take())
    }

    /// Adds launches that come, in file order, after every launch added before.
    fn add(
        &mut self,
        launches: &[Launch],
        step: &mut impl FnMut(i64, i64) -> Option<i64>,
    ) -> io::Result<()> {
        let v: Vec<(i64, Option<i64>)> = launches
            .iter()
            .map(|l| (l.corr, step(l.pid, l.ts)))
            .collect();
        self.add_pairs(v, Keep::First)
    }

    /// An empty lookup whose blocks, past `HELD_MAX`, go to a file in `dir` (the system's
    /// temporary directory if `None`): for callers that work out the values themselves.
    pub(crate) fn in_dir(dir: Option<PathBuf>) -> LaunchSteps {
        LaunchSteps::with_limits(dir, LaunchSteps::default().limits)
    }

    /// `in_dir`, every block in the file and one cached: for tests of callers.
    #[cfg(test)]
    pub(crate) fn in_file(dir: Option<PathBuf>) -> LaunchSteps {
        LaunchSteps::with_limits(
            dir,
            Limits {
                held_max: 0,
                cache_blocks: 1,
            },
        )
    }

    /// Adds (correlation, value) pairs, in file order, that come after every pair added
    /// before; of pairs with one correlation, `keep` says which answers.
    pub(crate) fn add_pairs(
        &mut self,
        mut v: Vec<(i64, Option<i64>)>,
        keep: Keep,
    ) -> io::Result<()> {
        if keep == Keep::Last {
            v.reverse();
        }
        // The chunk's blocks, encoded one after another, and where each goes in the index.
        let mut bytes = Vec::new();
        let mut placed = Vec::new();
        let mut old = Vec::new();
        // Of pairs with one correlation, the first (of `v` as it now is) stays.
        for (key, mut entries) in block::group(&v) {
            let at = self.index.binary_search_by_key(&key, |e| e.0).ok();
            if let Some(i) = at {
                // An earlier chunk reached this block: its pairs came first.
                let (off, len) = unpack(self.index[i].1);
                self.store.read(off, len, &mut old)?;
                let earlier = block::entries(&old);
                entries = match keep {
                    Keep::First => block::merge(&earlier, &entries),
                    Keep::Last => block::merge(&entries, &earlier),
                };
                self.dead += len as u64;
            }
            let start = bytes.len();
            block::encode(&entries, &mut bytes);
            placed.push((key, start, bytes.len() - start, at));
        }
        let base = self.append(&bytes)?;
        let mut sorted = true;
        for (key, start, len, at) in placed {
            let loc = pack(base + start as u64, len);
            match at {
                Some(i) => self.index[i].1 = loc,
                None => {
                    sorted &= self.index.last().is_none_or(|l| l.0 < key);
                    self.index.push((key, loc));
                }
            }
        }
        if !sorted {
            // Two sorted runs: a merge.
            self.index.sort_by_key(|e| e.0);
        }
        let live = self.store.len() - self.dead;
        if self.dead > live.max(self.limits.held_max as u64 / 4) {
            self.compact()?;
        }
        Ok(())
    }

    /// Appends encoded blocks to the store, moving it to a file past `held_max`; where they
    /// start.
    fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let base = self.store.len();
        if (base + bytes.len() as u64) >> (64 - LEN_BITS) != 0 {
            return Err(io::Error::other("launch lookup past 1 TiB"));
        }
        match &mut self.store {
            Store::Mem(held) => {
                held.extend_from_slice(bytes);
                if held.len() > self.limits.held_max {
                    let file = match &self.dir {
                        Some(d) => {
                            std::fs::create_dir_all(d)?;
                            tempfile::tempfile_in(d)?
                        }
                        None => tempfile::tempfile()?,
                    };
                    file.write_all_at(held, 0)?;
                    let len = held.len() as u64;
                    self.store = Store::File { file, len };
                }
            }
            Store::File { file, len } => {
                file.write_all_at(bytes, *len)?;
                *len += bytes.len() as u64;
            }
        }
        Ok(base)
    }

    /// Copies the live blocks to a new store, in block order, without the dead copies.
    fn compact(&mut self) -> io::Result<()> {
        let old = std::mem::replace(&mut self.store, Store::Mem(Vec::new()));
        let index = std::mem::take(&mut self.index);
        self.dead = 0;
        let (mut bytes, mut block, mut moved) = (Vec::new(), Vec::new(), Vec::new());
        for (n, &(key, loc)) in index.iter().enumerate() {
            let (off, len) = unpack(loc);
            old.read(off, len, &mut block)?;
            moved.push((key, bytes.len()));
            bytes.extend_from_slice(&block);
            if bytes.len() >= 1 << 20 || n + 1 == index.len() {
                let base = self.append(&bytes)?;
                for (i, &(key, start)) in moved.iter().enumerate() {
                    let end = moved.get(i + 1).map_or(bytes.len(), |m| m.1);
                    self.index
                        .push((key, pack(base + start as u64, end - start)));
                }
                bytes.clear();
                moved.clear();
            }
        }
        Ok(())
    }

    /// Heap bytes held: the index and, while there is no file, the blocks (each thread's
    /// cache of blocks read from the file is not counted: at most `CACHE_BLOCKS` blocks).
    pub(crate) fn heap_bytes(&self) -> usize {
        let held = match &self.store {
            Store::Mem(b) => b.capacity(),
            Store::File { .. } => 0,
        };
        self.index.capacity() * std::mem::size_of::<(i64, u64)>() + held
    }

    /// Blocks, bytes in the file (0 while in memory), questions answered from the file and
    /// blocks read for them (both approximate: threads add their counts every 1,024).
    pub(crate) fn stats(&self) -> (usize, u64, u64, u64) {
        let file = match &self.store {
            Store::Mem(_) => 0,
            Store::File { len, .. } => *len,
        };
        let asked = self.asked.load(Ordering::Relaxed);
        (
            self.index.len(),
            file,
            asked,
            self.reads.load(Ordering::Relaxed),
        )
    }
}

impl Store {
    fn len(&self) -> u64 {
        match self {
            Store::Mem(b) => b.len() as u64,
            Store::File { len, .. } => *len,
        }
    }

    /// The `len` bytes at `off` into `buf`.
    fn read(&self, off: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.clear();
        match self {
            Store::Mem(b) => buf.extend_from_slice(&b[off as usize..off as usize + len]),
            Store::File { file, .. } => {
                buf.resize(len, 0);
                file.read_exact_at(buf, off)?;
            }
        }
        Ok(())
    }
}

fn pack(off: u64, len: usize) -> u64 {
    debug_assert!(len < 1 << LEN_BITS);
    off << LEN_BITS | len as u64
}

fn unpack(loc: u64) -> (u64, usize) {
    (loc >> LEN_BITS, (loc & ((1 << LEN_BITS) - 1)) as usize)
}

thread_local! {
    static CACHE: RefCell<BlockCache> = const { RefCell::new(BlockCache::new()) };
}

/// A thread's last blocks read from lookups' files, most recent first.
struct BlockCache {
    /// (lookup id, block number, the block).
    blocks: Vec<(u64, i64, Box<[u8]>)>,
    /// Questions not yet added to their lookup's count, and that lookup.
    asked: u64,
    asked_of: u64,
}

impl BlockCache {
    const fn new() -> BlockCache {
        BlockCache {
            blocks: Vec::new(),
            asked: 0,
            asked_of: 0,
        }
    }

    fn get(&mut self, steps: &LaunchSteps, file: &File, key: i64, off: u16) -> Option<Option<i64>> {
        if self.asked_of != steps.id {
            (self.asked, self.asked_of) = (0, steps.id);
        }
        self.asked += 1;
        if self.asked == 1024 {
            steps.asked.fetch_add(self.asked, Ordering::Relaxed);
            self.asked = 0;
        }
        let hit = self
            .blocks
            .iter()
            .position(|b| b.0 == steps.id && b.1 == key);
        let i = match hit {
            Some(i) => i,
            None => {
                let (at, len) = steps.find(key)?;
                let mut b = vec![0; len].into_boxed_slice();
                steps.reads.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = file.read_exact_at(&mut b, at) {
                    if let Ok(mut slot) = steps.read_error.lock() {
                        slot.get_or_insert(e);
                    }
                    return None;
                }
                self.blocks.push((steps.id, key, b));
                let last = self.blocks.len() - 1;
                if last >= steps.limits.cache_blocks {
                    // The least recent goes.
                    self.blocks.swap_remove(last - 1);
                    last - 1
                } else {
                    last
                }
            }
        };
        // Most recent first.
        self.blocks[..=i].rotate_right(1);
        block::get(&self.blocks[0].2, off)
    }
}

#[cfg(test)]
mod tests;
