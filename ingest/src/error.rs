//! Library errors. Every one names the file, and where it can, the byte offset or line.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{path}: byte {offset}: {msg}")]
    Parse {
        path: String,
        offset: u64,
        msg: String,
    },
    #[error("{path}: line {line}: {msg}")]
    Line {
        path: String,
        line: u64,
        msg: String,
    },
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: writing Parquet: {source}")]
    Parquet {
        path: String,
        source: parquet::errors::ParquetError,
    },
    #[error(transparent)]
    Rules(#[from] crate::classify::RulesError),
    /// An option the user gave that cannot work, before any file is read.
    #[error("{0}")]
    Usage(String),
}

impl IngestError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        IngestError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub fn file(path: &Path, msg: impl Into<String>) -> Self {
        IngestError::File {
            path: path.display().to_string(),
            msg: msg.into(),
        }
    }
}

/// A parse failure before the file name is attached: offset in the decompressed stream.
#[derive(Debug, Clone)]
pub struct ParseErr {
    pub offset: u64,
    pub msg: String,
}

impl ParseErr {
    pub fn new(offset: u64, msg: impl Into<String>) -> Self {
        ParseErr {
            offset,
            msg: msg.into(),
        }
    }

    pub fn at(self, path: &Path) -> IngestError {
        IngestError::Parse {
            path: path.display().to_string(),
            offset: self.offset,
            msg: self.msg,
        }
    }
}

pub type Result<T, E = IngestError> = std::result::Result<T, E>;
