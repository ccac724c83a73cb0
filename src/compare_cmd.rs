//! `aorta compare`: dispatch to `transform::compare` (the comparison, the gate, the atomic
//! output directory) and the report stage, then print a short summary and the gate's verdict.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use aorta_transform::compare::{
    self, Comparison, LevelEntry, OperatorEntry, OperatorsSummary, SpreadSummary,
};

use crate::cli::CompareArgs;

pub(crate) fn run(args: CompareArgs) -> Result<ExitCode> {
    let opts = compare::Options {
        peaks: aorta_transform::perf::Peaks::load(args.device_peaks.as_deref())?,
        python_source: match args.source {
            None => compare::PythonSource::Auto,
            Some(crate::cli::StepSource::Jsonl) => compare::PythonSource::Jsonl,
            Some(crate::cli::StepSource::Trace) => compare::PythonSource::Trace,
        },
        force: args.force,
    };
    let _lock = crate::dataset_lock::for_read(&args.dataset, "aorta compare")?;
    let mut c = compare::compare_with(&args.dataset, &args.reference, &args.candidate, &opts)?;
    if let Some(rules) = &args.fail_if_regressed {
        c.summary.regression = Some(compare::regressions(&c, &rules.0)?);
    }
    c.write_dir(&args.out)?;
    let runs = [&c.reference.runs[..], &c.candidate.runs[..]].concat();
    crate::notes::print_job_notes(&args.dataset, &runs)?;
    // The page names the directory it was drawn from: draw it from its final place (it is
    // written to a temporary file and renamed too).
    aorta_reports::compare_report(&args.out, &args.out.join("report.html"))?;
    let mut out = std::io::stdout().lock();
    print_summary(&mut out, &c, args.top)?;
    let dir = args.out.display();
    writeln!(
        out,
        "wrote {dir}/report.html, {dir}/summary.json, {dir}/compare_*.parquet"
    )?;
    let refused = c
        .summary
        .pairs
        .as_ref()
        .is_some_and(|p| !p.comparable && !p.forced);
    let Some(gate) = &c.summary.regression else {
        return Ok(ExitCode::SUCCESS);
    };
    if refused {
        writeln!(out, "REFUSED: the sides are not comparable, so --fail-if-regressed cannot judge them (--force overrides)")?;
        return Ok(ExitCode::from(2));
    }
    for w in &gate.warnings {
        writeln!(out, "warning: {w}")?;
    }
    for g in gate.failed() {
        let change = g.change_pct.unwrap_or(f64::INFINITY);
        let what = match (g.reference, g.candidate) {
            (Some(r), Some(c)) => format!("{r:.3} {unit} -> {c:.3} {unit}", unit = g.unit),
            _ => format!(
                "geometric mean of {} pair ratios {}",
                g.pairs,
                num(g.change_pct.map(|c| 1.0 + c / 100.0), 3)
            ),
        };
        writeln!(
            out,
            "REGRESSED: {} {what} ({change:+.1}%, threshold {}%)",
            g.key, g.threshold_pct,
        )?;
    }
    Ok(if gate.failed().next().is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_summary(out: &mut impl Write, c: &Comparison, top: usize) -> Result<()> {
    let side = |s: &compare::Side| format!("`{}` (runs: {})", s.selector, s.runs.join(", "));
    writeln!(
        out,
        "reference {}\ncandidate {}",
        side(&c.reference),
        side(&c.candidate)
    )?;
    if let Some(p) = &c.summary.pairs {
        print_pairs(out, p)?;
    }
    let levels = &c.summary.levels;
    for (level, rows) in [
        ("steps", &levels.steps),
        ("categories", &levels.categories),
        ("collectives", &levels.collectives),
    ] {
        print_level(out, level, rows)?;
    }
    print_ops(out, &c.summary.operators, top)
}

/// One level: per key its row, or with several pairs its overall row (the geometric mean of
/// the pairs' ratios, with their p10-p90) and under it one row per pair.
fn print_level(out: &mut impl Write, level: &str, rows: &[LevelEntry]) -> Result<()> {
    let several = rows.iter().any(|r| r.workload.is_none());
    writeln!(
        out,
        "\n{level:<34} {:>24} {:>24} {:>8}",
        "reference median [p10-p90]", "candidate median [p10-p90]", "ratio"
    )?;
    if rows.is_empty() {
        writeln!(out, "  (none on either side)")?;
    }
    for r in rows {
        let name = match &r.workload {
            Some(w) if several => format!("  {w}"),
            _ => r.key.clone(),
        };
        let over = r.ratio_spread.map_or(String::new(), |s| {
            format!(
                "  geometric mean of {} pairs [p10 {:.3} - p90 {:.3}]",
                s.n, s.p10, s.p90
            )
        });
        writeln!(
            out,
            "  {:<32} {:>24} {:>24} {:>8}{over}",
            name,
            spread_text(r.reference.as_ref()),
            spread_text(r.candidate.as_ref()),
            num(r.ratio, 3)
        )?;
    }
    Ok(())
}

fn print_pairs(out: &mut impl Write, p: &compare::PairsSummary) -> Result<()> {
    writeln!(out, "\npairs (step_ms median: reference, candidate, ratio)")?;
    for e in &p.pairs {
        writeln!(
            out,
            "  {:<24} {:>10} {:>10} {:>8}   {} vs {}",
            e.workload,
            num(e.reference_step_ms, 3),
            num(e.candidate_step_ms, 3),
            num(e.step_ratio, 3),
            e.reference,
            e.candidate
        )?;
    }
    if p.pairs.len() > 1 {
        let spread = p.step_ratio_spread.map_or("-".into(), |s| {
            format!("p10 {:.3} - p90 {:.3}", s.p10, s.p90)
        });
        writeln!(
            out,
            "  geometric mean of {} step ratios: {} ({spread})",
            p.pairs.len(),
            num(p.step_ratio_geomean, 3)
        )?;
    }
    for (side, runs) in [
        ("reference", &p.unpaired_reference),
        ("candidate", &p.unpaired_candidate),
    ] {
        if !runs.is_empty() {
            writeln!(
                out,
                "  unpaired {side} runs (not compared): {}",
                runs.join(", ")
            )?;
        }
    }
    if !p.comparable {
        let what = if p.forced {
            "ratios computed anyway (--force)"
        } else {
            "ratios refused; --force computes them"
        };
        writeln!(out, "  NOT COMPARABLE ({what}): {}", p.reasons.join("; "))?;
    }
    Ok(())
}

fn print_ops(out: &mut impl Write, ops: &OperatorsSummary, top: usize) -> Result<()> {
    writeln!(
        out,
        "\noperators: {} matched, {} reference only, {} candidate only (GPU ms per step window; TFLOP/s and % of each side's own peak; kernels per call)",
        ops.matched, ops.reference_only, ops.candidate_only
    )?;
    let several = ops.top.windows(2).any(|w| w[0].workload != w[1].workload);
    for pair in ops.top.chunk_by(|a, b| a.workload == b.workload) {
        if several {
            writeln!(out, "  {}", pair[0].workload)?;
        }
        for r in pair.iter().take(top) {
            print_op(out, r)?;
        }
    }
    Ok(())
}

fn print_op(out: &mut impl Write, r: &OperatorEntry) -> Result<()> {
    let rate = |t: Option<f64>, p: Option<f64>| match (t, p) {
        (None, _) => "-".to_string(),
        (Some(_), None) => format!("{} TF", num(t, 1)),
        (Some(_), Some(_)) => format!("{} TF {}%", num(t, 1), num(p, 1)),
    };
    writeln!(
        out,
        "  {:<40} {:>10} {:>10} {:>8}  {:>16} {:>16}  {:>5} {:>5}  {}",
        format!("{} {}", r.op, truncate(&r.input_dims, 30)),
        num(r.reference_ms, 3),
        num(r.candidate_ms, 3),
        num(r.ratio, 2),
        rate(r.reference_tflops, r.reference_peak_pct),
        rate(r.candidate_tflops, r.candidate_peak_pct),
        num(r.reference_kernels_per_call, 1),
        num(r.candidate_kernels_per_call, 1),
        r.status
    )?;
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn spread_text(v: Option<&SpreadSummary>) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    format!(
        "{} [{}-{}]",
        num(Some(v.median), 3),
        num(Some(v.p10), 3),
        num(Some(v.p90), 3)
    )
}
