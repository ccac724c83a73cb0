//! `aorta overlap`: compute the overlap tables of a dataset, write them next to the ingested
//! tables, and print them per run (text for people, JSON or CSV for CI and notebooks).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use aorta_transform::collectives::{sizes, Job};
use aorta_transform::overlap::{self, OverlapTables};
use aorta_transform::rows::ints;
use aorta_transform::summary::{self, Spread, RATIOS};
use polars::prelude::*;
use serde_json::{json, Map, Value};

use crate::frame_out::frame_json;
use crate::overlap_table;
use crate::row_filter::RowFilter;

use crate::cli::{By, Format, OverlapArgs};

pub(crate) fn run(args: OverlapArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let access = crate::dataset_lock::for_write(root, "aorta overlap")?;
    let runs = select_run_list(root, &args.run)?;
    let filter = RowFilter {
        ranks: args.rank.clone(),
        steps: args.step.clone(),
    };
    if !filter.is_empty() && args.by == By::Size {
        bail!("--rank and --step pick rows of --by step, rank or collective; --by size sums every rank's calls");
    }
    if !filter.steps.is_empty() && args.by == By::Rank {
        bail!("--step picks step rows: --by step or --by collective (--by rank rows are whole windows)");
    }
    // The collectives matched once: for the wait/transfer split and for `--by size`.
    let jobs = overlap::analyze(root, &runs)?;
    let tables = if access.writable() {
        overlap::compute_and_store_with(root, &runs, &jobs)?
    } else {
        crate::dataset_lock::not_saved(root, "overlap tables");
        overlap::from_dataset_with(root, &runs, &jobs)?
    };
    crate::notes::print_job_notes(root, &runs)?;
    let format = if args.json { Format::Json } else { args.format };
    print_with(root, &tables, &jobs, args.by, format, &filter)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the overlap tables of `runs`, grouped `by`, in `format`.
pub(crate) fn print(
    root: &Path,
    tables: &OverlapTables,
    runs: &[String],
    by: By,
    format: Format,
) -> Result<()> {
    let every = RowFilter::default();
    let views = runs
        .iter()
        .map(|r| RunView::new(root, tables, r, None, by, &every))
        .collect::<Result<Vec<_>>>()?;
    write_views(root, &views, by, format, &every)
}

/// `print` for the runs of `jobs`, whose matched collectives `--by collective|size` reuses.
fn print_with(
    root: &Path,
    tables: &OverlapTables,
    jobs: &[Job],
    by: By,
    format: Format,
    filter: &RowFilter,
) -> Result<()> {
    let views = jobs
        .iter()
        .map(|j| RunView::new(root, tables, &j.run, Some(j), by, filter))
        .collect::<Result<Vec<_>>>()?;
    if !filter.is_empty() {
        let whole: Vec<&DataFrame> = tables_of(tables, by);
        let runs: Vec<&str> = jobs.iter().map(|j| j.run.as_str()).collect();
        filter.check(
            &whole,
            &format!("{}: runs {}", root.display(), runs.join(", ")),
        )?;
    }
    write_views(root, &views, by, format, filter)
}

/// The tables `--rank` and `--step` pick rows from, under `by` (every run selected).
fn tables_of(t: &OverlapTables, by: By) -> Vec<&DataFrame> {
    match by {
        By::Collective => vec![&t.collectives],
        By::Rank => vec![&t.ranks],
        By::Step | By::Size => vec![&t.steps],
    }
}

fn write_views(
    root: &Path,
    views: &[RunView],
    by: By,
    format: Format,
    filter: &RowFilter,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => views.iter().try_for_each(|v| v.print_table(&mut out))?,
        Format::Csv => print_csv(&mut out, views)?,
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "by": by_name(by),
                "ranks": (!filter.ranks.is_empty()).then_some(&filter.ranks),
                "steps": (!filter.steps.is_empty()).then_some(&filter.steps),
                "runs": views.iter().map(RunView::json).collect::<Vec<_>>(),
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Every run of the dataset, or the one asked for (one-line error when it is not there).
pub(crate) fn select_runs(root: &Path, run: Option<&str>) -> Result<Vec<String>> {
    let asked: Vec<String> = run.map(str::to_string).into_iter().collect();
    select_run_list(root, &asked)
}

/// Every run of the dataset, or those asked for, in the dataset's order (one-line error
/// naming the first that is not there).
pub(crate) fn select_run_list(root: &Path, asked: &[String]) -> Result<Vec<String>> {
    let all = overlap::dataset_runs(root)?;
    if asked.is_empty() {
        return Ok(all);
    }
    if let Some(r) = asked.iter().find(|r| !all.contains(r)) {
        bail!(
            "{}: unknown run `{r}` (runs: {})",
            root.display(),
            if all.is_empty() {
                "none".into()
            } else {
                all.join(", ")
            }
        );
    }
    Ok(all.into_iter().filter(|r| asked.contains(r)).collect())
}

fn by_name(by: By) -> &'static str {
    match by {
        By::Step => "step",
        By::Rank => "rank",
        By::Collective => "collective",
        By::Size => "size",
    }
}

fn only_run(df: &DataFrame, run: &str) -> PolarsResult<DataFrame> {
    df.clone().lazy().filter(col("run").eq(lit(run))).collect()
}

/// (source, ratio, spread over step rows, spread over rank rows).
type SummaryLine = (String, &'static str, Option<Spread>, Option<Spread>);

/// One run's rows for the chosen view, with the rank totals and the summary frames.
struct RunView {
    run: String,
    by: By,
    rows: DataFrame,
    steps: DataFrame,
    ranks: DataFrame,
    totals: Option<DataFrame>,
    /// Calls and bandwidths per collective kind and size (`--by collective` and `size`).
    sizes: Option<DataFrame>,
}

impl RunView {
    /// `job`: the run's matched collectives where the caller has them (else matched here
    /// when the view needs them).
    fn new(
        root: &Path,
        t: &OverlapTables,
        run: &str,
        job: Option<&Job>,
        by: By,
        filter: &RowFilter,
    ) -> Result<RunView> {
        // The rows asked for; the summary's spreads are over them too.
        let steps = filter.apply(&only_run(&t.steps, run)?)?;
        let ranks = filter.apply(&only_run(&t.ranks, run)?)?;
        let sizes = matches!(by, By::Collective | By::Size)
            .then(|| {
                let calls = match job {
                    Some(j) => sizes::of_run(root, j)?,
                    None => sizes::of_run(root, &Job::analyze(root, run)?)?,
                };
                anyhow::Ok(sizes::frame("run", &[(run, &calls)])?)
            })
            .transpose()?;
        let (rows, totals) = match by {
            By::Step => (steps.clone(), Some(ranks.clone())),
            By::Rank => (ranks.clone(), None),
            By::Collective => (filter.apply(&only_run(&t.collectives, run)?)?, None),
            By::Size => (sizes.clone().unwrap_or_default(), None),
        };
        Ok(RunView {
            run: run.to_string(),
            by,
            rows,
            steps,
            ranks,
            totals,
            sizes,
        })
    }

    /// Spread of each ratio over step rows and rank rows, per source (`trace`, `jsonl`).
    fn summary(&self) -> PolarsResult<Vec<SummaryLine>> {
        let mut out = Vec::new();
        for source in ["trace", "jsonl"] {
            let pick = |df: &DataFrame| -> PolarsResult<DataFrame> {
                df.clone()
                    .lazy()
                    .filter(col("source").eq(lit(source)))
                    .collect()
            };
            // Step spreads over real steps (outside-step activity is reported on its own).
            let s = aorta_transform::steps::drop_outside(&pick(&self.steps)?)?;
            let r = pick(&self.ranks)?;
            if s.height() == 0 && r.height() == 0 {
                continue;
            }
            for ratio in RATIOS {
                let (a, b) = (
                    summary::column_spread(&s, ratio)?,
                    summary::column_spread(&r, ratio)?,
                );
                out.push((source.to_string(), ratio, a, b));
            }
        }
        Ok(out)
    }

    fn json(&self) -> Value {
        let mut summary = Map::new();
        for (source, ratio, steps, ranks) in self.summary().unwrap_or_default() {
            let entry = summary.entry(source).or_insert_with(|| json!({}));
            entry[ratio] = json!({"steps": spread_json(steps), "ranks": spread_json(ranks)});
        }
        let mut v = json!({
            "run": self.run,
            "rows": frame_json(&self.rows),
            "summary": summary,
        });
        if let Some(t) = &self.totals {
            v["totals"] = frame_json(t);
        }
        if let (By::Collective, Some(sizes)) = (self.by, &self.sizes) {
            v["sizes"] = frame_json(sizes);
        }
        v
    }

    fn print_table(&self, out: &mut impl Write) -> Result<()> {
        let ranks = self.ranks.height();
        let steps = self.steps.height();
        writeln!(
            out,
            "run {} ({ranks} rank rows, {steps} step rows; times in ms)",
            self.run
        )?;
        let cols = match self.by {
            By::Collective => overlap_table::COLLECTIVE_COLUMNS,
            By::Size => overlap_table::SIZE_COLUMNS,
            _ => overlap_table::METRIC_COLUMNS,
        };
        let keys: &[&str] = match self.by {
            By::Step => &["rank", "source", "step"],
            By::Rank => &["rank", "source", "step_count"],
            By::Collective => &["rank", "level", "step", "comm_op"],
            By::Size => overlap_table::SIZE_KEYS,
        };
        let text = overlap_table::render(&self.rows, self.totals.as_ref(), keys, cols)?;
        out.write_all(text.as_bytes())?;
        self.print_sizes(out)?;
        self.print_outside(out)?;
        let summary = if self.by == By::Size {
            vec![]
        } else {
            self.summary()?
        };
        for (source, ratio, s, r) in summary {
            writeln!(
                out,
                "  {source:<5} {ratio:<22} steps: {}   ranks: {}",
                spread_text(s),
                spread_text(r)
            )?;
        }
        writeln!(out)?;
        Ok(())
    }
}

impl RunView {
    /// Under `--by collective`, the run's calls per kind and size (`--by size` has them as
    /// its rows); times in ms, bandwidths in GB/s.
    fn print_sizes(&self, out: &mut impl Write) -> Result<()> {
        let (By::Collective, Some(sizes)) = (self.by, &self.sizes) else {
            return Ok(());
        };
        if sizes.height() == 0 {
            return Ok(());
        }
        writeln!(
            out,
            "  per kind and message size (transfer = after the last rank arrived; real steps only):"
        )?;
        let cols = overlap_table::SIZE_COLUMNS;
        let text = overlap_table::render(sizes, None, overlap_table::SIZE_KEYS, cols)?;
        out.write_all(text.as_bytes())?;
        Ok(())
    }

    /// One line per rank with activity outside every step: what it was, kept out of the
    /// step statistics.
    fn print_outside(&self, out: &mut impl Write) -> Result<()> {
        let o = aorta_transform::steps::outside(&self.steps)?;
        let (rank, n) = (ints(&o, "rank"), ints(&o, "activity_count"));
        let busy = ints(&o, "busy_ns");
        for i in 0..o.height() {
            writeln!(
                out,
                "  outside steps: rank {}: {} GPU activities, {} ms busy (before the first or after the last step; not in the step statistics)",
                rank[i].unwrap_or(0),
                n[i].unwrap_or(0),
                aorta_reports::fmt::ms_ns(busy[i].unwrap_or(0))
            )?;
        }
        Ok(())
    }
}

fn spread_json(s: Option<Spread>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({"n": s.n, "median": s.median, "p10": s.p10, "p90": s.p90}),
    }
}

fn spread_text(s: Option<Spread>) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!(
            "median {:.3} (p10 {:.3} – p90 {:.3}, n={})",
            s.median, s.p10, s.p90, s.n
        ),
    }
}

/// The rows of every run as one CSV (the header once).
fn print_csv(out: &mut impl Write, views: &[RunView]) -> Result<()> {
    let frames: Vec<&DataFrame> = views.iter().map(|v| &v.rows).collect();
    crate::frame_out::write_csv(out, &frames).context("writing CSV")
}
