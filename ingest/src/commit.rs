//! The commit of an ingest: staged parts moved into the dataset, replaced parts removed, the
//! manifest replaced last, all written down first in a journal (`<dataset>/.commit.json`).
//!
//! The moves are many renames, not one: a process killed among them would leave parts the
//! manifest does not list beside parts it lists that are gone. The journal makes such a
//! commit one that is finished, not one that is lost: the next process that locks the dataset
//! to write it (`recover`) replays the journal (a rename already done is skipped) and only
//! then does its own work; a reader that finds a journal stops with a line saying so. What
//! the journal cannot do is hide the renames from a reader that globs the table directories
//! itself while they happen (milliseconds) or after such a kill: docs/RELIABILITY.md.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::{Entry, Manifest};
use crate::error::{IngestError, Result};

/// The journal's name inside the dataset (hidden: table globs never reach it).
pub const JOURNAL: &str = ".commit.json";

/// One commit, as written before its first rename.
#[derive(Debug, Serialize, Deserialize)]
pub struct Journal {
    /// The staging directory's name inside the dataset.
    pub staging: PathBuf,
    /// Parts to move from the staging directory to the same relative path in the dataset.
    pub moves: Vec<PathBuf>,
    /// Parts of the replaced entries that no new entry keeps.
    pub removes: Vec<PathBuf>,
    /// The manifest after the commit.
    pub manifest: Manifest,
    /// Where the journal, the staging directory and the manifest are, relative to the
    /// dataset: empty for the dataset's own, `shards/<I>-of-<N>` for a shard's (`shard`).
    #[serde(default, skip_serializing_if = "crate::commit::is_root")]
    pub home: PathBuf,
}

fn is_root(p: &Path) -> bool {
    p.as_os_str().is_empty()
}

impl Journal {
    /// A commit of `new` entries (each with the entry it replaces) onto `manifest`.
    pub fn new(staging: &Path, manifest: &Manifest, new: &[(Entry, Option<Entry>)]) -> Journal {
        let kept: Vec<&PathBuf> = new.iter().flat_map(|(e, _)| &e.parts).collect();
        let mut m = manifest.clone();
        for (e, _) in new {
            m.inputs.retain(|x| x.source != e.source);
            m.inputs.push(e.clone());
        }
        Journal {
            staging: staging.file_name().map(PathBuf::from).unwrap_or_default(),
            moves: kept.iter().map(|p| p.to_path_buf()).collect(),
            removes: new
                .iter()
                .filter_map(|(_, old)| old.as_ref())
                .flat_map(|o| &o.parts)
                .filter(|p| !kept.contains(p))
                .cloned()
                .collect(),
            manifest: m,
            home: PathBuf::new(),
        }
    }

    /// The journal of a shard's commit: kept, with its manifest, in the shard's folder
    /// `home` (relative to the dataset), where its staging directory is too.
    pub(crate) fn in_home(mut self, home: &Path) -> Journal {
        self.home = home.to_path_buf();
        self
    }

    /// The journal also removing every derived table part (`schema::DERIVED_TABLES`) of the
    /// `runs` given: runs that no longer exist after this commit, whose `overlap_*`,
    /// `collectives` or `op_perf` rows would otherwise stay readable by SQL and polars.
    pub fn dropping_derived(mut self, out: &Path, runs: &[String]) -> Result<Journal> {
        for run in runs {
            self.removes.extend(derived_parts(out, run)?);
        }
        Ok(self)
    }

    /// Writes the journal, then applies it. A failure before the journal is written leaves
    /// the dataset as it was; one after, a journal that `recover` finishes.
    pub fn commit(self, out: &Path) -> Result<Manifest> {
        let path = out.join(&self.home).join(JOURNAL);
        let text = serde_json::to_vec(&self).expect("journal serializes");
        crate::atomic::write_bytes(&path, &text).map_err(|e| IngestError::io(&path, e))?;
        self.apply(out)
    }

