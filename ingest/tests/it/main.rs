//! aorta-ingest's integration tests, built as one test binary (arrow, parquet and the reader
//! linked once, not once per test file). Each module below covers one area and says what in
//! its own docs; `common` holds what several of them share.
//!
//! Run one module with its path as the filter, e.g. `cargo test -p aorta-ingest --test it
//! rocprof_csv::`.

mod common;

mod chrome_nsys_robustness;
mod chrome_steps;
mod fuzz_replay;
mod golden_categories;
mod golden_subcategories;
mod kineto_arg_steps;
mod robustness;
mod rocprof;
mod rocprof_csv;
mod rocprof_robustness;
mod rocprof_steps;
mod rules_and_shapes;
