//! aorta ingest: GPU profiler traces in, one Parquet dataset out.
//!
//! The crate is a pipeline of small stages (docs/ARCHITECTURE.md): `pipeline` runs one
//! ingest; `dataset` finds inputs and commits output atomically; `detect` picks each file's
//! reader; `source` opens and decompresses; each format module (`kineto`, `chrome`, `nsys`,
//! `rocprof`, `jsonl`) turns bytes into rows with bounded memory, the JSON ones through the
//! shared `walk` and `trace_event`; `classify` applies the kernel taxonomy; `sink`, fed by
//! `writer_thread`, and `writer` turn rows into Parquet in the one schema of `schema`.

pub mod alloc;
pub mod atomic;
mod chrome;
pub mod classify;
pub mod commit;
pub mod cpu;
pub mod dataset;
pub mod detect;
pub mod diag;
mod dict;
pub mod error;
pub mod file;
pub mod format;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod job;
mod json;
mod jsonl;
mod kineto;
pub mod lock;
mod nsys;
mod pipeline;
pub mod rank_map;
mod rocprof;
mod rows;
pub mod schema;
mod settle;
pub mod shard;
mod sink;
mod source;
mod sqlite;
mod step_set;
pub mod step_span;
pub mod strict;
pub mod subcategory;
mod summary;
mod trace_event;
mod walk;
mod window;
pub mod writer;
mod writer_thread;

pub use alloc::tune_allocator;
pub use error::{IngestError, Result};
pub use pipeline::{ingest, Options, Progress, Summary};
pub use shard::Shard;
