//! `aorta dataset rm|relabel`: a run removed or renamed as one commit.
//!
//! Both go through ingest's journalled commit (`aorta_ingest::commit::Journal`): the new
//! manifest and every file to move or remove are written down before the first rename, so a
//! process killed half way leaves a commit the next writer finishes, never a dataset whose
//! manifest lists parts that are gone. A relabel first hard-links (or copies) every part to
//! its new path in a staging directory: until the journal is written the dataset is as it
//! was. Paths come from `aorta_ingest::schema` (`run_dir`, `relabel_part`): a label is a
//! percent-encoded partition value, whatever bytes it holds. The derived tables (`overlap_*`,
//! `collectives`, `op_perf`, …) of the run move or go with it. The caller holds the dataset's
//! lock for writing.

use std::path::{Path, PathBuf};

use aorta_ingest::commit::Journal;
use aorta_ingest::dataset::{Entry, Manifest};
use aorta_ingest::schema;

use crate::dataset::DatasetError;

/// Why `aorta dataset rm|relabel` refused or failed; the dataset is unchanged when it is returned
/// before the journal was written, and finished by the next writer after.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The run to remove or relabel is not in the manifest.
    #[error("{root}: no run `{run}` (runs: {known})")]
    UnknownRun {
        /// The dataset's root.
        root: PathBuf,
        /// The run asked for.
        run: String,
        /// The dataset's runs, comma-separated.
        known: String,
    },
    /// The new label is already a run of the dataset (runs are never merged by a relabel).
    #[error("{root}: a run `{run}` exists already: remove it first (`aorta dataset rm`) or pick another label")]
    Exists {
        /// The dataset's root.
        root: PathBuf,
        /// The label asked for.
        run: String,
    },
    /// The new label is empty (it would be no partition value).
    #[error("a run label cannot be empty")]
    EmptyLabel,
    /// The dataset could not be read.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The journalled commit failed (or a left-over one could not be finished).
    #[error(transparent)]
    Ingest(#[from] aorta_ingest::IngestError),
    /// Listing, linking or copying a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// What a commit changed: files of the ingested tables and of derived tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edited {
    /// Manifest entries (ingested inputs) of the run that were removed or relabelled.
    pub inputs: usize,
    /// Parquet parts of the ingested tables removed or moved.
    pub parts: usize,
    /// Files of the run's derived tables (`overlap_*`, `collectives`, …) removed or moved.
    pub derived: usize,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EditError + '_ {
    move |source| EditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The manifest, and the indexes of the entries of run `run` (an error naming the runs
/// there are when it has none).
fn entries_of(root: &Path, run: &str) -> Result<(Manifest, Vec<usize>), EditError> {
    let m = Manifest::load(root)?;
    let mine: Vec<usize> = (0..m.inputs.len())
        .filter(|&i| m.inputs[i].label == run)
        .collect();
    if mine.is_empty() {
        let mut known: Vec<&str> = m.inputs.iter().map(|e| e.label.as_str()).collect();
        known.sort();
        known.dedup();
        return Err(EditError::UnknownRun {
            root: root.to_path_buf(),
            run: run.to_string(),
            known: known.join(", "),
        });
    }
    Ok((m, mine))
}

/// The files of `run` in the derived tables, relative to `root`.
fn derived_files(root: &Path, run: &str) -> Result<Vec<PathBuf>, EditError> {
    Ok(aorta_ingest::commit::derived_parts(root, run)?)
}

/// Removes run `run`: its manifest entries, their parts and its derived tables.
pub fn remove(root: &Path, run: &str) -> Result<Edited, EditError> {
    aorta_ingest::commit::recover(root)?;
    let (mut m, mine) = entries_of(root, run)?;
    let parts: Vec<PathBuf> = mine
        .iter()
        .flat_map(|&i| m.inputs[i].parts.clone())
        .collect();
    let derived = derived_files(root, run)?;
    m.inputs.retain(|e| e.label != run);
    let staging = aorta_ingest::dataset::staging_dir(root)?;
    let edited = Edited {
        inputs: mine.len(),
        parts: parts.len(),
        derived: derived.len(),
    };
    let journal = Journal {
        staging: staging.file_name().map(PathBuf::from).unwrap_or_default(),
        moves: vec![],
        removes: parts.into_iter().chain(derived).collect(),
        manifest: m,
        home: PathBuf::new(),
    };
    journal.commit(root)?;
    let _ = std::fs::remove_dir_all(&staging);
    Ok(edited)
}

/// Renames run `old` to `new`: every part moves to `new`'s partition (checksums kept, keyed
/// by the new paths), the derived tables with it. A later ingest of the same unchanged files
/// keeps them under `new` (the entry remembers the label its directory gives, `base_label`);
/// a changed file is read again under the label its directory gives.
pub fn relabel(root: &Path, old: &str, new: &str) -> Result<Edited, EditError> {
    if new.trim().is_empty() {
        return Err(EditError::EmptyLabel);
    }
    aorta_ingest::commit::recover(root)?;
    let (mut m, mine) = entries_of(root, old)?;
    let taken = m.inputs.iter().any(|e| e.label == new)
        || schema::TABLES
            .iter()
            .chain(schema::DERIVED_TABLES)
            .any(|t| root.join(schema::run_dir(t.name, new)).exists());
    if taken || old == new {
        return Err(EditError::Exists {
            root: root.to_path_buf(),
            run: new.to_string(),
        });
    }
    let staging = aorta_ingest::dataset::staging_dir(root)?;
    let (mut moves, mut removes) = (Vec::new(), Vec::new());
    for &i in &mine {
        let e = &mut m.inputs[i];
        let olds = std::mem::take(&mut e.parts);
        for rel in olds {
            let to = schema::relabel_part(&rel, new);
            stage_link(root, &staging, &rel, &to)?;
            rekey(e, &rel, &to);
            e.parts.push(to.clone());
            moves.push(to);
            removes.push(rel);
        }
        if e.base_label.is_empty() {
            e.base_label = e.label.clone();
        }
        e.label = new.to_string();
    }
    let parts = moves.len();
    let derived = derived_files(root, old)?;
    for rel in &derived {
        let to = schema::relabel_part(rel, new);
        stage_link(root, &staging, rel, &to)?;
        moves.push(to);
        removes.push(rel.clone());
    }
    let journal = Journal {
        staging: staging.file_name().map(PathBuf::from).unwrap_or_default(),
        moves,
        removes,
        manifest: m,
        home: PathBuf::new(),
    };
    journal.commit(root)?;
    let _ = std::fs::remove_dir_all(&staging);
    Ok(Edited {
        inputs: mine.len(),
        parts,
        derived: derived.len(),
    })
}

/// The checksum of part `from` under its new path `to`.
fn rekey(e: &mut Entry, from: &Path, to: &Path) {
    if let Some(sum) = e.checksums.remove(&from.display().to_string()) {
        e.checksums.insert(to.display().to_string(), sum);
    }
}

/// `root/from` linked (else copied) as `staging/to`.
fn stage_link(root: &Path, staging: &Path, from: &Path, to: &Path) -> Result<(), EditError> {
    let (src, dst) = (root.join(from), staging.join(to));
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    if std::fs::hard_link(&src, &dst).is_err() {
        std::fs::copy(&src, &dst).map_err(io(&src))?;
    }
    Ok(())
}
