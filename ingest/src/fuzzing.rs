//! Entry points for the coverage-guided fuzzers in `fuzz/` (docs/FUZZING.md), built only with
//! the `fuzzing` feature: each takes the bytes of one input and runs one reader on them,
//! exactly as `aorta ingest` does after detection, so the fuzzer reaches every stage a real
//! file reaches (decompression, the walk and its SIMD scans, settle, the sink, Parquet).
//!
//! Why a feature: the readers take a `FileJob` (a path, a staging directory, the shared rule
//! table); building one needs crate internals that are not part of the library's interface.
//! The same entry points replay the committed seeds and crashers in the ingest test binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::classify::{Classifier, Kind, RulesError};
use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome, RankMap};
use crate::{chrome, jsonl, kineto, nsys, rocprof};

/// The readers a fuzz target can drive, with the file name each input is written under
/// (names matter: rocprof takes a pid from them, the CSV reader its siblings' roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The Kineto reader (`fuzz_targets/kineto.rs`).
    Kineto,
    /// The generic Chrome-trace reader.
    Chrome,
    /// The Python aorta JSONL reader.
    Jsonl,
    /// Several CSV files of one process, separated by NUL bytes in the input.
    RocprofCsv,
    /// The rocprofv3 JSON reader.
    RocprofJson,
    /// The rocpd (rocprofv3 SQLite) reader: the input is written as a database file.
    Rocpd,
    /// The Nsight Systems SQLite-export reader.
    Nsys,
}

impl Reader {
    /// Every reader: one fuzz target each (docs/FUZZING.md).
    pub const ALL: [Reader; 7] = [
        Reader::Kineto,
        Reader::Chrome,
        Reader::Jsonl,
        Reader::RocprofCsv,
        Reader::RocprofJson,
        Reader::Rocpd,
        Reader::Nsys,
    ];

    /// The fuzz target's name (`fuzz/fuzz_targets/<name>.rs`, `fuzz/seeds/<name>/`).
    pub const fn name(self) -> &'static str {
        match self {
            Reader::Kineto => "kineto",
            Reader::Chrome => "chrome",
            Reader::Jsonl => "jsonl",
            Reader::RocprofCsv => "rocprof_csv",
            Reader::RocprofJson => "rocprof_json",
            Reader::Rocpd => "rocpd",
            Reader::Nsys => "nsys",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Reader::Kineto => "rank3.pt.trace.json",
            Reader::Chrome => "trace.json",
            Reader::Jsonl => "rank_1_metrics.jsonl",
            Reader::RocprofCsv => "908_kernel_trace.csv",
            Reader::RocprofJson => "908_results.json",
            Reader::Rocpd => "908_results.db",
            Reader::Nsys => "report.sqlite",
        }
    }

    fn run(self, job: &FileJob) -> Result<FileOutcome> {
        match self {
            Reader::Kineto => kineto::ingest(job),
            Reader::Chrome => chrome::ingest(job),
            Reader::Jsonl => jsonl::ingest(job),
            Reader::RocprofCsv => rocprof::csv::ingest(job),
            Reader::RocprofJson => rocprof::json::ingest(job),
            Reader::Rocpd => rocprof::rocpd::ingest(job),
            Reader::Nsys => nsys::ingest(job),
        }
    }
}

/// A private directory the inputs are written to, reused by every run of one fuzzing
/// process (in `/dev/shm` where there is one: no disk writes).
pub struct Scratch {
    dir: tempfile::TempDir,
    classifier: Arc<Classifier>,
    rank_map: Arc<RankMap>,
}

impl Scratch {
    /// A fresh directory, with the shipped rules and a small rank map every input is read with.
    pub fn new() -> std::io::Result<Scratch> {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)?
        } else {
            tempfile::tempdir()?
        };
        // Pids the corpus and the seeds use, so the rank-map branch is reached too.
        let rank_map = RankMap::parse(Path::new("map"), "908 5\n1701896 0\n").expect("valid");
        Ok(Scratch {
            dir,
            classifier: Arc::new(Classifier::builtin()),
            rank_map: Arc::new(rank_map),
        })
    }

    /// Where the inputs are written.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// From now on, in this process, Parquet output is discarded after its batches are built
