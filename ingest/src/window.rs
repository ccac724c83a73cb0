//! The bytes a parser has at hand: a growing buffer of read (or inflated) input, or a sliding
//! view of a memory-mapped file.
//!
//! Why map: a plain trace read with `read(2)` is copied twice before the parser sees it
//! (kernel to a chunk buffer, chunk to the window); that was a sixth of single-core ingest
//! time. A mapping hands the parser the page cache itself. Pages behind the parser are given
//! back with `MADV_DONTNEED` (the page cache keeps them), so resident memory stays a few
//! windows whatever the file size. Compressed inputs, and files too small to bother, are read.
//!
//! A reader that parses through `parse_ahead` (the walk) hashes the view's bytes and gives
//! their pages back behind its runs, as each one finishes (`behind`); one that only consumes
//! (the rocprof JSON stream) hashes each chunk as the view grows and gives pages back as it
//! consumes them.

use std::cell::Cell;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{Advice, Mmap, UncheckedAdvice};

use crate::source::{sniff_file, Chunks, Compression, Hasher, CHUNK};

mod behind;
pub(crate) use behind::Behind;

/// Plain files at least this large are mapped.
pub(crate) const MAP_MIN: u64 = 1 << 20;

/// Where parsed-over pages are released, at most this often (one `madvise` per step).
const RELEASE_STEP: usize = 4 * CHUNK;

pub(crate) enum Window {
    Read {
        chunks: Chunks,
        buf: Vec<u8>,
        /// The read-ahead chunk, filled while the window is parsed.
        spare: Vec<u8>,
        eof: bool,
    },
    Mapped {
        map: Mmap,
        /// The view is `map[start..end]`.
        start: usize,
        end: usize,
        /// What the view grows to next (`parse_ahead` set it), or `end`.
        ahead: usize,
        /// Bytes before this were hashed.
        hashed: usize,
        /// Pages before this were given back.
        released: usize,
        /// Whether the reader parses through `parse_ahead` (the walk does; the rocprof JSON
        /// stream only consumes): its view grows by `mapped_step`.
        read_ahead: bool,
        progress: Arc<AtomicU64>,
        hash: Option<Hasher>,
    },
}

impl Window {
    /// Opens `path`; `progress` counts on-disk bytes as they enter the window, `hash` sees them.
    pub(crate) fn open(
        path: &Path,
        progress: Arc<AtomicU64>,
        hash: Option<Hasher>,
    ) -> io::Result<Window> {
        Window::open_as(path, progress, hash, true)
    }

