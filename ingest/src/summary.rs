//! What one ingest did: the files read, skipped and failed, the rows written, the notes
//! about job identity and the findings, for the CLI's closing lines and `--strict`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::IngestError;
use crate::file::FileOutcome;
use crate::lock;

/// What one ingest did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Inputs found to ingest (skipped files excluded; unchanged ones included).
    pub found: usize,
    /// The files read now, with what each wrote.
    pub ingested: Vec<(PathBuf, FileOutcome)>,
    /// The files found unchanged since the last ingest (same size, mtime, hash, label and
    /// options) and not read again.
    pub skipped: Vec<PathBuf>,
    /// Files found by walking that are JSON but not traces (e.g. a summary.json).
    pub not_traces: Vec<PathBuf>,
    /// Files deliberately not ingested, with the reason (rocprofv3 stats, counters…).
    pub skipped_files: Vec<(PathBuf, String)>,
    /// Failed files, with `keep_going` (without it the first failure fails the ingest).
    pub failed: Vec<IngestError>,
    /// Bytes of the files read now, on disk (compressed where they are; CSV siblings included).
    pub bytes: u64,
    /// Run labels whose files could not be one job, and how they were split (`job`).
    pub job_notes: Vec<String>,
    /// Inputs that moved to another run (a new `--label`, or moved directories): path,
    /// old run, new run.
    pub relabelled: Vec<(PathBuf, String, String)>,
    /// Findings per code of the inputs found unchanged (from the manifest).
    pub(crate) unchanged_findings: BTreeMap<String, u64>,
    /// The holder recorded in a lock file left by a process that died holding it.
    pub stale_lock: Option<lock::Holder>,
}

impl Summary {
    /// Rows written per table over the files read now.
    pub fn rows(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for (_, o) in &self.ingested {
            for (t, n) in &o.rows {
                *m.entry(*t).or_default() += n;
            }
        }
        m
    }

    /// Trace events read over the files read now.
    pub fn events(&self) -> u64 {
        self.ingested.iter().map(|(_, o)| o.events).sum()
    }

    /// Findings per code over the files read now (not the unchanged ones).
    pub fn fresh_findings(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for (_, o) in &self.ingested {
            for (code, n) in &o.findings {
                *m.entry(*code).or_default() += n;
            }
        }
        m
    }

    /// Data-quality findings over the files read now (every code).
    pub fn warnings(&self) -> u64 {
        self.ingested.iter().map(|(_, o)| o.warnings).sum()
    }

    /// Data-quality findings per code over every input of this ingest, the unchanged ones
    /// included (what `--strict` checks).
    pub fn findings(&self) -> BTreeMap<String, u64> {
        let mut m = self.unchanged_findings.clone();
        for (_, o) in &self.ingested {
            for (c, n) in &o.findings {
                *m.entry(c.to_string()).or_default() += n;
            }
        }
        m
    }
}
