//! `aorta compare`: compute the comparison, write its directory atomically (summary.json,
//! the comparison tables, the report), print a short summary, and gate on regressions.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_transform::compare::{self, Comparison};
use polars::prelude::*;
use serde_json::{json, Value};

use crate::cli::CompareArgs;

pub(crate) fn run(args: CompareArgs) -> Result<ExitCode> {
    let peaks = aorta_transform::perf::Peaks::load(args.device_peaks.as_deref())?;
    let _lock = crate::dataset_lock::for_read(&args.dataset, "aorta compare")?;
    let mut c = compare::compare_with(&args.dataset, &args.reference, &args.candidate, &peaks)?;
    let gate = args
        .fail_if_regressed
        .map(|pct| regressions(&c.summary, pct));
    if let (Some(pct), Some(g)) = (args.fail_if_regressed, &gate) {
        c.summary["regression"] = json!({ "threshold_pct": pct, "checks": g });
    }
    write_dir(&args.out, &mut c)?;
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
    let failed: Vec<&Value> = gate
        .iter()
        .flatten()
        .filter(|g| g["regressed"] == true)
        .collect();
    for g in &failed {
        writeln!(
            out,
            "REGRESSED: {} {:.3} ms -> {:.3} ms ({:+.1}%, threshold {}%)",
            g["key"].as_str().unwrap_or(""),
            g["reference"].as_f64().unwrap_or(f64::NAN),
            g["candidate"].as_f64().unwrap_or(f64::NAN),
            g["change_pct"].as_f64().unwrap_or(f64::INFINITY),
            args.fail_if_regressed.unwrap_or(0.0)
        )?;
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The gated keys: the candidate's median step time and exposed comm against the reference.
pub(crate) const GATED: [&str; 2] = ["step_ms", "exposed_comm_ms"];

/// One check per gated key: medians, change in percent, and whether it exceeds `pct`.
fn regressions(summary: &Value, pct: f64) -> Vec<Value> {
    let steps = summary["levels"]["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    GATED
        .iter()
        .filter_map(|key| {
            let row = steps.iter().find(|r| r["key"] == *key)?;
            let r = row["reference"]["median"].as_f64()?;
            let c = row["candidate"]["median"].as_f64()?;
            let change = if r != 0.0 {
                Some(100.0 * (c - r) / r)
            } else {
                None
            };
            let regressed = match change {
                Some(ch) => ch > pct,
                None => c > 0.0,
            };
            Some(json!({"key": key, "reference": r, "candidate": c,
                        "change_pct": change, "regressed": regressed}))
        })
        .collect()
}

/// Writes every output under a temporary sibling directory, then swaps it into place, so a
/// failure leaves an earlier comparison as it was.
fn write_dir(out: &Path, c: &mut Comparison) -> Result<()> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| parent.display().to_string())?;
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = fill(&tmp, c).and_then(|_| swap(&tmp, out));
    if res.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    res
}

fn fill(dir: &Path, c: &mut Comparison) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let summary = serde_json::to_vec_pretty(&c.summary)?;
    std::fs::write(dir.join("summary.json"), summary)?;
    for (name, df) in c.tables() {
        let path = dir.join(format!("{name}.parquet"));
        let f = std::fs::File::create(&path).with_context(|| path.display().to_string())?;
        let written = ParquetWriter::new(f)
            .with_compression(ParquetCompression::Zstd(None))
            .finish(&mut df.clone());
        anyhow::Context::with_context(written, || path.display().to_string())?;
    }
    Ok(())
}

fn swap(tmp: &Path, out: &Path) -> Result<()> {
    aorta_ingest::atomic::replace_dir(tmp, out).with_context(|| out.display().to_string())
}

fn print_summary(out: &mut impl Write, c: &Comparison, top: usize) -> Result<()> {
    let side = |s: &compare::Side| format!("`{}` (runs: {})", s.selector, s.runs.join(", "));
    writeln!(
        out,
        "reference {}\ncandidate {}",
        side(&c.reference),
        side(&c.candidate)
    )?;
    for level in ["steps", "categories", "collectives"] {
        let rows = &c.summary["levels"][level];
        writeln!(
            out,
            "\n{level:<34} {:>24} {:>24} {:>8}",
            "reference median [p10-p90]", "candidate median [p10-p90]", "ratio"
        )?;
        for r in rows.as_array().into_iter().flatten() {
            writeln!(
                out,
                "  {:<32} {:>24} {:>24} {:>8}",
                r["key"].as_str().unwrap_or(""),
                spread_text(&r["reference"]),
                spread_text(&r["candidate"]),
                num(&r["ratio"], 3)
            )?;
        }
    }
    print_ops(out, &c.summary["operators"], top)
}

fn print_ops(out: &mut impl Write, ops: &Value, top: usize) -> Result<()> {
    writeln!(
        out,
        "\noperators: {} matched, {} reference only, {} candidate only (GPU ms per step window; TFLOP/s and % of each side's own peak)",
        ops["matched"], ops["reference_only"], ops["candidate_only"]
    )?;
    for r in ops["top"].as_array().into_iter().flatten().take(top) {
        let dims = r["input_dims"].as_str().unwrap_or("");
        let rate = |side: &str| {
            let (t, p) = (&r[format!("{side}_tflops")], &r[format!("{side}_peak_pct")]);
            match (t.as_f64(), p.as_f64()) {
                (None, _) => "-".to_string(),
                (Some(_), None) => format!("{} TF", num(t, 1)),
                (Some(_), Some(_)) => format!("{} TF {}%", num(t, 1), num(p, 1)),
            }
        };
        writeln!(
            out,
            "  {:<40} {:>10} {:>10} {:>8}  {:>16} {:>16}  {}",
            format!("{} {}", r["op"].as_str().unwrap_or(""), truncate(dims, 30)),
            num(&r["reference_ms"], 3),
            num(&r["candidate_ms"], 3),
            num(&r["ratio"], 2),
            rate("reference"),
            rate("candidate"),
            r["status"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn spread_text(v: &Value) -> String {
    if v.is_null() {
        return "-".into();
    }
    format!(
        "{} [{}-{}]",
        num(&v["median"], 3),
        num(&v["p10"], 3),
        num(&v["p90"], 3)
    )
}
