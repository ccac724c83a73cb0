//! The ROCm backend (cargo feature `rocm`): the HIP runtime through hip-sys (linked against
//! `libamdhip64`), hipBLAS (`hipblasGemmEx`) and RCCL opened at run time ([`libs`]).
//!
//! The same shape as the CUDA backend, so both workloads run unchanged: one device, a compute
//! stream at the lowest priority and a side stream at the highest
//! (`hipDeviceGetStreamPriorityRange`) for the collectives or the copies; the GEMM buffers
//! always, RCCL ([`RocmBackend::with_collective`]) and pinned copy buffers
//! ([`RocmBackend::with_copies`]) only for the workload that needs them. Built and its non-GPU
//! parts tested on a machine without an AMD GPU; it runs only where one is.
//!
//! hip-sys declares HIP's calls as returning its `hipError_t` Rust enum, generated from ROCm
//! 5.x headers; the calls made here answer with codes those bindings have (success, no device,
//! out of memory, invalid value, handle or device).

pub mod hip;
mod libs;

use crate::backend::{Backend, CopyDir, Stream};
use crate::config::{BenchConfig, Collective, GemmShape};
use crate::error::{Error, Result};
use crate::rendezvous;
use hip::{check, DeviceBuf, Event, PinnedBuf};
use hip_sys::hiprt;
use libs::{GemmCall, Hipblas, NcclComm, NcclUniqueId, Rccl};
use std::ffi::{c_char, c_int, c_void};

/// Fail with one clear line when no AMD GPU is visible or hipBLAS (or, with `collectives`,
/// RCCL) cannot be opened.
pub(crate) fn probe(collectives: bool) -> Result<()> {
    hip::device_count()?;
    libs::open_first("hipBLAS", libs::HIPBLAS_LIBS)?;
    if collectives {
        libs::open_first("RCCL", libs::RCCL_LIBS)?;
    }
    Ok(())
}

/// Number of visible AMD GPUs.
pub fn device_count() -> Result<usize> {
    hip::device_count()
}

/// A fresh RCCL unique id, as the bytes the rendezvous file holds.
pub fn unique_id() -> Result<[u8; rendezvous::ID_BYTES]> {
    Rccl::load()?.unique_id()
}

/// The two streams; destroyed on drop, after everything that enqueues on them.
struct Streams {
    compute: hiprt::hipStream_t,
    side: hiprt::hipStream_t,
}

impl Drop for Streams {
    fn drop(&mut self) {
        // SAFETY: created by `new_stream`, destroyed once, after the device synchronized.
        unsafe {
            let _ = hiprt::hipStreamDestroy(self.compute);
            let _ = hiprt::hipStreamDestroy(self.side);
        }
    }
}

/// The RCCL communicator, the collective's buffers and what to run.
struct Comm {
    rccl: Rccl,
    comm: NcclComm,
    cfg: BenchConfig,
    send: DeviceBuf,
    recv: DeviceBuf,
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: created by ncclCommInitRank in `with_collective`, destroyed once, with no
        // collective in flight (the backend synchronized first).
        let _ = unsafe { (self.rccl.comm_destroy)(self.comm) };
    }
}

/// Pinned host memory and a device buffer of the copy size.
struct Copies {
    host: PinnedBuf,
    dev: DeviceBuf,
    bytes: usize,
}

/// One rank: one device, a compute stream (lowest priority) and a side stream (highest).
///
/// Fields drop in declaration order after [`Drop::drop`] synchronized the device: the RCCL
/// communicator, hipBLAS and the buffers first, the streams last.
pub struct RocmBackend {
    device: usize,
    count: usize,
    gemm: GemmShape,
    comm: Option<Comm>,
    copies: Option<Copies>,
    blas: Hipblas,
    a: DeviceBuf,
    b: DeviceBuf,
    c: DeviceBuf,
    streams: Streams,
}

/// Wait for the device (the allocations' `hipMemset`s run on the null stream, which the
/// non-blocking work streams do not wait for).
fn sync() -> Result<()> {
    // SAFETY: plain call on the current device.
    check("hipDeviceSynchronize", unsafe {
        hiprt::hipDeviceSynchronize()
    })
}

