//! What both binaries do before they touch a GPU: ranks from the environment (as torchrun
//! sets them), the choice of backend (`--backend`) and of device. Kept here so the two
//! binaries agree and it is tested.

use crate::config::{Dtype, GemmShape};
use crate::error::{bail_config, Error, Result};
use clap::ValueEnum;
use std::process::ExitCode;

/// The GEMM flags both binaries take.
#[derive(clap::Args, Debug, Clone)]
pub struct GemmArgs {
    /// GEMM rows of A and C.
    #[arg(long, default_value_t = 4096)]
    pub(crate) m: usize,
    /// GEMM columns of B and C.
    #[arg(long, default_value_t = 4096)]
    pub(crate) n: usize,
    /// GEMM inner dimension.
    #[arg(long, default_value_t = 4096)]
    pub(crate) k: usize,
    #[arg(long, value_enum, default_value_t = Dtype::Bf16)]
    pub(crate) dtype: Dtype,
}

impl GemmArgs {
    /// The GEMM these flags describe (checked later, by the workload config's `validate`).
    pub fn shape(&self) -> GemmShape {
        GemmShape {
            m: self.m,
            n: self.n,
            k: self.k,
            dtype: self.dtype,
        }
    }
}

/// Where both binaries run: the GPU and its runtime.
#[derive(clap::Args, Debug, Clone)]
pub struct PlaceArgs {
    /// GPU to use (default: LOCAL_RANK, else RANK modulo the visible device count).
    #[arg(long)]
    pub device: Option<usize>,
    /// GPU runtime: auto = CUDA if its driver sees a GPU, else ROCm (builds with `rocm`).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
}

/// A workload binary's exit: on error one line on stderr (`NAME: error: …`), status 1.
pub fn exit<E: std::fmt::Display>(name: &str, r: std::result::Result<(), E>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// CUDA if its driver loads and sees a GPU, else ROCm (when built with `rocm`).
    Auto,
    /// CUDA, or an error naming why it is unusable.
    Cuda,
    /// ROCm (an error in a build without the `rocm` feature).
    Rocm,
}

/// A GPU runtime this crate can drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// NVIDIA GPUs through cudarc (cargo feature `cuda`, the default).
    Cuda,
    /// AMD GPUs through hip-sys, hipBLAS and RCCL (cargo feature `rocm`).
    Rocm,
}

/// Probe `rt` (driver, device, libraries; RCCL/NCCL only with `collectives`); `None` when this
/// build does not include that backend.
pub fn probe(rt: Runtime, collectives: bool) -> Option<Result<()>> {
    match rt {
        #[cfg(feature = "cuda")]
        Runtime::Cuda => Some(crate::cuda::probe(collectives)),
        #[cfg(feature = "rocm")]
        Runtime::Rocm => Some(crate::rocm::probe(collectives)),
        #[allow(unreachable_patterns)]
        _ => {
            let _ = collectives;
            None
        }
    }
}

fn feature_name(rt: Runtime) -> &'static str {
    match rt {
        Runtime::Cuda => "cuda",
        Runtime::Rocm => "rocm",
    }
}

/// The backend to run on. `auto` takes CUDA when it probes fine, falls back to ROCm only when
/// CUDA is absent (no driver or no device — a broken CUDA setup is reported, not skipped),
/// and reports both reasons when neither is there.
pub fn choose(
    choice: BackendChoice,
    probe: impl Fn(Runtime) -> Option<Result<()>>,
) -> Result<Runtime> {
    let explicit = |rt: Runtime| match probe(rt) {
        Some(r) => r.map(|()| rt),
        None => Err(Error::config(format!(
            "built without the `{0}` feature: rebuild with `cargo build --features {0}`",
            feature_name(rt)
        ))),
    };
    match choice {
        BackendChoice::Cuda => return explicit(Runtime::Cuda),
        BackendChoice::Rocm => return explicit(Runtime::Rocm),
        BackendChoice::Auto => {}
    }
    let cuda = match probe(Runtime::Cuda) {
        Some(Ok(())) => return Ok(Runtime::Cuda),
        Some(Err(e)) if !e.is_no_gpu() => return Err(e),
        other => other,
    };
    match (cuda, probe(Runtime::Rocm)) {
        (_, Some(Ok(()))) => Ok(Runtime::Rocm),
        (Some(Err(c)), Some(Err(r))) if r.is_no_gpu() => Err(Error::NoGpu {
            cuda: Box::new(c),
            rocm: Box::new(r),
        }),
        (_, Some(Err(r))) => Err(r),
        (Some(Err(c)), None) => Err(c),
        (_, None) => Err(Error::config(
            "built with neither the `cuda` nor the `rocm` feature: no GPU backend",
        )),
    }
}

/// A non-negative integer environment variable; `None` when unset.
pub fn env_usize(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => parse_usize(name, &v).map(Some),
        Err(_) => Ok(None),
    }
}

fn parse_usize(name: &str, v: &str) -> Result<usize> {
    v.trim()
        .parse()
        .map_err(|_| Error::config(format!("{name}={v:?} is not a non-negative integer")))
}

