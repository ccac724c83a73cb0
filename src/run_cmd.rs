//! `aorta run`: one command from a GPU workload to an HTML page. It launches a workload's
//! ranks (or takes output already on disk), ingests the traces, prints and writes the overlap
//! tables, and draws the report — the same stages as `aorta ingest`, `aorta overlap` and
//! `aorta report`, in one directory.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

use crate::cli::{By, Format, RunArgs};

/// How a workload is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// A binary next to `aorta`, one process per rank, NCCL id through a rendezvous file.
    Ranks,
    /// A binary next to `aorta`, one process per rank, each on its own GPU, no rendezvous
    /// (the ranks do not talk to each other).
    Independent,
    /// A Python script embedded in `aorta`, written next to the traces and started with
    /// `python3 -m torch.distributed.run` (torchrun), which starts the ranks.
    Torchrun,
}

/// One launch of a workload: what `aorta run` and each run of `aorta sweep` start.
pub(crate) struct Launch<'a> {
    /// The workload's name (one of [`WORKLOADS`]).
    pub workload: &'a str,
    /// Processes (ranks), one GPU each.
    pub ranks: usize,
    /// Its arguments.
    pub args: &'a [String],
    /// Environment variables set for its processes.
    pub env: &'a [(String, String)],
    /// Where the torch workload's scripts are written.
    pub scripts: PathBuf,
    /// Where the ranks' output goes (a sweep's log per run); None: this terminal.
    pub log: Option<PathBuf>,
}

/// A workload `aorta run` can launch.
pub(crate) struct Workload {
    pub name: &'static str,
    /// Executable (Ranks) or script (Torchrun) name.
    pub program: &'static str,
    pub launch: Start,
}

/// The workloads `aorta run` can launch, by name (`aorta run --help` describes them).
pub(crate) const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "overlap-bench",
        program: "aorta-overlap-bench",
        launch: Start::Ranks,
    },
    Workload {
        name: "copy-overlap",
        program: "aorta-copy-overlap",
        launch: Start::Independent,
    },
    Workload {
        name: "fsdp",
        program: "fsdp_overlap.py",
        launch: Start::Torchrun,
    },
];

/// The torch workload's files, embedded so that an installed `aorta` can run it.
const TORCH_FILES: [(&str, &str); 3] = [
    (
        "fsdp_overlap.py",
        include_str!("../workloads/torch/fsdp_overlap.py"),
    ),
    (
        "fsdp_run.py",
        include_str!("../workloads/torch/fsdp_run.py"),
    ),
    (
        "aorta_metrics.py",
        include_str!("../workloads/torch/aorta_metrics.py"),
    ),
];

