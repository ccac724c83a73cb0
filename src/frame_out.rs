//! Frames as JSON and CSV cells, the same way for every command that prints rows.

use std::io::Write;

use polars::prelude::*;
use serde_json::{Map, Value};

/// A frame as a list of JSON objects (column → value, nulls as null).
pub(crate) fn frame_json(df: &DataFrame) -> Value {
    let cols = df.columns();
    let rows = (0..df.height())
        .map(|i| {
            let obj: Map<String, Value> = cols
                .iter()
                .map(|c| {
                    (
                        c.name().to_string(),
                        any_json(c.get(i).unwrap_or(AnyValue::Null)),
                    )
                })
                .collect();
            Value::Object(obj)
        })
        .collect();
    Value::Array(rows)
}

fn any_json(v: AnyValue) -> Value {
    match v {
        AnyValue::Int64(x) => x.into(),
        AnyValue::Int32(x) => x.into(),
        AnyValue::UInt32(x) => x.into(),
        AnyValue::UInt64(x) => x.into(),
        AnyValue::Boolean(x) => x.into(),
        AnyValue::Float32(x) => {
            serde_json::Number::from_f64(x.into()).map_or(Value::Null, Value::Number)
        }
        AnyValue::Float64(x) => serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number),
        AnyValue::String(s) => s.into(),
        AnyValue::StringOwned(s) => s.as_str().into(),
        AnyValue::Null => Value::Null,
        other => other.to_string().into(),
    }
}

pub(crate) fn csv_cell(v: AnyValue) -> String {
    let s = match v {
        AnyValue::Null => return String::new(),
        AnyValue::String(s) => s.to_string(),
        AnyValue::StringOwned(s) => s.to_string(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// Frames with the same columns as one CSV: the header once, then every row.
pub(crate) fn write_csv(out: &mut impl Write, frames: &[&DataFrame]) -> std::io::Result<()> {
    let Some(first) = frames.first() else {
        return Ok(());
    };
    let names: Vec<String> = first
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    writeln!(out, "{}", names.join(","))?;
    for df in frames {
        for i in 0..df.height() {
            let cells: Vec<String> = df
                .columns()
                .iter()
                .map(|c| csv_cell(c.get(i).unwrap_or(AnyValue::Null)))
                .collect();
            writeln!(out, "{}", cells.join(","))?;
        }
    }
    Ok(())
}

/// Every column of `df` as aligned text: a header line, then one line per row (strings left,
/// everything else right; null as `-`; cells over `width` characters cut with `…`).
pub(crate) fn render_frame(df: &DataFrame, width: usize) -> String {
    let cols = df.columns();
    let cell = |c: &Column, i: usize| {
        let s = match c.get(i).unwrap_or(AnyValue::Null) {
            AnyValue::Null => "-".to_string(),
            AnyValue::String(s) => s.to_string(),
            AnyValue::StringOwned(s) => s.to_string(),
            AnyValue::Float64(x) => format!("{x:.3}"),
            other => other.to_string(),
        };
        if s.chars().count() > width {
            format!("{}…", s.chars().take(width - 1).collect::<String>())
        } else {
            s
        }
    };
    let mut lines: Vec<Vec<String>> = vec![cols.iter().map(|c| c.name().to_string()).collect()];
    lines.extend((0..df.height()).map(|i| cols.iter().map(|c| cell(c, i)).collect()));
    let widths: Vec<usize> = (0..cols.len())
        .map(|j| {
            lines
                .iter()
                .map(|l| l[j].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let left: Vec<bool> = cols
        .iter()
        .map(|c| c.dtype() == &DataType::String)
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(j, v)| match left[j] {
                true => format!("{v:<w$}", w = widths[j]),
                false => format!("{v:>w$}", w = widths[j]),
            })
            .collect();
        out.push_str("  ");
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
