//! One `aorta ingest`: plan (discover, skip the unchanged), read every file on the rayon
//! pool (detect, then its reader), and commit what succeeded, the manifest last.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use rayon::prelude::*;

use crate::classify::Classifier;
use crate::dataset::{self, Entry, Format, Input, Manifest};
use crate::error::{IngestError, Result};
use crate::file::{self, FileJob, FileOutcome};
use crate::settle::Planned;
pub use crate::summary::Summary;

mod sharded;
use crate::{chrome, commit, detect, jsonl, kineto, lock, nsys, rocprof};

/// How `aorta ingest` was asked to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Dataset directory to write (`-o`), created if missing.
    pub out: PathBuf,
    /// Run label for every input (`--label`); default: the directory that holds each file,
    /// under its root.
    pub label: Option<String>,
    /// Rank for files whose trace and name carry none (`--rank`); default: 0, with a
    /// `rank_default` finding.
    pub rank: Option<i64>,
    /// Worker threads (`-j`); default: one per core.
    pub jobs: Option<usize>,
    /// Keep ingesting the other files when one fails (`--keep-going`): the failures end up in
    /// [`Summary::failed`] instead of failing the ingest.
    pub keep_going: bool,
    /// Read inputs again even when their content hash is unchanged (`--force`).
    pub force: bool,
    /// Extra classification rules (`--rules`, TOML), tried before the shipped ones.
    pub rules: Option<PathBuf>,
    /// `--rank-map`: a file of `PID RANK` lines (see `rank_map`).
    pub rank_map: Option<PathBuf>,
    /// `--step-marker`: which annotation ranges are steps.
    pub step_marker: crate::step_span::StepMarker,
    /// `--param KEY=VALUE`: the run's parameters, stored in every file's `runs.params` (a
    /// top-level key each, beside what the trace itself says; the command line wins).
    pub params: Vec<(String, String)>,
    /// `--shard I/N`: ingest only this shard's part of the listing (`shard`).
    pub shard: Option<crate::shard::Shard>,
}

/// The `--param` pairs as one string (sorted, "" without any): a file ingested with other
/// params is read again, its `runs.params` differ.
pub(crate) fn params_fingerprint(params: &[(String, String)]) -> String {
    let mut v: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    v.sort();
    v.join("\u{1f}")
}

/// Shared counters a front end can poll for a progress bar.
#[derive(Debug, Default, Clone)]
pub struct Progress {
    /// Bytes read from disk so far (every input once).
    pub read: Arc<AtomicU64>,
    /// Expected total of `read`.
    pub total: Arc<AtomicU64>,
}

/// Ingests `paths` into `opts.out`. Fails on the first broken file unless `keep_going`, in
/// which case the broken files are listed in the summary and the rest land. The dataset is
/// locked (`lock`) from the manifest's first read to its last write; a dataset that did not
/// exist before is removed again when the ingest fails.
pub fn ingest(paths: &[PathBuf], opts: &Options, progress: &Progress) -> Result<Summary> {
    let classifier = Arc::new(Classifier::with_user_rules(opts.rules.as_deref())?);
    // `[[subcategory]]` rows are applied by transform; a bad one fails here, naming the file.
    if let (Some(text), Some(path)) = (classifier.user_rules(), &opts.rules) {
        let path = path.display().to_string();
        crate::subcategory::Subclassifier::new(Some((text, &path)))?;
    }
    let rank_map = Arc::new(match &opts.rank_map {
        Some(p) => file::RankMap::load(p)?,
        None => file::RankMap::default(),
    });
    let mut inputs = dataset::discover(paths, opts.label.as_deref(), &opts.out)?;
    if let Some(shard) = opts.shard {
        return sharded::ingest(paths, inputs, shard, opts, &classifier, &rank_map, progress);
    }
    let existed = opts.out.exists();
    std::fs::create_dir_all(&opts.out).map_err(|e| IngestError::io(&opts.out, e))?;
    let lock =
        lock::acquire_for_write(&opts.out, "aorta ingest", &mut lock::say_waiting(&opts.out));
    let res = lock.and_then(|lock| {
        let shared = Shared {
            classifier: &classifier,
            rank_map: &rank_map,
            progress,
            home: None,
        };
        commit::recover(&opts.out)?;
        let mut s = ingest_locked(paths, std::mem::take(&mut inputs), opts, &shared)?;
        s.stale_lock = lock.stale.clone();
        drop(lock);
        Ok(s)
    });
    let nothing = res
        .as_ref()
        .is_ok_and(|s| s.ingested.is_empty() && s.skipped.is_empty() && s.failed.is_empty());
    if !existed && (res.is_err() || nothing) {
        let _ = std::fs::remove_dir_all(&opts.out);
    }
    match res {
        // Every file found was something else (JSON that is no trace): no dataset either.
        Ok(s) if nothing => Err(nothing_to_ingest(paths, &s)),
        r => r,
    }
}

