//! `aorta compare`: dispatch to `transform::compare` (the comparison, the gate, the atomic
//! output directory) and the report stage, then print a short summary and the gate's verdict.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use aorta_reports::fmt;
use aorta_transform::compare::{
    self, Comparison, LevelEntry, OperatorEntry, OperatorsSummary, SpreadSummary,
};

use crate::cli::CompareArgs;
use crate::text_table::{self, Align};

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
    let over_pairs = rows.iter().any(|r| r.ratio_spread.is_some());
    let mut lines = vec![vec![
        level.to_string(),
        "reference median [p10-p90]".into(),
        "candidate median [p10-p90]".into(),
        "ratio".into(),
    ]];
    if over_pairs {
        lines[0].push("over the pairs".into());
    }
    for r in rows {
        let key = if level == "collectives" {
            size_label(&r.key)
        } else {
            r.key.clone()
        };
        let name = match &r.workload {
            Some(w) if several => format!("  {w}"),
            _ => key,
        };
        let mut line = vec![
            name,
            spread_text(r.reference.as_ref()),
            spread_text(r.candidate.as_ref()),
            num(r.ratio, 3),
        ];
        if over_pairs {
            line.push(r.ratio_spread.map_or(String::new(), |s| {
                format!(
                    "geometric mean of {} pairs [p10 {:.3} - p90 {:.3}]",
                    s.n, s.p10, s.p90
                )
            }));
        }
        lines.push(line);
    }
    writeln!(out)?;
    let mut align = vec![Align::Cut(24), Align::Right, Align::Right, Align::Right];
    if over_pairs {
        align.push(Align::Left);
    }
    let text = text_table::render(&lines, &align, Some(text_table::WIDTH));
    out.write_all(text.as_bytes())?;
    if rows.is_empty() {
        writeln!(out, "  (none on either side)")?;
    }
    Ok(())
}

/// A collective key (`all_gather 268476416 B BFloat16 x2`, summary.json's exact text) with
/// its message size in binary units, as the pages show it: `all_gather 256.04 MiB BFloat16 x2`.
fn size_label(key: &str) -> String {
    let words: Vec<&str> = key.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        match (words[i].parse::<i64>(), words.get(i + 1)) {
            (Ok(n), Some(&"B")) => {
                out.push(fmt::bytes(n));
                i += 2;
            }
            _ => {
                out.push(words[i].to_string());
                i += 1;
            }
        }
    }
    out.join(" ")
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
    if !p.not_checked.is_empty() {
        writeln!(
            out,
            "  mix NOT CHECKED (no CPU operators and no GPU category time on a side): {}",
            p.not_checked.join(", ")
        )?;
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
        "\noperators: {} matched, {} reference only, {} candidate only (GPU ms per step window; rate: TFLOP/s and % of each side's own peak; k/call: kernels per call)",
        ops.matched, ops.reference_only, ops.candidate_only
    )?;
    let several = ops.top.windows(2).any(|w| w[0].workload != w[1].workload);
    let mut header = vec![
        "operator",
        "ref_ms",
        "cand_ms",
        "ratio",
        "ref_rate",
        "cand_rate",
        "ref_k/call",
        "cand_k/call",
        "status",
    ];
    // The operator and its shapes are cut to fit, down to 24 characters; a pair's name to 12.
    let mut align = vec![Align::Cut(24)];
    align.extend([Align::Right; 7]);
    align.push(Align::Left);
    if several {
        header.insert(0, "pair");
        align.insert(0, Align::Cut(text_table::MIN_CUT));
    }
    let mut lines = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for pair in ops.top.chunk_by(|a, b| a.workload == b.workload) {
        for r in pair.iter().take(top) {
            let mut line = op_line(r);
            if several {
                line.insert(0, r.workload.clone());
            }
            lines.push(line);
        }
    }
    if lines.len() > 1 {
        let text = text_table::render(&lines, &align, Some(text_table::WIDTH));
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// One operator's cells: `op input_dims` (cut to fit by the table; summary.json and
/// compare_operators.parquet keep it whole), both sides' ms, the ratio, rates and kernels per
/// call, the status.
fn op_line(r: &OperatorEntry) -> Vec<String> {
    let rate = |t: Option<f64>, p: Option<f64>| match (t, p) {
        (None, _) => "-".to_string(),
        (Some(_), None) => format!("{} TF", num(t, 1)),
        (Some(_), Some(_)) => format!("{} TF {}%", num(t, 1), num(p, 1)),
    };
    let name = if r.input_dims.is_empty() {
        r.op.clone()
    } else {
        format!("{} {}", r.op, r.input_dims)
    };
    vec![
        name,
        num(r.reference_ms, 3),
        num(r.candidate_ms, 3),
        num(r.ratio, 2),
        rate(r.reference_tflops, r.reference_peak_pct),
        rate(r.candidate_tflops, r.candidate_peak_pct),
        num(r.reference_kernels_per_call, 1),
        num(r.candidate_kernels_per_call, 1),
        r.status.clone(),
    ]
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