    fn apply(mut self, out: &Path) -> Result<Manifest> {
        let home = out.join(&self.home);
        let staging = home.join(&self.staging);
        for rel in &self.moves {
            let (from, to) = (staging.join(rel), out.join(rel));
            if !from.exists() && to.exists() {
                continue; // moved before a kill
            }
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir).map_err(|e| IngestError::io(dir, e))?;
            }
            std::fs::rename(&from, &to).map_err(|e| IngestError::io(&to, e))?;
        }
        for rel in &self.removes {
            let p = out.join(rel);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(IngestError::io(&p, e))
                }
                _ => prune_empty(out, p.parent()),
            }
        }
        self.manifest.save(&home)?;
        let path = home.join(JOURNAL);
        std::fs::remove_file(&path).map_err(|e| IngestError::io(&path, e))?;
        Ok(self.manifest)
    }
}

/// The files of run `run` in the derived tables (`schema::DERIVED_TABLES`), relative to `out`.
pub fn derived_parts(out: &Path, run: &str) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for t in crate::schema::DERIVED_TABLES {
        let mut stack = vec![crate::schema::run_dir(t.name, run)];
        while let Some(rel) = stack.pop() {
            let dir = out.join(&rel);
            let read = match std::fs::read_dir(&dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                r => r.map_err(|e| IngestError::io(&dir, e))?,
            };
            for entry in read {
                let entry = entry.map_err(|e| IngestError::io(&dir, e))?;
                let child = rel.join(entry.file_name());
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(child);
                } else {
                    files.push(child);
                }
            }
        }
    }
    Ok(files)
}

/// The runs of `before` that `after` no longer has.
pub fn vanished_runs(before: &Manifest, after: &Manifest) -> Vec<String> {
    let now: std::collections::BTreeSet<&str> =
        after.inputs.iter().map(|e| e.label.as_str()).collect();
    let mut gone: Vec<String> = before
        .inputs
        .iter()
        .map(|e| e.label.clone())
        .filter(|l| !now.contains(l.as_str()))
        .collect();
    gone.sort();
    gone.dedup();
    gone
}

/// Finishes the commits killed processes left (their journals): the dataset's own and its
/// shards'; true when there was one. Call it holding the dataset's lock for writing, before
/// reading the manifest.
pub fn recover(out: &Path) -> Result<bool> {
    let mut any = recover_in(out, Path::new(""))?;
    for h in crate::shard::homes(out)? {
        any |= recover_in(out, &h)?;
    }
    Ok(any)
}

/// Finishes the commit whose journal is in `home` (relative to `out`: empty for the
/// dataset's own, a shard's folder); true when there was one. The caller holds the lock that
/// covers `home`.
pub(crate) fn recover_in(out: &Path, home: &Path) -> Result<bool> {
    let path = out.join(home).join(JOURNAL);
    let bytes = match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        other => other.map_err(|e| IngestError::io(&path, e))?,
    };
    let mut j: Journal = serde_json::from_slice(&bytes)
        .map_err(|e| IngestError::file(&path, format!("not a commit journal: {e}")))?;
    j.home = home.to_path_buf();
    let staging = out.join(home).join(&j.staging);
    j.apply(out)?;
    let _ = std::fs::remove_dir_all(staging);
    Ok(true)
}

/// Whether a commit was left unfinished, the dataset's own or a shard's (readers stop on it).
pub fn pending(out: &Path) -> bool {
    out.join(JOURNAL).exists()
        || crate::shard::homes(out)
            .unwrap_or_default()
            .iter()
            .any(|h| out.join(h).join(JOURNAL).exists())
}

