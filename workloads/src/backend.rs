//! The one trait a GPU backend implements (CUDA now, ROCm next behind the `rocm` feature).

use crate::error::Result;

/// The two streams of the overlap benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// GEMMs.
    Compute,
    /// Collectives.
    Comm,
}

impl Stream {
    /// Stream id written to the trace (`tid`, `args.stream`): fixed small numbers, like
    /// Kineto's, so two runs' traces line up.
    pub fn id(self) -> i64 {
        match self {
            Stream::Compute => 7,
            Stream::Comm => 13,
        }
    }
}

/// What the benchmark needs from a GPU runtime: one device, two streams, a GEMM, a
/// collective, and timing events.
///
/// All calls are asynchronous (they enqueue work on a stream) except
/// [`Backend::synchronize`] and [`Backend::elapsed_ms`].
pub trait Backend {
    /// A timing event recorded on a stream.
    type Event;
    /// Number of GPUs this process can see.
    fn device_count(&self) -> usize;
    /// The GPU this rank drives.
    fn device(&self) -> usize;
    /// Human-readable device name (for trace metadata).
    fn device_name(&self) -> String;
    /// Enqueue the configured GEMM on `stream`.
    fn gemm(&mut self, stream: Stream) -> Result<()>;
    /// Enqueue the configured collective on `stream`.
    fn collective(&mut self, stream: Stream) -> Result<()>;
    /// Record a timing event on `stream`.
    fn record(&mut self, stream: Stream) -> Result<Self::Event>;
    /// Make `stream` wait for `event` (GPU-side, the host does not block).
    fn wait(&mut self, stream: Stream, event: &Self::Event) -> Result<()>;
    /// Milliseconds from `start` to `end`; both must have completed (call `synchronize` first).
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f64>;
    /// Block the host until all enqueued work is done.
    fn synchronize(&mut self) -> Result<()>;
}