    /// Like `open`; `may_map: false` reads even a large plain file (tests compare the two).
    pub(crate) fn open_as(
        path: &Path,
        progress: Arc<AtomicU64>,
        hash: Option<Hasher>,
        may_map: bool,
    ) -> io::Result<Window> {
        let (f, compression) = sniff_file(path)?;
        let meta = f.metadata()?;
        let plain = compression == Compression::None;
        if may_map && plain && meta.is_file() && meta.len() >= MAP_MIN {
            // SAFETY: the map is read-only; a file truncated by another process while we read
            // it would fault (SIGBUS), the risk every mmap-reading tool (ripgrep…) accepts
            // for inputs that are not being written.
            if let Ok(map) = unsafe { Mmap::map(&f) } {
                let _ = map.advise(Advice::Sequential);
                let mut w = Window::Mapped {
                    map,
                    start: 0,
                    end: 0,
                    ahead: 0,
                    hashed: 0,
                    released: 0,
                    read_ahead: false,
                    progress,
                    hash,
                };
                w.fill()?;
                return Ok(w);
            }
        }
        Ok(Window::Read {
            chunks: Chunks::new(f, compression, progress, hash)?,
            buf: Vec::new(),
            spare: Vec::new(),
            eof: false,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Window::Read { buf, .. } => buf,
            Window::Mapped {
                map, start, end, ..
            } => &map[*start..*end],
        }
    }

    /// Extends the window by the next chunk; false at the end of the input.
    pub(crate) fn fill(&mut self) -> io::Result<bool> {
        match self {
            Window::Read {
                chunks, buf, eof, ..
            } => {
                if *eof {
                    return Ok(false);
                }
                let more = chunks.next_into(buf)?;
                *eof = !more;
                Ok(more)
            }
            Window::Mapped {
                map,
                end,
                ahead,
                hashed,
                read_ahead,
                progress,
                hash,
                ..
            } => {
                debug_assert_eq!(*ahead, *end, "parse_ahead's chunk not yet appended");
                let next = (*end + mapped_step(*read_ahead)).min(map.len());
                // Also what `parse_ahead` marked and no run hashed (a view that ended the
                // events before its end).
                hash_to(map, hash.as_ref(), hashed, next);
                if next == *end {
                    return Ok(false);
                }
                progress.fetch_add((next - *end) as u64, Ordering::Relaxed);
                (*end, *ahead) = (next, next);
                Ok(true)
            }
        }
    }

    /// Parses the window with `f` while the next chunk is read ahead (on another worker, for
    /// read inputs); `append_ahead` then adds it. The flag: whether there was more input.
    /// A mapped window's next chunk is only marked: `f`'s runs report to the `Behind` they
    /// are given, which hashes the view and gives its pages back behind them; what the last
    /// runs leave unhashed is hashed beside the next window's parse (`Behind::catch_up`), or
    /// by `fill` and `hash_rest` at the end.
    pub(crate) fn parse_ahead<R: Send>(
        &mut self,
        f: impl FnOnce(&[u8], &Behind) -> R + Send,
    ) -> (R, io::Result<bool>) {
        if let Window::Mapped {
            map,
            start,
            end,
            ahead,
            hashed,
            released,
            read_ahead,
            hash,
            ..
        } = self
        {
            *read_ahead = true;
            *ahead = (*end + mapped_step(true)).min(map.len());
            let behind = Behind::mapped(map, *start, hash.as_ref(), (*hashed, *released));
            let view = &map[*start..*end];
            let (parsed, ()) = rayon::join(|| f(view, &behind), || behind.catch_up());
            (*hashed, *released) = behind.reached();
            return (parsed, Ok(*ahead > *end));
        }
        let Window::Read {
            chunks,
            buf,
            spare,
            eof,
        } = self
        else {
            unreachable!("mapped windows returned above")
        };
        spare.clear();
        let (buf, eof) = (&*buf, *eof);
        rayon::join(
            || f(buf, &Behind::none()),
            || {
                if eof {
                    Ok(false)
                } else {
                    chunks.next_into(spare)
                }
            },
        )
    }

    /// Adds what `parse_ahead` read (`more`: its flag).
    pub(crate) fn append_ahead(&mut self, more: bool) -> io::Result<()> {
        match self {
            Window::Read {
                buf, spare, eof, ..
            } => {
                buf.extend_from_slice(spare);
                *eof |= !more;
                Ok(())
            }
            // The chunk `parse_ahead` marked.
            Window::Mapped {
                end,
                ahead,
                progress,
                ..
            } => {
                progress.fetch_add((*ahead - *end) as u64, Ordering::Relaxed);
                *end = *ahead;
                Ok(())
            }
        }
    }

    /// Reads the rest of the input, for its hash only: for a reader done before the end of
    /// the file (a trace in array form), so that its content hash is still the whole file's.
    pub(crate) fn hash_rest(&mut self) -> io::Result<()> {
        match self {
            Window::Mapped {
                map, hashed, hash, ..
            } => {
                hash_to(map, hash.as_ref(), hashed, map.len());
                Ok(())
            }
            Window::Read {
                chunks, spare, eof, ..
            } => {
                while !*eof {
                    spare.clear();
                    *eof = !chunks.next_into(spare)?;
                }
                Ok(())
            }
        }
    }

    /// Forgets the first `n` bytes of the window.
    pub(crate) fn consume(&mut self, n: usize) {
        match self {
            Window::Read { buf, .. } => {
                buf.drain(..n);
            }
            Window::Mapped {
                map,
                start,
                hashed,
                released,
                ..
            } => {
                *start += n;
                let page = page_size();
                // Not past what is hashed: the hash would fault those pages in again.
                let upto = (*start).min(*hashed) / page * page;
                if upto >= *released + RELEASE_STEP {
                    release(map, *released..upto);
                    *released = upto;
                }
            }
        }
    }
}

/// Hashes `map[*hashed..to]` (if any), in order.
fn hash_to(map: &Mmap, hash: Option<&Hasher>, hashed: &mut usize, to: usize) {
    if to <= *hashed {
        return;
    }
    if let Some(h) = hash {
        h.lock()
            .expect("hasher not poisoned")
            .update(&map[*hashed..to]);
    }
    *hashed = to;
}

/// Gives the pages of `range` (page-aligned, before the window) back to the page cache.
fn release(map: &Mmap, range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    // SAFETY: the map is a read-only file mapping, so dropped pages are read back from the
    // file if touched again (a run parsed again, the view's tail): nothing is lost, whoever
    // reads them meanwhile.
    let _ =
        unsafe { map.unchecked_advise_range(UncheckedAdvice::DontNeed, range.start, range.len()) };
}

thread_local! {
    /// How many files the ingest this thread reads for reads at once (`reading_files`).
    static FILES_AT_ONCE: Cell<usize> = const { Cell::new(1) };
}

/// Runs `f` (the reading of one file) with `files` as the number of files its ingest reads
/// at once, which sizes its windows (`mapped_step`) and how many runs each is cut into
/// (`walk::runs_for`).
///
/// Why a fixed number of the ingest, not the files being read at this moment: the batches
/// the walk hands on, and so where the sinks flush and every byte of the Parquet files,
/// follow from the runs. Counted as they came and went, 16 files wrote other bytes from run
/// to run, and tests ingesting side by side other bytes than alone. Set on the thread that
/// reads the file (the walk reads it there), and put back after: a worker that takes up
/// another ingest's file while it waits restores this one's.
pub(crate) fn reading_files<R>(files: usize, f: impl FnOnce() -> R) -> R {
    let before = FILES_AT_ONCE.replace(files.max(1));
    let out = f();
    FILES_AT_ONCE.set(before);
    out
}

/// See `reading_files`.
pub(crate) fn files_at_once() -> usize {
    FILES_AT_ONCE.get()
}

/// How far a mapped window grows next (`ahead`: for a reader that parses through
/// `parse_ahead`; one that only consumes grows it by `CHUNK` per two workers of the file).
///
/// A file read by one worker of its own: `CHUNK`. A file with more: `WINDOW_MAX`, or less
/// when many files are read at once (all their windows together within `WINDOWS_TOTAL`),
/// but never less than `CHUNK` per two of its workers. The walk cuts a window into runs of
/// about `walk::RUN` bytes, two per worker at least (`walk::runs_for`).
///
/// Why: the workers of a file wait for its slowest run at the end of every window, and the
/// hash of the next chunk is one more task beside them. With 4 MiB windows cut into four runs
/// on two workers, about 11 % of the two cores sat idle while the 914 MB benchmark file was
/// walked; 32 MiB windows of sixteen runs left 5 %, and the rayon workers spun less between
/// windows (docs/PERFORMANCE.md, issue 33). Each run has costs of its own (its strings
/// interned and its names classified afresh, its batch re-mapped by the spill thread), so
/// runs stay at 1 MiB or more: with 4 MiB windows on 16 workers they were 128 KiB, and one
/// file on 16 cores ran slower than on 8. A window's pages are given back behind its runs
/// (`behind`), but runs that end before an earlier one hold theirs until it ends, up to a
/// whole window: hence the bound for many files, and `CHUNK` again when 16 files are read
/// on 16 workers (each file's runs are then taken by any worker that is idle).
fn mapped_step(ahead: bool) -> usize {
    let (threads, files) = (rayon::current_num_threads(), files_at_once());
    if ahead {
        step_for(threads, files)
    } else {
        CHUNK * (threads / files.max(1) / 2).max(1)
    }
}

/// The largest mapped window of a file with more than one worker (see `mapped_step`).
const WINDOW_MAX: usize = 32 << 20;

/// What the windows of all files read at once hold together (see `mapped_step`).
const WINDOWS_TOTAL: usize = 128 << 20;

fn step_for(threads: usize, files: usize) -> usize {
    let files = files.max(1);
    let workers = threads / files;
    if workers < 2 {
        return CHUNK;
    }
    // At least two workers, so at least `CHUNK`.
    (WINDOWS_TOTAL / files)
        .min(WINDOW_MAX)
        .max(CHUNK * workers / 2)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One chunk for a file with one worker; 32 MiB for a file with more, less when many
    /// files are read at once, and at least a chunk per two workers.
    #[test]
    fn mapped_windows_grow_with_the_workers_of_a_file() {
        assert_eq!(step_for(1, 1), CHUNK);
        assert_eq!(step_for(2, 1), WINDOW_MAX);
        assert_eq!(step_for(8, 1), WINDOW_MAX);
        assert_eq!(step_for(16, 1), WINDOW_MAX);
        assert_eq!(step_for(64, 1), 32 * CHUNK);
        assert_eq!(step_for(16, 2), WINDOW_MAX);
        assert_eq!(step_for(16, 8), 16 << 20);
        assert_eq!(step_for(64, 32), CHUNK);
        assert_eq!(step_for(16, 16), CHUNK);
        assert_eq!(step_for(2, 40), CHUNK);
        assert_eq!(step_for(4, 0), WINDOW_MAX);
    }

    /// Pages consumed are given back at once by a reader that only consumes (the rocprof
    /// JSON stream: deferred to a `parse_ahead` that never came, a 804 MB capture held all
    /// of it, 1 GB at the peak); behind the runs, in order, by one that parses ahead, and
    /// every byte is hashed once, in order.
    #[test]
    fn consumed_pages_are_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        let bytes: Vec<u8> = (0..3 * RELEASE_STEP).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let reached = |w: &Window| match w {
            Window::Mapped {
                hashed, released, ..
            } => (*hashed, *released),
            Window::Read { .. } => unreachable!("a mapped file"),
        };
        // One worker: the join's other half (`Behind::catch_up`) runs after the parse, so
        // what each run hashes is known.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            // Consumed only.
            let mut w = Window::open(&p, Arc::new(AtomicU64::new(0)), None).unwrap();
            while w.fill().unwrap() {}
            w.consume(RELEASE_STEP + 1);
            assert_eq!(reached(&w), (bytes.len(), RELEASE_STEP));
            // Parsed in three runs, the last ending first: nothing is hashed past the first
            // chunk until the first run ended; the last run to end leaves its bytes and those
            // after the first run (not yet ended then) to be hashed later, in order.
            let hash: Hasher = Default::default();
            let mut w = Window::open(&p, Arc::new(AtomicU64::new(0)), Some(hash.clone())).unwrap();
            let (_, more) = w.parse_ahead(|b, _| b.len());
            w.append_ahead(more.unwrap()).unwrap();
            assert_eq!(reached(&w), (CHUNK, 0));
            let mut a = 0;
            let (_, more) = w.parse_ahead(|v, behind| {
                let b;
                (a, b) = (2 * v.len() / 3 + 7, 5 * v.len() / 6 + 9);
                behind.runs(&[0, a, b], v.len());
                behind.finished(2, v.len() - 5);
                let so_far = hash.lock().unwrap().digest128();
                assert_eq!(so_far, xxhash_rust::xxh3::xxh3_128(&bytes[..CHUNK]));
                behind.finished(0, a + 3);
                behind.finished(1, b + 1);
                v.len()
            });
            // Run 0's pages are fewer than a release step: kept.
            assert_eq!(reached(&w), (a, 0));
            w.append_ahead(more.unwrap()).unwrap();
            while w.fill().unwrap() {}
            let whole = xxhash_rust::xxh3::xxh3_128(&bytes);
            assert_eq!(hash.lock().unwrap().digest128(), whole);
        });
    }
}
