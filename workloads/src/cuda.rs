//! The CUDA backend: cudarc over the driver API, cuBLAS (`cublasGemmEx`) and NCCL, all
//! loaded at run time (`dynamic-loading`), so the binary builds without a CUDA toolkit.

use crate::backend::{Backend, Stream};
use crate::config::{BenchConfig, Collective, Dtype};
use crate::error::{Error, Result};
use crate::rendezvous;
use cudarc::cublas::{result as cublas, sys as cublas_sys};
use cudarc::driver::{
    result as drv, sys as drv_sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr,
};
use cudarc::nccl::{result as nccl, sys as nccl_sys};
use std::ffi::c_void;
use std::sync::Arc;

/// Fail with one clear line when the driver, cuBLAS or NCCL cannot be loaded (cudarc would
/// panic on first use otherwise).
pub fn probe() -> Result<()> {
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
        if !nccl_sys::is_culib_present() {
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

/// One rank: one device, a compute stream (lowest priority) and a comm stream (highest).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    comm: Arc<CudaStream>,
    cublas: cublas_sys::cublasHandle_t,
    nccl: nccl_sys::ncclComm_t,
    cfg: BenchConfig,
    device: usize,
    count: usize,
    // Keeps the buffers alive; the raw pointers below point into them.
    _bufs: Vec<CudaSlice<u8>>,
    a: u64,
    b: u64,
    c: u64,
    send: u64,
    recv: u64,
}

impl CudaBackend {
    /// Open `device`, create streams, cuBLAS handle, buffers and the NCCL communicator.
    pub fn new(cfg: &BenchConfig, device: usize, id: [u8; rendezvous::ID_BYTES]) -> Result<Self> {
        let id = nccl_sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let count = device_count()?;
        let ctx = CudaContext::new(device).map_err(derr("creating the CUDA context"))?;
        // SAFETY: no work is in flight yet; we order the streams ourselves with events.
        unsafe { ctx.disable_event_tracking() };
        let (least, greatest) =
            drv::stream::get_priority_range().map_err(derr("stream priorities"))?;
        let compute = ctx
            .new_stream_with_priority(least)
            .map_err(derr("compute stream"))?;
        let comm = ctx
            .new_stream_with_priority(greatest)
            .map_err(derr("comm stream"))?;
        let el = cfg.dtype.size();
        let (send_bytes, recv_bytes) = cfg.collective_buffers();
        let sizes = [
            cfg.m * cfg.k * el,
            cfg.k * cfg.n * el,
            cfg.m * cfg.n * el,
            send_bytes,
            recv_bytes,
        ];
        let mut bufs = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let s = if i < 3 { &compute } else { &comm };
            bufs.push(
                s.alloc_zeros::<u8>(n)
                    .map_err(derr(&format!("allocating {n} bytes on GPU {device}")))?,
            );
        }
        ctx.synchronize().map_err(derr("synchronize"))?;
        let p: Vec<u64> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| ptr(b, if i < 3 { &compute } else { &comm }))
            .collect();
        let handle = cublas::create_handle().map_err(blas_err("cublasCreate".into()))?;
        // SAFETY: valid handle and stream of this context.
        unsafe { cublas::set_stream(handle, compute.cu_stream() as cublas_sys::cudaStream_t) }
            .map_err(blas_err("cublasSetStream".into()))?;
        let mut comm_raw = std::mem::MaybeUninit::uninit();
        // SAFETY: the context is current on this thread (bound by the calls above).
        let nccl_comm = unsafe {
            nccl::comm_init_rank(
                comm_raw.as_mut_ptr(),
                cfg.world_size as i32,
                id,
                cfg.rank as i32,
            )
            .map_err(nccl_err("ncclCommInitRank".into()))?;
            comm_raw.assume_init()
        };
        Ok(CudaBackend {
            ctx,
            compute,
            comm,
            cublas: handle,
            nccl: nccl_comm,
            cfg: cfg.clone(),
            device,
            count,
            _bufs: bufs,
            a: p[0],
            b: p[1],
            c: p[2],
            send: p[3],
            recv: p[4],
        })
    }

    fn stream(&self, s: Stream) -> &Arc<CudaStream> {
        match s {
            Stream::Compute => &self.compute,
            Stream::Comm => &self.comm,
        }
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        let _ = self.ctx.synchronize();
        // SAFETY: created in `new`, destroyed once, nothing in flight.
        unsafe {
            let _ = nccl::comm_destroy(self.nccl);
            let _ = cublas::destroy_handle(self.cublas);
        }
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
        let cfg = &self.cfg;
        let (ty, compute) = match cfg.dtype {
            Dtype::Bf16 => (
                cublas_sys::cudaDataType::CUDA_R_16BF,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            Dtype::Fp16 => (
                cublas_sys::cudaDataType::CUDA_R_16F,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            Dtype::Fp32 => (
                cublas_sys::cudaDataType::CUDA_R_32F,
                cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
        };
        let stream = self.stream(s).cu_stream() as cublas_sys::cudaStream_t;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (m, n, k) = (cfg.m as i32, cfg.n as i32, cfg.k as i32);
        // SAFETY: buffers sized m*k, k*n, m*n in `new`; column-major, no transpose.
        unsafe {
            cublas::set_stream(self.cublas, stream).map_err(blas_err("cublasSetStream".into()))?;
            cublas::gemm_ex(
                self.cublas,
                cublas_sys::cublasOperation_t::CUBLAS_OP_N,
                cublas_sys::cublasOperation_t::CUBLAS_OP_N,
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
            .map_err(blas_err(format!("cublasGemmEx {}", cfg.gemm_name())))
        }
    }

    fn collective(&mut self, s: Stream) -> Result<()> {
        let cfg = &self.cfg;
        let ty = match cfg.dtype {
            Dtype::Bf16 => nccl_sys::ncclDataType_t::ncclBfloat16,
            Dtype::Fp16 => nccl_sys::ncclDataType_t::ncclFloat16,
            Dtype::Fp32 => nccl_sys::ncclDataType_t::ncclFloat32,
        };
        let stream = self.stream(s).cu_stream() as nccl_sys::cudaStream_t;
        let (send, recv) = (self.send as *const c_void, self.recv as *mut c_void);
        let elems = cfg.bytes / cfg.dtype.size();
        let shard = elems / cfg.world_size;
        let sum = nccl_sys::ncclRedOp_t::ncclSum;
        // SAFETY: send/recv sized by `collective_buffers` in `new`.
        let r = unsafe {
            match cfg.collective {
                Collective::AllReduce => {
                    nccl::all_reduce(send, recv, elems, ty, sum, self.nccl, stream)
                }
                Collective::AllGather => nccl::all_gather(send, recv, shard, ty, self.nccl, stream),
                Collective::ReduceScatter => {
                    nccl::reduce_scatter(send, recv, shard, ty, sum, self.nccl, stream)
                }
            }
        };
        r.map(|_| ())
            .map_err(nccl_err(format!("NCCL {}", cfg.collective.op())))
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
        self.ctx.synchronize().map_err(derr("synchronize"))
    }
}
