//! A mapped window's bytes hashed, and their pages given back, in file order as the runs that
//! parse them finish.
//!
//! Why behind the parse: the content hash used to read each chunk of the mapping ahead of the
//! parse, on another worker (faulting its pages in), and the pages parsed were given back
//! between windows. So a window was resident twice over (the one parsed, the one hashed) and
//! its runs could not outgrow a few MiB without the peak memory growing with them (32 MiB
//! windows: +30–45 MB at the step limit). Behind the runs, the hash reads pages the parse has
//! just faulted in, and pages are given back in steps of `RELEASE_STEP` as soon as every run
//! before them is done: the resident part of the file is a step and the runs being parsed,
//! whatever the window's size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use memmap2::Mmap;

use super::{hash_to, page_size, release, RELEASE_STEP};
use crate::source::Hasher;

/// What the walk's runs report (`Window::parse_ahead`); does nothing for a read window.
pub(crate) struct Behind<'a> {
    mapped: Option<Mapped<'a>>,
}

struct Mapped<'a> {
    /// The whole mapping, and where the parsed view starts in it.
    map: &'a Mmap,
    at: usize,
    hash: Option<&'a Hasher>,
    runs: OnceLock<Runs>,
    /// Runs ended.
    ended: AtomicUsize,
    /// Taken by one worker at a time, the others going on with their runs (`try_lock`).
    order: Mutex<Order>,
}

/// Map offsets.
struct Runs {
    /// Where each run's bytes end: the next run's start, the view's end for the last.
    ends: Vec<usize>,
    /// Where each ended run's parse ended; `NOT_DONE` while it runs.
    done: Vec<AtomicUsize>,
}

const NOT_DONE: usize = usize::MAX;

struct Order {
    /// The first run not yet hashed.
    next: usize,
    hashed: usize,
    released: usize,
}

impl<'a> Behind<'a> {
    /// For a read window: nothing to hash or give back here.
    pub(super) fn none() -> Behind<'a> {
        Behind { mapped: None }
    }

    /// For the view `map[at..]`, hashed up to `hashed` and given back up to `released`.
    pub(super) fn mapped(
        map: &'a Mmap,
        at: usize,
        hash: Option<&'a Hasher>,
        (hashed, released): (usize, usize),
    ) -> Behind<'a> {
        let order = Order {
            next: 0,
            hashed,
            released,
        };
        Behind {
            mapped: Some(Mapped {
                map,
                at,
                hash,
                runs: OnceLock::new(),
                ended: AtomicUsize::new(0),
                order: Mutex::new(order),
            }),
        }
    }

    /// The view (of `len` bytes) is parsed in runs starting at `starts` (view offsets,
    /// rising); each run's bytes reach the next one's start, the last one's the view's end.
    /// Called once, before any run ends.
    pub(crate) fn runs(&self, starts: &[usize], len: usize) {
        let Some(m) = &self.mapped else { return };
        let ends = starts.iter().skip(1).chain(std::iter::once(&len));
        let ends: Vec<usize> = ends.map(|e| m.at + e).collect();
        let done = ends.iter().map(|_| AtomicUsize::new(NOT_DONE)).collect();
        assert!(
            m.runs.set(Runs { ends, done }).is_ok(),
            "a view's runs are set once"
        );
    }

    /// Run `i` ended, its last complete event ending at `parsed` (a view offset). The bytes
    /// of every run ended before it are hashed, in order, and their pages given back up to
    /// the next run's start, once they make `RELEASE_STEP`; by this worker unless another
    /// one is at it: that one looks again once done, so no run that ended meanwhile is left
    /// behind, and no worker waits for another's hashing. The last run to end hashes
    /// nothing (`catch_up`).
    pub(crate) fn finished(&self, i: usize, parsed: usize) {
        let Some(m) = &self.mapped else { return };
        let runs = m.runs.get().expect("`runs` before any run ends");
        runs.done[i].store(m.at + parsed, Ordering::Release);
        if m.ended.fetch_add(1, Ordering::AcqRel) + 1 == runs.done.len() {
            // The last run: what is left is hashed beside the next window's parse.
            return;
        }
        while let Ok(mut o) = m.order.try_lock() {
            m.advance(&mut o);
            let next = o.next;
            drop(o);
            let ended = runs
                .done
                .get(next)
                .is_some_and(|d| d.load(Ordering::Acquire) != NOT_DONE);
            if !ended || m.ended.load(Ordering::Acquire) == runs.done.len() {
                return;
            }
        }
    }

    /// Beside the window's parse: hashes what the last window's runs left (they stop once
    /// all of them ended, so that no window ends waiting for a hash), then the runs of this
    /// one that ended meanwhile.
    pub(super) fn catch_up(&self) {
        let Some(m) = &self.mapped else { return };
        let mut o = m.order.lock().expect("order not poisoned");
        hash_to(m.map, m.hash, &mut o.hashed, m.at);
        m.advance(&mut o);
    }

    /// (hashed, released) up to, map offsets, once every run ended.
    pub(super) fn reached(self) -> (usize, usize) {
        match self.mapped {
            Some(m) => {
                let o = m.order.into_inner().expect("order not poisoned");
                (o.hashed, o.released)
            }
            None => (0, 0),
        }
    }
}

impl Mapped<'_> {
    /// Hashes and gives back every run that is next and has ended, until all of them ended.
    fn advance(&self, o: &mut Order) {
        // Not before `runs` (`catch_up` may come first): nothing ended yet.
        let Some(runs) = self.runs.get() else { return };
        let page = page_size();
        while let Some(d) = runs.done.get(o.next) {
            if self.ended.load(Ordering::Acquire) == runs.done.len() {
                return;
            }
            let parsed = d.load(Ordering::Acquire);
            if parsed == NOT_DONE {
                return;
            }
            let end = runs.ends[o.next];
            hash_to(self.map, self.hash, &mut o.hashed, end);
            // In steps, as `Window::consume` gives pages back: each `madvise` interrupts
            // every core the process runs on to flush its page tables.
            let give = end.min(parsed) / page * page;
            if give >= o.released + RELEASE_STEP {
                release(self.map, o.released..give);
                o.released = give;
            }
            o.next += 1;
        }
    }
}