/// A non-blocking stream of `priority` on the current device.
fn new_stream(priority: c_int, what: &str) -> Result<hiprt::hipStream_t> {
    let mut s: hiprt::hipStream_t = std::ptr::null_mut();
    // SAFETY: out-pointer valid for the call; flags are a HIP constant.
    check(&format!("hipStreamCreateWithPriority ({what})"), unsafe {
        hiprt::hipStreamCreateWithPriority(&mut s, hiprt::hipStreamNonBlocking, priority)
    })?;
    Ok(s)
}

impl RocmBackend {
    /// Open `device`: both streams, hipBLAS and the GEMM's buffers.
    pub fn new(gemm: &GemmShape, device: usize) -> Result<Self> {
        let count = hip::device_count()?;
        // SAFETY: plain call; selects the device for this (the only) thread.
        check("hipSetDevice", unsafe {
            hiprt::hipSetDevice(device as c_int)
        })?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: out-pointers valid for the call.
        check("hipDeviceGetStreamPriorityRange", unsafe {
            hiprt::hipDeviceGetStreamPriorityRange(&mut least, &mut greatest)
        })?;
        let streams = Streams {
            compute: new_stream(least, "compute")?,
            side: new_stream(greatest, "side")?,
        };
        let el = gemm.dtype.size();
        let b = RocmBackend {
            device,
            count,
            gemm: *gemm,
            comm: None,
            copies: None,
            blas: Hipblas::load()?,
            a: DeviceBuf::zeroed(gemm.m * gemm.k * el)?,
            b: DeviceBuf::zeroed(gemm.k * gemm.n * el)?,
            c: DeviceBuf::zeroed(gemm.m * gemm.n * el)?,
            streams,
        };
        sync()?;
        Ok(b)
    }

    /// Add the collective's buffers and the RCCL communicator (collective over all ranks).
    pub fn with_collective(
        mut self,
        cfg: &BenchConfig,
        id: [u8; rendezvous::ID_BYTES],
    ) -> Result<Self> {
        let rccl = Rccl::load()?;
        let (send_bytes, recv_bytes) = cfg.collective_buffers();
        let (send, recv) = (
            DeviceBuf::zeroed(send_bytes)?,
            DeviceBuf::zeroed(recv_bytes)?,
        );
        sync()?;
        let id = NcclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: NcclComm = std::ptr::null_mut();
        // SAFETY: out-pointer valid; the device is current on this thread (`new`).
        let r = unsafe {
            (rccl.comm_init_rank)(&mut comm, cfg.world_size as c_int, id, cfg.rank as c_int)
        };
        libs::nccl_check("ncclCommInitRank", r)?;
        self.comm = Some(Comm {
            rccl,
            comm,
            cfg: cfg.clone(),
            send,
            recv,
        });
        Ok(self)
    }

    /// Add `bytes` of pinned host memory and a device buffer of the same size.
    pub fn with_copies(mut self, bytes: usize) -> Result<Self> {
        self.copies = Some(Copies {
            host: PinnedBuf::new(bytes)?,
            dev: DeviceBuf::zeroed(bytes)?,
            bytes,
        });
        sync()?;
        Ok(self)
    }

    fn stream(&self, s: Stream) -> hiprt::hipStream_t {
        match s {
            Stream::Compute => self.streams.compute,
            Stream::Comm | Stream::Copy => self.streams.side,
        }
    }
}

impl Drop for RocmBackend {
    fn drop(&mut self) {
        // Nothing may be in flight when the fields (communicator, buffers, streams) go.
        let _ = sync();
    }
}

impl Backend for RocmBackend {
    type Event = Event;

    fn device_count(&self) -> usize {
        self.count
    }

    fn device(&self) -> usize {
        self.device
    }

    fn device_name(&self) -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: `buf` holds 256 bytes; HIP writes a NUL-terminated name into it.
        let r = unsafe { hiprt::hipDeviceGetName(buf.as_mut_ptr(), 256, self.device as c_int) };
        if r != hiprt::hipError_t::hipSuccess {
            return "AMD GPU".into();
        }
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn gemm(&mut self, s: Stream) -> Result<()> {
        let g = self.gemm;
        let call = GemmCall {
            m: g.m,
            n: g.n,
            k: g.k,
            dtype: g.dtype,
            a: self.a.0,
            b: self.b.0,
            c: self.c.0,
        };
        // SAFETY: a, b, c were sized m·k, k·n, m·n elements in `new` and live in `self`.
        unsafe { self.blas.gemm(self.stream(s), &call, &g.name()) }
    }

