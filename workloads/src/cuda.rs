//! The CUDA backend: cudarc over the driver API, cuBLAS (`cublasGemmEx`) and NCCL, all
//! loaded at run time (`dynamic-loading`), so the binary builds without a CUDA toolkit.
//!
//! One [`CudaBackend`] is one device with a compute stream (lowest priority) and a side stream
//! (highest priority) that carries the collectives or the copies; the GEMM buffers are always
//! there, the NCCL communicator ([`CudaBackend::with_collective`]) and the pinned copy buffers
//! ([`CudaBackend::with_copies`]) only for the workload that needs them.

use crate::backend::{Backend, CopyDir, Stream};
use crate::config::{BenchConfig, Collective, Dtype, GemmShape};
use crate::error::{Error, Result};
use crate::rendezvous;
use cudarc::cublas::{result as cublas, sys as cublas_sys};
use cudarc::driver::{
    result as drv, sys as drv_sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr,
    PinnedHostSlice,
};
use cudarc::nccl::{result as nccl, sys as nccl_sys};
use std::ffi::c_void;
use std::sync::Arc;

/// Fail with one clear line when the driver, cuBLAS or (with `nccl`) NCCL cannot be loaded
/// (cudarc would panic on first use otherwise), or no device is visible.
pub(crate) fn probe(nccl: bool) -> Result<()> {
    // SAFETY: these only try to dlopen the libraries.
    unsafe {
        if !drv_sys::is_culib_present() {
            return Err(Error::NoDriver {
                runtime: "CUDA",
                library: "libcuda.so",
                hint: "no NVIDIA GPU or driver here",
            });
        }
        if !cublas_sys::is_culib_present() {
            return Err(Error::NoLibrary {
                name: "cuBLAS",
                library: "libcublas.so",
                hint: "set LD_LIBRARY_PATH",
            });
        }
        if nccl && !nccl_sys::is_culib_present() {
            return Err(Error::NoLibrary {
                name: "NCCL",
                library: "libnccl.so.2",
                hint: "set LD_LIBRARY_PATH",
            });
        }
    }
    if device_count()? < 1 {
        return Err(Error::NoDevice {
            runtime: "CUDA",
            detail: "cuDeviceGetCount returned 0".into(),
        });
    }
    Ok(())
}

