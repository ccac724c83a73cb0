//! GPU workloads that produce real traces.
//!
//! Two workloads share one design: GEMMs on a low-priority compute stream and something else
//! on a high-priority side stream — NCCL collectives (`aorta-overlap-bench`) or async
//! host↔device copies (`aorta-copy-overlap`, [`copy_overlap`]). The loop ([`mod@bench`]) and
//! the output writers ([`output`]) are written once against the [`Backend`] trait; the [`cuda`] module
//! implements it with cudarc (driver API, cuBLAS, NCCL, all loaded at run time); the `rocm`
//! module (cargo feature `rocm`) is the second implementation: the HIP runtime through
//! hip-sys, hipBLAS and RCCL loaded at run time. [`launch`] picks one
//! (`--backend auto|cuda|rocm`).
//!
//! Everything that needs no GPU — argument validation ([`config`]), ranks and device choice
//! ([`launch`]), the NCCL-id hand-over ([`rendezvous`]), the per-iteration overlap numbers
//! (`overlap`) and the output files ([`output`]) — is plain Rust and unit-tested, the loop on
//! a simulated GPU. Library errors are one [`Error`] enum; only the binaries use `anyhow`.

pub mod backend;
pub mod bench;
pub mod config;
pub mod copy_overlap;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod knobs;
pub mod launch;
pub mod output;
mod overlap;
pub mod rendezvous;
#[cfg(feature = "rocm")]
pub mod rocm;

pub use backend::{Backend, Stream};
pub use error::{Error, Result};
