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
