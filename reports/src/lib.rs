//! Self-contained HTML reports of an aorta dataset (`aorta report`) and of a comparison
//! (`aorta compare`'s page).
//!
//! Each call writes one page: plotly charts with plotly.js embedded (no CDN, so the page
//! opens offline, in CI's sandbox and from an e-mail attachment) and small tables with the
//! key numbers, formatted exactly as `aorta overlap` prints them ([`fmt`]). Everything is
//! read and checked before the page is written, and the page is written to a temporary file
//! beside the output and renamed, so a failure never leaves partial HTML behind.

pub mod compare;
mod error;
pub mod fmt;
mod frames;
mod page;
pub mod run;
mod sweep;

pub use compare::compare_report;
pub use error::ReportError;
pub use run::{run_report, RunReport, RunReportOptions};
pub use sweep::sweep_report;
