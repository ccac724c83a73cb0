//! The dataset on disk: finding inputs, the manifest, and the atomic commit.
//!
//! Every run writes into `<out>/.staging-<pid>/` and only moves finished parts into place after
//! all files succeeded (or, with `--keep-going`, the ones that did). A failed or interrupted
//! run therefore leaves the previous dataset exactly as it was; the manifest is replaced last,
//! by rename.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IngestError, Result};
use crate::schema::SCHEMA_VERSION;

pub(crate) use crate::format::Format;

/// The manifest's file name in the dataset directory: its presence makes a directory a dataset.
pub const MANIFEST: &str = "manifest.json";

/// An input found on disk, with the run label it belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub path: PathBuf,
    pub label: String,
    /// Named on the command line (not found by walking a directory).
    pub explicit: bool,
    /// Files read with this one as one job (a rocprofv3 CSV group), in the content hash too.
    pub siblings: Vec<PathBuf>,
    /// Not ingested, and why (a CSV that is not a trace).
    pub skip: Option<String>,
    /// The partition key of `--shard` (`shard`): the run label and the path under the root
    /// the file was found from, the same on every machine that sees the same listing.
    pub key: String,
}

const TRACE_SUFFIXES: &[&str] = &[
    ".json",
    ".json.gz",
    ".json.zst",
    ".json.xz",
    ".json.bz2",
    ".json.tmp",
    ".jsonl",
    ".jsonl.gz",
    ".jsonl.zst",
    ".jsonl.xz",
    ".jsonl.bz2",
    ".nsys-rep",
    ".qdrep",
    ".sqlite",
    ".csv",
    ".db",
];

fn is_candidate(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    TRACE_SUFFIXES.iter().any(|s| name.ends_with(s)) && name != MANIFEST
}

/// Walks `roots` (files or directories), sorted; the label of a file is the path under its
/// root of the directory that holds it (`cuda/h200_fsdp2` for
/// `traces/cuda/h200_fsdp2/rank0.json` under `traces`), or the root's own name for files
/// directly in it, unless `label` is given. A directory is one job until its files say
/// otherwise (`job`). A file reached more than once is one input.
pub(crate) fn discover(roots: &[PathBuf], label: Option<&str>, skip: &Path) -> Result<Vec<Input>> {
    if label.is_some_and(|l| l.trim().is_empty()) {
        return Err(IngestError::Usage(
            "--label: a run label cannot be empty".into(),
        ));
    }
    let mut out = Vec::new();
    for root in roots {
        let meta = std::fs::metadata(root).map_err(|e| IngestError::io(root, e))?;
        if meta.is_file() {
            let l = label
                .map(str::to_string)
                .unwrap_or_else(|| dir_name(root.parent()));
            let name = root.file_name().unwrap_or_default().to_string_lossy();
            out.push(Input {
                key: format!("{l}\n{name}"),
                path: root.clone(),
                label: l,
                explicit: true,
                siblings: vec![],
                skip: None,
            });
            continue;
        }
        let mut found = Found::default();
        walk(root, skip, &mut found)?;
        found.passed.sort_by(|a, b| a.0.cmp(&b.0));
        out.extend(found.passed.into_iter().map(|(path, why)| Input {
            key: rel_key("", root, &path),
            path,
            label: String::new(),
            explicit: false,
            siblings: vec![],
            skip: Some(why.reason().to_string()),
        }));
        let mut files = found.files;
        files.sort();
        for f in files {
            let rel = f.strip_prefix(root).unwrap_or(&f);
            let l = match (label, rel.parent().and_then(job_dir)) {
                (Some(l), _) => l.to_string(),
                (None, Some(dir)) => dir,
                (None, None) => dir_name(Some(root)),
            };
            let skip = crate::detect::unreadable(&f).map(str::to_string);
            out.push(Input {
                key: rel_key(&l, root, &f),
                path: f,
                label: l,
                explicit: false,
                siblings: vec![],
                skip,
            });
        }
    }
    // A file reached twice (`DIR DIR/file`, one path twice, a link to a file beside it) is
    // read once, as it was first found: two readers of one file would write one part twice.
    let mut seen = std::collections::HashSet::new();
    out.retain(|i| seen.insert(std::fs::canonicalize(&i.path).unwrap_or_else(|_| i.path.clone())));
    group_csv(out)
}

/// The `--shard` key of `path`, found under `root`: its label and its path under the root.
fn rel_key(label: &str, root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    format!("{label}\n{}", rel.to_string_lossy())
}

