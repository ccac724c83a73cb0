//! `aorta perf`: FLOPs, bytes and the roofline of every operator instance and the MFU of every
//! step, written as the `op_perf` and `perf_steps` tables and printed per run: a headline
//! (device, modelled share, MFU), then the top operators by GPU time, or the steps.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aorta_reports::fmt;
use aorta_transform::perf::{self, Peaks, PerfRun};
use aorta_transform::summary::Spread;
use polars::prelude::*;
use serde_json::{json, Value};

use crate::cli::{Format, PerfArgs, PerfBy};
use crate::frame_out::{frame_json, write_csv};
use crate::overlap_table::{render_within, Col, Show};
use crate::text_table::WIDTH;

pub(crate) fn run(args: PerfArgs) -> Result<ExitCode> {
    let root = args.dataset.as_path();
    let peaks = Peaks::load(args.device_peaks.as_deref())?;
    let access = crate::dataset_lock::for_write(root, "aorta perf")?;
    let runs = crate::overlap_cmd::select_runs(root, args.run.as_deref())?;
    let perf = perf::compute(root, &runs, &peaks)?;
    if access.writable() {
        perf::write(root, &perf)?;
    } else {
        crate::dataset_lock::not_saved(root, "op_perf and perf_steps tables");
    }
    let rows = perf
        .iter()
        .map(|p| view(p, args.by, args.top))
        .collect::<PolarsResult<Vec<_>>>()?;
    let mut out = std::io::stdout().lock();
    match if args.json { Format::Json } else { args.format } {
        Format::Table => {
            for (p, rows) in perf.iter().zip(&rows) {
                print_run(&mut out, p, rows, &args)?;
            }
        }
        Format::Csv => {
            write_csv(&mut out, &rows.iter().collect::<Vec<_>>()).context("writing CSV")?
        }
        Format::Json => {
            let doc = json!({
                "dataset": root.display().to_string(),
                "by": by_name(args.by),
                "device_peaks_version": peaks.version,
                "runs": perf.iter().zip(&rows).map(|(p, r)| run_json(p, r)).collect::<Vec<_>>(),
            });
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn by_name(by: PerfBy) -> &'static str {
    match by {
        PerfBy::Op => "op",
        PerfBy::Shape => "shape",
        PerfBy::Step => "step",
    }
}

fn view(p: &PerfRun, by: PerfBy, top: usize) -> PolarsResult<DataFrame> {
    match by {
        PerfBy::Op => p.group_frame(false, top),
        PerfBy::Shape => p.group_frame(true, top),
        PerfBy::Step => p.step_frame(),
    }
}

const GROUP_COLUMNS: &[Col] = &[
    ("instances", "instances", Show::Plain),
    ("gpu_ms", "gpu_ns", Show::Ms),
    ("share_%", "share_pct", Show::Pct),
    ("dtype", "dtype", Show::Plain),
    ("TFLOP/s", "tflops", Show::Tflops),
    ("peak_%", "peak_pct", Show::Pct),
    ("TB/s", "tbps", Show::Tbps),
    ("FLOP/B", "intensity", Show::Tflops),
    ("bound", "bound", Show::Plain),
    ("roof_%", "roof_pct", Show::Pct),
];

const STEP_COLUMNS: &[Col] = &[
    ("window_ms", "window_ns", Show::Ms),
    ("kernel_ms", "kernel_ns", Show::Ms),
    ("TFLOP", "model_flops", Show::Tflop),
    ("dtype", "dtype", Show::Plain),
    ("MFU_%", "mfu_pct", Show::Pct),
    ("GEMM_TFLOP/s", "gemm_tflops", Show::Tflops),
    ("unmodelled", "unmodelled_count", Show::Plain),
    ("unmodelled_ms", "unmodelled_ns", Show::Ms),
];

fn spread_text(s: &Option<Spread>, f: fn(f64) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!(
            "median {} (p10 {} - p90 {}, n={})",
            f(s.median),
            f(s.p10),
            f(s.p90),
            s.n
        ),
    }
}

fn device_line(p: &PerfRun) -> String {
    let parts: Vec<String> = p
        .devices
        .iter()
        .map(|(name, dev)| match dev {
            Some(d) => {
                let peaks: Vec<String> = ["bf16", "fp16", "fp8", "tf32", "fp32"]
                    .iter()
                    .filter_map(|k| d.tflops(k).map(|v| format!("{k} {v}")))
                    .collect();
                format!(
                    "{} = {} ({} TFLOP/s; {} TB/s)",
                    name,
                    d.name,
                    peaks.join(", "),
                    d.hbm_tbps
                )
            }
            None => format!("{name} (not in the peak table)"),
        })
        .collect();
    if parts.is_empty() {
        "no device name in the traces".into()
    } else {
        parts.join("; ")
    }
}

fn print_run(out: &mut impl Write, p: &PerfRun, rows: &DataFrame, args: &PerfArgs) -> Result<()> {
    let h = p.headline();
    let share = if h.kernel_ns > 0 {
        100.0 * h.modelled_ns as f64 / h.kernel_ns as f64
    } else {
        0.0
    };
    writeln!(out, "run {}: {}", p.run, device_line(p))?;
    writeln!(
        out,
        "  {} operator instances, {} ms of compute kernels, {} % of it modelled; model FLOPs {} TFLOP",
        h.instances,
        fmt::ms_ns(h.kernel_ns),
        fmt::pct(share),
        format_args!("{:.3}", h.model_flops as f64 * 1e-12),
    )?;
    writeln!(out, "  MFU % over steps: {}", spread_text(&h.mfu, fmt::pct))?;
    if h.over_roof.0 > 0 {
        writeln!(
            out,
            "  peak assumption wrong: {} instances ({} ms) ran above their roof; flagged, left out of MFU and every % of peak",
            h.over_roof.0,
            fmt::ms_ns(h.over_roof.1),
        )?;
    }
    writeln!(
        out,
        "  GEMM TFLOP/s while GEMMs run: {}",
        spread_text(&h.gemm_tflops, fmt::tflops)
    )?;
    for n in &p.notes {
        writeln!(out, "  note: {n}")?;
    }
    // The fewest characters a cut key keeps (`text_table`): a shape more than its dtypes.
    let (keys, cols, floors): (&[&str], &[Col], &[usize]) = match args.by {
        PerfBy::Op => (&["op"], GROUP_COLUMNS, &[40]),
        PerfBy::Shape => (
            &["op", "input_dims", "input_types"],
            GROUP_COLUMNS,
            &[20, 32, 12],
        ),
        PerfBy::Step => (&["rank", "level", "step"], STEP_COLUMNS, &[]),
    };
    match args.by {
        PerfBy::Step => writeln!(out, "by step (times in ms):")?,
        _ => writeln!(out, "top {} by GPU time (times in ms):", args.top)?,
    }
    // Shapes and operator names are cut to fit (`--format json` and `csv` keep them whole).
    let text = render_within(rows, None, keys, cols, Some((WIDTH, floors)))?;
    out.write_all(text.as_bytes())?;
    print_notes(out, rows, keys)?;
    writeln!(out)?;
    Ok(())
}

/// Each row's note (why it has no FLOPs or no % of peak), whole, under the table that
/// must fit the terminal: `notes:`, then one line per row that has one, named by its keys.
fn print_notes(out: &mut impl Write, rows: &DataFrame, keys: &[&str]) -> Result<()> {
    let Ok(notes) = rows.column("note").and_then(|c| c.str().cloned()) else {
        return Ok(());
    };
    let mut first = true;
    for i in 0..rows.height() {
        let Some(note) = notes.get(i) else { continue };
        if first {
            writeln!(out, "notes:")?;
            first = false;
        }
        let key: Vec<String> = keys
            .iter()
            .filter_map(|k| {
                let v = rows.column(k).ok()?.get(i).ok()?;
                match v {
                    AnyValue::Null => None,
                    AnyValue::String(s) => Some(s.to_string()),
                    AnyValue::StringOwned(s) => Some(s.to_string()),
                    v => Some(v.to_string()),
                }
            })
            .collect();
        writeln!(out, "  {}: {note}", key.join(" "))?;
    }
    Ok(())
}

fn spread_json(s: &Option<Spread>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({"n": s.n, "median": s.median, "p10": s.p10, "p90": s.p90}),
    }
}

fn run_json(p: &PerfRun, rows: &DataFrame) -> Value {
    let h = p.headline();
    let devices: Vec<Value> = p
        .devices
        .iter()
        .map(|(name, d)| {
            json!({
                "name": name,
                "entry": d.as_ref().map(|d| d.name.clone()),
                "hbm_tbps": d.as_ref().map(|d| d.hbm_tbps),
                "tflops": d.as_ref().map(|d| json!(d.tflops)),
            })
        })
        .collect();
    json!({
        "run": p.run,
        "devices": devices,
        "instances": h.instances,
        "kernel_ns": h.kernel_ns,
        "modelled_ns": h.modelled_ns,
        "model_flops": h.model_flops,
        "mfu_pct": spread_json(&h.mfu),
        "over_roof": {"instances": h.over_roof.0, "gpu_ns": h.over_roof.1},
        "gemm_tflops": spread_json(&h.gemm_tflops),
        "notes": p.notes,
        "rows": frame_json(rows),
    })
}
