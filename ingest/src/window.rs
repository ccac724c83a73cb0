//! The bytes a parser has at hand: a growing buffer of read (or inflated) input, or a sliding
//! view of a memory-mapped file.
//!
//! Why map: a plain trace read with `read(2)` is copied twice before the parser sees it
//! (kernel to a chunk buffer, chunk to the window); that was a sixth of single-core ingest
//! time. A mapping hands the parser the page cache itself. Pages behind the parser are given
//! back with `MADV_DONTNEED` (the page cache keeps them), so resident memory stays a few
//! windows whatever the file size. Compressed inputs, and files too small to bother, are read.
//!
//! Where a file has several workers, the pages are given back while the next window is
//! parsed (`parse_ahead`), not when the window is consumed: `madvise` takes ~1.5 ms per
//! 16 MiB on this project's 2-core VM, and between windows the file's other workers wait
//! for it (~90 ms of a 960 MB file's walk).

use std::cell::Cell;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use memmap2::{Advice, Mmap, UncheckedAdvice};

use crate::source::{sniff_file, Chunks, Compression, Hasher, CHUNK};

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
        /// What the view grows to next (`parse_ahead` hashed it already), or `end`.
        ahead: usize,
        /// Pages before this were given back; those up to `due` are to be, with the next
        /// window's parse (`parse_ahead`).
        released: usize,
        due: usize,
        /// Whether the reader parses through `parse_ahead` (the walk does; the rocprof JSON
        /// stream only consumes): otherwise nothing would ever give `due`'s pages back.
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
                    released: 0,
                    due: 0,
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
                progress,
                hash,
                ..
            } => {
                debug_assert_eq!(*ahead, *end, "parse_ahead's chunk not yet appended");
                let next = (*end + mapped_step()).min(map.len());
                if next == *end {
                    return Ok(false);
                }
                progress.fetch_add((next - *end) as u64, Ordering::Relaxed);
                if let Some(h) = hash {
                    h.lock()
                        .expect("hasher not poisoned")
                        .update(&map[*end..next]);
                }
                (*end, *ahead) = (next, next);
                Ok(true)
            }
        }
    }

    /// Parses the window with `f` while the next chunk is read ahead (on another worker, for
    /// read inputs; hashed, for mapped ones); `append_ahead` then adds it. The flag: whether there was more input.
    pub(crate) fn parse_ahead<R: Send>(
        &mut self,
        f: impl FnOnce(&[u8]) -> R + Send,
    ) -> (R, io::Result<bool>) {
        if let Window::Mapped {
            map,
            start,
            end,
            ahead,
            released,
            due,
            read_ahead,
            hash,
            ..
        } = self
        {
            *read_ahead = true;
            // The hasher reads the next chunk (faulting its pages in), and the pages
            // consumed are given back, on another worker while this one is parsed: done
            // between windows, both were serial time.
            *ahead = (*end + mapped_step()).min(map.len());
            let give_back = *released..*due;
            *released = *due;
            let (map, view) = (&*map, &map[*start..*end]);
            let next = &map[*end..*ahead];
            let (parsed, ()) = rayon::join(
                || f(view),
                || {
                    release(map, give_back);
                    if let Some(h) = hash {
                        h.lock().expect("hasher not poisoned").update(next);
                    }
                },
            );
            return (parsed, Ok(!next.is_empty()));
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
            || f(buf),
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
            // The chunk `parse_ahead` hashed.
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

    /// Forgets the first `n` bytes of the window.
    pub(crate) fn consume(&mut self, n: usize) {
        match self {
            Window::Read { buf, .. } => {
                buf.drain(..n);
            }
            Window::Mapped {
                map,
                start,
                released,
                due,
                read_ahead,
                ..
            } => {
                *start += n;
                let page = page_size();
                let upto = *start / page * page;
                if upto >= *released + RELEASE_STEP {
                    *due = upto;
                    if !(*read_ahead && release_aside()) {
                        release(map, *released..*due);
                        *released = *due;
                    }
                }
            }
        }
    }
}

/// Whether the consumed pages are given back beside the next window's parse (for a reader
/// that parses through `parse_ahead`): only when this file has more than one worker of the
/// pool. A file read on one worker (16 files on 16)
/// would give them back only after that parse (no idle worker takes the other half of the
/// join), so each file would hold a window more: ~60 MB more at the peak for 16 files.
fn release_aside() -> bool {
    rayon::current_num_threads() / files_at_once() > 1
}

/// Gives the pages of `range` (page-aligned, before the window) back to the page cache.
fn release(map: &Mmap, range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    // SAFETY: the map is a read-only file mapping, so dropped pages are read back from the
    // file if touched again; nothing is lost, and the window (`start..`, which `due` never
    // passes) is never released.
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

/// How far a mapped window grows next: `CHUNK` times the workers per file being read, over
/// two (at least `CHUNK`). A window is cut into two runs of events per worker the file has
/// to itself (`walk::runs_for`), and each run has costs of its own (its strings interned and
/// its names classified afresh, its batch re-mapped by the spill thread, a wait for the
/// slowest run): with 4 MiB windows on 16 workers the runs were 128 KiB, an eighth of those
/// on two, and one file on 16 cores ran slower than on 8 (docs/PERFORMANCE.md, issue 33).
/// Growing the window keeps the runs at about 1 MiB. The mapped pages a window holds count as
/// resident memory, so the window grows only with the workers a file has to itself: 32 MiB
/// for one file on 16 workers, 4 MiB again when 16 files are read at once.
fn mapped_step() -> usize {
    step_for(rayon::current_num_threads(), files_at_once())
}

fn step_for(threads: usize, files: usize) -> usize {
    CHUNK * (threads / (2 * files)).max(1)
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

    /// About 1 MiB runs of events per worker: the window grows with the workers a file has
    /// to itself, never below `CHUNK`.
    #[test]
    fn mapped_windows_grow_with_the_workers_of_a_file() {
        assert_eq!(step_for(1, 1), CHUNK);
        assert_eq!(step_for(2, 1), CHUNK);
        assert_eq!(step_for(8, 1), 4 * CHUNK);
        assert_eq!(step_for(16, 1), 8 * CHUNK);
        assert_eq!(step_for(16, 2), 4 * CHUNK);
        assert_eq!(step_for(16, 16), CHUNK);
        assert_eq!(step_for(2, 40), CHUNK);
    }

    /// Pages consumed are given back: at once by a reader that only consumes (the rocprof
    /// JSON stream: deferred to a `parse_ahead` that never came, a 804 MB capture held all
    /// of it, 1 GB at the peak), beside the next parse by one that parses ahead.
    #[test]
    fn consumed_pages_are_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, vec![b' '; 3 * RELEASE_STEP]).unwrap();
        let pending = |w: &Window| match w {
            Window::Mapped { released, due, .. } => (*released, *due),
            Window::Read { .. } => unreachable!("a mapped file"),
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            // Consumed only.
            let mut w = Window::open(&p, Arc::new(AtomicU64::new(0)), None).unwrap();
            while w.fill().unwrap() {}
            w.consume(RELEASE_STEP + 1);
            let (released, due) = pending(&w);
            assert_eq!((released, due), (RELEASE_STEP, RELEASE_STEP));
            // Parsed ahead on two workers: given back with the next parse.
            let mut w = Window::open(&p, Arc::new(AtomicU64::new(0)), None).unwrap();
            let (_, more) = w.parse_ahead(|b| b.len());
            w.append_ahead(more.unwrap()).unwrap();
            while w.fill().unwrap() {}
            w.consume(RELEASE_STEP + 1);
            assert_eq!(pending(&w), (0, RELEASE_STEP));
            let _ = w.parse_ahead(|b| b.len());
            assert_eq!(pending(&w), (RELEASE_STEP, RELEASE_STEP));
        });
    }
}
