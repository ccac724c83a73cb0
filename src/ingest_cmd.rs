//! `aorta ingest`: progress on a terminal, a closing summary, exit status.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aorta_ingest::{Options, Progress, Summary};

use crate::cli::IngestArgs;

pub(crate) fn run(a: IngestArgs) -> anyhow::Result<ExitCode> {
    let opts = Options {
        out: a.out.clone(),
        label: a.label,
        rank: a.rank,
        jobs: a.jobs,
        keep_going: a.keep_going,
        force: a.force,
        rules: a.rules,
        rank_map: a.rank_map,
        step_marker: a.step_marker.unwrap_or_default(),
        params: a.params,
        shard: a.shard,
    };
    let progress = Progress::default();
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| spawn_bar(&progress));
    let t0 = Instant::now();
    let res = aorta_ingest::ingest(&a.paths, &opts, &progress);
    if let Some((bar, stop)) = bar {
        stop.store(true, Ordering::Relaxed);
        let _ = bar.join();
    }
    let summary = res?;
    if !a.quiet {
        print_summary(&summary, &opts, t0.elapsed());
        print_skipped(&summary, a.verbose);
    }
    // Job identity is never noise: said even with --quiet.
    for note in &summary.job_notes {
        eprintln!("note: {note}");
    }
    for f in &summary.failed {
        eprintln!("aorta: failed: {f}");
    }
    let violations = a
        .strict
        .map(|s| s.check(&summary.findings()))
        .unwrap_or_default();
    for v in &violations {
        eprintln!("aorta: {v}");
    }
    Ok(if summary.failed.is_empty() && violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The files not read, counted by reason (each listed with `verbose`).
fn print_skipped(s: &Summary, verbose: bool) {
    let mut all: Vec<(&std::path::Path, &str)> = s
        .skipped_files
        .iter()
        .map(|(p, why)| (p.as_path(), why.as_str()))
        .collect();
    all.extend(
        s.not_traces
            .iter()
            .map(|p| (p.as_path(), "JSON without traceEvents, not a trace")),
    );
    if all.is_empty() {
        return;
    }
    let mut by_reason: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, why) in &all {
        *by_reason.entry(why).or_default() += 1;
    }
    let hint = if verbose {
        ""
    } else {
        " (--verbose lists them)"
    };
    eprintln!("skipped {} files{hint}:", all.len());
    for (why, n) in by_reason {
        eprintln!("  {n} × {why}");
    }
    if verbose {
        for (path, why) in all {
            eprintln!("skipped {}: {why}", path.display());
        }
    }
}

fn spawn_bar(
    p: &Progress,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (p, s) = (p.clone(), stop.clone());
    let h = std::thread::spawn(move || {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} ingest [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        while !s.load(Ordering::Relaxed) {
            bar.set_length(p.total.load(Ordering::Relaxed));
            bar.set_position(p.read.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    });
    (h, stop)
}

fn print_summary(s: &Summary, opts: &Options, took: Duration) {
    let secs = took.as_secs_f64().max(1e-9);
    eprintln!(
        "ingested {} of {} files into {} ({} unchanged, {} failed) in {:.2}s, {:.0} MB/s",
        s.ingested.len(),
        s.found,
        opts.out.display(),
        s.skipped.len(),
        s.failed.len(),
        secs,
        s.bytes as f64 / 1e6 / secs,
    );
    let rows: Vec<String> = s.rows().iter().map(|(t, n)| format!("{t} {n}")).collect();
    eprintln!(
        "events {}; rows: {}",
        s.events(),
        if rows.is_empty() {
            "none".into()
        } else {
            rows.join(", ")
        }
    );
    for (path, from, to) in &s.relabelled {
        eprintln!("moved {} from run `{from}` to run `{to}`", path.display());
    }
    if let Some(h) = &s.stale_lock {
        eprintln!(
            "note: took over the dataset lock left by {}{}",
            h.describe(),
            if h.is_dead() {
                ", a process that is gone"
            } else {
                ""
            }
        );
    }
    if s.warnings() > 0 {
        eprintln!(
            "data-quality findings: {} (the diagnostics table)",
            findings_text(s)
        );
    }
}

/// Findings by severity: the ones to check first, then the expected ones (`diag::NOISE`).
fn findings_text(s: &Summary) -> String {
    let all = s.fresh_findings();
    let part = |trouble: bool| {
        let codes: Vec<(&&str, &u64)> = all
            .iter()
            .filter(|(c, _)| aorta_ingest::diag::is_trouble(c) == trouble)
            .collect();
        let total: u64 = codes.iter().map(|c| *c.1).sum();
        let list: Vec<String> = codes.iter().map(|(c, n)| format!("{c} {n}")).collect();
        (total, list.join(", "))
    };
    let (t, tl) = part(true);
    let (n, nl) = part(false);
    match (t, n) {
        (0, _) => format!("none to check; {n} expected ({nl})"),
        (_, 0) => format!("{t} to check ({tl})"),
        _ => format!("{t} to check ({tl}); {n} expected ({nl})"),
    }
}
