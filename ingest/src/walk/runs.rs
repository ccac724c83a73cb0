//! A window's runs: each parses events from a guessed boundary, and their parts are taken
//! in file order as they end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use rayon::prelude::*;

use super::{runs_for, Visitor, SUB_WINDOW};
use crate::error::ParseErr;
use crate::json::{Cursor, JsonError};
use crate::window::{files_at_once, Behind};

/// How a run of events ended.
enum End {
    /// Reached the next worker's range: `stop` is the first event start at or past it.
    Limit,
    /// The buffer ended inside an event (or between events).
    Incomplete,
    /// The array's `]`, and the position after it.
    Closed(usize),
    Error(ParseErr),
}

struct Chain<P> {
    part: P,
    events: u64,
    /// Just after the last complete event.
    last: usize,
    stop: usize,
    end: End,
}

/// Parses events from `from` (a known event boundary) until one starts at or past `limit`.
fn chain<V: Visitor>(v: &V, buf: &[u8], from: usize, limit: usize, base: u64) -> Chain<V::Part> {
    let mut ch = Chain {
        part: v.part(limit.min(buf.len()).saturating_sub(from)),
        events: 0,
        last: from,
        stop: from,
        end: End::Incomplete,
    };
    let mut c = Cursor::at(buf, from);
    loop {
        c.ws();
        if buf.get(c.i) == Some(&b',') {
            c.i += 1;
            c.ws();
        }
        let Some(&b) = buf.get(c.i) else { return ch };
        if b == b']' {
            ch.end = End::Closed(c.i + 1);
            return ch;
        }
        let start = c.i;
        if start >= limit {
            ch.stop = start;
            ch.end = End::Limit;
            return ch;
        }
        if b != b'{' {
            ch.end = End::Error(ParseErr::new(
                base + start as u64,
                "expected an event object in traceEvents",
            ));
            return ch;
        }
        match v.event(&mut c, &mut ch.part, base + start as u64) {
            Ok(()) => {
                ch.events += 1;
                ch.last = c.i;
            }
            Err(JsonError::Incomplete) => return ch,
            Err(JsonError::Syntax { offset, msg }) => {
                ch.end = End::Error(ParseErr::new(base + offset as u64, msg));
                return ch;
            }
        }
    }
}

/// Likely event starts to split `buf[pos..]` at: a `{` after `},` (pretty or minified).
/// A guess may be wrong (the bytes could sit inside a string); `parse_window` checks each
/// against the previous worker's real stop and re-parses when they differ.
fn guesses(buf: &[u8], pos: usize, n: usize) -> Vec<usize> {
    let len = buf.len().saturating_sub(pos);
    let mut out: Vec<usize> = Vec::new();
    for i in 1..n {
        let t = pos + i * len / n;
        let end = (t + (64 << 10)).min(buf.len());
        let mut j = t;
        while let Some(k) = memchr::memchr(b'{', &buf[j..end]) {
            let q = j + k;
            let before = buf[pos..q]
                .iter()
                .rev()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .take(2);
            let prev: Vec<u8> = before.collect();
            if prev == [b',', b'}'] && out.last().is_none_or(|&l| q > l) {
                out.push(q);
                break;
            }
            j = q + 1;
        }
    }
    out
}

/// Parses the complete events of `buf[pos..]` on all workers, each run reporting to `behind`
/// as it ends. Returns the number of events, the position after `]` if the array closed, and
/// the end of the last complete event.
///
/// The workers take the runs in file order, and each run's part is taken (`Visitor::take`)
/// as soon as every run before it has been, by the worker that ended the run that made it
/// next; a worker waits before starting a run more than `AHEAD` runs past the first one not
/// yet taken. So a window's parts are never all held at once, and when `take` waits (its
/// channel full: the writer behind) the parse waits too: with 32 MiB windows, parts held
/// until the window ended added 30–40 MB at the step limit (docs/PERFORMANCE.md, issue 33).
pub(super) fn parse_window<V: Visitor>(
    v: &V,
    buf: &[u8],
    pos: usize,
    base: u64,
    behind: &Behind,
) -> Parsed {
    let runs = if buf.len() - pos < 2 * SUB_WINDOW {
        1
    } else {
        runs_for(
            buf.len() - pos,
            rayon::current_num_threads(),
            files_at_once(),
        )
    };
    let g = guesses(buf, pos, runs);
    let starts: Vec<usize> = std::iter::once(pos).chain(g.iter().copied()).collect();
    let limits: Vec<usize> = g
        .iter()
        .copied()
        .chain(std::iter::once(usize::MAX))
        .collect();
    behind.runs(&starts, buf.len());
    let workers = rayon::current_num_threads().min(starts.len());
    let order = InOrder {
        v,
        buf,
        base,
        starts: &starts,
        limits: &limits,
        done: starts.iter().map(|_| Mutex::new(None)).collect(),
        taker: Mutex::new(Taker {
            next: 0,
            expected: pos,
            events: 0,
            outcome: None,
        }),
        started: AtomicUsize::new(0),
        taken: Mutex::new(0),
        room: Condvar::new(),
        ahead: AHEAD_PER_WORKER * workers,
    };
    (0..workers).into_par_iter().for_each(|_| {
        while let Some(i) = order.start() {
            let ch = chain(v, buf, starts[i], limits[i], base);
            behind.finished(i, ch.last);
            order.ended(i, ch);
        }
    });
    let mut t = order.taker.lock().expect("taker not poisoned");
    order.take_ready(&mut t);
    t.outcome
        .take()
        .unwrap_or_else(|| unreachable!("the last run has no limit"))
}