/// Replaces the rocprofv3 CSV inputs by their jobs (see `rocprof::csv::group`).
fn group_csv(inputs: Vec<Input>) -> Result<Vec<Input>> {
    let is_csv = |i: &Input| {
        i.skip.is_none()
            && i.path
                .to_string_lossy()
                .to_ascii_lowercase()
                .ends_with(".csv")
    };
    let csvs: Vec<PathBuf> = inputs
        .iter()
        .filter(|i| is_csv(i))
        .map(|i| i.path.clone())
        .collect();
    if csvs.is_empty() {
        return Ok(inputs);
    }
    let mut plans: std::collections::HashMap<PathBuf, crate::rocprof::csv::Planned> =
        crate::rocprof::csv::group(&csvs)?
            .into_iter()
            .map(|p| match &p {
                crate::rocprof::csv::Planned::Job(f, _)
                | crate::rocprof::csv::Planned::Skip(f, _) => (f.clone(), p),
            })
            .collect();
    let mut out = Vec::new();
    for mut i in inputs {
        if !is_csv(&i) {
            out.push(i);
            continue;
        }
        match plans.remove(&i.path) {
            Some(crate::rocprof::csv::Planned::Job(_, sib)) => i.siblings = sib,
            Some(crate::rocprof::csv::Planned::Skip(_, why)) => i.skip = Some(why),
            None => continue, // read with its group's kernel trace
        }
        out.push(i);
    }
    Ok(out)
}

/// Size (all files) and latest modification time of an input and its siblings.
pub(crate) fn stat_input(input: &Input) -> Result<(u64, i64)> {
    let (mut bytes, mut mtime) = crate::source::stat(&input.path)?;
    for s in &input.siblings {
        let (b, m) = crate::source::stat(s)?;
        bytes += b;
        mtime = mtime.max(m);
    }
    Ok((bytes, mtime))
}

/// The content hash of an input, its siblings included.
pub(crate) fn hash_input(input: &Input) -> Result<String> {
    crate::source::hash_files(&input.path, &input.siblings)
}

/// The run label of a directory under the root: its path, `/`-separated, without trailing
/// all-digit components (rocprofv3 writes each process into `<pid>/`: the processes of one
/// job); `None` for the root itself.
fn job_dir(rel: &Path) -> Option<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    while parts.len() > 1
        && parts
            .last()
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    {
        parts.pop();
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

fn dir_name(p: Option<&Path>) -> String {
    let p = p
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::canonicalize(p)
        .ok()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "run".into())
}

/// Why a walk passes over an entry without reading it: every such entry is reported, so a
/// trace under an unexpected name is never dropped without a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Hidden,
    HiddenDir,
    NotByName,
    DirLink,
    NotRegular,
    Output,
}

impl Pass {
    fn reason(self) -> &'static str {
        match self {
            Pass::Hidden => "hidden file",
            Pass::HiddenDir => "hidden directory, not walked",
            Pass::NotByName => "not a trace file name (*.json, *.jsonl, compressed or not, *.sqlite, *.db, *.csv); name it to read it anyway",
            Pass::DirLink => "symbolic link to a directory, not followed",
            Pass::NotRegular => "not a regular file",
            Pass::Output => "the output dataset, not walked",
        }
    }
}

/// What a walk found: candidate files, and the entries it passed over with the reason.
#[derive(Default)]
struct Found {
    files: Vec<PathBuf>,
    passed: Vec<(PathBuf, Pass)>,
}

