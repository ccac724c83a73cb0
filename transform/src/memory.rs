//! `aorta memory`: how much device memory each rank held, per step or over the run, from the
//! `memory` table (the profiler's allocator events).
//!
//! Every allocator event carries the device's totals just after it, so a peak needs no
//! replay of allocations and frees: the allocated peak of a group is the largest total held
//! at any moment between its first and last event, i.e. the largest of every event's total
//! after it (`total_allocated`) and before it (`total_allocated − bytes`: a group that starts
//! with a free held more than any total after one). The reserved peak is the largest
//! `total_reserved` (the events give no reserved total before a call). docs/METRICS.md.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;

use crate::dataset::{self, DatasetError};
use crate::rows::{ints, str_column, strs};

/// What one row of the peaks is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// (run, rank, device, step): step null for events outside every step.
    Step,
    /// (run, rank, device) over the whole capture.
    Rank,
}

/// `memory` columns read.
const COLUMNS: [&str; 9] = [
    "run",
    "rank",
    "step",
    "device_type",
    "device",
    "ts_ns",
    "bytes",
    "total_allocated",
    "total_reserved",
];

/// The group a peak row sums up: (run, rank, device type, device, step).
type Key<'a> = (&'a str, i64, &'a str, i64, Option<i64>);

/// What a group's events add up to.
#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    events: i64,
    allocs: i64,
    frees: i64,
    allocated_bytes: i64,
    freed_bytes: i64,
    allocated_peak: Option<i64>,
    reserved_peak: Option<i64>,
    first_ns: i64,
    last_ns: i64,
}

impl Acc {
    fn add(&mut self, ts: i64, bytes: Option<i64>, alloc: Option<i64>, reserved: Option<i64>) {
        if self.events == 0 {
            (self.first_ns, self.last_ns) = (ts, ts);
        }
        self.events += 1;
        self.first_ns = self.first_ns.min(ts);
        self.last_ns = self.last_ns.max(ts);
        match bytes {
            Some(b) if b > 0 => {
                (self.allocs, self.allocated_bytes) = (self.allocs + 1, self.allocated_bytes + b)
            }
            Some(b) if b < 0 => {
                (self.frees, self.freed_bytes) = (self.frees + 1, self.freed_bytes - b)
            }
            _ => {}
        }
        let before = alloc.zip(bytes).map(|(a, b)| a - b);
        for v in [alloc, before] {
            self.allocated_peak = self.allocated_peak.max(v);
        }
        self.reserved_peak = self.reserved_peak.max(reserved);
    }
}

/// The peaks of `runs`: one row per (run, rank, device type, device[, step]), sorted by them,
/// with columns `run`, `rank`, `device_type`, `device`, (`step`,) `events`, `allocs`,
/// `frees`, `allocated_bytes`, `freed_bytes` (both positive), `allocated_peak`,
/// `reserved_peak` (bytes, null when the trace gives no totals), `first_ns`, `last_ns`.
/// Empty when the runs have no memory events.
pub fn peaks(root: &Path, runs: &[String], by: By) -> Result<DataFrame, DatasetError> {
    let df = dataset::read_where(root, "memory", dataset::of_runs(runs), &COLUMNS)?;
    frame(&groups(&df, by), by).map_err(|source| DatasetError::Polars {
        path: root.join("memory"),
        source,
    })
}

fn groups(df: &DataFrame, by: By) -> BTreeMap<Key<'_>, Acc> {
    let (run, dtype) = (strs(df, "run"), strs(df, "device_type"));
    let (rank, device, step) = (ints(df, "rank"), ints(df, "device"), ints(df, "step"));
    let (ts, bytes) = (ints(df, "ts_ns"), ints(df, "bytes"));
    let (alloc, reserved) = (ints(df, "total_allocated"), ints(df, "total_reserved"));
    let mut out: BTreeMap<Key, Acc> = BTreeMap::new();
    for i in 0..df.height() {
        let step = match by {
            By::Step => step[i],
            By::Rank => None,
        };
        let key = (
            run[i].unwrap_or(""),
            rank[i].unwrap_or(0),
            dtype[i].unwrap_or(""),
            device[i].unwrap_or(-1),
            step,
        );
        out.entry(key)
            .or_default()
            .add(ts[i].unwrap_or(0), bytes[i], alloc[i], reserved[i]);
    }
    out
}

fn frame(groups: &BTreeMap<Key, Acc>, by: By) -> PolarsResult<DataFrame> {
    let col = |name: &str, f: fn(&Acc) -> i64| {
        Column::new(name.into(), groups.values().map(f).collect::<Vec<_>>())
    };
    let opt = |name: &str, f: fn(&Acc) -> Option<i64>| {
        Column::new(name.into(), groups.values().map(f).collect::<Vec<_>>())
    };
    let keys = groups.keys();
    let mut cols = vec![
        str_column("run", keys.clone().map(|k| k.0)),
        Column::new("rank".into(), keys.clone().map(|k| k.1).collect::<Vec<_>>()),
        str_column("device_type", keys.clone().map(|k| k.2)),
        Column::new(
            "device".into(),
            keys.clone().map(|k| k.3).collect::<Vec<_>>(),
        ),
    ];
    if by == By::Step {
        cols.push(Column::new(
            "step".into(),
            keys.map(|k| k.4).collect::<Vec<_>>(),
        ));
    }
    cols.extend([
        col("events", |a| a.events),
        col("allocs", |a| a.allocs),
        col("frees", |a| a.frees),
        col("allocated_bytes", |a| a.allocated_bytes),
        col("freed_bytes", |a| a.freed_bytes),
        opt("allocated_peak", |a| a.allocated_peak),
        opt("reserved_peak", |a| a.reserved_peak),
        col("first_ns", |a| a.first_ns),
        col("last_ns", |a| a.last_ns),
    ]);
    DataFrame::new_infer_height(cols)
}

/// The totals over time of one run, for a chart: `rank`, `device_type`, `device`, `ts_ns`,
/// `total_allocated`, `total_reserved`, sorted by rank, device and time. Empty when the run
/// has no memory events.
pub fn timeline(root: &Path, run: &str) -> Result<DataFrame, DatasetError> {
    let cols = [
        "rank",
        "device_type",
        "device",
        "ts_ns",
        "total_allocated",
        "total_reserved",
    ];
    let df = dataset::read_where(root, "memory", dataset::of_runs(&[run.to_string()]), &cols)?;
    df.sort(
        ["rank", "device_type", "device", "ts_ns"],
        SortMultipleOptions::default().with_maintain_order(true),
    )
    .map_err(|source| DatasetError::Polars {
        path: root.join("memory"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group that starts with a free held, before it, more than any total after an event.
    #[test]
    fn the_peak_counts_the_total_before_a_first_free() {
        let mut a = Acc::default();
        a.add(10, Some(-100), Some(400), Some(1000));
        a.add(20, Some(50), Some(450), Some(1000));
        assert_eq!(a.allocated_peak, Some(500));
        assert_eq!(a.reserved_peak, Some(1000));
        assert_eq!((a.allocs, a.frees), (1, 1));
        assert_eq!((a.allocated_bytes, a.freed_bytes), (50, 100));
        assert_eq!((a.first_ns, a.last_ns), (10, 20));
    }
}