/// `ingest` once the dataset is locked.
pub(crate) fn ingest_locked(
    paths: &[PathBuf],
    inputs: Vec<Input>,
    opts: &Options,
    shared: &Shared,
) -> Result<Summary> {
    let mut manifest = Manifest::load(&opts.out)?;
    let mut summary = Summary::default();
    let todo = plan(inputs, opts, shared, &manifest, &mut summary)?;
    if todo.is_empty() && summary.skipped.is_empty() {
        return Err(nothing_to_ingest(paths, &summary));
    }
    let total: u64 = todo.iter().map(|p| p.bytes).sum();
    shared
        .progress
        .total
        .store(total, std::sync::atomic::Ordering::Relaxed);
    let staging = dataset::staging_dir(
        &opts
            .out
            .join(shared.home.unwrap_or(std::path::Path::new(""))),
    )?;
    let results = run_jobs(&todo, opts, &staging, shared);
    let res = commit_results(
        todo,
        results,
        opts,
        &staging,
        shared,
        &mut manifest,
        &mut summary,
    );
    let _ = std::fs::remove_dir_all(&staging);
    res?;
    // JSON found to be no trace is reported as skipped, not as a file of the ingest.
    summary.found -= summary.not_traces.len();
    Ok(summary)
}

/// Sorts the inputs into skipped (with the reason), unchanged (same content hash as
/// ingested, counted in `summary`) and to be read.
fn plan(
    inputs: Vec<Input>,
    opts: &Options,
    shared: &Shared,
    manifest: &Manifest,
    summary: &mut Summary,
) -> Result<Vec<Planned>> {
    let mut todo = Vec::new();
    let unfit = dataset::unfit_shard_labels(manifest);
    for input in inputs {
        if let Some(why) = input.skip {
            summary.skipped_files.push((input.path, why));
            continue;
        }
        summary.found += 1;
        let key = std::fs::canonicalize(&input.path)
            .map_err(|e| IngestError::io(&input.path, e))?
            .display()
            .to_string();
        let (bytes, mtime_ns) = dataset::stat_input(&input)?;
        let known = manifest.get(&key).filter(|e| {
            e.file_bytes == bytes
                && e.mtime_ns == mtime_ns
                && e.base() == input.label
                && e.rules_version == shared.classifier.version()
                && e.rank_map == shared.rank_map.fingerprint()
                && e.step_marker == opts.step_marker.fingerprint()
                && e.params == params_fingerprint(&opts.params)
                && e.parts.iter().all(|p| opts.out.join(p).exists())
                // A shard's file of a label that is not one job: an unsharded ingest reads it
                // again, to split the label.
                && (shared.home.is_some() || !e.job_unchecked || !unfit.contains_key(e.base()))
        });
        // Same size and mtime: confirm with the content hash before skipping.
        let hash = match known {
            Some(_) if !opts.force => Some(dataset::hash_input(&input)?),
            _ => None,
        };
        match known {
            Some(e) if hash.as_ref() == Some(&e.content_hash) => {
                for (code, n) in &e.findings {
                    *summary.unchanged_findings.entry(code.clone()).or_default() += n;
                }
                summary.skipped.push(input.path);
            }
            _ => todo.push(Planned {
                input,
                key,
                hash,
                bytes,
                mtime_ns,
            }),
        }
    }
    Ok(todo)
}

