//! `--rank-map FILE`: which rank each process was, for traces that do not say.
//!
//! Nsight Systems exports, generic Chrome traces and rocprofv3 output carry process ids but no
//! rank; a job launcher knows both (`torchrun` logs, `srun --label`). The map is read once per
//! ingest and shared by every file's job; readers ask it `get(pid)`.
//!
//! Format (docs/INPUTS.md): one `PID RANK` pair per line, separated by blanks, `=` or `:`;
//! `#` starts a comment; blank lines are ignored. A line that is not a pair of integers, or a
//! pid given two different ranks, is an error naming the file and line.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{IngestError, Result};

/// Process id → rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankMap {
    map: BTreeMap<i64, i64>,
}

impl RankMap {
    /// Reads and parses `path`.
    pub(crate) fn load(path: &Path) -> Result<RankMap> {
        let text = std::fs::read_to_string(path).map_err(|e| IngestError::io(path, e))?;
        RankMap::parse(path, &text)
    }

    /// Parses the text of a rank map; `path` only names it in errors.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<RankMap> {
        let mut map = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |msg: String| IngestError::Line {
                path: path.display().to_string(),
                line: i as u64 + 1,
                msg,
            };
            let (pid, rank) = pair(line).ok_or_else(|| {
                err(format!(
                    "expected `PID RANK` (or `PID=RANK`), two integers: `{line}`"
                ))
            })?;
            if let Some(old) = map.insert(pid, rank).filter(|&old| old != rank) {
                return Err(err(format!(
                    "pid {pid} is given rank {old} and rank {rank}"
                )));
            }
        }
        Ok(RankMap { map })
    }

    /// The rank of process `pid`, if the map names it.
    pub(crate) fn get(&self, pid: i64) -> Option<i64> {
        self.map.get(&pid).copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Pairs in the map (the rank-map fuzz target checks it against the lines read).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// A short hash of the pairs ("" for an empty map), recorded in the manifest.
    pub(crate) fn fingerprint(&self) -> String {
        if self.map.is_empty() {
            return String::new();
        }
        let text: String = self.map.iter().map(|(p, r)| format!("{p} {r}\n")).collect();
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
    }
}

/// `12 3`, `12=3`, `12: 3` → (12, 3); ranks must not be negative.
fn pair(line: &str) -> Option<(i64, i64)> {
    let mut it = line
        .split(|c: char| c.is_whitespace() || c == '=' || c == ':')
        .filter(|s| !s.is_empty());
    let pid = it.next()?.parse().ok()?;
    let rank: i64 = it.next()?.parse().ok()?;
    (it.next().is_none() && rank >= 0).then_some((pid, rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RankMap> {
        RankMap::parse(Path::new("map.txt"), text)
    }

    #[test]
    fn every_separator_and_comments() {
        let m = parse("# launcher log\n1701896 0\n1701897=1  # second\n\n  42: 7\n").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(1701896), Some(0));
        assert_eq!(m.get(1701897), Some(1));
        assert_eq!(m.get(42), Some(7));
        assert_eq!(m.get(5), None);
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let e = parse("1 0\n\nabc 1\n").unwrap_err().to_string();
        assert!(e.starts_with("map.txt: line 3: expected `PID RANK`"), "{e}");
        for bad in ["1", "1 2 3", "1 -2", "1 x"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("map.txt: line 1: "), "{bad}: {e}");
        }
        let e = parse("5 1\n5 1\n5 2\n").unwrap_err().to_string();
        assert_eq!(e, "map.txt: line 3: pid 5 is given rank 1 and rank 2");
    }
}
