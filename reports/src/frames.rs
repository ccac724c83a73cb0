//! Typed column access to polars frames, with errors that name the file the frame came from.

use std::path::Path;

use polars::prelude::*;

use crate::error::ReportError;

pub(crate) fn str_col(df: &DataFrame, name: &str, path: &Path) -> Result<Vec<String>, ReportError> {
    let c = df.column(name).and_then(|c| c.str().cloned());
    let c = c.map_err(ReportError::polars(path))?;
    Ok(c.iter().map(|v| v.unwrap_or("").to_string()).collect())
}

pub(crate) fn opt_str_col(
    df: &DataFrame,
    name: &str,
    path: &Path,
) -> Result<Vec<Option<String>>, ReportError> {
    let c = df.column(name).and_then(|c| c.str().cloned());
    let c = c.map_err(ReportError::polars(path))?;
    Ok(c.iter().map(|v| v.map(str::to_string)).collect())
}

pub(crate) fn i64_col(
    df: &DataFrame,
    name: &str,
    path: &Path,
) -> Result<Vec<Option<i64>>, ReportError> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Int64))
        .and_then(|c| c.i64().cloned());
    Ok(c.map_err(ReportError::polars(path))?.iter().collect())
}

pub(crate) fn f64_col(
    df: &DataFrame,
    name: &str,
    path: &Path,
) -> Result<Vec<Option<f64>>, ReportError> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Float64))
        .and_then(|c| c.f64().cloned());
    Ok(c.map_err(ReportError::polars(path))?.iter().collect())
}
