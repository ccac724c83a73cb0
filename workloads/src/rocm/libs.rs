//! hipBLAS and RCCL, opened at run time with `libloading`.
//!
//! Only the HIP runtime is linked (hip-sys); the two libraries are looked up when a run needs
//! them, so the `rocm` build needs no hipBLAS or RCCL headers, a machine without them gets
//! one clear line, and one binary works with the hipBLAS of ROCm 5, 6 and 7, whose
//! `hipblasGemmEx` differs (see [`gemm_abi`]). RCCL has NCCL's C API under NCCL's names.

use crate::config::Dtype;
use crate::error::{Error, Result};
use hip_sys::hiprt::hipStream_t;
use libloading::Library;
use std::ffi::{c_char, c_int, c_void};

/// Shared objects tried, in order: the sonames of ROCm 7, 6 and 5, then the dev symlink.
pub(crate) const HIPBLAS_LIBS: &[&str] = &[
    "libhipblas.so.3",
    "libhipblas.so.2",
    "libhipblas.so.1",
    "libhipblas.so.0",
    "libhipblas.so",
];
/// RCCL's soname, then the dev symlink.
pub(crate) const RCCL_LIBS: &[&str] = &["librccl.so.1", "librccl.so"];

/// Open the first of `candidates` that loads; else [`Error::NoLibrary`] naming `name`.
pub(crate) fn open_first(
    name: &'static str,
    candidates: &'static [&'static str],
) -> Result<Library> {
    for &c in candidates {
        // SAFETY: loading a ROCm library runs only its initialisers, which expect no more
        // than a process with the HIP runtime in it.
        if let Ok(lib) = unsafe { Library::new(c) } {
            return Ok(lib);
        }
    }
    Err(Error::NoLibrary {
        name,
        library: candidates[0],
        hint: "install it from ROCm or set LD_LIBRARY_PATH",
    })
}

/// The function `name` of `lib` as a `T` (a function pointer type matching its C signature).
///
/// # Safety
/// `T` must be the symbol's real type, and the pointer must not outlive `lib`.
unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T> {
    // SAFETY: the caller promises `T` is the symbol's type and that the pointer does not
    // outlive `lib` (this function's contract).
    unsafe {
        lib.get::<T>(name.as_bytes())
            .map(|s| *s)
            .map_err(|e| Error::api(format!("looking up {name}"), e))
    }
}

// ---- hipBLAS ----

/// Which `hipblasGemmEx` signature the loaded hipBLAS has. Both pass C enums as `int`; only
/// the values differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmAbi {
    /// hipBLAS < 2 (ROCm 5): `hipblasDatatype_t` for the data and the compute type.
    DatatypeT,
    /// hipBLAS ≥ 2 (`HIPBLAS_V2`): `hipDataType` for the data, `hipblasComputeType_t`.
    HipDataType,
}

/// The GEMM symbol and its ABI: hipBLAS 2.x (ROCm 6) exports the new signature as
/// `hipblasGemmEx_v2` beside the old one; hipBLAS 3 (ROCm 7, which added
/// `hipblasSetWorkspace`) has only the new one, under the plain name; older ones only the old.
pub(crate) fn gemm_abi(has_v2: bool, has_set_workspace: bool) -> (&'static str, GemmAbi) {
    if has_v2 {
        ("hipblasGemmEx_v2", GemmAbi::HipDataType)
    } else if has_set_workspace {
        ("hipblasGemmEx", GemmAbi::HipDataType)
    } else {
        ("hipblasGemmEx", GemmAbi::DatatypeT)
    }
}

/// `HIPBLAS_OP_N`.
pub(crate) const HIPBLAS_OP_N: c_int = 111;
/// `HIPBLAS_GEMM_DEFAULT`.
pub(crate) const HIPBLAS_GEMM_DEFAULT: c_int = 160;

