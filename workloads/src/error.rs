//! The library's one error type.
//!
//! Every failure a workload can meet ends as one line on stderr (`aorta-…: error: …`), so each
//! variant carries exactly what that line needs: which library or call, which code, which path.
//! The binaries wrap it in `anyhow` at their edge; the library itself never does.

use std::path::PathBuf;

/// `return Err(Error::Config(format!(…)))`: the library's `bail!` for bad arguments.
macro_rules! bail_config {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Config(format!($($arg)*)))
    };
}
pub(crate) use bail_config;

/// Why a workload could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The GPU driver or runtime library could not be loaded at all.
    #[error("no {runtime} driver: {library} could not be loaded ({hint})")]
    NoDriver {
        /// `CUDA` or `ROCm`.
        runtime: &'static str,
        /// The shared object that was looked for, e.g. `libcuda.so`.
        library: &'static str,
        /// What the user can do about it, e.g. `no NVIDIA GPU or driver here`.
        hint: &'static str,
    },
    /// A library the workload opens at run time (cuBLAS, NCCL, hipBLAS, RCCL) is missing.
    #[error("{name} not found: {library} could not be loaded ({hint})")]
    NoLibrary {
        /// `cuBLAS`, `NCCL`, `hipBLAS`, `RCCL`.
        name: &'static str,
        /// The first shared object that was looked for, e.g. `libnccl.so.2`.
        library: &'static str,
        /// What the user can do about it, e.g. `set LD_LIBRARY_PATH`.
        hint: &'static str,
    },
    /// The runtime loaded but there is no usable device.
    #[error("no {runtime} GPU: {detail}")]
    NoDevice {
        /// `CUDA` or `ROCm`.
        runtime: &'static str,
        /// The call that found no device and what it returned.
        detail: String,
    },
    /// `--backend auto` found neither GPU runtime: both reasons, CUDA's first.
    #[error("no GPU: {cuda}; {rocm}")]
    NoGpu {
        /// Why CUDA was not usable.
        cuda: Box<Error>,
        /// Why ROCm was not usable.
        rocm: Box<Error>,
    },
    /// A GPU API call returned an error code.
    #[error("{call} failed: {code}")]
    Api {
        /// The call, with what it was doing where that helps (`cublasGemmEx gemm_bf16_…`).
        call: String,
        /// The library's name for the code (`CUDA_ERROR_OUT_OF_MEMORY`, `hipErrorNoDevice`).
        code: String,
    },
    /// An argument or environment variable that would fail (or mean nothing) on the GPU.
    #[error("{0}")]
    Config(String),
    /// Handing the NCCL/RCCL unique id between ranks failed.
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// Reading or writing a file. The I/O error is part of the message (not a `source`), so
    /// the line is complete however it is printed and `{:#}` does not repeat it.
    #[error("{action} {}: {err}", path.display())]
    Io {
        /// `writing`, `reading`, `creating`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error, printed as part of the message.
        err: std::io::Error,
    },
}

impl Error {
    /// An [`Error::Api`] from a call name and anything that names the code.
    pub(crate) fn api(call: impl Into<String>, code: impl std::fmt::Display) -> Self {
        Error::Api {
            call: call.into(),
            code: code.to_string(),
        }
    }

    /// The runtime or its device is absent (rather than broken): `--backend auto` may try the
    /// other one.
    pub(crate) fn is_no_gpu(&self) -> bool {
        matches!(
            self,
            Error::NoDriver { .. } | Error::NoDevice { .. } | Error::NoGpu { .. }
        )
    }

    /// An [`Error::Config`].
    pub(crate) fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }

    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |err| Error::Io { action, path, err }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let e = Error::NoDriver {
            runtime: "CUDA",
            library: "libcuda.so",
            hint: "no NVIDIA GPU or driver here",
        };
        assert_eq!(
            e.to_string(),
            "no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver here)"
        );
        let e = Error::api("cuEventRecord", "CUDA_ERROR_INVALID_HANDLE");
        assert_eq!(
            e.to_string(),
            "cuEventRecord failed: CUDA_ERROR_INVALID_HANDLE"
        );
        let e = Error::io("writing", "/x/y")(std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "writing /x/y: disk full");
        let e = Error::NoDevice {
            runtime: "ROCm",
            detail: "hipGetDeviceCount returned hipErrorNoDevice".into(),
        };
        assert_eq!(
            e.to_string(),
            "no ROCm GPU: hipGetDeviceCount returned hipErrorNoDevice"
        );
    }
}
