//! The writer thread: one per file, owning its `Sink`, fed row batches over a bounded channel.
//!
//! The streaming readers (Kineto, Chrome, rocprofv3 JSON) parse on every core and hand each
//! parsed run of events to this thread, which classifies, dictionary-encodes and writes them
//! (`sink`). The bounded queue is what keeps memory flat when the parser outruns the writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::Result;
use crate::rows::Batch;
use crate::sink::{Parts, Sink, SinkOut};

/// Batches the Kineto and Chrome readers may queue for the writer (or spill) thread: one per
/// parsed sub-window, a few thousand rows. With 4, the workers stalled on every 131 Ki-row
/// flush of the writer; 64 let them go on (1 GiB on two cores: wall −15 %, peak RSS +20 MB).
pub(crate) const WRITER_QUEUE: usize = 64;

/// The writer thread: owns the sink until the channel closes; `queue` batches may wait.
pub(crate) fn spawn_writer(
    parts: Parts,
    failed: Arc<AtomicBool>,
    queue: usize,
) -> (SyncSender<Batch>, JoinHandle<Result<SinkOut>>) {
    let (tx, rx) = sync_channel::<Batch>(queue);
    let handle = std::thread::spawn(move || {
        let mut sink = Sink::new(&parts);
        let mut busy = std::time::Duration::ZERO;
        for batch in rx {
            let t = std::time::Instant::now();
            if let Err(e) = sink.add(batch) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
            busy += t.elapsed();
        }
        let t = std::time::Instant::now();
        let out = sink.finish();
        if std::env::var_os("AORTA_TIMING").is_some() {
            eprintln!("writer busy {busy:.2?}, final flush {:.2?}", t.elapsed());
        }
        out
    });
    (tx, handle)
}
