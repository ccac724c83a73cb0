//! The input formats aorta reads, and their names in `runs.format` and the manifest.

use serde::{Deserialize, Serialize};

/// What aorta recognises as an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// A PyTorch profiler (Kineto) trace.
    Kineto,
    /// A Chrome trace without Kineto's markers (see `detect`).
    Chrome,
    /// An Nsight Systems SQLite export.
    Nsys,
    /// The Python aorta tool's per-rank JSONL metrics.
    Jsonl,
    /// rocprofv3's CSV output: a process's `*_kernel_trace.csv` and its siblings, read as one.
    #[serde(rename = "rocprofv3-csv")]
    RocprofCsv,
    /// rocprofv3's JSON output (`*_results.json`).
    #[serde(rename = "rocprofv3-json")]
    RocprofJson,
    /// rocprofv3's SQLite database (`*_results.db`, rocpd).
    Rocpd,
    /// JSON that is neither a trace nor JSONL (a summary, a config): skipped in walks. The
    /// default: what a file is until a reader claims it.
    #[default]
    NotATrace,
}

impl Format {
    /// The name in `runs.format` and the manifest (the serde name).
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Format::Kineto => "kineto",
            Format::Chrome => "chrome",
            Format::Nsys => "nsys",
            Format::Jsonl => "jsonl",
            Format::RocprofCsv => "rocprofv3-csv",
            Format::RocprofJson => "rocprofv3-json",
            Format::Rocpd => "rocpd",
            Format::NotATrace => "notatrace",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn names_are_the_serde_names() {
        let all = [
            Format::Kineto,
            Format::Chrome,
            Format::Nsys,
            Format::Jsonl,
            Format::RocprofCsv,
            Format::RocprofJson,
            Format::Rocpd,
            Format::NotATrace,
        ];
        for f in all {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
        }
    }
}