pub(crate) fn run(a: RunArgs) -> Result<ExitCode> {
    let existing = Path::new(&a.workload);
    // An existing folder is labelled exactly as `aorta ingest` labels it (one run per job); a
    // launched workload writes one job, named after the workload.
    let (traces, label) = if existing.exists() {
        (existing.to_path_buf(), a.label.clone())
    } else {
        let traces = a.out.join("traces");
        let made = Made::before(&[traces.clone(), a.out.join("workload"), a.out.clone()]);
        let how = Launch {
            workload: &a.workload,
            ranks: a.ranks,
            args: &a.args,
            env: &[],
            scripts: a.out.join("workload"),
            log: None,
        };
        if let Err(e) = launch(&how, &traces) {
            made.undo();
            return Err(e);
        }
        (traces, a.label.clone().or(Some(a.workload.clone())))
    };
    let data = a.out.join("data");
    let (runs, findings) = ingest(&traces, &data, label.as_deref())?;
    let violations = a
        .strict
        .as_ref()
        .map(|s| s.check(&findings))
        .unwrap_or_default();
    let _lock = crate::dataset_lock::for_write(&data, "aorta run")?;
    let tables = aorta_transform::overlap::compute_and_store(&data, &runs)?;
    crate::overlap_cmd::print(&data, &tables, &runs, By::Rank, Format::Table)?;
    let html = a.out.join("report.html");
    let opts = aorta_reports::RunReportOptions {
        runs: runs.clone(),
        ..Default::default()
    };
    aorta_reports::run_report(&data, &opts, &html)?;
    println!(
        "wrote {} (dataset {}, traces {})",
        html.display(),
        data.display(),
        traces.display()
    );
    for v in &violations {
        eprintln!("aorta: {v}");
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The directories a launch may create (traces, the torch script's folder, the output
/// directory) that did not exist before it: a launch that fails (no GPU, no PyTorch) takes
/// them back, so that it leaves nothing behind. What a workload wrote before failing stays.
struct Made(Vec<PathBuf>);

impl Made {
    /// Of `dirs` (innermost first), those not there yet.
    fn before(dirs: &[PathBuf]) -> Made {
        Made(dirs.iter().filter(|d| !d.exists()).cloned().collect())
    }

    /// Removes them again, innermost first: the torch scripts aorta wrote, then each
    /// directory if it is empty.
    fn undo(&self) {
        for d in &self.0 {
            if d.file_name().is_some_and(|n| n == "workload") {
                for (name, _) in TORCH_FILES {
                    let _ = std::fs::remove_file(d.join(name));
                }
            }
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Starts the named workload writing into `traces` and waits for it.
pub(crate) fn launch(a: &Launch, traces: &Path) -> Result<()> {
    let Some(w) = WORKLOADS.iter().find(|w| w.name == a.workload) else {
        let known: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
        bail!(
            "`{}`: neither an existing path nor a workload (workloads: {})",
            a.workload,
            known.join(", ")
        );
    };
    std::fs::create_dir_all(traces).with_context(|| traces.display().to_string())?;
    match w.launch {
        Start::Ranks => launch_ranks(a, w.program, traces, true),
        Start::Independent => launch_ranks(a, w.program, traces, false),
        Start::Torchrun => launch_torchrun(a, traces),
    }
}

/// Standard output for a launched process: the log file (appended), else this terminal.
fn stdout_to(log: Option<&Path>) -> Result<Stdio> {
    Ok(match log {
        Some(p) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| p.display().to_string())?,
        ),
        None => Stdio::inherit(),
    })
}

/// Runs `a.ranks` processes of the workload (one per GPU, `RANK`/`WORLD_SIZE` set, with
/// `rendezvous` the NCCL id through a file); fails with the first failing rank's last stderr
/// line.
fn launch_ranks(a: &Launch, exe: &str, traces: &Path, rendezvous: bool) -> Result<()> {
    let bin = find_executable(exe)?;
    let rdv = traces.join(format!(".rendezvous-{}", std::process::id()));
    let ranks = a.ranks.max(1);
    let children: Vec<_> = (0..ranks)
        .map(|r| {
            let mut cmd = Command::new(&bin);
            cmd.args(a.args);
            if rendezvous {
                cmd.arg("--rendezvous").arg(&rdv);
            }
            cmd.arg("--out")
                .arg(traces)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", ranks.to_string())
                .envs(a.env.iter().map(|(k, v)| (k, v)))
                .stdout(stdout_to(a.log.as_deref())?)
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| bin.display().to_string())
        })
        .collect::<Result<_>>()?;
    let mut failure = None;
    for (r, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output()?;
        let err = String::from_utf8_lossy(&out.stderr);
        if let Some(p) = &a.log {
            use std::io::Write as _;
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(p) {
                let _ = write!(f, "{err}");
            }
        }
        if !out.status.success() && failure.is_none() {
            failure = Some(format!(
                "{exe} rank {r} failed ({}): {}",
                out.status,
                last_line(&err)
            ));
        }
    }
    let _ = std::fs::remove_file(&rdv);
    match failure {
        Some(f) => bail!(f),
        None => Ok(()),
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

/// Writes the embedded torch script into `DIR/workload` and runs it under torchrun with
/// `a.ranks` processes (`$AORTA_PYTHON`, else `python3`).
fn launch_torchrun(a: &Launch, traces: &Path) -> Result<()> {
    let python = std::env::var("AORTA_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import torch"])
        .output()
        .with_context(|| format!("{python} (set AORTA_PYTHON to the Python with PyTorch)"))?;
    if !probe.status.success() {
        bail!(
            "PyTorch not found: `{python} -c 'import torch'` failed ({}); set AORTA_PYTHON to \
             the Python that has it",
            last_line(&String::from_utf8_lossy(&probe.stderr))
        );
    }
    let dir = &a.scripts;
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    for (name, text) in TORCH_FILES {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| p.display().to_string())?;
    }
    let mut cmd = Command::new(&python);
    cmd.args([
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
    ])
    .arg(a.ranks.max(1).to_string())
    .arg(dir.join(TORCH_FILES[0].0))
    .args(a.args)
    .arg("--output-dir")
    .arg(traces)
    .envs(a.env.iter().map(|(k, v)| (k, v)))
    .stdout(stdout_to(a.log.as_deref())?);
    if a.log.is_some() {
        cmd.stderr(stdout_to(a.log.as_deref())?);
    }
    let status = cmd
        .status()
        .with_context(|| format!("{python} -m torch.distributed.run"))?;
    if !status.success() {
        match &a.log {
            Some(p) => bail!(
                "the fsdp workload failed ({status}): {}",
                last_line(&std::fs::read_to_string(p).unwrap_or_default())
            ),
            None => {
                bail!("the fsdp workload failed ({status}): its ranks' errors are printed above")
            }
        }
    }
    Ok(())
}

/// `name` next to the running `aorta` binary (a cargo build puts them together), else on
/// `PATH`.
fn find_executable(name: &str) -> Result<PathBuf> {
    let here = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)));
    let path = std::env::var_os("PATH").unwrap_or_default();
    here.into_iter()
        .chain(std::env::split_paths(&path).map(|d| d.join(name)))
        .find(|p| p.is_file())
        .with_context(|| {
            format!("{name} not found next to aorta or on PATH (cargo build -p aorta-workloads)")
        })
}

/// The runs that hold the traces, as ingest labelled them, and the findings per code.
type Ingested = (Vec<String>, std::collections::BTreeMap<String, u64>);

/// `aorta ingest TRACES -o DATA [--label LABEL]`, quietly, failing on the first broken file.
fn ingest(traces: &Path, data: &Path, label: Option<&str>) -> Result<Ingested> {
    let opts = aorta_ingest::Options {
        out: data.to_path_buf(),
        label: label.map(str::to_string),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[traces.to_path_buf()], &opts, &Default::default())?;
    if s.ingested.is_empty() && s.skipped.is_empty() {
        bail!("{}: no traces found", traces.display());
    }
    let root = std::fs::canonicalize(traces).with_context(|| traces.display().to_string())?;
    let manifest = aorta_ingest::dataset::Manifest::load(data)?;
    let mut runs: Vec<String> = manifest
        .inputs
        .iter()
        .filter(|e| Path::new(&e.source).starts_with(&root))
        .map(|e| e.label.clone())
        .collect();
    runs.sort();
    runs.dedup();
    eprintln!(
        "ingested {} files from {} into {} (runs: {})",
        s.ingested.len() + s.skipped.len(),
        traces.display(),
        data.display(),
        runs.join(", ")
    );
    for note in &s.job_notes {
        eprintln!("note: {note}");
    }
    Ok((runs, s.findings()))
}
