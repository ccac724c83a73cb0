//! The five overlap tables as frames, and their row order: shared by the trace path
//! (`overlap`) and the Python tool's logs (`jsonl`), which build them differently.

use aorta_ingest::schema::{
    OVERLAP_COLLECTIVES, OVERLAP_RANKS, OVERLAP_STEPS, OVERLAP_STREAMS, OVERLAP_STREAM_PAIRS,
};
use polars::prelude::*;

/// The five tables `aorta overlap` writes.
#[derive(Debug, Clone)]
pub struct OverlapTables {
    /// `overlap_steps`: one row per (run, rank, step).
    pub steps: DataFrame,
    /// `overlap_ranks`: one row per (run, rank), over its whole window.
    pub ranks: DataFrame,
    /// `overlap_collectives`: per collective kind, per step and per whole rank (`level`).
    pub collectives: DataFrame,
    pub(crate) streams: DataFrame,
    pub(crate) stream_pairs: DataFrame,
}

impl OverlapTables {
    /// (table name, frame), in the order of `aorta_ingest::schema::DERIVED_TABLES`.
    pub(crate) fn tables(&self) -> [(&'static str, &DataFrame); 5] {
        [
            (OVERLAP_STEPS.name, &self.steps),
            (OVERLAP_RANKS.name, &self.ranks),
            (OVERLAP_COLLECTIVES.name, &self.collectives),
            (OVERLAP_STREAMS.name, &self.streams),
            (OVERLAP_STREAM_PAIRS.name, &self.stream_pairs),
        ]
    }

    /// Both sources' rows together (trace ranks and JSONL ranks), sorted.
    pub(crate) fn concat(self, other: OverlapTables) -> PolarsResult<OverlapTables> {
        let cat = |a: DataFrame, b: DataFrame| -> PolarsResult<DataFrame> {
            let mut a = a;
            a.vstack_mut(&b)?;
            sort_rows(a)
        };
        Ok(OverlapTables {
            steps: cat(self.steps, other.steps)?,
            ranks: cat(self.ranks, other.ranks)?,
            collectives: cat(self.collectives, other.collectives)?,
            streams: cat(self.streams, other.streams)?,
            stream_pairs: cat(self.stream_pairs, other.stream_pairs)?,
        })
    }
}

/// Sorts by the partition keys and then every other key column present, nulls last.
pub(crate) fn sort_rows(df: DataFrame) -> PolarsResult<DataFrame> {
    let keys: Vec<&str> = [
        "run",
        "rank",
        "source",
        "level",
        "step",
        "comm_op",
        "stream",
        "other_stream",
    ]
    .into_iter()
    .filter(|k| df.schema().contains(k))
    .collect();
    let opts = SortMultipleOptions::default()
        .with_nulls_last(true)
        .with_maintain_order(true);
    df.sort(keys, opts)
}