/// and checked (`writer::DISCARD`): a fuzzing process tests the readers, not the Parquet
/// encoder, which was 40 % of each run. Never called by tests, which share one process.
pub fn discard_parquet() {
    crate::writer::DISCARD.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Runs `reader` on `bytes` as aorta ingest would. An error must be one line that starts
/// with the input's path (the promise of every reader); a panic is the finding.
pub fn read(scratch: &Scratch, reader: Reader, bytes: &[u8]) -> Result<FileOutcome> {
    let root = scratch.path();
    let staging = root.join("staging");
    let inputs = write_inputs(root, reader, bytes)?;
    std::fs::create_dir_all(&staging).map_err(|e| IngestError::io(&staging, e))?;
    let job = FileJob {
        path: inputs[0].clone(),
        siblings: inputs[1..].to_vec(),
        label: "fuzz".into(),
        rank_flag: None,
        rank_map: scratch.rank_map.clone(),
        content_hash: None,
        source_key: inputs[0].display().to_string(),
        file_bytes: bytes.len() as u64,
        staging: staging.clone(),
        classifier: scratch.classifier.clone(),
        step_marker: Default::default(),
        progress: Default::default(),
        params: Default::default(),
    };
    let res = reader.run(&job);
    let _ = std::fs::remove_dir_all(&staging);
    for p in &inputs {
        let _ = std::fs::remove_file(p);
        // A WAL-mode input is opened immutable (`crate::sqlite`), so SQLite writes no
        // sidecar files; should one appear, it must not carry state to the next input.
        for side in ["-wal", "-shm"] {
            let mut s = p.clone().into_os_string();
            s.push(side);
            let _ = std::fs::remove_file(s);
        }
    }
    if let Err(e) = &res {
        let msg = e.to_string();
        let path = root.display().to_string();
        assert!(!msg.contains('\n'), "a multi-line error: {msg:?}");
        assert!(msg.starts_with(&path), "an error without the file: {msg:?}");
    }
    res
}

/// Writes the input file(s) of one run; the CSV reader's files are the NUL-separated pieces.
fn write_inputs(root: &Path, reader: Reader, bytes: &[u8]) -> Result<Vec<PathBuf>> {
    let pieces: Vec<&[u8]> = match reader {
        Reader::RocprofCsv => bytes.split(|&b| b == 0).take(8).collect(),
        _ => vec![bytes],
    };
    let mut paths = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let p = match i {
            0 => root.join(reader.file_name()),
            i => root.join(format!("908_sibling{i}.csv")),
        };
        std::fs::write(&p, piece).map_err(|e| IngestError::io(&p, e))?;
        paths.push(p);
    }
    Ok(paths)
}

/// Parses a `--rank-map` file's text (lossily decoded, as `RankMap::load` would reject what
/// is not UTF-8 before parsing) and checks what it kept.
pub fn rank_map(bytes: &[u8]) -> Result<RankMap> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(RankMap::default());
    };
    let map = RankMap::parse(Path::new("map.txt"), text)?;
    assert!(map.len() <= text.lines().count());
    Ok(map)
}

/// Compiles a `--rules` file on its own (not merged with the shipped table, whose
/// compilation would dominate every run) and classifies a few names with it.
pub fn rules(bytes: &[u8]) -> Result<(), RulesError> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let c = Classifier::from_rules_text(text, "rules.toml")?;
    for name in ["ncclDevKernel_AllReduce", "Memcpy HtoD", "", text] {
        for kind in Kind::ALL {
            c.classify(kind, name);
        }
        c.collective_op(name);
    }
    Ok(())
}