/// What a window's parse returns (`parse_window`).
type Parsed = Result<(u64, Option<usize>, usize), ParseErr>;

/// How many runs per worker may be parsed past the first one not yet taken.
const AHEAD_PER_WORKER: usize = 2;

/// The runs of a window, taken in file order as they end.
struct InOrder<'a, V: Visitor> {
    v: &'a V,
    buf: &'a [u8],
    base: u64,
    starts: &'a [usize],
    limits: &'a [usize],
    /// Each run's chain, once it ended and until it is taken.
    done: Vec<Mutex<Option<Chain<V::Part>>>>,
    taker: Mutex<Taker>,
    /// Runs handed to a worker.
    started: AtomicUsize,
    /// Runs taken (`usize::MAX` once the window's parse has its outcome), and a worker
    /// waiting for room to start one.
    taken: Mutex<usize>,
    room: Condvar,
    ahead: usize,
}

struct Taker {
    /// The first run not yet taken, and where it must start (the previous run's stop).
    next: usize,
    expected: usize,
    events: u64,
    /// What the window's parse returns, once a run ended it.
    outcome: Option<Parsed>,
}

impl<V: Visitor> InOrder<'_, V> {
    /// The next run to parse, once it is at most `ahead` runs past the first one not yet
    /// taken; `None` when every run was started or the outcome is known.
    fn start(&self) -> Option<usize> {
        let i = self.started.fetch_add(1, Ordering::Relaxed);
        if i >= self.starts.len() {
            return None;
        }
        let mut taken = self.taken.lock().expect("taken not poisoned");
        while *taken != usize::MAX && i >= *taken + self.ahead {
            taken = self.room.wait(taken).expect("taken not poisoned");
        }
        (*taken != usize::MAX).then_some(i)
    }

    /// Run `i` ended: takes it and every run after it that ended, if it is next and no
    /// other worker is taking. A worker that was taking looks again once it let go, so a
    /// run that ended meanwhile is not left behind.
    fn ended(&self, i: usize, ch: Chain<V::Part>) {
        *self.done[i].lock().expect("run not poisoned") = Some(ch);
        while let Ok(mut t) = self.taker.try_lock() {
            self.take_ready(&mut t);
            let next = t.next;
            let over = t.outcome.is_some();
            drop(t);
            {
                // Another worker may have taken further meanwhile: never move back.
                let mut taken = self.taken.lock().expect("taken not poisoned");
                *taken = if over { usize::MAX } else { (*taken).max(next) };
            }
            self.room.notify_all();
            let ready = self
                .done
                .get(next)
                .is_some_and(|d| d.lock().expect("run not poisoned").is_some());
            if over || !ready {
                return;
            }
        }
    }

    /// Takes every run that is next and has ended, until one has not or the window's
    /// parse has its outcome.
    fn take_ready(&self, t: &mut Taker) {
        while t.outcome.is_none() && t.next < self.starts.len() {
            let Some(ch) = self.done[t.next].lock().expect("run not poisoned").take() else {
                return;
            };
            let (start, limit) = (self.starts[t.next], self.limits[t.next]);
            // A worker that started from a wrong guess is redone from the true boundary.
            let ch = if start == t.expected {
                ch
            } else {
                chain(self.v, self.buf, t.expected, limit, self.base)
            };
            t.events += ch.events;
            t.next += 1;
            if let Err(e) = self.v.take(ch.part) {
                t.outcome = Some(Err(e));
                return;
            }
            match ch.end {
                End::Limit => t.expected = ch.stop,
                End::Incomplete => t.outcome = Some(Ok((t.events, None, ch.last))),
                End::Closed(end) => t.outcome = Some(Ok((t.events, Some(end), ch.last))),
                End::Error(e) => t.outcome = Some(Err(e)),
            }
        }
    }
}
