//! GPU workloads that produce real traces.
//!
//! The benchmark logic ([`bench`]) is written once against the [`Backend`] trait; the
//! [`cuda`] module implements it with cudarc (driver API, cuBLAS, NCCL, all loaded at run
//! time). A ROCm backend (HIP runtime through hip-sys, hipBLAS and RCCL loaded at run time)
//! comes next, behind a `rocm` cargo feature, as a second implementation of the same trait.
//!
//! Everything that needs no GPU — argument validation ([`config`]), the per-iteration overlap
//! numbers ([`overlap`]) and the output files ([`output`]) — is plain Rust and unit-tested.

pub mod backend;
pub mod bench;
pub mod config;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod output;
pub mod overlap;
pub mod rendezvous;

pub use backend::{Backend, Stream};
pub use error::{Error, Result};
