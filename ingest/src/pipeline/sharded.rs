//! `aorta ingest --shard I/N` (`shard` says what a shard is and owns): the listing cut to the
//! shard's part, the locks a shard holds, and its commit into its own folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ingest_locked, nothing_to_ingest, Options, Progress, Shared, Summary};
use crate::classify::Classifier;
use crate::dataset::{self, Input, Manifest};
use crate::error::{IngestError, Result};
use crate::shard::{homes, Shard};
use crate::{commit, file, lock};

/// `pipeline::ingest` of one shard: its part of the listing, under the dataset's lock
/// shared (other shards run at once, no whole-dataset writer does) and its folder's lock
/// exclusive. A shard whose part is empty succeeds with nothing ingested; the dataset is
/// never removed (other shards write into it).
pub(crate) fn ingest(
    paths: &[PathBuf],
    mut inputs: Vec<Input>,
    shard: Shard,
    opts: &Options,
    classifier: &Arc<Classifier>,
    rank_map: &Arc<file::RankMap>,
    progress: &Progress,
) -> Result<Summary> {
    let listed = inputs.iter().filter(|i| i.skip.is_none()).count();
    if listed == 0 {
        return Err(nothing_to_ingest(paths, &Summary::default()));
    }
    inputs.retain(|i| shard.owns(&i.key));
    let out = &opts.out;
    let home = shard.home();
    std::fs::create_dir_all(out).map_err(|e| IngestError::io(out, e))?;
    let command = format!("aorta ingest --shard {shard}");
    let whole = match lock::acquire(
        out,
        lock::Mode::Shared,
        &command,
        &mut lock::say_waiting(out),
    )? {
        lock::Acquired::Locked(l) => l,
        lock::Acquired::ReadOnly(e) => return Err(IngestError::io(out, e)),
    };
    check_count(out, shard)?;
    // Made under the dataset's lock: a fold (`dataset::fold_shards`) removes `shards/` holding it.
    std::fs::create_dir_all(out.join(&home)).map_err(|e| IngestError::io(&out.join(&home), e))?;
    let mine = lock::acquire_for_write(
        &out.join(&home),
        &command,
        &mut lock::say_waiting(&out.join(&home)),
    )?;
    commit::recover_in(out, &home)?;
    // The dataset's own manifest makes the directory a dataset, for readers and for the
    // whole-dataset writers that fold the shards in; every shard writes the same empty one.
    if !out.join(dataset::MANIFEST).exists() {
        Manifest::load_one(out)?.save(out)?;
    }
    let shared = Shared {
        classifier,
        rank_map,
        progress,
        home: Some(&home),
    };
    let mut s = if inputs.iter().all(|i| i.skip.is_some()) {
        Summary {
            skipped_files: inputs
                .into_iter()
                .map(|i| (i.path, i.skip.unwrap_or_default()))
                .collect(),
            ..Summary::default()
        }
    } else {
        ingest_locked(paths, inputs, opts, &shared)?
    };
    s.stale_lock = mine.stale.clone();
    drop(mine);
    drop(whole);
    Ok(s)
}

/// Fails when the dataset holds shards of another count than `shard`'s: two partitions of
/// one listing would each list some files the other lists too.
pub(crate) fn check_count(out: &Path, shard: Shard) -> Result<()> {
    let suffix = format!("-of-{}", shard.count);
    for h in homes(out)? {
        let name = h.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        if !name.ends_with(&suffix) && out.join(&h).join(dataset::MANIFEST).exists() {
            return Err(IngestError::Usage(format!(
                "--shard {shard}: {} holds shards of another count ({name}); fold them first: aorta dataset merge {}",
                out.display(),
                out.display()
            )));
        }
    }
    Ok(())
}
