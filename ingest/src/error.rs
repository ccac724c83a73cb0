//! Library errors. Every one names the file, and where it can, the byte offset or line.

use std::path::Path;

/// Why an ingest (or a file of it) failed: every variant names the file, and where it can the
/// byte offset or line, so the CLI prints one line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    // Messages may quote the input (a key, an SQLite error naming a damaged table): control
    // characters are escaped so that every error stays one line (`one_line`).
    /// Malformed input at a byte offset of the (decompressed) stream.
    #[error("{path}: byte {offset}: {}", one_line(msg))]
    Parse {
        /// The input file.
        path: String,
        /// Byte offset in the decompressed stream.
        offset: u64,
        /// What was expected there.
        msg: String,
    },
    /// Malformed input at a line of a line-based file (CSV, JSONL, a rank map).
    #[error("{path}: line {line}: {}", one_line(msg))]
    Line {
        /// The input file.
        path: String,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        msg: String,
    },
    /// A problem with a whole file: not the format it claims, a damaged SQLite database or
    /// manifest, a trace with nothing aorta reads.
    #[error("{path}: {}", one_line(msg))]
    File {
        /// The input file.
        path: String,
        /// What is wrong with it.
        msg: String,
    },
    /// Reading an input or writing the dataset failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The Parquet writer failed.
    #[error("{path}: writing Parquet: {source}")]
    Parquet {
        /// The part being written.
        path: String,
        /// The writer's error.
        source: parquet::errors::ParquetError,
    },
    /// The rule table could not be compiled.
    #[error(transparent)]
    Rules(#[from] crate::classify::RulesError),
    /// An option the user gave that cannot work, before any file is read.
    #[error("{0}")]
    Usage(String),
    /// A file failed without `keep_going`, so none of the inputs landed: the file's own
    /// error, then how many other inputs were left out and the way to land them.
    #[error("{first} ({})", left_out(*others, *broken))]
    Stopped {
        /// The first failure, in input order.
        first: Box<IngestError>,
        /// The other inputs of the ingest (read or not), none of which was written.
        others: usize,
        /// How many of those failed too.
        broken: usize,
    },
}

/// `Stopped`'s note: `2 other inputs not ingested, 1 of them broken too; --keep-going …`.
fn left_out(others: usize, broken: usize) -> String {
    let inputs = if others == 1 { "input" } else { "inputs" };
    let broken = match broken {
        0 => String::new(),
        n => format!(", {n} of them broken too"),
    };
    format!(
        "{others} other {inputs} not ingested{broken}; --keep-going ingests the readable ones and lists the broken ones"
    )
}

impl IngestError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        IngestError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn file(path: &Path, msg: impl Into<String>) -> Self {
        IngestError::File {
            path: path.display().to_string(),
            msg: msg.into(),
        }
    }

    /// `self`, the first failure of an ingest without `keep_going` that had `others` more
    /// inputs (`broken` of them failing too): said so when there were any.
    pub(crate) fn stopped(self, others: usize, broken: usize) -> Self {
        if others == 0 {
            return self;
        }
        IngestError::Stopped {
            first: Box::new(self),
            others,
            broken,
        }
    }
}

/// `msg` with control characters (newlines above all) escaped as in Rust string literals.
fn one_line(msg: &str) -> std::borrow::Cow<'_, str> {
    if !msg.chars().any(char::is_control) {
        return msg.into();
    }
    msg.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
}

/// A parse failure before the file name is attached: offset in the decompressed stream.
#[derive(Debug, Clone)]
pub(crate) struct ParseErr {
    pub offset: u64,
    pub msg: String,
}

impl ParseErr {
    pub(crate) fn new(offset: u64, msg: impl Into<String>) -> Self {
        ParseErr {
            offset,
            msg: msg.into(),
        }
    }

    pub(crate) fn at(self, path: &Path) -> IngestError {
        IngestError::Parse {
            path: path.display().to_string(),
            offset: self.offset,
            msg: self.msg,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = IngestError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzzer (docs/FUZZING.md): a key or an SQLite table name quoted in a
    /// message put a newline into the error line.
    #[test]
    fn errors_quoting_the_input_stay_one_line() {
        let p = Path::new("t.json");
        let e = IngestError::file(p, "no such table: a\nb\u{1}");
        assert_eq!(e.to_string(), "t.json: no such table: a\\nb\\u{1}");
        let e = ParseErr::new(7, "unexpected end of file in ag\nts").at(p);
        assert_eq!(
            e.to_string(),
            "t.json: byte 7: unexpected end of file in ag\\nts"
        );
        let e = IngestError::file(p, "plain, ünïcode");
        assert_eq!(e.to_string(), "t.json: plain, ünïcode");
    }
}
