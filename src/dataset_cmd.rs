//! `aorta dataset rm|relabel|merge`: the dataset locked for writing (as an ingest), then one
//! journalled commit (`aorta_transform::dataset_edit`), or the shards' manifests folded
//! (`aorta_ingest::dataset::fold_shards`). A damaged run can still be removed: the parts are not
//! verified first.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use aorta_ingest::lock;
use aorta_transform::dataset_edit::{self, Edited};

use crate::toolbox_cli::{DatasetArgs, DatasetCommand};

pub(crate) fn run(args: DatasetArgs) -> Result<ExitCode> {
    match args.command {
        DatasetCommand::Merge { dataset } => {
            let _lock = locked(&dataset, "aorta dataset merge")?;
            aorta_ingest::commit::recover(&dataset)?;
            let (shards, inputs) = aorta_ingest::dataset::fold_shards(&dataset)?;
            println!(
                "folded {shards} shard manifests into {}: {inputs} input files",
                dataset.join(aorta_ingest::dataset::MANIFEST).display()
            );
        }
        DatasetCommand::Rm { run, dataset } => {
            let _lock = locked(&dataset, "aorta dataset rm")?;
            let e = dataset_edit::remove(&dataset, &run)?;
            println!(
                "removed run `{run}` from {}: {}",
                dataset.display(),
                what(e)
            );
        }
        DatasetCommand::Relabel { old, new, dataset } => {
            let _lock = locked(&dataset, "aorta dataset relabel")?;
            let e = dataset_edit::relabel(&dataset, &old, &new)?;
            println!(
                "relabelled run `{old}` as `{new}` in {}: {}",
                dataset.display(),
                what(e)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn what(e: Edited) -> String {
    format!(
        "{} input files, {} parts, {} derived-table files",
        e.inputs, e.parts, e.derived
    )
}

/// The dataset's lock for writing; a directory without a manifest is no dataset.
fn locked(root: &Path, command: &str) -> Result<lock::DatasetLock> {
    if !root.join(aorta_ingest::dataset::MANIFEST).is_file() {
        aorta_transform::dataset::check(root)?;
    }
    Ok(lock::acquire_for_write(
        root,
        command,
        &mut lock::say_waiting(root),
    )?)
}
