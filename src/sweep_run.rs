//! `aorta sweep SPEC.toml -o DIR`: runs every point of a spec, its repeats in seeded rounds,
//! each run's traces ingested into one dataset through the same path as `aorta ingest`.
//!
//! Resumable because every finished run is in the dataset under its label
//! (`<point>/r<repeat>`): a second call skips those and retries the failed ones. A failing
//! run is recorded with its error line (DIR/data/sweep.json) and the sweep goes on; the
//! workloads' own output goes to DIR/logs, so that the terminal shows one progress bar.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use aorta_transform::tuning::knob_table;
use aorta_transform::tuning::record::{RunRecord, SearchRecord, SweepRecord};
use aorta_transform::tuning::spec::{self, Bisect, KnobKind, Point, Setting, Spec, Workload};
use aorta_transform::tuning::sweep_report::metrics;

use crate::run_cmd::{launch, Launch};

/// Everything one sweep needs while it runs.
struct Sweep {
    spec: Spec,
    out: PathBuf,
    data: PathBuf,
    record: SweepRecord,
    /// Labels already in the dataset.
    done: BTreeSet<String>,
    bar: indicatif::ProgressBar,
}

pub(crate) fn run(spec_path: &Path, out: &Path, strict: bool, dry_run: bool) -> Result<ExitCode> {
    let spec = spec::load(spec_path)?;
    let warnings: Vec<String> = spec
        .knobs
        .iter()
        .filter(|(k, _)| *k == KnobKind::Env)
        .filter_map(|(_, n)| knob_table::warning(n))
        .collect();
    for w in &warnings {
        eprintln!("aorta: warning: {w}");
    }
    if strict && !warnings.is_empty() {
        bail!(
            "--strict: {} environment knob(s) no library is known to read (warned above); \
             nothing was run",
            warnings.len()
        );
    }
    let slots = spec::order(spec.points.len(), spec.repeats, spec.seed);
    if dry_run {
        println!(
            "{} points x {} repeats = {} runs{} (seed {}):",
            spec.points.len(),
            spec.repeats,
            slots.len(),
            spec.search.as_ref().map_or(String::new(), |s| format!(
                ", each point then searching {} in {}..={}",
                s.name, s.min, s.max
            )),
            spec.seed
        );
        for s in &slots {
            println!("  {}", label(&spec.points[s.point], s.repeat));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let data = out.join("data");
    let mut record = SweepRecord::load(&data)?.unwrap_or_default();
    record.spec = spec_path.display().to_string();
    record.workload = match &spec.workload {
        Workload::Named(w) => w.clone(),
        Workload::Command(c) => c.clone(),
    };
    record.seed = spec.seed;
    record.warnings = warnings;
    let done = in_dataset(&data)?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} sweep [{bar:30}] {pos}/{len} runs, eta {eta} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut sw = Sweep {
        spec,
        out: out.to_path_buf(),
        data,
        record,
        done,
        bar,
    };
    let started = Instant::now();
    let points = sw.spec.points.clone();
    match sw.spec.search.clone() {
        None => sw.run_points(&points, sw.spec.seed)?,
        Some(search) => {
            for (i, base) in points.iter().enumerate() {
                sw.bisect(base, &search, i as u64)?;
            }
        }
    }
    sw.bar.finish_and_clear();
    let latest = sw.record.latest();
    let failed = latest.values().filter(|r| r.status != "ok").count();
    eprintln!(
        "sweep: {} runs in {:.0} s ({} failed) into {}",
        latest.len(),
        started.elapsed().as_secs_f64(),
        failed,
        sw.data.display()
    );
    if latest.len() == failed {
        bail!(
            "every run failed; the first error: {}",
            first_error(&sw.record)
        );
    }
    crate::sweep_cmd::write_report(&sw.data, &sw.out.join("report"), Default::default())?;
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn first_error(r: &SweepRecord) -> String {
    r.runs
        .iter()
        .find_map(|x| x.error.clone())
        .unwrap_or_default()
}

/// The run label of a point's repeat.
fn label(p: &Point, repeat: usize) -> String {
    format!("{}/r{repeat}", p.key())
}

/// The run labels the dataset at `data` holds.
fn in_dataset(data: &Path) -> Result<BTreeSet<String>> {
    if !data.join("manifest.json").exists() {
        return Ok(BTreeSet::new());
    }
    let m = aorta_ingest::dataset::Manifest::load(data)?;
    Ok(m.inputs.into_iter().map(|e| e.label).collect())
}

impl Sweep {
    /// A line above the progress bar (on stderr as is when there is no terminal to draw on).
    fn say(&self, line: String) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// Runs `points` × repeats in seeded rounds, skipping runs already in the dataset.
    fn run_points(&mut self, points: &[Point], seed: u64) -> Result<()> {
        let slots = spec::order(points.len(), self.spec.repeats, seed);
        let todo: Vec<_> = slots
            .into_iter()
            .filter(|s| !self.done.contains(&label(&points[s.point], s.repeat)))
            .collect();
        self.bar.inc_length(todo.len() as u64);
        for s in todo {
            self.run_one(&points[s.point], s.repeat)?;
            self.bar.inc(1);
        }
        Ok(())
    }

    /// One run: launch, ingest, record. A failure of the workload or of its ingest is
    /// recorded; only the sweep's own I/O stops it.
    fn run_one(&mut self, p: &Point, repeat: usize) -> Result<()> {
        let label = label(p, repeat);
        self.bar.set_message(label.clone());
        let traces = self.out.join("traces").join(&label);
        let log = self
            .out
            .join("logs")
            .join(format!("{}.log", label.replace('/', "_")));
        if traces.exists() {
            // A killed or failed earlier attempt: its files are not in the dataset.
            std::fs::remove_dir_all(&traces).with_context(|| traces.display().to_string())?;
        }
        std::fs::create_dir_all(&traces).with_context(|| traces.display().to_string())?;
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d).with_context(|| d.display().to_string())?;
        }
        let _ = std::fs::remove_file(&log);
        let t = Instant::now();
        let result = self
            .start(p, repeat, &traces, &log)
            .and_then(|_| self.ingest(p, &traces, &label));
        let seconds = t.elapsed().as_secs_f64();
        let settings: BTreeMap<String, String> = p
            .settings
            .iter()
            .map(|s| (s.name.clone(), s.value.clone()))
            .collect();
        let (status, error) = match &result {
            Ok(()) => ("ok", None),
            Err(e) => ("failed", Some(format!("{e:#}"))),
        };
        self.say(format!(
            "{label}: {status} in {seconds:.1} s{}",
            error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
        ));
        if result.is_ok() {
            self.done.insert(label.clone());
        }
        self.record.runs.push(RunRecord {
            label,
            point: p.key(),
            repeat,
            settings,
            status: status.into(),
            error,
            seconds,
        });
        self.record.save(&self.data)?;
        Ok(())
    }

    /// Starts the workload of `p` writing into `traces`, its output into `log`.
    fn start(&self, p: &Point, repeat: usize, traces: &Path, log: &Path) -> Result<()> {
        let mut args = self.spec.args.clone();
        match &self.spec.workload {
            Workload::Named(w) => {
                args.extend(p.flag_args());
                launch(
                    &Launch {
                        workload: w,
                        ranks: self.spec.ranks,
                        args: &args,
                        env: &p.env(),
                        scripts: self.out.join("workload"),
                        log: Some(log.to_path_buf()),
                    },
                    traces,
                )
            }
            Workload::Command(template) => {
                let cmd = command_line(template, p, &args, traces);
                let f = std::fs::File::create(log).with_context(|| log.display().to_string())?;
                let status = Command::new("sh")
                    .arg("-c")
                    .arg(&cmd)
                    .envs(p.env())
                    .env("AORTA_SWEEP_RUN", label(p, repeat))
                    .env("AORTA_SWEEP_REPEAT", repeat.to_string())
                    .stdout(Stdio::from(f.try_clone()?))
                    .stderr(Stdio::from(f))
                    .status()
                    .with_context(|| format!("sh -c {cmd}"))?;
                if !status.success() {
                    let text = std::fs::read_to_string(log).unwrap_or_default();
                    let last = text.lines().rev().find(|l| !l.trim().is_empty());
                    bail!("command failed ({status}): {}", last.unwrap_or("no output"));
                }
                Ok(())
            }
        }
    }

    /// Ingests one run's traces under its label. A command's traces get the point's
    /// settings as `--param`s (aorta's own workloads record theirs in the trace).
    fn ingest(&self, p: &Point, traces: &Path, label: &str) -> Result<()> {
        let params = match self.spec.workload {
            Workload::Named(_) => Vec::new(),
            Workload::Command(_) => p
                .settings
                .iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect(),
        };
        let opts = aorta_ingest::Options {
            out: self.data.clone(),
            label: Some(label.to_string()),
            params,
            ..Default::default()
        };
        let s = aorta_ingest::ingest(&[traces.to_path_buf()], &opts, &Default::default())?;
        if s.ingested.is_empty() && s.skipped.is_empty() {
            bail!("{}: the workload wrote no traces", traces.display());
        }
        if !in_dataset(&self.data)?.contains(label) {
            bail!(
                "{}: its traces are byte for byte those of a run already in the dataset, which \
                 keeps one copy",
                traces.display()
            );
        }
        Ok(())
    }

    /// Bisects the searched knob at the other knobs' values `base`.
    fn bisect(&mut self, base: &Point, search: &spec::Search, salt: u64) -> Result<()> {
        let m = metrics::index(&self.spec.objective).expect("spec checked the objective");
        let lower = metrics::METRICS[m].lower_is_better;
        let mut b = Bisect::new(search.min, search.max);
        let mut measured: BTreeMap<i64, Option<f64>> = BTreeMap::new();
        let mut order: Vec<(i64, Option<f64>)> = Vec::new();
        let at = |v: i64| {
            let mut q = base.clone();
            q.settings.push(Setting {
                kind: search.kind,
                name: search.name.clone(),
                value: v.to_string(),
            });
            q
        };
        let mut round = 0u64;
        while let Some((x, y)) = b.next() {
            let new: Vec<i64> = [x, y]
                .into_iter()
                .filter(|v| !measured.contains_key(v))
                .collect();
            let pts: Vec<Point> = new.iter().map(|v| at(*v)).collect();
            self.run_points(&pts, self.spec.seed ^ (salt << 32) ^ round)?;
            round += 1;
            for (v, p) in new.iter().zip(&pts) {
                let runs: Vec<String> = (1..=self.spec.repeats)
                    .map(|k| label(p, k))
                    .filter(|l| self.done.contains(l))
                    .collect();
                let value = objective(&self.data, &runs, m)?;
                measured.insert(*v, value);
                order.push((*v, value));
            }
            let f = |v: i64| {
                let o = measured.get(&v).copied().flatten().unwrap_or(f64::INFINITY);
                if lower {
                    o
                } else {
                    -o
                }
            };
            b.narrow(f(x), f(y));
        }
        self.record.searches.push(SearchRecord {
            fixed: base.key(),
            knob: search.name.clone(),
            objective: self.spec.objective.clone(),
            measured: order,
            best: Some(b.lo),
        });
        self.record.save(&self.data)?;
        self.say(format!(
            "search {} at {}: best {} by {}",
            search.name,
            base.key(),
            b.lo,
            self.spec.objective
        ));
        Ok(())
    }
}

