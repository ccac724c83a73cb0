//! The JSON reader's pre-passes for steps: two quick reads of the file, made only when a
//! roctx message names a step.
//!
//! Why two: rocprofiler-sdk's `generateJSON.cpp` writes a process's `buffer_records` in the
//! order `kernel_dispatch`, `hip_api`, `hsa_api`, `marker_api`, `rccl_api`, `memory_copy`, …,
//! so in one streaming read a dispatch comes before the call that launched it and before
//! the marker ranges that give that call its step. The first pass reads only the
//! `marker_api` records (the step spans); the second the other API records, turning each
//! launch into its step at once and keeping it as runs of correlation ids (`CorrRuns`), so
//! neither keeps anything per dispatch or per call. Every other array is skipped record by
//! record without being decoded. A file these passes cannot read is left to the main pass,
//! which reports its error where it always did.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use serde_json::Value;

use super::links::ApiLinks;
use super::records::{self, Rec, Strings};
use super::runs::CorrRuns;
use super::stream::Stream;
use crate::error::ParseErr;
use crate::step_span::{Span, StepMarker};
use crate::window::Window;

/// The step spans of one process object and the step of each of its launches.
#[derive(Debug, Default)]
pub(super) struct Steps {
    pub spans: Vec<Span>,
    pub launch_steps: CorrRuns,
}

/// The steps of every process object of the JSON file at `path`, by index; `None` when the
/// file cannot be read to its end.
pub(super) fn scan(path: &Path, marker: &StepMarker) -> Option<Vec<Steps>> {
    let mut links: Vec<ApiLinks> = Vec::new();
    walk(
        path,
        |bucket| bucket == "marker_api",
        |i, t, r| {
            if links.len() <= i {
                links.resize_with(i + 1, || ApiLinks::new(marker.clone()));
            }
            let (domain, name) = t.api_names(r);
            if let Some(c) = r.call(domain, name).filter(|_| super::is_marker(domain)) {
                links[i].note_span(&c);
            }
        },
    )
    .ok()?;
    let mut runs = vec![CorrRuns::default(); links.len()];
    if links.iter().any(|l| !l.spans().is_empty()) {
        walk(
            path,
            |bucket| bucket.ends_with("_api"),
            |i, t, r| {
                let Some(l) = links.get(i).filter(|l| !l.spans().is_empty()) else {
                    return;
                };
                // A launch as `ApiLinks::note` takes one: a timed call with a thread and a
                // correlation id, of any domain but RCCL's.
                let (domain, _) = t.names(r);
                if let (Some(_), Some(corr), Some(start), Some(_)) = (r.tid, r.corr, r.start, r.end)
                {
                    if !super::has_prefix(domain, "RCCL") {
                        runs[i].insert(corr, l.step_at(start));
                    }
                }
            },
        )
        .ok()?;
    }
    let steps = links.into_iter().zip(runs).map(|(l, launch_steps)| Steps {
        spans: l.spans().to_vec(),
        launch_steps,
    });
    Some(steps.collect())
}

/// Reads the process objects of `path`, calling `each` with the process index, its
/// `strings` and every record of the buffer arrays `wanted` names (read after `strings`);
/// other records are skipped.
fn walk(
    path: &Path,
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(usize, &Strings, &Rec),
) -> Result<(), ParseErr> {
    let win = Window::open(path, Arc::new(AtomicU64::new(0)), None)
        .map_err(|e| ParseErr::new(0, e.to_string()))?;
    let mut s = Stream::new(win);
    let mut n = 0;
    s.object("the document", |s, key| match key {
        "rocprofiler-sdk-tool" => s
            .array(key, |s| {
                n += 1;
                process(s, n - 1, &wanted, &mut each)
            })
            .map(|_| ()),
        _ => s.skip(key).map(|_| ()),
    })
}

fn process(
    s: &mut Stream,
    i: usize,
    wanted: &impl Fn(&str) -> bool,
    each: &mut impl FnMut(usize, &Strings, &Rec),
) -> Result<(), ParseErr> {
    let mut strings: Option<Strings> = None;
    s.object("a process object", |s, key| match key {
        "strings" => {
            let raw = s.raw("strings")?;
            let v: Value = serde_json::from_slice(&raw)
                .map_err(|e| ParseErr::new(s.offset(), format!("strings: {e}")))?;
            strings = Some(Strings::parse(&v));
            Ok(())
        }
        "buffer_records" => s.object(key, |s, bucket| match &strings {
            Some(t) if wanted(bucket) => s
                .array(bucket, |s| {
                    let r = s.read("a record", records::parse)?;
                    each(i, t, &r);
                    Ok(())
                })
                .map(|_| ()),
            _ => skip_records(s, bucket),
        }),
        _ => s.skip(key).map(|_| ()),
    })
}

/// Skips an array of records one record at a time, without decoding them.
pub(super) fn skip_records(s: &mut Stream, what: &str) -> Result<(), ParseErr> {
    if s.read(what, |c| c.peek())? != b'[' {
        return s.skip(what).map(|_| ());
    }
    s.array(what, |s| s.read("a record", |c| c.skip_value().map(|_| ())))
        .map(|_| ())
}
