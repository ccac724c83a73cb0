//! The tables one side of a comparison needs, read once: its overlap tables (computed as
//! `aorta overlap` does), its GPU activities, the CPU operators and runtime calls that
//! launched them (and the annotations around them, for the subcategories), and JSONL losses.

use std::path::Path;

use polars::prelude::*;

use crate::collectives::Job;
use crate::dataset;
use crate::overlap::{self, OverlapTables};
use crate::steps;
use crate::subcategory::{self, Rules};

use super::{CompareError, Side};

pub(super) struct SideData {
    pub side: Side,
    /// The side's runs' collectives matched across ranks (transfer time, skew).
    pub jobs: Vec<Job>,
    pub overlap: OverlapTables,
    pub acts: DataFrame,
    pub cpu: DataFrame,
    /// The subcategory rules of the side's runs.
    pub rules: Rules,
    pub losses: Vec<f64>,
}

/// `gpu_activities` columns the comparison reads.
const ACTS: [&str; 16] = [
    "run",
    "kind",
    "name",
    "rank",
    "step",
    "category",
    "comm_op",
    "start_ns",
    "end_ns",
    "correlation",
    "external_id",
    "collective_name",
    "in_msg_nelems",
    "out_msg_nelems",
    "group_size",
    "dtype",
];

impl SideData {
    pub(super) fn load(root: &Path, side: &Side) -> Result<SideData, CompareError> {
        let wanted = dataset::of_runs(&side.runs);
        let read = |table: &str, filter: Expr, cols: &[&str]| {
            let cols: Vec<Expr> = cols.iter().map(|c| col(*c)).collect();
            dataset::scan(root, table)?
                .filter(filter)
                .select(cols)
                .collect()
                .map_err(|source| CompareError::Polars {
                    path: root.join(table),
                    source,
                })
        };
        // Step statistics read real steps only (`steps`): the activity outside every step
        // enters neither the operators' per-window times nor the step rows.
        let polars = |table: &str| {
            let path = root.join(table);
            move |source| CompareError::Polars { path, source }
        };
        let acts = read("gpu_activities", wanted.clone(), &ACTS)?;
        let acts = steps::drop_outside(&acts).map_err(polars("gpu_activities"))?;
        // The operators and runtime calls, and the annotations the subcategories look at.
        let rules = Rules::load(root, &side.runs)?;
        let cpu = subcategory::read_cpu(root, &side.runs, &rules, &["input_dims", "input_types"])?;
        let loss = read(
            "metrics",
            wanted.and(col("key").eq(lit("loss"))),
            &["value"],
        )?;
        let losses = loss
            .column("value")
            .and_then(|c| c.f64().map(|v| v.iter().flatten().collect()))
            .unwrap_or_default();
        let jobs = side
            .runs
            .iter()
            .map(|r| Job::analyze(root, r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut overlap = overlap::from_dataset_with(root, &side.runs, &jobs)?;
        overlap.steps = steps::drop_outside(&overlap.steps).map_err(polars("overlap_steps"))?;
        overlap.collectives = steps::drop_outside_steps_level(&overlap.collectives)
            .map_err(polars("overlap_collectives"))?;
        if acts.height() == 0 && overlap.steps.height() == 0 {
            return Err(CompareError::Empty {
                root: root.to_path_buf(),
                selector: side.selector.clone(),
                runs: side.runs.join(", "),
            });
        }
        Ok(SideData {
            side: side.clone(),
            jobs,
            overlap,
            acts,
            cpu,
            rules,
            losses,
        })
    }
}

pub(super) use crate::rows::{floats, ints, strs};
