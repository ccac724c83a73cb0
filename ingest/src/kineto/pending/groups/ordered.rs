//! Tasks run on the pool, their results taken in order.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Runs tasks `0..n` on the pool, at most `ahead` of them started and not yet taken, and
/// hands their results to `take` in order (on whichever thread finished the one it waited
/// for). Task `k` is `begin(k)`, then `step` until it returns false, then `end`; once `take`
/// returns false no more tasks start.
///
/// Why steps: each step is a rayon task of its own. A thread waiting in a `join` (the GPU
/// table's flushes, the launches' lookup) runs tasks it steals, and one that stole a whole
/// row group came back to its own work only a row group later.
pub(super) fn ordered<S: Send, T: Send>(
    n: usize,
    ahead: usize,
    begin: impl Fn(usize) -> S + Sync,
    step: impl Fn(&mut S) -> bool + Sync,
    end: impl Fn(S) -> T + Sync,
    take: impl FnMut(T) -> bool + Send,
) {
    let o = Ordered {
        n,
        begin,
        step,
        end,
        state: Mutex::new(Taken {
            started: ahead.min(n),
            taken: 0,
            done: BTreeMap::new(),
            take,
            stop: false,
        }),
    };
    let o = &o;
    rayon::scope(|s| {
        for k in 0..ahead.min(n) {
            o.spawn(s, k, (o.begin)(k));
        }
    });
}

/// What `ordered` runs.
struct Ordered<B, P, E, Tk> {
    n: usize,
    begin: B,
    step: P,
    end: E,
    state: Mutex<Tk>,
}

/// What `ordered` has started and taken.
struct Taken<T, F> {
    started: usize,
    taken: usize,
    done: BTreeMap<usize, T>,
    take: F,
    stop: bool,
}

impl<S, T, B, P, E, F> Ordered<B, P, E, Taken<T, F>>
where
    S: Send,
    T: Send,
    B: Fn(usize) -> S + Sync,
    P: Fn(&mut S) -> bool + Sync,
    E: Fn(S) -> T + Sync,
    F: FnMut(T) -> bool + Send,
{
    /// The next step of task `k` (at `state`), as a task of its own.
    fn spawn<'s>(&'s self, s: &rayon::Scope<'s>, k: usize, mut state: S)
    where
        S: 's,
    {
        s.spawn(move |s| {
            if (self.step)(&mut state) {
                self.spawn(s, k, state);
            } else {
                self.done(s, k, (self.end)(state));
            }
        });
    }

    /// Task `k` is done: takes what is next in order, and starts as many tasks.
    fn done<'s>(&'s self, s: &rayon::Scope<'s>, k: usize, res: T)
    where
        S: 's,
    {
        let mut st = self.state.lock().expect("no task panics holding it");
        st.done.insert(k, res);
        while !st.stop {
            let at = st.taken;
            let Some(res) = st.done.remove(&at) else {
                break;
            };
            st.taken += 1;
            if !(st.take)(res) {
                st.stop = true;
            }
            if !st.stop && st.started < self.n {
                let k = st.started;
                st.started += 1;
                self.spawn(s, k, (self.begin)(k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Tasks that finish in reverse order are taken in order, never more than `ahead` of
    /// them running or waiting to be taken, and none start after `take` says stop.
    #[test]
    fn ordered_takes_results_in_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        for (n, ahead, stop_at) in [(20, 3, None), (5, 8, None), (0, 2, None), (30, 4, Some(7))] {
            let (running, most, ran) = (
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            );
            let mut taken = Vec::new();
            pool.install(|| {
                ordered(
                    n,
                    ahead,
                    |k| {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        ran.fetch_add(1, Ordering::SeqCst);
                        // Steps: later tasks have fewer, so they finish first.
                        (k, 3 - k % 4)
                    },
                    |(_, left): &mut (usize, usize)| {
                        std::thread::sleep(std::time::Duration::from_micros(100));
                        *left = left.saturating_sub(1);
                        *left > 0
                    },
                    |(k, left)| {
                        assert_eq!(left, 0);
                        k
                    },
                    |k| {
                        running.fetch_sub(1, Ordering::SeqCst);
                        taken.push(k);
                        Some(k) != stop_at
                    },
                )
            });
            let want: Vec<usize> = (0..stop_at.map_or(n, |s| s + 1)).collect();
            assert_eq!(taken, want, "{n} {ahead}");
            assert!(most.load(Ordering::SeqCst) <= ahead, "{n} {ahead}");
            // Stopped: the tasks started before the stop, at most `ahead` past it.
            let ran = ran.load(Ordering::SeqCst);
            assert!(ran <= want.len() + ahead, "{ran}");
        }
    }
}