/// (data type of A, B, C; compute type) for `dtype`, FP32 accumulation as on CUDA.
pub(crate) fn gemm_types(dtype: Dtype, abi: GemmAbi) -> (c_int, c_int) {
    match abi {
        // HIPBLAS_R_16B 168, HIPBLAS_R_16F 150, HIPBLAS_R_32F 151.
        GemmAbi::DatatypeT => match dtype {
            Dtype::Bf16 => (168, 151),
            Dtype::Fp16 => (150, 151),
            Dtype::Fp32 => (151, 151),
        },
        // HIP_R_16BF 14, HIP_R_16F 2, HIP_R_32F 0; HIPBLAS_COMPUTE_32F 2.
        GemmAbi::HipDataType => match dtype {
            Dtype::Bf16 => (14, 2),
            Dtype::Fp16 => (2, 2),
            Dtype::Fp32 => (0, 2),
        },
    }
}

/// hipBLAS's name of a `hipblasStatus_t`.
pub(crate) fn hipblas_status_name(s: c_int) -> String {
    const NAMES: [&str; 12] = [
        "SUCCESS",
        "NOT_INITIALIZED",
        "ALLOC_FAILED",
        "INVALID_VALUE",
        "MAPPING_ERROR",
        "EXECUTION_FAILED",
        "INTERNAL_ERROR",
        "NOT_SUPPORTED",
        "ARCH_MISMATCH",
        "HANDLE_IS_NULLPTR",
        "INVALID_ENUM",
        "UNKNOWN",
    ];
    match usize::try_from(s).ok().and_then(|i| NAMES.get(i)) {
        Some(n) => format!("HIPBLAS_STATUS_{n}"),
        None => format!("hipblasStatus_t {s}"),
    }
}

fn blas_check(call: &str, s: c_int) -> Result<()> {
    if s == 0 {
        Ok(())
    } else {
        Err(Error::api(call, hipblas_status_name(s)))
    }
}

pub(crate) type HipblasHandle = *mut c_void;
type GemmExFn = unsafe extern "C" fn(
    HipblasHandle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// The loaded hipBLAS: one handle and the four calls the workloads make.
pub(crate) struct Hipblas {
    handle: HipblasHandle,
    destroy: unsafe extern "C" fn(HipblasHandle) -> c_int,
    set_stream: unsafe extern "C" fn(HipblasHandle, hipStream_t) -> c_int,
    gemm_ex: GemmExFn,
    pub abi: GemmAbi,
    // Last: the function pointers above point into it.
    _lib: Library,
}

/// A column-major GEMM `C = A·B` on device buffers.
pub(crate) struct GemmCall {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: Dtype,
    pub a: *const c_void,
    pub b: *const c_void,
    pub c: *mut c_void,
}

impl Hipblas {
    /// Open hipBLAS and create a handle (on the current device).
    pub(crate) fn load() -> Result<Self> {
        let lib = open_first("hipBLAS", HIPBLAS_LIBS)?;
        // SAFETY: the types below are hipBLAS's C signatures (enums as int, handles and
        // streams as pointers); the pointers live in `Hipblas` together with `lib`.
        unsafe {
            let has = |n: &str| lib.get::<unsafe extern "C" fn()>(n.as_bytes()).is_ok();
            let (gemm_name, abi) = gemm_abi(has("hipblasGemmEx_v2"), has("hipblasSetWorkspace"));
            let create: unsafe extern "C" fn(*mut HipblasHandle) -> c_int =
                sym(&lib, "hipblasCreate")?;
            let mut handle: HipblasHandle = std::ptr::null_mut();
            blas_check("hipblasCreate", create(&mut handle))?;
            Ok(Hipblas {
                handle,
                destroy: sym(&lib, "hipblasDestroy")?,
                set_stream: sym(&lib, "hipblasSetStream")?,
                gemm_ex: sym(&lib, gemm_name)?,
                abi,
                _lib: lib,
            })
        }
    }

    /// Enqueue `g` on `stream` (FP32 accumulation, no transposes, default algorithm).
    ///
    /// # Safety
    /// `a`, `b`, `c` must be device buffers of m·k, k·n and m·n elements of `dtype` that stay
    /// alive until the GEMM has run.
    pub(crate) unsafe fn gemm(&self, stream: hipStream_t, g: &GemmCall, name: &str) -> Result<()> {
        // SAFETY: the function pointers came from the loaded hipBLAS with their C signatures
        // (`sym`), `self.handle` is live while `self` is, and the caller promises the buffers.
        unsafe {
            blas_check("hipblasSetStream", (self.set_stream)(self.handle, stream))?;
            let (ty, compute) = gemm_types(g.dtype, self.abi);
            let (alpha, beta) = (1.0f32, 0.0f32);
            let (m, n, k) = (g.m as c_int, g.n as c_int, g.k as c_int);
            let s = (self.gemm_ex)(
                self.handle,
                HIPBLAS_OP_N,
                HIPBLAS_OP_N,
                m,
                n,
                k,
                &alpha as *const f32 as *const c_void,
                g.a,
                ty,
                m,
                g.b,
                ty,
                k,
                &beta as *const f32 as *const c_void,
                g.c,
                ty,
                m,
                compute,
                HIPBLAS_GEMM_DEFAULT,
            );
            blas_check(&format!("hipblasGemmEx {name}"), s)
        }
    }
}

impl Drop for Hipblas {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `load` and is destroyed once, before `_lib` drops.
        let _ = unsafe { (self.destroy)(self.handle) };
    }
}

