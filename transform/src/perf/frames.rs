//! Rows to polars frames, in the column order `aorta_ingest::schema` declares (so the table
//! written is the table documented), plus the `run` and `rank` partition columns.

use aorta_ingest::schema::{Table, OP_PERF, PERF_STEPS};
use polars::prelude::*;

use super::rows::{OpRow, StepRow};
use crate::rows::str_column;

fn ordered(table: &Table, mut cols: Vec<Column>) -> PolarsResult<DataFrame> {
    let names = ["run", "rank"]
        .into_iter()
        .chain(table.columns.iter().map(|c| c.name));
    let mut out = Vec::with_capacity(cols.len());
    for n in names {
        let i = cols
            .iter()
            .position(|c| c.name().as_str() == n)
            .ok_or_else(|| polars_err!(ColumnNotFound: "{n} of {}", table.name))?;
        out.push(cols.swap_remove(i));
    }
    DataFrame::new_infer_height(out)
}

fn col<T, I>(name: &str, v: I) -> Column
where
    I: IntoIterator<Item = T>,
    Series: NamedFrom<Vec<T>, [T]>,
{
    Column::new(name.into(), v.into_iter().collect::<Vec<T>>())
}

fn opt_str<'a>(name: &str, v: impl Iterator<Item = Option<&'a str>>) -> Column {
    Column::new(name.into(), v.collect::<Vec<Option<&str>>>())
}

/// The `op_perf` frame.
pub(super) fn ops(rows: &[OpRow]) -> PolarsResult<DataFrame> {
    let r = rows;
    ordered(
        &OP_PERF,
        vec![
            str_column("run", r.iter().map(|x| x.run.as_str())),
            col("rank", r.iter().map(|x| x.rank)),
            col("step", r.iter().map(|x| x.step)),
            str_column("op", r.iter().map(|x| x.op.as_str())),
            opt_str("input_dims", r.iter().map(|x| x.input_dims.as_deref())),
            opt_str("input_types", r.iter().map(|x| x.input_types.as_deref())),
            str_column("kernel", r.iter().map(|x| x.kernel.as_str())),
            col("kernel_count", r.iter().map(|x| x.kernel_count)),
            col("start_ns", r.iter().map(|x| x.start_ns)),
            col("end_ns", r.iter().map(|x| x.end_ns)),
            col("gpu_ns", r.iter().map(|x| x.gpu_ns)),
            opt_str("model", r.iter().map(|x| x.model)),
            opt_str("dtype", r.iter().map(|x| x.dtype)),
            col("flops", r.iter().map(|x| x.flops)),
            col("bytes", r.iter().map(|x| x.bytes)),
            col("tflops", r.iter().map(|x| x.roof.tflops)),
            col("tbps", r.iter().map(|x| x.roof.tbps)),
            col("intensity", r.iter().map(|x| x.roof.intensity)),
            opt_str("bound", r.iter().map(|x| x.roof.bound)),
            col("roof_pct", r.iter().map(|x| x.roof.roof_pct)),
            col("peak_pct", r.iter().map(|x| x.roof.peak_pct)),
            opt_str("device", r.iter().map(|x| x.device.as_deref())),
            col("peak_tflops", r.iter().map(|x| x.peak_tflops)),
            col("peak_tbps", r.iter().map(|x| x.peak_tbps)),
            opt_str("source", r.iter().map(|x| x.source)),
            opt_str("note", r.iter().map(|x| x.note.as_deref())),
        ],
    )
}

/// The `perf_steps` frame.
pub(super) fn steps(rows: &[StepRow]) -> PolarsResult<DataFrame> {
    let r = rows;
    ordered(
        &PERF_STEPS,
        vec![
            str_column("run", r.iter().map(|x| x.run.as_str())),
            col("rank", r.iter().map(|x| x.rank)),
            str_column("level", r.iter().map(|x| x.level)),
            col("step", r.iter().map(|x| x.step)),
            col("window_ns", r.iter().map(|x| x.window_ns)),
            col("kernel_ns", r.iter().map(|x| x.kernel_ns)),
            col("instances", r.iter().map(|x| x.instances)),
            col("model_flops", r.iter().map(|x| x.model_flops)),
            col("gemm_flops", r.iter().map(|x| x.gemm_flops)),
            col("attention_flops", r.iter().map(|x| x.attention_flops)),
            col("conv_flops", r.iter().map(|x| x.conv_flops)),
            opt_str("dtype", r.iter().map(|x| x.dtype)),
            opt_str("device", r.iter().map(|x| x.device.as_deref())),
            col("peak_tflops", r.iter().map(|x| x.peak_tflops)),
            col("mfu_pct", r.iter().map(|x| x.mfu_pct)),
            col("gemm_busy_ns", r.iter().map(|x| x.gemm_busy_ns)),
            col("gemm_tflops", r.iter().map(|x| x.gemm_tflops)),
            col("unmodelled_count", r.iter().map(|x| x.unmodelled_count)),
            col("unmodelled_ns", r.iter().map(|x| x.unmodelled_ns)),
            opt_str("note", r.iter().map(|x| x.note.as_deref())),
        ],
    )
}