/// The error of an ingest that found no trace to read: what it found instead.
pub(crate) fn nothing_to_ingest(paths: &[PathBuf], summary: &Summary) -> IngestError {
    let roots: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut seen: Vec<String> = summary
        .skipped_files
        .iter()
        .map(|(p, why)| format!("{} ({why})", p.display()))
        .collect();
    seen.extend(
        summary
            .not_traces
            .iter()
            .map(|p| format!("{} (JSON without trace events)", p.display())),
    );
    let what = match seen.len() {
        0 => "no trace files found".to_string(),
        n => format!("{n} file(s) skipped: {}", seen.join("; ")),
    };
    IngestError::Usage(format!("nothing to ingest in {}: {what}", roots.join(", ")))
}

/// What every job of one ingest shares.
pub(crate) struct Shared<'a> {
    pub classifier: &'a Arc<Classifier>,
    pub rank_map: &'a Arc<file::RankMap>,
    pub progress: &'a Progress,
    /// The shard's folder (relative to the dataset) when this is a shard's ingest.
    pub home: Option<&'a std::path::Path>,
}

fn run_jobs(
    todo: &[Planned],
    opts: &Options,
    staging: &std::path::Path,
    shared: &Shared,
) -> Vec<Result<(Format, FileOutcome)>> {
    let work = || {
        // Each file's share of the pool: fixed for the ingest, so its bytes are too.
        let at_once = todo.len().min(rayon::current_num_threads());
        todo.par_iter()
            .map(|p| {
                crate::window::reading_files(at_once, || {
                    let job = FileJob {
                        path: p.input.path.clone(),
                        siblings: p.input.siblings.clone(),
                        label: p.input.label.clone(),
                        rank_flag: opts.rank,
                        rank_map: shared.rank_map.clone(),
                        content_hash: p.hash.clone(),
                        source_key: p.key.clone(),
                        file_bytes: p.bytes,
                        staging: staging.to_path_buf(),
                        classifier: shared.classifier.clone(),
                        step_marker: Arc::new(opts.step_marker.clone()),
                        params: Arc::new(opts.params.clone()),
                        progress: shared.progress.read.clone(),
                    };
                    let format = detect::detect(&job.path)?;
                    let out = match format {
                        Format::Kineto => kineto::ingest(&job)?,
                        Format::Chrome => chrome::ingest(&job)?,
                        Format::Nsys => nsys::ingest(&job)?,
                        Format::Jsonl => jsonl::ingest(&job)?,
                        Format::RocprofCsv => rocprof::csv::ingest(&job)?,
                        Format::RocprofJson => rocprof::json::ingest(&job)?,
                        Format::Rocpd => rocprof::rocpd::ingest(&job)?,
                        Format::NotATrace if !p.input.explicit => {
                            return Ok((format, FileOutcome::default()))
                        }
                        Format::NotATrace => {
                            return Err(IngestError::file(
                                &job.path,
                                "not a trace: JSON without traceEvents",
                            ))
                        }
                    };
                    // Progress expects every file read once, through a window that counts it; the
                    // readers that do not read that way count the file when they are done.
                    let unread = match format {
                        Format::Nsys | Format::RocprofCsv | Format::Rocpd => p.bytes,
                        _ => 0,
                    };
                    shared
                        .progress
                        .read
                        .fetch_add(unread, std::sync::atomic::Ordering::Relaxed);
                    Ok((format, out))
                })
            })
            .collect()
    };
    match opts.jobs {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .map(|pool| pool.install(work))
            .unwrap_or_else(|_| work()),
        None => work(),
    }
}

