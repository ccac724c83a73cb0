//! Per-iteration JSONL logs: the Python aorta `rank_*_metrics.jsonl` schema and any flat
//! per-step JSONL. Every numeric field becomes a `metrics` row (long form), so new fields in a
//! log need no change here.

use crate::file::RankSource;
use crate::format::Format;
use std::io::{BufRead, BufReader};

use serde_json::Value;

use crate::error::{IngestError, Result};
use crate::file::{FileJob, FileOutcome, RunInfo};
use crate::schema::METRICS;
use crate::sink::{Counts, Parts, SinkOut, FLUSH_ROWS};
use crate::step_set::StepSet;
use crate::writer::{Cols, TableWriter};

/// One metrics row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub step: Option<i64>,
    pub key: String,
    pub value: f64,
    pub line: i64,
}

/// Flattens the numbers of `v` under `prefix` (`a.b`, lists as `a[3].b`).
pub(crate) fn flatten(v: &Value, prefix: &str, out: &mut Vec<(String, f64)>, skipped: &mut u64) {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(x) => out.push((prefix.to_string(), x)),
            None => *skipped += 1,
        },
        Value::Bool(b) => out.push((prefix.to_string(), f64::from(u8::from(*b)))),
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(x, &key, out, skipped);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(x, &format!("{prefix}[{i}]"), out, skipped);
            }
        }
        Value::String(_) | Value::Null => *skipped += 1,
    }
}

fn step_of(v: &Value) -> Option<i64> {
    ["global_step", "step", "iteration"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_i64))
}

fn line_err(job: &FileJob, line: u64, msg: impl Into<String>) -> IngestError {
    IngestError::Line {
        path: job.path.display().to_string(),
        line,
        msg: msg.into(),
    }
}

fn metrics_batch(rows: &[Metric]) -> arrow_array::RecordBatch {
    let mut b = Cols::new(&METRICS);
    b.opt_i64("step", rows.iter().map(|r| r.step));
    b.str("key", rows.iter().map(|r| r.key.as_str()));
    b.f64("value", rows.iter().map(|r| r.value));
    b.i64("line", rows.iter().map(|r| r.line));
    b.finish()
}

pub(crate) fn ingest(job: &FileJob) -> Result<FileOutcome> {
    let (reader, _) = crate::source::open(&job.path, job.progress.clone())
        .map_err(|e| IngestError::io(&job.path, e))?;
    let mut lines = BufReader::with_capacity(1 << 20, reader).lines();
    let hash = job.hash()?;
    let mut info = RunInfo::new(Format::Jsonl, hash);
    let mut pending: Vec<(u64, Value)> = Vec::new();
    // The rank (and so the output path) comes from the first record.
    let first = next_record(job, &mut lines, 0)?;
    let from_record = first
        .as_ref()
        .and_then(|(_, v)| v.get("rank"))
        .and_then(Value::as_i64);
    let rank = info.resolve_rank(job, from_record);
    if from_record.is_some() {
        info.rank_source = RankSource::Record;
    }
    let parts = Parts {
        root: job.staging.clone(),
        run: job.label.clone(),
        rank,
        tag: info.tag(job),
    };
    pending.extend(first);
    let mut w = TableWriter::new(&METRICS, parts.path(&METRICS));
    let mut buf: Vec<Metric> = Vec::new();
    let mut steps = StepSet::default();
    let (mut skipped, mut n_lines) = (0u64, 0u64);
    loop {
        let rec = match pending.pop() {
            Some(r) => Some(r),
            None => next_record(job, &mut lines, n_lines)?,
        };
        let Some((line, v)) = rec else { break };
        n_lines = line;
        info.event_count += 1;
        if info.world_size.is_none() {
            info.world_size = ["world_size", "world"]
                .iter()
                .find_map(|k| v.get(*k)?.as_i64());
        }
        let step = step_of(&v).unwrap_or(line as i64 - 1);
        steps.insert(step);
        let mut flat = Vec::new();
        flatten(&v, "", &mut flat, &mut skipped);
        for (key, value) in flat {
            buf.push(Metric {
                step: Some(step),
                key,
                value,
                line: line as i64,
            });
        }
        if buf.len() >= FLUSH_ROWS {
            w.write(&metrics_batch(&buf))?;
            buf.clear();
        }
    }
    w.write(&metrics_batch(&buf))?;
    info.metric_count = w.rows;
    info.diag.add_n("jsonl_non_numeric", skipped, None, || {
        "string or null fields".into()
    });
    info.step_set = steps;
    let out = SinkOut {
        written: w.close()?.into_iter().collect(),
        diag: Default::default(),
        steps: Default::default(),
        counts: Counts::default(),
        vendor_hint: None,
    };
    info.finish(job, &parts, out, (&[], 0))
}

/// The next non-blank line as a JSON object, with its 1-based line number.
fn next_record(
    job: &FileJob,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    mut line: u64,
) -> Result<Option<(u64, Value)>> {
    for l in lines {
        line += 1;
        let l = l.map_err(|e| line_err(job, line, format!("reading failed: {e}")))?;
        if l.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(&l).map_err(|e| line_err(job, line, format!("not JSON: {e}")))?;
        if !v.is_object() {
            return Err(line_err(job, line, "a JSONL record must be a JSON object"));
        }
        return Ok(Some((line, v)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_nested_numbers() {
        let v: Value = serde_json::from_str(
            r#"{"loss": 0.5, "ok": true, "name": "x", "profile": {"ranges": [{"start_ms": 1.5, "stream": "aux"}], "overlap": {"overlap_ms": {"idle": 2}}}}"#,
        )
        .unwrap();
        let (mut out, mut skipped) = (vec![], 0);
        flatten(&v, "", &mut out, &mut skipped);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            out,
            vec![
                ("loss".to_string(), 0.5),
                ("ok".to_string(), 1.0),
                ("profile.overlap.overlap_ms.idle".to_string(), 2.0),
                ("profile.ranges[0].start_ms".to_string(), 1.5),
            ]
        );
        assert_eq!(skipped, 2);
    }
}
