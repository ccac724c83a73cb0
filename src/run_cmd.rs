//! `aorta run`: one command from a GPU workload to an HTML page. It launches a workload's
//! ranks (or takes output already on disk), ingests the traces, prints and writes the overlap
//! tables, and draws the report — the same stages as `aorta ingest`, `aorta overlap` and
//! `aorta report`, in one directory.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

use crate::cli::{By, Format, OverlapArgs, RunArgs};

/// The workloads `aorta run` can launch, by name: (name, executable, what it does).
pub const WORKLOADS: [(&str, &str, &str); 1] = [(
    "overlap-bench",
    "aorta-overlap-bench",
    "GEMMs on one stream, NCCL collectives on another (CUDA)",
)];

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let existing = Path::new(&a.workload);
    let (traces, label) = if existing.exists() {
        let name = existing
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        (existing.to_path_buf(), a.label.clone().or(name))
    } else {
        let traces = a.out.join("traces");
        launch(&a, &traces)?;
        (traces, a.label.clone().or(Some(a.workload.clone())))
    };
    let label = label.unwrap_or_else(|| "run".into());
    let data = a.out.join("data");
    ingest(&traces, &data, &label)?;
    let overlap = OverlapArgs {
        dataset: data.clone(),
        run: Some(label.clone()),
        by: By::Rank,
        format: Format::Table,
        json: false,
    };
    crate::overlap_cmd::run(overlap)?;
    let html = a.out.join("report.html");
    let opts = aorta_reports::RunReportOptions {
        runs: vec![label],
        ..Default::default()
    };
    aorta_reports::run_report(&data, &opts, &html)?;
    println!(
        "wrote {} (dataset {}, traces {})",
        html.display(),
        data.display(),
        traces.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `a.ranks` processes of the workload (one per GPU, `RANK`/`WORLD_SIZE` set, NCCL id
/// through a rendezvous file) writing into `traces`; fails with the first failing rank's
/// last stderr line.
fn launch(a: &RunArgs, traces: &Path) -> Result<()> {
    let Some(&(_, exe, _)) = WORKLOADS.iter().find(|w| w.0 == a.workload) else {
        let known: Vec<&str> = WORKLOADS.iter().map(|w| w.0).collect();
        bail!(
            "`{}`: neither an existing path nor a workload (workloads: {})",
            a.workload,
            known.join(", ")
        );
    };
    let bin = find_executable(exe)?;
    std::fs::create_dir_all(traces).with_context(|| traces.display().to_string())?;
    let rdv = traces.join(format!(".rendezvous-{}", std::process::id()));
    let ranks = a.ranks.max(1);
    let children: Vec<_> = (0..ranks)
        .map(|r| {
            Command::new(&bin)
                .args(&a.args)
                .arg("--rendezvous")
                .arg(&rdv)
                .arg("--out")
                .arg(traces)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", ranks.to_string())
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| bin.display().to_string())
        })
        .collect::<Result<_>>()?;
    let mut failure = None;
    for (r, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output()?;
        if !out.status.success() && failure.is_none() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            failure = Some(format!("{} rank {r} failed ({}): {last}", exe, out.status));
        }
    }
    let _ = std::fs::remove_file(&rdv);
    match failure {
        Some(f) => bail!(f),
        None => Ok(()),
    }
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

/// `aorta ingest TRACES -o DATA --label LABEL`, quietly, failing on the first broken file.
fn ingest(traces: &Path, data: &Path, label: &str) -> Result<()> {
    let opts = aorta_ingest::Options {
        out: data.to_path_buf(),
        label: Some(label.to_string()),
        ..Default::default()
    };
    let s = aorta_ingest::ingest(&[traces.to_path_buf()], &opts, &Default::default())?;
    if s.ingested.is_empty() && s.skipped.is_empty() {
        bail!("{}: no traces found", traces.display());
    }
    eprintln!(
        "ingested {} files from {} into {} (run `{label}`)",
        s.ingested.len() + s.skipped.len(),
        traces.display(),
        data.display()
    );
    Ok(())
}