/// Number of visible CUDA devices (after [`probe`]).
pub fn device_count() -> Result<usize> {
    let n = CudaContext::device_count().map_err(derr("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// The library's name of a driver error code (`CUDA_ERROR_OUT_OF_MEMORY`).
fn code(e: drv::DriverError) -> String {
    match e.error_name() {
        Ok(name) => name.to_string_lossy().into_owned(),
        Err(_) => format!("{:?}", e.0),
    }
}

fn derr(call: &str) -> impl Fn(drv::DriverError) -> Error + '_ {
    move |e| Error::api(call, code(e))
}

fn blas_err(call: String) -> impl FnOnce(cublas::CublasError) -> Error {
    move |e| Error::api(call, format!("{:?}", e.0))
}

fn nccl_err(call: String) -> impl FnOnce(nccl::NcclError) -> Error {
    move |e| Error::api(call, format!("{:?}", e.0))
}

/// A fresh NCCL unique id, as the bytes the rendezvous file holds.
pub fn unique_id() -> Result<[u8; rendezvous::ID_BYTES]> {
    let id = nccl::get_uniqueid().map_err(nccl_err("ncclGetUniqueId".into()))?;
    Ok(id.internal.map(|c| c as u8))
}

fn ptr(s: &CudaSlice<u8>, stream: &CudaStream) -> drv_sys::CUdeviceptr {
    // Event tracking is off, so the guard does nothing.
    s.device_ptr(stream).0
}

/// The NCCL communicator and the collective's buffers.
struct Nccl {
    comm: nccl_sys::ncclComm_t,
    cfg: BenchConfig,
    send: u64,
    recv: u64,
}

/// Pinned host memory and a device buffer of the copy size.
struct Copies {
    host: *mut c_void,
    dev: u64,
    bytes: usize,
}

/// One rank: one device, a compute stream (lowest priority) and a side stream (highest).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    side: Arc<CudaStream>,
    cublas: cublas_sys::cublasHandle_t,
    gemm: GemmShape,
    device: usize,
    count: usize,
    // Keep the allocations alive; the raw pointers below point into them.
    _bufs: Vec<CudaSlice<u8>>,
    _pinned: Option<PinnedHostSlice<u8>>,
    a: u64,
    b: u64,
    c: u64,
    nccl: Option<Nccl>,
    copies: Option<Copies>,
}

impl CudaBackend {
    /// Open `device`: context, both streams, cuBLAS handle and the GEMM's buffers.
    pub fn new(gemm: &GemmShape, device: usize) -> Result<Self> {
        let count = device_count()?;
        let ctx = CudaContext::new(device).map_err(derr("creating the CUDA context"))?;
        // SAFETY: no work is in flight yet; we order the streams ourselves with events.
        unsafe { ctx.disable_event_tracking() };
        let (least, greatest) =
            drv::stream::get_priority_range().map_err(derr("cuCtxGetStreamPriorityRange"))?;
        let compute = ctx
            .new_stream_with_priority(least)
            .map_err(derr("cuStreamCreateWithPriority (compute)"))?;
        let side = ctx
            .new_stream_with_priority(greatest)
            .map_err(derr("cuStreamCreateWithPriority (side)"))?;
        let handle = cublas::create_handle().map_err(blas_err("cublasCreate".into()))?;
        let mut b = CudaBackend {
            ctx,
            compute,
            side,
            cublas: handle,
            gemm: *gemm,
            device,
            count,
            _bufs: Vec::new(),
            _pinned: None,
            a: 0,
            b: 0,
            c: 0,
            nccl: None,
            copies: None,
        };
        let el = gemm.dtype.size();
        b.a = b.alloc(gemm.m * gemm.k * el)?;
        b.b = b.alloc(gemm.k * gemm.n * el)?;
        b.c = b.alloc(gemm.m * gemm.n * el)?;
        Ok(b)
    }

    /// A zeroed device buffer that lives as long as the backend.
    fn alloc(&mut self, bytes: usize) -> Result<u64> {
        let dev = self.device;
        let buf = self
            .compute
            .alloc_zeros::<u8>(bytes)
            .map_err(derr(&format!("allocating {bytes} bytes on GPU {dev}")))?;
        self.compute.synchronize().map_err(derr("synchronize"))?;
        let p = ptr(&buf, &self.compute);
        self._bufs.push(buf);
        Ok(p)
    }

    /// Add the collective's buffers and the NCCL communicator (collective over all ranks).
    pub fn with_collective(
        mut self,
        cfg: &BenchConfig,
        id: [u8; rendezvous::ID_BYTES],
    ) -> Result<Self> {
        let id = nccl_sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let (send_bytes, recv_bytes) = cfg.collective_buffers();
        let send = self.alloc(send_bytes)?;
        let recv = self.alloc(recv_bytes)?;
        let mut comm = std::mem::MaybeUninit::uninit();
        // SAFETY: the context is current on this thread (bound by the allocations above).
        let comm = unsafe {
            nccl::comm_init_rank(
                comm.as_mut_ptr(),
                cfg.world_size as i32,
                id,
                cfg.rank as i32,
            )
            .map_err(nccl_err("ncclCommInitRank".into()))?;
            comm.assume_init()
        };
        self.nccl = Some(Nccl {
            comm,
            cfg: cfg.clone(),
            send,
            recv,
        });
        Ok(self)
    }

    /// Add `bytes` of pinned (page-locked) host memory and a device buffer of the same size.
    pub fn with_copies(mut self, bytes: usize) -> Result<Self> {
        let dev = self.alloc(bytes)?;
        // SAFETY: flags 0 is plain page-locked memory; the bytes are never read as typed data.
        let mut pinned = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }
            .map_err(derr(&format!("cuMemHostAlloc {bytes} bytes")))?;
        let host = pinned.as_mut_ptr().map_err(derr("cuEventSynchronize"))? as *mut c_void;
        self._pinned = Some(pinned);
        self.copies = Some(Copies { host, dev, bytes });
        Ok(self)
    }

    fn stream(&self, s: Stream) -> &Arc<CudaStream> {
        match s {
            Stream::Compute => &self.compute,
            Stream::Comm | Stream::Copy => &self.side,
        }
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.ctx.synchronize();
        // SAFETY: created in `new` / `with_collective`, destroyed once, nothing in flight.
        unsafe {
            if let Some(n) = &self.nccl {
                let _ = nccl::comm_destroy(n.comm);
            }
            let _ = cublas::destroy_handle(self.cublas);
        }
    }
}

fn gemm_types(d: Dtype) -> cublas_sys::cudaDataType {
    match d {
        Dtype::Bf16 => cublas_sys::cudaDataType::CUDA_R_16BF,
        Dtype::Fp16 => cublas_sys::cudaDataType::CUDA_R_16F,
        Dtype::Fp32 => cublas_sys::cudaDataType::CUDA_R_32F,
    }
}

fn nccl_type(d: Dtype) -> nccl_sys::ncclDataType_t {
    match d {
        Dtype::Bf16 => nccl_sys::ncclDataType_t::ncclBfloat16,
        Dtype::Fp16 => nccl_sys::ncclDataType_t::ncclFloat16,
        Dtype::Fp32 => nccl_sys::ncclDataType_t::ncclFloat32,
    }
}

impl Backend for CudaBackend {
    type Event = CudaEvent;

    fn device_count(&self) -> usize {
        self.count
    }

    fn device(&self) -> usize {
        self.device
    }

    fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "CUDA device".into())
    }

    fn gemm(&mut self, s: Stream) -> Result<()> {
        let g = self.gemm;
        let ty = gemm_types(g.dtype);
        // FP32 accumulation for every dtype (for fp32: plain FP32, no TF32).
        let compute = cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let stream = self.stream(s).cu_stream() as cublas_sys::cudaStream_t;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
        let op_n = cublas_sys::cublasOperation_t::CUBLAS_OP_N;
        // SAFETY: buffers sized m*k, k*n, m*n in `new`; column-major, no transpose.
        unsafe {
            cublas::set_stream(self.cublas, stream).map_err(blas_err("cublasSetStream".into()))?;
            cublas::gemm_ex(
                self.cublas,
                op_n,
                op_n,
                m,
                n,
                k,
                &alpha as *const f32 as *const c_void,
                self.a as *const c_void,
                ty,
                m,
                self.b as *const c_void,
                ty,
                k,
                &beta as *const f32 as *const c_void,
                self.c as *mut c_void,
                ty,
                m,
                compute,
                cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
            .map_err(blas_err(format!("cublasGemmEx {}", g.name())))
        }
    }

    fn collective(&mut self, s: Stream) -> Result<()> {
        let stream = self.stream(s).cu_stream() as nccl_sys::cudaStream_t;
        let n = self
            .nccl
            .as_ref()
            .ok_or_else(|| Error::config("no collective was set up on this backend"))?;
        let cfg = &n.cfg;
        let ty = nccl_type(cfg.gemm.dtype);
        let (send, recv) = (n.send as *const c_void, n.recv as *mut c_void);
        let elems = cfg.bytes / cfg.gemm.dtype.size();
        let shard = elems / cfg.world_size;
        let sum = nccl_sys::ncclRedOp_t::ncclSum;
        // SAFETY: send/recv sized by `collective_buffers` in `with_collective`.
        let r = unsafe {
            match cfg.collective {
                Collective::AllReduce => {
                    nccl::all_reduce(send, recv, elems, ty, sum, n.comm, stream)
                }
                Collective::AllGather => nccl::all_gather(send, recv, shard, ty, n.comm, stream),
                Collective::ReduceScatter => {
                    nccl::reduce_scatter(send, recv, shard, ty, sum, n.comm, stream)
                }
            }
        };
        r.map(|_| ())
            .map_err(nccl_err(format!("NCCL {}", cfg.collective.op())))
    }

    fn copy(&mut self, s: Stream, dir: CopyDir) -> Result<()> {
        let stream = self.stream(s).cu_stream();
        let c = self
            .copies
            .as_ref()
            .ok_or_else(|| Error::config("no copy buffers were set up on this backend"))?;
        // SAFETY: `host` (pinned) and `dev` both hold `bytes`, live as long as `self`, and are
        // only touched by the stream-ordered copies of this one stream.
        let r = unsafe {
            match dir {
                CopyDir::HtoD => drv_sys::cuMemcpyHtoDAsync_v2(c.dev, c.host, c.bytes, stream),
                CopyDir::DtoH => drv_sys::cuMemcpyDtoHAsync_v2(c.host, c.dev, c.bytes, stream),
            }
        };
        let call = match dir {
            CopyDir::HtoD => "cuMemcpyHtoDAsync",
            CopyDir::DtoH => "cuMemcpyDtoHAsync",
        };
        r.result().map_err(derr(call))
    }

    fn delay(&mut self, s: Stream, us: u64) -> Result<()> {
        let stream = self.stream(s).cu_stream();
        // SAFETY: `sleep_host_fn` only sleeps; the user-data pointer carries the µs as its
        // value and is never dereferenced.
        let r = unsafe {
            drv_sys::cuLaunchHostFunc(
                stream,
                Some(crate::backend::sleep_host_fn),
                us as usize as *mut std::ffi::c_void,
            )
        };
        r.result().map_err(derr("cuLaunchHostFunc"))
    }

    fn record(&mut self, s: Stream) -> Result<CudaEvent> {
        // Timing events: `None` would create them with CU_EVENT_DISABLE_TIMING.
        self.stream(s)
            .record_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(derr("cuEventRecord"))
    }

    fn wait(&mut self, s: Stream, ev: &CudaEvent) -> Result<()> {
        self.stream(s).wait(ev).map_err(derr("cuStreamWaitEvent"))
    }

    fn elapsed_ms(&self, a: &CudaEvent, b: &CudaEvent) -> Result<f64> {
        a.elapsed_ms(b)
            .map(f64::from)
            .map_err(derr("cuEventElapsedTime"))
    }

    fn synchronize(&mut self) -> Result<()> {
        self.ctx.synchronize().map_err(derr("cuCtxSynchronize"))
    }

    fn host_wait(&mut self, ev: &CudaEvent) -> Result<()> {
        ev.synchronize().map_err(derr("cuEventSynchronize"))
    }
}