// ---- RCCL ----

/// `ncclUniqueId`: 128 opaque bytes, passed by value to `ncclCommInitRank`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NcclUniqueId {
    pub internal: [c_char; crate::rendezvous::ID_BYTES],
}

pub(crate) type NcclComm = *mut c_void;
/// `ncclSum`.
pub(crate) const NCCL_SUM: c_int = 0;

/// RCCL's `ncclDataType_t` for `dtype` (ncclBfloat16 9, ncclFloat16 6, ncclFloat32 7).
pub(crate) fn rccl_type(dtype: Dtype) -> c_int {
    match dtype {
        Dtype::Bf16 => 9,
        Dtype::Fp16 => 6,
        Dtype::Fp32 => 7,
    }
}

/// NCCL's (and RCCL's) name of an `ncclResult_t`.
pub(crate) fn nccl_result_name(r: c_int) -> String {
    const NAMES: [&str; 8] = [
        "ncclSuccess",
        "ncclUnhandledCudaError",
        "ncclSystemError",
        "ncclInternalError",
        "ncclInvalidArgument",
        "ncclInvalidUsage",
        "ncclRemoteError",
        "ncclInProgress",
    ];
    match usize::try_from(r).ok().and_then(|i| NAMES.get(i)) {
        Some(n) => n.to_string(),
        None => format!("ncclResult_t {r}"),
    }
}

pub(crate) fn nccl_check(call: &str, r: c_int) -> Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(Error::api(call, nccl_result_name(r)))
    }
}

type CollFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    NcclComm,
    hipStream_t,
) -> c_int;
type GatherFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, NcclComm, hipStream_t) -> c_int;

/// The loaded RCCL: the calls the overlap bench makes.
pub(crate) struct Rccl {
    pub get_unique_id: unsafe extern "C" fn(*mut NcclUniqueId) -> c_int,
    pub comm_init_rank: unsafe extern "C" fn(*mut NcclComm, c_int, NcclUniqueId, c_int) -> c_int,
    pub comm_destroy: unsafe extern "C" fn(NcclComm) -> c_int,
    pub all_reduce: CollFn,
    pub reduce_scatter: CollFn,
    pub all_gather: GatherFn,
    // Last: the function pointers above point into it.
    _lib: Library,
}