fn walk(dir: &Path, skip: &Path, out: &mut Found) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| IngestError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| IngestError::io(dir, e))?;
        let p = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        let ft = entry.file_type().map_err(|e| IngestError::io(&p, e))?;
        // A link is judged by what it points to (a dangling one is not a regular file).
        let target = if ft.is_symlink() {
            std::fs::metadata(&p).map(|m| m.file_type()).ok()
        } else {
            Some(ft)
        };
        let is_dir = target.is_some_and(|t| t.is_dir());
        let pass = if same_path(&p, skip) {
            Some(Pass::Output)
        } else if hidden {
            Some(if is_dir {
                Pass::HiddenDir
            } else {
                Pass::Hidden
            })
        } else if is_dir && ft.is_symlink() {
            Some(Pass::DirLink)
        } else if is_dir {
            walk(&p, skip, out)?;
            None
        } else if !target.is_some_and(|t| t.is_file()) {
            Some(Pass::NotRegular)
        } else if !is_candidate(&p) {
            Some(Pass::NotByName)
        } else {
            out.files.push(p.clone());
            None
        };
        if let Some(why) = pass {
            out.passed.push((p, why));
        }
    }
    Ok(())
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// One ingested input file in the manifest: where it came from, what run it is, its parts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The input's canonical path: the key a later ingest finds the file again by.
    pub source: String,
    pub(crate) content_hash: String,
    /// Size and modification time when ingested: a file whose both match is hashed again
    /// to confirm it is unchanged; any other file is hashed while it is read.
    #[serde(default)]
    pub(crate) file_bytes: u64,
    #[serde(default)]
    pub(crate) mtime_ns: i64,
    /// The run the file belongs to.
    pub label: String,
    /// The label discovery gave the file (its directory, or `--label`), when the file became
    /// a run of its own because its directory's files cannot be one job (`job`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_label: String,
    /// Why `base_label` was split (`job::decide`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_note: Option<String>,
    /// Ingested by a shard (`shard`), which cannot tell whether its label's files are one
    /// job: the readers check (`shard_job_conflict`), and an ingest without `--shard` reads
    /// the file again, to split the label, when they are not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) job_unchecked: bool,
    /// What the file says about its job, for the check against files ingested later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) identity: Option<crate::job::Identity>,
    pub(crate) rank: i64,
    pub(crate) format: Format,
    pub(crate) rules_version: String,
    /// `RankMap::fingerprint` of the `--rank-map` used ("" without one): a file ingested
    /// under another map is read again, its ranks may differ.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) rank_map: String,
    /// The `--step-marker` pattern ("" for `ProfilerStep#N`): a file read with another marker
    /// is read again, its steps may differ.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) step_marker: String,
    /// The `--param` pairs it was ingested with ("" without any): a file ingested with other
    /// params is read again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) params: String,
    /// The Parquet parts written from the file, relative to the dataset root.
    pub parts: Vec<PathBuf>,
    pub(crate) rows: BTreeMap<String, u64>,
    /// Each part's `checksum` (size and content hash), so a reader names a damaged part
    /// (truncated, bit-flipped) instead of reading wrong numbers. Absent in datasets written
    /// before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checksums: BTreeMap<String, String>,
    /// Data-quality findings per diagnostic code, for `--strict` on a re-run that finds the
    /// input unchanged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) findings: BTreeMap<String, u64>,
}

/// A part's checksum as the manifest records it: `<bytes>:<xxh3-128 hex>`.
pub fn checksum(path: &Path) -> Result<String> {
    let (hash, bytes) = crate::source::content_hash(path)?;
    Ok(format!("{bytes}:{hash}"))
}

impl Entry {
    /// The label discovery gives this file: `base_label`, else `label`.
    pub(crate) fn base(&self) -> &str {
        if self.base_label.is_empty() {
            &self.label
        } else {
            &self.base_label
        }
    }
}

/// `manifest.json`: what the dataset holds, one entry per input file, written by every commit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub(crate) schema_version: u32,
    pub(crate) aorta_version: String,
    /// The ingested files, sorted by `source`.
    pub inputs: Vec<Entry>,
    /// The shard folders (`shard::homes`) whose manifests `load` merged in: `save` into the
    /// dataset's root folds them (their manifests are removed once `manifest.json` lists their
    /// entries). Never written into `manifest.json`; a commit journal keeps it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) folded: Vec<PathBuf>,
}

impl Manifest {
    /// Reads `out`'s manifest, merged with the manifests of its shards (`shard`): an entry a
    /// shard lists replaces the root's entry of the same source (a shard's manifest is newer
    /// than the root's last fold). An empty one when there is none yet. A manifest of another
    /// schema version is an error (a dataset is never mixed).
    pub fn load(out: &Path) -> Result<Manifest> {
        let mut m = Manifest::load_one(out)?;
        let homes = crate::shard::homes(out)?;
        if homes.is_empty() {
            return Ok(m);
        }
        let mut by_source: BTreeMap<String, Entry> = std::mem::take(&mut m.inputs)
            .into_iter()
            .map(|e| (e.source.clone(), e))
            .collect();
        for h in homes {
            if !out.join(&h).join(MANIFEST).exists() {
                continue;
            }
            for e in Manifest::load_one(&out.join(&h))?.inputs {
                by_source.insert(e.source.clone(), e);
            }
            m.folded.push(h);
        }
        m.inputs = by_source.into_values().collect();
        Ok(m)
    }

    /// Reads the one manifest in `dir` (the dataset's root or a shard's folder).
    pub(crate) fn load_one(dir: &Path) -> Result<Manifest> {
        let p = dir.join(MANIFEST);
        let empty = Manifest {
            schema_version: SCHEMA_VERSION,
            aorta_version: env!("CARGO_PKG_VERSION").into(),
            inputs: vec![],
            folded: vec![],
        };
        match std::fs::read(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(empty),
            Err(e) => Err(IngestError::io(&p, e)),
            Ok(b) => {
                let m: Manifest = serde_json::from_slice(&b)
                    .map_err(|e| IngestError::file(&p, format!("not an aorta manifest: {e}")))?;
                if m.schema_version != SCHEMA_VERSION {
                    return Err(IngestError::file(&p, format!(
                        "dataset has schema v{} but this aorta writes v{SCHEMA_VERSION}: ingest into a new directory or delete it",
                        m.schema_version
                    )));
                }
                Ok(m)
            }
        }
    }

