//! The `aorta` crate's integration tests, built as one test binary: polars, arrow and the
//! workspace crates are linked once, not once per test file. Each module below covers one
//! area and says what in its own docs; `common` holds what several of them share (the
//! corpus, the dataset built once from it, the raw traces read independently, driving the
//! `aorta` binary, headless Chromium, the hand-made compare tables).
//!
//! Run one module with its path as the filter, e.g. `cargo test --test it report_cli::`.
//! The fixture data lives beside this directory, in `tests/golden/`.

mod common;

mod chrome_fixtures;
mod cli_dataset;
mod cli_errors;
mod collectives;
mod compare_cli;
mod compare_gate;
mod compare_geomean;
mod compare_pairs;
mod corpus;
mod fixtures;
mod notebooks;
mod nsys_chrome_corpus;
mod overlap_cli;
mod overlap_corpus;
mod perf;
mod reliability;
mod report_browser;
mod report_cli;
mod report_compare;
mod report_headline;
mod report_pages;
mod rocprof_corpus;
mod run_cli;
mod schema;
mod shard;
mod step_marker;
mod sweep;
mod toolbox;
mod tp_scaling;
mod tp_windows;
mod workloads;