/// `RANK` and `WORLD_SIZE` (default 0 and 1).
pub fn rank_and_world() -> Result<(usize, usize)> {
    Ok((
        env_usize("RANK")?.unwrap_or(0),
        env_usize("WORLD_SIZE")?.unwrap_or(1),
    ))
}

/// The GPU of this rank: `--device`, else `LOCAL_RANK`, else `RANK` modulo the visible count.
pub fn pick_device(
    flag: Option<usize>,
    local_rank: Option<usize>,
    rank: usize,
    count: usize,
) -> Result<usize> {
    if count == 0 {
        bail_config!("no GPU visible");
    }
    let device = flag.or(local_rank).unwrap_or(rank % count);
    if device >= count {
        bail_config!("GPU {device} requested but only {count} visible");
    }
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_choice() {
        assert_eq!(pick_device(Some(1), Some(0), 0, 2).unwrap(), 1);
        assert_eq!(pick_device(None, Some(1), 0, 2).unwrap(), 1);
        assert_eq!(pick_device(None, None, 5, 2).unwrap(), 1);
        let e = pick_device(Some(2), None, 0, 2).unwrap_err();
        assert_eq!(e.to_string(), "GPU 2 requested but only 2 visible");
    }

    fn no_cuda() -> Error {
        Error::NoDriver {
            runtime: "CUDA",
            library: "libcuda.so",
            hint: "no NVIDIA GPU or driver here",
        }
    }

    fn no_rocm() -> Error {
        Error::NoDevice {
            runtime: "ROCm",
            detail: "hipGetDeviceCount returned hipErrorNoDevice".into(),
        }
    }

    #[test]
    fn auto_prefers_cuda_then_rocm() {
        use BackendChoice::Auto;
        let both_ok = |_| Some(Ok(()));
        assert_eq!(choose(Auto, both_ok).unwrap(), Runtime::Cuda);
        let rocm_only = |rt| match rt {
            Runtime::Cuda => Some(Err(no_cuda())),
            Runtime::Rocm => Some(Ok(())),
        };
        assert_eq!(choose(Auto, rocm_only).unwrap(), Runtime::Rocm);
        let cuda_not_built = |rt| match rt {
            Runtime::Cuda => None,
            Runtime::Rocm => Some(Ok(())),
        };
        assert_eq!(choose(Auto, cuda_not_built).unwrap(), Runtime::Rocm);
    }

    #[test]
    fn auto_reports_why_not() {
        use BackendChoice::Auto;
        let neither = |rt| match rt {
            Runtime::Cuda => Some(Err(no_cuda())),
            Runtime::Rocm => Some(Err(no_rocm())),
        };
        assert_eq!(
            choose(Auto, neither).unwrap_err().to_string(),
            "no GPU: no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver \
             here); no ROCm GPU: hipGetDeviceCount returned hipErrorNoDevice"
        );
        // Without the rocm feature the CUDA line stays exactly what it was.
        let cuda_only = |rt| match rt {
            Runtime::Cuda => Some(Err(no_cuda())),
            Runtime::Rocm => None,
        };
        assert_eq!(
            choose(Auto, cuda_only).unwrap_err().to_string(),
            no_cuda().to_string()
        );
        // A broken CUDA install (cuBLAS missing) is reported, not skipped for ROCm.
        let broken = |rt| match rt {
            Runtime::Cuda => Some(Err(Error::NoLibrary {
                name: "cuBLAS",
                library: "libcublas.so",
                hint: "set LD_LIBRARY_PATH",
            })),
            Runtime::Rocm => Some(Ok(())),
        };
        assert!(choose(Auto, broken)
            .unwrap_err()
            .to_string()
            .starts_with("cuBLAS not found"));
        // An AMD GPU without hipBLAS: the ROCm reason, not "no GPU".
        let no_blas = |rt| match rt {
            Runtime::Cuda => Some(Err(no_cuda())),
            Runtime::Rocm => Some(Err(Error::NoLibrary {
                name: "hipBLAS",
                library: "libhipblas.so.3",
                hint: "x",
            })),
        };
        assert!(choose(Auto, no_blas)
            .unwrap_err()
            .to_string()
            .starts_with("hipBLAS not found"));
    }

    #[test]
    fn explicit_choice() {
        let cuda_only = |rt| match rt {
            Runtime::Cuda => Some(Ok(())),
            Runtime::Rocm => None,
        };
        assert_eq!(
            choose(BackendChoice::Cuda, cuda_only).unwrap(),
            Runtime::Cuda
        );
        assert_eq!(
            choose(BackendChoice::Rocm, cuda_only)
                .unwrap_err()
                .to_string(),
            "built without the `rocm` feature: rebuild with `cargo build --features rocm`"
        );
        let rocm_absent = |_| Some(Err(no_rocm()));
        assert_eq!(
            choose(BackendChoice::Rocm, rocm_absent)
                .unwrap_err()
                .to_string(),
            no_rocm().to_string()
        );
    }

    #[test]
    fn env_values() {
        assert_eq!(parse_usize("RANK", " 3 ").unwrap(), 3);
        let e = parse_usize("RANK", "-1").unwrap_err();
        assert_eq!(e.to_string(), "RANK=\"-1\" is not a non-negative integer");
    }
}