    pub(crate) fn get(&self, source: &str) -> Option<&Entry> {
        self.inputs.iter().find(|e| e.source == source)
    }

    /// Writes the manifest into `dir` by temp file and rename; then removes the shard
    /// manifests it folded (`load`), whose entries it now lists.
    pub fn save(&mut self, dir: &Path) -> Result<()> {
        self.inputs.sort_by(|a, b| a.source.cmp(&b.source));
        self.aorta_version = env!("CARGO_PKG_VERSION").into();
        let folded = std::mem::take(&mut self.folded);
        let p = dir.join(MANIFEST);
        let text = serde_json::to_vec_pretty(self).expect("manifest serializes");
        // A run that changed nothing leaves the file (and its mtime) alone.
        if !std::fs::read(&p).is_ok_and(|old| old == text) {
            crate::atomic::write_bytes(&p, &text).map_err(|e| IngestError::io(&p, e))?;
        }
        for h in folded {
            let m = dir.join(&h).join(MANIFEST);
            match std::fs::remove_file(&m) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(IngestError::io(&m, e))
                }
                _ => {
                    let _ = std::fs::remove_dir(dir.join(&h));
                }
            }
        }
        let _ = std::fs::remove_dir(dir.join(crate::shard::SHARDS));
        Ok(())
    }
}

/// Why a dataset ingested in shards is not fit to read, if it is not: a run label whose
/// files cannot be one job (`job::decide`). Shards cannot check that (each reads some of a
/// label's files, `shard`), so the readers do, over the labels with files a shard read
/// (`Entry::job_unchecked`) that no unsharded ingest has split already.
pub fn shard_job_conflict(m: &Manifest) -> Option<String> {
    let (label, why) = unfit_shard_labels(m).into_iter().next()?;
    Some(format!(
        "run `{label}` was ingested in shards but its files cannot be one job: {why}; ingest that directory again without --shard into this dataset (its files are read again and the label split into runs), or give each job its own --label"
    ))
}

/// The labels `shard_job_conflict` refuses, each with the reason: an ingest without `--shard`
/// reads their files again (to split them), and only theirs.
pub(crate) fn unfit_shard_labels(m: &Manifest) -> BTreeMap<String, String> {
    let mut groups: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in &m.inputs {
        groups.entry(e.base()).or_default().push(e);
    }
    let mut unfit = BTreeMap::new();
    for (label, entries) in groups {
        let unchecked = entries.iter().any(|e| e.job_unchecked);
        if !unchecked || entries.iter().any(|e| !e.base_label.is_empty()) {
            continue;
        }
        let Some(ids) = entries
            .iter()
            .map(|e| e.identity.as_ref())
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let paths: Vec<PathBuf> = entries.iter().map(|e| PathBuf::from(&e.source)).collect();
        let members: Vec<crate::job::Member> = paths
            .iter()
            .zip(ids)
            .map(|(path, id)| crate::job::Member { path, id })
            .collect();
        if let Some(why) = crate::job::decide(&members).reason {
            unfit.insert(label.to_string(), why);
        }
    }
    unfit
}

/// `aorta dataset merge`: folds the shards' manifests into the dataset's own and removes
/// `shards/`; the number of shard manifests folded and of inputs the dataset then lists.
/// The caller holds the dataset's lock for writing (no shard runs) and has finished any
/// commit left (`commit::recover`). Refused, changing nothing, when a run label's files
/// cannot be one job (`shard_job_conflict`).
pub fn fold_shards(out: &Path) -> Result<(usize, usize)> {
    let mut m = Manifest::load(out)?;
    if let Some(why) = shard_job_conflict(&m) {
        return Err(IngestError::file(out, why));
    }
    let (folded, inputs) = (m.folded.len(), m.inputs.len());
    m.save(out)?;
    let dir = out.join(crate::shard::SHARDS);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(IngestError::io(&dir, e)),
        _ => Ok((folded, inputs)),
    }
}

/// The staging directory of this process; stale ones of dead runs are removed first.
pub fn staging_dir(out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).map_err(|e| IngestError::io(out, e))?;
    if let Ok(rd) = std::fs::read_dir(out) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".staging-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let s = out.join(format!(".staging-{}", std::process::id()));
    std::fs::create_dir_all(&s).map_err(|e| IngestError::io(&s, e))?;
    Ok(s)
}