    fn collective(&mut self, s: Stream) -> Result<()> {
        let stream = self.stream(s);
        let c = self
            .comm
            .as_ref()
            .ok_or_else(|| Error::config("no collective was set up on this backend"))?;
        let cfg = &c.cfg;
        let ty = libs::rccl_type(cfg.gemm.dtype);
        let (send, recv) = (c.send.0 as *const c_void, c.recv.0);
        let elems = cfg.bytes / cfg.gemm.dtype.size();
        let shard = elems / cfg.world_size;
        let sum = libs::NCCL_SUM;
        // SAFETY: send/recv sized by `collective_buffers` in `with_collective`.
        let r = unsafe {
            match cfg.collective {
                Collective::AllReduce => {
                    (c.rccl.all_reduce)(send, recv, elems, ty, sum, c.comm, stream)
                }
                Collective::AllGather => (c.rccl.all_gather)(send, recv, shard, ty, c.comm, stream),
                Collective::ReduceScatter => {
                    (c.rccl.reduce_scatter)(send, recv, shard, ty, sum, c.comm, stream)
                }
            }
        };
        libs::nccl_check(&format!("RCCL {}", cfg.collective.op()), r)
    }

    fn copy(&mut self, s: Stream, dir: CopyDir) -> Result<()> {
        let stream = self.stream(s);
        let c = self
            .copies
            .as_ref()
            .ok_or_else(|| Error::config("no copy buffers were set up on this backend"))?;
        // SAFETY: host (pinned) and dev both hold `bytes`, live as long as `self`, and are
        // only touched by the stream-ordered copies of this one stream.
        let (call, r) = unsafe {
            match dir {
                CopyDir::HtoD => (
                    "hipMemcpyHtoDAsync",
                    hiprt::hipMemcpyHtoDAsync(c.dev.0, c.host.0, c.bytes, stream),
                ),
                CopyDir::DtoH => (
                    "hipMemcpyDtoHAsync",
                    hiprt::hipMemcpyDtoHAsync(c.host.0, c.dev.0, c.bytes, stream),
                ),
            }
        };
        check(call, r)
    }

    fn delay(&mut self, s: Stream, us: u64) -> Result<()> {
        // `hipStreamAddCallback`, not `hipLaunchHostFunc`: HIP before 5.3 (Debian's
        // libamdhip64 5.2, what CI links) has only the callback; both block the stream's
        // later work until the function returns.
        // SAFETY: live stream of this device; the callback only sleeps, the user-data pointer
        // carries the µs as its value and is never dereferenced; flags must be 0.
        check("hipStreamAddCallback", unsafe {
            hiprt::hipStreamAddCallback(
                self.stream(s),
                Some(sleep_callback),
                us as usize as *mut c_void,
                0,
            )
        })
    }

    fn record(&mut self, s: Stream) -> Result<Event> {
        Event::record(self.stream(s))
    }

    fn wait(&mut self, s: Stream, ev: &Event) -> Result<()> {
        // SAFETY: live stream and event of this device; flags must be 0.
        check("hipStreamWaitEvent", unsafe {
            hiprt::hipStreamWaitEvent(self.stream(s), ev.0, 0)
        })
    }

    fn elapsed_ms(&self, a: &Event, b: &Event) -> Result<f64> {
        a.elapsed_ms(b)
    }

    fn synchronize(&mut self) -> Result<()> {
        sync()
    }

    fn host_wait(&mut self, ev: &Event) -> Result<()> {
        ev.synchronize()
    }
}

/// [`crate::backend::sleep_host_fn`] in the shape of a HIP stream callback.
///
/// # Safety
/// Called by the HIP runtime with the pointer it was enqueued with, never dereferenced.
unsafe extern "C" fn sleep_callback(
    _stream: hiprt::hipStream_t,
    _status: hiprt::hipError_t,
    user: *mut c_void,
) {
    // SAFETY: as above; `sleep_host_fn` only reads the pointer's value.
    unsafe { crate::backend::sleep_host_fn(user) }
}