/// The objective of `runs` (one point's repeats): the median over repeats of each run's
/// median step value; None when no run has one.
fn objective(data: &Path, runs: &[String], m: usize) -> Result<Option<f64>> {
    if runs.is_empty() {
        return Ok(None);
    }
    let steps = metrics::step_values(data, runs)?;
    let per_run: Vec<Option<f64>> = runs
        .iter()
        .map(|r| {
            aorta_transform::summary::spread(
                steps.iter().filter(|s| &s.run == r).map(|s| s.values[m]),
            )
            .map(|s| s.median)
        })
        .collect();
    Ok(aorta_transform::summary::spread(per_run).map(|s| s.median))
}

/// A command template with `{out}` and `{name}` filled in; flags the template does not name
/// are appended as `--name value`.
fn command_line(template: &str, p: &Point, args: &[String], traces: &Path) -> String {
    let mut cmd = template.replace("{out}", &shell_quote(&traces.display().to_string()));
    let mut extra: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    for s in p.settings.iter().filter(|s| s.kind == KnobKind::Flag) {
        let slot = format!("{{{}}}", s.name);
        if cmd.contains(&slot) {
            cmd = cmd.replace(&slot, &shell_quote(&s.value));
        } else {
            let one = Point {
                settings: vec![s.clone()],
            };
            extra.extend(one.flag_args().iter().map(|a| shell_quote(a)));
        }
    }
    if extra.is_empty() {
        cmd
    } else {
        format!("{cmd} {}", extra.join(" "))
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