fn commit_results(
    todo: Vec<Planned>,
    results: Vec<Result<(Format, FileOutcome)>>,
    opts: &Options,
    staging: &std::path::Path,
    shared: &Shared,
    manifest: &mut Manifest,
    summary: &mut Summary,
) -> Result<()> {
    let mut ok = Vec::new();
    let (inputs, failures) = (todo.len(), results.iter().filter(|r| r.is_err()).count());
    for (p, r) in todo.into_iter().zip(results) {
        match r {
            Ok(o) => ok.push((p, o)),
            Err(e) if opts.keep_going => summary.failed.push(e),
            Err(e) => return Err(e.stopped(inputs - 1, failures - 1)),
        }
    }
    // A shard sees only some of a label's files: the job check is the readers' (`shard`).
    let notes = match shared.home {
        None => crate::settle::settle_jobs(&mut ok, manifest, staging)?,
        Some(_) => BTreeMap::new(),
    };
    for (note, _) in notes.values() {
        if !note.is_empty() && !summary.job_notes.contains(note) {
            summary.job_notes.push(note.clone());
        }
    }
    let mut entries = Vec::new();
    for (p, (format, outcome)) in ok {
        if format == Format::NotATrace {
            summary.not_traces.push(p.input.path);
            continue;
        }
        let checksums = outcome
            .parts
            .iter()
            .map(|rel| {
                Ok((
                    rel.display().to_string(),
                    dataset::checksum(&staging.join(rel))?,
                ))
            })
            .collect::<Result<_>>()?;
        let entry = Entry {
            checksums,
            findings: outcome
                .findings
                .iter()
                .map(|(c, n)| (c.to_string(), *n))
                .collect(),
            source: p.key.clone(),
            content_hash: outcome.content_hash.clone(),
            file_bytes: p.bytes,
            mtime_ns: p.mtime_ns,
            label: outcome.run.clone(),
            base_label: if outcome.run == p.input.label {
                String::new()
            } else {
                p.input.label.clone()
            },
            job_note: notes.get(&p.key).map(|n| n.1.clone()),
            job_unchecked: shared.home.is_some(),
            identity: Some(outcome.identity.clone()),
            rank: outcome.rank,
            format,
            rules_version: shared.classifier.version().to_string(),
            rank_map: shared.rank_map.fingerprint(),
            step_marker: opts.step_marker.fingerprint(),
            params: params_fingerprint(&opts.params),
            parts: outcome.parts.clone(),
            rows: outcome
                .rows
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        };
        let old = manifest.get(&p.key).cloned();
        if let Some(o) = old.as_ref().filter(|o| o.label != entry.label) {
            summary
                .relabelled
                .push((p.input.path.clone(), o.label.clone(), entry.label.clone()));
        }
        entries.push((entry, old));
        summary.bytes += p.bytes;
        summary.ingested.push((p.input.path, outcome));
    }
    if let Some(home) = shared.home {
        // A shard's commit lists its entries in its own manifest; the entries they replace
        // may be the root's (a file ingested unsharded before), whose parts it removes.
        let own = Manifest::load_one(&opts.out.join(home))?;
        commit::Journal::new(staging, &own, &entries)
            .in_home(home)
            .commit(&opts.out)?;
        return Ok(());
    }
    let journal = commit::Journal::new(staging, manifest, &entries);
    // A run none of whose files is left (they moved to another run) goes with its derived
    // tables, in the same commit.
    let gone = commit::vanished_runs(manifest, &journal.manifest);
    *manifest = journal
        .dropping_derived(&opts.out, &gone)?
        .commit(&opts.out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lone rocprofv3 CSV is skipped on re-ingest: the manifest and the reader hash it by
    /// the same rule (`source::hash_files`). They used to differ (the reader hashed it as a
    /// one-file group), so an unchanged CSV was read again on every ingest.
    #[test]
    fn an_unchanged_lone_csv_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("kernel_trace.csv");
        std::fs::write(
            &csv,
            "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Kernel_Id\",\"Kernel_Name\",\"Correlation_Id\",\
             \"Start_Timestamp\",\"End_Timestamp\",\"Private_Segment_Size\",\"Group_Segment_Size\",\
             \"Workgroup_Size_X\",\"Workgroup_Size_Y\",\"Workgroup_Size_Z\",\"Grid_Size_X\",\
             \"Grid_Size_Y\",\"Grid_Size_Z\"\n\
             \"KERNEL_DISPATCH\",1,7,15,\"Cijk_Ailk_Bljk\",0,1000,3000,0,0,4,4,1,1024,1024,1\n",
        )
        .unwrap();
        let opts = Options {
            out: dir.path().join("ds"),
            ..Options::default()
        };
        let paths = [csv.clone()];
        let first = ingest(&paths, &opts, &Progress::default()).unwrap();
        assert_eq!((first.ingested.len(), first.skipped.len()), (1, 0));
        let hash = &first.ingested[0].1.content_hash;
        assert_eq!(*hash, crate::source::content_hash(&csv).unwrap().0);
        let second = ingest(&paths, &opts, &Progress::default()).unwrap();
        assert_eq!((second.ingested.len(), second.skipped.len()), (0, 1));
    }

    /// An empty directory, or one of JSON files that are no traces, is an error that says
    /// so, and leaves no dataset behind.
    #[test]
    fn nothing_to_ingest_is_an_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let opts = Options {
            out: dir.path().join("ds"),
            ..Options::default()
        };
        let err = ingest(std::slice::from_ref(&empty), &opts, &Progress::default()).unwrap_err();
        assert!(err.to_string().contains("no trace files found"), "{err}");
        std::fs::write(empty.join("summary.json"), r#"{"datasets": {}}"#).unwrap();
        let err = ingest(&[empty], &opts, &Progress::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("summary.json (JSON without trace events)"),
            "{err}"
        );
        assert!(!opts.out.exists());
    }

    /// xz and bzip2 traces are read like gzip ones, found by a walk and told by their magic
    /// bytes (a misleading name does not matter); an lz4 file named `.json` is refused with
    /// what it is; a `.nsys-rep` in a walk is skipped with the export hint.
    #[test]
    fn xz_and_bzip2_traces_are_read_and_other_compressions_named() {
        use std::io::Write;
        let trace = br#"{"schemaVersion": 1, "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "nvjet_tst", "pid": 0, "tid": 7,
             "ts": 10.000, "dur": 5.000, "args": {"stream": 7, "correlation": 1}}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let traces = dir.path().join("traces/job");
        std::fs::create_dir_all(&traces).unwrap();
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(trace).unwrap();
        std::fs::write(traces.join("rank0.json.xz"), xz.finish().unwrap()).unwrap();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
        bz.write_all(trace).unwrap();
        // bzip2 bytes under a .gz name: the magic bytes decide.
        std::fs::write(traces.join("rank1.json.gz"), bz.finish().unwrap()).unwrap();
        std::fs::write(traces.join("profile.nsys-rep"), b"not sqlite").unwrap();
        let opts = Options {
            out: dir.path().join("ds"),
            ..Options::default()
        };
        let s = ingest(&[dir.path().join("traces")], &opts, &Progress::default()).unwrap();
        assert_eq!(s.ingested.len(), 2, "{:?}", s.failed);
        assert_eq!(s.rows()["gpu_activities"], 2);
        let (skipped, why) = &s.skipped_files[0];
        assert!(skipped.ends_with("profile.nsys-rep"));
        assert!(why.contains("nsys export --type sqlite"), "{why}");
        let lz4 = dir.path().join("lz4.json");
        std::fs::write(&lz4, [0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7]).unwrap();
        let err = ingest(&[lz4], &opts, &Progress::default()).unwrap_err();
        assert!(err.to_string().contains("lz4-compressed"), "{err}");
        assert_eq!(err.to_string().lines().count(), 1);
    }
}
