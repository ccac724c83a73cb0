//! Columnar transforms over an aorta dataset (polars).
//!
//! This crate reads what `aorta-ingest` wrote, through the same `schema` module, so a column
//! renamed in one place breaks the build or a test, never a user's notebook.

pub mod collectives;
pub mod comm_split;
pub mod compare;
#[cfg(test)]
mod cycles;
pub mod dataset;
pub mod dataset_edit;
pub mod fresh;
pub mod idle;
pub mod info;
pub mod intervals;
mod jsonl;
pub mod kernels;
mod launch;
pub mod memory;
mod nccl;
pub mod overlap;
mod overlap_tables;
mod par;
pub mod perf;
pub mod perfetto;
pub mod rows;
pub mod sql;
pub mod steps;
pub mod subcategory;
pub mod summary;
pub mod tuning;