/// Removes `dir` and its parents up to `out` while they are empty.
pub(crate) fn prune_empty(out: &Path, mut dir: Option<&Path>) {
    while let Some(d) = dir {
        if d == out || std::fs::remove_dir(d).is_err() {
            return;
        }
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(source: &str, parts: &[&str]) -> Entry {
        serde_json::from_value(serde_json::json!({
            "source": source, "content_hash": "h", "label": "l", "rank": 0,
            "format": "kineto", "rules_version": "1", "parts": parts, "rows": {}
        }))
        .unwrap()
    }

    /// A commit killed after its first rename: `recover` moves the rest, removes the replaced
    /// part, writes the journal's manifest and removes the journal and the staging directory.
    #[test]
    fn a_commit_killed_among_its_renames_is_finished_by_recover() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let old = entry("a", &["t/run=l/rank=0/part-old.parquet"]);
        let mut m = Manifest::load(out).unwrap();
        m.inputs.push(old.clone());
        m.save(out).unwrap();
        std::fs::create_dir_all(out.join("t/run=l/rank=0")).unwrap();
        std::fs::write(out.join("t/run=l/rank=0/part-old.parquet"), "old").unwrap();
        let staging = out.join(".staging-1");
        let new = entry(
            "a",
            &[
                "t/run=l/rank=0/part-1.parquet",
                "u/run=l/rank=0/part-1.parquet",
            ],
        );
        for p in &new.parts {
            std::fs::create_dir_all(staging.join(p).parent().unwrap()).unwrap();
            std::fs::write(staging.join(p), "new").unwrap();
        }
        let j = Journal::new(&staging, &m, &[(new.clone(), Some(old))]);
        assert_eq!(
            j.removes,
            [PathBuf::from("t/run=l/rank=0/part-old.parquet")]
        );
        // Killed after the journal and one rename.
        std::fs::write(out.join(JOURNAL), serde_json::to_vec(&j).unwrap()).unwrap();
        std::fs::rename(staging.join(&new.parts[0]), out.join(&new.parts[0])).unwrap();
        assert!(pending(out));
        assert!(recover(out).unwrap());
        assert!(!pending(out) && !staging.exists());
        for p in &new.parts {
            assert_eq!(std::fs::read_to_string(out.join(p)).unwrap(), "new");
        }
        assert!(!out.join("t/run=l/rank=0/part-old.parquet").exists());
        assert_eq!(Manifest::load(out).unwrap().inputs, [new]);
        assert!(!recover(out).unwrap(), "nothing left to do");
    }

    /// A shard's commit killed among its renames: its journal, staging directory and manifest
    /// are in its folder; `recover` (a whole-dataset writer) finishes it there, the dataset's
    /// own manifest untouched, and readers see the entry merged in.
    #[test]
    fn a_shards_commit_killed_among_its_renames_is_finished_in_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let home = Path::new("shards/1-of-2");
        let mut root = Manifest::load(out).unwrap();
        root.inputs
            .push(entry("other", &["t/run=l/rank=0/part-0.parquet"]));
        root.save(out).unwrap();
        let root_text = std::fs::read(out.join("manifest.json")).unwrap();
        let staging = out.join(home).join(".staging-7");
        let new = entry(
            "mine",
            &[
                "t/run=l/rank=1/part-1.parquet",
                "u/run=l/rank=1/part-1.parquet",
            ],
        );
        for p in &new.parts {
            std::fs::create_dir_all(staging.join(p).parent().unwrap()).unwrap();
            std::fs::write(staging.join(p), "new").unwrap();
        }
        let own = Manifest::load_one(&out.join(home)).unwrap();
        let j = Journal::new(&staging, &own, &[(new.clone(), None)]).in_home(home);
        std::fs::write(
            out.join(home).join(JOURNAL),
            serde_json::to_vec(&j).unwrap(),
        )
        .unwrap();
        std::fs::create_dir_all(out.join(&new.parts[0]).parent().unwrap()).unwrap();
        std::fs::rename(staging.join(&new.parts[0]), out.join(&new.parts[0])).unwrap();
        assert!(pending(out), "a shard's journal stops readers too");
        assert!(recover(out).unwrap());
        assert!(!pending(out) && !staging.exists());
        for p in &new.parts {
            assert_eq!(std::fs::read_to_string(out.join(p)).unwrap(), "new");
        }
        assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), root_text);
        assert_eq!(
            Manifest::load_one(&out.join(home)).unwrap().inputs,
            std::slice::from_ref(&new)
        );
        let merged: Vec<String> = Manifest::load(out)
            .unwrap()
            .inputs
            .iter()
            .map(|e| e.source.clone())
            .collect();
        assert_eq!(merged, ["mine", "other"]);
    }
}
