//! The job check of an unsharded ingest, once its files are read (`job::decide`): which new
//! files of a run label can be one job with each other and with the label's files already in
//! the dataset, and the runs the others become (their staged parts moved to them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::commit;
use crate::dataset::{Format, Input, Manifest};
use crate::error::{IngestError, Result};
use crate::file::FileOutcome;

/// Decides, per run label read now, whether its files (with those of the label already in the
/// dataset) can be one job (`job::decide`); files that cannot become runs `<label>/<workload>`,
/// their staged parts moved to that run. A run's identity is fixed at its first ingest: files
/// already in the dataset keep their run whatever comes later, so new files that cannot join
/// them become a run (or runs) of their own, named apart from the existing ones. Returns per
/// new file that made a new run (by manifest key) the ingest's note and the reason.
/// An input an ingest reads: its manifest key, its hash when it was hashed already (it
/// looked unchanged), its size and modification time.
pub(crate) struct Planned {
    pub input: Input,
    pub key: String,
    /// Known only for files that looked unchanged (same size and mtime) and were hashed.
    pub hash: Option<String>,
    pub bytes: u64,
    pub mtime_ns: i64,
}

pub(crate) fn settle_jobs(
    ok: &mut [(Planned, (Format, FileOutcome))],
    manifest: &Manifest,
    staging: &std::path::Path,
) -> Result<BTreeMap<String, (String, String)>> {
    let fresh: std::collections::HashSet<String> = ok.iter().map(|(p, _)| p.key.clone()).collect();
    let bases: std::collections::BTreeSet<String> =
        ok.iter().map(|(p, _)| p.input.label.clone()).collect();
    let mut notes = BTreeMap::new();
    for base in bases {
        let mut new_files = Vec::new();
        let mut members: Vec<(PathBuf, crate::job::Identity)> = Vec::new();
        for (i, (p, (format, o))) in ok.iter().enumerate() {
            if p.input.label == base && *format != Format::NotATrace {
                new_files.push(i);
                members.push((p.input.path.clone(), o.identity.clone()));
            }
        }
        // The runs of this label already in the dataset, and their files' labels.
        let mut kept_labels = Vec::new();
        for e in &manifest.inputs {
            if let (true, false, Some(id)) =
                (e.base() == base, fresh.contains(&e.source), &e.identity)
            {
                kept_labels.push(e.label.clone());
                members.push((PathBuf::from(&e.source), id.clone()));
            }
        }
        let existing: std::collections::BTreeSet<String> = kept_labels.iter().cloned().collect();
        let decide = |members: &[(PathBuf, crate::job::Identity)]| {
            let m: Vec<crate::job::Member> = members
                .iter()
                .map(|(path, id)| crate::job::Member { path, id })
                .collect();
            let verdict = crate::job::decide(&m);
            let labels: Vec<String> = verdict
                .workloads
                .iter()
                .map(|w| w.as_ref().map_or(base.clone(), |w| format!("{base}/{w}")))
                .collect();
            (verdict.reason, labels)
        };
        let (reason, labels) = decide(&members);
        let n = new_files.len();
        let kept_stay = labels[n..].iter().zip(&kept_labels).all(|(a, b)| a == b);
        let (reason, fresh_labels) = if kept_stay {
            (reason, labels[..n].to_vec())
        } else {
            // The new files would rename runs already there: they are decided among
            // themselves instead, and their runs named apart from the existing ones.
            let (own_reason, own) = decide(&members[..n]);
            // One job among themselves: one new run, named after its first file's workload
            // (the file name without its rank token), else its stem.
            let one_job = own_reason.is_none().then(|| {
                let path = &members[0].0;
                let w = crate::job::workload_name(path);
                let w = if w.is_empty() {
                    crate::job::stem(path)
                } else {
                    w
                };
                unique_label(&format!("{base}/{w}"), &existing)
            });
            let labels = own
                .iter()
                .map(|l| {
                    one_job
                        .clone()
                        .unwrap_or_else(|| unique_label(l, &existing))
                })
                .collect();
            (reason, labels)
        };
        let Some(reason) = reason else {
            continue;
        };
        let mut made: Vec<&String> = fresh_labels
            .iter()
            .filter(|l| !existing.contains(*l))
            .collect();
        made.sort();
        made.dedup();
        let note = if existing.is_empty() {
            let mut runs: Vec<&String> = fresh_labels.iter().collect();
            runs.sort();
            runs.dedup();
            let names: Vec<&str> = runs.iter().map(|r| r.as_str()).collect();
            format!(
                "run `{base}`: its files cannot be one job: {reason}. Each became a run of its own: {}",
                names.join(", ")
            )
        } else {
            let names: Vec<&str> = made.iter().map(|r| r.as_str()).collect();
            let had: Vec<&str> = existing.iter().map(String::as_str).collect();
            format!(
                "run `{base}`: the new files cannot join the run(s) already there ({}): {reason}. They became run(s) of their own: {}; the existing runs keep their names",
                had.join(", "),
                names.join(", ")
            )
        };
        for (&i, label) in new_files.iter().zip(&fresh_labels) {
            let o = &mut ok[i].1 .1;
            if o.run != *label {
                move_parts(&mut o.parts, label, staging)?;
                o.run = label.clone();
            }
            // The note goes with the files whose run this ingest made; files that joined an
            // existing run of a past split carry its reason, said when that split was made.
            let said = !made.is_empty() && made.contains(&label);
            let text = if said { note.clone() } else { String::new() };
            notes.insert(ok[i].0.key.clone(), (text, reason.clone()));
        }
    }
    Ok(notes)
}

/// `name`, or `name-2`, `name-3`, … when a run of the dataset is already called that.
fn unique_label(name: &str, existing: &std::collections::BTreeSet<String>) -> String {
    if !existing.contains(name) {
        return name.to_string();
    }
    (2..)
        .map(|n| format!("{name}-{n}"))
        .find(|l| !existing.contains(l))
        .expect("a free name")
}

/// Moves the part files under `root` to run `label` (`schema::relabel_part`); the (old, new)
/// relative paths, as the manifest's checksums key them.
fn move_parts(
    parts: &mut [PathBuf],
    label: &str,
    root: &std::path::Path,
) -> Result<Vec<(String, String)>> {
    let mut moved = Vec::new();
    for rel in parts.iter_mut() {
        let new = crate::schema::relabel_part(rel, label);
        let (from, to) = (root.join(&*rel), root.join(&new));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| IngestError::io(dir, e))?;
        }
        std::fs::rename(&from, &to).map_err(|e| IngestError::io(&from, e))?;
        commit::prune_empty(root, from.parent());
        moved.push((rel.display().to_string(), new.display().to_string()));
        *rel = new;
    }
    Ok(moved)
}
