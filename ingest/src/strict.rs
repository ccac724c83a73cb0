//! `--strict`: data-quality findings (the `diagnostics` table) made fatal, for CI.
//!
//! Findings are counted, never fixed silently, and by default they only warn: a trace with a
//! few clipped same-stream overlaps is still worth reading. A CI job that wants clean traces
//! says which findings it will not accept, and how many:
//!
//! | spec | fails when |
//! |---|---|
//! | `--strict` (= `--strict=all`) | any finding at all |
//! | `--strict=missing_timestamp,negative_duration` | any finding of these codes |
//! | `--strict=all:100` | more than 100 findings in total |
//! | `--strict=same_stream_overlap:50,negative_duration` | more than 50 of the one, any of the other |
//!
//! Each item is `CODE[:MAX]` or `all[:MAX]`: the findings it selects (one code, or all),
//! summed over every input of the ingest (unchanged ones too), may number at most MAX
//! (default 0). The rows are written either way, so the `diagnostics` table shows what
//! failed; the exit status is 1.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::diag::CODES;

/// One `CODE[:MAX]` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limit {
    /// A diagnostic code, or `None` for every code together (`all`).
    pub code: Option<&'static str>,
    pub max: u64,
}

/// A parsed `--strict` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strict {
    pub(crate) limits: Vec<Limit>,
}

/// A limit exceeded: which, the count found, the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub(crate) what: String,
    pub(crate) found: u64,
    pub(crate) max: u64,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--strict: {} {}, at most {} allowed (see the diagnostics table)",
            self.found, self.what, self.max
        )
    }
}

impl FromStr for Strict {
    type Err = String;

    fn from_str(s: &str) -> Result<Strict, String> {
        let limits = s
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(parse_item)
            .collect::<Result<Vec<_>, _>>()?;
        if limits.is_empty() {
            return Err(
                "empty: give `all` or diagnostic codes, e.g. --strict=negative_duration,all:100"
                    .into(),
            );
        }
        Ok(Strict { limits })
    }
}

fn parse_item(item: &str) -> Result<Limit, String> {
    let (name, max) = match item.split_once(':') {
        Some((n, m)) => (
            n.trim(),
            m.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{item}`: MAX must be a count (0 or more)"))?,
        ),
        None => (item, 0),
    };
    if name == "all" {
        return Ok(Limit { code: None, max });
    }
    match CODES.iter().find(|(c, _)| *c == name) {
        Some((c, _)) => Ok(Limit { code: Some(c), max }),
        None => {
            let known: Vec<&str> = CODES.iter().map(|(c, _)| *c).collect();
            Err(format!(
                "unknown diagnostic code `{name}` (codes: all, {})",
                known.join(", ")
            ))
        }
    }
}

impl Strict {
    /// The limits that `findings` (count per code) exceed.
    pub fn check(&self, findings: &BTreeMap<String, u64>) -> Vec<Violation> {
        self.limits
            .iter()
            .filter_map(|l| {
                let (what, found) = match l.code {
                    None => ("findings in total".to_string(), findings.values().sum()),
                    Some(c) => (
                        format!("{c} findings"),
                        findings.get(c).copied().unwrap_or(0),
                    ),
                };
                (found > l.max).then_some(Violation {
                    what,
                    found,
                    max: l.max,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(c, n)| (c.to_string(), *n)).collect()
    }

    #[test]
    fn items_select_codes_and_limits() {
        let s: Strict = "same_stream_overlap:2, negative_duration".parse().unwrap();
        let f = counts(&[("same_stream_overlap", 2), ("missing_timestamp", 9)]);
        assert!(s.check(&f).is_empty(), "2 allowed, 0 negative durations");
        let f = counts(&[("same_stream_overlap", 3), ("negative_duration", 1)]);
        let v = s.check(&f);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].found, v[0].max), (3, 2));
        assert_eq!(
            (v[1].what.as_str(), v[1].found),
            ("negative_duration findings", 1)
        );
    }

    #[test]
    fn all_sums_every_code() {
        let s: Strict = "all:10".parse().unwrap();
        assert!(s.check(&counts(&[("a", 5), ("b", 5)])).is_empty());
        assert_eq!(s.check(&counts(&[("a", 5), ("b", 6)]))[0].found, 11);
        let any: Strict = "all".parse().unwrap();
        assert!(any.check(&counts(&[])).is_empty());
        assert_eq!(any.check(&counts(&[("rank_default", 1)])).len(), 1);
    }

    #[test]
    fn unknown_codes_and_bad_counts_are_refused_by_name() {
        let e = "negative_durations".parse::<Strict>().unwrap_err();
        assert!(
            e.contains("unknown diagnostic code `negative_durations`"),
            "{e}"
        );
        assert!(e.contains("negative_duration,"), "{e}");
        let e = "all:-1".parse::<Strict>().unwrap_err();
        assert!(e.contains("MAX must be a count"), "{e}");
        assert!("".parse::<Strict>().is_err());
    }
}
