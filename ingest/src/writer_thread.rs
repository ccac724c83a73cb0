//! The writer thread: one per file, owning its `Sink`, fed row batches over a bounded channel.
//!
//! The streaming readers (Kineto, Chrome, rocprofv3 JSON) parse on every core and hand each
//! parsed run of events to this thread, which classifies, dictionary-encodes and writes them
//! (`sink`). The bounded queue is what keeps memory flat when the parser outruns the writer.
//! It is bounded twice: in batches, and in the bytes the waiting batches hold (`Feed`),
//! since a batch of short events holds many rows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::Result;
use crate::rows::Batch;
use crate::sink::{Parts, Sink, SinkOut};

/// Batches the Kineto reader may queue for its spill thread (`kineto::pending`): one per
/// parsed run of the walk (1 MiB of the file with two or more workers, `walk::runs_for`), a
/// few thousand rows. With 4, the workers stalled on every 131 Ki-row flush of the writer; 64
/// let them go on (1 GiB on two cores: wall −15 %, peak RSS +20 MB). The Chrome reader queues
/// fewer (`chrome::QUEUE`), the rocprofv3 readers theirs (`rocprof::QUEUE`).
pub(crate) const WRITER_QUEUE: usize = 64;

/// What the senders and the writer thread share: the bytes of the batches waiting for the
/// writer, and whether it has stopped.
#[derive(Default)]
struct Waiting {
    state: Mutex<State>,
    taken: Condvar,
}

#[derive(Default)]
struct State {
    bytes: usize,
    stopped: bool,
}

impl Waiting {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("queue not poisoned")
    }

    /// The writer took in a batch of `bytes`.
    fn taken(&self, bytes: usize) {
        self.lock().bytes -= bytes;
        self.taken.notify_all();
    }
}

/// Wakes the senders for good when the writer thread ends, however it ends.
struct Stopped(Arc<Waiting>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.lock().stopped = true;
        self.0.taken.notify_all();
    }
}

/// What a reader sends its batches to the writer thread with: each goes with its size
/// (`Batch::heap_bytes`), which the writer gives back once it has taken the batch in.
pub(crate) struct Feed {
    tx: SyncSender<(Batch, usize)>,
    waiting: Arc<Waiting>,
    /// The bytes that may wait.
    bound: usize,
}

impl Feed {
    /// Sends `batch` once the batches waiting hold less than the bound in bytes (one batch
    /// alone may hold more) and the channel has room; false if the writer thread stopped.
    pub(crate) fn send(&self, batch: Batch) -> bool {
        let n = batch.heap_bytes();
        let mut w = self.waiting.lock();
        while w.bytes > 0 && w.bytes.saturating_add(n) > self.bound && !w.stopped {
            w = self.waiting.taken.wait(w).expect("queue not poisoned");
        }
        if w.stopped {
            return false;
        }
        w.bytes += n;
        drop(w);
        self.tx.send((batch, n)).is_ok()
    }
}

/// The writer thread: owns the sink until every `Feed` is dropped; `queue` batches, holding
/// `bound` bytes at most (`Batch::heap_bytes`; one batch may hold more), may wait.
pub(crate) fn spawn_writer(
    parts: Parts,
    failed: Arc<AtomicBool>,
    (queue, bound): (usize, usize),
) -> (Feed, JoinHandle<Result<SinkOut>>) {
    let (feed, rx, stopped) = channel((queue, bound));
    let handle = std::thread::spawn(move || {
        // The guard itself, not only its field: it wakes the senders when the thread ends.
        let stopped = stopped;
        let mut sink = Sink::new(&parts);
        let mut busy = std::time::Duration::ZERO;
        for (batch, n) in rx {
            let t = std::time::Instant::now();
            if let Err(e) = sink.add(batch) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
            stopped.0.taken(n);
            busy += t.elapsed();
        }
        let t = std::time::Instant::now();
        let out = sink.finish();
        if std::env::var_os("AORTA_TIMING").is_some() {
            eprintln!("writer busy {busy:.2?}, final flush {:.2?}", t.elapsed());
        }
        out
    });
    (feed, handle)
}

/// The channel: its sending side, its receiving side, and what the receiver drops when it
/// stops.
fn channel((queue, bound): (usize, usize)) -> (Feed, Receiver<(Batch, usize)>, Stopped) {
    let (tx, rx) = sync_channel(queue);
    let waiting = Arc::new(Waiting::default());
    let stopped = Stopped(waiting.clone());
    (Feed { tx, waiting, bound }, rx, stopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::Interner;
    use std::time::Duration;

    /// A batch of `n` interned strings (its rows do not matter here).
    fn batch(n: usize) -> Batch {
        let mut strings = Interner::default();
        for i in 0..n {
            strings.id(&format!("kernel {i}"));
        }
        Batch {
            strings,
            ..Batch::default()
        }
    }

    #[test]
    fn a_batch_waits_while_those_waiting_hold_the_bytes_allowed() {
        let one = batch(100).heap_bytes();
        // Room for one batch's bytes, and for ten batches in the channel.
        let (feed, rx, _stopped) = channel((10, one));
        let waiting = feed.waiting.clone();
        let sender = std::thread::spawn(move || (0..3).all(|_| feed.send(batch(100))));
        let (_, first) = rx.recv().expect("the first batch is sent at once");
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            rx.try_recv().is_err(),
            "the second waits for the first's bytes"
        );
        waiting.taken(first);
        let (_, second) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("sent once taken");
        waiting.taken(second);
        rx.recv_timeout(Duration::from_secs(10)).expect("the third");
        assert!(sender.join().expect("no panic"), "every send succeeded");
    }

    #[test]
    fn a_batch_larger_than_the_bytes_allowed_goes_alone() {
        let (feed, rx, _stopped) = channel((10, 1));
        assert!(feed.send(batch(1000)), "nothing waits: it goes");
        let (_, n) = rx.recv().expect("sent");
        assert!(n > 1);
        feed.waiting.taken(n);
        assert!(feed.send(batch(1000)), "and the next once it is taken");
    }

    #[test]
    fn a_waiting_sender_is_told_when_the_writer_stops() {
        let (feed, rx, stopped) = channel((10, 1));
        assert!(feed.send(batch(10)));
        let (done, sent) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(feed.send(batch(10))));
        let wait = sent.recv_timeout(Duration::from_millis(100));
        assert!(wait.is_err(), "it waits for the first batch's bytes");
        // The writer stops with the first batch never taken (as on an error).
        drop(stopped);
        drop(rx);
        let sent = sent.recv_timeout(Duration::from_secs(10));
        assert_eq!(sent, Ok(false), "the send failed instead of waiting");
    }
}