impl Rccl {
    pub(crate) fn load() -> Result<Self> {
        let lib = open_first("RCCL", RCCL_LIBS)?;
        // SAFETY: NCCL's C signatures (enums as int, comm and stream as pointers, the id by
        // value); the pointers live in `Rccl` together with `lib`.
        unsafe {
            Ok(Rccl {
                get_unique_id: sym(&lib, "ncclGetUniqueId")?,
                comm_init_rank: sym(&lib, "ncclCommInitRank")?,
                comm_destroy: sym(&lib, "ncclCommDestroy")?,
                all_reduce: sym(&lib, "ncclAllReduce")?,
                reduce_scatter: sym(&lib, "ncclReduceScatter")?,
                all_gather: sym(&lib, "ncclAllGather")?,
                _lib: lib,
            })
        }
    }

    /// A fresh unique id, as the bytes the rendezvous file holds.
    pub(crate) fn unique_id(&self) -> Result<[u8; crate::rendezvous::ID_BYTES]> {
        let mut id = NcclUniqueId {
            internal: [0; crate::rendezvous::ID_BYTES],
        };
        // SAFETY: `id` is a valid out-pointer of the C struct's layout.
        nccl_check("ncclGetUniqueId", unsafe { (self.get_unique_id)(&mut id) })?;
        Ok(id.internal.map(|c| c as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_one_line() {
        let e = open_first("RCCL", &["libaorta-no-such-rccl.so.1"])
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "RCCL not found: libaorta-no-such-rccl.so.1 could not be loaded (install it from \
             ROCm or set LD_LIBRARY_PATH)"
        );
    }

    #[test]
    fn this_machine_has_no_hipblas_or_rccl() {
        if std::path::Path::new("/dev/kfd").exists() {
            return;
        }
        let e = Hipblas::load().err().unwrap();
        assert!(
            e.to_string()
                .starts_with("hipBLAS not found: libhipblas.so.3"),
            "{e}"
        );
        let e = Rccl::load().err().unwrap();
        assert!(
            e.to_string().starts_with("RCCL not found: librccl.so.1"),
            "{e}"
        );
    }

    #[test]
    fn gemm_abi_by_symbols() {
        assert_eq!(
            gemm_abi(true, false),
            ("hipblasGemmEx_v2", GemmAbi::HipDataType)
        );
        assert_eq!(
            gemm_abi(true, true),
            ("hipblasGemmEx_v2", GemmAbi::HipDataType)
        );
        assert_eq!(
            gemm_abi(false, true),
            ("hipblasGemmEx", GemmAbi::HipDataType)
        );
        assert_eq!(
            gemm_abi(false, false),
            ("hipblasGemmEx", GemmAbi::DatatypeT)
        );
    }

    #[test]
    fn dtype_enums() {
        assert_eq!(gemm_types(Dtype::Bf16, GemmAbi::DatatypeT), (168, 151));
        assert_eq!(gemm_types(Dtype::Fp16, GemmAbi::DatatypeT), (150, 151));
        assert_eq!(gemm_types(Dtype::Fp32, GemmAbi::DatatypeT), (151, 151));
        assert_eq!(gemm_types(Dtype::Bf16, GemmAbi::HipDataType), (14, 2));
        assert_eq!(gemm_types(Dtype::Fp16, GemmAbi::HipDataType), (2, 2));
        assert_eq!(gemm_types(Dtype::Fp32, GemmAbi::HipDataType), (0, 2));
        assert_eq!(
            [Dtype::Bf16, Dtype::Fp16, Dtype::Fp32].map(rccl_type),
            [9, 6, 7]
        );
    }

    #[test]
    fn status_names() {
        assert_eq!(hipblas_status_name(3), "HIPBLAS_STATUS_INVALID_VALUE");
        assert_eq!(hipblas_status_name(11), "HIPBLAS_STATUS_UNKNOWN");
        assert_eq!(hipblas_status_name(42), "hipblasStatus_t 42");
        assert_eq!(nccl_result_name(2), "ncclSystemError");
        assert_eq!(nccl_result_name(-1), "ncclResult_t -1");
        let e = nccl_check("ncclAllReduce", 4).unwrap_err();
        assert_eq!(e.to_string(), "ncclAllReduce failed: ncclInvalidArgument");
        assert!(blas_check("hipblasCreate", 0).is_ok());
    }
}
