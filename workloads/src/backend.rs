//! The one trait a GPU backend implements (CUDA with cudarc; ROCm behind the `rocm` feature).
//!
//! Both workloads are the same shape — GEMMs on a low-priority compute stream and something
//! else on a high-priority side stream (NCCL collectives, or host↔device copies) — so one
//! trait with one operation per kind of work serves both, and a backend that was set up for
//! one workload refuses the other's operation with an error rather than a second trait.

use crate::error::Result;

/// The streams a workload uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// GEMMs (lowest priority).
    Compute,
    /// Collectives (highest priority).
    Comm,
    /// Host↔device copies (highest priority).
    Copy,
}

impl Stream {
    /// Stream id written to the trace (`tid`, `args.stream`): fixed small numbers, like
    /// Kineto's, so two runs' traces line up.
    pub(crate) fn id(self) -> i64 {
        match self {
            Stream::Compute => 7,
            Stream::Comm => 13,
            Stream::Copy => 14,
        }
    }

    /// Word for the trace's `thread_name`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Stream::Compute => "compute",
            Stream::Comm => "comm",
            Stream::Copy => "memcpy",
        }
    }
}

/// Direction of one asynchronous copy between pinned host memory and the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyDir {
    /// Pinned host memory to device memory.
    HtoD,
    /// Device memory to pinned host memory.
    DtoH,
}

/// One unit of work a workload enqueues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The configured GEMM.
    Gemm,
    /// The configured collective.
    Collective,
    /// One copy of the configured size.
    Copy(CopyDir),
    /// The straggler's stall: the stream waits this many µs (a host function in stream
    /// order sleeps), then runs on. No GPU work, so it is not written to the trace as a
    /// kernel; the trace's `aorta_straggler` says it was injected.
    Delay(u64),
}

/// What the workloads need from a GPU runtime: one device, its streams, a GEMM, a collective,
/// async copies, and timing events.
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
    /// Enqueue the configured collective on `stream` (an error if none was set up).
    fn collective(&mut self, stream: Stream) -> Result<()>;
    /// Enqueue one async copy between pinned host memory and the device on `stream` (an error
    /// if no copy buffers were set up).
    fn copy(&mut self, stream: Stream, dir: CopyDir) -> Result<()>;
    /// Enqueue a stall of `us` µs on `stream`: later work on it starts that much later.
    fn delay(&mut self, stream: Stream, us: u64) -> Result<()>;
    /// Record a timing event on `stream`.
    fn record(&mut self, stream: Stream) -> Result<Self::Event>;
    /// Make `stream` wait for `event` (GPU-side, the host does not block).
    fn wait(&mut self, stream: Stream, event: &Self::Event) -> Result<()>;
    /// Milliseconds from `start` to `end`; both must have completed (call `synchronize` first).
    fn elapsed_ms(&self, start: &Self::Event, end: &Self::Event) -> Result<f64>;
    /// Block the host until all enqueued work is done.
    fn synchronize(&mut self) -> Result<()>;
    /// Block the host until `event` has completed.
    fn host_wait(&mut self, event: &Self::Event) -> Result<()>;
    /// The host's monotonic clock, ms from an arbitrary origin fixed for the process: what
    /// the launch calls' and the steps' host spans are measured with.
    fn host_ms(&self) -> f64 {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3
    }

    /// Enqueue `op` on `stream`.
    fn enqueue(&mut self, stream: Stream, op: Op) -> Result<()> {
        match op {
            Op::Gemm => self.gemm(stream),
            Op::Collective => self.collective(stream),
            Op::Copy(dir) => self.copy(stream, dir),
            Op::Delay(us) => self.delay(stream, us),
        }
    }
}

/// The host function a backend enqueues for [`Op::Delay`] (`cuLaunchHostFunc`; on ROCm
/// through a `hipStreamAddCallback` callback): sleeps the µs passed as its user-data pointer's value, so there is
/// nothing to allocate or free. The runtime calls it once the stream's earlier work is done,
/// and the stream's later work waits for it to return; it makes no runtime calls, as both
/// runtimes require of a host function.
///
/// # Safety
/// Called by the GPU runtime with the pointer it was enqueued with; the pointer is never
/// dereferenced.
pub(crate) unsafe extern "C" fn sleep_host_fn(user: *mut std::ffi::c_void) {
    std::thread::sleep(std::time::Duration::from_micros(user as usize as u64));
}
